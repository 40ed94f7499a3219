/*
 * http_park.c — parked long polls and event streams (http_park.h).
 *
 * Entries hang in buckets by job id, so a job's notification resumes only its own
 * waiters. One thread ticks every TICK_MS: it resumes the entries whose time came, looks for
 * clients gone every GJ_PARK_GONE_CHECK_MS, asks the database about the keys of all entries
 * every GJ_PARK_KEY_CHECK_MS (outside the lock), and closes the park when the server starts
 * stopping. Lock order: the park's lock, then libmicrohttpd's own (MHD_suspend_connection and
 * MHD_resume_connection take it and call nothing of ours).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "service/auth/auth.h"
#include "service/db/db.h"
#include "service/http/http_park.h"
#include "service/base/log.h"
#include "service/db/notify.h"

#define COMPONENT "http"
#define BUCKETS 1024
#define TICK_MS 200

static struct {
    pthread_mutex_t lock;
    pthread_cond_t tick;         /* CLOCK_MONOTONIC; signalled to stop */
    pthread_t thread;
    int started, stop, closed;
    struct gj_server *srv;
    struct gj_park_entry *buckets[BUCKETS];
    int joined, parked;
} park = { .lock = PTHREAD_MUTEX_INITIALIZER };

double gj_park_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned bucket_of(const char *job_id)
{
    unsigned h = 2166136261u;
    for (const char *p = job_id; *p; p++)
        h = (h ^ (unsigned char)(*p | 0x20)) * 16777619u;   /* UUIDs compare case-blind */
    return h % BUCKETS;
}

/* Under the lock. */
static void resume_locked(struct gj_park_entry *e)
{
    if (!e->parked)
        return;
    e->parked = 0;
    park.parked--;
    MHD_resume_connection(e->conn);
}

/* Under the lock: fn on every entry. */
static void for_each_locked(void (*fn)(struct gj_park_entry *e, void *arg), void *arg)
{
    for (size_t b = 0; b < BUCKETS; b++)
        for (struct gj_park_entry *e = park.buckets[b], *next; e; e = next) {
            next = e->next;
            fn(e, arg);
        }
}

static void mark_changed(struct gj_park_entry *e, void *arg)
{
    (void)arg;
    e->changed = 1;
    resume_locked(e);
}

/* The notifier's thread: job_id changed (NULL: any job may have). */
static void on_job(const char *job_id, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&park.lock);
    if (!job_id) {
        for_each_locked(mark_changed, NULL);
    } else {
        for (struct gj_park_entry *e = park.buckets[bucket_of(job_id)], *next; e; e = next) {
            next = e->next;
            if (strcasecmp(e->job_id, job_id) == 0)
                mark_changed(e, NULL);
        }
    }
    pthread_mutex_unlock(&park.lock);
}

static void resume_due(struct gj_park_entry *e, void *arg)
{
    double now = *(const double *)arg;
    if (park.closed || e->revoked || e->wake_at <= now)
        resume_locked(e);
}

/* ---------- key checks ---------- */

struct key_list {
    char (*ids)[GJ_UUID_LEN + 1];
    size_t n, cap;
    int failed;
};

static void collect_key(struct gj_park_entry *e, void *arg)
{
    struct key_list *k = arg;
    if (!e->key_id[0] || k->failed)
        return;
    for (size_t i = 0; i < k->n; i++)   /* few keys hold many streams */
        if (strcmp(k->ids[i], e->key_id) == 0)
            return;
    if (k->n == k->cap) {
        size_t ncap = k->cap ? k->cap * 2 : 64;
        void *p = realloc(k->ids, ncap * sizeof *k->ids);
        if (!p) {
            k->failed = 1;
            return;
        }
        k->ids = p;
        k->cap = ncap;
    }
    memcpy(k->ids[k->n++], e->key_id, GJ_UUID_LEN + 1);
}

struct revoked_keys {
    const struct key_list *keys;
    const unsigned char *revoked;
    int ended;
};

static void apply_revocation(struct gj_park_entry *e, void *arg)
{
    struct revoked_keys *rk = arg;
    for (size_t i = 0; i < rk->keys->n; i++)
        if (rk->revoked[i] && !e->revoked && strcmp(rk->keys->ids[i], e->key_id) == 0) {
            e->revoked = 1;
            rk->ended++;
            resume_locked(e);
        }
}

/* One query for every open stream's key; the revoked ones' streams end. */
static void check_keys(void)
{
    struct key_list keys = { 0 };
    pthread_mutex_lock(&park.lock);
    for_each_locked(collect_key, &keys);
    pthread_mutex_unlock(&park.lock);
    unsigned char *revoked = keys.n ? calloc(keys.n, 1) : NULL;
    PGconn *c = revoked ? gj_db_acquire(park.srv->db, 1000) : NULL;
    if (c) {
        int rc = gj_api_keys_revoked(c, (const char(*)[GJ_UUID_LEN + 1])keys.ids, keys.n, revoked);
        gj_db_release(park.srv->db, c);
        if (rc == 0) {
            struct revoked_keys rk = { &keys, revoked, 0 };
            pthread_mutex_lock(&park.lock);
            for_each_locked(apply_revocation, &rk);
            pthread_mutex_unlock(&park.lock);
            if (rk.ended)
                gj_log_info(COMPONENT, "%d event stream(s) or long poll(s) ended: their API key was revoked",
                            rk.ended);
        }
    }
    free(revoked);
    free(keys.ids);
}

/* ---------- clients gone ---------- */

/*
 * A suspended connection is out of libmicrohttpd's epoll set: a client that closes it is seen
 * only when the request next writes, and one with nothing to write (a log follower, a long
 * poll) never does. Its socket stayed in CLOSE-WAIT, holding a slot of
 * --max-connections-per-ip, until the job ended (issue 28). So the park's thread polls the
 * parked requests' sockets, without waiting and without reading (the bytes are
 * libmicrohttpd's, and under TLS GnuTLS's), for POLLRDHUP (the client's FIN: a state of the
 * TCP socket, so the same with TLS, close_notify or not), POLLHUP or POLLERR (a reset); bytes
 * merely waiting (a pipelined request) are no end. A client that half-closes and still reads
 * counts as gone, as nginx counts it; HTTP clients do not do that. Keep-alives written by each
 * stream would not do: a long poll and a text/plain log have none, and a write into a closed
 * connection fails only at the second one.
 */
#define PROBE_BATCH 128

struct probe {
    struct pollfd fds[PROBE_BATCH];
    struct gj_park_entry *entries[PROBE_BATCH];
    int n, gone;
};

/* Under the lock: polls the batch; the entries whose client is gone are resumed, marked. */
static void probe_flush(struct probe *p)
{
    if (p->n && poll(p->fds, (nfds_t)p->n, 0) > 0)
        for (int i = 0; i < p->n; i++)
            if (p->fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
                p->entries[i]->gone = 1;
                resume_locked(p->entries[i]);
                p->gone++;
            }
    p->n = 0;
}

/* Under the lock: a parked entry's socket is valid (a suspended connection is never closed). */
static void probe_entry(struct gj_park_entry *e, void *arg)
{
    struct probe *p = arg;
    if (!e->parked)
        return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(e->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return;
    p->fds[p->n] = (struct pollfd){ .fd = ci->connect_fd, .events = POLLRDHUP };
    p->entries[p->n++] = e;
    if (p->n == PROBE_BATCH)
        probe_flush(p);
}

static void resume_gone_locked(void)
{
    struct probe p;
    p.n = p.gone = 0;
    for_each_locked(probe_entry, &p);
    probe_flush(&p);
    if (p.gone)
        gj_log_debug(COMPONENT, "%d parked request(s) ended: their client closed the connection", p.gone);
}

/* ---------- the park's thread ---------- */

static void close_locked(void)
{
    if (park.closed)
        return;
    park.closed = 1;
    double now = gj_park_now();
    for_each_locked(resume_due, &now);
}

static void *park_main(void *arg)
{
    (void)arg;
    double next_key_check = gj_park_now() + GJ_PARK_KEY_CHECK_MS / 1000.0;
    double next_gone_check = gj_park_now() + GJ_PARK_GONE_CHECK_MS / 1000.0;
    pthread_mutex_lock(&park.lock);
    while (!park.stop) {
        double now = gj_park_now();
        if (atomic_load(&park.srv->stopping))      /* SIGTERM; the listener's close calls gj_park_close */
            close_locked();
        for_each_locked(resume_due, &now);
        if (now >= next_gone_check) {
            if (park.parked)
                resume_gone_locked();
            next_gone_check = now + GJ_PARK_GONE_CHECK_MS / 1000.0;
        }
        if (now >= next_key_check && park.joined) {
            pthread_mutex_unlock(&park.lock);
            check_keys();
            pthread_mutex_lock(&park.lock);
            next_key_check = gj_park_now() + GJ_PARK_KEY_CHECK_MS / 1000.0;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        int rc = pthread_cond_timedwait(&park.tick, &park.lock, &ts);
        if (rc && rc != ETIMEDOUT)
            gj_log_error(COMPONENT, "park: pthread_cond_timedwait: %s", strerror(rc));
    }
    pthread_mutex_unlock(&park.lock);
    return NULL;
}

int gj_park_start(struct gj_server *srv)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc == 0) {
        rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        if (rc == 0)
            rc = pthread_cond_init(&park.tick, &attr);
        pthread_condattr_destroy(&attr);
    }
    if (rc) {
        gj_log_error(COMPONENT, "park: cannot initialise its condition variable: %s", strerror(rc));
        return -1;
    }
    park.srv = srv;
    park.stop = park.closed = 0;
    rc = pthread_create(&park.thread, NULL, park_main, NULL);
    if (rc) {
        gj_log_error(COMPONENT, "park: pthread_create: %s", strerror(rc));
        pthread_cond_destroy(&park.tick);
        return -1;
    }
    park.started = 1;
    gj_notifier_on_job(srv->notifier, on_job, NULL);
    return 0;
}

void gj_park_close(void)
{
    pthread_mutex_lock(&park.lock);
    close_locked();
    pthread_mutex_unlock(&park.lock);
}

void gj_park_stop(void)
{
    if (!park.started)
        return;
    gj_notifier_on_job(park.srv->notifier, NULL, NULL);
    pthread_mutex_lock(&park.lock);
    close_locked();
    park.stop = 1;
    pthread_cond_broadcast(&park.tick);
    pthread_mutex_unlock(&park.lock);
    int rc = pthread_join(park.thread, NULL);
    if (rc)
        gj_log_error(COMPONENT, "park: pthread_join: %s", strerror(rc));
    pthread_cond_destroy(&park.tick);
    if (park.joined)
        gj_log_warn(COMPONENT, "park: %d request(s) still joined at stop", park.joined);
    park.started = 0;
}

/* ---------- the requests' side ---------- */

void gj_park_join(struct gj_park_entry *e, struct MHD_Connection *conn, const char *job_id, const char *key_id)
{
    memset(e, 0, sizeof *e);
    e->conn = conn;
    snprintf(e->job_id, sizeof e->job_id, "%s", job_id ? job_id : "");
    snprintf(e->key_id, sizeof e->key_id, "%s", key_id ? key_id : "");
    unsigned b = bucket_of(e->job_id);
    pthread_mutex_lock(&park.lock);
    e->next = park.buckets[b];
    if (e->next)
        e->next->prev = e;
    park.buckets[b] = e;
    e->joined = 1;
    park.joined++;
    pthread_mutex_unlock(&park.lock);
}

void gj_park_leave(struct gj_park_entry *e)
{
    if (!e || !e->joined)
        return;
    pthread_mutex_lock(&park.lock);
    if (e->parked)   /* cannot happen: a suspended connection never ends */
        gj_log_error(COMPONENT, "park: a parked request left");
    if (e->prev)
        e->prev->next = e->next;
    else
        park.buckets[bucket_of(e->job_id)] = e->next;
    if (e->next)
        e->next->prev = e->prev;
    e->joined = 0;
    park.joined--;
    pthread_mutex_unlock(&park.lock);
}

int gj_park_take_change(struct gj_park_entry *e)
{
    pthread_mutex_lock(&park.lock);
    int c = e->changed;
    e->changed = 0;
    pthread_mutex_unlock(&park.lock);
    return c;
}

int gj_park_wait(struct gj_park_entry *e, double wake_at)
{
    int rc;
    pthread_mutex_lock(&park.lock);
    if (!park.started || park.closed || e->revoked || e->gone || !e->joined) {
        rc = -1;
    } else if (e->changed) {
        rc = 1;
    } else {
        e->wake_at = wake_at;
        e->parked = 1;
        park.parked++;
        MHD_suspend_connection(e->conn);
        rc = 0;
    }
    pthread_mutex_unlock(&park.lock);
    return rc;
}

void gj_park_wake(struct gj_park_entry *e)
{
    pthread_mutex_lock(&park.lock);
    if (e->joined)
        mark_changed(e, NULL);
    pthread_mutex_unlock(&park.lock);
}

int gj_park_revoked(struct gj_park_entry *e)
{
    pthread_mutex_lock(&park.lock);
    int r = e->revoked;
    pthread_mutex_unlock(&park.lock);
    return r;
}

int gj_park_gone(struct gj_park_entry *e)
{
    pthread_mutex_lock(&park.lock);
    int g = e->gone;
    pthread_mutex_unlock(&park.lock);
    return g;
}

void gj_park_counts(int *parked, int *joined)
{
    pthread_mutex_lock(&park.lock);
    *parked = park.parked;
    *joined = park.joined;
    pthread_mutex_unlock(&park.lock);
}
