/*
 * worker_pool.c — the worker threads of one process (ARCHITECTURE.md: a job's life).
 *
 * One thread per slot. A thread claims a job only while a slot is free,
 * materializes its inputs (and, at stage > 0, its children's outputs) into
 * WORK_DIR/scratch/<job>/, asks the kind for its estimate, places it, runs it
 * with a gj_ctx, and finishes it by result. A maintenance thread heartbeats the
 * leases of the jobs this process holds (a lost lease or a cancel request sets
 * the job's stop flag), rescues expired leases of any process, and refreshes
 * this process's `workers` row.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gj_config.h"
#include "common/fsutil.h"
#include "common/gj_kind.h"
#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/jobs/devices.h"
#include "service/jobs/job_log.h"
#include "service/jobs/attempt_record.h"
#include "service/jobs/provenance_store.h"
#include "service/jobs/host_admission.h"
#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/jobs/queue.h"
#include "service/jobs/worker_pool.h"

#if GJ_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define COMPONENT "worker"
#define DB_WAIT_MS 10000
#define MAINT_PERIOD_S 5
#define CANCEL_POLL_S 1.0
#define MAX_CHILDREN 4096
#define LOG_FLUSH_PERIOD_S 1.0

/* Why a running job was asked to stop; a higher rank wins. */
enum stop_reason { STOP_NONE = 0, STOP_SHUTDOWN = 1, STOP_TIMEOUT = 2, STOP_CANCEL = 3, STOP_LEASE_LOST = 4 };

struct child_spec {
    char *kind;
    json_t *params;
    char **names;
    char **paths;
    size_t n;
};

struct wp_slot {
    struct gj_worker_pool *wp;
    int index;
    pthread_t thread;
    int started;

    /* Guarded by wp->lock (read by the maintenance and notifier threads). */
    int active;
    char job_id[GJ_UUID_LEN + 1];
    char lease_token[32];
    double progress;              /* -1: nothing reported yet */
    char message[512];
    int has_message;
    enum stop_reason reason;
    volatile int stop;            /* what gj_place_wait and cancelled() read */
    int started_run;              /* the module runs (a shutdown lets it finish) */
    double run_deadline;          /* monotonic: the run is stopped then (timeout_seconds); 0: never */
    int finishing;                /* recording the end: no heartbeats (the finish
                                     transaction holds the row; rescue skips it) */
    double lease_until;           /* monotonic: the lease is surely valid before this
                                     (claim or last heartbeat that reached the database) */
    struct gj_job_log *log;       /* the running job's own log (locks itself; job_log.h) */
    struct gj_attempt_record *record;   /* its attempt's, until written (locks itself) */
    json_t *chosen;               /* what the run recorded it chose (ctx_record), or NULL */

    /* Private to the slot's thread. */
    char spare[1100];             /* an emptied work tree kept between jobs (see take_work_dir) */
    const struct gj_claim *claim;
    struct gj_claim next;         /* claimed along with the last job's end; has_next: to run next */
    int has_next;
    const struct input_set *inputs;   /* the running job's materialized inputs */
    struct child_spec *children;
    size_t n_children;
};

struct gj_worker_pool {
    struct gj_server *srv;
    pthread_mutex_t lock;
    pthread_cond_t cond;          /* CLOCK_MONOTONIC: slot done, stop */
    int n_slots;
    struct wp_slot *slots;
    int running;
    atomic_int stopping;
    int maint_stop;
    pthread_t maint;
    int maint_started;
    double stop_deadline;         /* monotonic: shutdown gives up waiting here (0: none) */
    const char **kinds;           /* NULL-terminated, from the registry */
    int cpu_threads;
    char scratch_root[1024];
};

/* ---- small helpers ---------------------------------------------------- */

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void deadline_at(struct timespec *ts, double t)
{
    ts->tv_sec = (time_t)t;
    ts->tv_nsec = (long)((t - (double)ts->tv_sec) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
    if (ts->tv_nsec < 0)
        ts->tv_nsec = 0;
}

static int is_stopping(struct gj_worker_pool *wp)
{
    return atomic_load(&wp->stopping) || atomic_load(&wp->srv->stopping);
}

static PGconn *acquire(struct gj_worker_pool *wp)
{
    PGconn *conn = gj_db_acquire(wp->srv->db, DB_WAIT_MS);
    if (!conn)
        gj_log_warn(COMPONENT, "no database connection within %d ms", DB_WAIT_MS);
    return conn;
}

static void release_conn(struct gj_worker_pool *wp, PGconn *conn)
{
    if (conn)
        gj_db_release(wp->srv->db, conn);
}

static void set_stop_locked(struct wp_slot *s, enum stop_reason reason)
{
    if (reason > s->reason)
        s->reason = reason;
    s->stop = 1;
}

static enum stop_reason stop_reason_of(struct wp_slot *s)
{
    pthread_mutex_lock(&s->wp->lock);
    enum stop_reason r = s->reason;
    pthread_mutex_unlock(&s->wp->lock);
    return r;
}

static void free_children(struct wp_slot *s)
{
    for (size_t i = 0; i < s->n_children; i++) {
        struct child_spec *c = &s->children[i];
        free(c->kind);
        json_decref(c->params);
        for (size_t j = 0; j < c->n; j++) {
            free(c->names[j]);
            free(c->paths[j]);
        }
        free(c->names);
        free(c->paths);
    }
    free(s->children);
    s->children = NULL;
    s->n_children = 0;
}

/* ---- gj_ctx hooks ----------------------------------------------------- */

static void ctx_progress(struct gj_ctx *ctx, double fraction, const char *message)
{
    struct wp_slot *s = ctx->host;
    pthread_mutex_lock(&s->wp->lock);
    s->progress = fraction;
    if (message) {
        snprintf(s->message, sizeof s->message, "%s", message);
        s->has_message = 1;
    }
    pthread_mutex_unlock(&s->wp->lock);
}

static int ctx_cancelled(struct gj_ctx *ctx)
{
    struct wp_slot *s = ctx->host;
    return s->stop != 0;
}

static void ctx_log(struct gj_ctx *ctx, const char *message)
{
    struct wp_slot *s = ctx->host;
    gj_log_info(COMPONENT, "job %s: %s", s->job_id, message);
    gj_job_log_add(s->log, GJ_JOB_LOG_INFO, "%s", message);
}

static int ctx_record(struct gj_ctx *ctx, const char *key, json_t *value)
{
    struct wp_slot *s = ctx->host;
    if (!s->chosen && !(s->chosen = json_object())) {
        json_decref(value);
        return -1;
    }
    return json_object_set_new(s->chosen, key, value);
}

static int ctx_spawn(struct gj_ctx *ctx, const char *kind, json_t *params,
                     const struct gj_input *inputs, size_t n_inputs, struct gj_error *err)
{
    struct wp_slot *s = ctx->host;
    if (!kind || !gj_kind_find(kind))
        return gj_error_set(err, "", "internal: child kind %s is unknown", kind ? kind : "(null)");
    if (s->n_children >= MAX_CHILDREN)
        return gj_error_set(err, "", "too many child tasks (limit %d)", MAX_CHILDREN);
    for (size_t i = 0; i < n_inputs; i++) {
        if (!inputs[i].name || !gj_safe_name(inputs[i].name))
            return gj_error_set(err, "", "internal: child input name is not a plain file name");
        if (!inputs[i].path)
            return gj_error_set(err, "", "internal: child input %s has no file", inputs[i].name);
    }
    struct child_spec *grown = realloc(s->children, (s->n_children + 1) * sizeof *grown);
    if (!grown)
        return gj_error_set(err, "", "out of memory");
    s->children = grown;
    struct child_spec *c = &s->children[s->n_children];
    memset(c, 0, sizeof *c);
    c->kind = strdup(kind);
    c->params = params ? json_deep_copy(params) : json_object();
    c->names = calloc(n_inputs ? n_inputs : 1, sizeof *c->names);
    c->paths = calloc(n_inputs ? n_inputs : 1, sizeof *c->paths);
    int ok = c->kind && c->params && c->names && c->paths;
    for (size_t i = 0; ok && i < n_inputs; i++) {
        c->names[i] = strdup(inputs[i].name);
        c->paths[i] = strdup(inputs[i].path);
        c->n = i + 1;
        ok = c->names[i] && c->paths[i];
    }
    s->n_children++;   /* counted even when incomplete, so free_children frees it */
    if (!ok) {
        free_children(s);
        return gj_error_set(err, "", "out of memory");
    }
    return 0;
}

/* ---- materialization -------------------------------------------------- */

struct input_set {
    struct gj_input *items;
    char (*blob_ids)[GJ_UUID_LEN + 1];
    size_t n;
};

static void input_set_free(struct input_set *in)
{
    for (size_t i = 0; i < in->n; i++) {
        free((char *)in->items[i].name);
        free((char *)in->items[i].path);
    }
    free(in->items);
    free(in->blob_ids);
    in->items = NULL;
    in->blob_ids = NULL;
    in->n = 0;
}

/* Downloads each job_inputs blob into dir/<name>. 0, -1 with err, or 1 when *stop
 * was set between two inputs (cancel, shutdown: a job of many inputs stops soon). */
static int materialize_inputs(PGconn *conn, const struct gj_claim *c, const char *dir,
                              struct input_set *in, struct gj_error *err, const volatile int *stop)
{
    if (!c->has_inputs) {
        in->items = calloc(1, sizeof *in->items);
        in->blob_ids = calloc(1, sizeof *in->blob_ids);
        if (!in->items || !in->blob_ids) {
            err->transient = 1;
            return gj_error_set(err, "", "out of memory");
        }
        return 0;
    }
    const char *params[] = { c->id };
    PGresult *r = gj_db_exec(conn,
                             "SELECT i.name, b.lo_oid, b.size, b.id FROM job_inputs i"
                             " JOIN blobs b ON b.id = i.blob_id WHERE i.job_id = $1 ORDER BY i.name",
                             1, params, NULL);
    if (!r) {
        err->transient = 1;
        return gj_error_set(err, "", "internal: cannot read the job's inputs");
    }
    int n = PQntuples(r);
    in->items = calloc(n ? (size_t)n : 1, sizeof *in->items);
    in->blob_ids = calloc(n ? (size_t)n : 1, sizeof *in->blob_ids);
    if (!in->items || !in->blob_ids) {
        PQclear(r);
        err->transient = 1;
        return gj_error_set(err, "", "out of memory");
    }
    for (int i = 0; i < n; i++) {
        const char *name = PQgetvalue(r, i, 0);
        if (!gj_safe_name(name)) {
            PQclear(r);
            return gj_error_set(err, "inputs", "input name is not a plain file name");
        }
        char path[4096];
        if (gj_path_join(path, sizeof path, dir, name) != 0) {
            PQclear(r);
            return gj_error_set(err, "inputs", "input path too long");
        }
        struct gj_input *item = &in->items[in->n];
        item->name = strdup(name);
        item->path = strdup(path);
        item->size = strtoull(PQgetvalue(r, i, 2), NULL, 10);
        snprintf(in->blob_ids[in->n], sizeof in->blob_ids[in->n], "%s", PQgetvalue(r, i, 3));
        in->n++;
        if (!item->name || !item->path) {
            PQclear(r);
            err->transient = 1;
            return gj_error_set(err, "", "out of memory");
        }
        if (*stop) {
            PQclear(r);
            return 1;
        }
        int missing = 0;   /* its object gone from the object store: no retry brings it back */
        if (gj_blob_export_id(conn, in->blob_ids[in->n - 1], path, &missing) != 0) {
            PQclear(r);
            err->transient = !missing;
            /* item->name: name was the result's, cleared just now */
            if (missing)
                return gj_error_set(err, "inputs", "input %s: blob %s is missing from the object store",
                                    item->name, in->blob_ids[in->n - 1]);
            return gj_blob_store_unreachable(1)
                       ? gj_error_set(err, "", "input %s: the object store is not available", item->name)
                       : gj_error_set(err, "", "internal: cannot download input %s", item->name);
        }
    }
    PQclear(r);
    return 0;
}

struct child_set {
    struct gj_child_result *items;
    char **ids;
    char **dirs;
    size_t n;
};

static void child_set_free(struct child_set *cs)
{
    for (size_t i = 0; i < cs->n; i++) {
        free(cs->ids[i]);
        free(cs->dirs[i]);
    }
    free(cs->items);
    free(cs->ids);
    free(cs->dirs);
    memset(cs, 0, sizeof *cs);
}

/* At stage s > 0: the outputs of the children spawned at stage s-1 into
 * root/<index>/, in spawn order. 0, or -1 with err. */
static int materialize_children(PGconn *conn, const struct gj_claim *c, const char *root,
                                struct child_set *cs, struct gj_error *err)
{
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%lld", (long long)(c->stage - 1) * GJ_CHILD_STAGE_STRIDE);
    snprintf(hi, sizeof hi, "%lld", (long long)c->stage * GJ_CHILD_STAGE_STRIDE);
    const char *params[] = { c->id, lo, hi };
    PGresult *r = gj_db_exec(conn,
                             "SELECT j.id, j.child_index, o.name, b.id FROM jobs j"
                             " LEFT JOIN job_outputs o ON o.job_id = j.id"
                             " LEFT JOIN blobs b ON b.id = o.blob_id"
                             " WHERE j.parent_id = $1 AND j.child_index >= $2::int"
                             "   AND j.child_index < $3::int"
                             " ORDER BY j.child_index, o.name",
                             3, params, NULL);
    if (!r) {
        err->transient = 1;
        return gj_error_set(err, "", "internal: cannot read the sub-tasks' results");
    }
    int rows = PQntuples(r);
    size_t cap = rows ? (size_t)rows : 1;
    cs->items = calloc(cap, sizeof *cs->items);
    cs->ids = calloc(cap, sizeof *cs->ids);
    cs->dirs = calloc(cap, sizeof *cs->dirs);
    if (!cs->items || !cs->ids || !cs->dirs) {
        PQclear(r);
        err->transient = 1;
        return gj_error_set(err, "", "out of memory");
    }
    for (int i = 0; i < rows; i++) {
        const char *id = PQgetvalue(r, i, 0);
        int index = atoi(PQgetvalue(r, i, 1)) - (c->stage - 1) * GJ_CHILD_STAGE_STRIDE;
        if (cs->n == 0 || strcmp(cs->ids[cs->n - 1], id) != 0) {
            char dir[4096];
            snprintf(dir, sizeof dir, "%s/%d", root, index);
            cs->ids[cs->n] = strdup(id);
            cs->dirs[cs->n] = strdup(dir);
            cs->n++;
            if (!cs->ids[cs->n - 1] || !cs->dirs[cs->n - 1]) {
                PQclear(r);
                err->transient = 1;
                return gj_error_set(err, "", "out of memory");
            }
            if (gj_mkdir_p(dir, 0700) != 0) {
                PQclear(r);
                err->transient = 1;
                return gj_error_set(err, "", "internal: cannot create %s: %s", dir, strerror(errno));
            }
            cs->items[cs->n - 1].id = cs->ids[cs->n - 1];
            cs->items[cs->n - 1].index = index;
            cs->items[cs->n - 1].output_dir = cs->dirs[cs->n - 1];
        }
        if (PQgetisnull(r, i, 2))
            continue;   /* a child without outputs */
        const char *name = PQgetvalue(r, i, 2);
        char path[4096];
        if (!gj_safe_name(name) || gj_path_join(path, sizeof path, cs->dirs[cs->n - 1], name) != 0) {
            PQclear(r);
            return gj_error_set(err, "", "internal: sub-task output name is not usable");
        }
        if (gj_blob_export_id(conn, PQgetvalue(r, i, 3), path, NULL) != 0) {
            PQclear(r);
            err->transient = 1;
            return gj_error_set(err, "", "internal: cannot download a sub-task's output %s", name);
        }
    }
    PQclear(r);
    return 0;
}

/* Streams a file into a blob owned by owner, inside the caller's transaction. */
static int upload_file(PGconn *conn, const char *tenant, const char *owner, const char *path,
                       char id_out[GJ_UUID_LEN + 1])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        gj_log_error(COMPONENT, "child input %s: %s", path, strerror(errno));
        return -1;
    }
    struct gj_blob_writer *w = gj_blob_writer_open(conn, tenant, "application/octet-stream", 0);
    if (!w) {
        close(fd);
        return -1;
    }
    int rc = gj_blob_writer_write_fd(w, fd);
    if (rc > 0)
        gj_log_error(COMPONENT, "child input %s: %s", path, strerror(rc));
    close(fd);
    if (rc) {
        gj_blob_writer_abort(w);
        return -1;
    }
    return gj_blob_writer_commit(w, owner, id_out);
}

/* Parent returned WAIT_CHILDREN: inputs as blobs, children, and the parent's
 * 'subtasks' state in one transaction. Returns what finish_waiting returns. */
static int spawn_and_wait(PGconn *conn, struct wp_slot *s, const struct gj_claim *c)
{
    if (s->n_children == 0)
        return gj_queue_finish_waiting(conn, c);
    if (gj_db_begin(conn) != 0)
        return -1;
    for (size_t i = 0; i < s->n_children; i++) {
        struct child_spec *cs = &s->children[i];
        char (*ids)[GJ_UUID_LEN + 1] = calloc(cs->n ? cs->n : 1, sizeof *ids);
        const char **names = calloc(cs->n ? cs->n : 1, sizeof *names);
        const char **idp = calloc(cs->n ? cs->n : 1, sizeof *idp);
        int rc = ids && names && idp ? 0 : -1;
        for (size_t j = 0; rc == 0 && j < cs->n; j++) {
            /* A child reading one of the parent's own inputs shares its blob. */
            const struct input_set *in = s->inputs;
            int shared = 0;
            for (size_t k = 0; in && k < in->n && !shared; k++) {
                if (strcmp(in->items[k].path, cs->paths[j]) == 0) {
                    memcpy(ids[j], in->blob_ids[k], sizeof ids[j]);
                    shared = 1;
                }
            }
            if (!shared)
                rc = upload_file(conn, c->tenant_id, c->id, cs->paths[j], ids[j]);
            names[j] = cs->names[j];
            idp[j] = ids[j];
        }
        if (rc == 0)
            rc = gj_queue_spawn_child(conn, c, c->stage * GJ_CHILD_STAGE_STRIDE + (int)i, cs->kind,
                                      cs->params, names, idp, (int)cs->n);
        free(ids);
        free(names);
        free(idp);
        if (rc != 0) {
            gj_db_rollback(conn);
            return rc;
        }
    }
    return gj_queue_finish_waiting(conn, c);
}

/* ---- one job ---------------------------------------------------------- */

static void slot_begin(struct wp_slot *s, const struct gj_claim *c)
{
    struct gj_worker_pool *wp = s->wp;
    pthread_mutex_lock(&wp->lock);
    s->active = 1;
    snprintf(s->job_id, sizeof s->job_id, "%s", c->id);
    snprintf(s->lease_token, sizeof s->lease_token, "%s", c->lease_token);
    s->progress = -1;
    s->message[0] = '\0';
    s->has_message = 0;
    s->reason = STOP_NONE;
    s->stop = 0;
    s->finishing = 0;
    s->started_run = 0;
    s->run_deadline = 0;
    s->claim = c;
    /* The claim set the lease a moment ago; a second's margin for that moment. */
    s->lease_until = mono_now() - 1.0 + wp->srv->cfg.lease_seconds;
    gj_job_log_begin(s->log, c->id, c->attempts);
    wp->running++;
    /* Claimed while shutting down: give it back at once. */
    if (atomic_load(&wp->stopping))
        set_stop_locked(s, STOP_SHUTDOWN);
    pthread_mutex_unlock(&wp->lock);
}

static void slot_end(struct wp_slot *s)
{
    struct gj_worker_pool *wp = s->wp;
    pthread_mutex_lock(&wp->lock);
    s->active = 0;
    s->finishing = 0;
    s->started_run = 0;
    s->job_id[0] = '\0';
    s->lease_token[0] = '\0';
    s->claim = NULL;
    wp->running--;
    if (wp->running == 0)   /* what wait_idle_locked waits for; the maintenance thread keeps its sleep */
        pthread_cond_broadcast(&wp->cond);
    pthread_mutex_unlock(&wp->lock);
}

static json_t *error_json(const struct gj_error *err)
{
    json_t *e = json_pack("{s:s}", "message", err->message[0] ? err->message : "the job failed");
    if (e && err->field[0])
        json_object_set_new(e, "field", json_string(err->field));
    return e;
}

/* The module hook that records a succeeded job of this kind, or NULL. */
static gj_job_succeeded_fn succeeded_hook(const struct gj_server *srv, const char *kind)
{
    for (size_t i = 0; i < srv->n_kind_hooks; i++)
        if (strcmp(srv->kind_hooks[i].kind, kind) == 0)
            return srv->kind_hooks[i].on_succeeded;
    return NULL;
}

enum ending { END_SUCCESS, END_FAIL, END_CANCEL, END_RELEASE, END_WAIT, END_NOTHING };

/* A success, with the job's last log lines and, unless shutting down, the slot's next claim in
 * the same statement where nothing is to be stored (gj_queue_finish_success_next). */
static int record_success(struct wp_slot *s, PGconn *conn, const struct gj_claim *c, const char *out_dir)
{
    struct gj_worker_pool *wp = s->wp;
    struct gj_server *srv = wp->srv;
    struct gj_job_log_batch lb;
    struct gj_attempt_record_batch rb;
    struct gj_finish_riders riders = { NULL, NULL, 0 };
    if (gj_job_log_take(s->log, &lb) == 1)
        riders.log = lb.params;
    if (gj_attempt_record_take(s->record, &rb) == 1)
        riders.record = rb.params;
    struct gj_claim_ask ask = { srv->worker_id, wp->kinds, srv->cfg.lease_seconds,
                                srv->placement.n_gpus == 0 ? "cpu" : NULL };
    int ask_next = !s->has_next && !is_stopping(wp);
    int rc = gj_queue_finish_success_next(conn, c, out_dir, succeeded_hook(srv, c->kind), &riders,
                                          ask_next ? &ask : NULL, &s->next, &s->has_next);
    gj_job_log_settle(s->log, &lb, riders.written);
    gj_attempt_record_settle(s->record, &rb, riders.written);
    return rc;
}

/* What the slot's job has waiting for the database: its log lines and its attempt's record. */
static void flush_slot(struct wp_slot *s, PGconn *conn)
{
    if (gj_job_log_flush(s->log, conn) == 0)
        gj_attempt_record_flush(s->record, conn);
}

/* One try at writing the job's end on conn. Returns what the finish_* functions
 * return (0 done, 1 refused: the lease was lost, -1 error) and sets *label, the
 * state for metrics. */
static int record_end(struct wp_slot *s, PGconn *conn, const struct gj_claim *c, enum ending how,
                      const struct gj_error *err, const char *out_dir, const char **label)
{
    struct gj_worker_pool *wp = s->wp;
    int rc = -1;
    *label = "lost";
    switch (how) {
    case END_SUCCESS:
        rc = record_success(s, conn, c, out_dir);
        *label = rc == 0 ? "succeeded" : rc == 2 ? "failed" : "lost";
        break;
    case END_FAIL: {
        json_t *e = error_json(err);
        if (!e) {
            gj_log_error(COMPONENT, "job %s: out of memory", c->id);
            break;
        }
        rc = gj_queue_finish_failure(conn, c, e, err->transient, wp->srv->cfg.retry_backoff_ms);
        json_decref(e);
        *label = rc == 0 ? (err->transient && c->attempts < c->max_attempts ? "retried" : "failed") : "lost";
        break;
    }
    case END_CANCEL:
        rc = gj_queue_finish_canceled(conn, c);
        *label = rc == 0 ? "canceled" : "lost";
        break;
    case END_RELEASE:
        rc = gj_queue_release(conn, c);
        *label = rc == 0 ? "released" : "lost";
        break;
    case END_WAIT:
        rc = spawn_and_wait(conn, s, c);
        *label = rc == 0 ? "waiting" : "lost";
        break;
    case END_NOTHING:
        break;
    }
    if (rc < 0 && (how == END_SUCCESS || how == END_WAIT) && PQstatus(conn) == CONNECTION_OK) {
        /* Outputs or sub-tasks could not be stored (nothing was): a transient
         * failure, so the job is retried rather than left to its lease. */
        gj_db_rollback(conn);
        if (how == END_SUCCESS)   /* its riders were given back when the success failed */
            flush_slot(s, conn);
        json_t *e = json_pack("{s:s}", "message",
                              how == END_SUCCESS ? "internal: the job's outputs could not be stored"
                                                 : "internal: the job's sub-tasks could not be queued");
        if (e) {
            rc = gj_queue_finish_failure(conn, c, e, 1, wp->srv->cfg.retry_backoff_ms);
            json_decref(e);
            if (rc == 0)
                *label = c->attempts < c->max_attempts ? "retried" : "failed";
        }
    }
    return rc;
}

/* How long finish may keep trying: while the lease is surely still valid (after
 * that, rescue owns the job), and not past a shutdown's deadline. */
static double finish_deadline(struct wp_slot *s)
{
    pthread_mutex_lock(&s->wp->lock);
    double t = s->lease_until;
    if (s->wp->stop_deadline > 0 && s->wp->stop_deadline < t)
        t = s->wp->stop_deadline;
    pthread_mutex_unlock(&s->wp->lock);
    return t;
}

#define FINISH_RETRY_S 0.25

/* Writes the job's end to the database; returns the state label for metrics. The
 * database may be away for a moment (restarting, a network cut): the end is
 * written again on a fresh connection while the lease lasts, so a job that ran
 * to its end is not run again for want of a connection. */
static const char *finish(struct wp_slot *s, const struct gj_claim *c, enum ending how,
                          const struct gj_error *err, const char *out_dir)
{
    struct gj_worker_pool *wp = s->wp;
    if (stop_reason_of(s) == STOP_LEASE_LOST) {
        gj_log_warn(COMPONENT, "job %s: lease lost; its result is dropped", c->id);
        return "lost";
    }
    if (how == END_NOTHING)
        return "lost";
    pthread_mutex_lock(&wp->lock);
    s->finishing = 1;
    pthread_mutex_unlock(&wp->lock);
    const char *label = "lost";
    int tries = 0;
    for (;;) {
        PGconn *conn = gj_db_acquire(wp->srv->db, 1000);
        int rc = -1, broken = 1;
        tries++;
        if (conn) {
            if (how != END_SUCCESS)   /* the log is whole before the job is seen to end (a success writes it) */
                flush_slot(s, conn);
            rc = record_end(s, conn, c, how, err, out_dir, &label);
            broken = PQstatus(conn) != CONNECTION_OK;
            release_conn(wp, conn);
        }
        if (rc >= 0) {
            if (tries > 1)
                gj_log_info(COMPONENT, "job %s: its end recorded after %d tries", c->id, tries);
            break;
        }
        if (!broken || mono_now() + FINISH_RETRY_S >= finish_deadline(s)) {
            gj_log_error(COMPONENT, "job %s: recording its end failed%s; the lease will expire", c->id,
                         broken ? " (no database)" : "");
            break;
        }
        struct timespec ts = { 0, (long)(FINISH_RETRY_S * 1e9) };
        nanosleep(&ts, NULL);
    }
    return label;
}

/* Each job works in WORK_DIR/scratch/<job>/{inputs,outputs,tmp}. Creating and
 * removing those directories for every job is slow where the file system
 * discards freed blocks synchronously (rmdir waits for the device), so a slot
 * keeps its emptied tree under a private name between jobs and renames it. */
static int empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[4400];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path || gj_rm_rf(path) != 0)
            rc = -1;
    }
    closedir(d);
    return rc;
}

static int take_work_dir(struct wp_slot *s, const char *base)
{
    if (gj_rm_rf(base) != 0)
        return -1;
    if (s->spare[0] && rename(s->spare, base) == 0)
        return 0;
    return gj_mkdir_p(base, 0700);
}

static int give_back_work_dir(struct wp_slot *s, const char *base)
{
    if (!s->spare[0])
        snprintf(s->spare, sizeof s->spare, "%s/.slot-%d-%d", s->wp->scratch_root, (int)getpid(), s->index);
    static const char *const keep[] = { "inputs", "outputs", "tmp" };
    DIR *d = opendir(base);
    int ok = d != NULL;
    struct dirent *e;
    while (ok && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[4400];
        int kept = 0;
        for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
            kept |= !strcmp(e->d_name, keep[i]);
        ok = snprintf(path, sizeof path, "%s/%s", base, e->d_name) < (int)sizeof path &&
             (kept ? empty_dir(path) : gj_rm_rf(path)) == 0;
    }
    if (d)
        closedir(d);
    if (ok && rename(base, s->spare) == 0)
        return 0;
    return gj_rm_rf(base);
}

/* One claimed job through its steps (run_claim). */
struct job_run {
    struct wp_slot *s;
    const struct gj_claim *c;
    const struct gj_kind *kind;
    struct gj_error err;
    struct input_set in;
    struct child_set cs;
    enum ending how;                 /* what finish records */
    int device, placed;
    uint64_t reserved, host_reserved;
    char base[4096], in_dir[4200], out_dir[4200], tmp_dir[4200], child_dir[4200];
};

/* The ending a stop request asks for (cancel, lost lease, shutdown). */
static enum ending ending_of_stop(enum stop_reason r)
{
    return r == STOP_CANCEL ? END_CANCEL : r == STOP_LEASE_LOST ? END_NOTHING : END_RELEASE;
}

/* WORK_DIR/scratch/<job>/{inputs,outputs,tmp}, and the inputs (and children's outputs)
 * downloaded there. 0, or -1 with j->err. */
static int prepare(struct job_run *j)
{
    struct gj_worker_pool *wp = j->s->wp;
    const struct gj_claim *c = j->c;
    if (snprintf(j->base, sizeof j->base, "%s/%s", wp->scratch_root, c->id) >= (int)sizeof j->base) {
        j->base[0] = '\0';
        return gj_error_set(&j->err, "", "internal: work directory path too long");
    }
    snprintf(j->in_dir, sizeof j->in_dir, "%s/inputs", j->base);
    snprintf(j->out_dir, sizeof j->out_dir, "%s/outputs", j->base);
    snprintf(j->tmp_dir, sizeof j->tmp_dir, "%s/tmp", j->base);
    snprintf(j->child_dir, sizeof j->child_dir, "%s/children", j->base);
    if (take_work_dir(j->s, j->base) != 0 || gj_mkdir_p(j->in_dir, 0700) != 0 ||
        gj_mkdir_p(j->out_dir, 0700) != 0 || gj_mkdir_p(j->tmp_dir, 0700) != 0) {
        gj_error_set(&j->err, "", "internal: cannot prepare the work directory: %s", strerror(errno));
        j->err.transient = 1;
        return -1;
    }
    PGconn *conn = acquire(wp);
    if (!conn) {
        /* The database is away (restarting) or busy: not the job's doing, so it goes
         * back to the queue without spending an attempt, once the database answers. */
        gj_error_set(&j->err, "", "internal: no database connection for the inputs");
        j->how = END_RELEASE;
        return -1;
    }
    int rc = materialize_inputs(conn, c, j->in_dir, &j->in, &j->err, &j->s->stop);
    if (rc == 0) {
        j->s->inputs = &j->in;
        if (c->stage > 0)
            rc = materialize_children(conn, c, j->child_dir, &j->cs, &j->err);
    }
    release_conn(wp, conn);
    if (rc == 1) {   /* stopped while downloading */
        j->how = ending_of_stop(stop_reason_of(j->s));
        return -1;
    }
    return rc;
}

/* The kind's estimate, then a device from the placement (waiting for room), recorded on
 * the job. 0 placed; -1 with j->how and j->err set. */
static int place(struct job_run *j, const struct gj_job *job)
{
    struct gj_worker_pool *wp = j->s->wp;
    struct gj_server *srv = wp->srv;
    struct gj_needs needs = { .can_use_gpu = 0, .needs_gpu = 0, .device_bytes = 0, .host_bytes = 0 };
    if (j->kind->estimate && j->kind->estimate(job, &needs, &j->err) != 0) {
        if (!j->err.message[0])
            gj_error_set(&j->err, "", "the job's resource estimate failed");
        return -1;
    }
    struct gj_place_request req = { needs.can_use_gpu, needs.needs_gpu, needs.device_bytes, needs.host_bytes };
    enum gj_place_outcome o = gj_place_wait(&srv->placement, &req, &j->device, &j->s->stop);
    if (o == GJ_PLACE_NEVER_HOST || o == GJ_PLACE_NEVER)
        gj_metrics_placement_refused(j->kind->name, o == GJ_PLACE_NEVER ? "device_memory" : "host_memory");
    if (o == GJ_PLACE_NEVER_HOST) {
        gj_error_set(&j->err, "", "this job needs %llu bytes of host memory; jobs get at most %llu here",
                     (unsigned long long)needs.host_bytes, (unsigned long long)srv->placement.host_bytes);
        return -1;
    }
    if (o == GJ_PLACE_NEVER) {
        gj_error_set(&j->err, "", "no device can run this job (it needs %s%llu bytes of device memory)",
                     needs.needs_gpu ? "a GPU with " : "", (unsigned long long)needs.device_bytes);
        return -1;
    }
    if (o == GJ_PLACE_WAIT) {   /* stopped while waiting */
        j->how = ending_of_stop(stop_reason_of(j->s));
        return -1;
    }
    j->placed = 1;
    j->reserved = o == GJ_PLACED_GPU ? needs.device_bytes : 0;
    j->host_reserved = needs.host_bytes;
    if (o != GJ_PLACED_GPU)
        j->device = GJ_DEVICE_CPU;
    char devname[32];
    if (o == GJ_PLACED_GPU)
        snprintf(devname, sizeof devname, "gpu:%d", j->device);
    else
        snprintf(devname, sizeof devname, "cpu");
    PGconn *conn;
    /* Without GPUs the claim already recorded "cpu". */
    if (srv->placement.n_gpus > 0 && (conn = acquire(wp)) != NULL) {
        if (gj_queue_set_device(conn, j->c, devname) < 0)
            gj_log_warn(COMPONENT, "job %s: cannot record device %s", j->c->id, devname);
        release_conn(wp, conn);
    }
#if GJ_HAVE_CUDA
    struct gj_device_info info;
    if (o == GJ_PLACED_GPU && gj_device_info(j->device, &info) == 0 && !info.simulated) {
        cudaError_t ce = cudaSetDevice(j->device);
        if (ce != cudaSuccess)
            gj_log_warn(COMPONENT, "job %s: cudaSetDevice(%d): %s", j->c->id, j->device, cudaGetErrorString(ce));
    }
#endif
    return 0;
}

/* How a run that stopped when asked ends: a timeout fails the job for good (running it
 * again would time out again), a shutdown gives it back, a cancel cancels it. */
static void ended_by_stop(struct job_run *j, enum stop_reason why)
{
    j->how = why == STOP_SHUTDOWN ? END_RELEASE : why == STOP_TIMEOUT ? END_FAIL : END_CANCEL;
    if (why != STOP_TIMEOUT)
        return;
    gj_error_set(&j->err, "timeout_seconds", "timed out: the run was stopped after its timeout_seconds (%d s)",
                 j->c->timeout_seconds);
    j->err.transient = 0;
}

/* Runs the kind unless the job was stopped before it started; sets j->how. */
static void run_kind(struct job_run *j, const struct gj_job *job)
{
    struct wp_slot *s = j->s;
    struct gj_worker_pool *wp = s->wp;
    pthread_mutex_lock(&wp->lock);
    enum stop_reason stop = s->reason;
    if (stop == STOP_NONE) {
        s->started_run = 1;
        s->run_deadline = j->c->timeout_seconds > 0 ? mono_now() + j->c->timeout_seconds : 0;
    }
    pthread_mutex_unlock(&wp->lock);
    if (stop != STOP_NONE) {   /* cancel, lost lease, shutdown: do not start */
        j->how = ending_of_stop(stop);
        return;
    }
    struct gj_ctx ctx = {
        .job = job,
        .device = j->device,
        .cpu_threads = wp->cpu_threads,
        .device_bytes_limit = j->reserved,
        .scratch_dir = j->tmp_dir,
        .output_dir = j->out_dir,
        .stage = j->c->stage,
        .children = j->cs.items,
        .n_children = j->cs.n,
        .host = s,
        .progress = ctx_progress,
        .cancelled = ctx_cancelled,
        .log = ctx_log,
        .spawn_child = ctx_spawn,
        .record = ctx_record,
    };
    gj_error_clear(&j->err);
    int result = j->kind->run(&ctx, &j->err);
    switch (result) {
    case GJ_RUN_OK:
        j->how = END_SUCCESS;
        break;
    case GJ_RUN_FAILED:
        if (!j->err.message[0])
            gj_error_set(&j->err, "", "the job failed without saying why");
        j->how = END_FAIL;
        break;
    case GJ_RUN_CANCELED:
        ended_by_stop(j, stop_reason_of(s));
        break;
    case GJ_RUN_WAIT_CHILDREN:
        j->how = END_WAIT;
        break;
    default:
        gj_error_set(&j->err, "", "internal: kind %s returned %d", j->kind->name, result);
        j->how = END_FAIL;
        break;
    }
}

/* Records the end, gives back the device and the work tree, counts it. */
static void conclude(struct job_run *j, double t0)
{
    struct wp_slot *s = j->s;
    const struct gj_claim *c = j->c;
    const char *label = finish(s, c, j->how, &j->err, j->out_dir);
    if (j->how == END_FAIL)
        gj_log_info(COMPONENT, "job %s: %s%s%s", c->id, j->err.message, j->err.field[0] ? " at " : "",
                    j->err.field);
    if (j->placed)
        gj_place_release_job(&s->wp->srv->placement, j->device, j->reserved, j->host_reserved);
    free_children(s);
    s->inputs = NULL;
    input_set_free(&j->in);
    child_set_free(&j->cs);
    if (j->base[0] && give_back_work_dir(s, j->base) != 0)
        gj_log_warn(COMPONENT, "job %s: cannot remove %s: %s", c->id, j->base, strerror(errno));
    double secs = mono_now() - t0;
    gj_metrics_job_finished(c->kind, label, secs);
    gj_log_info(COMPONENT, "job %s: %s after %.3f s", c->id, label, secs);
}

/* ---- the job's own log: its phases and their times (job_log.h) ------- */

static void log_inputs(const struct job_run *j, double t0)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < j->in.n; i++)
        bytes += j->in.items[i].size;
    gj_job_log_add(j->s->log, GJ_JOB_LOG_INFO, "inputs ready: %zu file(s), %llu bytes, in %.3f s", j->in.n,
                   (unsigned long long)bytes, mono_now() - t0);
}

static void log_placed(const struct job_run *j, double t0)
{
    char dev[32];
    snprintf(dev, sizeof dev, j->device == GJ_DEVICE_CPU ? "cpu" : "gpu:%d", j->device);
    gj_job_log_add(j->s->log, GJ_JOB_LOG_INFO, "placed on %s (%llu bytes of device memory reserved) %.3f s after "
                   "the claim", dev, (unsigned long long)j->reserved, mono_now() - t0);
}

static void log_ran(const struct job_run *j, double t_run)
{
    static const char *const what[] = { [END_SUCCESS] = "succeeded", [END_FAIL] = "failed",
                                        [END_CANCEL] = "was canceled", [END_RELEASE] = "was stopped (shutdown)",
                                        [END_WAIT] = "waits for its sub-tasks", [END_NOTHING] = "lost its lease" };
    gj_job_log_add(j->s->log, j->how == END_SUCCESS || j->how == END_WAIT ? GJ_JOB_LOG_INFO : GJ_JOB_LOG_WARN,
                   "run %s after %.3f s", what[j->how], mono_now() - t_run);
}

static void log_failure(const struct job_run *j)
{
    if (j->how != END_FAIL)
        return;
    int retried = j->err.transient && j->c->attempts < j->c->max_attempts;
    gj_job_log_add(j->s->log, GJ_JOB_LOG_ERROR, "%s%s%s%s", j->err.field[0] ? j->err.field : "",
                   j->err.field[0] ? ": " : "", j->err.message, retried ? " (transient: the job is retried)" : "");
}

/* What determines the attempt's result, gathered before it runs and written with the slot's
 * next statement (attempt_record.h). A record that cannot be gathered is logged: the job runs
 * all the same. */
static void record_provenance(const struct job_run *j, const struct gj_job *job)
{
    struct gj_worker_pool *wp = j->s->wp;
    if (gj_attempt_record_gather(j->s->record, j->c, j->kind, job, j->device, wp->srv->worker_id) != 0)
        gj_log_warn(COMPONENT, "job %s: its provenance (attempt %d) was not recorded", j->c->id, j->c->attempts);
}

/* What the run recorded it chose (the convolution algorithms), added to the attempt's record
 * once it ran: to the record itself while it waits (a run under a second), else to the row
 * written; as above, a record that cannot be written is logged. */
static void record_chosen(const struct job_run *j)
{
    struct wp_slot *s = j->s;
    if (!s->chosen)
        return;
    struct gj_worker_pool *wp = s->wp;
    PGconn *conn = NULL;
    int added = gj_attempt_record_add(s->record, j->c, s->chosen);
    if (added < 0 || (added == 0 && (!(conn = acquire(wp)) || gj_provenance_record_chosen(conn, j->c, s->chosen) != 0)))
        gj_log_warn(COMPONENT, "job %s: what attempt %d chose was not recorded", j->c->id, j->c->attempts);
    if (conn)
        release_conn(wp, conn);
    json_decref(s->chosen);
    s->chosen = NULL;
}

static void run_claim(struct wp_slot *s, const struct gj_claim *c)
{
    double t0 = mono_now();
    struct job_run *j = calloc(1, sizeof *j);
    slot_begin(s, c);
    gj_log_info(COMPONENT, "job %s (%s) claimed, attempt %d/%d, stage %d", c->id, c->kind, c->attempts,
                c->max_attempts, c->stage);
    gj_job_log_add(s->log, GJ_JOB_LOG_INFO, "%s: attempt %d of %d, stage %d, on worker %s", c->kind, c->attempts,
                   c->max_attempts, c->stage, s->wp->srv->worker_id);
    if (!j) {
        /* not even the memory to record why: the lease expires and the job is retried */
        gj_log_error(COMPONENT, "job %s: out of memory", c->id);
        slot_end(s);
        return;
    }
    j->s = s;
    j->c = c;
    j->how = END_FAIL;
    j->device = GJ_DEVICE_CPU;
    j->kind = gj_kind_find(c->kind);
    if (!j->kind) {
        gj_error_set(&j->err, "kind", "this worker does not know kind %s", c->kind);
    } else if (prepare(j) == 0) {
        log_inputs(j, t0);
        struct gj_job job = { .kind = j->kind->name, .params = c->params, .inputs = j->in.items,
                              .n_inputs = j->in.n };
        if (place(j, &job) == 0) {
            log_placed(j, t0);
            record_provenance(j, &job);
            double t_run = mono_now();
            run_kind(j, &job);
            record_chosen(j);
            log_ran(j, t_run);
        }
    }
    log_failure(j);
    conclude(j, t0);
    free(j);
    slot_end(s);
}

/* ---- threads ---------------------------------------------------------- */

/* Waits (bounded) until the placement has a free slot; 1 when one is free. */
static int wait_free_slot(struct gj_worker_pool *wp)
{
    struct gj_placement *p = &wp->srv->placement;
    if (gj_place_free_slots(p) > 0)
        return 1;
    struct timespec ts;
    deadline_at(&ts, mono_now() + 0.2);
    pthread_mutex_lock(&p->lock);
    int rc = pthread_cond_timedwait(&p->freed, &p->lock, &ts);
    pthread_mutex_unlock(&p->lock);
    if (rc && rc != ETIMEDOUT)
        gj_log_error(COMPONENT, "pthread_cond_timedwait: %s", strerror(rc));
    return gj_place_free_slots(p) > 0;
}

/* A claim made with the last job's end that the slot will not run (shutting down): back to the
 * queue without spending an attempt, or, with no database now, to its lease's expiry. */
static void give_back_next(struct wp_slot *s)
{
    if (!s->has_next)
        return;
    PGconn *conn = gj_db_acquire(s->wp->srv->db, DB_WAIT_MS);
    if (!conn || gj_queue_release(conn, &s->next) != 0)
        gj_log_warn(COMPONENT, "job %s: not given back; its lease will expire", s->next.id);
    if (conn)
        gj_db_release(s->wp->srv->db, conn);
    gj_claim_clear(&s->next);
    s->has_next = 0;
}

static void *worker_main(void *arg)
{
    struct wp_slot *s = arg;
    struct gj_worker_pool *wp = s->wp;
    struct gj_server *srv = wp->srv;
    int poll_ms = srv->cfg.poll_interval_ms > 0 ? srv->cfg.poll_interval_ms : 1000;
    while (!is_stopping(wp)) {
        if (s->has_next) {   /* claimed with the last job's end */
            struct gj_claim next = s->next;
            s->has_next = 0;
            memset(&s->next, 0, sizeof s->next);
            gj_metrics_job_waited(next.kind, next.waited_seconds);
            run_claim(s, &next);
            gj_claim_clear(&next);
            continue;
        }
        if (!wait_free_slot(wp))
            continue;
        uint64_t seen = gj_notifier_queue_seq(srv->notifier);
        PGconn *conn = gj_db_acquire(srv->db, poll_ms);
        if (!conn) {
            gj_notifier_wait_queue(srv->notifier, seen, poll_ms);
            continue;
        }
        struct gj_claim c;
        int rc = is_stopping(wp) ? 0
                                 : gj_queue_claim_on(conn, srv->worker_id, wp->kinds,
                                                     srv->cfg.lease_seconds,
                                                     srv->placement.n_gpus == 0 ? "cpu" : NULL, &c);
        gj_db_release(srv->db, conn);
        if (rc <= 0) {
            gj_notifier_wait_queue(srv->notifier, seen, poll_ms);
            continue;
        }
        gj_metrics_job_waited(c.kind, c.waited_seconds);
        run_claim(s, &c);
        gj_claim_clear(&c);
    }
    give_back_next(s);
    return NULL;
}

static void heartbeat_all(struct gj_worker_pool *wp)
{
    struct gj_server *srv = wp->srv;
    for (int i = 0; i < wp->n_slots; i++) {
        struct wp_slot *s = &wp->slots[i];
        struct gj_claim hb;
        memset(&hb, 0, sizeof hb);
        double progress;
        char message[512];
        int has_message;
        pthread_mutex_lock(&wp->lock);
        int active = s->active && !s->finishing && s->reason != STOP_LEASE_LOST;
        if (active) {
            snprintf(hb.id, sizeof hb.id, "%s", s->job_id);
            snprintf(hb.lease_token, sizeof hb.lease_token, "%s", s->lease_token);
            progress = s->progress;
            snprintf(message, sizeof message, "%s", s->message);
            has_message = s->has_message;
        }
        pthread_mutex_unlock(&wp->lock);
        if (!active)
            continue;
        PGconn *conn = gj_db_acquire(srv->db, DB_WAIT_MS);
        if (!conn) {
            gj_log_warn(COMPONENT, "heartbeat of job %s skipped: no database connection", hb.id);
            continue;
        }
        double sent = mono_now();
        int rc = gj_queue_heartbeat(conn, &hb, srv->cfg.lease_seconds, progress,
                                    has_message ? message : NULL);
        if (rc == 0)
            flush_slot(s, conn);
        gj_db_release(srv->db, conn);
        if (rc < 0)
            continue;
        pthread_mutex_lock(&wp->lock);
        if (rc == 0 && s->active && strcmp(s->lease_token, hb.lease_token) == 0)
            s->lease_until = sent + srv->cfg.lease_seconds;
        pthread_mutex_unlock(&wp->lock);
        if (rc == 0)
            continue;
        pthread_mutex_lock(&wp->lock);
        if (s->active && strcmp(s->job_id, hb.id) == 0 && strcmp(s->lease_token, hb.lease_token) == 0) {
            set_stop_locked(s, rc == 1 ? STOP_CANCEL : STOP_LEASE_LOST);
            gj_log_info(COMPONENT, "job %s: %s", hb.id, rc == 1 ? "cancel requested" : "lease lost");
        }
        pthread_mutex_unlock(&wp->lock);
    }
}

static void on_cancel(const char *job_id, void *arg);

/* The running jobs of this process not yet asked to stop, as a uuid[] literal, or
 * NULL when there are none (or no memory). */
static char *running_ids(struct gj_worker_pool *wp)
{
    char *arr = malloc((size_t)wp->n_slots * (GJ_UUID_LEN + 1) + 3);
    if (!arr)
        return NULL;
    size_t len = 0;
    arr[len++] = '{';
    pthread_mutex_lock(&wp->lock);
    for (int i = 0; i < wp->n_slots; i++) {
        struct wp_slot *s = &wp->slots[i];
        if (!s->active || s->finishing || s->reason >= STOP_CANCEL || !s->job_id[0])
            continue;
        if (len > 1)
            arr[len++] = ',';
        memcpy(arr + len, s->job_id, GJ_UUID_LEN);
        len += GJ_UUID_LEN;
    }
    pthread_mutex_unlock(&wp->lock);
    if (len == 1) {
        free(arr);
        return NULL;
    }
    arr[len++] = '}';
    arr[len] = '\0';
    return arr;
}

/* A cancel normally arrives at once by NOTIFY; one sent while the LISTEN connection
 * was being re-opened is missed. So once a second the running jobs are looked up
 * too (a read, one query for all of them), and a cancel reaches its job within
 * that second either way. */
static void poll_cancels(struct gj_worker_pool *wp)
{
    char *ids = running_ids(wp);
    if (!ids)
        return;
    PGconn *conn = gj_db_acquire(wp->srv->db, 200);
    PGresult *r = NULL;
    if (conn) {
        const char *params[] = { ids };
        r = gj_db_exec(conn, "SELECT id FROM jobs WHERE id = ANY($1::uuid[]) AND cancel_requested"
                             " AND state = 'running'", 1, params, NULL);
        gj_db_release(wp->srv->db, conn);
    }
    for (int i = 0; r && i < PQntuples(r); i++)
        on_cancel(PQgetvalue(r, i, 0), wp);
    PQclear(r);
    free(ids);
}

static void maintenance(struct gj_worker_pool *wp)
{
    struct gj_server *srv = wp->srv;
    PGconn *conn = gj_db_acquire(srv->db, DB_WAIT_MS);
    if (!conn)
        return;
    if (gj_queue_rescue_expired(conn, srv->cfg.retry_backoff_ms) < 0)
        gj_log_warn(COMPONENT, "rescue of expired leases failed");
    if (gj_queue_worker_heartbeat(conn, srv->worker_id) != 0)
        gj_log_warn(COMPONENT, "workers row heartbeat failed");
    gj_db_release(srv->db, conn);
}

/* Between heartbeats, the running jobs' log lines and attempt records go out once a second. */
static void flush_logs(struct gj_worker_pool *wp)
{
    PGconn *conn = NULL;
    for (int i = 0; i < wp->n_slots; i++) {
        struct wp_slot *s = &wp->slots[i];
        pthread_mutex_lock(&wp->lock);
        int active = s->active && !s->finishing;
        pthread_mutex_unlock(&wp->lock);
        if (!active || !(gj_job_log_pending(s->log) || gj_attempt_record_pending(s->record)))
            continue;
        if (!conn && !(conn = gj_db_acquire(wp->srv->db, DB_WAIT_MS)))
            return;
        flush_slot(s, conn);
    }
    if (conn)
        gj_db_release(wp->srv->db, conn);
}

/* Asks each run past its deadline to stop (timeout_seconds; within CANCEL_POLL_S of it). */
static void stop_overdue_runs(struct gj_worker_pool *wp)
{
    double now = mono_now();
    pthread_mutex_lock(&wp->lock);
    for (int i = 0; i < wp->n_slots; i++) {
        struct wp_slot *s = &wp->slots[i];
        if (s->active && s->started_run && !s->finishing && s->run_deadline > 0 && now >= s->run_deadline &&
            s->reason < STOP_TIMEOUT) {
            set_stop_locked(s, STOP_TIMEOUT);
            gj_log_info(COMPONENT, "job %s: timed out", s->job_id);
        }
    }
    pthread_mutex_unlock(&wp->lock);
}

static double earliest(double a, double b)
{
    return a < b ? a : b;
}

static void *maint_main(void *arg)
{
    struct gj_worker_pool *wp = arg;
    double hb_period = wp->srv->cfg.lease_seconds / 3.0;
    if (hb_period < 0.5)
        hb_period = 0.5;
    double next_hb = mono_now() + hb_period, next_maint = mono_now();
    double next_cancel = mono_now() + CANCEL_POLL_S, next_log = mono_now() + LOG_FLUSH_PERIOD_S;
    pthread_mutex_lock(&wp->lock);
    while (!wp->maint_stop) {
        double now = mono_now();
        if (now >= next_hb || now >= next_maint || now >= next_cancel || now >= next_log) {
            pthread_mutex_unlock(&wp->lock);
            if (now >= next_hb) {
                heartbeat_all(wp);
                next_hb = mono_now() + hb_period;
            }
            if (now >= next_maint) {
                maintenance(wp);
                next_maint = mono_now() + MAINT_PERIOD_S;
            }
            if (now >= next_cancel) {
                poll_cancels(wp);
                stop_overdue_runs(wp);
                next_cancel = mono_now() + CANCEL_POLL_S;
            }
            if (now >= next_log) {
                flush_logs(wp);
                next_log = mono_now() + LOG_FLUSH_PERIOD_S;
            }
            pthread_mutex_lock(&wp->lock);
            continue;
        }
        struct timespec ts;
        deadline_at(&ts, earliest(earliest(next_hb, next_maint), earliest(next_cancel, next_log)));
        int rc = pthread_cond_timedwait(&wp->cond, &wp->lock, &ts);
        if (rc && rc != ETIMEDOUT)
            gj_log_error(COMPONENT, "pthread_cond_timedwait: %s", strerror(rc));
    }
    pthread_mutex_unlock(&wp->lock);
    return NULL;
}

static void on_cancel(const char *job_id, void *arg)
{
    struct gj_worker_pool *wp = arg;
    pthread_mutex_lock(&wp->lock);
    for (int i = 0; i < wp->n_slots; i++) {
        struct wp_slot *s = &wp->slots[i];
        if (s->active && strcmp(s->job_id, job_id) == 0) {
            set_stop_locked(s, STOP_CANCEL);
            gj_log_info(COMPONENT, "job %s: cancel requested", job_id);
        }
    }
    pthread_mutex_unlock(&wp->lock);
}

/* A process that died mid-job leaves WORK_DIR/scratch/<job>/ behind. At start,
 * remove every scratch directory whose job is not running now (finished,
 * requeued, deleted); a running one may belong to another live process that
 * shares this work directory. */
static void sweep_stale_scratch(struct gj_worker_pool *wp)
{
    DIR *dir = opendir(wp->scratch_root);
    if (!dir)
        return;
    PGconn *conn = gj_db_acquire(wp->srv->db, 5000);
    if (!conn) {
        closedir(dir);
        return;
    }
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        int pid = 0;
        if (sscanf(e->d_name, ".slot-%d-", &pid) == 1 && pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
            char spare[2048];
            if (snprintf(spare, sizeof spare, "%s/%s", wp->scratch_root, e->d_name) < (int)sizeof spare)
                gj_rm_rf(spare);
            continue;
        }
        if (e->d_name[0] == '.' || strlen(e->d_name) != GJ_UUID_LEN)
            continue;
        const char *params[1] = { e->d_name };
        PGresult *res = gj_db_exec(conn,
            "SELECT 1 FROM jobs WHERE id = $1::uuid AND state = 'running'", 1, params, NULL);
        if (!res)
            break;                       /* the database is unwell: keep everything */
        int running = PQntuples(res) > 0;
        PQclear(res);
        char path[2048];
        if (!running && snprintf(path, sizeof path, "%s/%s", wp->scratch_root, e->d_name) <
                            (int)sizeof path && gj_rm_rf(path) == 0)
            removed++;
    }
    gj_db_release(wp->srv->db, conn);
    closedir(dir);
    if (removed)
        gj_log_info(COMPONENT, "removed %d stale scratch director%s of earlier runs", removed,
                    removed == 1 ? "y" : "ies");
}

static void register_worker(struct gj_worker_pool *wp)
{
    struct gj_server *srv = wp->srv;
    struct gj_placement snap;
    gj_place_snapshot(&srv->placement, &snap);
    json_t *devices = json_array();
    for (int i = 0; devices && i < snap.n_gpus; i++) {
        char name[32];
        snprintf(name, sizeof name, "gpu:%d", snap.gpus[i].index);
        json_array_append_new(devices, json_pack("{s:s, s:I, s:i}", "device", name, "total_bytes",
                                                 (json_int_t)snap.gpus[i].total_bytes, "slots",
                                                 snap.gpus[i].slots));
    }
    if (devices && snap.cpu_slots > 0)
        json_array_append_new(devices, json_pack("{s:s, s:i}", "device", "cpu", "slots", snap.cpu_slots));
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "unknown");
    PGconn *conn = gj_db_acquire(srv->db, DB_WAIT_MS);
    if (!conn || gj_queue_worker_register(conn, srv->worker_id, host, (int)getpid(), devices) != 0 ||
        gj_host_memory_advertise(conn, srv->worker_id, snap.host_bytes) != 0)
        gj_log_warn(COMPONENT, "cannot register this worker in the workers table");
    if (conn)
        gj_db_release(srv->db, conn);
    json_decref(devices);
}

static void pool_free(struct gj_worker_pool *wp)
{
    for (int i = 0; wp->slots && i < wp->n_slots; i++) {
        if (wp->slots[i].spare[0])
            gj_rm_rf(wp->slots[i].spare);
        gj_job_log_free(wp->slots[i].log);
        gj_attempt_record_free(wp->slots[i].record);
    }
    free(wp->kinds);
    free(wp->slots);
    pthread_cond_destroy(&wp->cond);
    pthread_mutex_destroy(&wp->lock);
    free(wp);
}

static void wake_all(struct gj_worker_pool *wp)
{
    struct gj_placement *p = &wp->srv->placement;
    gj_notifier_kick(wp->srv->notifier);
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->freed);
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_lock(&wp->lock);
    pthread_cond_broadcast(&wp->cond);
    pthread_mutex_unlock(&wp->lock);
}

static void join_all(struct gj_worker_pool *wp)
{
    for (int i = 0; i < wp->n_slots; i++) {
        if (!wp->slots[i].started)
            continue;
        int rc = pthread_join(wp->slots[i].thread, NULL);
        if (rc)
            gj_log_error(COMPONENT, "pthread_join: %s", strerror(rc));
        wp->slots[i].started = 0;
    }
    if (wp->maint_started) {
        pthread_mutex_lock(&wp->lock);
        wp->maint_stop = 1;
        pthread_cond_broadcast(&wp->cond);
        pthread_mutex_unlock(&wp->lock);
        int rc = pthread_join(wp->maint, NULL);
        if (rc)
            gj_log_error(COMPONENT, "pthread_join: %s", strerror(rc));
        wp->maint_started = 0;
    }
}

struct gj_worker_pool *gj_worker_pool_start(struct gj_server *srv)
{
    struct gj_worker_pool *wp = calloc(1, sizeof *wp);
    if (!wp) {
        gj_log_error(COMPONENT, "out of memory");
        return NULL;
    }
    wp->srv = srv;
    atomic_init(&wp->stopping, 0);
    int rc = pthread_mutex_init(&wp->lock, NULL);
    if (rc) {
        gj_log_error(COMPONENT, "pthread_mutex_init: %s", strerror(rc));
        free(wp);
        return NULL;
    }
    pthread_condattr_t attr;
    rc = pthread_condattr_init(&attr);
    if (rc == 0) {
        rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        if (rc == 0)
            rc = pthread_cond_init(&wp->cond, &attr);
        pthread_condattr_destroy(&attr);
    }
    if (rc) {
        gj_log_error(COMPONENT, "pthread_cond_init: %s", strerror(rc));
        pthread_mutex_destroy(&wp->lock);
        free(wp);
        return NULL;
    }

    size_t nk = gj_kind_count();
    wp->kinds = calloc(nk + 1, sizeof *wp->kinds);
    struct gj_placement snap;
    gj_place_snapshot(&srv->placement, &snap);
    int n = snap.cpu_slots;
    for (int i = 0; i < snap.n_gpus; i++)
        n += snap.gpus[i].slots;
    wp->n_slots = n;
    wp->slots = calloc(n > 0 ? (size_t)n : 1, sizeof *wp->slots);
    if (!wp->kinds || !wp->slots) {
        gj_log_error(COMPONENT, "out of memory");
        pool_free(wp);
        return NULL;
    }
    for (size_t i = 0; i < nk; i++)
        wp->kinds[i] = gj_kind_at(i)->name;
    for (int i = 0; i < n; i++)
        if (!(wp->slots[i].log = gj_job_log_new()) || !(wp->slots[i].record = gj_attempt_record_new())) {
            gj_log_error(COMPONENT, "out of memory");
            pool_free(wp);
            return NULL;
        }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1)
        cores = 1;
    wp->cpu_threads = snap.cpu_slots > 0 ? (int)(cores / snap.cpu_slots) : (int)cores;
    if (wp->cpu_threads < 1)
        wp->cpu_threads = 1;
    const char *work = srv->cfg.work_dir[0] ? srv->cfg.work_dir : NULL;
    int w = work ? snprintf(wp->scratch_root, sizeof wp->scratch_root, "%s/scratch", work)
                 : snprintf(wp->scratch_root, sizeof wp->scratch_root, "%s/work/scratch",
                            srv->cfg.data_dir[0] ? srv->cfg.data_dir : ".");
    if (w < 0 || w >= (int)sizeof wp->scratch_root || gj_mkdir_p(wp->scratch_root, 0700) != 0) {
        gj_log_error(COMPONENT, "cannot create the scratch directory %s: %s", wp->scratch_root,
                     strerror(errno));
        pool_free(wp);
        return NULL;
    }
    if (n == 0)
        gj_log_warn(COMPONENT, "no job slots configured (no GPU slots and no CPU workers)");

    sweep_stale_scratch(wp);
    register_worker(wp);
    gj_notifier_on_cancel(srv->notifier, on_cancel, wp);

    rc = pthread_create(&wp->maint, NULL, maint_main, wp);
    if (rc) {
        gj_log_error(COMPONENT, "pthread_create: %s", strerror(rc));
        gj_notifier_on_cancel(srv->notifier, NULL, NULL);
        pool_free(wp);
        return NULL;
    }
    wp->maint_started = 1;
    for (int i = 0; i < n; i++) {
        wp->slots[i].wp = wp;
        wp->slots[i].index = i;
        rc = pthread_create(&wp->slots[i].thread, NULL, worker_main, &wp->slots[i]);
        if (rc) {
            gj_log_error(COMPONENT, "pthread_create: %s", strerror(rc));
            atomic_store(&wp->stopping, 1);
            wake_all(wp);
            join_all(wp);
            gj_notifier_on_cancel(srv->notifier, NULL, NULL);
            pool_free(wp);
            return NULL;
        }
        wp->slots[i].started = 1;
    }
    gj_log_info(COMPONENT, "%d worker slots (%d GPU(s), %d CPU slot(s)), placement %s", n, snap.n_gpus,
                snap.cpu_slots, gj_placement_name(snap.policy));
    return wp;
}

/* Waits until no job runs or the monotonic time until; 1 when none runs. Called
 * with wp->lock held. */
static int wait_idle_locked(struct gj_worker_pool *wp, double until)
{
    while (wp->running > 0 && mono_now() < until) {
        struct timespec ts;
        deadline_at(&ts, until);
        int rc = pthread_cond_timedwait(&wp->cond, &wp->lock, &ts);
        if (rc && rc != ETIMEDOUT) {
            gj_log_error(COMPONENT, "pthread_cond_timedwait: %s", strerror(rc));
            break;
        }
    }
    return wp->running == 0;
}

/* A job that did not stop when asked (stuck in a call it cannot leave) is given
 * back to the queue from here, so that shutdown keeps its bound; its thread's own
 * finish is then refused (the lease token changed) or skipped. Called with
 * wp->lock held; returns how many were given back. */
static int release_stuck_locked(struct gj_worker_pool *wp)
{
    int n = 0;
    for (int i = 0; i < wp->n_slots; i++) {
        struct wp_slot *s = &wp->slots[i];
        if (!s->active || s->finishing || s->reason == STOP_LEASE_LOST)
            continue;
        struct gj_claim c;
        memset(&c, 0, sizeof c);
        snprintf(c.id, sizeof c.id, "%s", s->job_id);
        snprintf(c.lease_token, sizeof c.lease_token, "%s", s->lease_token);
        set_stop_locked(s, STOP_LEASE_LOST);   /* its thread records nothing more */
        pthread_mutex_unlock(&wp->lock);
        PGconn *conn = gj_db_acquire(wp->srv->db, 300);
        int rc = conn ? gj_queue_release(conn, &c) : -1;
        if (conn)
            gj_db_release(wp->srv->db, conn);
        gj_log_error(COMPONENT, "job %s did not stop when asked; %s", c.id,
                     rc == 0 ? "given back to the queue" : "its lease will expire");
        n++;
        pthread_mutex_lock(&wp->lock);
    }
    return n;
}

/* Running jobs get the grace period; then they are asked to stop and get STOP_WAIT_S
 * more (every kind checks cancellation several times a second). The rest of the
 * second past the grace is for giving back a stuck job and stopping an embedded
 * PostgreSQL (about 0.3 s). */
#define STOP_WAIT_S 0.5

int gj_worker_pool_stop(struct gj_worker_pool *wp, int grace_seconds)
{
    if (!wp)
        return 0;
    struct gj_server *srv = wp->srv;
    atomic_store(&wp->stopping, 1);
    /* Jobs claimed but not started yet (materializing, waiting for a device) go
     * back to the queue now; running ones get the grace period. */
    double deadline = mono_now() + (grace_seconds > 0 ? grace_seconds : 0);
    pthread_mutex_lock(&wp->lock);
    wp->stop_deadline = deadline + STOP_WAIT_S;
    for (int i = 0; i < wp->n_slots; i++)
        if (wp->slots[i].active && !wp->slots[i].started_run)
            set_stop_locked(&wp->slots[i], STOP_SHUTDOWN);
    pthread_mutex_unlock(&wp->lock);
    wake_all(wp);

    pthread_mutex_lock(&wp->lock);
    if (!wait_idle_locked(wp, deadline)) {
        gj_log_info(COMPONENT, "%d job(s) still running after %d s; asking them to stop", wp->running,
                    grace_seconds);
        for (int i = 0; i < wp->n_slots; i++)
            if (wp->slots[i].active)
                set_stop_locked(&wp->slots[i], STOP_SHUTDOWN);
    }
    pthread_mutex_unlock(&wp->lock);
    wake_all(wp);
    pthread_mutex_lock(&wp->lock);
    int stuck = wait_idle_locked(wp, wp->stop_deadline) ? 0 : release_stuck_locked(wp);
    pthread_mutex_unlock(&wp->lock);
    if (stuck) {
        /* Their threads still run: nothing they use may be freed; the caller exits. */
        gj_notifier_on_cancel(srv->notifier, NULL, NULL);
        return 1;
    }

    join_all(wp);
    gj_notifier_on_cancel(srv->notifier, NULL, NULL);

    PGconn *conn = gj_db_acquire(srv->db, DB_WAIT_MS);
    if (!conn || gj_queue_worker_unregister(conn, srv->worker_id) != 0)
        gj_log_warn(COMPONENT, "cannot remove this worker from the workers table");
    if (conn)
        gj_db_release(srv->db, conn);
    pool_free(wp);
    gj_log_info(COMPONENT, "worker pool stopped");
    return 0;
}

int gj_worker_pool_running(struct gj_worker_pool *wp)
{
    if (!wp)
        return 0;
    pthread_mutex_lock(&wp->lock);
    int n = wp->running;
    pthread_mutex_unlock(&wp->lock);
    return n;
}
