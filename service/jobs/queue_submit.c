/*
 * queue_submit.c — creating a job (queue.h: gj_queue_submit): the one statement of the tree
 * that adds a row to jobs (a top-level job, or a sub-task fenced by its parent's lease), and
 * the job's inputs, each a blob of the job's tenant or another job's output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gj_kind.h"
#include "service/db/db.h"
#include "service/base/log.h"
#include "service/jobs/queue.h"
#include "service/jobs/job_state.h"

#define COMPONENT "queue"

/* A sub-task takes its parent's tenant, priority, attempts and timeout, and counts in its
 * children_pending, only while the parent holds its lease ($8, $9); a top-level job
 * ($8 NULL) takes $1, $4, $5, $16. A job waiting for upstream jobs starts 'waiting' ($11, $12),
 * $17 waiting jobs deep (0 when it does not wait).
 * No row back: the idempotency key was used, or the parent lost its lease. */
static const char insert_job_sql[] =
    "WITH parent AS (UPDATE jobs SET children_pending = children_pending + 1"
    "   WHERE $8::uuid IS NOT NULL AND id = $8::uuid AND lease_token = $9::bigint AND state = 'running'"
    "   RETURNING id, tenant_id, priority, max_attempts, timeout_seconds),"
    " src AS (SELECT tenant_id, priority, max_attempts, timeout_seconds, id AS parent_id FROM parent"
    "   UNION ALL SELECT $1::uuid, $4::int, $5::int, $16::int, NULL::uuid WHERE $8::uuid IS NULL)"
    " INSERT INTO jobs (tenant_id, kind, params, priority, max_attempts, idempotency_key, request_hash,"
    "                   parent_id, child_index, state, deps_pending, name, labels, callback_url,"
    "                   timeout_seconds, chain_depth)"
    " SELECT tenant_id, $2, $3::jsonb, priority, max_attempts, $6, decode($7, 'hex'), parent_id, $10::int,"
    "        $11, $12::int, $13, coalesce($14::jsonb, '{}'::jsonb), $15, timeout_seconds, $17::int"
    " FROM src ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING id";

/* An input: a blob of the job's tenant (no row: gone, or another tenant's). */
static const char insert_input_sql[] =
    "INSERT INTO job_inputs (job_id, name, blob_id)"
    " SELECT j.id, $2, b.id FROM jobs j JOIN blobs b ON b.tenant_id = j.tenant_id"
    " WHERE j.id = $1::uuid AND b.id = $3::uuid RETURNING blob_id";

static const char own_blob_sql[] =
    "UPDATE blobs SET owner_job = $1::uuid WHERE id = $2::uuid"
    " AND tenant_id = (SELECT tenant_id FROM jobs WHERE id = $1::uuid)";

/* The upstream job of an input, locked against settling until this transaction ends: the
 * deferred trigger that resolves its dependents (0007) then sees this job's row, or this
 * reads its settled state and outputs; and how many waiting jobs deep it is (0013). */
static const char upstream_sql[] =
    "SELECT j.state, o.blob_id, CASE WHEN j.state = 'waiting' THEN j.chain_depth ELSE 0 END"
    " FROM jobs j LEFT JOIN job_outputs o ON o.job_id = j.id AND o.name = $3"
    " WHERE j.id = $1::uuid AND j.tenant_id = $2::uuid FOR SHARE OF j";

/* The tenant's waiting jobs, counted under a lock of the tenant's that submits of waiting
 * jobs take until they commit, so two at once cannot both pass the bound. */
static const char waiting_count_sql[] =
    "SELECT pg_advisory_xact_lock(hashtextextended('gpujobd.waiting:' || $1, 0)),"
    " (SELECT count(*) FROM jobs WHERE tenant_id = $1::uuid AND state = 'waiting')";

static const char insert_dependency_sql[] =
    "INSERT INTO job_dependencies (job_id, name, upstream_id, output, resolved)"
    " VALUES ($1::uuid, $2, $3::uuid, $4, $5::boolean)";

/* What an input taken from another job comes to, before the job row exists. */
struct upstream {
    char blob_id[GJ_UUID_LEN + 1];   /* the output's blob, when the upstream succeeded */
    int pending;                     /* the upstream has not settled */
    int depth;                       /* waiting jobs deep it is (0: it does not wait) */
};

static int is_settled_failure(const char *state)
{
    return strcmp(state, "failed") == 0 || strcmp(state, "canceled") == 0;
}

/* Locks and reads the upstream job of ref. GJ_SUBMIT_OK (u filled), or why not. */
static int read_upstream(PGconn *conn, const struct gj_submit *s, const struct gj_submit_ref *ref,
                         struct upstream *u, struct gj_submitted *out)
{
    if (s->parent || !ref->output) {
        gj_log_error(COMPONENT, "submit: an input from another job needs a top-level job and an output name");
        return GJ_SUBMIT_ERROR;
    }
    out->bad_input = ref->name;
    if (!gj_is_uuid(ref->job))
        return GJ_SUBMIT_UPSTREAM_GONE;
    const char *p[3] = { ref->job, s->tenant_id, ref->output };
    PGresult *r = gj_db_exec(conn, upstream_sql, 3, p, NULL);
    if (!r)
        return GJ_SUBMIT_ERROR;
    int rc = GJ_SUBMIT_OK;
    if (PQntuples(r) == 0) {
        rc = GJ_SUBMIT_UPSTREAM_GONE;
    } else if (strcmp(PQgetvalue(r, 0, 0), "succeeded") == 0) {
        if (PQgetisnull(r, 0, 1))
            rc = GJ_SUBMIT_NO_OUTPUT;
        else
            snprintf(u->blob_id, sizeof u->blob_id, "%s", PQgetvalue(r, 0, 1));
    } else if (is_settled_failure(PQgetvalue(r, 0, 0))) {
        snprintf(out->upstream_state, sizeof out->upstream_state, "%s", PQgetvalue(r, 0, 0));
        rc = GJ_SUBMIT_UPSTREAM_FAILED;
    } else {
        u->pending = 1;
        u->depth = atoi(PQgetvalue(r, 0, 2));
    }
    PQclear(r);
    if (rc == GJ_SUBMIT_OK)
        out->bad_input = NULL;
    return rc;
}

/* Every ref's upstream job, in order; *pending counts those not settled yet, *depth is how
 * many waiting jobs deep the new job would be (one more than its deepest pending upstream). */
static int read_upstreams(PGconn *conn, const struct gj_submit *s, struct upstream *ups, int *pending,
                          int *depth, struct gj_submitted *out)
{
    *pending = *depth = 0;
    for (size_t i = 0; i < s->n_refs; i++) {
        int rc = read_upstream(conn, s, &s->refs[i], &ups[i], out);
        if (rc != GJ_SUBMIT_OK)
            return rc;
        *pending += ups[i].pending;
        if (ups[i].pending && ups[i].depth + 1 > *depth)
            *depth = ups[i].depth + 1;
        if (s->max_chain_depth > 0 && *depth > s->max_chain_depth) {
            out->bad_input = s->refs[i].name;
            return GJ_SUBMIT_CHAIN_TOO_DEEP;
        }
    }
    return GJ_SUBMIT_OK;
}

/* A job that will wait: GJ_SUBMIT_TOO_MANY_WAITING when the tenant has max_waiting_jobs
 * waiting already. */
static int check_waiting(PGconn *conn, const struct gj_submit *s)
{
    if (s->max_waiting_jobs <= 0)
        return GJ_SUBMIT_OK;
    const char *p[1] = { s->tenant_id };
    PGresult *r = gj_db_exec(conn, waiting_count_sql, 1, p, NULL);
    if (!r)
        return GJ_SUBMIT_ERROR;
    long long waiting = atoll(PQgetvalue(r, 0, 1));
    PQclear(r);
    return waiting >= s->max_waiting_jobs ? GJ_SUBMIT_TOO_MANY_WAITING : GJ_SUBMIT_OK;
}

/* The params as stored, with the choices the kind would otherwise make at run time (a
 * random seed) written in, so that every attempt and a rerun make the same (gj_kind.h).
 * NULL when out of memory. */
static char *stored_params(const struct gj_submit *s)
{
    const struct gj_kind *kind = gj_kind_find(s->kind);
    json_t *p = s->params ? json_deep_copy(s->params) : json_object();
    char *text = p && (!kind || !kind->complete_params || kind->complete_params(p) == 0)
                     ? json_dumps(p, JSON_COMPACT) : NULL;
    json_decref(p);
    return text;
}

/* The job row; GJ_SUBMIT_OK with out->id, or why not. */
static int insert_job(PGconn *conn, const struct gj_submit *s, int pending, int depth, struct gj_submitted *out)
{
    char *ptext = stored_params(s);
    char *ltext = s->labels ? json_dumps(s->labels, JSON_COMPACT) : NULL;
    if (!ptext || (s->labels && !ltext)) {
        free(ptext);
        gj_log_error(COMPONENT, "submit: out of memory");
        return GJ_SUBMIT_ERROR;
    }
    char prio[16], maxa[16], index[16], deps[16], timeout[16], chain[16];
    snprintf(prio, sizeof prio, "%d", s->priority);
    snprintf(maxa, sizeof maxa, "%d", s->max_attempts > 0 ? s->max_attempts : 3);
    snprintf(index, sizeof index, "%d", s->child_index);
    snprintf(deps, sizeof deps, "%d", pending);
    snprintf(timeout, sizeof timeout, "%d", s->timeout_seconds);
    snprintf(chain, sizeof chain, "%d", depth);
    const struct gj_claim *p = s->parent;
    const char *params[17] = { p ? NULL : s->tenant_id, s->kind, ptext, prio, maxa,
                               s->idempotency_key, s->idempotency_key ? s->request_hash : NULL,
                               p ? p->id : NULL, p ? p->lease_token : NULL, p ? index : NULL,
                               gj_job_state_name(pending ? GJ_JOB_WAITING : GJ_JOB_QUEUED), deps, p ? NULL : s->name, p ? NULL : ltext,
                               p ? NULL : s->callback_url, timeout, chain };
    PGresult *r = gj_db_exec(conn, insert_job_sql, 17, params, NULL);
    free(ptext);
    free(ltext);
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

/* One job_inputs row: a blob of the job's tenant (GJ_SUBMIT_INPUT_GONE when it is not). */
static int insert_input(PGconn *conn, const struct gj_submitted *out, const char *name, const char *blob_id)
{
    const char *p[3] = { out->id, name, blob_id };
    PGresult *r = gj_db_exec(conn, insert_input_sql, 3, p, NULL);
    if (!r)
        return GJ_SUBMIT_ERROR;
    int rows = PQntuples(r);
    PQclear(r);
    return rows ? GJ_SUBMIT_OK : GJ_SUBMIT_INPUT_GONE;
}

/* An input from another job: its provenance row, and its job_inputs row now when the
 * upstream succeeded (else the upstream's settling adds it). */
static int insert_ref(PGconn *conn, const struct gj_submit_ref *ref, const struct upstream *u,
                      struct gj_submitted *out)
{
    const char *p[5] = { out->id, ref->name, ref->job, ref->output, u->pending ? "false" : "true" };
    if (gj_db_cmd(conn, insert_dependency_sql, 5, p) != 0)
        return GJ_SUBMIT_ERROR;
    int rc = u->pending ? GJ_SUBMIT_OK : insert_input(conn, out, ref->name, u->blob_id);
    if (rc == GJ_SUBMIT_INPUT_GONE)
        out->bad_input = ref->name;
    return rc;
}

static int insert_inputs(PGconn *conn, const struct gj_submit *s, const struct upstream *ups,
                         struct gj_submitted *out)
{
    for (size_t i = 0; i < s->n_inputs; i++) {
        const struct gj_submit_input *in = &s->inputs[i];
        int rc = insert_input(conn, out, in->name, in->blob_id);
        if (rc != GJ_SUBMIT_OK) {
            out->bad_input = in->name;
            return rc;
        }
        const char *o[2] = { out->id, in->blob_id };
        if (in->owned && gj_db_cmd(conn, own_blob_sql, 2, o) != 0)
            return GJ_SUBMIT_ERROR;
    }
    for (size_t i = 0; i < s->n_refs; i++) {
        int rc = insert_ref(conn, &s->refs[i], &ups[i], out);
        if (rc != GJ_SUBMIT_OK)
            return rc;
    }
    return GJ_SUBMIT_OK;
}

/* out->err for a refusal rc: the answer POST /v1/jobs gives (the one place it is worded). */
static void describe_refusal(int rc, const struct gj_submit *s, struct gj_submitted *out)
{
    char field[160];
    snprintf(field, sizeof field, "inputs.%.100s", out->bad_input ? out->bad_input : "");
    struct gj_error *e = &out->err;
    switch (rc) {
    case GJ_SUBMIT_INPUT_GONE:
        gj_error_status(e, 422, field, "the blob of input '%s' was deleted", out->bad_input);
        break;
    case GJ_SUBMIT_UPSTREAM_GONE:
        gj_error_status(e, 422, field, "the job it names was deleted");
        break;
    case GJ_SUBMIT_NO_OUTPUT:
        gj_error_status(e, 422, field, "the job it names has no such output");
        break;
    case GJ_SUBMIT_UPSTREAM_FAILED:
        gj_error_status(e, 422, field, "the job it names failed or was canceled");
        break;
    case GJ_SUBMIT_CHAIN_TOO_DEEP:
        gj_error_status(e, 422, field, "the job it names waits in a chain of waiting jobs: this one would wait "
                        "more than %d deep (--max-chain-depth); submit it once the chain has run further",
                        s->max_chain_depth);
        break;
    case GJ_SUBMIT_TOO_MANY_WAITING:
        gj_error_status(e, 429, NULL, "%d of this tenant's jobs wait for other jobs' outputs, the most this "
                        "server allows (--max-waiting-jobs-per-tenant); submit this one when some have run",
                        s->max_waiting_jobs);
        break;
    default:   /* a database error; a duplicate key or a lost lease, which callers act on by code */
        gj_error_status(e, 503, NULL, "the job could not be stored");
    }
}

static int submit(PGconn *conn, const struct gj_submit *s, struct gj_submitted *out)
{
    struct upstream *ups = calloc(s->n_refs ? s->n_refs : 1, sizeof *ups);
    if (!ups) {
        gj_log_error(COMPONENT, "submit: out of memory");
        return GJ_SUBMIT_ERROR;
    }
    int own = PQtransactionStatus(conn) == PQTRANS_IDLE;
    if (own && gj_db_begin(conn) != 0) {
        free(ups);
        return GJ_SUBMIT_ERROR;
    }
    int pending = 0, depth = 0;
    int rc = read_upstreams(conn, s, ups, &pending, &depth, out);
    if (rc == GJ_SUBMIT_OK && pending > 0)
        rc = check_waiting(conn, s);
    if (rc == GJ_SUBMIT_OK)
        rc = insert_job(conn, s, pending, depth, out);
    if (rc == GJ_SUBMIT_OK)
        rc = insert_inputs(conn, s, ups, out);
    free(ups);
    out->waiting = rc == GJ_SUBMIT_OK && pending > 0;
    if (own) {
        if (rc == GJ_SUBMIT_OK && gj_db_commit(conn) != 0)
            rc = GJ_SUBMIT_ERROR;
        if (rc != GJ_SUBMIT_OK)
            gj_db_rollback(conn);
    }
    return rc;
}

int gj_queue_submit(PGconn *conn, const struct gj_submit *s, struct gj_submitted *out)
{
    memset(out, 0, sizeof *out);
    int rc = submit(conn, s, out);
    if (rc != GJ_SUBMIT_OK)
        describe_refusal(rc, s, out);
    return rc;
}
