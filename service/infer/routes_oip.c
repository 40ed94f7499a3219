/*
 * routes_oip.c — the Open Inference Protocol v2 (KServe v2, Triton's REST dialect): health,
 * server and model metadata, readiness, and infer with JSON tensors and Triton's binary
 * tensor extension, through the dynamic batcher (compute/infer/serving/batcher.h). Models
 * come from the module's repository (infer.h).
 *
 * Authentication: the two /v2/health routes answer without a key (probes); every other
 * route needs an API key (Authorization: Bearer, as /v1). Errors are {"error": "..."}
 * (401/403 from the shared authentication stay application/problem+json).
 *
 *   GET  /v2/health/live, /v2/health/ready                      no key
 *   GET  /v2                                                     server metadata
 *   GET  /v2/models/{name}[/versions/{version}]                  model metadata
 *   GET  /v2/models/{name}[/versions/{version}]/ready            200 ready, 503 not
 *                                                                (loads and places it; the
 *                                                                body says on which devices)
 *   POST /v2/models/{name}[/versions/{version}]/infer            through the batcher
 *
 * An infer body is JSON, or (Triton's binary tensor extension) JSON of the length given
 * by the Inference-Header-Content-Length header followed by the raw little-endian
 * tensors of the inputs that declare parameters.binary_data_size, in input order.
 * Outputs are returned as binary when the request asks (per output
 * parameters.binary_data, or request parameters.binary_data_output for the outputs it does
 * not list), again with Inference-Header-Content-Length giving the JSON's length. Bodies may
 * be gzip or deflate both ways (routes_oip_infer.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gj_config.h"
#include "infer/serving/batcher.h"
#include "infer/serving/model_repo.h"
#include "service/http/http_server.h"
#include "service/infer/infer.h"
#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/http/upload_spool.h"
#include "infer/onnx/onnx_elem.h"
#include "service/infer/oip.h"
#include "service/infer/oip_model_io.h"

#define COMPONENT "oip"

/* ---- responses ------------------------------------------------------------------------- */

void oip_error(struct gj_req *r, int status, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct MHD_Response *resp = gj_respond_json(r, status, json_pack("{s:s}", "error", msg));
    if (resp && (status == 429 || status == 503))
        MHD_add_response_header(resp, "Retry-After", "1");
}

int oip_refuse(struct gj_error *err, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    err->status = status;
    return -1;
}

/* The server's own errors under /v2 (gj_http_error_body: no route, no key, a limit, the
 * database away) as {"error": "..."} too, the one shape Triton's clients decode. */
char *oip_error_body(int status, const char *detail)
{
    (void)status;
    json_t *o = json_pack("{s:s}", "error", detail);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

/* ---- model lookup -------------------------------------------------------------------- */

int64_t oip_parse_version(const char *s)
{
    if (!s || !*s)
        return 0;
    if (strlen(s) > 18)
        return -1;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v > 0 ? v : -1;
}

/* Parses the {version} path parameter; 0 when the route has none. -1: bad (an empty
 * segment too: a path's version is never the default). */
static int64_t path_version(struct gj_req *r)
{
    if (r->n_params < 2)
        return 0;
    return r->params[1][0] ? oip_parse_version(r->params[1]) : -1;
}

/* The repository and the version the path asks for (0: the default); on failure answers
 * the request and returns NULL. */
gj_model_repo *oip_requested(struct gj_req *r, int64_t *version)
{
    *version = path_version(r);
    if (*version < 0) {
        oip_error(r, 400, "version '%s' is not valid: versions are positive integers", r->params[1]);
        return NULL;
    }
    gj_model_repo *repo = gj_infer_repo();
    if (!repo) {
        oip_error(r, 503, "the model repository is not available");
        return NULL;
    }
    if (!gj_model_name_ok(r->params[0])) {
        oip_error(r, 404, "unknown model '%s'", r->params[0]);
        return NULL;
    }
    return repo;
}

/* Answers a failed lookup: 404 unknown, 400 not ready (unloaded), 503 a load that failed. */
void oip_lookup_failed(struct gj_req *r, int64_t version, const struct gj_error *err)
{
    if (err->status == 404 || err->status == 400)
        oip_error(r, err->status, "%s", err->message);
    else if (version > 0)
        oip_error(r, 503, "model '%s' version %" PRId64 " is not ready: %s", r->params[0], version,
                  err->message);
    else
        oip_error(r, 503, "model '%s' is not ready: %s", r->params[0], err->message);
}

/* The requested model version for an inference request: loaded on first use, never when
 * an admin unloaded it (a new reference in *out). On failure answers and returns -1. */
int oip_use_model(struct gj_req *r, gj_served_model **out)
{
    int64_t version;
    gj_model_repo *repo = oip_requested(r, &version);
    *out = NULL;
    if (!repo)
        return -1;
    struct gj_error err = { 0 };
    if (gj_model_repo_acquire(repo, r->params[0], version, out, &err) != 0) {
        oip_lookup_failed(r, version, &err);
        return -1;
    }
    return 0;
}

/* ---- health, server metadata ----------------------------------------------------------- */

static void health_live(struct gj_req *r)
{
    gj_respond_json(r, 200, json_pack("{s:b}", "live", 1));
}

int oip_server_ready(const struct gj_server *srv)
{
    return atomic_load(&srv->ready) && !atomic_load(&srv->stopping) && !gj_http_stopping(srv) &&
           gj_infer_repo() != NULL;
}

static void health_ready(struct gj_req *r)
{
    if (oip_server_ready(r->srv))
        gj_respond_json(r, 200, json_pack("{s:b}", "ready", 1));
    else
        oip_error(r, 503, "the server is not ready");
}

static void server_metadata(struct gj_req *r)
{
    /* only what is served (Triton's names): no shared memory or sequences */
    gj_respond_json(r, 200, json_pack("{s:s, s:s, s:[s, s, s, s, s, s, s, s, s]}", "name", "gpujobd", "version",
                                      GJ_VERSION, "extensions", "binary_tensor_data", "classification",
                                      "parameters", "model_repository",
                                      "model_repository(unload_dependents)", "model_configuration", "statistics",
                                      "trace", "logging"));
}

/* ---- model metadata and readiness ------------------------------------------------------ */

/* Triton's tensor metadata: name, datatype, shape (-1 first when the model batches). */
static json_t *tensors_json(const struct gj_tensor_config *t, size_t n, int batched)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        json_t *shape = json_array();
        if (shape && batched)
            json_array_append_new(shape, json_integer(-1));
        for (int k = 0; shape && k < t[i].rank; k++)
            json_array_append_new(shape, json_integer(t[i].dims[k]));
        json_array_append_new(list, json_pack("{s:s, s:s, s:o}", "name", t[i].name, "datatype",
                                              onnx_elem_triton_name(t[i].elem_type), "shape", shape));
    }
    return list;
}

/* "cpu,gpu:0": where this process has batchers of the version ("" until it is placed). */
static void devices_text(const char *name, int64_t version, char *out, size_t cap)
{
    json_t *devs = gj_infer_devices_json(name, version);
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(devs); i++) {
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", i ? "," : "", json_string_value(json_array_get(devs, i)));
    }
    json_decref(devs);
}

/* The versions the metadata lists: the one asked for, else every version of the model. */
static json_t *versions_json(struct gj_req *r, gj_model_repo *repo)
{
    json_t *versions = json_array();
    struct gj_model_version_info vi[64];
    size_t nv = 0;
    struct gj_error err = { 0 };
    if (r->n_params >= 2) {
        json_array_append_new(versions, json_string(r->params[1]));
    } else if (gj_model_repo_versions(repo, r->params[0], vi, 64, &nv, &err) == 0) {
        for (size_t i = 0; i < nv && i < 64; i++) {
            char v[24];
            snprintf(v, sizeof v, "%" PRId64, vi[i].version);
            json_array_append_new(versions, json_string(v));
        }
    }
    return versions;
}

int oip_md_source_get(gj_model_repo *repo, const char *name, int64_t version, struct oip_md_source *src,
                      struct gj_error *err)
{
    memset(src, 0, sizeof *src);
    if (gj_model_repo_get_loaded(repo, name, version, &src->m, err) == 0) {
        src->cfg = gj_served_model_config(src->m);
        return 0;
    }
    src->m = NULL;
    memset(err, 0, sizeof *err);
    if (gj_model_repo_config(repo, name, version, &src->copy, err) != 0) {
        gj_model_config_free(&src->copy);
        return -1;
    }
    src->cfg = &src->copy;
    return 0;
}

void oip_md_source_free(struct oip_md_source *src)
{
    if (src->m)
        gj_served_model_release(src->m);
    else
        gj_model_config_free(&src->copy);
}

/* 0, or -1 answered. */
static int md_source_get(struct gj_req *r, gj_model_repo *repo, int64_t version, struct oip_md_source *src)
{
    struct gj_error err = { 0 };
    if (oip_md_source_get(repo, r->params[0], version, src, &err) == 0)
        return 0;
    oip_lookup_failed(r, version, &err);
    return -1;
}

static void model_metadata(struct gj_req *r)
{
    int64_t version;
    gj_model_repo *repo = oip_requested(r, &version);
    struct oip_md_source src;
    if (!repo || md_source_get(r, repo, version, &src) != 0)
        return;
    const struct gj_model_config *cfg = src.cfg;
    struct gj_error err = { 0 };
    int64_t v = gj_model_repo_resolve(repo, r->params[0], version, &err);
    struct oip_model_io io;
    if (oip_model_io(cfg, &io) != 0) {
        oip_error(r, 400, "model '%s' version %" PRId64 " is not ready: its inputs and outputs come from its "
                  "model file when it loads", r->params[0], v);
        oip_md_source_free(&src);
        return;
    }
    /* parameters: the protocol's $parameters (string, number or boolean values) */
    char devices[256];
    devices_text(r->params[0], v, devices, sizeof devices);
    json_t *o = json_pack("{s:s, s:o, s:s, s:o, s:o, s:{s:i, s:I, s:i, s:s, s:s, s:s}}",
                          "name", r->params[0], "versions", versions_json(r, repo), "platform", "onnxruntime_onnx",
                          "inputs", tensors_json(io.inputs, io.n_inputs, io.batched),
                          "outputs", tensors_json(io.outputs, io.n_outputs, io.batched),
                          "parameters", "max_batch_size", io.max_batch_size,
                          "max_queue_delay_us", (json_int_t)cfg->max_queue_delay_us,
                          "instances_per_device", cfg->instances_per_device,
                          "instance_kind", gj_instance_kind_name(cfg->instance_kind),
                          "precision", gj_precision_name(cfg->precision),
                          "devices", devices);   /* "" until placed */
    oip_md_source_free(&src);
    gj_respond_json(r, o ? 200 : 500, o ? o : json_pack("{s:s}", "error", "out of memory"));
}

/* Ready: the version is loaded and placed on a device. It never loads a model: 400 (as
 * Triton) with the reason when it is not ready. */
static void model_ready(struct gj_req *r)
{
    int64_t version;
    gj_model_repo *repo = oip_requested(r, &version);
    if (!repo)
        return;
    gj_served_model *m = NULL;
    struct gj_error err = { 0 };
    if (gj_model_repo_get_loaded(repo, r->params[0], version, &m, &err) != 0) {
        oip_lookup_failed(r, version, &err);
        return;
    }
    const char *name = gj_served_model_name(m);
    int64_t v = gj_served_model_version(m);
    json_t *devices = gj_infer_devices_json(name, v);
    if (json_array_size(devices) == 0) {
        oip_error(r, 400, "model '%s' version %" PRId64 " is not ready: it is loaded but not placed on a "
                  "device (that happens on its first inference request, or with POST "
                  "/v1/models/%s/load)", name, v, name);
        json_decref(devices);
    } else {
        /* name and ready as the protocol's model-ready response; version and devices
         * (where this process has placed it: "cpu", "gpu:0", ...) are this server's */
        gj_respond_json(r, 200, json_pack("{s:s, s:I, s:b, s:o}", "name", name, "version", (json_int_t)v,
                                          "ready", 1, "devices", devices));
    }
    gj_served_model_release(m);
}

/* ---- routes ------------------------------------------------------------------------------ */

static const struct gj_route oip_routes[] = {
    { "GET", "/v2/health/live", GJ_AUTH_NONE, GJ_BODY_NONE, NULL, NULL, health_live, NULL },
    { "GET", "/v2/health/ready", GJ_AUTH_NONE, GJ_BODY_NONE, NULL, NULL, health_ready, NULL },
    { "GET", "/v2", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, server_metadata, NULL },
    { "GET", "/v2/models/{name}", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, model_metadata, NULL },
    { "GET", "/v2/models/{name}/versions/{version}", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL,
      model_metadata, NULL },
    { "GET", "/v2/models/{name}/ready", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, model_ready,
      NULL },
    { "GET", "/v2/models/{name}/versions/{version}/ready", GJ_AUTH_USER, GJ_BODY_NONE, NULL,
      NULL, model_ready, NULL },
    { "POST", "/v2/models/{name}/infer", GJ_AUTH_USER, GJ_BODY_STREAM, oip_infer_begin, oip_infer_data,
      oip_infer_handle, oip_infer_done },
    { "POST", "/v2/models/{name}/versions/{version}/infer", GJ_AUTH_USER, GJ_BODY_STREAM,
      oip_infer_begin, oip_infer_data, oip_infer_handle, oip_infer_done },
};
const struct gj_route_table gj_infer_routes_oip = { oip_routes, sizeof oip_routes / sizeof oip_routes[0] };

