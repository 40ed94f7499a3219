/*
 * queue.c — the job queue in PostgreSQL (ARCHITECTURE.md: a job's life). Every statement that acts
 * for a claimed job is fenced by its lease token, state 'running' and the lease not
 * yet expired: a worker that lost its lease changes nothing. History rows and NOTIFYs come from the
 * triggers of migrations/0001_init.sql.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "service/db/db.h"
#include "service/base/log.h"
#include "service/jobs/job_log.h"
#include "service/jobs/provenance_store.h"
#include "service/jobs/queue.h"
#include "service/db/storage_quota.h"

#define COMPONENT "queue"
/* A lease is good until it expires, whoever has yet to notice: after that only rescue
 * acts on the job (a worker cut off from the database past its lease changes
 * nothing when it comes back, even before a rescue ran). */
#define LEASE_VALID " AND lease_expires_at > now()"
#define RETRY_CAP_MS 300000
#define MAX_OUTPUTS 10000

void gj_claim_clear(struct gj_claim *c)
{
    if (!c)
        return;
    json_decref(c->params);
    memset(c, 0, sizeof *c);
}

static void copy_field(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

/* A PostgreSQL text[] literal of kinds: {"a","b"}. Caller frees. */
static char *kinds_literal(const char *const *kinds)
{
    size_t cap = 3;
    for (size_t i = 0; kinds && kinds[i]; i++)
        cap += 2 * strlen(kinds[i]) + 3;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    char *p = out;
    *p++ = '{';
    for (size_t i = 0; kinds && kinds[i]; i++) {
        if (i)
            *p++ = ',';
        *p++ = '"';
        for (const char *s = kinds[i]; *s; s++) {
            if (*s == '"' || *s == '\\')
                *p++ = '\\';
            *p++ = *s;
        }
        *p++ = '"';
    }
    *p++ = '}';
    *p = '\0';
    return out;
}

/* The job: the first queued one in claim order that no one else holds (gj_next_queued, migration
 * 0023, locks it). q.queued_since: updated_at before the claim, when the job last became queued (created,
 * retried, its upstream settled, its children done); it could run from then or run_after.
 * The parameters' places are given: a claim is a statement of its own, or a part of a
 * finish (finish_claim_sql). Its columns are read by claim_from_row. */
#define CLAIM_SQL(KINDS, OWNER, LEASE, DEVICE)                                                          \
    "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_owner = " OWNER ","            \
    " lease_token = nextval('job_lease_token_seq'),"                                                    \
    " lease_expires_at = now() + " LEASE "::int * interval '1 second',"                                 \
    " started_at = coalesce(started_at, now()), updated_at = now(), device = " DEVICE                  \
    " FROM (SELECT id, updated_at AS queued_since FROM jobs"                                            \
    "   WHERE id = (SELECT gj_next_queued(" KINDS "::text[]))) q"                                       \
    " WHERE jobs.id = q.id AND jobs.state = 'queued'"                                                  \
    " RETURNING jobs.id, tenant_id, kind, params, lease_token, attempts, max_attempts, stage,"          \
    " coalesce(parent_id::text, '') AS parent, coalesce(child_index, 0) AS child,"                     \
    " EXISTS (SELECT 1 FROM job_inputs i WHERE i.job_id = jobs.id) AS has_inputs, timeout_seconds,"     \
    " extract(epoch FROM now() - greatest(q.queued_since, run_after)) AS waited"
#define CLAIM_COLUMNS 13

static const char claim_sql[] = CLAIM_SQL("$1", "$2", "$3", "$4");

/* The claim in r's columns col .. col + CLAIM_COLUMNS - 1 of row 0 into c: 1, or -1 (out of
 * memory: the job was given back). */
static int claim_from_row(PGconn *conn, PGresult *r, int col, struct gj_claim *c)
{
    copy_field(c->id, sizeof c->id, PQgetvalue(r, 0, col + 0));
    copy_field(c->tenant_id, sizeof c->tenant_id, PQgetvalue(r, 0, col + 1));
    copy_field(c->kind, sizeof c->kind, PQgetvalue(r, 0, col + 2));
    json_error_t jerr;
    c->params = json_loads(PQgetvalue(r, 0, col + 3), 0, &jerr);
    if (!c->params) {
        gj_log_warn(COMPONENT, "job %s: params do not parse (%s); using {}", c->id, jerr.text);
        c->params = json_object();
    }
    copy_field(c->lease_token, sizeof c->lease_token, PQgetvalue(r, 0, col + 4));
    c->attempts = atoi(PQgetvalue(r, 0, col + 5));
    c->max_attempts = atoi(PQgetvalue(r, 0, col + 6));
    c->stage = atoi(PQgetvalue(r, 0, col + 7));
    copy_field(c->parent_id, sizeof c->parent_id, PQgetvalue(r, 0, col + 8));
    c->child_index = atoi(PQgetvalue(r, 0, col + 9));
    c->has_inputs = PQgetvalue(r, 0, col + 10)[0] == 't';
    c->timeout_seconds = atoi(PQgetvalue(r, 0, col + 11));
    c->waited_seconds = strtod(PQgetvalue(r, 0, col + 12), NULL);
    if (!c->params) {
        gj_log_error(COMPONENT, "claim: out of memory");
        /* Give it back: it was claimed but cannot be described. */
        gj_queue_release(conn, c);
        gj_claim_clear(c);
        return -1;
    }
    return 1;
}

int gj_queue_claim(PGconn *conn, const char *worker_id, const char *const *kinds,
                   int lease_seconds, struct gj_claim *c)
{
    return gj_queue_claim_on(conn, worker_id, kinds, lease_seconds, NULL, c);
}

int gj_queue_claim_on(PGconn *conn, const char *worker_id, const char *const *kinds,
                      int lease_seconds, const char *device, struct gj_claim *c)
{
    memset(c, 0, sizeof *c);
    if (!kinds || !kinds[0])
        return 0;
    char *arr = kinds_literal(kinds);
    if (!arr) {
        gj_log_error(COMPONENT, "claim: out of memory");
        return -1;
    }
    char lease[16];
    snprintf(lease, sizeof lease, "%d", lease_seconds > 0 ? lease_seconds : 1);
    const char *params[] = { arr, worker_id, lease, device };
    PGresult *r = gj_db_exec_prepared(conn, "gj_queue_claim", claim_sql, 4, params, NULL);
    free(arr);
    if (!r)
        return -1;
    int rc = PQntuples(r) == 0 ? 0 : claim_from_row(conn, r, 0, c);
    PQclear(r);
    return rc;
}

/* Runs a fenced statement (prepared under name, when not NULL: one run for every job);
 * returns the number of rows affected/returned, or -1. */
static int fenced_named(PGconn *conn, const char *name, const char *sql, int n, const char *const *params,
                        PGresult **out)
{
    PGresult *r = gj_db_exec_prepared(conn, name, sql, n, params, NULL);
    if (!r)
        return -1;
    int rows = PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : atoi(PQcmdTuples(r));
    if (out)
        *out = r;
    else
        PQclear(r);
    return rows;
}

static int fenced(PGconn *conn, const char *sql, int n, const char *const *params, PGresult **out)
{
    return fenced_named(conn, NULL, sql, n, params, out);
}

int gj_queue_set_device(PGconn *conn, const struct gj_claim *c, const char *device)
{
    const char *params[] = { c->id, c->lease_token, device };
    int rows = fenced(conn,
                      "UPDATE jobs SET device = $3, updated_at = now()"
                      " WHERE id = $1 AND lease_token = $2::bigint AND state = 'running'" LEASE_VALID,
                      3, params, NULL);
    return rows < 0 ? -1 : rows == 0 ? 1 : 0;
}

int gj_queue_heartbeat(PGconn *conn, const struct gj_claim *c, int lease_seconds,
                       double progress, const char *message)
{
    char lease[16], prog[32];
    snprintf(lease, sizeof lease, "%d", lease_seconds > 0 ? lease_seconds : 1);
    const char *progress_param = NULL;
    if (progress >= 0) {
        snprintf(prog, sizeof prog, "%.6f", progress > 1 ? 1.0 : progress);
        progress_param = prog;
    }
    const char *params[] = { c->id, c->lease_token, lease, progress_param, message };
    PGresult *r = NULL;
    int rows = fenced_named(conn, "gj_queue_heartbeat",
                      "UPDATE jobs SET lease_expires_at = now() + $3::int * interval '1 second',"
                      " progress = coalesce($4::real, progress), message = coalesce($5, message),"
                      " updated_at = now()"
                      " WHERE id = $1 AND lease_token = $2::bigint AND state = 'running'" LEASE_VALID
                      " RETURNING cancel_requested",
                      5, params, &r);
    if (rows < 0)
        return -1;
    int rc = rows == 0 ? 2 : (strcmp(PQgetvalue(r, 0, 0), "t") == 0 ? 1 : 0);
    PQclear(r);
    return rc;
}

/* The content type of an output, by its extension. */
static const char *content_type_of(const char *name)
{
    static const struct { const char *ext, *type; } types[] = {
        { ".json", "application/json" },  { ".png", "image/png" },
        { ".nrrd", "application/octet-stream" }, { ".csv", "text/csv" },
        { ".svg", "image/svg+xml" },      { ".xml", "application/xml" },
        { ".txt", "text/plain; charset=utf-8" }, { ".log", "text/plain; charset=utf-8" },
        { ".jpg", "image/jpeg" },         { ".jpeg", "image/jpeg" },
        { ".tif", "image/tiff" },         { ".tiff", "image/tiff" },
        { ".dcm", "application/dicom" },  { ".html", "text/html; charset=utf-8" },
        { ".raw", "application/octet-stream" }, { ".bin", "application/octet-stream" },
        { ".f32", "application/octet-stream" },
    };
    const char *dot = strrchr(name, '.');
    if (dot)
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (strcasecmp(dot, types[i].ext) == 0)
                return types[i].type;
    return "application/octet-stream";
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The names in dir, sorted (so outputs are stored in a stable order). */
static int list_dir(const char *dir, char ***names_out, size_t *n_out)
{
    *names_out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (n >= MAX_OUTPUTS) {
            errno = E2BIG;
            rc = -1;
            break;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **grown = realloc(names, ncap * sizeof *grown);
            if (!grown) {
                rc = -1;
                break;
            }
            names = grown;
            cap = ncap;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = -1;
            break;
        }
        n++;
        errno = 0;
    }
    if (rc == 0 && errno)
        rc = -1;
    int saved = errno;
    closedir(d);
    if (rc) {
        free_names(names, n);
        errno = saved;
        return -1;
    }
    if (n)
        qsort(names, n, sizeof *names, name_cmp);
    *names_out = names;
    *n_out = n;
    return 0;
}

/* An output written into its large object, its row not yet inserted. */
struct written_output {
    struct gj_blob_writer *w;
    const char *name;   /* borrowed from the caller's names */
};

/* Streams one file into a large object (written, not yet a blob). Runs inside the caller's
 * transaction. The writer, or NULL (logged). */
static struct gj_blob_writer *write_output(PGconn *conn, const struct gj_claim *c, const char *path,
                                           const char *name)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        gj_log_error(COMPONENT, "job %s: output %s: %s", c->id, name, strerror(errno));
        return NULL;
    }
    struct gj_blob_writer *w = gj_blob_writer_open(conn, c->tenant_id, content_type_of(name), 0);
    if (!w) {
        close(fd);
        gj_log_error(COMPONENT, "job %s: cannot start blob for output %s", c->id, name);
        return NULL;
    }
    int rc = gj_blob_writer_write_fd(w, fd);
    if (rc > 0)
        gj_log_error(COMPONENT, "job %s: reading output %s: %s", c->id, name, strerror(rc));
    close(fd);
    if (rc || gj_blob_writer_close(w) != 0) {
        gj_blob_writer_abort(w);
        return NULL;
    }
    return w;
}

/* The written output as a blob owned by the job, and its job_outputs row. Takes o->w.
 * 0, -1 or GJ_BLOB_OVER_QUOTA. */
static int record_output(PGconn *conn, const struct gj_claim *c, struct written_output *o)
{
    char blob_id[GJ_UUID_LEN + 1];
    int rc = gj_blob_writer_commit(o->w, c->id, blob_id);
    o->w = NULL;
    if (rc != 0)
        return rc;   /* GJ_BLOB_OVER_QUOTA: the caller fails the job */
    const char *params[] = { c->id, o->name, blob_id, content_type_of(o->name) };
    return gj_db_cmd(conn,
                     "INSERT INTO job_outputs (job_id, name, blob_id, content_type)"
                     " VALUES ($1, $2, $3, $4)",
                     4, params);
}

/* Every regular file of output_dir among names, inside the caller's transaction: all
 * written first, then all recorded, so the tenant's quota lock is taken only at the end
 * (not held while large outputs stream in). 0, -1 or GJ_BLOB_OVER_QUOTA. */
static int store_outputs(PGconn *conn, const struct gj_claim *c, const char *output_dir, char **names, size_t n,
                         int hook_ran)
{
    struct written_output *out = n ? calloc(n, sizeof *out) : NULL;
    if (n && !out)
        return -1;
    size_t k = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[4096];
        struct stat st;
        if (gj_path_join(path, sizeof path, output_dir, names[i]) != 0) {
            rc = -1;
            break;
        }
        if (lstat(path, &st) != 0) {
            if (errno == ENOENT && hook_ran)
                continue;   /* the module's hook removed it (module.h): not an output */
            gj_log_error(COMPONENT, "job %s: output %s: %s", c->id, names[i], strerror(errno));
            rc = -1;
            break;
        }
        if (!S_ISREG(st.st_mode))
            continue;   /* only regular files are outputs (no links, no directories) */
        out[k].name = names[i];
        if (!(out[k].w = write_output(conn, c, path, names[i])))
            rc = -1;
        else
            k++;
    }
    for (size_t i = 0; i < k && rc == 0; i++)
        rc = record_output(conn, c, &out[i]);
    for (size_t i = 0; i < k; i++)
        if (out[i].w)
            gj_blob_writer_abort(out[i].w);
    free(out);
    return rc;
}

/* The bytes of the regular files among dir's names. */
static uint64_t outputs_size(const char *dir, char **names, size_t n)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        if (gj_path_join(path, sizeof path, dir, names[i]) == 0 && lstat(path, &st) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_size;
    }
    return total;
}

/* Outputs that would pass the tenant's storage quota fail the job (not retried: the
 * same outputs would pass it again), naming the quota and the figures. 2, or -1. */
static int fail_over_quota(PGconn *conn, const struct gj_claim *c)
{
    char text[300];
    gj_storage_refusal_text(gj_storage_last_refusal(), text, sizeof text);
    char msg[400];
    snprintf(msg, sizeof msg, "the job's outputs were not stored: %s", text);
    json_t *err = json_pack("{s:s}", "message", msg);
    if (!err)
        return -1;
    int rc = gj_queue_finish_failure(conn, c, err, 0, 0);
    json_decref(err);
    return rc == 0 ? 2 : rc;
}

#define SUCCESS_SQL                                                                                  \
    "UPDATE jobs SET state = 'succeeded', finished_at = now(), updated_at = now(), progress = 1,"      \
    " error = NULL, lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL"                   \
    " WHERE id = $1 AND lease_token = $2::bigint AND state = 'running'" LEASE_VALID " RETURNING id"
static const char success_sql[] = SUCCESS_SQL;

/* A success with nothing to store, its riders (the job's last log lines, $3-$6,
 * gj_job_log_append's; its attempt's record, $11-$16, gj_attempt_record's; NULL first: none)
 * and the slot's next claim ($7-$10, CLAIM_SQL's; $7 NULL: none), in one statement: one round
 * trip and one commit where there were four of each. The claim cannot take the finished job (it
 * is not queued in the statement's snapshot). One row: riders written, jobs finished (0: the
 * lease was lost), then the claim's columns (NULL: none). */
static const char finish_claim_sql[] =
    "WITH log AS (SELECT gj_job_log_append($3::uuid, $4::int, $5::jsonb, $6::bigint) WHERE $3::uuid IS NOT NULL),"
    " rec AS (SELECT " GJ_ATTEMPT_RECORD_CALL("$11", "$12", "$13", "$14", "$15", "$16")
    "   WHERE $11::uuid IS NOT NULL),"
    " fin AS (" SUCCESS_SQL "),"
    " next AS (" CLAIM_SQL("$7", "$8", "$9", "$10") ")"
    " SELECT (SELECT count(*) FROM log) + (SELECT count(*) FROM rec), (SELECT count(*) FROM fin), next.*"
    " FROM (SELECT 1) one LEFT JOIN next ON true";
#define FINISH_CLAIM_PARAMS 16

static int finish_and_claim(PGconn *conn, const struct gj_claim *c, struct gj_finish_riders *riders,
                            const struct gj_claim_ask *ask, struct gj_claim *next, int *claimed)
{
    char *kinds = NULL, lease[16] = "1";
    if (ask && next && claimed) {
        if (!(kinds = kinds_literal(ask->kinds))) {
            gj_log_error(COMPONENT, "claim: out of memory");
            return -1;
        }
        snprintf(lease, sizeof lease, "%d", ask->lease_seconds > 0 ? ask->lease_seconds : 1);
    }
    const char *const *log = riders->log, *const *rec = riders->record;
    const char *p[FINISH_CLAIM_PARAMS] = { c->id, c->lease_token, log ? log[0] : NULL, log ? log[1] : NULL,
                                           log ? log[2] : NULL, log ? log[3] : NULL, kinds,
                                           kinds ? ask->worker_id : NULL, lease, kinds ? ask->device : NULL };
    for (int i = 0; rec && i < GJ_ATTEMPT_RECORD_PARAMS; i++)
        p[10 + i] = rec[i];
    PGresult *r = gj_db_exec_prepared(conn, "gj_queue_finish_claim", finish_claim_sql, FINISH_CLAIM_PARAMS, p, NULL);
    free(kinds);
    if (!r)
        return -1;
    riders->written = 1;
    int rows = atoi(PQgetvalue(r, 0, 1));
    if (!PQgetisnull(r, 0, 2) && claim_from_row(conn, r, 2, next) == 1)
        *claimed = 1;
    PQclear(r);
    if (rows == 0)
        gj_log_warn(COMPONENT, "job %s: lease %s lost; result refused", c->id, c->lease_token);
    return rows > 0 ? 0 : 1;
}

/* The riders in statements of their own, before a success that stores outputs: the log is whole
 * and the attempt recorded before the job is seen to end, and both outlive a rollback there.
 * Both are sent again when either fails: the record replaces itself, where lines sent twice
 * would be kept twice, so the record goes first and the lines only once it is written. */
static void write_riders(PGconn *conn, struct gj_finish_riders *riders)
{
    PGresult *lr = NULL, *rr = NULL;
    if (riders->record)
        rr = gj_db_exec_prepared(conn, GJ_ATTEMPT_RECORD_NAME, GJ_ATTEMPT_RECORD_SQL, GJ_ATTEMPT_RECORD_PARAMS,
                                 riders->record, NULL);
    if (riders->log && (!riders->record || rr))
        lr = gj_db_exec_prepared(conn, GJ_JOB_LOG_APPEND_NAME, GJ_JOB_LOG_APPEND_SQL, 4, riders->log, NULL);
    riders->written = (!riders->log || lr) && (!riders->record || rr);
    PQclear(lr);
    PQclear(rr);
}

int gj_queue_finish_success(PGconn *conn, const struct gj_claim *c, const char *output_dir,
                            gj_job_succeeded_fn on_success)
{
    return gj_queue_finish_success_next(conn, c, output_dir, on_success, NULL, NULL, NULL, NULL);
}

int gj_queue_finish_success_next(PGconn *conn, const struct gj_claim *c, const char *output_dir,
                                 gj_job_succeeded_fn on_success, struct gj_finish_riders *riders,
                                 const struct gj_claim_ask *ask, struct gj_claim *next, int *claimed)
{
    int unused_claimed = 0;
    struct gj_claim unused_next;
    struct gj_finish_riders none = { NULL, NULL, 0 };
    riders = riders ? riders : &none;
    claimed = claimed ? claimed : &unused_claimed;
    riders->written = *claimed = 0;
    if (!next) {
        next = &unused_next;
        ask = NULL;
    }
    char **names = NULL;
    size_t n = 0;
    if (output_dir && list_dir(output_dir, &names, &n) != 0) {
        gj_log_error(COMPONENT, "job %s: cannot list outputs in %s: %s", c->id, output_dir,
                     strerror(errno));
        return -1;
    }
    if (n == 0 && !on_success)
        return finish_and_claim(conn, c, riders, ask, next, claimed);
    write_riders(conn, riders);
    /* Names a client could not fetch safely fail the job (nothing is stored). */
    for (size_t i = 0; i < n; i++) {
        if (!gj_safe_name(names[i])) {
            json_t *err = json_pack("{s:s}", "message",
                                    "the job wrote an output file whose name is not a plain file name");
            free_names(names, n);
            if (!err)
                return -1;
            int rc = gj_queue_finish_failure(conn, c, err, 0, 0);
            json_decref(err);
            return rc == 0 ? 2 : rc;
        }
    }

    /* Outputs that surely pass the quota are not written only to be rolled back. */
    struct gj_storage_refusal over;
    if (n > 0 && gj_storage_would_pass(conn, c->tenant_id, outputs_size(output_dir, names, n), &over) == 1) {
        free_names(names, n);
        gj_storage_set_last_refusal(&over);
        return fail_over_quota(conn, c);
    }

    const char *params[] = { c->id, c->lease_token };
    if (gj_db_begin(conn) != 0) {
        free_names(names, n);
        return -1;
    }
    int rows = fenced_named(conn, "gj_queue_success", success_sql, 2, params, NULL);
    if (rows <= 0) {
        gj_db_rollback(conn);
        free_names(names, n);
        if (rows == 0)
            gj_log_warn(COMPONENT, "job %s: lease %s lost; result refused", c->id, c->lease_token);
        return rows == 0 ? 1 : -1;
    }
    int rc = 0;
    gj_storage_forget_refusal();
    if (on_success)   /* the module's records commit with the state and the outputs */
        rc = on_success(conn, c, output_dir);
    if (rc != 0 && gj_storage_refused())
        rc = GJ_BLOB_OVER_QUOTA;   /* a blob of the module's (a report) passed the quota */
    if (rc == 0)
        rc = store_outputs(conn, c, output_dir, names, n, on_success != NULL);
    free_names(names, n);
    if (rc == GJ_BLOB_OVER_QUOTA) {
        gj_db_rollback(conn);   /* no output of it stays */
        return fail_over_quota(conn, c);
    }
    if (rc != 0 || gj_db_commit(conn) != 0) {
        gj_db_rollback(conn);
        return -1;
    }
    return 0;
}

static const char failure_sql[] =
    "WITH j AS (SELECT id, ($3::boolean AND attempts < max_attempts AND NOT cancel_requested) AS retry,"
    "                  attempts FROM jobs"
    "            WHERE id = $1 AND lease_token = $2::bigint AND state = 'running'" LEASE_VALID " FOR UPDATE)"
    " UPDATE jobs SET"
    "  state = CASE WHEN j.retry THEN 'queued' ELSE 'failed' END,"
    "  run_after = CASE WHEN j.retry THEN now() + least(" "300000" "::double precision,"
    "     $4::double precision * power(2::double precision, least(greatest(j.attempts - 1, 0), 30)))"
    "     * interval '1 millisecond' ELSE jobs.run_after END,"
    "  finished_at = CASE WHEN j.retry THEN NULL ELSE now() END,"
    "  error = $5::jsonb, updated_at = now(),"
    "  lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL"
    " FROM j WHERE jobs.id = j.id RETURNING jobs.state";

int gj_queue_finish_failure(PGconn *conn, const struct gj_claim *c, json_t *error, int transient,
                            int retry_backoff_ms)
{
    char *text = error ? json_dumps(error, JSON_COMPACT) : strdup("{\"message\":\"failed\"}");
    if (!text) {
        gj_log_error(COMPONENT, "job %s: out of memory", c->id);
        return -1;
    }
    char backoff[16];
    snprintf(backoff, sizeof backoff, "%d", retry_backoff_ms > 0 ? retry_backoff_ms : 0);
    const char *params[] = { c->id, c->lease_token, transient ? "true" : "false", backoff, text };
    PGresult *r = NULL;
    int rows = fenced(conn, failure_sql, 5, params, &r);
    free(text);
    if (rows < 0)
        return -1;
    if (rows == 0) {
        PQclear(r);
        gj_log_warn(COMPONENT, "job %s: lease %s lost; failure not recorded", c->id, c->lease_token);
        return 1;
    }
    gj_log_info(COMPONENT, "job %s attempt %d failed%s", c->id, c->attempts,
                strcmp(PQgetvalue(r, 0, 0), "queued") == 0 ? "; retrying" : "");
    PQclear(r);
    return 0;
}

int gj_queue_finish_canceled(PGconn *conn, const struct gj_claim *c)
{
    const char *params[] = { c->id, c->lease_token };
    int rows = fenced(conn,
                      "UPDATE jobs SET state = 'canceled', finished_at = now(), updated_at = now(),"
                      " lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL"
                      " WHERE id = $1 AND lease_token = $2::bigint AND state = 'running'" LEASE_VALID,
                      2, params, NULL);
    return rows < 0 ? -1 : rows == 0 ? 1 : 0;
}

int gj_queue_finish_waiting(PGconn *conn, const struct gj_claim *c)
{
    int own = PQtransactionStatus(conn) == PQTRANS_IDLE;
    if (own && gj_db_begin(conn) != 0)
        return -1;
    /* With no child pending (none spawned, or all done already) the parent goes
     * straight back to the queue at its next stage. */
    const char *params[] = { c->id, c->lease_token };
    int rows = fenced(conn,
                      "UPDATE jobs SET"
                      "  state = CASE WHEN children_pending > 0 THEN 'subtasks' ELSE 'queued' END,"
                      "  stage = CASE WHEN children_pending > 0 THEN stage ELSE stage + 1 END,"
                      "  attempts = CASE WHEN children_pending > 0 THEN attempts ELSE 0 END,"
                      "  updated_at = now(), lease_owner = NULL, lease_token = NULL,"
                      "  lease_expires_at = NULL"
                      " WHERE id = $1 AND lease_token = $2::bigint AND state = 'running'" LEASE_VALID,
                      2, params, NULL);
    if (rows <= 0) {
        gj_db_rollback(conn);
        if (rows == 0)
            gj_log_warn(COMPONENT, "job %s: lease %s lost; children discarded", c->id, c->lease_token);
        return rows == 0 ? 1 : -1;
    }
    if (gj_db_commit(conn) != 0) {
        gj_db_rollback(conn);
        return -1;
    }
    return 0;
}

int gj_queue_release(PGconn *conn, const struct gj_claim *c)
{
    const char *params[] = { c->id, c->lease_token };
    int rows = fenced(conn,
                      "UPDATE jobs SET"
                      "  state = CASE WHEN cancel_requested THEN 'canceled' ELSE 'queued' END,"
                      "  finished_at = CASE WHEN cancel_requested THEN now() ELSE NULL END,"
                      "  attempts = greatest(attempts - 1, 0), device = NULL, updated_at = now(),"
                      "  lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL"
                      " WHERE id = $1 AND lease_token = $2::bigint AND state = 'running'" LEASE_VALID,
                      2, params, NULL);
    return rows < 0 ? -1 : rows == 0 ? 1 : 0;
}

int gj_queue_spawn_child(PGconn *conn, const struct gj_claim *c, int child_index, const char *kind,
                         json_t *params, const char *const *input_names,
                         const char *const *input_blob_ids, int n_inputs)
{
    if (PQtransactionStatus(conn) == PQTRANS_IDLE && gj_db_begin(conn) != 0)
        return -1;
    struct gj_submit_input *ins = calloc(n_inputs > 0 ? (size_t)n_inputs : 1, sizeof *ins);
    if (!ins) {
        gj_log_error(COMPONENT, "job %s: out of memory", c->id);
        gj_db_rollback(conn);
        return -1;
    }
    for (int i = 0; i < n_inputs; i++)
        ins[i] = (struct gj_submit_input){ input_names[i], input_blob_ids[i], 0 };
    struct gj_submit s = { .kind = kind, .params = params, .inputs = ins, .n_inputs = (size_t)n_inputs,
                           .parent = c, .child_index = child_index };
    struct gj_submitted out;
    int rc = gj_queue_submit(conn, &s, &out);
    free(ins);
    if (rc == GJ_SUBMIT_OK)
        return 0;
    gj_db_rollback(conn);
    return rc == GJ_SUBMIT_LEASE_LOST ? 1 : -1;
}

static const char rescue_sql[] =
    "WITH j AS (SELECT id, (attempts < max_attempts AND NOT cancel_requested) AS retry,"
    "                  cancel_requested, attempts FROM jobs"
    "            WHERE state = 'running' AND lease_expires_at < now()"
    "            FOR UPDATE SKIP LOCKED)"
    " UPDATE jobs SET"
    "  state = CASE WHEN j.retry THEN 'queued' WHEN j.cancel_requested THEN 'canceled'"
    "          ELSE 'failed' END,"
    "  run_after = CASE WHEN j.retry THEN now() + least(300000::double precision,"
    "     $1::double precision * power(2::double precision, least(greatest(j.attempts - 1, 0), 30)))"
    "     * interval '1 millisecond' ELSE jobs.run_after END,"
    "  finished_at = CASE WHEN j.retry THEN NULL ELSE now() END,"
    "  error = CASE WHEN j.cancel_requested AND NOT j.retry THEN jobs.error"
    "          ELSE jsonb_build_object('message', 'lease expired (worker lost)') END,"
    "  updated_at = now(), device = NULL,"
    "  lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL"
    " FROM j WHERE jobs.id = j.id AND jobs.state = 'running' RETURNING jobs.id, jobs.state";

int gj_queue_rescue_expired(PGconn *conn, int retry_backoff_ms)
{
    char backoff[16];
    snprintf(backoff, sizeof backoff, "%d", retry_backoff_ms > 0 ? retry_backoff_ms : 0);
    const char *params[] = { backoff };
    PGresult *r = NULL;
    int rows = fenced(conn, rescue_sql, 1, params, &r);
    if (rows < 0)
        return -1;
    for (int i = 0; i < rows; i++)
        gj_log_warn(COMPONENT, "job %s: lease expired (worker lost); now %s", PQgetvalue(r, i, 0),
                    PQgetvalue(r, i, 1));
    PQclear(r);
    return rows;
}

int gj_queue_worker_register(PGconn *conn, const char *worker_id, const char *host, int pid,
                             json_t *devices)
{
    char *text = devices ? json_dumps(devices, JSON_COMPACT) : strdup("[]");
    if (!text) {
        gj_log_error(COMPONENT, "worker register: out of memory");
        return -1;
    }
    char pidtext[16];
    snprintf(pidtext, sizeof pidtext, "%d", pid);
    const char *params[] = { worker_id, host, pidtext, text };
    int rc = gj_db_cmd(conn,
                       "INSERT INTO workers (id, host, pid, devices) VALUES ($1, $2, $3::int, $4::jsonb)"
                       " ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid,"
                       " devices = EXCLUDED.devices, heartbeat_at = now(), stopping = false",
                       4, params);
    free(text);
    return rc;
}

int gj_queue_worker_heartbeat(PGconn *conn, const char *worker_id)
{
    const char *params[] = { worker_id };
    return gj_db_cmd(conn, "UPDATE workers SET heartbeat_at = now() WHERE id = $1", 1, params);
}

int gj_queue_worker_unregister(PGconn *conn, const char *worker_id)
{
    const char *params[] = { worker_id };
    return gj_db_cmd(conn, "DELETE FROM workers WHERE id = $1", 1, params);
}
