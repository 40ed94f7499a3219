/*
 * queue.h — the job queue in PostgreSQL (ARCHITECTURE.md: a job's life): submit, claim with
 * FOR UPDATE SKIP LOCKED, leases with heartbeats and a fencing token, finish
 * exactly once, retries with backoff, rescue of expired leases, cancellation,
 * sub-tasks. The history (job_events) and NOTIFY wake-ups are written by the
 * triggers of migrations/0001_init.sql, so every path records them alike.
 */
#ifndef GJ_QUEUE_H
#define GJ_QUEUE_H

#include <stdint.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "common/gj_error.h"
#include "service/db/blobstore.h"

/* A claimed job, owned by the worker that claimed it. */
struct gj_claim {
    char id[GJ_UUID_LEN + 1];
    char tenant_id[GJ_UUID_LEN + 1];
    char kind[64];
    json_t *params;            /* owned */
    char lease_token[32];      /* fencing token (decimal) */
    int attempts;
    int max_attempts;
    int stage;
    char parent_id[GJ_UUID_LEN + 1];  /* "" when top-level */
    int child_index;
    int has_inputs;            /* 0: no job_inputs rows, nothing to download */
    int timeout_seconds;       /* a run stops this long after it starts; 0: no limit */
    double waited_seconds;     /* in the queue before this claim, since it could run */
};
void gj_claim_clear(struct gj_claim *c);

/* ---- creating a job (queue_submit.c) ---- */

#define GJ_JOB_TIMEOUT_MAX 2592000   /* 30 days, in seconds (migration 0012's CHECK) */

/* One input of a new job: a blob of the job's tenant, under a name. */
struct gj_submit_input {
    const char *name;          /* a plain name (gj_safe_name) */
    const char *blob_id;
    int owned;                 /* 1: the blob becomes the job's (uploaded with it: deleted with it) */
};

/* An input that is another job's output (top-level jobs only). A job whose upstream has not
 * settled yet is created 'waiting' and queued once every such output
 * exists; it fails when an upstream fails, is canceled or deleted, or succeeds without the
 * output (migration 0007). The output's blob itself becomes the input: no bytes are copied. */
struct gj_submit_ref {
    const char *name;          /* the input's name in the new job */
    const char *job;           /* the id of a job of the tenant */
    const char *output;        /* the name of one of its outputs */
};

/* A job to create. A caller sets what it has and leaves the rest zero; a field added
 * later (a job name, labels, a callback URL, inputs naming another job's output) gets a
 * zero default here, so no caller changes. */
struct gj_submit {
    const char *tenant_id;         /* ignored for a sub-task: the parent's */
    const char *kind;
    json_t *params;                /* borrowed; NULL: {} */
    int priority;                  /* -1000..1000; ignored for a sub-task (the parent's) */
    int max_attempts;              /* 1..100 (0: 3); ignored for a sub-task (the parent's) */
    const char *idempotency_key;   /* NULL: none */
    const char *request_hash;      /* with idempotency_key: hex SHA-256 of the request */
    const struct gj_submit_input *inputs;
    size_t n_inputs;
    /* A sub-task of a claimed job: counted in the parent's children_pending, fenced by the
     * parent's lease; child_index orders the children (see GJ_CHILD_STAGE_STRIDE). */
    const struct gj_claim *parent;
    int child_index;
    /* Top-level jobs only (a sub-task has none): */
    const struct gj_submit_ref *refs;   /* inputs from other jobs' outputs */
    size_t n_refs;
    const char *name;              /* NULL: none; 1 to 200 characters */
    json_t *labels;                /* borrowed; NULL: {}; an object of strings */
    const char *callback_url;      /* NULL: none; checked by the caller (callback_policy.h) */
    int timeout_seconds;           /* 0..GJ_JOB_TIMEOUT_MAX, 0: none; a sub-task takes the parent's */
    /* Bounds on jobs that wait for other jobs (0: none): how many waiting jobs deep a chain
     * may be, and how many of the tenant's jobs may wait at once. */
    int max_chain_depth;
    int max_waiting_jobs;
};

enum gj_submit_rc {
    GJ_SUBMIT_OK = 0,
    GJ_SUBMIT_DUPLICATE = 1,       /* the tenant has a job with this idempotency key */
    GJ_SUBMIT_LEASE_LOST = 2,      /* the parent lost its lease */
    GJ_SUBMIT_INPUT_GONE = 3,      /* an input's blob is gone (or another tenant's) */
    GJ_SUBMIT_UPSTREAM_GONE = 4,   /* a ref names no job of the tenant */
    GJ_SUBMIT_UPSTREAM_FAILED = 5, /* a ref's job failed or was canceled: its outputs never come */
    GJ_SUBMIT_NO_OUTPUT = 6,       /* a ref's job succeeded without that output */
    GJ_SUBMIT_CHAIN_TOO_DEEP = 7,  /* a ref's job waits behind max_chain_depth waiting jobs */
    GJ_SUBMIT_TOO_MANY_WAITING = 8,   /* the tenant has max_waiting_jobs jobs waiting */
    GJ_SUBMIT_ERROR = -1,          /* a database error (logged) */
};

struct gj_submitted {
    char id[GJ_UUID_LEN + 1];      /* the new job */
    const char *bad_input;         /* GJ_SUBMIT_INPUT_GONE, the upstream codes, CHAIN_TOO_DEEP: the input */
    char upstream_state[16];       /* GJ_SUBMIT_UPSTREAM_FAILED: 'failed' or 'canceled' */
    int waiting;                   /* GJ_SUBMIT_OK: 1 when the job waits for upstream jobs */
    struct gj_error err;           /* anything but GJ_SUBMIT_OK: the answer POST /v1/jobs gives
                                    * (status, field, message), for the route's gj_respond_error */
};

/* Creates a job: its row and its inputs. The one way a job comes to be (POST /v1/jobs,
 * STOW-RS, sub-tasks, tests); the history row and the NOTIFY come from the triggers. Runs
 * in the caller's transaction when one is open (anything but GJ_SUBMIT_OK leaves it for
 * the caller to roll back), else in a transaction of its own (committed on
 * GJ_SUBMIT_OK, else rolled back). Returns an enum gj_submit_rc, and on a refusal fills
 * out->err: a caller tells the codes apart only where it answers in its own words. */
int gj_queue_submit(PGconn *conn, const struct gj_submit *s, struct gj_submitted *out);

/* Claims the best queued job of one of kinds (NULL-terminated) for worker_id.
 * 1 claimed (c filled), 0 nothing to do, -1 database error. */
int gj_queue_claim(PGconn *conn, const char *worker_id, const char *const *kinds,
                   int lease_seconds, struct gj_claim *c);

/* The same, recording device ("cpu") at once where it is known before placement
 * (a process without GPUs), which saves gj_queue_set_device's round trip. */
int gj_queue_claim_on(PGconn *conn, const char *worker_id, const char *const *kinds,
                      int lease_seconds, const char *device, struct gj_claim *c);

/* Records the chosen device ("gpu:0", "cpu") on a claimed job. */
int gj_queue_set_device(PGconn *conn, const struct gj_claim *c, const char *device);

/* Extends the lease and reports progress/message (NULL: unchanged).
 * Returns 0 ok, 1 cancel requested, 2 lease lost (stop; the result will be
 * refused), -1 database error. */
int gj_queue_heartbeat(PGconn *conn, const struct gj_claim *c, int lease_seconds,
                       double progress, const char *message);

/* The finish_* functions, set_device and release return 0 done, 1 refused
 * (lease lost: another attempt owns the job; nothing was changed), -1 error. */

/* What a module records when a job of its kinds succeeds (module.h: on_job_succeeded):
 * runs inside the success transaction, before the outputs are stored. 0, or -1. */
typedef int (*gj_job_succeeded_fn)(PGconn *conn, const struct gj_claim *c, const char *output_dir);

/* Outputs to attach when a job succeeds: every regular file of dir (names must
 * pass gj_safe_name; otherwise the job fails instead and 2 is returned; so it does,
 * nothing stored, when they would pass the tenant's storage quota).
 * on_success (NULL: none) runs in the same transaction: its -1 rolls everything back
 * (returns -1). */
int gj_queue_finish_success(PGconn *conn, const struct gj_claim *c, const char *output_dir,
                            gj_job_succeeded_fn on_success);
/* What a worker slot asks for next along with its job's end (gj_queue_finish_success_next):
 * gj_queue_claim_on's arguments. */
struct gj_claim_ask {
    const char *worker_id;
    const char *const *kinds;
    int lease_seconds;
    const char *device;
};
/* What a job's end carries besides its state: the job's last log lines (gj_job_log_append's
 * four parameters, job_log.h) and its attempt's record (GJ_ATTEMPT_RECORD_SQL's six,
 * provenance_store.h), each NULL when none waits. written: set to whether they were. */
struct gj_finish_riders {
    const char *const *log;
    const char *const *record;
    int written;
};
/* gj_queue_finish_success, writing riders (NULL: none) with it, and, when there is nothing to
 * store (no output files, no on_success) and ask is given, claiming the slot's next job in the
 * same statement (*claimed 1 and next filled, else 0; a claim is made even when the finish was
 * refused). Nothing to store, it is one statement in all. */
int gj_queue_finish_success_next(PGconn *conn, const struct gj_claim *c, const char *output_dir,
                                 gj_job_succeeded_fn on_success, struct gj_finish_riders *riders,
                                 const struct gj_claim_ask *ask, struct gj_claim *next, int *claimed);
/* Failure: retried (queued after backoff) when transient and attempts remain,
 * else failed. error is a JSON object {"message", "field"?} (borrowed). */
int gj_queue_finish_failure(PGconn *conn, const struct gj_claim *c, json_t *error, int transient,
                            int retry_backoff_ms);
int gj_queue_finish_canceled(PGconn *conn, const struct gj_claim *c);
/* Parent returned GJ_RUN_WAIT_CHILDREN: it becomes 'subtasks' (its children are
 * already inserted by gj_queue_spawn_child) and gives up its lease. It commits
 * the transaction gj_queue_spawn_child opened, so children and the parent's
 * state change are one commit (a crash between them loses nothing). With no
 * child pending, the parent is queued again at its next stage. */
int gj_queue_finish_waiting(PGconn *conn, const struct gj_claim *c);
/* Gives a claimed job back to the queue without counting the attempt
 * (graceful shutdown, or placement found no room and we prefer to release). */
int gj_queue_release(PGconn *conn, const struct gj_claim *c);

/* Creates a child job of parent c through gj_queue_submit (same tenant, priority,
 * max_attempts; counted in the parent's children_pending); inputs are blob ids. Opens a
 * transaction on conn when none is open and leaves it open for
 * gj_queue_finish_waiting to commit (blobs for child inputs may be written in
 * it first, with own_txn=0). On -1 or 1 (lease lost) it has rolled back. A
 * child spawned at the parent's stage s is stored with child_index
 * s * GJ_CHILD_STAGE_STRIDE + index. */
#define GJ_CHILD_STAGE_STRIDE 1048576
int gj_queue_spawn_child(PGconn *conn, const struct gj_claim *c, int child_index, const char *kind,
                         json_t *params, const char *const *input_names,
                         const char *const *input_blob_ids, int n_inputs);

/* Requeues (or fails, when attempts are used up) jobs whose lease expired.
 * Returns the number rescued or -1. Any live process calls it periodically. */
int gj_queue_rescue_expired(PGconn *conn, int retry_backoff_ms);

/* Cancel: gj_job_cancel (job_store.h). */

/* Worker registry: insert/refresh this process's row; mark stopping; delete. */
int gj_queue_worker_register(PGconn *conn, const char *worker_id, const char *host, int pid,
                             json_t *devices);
int gj_queue_worker_heartbeat(PGconn *conn, const char *worker_id);
int gj_queue_worker_unregister(PGconn *conn, const char *worker_id);

#endif
