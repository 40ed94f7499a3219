/*
 * routes_oip_infer.c — POST /v2/models/{name}[/versions/{version}]/infer as Triton answers
 * it: the body read within the model's bounds (inflated first when it came with
 * Content-Encoding gzip or deflate), every input decoded from JSON or Triton's binary tensor
 * extension (oip_tensor.h) and checked against the model, run through the model's dynamic
 * batcher (gj_batcher_run), the outputs asked for (or all) encoded as JSON or binary, the
 * classification extension applied, the response compressed as Accept-Encoding asks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "infer/onnx/onnx_elem.h"
#include "infer/serving/batcher.h"
#include "infer/serving/model_repo.h"
#include "service/db/db.h"
#include "service/http/http_park.h"
#include "service/http/http_server.h"
#include "service/infer/infer.h"
#include "service/infer/oip.h"
#include "service/infer/oip_compress.h"
#include "service/infer/oip_json_data.h"
#include "service/infer/oip_model_io.h"
#include "service/infer/oip_tensor.h"
#include "service/http/upload_spool.h"

#define OIP_MAX_BODY ((uint64_t)256 << 20)       /* JSON + binary tensors, decoded */
/* What a request body may be, from the model's inputs (body_limit): a JSON number as
 * clients write it takes at most OIP_JSON_BYTES_PER_VALUE bytes ("-1.2345678901234567e-05, "
 * is 25; its binary form at most 8), a BYTES element OIP_BYTES_PER_STRING on average (JSON
 * or binary), the JSON around the data (or the JSON header of a binary request) at most
 * OIP_JSON_OVERHEAD. More values than the inputs', two for each (arrays nest), are refused
 * before parsing, since each takes ~50 bytes parsed. The JSON bound holds for binary
 * requests too: a client that reuses its headers dict sends a stale
 * Inference-Header-Content-Length with a JSON body (parse_body). A model whose inputs have
 * sizes not fixed by its config takes up to OIP_MAX_BODY (and the server's max body). */
#define OIP_JSON_BYTES_PER_VALUE 32
#define OIP_BYTES_PER_STRING 8192
#define OIP_JSON_OVERHEAD ((uint64_t)64 << 10)
#define OIP_EXTRA_VALUES 4096
/* A body this large takes an upload slot (upload_spool.h) while it is read. */
#define OIP_SLOT_BYTES ((uint64_t)1 << 20)
#define HDR_INFER_LEN "Inference-Header-Content-Length"
#define MAX_TIMEOUT_US (3600LL * 1000000)
/* A request parked for its batch looks again this often even unwoken (a safety net). */
#define BATCH_RECHECK_S 10.0

/* ---- infer: the body ---------------------------------------------------------------------- */

/* The request's state. Once its inputs are submitted to the model's batcher, the batcher
 * shares it (the tensors point into it) until it answers on its own thread: whichever of
 * the request's end and the answer comes last frees it (refs). */
struct oip_body {
    char *buf;                       /* pad bytes into a malloc'd block (free(buf - pad)) */
    size_t len, cap, pad;
    uint64_t max_values;             /* JSON values the model's inputs can use (and structure) */
    uint64_t decoded_limit;          /* the body after Content-Encoding is undone */
    enum oip_coding coding;          /* Content-Encoding */
    struct infer_call *call;         /* the request read, once parsed */
    /* submitted (run_call): */
    gj_batcher *batcher;             /* the request's reference, given back at its end */
    struct gj_tensor *gin, *gout;    /* what the batcher reads and fills */
    struct gj_park_entry park;       /* the connection suspended until the batch's answer */
    int submitted;
    int rc;                          /* the batch's answer (set before answered) */
    struct gj_error err;
    atomic_int answered;
    atomic_int refs;                 /* the request's, and the batcher's while it holds it */
};

static void free_call(struct infer_call *c);
static void free_outputs(struct oip_body *b);

/* Frees b's body text (it lies pad bytes into its block). */
static void free_body_text(struct oip_body *b)
{
    free(b->buf ? b->buf - b->pad : NULL);
    b->buf = NULL;
    b->pad = 0;
}

static void body_unref(struct oip_body *b)
{
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
        return;
    free_outputs(b);
    if (b->call) {
        free_call(b->call);
        free(b->call);
    }
    free(b->gin);
    free(b->gout);
    free_body_text(b);
    free(b);
}

/* JSON bytes and values the model's inputs take in one request; 0 when a size is not fixed
 * by its config (or the config names no inputs yet). */
static int model_bound(const struct gj_model_config *cfg, uint64_t *bytes, uint64_t *values)
{
    struct oip_model_io io;
    *bytes = *values = 0;
    if (oip_model_io(cfg, &io) != 0)
        return 0;
    uint64_t samples = io.batched ? (uint64_t)io.max_batch_size : 1;
    for (size_t i = 0; i < io.n_inputs; i++) {
        const struct gj_tensor_config *tc = &io.inputs[i];
        size_t n = oip_tensor_count(tc->rank, tc->dims);
        if (n == SIZE_MAX || n > OIP_MAX_BODY)
            return 0;
        *values += n * samples;
        *bytes += n * samples * (tc->elem_type == ONNX_ELEM_STRING ? OIP_BYTES_PER_STRING : OIP_JSON_BYTES_PER_VALUE);
    }
    return 1;
}

/* The body's limits from the model's config (the loaded model's, completed from the model
 * file; else the repository's). 0, or -1 answered. */
static int body_limit(struct gj_req *r, struct oip_body *b)
{
    int64_t version;
    gj_model_repo *repo = oip_requested(r, &version);
    if (!repo)
        return -1;
    struct gj_model_config cfg = { 0 };
    gj_served_model *m = NULL;
    struct gj_error err = { 0 };
    uint64_t bytes = 0, values = 0;
    int bounded;
    if (gj_model_repo_get_loaded(repo, r->params[0], version, &m, &err) == 0) {
        bounded = model_bound(gj_served_model_config(m), &bytes, &values);
        gj_served_model_release(m);
    } else {
        memset(&err, 0, sizeof err);
        if (gj_model_repo_config(repo, r->params[0], version, &cfg, &err) != 0) {
            gj_model_config_free(&cfg);
            oip_lookup_failed(r, version, &err);
            return -1;
        }
        bounded = model_bound(&cfg, &bytes, &values);
        gj_model_config_free(&cfg);
    }
    uint64_t cap = bounded ? OIP_JSON_OVERHEAD + bytes : OIP_MAX_BODY;
    if (cap > OIP_MAX_BODY)
        cap = OIP_MAX_BODY;
    if (r->srv->cfg.max_body_bytes && r->srv->cfg.max_body_bytes < cap)
        cap = r->srv->cfg.max_body_bytes;
    b->decoded_limit = cap;
    /* a compressed body: zlib's worst case over incompressible data is a little more */
    r->body_limit = b->coding == OIP_IDENTITY ? cap : cap + cap / 16 + 4096;
    b->max_values = bounded ? 2 * values + OIP_EXTRA_VALUES : UINT64_MAX;
    return 0;
}

/* A length header's value (Content-Length, Inference-Header-Content-Length) as a number. 0,
 * or -1 when there is none or it is not one. */
static int header_length(const char *value, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = value ? strtoull(value, &end, 10) : 0;
    if (!value || errno || end == value || *end)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static uint64_t content_length(struct gj_req *r, int *given)
{
    uint64_t v = 0;
    *given = header_length(gj_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH), &v) == 0;
    return *given ? v : 0;
}

/* A buffer for a body of declared bytes, placed so that the binary part after the JSON (the
 * Inference-Header-Content-Length a client gives) starts 64-byte aligned: its tensors are
 * then read in place (oip_tensor_read) instead of copied. */
static void body_buffer(struct gj_req *r, struct oip_body *b, size_t declared)
{
    uint64_t json_len = 0;
    int known = header_length(gj_req_header(r, HDR_INFER_LEN), &json_len) == 0 && json_len < declared;
    size_t pad = known ? (64 - json_len % 64) % 64 : 0;
    char *block = malloc(declared + 1 + pad);
    if (!block)
        return;                          /* oip_infer_data grows one as the body comes */
    b->buf = block + pad;
    b->pad = pad;
    b->cap = declared + 1;
}

/* Before the body: its coding, its limit (413 at once when the declared length is over it),
 * an upload slot for a large one, and a buffer of the declared size. */
void oip_infer_begin(struct gj_req *r)
{
    struct oip_body *b = calloc(1, sizeof *b);
    r->state = b;
    if (!b) {
        oip_error(r, 500, "out of memory");
        return;
    }
    atomic_init(&b->refs, 1);
    atomic_init(&b->answered, 0);
    const char *ce = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING);
    if (oip_content_coding(ce, &b->coding) != 0) {
        oip_error(r, 415, "unsupported Content-Encoding '%.40s': send gzip, deflate or identity", ce);
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
    if (given && declared > 0)
        body_buffer(r, b, (size_t)declared);
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
        char *nb = realloc(b->buf ? b->buf - b->pad : NULL, nc + b->pad);
        if (!nb) {
            oip_error(r, 500, "out of memory");
            return -1;
        }
        b->buf = nb + b->pad;
        b->cap = nc;
    }
    memcpy(b->buf + b->len, data, len);
    b->len += len;
    b->buf[b->len] = '\0';
    return 0;
}

/* Undoes Content-Encoding in place (the decoded body within decoded_limit). 0, or -1
 * answered. Inference-Header-Content-Length counts the decoded body, as Triton's. */
static int decode_body(struct gj_req *r, struct oip_body *b)
{
    if (b->coding == OIP_IDENTITY) {
        if (b->len > b->decoded_limit) {
            oip_error(r, 413, "the inference request is over the %llu bytes model '%s' can take",
                      (unsigned long long)b->decoded_limit, r->params[0]);
            return -1;
        }
        return 0;
    }
    char *out;
    size_t out_len;
    const char *in = b->buf ? b->buf : "";
    /* a body that inflates past OIP_SLOT_BYTES is a large one: it takes an upload slot (as
     * a large plain body does from its Content-Length) before it may grow to decoded_limit */
    int rc = oip_inflate(in, b->len, b->coding, (size_t)(b->decoded_limit < OIP_SLOT_BYTES ? b->decoded_limit
                                                                                        : OIP_SLOT_BYTES),
                         &out, &out_len);
    if (rc == 413 && b->decoded_limit > OIP_SLOT_BYTES) {
        int slot = gj_req_upload_slot(r);
        if (slot != 0) {
            oip_error(r, slot == GJ_UPLOAD_TENANT_BUSY ? 429 : 503, "too many large requests in progress; retry "
                      "shortly");
            return -1;
        }
        rc = oip_inflate(in, b->len, b->coding, (size_t)b->decoded_limit, &out, &out_len);
    }
    if (rc == 413)
        oip_error(r, 413, "the %s-compressed inference request inflates past the %llu bytes model '%s' can "
                  "take", oip_coding_name(b->coding), (unsigned long long)b->decoded_limit, r->params[0]);
    else if (rc)
        oip_error(r, rc, rc == 400 ? "the inference request is not valid %s data (Content-Encoding)" : "out of "
                  "memory inflating the %s request", oip_coding_name(b->coding));
    if (rc)
        return -1;
    free_body_text(b);
    b->buf = out;
    b->len = out_len;
    b->cap = out_len + 1;
    return 0;
}

#ifdef __SSE2__
/* From s, 16 bytes at a time while no '"' is among them: the ',', ':', '[' and '{' in them
 * added to *count. The bytes done (a multiple of 16). */
static size_t count_starts_16(const char *s, size_t n, uint64_t *count)
{
    const __m128i quote = _mm_set1_epi8('"'), comma = _mm_set1_epi8(','), colon = _mm_set1_epi8(':'),
                  bracket = _mm_set1_epi8('['), brace = _mm_set1_epi8('{');
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        if (_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)))
            break;
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, comma), _mm_cmpeq_epi8(v, colon)),
                                 _mm_or_si128(_mm_cmpeq_epi8(v, bracket), _mm_cmpeq_epi8(v, brace)));
        *count += (uint64_t)__builtin_popcount((unsigned)_mm_movemask_epi8(m));
    }
    return i;
}
#else
static size_t count_starts_16(const char *s, size_t n, uint64_t *count)
{
    (void)s, (void)n, (void)count;
    return 0;
}
#endif

/* An upper bound of the values a JSON text holds: each comma, colon or opening bracket
 * outside strings starts at most one more. 16 bytes at a time outside strings (10 MB of
 * numbers: a byte at a time, this ran as long as reading them). */
static uint64_t json_value_bound(const char *s, size_t n)
{
    static const unsigned char starts[256] = { [','] = 1, [':'] = 1, ['['] = 1, ['{'] = 1, ['"'] = 2 };
    uint64_t count = 1;
    for (size_t i = 0; i < n; i++) {
        i += count_starts_16(s + i, n - i, &count);
        if (i >= n)
            break;
        unsigned char k = starts[(unsigned char)s[i]];
        count += k & 1;
        if (k == 2)                                  /* a string: to its closing quote */
            for (i++; i < n && s[i] != '"'; i++)
                i += s[i] == '\\';
    }
    return count;
}

/* Parses len bytes of the body as the request's JSON object (values bounded first), its
 * inputs' numeric data arrays read straight into *pre (oip_json_data.h: jansson makes no
 * json_t of each number). NULL with *status and jerr (status 400 with jerr.text set:
 * malformed). */
static json_t *parse_json_part(const struct oip_body *body, size_t len, int *status, json_error_t *jerr,
                               struct oip_json_data **pre)
{
    memset(jerr, 0, sizeof *jerr);
    if (json_value_bound(body->buf, len) > body->max_values) {
        *status = 413;
        return NULL;
    }
    *status = 400;
    return oip_json_data_load(body->buf, len, JSON_REJECT_DUPLICATES, jerr, pre);
}

/* The JSON part's length as the request gives it: Inference-Header-Content-Length (it may
 * pass the body's end: see parse_body), else the whole body. 0, or -1 answered. */
static int json_part_length(struct gj_req *r, const struct oip_body *body, const char *hl, size_t *len)
{
    *len = body->len;
    if (!hl) {
        const char *ct = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (ct && !gj_http_is_json_type(ct)) {
            oip_error(r, 415, "a body of type %.60s needs the %s header (binary tensor "
                      "extension); otherwise send application/json", ct, HDR_INFER_LEN);
            return -1;
        }
        return 0;
    }
    uint64_t v = 0;
    if (header_length(hl, &v) != 0 || v > SIZE_MAX - 1) {
        oip_error(r, 400, "%s is %.40s: it must be the length of the JSON part", HDR_INFER_LEN, hl);
        return -1;
    }
    *len = (size_t)v;
    return 0;
}

/* The JSON part of the body (all of it, or Inference-Header-Content-Length bytes). Where
 * that header's length is past the body's end, or its JSON ends early, and the whole body is
 * one JSON object, the whole body is taken: tritonclient adds the header to the headers dict
 * its caller passes, so a client reusing one dict (for its API key, say) sends the length of
 * an earlier binary request with a later JSON one. *pre: the values of the data arrays read
 * from the text (parse_json_part). NULL answered, *pre NULL. */
static json_t *parse_body(struct gj_req *r, const struct oip_body *body, size_t *json_len,
                          struct oip_json_data **pre)
{
    const char *hl = gj_req_header(r, HDR_INFER_LEN);
    if (json_part_length(r, body, hl, json_len) != 0)
        return NULL;
    if (*json_len == 0 || body->len == 0) {
        oip_error(r, 400, "the inference request is empty");
        return NULL;
    }
    int status = 400;
    json_error_t jerr = { 0 };
    size_t given = *json_len;
    r->json_bytes = given <= body->len ? given : body->len;   /* parsed below (http_server.c trims after) */
    json_t *req = given <= body->len ? parse_json_part(body, given, &status, &jerr, pre) : NULL;
    if (!req && hl && status != 413 && given != body->len &&
        (given > body->len || json_error_code(&jerr) == json_error_premature_end_of_input)) {
        json_error_t whole_err;
        int whole_status;
        r->json_bytes = body->len;
        req = parse_json_part(body, body->len, &whole_status, &whole_err, pre);
        if (req)
            *json_len = body->len;
    }
    if (!req && given > body->len)
        oip_error(r, 400, "%s is %zu: it must be the length of the JSON part (at most the body's %zu bytes)",
                  HDR_INFER_LEN, given, body->len);
    else if (!req && status == 413)
        oip_error(r, 413, "the inference request holds more values than model '%s' takes (at most %llu with "
                  "its structure)", r->params[0], (unsigned long long)body->max_values);
    else if (!req)
        oip_error(r, 400, "malformed JSON in the inference request at line %d, column %d: %s", jerr.line,
                  jerr.column, jerr.text);
    else if (!json_is_object(req)) {
        oip_error(r, 400, "the inference request must be a JSON object");
        json_decref(req);
        req = NULL;
    }
    if (!req) {
        oip_json_data_free(*pre);
        *pre = NULL;
    }
    return req;
}

/* ---- infer: the request ------------------------------------------------------------------- */

struct out_req {
    size_t model_index;              /* into io.outputs */
    int binary;
    uint64_t classes;                /* 0: no classification */
};

/* One inference request as it is checked and run. */
struct infer_call {
    json_t *req;                     /* the JSON part */
    struct oip_json_data *pre;       /* its inputs' data arrays, read from the text */
    const unsigned char *bin;        /* the binary tensors after it, not yet read */
    size_t bin_len;
    gj_served_model *m;
    struct oip_model_io io;
    const json_t *rparams;           /* the request's parameters */
    int64_t timeout_us;
    int binary_default;              /* parameters.binary_data_output */
    struct oip_tensor *in;           /* one per model input, in the request's order */
    size_t n_in;
    int64_t samples;                 /* the batch size (batched models) */
    struct out_req *out;
    size_t n_out;
    char msg[1024];
};

static const char *model_name(const struct infer_call *c)
{
    return gj_served_model_name(c->m);
}

/* The request's parameters as Triton takes them: timeout (microseconds in the queue),
 * priority and the sequence fields (this server has no priority levels nor sequence
 * batching: accepted, no effect, as Triton does for such a model), binary_data_output, and
 * any other of type string, integer or boolean (ignored). 0, or -1 answered. */
int oip_check_parameters(const json_t *params, int64_t *timeout_us, int *binary_default, struct gj_error *err)
{
    if (params && !json_is_object(params))
        return oip_refuse(err, 400, "Unable to parse 'parameters': it must be an object");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)params, key, v) {
        int ok = json_is_string(v) || json_is_integer(v) || json_is_boolean(v);
        if (strcmp(key, "timeout") == 0)
            ok = json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= MAX_TIMEOUT_US;
        else if (strcmp(key, "priority") == 0)
            ok = json_is_integer(v) && json_integer_value(v) >= 0;
        else if (strcmp(key, "sequence_start") == 0 || strcmp(key, "sequence_end") == 0 ||
                 strcmp(key, "binary_data_output") == 0)
            ok = json_is_boolean(v);
        else if (strcmp(key, "sequence_id") == 0)
            ok = json_is_string(v) || (json_is_integer(v) && json_integer_value(v) >= 0);
        if (!ok)
            return oip_refuse(err, 400, "parameter '%s' has invalid type%s", key,
                              strcmp(key, "timeout") == 0 ? ": timeout is an integer number of microseconds (0 to "
                              "3600000000)" : ". It should be either 'int', 'bool', or 'string'.");
    }
    *timeout_us = (int64_t)json_integer_value(json_object_get(params, "timeout"));
    if (binary_default)
        *binary_default = json_is_true(json_object_get(params, "binary_data_output"));
    return 0;
}

static int check_parameters(struct gj_req *r, struct infer_call *c)
{
    const json_t *id = json_object_get(c->req, "id");
    if (id && !json_is_string(id)) {
        oip_error(r, 400, "Unable to parse 'id': it must be a string");
        return -1;
    }
    c->rparams = json_object_get(c->req, "parameters");
    struct gj_error err = { 0 };
    if (oip_check_parameters(c->rparams, &c->timeout_us, &c->binary_default, &err) != 0) {
        oip_error(r, err.status, "%s", err.message);
        return -1;
    }
    return 0;
}

/* "[-1,1,256,256]" */
static void shape_text(const int64_t *dims, int rank, int batch, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[%s", batch ? "-1" : "");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, i || batch ? "," : "", dims[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

/* t's datatype and shape against the model's input tc (and the other inputs' batch size). 0,
 * or -1 with c->msg. */
static int check_input(struct infer_call *c, const struct gj_tensor_config *tc, const struct oip_tensor *t)
{
    if (t->elem_type != tc->elem_type) {
        snprintf(c->msg, sizeof c->msg, "inference input '%s' data-type is '%s', but model '%s' expects '%s'",
                 t->name, onnx_elem_triton_name(t->elem_type), model_name(c), onnx_elem_triton_name(tc->elem_type));
        return -1;
    }
    int b = c->io.batched, ok = t->rank == tc->rank + b;
    for (int k = 0; ok && k < tc->rank; k++)
        ok = tc->dims[k] < 0 || t->dims[k + b] == tc->dims[k];
    if (!ok) {
        char want[128], got[128];
        shape_text(tc->dims, tc->rank, b, want, sizeof want);
        shape_text(t->dims, t->rank, 0, got, sizeof got);
        snprintf(c->msg, sizeof c->msg, "unexpected shape for input '%s' for model '%s'. Expected %s, got %s",
                 t->name, model_name(c), want, got);
        return -1;
    }
    if (!b)
        return 0;
    if (t->dims[0] < 1 || t->dims[0] > c->io.max_batch_size) {
        snprintf(c->msg, sizeof c->msg, "inference request batch-size must be <= %d for '%s' (input '%s' has "
                 "%" PRId64 ")", c->io.max_batch_size, model_name(c), t->name, t->dims[0]);
        return -1;
    }
    if (c->samples && t->dims[0] != c->samples) {
        snprintf(c->msg, sizeof c->msg, "input '%s' batch size %" PRId64 " does not match other inputs (%" PRId64
                 ") for '%s'", t->name, t->dims[0], c->samples, model_name(c));
        return -1;
    }
    c->samples = t->dims[0];
    return 0;
}

static int find_tensor(const struct gj_tensor_config *list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* Triton's message for inputs the request lacks. */
static void missing_inputs(struct infer_call *c, const unsigned char *given)
{
    size_t n = (size_t)snprintf(c->msg, sizeof c->msg, "expected %zu inputs but got %zu inputs for model '%s'. "
                                "Missing required input(s) [", c->io.n_inputs, c->n_in, model_name(c));
    for (size_t i = 0, k = 0; i < c->io.n_inputs && n < sizeof c->msg; i++)
        if (!given[i])
            n += (size_t)snprintf(c->msg + n, sizeof c->msg - n, "%s'%s'", k++ ? ", " : "", c->io.inputs[i].name);
    if (n < sizeof c->msg)
        snprintf(c->msg + n, sizeof c->msg - n, "]. Please provide all required input(s).");
}

/* Input i of the request: its head, the model's input it is, its checks, its data. */
static int read_input(struct infer_call *c, const json_t *jt, size_t i, unsigned char *given)
{
    struct oip_tensor *t = &c->in[i];
    if (oip_tensor_head(jt, t, c->msg, sizeof c->msg))
        return -1;
    int k = find_tensor(c->io.inputs, c->io.n_inputs, t->name);
    if (k < 0) {
        snprintf(c->msg, sizeof c->msg, "unexpected inference input '%s' for model '%s'", t->name, model_name(c));
        return -1;
    }
    if (given[k]) {
        snprintf(c->msg, sizeof c->msg, "input '%s' is given more than once", t->name);
        return -1;
    }
    given[k] = 1;
    if (check_input(c, &c->io.inputs[k], t))
        return -1;
    if (oip_tensor_read(jt, oip_json_data_for(c->pre, i), &c->bin, &c->bin_len, t, c->msg, sizeof c->msg))
        return -1;
    oip_json_data_drop(c->pre, i);          /* the values are in t now: one copy at a time */
    if (t->elem_type != ONNX_ELEM_STRING)
        json_object_del((json_t *)jt, "data");
    return 0;
}

/* Every input, each once, checked and read; then no binary data may be left. 0, or -1
 * answered (400). */
static int read_inputs(struct gj_req *r, struct infer_call *c)
{
    const json_t *inputs = json_object_get(c->req, "inputs");
    if (!json_is_array(inputs) || json_array_size(inputs) == 0) {
        oip_error(r, 400, "inputs must be a non-empty array: model '%s' takes %zu input(s)", model_name(c),
                  c->io.n_inputs);
        return -1;
    }
    size_t n = json_array_size(inputs);
    unsigned char given[GJ_MODEL_MAX_TENSORS + 1] = { 0 };
    c->in = calloc(n, sizeof *c->in);
    if (!c->in) {
        oip_error(r, 500, "out of memory");
        return -1;
    }
    c->n_in = n;
    int rc = n > c->io.n_inputs ? -1 : 0;
    if (rc)
        snprintf(c->msg, sizeof c->msg, "expected %zu inputs but got %zu inputs for model '%s'", c->io.n_inputs, n,
                 model_name(c));
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = read_input(c, json_array_get(inputs, i), i, given);
    if (rc == 0 && n < c->io.n_inputs) {
        missing_inputs(c, given);
        rc = -1;
    }
    if (rc == 0 && c->bin_len) {
        snprintf(c->msg, sizeof c->msg, "%zu bytes of binary data after the JSON that no input's "
                 "binary_data_size accounts for", c->bin_len);
        rc = -1;
    }
    if (rc)
        oip_error(r, 400, "%s", c->msg);
    return rc;
}

/* One listed output: its name and parameters. 0, or -1 with c->msg. */
static int read_output(struct infer_call *c, const json_t *ro, struct out_req *o, unsigned char *seen)
{
    const char *on = json_string_value(json_object_get(ro, "name"));
    int k = on ? find_tensor(c->io.outputs, c->io.n_outputs, on) : -1;
    if (k < 0) {
        snprintf(c->msg, sizeof c->msg, "unexpected inference output '%.200s' for model '%s'", on ? on : "",
                 model_name(c));
        return -1;
    }
    if (seen[k]) {
        snprintf(c->msg, sizeof c->msg, "output '%s' is requested more than once", on);
        return -1;
    }
    seen[k] = 1;
    const json_t *op = json_object_get(ro, "parameters"), *bd = json_object_get(op, "binary_data"),
                 *cls = json_object_get(op, "classification");
    /* a listed output is JSON unless it says binary_data (binary_data_output is for the
     * outputs not listed), as Triton's CheckBinaryOutputData */
    *o = (struct out_req){ (size_t)k, json_is_true(bd), 0 };
    if ((op && !json_is_object(op)) || (bd && !json_is_boolean(bd))) {
        snprintf(c->msg, sizeof c->msg, "Unable to parse 'binary_data' of output '%s'", on);
        return -1;
    }
    if (cls && (!json_is_integer(cls) || json_integer_value(cls) < 0)) {
        snprintf(c->msg, sizeof c->msg, "Unable to set 'classification' of output '%s': it must be an integer "
                 ">= 0", on);
        return -1;
    }
    o->classes = cls ? (uint64_t)json_integer_value(cls) : 0;
    if (json_object_get(op, "shared_memory_region")) {
        snprintf(c->msg, sizeof c->msg, "output '%s': shared memory is not supported by this server", on);
        return -1;
    }
    return 0;
}

/* The outputs asked for (all, in the model's order, when none are listed). 0, or -1
 * answered. */
static int check_outputs(struct gj_req *r, struct infer_call *c)
{
    const json_t *outs = json_object_get(c->req, "outputs");
    if (outs && !json_is_array(outs)) {
        oip_error(r, 400, "outputs must be an array");
        return -1;
    }
    size_t n = json_array_size(outs) ? json_array_size(outs) : c->io.n_outputs;
    c->out = calloc(n ? n : 1, sizeof *c->out);
    if (!c->out) {
        oip_error(r, 500, "out of memory");
        return -1;
    }
    c->n_out = n;
    unsigned char seen[GJ_MODEL_MAX_TENSORS + 1] = { 0 };
    if (!json_array_size(outs)) {
        for (size_t i = 0; i < n; i++)
            c->out[i] = (struct out_req){ i, c->binary_default, 0 };
        return 0;
    }
    if (n > c->io.n_outputs) {
        oip_error(r, 400, "%zu outputs requested: model '%s' has %zu", n, model_name(c), c->io.n_outputs);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (read_output(c, json_array_get(outs, i), &c->out[i], seen)) {
            oip_error(r, 400, "%s", c->msg);
            return -1;
        }
    return 0;
}

/* ---- infer: the response ------------------------------------------------------------------ */

/* Sends body (len bytes, malloc'd, taken) compressed as Accept-Encoding asks; json_len: the
 * JSON part's length when binary outputs follow it (Inference-Header-Content-Length, of
 * the uncompressed body as Triton's), 0 for a JSON body. */
static void send_body(struct gj_req *r, char *body, size_t len, size_t json_len)
{
    enum oip_coding coding = oip_accept_coding(gj_req_header(r, MHD_HTTP_HEADER_ACCEPT_ENCODING));
    if (coding != OIP_IDENTITY) {
        char *z;
        size_t zl;
        if (oip_deflate(body, len, coding, &z, &zl) != 0) {
            free(body);
            oip_error(r, 500, "out of memory compressing the response");
            return;
        }
        free(body);
        body = z;
        len = zl;
    }
    struct MHD_Response *mr = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!mr) {
        free(body);
        oip_error(r, 500, "out of memory");
        return;
    }
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, json_len ? "application/octet-stream"
                                                                       : "application/json");
    if (json_len) {
        char hl[32];
        snprintf(hl, sizeof hl, "%zu", json_len);
        MHD_add_response_header(mr, HDR_INFER_LEN, hl);
    }
    if (coding != OIP_IDENTITY)
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_ENCODING, oip_coding_name(coding));
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    gj_respond(r, 200, mr, len);
}

/* Output i as it is sent: the batcher's tensor, or its classification (owned). */
static int prepare_output(struct infer_call *c, const struct gj_tensor *g, const struct out_req *o,
                          struct oip_tensor *t, int *owned)
{
    struct oip_tensor v = { .elem_type = g->elem_type, .rank = g->rank, .data = g->data, .bytes = g->bytes };
    snprintf(v.name, sizeof v.name, "%s", g->name);
    memcpy(v.dims, g->dims, sizeof v.dims);
    *owned = 0;
    if (!o->classes) {
        *t = v;
        return 0;
    }
    size_t n_labels;
    const char *const *labels = gj_served_model_output_labels(c->m, o->model_index, &n_labels);
    if (oip_classify(&v, c->io.batched, o->classes, labels, n_labels, t, c->msg, sizeof c->msg))
        return -1;
    *owned = 1;
    return 0;
}

/* The output's JSON entry: name, datatype, shape and data or parameters.binary_data_size. */
static json_t *output_json(struct infer_call *c, const struct oip_tensor *t, int binary)
{
    json_t *shape = json_array();
    for (int k = 0; shape && k < t->rank; k++)
        json_array_append_new(shape, json_integer(t->dims[k]));
    json_t *o = json_pack("{s:s, s:s, s:o}", "name", t->name, "datatype", onnx_elem_triton_name(t->elem_type),
                          "shape", shape);
    if (!o)
        return NULL;
    json_t *extra = binary ? json_pack("{s:I}", "binary_data_size", (json_int_t)oip_tensor_binary_size(t))
                           : oip_tensor_json(t, c->msg, sizeof c->msg);
    if (!extra) {
        json_decref(o);
        return NULL;
    }
    json_object_set_new(o, binary ? "parameters" : "data", extra);
    return o;
}

/* Writes the response: JSON, or JSON followed by the binary outputs in order. */
static void respond(struct gj_req *r, struct infer_call *c, const struct oip_tensor *t)
{
    char ver[24];
    snprintf(ver, sizeof ver, "%" PRId64, gj_served_model_version(c->m));
    json_t *outputs = json_array();
    size_t bin_bytes = 0;
    int precision = 9;   /* enough to give back every FP32 (and FP16, BF16) value exactly */
    for (size_t i = 0; outputs && i < c->n_out; i++) {
        if (!c->out[i].binary && (t[i].elem_type == ONNX_ELEM_DOUBLE || t[i].elem_type == ONNX_ELEM_UINT64))
            precision = 17;
        json_t *o = output_json(c, &t[i], c->out[i].binary);
        if (!o) {
            json_decref(outputs);
            oip_error(r, c->msg[0] ? 400 : 500, "%s", c->msg[0] ? c->msg : "out of memory");
            return;
        }
        json_array_append_new(outputs, o);
        bin_bytes += c->out[i].binary ? oip_tensor_binary_size(&t[i]) : 0;
    }
    json_t *resp = json_pack("{s:s, s:s}", "model_name", gj_served_model_name(c->m), "model_version", ver);
    const json_t *id = json_object_get(c->req, "id");
    if (resp && id)
        json_object_set(resp, "id", (json_t *)id);
    if (resp && outputs)
        json_object_set_new(resp, "outputs", outputs);
    else
        json_decref(outputs);
    char *text = resp && outputs ? json_dumps(resp, JSON_COMPACT | JSON_PRESERVE_ORDER |
                                              JSON_REAL_PRECISION(precision)) : NULL;
    json_decref(resp);
    size_t tl = text ? strlen(text) : 0;
    char *body = text ? realloc(text, tl + bin_bytes + 1) : NULL;
    if (!body) {
        free(text);
        oip_error(r, 500, "out of memory");
        return;
    }
    size_t off = tl;
    for (size_t i = 0; i < c->n_out; i++)
        if (c->out[i].binary) {
            oip_tensor_binary_write(&t[i], (unsigned char *)body + off);
            off += oip_tensor_binary_size(&t[i]);
        }
    send_body(r, body, off, bin_bytes ? tl : 0);
}

/* Encodes the batcher's outputs (classification applied) and answers. */
static void answer(struct gj_req *r, struct infer_call *c, const struct gj_tensor *g)
{
    struct oip_tensor *t = calloc(c->n_out, sizeof *t);
    int *owned = calloc(c->n_out, sizeof *owned);
    size_t i = 0;
    if (!t || !owned)
        oip_error(r, 500, "out of memory");
    else {
        for (; i < c->n_out; i++)
            if (prepare_output(c, &g[i], &c->out[i], &t[i], &owned[i]))
                break;
        if (i < c->n_out)
            oip_error(r, 400, "%s", c->msg);
        else
            respond(r, c, t);
    }
    for (size_t k = 0; t && owned && k < c->n_out; k++)
        if (owned[k])
            free(t[k].data);
    free(t);
    free(owned);
}

static int batch_status(int rc, const struct gj_error *err)
{
    if (err->status)
        return err->status;
    return rc == GJ_BATCH_EINVAL ? 400 : rc == GJ_BATCH_EFULL ? 429 : rc == GJ_BATCH_EFAILED ? 500 : 503;
}

/* The batcher's answer, on its thread: kept for the request, which is woken to send it. */
static void batch_answered(void *arg, int rc, const struct gj_batch_timing *timing, const struct gj_error *err)
{
    (void)timing;
    struct oip_body *b = arg;
    b->rc = rc;
    if (err)
        b->err = *err;
    atomic_store_explicit(&b->answered, 1, memory_order_release);
    gj_park_wake(&b->park);
    body_unref(b);
}

/* Sends the batch's answer (the request has left the park). */
static void answer_batch(struct gj_req *r, struct oip_body *b)
{
    struct infer_call *c = b->call;
    if (b->rc == GJ_BATCH_OK)
        answer(r, c, b->gout);
    else
        oip_error(r, batch_status(b->rc, &b->err), "%s", b->err.message);
    gj_tensors_free(b->gout, c->n_out);
}

/* Answers once the batcher has; until then the connection is suspended in the park and holds
 * no HTTP thread (the route's handle runs this again when it is resumed), so requests from
 * other connections are read meanwhile and can join the same batch. */
static void wait_for_batch(struct gj_req *r, struct oip_body *b)
{
    for (;;) {
        if (atomic_load_explicit(&b->answered, memory_order_acquire))
            break;
        int rc = gj_park_wait(&b->park, gj_park_now() + BATCH_RECHECK_S);
        if (rc == 0) {
            r->parked = 1;
            return;
        }
        if (rc < 0)
            break;
        gj_park_take_change(&b->park);   /* woken before it parked: look again */
    }
    gj_park_leave(&b->park);
    if (atomic_load_explicit(&b->answered, memory_order_acquire))
        answer_batch(r, b);
    else if (gj_park_gone(&b->park))
        r->gone = 1;                     /* its client left; the batcher's answer goes with b */
    else if (gj_park_revoked(&b->park))
        oip_error(r, 401, "the API key was revoked while the inference request waited");
    else
        oip_error(r, 503, "the server is stopping: the inference request was not run");
}

/* The request's inputs and outputs as the batcher takes them (pointing into b). 0, or -1. */
static int batch_tensors(struct oip_body *b)
{
    struct infer_call *c = b->call;
    b->gin = calloc(c->n_in, sizeof *b->gin);
    b->gout = calloc(c->n_out, sizeof *b->gout);
    if (!b->gin || !b->gout)
        return -1;
    for (size_t i = 0; i < c->n_in; i++) {
        const struct oip_tensor *t = &c->in[i];
        struct gj_tensor *g = &b->gin[i];
        snprintf(g->name, sizeof g->name, "%s", t->name);
        g->elem_type = t->elem_type;
        g->rank = t->rank;
        memcpy(g->dims, t->dims, sizeof g->dims);
        g->data = t->data;
        g->bytes = t->bytes;
    }
    for (size_t i = 0; i < c->n_out; i++)
        snprintf(b->gout[i].name, sizeof b->gout[i].name, "%s", c->io.outputs[c->out[i].model_index].name);
    return 0;
}

/* Submits the inputs to the model's shared batcher and waits for its answer, parked. */
static void run_call(struct gj_req *r, struct oip_body *b)
{
    struct infer_call *c = b->call;
    if (batch_tensors(b) != 0) {
        oip_error(r, 500, "out of memory");
        return;
    }
    struct gj_error err = { 0 };
    b->batcher = gj_batcher_acquire(c->m, &err);
    if (!b->batcher) {
        oip_error(r, 503, "model '%s' is not ready: %s", model_name(c), err.message);
        return;
    }
    gj_db_release(r->srv->db, gj_req_take_db(r));   /* hold no connection while waiting */
    gj_park_join(&b->park, r->conn, "", r->who.key_id);
    atomic_store(&b->refs, 2);                       /* the batcher's until it answers */
    int rc = gj_batcher_submit(b->batcher, b->gin, c->n_in, b->gout, c->n_out, c->timeout_us, batch_answered,
                               b, &err);
    if (rc != GJ_BATCH_OK) {
        atomic_store(&b->refs, 1);
        gj_park_leave(&b->park);
        oip_error(r, batch_status(rc, &err), "%s", err.message);
        return;
    }
    b->submitted = 1;
    wait_for_batch(r, b);
}

/* The outputs' data, where the batcher answered after the request had left (the server
 * stopping, its client gone) and nobody sent them. */
static void free_outputs(struct oip_body *b)
{
    if (b->call)
        gj_tensors_free(b->gout, b->call->n_out);
}

static void free_call(struct infer_call *c)
{
    for (size_t i = 0; c->in && i < c->n_in; i++)
        oip_tensor_free_data(&c->in[i]);
    free(c->in);
    free(c->out);
    gj_served_model_release(c->m);   /* NULL once the request's end took it */
    json_decref(c->req);
    oip_json_data_free(c->pre);
}

void oip_infer_handle(struct gj_req *r)
{
    struct oip_body *body = r->state;
    if (body->submitted) {                   /* resumed from the park */
        gj_park_take_change(&body->park);
        wait_for_batch(r, body);
        return;
    }
    if (decode_body(r, body) != 0)
        return;
    struct infer_call *c = calloc(1, sizeof *c);
    if (!c) {
        oip_error(r, 500, "out of memory");
        return;
    }
    body->call = c;
    size_t json_len = 0;
    c->req = parse_body(r, body, &json_len, &c->pre);
    if (!c->req)
        return;
    c->bin = (const unsigned char *)body->buf + json_len;
    c->bin_len = body->len - json_len;
    if (c->bin_len == 0) {   /* JSON only: the text is parsed; one copy at a time */
        free_body_text(body);
        body->len = body->cap = 0;
        c->bin = NULL;
    }
    if (oip_use_model(r, &c->m) != 0)
        return;
    if (oip_model_io(gj_served_model_config(c->m), &c->io) != 0)
        oip_error(r, 500, "model '%s' names no inputs or outputs", model_name(c));
    else if (check_parameters(r, c) == 0 && check_outputs(r, c) == 0 && read_inputs(r, c) == 0)
        run_call(r, body);
}

/* The request's end: its share of the state goes (the rest with the batcher's answer, when
 * that is still to come), then its references to the batcher and the model. */
void oip_infer_done(struct gj_req *r, int ok)
{
    (void)ok;
    struct oip_body *b = r->state;
    if (!b)
        return;
    r->state = NULL;
    gj_park_leave(&b->park);
    gj_batcher *batcher = b->batcher;
    gj_served_model *m = b->call ? b->call->m : NULL;
    b->batcher = NULL;
    if (b->call)
        b->call->m = NULL;
    body_unref(b);
    if (batcher)
        gj_batcher_release(batcher);   /* may wait for the answer: b is not touched after */
    gj_served_model_release(m);
}
