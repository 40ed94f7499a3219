/*
 * routes_blobs.c — POST /v1/blobs (spooled while it arrives, then streamed into a
 * large object, never whole in memory), GET /v1/blobs/{id} (streamed back, ETag, Range), DELETE.
 * gj_http_send_blob() is shared with job outputs and CARMIN files; gj_http_user_bytes() marks
 * every response whose body a tenant or a job wrote.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/http/http_server.h"
#include "service/jobs/job_store.h"
#include "service/base/log.h"
#include "service/db/storage_quota.h"

/* ---------- streaming a blob back ---------- */

struct blob_stream {
    struct gj_db_pool *pool;
    PGconn *conn;
    struct gj_blob_reader *reader;
    uint64_t first, len;
};

static ssize_t blob_read_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct blob_stream *s = cls;
    if (pos >= s->len)
        return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = s->len - pos < max ? (size_t)(s->len - pos) : max;
    long got = gj_blob_reader_read(s->reader, s->first + pos, buf, n);
    if (got <= 0)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    return (ssize_t)got;
}

static void blob_free_cb(void *cls)
{
    struct blob_stream *s = cls;
    if (s->reader)
        gj_blob_reader_close(s->reader);
    if (s->conn) {
        gj_db_rollback(s->conn);           /* the read transaction */
        gj_db_release(s->pool, s->conn);
    }
    free(s);
}

static int filename_ok(const char *name)
{
    for (const char *p = name; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            return 0;
    return 1;
}

void gj_http_user_bytes(struct MHD_Response *resp, int attachment, const char *filename)
{
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Content-Security-Policy", GJ_USER_BYTES_CSP);
    if (!attachment)
        return;
    char disp[300];
    if (filename && *filename && strlen(filename) < 256 && filename_ok(filename))
        snprintf(disp, sizeof disp, "attachment; filename=\"%s\"", filename);
    else
        snprintf(disp, sizeof disp, "attachment");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_DISPOSITION, disp);
}

#define PRESIGNED_SECONDS 300

/* ?redirect=presigned on a blob in the object store: 307 to a presigned GET, so the bytes go
 * straight from the store. 1 answered, 0 not (a large object, or not asked). */
static int redirect_presigned(struct gj_req *r, const struct gj_blob_info *info, const char *filename)
{
    const char *want = gj_req_query(r, "redirect");
    if (!want || strcmp(want, "presigned") != 0 || !info->s3_key[0])
        return 0;
    char disp[300] = "attachment";
    if (filename && *filename && strlen(filename) < 256 && filename_ok(filename))
        snprintf(disp, sizeof disp, "attachment; filename=\"%s\"", filename);
    char *url = gj_blob_presigned_url(info, PRESIGNED_SECONDS, disp);
    if (!url)
        return 0;   /* streamed as usual */
    struct MHD_Response *resp = gj_respond_empty(r, 307);
    if (resp) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, url);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    }
    free(url);
    return 1;
}

void gj_http_send_blob(struct gj_req *r, const struct gj_blob_info *info, const char *content_type,
                       const char *filename)
{
    char hex[65], etag[80], crange[96];
    gj_sha256_hex(info->sha256, hex);
    snprintf(etag, sizeof etag, "\"%s\"", hex);
    if (redirect_presigned(r, info, filename))
        return;

    const char *inm = gj_req_header(r, MHD_HTTP_HEADER_IF_NONE_MATCH);
    if (inm && gj_http_etag_match(inm, etag)) {
        struct MHD_Response *resp = gj_respond_empty(r, 304);
        if (resp)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
        return;
    }
    uint64_t first = 0, last = info->size ? info->size - 1 : 0;
    int partial = 0;
    const char *range = gj_req_header(r, MHD_HTTP_HEADER_RANGE);
    const char *if_range = gj_req_header(r, MHD_HTTP_HEADER_IF_RANGE);
    if (range && (!if_range || strcmp(if_range, etag) == 0)) {
        int rc = gj_http_parse_range(range, info->size, &first, &last);
        if (rc < 0) {
            struct MHD_Response *resp = gj_problem(r, 416, NULL, "the range is outside the %llu bytes of the blob",
                                                   (unsigned long long)info->size);
            if (resp) {
                snprintf(crange, sizeof crange, "bytes */%llu", (unsigned long long)info->size);
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, crange);
            }
            return;
        }
        partial = rc == 1;
        if (!partial) {
            first = 0;
            last = info->size ? info->size - 1 : 0;
        }
    }
    uint64_t len = info->size ? last - first + 1 : 0;
    struct MHD_Response *resp;
    if (len == 0) {
        resp = gj_respond_empty(r, 200);
    } else {
        struct blob_stream *s = calloc(1, sizeof *s);
        if (!s) {
            gj_problem(r, 500, NULL, "out of memory");
            return;
        }
        s->pool = r->srv->db;
        s->first = first;
        s->len = len;
        int missing = 0;
        s->reader = gj_blob_reader_open_blob(r->db, info, &missing);
        if (!s->reader) {
            free(s);
            if (missing)
                gj_problem(r, 410, NULL, "blob %s is gone: its object is missing from the object store", info->id);
            else if (gj_blob_store_unreachable(0))
                gj_respond_unavailable(r);   /* says the object store, with Retry-After */
            else
                gj_problem(r, 500, NULL, "the blob could not be read");
            return;
        }
        s->conn = gj_req_take_db(r);
        struct MHD_Response *cb = MHD_create_response_from_callback(len, 64 * 1024, blob_read_cb, s, blob_free_cb);
        if (!cb) {
            blob_free_cb(s);
            gj_problem(r, 500, NULL, "out of memory");
            return;
        }
        resp = gj_respond(r, partial ? 206 : 200, cb, len);
    }
    if (!resp)
        return;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type ? content_type : info->content_type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "private, no-cache");
    char b64[45], digest[64];
    gj_sha256_base64(info->sha256, b64);
    if (!partial) {
        snprintf(digest, sizeof digest, "sha-256=:%s:", b64);
        MHD_add_response_header(resp, "Content-Digest", digest);
    } else {
        snprintf(crange, sizeof crange, "bytes %llu-%llu/%llu", (unsigned long long)first, (unsigned long long)last,
                 (unsigned long long)info->size);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, crange);
    }
    gj_http_user_bytes(resp, 1, filename);
}

/* ---------- POST /v1/blobs ---------- */

struct upload {
    struct gj_blob_writer *w;
    char content_type[256];
    unsigned char want[32];
    int has_digest;
};

static int content_type_ok(const char *ct)
{
    size_t n = strlen(ct);
    if (n == 0 || n > 255)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)ct[i] < 0x20 || (unsigned char)ct[i] > 0x7e)
            return 0;
    return strchr(ct, '/') != NULL;
}

static void upload_begin(struct gj_req *r)
{
    struct upload *u = calloc(1, sizeof *u);
    if (!u) {
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    r->state = u;
    const char *ct = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!ct || !*ct)
        ct = "application/octet-stream";
    if (!content_type_ok(ct)) {
        gj_problem(r, 400, "Content-Type", "the Content-Type is not a media type of at most 255 characters");
        return;
    }
    snprintf(u->content_type, sizeof u->content_type, "%s", ct);
    const char *dg = gj_req_header(r, "Content-Digest");
    if (dg) {
        int rc = gj_http_parse_content_digest(dg, u->want);
        if (rc < 0) {
            gj_problem(r, 400, "Content-Digest", "Content-Digest must look like sha-256=:BASE64:");
            return;
        }
        u->has_digest = rc == 1;
    }
    gj_storage_refuse_declared(r);   /* a body that surely would not fit is not waited for */
}

/* The writer, on the request's connection: taken once the body is complete (the
 * body was spooled meanwhile, upload_spool.h). */
static int upload_open(struct gj_req *r, struct upload *u)
{
    if (u->w)
        return 0;
    PGconn *c = gj_req_db(r);
    u->w = c ? gj_blob_writer_open(c, r->who.tenant_id, u->content_type, 1) : NULL;
    if (!u->w) {
        gj_respond_unavailable(r);
        return -1;
    }
    return 0;
}

static int upload_data(struct gj_req *r, const char *buf, size_t len)
{
    struct upload *u = r->state;
    if (upload_open(r, u))
        return -1;
    if (gj_blob_writer_write(u->w, buf, len) != 0) {
        gj_blob_writer_abort(u->w);
        u->w = NULL;
        gj_respond_unavailable(r);
        return -1;
    }
    return 0;
}

static json_t *blob_json(const char *id, uint64_t size, const unsigned char sha[32], const char *ct)
{
    char hex[65];
    gj_sha256_hex(sha, hex);
    return json_pack("{s:s, s:I, s:s, s:s}", "id", id, "size", (json_int_t)size, "sha256", hex, "content_type", ct);
}

static void upload_handle(struct gj_req *r)
{
    struct upload *u = r->state;
    if (upload_open(r, u))
        return;
    unsigned char got[32];
    gj_blob_writer_digest(u->w, got);
    uint64_t size = gj_blob_writer_size(u->w);
    if (u->has_digest && memcmp(got, u->want, 32) != 0) {
        gj_blob_writer_abort(u->w);
        u->w = NULL;
        gj_problem(r, 400, "Content-Digest", "the body does not match its Content-Digest; nothing was stored");
        return;
    }
    char id[GJ_UUID_LEN + 1];
    int rc = gj_blob_writer_commit(u->w, NULL, id);
    u->w = NULL;
    if (rc == GJ_BLOB_OVER_QUOTA) {
        gj_respond_over_quota(r, gj_storage_last_refusal());
        return;
    }
    if (rc != 0) {
        gj_respond_unavailable(r);
        return;
    }
    /* committed, and upload_done needs no connection: it goes back before the answer is sent */
    gj_db_release(r->srv->db, gj_req_take_db(r));
    struct MHD_Response *resp = gj_respond_json(r, 201, blob_json(id, size, got, u->content_type));
    if (resp && r->status == 201) {
        char loc[64];
        snprintf(loc, sizeof loc, "/v1/blobs/%s", id);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, loc);
    }
}

static void upload_done(struct gj_req *r, int ok)
{
    (void)ok;
    struct upload *u = r->state;
    if (!u)
        return;
    if (u->w)   /* client gone, or an error: nothing stays */
        gj_blob_writer_abort(u->w);
    free(u);
    r->state = NULL;
}

/* ---------- GET /v1/blobs/{id} ---------- */

static void blob_get(struct gj_req *r)
{
    PGconn *c = gj_req_db(r);
    if (!c || gj_db_begin(c) != 0) {
        gj_respond_unavailable(r);
        return;
    }
    struct gj_blob_info info;
    int rc = gj_blob_lookup(c, r->who.tenant_id, r->params[0], &info);
    if (rc < 0)
        gj_respond_unavailable(r);
    else if (rc == 0)
        gj_respond_not_found(r);
    else
        gj_http_send_blob(r, &info, NULL, NULL);
}

/* ---------- DELETE /v1/blobs/{id} ---------- */

static void blob_delete(struct gj_req *r)
{
    PGconn *c = gj_req_db(r);
    if (!c || gj_db_begin(c) != 0) {
        gj_respond_unavailable(r);
        return;
    }
    const char *p[2] = { r->params[0], r->who.tenant_id };
    PGresult *res = gj_db_exec(c, "SELECT owner_job FROM blobs WHERE id = $1 AND tenant_id = $2 FOR UPDATE", 2, p,
                               NULL);
    if (!res) {
        gj_respond_unavailable(r);
        return;
    }
    if (PQntuples(res) == 0) {
        PQclear(res);
        gj_respond_not_found(r);
        return;
    }
    if (!PQgetisnull(res, 0, 0)) {
        gj_problem(r, 409, NULL, "this blob belongs to job %s; delete the job instead", PQgetvalue(res, 0, 0));
        PQclear(res);
        return;
    }
    PQclear(res);
    /* Finished jobs let go of it: their input rows go, then the blob (its
     * large object follows by trigger). */
    struct gj_error err;
    if (gj_job_inputs_release_blob(c, r->params[0], &err) != 0) {
        gj_respond_error(r, &err);
        return;
    }
    char state[6] = "";
    if (!(res = gj_db_exec(c, "DELETE FROM blobs WHERE id = $1 AND tenant_id = $2", 2, p, state))) {
        if (strcmp(state, "23503") == 0)
            gj_problem(r, 409, NULL, "the blob is in use");
        else
            gj_respond_unavailable(r);
        return;
    }
    PQclear(res);
    if (gj_db_commit(c) != 0) {
        gj_respond_unavailable(r);
        return;
    }
    gj_respond_empty(r, 204);
}

static const struct gj_route blob_routes[] = {
    { "POST", "/v1/blobs", GJ_AUTH_USER, GJ_BODY_UPLOAD, upload_begin, upload_data, upload_handle, upload_done },
    { "GET", "/v1/blobs/{id}", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, blob_get, NULL },
    { "DELETE", "/v1/blobs/{id}", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, blob_delete, NULL },
};
const struct gj_route_table gj_routes_blobs = { blob_routes, sizeof blob_routes / sizeof blob_routes[0] };
