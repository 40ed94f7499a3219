/*
 * queue_submit.c — creating a job (queue.h: gj_queue_submit): the one statement of the tree
 * that adds a row to jobs (a top-level job, or a sub-task fenced by its parent's lease), and
 * the job's inputs, each a blob of the job's tenant.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/db.h"
#include "service/log.h"
#include "service/queue.h"

#define COMPONENT "queue"

/* A sub-task takes its parent's tenant, priority and attempts, and counts in its
 * children_pending, only while the parent holds its lease ($8, $9); a top-level job
 * ($8 NULL) takes $1, $4, $5. No row back: the idempotency key was used, or the parent
 * lost its lease. */
static const char insert_job_sql[] =
    "WITH parent AS (UPDATE jobs SET children_pending = children_pending + 1"
    "   WHERE $8::uuid IS NOT NULL AND id = $8::uuid AND lease_token = $9::bigint AND state = 'running'"
    "   RETURNING id, tenant_id, priority, max_attempts),"
    " src AS (SELECT tenant_id, priority, max_attempts, id AS parent_id FROM parent"
    "   UNION ALL SELECT $1::uuid, $4::int, $5::int, NULL::uuid WHERE $8::uuid IS NULL)"
    " INSERT INTO jobs (tenant_id, kind, params, priority, max_attempts, idempotency_key, request_hash,"
    "                   parent_id, child_index)"
    " SELECT tenant_id, $2, $3::jsonb, priority, max_attempts, $6, decode($7, 'hex'), parent_id, $10::int"
    " FROM src ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING id";

/* An input: a blob of the job's tenant (no row: gone, or another tenant's). */
static const char insert_input_sql[] =
    "INSERT INTO job_inputs (job_id, name, blob_id)"
    " SELECT j.id, $2, b.id FROM jobs j JOIN blobs b ON b.tenant_id = j.tenant_id"
    " WHERE j.id = $1::uuid AND b.id = $3::uuid RETURNING blob_id";

static const char own_blob_sql[] =
    "UPDATE blobs SET owner_job = $1::uuid WHERE id = $2::uuid"
    " AND tenant_id = (SELECT tenant_id FROM jobs WHERE id = $1::uuid)";

/* The job row; GJ_SUBMIT_OK with out->id, or why not. */
static int insert_job(PGconn *conn, const struct gj_submit *s, struct gj_submitted *out)
{
    char *ptext = s->params ? json_dumps(s->params, JSON_COMPACT) : strdup("{}");
    if (!ptext) {
        gj_log_error(COMPONENT, "submit: out of memory");
        return GJ_SUBMIT_ERROR;
    }
    char prio[16], maxa[16], index[16];
    snprintf(prio, sizeof prio, "%d", s->priority);
    snprintf(maxa, sizeof maxa, "%d", s->max_attempts > 0 ? s->max_attempts : 3);
    snprintf(index, sizeof index, "%d", s->child_index);
    const struct gj_claim *p = s->parent;
    const char *params[10] = { p ? NULL : s->tenant_id, s->kind, ptext, prio, maxa,
                               s->idempotency_key, s->idempotency_key ? s->request_hash : NULL,
                               p ? p->id : NULL, p ? p->lease_token : NULL, p ? index : NULL };
    PGresult *r = gj_db_exec(conn, insert_job_sql, 10, params, NULL);
    free(ptext);
    if (!r)
        return GJ_SUBMIT_ERROR;
    int rows = PQntuples(r);
    if (rows == 1)
        snprintf(out->id, sizeof out->id, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    if (rows == 1)
        return GJ_SUBMIT_OK;
    if (p)
        gj_log_warn(COMPONENT, "job %s: lease %s lost; child not spawned", p->id, p->lease_token);
    return p ? GJ_SUBMIT_LEASE_LOST : GJ_SUBMIT_DUPLICATE;
}

static int insert_inputs(PGconn *conn, const struct gj_submit *s, struct gj_submitted *out)
{
    for (size_t i = 0; i < s->n_inputs; i++) {
        const struct gj_submit_input *in = &s->inputs[i];
        const char *p[3] = { out->id, in->name, in->blob_id };
        PGresult *r = gj_db_exec(conn, insert_input_sql, 3, p, NULL);
        if (!r)
            return GJ_SUBMIT_ERROR;
        int rows = PQntuples(r);
        PQclear(r);
        if (rows == 0) {
            out->bad_input = in->name;
            return GJ_SUBMIT_INPUT_GONE;
        }
        const char *o[2] = { out->id, in->blob_id };
        if (in->owned && gj_db_cmd(conn, own_blob_sql, 2, o) != 0)
            return GJ_SUBMIT_ERROR;
    }
    return GJ_SUBMIT_OK;
}

int gj_queue_submit(PGconn *conn, const struct gj_submit *s, struct gj_submitted *out)
{
    memset(out, 0, sizeof *out);
    int own = PQtransactionStatus(conn) == PQTRANS_IDLE;
    if (own && gj_db_begin(conn) != 0)
        return GJ_SUBMIT_ERROR;
    int rc = insert_job(conn, s, out);
    if (rc == GJ_SUBMIT_OK)
        rc = insert_inputs(conn, s, out);
    if (own) {
        if (rc == GJ_SUBMIT_OK && gj_db_commit(conn) != 0)
            rc = GJ_SUBMIT_ERROR;
        if (rc != GJ_SUBMIT_OK)
            gj_db_rollback(conn);
    }
    return rc;
}
