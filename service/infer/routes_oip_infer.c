/*
 * routes_oip_infer.c — POST /v2/models/{name}[/versions/{version}]/infer: the body read
 * within the model's bounds, JSON tensors or Triton's binary tensor extension decoded,
 * run through the model's dynamic batcher, the outputs encoded as the request asks (see
 * routes_oip.c for the protocol).
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
#include "service/infer/oip.h"

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
    gj_model_repo *repo = oip_requested(r, &version);
    if (!repo)
        return -1;
    struct gj_model_config cfg;
    struct gj_error err = { 0 };
    if (gj_model_repo_config(repo, r->params[0], version, &cfg, &err) != 0) {
        gj_model_config_free(&cfg);
        oip_lookup_failed(r, version, &err);
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
void oip_infer_begin(struct gj_req *r)
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

int oip_infer_data(struct gj_req *r, const char *data, size_t len)
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

void oip_infer_done(struct gj_req *r, int ok)
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

void oip_infer_handle(struct gj_req *r)
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
    if (oip_use_model(r, &c.m) == 0) {
        c.cfg = gj_served_model_config(c.m);
        if (check_parameters(r, &c) == 0 && check_input(r, &c) == 0 && check_outputs(r, &c) == 0)
            run_call(r, &c);
    }
    gj_served_model_release(c.m);
    json_decref(c.req);
}

