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

struct gj_attempt_record {
    pthread_mutex_t lock;
    struct gj_attempt_fields f;   /* f.environment NULL: nothing waits */
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
    json_decref(r->f.environment);
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

/* c's attempt and stage as the record keys them. */
static void key_of(const struct gj_claim *c, struct gj_attempt_fields *f)
{
    snprintf(f->job, sizeof f->job, "%s", c->id);
    snprintf(f->attempt, sizeof f->attempt, "%d", c->attempts);
    snprintf(f->stage, sizeof f->stage, "%d", c->stage);
}

int gj_attempt_record_gather(struct gj_attempt_record *r, const struct gj_claim *c, const struct gj_kind *kind,
                             const struct gj_job *job, int device, const char *worker)
{
    struct gj_attempt_fields f = { .environment = gj_run_environment(kind, job, device) };
    if (!f.environment) {
        gj_log_error(COMPONENT, "job %s: out of memory gathering the environment", c->id);
        return -1;
    }
    key_of(c, &f);
    snprintf(f.worker, sizeof f.worker, "%s", worker);
    utc_now(f.gathered_at, sizeof f.gathered_at);
    pthread_mutex_lock(&r->lock);
    json_decref(r->f.environment);
    r->f = f;
    pthread_mutex_unlock(&r->lock);
    return 0;
}

int gj_attempt_record_add(struct gj_attempt_record *r, const struct gj_claim *c, const json_t *members)
{
    struct gj_attempt_fields key;
    key_of(c, &key);
    pthread_mutex_lock(&r->lock);
    int rc = r->f.environment && !strcmp(r->f.job, key.job) && !strcmp(r->f.attempt, key.attempt) &&
             !strcmp(r->f.stage, key.stage);
    if (rc && json_object_update(r->f.environment, (json_t *)members) != 0)
        rc = -1;
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int gj_attempt_record_pending(struct gj_attempt_record *r)
{
    pthread_mutex_lock(&r->lock);
    int pending = r->f.environment != NULL;
    pthread_mutex_unlock(&r->lock);
    return pending;
}

int gj_attempt_record_take(struct gj_attempt_record *r, struct gj_attempt_record_batch *b)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_lock(&r->lock);
    b->f = r->f;
    r->f.environment = NULL;
    pthread_mutex_unlock(&r->lock);
    if (!b->f.environment)
        return 0;
    if (!(b->environment_text = json_dumps(b->f.environment, JSON_COMPACT))) {
        gj_log_error(COMPONENT, "job %s: out of memory writing the environment; kept for the next try", b->f.job);
        gj_attempt_record_settle(r, b, 0);
        return 0;
    }
    const char *p[GJ_ATTEMPT_RECORD_PARAMS] = { b->f.job, b->f.attempt, b->f.stage, b->f.worker, b->environment_text, b->f.gathered_at };
    memcpy(b->params, p, sizeof p);
    return 1;
}

void gj_attempt_record_settle(struct gj_attempt_record *r, struct gj_attempt_record_batch *b, int written)
{
    if (!b->f.environment)
        return;
    pthread_mutex_lock(&r->lock);
    if (!written && !r->f.environment) {   /* it waits again, unless a newer attempt's replaced it */
        r->f = b->f;
        b->f.environment = NULL;
    }
    pthread_mutex_unlock(&r->lock);
    json_decref(b->f.environment);
    b->f.environment = NULL;
    free(b->environment_text);
    b->environment_text = NULL;
}

int gj_attempt_record_flush(struct gj_attempt_record *r, PGconn *conn)
{
    struct gj_attempt_record_batch b;
    if (!gj_attempt_record_take(r, &b))
        return 0;
    PGresult *res = gj_db_exec_prepared(conn, GJ_ATTEMPT_RECORD_NAME, GJ_ATTEMPT_RECORD_SQL, GJ_ATTEMPT_RECORD_PARAMS,
                                        b.params, NULL);
    PQclear(res);
    if (!res)
        gj_log_warn(COMPONENT, "job %s: attempt %s not recorded yet (database error); kept for the next try",
                    b.f.job, b.f.attempt);
    gj_attempt_record_settle(r, &b, res != NULL);
    return res ? 0 : -1;
}
