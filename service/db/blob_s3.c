/*
 * blob_s3.c — blobs as objects of an S3 bucket (blob_s3.h): the writer's multipart upload,
 * the reader's window, the export to a file, the records of unowned objects and the
 * maintenance pass that deletes them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "service/base/log.h"
#include "service/base/uuid.h"
#include "service/db/blob_s3.h"
#include "service/db/db.h"

#define COMPONENT "blob"
#define FIRST_PART (8u * 1024 * 1024)
#define MAX_PART (5ull * 1024 * 1024 * 1024)
#define MAX_PARTS 10000
#define WINDOW (4u * 1024 * 1024)

static const struct gj_s3 *store;   /* where blobs are read from */
static int store_writes;           /* and whether new ones go there */
static char *records_url;
static PGconn *records;   /* the upload records' own connection, under records_lock */
static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_mutex_t health_lock = PTHREAD_MUTEX_INITIALIZER;
static int store_down;
static time_t down_since;
static char down_why[300];
static _Thread_local int thread_unreachable;

int gj_blobstore_use_s3(const struct gj_s3 *s3, const char *db_url, int writes)
{
    char *url = strdup(db_url ? db_url : "");
    if (!s3 || !url) {
        free(url);
        return -1;
    }
    gj_blobstore_use_postgres();
    pthread_mutex_lock(&records_lock);
    records_url = url;
    store = s3;
    store_writes = writes;
    pthread_mutex_unlock(&records_lock);
    return 0;
}

void gj_blobstore_use_postgres(void)
{
    pthread_mutex_lock(&records_lock);
    store = NULL;
    store_writes = 0;
    if (records)
        PQfinish(records);
    records = NULL;
    free(records_url);
    records_url = NULL;
    pthread_mutex_unlock(&records_lock);
}

const struct gj_s3 *gj_blobstore_s3(void)
{
    return store_writes ? store : NULL;
}

/* Every S3 call's outcome passes here: the store's health for /readyz and 503s. */
static int noted(int rc, struct gj_s3_conn *c)
{
    thread_unreachable = rc == GJ_S3_UNREACHABLE;
    if (rc == GJ_S3_OK || rc == GJ_S3_NOT_FOUND || rc == GJ_S3_UNREACHABLE) {
        pthread_mutex_lock(&health_lock);
        if (rc == GJ_S3_UNREACHABLE) {
            if (!store_down)
                down_since = time(NULL);
            store_down = 1;
            snprintf(down_why, sizeof down_why, "%s", gj_s3_conn_error(c));
        } else {
            store_down = 0;
        }
        pthread_mutex_unlock(&health_lock);
    }
    if (rc != GJ_S3_OK && rc != GJ_S3_NOT_FOUND)
        gj_log_error(COMPONENT, "object store: %s", gj_s3_conn_error(c));
    return rc;
}

int gj_blobstore_health(char *why, size_t why_size)
{
    pthread_mutex_lock(&health_lock);
    int up = !store || !store_down;
    if (!up && why)
        snprintf(why, why_size, "the object store has not answered for %lld s: %s",
                 (long long)(time(NULL) - down_since), down_why);
    pthread_mutex_unlock(&health_lock);
    return up;
}

int gj_blobstore_unreachable(int clear)
{
    int was = thread_unreachable;
    if (clear)
        thread_unreachable = 0;
    return was;
}

int gj_blobstore_probe(char *why, size_t why_size)
{
    if (!store)
        return 1;
    struct gj_s3_conn *c = gj_s3_conn_new(store);
    if (!c) {
        snprintf(why, why_size, "object store: out of memory");
        return 0;
    }
    /* Any answer about a key that does not exist is the store answering with our keys. */
    uint64_t size;
    int rc = noted(gj_s3_head(c, "gpujobd-readyz-probe", &size, NULL), c);
    if (rc != GJ_S3_OK && rc != GJ_S3_NOT_FOUND)
        snprintf(why, why_size, "object store: %s", gj_s3_conn_error(c));
    gj_s3_conn_free(c);
    return rc == GJ_S3_OK || rc == GJ_S3_NOT_FOUND;
}

/* One statement on the records' connection (reconnected when it broke). 0 or -1. */
static int record(const char *sql, const char *key)
{
    pthread_mutex_lock(&records_lock);
    int rc = -1;
    for (int attempt = 0; attempt < 2 && rc != 0; attempt++) {
        if (records && PQstatus(records) != CONNECTION_OK) {
            PQfinish(records);
            records = NULL;
        }
        if (!records && records_url) {
            records = gj_db_connect(records_url);
            /* Never wait long on a row another transaction holds: a record is for the pass. */
            if (records && gj_db_cmd(records, "SET lock_timeout = '5s'", 0, NULL) != 0) {
                PQfinish(records);
                records = NULL;
            }
        }
        if (!records)
            break;
        const char *p[1] = { key };
        rc = gj_db_cmd(records, sql, 1, p);
    }
    pthread_mutex_unlock(&records_lock);
    return rc;
}

/* ---------- writing ---------- */

#define IN_FLIGHT 3   /* parts sent at once, each on a connection of its own */

/* One part on its way: its bytes, and the thread that sends them. */
struct part_job {
    struct gj_blob_s3w *w;
    struct gj_s3_conn *conn;
    unsigned char *buf;
    size_t len, cap;
    int n;                                  /* the part's number */
    int rc;
    int busy;                               /* a thread to join */
    pthread_t thread;
};

struct gj_blob_s3w {
    struct gj_s3_conn *conn;
    char key[GJ_BLOB_S3_KEY_MAX];
    char content_type[256];
    char upload_id[GJ_S3_UPLOAD_ID_MAX];   /* "" until the first full part */
    unsigned char *part;                    /* the part being filled */
    size_t part_len, part_cap;
    int parts;                              /* handed to a job so far */
    char (*etags)[GJ_S3_ETAG_MAX];          /* written by the jobs: grown only with none busy */
    int etags_cap;
    struct part_job jobs[IN_FLIGHT];
    int next_job;
    int finished;                           /* the object exists */
    int failed;
};

static size_t part_size(int n)   /* part n, 1-based */
{
    uint64_t size = (uint64_t)FIRST_PART << ((n - 1) / 1000);
    return (size_t)(size < MAX_PART ? size : MAX_PART);
}

/* An upload to a new key under prefix ("blobs/<tenant>", "blobs/models"): under blobs/, so the
 * maintenance pass aborts it when its replica dies mid-upload. */
static struct gj_blob_s3w *open_under(const char *prefix, const char *content_type)
{
    thread_unreachable = 0;
    if (!store)
        return NULL;
    struct gj_blob_s3w *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    unsigned char rnd[16];
    char hex[33];
    if (RAND_bytes(rnd, sizeof rnd) != 1) {
        free(w);
        return NULL;
    }
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
    snprintf(w->key, sizeof w->key, "%s/%s", prefix, hex);
    snprintf(w->content_type, sizeof w->content_type, "%s", content_type);
    w->part_cap = part_size(1);
    w->part = malloc(w->part_cap);
    w->conn = gj_s3_conn_new(store);
    if (!w->part || !w->conn) {
        gj_log_error(COMPONENT, "out of memory for an object upload");
        gj_blob_s3w_free(w);
        return NULL;
    }
    if (record("INSERT INTO blob_objects_unowned (s3_key, uploading) VALUES ($1, true)", w->key) != 0) {
        gj_log_error(COMPONENT, "cannot record the upload of %s", w->key);
        gj_blob_s3w_free(w);
        return NULL;
    }
    return w;
}

struct gj_blob_s3w *gj_blob_s3w_open(const char *tenant_id, const char *content_type)
{
    if (!gj_is_uuid(tenant_id))
        return NULL;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "blobs/%s", tenant_id);
    return open_under(prefix, content_type);
}

struct gj_blob_s3w *gj_blob_s3w_open_model_file(void)
{
    return open_under("blobs/models", "application/octet-stream");
}

static void *send_job(void *arg)
{
    struct part_job *j = arg;
    struct gj_blob_s3w *w = j->w;
    unsigned char md[32];
    unsigned int n = 0;
    if (EVP_Digest(j->buf, j->len, md, &n, EVP_sha256(), NULL) != 1) {
        j->rc = GJ_S3_ERROR;
        return NULL;
    }
    j->rc = noted(gj_s3_multipart_part(j->conn, w->key, w->upload_id, j->n, j->buf, j->len, md, w->etags[j->n - 1]),
                  j->conn);
    return NULL;
}

/* Waits for job j; -1 when its part failed (the store's silence is then this thread's too). */
static int join_job(struct part_job *j)
{
    if (!j->busy)
        return 0;
    pthread_join(j->thread, NULL);
    j->busy = 0;
    if (j->rc == GJ_S3_UNREACHABLE)
        thread_unreachable = 1;
    return j->rc == GJ_S3_OK ? 0 : -1;
}

static int join_all(struct gj_blob_s3w *w)
{
    int rc = 0;
    for (int i = 0; i < IN_FLIGHT; i++)
        if (join_job(&w->jobs[i]) != 0)
            rc = -1;
    return rc;
}

/* Hands the filled part to a job (waiting for the oldest when all are busy) and takes that job's
 * old buffer to fill next. */
static int send_part(struct gj_blob_s3w *w)
{
    if (!w->upload_id[0] &&
        noted(gj_s3_multipart_create(w->conn, w->key, w->content_type, w->upload_id), w->conn) != GJ_S3_OK)
        return -1;
    if (w->parts >= MAX_PARTS) {
        gj_log_error(COMPONENT, "%s: more than %d parts", w->key, MAX_PARTS);
        return -1;
    }
    if (w->parts == w->etags_cap) {   /* the jobs write into it: none may be running */
        if (join_all(w) != 0)
            return -1;
        int cap = w->etags_cap ? w->etags_cap * 2 : 64;
        void *e = realloc(w->etags, (size_t)cap * sizeof *w->etags);
        if (!e)
            return -1;
        w->etags = e;
        w->etags_cap = cap;
    }
    struct part_job *j = &w->jobs[w->next_job];
    w->next_job = (w->next_job + 1) % IN_FLIGHT;
    if (join_job(j) != 0)
        return -1;
    if (!j->conn && !(j->conn = gj_s3_conn_new(store)))
        return -1;
    unsigned char *spare = j->buf;
    size_t spare_cap = j->cap;
    j->w = w;
    j->buf = w->part;
    j->cap = w->part_cap;
    j->len = w->part_len;
    j->n = ++w->parts;
    j->rc = GJ_S3_ERROR;
    w->part = spare;
    w->part_cap = spare_cap;
    w->part_len = 0;
    if (pthread_create(&j->thread, NULL, send_job, j) != 0) {
        gj_log_error(COMPONENT, "%s: cannot start a thread for part %d", w->key, j->n);
        return -1;
    }
    j->busy = 1;
    size_t next = part_size(w->parts + 1);
    if (next > w->part_cap || !w->part) {   /* the next thousand parts are twice as large */
        unsigned char *p = realloc(w->part, next);
        if (!p)
            return -1;
        w->part = p;
        w->part_cap = next;
    }
    return 0;
}

int gj_blob_s3w_write(struct gj_blob_s3w *w, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len > 0 && !w->failed) {
        size_t room;
        unsigned char *at = gj_blob_s3w_room(w, &room);
        size_t n = len < room ? len : room;
        memcpy(at, p, n);
        if (gj_blob_s3w_wrote(w, n) != 0)
            return -1;
        p += n;
        len -= n;
    }
    return w->failed ? -1 : 0;
}

unsigned char *gj_blob_s3w_room(struct gj_blob_s3w *w, size_t *room)
{
    *room = w->part_cap - w->part_len;
    return w->part + w->part_len;
}

int gj_blob_s3w_wrote(struct gj_blob_s3w *w, size_t n)
{
    if (w->failed || w->finished)
        return -1;
    w->part_len += n;
    if (w->part_len == w->part_cap && send_part(w) != 0) {
        w->failed = 1;
        return -1;
    }
    return 0;
}

int gj_blob_s3w_finish(struct gj_blob_s3w *w)
{
    if (w->failed)
        return -1;
    if (w->finished)
        return 0;
    int ok;
    if (!w->upload_id[0]) {   /* smaller than one part: one PUT */
        ok = noted(gj_s3_put(w->conn, w->key, w->part, w->part_len, NULL, w->content_type), w->conn) == GJ_S3_OK;
    } else {
        ok = (w->part_len == 0 || send_part(w) == 0);
        ok = join_all(w) == 0 && ok &&
             noted(gj_s3_multipart_complete(w->conn, w->key, w->upload_id, (const char(*)[GJ_S3_ETAG_MAX])w->etags,
                                            w->parts), w->conn) == GJ_S3_OK;
    }
    if (!ok) {
        w->failed = 1;
        return -1;
    }
    w->finished = 1;
    /* what stays until the commit is small */
    free(w->part);
    w->part = NULL;
    w->part_cap = w->part_len = 0;
    for (int i = 0; i < IN_FLIGHT; i++) {
        free(w->jobs[i].buf);
        w->jobs[i].buf = NULL;
        w->jobs[i].cap = 0;
    }
    return 0;
}

const char *gj_blob_s3w_key(const struct gj_blob_s3w *w)
{
    return w->key;
}

void gj_blob_s3w_free(struct gj_blob_s3w *w)
{
    if (!w)
        return;
    join_all(w);
    for (int i = 0; i < IN_FLIGHT; i++) {
        gj_s3_conn_free(w->jobs[i].conn);
        free(w->jobs[i].buf);
    }
    gj_s3_conn_free(w->conn);
    free(w->part);
    free(w->etags);
    free(w);
}

void gj_blob_s3w_abort(struct gj_blob_s3w *w)
{
    if (!w)
        return;
    int unreachable = thread_unreachable;   /* why it failed, kept for the answer */
    if (join_all(w) != 0 && thread_unreachable)   /* no part may still be on its way */
        unreachable = 1;
    /* Nothing is left behind: the parts go with the upload, a made object is deleted; what
     * fails here stays recorded in blob_objects_unowned for the maintenance pass. */
    int clean = 1;
    if (w->finished)
        clean = noted(gj_s3_delete(w->conn, w->key), w->conn) == GJ_S3_OK;
    else if (w->upload_id[0])
        clean = noted(gj_s3_multipart_abort(w->conn, w->key, w->upload_id), w->conn) == GJ_S3_OK;
    if (clean)
        /* SKIP LOCKED: the caller's failed transaction may hold the row (its INSERT's DELETE)
         * until it rolls back, after this returns; then the record stays for the pass. */
        record("DELETE FROM blob_objects_unowned WHERE s3_key IN (SELECT s3_key FROM blob_objects_unowned"
               " WHERE s3_key = $1 AND uploading FOR UPDATE SKIP LOCKED)", w->key);
    thread_unreachable = unreachable || thread_unreachable;
    gj_blob_s3w_free(w);
}

/* ---------- reading ---------- */

/* A window of the object: its bytes and where they start. */
struct window {
    unsigned char *buf;
    uint64_t off;
    size_t len;
};

/* The next window, fetched on a thread of its own while the current one is read. */
struct prefetch {
    struct gj_blob_s3r *r;
    struct gj_s3_conn *conn;
    struct window win;
    int rc;
    int busy;
    pthread_t thread;
};

struct gj_blob_s3r {
    struct gj_s3_conn *conn;
    char key[GJ_BLOB_S3_KEY_MAX];
    uint64_t size;
    struct window cur;
    struct prefetch next;
};

struct into_buf {
    unsigned char *buf;
    size_t len, cap;
};

static int into_buf(const void *data, size_t len, void *arg)
{
    struct into_buf *b = arg;
    if (len > b->cap - b->len)
        return 1;   /* more than asked for: the store is not answering the range */
    memcpy(b->buf + b->len, data, len);
    b->len += len;
    return 0;
}

/* One ranged GET of the window starting at off into w (w->buf holds WINDOW bytes). */
static int fetch_window(struct gj_blob_s3r *r, struct gj_s3_conn *c, uint64_t off, struct window *w)
{
    uint64_t want = r->size - off < WINDOW ? r->size - off : WINDOW;
    struct into_buf b = { w->buf, 0, (size_t)want };
    w->len = 0;
    int rc = noted(gj_s3_get(c, r->key, off, want, NULL, into_buf, &b, NULL), c);
    if (rc == GJ_S3_OK && b.len == 0)
        rc = GJ_S3_ERROR;
    if (rc == GJ_S3_OK) {
        w->off = off;
        w->len = b.len;
    }
    return rc;
}

static void *prefetch_run(void *arg)
{
    struct prefetch *p = arg;
    p->rc = fetch_window(p->r, p->conn, p->win.off, &p->win);
    return NULL;
}

/* Starts fetching the window after the current one, when there is one. */
static void prefetch_start(struct gj_blob_s3r *r)
{
    struct prefetch *p = &r->next;
    uint64_t off = r->cur.off + r->cur.len;
    if (p->busy || off >= r->size)
        return;
    if (!p->conn && !(p->conn = gj_s3_conn_new(store)))
        return;
    if (!p->win.buf && !(p->win.buf = malloc(WINDOW)))
        return;
    p->r = r;
    p->win.off = off;
    p->win.len = 0;
    p->busy = pthread_create(&p->thread, NULL, prefetch_run, p) == 0;
}

/* Waits for the prefetch; 1 when it holds offset (then it becomes the current window). */
static int prefetch_take(struct gj_blob_s3r *r, uint64_t offset)
{
    struct prefetch *p = &r->next;
    if (!p->busy)
        return 0;
    pthread_join(p->thread, NULL);
    p->busy = 0;
    if (p->rc == GJ_S3_UNREACHABLE)
        thread_unreachable = 1;
    if (p->rc != GJ_S3_OK || offset < p->win.off || offset >= p->win.off + p->win.len)
        return 0;
    struct window t = r->cur;
    r->cur = p->win;
    p->win = t;
    return 1;
}

struct gj_blob_s3r *gj_blob_s3r_open(const char *key, uint64_t size, int *missing)
{
    thread_unreachable = 0;
    *missing = 0;
    if (!store || !key)
        return NULL;
    struct gj_blob_s3r *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    snprintf(r->key, sizeof r->key, "%s", key);
    r->size = size;
    r->cur.buf = malloc(WINDOW);
    r->conn = gj_s3_conn_new(store);
    if (!r->cur.buf || !r->conn) {
        gj_blob_s3r_close(r);
        return NULL;
    }
    /* The object must be there before any byte is promised to a client. */
    uint64_t have = 0;
    int rc = noted(gj_s3_head(r->conn, key, &have, NULL), r->conn);
    if (rc == GJ_S3_OK && have != size) {
        gj_log_error(COMPONENT, "object %s holds %llu bytes where its blob has %llu", key,
                     (unsigned long long)have, (unsigned long long)size);
        rc = GJ_S3_NOT_FOUND;
    }
    if (rc != GJ_S3_OK) {
        *missing = rc == GJ_S3_NOT_FOUND;
        gj_blob_s3r_close(r);
        return NULL;
    }
    return r;
}

/* Up to len bytes from offset, out of the current window; outside it, out of the prefetched
 * next one, or else one ranged GET there. Reading on, the window after is fetched meanwhile. As
 * many bytes as there are, as for a large object. */
long gj_blob_s3r_read(struct gj_blob_s3r *r, uint64_t offset, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len && offset + got < r->size) {
        uint64_t at = offset + got;
        if (at < r->cur.off || at >= r->cur.off + r->cur.len) {
            if (!prefetch_take(r, at) && fetch_window(r, r->conn, at, &r->cur) != GJ_S3_OK)
                return -1;
            prefetch_start(r);
        }
        size_t from = (size_t)(at - r->cur.off), n = r->cur.len - from;
        if (n > len - got)
            n = len - got;
        memcpy((char *)buf + got, r->cur.buf + from, n);
        got += n;
    }
    return (long)got;
}

void gj_blob_s3r_close(struct gj_blob_s3r *r)
{
    if (!r)
        return;
    if (r->next.busy)
        pthread_join(r->next.thread, NULL);
    gj_s3_conn_free(r->next.conn);
    free(r->next.win.buf);
    gj_s3_conn_free(r->conn);
    free(r->cur.buf);
    free(r);
}

#define EXPORT_RANGES 4                    /* a large object is fetched in this many ranges at once */
#define EXPORT_SPLIT (16u * 1024 * 1024)   /* from this size on */

/* One range of an export: written where it belongs in the file, on a connection of its own. */
struct export_range {
    const char *key;
    int fd;
    uint64_t off, len, at;
    int rc;
    struct gj_s3_conn *conn;
    pthread_t thread;
    int started;
};

static int into_fd_at(const void *data, size_t len, void *arg)
{
    struct export_range *e = arg;
    const char *p = data;
    while (len > 0) {
        ssize_t w = pwrite(e->fd, p, len, (off_t)e->at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return 1;
        p += w;
        len -= (size_t)w;
        e->at += (uint64_t)w;
    }
    return 0;
}

static void *export_range_run(void *arg)
{
    struct export_range *e = arg;
    e->rc = noted(gj_s3_get(e->conn, e->key, e->off, e->len, NULL, into_fd_at, e, NULL), e->conn);
    if (e->rc == GJ_S3_OK && e->at != e->off + e->len)
        e->rc = GJ_S3_ERROR;   /* the store sent less than the range */
    return NULL;
}

int gj_blob_s3_export(const char *key, uint64_t size, int fd, int *missing)
{
    thread_unreachable = 0;
    *missing = 0;
    if (!store)
        return -1;
    /* A small object in one GET; a large one in ranges fetched at once (job inputs). */
    int n = size >= EXPORT_SPLIT ? EXPORT_RANGES : 1;
    struct export_range ranges[EXPORT_RANGES] = { 0 };
    uint64_t step = size / (uint64_t)n;
    int rc = GJ_S3_OK;
    for (int i = 0; i < n; i++) {
        struct export_range *e = &ranges[i];
        e->key = key;
        e->fd = fd;
        e->off = e->at = step * (uint64_t)i;
        e->len = i == n - 1 ? size - e->off : step;
        e->rc = GJ_S3_ERROR;
        if (!(e->conn = gj_s3_conn_new(store))) {
            rc = GJ_S3_ERROR;
            break;
        }
        if (n == 1) {   /* on this thread (an empty object: len 0 asks for all of it) */
            export_range_run(e);
            continue;
        }
        e->started = pthread_create(&e->thread, NULL, export_range_run, e) == 0;
        if (!e->started) {
            rc = GJ_S3_ERROR;
            break;
        }
    }
    for (int i = 0; i < n; i++) {
        struct export_range *e = &ranges[i];
        if (e->started)
            pthread_join(e->thread, NULL);
        if (e->rc == GJ_S3_UNREACHABLE)
            thread_unreachable = 1;
        if (rc == GJ_S3_OK && e->rc != GJ_S3_OK)
            rc = e->rc;
        gj_s3_conn_free(e->conn);
    }
    *missing = rc == GJ_S3_NOT_FOUND;
    return rc == GJ_S3_OK ? 0 : -1;
}

char *gj_blob_s3_presign(const char *key, long expires_s, const char *content_disposition)
{
    return store ? gj_s3_presign_get(store, key, expires_s, time(NULL), content_disposition) : NULL;
}

/* ---------- maintenance ---------- */

struct stale {
    time_t before;
    struct gj_s3_conn *conn;
    int aborted, failed;
};

static int abort_stale(const char *key, const char *upload_id, time_t initiated, void *arg)
{
    struct stale *s = arg;
    if (initiated == 0 || initiated > s->before)
        return 0;
    if (noted(gj_s3_multipart_abort(s->conn, key, upload_id), s->conn) == GJ_S3_OK) {
        s->aborted++;
        gj_log_info(COMPONENT, "aborted the stale upload of %s (begun %lld s ago)", key,
                    (long long)(time(NULL) - initiated));
    } else {
        s->failed = 1;
    }
    return 0;
}

int gj_blob_s3_maintain(PGconn *conn, long upload_grace_s, int *deleted, int *aborted)
{
    *deleted = *aborted = 0;
    if (!store)   /* a replica that only reads the store still deletes what no blob owns */
        return 0;
    struct gj_s3_conn *c = gj_s3_conn_new(store);
    if (!c)
        return -1;
    char grace[24];
    snprintf(grace, sizeof grace, "%ld", upload_grace_s);
    const char *p[1] = { grace };
    int rc = 0;
    PGresult *res = gj_db_exec(conn,
                               "SELECT s3_key FROM blob_objects_unowned WHERE NOT uploading"
                               " OR since < now() - make_interval(secs => $1::bigint) ORDER BY since LIMIT 1000",
                               1, p, NULL);
    if (!res)
        rc = -1;
    for (int i = 0; res && i < PQntuples(res); i++) {
        const char *key = PQgetvalue(res, i, 0);
        if (noted(gj_s3_delete(c, key), c) != GJ_S3_OK) {
            rc = -1;
            break;
        }
        const char *k[1] = { key };
        if (gj_db_cmd(conn, "DELETE FROM blob_objects_unowned WHERE s3_key = $1", 1, k) != 0) {
            rc = -1;
            break;
        }
        (*deleted)++;
    }
    PQclear(res);
    struct stale s = { time(NULL) - upload_grace_s, c, 0, 0 };
    if (noted(gj_s3_list_uploads(c, "blobs/", abort_stale, &s), c) != GJ_S3_OK || s.failed)
        rc = -1;
    *aborted = s.aborted;
    gj_s3_conn_free(c);
    return rc;
}
