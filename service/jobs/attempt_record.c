/*
 * attempt_record.c — a worker slot's attempt record, waiting for a statement to ride on
 * (attempt_record.h).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>

#include "common/gj_provenance.h"
#include "service/base/log.h"
#include "service/db/db.h"
#include "service/jobs/attempt_record.h"
#include "service/jobs/provenance_store.h"

#define COMPONENT "provenance"
#define N_FIELDS 6

struct gj_attempt_record {
    pthread_mutex_t lock;
    char *pending;             /* N_FIELDS strings one after another (NUL-ended), in
                                  GJ_ATTEMPT_RECORD_SQL's order; NULL: nothing waits */
};

struct gj_attempt_record *gj_attempt_record_new(void)
{
    struct gj_attempt_record *r = calloc(1, sizeof *r);
    if (r && pthread_mutex_init(&r->lock, NULL) != 0) {
        free(r);
        return NULL;
    }
    return r;
}

void gj_attempt_record_free(struct gj_attempt_record *r)
{
    if (!r)
        return;
    free(r->pending);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* Now in UTC with microseconds, as PostgreSQL reads a timestamptz. */
static void utc_now(char *out, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, cap - n, ".%06ldZ", ts.tv_nsec / 1000);
}

/* The fields packed into one allocation: job, attempt, stage, worker, environment, gathered at. */
static char *pack(const struct gj_claim *c, const char *worker, const char *env)
{
    char attempt[16], stage[16], at[40];
    snprintf(attempt, sizeof attempt, "%d", c->attempts);
    snprintf(stage, sizeof stage, "%d", c->stage);
    utc_now(at, sizeof at);
    const char *f[N_FIELDS] = { c->id, attempt, stage, worker, env, at };
    size_t len = 0;
    for (int i = 0; i < N_FIELDS; i++)
        len += strlen(f[i]) + 1;
    char *out = malloc(len), *p = out;
    for (int i = 0; out && i < N_FIELDS; i++)
        p = stpcpy(p, f[i]) + 1;
    return out;
}

int gj_attempt_record_gather(struct gj_attempt_record *r, const struct gj_claim *c, const struct gj_kind *kind,
                             const struct gj_job *job, int device, const char *worker)
{
    json_t *env = gj_run_environment(kind, job, device);
    char *text = env ? json_dumps(env, JSON_COMPACT) : NULL;
    json_decref(env);
    char *packed = text ? pack(c, worker, text) : NULL;
    free(text);
    if (!packed) {
        gj_log_error(COMPONENT, "job %s: out of memory gathering the environment", c->id);
        return -1;
    }
    pthread_mutex_lock(&r->lock);
    free(r->pending);
    r->pending = packed;
    pthread_mutex_unlock(&r->lock);
    return 0;
}

int gj_attempt_record_pending(struct gj_attempt_record *r)
{
    pthread_mutex_lock(&r->lock);
    int pending = r->pending != NULL;
    pthread_mutex_unlock(&r->lock);
    return pending;
}

int gj_attempt_record_take(struct gj_attempt_record *r, struct gj_attempt_record_batch *b)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_lock(&r->lock);
    b->text = r->pending;
    r->pending = NULL;
    pthread_mutex_unlock(&r->lock);
    const char *p = b->text;
    for (int i = 0; p && i < N_FIELDS; i++, p += strlen(p) + 1)
        b->params[i] = p;
    return b->text != NULL;
}

void gj_attempt_record_settle(struct gj_attempt_record *r, struct gj_attempt_record_batch *b, int written)
{
    if (!b->text)
        return;
    pthread_mutex_lock(&r->lock);
    if (!written && !r->pending) {   /* it waits again, unless a newer attempt's replaced it */
        r->pending = b->text;
        b->text = NULL;
    }
    pthread_mutex_unlock(&r->lock);
    free(b->text);
    b->text = NULL;
}

int gj_attempt_record_flush(struct gj_attempt_record *r, PGconn *conn)
{
    struct gj_attempt_record_batch b;
    if (!gj_attempt_record_take(r, &b))
        return 0;
    PGresult *res = gj_db_exec_prepared(conn, GJ_ATTEMPT_RECORD_NAME, GJ_ATTEMPT_RECORD_SQL, N_FIELDS, b.params,
                                        NULL);
    PQclear(res);
    if (!res)
        gj_log_warn(COMPONENT, "job %s: attempt %s not recorded yet (database error); kept for the next try",
                    b.params[0], b.params[1]);
    gj_attempt_record_settle(r, &b, res != NULL);
    return res ? 0 : -1;
}
