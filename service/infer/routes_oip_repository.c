/*
 * routes_oip_repository.c — Triton's model configuration and model repository extensions
 * on /v2, over the repository every replica shares (model_store.h, model_sync.h):
 *
 *   GET  /v2/models/{name}[/versions/{version}]/config   the config in Triton's JSON shape
 *   POST /v2/repository/index                            [{name, version, state, reason}]
 *                                                        of this replica; {"ready": true}
 *                                                        lists the ready ones only
 *   POST /v2/repository/models/{name}/load               admin: every version its
 *                                                        version_policy serves, loaded and
 *                                                        kept loaded (as POST
 *                                                        /v1/models/{name}/load);
 *                                                        parameters.config: a ModelConfig
 *                                                        (JSON text) that replaces the model's
 *                                                        config, as Triton's override;
 *                                                        "file:<version>/<name>" parameters:
 *                                                        the files of versions to store first
 *                                                        (oip_load_files.c)
 *   POST /v2/repository/models/{name}/unload             admin: every loaded version
 *
 * As Triton, load and unload are refused (503) in the model control modes none and poll;
 * on-use (this server's default) and explicit allow them. Load and unload answer 200 with
 * an empty body; errors are {"error": "..."} with Triton's wording where it has one.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/http/http_server.h"
#include "service/infer/infer.h"
#include "service/infer/model_store.h"
#include "service/infer/model_sync.h"
#include "service/infer/oip.h"
#include "service/base/log.h"

#define COMPONENT "oip"
#define APPLY_WAIT_MS 60000   /* as routes_models.c: how long to wait for this replica to apply a change */

/* ---- GET .../config ---------------------------------------------------------------- */

static void model_config(struct gj_req *r)
{
    int64_t version;
    gj_model_repo *repo = oip_requested(r, &version);
    if (!repo)
        return;
    struct gj_model_config cfg;
    struct gj_error err = { 0 };
    if (gj_model_repo_config(repo, r->params[0], version, &cfg, &err) != 0) {
        gj_model_config_free(&cfg);
        oip_lookup_failed(r, version, &err);
        return;
    }
    json_t *o = gj_model_config_to_triton_json(&cfg);
    gj_model_config_free(&cfg);
    if (!o)
        oip_error(r, 500, "out of memory");
    else
        gj_respond_json(r, 200, o);
}

/* ---- POST /v2/repository/index ----------------------------------------------------- */

/* Triton's state of a version here, and its reason ("" none); on_use: models load on use
 * (--model-control-mode on-use). */
static const char *index_state(const struct gj_model_version_info *vi, int on_use, const char **reason)
{
    switch (vi->state) {
    case GJ_MODEL_READY:
        *reason = "";
        return "READY";
    case GJ_MODEL_FAILED:
        *reason = vi->reason;
        return "UNAVAILABLE";
    case GJ_MODEL_UNLOADED:
        *reason = "unloaded";
        return "UNAVAILABLE";
    default:
        *reason = on_use ? "not loaded yet: it loads on its first inference request or an explicit load"
                         : "not loaded";
        return "UNAVAILABLE";
    }
}

/* The index entries of one model (appended to a). */
static void index_model(gj_model_repo *repo, const char *name, int ready_only, int on_use, json_t *a,
                        struct gj_model_version_info *vi)
{
    size_t n = 0;
    struct gj_error err = { 0 };
    if (gj_model_repo_versions(repo, name, vi, GJ_MODEL_MAX_VERSIONS, &n, &err) != 0)
        return;   /* taken away meanwhile */
    for (size_t i = 0; i < n && i < GJ_MODEL_MAX_VERSIONS; i++) {
        const char *reason;
        const char *state = index_state(&vi[i], on_use, &reason);
        if (ready_only && vi[i].state != GJ_MODEL_READY)
            continue;
        char v[24];
        snprintf(v, sizeof v, "%" PRId64, vi[i].version);
        json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s}", "name", name, "version", v, "state", state,
                                           "reason", reason));
    }
}

json_t *oip_repository_index(int ready_only, struct gj_error *err)
{
    gj_model_repo *repo = gj_infer_repo();
    if (!repo) {
        gj_error_set(err, "", "the model repository is not available");
        err->status = 503;
        return NULL;
    }
    struct gj_model_version_info *vi = calloc(GJ_MODEL_MAX_VERSIONS, sizeof *vi);
    json_t *a = json_array();
    if (!vi || !a) {
        free(vi);
        json_decref(a);
        gj_error_set(err, "", "out of memory");
        err->status = 500;
        return NULL;
    }
    int on_use = strcmp(gj_infer_model_control(), "on-use") == 0;
    size_t n = gj_model_repo_count(repo);
    for (size_t i = 0; i < n; i++) {
        char name[GJ_MODEL_NAME_MAX];
        if (gj_model_repo_name(repo, i, name, sizeof name) == 0)
            index_model(repo, name, ready_only, on_use, a, vi);
    }
    free(vi);
    return a;
}

static void repository_index(struct gj_req *r)
{
    json_t *ready = r->json ? json_object_get(r->json, "ready") : NULL;
    if (r->json && !json_is_object(r->json)) {
        oip_error(r, 400, "the repository index request is a JSON object: {\"ready\": true|false}");
        return;
    }
    if (ready && !json_is_boolean(ready)) {
        oip_error(r, 400, "'ready' is a boolean");
        return;
    }
    struct gj_error err = { 0 };
    json_t *a = oip_repository_index(json_is_true(ready), &err);
    if (a)
        gj_respond_json(r, 200, a);
    else
        oip_error(r, err.status, "%s", err.message);
}

/* ---- load and unload ----------------------------------------------------------------- */

/* Triton refuses explicit load and unload unless its model control mode is explicit
 * (this server's on-use allows them too). 1 when refused (err set). */
static int control_refused(struct gj_error *err)
{
    const char *mode = gj_infer_model_control();
    if (strcmp(mode, "none") != 0 && strcmp(mode, "poll") != 0)
        return 0;
    gj_error_set(err, "", "explicit model load / unload is not allowed if polling is enabled");
    err->status = 503;
    return 1;
}

/* The request's parameters object (NULL: none); answers 400 when the body is not a JSON
 * object with an object "parameters". */
static int load_parameters(struct gj_req *r, json_t **params)
{
    *params = NULL;
    if (r->json && !json_is_object(r->json)) {
        oip_error(r, 400, "the request body is a JSON object: {\"parameters\": {...}}");
        return -1;
    }
    json_t *p = r->json ? json_object_get(r->json, "parameters") : NULL;
    if (p && !json_is_object(p)) {
        oip_error(r, 400, "'parameters' is a JSON object");
        return -1;
    }
    *params = p;
    return 0;
}

/* An error of a load or unload, as Triton words them: "failed to load 'm', ...". An
 * unknown model is 400, as Triton's (the repository has nothing to load). */
static void control_failed(const char *name, const char *what, struct gj_error *err)
{
    char detail[sizeof err->message];
    snprintf(detail, sizeof detail, "%s", err->message);
    if (err->status == 404) {
        gj_error_set(err, "", "failed to %s '%s', failed to poll from model repository: no such model", what, name);
        err->status = 400;
    } else {
        gj_error_set(err, "", "failed to %s '%s', %s", what, name, detail);
        err->status = err->status ? err->status : 500;
    }
}

/* The connection of a load or unload of the model name; NULL with err (404: not a model
 * name, 503: no connection). */
static PGconn *control_conn(PGconn *conn, const char *name, struct gj_error *err)
{
    if (!gj_model_name_ok(name)) {
        err->status = 404;
        return NULL;
    }
    if (!conn) {
        gj_error_set(err, "", "the database is not available; retry shortly");
        err->status = 503;
    }
    return conn;
}

/* Every version of the model, in a fresh array (free it); NULL with err 404. */
static struct gj_model_version_info *model_versions(const char *name, size_t *n, struct gj_error *err)
{
    gj_model_repo *repo = gj_infer_repo();
    struct gj_model_version_info *vi = calloc(GJ_MODEL_MAX_VERSIONS, sizeof *vi);
    if (!vi || !repo || gj_model_repo_versions(repo, name, vi, GJ_MODEL_MAX_VERSIONS, n, err) != 0) {
        free(vi);
        err->status = repo ? 404 : 503;
        return NULL;
    }
    if (*n > GJ_MODEL_MAX_VERSIONS)
        *n = GJ_MODEL_MAX_VERSIONS;
    return vi;
}

typedef int (*version_action)(PGconn *conn, const char *name, int64_t version, int64_t *v_out,
                              struct gj_error *err);

/* act (gj_infer_model_load or _unload) on every version of the model; a version it
 * answers 409 for (outside the version_policy; unloaded already) is skipped. 0, or -1
 * with err. */
static int every_version(PGconn *conn, const char *name, version_action act, struct gj_error *err)
{
    size_t n = 0;
    if (gj_model_sync_now(APPLY_WAIT_MS) != 0)   /* versions just stored or changed elsewhere */
        gj_log_warn(COMPONENT, "the model store's last change is not applied here yet");
    struct gj_model_version_info *vi = model_versions(name, &n, err);
    if (!vi)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        int64_t v;
        struct gj_error e = { 0 };
        if (act(conn, name, vi[i].version, &v, &e) != 0 && e.status != 409) {
            *err = e;
            rc = -1;
        }
    }
    free(vi);
    return rc;
}

/* Parses a config override (Triton's JSON ModelConfig, as text) for model name: its text
 * normalised, or NULL with err 400. */
static char *override_text(const char *name, json_t *config, struct gj_error *err)
{
    if (!json_is_string(config)) {
        gj_error_set(err, "config", "'config' is a string: the model configuration as JSON text");
        err->status = 400;
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_loads(json_string_value(config), JSON_REJECT_DUPLICATES, &jerr);
    struct gj_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    char *text = NULL;
    if (!root) {
        gj_error_set(err, "config", "the config is not valid JSON: %s", jerr.text);
    } else if (gj_model_config_parse(root, name, &cfg, err) == 0) {
        text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    gj_model_config_free(&cfg);
    json_decref(root);
    if (!text)
        err->status = 400;
    return text;
}

/* 1 when a version of the model is loaded here. */
static int any_ready(const char *name)
{
    size_t n = 0;
    struct gj_error err = { 0 };
    struct gj_model_version_info *vi = model_versions(name, &n, &err);
    int ready = 0;
    for (size_t i = 0; vi && i < n; i++)
        ready |= vi[i].state == GJ_MODEL_READY;
    free(vi);
    return ready;
}

/* Loads with the config override: the model's config replaced in the store, then loaded.
 * When that load fails the former config is put back, and the model loaded with it again
 * if it was loaded before (as Triton keeps serving a model whose reload failed). 0, or -1
 * with err. */
static int load_with_config(PGconn *conn, const char *name, const char *config, struct gj_error *err)
{
    char *before = NULL;
    int was_ready = any_ready(name);
    int found = gj_model_store_model_config(conn, name, &before);
    if (found <= 0 || gj_model_store_set_model_config(conn, name, config) != 0) {
        free(before);
        err->status = found == 0 ? 404 : 503;
        snprintf(err->message, sizeof err->message, "the database is not available; retry shortly");
        return -1;
    }
    int rc = every_version(conn, name, gj_infer_model_load, err);
    if (rc == 0) {
        gj_log_info(COMPONENT, "model %s loaded with a config override", name);
    } else if (gj_model_store_set_model_config(conn, name, before) != 0) {
        gj_log_error(COMPONENT, "model %s: the config before a failed load could not be put back", name);
    } else if (was_ready) {
        struct gj_error again = { 0 };
        if (every_version(conn, name, gj_infer_model_load, &again) != 0)
            gj_log_warn(COMPONENT, "model %s: loading its former config again failed: %s", name, again.message);
    }
    free(before);
    return rc;
}

int oip_repository_load(PGconn *conn, const char *name, json_t *params, const char *request_id,
                        struct gj_error *err)
{
    if (control_refused(err))
        return -1;
    const char *key;
    json_t *value, *config = json_object_get(params, "config");
    int files = 0;
    json_object_foreach(params, key, value)
        files |= strncmp(key, "file:", 5) == 0;
    if (files && !config) {
        gj_error_set(err, "", "failed to load '%s', a load with model files (file: parameters) needs the model's "
                     "configuration in parameters.config", name);
        err->status = 400;
        return -1;
    }
    char *text = NULL;
    conn = control_conn(conn, name, err);
    if (conn && config && !(text = override_text(name, config, err)))
        conn = NULL;
    if (conn && files && oip_store_load_files(conn, name, text, params, request_id, err) != 0)
        conn = NULL;
    int rc = !conn ? -1
             : text ? load_with_config(conn, name, text, err)
                    : every_version(conn, name, gj_infer_model_load, err);
    free(text);
    if (rc != 0)
        control_failed(name, "load", err);
    return rc;
}

int oip_repository_unload(PGconn *conn, const char *name, json_t *params, struct gj_error *err)
{
    if (control_refused(err))
        return -1;
    json_t *dependents = json_object_get(params, "unload_dependents");
    if (dependents && !json_is_boolean(dependents)) {
        gj_error_set(err, "", "'unload_dependents' is a boolean");
        err->status = 400;
        return -1;
    }
    /* unload_dependents: no model here has dependents (no ensembles), so either value
     * unloads the model alone */
    conn = control_conn(conn, name, err);
    if (conn && every_version(conn, name, gj_infer_model_unload, err) == 0)
        return 0;
    control_failed(name, "unload", err);
    return -1;
}

static void repository_load(struct gj_req *r)
{
    json_t *params;
    struct gj_error err = { 0 };
    if (load_parameters(r, &params) != 0)
        return;
    PGconn *conn = gj_model_name_ok(r->params[0]) ? gj_req_db(r) : NULL;
    if (oip_repository_load(conn, r->params[0], params, r->request_id, &err) == 0)
        gj_respond_empty(r, 200);
    else
        oip_error(r, err.status, "%s", err.message);
}

static void repository_unload(struct gj_req *r)
{
    json_t *params;
    struct gj_error err = { 0 };
    if (load_parameters(r, &params) != 0)
        return;
    PGconn *conn = gj_model_name_ok(r->params[0]) ? gj_req_db(r) : NULL;
    if (oip_repository_unload(conn, r->params[0], params, &err) == 0)
        gj_respond_empty(r, 200);
    else
        oip_error(r, err.status, "%s", err.message);
}

/* ---- routes ------------------------------------------------------------------------------ */

static const struct gj_route repository_routes[] = {
    { "GET", "/v2/models/{name}/config", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, model_config, NULL },
    { "GET", "/v2/models/{name}/versions/{version}/config", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, model_config,
      NULL },
    { "POST", "/v2/repository/index", GJ_AUTH_USER, GJ_BODY_JSON, NULL, NULL, repository_index, NULL },
    { "POST", "/v2/repository/models/{name}/load", GJ_AUTH_ADMIN, GJ_BODY_JSON, NULL, NULL, repository_load,
      NULL },
    { "POST", "/v2/repository/models/{name}/unload", GJ_AUTH_ADMIN, GJ_BODY_JSON, NULL, NULL, repository_unload,
      NULL },
};
const struct gj_route_table gj_infer_routes_oip_repository = {
    repository_routes, sizeof repository_routes / sizeof repository_routes[0]
};
