/*
 * webhook_delivery.c — the threads that call the callbacks of settled jobs (workflow.h). The
 * rows are made by the database when a job settles (migration 0007: webhook_deliveries); each
 * of DELIVERY_THREADS threads takes a due one at a time (FOR UPDATE SKIP LOCKED, with a lease
 * pushed into next_attempt_at, so replicas share the work and a crash mid-call only delays a
 * retry), never one of a tenant another thread is calling for: a slow receiver holds one
 * thread of a replica, and the other tenants' callbacks go out meanwhile (issue 28 #7),
 * signs and posts it (webhook_post.c) and records the outcome: delivered, retried after
 * --callback-backoff-ms doubling per attempt (at most 1 h), or failed after MAX_ATTEMPTS or a
 * refusal retrying cannot cure. The webhook-id is the same on every retry of one delivery.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/db/db.h"
#include "service/base/log.h"
#include "service/workflow/workflow.h"

#define COMPONENT "webhook"
#define MAX_ATTEMPTS 8
#define CALL_TIMEOUT_MS 10000
#define LEASE_SECONDS 60            /* a claimed delivery's call must end before this */
#define IDLE_WAIT_MS 500            /* how often to look for due deliveries when none was */
#define BACKOFF_CAP_MS 3600000LL
#define DELIVERY_THREADS 4

struct gj_webhook_deliverer;

struct delivery_thread {
    struct gj_webhook_deliverer *w;
    pthread_t thread;
    char tenant[GJ_UUID_LEN + 1];   /* whose delivery it is making ("": none); under w->lock */
};

struct gj_webhook_deliverer {
    struct gj_server *srv;
    struct delivery_thread threads[DELIVERY_THREADS];
    int started;
    pthread_mutex_t lock;           /* the threads' tenants, and claiming (so two never take one tenant) */
    pthread_cond_t cond;
    atomic_int stop;
};

struct delivery {
    char id[24], tenant_id[GJ_UUID_LEN + 1], job_id[GJ_UUID_LEN + 1];
    char *url, *body;
    int attempts;                   /* this one included */
};

static void delivery_free(struct delivery *d)
{
    free(d->url);
    free(d->body);
}

/* The tenants the other threads are calling for, as a PostgreSQL array; under w->lock. */
static void busy_tenants(const struct delivery_thread *self, char out[DELIVERY_THREADS * (GJ_UUID_LEN + 1) + 3])
{
    size_t n = 0;
    out[n++] = '{';
    for (int i = 0; i < self->w->started; i++) {
        const struct delivery_thread *t = &self->w->threads[i];
        if (t == self || !t->tenant[0])
            continue;
        if (out[n - 1] != '{')
            out[n++] = ',';
        memcpy(out + n, t->tenant, GJ_UUID_LEN);
        n += GJ_UUID_LEN;
    }
    out[n++] = '}';
    out[n] = '\0';
}

/* Takes one due delivery of a tenant no other thread is calling for. 1 taken, 0 none due,
 * -1 database trouble. */
static int claim(PGconn *c, const char *busy, struct delivery *d)
{
    char lease[16];
    snprintf(lease, sizeof lease, "%d", LEASE_SECONDS);
    const char *p[2] = { lease, busy };
    PGresult *r = gj_db_exec(c,
        "UPDATE webhook_deliveries SET attempts = attempts + 1,"
        "       next_attempt_at = now() + make_interval(secs => $1::int)"
        " WHERE id = (SELECT id FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= now()"
        "              AND tenant_id <> ALL ($2::uuid[])"
        "              ORDER BY next_attempt_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
        " RETURNING id, tenant_id, job_id, url, body, attempts", 2, p, NULL);
    if (!r)
        return -1;
    int n = PQntuples(r);
    if (n == 1) {
        snprintf(d->id, sizeof d->id, "%s", PQgetvalue(r, 0, 0));
        snprintf(d->tenant_id, sizeof d->tenant_id, "%s", PQgetvalue(r, 0, 1));
        snprintf(d->job_id, sizeof d->job_id, "%s", PQgetvalue(r, 0, 2));
        d->url = strdup(PQgetvalue(r, 0, 3));
        d->body = strdup(PQgetvalue(r, 0, 4));
        d->attempts = atoi(PQgetvalue(r, 0, 5));
    }
    PQclear(r);
    if (n == 1 && (!d->url || !d->body)) {
        delivery_free(d);
        return -1;                  /* out of memory: the lease expires and it is tried again */
    }
    return n == 1;
}

static long long backoff_ms(int base_ms, int attempts)
{
    long long ms = base_ms;
    for (int i = 1; i < attempts && ms < BACKOFF_CAP_MS; i++)
        ms *= 2;
    return ms < BACKOFF_CAP_MS ? ms : BACKOFF_CAP_MS;
}

static void record(PGconn *c, const struct delivery *d, const struct gj_webhook_outcome *o, int base_ms)
{
    const char *state = o->delivered ? "delivered"
                        : o->permanent || d->attempts >= MAX_ATTEMPTS ? "failed" : "pending";
    char status[16], delay[24];
    snprintf(status, sizeof status, "%d", o->status);
    snprintf(delay, sizeof delay, "%lld", backoff_ms(base_ms, d->attempts));
    const char *p[5] = { d->id, state, o->status ? status : NULL, o->delivered ? NULL : o->error, delay };
    if (gj_db_cmd(c, "UPDATE webhook_deliveries SET state = $2, last_status = $3::int, last_error = $4,"
                     " delivered_at = CASE WHEN $2 = 'delivered' THEN now() END,"
                     " next_attempt_at = now() + make_interval(secs => $5::bigint / 1000.0)"
                     " WHERE id = $1::bigint", 5, p) != 0)
        gj_log_warn(COMPONENT, "delivery %s: outcome not recorded; it is retried when its lease ends", d->id);
    if (o->delivered)
        gj_log_info(COMPONENT, "job %s: callback delivered (attempt %d, HTTP %d)", d->job_id, d->attempts, o->status);
    else
        gj_log_warn(COMPONENT, "job %s: callback attempt %d %s: %s", d->job_id, d->attempts,
                    strcmp(state, "failed") ? "failed, retried later" : "failed for good", o->error);
}

/* Signs and posts d (the connection is released during the call). */
static void deliver(struct gj_webhook_deliverer *w, PGconn **c, const struct delivery *d)
{
    struct gj_server *srv = w->srv;
    unsigned char secret[GJ_WEBHOOK_SECRET_BYTES];
    struct gj_webhook_outcome o = { 0 };
    if (gj_webhook_secret_get(*c, d->tenant_id, secret) != 1) {
        snprintf(o.error, sizeof o.error, "the tenant's signing secret could not be read");
    } else {
        gj_db_release(srv->db, *c);
        *c = NULL;
        char msg_id[64], signature[GJ_WEBHOOK_SIGNATURE_MAX];
        snprintf(msg_id, sizeof msg_id, "msg_gpujobd_%s", d->id);
        long long now = (long long)time(NULL);
        gj_webhook_sign(secret, sizeof secret, msg_id, now, d->body, strlen(d->body), signature);
        struct gj_webhook_call call = { .url = d->url, .body = d->body, .msg_id = msg_id, .timestamp = now,
                                        .signature = signature, .allow = srv->cfg.callback_allow,
                                        .allow_private = srv->cfg.callback_allow_private,
                                        .cacert = srv->cfg.callback_cacert, .timeout_ms = CALL_TIMEOUT_MS,
                                        .stop = &w->stop };
        gj_webhook_post(&call, &o);
        if (atomic_load(&w->stop) && !o.delivered)
            return;                 /* stopped mid-call: the lease expires, it is tried again */
        *c = gj_db_acquire(srv->db, 10000);
        if (!*c)
            return;
    }
    record(*c, d, &o, srv->cfg.callback_backoff_ms);
}

/* One delivery if one is due: 1 done, 0 none due, -1 trouble. */
static int deliver_one(struct delivery_thread *self)
{
    struct gj_webhook_deliverer *w = self->w;
    PGconn *c = gj_db_acquire(w->srv->db, 2000);
    if (!c)
        return -1;
    struct delivery d = { 0 };
    char busy[DELIVERY_THREADS * (GJ_UUID_LEN + 1) + 3];
    pthread_mutex_lock(&w->lock);
    busy_tenants(self, busy);
    int rc = claim(c, busy, &d);
    if (rc == 1)
        memcpy(self->tenant, d.tenant_id, sizeof self->tenant);
    pthread_mutex_unlock(&w->lock);
    if (rc == 1) {
        deliver(w, &c, &d);
        delivery_free(&d);
        pthread_mutex_lock(&w->lock);
        self->tenant[0] = '\0';
        pthread_mutex_unlock(&w->lock);
    }
    if (c)
        gj_db_release(w->srv->db, c);
    return rc;
}

static void idle(struct gj_webhook_deliverer *w, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->lock);
    while (!atomic_load(&w->stop)) {
        int rc = pthread_cond_timedwait(&w->cond, &w->lock, &ts);
        if (rc == ETIMEDOUT)
            break;
        if (rc && rc != EINTR) {
            gj_log_error(COMPONENT, "pthread_cond_timedwait: %s", strerror(rc));
            break;
        }
    }
    pthread_mutex_unlock(&w->lock);
}

static void *deliverer_main(void *arg)
{
    struct delivery_thread *self = arg;
    while (!atomic_load(&self->w->stop)) {
        int rc = deliver_one(self);
        if (rc != 1)
            idle(self->w, rc < 0 ? 2000 : IDLE_WAIT_MS);
    }
    return NULL;
}

void gj_webhook_deliverer_stop(struct gj_webhook_deliverer *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    atomic_store(&w->stop, 1);
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; i < w->started; i++)
        pthread_join(w->threads[i].thread, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

struct gj_webhook_deliverer *gj_webhook_deliverer_start(struct gj_server *srv)
{
    struct gj_webhook_deliverer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->srv = srv;
    atomic_init(&w->stop, 0);
    if (pthread_mutex_init(&w->lock, NULL) != 0) {
        free(w);
        return NULL;
    }
    if (pthread_cond_init(&w->cond, NULL) != 0) {
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
    }
    /* started is read by running threads (busy_tenants) only under the lock */
    pthread_mutex_lock(&w->lock);
    for (int i = 0; i < DELIVERY_THREADS; i++) {
        w->threads[i].w = w;
        int rc = pthread_create(&w->threads[i].thread, NULL, deliverer_main, &w->threads[i]);
        if (rc != 0) {
            gj_log_error(COMPONENT, "pthread_create: %s", strerror(rc));
            pthread_mutex_unlock(&w->lock);
            gj_webhook_deliverer_stop(w);
            return NULL;
        }
        w->started++;
    }
    pthread_mutex_unlock(&w->lock);
    return w;
}
