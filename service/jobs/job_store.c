/*
 * job_store.c — a job's status, cancel, delete, rename, time limit and the counts metrics
 * show (job_store.h), each rule taken from job_state.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/base/log.h"
#include "service/base/uuid.h"
#include "service/db/db.h"
#include "service/jobs/job_store.h"

#define COMPONENT "jobs"

static int unavailable(struct gj_error *err)
{
    return gj_error_status(err, 503, NULL, "the database is unavailable; try again");
}

static int not_found(struct gj_error *err, const char *job_id)
{
    return gj_error_status(err, 404, NULL, "no job %s", job_id);
}

/* The stored names of the states whose rule is want, as a PostgreSQL text array. */
static void cancel_states(enum gj_job_cancel_rule want, char *out, size_t n)
{
    size_t used = (size_t)snprintf(out, n, "{");
    for (int s = 0; s < GJ_JOB_STATE_COUNT; s++)
        if (gj_job_cancel_rule(s) == want && used < n)
            used += (size_t)snprintf(out + used, n - used, "%s%s", used > 1 ? "," : "", gj_job_state_name(s));
    if (used < n)
        snprintf(out + used, n - used, "}");
}

int gj_job_status_read(PGconn *c, const char *tenant_id, const char *job_id, int lock,
                       struct gj_job_status *st, struct gj_error *err)
{
    if (!gj_is_uuid(job_id) || (tenant_id && !gj_is_uuid(tenant_id)))
        return not_found(err, job_id ? job_id : "");
    const char *p[2] = { job_id, tenant_id };
    PGresult *res = gj_db_exec(c, lock ? "SELECT state, stage, parent_id IS NOT NULL, cancel_requested FROM jobs"
                                         " WHERE id = $1::uuid AND ($2::uuid IS NULL OR tenant_id = $2::uuid)"
                                         " FOR UPDATE"
                                       : "SELECT state, stage, parent_id IS NOT NULL, cancel_requested FROM jobs"
                                         " WHERE id = $1::uuid AND ($2::uuid IS NULL OR tenant_id = $2::uuid)",
                               2, p, NULL);
    if (!res)
        return unavailable(err);
    int found = PQntuples(res) == 1;
    if (found) {
        if (gj_job_state_parse(PQgetvalue(res, 0, 0), &st->state) != 0) {
            gj_log_error(COMPONENT, "job %s: unknown stored state %s", job_id, PQgetvalue(res, 0, 0));
            PQclear(res);
            return gj_error_status(err, 500, NULL, "job %s is in an unknown state", job_id);
        }
        st->stage = atoi(PQgetvalue(res, 0, 1));
        st->is_subtask = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
        st->cancel_requested = strcmp(PQgetvalue(res, 0, 3), "t") == 0;
    }
    PQclear(res);
    return found ? 0 : not_found(err, job_id);
}

int gj_job_cancel(PGconn *c, const char *tenant_id, const char *job_id)
{
    if (!gj_is_uuid(job_id) || (tenant_id && !gj_is_uuid(tenant_id)))
        return 0;
    char now[128], asked[128];
    cancel_states(GJ_CANCEL_NOW, now, sizeof now);
    cancel_states(GJ_CANCEL_ASK_WORKER, asked, sizeof asked);
    const char *p[4] = { job_id, tenant_id, now, asked };
    PGresult *res = gj_db_exec(c,
                               "UPDATE jobs SET"
                               "  state = CASE WHEN state = ANY($3::text[]) THEN 'canceled' ELSE state END,"
                               "  finished_at = CASE WHEN state = ANY($3::text[]) THEN now() ELSE finished_at END,"
                               "  cancel_requested = true, updated_at = now()"
                               " WHERE id = $1::uuid AND ($2::uuid IS NULL OR tenant_id = $2::uuid)"
                               "   AND (state = ANY($3::text[]) OR state = ANY($4::text[]))",
                               4, p, NULL);
    if (!res)
        return -1;
    int rows = atoi(PQcmdTuples(res));
    PQclear(res);
    return rows > 0 ? 1 : 0;
}

/* The row goes: its history, inputs, outputs, log and sub-tasks with it (ON DELETE CASCADE);
 * blobs another job takes as inputs pass to that job (migration 0007's gj_job_deleting). */
static int delete_row(PGconn *c, const char *const p[2], struct gj_error *err)
{
    char sqlstate[6] = "";
    PGresult *res = gj_db_exec(c, "DELETE FROM jobs WHERE id = $1::uuid AND tenant_id = $2::uuid", 2, p, sqlstate);
    if (res) {
        PQclear(res);
        return 0;
    }
    if (strcmp(sqlstate, "23503") == 0)
        return gj_error_status(err, 409, NULL, "a blob of this job is an input of another job");
    return unavailable(err);
}

/* In the open transaction: the rule, then cancel and the row's deletion, now or once it stops. */
static int delete_in(PGconn *c, const char *tenant_id, const char *job_id, enum gj_job_deleted *how,
                     struct gj_error *err)
{
    struct gj_job_status st;
    if (gj_job_status_read(c, tenant_id, job_id, 1, &st, err) != 0)
        return -1;
    const char *p[2] = { job_id, tenant_id };
    switch (gj_job_delete_rule(st.state, st.is_subtask)) {
    case GJ_DELETE_REFUSED_SUBTASK:
        return gj_error_status(err, 409, NULL, "this is a sub-task; delete its parent job");
    case GJ_DELETE_WHEN_STOPPED:
        if (gj_job_cancel(c, tenant_id, job_id) < 0 ||
            gj_db_cmd(c, "UPDATE jobs SET delete_requested = true WHERE id = $1::uuid AND tenant_id = $2::uuid",
                      2, p) != 0)
            return unavailable(err);
        *how = GJ_JOB_DELETED_WHEN_STOPPED;
        return 0;
    case GJ_DELETE_NOW:
        break;
    }
    /* canceled first, so that a parent's running sub-tasks are asked to stop */
    if (!gj_job_state_final(st.state) && gj_job_cancel(c, tenant_id, job_id) < 0)
        return unavailable(err);
    if (delete_row(c, p, err) != 0)
        return -1;
    *how = GJ_JOB_DELETED;
    return 0;
}

int gj_job_delete(PGconn *c, const char *tenant_id, const char *job_id, enum gj_job_deleted *how,
                  struct gj_error *err)
{
    if (!tenant_id || !gj_is_uuid(tenant_id))
        return not_found(err, job_id ? job_id : "");
    int own = PQtransactionStatus(c) == PQTRANS_IDLE;
    if (own && gj_db_begin(c) != 0)
        return unavailable(err);
    if (delete_in(c, tenant_id, job_id, how, err) != 0) {
        if (own)
            gj_db_rollback(c);
        return -1;
    }
    if (own && gj_db_commit(c) != 0) {
        gj_db_rollback(c);
        return unavailable(err);
    }
    return 0;
}

int gj_job_find_idempotent(PGconn *c, const char *tenant_id, const char *key, char id[GJ_UUID_LEN + 1],
                           char hash[65])
{
    const char *p[2] = { tenant_id, key };
    PGresult *res = gj_db_exec(c, "SELECT id, encode(request_hash, 'hex') FROM jobs"
                                  " WHERE tenant_id = $1::uuid AND idempotency_key = $2",
                               2, p, NULL);
    if (!res)
        return -1;
    int found = PQntuples(res) > 0;
    if (found) {
        snprintf(id, GJ_UUID_LEN + 1, "%s", PQgetvalue(res, 0, 0));
        snprintf(hash, 65, "%s", PQgetisnull(res, 0, 1) ? "" : PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return found;
}

int gj_job_output_promised(PGconn *c, const char *tenant_id, const char *job_id, const char *output,
                           const char *field, long long *size, struct gj_error *err)
{
    const char *p[3] = { job_id, tenant_id, output };
    PGresult *res = gj_db_exec(c, "SELECT j.state, b.size FROM jobs j"
                                  " LEFT JOIN job_outputs o ON o.job_id = j.id AND o.name = $3"
                                  " LEFT JOIN blobs b ON b.id = o.blob_id"
                                  " WHERE j.id = $1::uuid AND j.tenant_id = $2::uuid",
                               3, p, NULL);
    if (!res)
        return unavailable(err);
    enum gj_job_state st;
    int rc = 0;
    if (PQntuples(res) == 0 || gj_job_state_parse(PQgetvalue(res, 0, 0), &st) != 0)
        rc = gj_error_status(err, 422, field, "no job %s", job_id);
    else if (st == GJ_JOB_FAILED || st == GJ_JOB_CANCELED)
        rc = gj_error_status(err, 422, field, "job %s %s: its outputs will never exist", job_id, gj_job_state_name(st));
    else if (st == GJ_JOB_SUCCEEDED && PQgetisnull(res, 0, 1))
        rc = gj_error_status(err, 422, field, "job %s succeeded without an output named %s", job_id, output);
    else
        *size = st == GJ_JOB_SUCCEEDED ? strtoll(PQgetvalue(res, 0, 1), NULL, 10) : -1;
    PQclear(res);
    return rc;
}

int gj_job_lock_shared(PGconn *c, const char *tenant_id, const char *job_id)
{
    if (!gj_is_uuid(job_id) || !tenant_id || !gj_is_uuid(tenant_id))
        return 0;
    const char *p[2] = { job_id, tenant_id };
    return gj_db_cmd(c, "SELECT 1 FROM jobs WHERE id = $1::uuid AND tenant_id = $2::uuid FOR SHARE", 2, p);
}

/* One statement that changes one job of the tenant: 0, 1 when no row matched, -1 (err). */
static int update_one(PGconn *c, const char *sql, int n, const char *const *p, struct gj_error *err)
{
    PGresult *res = gj_db_exec(c, sql, n, p, NULL);
    if (!res)
        return unavailable(err);
    int rows = atoi(PQcmdTuples(res));
    PQclear(res);
    return rows > 0 ? 0 : 1;
}

int gj_job_rename(PGconn *c, const char *tenant_id, const char *job_id, const char *name,
                  struct gj_error *err)
{
    if (!gj_is_uuid(job_id) || !tenant_id || !gj_is_uuid(tenant_id))
        return not_found(err, job_id ? job_id : "");
    const char *p[3] = { job_id, tenant_id, name };
    int rc = update_one(c, "UPDATE jobs SET name = $3, updated_at = now() WHERE id = $1::uuid AND tenant_id = $2::uuid",
                        3, p, err);
    return rc == 1 ? not_found(err, job_id) : rc;
}

int gj_job_set_timeout(PGconn *c, const char *tenant_id, const char *job_id, int seconds,
                       struct gj_error *err)
{
    if (!gj_is_uuid(job_id) || !tenant_id || !gj_is_uuid(tenant_id))
        return not_found(err, job_id ? job_id : "");
    char secs[16];
    snprintf(secs, sizeof secs, "%d", seconds);
    const char *p[3] = { job_id, tenant_id, secs };
    /* not while a run goes: queued or waiting for its inputs */
    int rc = update_one(c, "UPDATE jobs SET timeout_seconds = $3::int, updated_at = now()"
                           " WHERE id = $1::uuid AND tenant_id = $2::uuid AND state IN ('queued', 'waiting')",
                        3, p, err);
    if (rc != 1)
        return rc;
    struct gj_job_status st;
    if (gj_job_status_read(c, tenant_id, job_id, 0, &st, err) != 0)
        return -1;
    return gj_error_status(err, 409, "timeout", "the time limit of a job can change only before it runs");
}

int gj_job_output_find(PGconn *c, const char *tenant_id, const char *job_id, const char *name,
                       char blob_id[GJ_UUID_LEN + 1], char *content_type, size_t ctype_n, struct gj_error *err)
{
    if (!gj_is_uuid(job_id) || !tenant_id || !gj_is_uuid(tenant_id))
        return not_found(err, job_id ? job_id : "");
    const char *p[3] = { job_id, tenant_id, name };
    PGresult *res = gj_db_exec(c,
                               "SELECT o.blob_id, o.content_type FROM job_outputs o JOIN jobs j ON j.id = o.job_id"
                               " WHERE j.id = $1::uuid AND j.tenant_id = $2::uuid AND o.name = $3",
                               3, p, NULL);
    if (!res)
        return unavailable(err);
    int found = PQntuples(res) == 1;
    if (found) {
        snprintf(blob_id, GJ_UUID_LEN + 1, "%s", PQgetvalue(res, 0, 0));
        if (content_type && ctype_n)
            snprintf(content_type, ctype_n, "%s", PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return found ? 0 : gj_error_status(err, 404, NULL, "job %s has no output %s", job_id, name);
}

#define TS(c) "to_char(" c " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

json_t *gj_job_outputs_read(PGconn *c, const char *job_id)
{
    const char *p[1] = { job_id };
    PGresult *res = gj_db_exec(c,
                               "SELECT o.name, b.size, encode(b.sha256, 'hex'), o.content_type, o.blob_id FROM job_outputs o"
                               " JOIN blobs b ON b.id = o.blob_id WHERE o.job_id = $1::uuid ORDER BY o.name",
                               1, p, NULL);
    if (!res)
        return NULL;
    json_t *arr = json_array();
    for (int i = 0; arr && i < PQntuples(res); i++)
        json_array_append_new(arr, json_pack("{s:s, s:I, s:s, s:s, s:s}", "name", PQgetvalue(res, i, 0), "size",
                                             (json_int_t)strtoll(PQgetvalue(res, i, 1), NULL, 10), "sha256",
                                             PQgetvalue(res, i, 2), "content_type", PQgetvalue(res, i, 3),
                                             "blob_id", PQgetvalue(res, i, 4)));
    PQclear(res);
    return arr;
}

int gj_job_progress_read(PGconn *c, const char *tenant_id, const char *job_id, char state[16], double *progress,
                         json_t **message)
{
    const char *p[2] = { job_id, tenant_id };
    PGresult *res = gj_db_exec(c, "SELECT state, stage, progress, message FROM jobs"
                                  " WHERE id = $1::uuid AND tenant_id = $2::uuid",
                               2, p, NULL);
    if (!res)
        return -1;
    int found = PQntuples(res) == 1;
    if (found) {
        enum gj_job_state st;
        snprintf(state, 16, "%s", gj_job_state_parse(PQgetvalue(res, 0, 0), &st) == 0
                                      ? gj_job_state_public(st, atoi(PQgetvalue(res, 0, 1)))
                                      : "unknown");
        *progress = strtod(PQgetvalue(res, 0, 2), NULL);
        *message = PQgetisnull(res, 0, 3) ? json_null() : json_string(PQgetvalue(res, 0, 3));
    }
    PQclear(res);
    return found;
}

json_t *gj_job_events_read(PGconn *c, const char *job_id, long long after, int limit)
{
    char last[24], lim[16];
    snprintf(last, sizeof last, "%lld", after);
    snprintf(lim, sizeof lim, "%d", limit);
    const char *p[3] = { job_id, last, lim };
    PGresult *res = gj_db_exec(c,
                               "SELECT id, kind, detail::text, " TS("at") " FROM job_events"
                               " WHERE job_id = $1::uuid AND id > $2::bigint ORDER BY id LIMIT $3::int",
                               3, p, NULL);
    if (!res)
        return NULL;
    json_t *arr = json_array();
    for (int i = 0; arr && i < PQntuples(res); i++) {
        json_t *detail = json_loads(PQgetvalue(res, i, 2), 0, NULL);
        if (!json_is_object(detail)) {
            json_decref(detail);
            detail = json_object();
        }
        json_object_set_new(detail, "at", json_string(PQgetvalue(res, i, 3)));
        json_array_append_new(arr, json_pack("{s:s, s:s, s:o}", "id", PQgetvalue(res, i, 0), "kind",
                                             PQgetvalue(res, i, 1), "detail", detail));
    }
    PQclear(res);
    return arr;
}

int gj_job_log_text(PGconn *c, const char *job_id, int errors_only, char **text, size_t *len)
{
    const char *p[2] = { job_id, errors_only ? "t" : "f" };
    PGresult *res = gj_db_exec(c, "SELECT coalesce(string_agg(to_char(at AT TIME ZONE 'UTC',"
                                  " 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') || ' ' || level || ': ' || line || E'\\n',"
                                  " '' ORDER BY seq), '') FROM job_log WHERE job_id = $1::uuid"
                                  " AND (NOT $2::boolean OR level <> 'info')",
                               2, p, NULL);
    if (!res)
        return -1;
    *len = (size_t)PQgetlength(res, 0, 0);
    *text = malloc(*len + 1);
    if (*text)
        memcpy(*text, PQgetvalue(res, 0, 0), *len + 1);
    PQclear(res);
    if (!*text)
        gj_log_error(COMPONENT, "job %s: log text: out of memory", job_id);
    return *text ? 0 : -1;
}

/* The stored names of the final states, as a PostgreSQL text array. */
static void final_states(char *out, size_t n)
{
    size_t used = (size_t)snprintf(out, n, "{");
    for (int s = 0; s < GJ_JOB_STATE_COUNT; s++)
        if (gj_job_state_final(s) && used < n)
            used += (size_t)snprintf(out + used, n - used, "%s%s", used > 1 ? "," : "", gj_job_state_name(s));
    if (used < n)
        snprintf(out + used, n - used, "}");
}

int gj_job_inputs_release_blob(PGconn *c, const char *blob_id, struct gj_error *err)
{
    char finals[128];
    final_states(finals, sizeof finals);
    const char *p[2] = { blob_id, finals };
    PGresult *res = gj_db_exec(c,
                               "SELECT j.id FROM job_inputs i JOIN jobs j ON j.id = i.job_id"
                               " WHERE i.blob_id = $1::uuid AND NOT j.state = ANY($2::text[]) LIMIT 1",
                               2, p, NULL);
    if (!res)
        return unavailable(err);
    if (PQntuples(res) > 0) {
        gj_error_status(err, 409, NULL, "job %s, not finished yet, uses this blob", PQgetvalue(res, 0, 0));
        PQclear(res);
        return -1;
    }
    PQclear(res);
    return gj_db_cmd(c, "DELETE FROM job_inputs WHERE blob_id = $1::uuid", 1, p) == 0 ? 0 : unavailable(err);
}

long gj_job_inputs_release_owned(PGconn *c, const char *job_id, const char *name)
{
    const char *p[2] = { job_id, name };
    PGresult *res = gj_db_exec(c,
                               "WITH gone AS (DELETE FROM job_inputs i USING blobs b"
                               "  WHERE i.job_id = $1::uuid AND b.id = i.blob_id AND b.owner_job = $1::uuid"
                               "  AND (i.name = $2 OR starts_with(i.name, $2 || '.')) RETURNING i.blob_id)"
                               " SELECT count(*) FROM gone",
                               2, p, NULL);
    if (!res)
        return -1;
    long n = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return n;
}

int gj_job_blobs_drop_unused(PGconn *c, const char *job_id)
{
    const char *p[1] = { job_id };
    return gj_db_cmd(c, "DELETE FROM blobs b WHERE b.owner_job = $1::uuid"
                        " AND NOT EXISTS (SELECT 1 FROM job_inputs i WHERE i.blob_id = b.id)"
                        " AND NOT EXISTS (SELECT 1 FROM job_outputs o WHERE o.blob_id = b.id)",
                     1, p);
}

#define TSX(c) "to_char((" c ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
#define CHANGE_COLUMNS                                                                                 \
    "SELECT j.id, j.kind, gj_public_state(j.state, j.stage), j.progress, j.message, j.device, "        \
    "j.error::text, " TS("j.created_at") ", " TS("j.started_at") ", " TS("j.finished_at") ", "         \
    TS("j.updated_at") ", j.cancel_requested, " TSX("$2::timestamptz - $3::interval") " FROM jobs j"  \
    " WHERE j.tenant_id = $1::uuid AND j.parent_id IS NULL"

PGresult *gj_job_changes_read(PGconn *c, const char *tenant_id, const char *after, const char *lookback, int batch,
                              int stragglers)
{
    char b[16], st[16];
    snprintf(b, sizeof b, "%d", batch);
    snprintf(st, sizeof st, "%d", stragglers);
    const char *p[5] = { tenant_id, after, lookback, b, st };
    return gj_db_exec(c,
        "(" CHANGE_COLUMNS " AND j.updated_at > $2::timestamptz ORDER BY j.updated_at, j.id LIMIT $4::int)"
        " UNION ALL "
        "(" CHANGE_COLUMNS " AND j.updated_at > $2::timestamptz - $3::interval AND j.updated_at <= $2::timestamptz"
        "  ORDER BY j.updated_at DESC, j.id LIMIT $5::int)",
        5, p, NULL);
}

int gj_job_note(PGconn *c, const char *job_id, const char *message)
{
    const char *p[2] = { job_id, message };
    return gj_db_cmd(c, "INSERT INTO job_events (job_id, kind, detail) VALUES ($1::uuid, 'message',"
                        " jsonb_build_object('message', $2::text))", 2, p);
}

int gj_job_log_head(PGconn *c, const char *tenant_id, const char *job_id, char state[16], long long *dropped)
{
    if (!gj_is_uuid(job_id) || !tenant_id || !gj_is_uuid(tenant_id))
        return 0;
    const char *p[2] = { job_id, tenant_id };
    PGresult *res = gj_db_exec(c, "SELECT j.state, j.stage, coalesce(t.dropped, 0) FROM jobs j"
                                  " LEFT JOIN job_log_totals t ON t.job_id = j.id"
                                  " WHERE j.id = $1::uuid AND j.tenant_id = $2::uuid",
                               2, p, NULL);
    if (!res)
        return -1;
    int found = PQntuples(res) > 0;
    if (found) {
        enum gj_job_state s;
        snprintf(state, 16, "%s", gj_job_state_parse(PQgetvalue(res, 0, 0), &s) == 0
                                      ? gj_job_state_public(s, atoi(PQgetvalue(res, 0, 1)))
                                      : "unknown");
        *dropped = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
    }
    PQclear(res);
    return found;
}

/* The row of kind in public state, added when absent (rows has room for one per result row). */
static struct gj_job_count *count_row(struct gj_job_counts *out, const char *kind, const char *state)
{
    for (size_t k = 0; k < out->n; k++)
        if (strcmp(out->rows[k].kind, kind) == 0 && strcmp(out->rows[k].state, state) == 0)
            return &out->rows[k];
    struct gj_job_count *row = &out->rows[out->n++];
    snprintf(row->kind, sizeof row->kind, "%s", kind);
    row->state = state;
    return row;
}

int gj_job_counts_read(PGconn *c, struct gj_job_counts *out)
{
    memset(out, 0, sizeof *out);
    PGresult *res = gj_db_exec(c, "SELECT kind, state, stage > 0, count(*) FROM jobs GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
                               0, NULL, NULL);
    if (!res)
        return -1;
    int n = PQntuples(res);
    out->rows = calloc(n > 0 ? (size_t)n : 1, sizeof *out->rows);
    if (!out->rows) {
        PQclear(res);
        gj_log_error(COMPONENT, "job counts: out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        enum gj_job_state s;
        long long count = atoll(PQgetvalue(res, i, 3));
        if (gj_job_state_parse(PQgetvalue(res, i, 1), &s) != 0) {
            gj_log_warn(COMPONENT, "job counts: unknown stored state %s", PQgetvalue(res, i, 1));
            continue;
        }
        if (s == GJ_JOB_QUEUED)
            out->queued += count;
        /* a parent's subtasks and running, say, are one public state */
        const char *shown = gj_job_state_public(s, strcmp(PQgetvalue(res, i, 2), "t") == 0);
        count_row(out, PQgetvalue(res, i, 0), shown)->n += count;
    }
    PQclear(res);
    return 0;
}

void gj_job_counts_free(struct gj_job_counts *out)
{
    free(out->rows);
    memset(out, 0, sizeof *out);
}

long long gj_job_counts_of(const struct gj_job_counts *counts, const char *kind, const char *state)
{
    for (size_t i = 0; i < counts->n; i++)
        if (strcmp(counts->rows[i].kind, kind) == 0 && strcmp(counts->rows[i].state, state) == 0)
            return counts->rows[i].n;
    return 0;
}
