/*
 * routes_jobs.c — submit (JSON or multipart), list, get with long poll,
 * cancel, delete, outputs, and the Server-Sent Events history of a job.
 *
 * Submit validates everything (kind, params schema, inputs, the module's own
 * check) before anything is written; the job row, its uploaded inputs and
 * job_inputs go in one transaction, so a failure stores nothing.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <openssl/evp.h>

#include "common/fsutil.h"
#include "common/gj_kind.h"
#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/http/http_park.h"
#include "service/jobs/host_admission.h"
#include "service/http/http_server.h"
#include "service/jobs/job_cache.h"
#include "service/jobs/job_fields.h"
#include "service/base/log.h"
#include "service/http/multipart_related.h"
#include "service/db/notify.h"
#include "service/jobs/job_store.h"
#include "service/api/job_json.h"
#include "service/db/storage_quota.h"
#include "service/http/stream_outage.h"
#include "service/base/text_buf.h"

#define MAX_INPUTS 256
#define LIST_DEFAULT 50
#define LIST_MAX 200

static int is_final(const char *state)
{
    return gj_job_public_final(state);
}

static void respond_job(struct gj_req *r, int status, json_t *job)
{
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/jobs/%s", json_string_value(json_object_get(job, "id")));
    struct MHD_Response *resp = gj_respond_json(r, status, job);
    if (resp && (status == 201 || status == 200) && r->method[0] == 'P')
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, loc);
}

int gj_api_job_json(PGconn *c, const char *tenant, const char *id, json_t **job)
{
    return gj_job_read(c, tenant, id, job, NULL);
}

void gj_api_respond_job(struct gj_req *r, int status, json_t *job)
{
    respond_job(r, status, job);
}

/* ======================= submit ======================= */

struct mp_file {
    char name[128];
    struct gj_blob_writer *w;
    unsigned char sha[32];
    uint64_t size;
    int finished;            /* digest taken */
};

struct submit_state {
    int multipart;
    struct gj_mpr *mp;
    int in_txn;
    char *job_text;
    size_t job_len;
    int has_job;
    int cur;                 /* current part: -1 none, -2 the job part, else a file index */
    struct mp_file files[MAX_INPUTS];
    int n_files;
    int err_status;
    char err_field[160];
    char err_msg[300];
};

static void submit_fail(struct submit_state *s, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void submit_fail(struct submit_state *s, int status, const char *field, const char *fmt, ...)
{
    if (s->err_status)
        return;
    s->err_status = status;
    snprintf(s->err_field, sizeof s->err_field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err_msg, sizeof s->err_msg, fmt, ap);
    va_end(ap);
}

static void drop_files(struct submit_state *s)
{
    for (int i = 0; i < s->n_files; i++)
        if (s->files[i].w) {
            gj_blob_writer_abort(s->files[i].w);
            s->files[i].w = NULL;
        }
}

static int ctype_ok(const char *ct)
{
    if (!ct || !*ct || strlen(ct) > 255 || !strchr(ct, '/'))
        return 0;
    for (const char *p = ct; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            return 0;
    return 1;
}

/* The request's transaction, begun with the first uploaded part (the body is
 * complete by then: it was spooled while it arrived). 0, or -1 with s failed. */
static int submit_txn(struct gj_req *r, struct submit_state *s)
{
    if (s->in_txn)
        return 0;
    PGconn *c = gj_req_db(r);
    if (!c || gj_db_begin(c) != 0) {
        submit_fail(s, 503, NULL, "the database is not available; retry shortly");
        return -1;
    }
    s->in_txn = 1;
    return 0;
}

/* An uploaded input part: a blob writer in the request's transaction. */
static int file_part(struct gj_req *r, struct submit_state *s, const char *key, const char *content_type)
{
    if (!gj_safe_name(key) || strlen(key) > 100) {
        submit_fail(s, 422, "inputs", "input name '%.100s' is not a plain name", key);
        return -1;
    }
    for (int i = 0; i < s->n_files; i++)
        if (strcmp(s->files[i].name, key) == 0) {
            submit_fail(s, 422, "inputs", "input '%s' is given twice", key);
            return -1;
        }
    if (s->n_files >= MAX_INPUTS) {
        submit_fail(s, 422, "inputs", "more than %d inputs", MAX_INPUTS);
        return -1;
    }
    if (submit_txn(r, s) != 0)
        return -1;
    struct mp_file *f = &s->files[s->n_files];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", key);
    f->w = gj_blob_writer_open(r->db, r->who.tenant_id, ctype_ok(content_type) ? content_type
                                                                                 : "application/octet-stream", 0);
    if (!f->w) {
        submit_fail(s, 503, NULL, "the database is not available; retry shortly");
        return -1;
    }
    s->cur = s->n_files++;
    return 0;
}

static int mp_part_begin(void *ud, const struct gj_mpr_part *part)
{
    struct gj_req *r = ud;
    struct submit_state *s = r->state;
    const char *disp = gj_mpr_header(part, "Content-Disposition");
    char key[128];
    int rc = disp && gj_mime_type_is(disp, "form-data") ? gj_mime_param(disp, "name", key, sizeof key) : 0;
    if (rc != 1) {
        submit_fail(s, rc < 0 ? 422 : 400, rc < 0 ? "inputs" : NULL,
                    rc < 0 ? "a part's name is longer than 100 characters"
                           : "each part needs Content-Disposition: form-data; name=\"job\" or an input name");
        return -1;
    }
    if (strcmp(key, "job") != 0)
        return file_part(r, s, key, gj_mpr_header(part, "Content-Type"));
    if (s->has_job) {
        submit_fail(s, 400, "job", "the job part is given twice");
        return -1;
    }
    s->has_job = 1;
    s->cur = -2;
    return 0;
}

static int mp_part_data(void *ud, const char *data, size_t size)
{
    struct gj_req *r = ud;
    struct submit_state *s = r->state;
    if (s->cur >= 0) {
        if (gj_blob_writer_write(s->files[s->cur].w, data, size) == 0)
            return 0;
        submit_fail(s, 503, NULL, "the database is not available; retry shortly");
        return -1;
    }
    if (s->job_len + size > r->srv->cfg.max_json_bytes) {
        submit_fail(s, 413, "job", "the job part is over the limit of %llu bytes",
                    (unsigned long long)r->srv->cfg.max_json_bytes);
        return -1;
    }
    char *nb = realloc(s->job_text, s->job_len + size + 1);
    if (!nb) {
        submit_fail(s, 500, NULL, "out of memory");
        return -1;
    }
    s->job_text = nb;
    memcpy(s->job_text + s->job_len, data, size);
    s->job_len += size;
    s->job_text[s->job_len] = '\0';
    return 0;
}

static int mp_part_end(void *ud)
{
    struct gj_req *r = ud;
    struct submit_state *s = r->state;
    if (s->cur >= 0) {
        struct mp_file *f = &s->files[s->cur];
        gj_blob_writer_digest(f->w, f->sha);
        f->size = gj_blob_writer_size(f->w);
        f->finished = 1;
    }
    s->cur = -1;
    return 0;
}

static const struct gj_mpr_callbacks submit_mp_cb = { mp_part_begin, mp_part_data, mp_part_end };

static void submit_begin(struct gj_req *r)
{
    struct submit_state *s = calloc(1, sizeof *s);
    if (!s) {
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    s->cur = -1;
    r->state = s;
    const char *key = gj_req_header(r, "Idempotency-Key");
    if (key) {
        size_t n = strlen(key);
        int ok = n >= 1 && n <= 200;
        for (size_t i = 0; ok && i < n; i++)
            ok = (unsigned char)key[i] >= 0x21 && (unsigned char)key[i] <= 0x7e;
        if (!ok) {
            gj_problem(r, 400, "Idempotency-Key", "Idempotency-Key must be 1 to 200 visible ASCII characters");
            return;
        }
    }
    const char *ct = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct && gj_mime_type_is(ct, "multipart/form-data")) {
        char boundary[GJ_MPR_BOUNDARY_MAX + 1];
        const char *why = NULL;
        s->multipart = 1;
        if (gj_mpr_boundary(ct, boundary, &why) != 0 || !(s->mp = gj_mpr_new(boundary, &submit_mp_cb, r))) {
            gj_problem(r, 400, "Content-Type", "%s", why ? why : "out of memory");
            return;
        }
        gj_mpr_set_max_parts(s->mp, MAX_INPUTS + 1);
        r->body_mode = GJ_BODY_UPLOAD;   /* spooled, then parsed (upload_spool.h) */
        return;
    }
    if (ct && !gj_http_is_json_type(ct))
        gj_problem(r, 415, "Content-Type", "submit a job as application/json or multipart/form-data");
}

static int submit_data(struct gj_req *r, const char *buf, size_t len)
{
    struct submit_state *s = r->state;
    if (gj_mpr_feed(s->mp, buf, len) != 0 || s->err_status) {
        if (!s->err_status)
            submit_fail(s, 400, NULL, "malformed multipart/form-data body: %s", gj_mpr_error(s->mp));
        drop_files(s);
        gj_problem(r, s->err_status, s->err_field, "%s", s->err_msg);
        return -1;
    }
    return 0;
}

static void sha256_text(const char *text, size_t len, char hex[65])
{
    unsigned char md[32];
    unsigned int n = 0;
    EVP_Digest(text, len, md, &n, EVP_sha256(), NULL);
    gj_sha256_hex(md, hex);
}

static int int_field(json_t *v, json_int_t lo, json_int_t hi, json_int_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return -1;
    *out = json_integer_value(v);
    return 0;
}

/* An existing job under this key: 200 with it when the request is the same,
 * 409 when not. 1 answered, 0 no such job, -1 database error. */
static int idempotent_replay(struct gj_req *r, PGconn *c, const char *key, const char *hash)
{
    char id[GJ_UUID_LEN + 1], prior[65];
    int found = gj_job_find_idempotent(c, r->who.tenant_id, key, id, prior);
    if (found <= 0)
        return found;
    int same = strcmp(prior, hash) == 0;
    if (!same) {
        gj_problem(r, 409, "Idempotency-Key", "this Idempotency-Key was used for a different request (job %s)", id);
        return 1;
    }
    json_t *job = NULL;
    int rc = gj_job_read(c, r->who.tenant_id, id, &job, NULL);
    if (rc <= 0) {
        gj_problem(r, 409, "Idempotency-Key", "this Idempotency-Key was used for a job that is gone");
        return 1;
    }
    respond_job(r, 200, job);
    return 1;
}

int gj_api_idempotent_replay(struct gj_req *r, PGconn *c, const char *key, const char *hash)
{
    return idempotent_replay(r, c, key, hash);
}

/* A submit as checked: what gj_kind_validate and gj_queue_submit take. */
struct submit_req {
    const struct gj_kind *kind;
    json_t *params;                          /* borrowed from the body; NULL: {} */
    json_t *inputs;                          /* borrowed: name -> blob id */
    json_int_t priority, max_attempts, timeout_seconds;
    struct gj_input in[MAX_INPUTS + 1];      /* names and sizes, for the kind's checks */
    struct gj_submit_input sub[MAX_INPUTS];  /* names and blobs, for the queue */
    struct gj_submit_ref refs[MAX_INPUTS];   /* inputs from other jobs' outputs, for the queue */
    char ids[MAX_INPUTS][GJ_UUID_LEN + 1];
    size_t n_in, n_sub, n_json, n_refs;
    char hash[65];                           /* SHA-256 of the canonical request */
    struct gj_job_fields fields;             /* name, labels, callback_url (job_fields.h) */
};

/* The body's fields: kind, params, inputs, priority, max_attempts, timeout_seconds. 0, or -1
 * answered. */
static int check_body(struct gj_req *r, json_t *body, struct submit_req *q)
{
    if (!json_is_object(body)) {
        gj_problem(r, 400, NULL, "the body must be a JSON object: {kind, params, inputs, priority, max_attempts}");
        return -1;
    }
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) {
        if (strcmp(k, "kind") && strcmp(k, "params") && strcmp(k, "inputs") && strcmp(k, "priority") &&
            strcmp(k, "max_attempts") && strcmp(k, "timeout_seconds") && !gj_job_field_known(k)) {
            gj_problem(r, 422, k, "unknown field '%.100s'", k);
            return -1;
        }
    }
    json_t *jkind = json_object_get(body, "kind");
    if (!json_is_string(jkind)) {
        gj_problem(r, 422, "kind", "kind is required: a job kind name (GET /v1/kinds)");
        return -1;
    }
    q->kind = gj_kind_find(json_string_value(jkind));
    if (!q->kind) {
        gj_problem(r, 422, "kind", "unknown kind '%.100s' (GET /v1/kinds lists them)", json_string_value(jkind));
        return -1;
    }
    q->params = json_object_get(body, "params");
    if (q->params && !json_is_object(q->params)) {
        gj_problem(r, 422, "params", "params must be a JSON object");
        return -1;
    }
    q->inputs = json_object_get(body, "inputs");
    if (q->inputs && !json_is_object(q->inputs)) {
        gj_problem(r, 422, "inputs", "inputs must be an object of input name to blob id");
        return -1;
    }
    q->priority = 0;
    q->max_attempts = r->srv->cfg.default_max_attempts > 0 ? r->srv->cfg.default_max_attempts : 3;
    if (json_object_get(body, "priority") && int_field(json_object_get(body, "priority"), -1000, 1000, &q->priority)) {
        gj_problem(r, 422, "priority", "priority must be an integer from -1000 to 1000");
        return -1;
    }
    if (json_object_get(body, "max_attempts") &&
        int_field(json_object_get(body, "max_attempts"), 1, 100, &q->max_attempts)) {
        gj_problem(r, 422, "max_attempts", "max_attempts must be an integer from 1 to 100");
        return -1;
    }
    q->timeout_seconds = r->srv->cfg.job_timeout_seconds;
    if (json_object_get(body, "timeout_seconds") &&
        int_field(json_object_get(body, "timeout_seconds"), 0, GJ_JOB_TIMEOUT_MAX, &q->timeout_seconds)) {
        gj_problem(r, 422, "timeout_seconds", "timeout_seconds must be an integer from 0 (no limit) to %d (30 days)",
                   GJ_JOB_TIMEOUT_MAX);
        return -1;
    }
    struct gj_error fe;
    if (gj_job_fields_read(body, &r->srv->cfg, &q->fields, &fe) != 0) {
        gj_respond_error(r, &fe);
        return -1;
    }
    return 0;
}

static void add_input(struct submit_req *q, const char *name, uint64_t size, int owned)
{
    q->in[q->n_in++] = (struct gj_input){ name, NULL, size };
    q->sub[q->n_sub] = (struct gj_submit_input){ name, q->ids[q->n_sub], owned };
    q->n_sub++;
}

/* An input from another job's output ({"job", "output"}): the job must be this tenant's and
 * able to produce it; its size is known once it has. gj_queue_submit checks again, under a
 * lock. 0, or -1 answered. */
static int ref_input(struct gj_req *r, PGconn *c, struct submit_req *q, const char *name, const char *job,
                     const char *output)
{
    char field[160];
    snprintf(field, sizeof field, "inputs.%.100s", name);
    long long size;
    struct gj_error err;
    if (gj_job_output_promised(c, r->who.tenant_id, job, output, field, &size, &err) != 0) {
        gj_respond_error(r, &err);
        return -1;
    }
    q->in[q->n_in++] = (struct gj_input){ name, NULL, size >= 0 ? (uint64_t)size : GJ_INPUT_SIZE_UNKNOWN };
    q->refs[q->n_refs++] = (struct gj_submit_ref){ name, job, output };
    return 0;
}

/* Inputs given as blob ids (this tenant's): into q and canon (name -> id). 0, or -1 answered. */
static int json_inputs(struct gj_req *r, PGconn *c, struct submit_req *q, json_t *canon)
{
    const char *k;
    json_t *v;
    char field[160];
    json_object_foreach(q->inputs, k, v) {
        snprintf(field, sizeof field, "inputs.%.100s", k);
        if (!gj_safe_name(k) || strlen(k) > 100) {
            gj_problem(r, 422, field, "input names are plain names of at most 100 characters");
            return -1;
        }
        const char *job, *output;
        struct gj_error fe;
        int ref = gj_input_ref_parse(k, v, &job, &output, &fe);
        if (ref < 0) {
            gj_respond_error(r, &fe);
            return -1;
        }
        if (ref) {
            if (ref_input(r, c, q, k, job, output) != 0)
                return -1;
            json_object_set(canon, k, v);
            continue;
        }
        if (!json_is_string(v) || !gj_is_uuid(json_string_value(v))) {
            gj_problem(r, 422, field, "an input is the id of an uploaded blob (POST /v1/blobs), "
                                      "or {\"job\": ID, \"output\": NAME}");
            return -1;
        }
        struct gj_blob_info info;
        int rc = gj_blob_lookup(c, r->who.tenant_id, json_string_value(v), &info);
        if (rc <= 0) {
            if (rc < 0)
                gj_respond_unavailable(r);
            else
                gj_problem(r, 422, field, "no blob %s", json_string_value(v));
            return -1;
        }
        snprintf(q->ids[q->n_sub], sizeof q->ids[q->n_sub], "%s", info.id);
        json_object_set_new(canon, k, json_string(info.id));
        add_input(q, k, info.size, 0);
    }
    q->n_json = q->n_sub;
    return 0;
}

/* Inputs uploaded as parts: digested (canon gets "sha256:<hex>") and committed as blobs
 * the job will own (in the request's transaction). 0, or -1 answered. */
static int uploaded_inputs(struct gj_req *r, struct submit_state *s, struct submit_req *q, json_t *canon)
{
    for (int i = 0; s && i < s->n_files; i++) {
        struct mp_file *f = &s->files[i];
        if (json_object_get(canon, f->name)) {
            char field[160];
            snprintf(field, sizeof field, "inputs.%s", f->name);
            gj_problem(r, 422, field, "input '%s' is given twice", f->name);
            return -1;
        }
        if (!f->finished) {
            gj_blob_writer_digest(f->w, f->sha);
            f->size = gj_blob_writer_size(f->w);
            f->finished = 1;
        }
        char hex[65], tag[80];
        gj_sha256_hex(f->sha, hex);
        snprintf(tag, sizeof tag, "sha256:%s", hex);
        json_object_set_new(canon, f->name, json_string(tag));
        add_input(q, f->name, f->size, 1);
    }
    return 0;
}

/* The request's hash (for Idempotency-Key) over kind, params, inputs, the numbers and the
 * workflow fields. */
static int hash_request(struct submit_req *q, json_t *canon_inputs)
{
    const struct gj_job_fields *f = &q->fields;
    json_t *canon = json_pack("{s:s, s:o, s:O, s:I, s:I, s:s*, s:O*, s:s*}", "kind", q->kind->name, "params",
                              q->params ? json_incref(q->params) : json_object(), "inputs", canon_inputs,
                              "priority", q->priority, "max_attempts", q->max_attempts, "name", f->name,
                              "labels", f->labels, "callback_url", f->callback_url);
    if (canon && q->timeout_seconds)   /* only when set: the hashes of earlier requests stay */
        json_object_set_new(canon, "timeout_seconds", json_integer(q->timeout_seconds));
    char *ctext = canon ? json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(canon);
    if (!ctext)
        return -1;
    sha256_text(ctext, strlen(ctext), q->hash);
    free(ctext);
    return 0;
}

/* The kind's checks (schema, inputs, its own validate), then host memory admission.
 * 0, or -1 answered. */
static int kind_check(struct gj_req *r, PGconn *c, struct submit_req *q)
{
    json_t *empty = json_object();
    struct gj_job job = { q->kind->name, q->params ? q->params : empty, q->in, q->n_in };
    struct gj_error err = { 0 };
    gj_error_clear(&err);
    int rc = gj_kind_validate(q->kind, &job, &err);
    int admit = rc == 0 ? gj_host_admit(c, q->kind, &job, &err) : 1;
    json_decref(empty);
    if (admit < 0)
        gj_respond_unavailable(r);
    if (admit <= 0)
        return admit;
    char f2[200];
    if (!err.field[0] || strncmp(err.field, "inputs", 6) == 0)
        snprintf(f2, sizeof f2, "%s", err.field);
    else
        snprintf(f2, sizeof f2, "params.%s", err.field);
    int st = err.status >= 400 && err.status < 500 ? err.status : 422;
    gj_problem(r, st, f2[0] ? f2 : "params", "%s", err.message[0] ? err.message : "invalid job");
    return -1;
}

/* Drops what the request stored (uploaded blobs, the transaction). */
static void end_txn(PGconn *c, struct submit_state *s)
{
    if (s)
        drop_files(s);
    gj_db_rollback(c);
    if (s)
        s->in_txn = 0;
}

/* A submit refused as gj_queue_submit words it; a 429 says when to try again. */
static void respond_refusal(struct gj_req *r, const struct gj_error *err)
{
    struct MHD_Response *resp = gj_respond_error(r, err);
    if (resp && err->status == 429)
        MHD_add_response_header(resp, "Retry-After", "5");
}

/* The jobs whose outputs q takes, locked as gj_queue_submit will (FOR SHARE) but before the
 * uploaded files' commits lock the tenant's storage count: a finishing or deleted job takes its
 * row, then that count, so taking them the other way round could wait in a cycle. 0 or -1. */
static int lock_upstream(PGconn *c, const char *tenant_id, const struct submit_req *q)
{
    for (size_t i = 0; i < q->n_refs; i++) {
        /* a bad id: gj_queue_submit says what is wrong with it */
        if (gj_job_lock_shared(c, tenant_id, q->refs[i].job) != 0)
            return -1;
    }
    return 0;
}

/* Stores the job (uploaded blobs, the row, job_inputs: one transaction) and answers 201,
 * or the existing job of a concurrent submit with the same Idempotency-Key. */
static void store_job(struct gj_req *r, PGconn *c, struct submit_state *s, struct submit_req *q, const char *ikey)
{
    if (!(s && s->in_txn) && gj_db_begin(c) != 0) {
        gj_respond_unavailable(r);
        return;
    }
    if (s && s->n_files > 0 && lock_upstream(c, r->who.tenant_id, q) != 0) {
        end_txn(c, s);
        gj_respond_unavailable(r);
        return;
    }
    for (int i = 0; s && i < s->n_files; i++) {
        int rc = gj_blob_writer_commit(s->files[i].w, NULL, q->ids[q->n_json + (size_t)i]);
        s->files[i].w = NULL;
        if (rc != 0) {
            end_txn(c, s);
            if (rc == GJ_BLOB_OVER_QUOTA)
                gj_respond_over_quota(r, gj_storage_last_refusal());
            else
                gj_respond_unavailable(r);
            return;
        }
    }
    struct gj_submit sub = { .tenant_id = r->who.tenant_id, .kind = q->kind->name, .params = q->params,
                             .priority = (int)q->priority, .max_attempts = (int)q->max_attempts,
                             .idempotency_key = ikey, .request_hash = q->hash, .inputs = q->sub,
                             .n_inputs = q->n_sub, .refs = q->refs, .n_refs = q->n_refs, .name = q->fields.name, .labels = q->fields.labels,
                             .callback_url = q->fields.callback_url, .timeout_seconds = (int)q->timeout_seconds,
                             .max_chain_depth = r->srv->cfg.max_chain_depth,
                             .max_waiting_jobs = r->srv->cfg.max_waiting_jobs };
    struct gj_submitted out;
    int rc = gj_queue_submit(c, &sub, &out);
    if (rc == GJ_SUBMIT_OK && gj_db_commit(c) != 0)
        rc = gj_error_status(&out.err, 503, NULL, "the job could not be committed");
    if (rc != GJ_SUBMIT_OK) {
        end_txn(c, s);
        if (rc != GJ_SUBMIT_DUPLICATE || idempotent_replay(r, c, ikey ? ikey : "", q->hash) <= 0)
            respond_refusal(r, &out.err);   /* (a concurrent submit with the same key won: replayed) */
        return;
    }
    if (s)
        s->in_txn = 0;
    json_t *job = NULL;
    if (gj_job_read(c, r->who.tenant_id, out.id, &job, NULL) != 1) {
        gj_respond_unavailable(r);
        return;
    }
    respond_job(r, 201, job);
}

static void submit(struct gj_req *r, json_t *body, struct submit_state *s)
{
    PGconn *c = gj_req_db(r);
    const char *ikey = gj_req_header(r, "Idempotency-Key");
    if (!c) {
        gj_respond_unavailable(r);
        return;
    }
    struct submit_req *q = calloc(1, sizeof *q);
    json_t *canon = json_object();
    if (!q || !canon) {
        gj_problem(r, 500, NULL, "out of memory");
        goto out;
    }
    if (check_body(r, body, q) != 0)
        goto out;
    if ((q->inputs ? json_object_size(q->inputs) : 0) + (size_t)(s ? s->n_files : 0) > MAX_INPUTS) {
        gj_problem(r, 422, "inputs", "more than %d inputs", MAX_INPUTS);
        goto out;
    }
    if (json_inputs(r, c, q, canon) != 0 || uploaded_inputs(r, s, q, canon) != 0)
        goto out;
    if (hash_request(q, canon) != 0) {
        gj_problem(r, 500, NULL, "out of memory");
        goto out;
    }
    if (ikey) {
        int rc = idempotent_replay(r, c, ikey, q->hash);
        if (rc != 0) {
            if (rc < 0)
                gj_respond_unavailable(r);
            goto out;
        }
    }
    if (kind_check(r, c, q) == 0)
        store_job(r, c, s, q, ikey);
out:
    json_decref(canon);
    free(q);
}

static void submit_handle(struct gj_req *r)
{
    struct submit_state *s = r->state;
    if (!s->multipart) {
        if (!r->json) {
            gj_problem(r, 400, NULL, "a JSON body is required: {kind, params, inputs}");
            return;
        }
        submit(r, r->json, NULL);
        return;
    }
    if (!s->err_status && gj_mpr_finish(s->mp) != 0)
        submit_fail(s, 400, NULL, "the multipart/form-data body is incomplete: %s", gj_mpr_error(s->mp));
    if (!s->err_status && !s->has_job)
        submit_fail(s, 400, "job", "a multipart submit needs a 'job' part with the job JSON");
    json_t *body = NULL;
    if (!s->err_status) {
        json_error_t jerr;
        body = json_loadb(s->job_text ? s->job_text : "", s->job_len, JSON_REJECT_DUPLICATES, &jerr);
        if (!body)
            submit_fail(s, 400, "job", "malformed JSON in the job part: %s", jerr.text);
    }
    if (s->err_status) {
        drop_files(s);
        gj_problem(r, s->err_status, s->err_field, "%s", s->err_msg);
        return;
    }
    submit(r, body, s);
    json_decref(body);
}

static void submit_done(struct gj_req *r, int ok)
{
    (void)ok;
    struct submit_state *s = r->state;
    if (!s)
        return;
    if (s->mp)
        gj_mpr_free(s->mp);
    if (r->db)
        drop_files(s);
    else
        for (int i = 0; i < s->n_files; i++)
            s->files[i].w = NULL;   /* connection gone with its transaction */
    if (s->in_txn && r->db)
        gj_db_rollback(r->db);
    free(s->job_text);
    free(s);
    r->state = NULL;
}

/* ======================= list ======================= */

struct label_scan {
    json_t *filter;
    struct gj_error *e;
    int failed;
};

static enum MHD_Result scan_label(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct label_scan *s = cls;
    if (strcmp(key, "label") != 0)
        return MHD_YES;
    s->failed = gj_label_filter_add(s->filter, value, s->e);
    return s->failed ? MHD_NO : MHD_YES;
}

/* The request's ?label=KEY=VALUE filters (repeatable) as one JSON object text for jsonb
 * containment (labels @> it); *out NULL when there is none (caller frees). 0, or -1 with e. */
static int label_filter(struct gj_req *r, char **out, struct gj_error *e)
{
    *out = NULL;
    struct label_scan s = { json_object(), e, 0 };
    if (!s.filter)
        return gj_error_status(e, 500, NULL, "out of memory");
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, scan_label, &s);
    if (!s.failed && json_object_size(s.filter) > 0 && !(*out = json_dumps(s.filter, JSON_COMPACT)))
        s.failed = gj_error_status(e, 500, NULL, "out of memory");
    json_decref(s.filter);
    return s.failed ? -1 : 0;
}

static void jobs_list(struct gj_req *r)
{
    const char *state = gj_req_query(r, "state"), *kind = gj_req_query(r, "kind"),
               *after = gj_req_query(r, "created_after"), *before = gj_req_query(r, "created_before"),
               *limit_s = gj_req_query(r, "limit"), *cursor = gj_req_query(r, "cursor");
    if (state) {
        if (!gj_job_public_state_known(state)) {
            gj_problem(r, 400, "state", "state is one of queued, waiting, running, succeeded, failed, canceled");
            return;
        }
    }
    const char *name = gj_req_query(r, "name");
    if (name && (strlen(name) == 0 || strlen(name) > 4 * GJ_JOB_NAME_MAX)) {
        gj_problem(r, 400, "name", "name is a job name (1 to %d characters)", GJ_JOB_NAME_MAX);
        return;
    }
    char *labels = NULL;
    struct gj_error fe;
    if (label_filter(r, &labels, &fe) != 0) {
        gj_respond_error(r, &fe);
        return;
    }
    if (kind && (strlen(kind) == 0 || strlen(kind) > 64)) {
        gj_problem(r, 400, "kind", "kind is a kind name");
        return;
    }
    if (after && !gj_is_timestamp(after)) {
        gj_problem(r, 400, "created_after", "created_after is an RFC 3339 timestamp");
        return;
    }
    if (before && !gj_is_timestamp(before)) {
        gj_problem(r, 400, "created_before", "created_before is an RFC 3339 timestamp");
        return;
    }
    long limit = LIST_DEFAULT;
    if (limit_s) {
        char *end;
        limit = strtol(limit_s, &end, 10);
        if (!*limit_s || *end || limit < 1 || limit > LIST_MAX) {
            gj_problem(r, 400, "limit", "limit is an integer from 1 to %d", LIST_MAX);
            return;
        }
    }
    char cts[40], cid[GJ_UUID_LEN + 1];
    if (cursor && gj_cursor_decode(cursor, cts, cid) != 0) {
        gj_problem(r, 400, "cursor", "the cursor is not one this server returned");
        return;
    }
    PGconn *c = gj_req_db(r);
    if (!c) {
        free(labels);
        gj_respond_unavailable(r);
        return;
    }
    struct gj_job_filter f = { state, kind, after, before, name, labels, cursor ? cts : NULL, cursor ? cid : NULL,
                               limit };
    json_t *arr;
    char last_created[40], last_id[GJ_UUID_LEN + 1];
    struct gj_error err;
    int rc = gj_job_list(c, r->who.tenant_id, &f, &arr, last_created, last_id, &err);
    free(labels);
    if (rc != 0) {
        gj_respond_error(r, &err);
        return;
    }
    json_t *next = json_null();
    if (last_id[0]) {
        char enc[160];
        if (gj_cursor_encode(last_created, last_id, enc, sizeof enc) == 0)
            next = json_string(enc);
    }
    gj_respond_json(r, 200, json_pack("{s:o, s:o}", "jobs", arr, "next_cursor", next));
}

/* ======================= get (long poll) ======================= */

/* Without a notification, a parked long poll reads its job again this often anyway. */
#define LONG_POLL_REREAD_S 30.0
/* Retry after this when no database connection came at once (a parked request never waits
 * on the pool: it would hold its event-loop thread). */
#define RETRY_S 0.25

/* A long poll (?wait=N) on a job that has not finished: parked between reads of its job. */
struct long_poll {
    struct gj_park_entry park;
    double deadline;             /* gj_park_now() seconds */
    char state0[16];             /* the state first seen: any other ends the wait */
    json_t *job;                 /* the last read: the answer at the deadline */
};

static void revoked_answer(struct gj_req *r)
{
    struct MHD_Response *resp = gj_problem(r, 401, NULL, "the API key was revoked");
    if (resp)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Bearer realm=\"gpujobd\", error=\"invalid_token\"");
}

/* Reads the job again: 1 answered (its state changed, or it is gone), 0 wait on, -1 no
 * database connection now (retry shortly). */
static int long_poll_read(struct gj_req *r, struct long_poll *lp)
{
    gj_park_take_change(&lp->park);
    PGconn *c = gj_db_acquire(r->srv->db, 0);
    if (!c)
        return -1;
    json_t *job = NULL;
    char state[16];
    uint64_t ticket = gj_job_cache_ticket(r->srv->job_cache, r->params[0]);
    int rc = gj_job_read(c, r->who.tenant_id, r->params[0], &job, state);
    gj_db_release(r->srv->db, c);
    if (rc > 0)
        gj_job_cache_put(r->srv->job_cache, r->who.tenant_id, job, state, ticket);
    if (rc == 0) {
        gj_respond_not_found(r);
        return 1;
    }
    if (rc < 0)
        return -1;
    json_decref(lp->job);
    lp->job = job;
    if (strcmp(state, lp->state0) == 0)
        return 0;
    respond_job(r, 200, json_incref(job));
    return 1;
}

/* Parks the request until its job changes, its deadline or a re-read; or answers when it
 * cannot wait any more (deadline, shutdown, revoked key). */
static void long_poll_wait(struct gj_req *r, struct long_poll *lp, int retry_soon)
{
    for (;;) {
        double now = gj_park_now();
        if (now >= lp->deadline)
            break;
        double wake = now + (retry_soon ? RETRY_S : LONG_POLL_REREAD_S);
        int rc = gj_park_wait(&lp->park, wake < lp->deadline ? wake : lp->deadline);
        if (rc == 0) {
            r->parked = 1;
            return;
        }
        if (rc < 0)
            break;
        rc = long_poll_read(r, lp);           /* changed meanwhile: read it now */
        if (rc > 0)
            return;
        retry_soon = rc < 0;
    }
    if (gj_park_revoked(&lp->park))
        revoked_answer(r);
    else
        respond_job(r, 200, json_incref(lp->job));
}

/* The long poll's handle once resumed. */
static void long_poll_resumed(struct gj_req *r, struct long_poll *lp)
{
    if (gj_park_gone(&lp->park)) {
        r->gone = 1;                          /* its client left: nobody to answer */
        return;
    }
    if (gj_park_revoked(&lp->park)) {
        revoked_answer(r);
        return;
    }
    int rc = 0;
    if (!gj_http_stopping(r->srv) && gj_park_now() < lp->deadline) {
        rc = long_poll_read(r, lp);
        if (rc > 0)
            return;
    }
    long_poll_wait(r, lp, rc < 0);
}

static void job_get(struct gj_req *r)
{
    if (r->state) {
        long_poll_resumed(r, r->state);
        return;
    }
    long wait = 0;
    const char *ws = gj_req_query(r, "wait");
    if (ws) {
        char *end;
        wait = strtol(ws, &end, 10);
        if (!*ws || *end || wait < 0 || wait > 86400) {
            gj_problem(r, 400, "wait", "wait is a number of seconds (0 to %d)", r->srv->cfg.max_wait_seconds);
            return;
        }
        if (wait > r->srv->cfg.max_wait_seconds)
            wait = r->srv->cfg.max_wait_seconds;
    }
    struct long_poll *lp = NULL;
    if (wait > 0) {
        if (!(lp = calloc(1, sizeof *lp))) {
            gj_problem(r, 500, NULL, "out of memory");
            return;
        }
        r->state = lp;
        lp->deadline = gj_park_now() + (double)wait;
        gj_park_join(&lp->park, r->conn, r->params[0], r->who.key_id);   /* before the read: no change missed */
    }
    char state0[16];
    size_t len;
    /* What this replica knows, unless it has changed since (job_cache.h); a long poll
     * reads the database for the state it then waits to see change. */
    char *kept = gj_job_cache_get(r->srv->job_cache, r->params[0], r->who.tenant_id, state0, &len);
    if (kept && (!lp || is_final(state0))) {
        gj_respond_json_text(r, 200, kept, len);
        return;
    }
    free(kept);
    json_t *job = NULL;
    uint64_t ticket = gj_job_cache_ticket(r->srv->job_cache, r->params[0]);
    PGconn *c = gj_req_db(r);
    if (!c) {
        gj_respond_unavailable(r);
        return;
    }
    int rc = gj_job_read(c, r->who.tenant_id, r->params[0], &job, state0);
    if (rc > 0)
        gj_job_cache_put(r->srv->job_cache, r->who.tenant_id, job, state0, ticket);
    if (rc <= 0) {
        gj_respond_lookup_failed(r, rc);
        return;
    }
    if (!lp || is_final(state0)) {
        respond_job(r, 200, job);
        return;
    }
    gj_db_release(r->srv->db, gj_req_take_db(r));   /* hold no connection while waiting */
    lp->job = job;
    snprintf(lp->state0, sizeof lp->state0, "%s", state0);
    long_poll_wait(r, lp, 0);
}

static void job_get_done(struct gj_req *r, int ok)
{
    (void)ok;
    struct long_poll *lp = r->state;
    if (!lp)
        return;
    gj_park_leave(&lp->park);
    json_decref(lp->job);
    free(lp);
    r->state = NULL;
}

/* ======================= cancel, delete ======================= */

static void job_cancel(struct gj_req *r)
{
    PGconn *c = gj_req_db(r);
    if (!c) {
        gj_respond_unavailable(r);
        return;
    }
    char state[16];
    int rc = gj_job_read(c, r->who.tenant_id, r->params[0], NULL, state);
    if (rc <= 0) {
        gj_respond_lookup_failed(r, rc);
        return;
    }
    rc = gj_job_cancel(c, r->srv->job_cache, r->who.tenant_id, r->params[0]);   /* forgets its cached answer */
    if (rc < 0) {
        gj_respond_unavailable(r);
        return;
    }
    json_t *job = NULL;
    if (gj_job_read(c, r->who.tenant_id, r->params[0], &job, state) != 1) {
        gj_respond_not_found(r);
        return;
    }
    if (rc == 0 && is_final(state)) {
        json_decref(job);
        gj_problem(r, 409, NULL, "the job has already finished (%s)", state);
        return;
    }
    /* 200: canceled now; 202: a running job was asked to stop */
    gj_respond_json(r, is_final(state) ? 200 : 202, job);
}

/* DELETE (job_state.h's delete rule, as CARMIN's DELETE): 204 gone, 202 canceled and
 * deleted once its worker has stopped, 409 a sub-task (or a blob of it another job needs). */
static void job_delete(struct gj_req *r)
{
    PGconn *c = gj_req_db(r);
    if (!c) {
        gj_respond_unavailable(r);
        return;
    }
    enum gj_job_deleted how;
    struct gj_error err = { 0 };
    if (gj_job_delete(c, r->srv->job_cache, r->who.tenant_id, r->params[0], &how, &err) != 0) {
        gj_respond_error(r, &err);
        return;
    }
    gj_respond_empty(r, how == GJ_JOB_DELETED ? 204 : 202);
}

/* The request's connection, once job {id} is known to exist for this tenant;
 * otherwise answers 503 or 404 itself and returns NULL. */
static PGconn *visible_job_db(struct gj_req *r)
{
    PGconn *c = gj_req_db(r);
    if (!c) {
        gj_respond_unavailable(r);
        return NULL;
    }
    int rc = gj_job_read(c, r->who.tenant_id, r->params[0], NULL, NULL);
    if (rc <= 0) {
        gj_respond_lookup_failed(r, rc);
        return NULL;
    }
    return c;
}

/* ======================= outputs ======================= */

static void outputs_list(struct gj_req *r)
{
    PGconn *c = visible_job_db(r);
    if (!c)
        return;
    json_t *arr = gj_job_outputs_read(c, r->params[0]);
    if (!arr) {
        gj_respond_unavailable(r);
        return;
    }
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o) {
        char url[400];
        snprintf(url, sizeof url, "/v1/jobs/%s/outputs/%s", r->params[0], json_string_value(json_object_get(o, "name")));
        json_object_set_new(o, "url", json_string(url));
    }
    gj_respond_json(r, 200, json_pack("{s:o}", "outputs", arr));
}

static void output_get(struct gj_req *r)
{
    PGconn *c = gj_req_db(r);
    if (!c || gj_db_begin(c) != 0) {
        gj_respond_unavailable(r);
        return;
    }
    char blob_id[GJ_UUID_LEN + 1], ctype[256];
    struct gj_error err;
    if (gj_job_output_find(c, r->who.tenant_id, r->params[0], r->params[1], blob_id, ctype, sizeof ctype, &err) != 0) {
        if (err.status == 404)
            gj_respond_not_found(r);
        else
            gj_respond_error(r, &err);
        return;
    }
    struct gj_blob_info info;
    int rc = gj_blob_lookup(c, r->who.tenant_id, blob_id, &info);
    if (rc <= 0) {
        gj_respond_lookup_failed(r, rc);
        return;
    }
    gj_http_send_blob(r, &info, ctype, r->params[1]);
}

/* ======================= events (SSE) ======================= */

#define SSE_KEEPALIVE_S 15.0

/* An event stream: reads what is new, parks (http_park.h) while nothing is. */
struct sse {
    struct gj_park_entry park;
    struct gj_server *srv;
    char job_id[GJ_UUID_LEN + 1];
    char tenant_id[GJ_UUID_LEN + 1];
    long long last_id;
    double progress;
    int progress_sent;
    char *buf;
    size_t len, off, cap;
    int done;
    int reread;                  /* read even without a change: the first read, after a failed one */
    struct gj_stream_outage outage;
    double keepalive_at;         /* gj_park_now() seconds */
};

static int sse_append(struct sse *s, const char *text)
{
    return gj_text_append(&s->buf, &s->len, &s->cap, text, strlen(text));
}

static void sse_event(struct sse *s, const char *id, const char *event, json_t *data)
{
    char *d = json_dumps(data, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(data);
    if (!d)
        return;
    char head[128];
    if (id)
        snprintf(head, sizeof head, "id: %s\nevent: %s\ndata: ", id, event);
    else
        snprintf(head, sizeof head, "event: %s\ndata: ", event);
    sse_append(s, head);
    sse_append(s, d);      /* compact JSON has no newlines */
    sse_append(s, "\n\n");
    free(d);
}

/* Reads what is new. 1 something was queued, 0 nothing, -1 no database connection now or
 * database trouble (retry shortly: a stream never waits on the pool, it would hold its
 * event-loop thread). */
static int sse_fill(struct sse *s)
{
    PGconn *c = gj_db_acquire(s->srv->db, 0);
    if (!c)
        return -1;
    int out = 0;
    /* the job first, then its events: a final state read here has its event below */
    char state[16];
    double progress;
    json_t *message;
    int found = gj_job_progress_read(c, s->tenant_id, s->job_id, state, &progress, &message);
    if (found < 0) {
        gj_db_release(s->srv->db, c);
        return -1;
    }
    if (found == 0) {            /* deleted meanwhile */
        gj_db_release(s->srv->db, c);
        sse_event(s, NULL, "deleted", json_pack("{s:s}", "id", s->job_id));
        s->done = 1;
        return 1;
    }
    json_t *events = gj_job_events_read(c, s->job_id, s->last_id, 500);
    gj_db_release(s->srv->db, c);
    if (!events) {
        json_decref(message);
        return -1;
    }
    int final_seen = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        const char *kind = json_string_value(json_object_get(ev, "kind"));
        json_t *detail = json_incref(json_object_get(ev, "detail"));
        if (strcmp(kind, "state") == 0) {
            const char *st = json_string_value(json_object_get(detail, "state"));
            if (st && is_final(st))
                final_seen = 1;
        }
        const char *id = json_string_value(json_object_get(ev, "id"));
        sse_event(s, id, kind, detail);
        s->last_id = strtoll(id, NULL, 10);
        out = 1;
    }
    int more = json_array_size(events) == 500;
    json_decref(events);
    if (!final_seen && !more && !is_final(state) && (!s->progress_sent || progress != s->progress)) {
        sse_event(s, NULL, "progress", json_pack("{s:f, s:o}", "progress", progress, "message", json_incref(message)));
        s->progress = progress;
        s->progress_sent = 1;
        out = 1;
    }
    json_decref(message);
    if (final_seen || (is_final(state) && !more))
        s->done = 1;
    return out;
}

/* libmicrohttpd's content reader: what is queued, else what is new, else a keep-alive when
 * due, else park (return 0: called again once resumed). It reads the database when its job
 * changed, after a failed read and with each keep-alive; it looks at the pool's health
 * every HEALTH_S, and while the database is unreachable it reads nothing and says so
 * (stream_outage.h). The stream ends with its job, at shutdown and when its key is revoked. */
#define HEALTH_S 1.0
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct sse *s = cls;
    while (s->off >= s->len) {
        s->off = s->len = 0;
        if (gj_park_gone(&s->park))
            return MHD_CONTENT_READER_END_WITH_ERROR;   /* its client left while it was parked */
        if (s->done || gj_http_stopping(s->srv) || gj_park_revoked(&s->park))
            return MHD_CONTENT_READER_END_OF_STREAM;
        int up = gj_stream_outage_check(&s->outage, s->srv->db, &s->buf, &s->len, &s->cap);
        double now = gj_park_now();
        int changed = gj_park_take_change(&s->park);
        int rc = -1;
        if (up)
            rc = changed || s->reread || now >= s->keepalive_at ? sse_fill(s) : 0;
        s->reread = rc < 0;
        if (rc > 0 || s->len > 0)
            break;
        if (now >= s->keepalive_at) {
            sse_append(s, ": keep-alive\n\n");
            break;
        }
        double wake = now + (rc < 0 && up ? RETRY_S : HEALTH_S);
        if (wake > s->keepalive_at)
            wake = s->keepalive_at;
        int pr = gj_park_wait(&s->park, wake);
        if (pr == 0)
            return 0;
        if (pr < 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
    }
    s->keepalive_at = gj_park_now() + SSE_KEEPALIVE_S;
    size_t n = s->len - s->off < max ? s->len - s->off : max;
    memcpy(buf, s->buf + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

static void sse_free(void *cls)
{
    struct sse *s = cls;
    gj_park_leave(&s->park);
    free(s->buf);
    free(s);
}

static void job_events(struct gj_req *r)
{
    PGconn *c = visible_job_db(r);
    if (!c)
        return;
    gj_db_release(r->srv->db, gj_req_take_db(r));   /* the stream borrows one per read */
    struct sse *s = calloc(1, sizeof *s);
    if (!s) {
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    s->srv = r->srv;
    snprintf(s->job_id, sizeof s->job_id, "%.36s", r->params[0]);
    snprintf(s->tenant_id, sizeof s->tenant_id, "%s", r->who.tenant_id);
    s->keepalive_at = gj_park_now() + SSE_KEEPALIVE_S;
    s->reread = 1;
    gj_park_join(&s->park, r->conn, s->job_id, r->who.key_id);
    const char *lei = gj_req_header(r, "Last-Event-ID");
    if (lei) {
        char *end;
        long long v = strtoll(lei, &end, 10);
        if (*lei && !*end && v > 0)
            s->last_id = v;
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, s, sse_free);
    if (!resp) {
        sse_free(s);
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    gj_respond(r, 200, resp, 0);
}

static const struct gj_route job_routes[] = {
    { "POST", "/v1/jobs", GJ_AUTH_USER, GJ_BODY_JSON, submit_begin, submit_data, submit_handle, submit_done },
    { "GET", "/v1/jobs", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, jobs_list, NULL },
    { "GET", "/v1/jobs/{id}", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, job_get, job_get_done },
    { "DELETE", "/v1/jobs/{id}", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, job_delete, NULL },
    { "POST", "/v1/jobs/{id}/cancel", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, job_cancel, NULL },
    { "GET", "/v1/jobs/{id}/outputs", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, outputs_list, NULL },
    { "GET", "/v1/jobs/{id}/outputs/{name}", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, output_get, NULL },
    { "GET", "/v1/jobs/{id}/events", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, job_events, NULL },
};
const struct gj_route_table gj_routes_jobs = { job_routes, sizeof job_routes / sizeof job_routes[0] };
