/*
 * job_log.h — a running job's own log, as GET /v1/jobs/{id}/log shows it: the lines its module
 * reported (gj_logf), the worker's phases and their times, warnings and the error it ended
 * with. A worker slot holds one gj_job_log; lines gather in memory (bounded) and go to the
 * job_log table in batches over the connection the slot's heartbeat uses, at least once a
 * second while a job runs and before its end is recorded (migration 0007 bounds a job's log to
 * 10000 lines and 1 MiB, and counts what it drops).
 */
#ifndef GJ_JOB_LOG_H
#define GJ_JOB_LOG_H

#include <libpq-fe.h>

#include "service/base/uuid.h"

enum gj_job_log_level { GJ_JOB_LOG_INFO, GJ_JOB_LOG_WARN, GJ_JOB_LOG_ERROR };

/* A line is cut to this many bytes (at a character boundary). */
#define GJ_JOB_LOG_LINE_MAX 2000

struct gj_job_log;

struct gj_job_log *gj_job_log_new(void);
void gj_job_log_free(struct gj_job_log *l);

/* The slot starts a job (attempt as the claim counts it): lines now belong to it; lines of an
 * earlier job not written yet are dropped. */
void gj_job_log_begin(struct gj_job_log *l, const char *job_id, int attempt);

/* Adds a line (thread-safe). Control characters become spaces and bytes that are not UTF-8
 * become '?'; past the memory bound (1000 lines or 256 KiB waiting) lines are counted as
 * dropped instead. */
void gj_job_log_add(struct gj_job_log *l, enum gj_job_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* 1 when lines wait to be written. */
int gj_job_log_pending(struct gj_job_log *l);

/* Writes the waiting lines in one statement. 0 (written, or nothing to write), -1 on a
 * database error (the lines wait for the next flush). */
int gj_job_log_flush(struct gj_job_log *l, PGconn *conn);

/* The waiting lines taken out as the four parameters of gj_job_log_append (job, attempt,
 * entries, dropped: params), for a statement that writes them along with something else (a
 * job's end: queue.h, gj_queue_finish_success_next). 1 taken, 0 nothing waits, -1 out of
 * memory. A taken batch is handed back with gj_job_log_settle: written, or not (its lines
 * wait again, before those added since). */
struct gj_job_log_batch {
    char job_id[GJ_UUID_LEN + 1];
    char attempt[16], dropped[24];
    char *entries;
    const char *params[4];
};
int gj_job_log_take(struct gj_job_log *l, struct gj_job_log_batch *b);
/* The statement that writes a batch (params), and its prepared name (db.h). */
#define GJ_JOB_LOG_APPEND_SQL "SELECT gj_job_log_append($1::uuid, $2::int, $3::jsonb, $4::bigint)"
#define GJ_JOB_LOG_APPEND_NAME "gj_job_log_append"
void gj_job_log_settle(struct gj_job_log *l, struct gj_job_log_batch *b, int written);

/* Pure, for tests: text made safe for a log line into out (cap bytes, NUL included). */
void gj_job_log_clean(const char *text, char *out, size_t cap);

#endif
