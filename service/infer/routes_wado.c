/*
 * routes_wado.c — WADO-RS retrieve (PS3.18 §10.4) of the instances the tenant stored
 * by STOW-RS (instances_store.c), as they were stored:
 *
 *   GET /dicomweb/studies/{study}
 *   GET /dicomweb/studies/{study}/series/{series}
 *   GET /dicomweb/studies/{study}/series/{series}/instances/{instance}
 *
 * The answer is multipart/related; type="application/dicom", one part per instance
 * (each with its Content-Type and Content-Length), streamed from the blobs inside one
 * read transaction (never whole in memory). An Accept that takes neither that nor
 * any type is a 406; an unknown study, series or instance (or another tenant's) a 404.
 * The metadata routes are in routes_qido.c (they read the same rows).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/infer/infer.h"

#define WADO_MAX_INSTANCES 100000

struct wado_part {
    char blob_id[GJ_UUID_LEN + 1];   /* a large object or an object of the store */
    uint64_t size;
};

struct wado_stream {
    struct gj_db_pool *pool;
    PGconn *conn;                 /* inside the read transaction */
    struct wado_part *parts;
    size_t n, i;                  /* the part being sent */
    int phase;                    /* 0 its head, 1 its body, 2 the closing delimiter */
    uint64_t off;                 /* into the current piece */
    struct gj_blob_reader *reader;
    char boundary[48];
    char head[160];
    size_t head_len;
};

static size_t part_head(const struct wado_stream *s, size_t i, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s--%s\r\nContent-Type: application/dicom\r\nContent-Length: %llu\r\n\r\n",
                     i ? "\r\n" : "", s->boundary, (unsigned long long)s->parts[i].size);
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

static uint64_t stream_length(struct wado_stream *s)
{
    char head[160];
    uint64_t total = 0;
    for (size_t i = 0; i < s->n; i++)
        total += part_head(s, i, head, sizeof head) + s->parts[i].size;
    return total + strlen(s->boundary) + 8;   /* "\r\n--" boundary "--\r\n" */
}

/* Fills buf from the current piece: a part's head, its blob, or the closing delimiter. */
static ssize_t wado_read_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct wado_stream *s = cls;
    if (s->i >= s->n && s->phase != 2) {
        s->phase = 2;
        s->off = 0;
        s->head_len = (size_t)snprintf(s->head, sizeof s->head, "\r\n--%s--\r\n", s->boundary);
    }
    if (s->phase == 0 || s->phase == 2) {
        if (s->phase == 0 && s->off == 0)
            s->head_len = part_head(s, s->i, s->head, sizeof s->head);
        if (s->off >= s->head_len)
            return MHD_CONTENT_READER_END_OF_STREAM;   /* only the closing delimiter ends here */
        size_t n = s->head_len - s->off < max ? s->head_len - s->off : max;
        memcpy(buf, s->head + s->off, n);
        s->off += n;
        if (s->phase == 0 && s->off == s->head_len) {
            s->phase = 1;
            s->off = 0;
            if (!(s->reader = gj_blob_reader_open_id(s->conn, s->parts[s->i].blob_id, NULL)))
                return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        return (ssize_t)n;
    }
    const struct wado_part *p = &s->parts[s->i];
    size_t n = p->size - s->off < max ? (size_t)(p->size - s->off) : max;
    long got = n ? gj_blob_reader_read(s->reader, s->off, buf, n) : 0;
    if (n && got <= 0)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    s->off += (uint64_t)got;
    if (s->off == p->size) {
        gj_blob_reader_close(s->reader);
        s->reader = NULL;
        s->i++;
        s->phase = 0;
        s->off = 0;
    }
    return got ? (ssize_t)got : wado_read_cb(cls, pos, buf, max);
}

static void wado_free_cb(void *cls)
{
    struct wado_stream *s = cls;
    if (s->reader)
        gj_blob_reader_close(s->reader);
    if (s->conn) {
        gj_db_rollback(s->conn);           /* the read transaction */
        gj_db_release(s->pool, s->conn);
    }
    free(s->parts);
    free(s);
}

/* The tenant's instances under the path (study [, series [, instance]]), in storage
 * order, inside a transaction begun on the request's connection. NULL with a response
 * prepared (400, 404, 503). */
static PGresult *find_instances(struct gj_req *r)
{
    if (!gj_dicomweb_path_uids_ok(r))
        return NULL;
    PGconn *c = gj_req_db(r);
    if (!c || gj_db_begin(c) != 0) {
        gj_respond_unavailable(r);
        return NULL;
    }
    return gj_dicomweb_find_instances(r, c, WADO_MAX_INSTANCES, "retrieve series or instances");
}

static struct wado_stream *stream_new(struct gj_req *r, PGresult *res)
{
    struct wado_stream *s = calloc(1, sizeof *s);
    int n = PQntuples(res);
    if (!s || !(s->parts = calloc((size_t)n, sizeof *s->parts))) {
        free(s);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        snprintf(s->parts[i].blob_id, sizeof s->parts[i].blob_id, "%s", PQgetvalue(res, i, 0));
        s->parts[i].size = strtoull(PQgetvalue(res, i, 1), NULL, 10);
    }
    s->n = (size_t)n;
    s->pool = r->srv->db;
    snprintf(s->boundary, sizeof s->boundary, "gpujobd-%s", r->request_id);   /* 32 random hex digits */
    return s;
}

static void wado_retrieve(struct gj_req *r)
{
    if (!gj_dicomweb_accepts(r, "multipart/related", "application/dicom")) {
        gj_problem(r, 406, "Accept", "WADO-RS retrieve answers multipart/related; type=\"application/dicom\"");
        return;
    }
    PGresult *res = find_instances(r);
    if (!res)
        return;
    struct wado_stream *s = stream_new(r, res);
    PQclear(res);
    if (!s) {
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    uint64_t len = stream_length(s);
    s->conn = gj_req_take_db(r);
    struct MHD_Response *cb = MHD_create_response_from_callback(len, 64 * 1024, wado_read_cb, s, wado_free_cb);
    if (!cb) {
        wado_free_cb(s);
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    struct MHD_Response *resp = gj_respond(r, 200, cb, len);
    if (!resp)
        return;
    char ct[120];
    snprintf(ct, sizeof ct, "multipart/related; type=\"application/dicom\"; boundary=%s", s->boundary);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ct);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "private, no-cache");
    gj_http_user_bytes(resp, 1, NULL);   /* the instances are the tenant's bytes */
}

static const struct gj_route wado_routes[] = {
    { "GET", "/dicomweb/studies/{study}", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, wado_retrieve, NULL },
    { "GET", "/dicomweb/studies/{study}/series/{series}", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, wado_retrieve,
      NULL },
    { "GET", "/dicomweb/studies/{study}/series/{series}/instances/{instance}", GJ_AUTH_USER, GJ_BODY_NONE, NULL,
      NULL, wado_retrieve, NULL },
};
const struct gj_route_table gj_infer_routes_wado = { wado_routes, sizeof wado_routes / sizeof wado_routes[0] };
