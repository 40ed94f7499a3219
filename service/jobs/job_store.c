/*
 * job_store.c — a job's status and what changes it from outside its run: cancel, delete,
 * rename, time limit, a note in its history (job_store.h), each rule from job_state.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/base/log.h"
#include "service/base/uuid.h"
#include "service/db/db.h"
#include "service/jobs/job_cache.h"
#include "service/jobs/job_store_internal.h"

int gj_job_status_read(PGconn *c, const char *tenant_id, const char *job_id, int lock,
                       struct gj_job_status *st, struct gj_error *err)
{
    if (!gj_is_uuid(job_id) || (tenant_id && !gj_is_uuid(tenant_id)))
        return gj_job_store_not_found(err, job_id);
    const char *p[2] = { job_id, tenant_id };
    PGresult *res = gj_db_exec(c, lock ? "SELECT state, stage, parent_id IS NOT NULL, cancel_requested FROM jobs"
                                         " WHERE id = $1::uuid AND ($2::uuid IS NULL OR tenant_id = $2::uuid)"
                                         " FOR UPDATE"
                                       : "SELECT state, stage, parent_id IS NOT NULL, cancel_requested FROM jobs"
                                         " WHERE id = $1::uuid AND ($2::uuid IS NULL OR tenant_id = $2::uuid)",
                               2, p, NULL);
    if (!res)
        return gj_job_store_unavailable(err);
    int found = PQntuples(res) == 1;
    if (found) {
        if (gj_job_state_parse(PQgetvalue(res, 0, 0), &st->state) != 0) {
            gj_log_error(GJ_JOB_STORE_LOG, "job %s: unknown stored state %s", job_id, PQgetvalue(res, 0, 0));
            PQclear(res);
            return gj_error_status(err, 500, NULL, "job %s is in an unknown state", job_id);
        }
        st->stage = atoi(PQgetvalue(res, 0, 1));
        st->is_subtask = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
        st->cancel_requested = strcmp(PQgetvalue(res, 0, 3), "t") == 0;
    }
    PQclear(res);
    return found ? 0 : gj_job_store_not_found(err, job_id);
}

static int cancel_now(enum gj_job_state s)
{
    return gj_job_cancel_rule(s) == GJ_CANCEL_NOW;
}

static int cancel_asks_worker(enum gj_job_state s)
{
    return gj_job_cancel_rule(s) == GJ_CANCEL_ASK_WORKER;
}

int gj_job_cancel(PGconn *c, struct gj_job_cache *jc, const char *tenant_id, const char *job_id)
{
    if (!gj_is_uuid(job_id) || (tenant_id && !gj_is_uuid(tenant_id)))
        return 0;
    char now[128], asked[128];
    gj_job_states_array(cancel_now, now, sizeof now);
    gj_job_states_array(cancel_asks_worker, asked, sizeof asked);
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
    if (rows > 0)
        gj_job_cache_forget(jc, job_id);
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
    return gj_job_store_unavailable(err);
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
        if (gj_job_cancel(c, NULL, tenant_id, job_id) < 0 ||
            gj_db_cmd(c, "UPDATE jobs SET delete_requested = true WHERE id = $1::uuid AND tenant_id = $2::uuid",
                      2, p) != 0)
            return gj_job_store_unavailable(err);
        *how = GJ_JOB_DELETED_WHEN_STOPPED;
        return 0;
    case GJ_DELETE_NOW:
        break;
    }
    /* canceled first, so that a parent's running sub-tasks are asked to stop */
    if (!gj_job_state_final(st.state) && gj_job_cancel(c, NULL, tenant_id, job_id) < 0)
        return gj_job_store_unavailable(err);
    if (delete_row(c, p, err) != 0)
        return -1;
    *how = GJ_JOB_DELETED;
    return 0;
}

int gj_job_delete(PGconn *c, struct gj_job_cache *jc, const char *tenant_id, const char *job_id,
                  enum gj_job_deleted *how, struct gj_error *err)
{
    if (!tenant_id || !gj_is_uuid(tenant_id))
        return gj_job_store_not_found(err, job_id);
    int own = PQtransactionStatus(c) == PQTRANS_IDLE;
    if (own && gj_db_begin(c) != 0)
        return gj_job_store_unavailable(err);
    if (delete_in(c, tenant_id, job_id, how, err) != 0) {
        if (own)
            gj_db_rollback(c);
        return -1;
    }
    if (own && gj_db_commit(c) != 0) {
        gj_db_rollback(c);
        return gj_job_store_unavailable(err);
    }
    gj_job_cache_forget(jc, job_id);
    return 0;
}

/* One statement that changes one job of the tenant: 0, 1 when no row matched, -1 (err). */
static int update_one(PGconn *c, const char *sql, int n, const char *const *p, struct gj_error *err)
{
    PGresult *res = gj_db_exec(c, sql, n, p, NULL);
    if (!res)
        return gj_job_store_unavailable(err);
    int rows = atoi(PQcmdTuples(res));
    PQclear(res);
    return rows > 0 ? 0 : 1;
}

int gj_job_rename(PGconn *c, struct gj_job_cache *jc, const char *tenant_id, const char *job_id, const char *name,
                  struct gj_error *err)
{
    if (!gj_is_uuid(job_id) || !tenant_id || !gj_is_uuid(tenant_id))
        return gj_job_store_not_found(err, job_id);
    const char *p[3] = { job_id, tenant_id, name };
    int rc = update_one(c, "UPDATE jobs SET name = $3, updated_at = now() WHERE id = $1::uuid AND tenant_id = $2::uuid",
                        3, p, err);
    if (rc == 0)
        gj_job_cache_forget(jc, job_id);
    return rc == 1 ? gj_job_store_not_found(err, job_id) : rc;
}

int gj_job_set_timeout(PGconn *c, struct gj_job_cache *jc, const char *tenant_id, const char *job_id, int seconds,
                       struct gj_error *err)
{
    if (!gj_is_uuid(job_id) || !tenant_id || !gj_is_uuid(tenant_id))
        return gj_job_store_not_found(err, job_id);
    char secs[16];
    snprintf(secs, sizeof secs, "%d", seconds);
    const char *p[3] = { job_id, tenant_id, secs };
    /* not while a run goes: queued or waiting for its inputs */
    int rc = update_one(c, "UPDATE jobs SET timeout_seconds = $3::int, updated_at = now()"
                           " WHERE id = $1::uuid AND tenant_id = $2::uuid AND state IN ('queued', 'waiting')",
                        3, p, err);
    if (rc == 0)
        gj_job_cache_forget(jc, job_id);
    if (rc != 1)
        return rc;
    struct gj_job_status st;
    if (gj_job_status_read(c, tenant_id, job_id, 0, &st, err) != 0)
        return -1;
    return gj_error_status(err, 409, "timeout", "the time limit of a job can change only before it runs");
}

int gj_job_note(PGconn *c, const char *job_id, const char *message)
{
    const char *p[2] = { job_id, message };
    return gj_db_cmd(c, "INSERT INTO job_events (job_id, kind, detail) VALUES ($1::uuid, 'message',"
                        " jsonb_build_object('message', $2::text))", 2, p);
}
