/*
 * attempt_record.h — an attempt's environment (provenance_store.h), gathered when the attempt
 * starts and written with the worker slot's next statement: its log's flush, at most a second
 * later, or its end. A short job so records its attempt in its end's round trip instead of one
 * of its own (issue 25: the queue's cost per job). The record keeps the time it was gathered.
 * Take and settle work as the job log's (job_log.h).
 */
#ifndef GJ_ATTEMPT_RECORD_H
#define GJ_ATTEMPT_RECORD_H

#include <jansson.h>
#include <libpq-fe.h>

#include "common/gj_kind.h"
#include "service/jobs/queue.h"

struct gj_attempt_record;   /* one per worker slot; locks itself */

struct gj_attempt_record *gj_attempt_record_new(void);
void gj_attempt_record_free(struct gj_attempt_record *r);

/* Gathers attempt c->attempts (stage c->stage) of c's job on device, replacing one not written
 * yet. 0, or -1 (out of memory: nothing waits). */
int gj_attempt_record_gather(struct gj_attempt_record *r, const struct gj_claim *c, const struct gj_kind *kind,
                             const struct gj_job *job, int device, const char *worker);

/* Adds members' keys to the environment of attempt c->attempts (stage c->stage) of c's job
 * while its record waits: what the run chose (provenance_store.h, gj_provenance_record_chosen,
 * adds them to a record written already). 1 added, 0 no record of that attempt waits, -1 out
 * of memory. */
int gj_attempt_record_add(struct gj_attempt_record *r, const struct gj_claim *c, const json_t *members);

/* 1 when a record waits to be written. */
int gj_attempt_record_pending(struct gj_attempt_record *r);

/* The waiting record taken out as the parameters of GJ_ATTEMPT_RECORD_SQL (provenance_store.h),
 * for a statement that writes it along with something else. 1 taken, 0 nothing waits. A taken
 * record is handed back with gj_attempt_record_settle: written, or not (it waits again unless a
 * newer one was gathered meanwhile). */
struct gj_attempt_fields {
    char job[GJ_UUID_LEN + 1], attempt[16], stage[16], worker[256], gathered_at[40];
    json_t *environment;       /* owned; NULL: none */
};
struct gj_attempt_record_batch {
    struct gj_attempt_fields f;
    char *environment_text;    /* params[4] */
    const char *params[6];     /* GJ_ATTEMPT_RECORD_PARAMS */
};
int gj_attempt_record_take(struct gj_attempt_record *r, struct gj_attempt_record_batch *b);
void gj_attempt_record_settle(struct gj_attempt_record *r, struct gj_attempt_record_batch *b, int written);

/* Writes the waiting record in a statement of its own: 0 (written, or nothing waits), -1 on a
 * database error (it waits for the next try). */
int gj_attempt_record_flush(struct gj_attempt_record *r, PGconn *conn);

#endif
