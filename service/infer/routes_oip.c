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
 * parameters.binary_data, or request parameters.binary_data_output), again with
 * Inference-Header-Content-Length giving the JSON's length.
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
#include "service/http_server.h"
#include "service/infer/infer.h"
#include "service/log.h"
#include "service/metrics.h"
#include "service/upload_spool.h"

#define COMPONENT "oip"
#define OIP_MAX_BODY ((uint64_t)256 << 20)       /* JSON + binary tensors */
/* What a request body may be, from the model's input (infer_begin): a JSON number as
 * clients write it takes at most this many bytes ("-1.2345678901234567e-05, " is 25),
 * the JSON around the data (or the JSON header of a binary request) at most
 * OIP_JSON_OVERHEAD; more values than the input's, two for each (arrays nest), are
 * refused before parsing, since each takes ~50 bytes parsed. */
#define OIP_JSON_BYTES_PER_VALUE 32
#define OIP_JSON_OVERHEAD ((uint64_t)64 << 10)
#define OIP_EXTRA_VALUES 4096
/* A body this large takes an upload slot (upload_spool.h) while it is read. */
#define OIP_SLOT_BYTES ((uint64_t)1 << 20)
#define OIP_MAX_NEST 8
#define HDR_INFER_LEN "Inference-Header-Content-Length"

/* ---- responses ------------------------------------------------------------------------- */

static void oip_error(struct gj_req *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void oip_error(struct gj_req *r, int status, const char *fmt, ...)
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

/* ---- model lookup -------------------------------------------------------------------- */

/* Parses the {version} path parameter (a positive integer); 0 when absent. -1: bad. */
static int64_t path_version(struct gj_req *r)
{
    if (r->n_params < 2)
        return 0;
    const char *s = r->params[1];
    if (!*s || strlen(s) > 18)
        return -1;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v > 0 ? v : -1;
}

/* The repository and the version the path asks for (0: the default); on failure answers
 * the request and returns NULL. */
static gj_model_repo *requested(struct gj_req *r, int64_t *version)
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
static void lookup_failed(struct gj_req *r, int64_t version, const struct gj_error *err)
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
static int use_model(struct gj_req *r, gj_served_model **out)
{
    int64_t version;
    gj_model_repo *repo = requested(r, &version);
    *out = NULL;
    if (!repo)
        return -1;
    struct gj_error err = { 0 };
    if (gj_model_repo_acquire(repo, r->params[0], version, out, &err) != 0) {
        lookup_failed(r, version, &err);
        return -1;
    }
    return 0;
}

/* ---- health, server metadata ----------------------------------------------------------- */

static void health_live(struct gj_req *r)
{
    gj_respond_json(r, 200, json_pack("{s:b}", "live", 1));
}

static int server_ready(const struct gj_server *srv)
{
    return atomic_load(&srv->ready) && !atomic_load(&srv->stopping) && !gj_http_stopping(srv) &&
           gj_infer_repo() != NULL;
}

static void health_ready(struct gj_req *r)
{
    if (server_ready(r->srv))
        gj_respond_json(r, 200, json_pack("{s:b}", "ready", 1));
    else
        oip_error(r, 503, "the server is not ready");
}

static void server_metadata(struct gj_req *r)
{
    /* only what is served: no model_repository / statistics / classification routes */
    gj_respond_json(r, 200, json_pack("{s:s, s:s, s:[s]}", "name", "gpujobd", "version",
                                      GJ_VERSION, "extensions", "binary_tensor_data"));
}

/* ---- model metadata and readiness ------------------------------------------------------ */

static json_t *shape_json(const struct gj_model_config *cfg, const int64_t *dims, int n)
{
    json_t *a = json_array();
    if (cfg->max_batch_size > 0)
        json_array_append_new(a, json_integer(-1));
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(dims[i]));
    return a;
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

/* The model's metadata from its config.json: it neither loads nor places the model. */
static void model_metadata(struct gj_req *r)
{
    int64_t version;
    gj_model_repo *repo = requested(r, &version);
    if (!repo)
        return;
    struct gj_model_config cfg;
    struct gj_error err = { 0 };
    if (gj_model_repo_config(repo, r->params[0], version, &cfg, &err) != 0) {
        gj_model_config_free(&cfg);
        lookup_failed(r, version, &err);
        return;
    }
    int64_t v = gj_model_repo_resolve(repo, r->params[0], version, &err);
    int64_t out_dims[1] = { cfg.n_outputs };
    /* parameters: the protocol's $parameters (string, number or boolean values) */
    char devices[256];
    devices_text(r->params[0], v, devices, sizeof devices);
    json_t *o = json_pack("{s:s, s:o, s:s, s:[{s:s, s:s, s:o}], s:[{s:s, s:s, s:o}], s:{s:i, "
                          "s:I, s:i, s:s, s:s, s:s}}",
                          "name", r->params[0], "versions", versions_json(r, repo), "platform", "onnx",
                          "inputs", "name", cfg.input_name, "datatype", "FP32", "shape",
                          shape_json(&cfg, cfg.input_dims, 3),
                          "outputs", "name", cfg.output_name, "datatype", "FP32", "shape",
                          shape_json(&cfg, out_dims, 1),
                          "parameters", "max_batch_size", cfg.max_batch_size,
                          "max_queue_delay_us", (json_int_t)cfg.max_queue_delay_us,
                          "instances_per_device", cfg.instances_per_device,
                          "instance_kind", gj_instance_kind_name(cfg.instance_kind),
                          "precision", gj_precision_name(cfg.precision),
                          "devices", devices);   /* "" until placed */
    gj_model_config_free(&cfg);
    gj_respond_json(r, o ? 200 : 500, o ? o : json_pack("{s:s}", "error", "out of memory"));
}

/* Ready: the version is loaded and placed on a device. It never loads a model: 400 (as
 * Triton) with the reason when it is not ready. */
static void model_ready(struct gj_req *r)
{
    int64_t version;
    gj_model_repo *repo = requested(r, &version);
    if (!repo)
        return;
    gj_served_model *m = NULL;
    struct gj_error err = { 0 };
    if (gj_model_repo_get_loaded(repo, r->params[0], version, &m, &err) != 0) {
        lookup_failed(r, version, &err);
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

/* ---- infer: the body ---------------------------------------------------------------------- */

struct oip_body {
    char *buf;
    size_t len, cap;
    uint64_t max_values;             /* JSON values the model's input can use (and structure) */
};

/* The body's limit from the model's config: JSON at OIP_JSON_BYTES_PER_VALUE a value,
 * or exactly the binary tensors after a JSON header. 0, or -1 answered. */
static int body_limit(struct gj_req *r, struct oip_body *b)
{
    int64_t version;
    gj_model_repo *repo = requested(r, &version);
    if (!repo)
        return -1;
    struct gj_model_config cfg;
    struct gj_error err = { 0 };
    if (gj_model_repo_config(repo, r->params[0], version, &cfg, &err) != 0) {
        gj_model_config_free(&cfg);
        lookup_failed(r, version, &err);
        return -1;
    }
    uint64_t per_sample = 1;
    for (int i = 0; i < 3; i++)
        per_sample *= cfg.input_dims[i] > 0 ? (uint64_t)cfg.input_dims[i] : 1;
    uint64_t values = per_sample * (uint64_t)(cfg.max_batch_size > 0 ? cfg.max_batch_size : 1);
    gj_model_config_free(&cfg);
    int binary = gj_req_header(r, HDR_INFER_LEN) != NULL;
    uint64_t cap = OIP_JSON_OVERHEAD + values * (binary ? sizeof(float) : OIP_JSON_BYTES_PER_VALUE);
    if (cap > OIP_MAX_BODY)
        cap = OIP_MAX_BODY;
    if (r->srv->cfg.max_body_bytes && r->srv->cfg.max_body_bytes < cap)
        cap = r->srv->cfg.max_body_bytes;
    r->body_limit = cap;
    b->max_values = 2 * values + OIP_EXTRA_VALUES;
    return 0;
}

static uint64_t content_length(struct gj_req *r, int *given)
{
    const char *cl = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    char *end = NULL;
    errno = 0;
    unsigned long long v = cl ? strtoull(cl, &end, 10) : 0;
    *given = cl && !errno && end != cl && !*end;
    return *given ? (uint64_t)v : 0;
}

/* Before the body: its limit (413 at once when the declared length is over it), an
 * upload slot for a large one, and a buffer of the declared size. */
static void infer_begin(struct gj_req *r)
{
    struct oip_body *b = calloc(1, sizeof *b);
    r->state = b;
    if (!b) {
        oip_error(r, 500, "out of memory");
        return;
    }
    if (body_limit(r, b) != 0)
        return;
    int given;
    uint64_t declared = content_length(r, &given);
    if (declared > r->body_limit) {
        oip_error(r, 413, "the inference request (%llu bytes) is over the %llu bytes model '%s' can take",
                  (unsigned long long)declared, (unsigned long long)r->body_limit, r->params[0]);
        return;
    }
    if (!given || declared >= OIP_SLOT_BYTES) {
        int rc = gj_req_upload_slot(r);
        if (rc != 0) {
            oip_error(r, rc == GJ_UPLOAD_TENANT_BUSY ? 429 : 503, "too many large requests in progress; retry shortly");
            return;
        }
    }
    if (given && declared > 0) {
        b->buf = malloc((size_t)declared + 1);
        b->cap = b->buf ? (size_t)declared + 1 : 0;
    }
}

static int infer_data(struct gj_req *r, const char *data, size_t len)
{
    struct oip_body *b = r->state;
    if ((uint64_t)b->len + len > r->body_limit) {
        oip_error(r, 413, "the inference request is over the %llu bytes model '%s' can take",
                  (unsigned long long)r->body_limit, r->params[0]);
        return -1;
    }
    if (b->len + len + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 65536;
        while (nc < b->len + len + 1)
            nc *= 2;
        if (nc > r->body_limit + 1)
            nc = (size_t)r->body_limit + 1;
        char *nb = realloc(b->buf, nc);
        if (!nb) {
            oip_error(r, 500, "out of memory");
            return -1;
        }
        b->buf = nb;
        b->cap = nc;
    }
    memcpy(b->buf + b->len, data, len);
    b->len += len;
    b->buf[b->len] = '\0';
    return 0;
}

static void infer_done(struct gj_req *r, int ok)
{
    (void)ok;
    struct oip_body *b = r->state;
    if (b) {
        free(b->buf);
        free(b);
        r->state = NULL;
    }
}

/* An upper bound of the values a JSON text holds: each comma, colon or opening bracket
 * outside strings starts at most one more. */
static uint64_t json_value_bound(const char *s, size_t n)
{
    uint64_t count = 1;
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = 0;
        } else if (ch == '"') {
            in_str = 1;
        } else if (ch == ',' || ch == ':' || ch == '[' || ch == '{') {
            count++;
        }
    }
    return count;
}

/* Flattens nested arrays of numbers into out (at most cap values); the count, or -1. */
static long flatten(const json_t *v, float *out, size_t cap, size_t *n, int depth)
{
    if (json_is_number(v)) {
        if (*n >= cap)
            return -1;
        double d = json_number_value(v);
        out[(*n)++] = (float)d;
        return 0;
    }
    if (!json_is_array(v) || depth > OIP_MAX_NEST)
        return -1;
    for (size_t i = 0; i < json_array_size(v); i++)
        if (flatten(json_array_get(v, i), out, cap, n, depth + 1))
            return -1;
    return 0;
}

static int param_bool(const json_t *params, const char *key)
{
    const json_t *v = json_object_get(params, key);
    return json_is_true(v);
}

/* Writes the response: JSON, or JSON + binary outputs. */
static void infer_respond(struct gj_req *r, gj_served_model *m, const json_t *req, const float *out,
                          size_t n, size_t out_floats, int binary)
{
    const struct gj_model_config *cfg = gj_served_model_config(m);
    char ver[24];
    snprintf(ver, sizeof ver, "%" PRId64, gj_served_model_version(m));
    json_t *shape = json_pack("[I, I]", (json_int_t)n, (json_int_t)out_floats);
    json_t *o = json_pack("{s:s, s:s, s:o}", "name", cfg->output_name, "datatype", "FP32", "shape",
                          shape);
    size_t bytes = n * out_floats * sizeof(float);
    if (!o) {
        oip_error(r, 500, "out of memory");
        return;
    }
    if (binary) {
        json_object_set_new(o, "parameters", json_pack("{s:I}", "binary_data_size",
                                                       (json_int_t)bytes));
    } else {
        json_t *data = json_array();
        for (size_t i = 0; data && i < n * out_floats; i++)
            json_array_append_new(data, json_real(out[i]));
        json_object_set_new(o, "data", data);
    }
    json_t *resp = json_pack("{s:s, s:s}", "model_name", gj_served_model_name(m), "model_version",
                             ver);
    const json_t *id = json_object_get(req, "id");
    if (resp && json_is_string(id))
        json_object_set(resp, "id", (json_t *)id);
    if (resp)
        json_object_set_new(resp, "outputs", json_pack("[o]", o));
    else
        json_decref(o);
    if (!binary) {
        gj_respond_json(r, resp ? 200 : 500, resp ? resp : json_pack("{s:s}", "error", "oom"));
        return;
    }
    char *text = resp ? json_dumps(resp, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(resp);
    size_t tl = text ? strlen(text) : 0;
    char *body = text ? malloc(tl + bytes) : NULL;
    if (!body) {
        free(text);
        oip_error(r, 500, "out of memory");
        return;
    }
    memcpy(body, text, tl);
    memcpy(body + tl, out, bytes);   /* little-endian hosts (x86-64, aarch64) */
    free(text);
    struct MHD_Response *mr = MHD_create_response_from_buffer(tl + bytes, body,
                                                              MHD_RESPMEM_MUST_FREE);
    if (!mr) {
        free(body);
        oip_error(r, 500, "out of memory");
        return;
    }
    char hl[32];
    snprintf(hl, sizeof hl, "%zu", tl);
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    MHD_add_response_header(mr, HDR_INFER_LEN, hl);
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    gj_respond(r, 200, mr, tl + bytes);
}

/* One inference request as it is checked and run. */
struct infer_call {
    json_t *req;                     /* the JSON part */
    const unsigned char *bin;        /* the binary tensors after it */
    size_t bin_len;
    gj_served_model *m;
    const struct gj_model_config *cfg;
    const json_t *rparams;           /* the request's parameters */
    int64_t timeout_us;
    const json_t *tensor;            /* the one input */
    const char *iname;
    int64_t n;                       /* samples */
    int binary;                      /* outputs as binary */
};

/* The JSON part of the body (all of it, or Inference-Header-Content-Length bytes). NULL
 * answered. */
static json_t *parse_body(struct gj_req *r, const struct oip_body *body, size_t *json_len)
{
    const char *hl = gj_req_header(r, HDR_INFER_LEN);
    *json_len = body->len;
    if (hl) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(hl, &end, 10);
        if (errno || !end || end == hl || *end || v > body->len) {
            oip_error(r, 400, "%s is %.40s: it must be the length of the JSON part (at most the "
                      "body's %zu bytes)", HDR_INFER_LEN, hl, body->len);
            return NULL;
        }
        *json_len = (size_t)v;
    } else {
        const char *ct = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (ct && !gj_http_is_json_type(ct)) {
            oip_error(r, 415, "a body of type %.60s needs the %s header (binary tensor "
                      "extension); otherwise send application/json", ct, HDR_INFER_LEN);
            return NULL;
        }
    }
    if (*json_len == 0) {
        oip_error(r, 400, "the inference request is empty");
        return NULL;
    }
    if (json_value_bound(body->buf, *json_len) > body->max_values) {
        oip_error(r, 413, "the inference request holds more values than model '%s' takes (at most %llu with "
                  "its structure)", r->params[0], (unsigned long long)body->max_values);
        return NULL;
    }
    json_error_t jerr;
    json_t *req = json_loadb(body->buf, *json_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!req || !json_is_object(req)) {
        if (req)
            oip_error(r, 400, "the inference request must be a JSON object");
        else
            oip_error(r, 400, "malformed JSON in the inference request at line %d, column %d: %s",
                      jerr.line, jerr.column, jerr.text);
        json_decref(req);
        return NULL;
    }
    return req;
}

/* id, parameters and parameters.timeout. 0, or -1 answered. */
static int check_parameters(struct gj_req *r, struct infer_call *c)
{
    const json_t *id = json_object_get(c->req, "id");
    if (id && !json_is_string(id)) {
        oip_error(r, 400, "id must be a string");
        return -1;
    }
    c->rparams = json_object_get(c->req, "parameters");
    if (c->rparams && !json_is_object(c->rparams)) {
        oip_error(r, 400, "parameters must be an object");
        return -1;
    }
    const json_t *jt = json_object_get(c->rparams, "timeout");
    if (jt) {
        if (!json_is_integer(jt) || json_integer_value(jt) < 0 || json_integer_value(jt) > 3600LL * 1000000) {
            oip_error(r, 400, "parameters.timeout must be an integer number of microseconds "
                      "(0 to 3600000000)");
            return -1;
        }
        c->timeout_us = (int64_t)json_integer_value(jt);
    }
    return 0;
}

/* The one input: its name, datatype and shape against the model's; c->n samples. 0, or -1
 * answered. */
static int check_input(struct gj_req *r, struct infer_call *c)
{
    const struct gj_model_config *cfg = c->cfg;
    const json_t *inputs = json_object_get(c->req, "inputs");
    if (!json_is_array(inputs) || json_array_size(inputs) != 1) {
        oip_error(r, 400, "inputs must be an array with one tensor: model '%s' has one input "
                  "('%s')", gj_served_model_name(c->m), cfg->input_name);
        return -1;
    }
    c->tensor = json_array_get(inputs, 0);
    const char *iname = json_string_value(json_object_get(c->tensor, "name"));
    const char *dtype = json_string_value(json_object_get(c->tensor, "datatype"));
    const json_t *shape = json_object_get(c->tensor, "shape");
    if (!iname || strcmp(iname, cfg->input_name) != 0) {
        oip_error(r, 400, "unexpected input '%.100s': model '%s' takes '%s'", iname ? iname : "",
                  gj_served_model_name(c->m), cfg->input_name);
        return -1;
    }
    c->iname = iname;
    if (!dtype || strcmp(dtype, "FP32") != 0) {
        oip_error(r, 400, "input '%s': datatype %.20s is not supported: send FP32", iname, dtype ? dtype : "(none)");
        return -1;
    }
    int has_batch = cfg->max_batch_size > 0;
    size_t rank = (size_t)(has_batch ? 4 : 3);
    int64_t dims[4];
    for (size_t i = 0; i < rank; i++) {
        const json_t *d = json_array_get(shape, i);
        dims[i] = json_is_integer(d) ? (int64_t)json_integer_value(d) : -2;
    }
    c->n = has_batch ? dims[0] : 1;
    const int64_t *sd = has_batch ? dims + 1 : dims;
    if (!json_is_array(shape) || json_array_size(shape) != rank || c->n < 1 || c->n > cfg->max_batch_size ||
        sd[0] != cfg->input_dims[0] || sd[1] != cfg->input_dims[1] || sd[2] != cfg->input_dims[2]) {
        oip_error(r, 400, "input '%s': shape must be [batch, %" PRId64 ", %" PRId64 ", %" PRId64
                  "] with batch 1 to %d", iname, cfg->input_dims[0], cfg->input_dims[1],
                  cfg->input_dims[2], cfg->max_batch_size);
        return -1;
    }
    return 0;
}

/* The input's count values into in: the binary part, or the JSON data (flat or nested),
 * all finite. 0, or -1 answered. */
static int read_tensor(struct gj_req *r, const struct infer_call *c, float *in, size_t count)
{
    const json_t *bds = json_object_get(json_object_get(c->tensor, "parameters"), "binary_data_size");
    const json_t *data = json_object_get(c->tensor, "data");
    if (bds) {
        if (data) {
            oip_error(r, 400, "input '%s' has both data and parameters.binary_data_size", c->iname);
            return -1;
        }
        if (!json_is_integer(bds) || (uint64_t)json_integer_value(bds) != count * sizeof(float)) {
            oip_error(r, 400, "input '%s': binary_data_size must be %zu (the shape's %zu FP32 values)",
                      c->iname, count * sizeof(float), count);
            return -1;
        }
        if (c->bin_len != count * sizeof(float)) {
            oip_error(r, 400, "input '%s': %zu bytes of binary data after the JSON, expected %zu", c->iname,
                      c->bin_len, count * sizeof(float));
            return -1;
        }
        memcpy(in, c->bin, c->bin_len);   /* little-endian hosts */
    } else {
        size_t got = 0;
        if (!data || flatten(data, in, count, &got, 0) || got != count) {
            oip_error(r, 400, "input '%s': data must hold %zu numbers (flat or nested as the shape), or "
                      "use the binary tensor extension", c->iname, count);
            return -1;
        }
        if (c->bin_len) {
            oip_error(r, 400, "%zu bytes of binary data, but no input declares parameters.binary_data_size",
                      c->bin_len);
            return -1;
        }
    }
    for (size_t i = 0; i < count; i++)
        if (!isfinite(in[i])) {
            oip_error(r, 400, "input '%s': value %zu is not a finite FP32 number", c->iname, i);
            return -1;
        }
    return 0;
}

/* The outputs asked for (all, the one, unless listed) and whether as binary. 0, or -1
 * answered. */
static int check_outputs(struct gj_req *r, struct infer_call *c)
{
    c->binary = param_bool(c->rparams, "binary_data_output");
    const json_t *outs = json_object_get(c->req, "outputs");
    if (!outs)
        return 0;
    if (!json_is_array(outs) || json_array_size(outs) > 1) {
        oip_error(r, 400, "outputs must be an array naming '%s'", c->cfg->output_name);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(outs); i++) {
        const json_t *ro = json_array_get(outs, i);
        const char *on = json_string_value(json_object_get(ro, "name"));
        if (!on || strcmp(on, c->cfg->output_name) != 0) {
            oip_error(r, 400, "unexpected output '%.100s': model '%s' has '%s'", on ? on : "",
                      gj_served_model_name(c->m), c->cfg->output_name);
            return -1;
        }
        const json_t *op = json_object_get(ro, "parameters");
        if (json_object_get(op, "binary_data"))
            c->binary = param_bool(op, "binary_data");
        if (json_object_get(op, "classification")) {
            oip_error(r, 400, "output '%s': the classification extension is not supported", on);
            return -1;
        }
    }
    return 0;
}

/* Reads the input, runs it through the model's shared batcher, answers. */
static void run_call(struct gj_req *r, struct infer_call *c)
{
    struct gj_error err = { 0 };
    gj_batcher *b = gj_batcher_acquire(c->m, &err);
    if (!b) {
        oip_error(r, 503, "model '%s' is not ready: %s", gj_served_model_name(c->m), err.message);
        return;
    }
    size_t in_floats = gj_batcher_input_floats(b), out_floats = gj_batcher_output_floats(b);
    size_t count = (size_t)c->n * in_floats;
    float *in = malloc(count * sizeof *in), *out = malloc((size_t)c->n * out_floats * sizeof *out);
    if (!in || !out) {
        oip_error(r, 500, "out of memory");
    } else if (read_tensor(r, c, in, count) == 0) {
        json_object_del((json_t *)c->tensor, "data");   /* the values are in `in` now */
        struct gj_batch_timing timing;
        int rc = gj_batcher_infer(b, in, (size_t)c->n, out, c->timeout_us, &timing, &err);
        if (rc == GJ_BATCH_OK)
            infer_respond(r, c->m, c->req, out, (size_t)c->n, out_floats, c->binary);
        else
            oip_error(r, err.status ? err.status : rc == GJ_BATCH_EINVAL ? 400 : rc == GJ_BATCH_EFULL ? 429
                                                   : rc == GJ_BATCH_EFAILED ? 500 : 503, "%s", err.message);
    }
    free(in);
    free(out);
    gj_batcher_release(b);
}

static void infer_handle(struct gj_req *r)
{
    struct oip_body *body = r->state;
    struct infer_call c = { 0 };
    size_t json_len = 0;
    c.req = parse_body(r, body, &json_len);
    if (!c.req)
        return;
    c.bin = (const unsigned char *)body->buf + json_len;
    c.bin_len = body->len - json_len;
    if (c.bin_len == 0) {   /* JSON only: the text is parsed; one copy at a time */
        free(body->buf);
        body->buf = NULL;
        body->len = body->cap = 0;
        c.bin = NULL;
    }
    if (use_model(r, &c.m) == 0) {
        c.cfg = gj_served_model_config(c.m);
        if (check_parameters(r, &c) == 0 && check_input(r, &c) == 0 && check_outputs(r, &c) == 0)
            run_call(r, &c);
    }
    gj_served_model_release(c.m);
    json_decref(c.req);
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
    { "POST", "/v2/models/{name}/infer", GJ_AUTH_USER, GJ_BODY_STREAM, infer_begin, infer_data,
      infer_handle, infer_done },
    { "POST", "/v2/models/{name}/versions/{version}/infer", GJ_AUTH_USER, GJ_BODY_STREAM,
      infer_begin, infer_data, infer_handle, infer_done },
};
const struct gj_route_table gj_infer_routes_oip = { oip_routes, sizeof oip_routes / sizeof oip_routes[0] };

/* ---- metrics ------------------------------------------------------------------------------- */

void gj_infer_write_metrics(FILE *f)
{
    static const struct {
        const char *name, *help;
        size_t off;
        int gauge;
    } m[] = {
        { "inference_request_success", "Inference requests answered successfully.",
          offsetof(struct gj_batch_stats, request_success), 0 },
        { "inference_request_failure", "Inference requests that failed (rejected by a full "
          "queue, timed out in the queue, shut down, or failed in the model).",
          offsetof(struct gj_batch_stats, request_failure), 0 },
        { "inference_count", "Inferences performed (samples; a request may carry several).",
          offsetof(struct gj_batch_stats, inference_count), 0 },
        { "inference_exec_count", "Model executions (batches) run.",
          offsetof(struct gj_batch_stats, exec_count), 0 },
        { "inference_queue_duration_us", "Microseconds requests waited in the batcher's "
          "queue, summed over requests.", offsetof(struct gj_batch_stats, queue_duration_us), 0 },
        { "inference_compute_infer_duration_us", "Microseconds of model execution, summed over "
          "requests (each request counts its batch's run).",
          offsetof(struct gj_batch_stats, compute_infer_duration_us), 0 },
        { "inference_pending_request_count", "Requests waiting in the batcher's queue now.",
          offsetof(struct gj_batch_stats, pending_request_count), 1 },
    };
    struct gj_batch_stats st[256];
    size_t n = gj_batch_stats_snapshot(st, 256);
    if (n > 256)
        n = 256;
    for (size_t k = 0; k < sizeof m / sizeof m[0]; k++) {
        fprintf(f, "# HELP gpujobd_%s %s\n# TYPE gpujobd_%s %s\n", m[k].name, m[k].help,
                m[k].name, m[k].gauge ? "gauge" : "counter");
        for (size_t i = 0; i < n; i++) {
            uint64_t v;
            memcpy(&v, (const char *)&st[i] + m[k].off, sizeof v);
            fprintf(f, "gpujobd_%s{model=\"", m[k].name);
            gj_metrics_put_label(f, st[i].model);
            fprintf(f, "\",version=\"%" PRId64 "\"} %" PRIu64 "\n", st[i].version, v);
        }
    }
}
