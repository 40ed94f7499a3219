/*
 * upload_spool.c — uploads are spooled to an unnamed file while the client sends
 * them, under upload slots (global and per tenant), a body limit, a disk reserve
 * and a minimum rate; the route sees the body only once it is complete (see
 * upload_spool.h for why).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "service/http/http_server.h"
#include "service/base/log.h"
#include "service/http/upload_spool.h"

#define COMPONENT "upload"
/* The free disk is looked at again each time this much more was spooled. */
#define DISK_CHECK_EVERY ((uint64_t)64 << 20)

struct gj_upload {
    int fd;
    uint64_t bytes;            /* spooled */
    uint64_t next_disk_check;
    double mark_t;             /* start of the current rate window */
    uint64_t mark_bytes;       /* bytes spooled at its start */
    char dir[GJ_PATH_MAX];
};

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------- upload slots: global and per tenant ---------- */

struct tenant_uploads {
    char tenant_id[GJ_UUID_LEN + 1];
    int n;
};

static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;
static int uploads_active;
static struct tenant_uploads *tenants;   /* tenants with an upload in progress */
static size_t n_tenants, cap_tenants;

static struct tenant_uploads *tenant_entry_locked(const char *tenant_id, int create)
{
    for (size_t i = 0; i < n_tenants; i++)
        if (strcmp(tenants[i].tenant_id, tenant_id) == 0)
            return &tenants[i];
    if (!create)
        return NULL;
    if (n_tenants == cap_tenants) {
        size_t cap = cap_tenants ? cap_tenants * 2 : 16;
        struct tenant_uploads *t = realloc(tenants, cap * sizeof *t);
        if (!t)
            return NULL;
        tenants = t;
        cap_tenants = cap;
    }
    struct tenant_uploads *e = &tenants[n_tenants++];
    snprintf(e->tenant_id, sizeof e->tenant_id, "%s", tenant_id);
    e->n = 0;
    return e;
}

int gj_req_upload_slot(struct gj_req *r)
{
    if (r->upload_slot)
        return 0;
    const struct gj_config *cfg = &r->srv->cfg;
    const char *tenant = r->authed ? r->who.tenant_id : "";
    int rc = 0;
    pthread_mutex_lock(&slots_mu);
    struct tenant_uploads *e = NULL;
    if (cfg->max_uploads > 0 && uploads_active >= cfg->max_uploads)
        rc = GJ_UPLOAD_SERVER_BUSY;
    else if (!(e = tenant_entry_locked(tenant, 1)))
        rc = GJ_UPLOAD_SERVER_BUSY;           /* no memory for the count: as if busy */
    else if (cfg->max_uploads_per_tenant > 0 && e->n >= cfg->max_uploads_per_tenant)
        rc = GJ_UPLOAD_TENANT_BUSY;
    if (rc == 0) {
        e->n++;
        uploads_active++;
        r->upload_slot = 1;
    } else if (e && e->n == 0) {
        *e = tenants[--n_tenants];            /* the entry made for nothing */
    }
    pthread_mutex_unlock(&slots_mu);
    return rc;
}

void gj_req_upload_slot_release(struct gj_req *r)
{
    if (!r->upload_slot)
        return;
    r->upload_slot = 0;
    pthread_mutex_lock(&slots_mu);
    struct tenant_uploads *e = tenant_entry_locked(r->authed ? r->who.tenant_id : "", 0);
    if (e && --e->n <= 0)
        *e = tenants[--n_tenants];
    if (uploads_active > 0)
        uploads_active--;
    pthread_mutex_unlock(&slots_mu);
}

void gj_respond_upload_busy(struct gj_req *r, int rc)
{
    struct MHD_Response *resp;
    if (rc == GJ_UPLOAD_TENANT_BUSY)
        resp = gj_problem(r, 429, NULL, "this tenant already has %d uploads in progress; retry when one ends",
                          r->srv->cfg.max_uploads_per_tenant);
    else
        resp = gj_problem(r, 503, NULL, "too many uploads in progress; retry shortly");
    if (resp)
        MHD_add_response_header(resp, "Retry-After", rc == GJ_UPLOAD_TENANT_BUSY ? "5" : "1");
}

/* ---------- the spool ---------- */

/* An unnamed file in dir (O_TMPFILE; where the filesystem has none, a named one
 * unlinked at once). -1 with errno. */
static int spool_open(const char *dir)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
        return fd;
    char path[GJ_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/upload-XXXXXX", dir);
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0)
        unlink(path);
    return fd;
}

/* 1 when the spool's filesystem keeps the reserve free after `more` bytes. */
static int disk_has_room(const struct gj_upload *u, uint64_t reserve, uint64_t more)
{
    struct statvfs st;
    if (statvfs(u->dir, &st) != 0)
        return 1;   /* cannot tell: the writes will say */
    uint64_t avail = (uint64_t)st.f_bavail * (uint64_t)st.f_frsize;
    return avail >= more && avail - more >= reserve;
}

static void respond_no_disk(struct gj_req *r)
{
    struct MHD_Response *resp =
        gj_problem(r, 507, NULL, "the server has not the disk space for this upload now; retry later");
    if (resp)
        MHD_add_response_header(resp, "Retry-After", "30");
}

static uint64_t declared_length(struct gj_req *r)
{
    const char *cl = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!cl)
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(cl, &end, 10);
    return errno || end == cl || *end ? 0 : (uint64_t)v;
}

static int spool_start(struct gj_req *r)
{
    const struct gj_config *cfg = &r->srv->cfg;
    int rc = gj_req_upload_slot(r);
    if (rc != 0) {
        gj_respond_upload_busy(r, rc);
        return -1;
    }
    struct gj_upload *u = calloc(1, sizeof *u);
    if (!u) {
        gj_problem(r, 500, NULL, "out of memory");
        return -1;
    }
    u->fd = -1;
    r->upload = u;
    if (gj_path_join(u->dir, sizeof u->dir, cfg->data_dir, "spool") != 0 || gj_mkdir_p(u->dir, 0700) != 0) {
        gj_log_error(COMPONENT, "cannot create the spool directory under %s: %s", cfg->data_dir, strerror(errno));
        gj_problem(r, 500, NULL, "the upload could not be staged");
        return -1;
    }
    if (!disk_has_room(u, cfg->upload_disk_reserve, declared_length(r))) {
        respond_no_disk(r);
        return -1;
    }
    u->fd = spool_open(u->dir);
    if (u->fd < 0) {
        gj_log_error(COMPONENT, "cannot create a spool file in %s: %s", u->dir, strerror(errno));
        gj_problem(r, 500, NULL, "the upload could not be staged");
        return -1;
    }
    u->next_disk_check = DISK_CHECK_EVERY;
    u->mark_t = mono_now();
    /* A client silent for a whole window is cut there (the rate check below only
     * runs when bytes arrive). */
    MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT,
                              (unsigned int)cfg->upload_rate_window_seconds);
    return 0;
}

/* 0, or -1 when the upload fell under the minimum rate over the last window. */
static int rate_ok(struct gj_upload *u, const struct gj_config *cfg)
{
    double now = mono_now(), span = now - u->mark_t;
    if (cfg->upload_min_rate == 0 || span < (double)cfg->upload_rate_window_seconds)
        return 0;
    int slow = (double)(u->bytes - u->mark_bytes) < (double)cfg->upload_min_rate * span;
    u->mark_t = now;
    u->mark_bytes = u->bytes;
    return slow ? -1 : 0;
}

static int spool_write(struct gj_req *r, struct gj_upload *u, const char *data, size_t len)
{
    while (len) {
        ssize_t n = write(u->fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (errno == ENOSPC || errno == EDQUOT) {
                respond_no_disk(r);
            } else {
                gj_log_error(COMPONENT, "spool write: %s", strerror(errno));
                gj_problem(r, 500, NULL, "the upload could not be staged");
            }
            return -1;
        }
        data += n;
        len -= (size_t)n;
        u->bytes += (uint64_t)n;
    }
    return 0;
}

static void spool_receive(struct gj_req *r, const char *data, size_t len)
{
    struct gj_upload *u = r->upload;
    const struct gj_config *cfg = &r->srv->cfg;
    if (!u || u->fd < 0) {
        gj_problem(r, 500, NULL, "internal error");
        return;
    }
    if (u->bytes + len > r->body_limit) {
        gj_problem(r, 413, NULL, "the upload is over the limit of %llu bytes", (unsigned long long)r->body_limit);
        return;
    }
    if (u->bytes + len >= u->next_disk_check) {
        if (!disk_has_room(u, cfg->upload_disk_reserve, len)) {
            respond_no_disk(r);
            return;
        }
        u->next_disk_check = u->bytes + len + DISK_CHECK_EVERY;
    }
    if (spool_write(r, u, data, len) != 0)
        return;
    if (rate_ok(u, cfg) != 0) {
        /* waiting for the rest of its body is what it must not get: answered now */
        gj_req_cut(r, 408, "the upload was cut: it sent less than %llu bytes per second over %d seconds",
                   (unsigned long long)cfg->upload_min_rate, cfg->upload_rate_window_seconds);
        close(u->fd);
        u->fd = -1;
    }
}

static int spool_replay(struct gj_req *r)
{
    struct gj_upload *u = r->upload;
    MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT, gj_http_idle_timeout(r->srv));
    char *buf = malloc(GJ_UPLOAD_REPLAY_CHUNK);
    if (!u || u->fd < 0 || !buf || lseek(u->fd, 0, SEEK_SET) != 0) {
        free(buf);
        gj_problem(r, 500, NULL, "the upload could not be read back");
        return -1;
    }
    int rc = 0;
    for (;;) {
        ssize_t n = read(u->fd, buf, GJ_UPLOAD_REPLAY_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            gj_log_error(COMPONENT, "spool read: %s", strerror(errno));
            gj_problem(r, 500, NULL, "the upload could not be read back");
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        if (r->route->data && r->route->data(r, buf, (size_t)n) < 0) {
            if (!r->response)
                gj_problem(r, 500, NULL, "internal error");
            rc = -1;
            break;
        }
    }
    free(buf);
    return rc;
}

static void spool_end(struct gj_req *r)
{
    struct gj_upload *u = r->upload;
    if (u) {
        if (u->fd >= 0)
            close(u->fd);   /* an unnamed file: its blocks go with it */
        free(u);
        r->upload = NULL;
    }
    gj_req_upload_slot_release(r);
}

const struct gj_upload_ops gj_upload_spool_ops = { spool_start, spool_receive, spool_replay, spool_end };
