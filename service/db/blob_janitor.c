/*
 * blob_janitor.c — the object store's maintenance pass on a timer (blob_janitor.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "service/base/log.h"
#include "service/db/blob_janitor.h"
#include "service/db/blob_s3.h"
#include "service/db/db.h"

struct gj_blob_janitor {
    struct gj_db_pool *pool;
    int interval_s;
    long grace_s;
    int stop;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
};

static void pass(struct gj_blob_janitor *j)
{
    PGconn *conn = gj_db_acquire(j->pool, 5000);
    if (!conn)
        return;
    int deleted = 0, aborted = 0;
    if (gj_blob_s3_maintain(conn, j->grace_s, &deleted, &aborted) != 0)
        gj_log_warn("blob", "the object store's maintenance pass did not finish (again in %d s)", j->interval_s);
    if (deleted || aborted)
        gj_log_info("blob", "object store: %d unowned objects deleted, %d stale uploads aborted", deleted, aborted);
    gj_db_release(j->pool, conn);
}

static void *run(void *arg)
{
    struct gj_blob_janitor *j = arg;
    pthread_mutex_lock(&j->lock);
    while (!j->stop) {
        pthread_mutex_unlock(&j->lock);
        pass(j);
        pthread_mutex_lock(&j->lock);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += j->interval_s;
        while (!j->stop && pthread_cond_timedwait(&j->wake, &j->lock, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

struct gj_blob_janitor *gj_blob_janitor_start(struct gj_db_pool *pool, int interval_s, long upload_grace_s)
{
    struct gj_blob_janitor *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->pool = pool;
    j->interval_s = interval_s > 0 ? interval_s : 60;
    j->grace_s = upload_grace_s;
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->wake, NULL);
    if (pthread_create(&j->thread, NULL, run, j) != 0) {
        gj_log_error("blob", "cannot start the object store's maintenance thread");
        pthread_mutex_destroy(&j->lock);
        pthread_cond_destroy(&j->wake);
        free(j);
        return NULL;
    }
    return j;
}

void gj_blob_janitor_stop(struct gj_blob_janitor *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->lock);
    j->stop = 1;
    pthread_cond_signal(&j->wake);
    pthread_mutex_unlock(&j->lock);
    pthread_join(j->thread, NULL);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->wake);
    free(j);
}
