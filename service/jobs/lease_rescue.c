/*
 * lease_rescue.c — see lease_rescue.h. One thread, asleep on a monotonic condition variable
 * between rescues, woken at once to stop.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/db/db.h"
#include "service/jobs/lease_rescue.h"
#include "service/base/log.h"
#include "service/jobs/queue.h"
#include "service/server.h"

#define COMPONENT "rescue"
#define DB_WAIT_MS 2000

struct gj_lease_rescuer {
    struct gj_server *srv;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;     /* CLOCK_MONOTONIC */
    int stop;
};

static void rescue_once(struct gj_server *srv)
{
    PGconn *conn = gj_db_acquire(srv->db, DB_WAIT_MS);
    if (!conn)
        return;   /* the pool logs an outage once; the next round tries again */
    if (gj_queue_rescue_expired(conn, srv->cfg.retry_backoff_ms) < 0)
        gj_log_warn(COMPONENT, "rescue of expired leases failed");
    gj_db_release(srv->db, conn);
}

static void *rescuer_main(void *arg)
{
    struct gj_lease_rescuer *r = arg;
    pthread_mutex_lock(&r->lock);
    while (!r->stop) {
        pthread_mutex_unlock(&r->lock);
        rescue_once(r->srv);
        pthread_mutex_lock(&r->lock);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += GJ_LEASE_RESCUE_PERIOD_S;
        while (!r->stop) {
            int rc = pthread_cond_timedwait(&r->cond, &r->lock, &until);
            if (rc == ETIMEDOUT)
                break;
            if (rc)
                gj_log_error(COMPONENT, "pthread_cond_timedwait: %s", strerror(rc));
        }
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

struct gj_lease_rescuer *gj_lease_rescuer_start(struct gj_server *srv)
{
    struct gj_lease_rescuer *r = calloc(1, sizeof *r);
    if (!r) {
        gj_log_error(COMPONENT, "out of memory");
        return NULL;
    }
    r->srv = srv;
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (!rc)
        rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (!rc)
        rc = pthread_cond_init(&r->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (rc) {
        gj_log_error(COMPONENT, "condition variable: %s", strerror(rc));
        free(r);
        return NULL;
    }
    pthread_mutex_init(&r->lock, NULL);
    rc = pthread_create(&r->thread, NULL, rescuer_main, r);
    if (rc) {
        gj_log_error(COMPONENT, "pthread_create: %s", strerror(rc));
        pthread_cond_destroy(&r->cond);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return NULL;
    }
    return r;
}

void gj_lease_rescuer_stop(struct gj_lease_rescuer *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    r->stop = 1;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    free(r);
}
