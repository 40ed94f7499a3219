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

/* Fields packed into one allocation, one after another (NUL-ended). */
static char *pack_fields(const char *const f[N_FIELDS])
{
    size_t len = 0;
    for (int i = 0; i < N_FIELDS; i++)
        len += strlen(f[i]) + 1;
    char *out = malloc(len), *p = out;
    for (int i = 0; out && i < N_FIELDS; i++)
        p = stpcpy(p, f[i]) + 1;
    return out;
}

static void unpack_fields(const char *packed, const char *f[N_FIELDS])
{
    for (int i = 0; i < N_FIELDS; i++, packed += strlen(packed) + 1)
        f[i] = packed;
}

/* The record of c's attempt: job, attempt, stage, worker, environment, gathered now. */
static char *pack(const struct gj_claim *c, const char *worker, const char *env)
{
    char attempt[16], stage[16], at[40];
    snprintf(attempt, sizeof attempt, "%d", c->attempts);
    snprintf(stage, sizeof stage, "%d", c->stage);
    utc_now(at, sizeof at);
    const char *f[N_FIELDS] = { c->id, attempt, stage, worker, env, at };
    return pack_fields(f);
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

/* The waiting record with members added to its environment; NULL when out of memory. */
static char *with_members(const char *packed, const json_t *members)
{
    const char *f[N_FIELDS];
    unpack_fields(packed, f);
    json_t *env = json_loads(f[4], 0, NULL);
    char *text = env && json_object_update(env, (json_t *)members) == 0 ? json_dumps(env, JSON_COMPACT) : NULL;
    json_decref(env);
    f[4] = text;
    char *out = text ? pack_fields(f) : NULL;
    free(text);
    return out;
}

int gj_attempt_record_add(struct gj_attempt_record *r, const struct gj_claim *c, const json_t *members)
{
    char attempt[16], stage[16];
    snprintf(attempt, sizeof attempt, "%d", c->attempts);
    snprintf(stage, sizeof stage, "%d", c->stage);
    pthread_mutex_lock(&r->lock);
    const char *f[N_FIELDS];
    if (r->pending)
        unpack_fields(r->pending, f);
    int rc = r->pending && !strcmp(f[0], c->id) && !strcmp(f[1], attempt) && !strcmp(f[2], stage);
    char *added = rc ? with_members(r->pending, members) : NULL;
    if (added) {
        free(r->pending);
        r->pending = added;
    } else if (rc) {
        rc = -1;
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
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
    if (b->text)
        unpack_fields(b->text, b->params);
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
