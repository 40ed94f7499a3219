/*
 * routes_platform.c — GET /rest/platform, /rest/pipelines, /rest/pipelines/{id} and its
 * Boutiques descriptor; PUT /rest/plateform, VIP's client's key check. A pipeline is a job
 * kind (compute/registry.c): one File parameter per input of the kind, and a String `params`
 * holding the job's params as JSON.
 */
#include <string.h>

#include "common/gj_kind.h"
#include "service/carmin/carmin.h"
#include "service/carmin/carmin_routes.h"
#include "service/jobs/queue.h"

#define PARAMS_NAME "params"

static json_t *error_codes(void)
{
    static const struct { int code; const char *msg; } codes[] = {
        { CARMIN_BAD_REQUEST, "the request is not valid" },
        { CARMIN_BAD_KEY, "the API key is missing or not valid" },
        { CARMIN_NOT_FOUND, "no such path, pipeline or execution" },
        { CARMIN_CONFLICT, "the path exists already, or its parent does not" },
        { CARMIN_TOO_LARGE, "the body, or an archive's files, over the server's size limit" },
        { CARMIN_RATE_LIMITED, "request rate limit of this key exceeded" },
        { CARMIN_UNAVAILABLE, "the database is unavailable, or the server busy or stopping; try again" },
        { CARMIN_NO_SPACE, "an archive's files would leave less disk free than the server's reserve" },
        { CARMIN_OVER_QUOTA, "the tenant's storage quota would be passed; nothing was stored" },
    };
    json_t *a = json_array();
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        json_array_append_new(a, json_pack("{s:i, s:s}", "errorCode", codes[i].code, "errorMessage", codes[i].msg));
    return a;
}

/* GET /rest/platform (no key needed: the spec's security is empty here) */
static void platform(struct gj_req *r)
{
    json_t *p = json_pack("{s:s, s:s, s:[s,s], s:s, s:o, s:I, s:b, s:[s], s:[], s:s, s:I, s:I}", "platformName",
                          "gpujobd", "platformDescription",
                          "GPU compute jobs (CT reconstruction, optimization, inference)", "supportedModules",
                          "Processing", "Data", "supportedAPIVersion", "0.3.1", "APIErrorCodesAndMessages",
                          error_codes(), "defaultLimitListExecutions", (json_int_t)500, "studiesSupport", 0,
                          "supportedPipelineProperties", "kind", "unsupportedMethods", "defaultStudy", "",
                          "minAuthorizedExecutionTimeout", (json_int_t)0, "maxAuthorizedExecutionTimeout",
                          (json_int_t)GJ_JOB_TIMEOUT_MAX);
    if (p && r->srv->cfg.job_timeout_seconds > 0)   /* absent: no timeout, as the spec says of 0 */
        json_object_set_new(p, "defaultExecutionTimeout", json_integer(r->srv->cfg.job_timeout_seconds));
    gj_respond_json(r, 200, p);
}

/* PUT /rest/plateform (so spelled): how VIP's Python client checks a key (setApiKey). It
 * reads a CARMIN error body as "refused" (40101: a wrong key, carmin_gate's answer) and any
 * other answer as "good": the key has passed the gate, so nothing is left to say. */
static void key_check(struct gj_req *r)
{
    gj_respond_empty(r, 204);
}

static json_t *parameter(const char *name, const char *type, int optional, const char *description)
{
    return json_pack("{s:s, s:s, s:b, s:b, s:s}", "name", name, "type", type, "isOptional", optional,
                     "isReturnedValue", 0, "description", description ? description : "");
}

static json_t *pipeline_json(const struct gj_kind *k)
{
    json_t *params = json_array();
    for (size_t i = 0; i < k->n_inputs; i++)
        json_array_append_new(params, parameter(k->inputs[i].name, "File", !k->inputs[i].required,
                                                k->inputs[i].description));
    json_array_append_new(params, parameter(PARAMS_NAME, "String", 1,
                                            "the job's params as a JSON object (see the Boutiques descriptor)"));
    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:o, s:{s:s}}", "identifier", k->name, "name", k->name, "version",
                     "1", "description", k->summary ? k->summary : "", "canExecute", 1, "parameters", params,
                     "properties", "kind", k->name);
}

/* GET /rest/pipelines[?property=kind&propertyValue=NAME] */
static void pipelines(struct gj_req *r)
{
    const char *prop = gj_req_query(r, "property"), *value = gj_req_query(r, "propertyValue");
    if ((prop && strcmp(prop, "kind") != 0) || (value && !prop)) {
        carmin_error(r, CARMIN_BAD_REQUEST, "the only pipeline property is kind, with a propertyValue");
        return;
    }
    json_t *a = json_array();
    for (size_t i = 0; i < gj_kind_count(); i++) {
        const struct gj_kind *k = gj_kind_at(i);
        if (!value || strcmp(value, k->name) == 0)
            json_array_append_new(a, pipeline_json(k));
    }
    gj_respond_json(r, 200, a);
}

static const struct gj_kind *find_pipeline(struct gj_req *r)
{
    const struct gj_kind *k = gj_kind_find(r->params[0]);
    if (!k)
        carmin_error(r, CARMIN_NOT_FOUND, "no pipeline %s", r->params[0]);
    return k;
}

static void pipeline_get(struct gj_req *r)
{
    const struct gj_kind *k = find_pipeline(r);
    if (k)
        gj_respond_json(r, 200, pipeline_json(k));
}

/* GET /rest/pipelines/{id}/boutiquesdescriptor: Boutiques 0.5, the params' schema in a
 * custom field (a Boutiques input cannot say "a JSON object of this schema"). */
static void boutiques(struct gj_req *r)
{
    const struct gj_kind *k = find_pipeline(r);
    if (!k)
        return;
    json_t *inputs = json_array(), *schema = k->params_schema ? json_loads(k->params_schema, 0, NULL) : NULL;
    for (size_t i = 0; i < k->n_inputs; i++)
        json_array_append_new(inputs, json_pack("{s:s, s:s, s:s, s:b, s:s}", "id", k->inputs[i].name, "name",
                                                k->inputs[i].name, "type", "File", "optional", !k->inputs[i].required,
                                                "value-key", "[INPUT]"));
    json_array_append_new(inputs, json_pack("{s:s, s:s, s:s, s:b, s:s}", "id", PARAMS_NAME, "name", PARAMS_NAME,
                                            "type", "String", "optional", 1, "value-key", "[PARAMS]"));
    gj_respond_json(r, 200,
                    json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:[{s:s, s:s, s:s}], s:{s:o}}", "name", k->name,
                              "description", k->summary ? k->summary : "", "tool-version", "1", "schema-version",
                              "0.5", "command-line", "gpujobd run [PARAMS] [INPUT]", "inputs", inputs,
                              "output-files", "id", "results", "name", "results", "path-template", "results/*",
                              "custom", "gpujobd-params-schema", schema ? schema : json_object()));
}

static const struct gj_route platform_routes[] = {
    { "GET", "/rest/platform", GJ_AUTH_NONE, GJ_BODY_NONE, NULL, NULL, platform, NULL },
    { "PUT", "/rest/plateform", GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, key_check, NULL },
    { "GET", "/rest/pipelines", GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, pipelines, NULL },
    { "GET", "/rest/pipelines/{pipelineIdentifier}", GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, pipeline_get,
      NULL },
    { "GET", "/rest/pipelines/{pipelineIdentifier}/boutiquesdescriptor", GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin,
      NULL, boutiques, NULL },
};
const struct gj_route_table gj_routes_carmin_platform = { platform_routes,
                                                          sizeof platform_routes / sizeof platform_routes[0] };
