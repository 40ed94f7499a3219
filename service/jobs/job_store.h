/*
 * job_store.h — the one owner of the statements on jobs and its tables (job_inputs,
 * job_outputs, job_events, job_dependencies): what the routes (/v1, CARMIN, the portal,
 * the job log, metrics) ask of a job goes through here, under job_state.h's states and
 * rules. The queue's own statements (submit, claim, heartbeat, finish, rescue) are in
 * queue.h, included here: one header for the jobs.
 *
 * Errors come back as a struct gj_error (common/gj_error.h) with the HTTP status a route
 * answers with: 404 the tenant has no such job, 409 the job's state refuses, 503 the
 * database; each route converts it at its edge (gj_respond_error, carmin_respond_error).
 */
#ifndef GJ_JOB_STORE_H
#define GJ_JOB_STORE_H

#include <stddef.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "common/gj_error.h"
#include "service/jobs/job_state.h"
#include "service/jobs/queue.h"

struct gj_job_cache;

/* A job's state as stored, for the rules: 0, or -1 with err (404, 503). Locks the row
 * FOR UPDATE when lock is 1 (inside the caller's transaction). tenant_id NULL: any tenant's. */
struct gj_job_status {
    enum gj_job_state state;
    int stage;
    int is_subtask;
    int cancel_requested;
};
int gj_job_status_read(PGconn *c, const char *tenant_id, const char *job_id, int lock,
                       struct gj_job_status *st, struct gj_error *err);

/* The tenant's job as GET /v1/jobs/{id} shows it (job_view.c): 1 found (*job, a new object,
 * and its public state (16 bytes) filled, each when not NULL), 0 no such job (or another
 * tenant's), -1 database error. A prepared statement (gj_job_fetch): the read path cached. */
int gj_job_read(PGconn *c, const char *tenant_id, const char *job_id, json_t **job, char state[16]);

/* GET /v1/jobs's filters, each NULL when absent; labels a JSON object's text (jsonb @>). */
struct gj_job_filter {
    const char *state, *kind, *created_after, *created_before, *name, *labels;
    const char *cursor_created, *cursor_id;   /* the page after this (created_at, id) */
    long limit;
};
/* The tenant's top-level jobs, newest first, at most f->limit: 0 with *jobs (a JSON array,
 * caller owns) and, when more follow, the last one's created_at and id (else ""); or -1 with
 * err: 400 a parameter the database refuses, 503. */
int gj_job_list(PGconn *c, const char *tenant_id, const struct gj_job_filter *f, json_t **jobs,
                char last_created[40], char last_id[GJ_UUID_LEN + 1], struct gj_error *err);

/* The changes below (cancel, delete, rename, time limit) forget the job's status answer in
 * jc (job_cache.h; NULL: none) once made: after the store's commit, or at once inside the
 * caller's transaction (whose commit's NOTIFY forgets it again), so that the next read here
 * sees the change without waiting for the notification. */

/* Cancel (job_state.h's rule): 1 canceled now or asked of its worker, 0 finished already or
 * no such job, -1 database error. tenant_id NULL: any tenant's. */
int gj_job_cancel(PGconn *c, struct gj_job_cache *jc, const char *tenant_id, const char *job_id);

/* Delete (job_state.h's rule), in the caller's transaction when one is open (so a route can
 * delete what it owns of the job in the same commit), else in its own. 0 with *how, or -1
 * with err: 404, 409 (a sub-task; a blob of it is another job's input), 503. */
enum gj_job_deleted { GJ_JOB_DELETED, GJ_JOB_DELETED_WHEN_STOPPED };
int gj_job_delete(PGconn *c, struct gj_job_cache *jc, const char *tenant_id, const char *job_id,
                  enum gj_job_deleted *how, struct gj_error *err);

/* The tenant's job submitted under an Idempotency-Key: 1 with id and the request's hash (hex,
 * "" when none) filled, 0 none, -1 database error. */
int gj_job_find_idempotent(PGconn *c, const char *tenant_id, const char *key, char id[GJ_UUID_LEN + 1],
                           char hash[65]);

/* Whether output of the tenant's job can be an input of a job being submitted: 0 with *size
 * (-1 until the job has succeeded), or -1 with err: 422 (on field) no such job, it failed or
 * was canceled, it succeeded without that output; 503. gj_queue_submit checks again under a
 * lock (gj_job_lock_shared). */
int gj_job_output_promised(PGconn *c, const char *tenant_id, const char *job_id, const char *output,
                           const char *field, long long *size, struct gj_error *err);

/* The tenant's job locked FOR SHARE in the caller's transaction (its row cannot settle or go
 * until the commit). 0 (also when there is no such job), or -1 database error. */
int gj_job_lock_shared(PGconn *c, const char *tenant_id, const char *job_id);

/* A job's name (1 to 200 characters, checked by the caller: gj_job_name_problem). 0, or -1
 * with err (404, 503). */
int gj_job_rename(PGconn *c, struct gj_job_cache *jc, const char *tenant_id, const char *job_id, const char *name,
                  struct gj_error *err);

/* A job's time limit, only before its first run starts (a run keeps the limit it started
 * with). 0, or -1 with err (404, 409 it has started, 503). */
int gj_job_set_timeout(PGconn *c, struct gj_job_cache *jc, const char *tenant_id, const char *job_id, int seconds,
                       struct gj_error *err);

/* The output called name of the tenant's job: 0 with blob_id (and content_type, when not
 * NULL, cut to ctype_n) filled, or -1 with err (404 no such job or output, 503). */
int gj_job_output_find(PGconn *c, const char *tenant_id, const char *job_id, const char *name,
                       char blob_id[GJ_UUID_LEN + 1], char *content_type, size_t ctype_n, struct gj_error *err);

/* The job's outputs, by name: a JSON array (caller owns) of {name, size, sha256, content_type,
 * blob_id}; NULL on a database error. The caller has checked the job is the tenant's. */
json_t *gj_job_outputs_read(PGconn *c, const char *job_id);

/* The tenant's job as its event stream shows it: public state (16 bytes), progress and
 * message (a new JSON string or null). 1, 0 no such job (deleted), -1 database error. */
int gj_job_progress_read(PGconn *c, const char *tenant_id, const char *job_id, char state[16], double *progress,
                         json_t **message);

/* What a facade shows of the tenant's job beside its own row (a CARMIN execution): public
 * state, when it started (its creation until then) and finished (-1 not yet), in whole epoch
 * seconds, and its time limit (0 none). 1, 0 no such job, -1 database error. */
struct gj_job_times {
    char state[16];
    long long started;
    long long finished;
    int timeout_seconds;
};
int gj_job_times_read(PGconn *c, const char *tenant_id, const char *job_id, struct gj_job_times *out);

/* The job's history after event id `after`, at most limit events: a JSON array (caller owns)
 * of {id (text), kind, detail (an object with "at")}; NULL on a database error. */
json_t *gj_job_events_read(PGconn *c, const char *job_id, long long after, int limit);

/* The job's log as text, a line each ("TIME LEVEL: LINE"), warnings and errors only when
 * errors_only; *text malloc'd (caller frees), *len its length. 0, or -1 database error. */
int gj_job_log_text(PGconn *c, const char *job_id, int errors_only, char **text, size_t *len);

/* A blob its tenant deletes stops being an input of the finished jobs that took it (their
 * job_inputs rows go), in the caller's transaction. 0, or -1 with err: 409 a job not
 * finished yet takes it, 503. */
int gj_job_inputs_release_blob(PGconn *c, const char *blob_id, struct gj_error *err);

/* The job's own inputs named `name` or `name.*` that it uploaded (blobs it owns) stop being
 * its inputs, in the caller's transaction (infer's purge of DICOM inputs after a run); the
 * blobs themselves are the caller's to delete. The number released, or -1. */
long gj_job_inputs_release_owned(PGconn *c, const char *job_id, const char *name);

/* The blobs the job owns that no job takes as an input or output any more are deleted, in
 * the caller's transaction. 0, or -1 database error. */
int gj_job_blobs_drop_unused(PGconn *c, const char *job_id);

/* Blobs of the tenant (ids: a PostgreSQL uuid[] text) that no job owns and their holder
 * outside the jobs (a CARMIN path) let go, locked by the caller, in its transaction: those no
 * job takes as an input or keeps as an output are deleted; one a job still holds passes to
 * that job (it goes with the job, as the job's own blobs do, migration 0007) rather than
 * outliving everything. 0, or -1 database error. */
int gj_job_blobs_settle(PGconn *c, const char *tenant_id, const char *ids);

/* The tenant's top-level jobs changed after the time `after` (the oldest `batch` first) and
 * the late ones of the `lookback` (an interval's text) before it (the newest `stragglers`):
 * what a portal's stream shows, columns below, GJ_JC_HORIZON being after - lookback. The
 * result (caller clears), or NULL on a database error. */
enum gj_job_change_col { GJ_JC_ID, GJ_JC_KIND, GJ_JC_STATE, GJ_JC_PROGRESS, GJ_JC_MESSAGE, GJ_JC_DEVICE, GJ_JC_ERROR,
                         GJ_JC_CREATED, GJ_JC_STARTED, GJ_JC_FINISHED, GJ_JC_UPDATED, GJ_JC_CANCEL, GJ_JC_HORIZON };
PGresult *gj_job_changes_read(PGconn *c, const char *tenant_id, const char *after, const char *lookback, int batch,
                              int stragglers);

/* A line in the job's history (an event 'message'): what a module did for it after its run
 * (a report delivered, inputs deleted). 0, or -1 database error. */
int gj_job_note(PGconn *c, const char *job_id, const char *message);

/* The job's created_at as timestamptz text (exact when cast back), for a row that copies it
 * (an inference result's received_at): 1, 0 no such job (out ""), -1 database error. */
int gj_job_created_at(PGconn *c, const char *job_id, char out[64]);

/* What the log route needs of the tenant's job: its public state (16 bytes) and how many
 * lines its log dropped. 1, 0 no such job, -1 database error. */
int gj_job_log_head(PGconn *c, const char *tenant_id, const char *job_id, char state[16], long long *dropped);

/* The number of jobs (sub-tasks included) of each kind in each public state: rows of the
 * result, freed with gj_job_counts_free. 0, or -1 database error. */
struct gj_job_count {
    char kind[64];
    const char *state;            /* one of gj_job_public_states, or a stored name unknown here */
    long long n;
};
struct gj_job_counts {
    struct gj_job_count *rows;
    size_t n;
    long long queued;             /* claimable now or later (the queue's depth) */
};
int gj_job_counts_read(PGconn *c, struct gj_job_counts *out);
void gj_job_counts_free(struct gj_job_counts *out);
/* The count of kind in public state in counts (0 when absent). */
long long gj_job_counts_of(const struct gj_job_counts *counts, const char *kind, const char *state);

#endif
