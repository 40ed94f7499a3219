/*
 * routes_path.c — CARMIN's /rest/path/{completePath}: the tenant's files under /vip/Home
 * (carmin_fs.h).
 *
 *   PUT    a body: the file (any media type; application/carmin+json: CARMIN's UploadData, a
 *          base64 File, upload_json.c), replacing one there;
 *          UploadData of type Archive: a zip made into a new directory (409 when the path
 *          exists; upload_archive.c), all of it or nothing, extracted and committed on
 *          archive_pool.h's thread while the request is parked;
 *          no body: a directory (409 when the path exists). The parent must be a directory.
 *   GET    ?action=content (a file's bytes; a directory's tar archive, dir_tar.c), properties, list (a directory's entries),
 *          exists, md5
 *   DELETE the path and all under it
 */
#include <openssl/evp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "service/db/blobstore.h"
#include "service/carmin/archive_pool.h"
#include "service/carmin/carmin.h"
#include "service/carmin/carmin_routes.h"
#include "service/carmin/carmin_fs.h"
#include "service/db/db.h"

/* The request's normalized path, or -1 answered. */
static int request_path(struct gj_req *r, char path[CARMIN_PATH_MAX])
{
    if (carmin_path_normalize(r->params[0], path) != 0) {
        carmin_error(r, CARMIN_BAD_REQUEST, "a path is %s or under it, each part a plain name", CARMIN_HOME);
        return -1;
    }
    return 0;
}

/* ---------- PUT ---------- */

struct put {
    char path[CARMIN_PATH_MAX];
    char content_type[128];
    int is_dir;
    struct gj_blob_writer *w;
    int carmin_json;        /* application/carmin+json: the body collected, decoded at its end */
    char *json;
    size_t json_len;
    unsigned char *zip;     /* UploadData of type Archive: the decoded zip (is_dir is set) */
    size_t zip_len;
    struct carmin_archive_task task;   /* its extraction and commit, on c (archive_run) */
    struct gj_park_entry park;         /* where the request waits for the task */
    int extracting;                    /* the task submitted, its end not yet seen */
    PGconn *c;                         /* the request's connection, in its transaction */
    const char *tenant;
    uint64_t limit;
    int code;                          /* the task's result: 0 committed (desc), else a CARMIN code */
    char why[256];
    json_t *desc;
};

#define ARCHIVE_RECHECK_S 2.0   /* a parked archive upload looks at its task at least this often */
#define ARCHIVE_RETRY_AFTER "2"

static int body_follows(struct gj_req *r)
{
    const char *te = gj_req_header(r, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    const char *cl = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return (te && strcasestr(te, "chunked")) || (cl && strcmp(cl, "0") != 0);
}

static void media_type(struct gj_req *r, char out[128])
{
    const char *ct = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    size_t n = ct ? strlen(ct) : 0;
    int ok = n > 2 && n < 128 && strchr(ct, '/');
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)ct[i] >= 0x20 && (unsigned char)ct[i] < 0x7f;
    snprintf(out, 128, "%s", ok ? ct : "application/octet-stream");
}

static void put_begin(struct gj_req *r)
{
    if (carmin_authenticate(r) != 0)
        return;
    struct put *u = calloc(1, sizeof *u);
    if (!u) {
        carmin_error(r, CARMIN_INTERNAL, "out of memory");
        return;
    }
    r->state = u;
    if (request_path(r, u->path) != 0)
        return;
    media_type(r, u->content_type);
    if (strncasecmp(u->content_type, "application/carmin+json", 23) == 0) {
        u->carmin_json = 1;   /* held in memory: JSON's limit */
        r->body_limit = r->srv->cfg.max_json_bytes;
        snprintf(u->content_type, sizeof u->content_type, "application/octet-stream");
    }
    u->is_dir = !body_follows(r);
    if (u->is_dir)
        r->body_mode = GJ_BODY_NONE;
}

static int collect_json(struct gj_req *r, struct put *u, const char *buf, size_t len)
{
    char *nb = realloc(u->json, u->json_len + len + 1);
    if (!nb) {
        carmin_error(r, CARMIN_INTERNAL, "out of memory");
        return -1;
    }
    memcpy(nb + u->json_len, buf, len);
    u->json = nb;
    u->json_len += len;
    return 0;
}

static int put_data(struct gj_req *r, const char *buf, size_t len)
{
    struct put *u = r->state;
    if (u->carmin_json)
        return collect_json(r, u, buf, len);
    if (!u->w) {
        PGconn *c = gj_req_db(r);
        if (!c || gj_db_begin(c) != 0 || !(u->w = gj_blob_writer_open(c, r->who.tenant_id, u->content_type, 0))) {
            carmin_unavailable(r);
            return -1;
        }
    }
    if (gj_blob_writer_write(u->w, buf, len) != 0) {
        carmin_unavailable(r);
        return -1;
    }
    return 0;
}

/* In the open transaction: the parent is a directory, and the path is free (a directory)
 * or not a directory (a file). 0, or -1 answered. */
static int put_check(struct gj_req *r, PGconn *c, const struct put *u)
{
    char parent[CARMIN_PATH_MAX];
    struct carmin_entry e;
    if (strcmp(u->path, CARMIN_HOME) == 0) {
        carmin_error(r, CARMIN_CONFLICT, "%s exists", CARMIN_HOME);
        return -1;
    }
    carmin_path_parent(u->path, parent);
    int rc = carmin_fs_stat(c, r->who.tenant_id, parent, &e);
    if (rc > 0 && !e.is_dir)
        rc = 0;
    if (rc == 0)
        carmin_error(r, CARMIN_CONFLICT, "the parent directory %s does not exist", parent);
    if (rc <= 0)
        return rc < 0 ? (carmin_unavailable(r), -1) : -1;
    rc = carmin_fs_stat(c, r->who.tenant_id, u->path, &e);
    if (rc < 0) {
        carmin_unavailable(r);
        return -1;
    }
    if (rc > 0 && (u->is_dir || e.is_dir)) {
        carmin_error(r, CARMIN_CONFLICT, "%s exists%s", u->path, e.is_dir ? " as a directory" : "");
        return -1;
    }
    return 0;
}

/* The decoded UploadData: a File through put_data's path, an Archive kept for put_archive.
 * 0, or -1 answered. */
static int put_decoded(struct gj_req *r, struct put *u)
{
    unsigned char *bytes;
    size_t n;
    int archive;
    const char *why;
    if (carmin_upload_json_decode(u->json ? u->json : "", u->json_len, &bytes, &n, &archive, &why) != 0) {
        carmin_error(r, CARMIN_BAD_REQUEST, "%s", why);
        return -1;
    }
    u->carmin_json = 0;
    free(u->json);   /* decoded: not held beside the zip */
    u->json = NULL;
    if (archive) {
        u->zip = bytes;
        u->zip_len = n;
        u->is_dir = 1;
        return 0;
    }
    int rc = put_data(r, (const char *)bytes, n);
    free(bytes);
    return rc;
}

/* The 201 of a path made and committed; the connection goes back to the pool first. */
static void answer_created(struct gj_req *r, const struct put *u, json_t *desc)
{
    gj_db_release(r->srv->db, gj_req_take_db(r));   /* committed: not held while the answer goes */
    struct MHD_Response *resp = gj_respond_json(r, 201, desc);
    char loc[CARMIN_PATH_MAX + 16];
    snprintf(loc, sizeof loc, "/rest/path%s", u->path);
    if (resp)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, loc);
}

/* On an archive thread: the archive's entries under the directory just made, its
 * description and the commit, in the request's transaction. Its files are held to
 * upload_archive.c's bounds (--archive-max-bytes, --archive-max-ratio, the disk reserve) and
 * --max-body-bytes. Nothing is committed when a step fails or the server stops meanwhile. */
static void archive_run(struct carmin_archive_task *t)
{
    struct put *u = (struct put *)((char *)t - offsetof(struct put, task));
    u->code = carmin_archive_extract(u->c, u->tenant, u->path, u->zip, u->zip_len, u->limit, &t->cancel, u->why);
    if (u->code != 0)
        return;
    u->desc = carmin_fs_describe(u->c, u->tenant, u->path, CARMIN_SELF);
    if (u->desc && !atomic_load(&t->cancel) && gj_db_commit(u->c) == 0)
        return;
    json_decref(u->desc);
    u->desc = NULL;
    u->code = CARMIN_UNAVAILABLE;
    snprintf(u->why, sizeof u->why, "%s",
             atomic_load(&t->cancel) ? "the server is stopping" : "the database is unavailable; try again");
}

/* The task's result, once the pool has let go of it (the request has left the park). */
static void answer_archive(struct gj_req *r, struct put *u)
{
    if (u->code != 0) {
        carmin_error(r, u->code, "%s; nothing was stored", u->why);   /* the request's end rolls back */
        return;
    }
    json_t *desc = u->desc;
    u->desc = NULL;
    answer_created(r, u, desc);
}

/* Answers once the task has ended; until then the connection is parked and holds no HTTP
 * thread (put_handle runs this again when it is resumed). The server stopping, or the client
 * going away, cancels the task, which is then rolled back; the answer (none to a client that
 * has gone) comes when the pool has let go of it. */
static void wait_for_archive(struct gj_req *r, struct put *u)
{
    for (;;) {
        if (carmin_archive_finished(&u->task))
            break;
        int rc = gj_park_wait(&u->park, gj_park_now() + ARCHIVE_RECHECK_S);
        if (rc == 0) {
            r->parked = 1;
            return;
        }
        if (rc < 0) {   /* stopping, or the client has gone: nothing more is stored */
            carmin_archive_abandon(&u->task);
            break;
        }
        gj_park_take_change(&u->park);   /* woken before it parked: look again */
    }
    int gone = gj_park_gone(&u->park);
    gj_park_leave(&u->park);
    u->extracting = 0;
    if (gone)
        r->gone = 1;   /* nobody to answer; an extraction cut short is rolled back at the end */
    else
        answer_archive(r, u);
}

/* Hands the archive to archive_pool.h's threads (503 with Retry-After when they are all
 * taken and its queue is full) and waits for it, parked. */
static void start_archive(struct gj_req *r, PGconn *c, struct put *u)
{
    u->c = c;
    u->tenant = r->who.tenant_id;
    u->limit = r->srv->cfg.max_body_bytes;
    u->code = CARMIN_UNAVAILABLE;   /* when the task is dropped before it runs */
    snprintf(u->why, sizeof u->why, "the server is stopping");
    u->task.run = archive_run;
    u->task.park = &u->park;
    gj_park_join(&u->park, r->conn, "", "");   /* before the submit: its end is not missed */
    if (carmin_archive_submit(&u->task) != 0) {
        gj_park_leave(&u->park);
        carmin_error(r, CARMIN_UNAVAILABLE,
                     "%d archives are being extracted and %d more wait; try again shortly; nothing was stored",
                     ARCHIVE_THREADS, ARCHIVE_QUEUE);
        if (r->response)
            MHD_add_response_header(r->response, "Retry-After", ARCHIVE_RETRY_AFTER);
        return;
    }
    u->extracting = 1;
    wait_for_archive(r, u);
}

static void put_handle(struct gj_req *r)
{
    struct put *u = r->state;
    if (u->extracting) {   /* resumed from the park */
        gj_park_take_change(&u->park);
        wait_for_archive(r, u);
        return;
    }
    if (u->carmin_json && put_decoded(r, u) != 0)
        return;
    PGconn *c = gj_req_db(r);
    if (!c || (!u->w && gj_db_begin(c) != 0)) {
        carmin_unavailable(r);
        return;
    }
    if (put_check(r, c, u) != 0)
        return;   /* the request's end rolls back */
    char blob[GJ_UUID_LEN + 1];
    if (u->w) {
        int rc = gj_blob_writer_commit(u->w, NULL, blob);
        u->w = NULL;
        if (rc == GJ_BLOB_OVER_QUOTA) {
            carmin_over_quota(r);
            return;
        }
        if (rc != 0) {
            carmin_unavailable(r);
            return;
        }
    }
    int rc = carmin_fs_put(c, r->who.tenant_id, u->path, u->is_dir ? NULL : blob, NULL);
    if (rc == CARMIN_FS_RACE) {
        char parent[CARMIN_PATH_MAX];
        carmin_path_parent(u->path, parent);
        carmin_error(r, CARMIN_CONFLICT, "the parent directory %s was deleted meanwhile; nothing was stored", parent);
        return;
    }
    if (rc != 0) {
        carmin_unavailable(r);
        return;
    }
    if (u->zip) {
        start_archive(r, c, u);
        return;
    }
    json_t *desc = NULL;
    if (!(desc = carmin_fs_describe(c, r->who.tenant_id, u->path, CARMIN_SELF)) || gj_db_commit(c) != 0) {
        json_decref(desc);
        carmin_unavailable(r);
        return;
    }
    answer_created(r, u, desc);
}

static void put_done(struct gj_req *r, int ok)
{
    (void)ok;
    struct put *u = r->state;
    if (!u)
        return;
    if (u->extracting) {   /* not expected: a parked connection does not end */
        carmin_archive_abandon(&u->task);
        gj_park_leave(&u->park);
    }
    json_decref(u->desc);
    if (u->w)
        gj_blob_writer_abort(u->w);
    free(u->json);
    free(u->zip);
    free(u);
    r->state = NULL;   /* the request's end rolls back what is left of the transaction */
}

/* ---------- GET ---------- */

/* The MD5 of a blob, read in pieces inside the open transaction. 0 or -1. */
static int blob_md5(PGconn *c, const struct gj_blob_info *info, char hex[33])
{
    struct gj_blob_reader *rd = gj_blob_reader_open_blob(c, info, NULL);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = rd && md && EVP_DigestInit_ex(md, EVP_md5(), NULL) == 1;
    char *piece = malloc(1 << 16);
    ok = ok && piece;
    for (uint64_t off = 0; ok && off < info->size;) {
        long got = gj_blob_reader_read(rd, off, piece, 1 << 16);
        ok = got > 0 && EVP_DigestUpdate(md, piece, (size_t)got) == 1;
        off += got > 0 ? (uint64_t)got : 0;
    }
    unsigned char d[16];
    ok = ok && EVP_DigestFinal_ex(md, d, NULL) == 1;
    for (int i = 0; ok && i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    free(piece);
    EVP_MD_CTX_free(md);
    if (rd)
        gj_blob_reader_close(rd);
    return ok ? 0 : -1;
}

/* The file's blob, inside a transaction opened on c: 1, or 0/-1 answered. */
static int file_blob(struct gj_req *r, PGconn *c, const char *path, const struct carmin_entry *e,
                     struct gj_blob_info *info)
{
    if (e->is_dir) {
        carmin_error(r, CARMIN_BAD_REQUEST, "%s is a directory: list it and fetch its files", path);
        return 0;
    }
    int rc = gj_db_begin(c) == 0 ? gj_blob_lookup(c, r->who.tenant_id, e->blob_id, info) : -1;
    if (rc <= 0)
        carmin_unavailable(r);   /* a path's blob cannot go while the path holds it */
    return rc;
}

static void get_md5(struct gj_req *r, PGconn *c, const char *path, const struct carmin_entry *e)
{
    struct gj_blob_info info;
    char hex[33];
    if (file_blob(r, c, path, e, &info) <= 0)
        return;
    if (blob_md5(c, &info, hex) != 0) {
        carmin_unavailable(r);
        return;
    }
    gj_respond_json(r, 200, json_pack("{s:s}", "md5", hex));
}

static void get_content(struct gj_req *r, PGconn *c, const char *path, const struct carmin_entry *e)
{
    struct gj_blob_info info;
    if (e->is_dir) {
        carmin_send_dir_tar(r, c, path);
        return;
    }
    if (file_blob(r, c, path, e, &info) > 0)
        gj_http_send_blob(r, &info, NULL, strrchr(path, '/') + 1);
}

static void get_description(struct gj_req *r, PGconn *c, const char *path, const struct carmin_entry *e, int list)
{
    if (list && !e->is_dir) {
        carmin_error(r, CARMIN_BAD_REQUEST, "%s is a file, not a directory", path);
        return;
    }
    json_t *d = carmin_fs_describe(c, r->who.tenant_id, path, list ? CARMIN_CHILDREN : CARMIN_SELF);
    if (!d)
        carmin_unavailable(r);
    else
        gj_respond_json(r, 200, d);
}

static void path_get(struct gj_req *r)
{
    char path[CARMIN_PATH_MAX];
    static const char *const actions[] = { "content", "properties", "list", "exists", "md5" };
    const char *action = gj_req_query(r, "action");
    int a = -1;
    for (int i = 0; action && i < 5; i++)
        if (strcmp(action, actions[i]) == 0)
            a = i;
    if (a < 0) {
        carmin_error(r, CARMIN_BAD_REQUEST, "action is content, properties, list, exists or md5");
        return;
    }
    if (request_path(r, path) != 0)
        return;
    PGconn *c = gj_req_db(r);
    struct carmin_entry e;
    int rc = c ? carmin_fs_stat(c, r->who.tenant_id, path, &e) : -1;
    if (rc < 0) {
        carmin_unavailable(r);
        return;
    }
    if (a == 3) {
        gj_respond_json(r, 200, json_pack("{s:b}", "exists", rc));
        return;
    }
    if (rc == 0) {
        carmin_error(r, CARMIN_NOT_FOUND, "no path %s", path);
        return;
    }
    if (a == 0)
        get_content(r, c, path, &e);
    else if (a == 4)
        get_md5(r, c, path, &e);
    else
        get_description(r, c, path, &e, a == 2);
}

/* ---------- DELETE ---------- */

static void path_delete(struct gj_req *r)
{
    char path[CARMIN_PATH_MAX];
    if (request_path(r, path) != 0)
        return;
    if (strcmp(path, CARMIN_HOME) == 0) {
        carmin_error(r, CARMIN_BAD_REQUEST, "%s itself cannot be deleted", CARMIN_HOME);
        return;
    }
    PGconn *c = gj_req_db(r);
    int rc = CARMIN_FS_RACE;
    for (int tries = 0; rc == CARMIN_FS_RACE && tries < 3; tries++) {   /* a path made under it meanwhile: again */
        rc = c && gj_db_begin(c) == 0 ? carmin_fs_delete(c, r->who.tenant_id, path) : -1;
        if (rc > 0 && gj_db_commit(c) != 0)
            rc = -1;
        if (rc < 0 && c)
            gj_db_rollback(c);
    }
    if (rc < 0)
        carmin_unavailable(r);
    else if (rc == 0)
        carmin_error(r, CARMIN_NOT_FOUND, "no path %s", path);
    else
        gj_respond_empty(r, 204);
}

static const struct gj_route path_routes[] = {
    { "GET", "/rest/path/{completePath}", GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, path_get, NULL },
    { "PUT", "/rest/path/{completePath}", GJ_AUTH_NONE, GJ_BODY_UPLOAD, put_begin, put_data, put_handle, put_done },
    { "DELETE", "/rest/path/{completePath}", GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, path_delete, NULL },
};
const struct gj_route_table gj_routes_carmin_path = { path_routes, sizeof path_routes / sizeof path_routes[0] };
