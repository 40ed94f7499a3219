/*
 * provenance_store.c — the SQL of provenance (provenance_store.h): the attempts' environments
 * (written by gj_attempt_record, migration 0022) and the reruns (migration 0017), read with the
 * job's inputs and outputs by digest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/base/log.h"
#include "service/db/db.h"
#include "service/jobs/provenance_store.h"
#include "service/jobs/queue.h"

#define COMPONENT "provenance"
#define TS(c) "to_char(" c " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

/* The inputs of job `j` (an expression) by digest, and the job whose output each was. */
#define INPUTS_JSON(j)                                                                                        \
    "(SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object('name', i.name, 'blob', i.blob_id, "     \
    "'sha256', encode(b.sha256, 'hex'), 'size', b.size, 'content_type', b.content_type, "                     \
    "'job', d.upstream_id, 'output', d.output)) ORDER BY i.name), '[]'::jsonb) "                              \
    "   FROM job_inputs i JOIN blobs b ON b.id = i.blob_id "                                                  \
    "   LEFT JOIN job_dependencies d ON d.job_id = i.job_id AND d.name = i.name WHERE i.job_id = " j ")"

static const char chosen_sql[] =
    "UPDATE job_attempt_environments SET environment = environment || $4::jsonb "
    "WHERE job_id = $1::uuid AND attempt = $2::integer AND stage = $3::integer";

int gj_provenance_record_chosen(PGconn *conn, const struct gj_claim *c, const json_t *chosen)
{
    char *text = json_dumps(chosen, JSON_COMPACT);
    if (!text)
        return -1;
    char attempt[16], stage[16];
    snprintf(attempt, sizeof attempt, "%d", c->attempts);
    snprintf(stage, sizeof stage, "%d", c->stage);
    const char *p[4] = { c->id, attempt, stage, text };
    PGresult *res = gj_db_exec(conn, chosen_sql, 4, p, NULL);
    free(text);
    PQclear(res);
    return res ? 0 : -1;
}

#define JOB_SQL                                                                                              \
    "SELECT jsonb_build_object('id', j.id, 'kind', j.kind, 'params', j.params, "                              \
    "'state', gj_public_state(j.state, j.stage), 'priority', j.priority, 'max_attempts', j.max_attempts, "    \
    "'timeout_seconds', j.timeout_seconds, 'name', j.name, 'labels', j.labels, 'error', j.error, "            \
    "'device', j.device, 'created_at', " TS("j.created_at") ", 'started_at', " TS("j.started_at") ", "        \
    "'finished_at', " TS("j.finished_at") ", 'parent_id', j.parent_id, "                                      \
    "'rerun_of', (SELECT r.rerun_of FROM job_reruns r WHERE r.job_id = j.id), "                               \
    "'tenant', jsonb_build_object('id', t.id, 'name', t.name), "                                              \
    "'attempts', (SELECT coalesce(jsonb_agg(jsonb_build_object('attempt', a.attempt, 'stage', a.stage, "      \
    "    'recorded_at', " TS("a.recorded_at") ", 'worker', a.worker, 'environment', a.environment, "          \
    "    'inputs', a.inputs) ORDER BY a.attempt, a.stage), '[]'::jsonb) "                                     \
    "    FROM job_attempt_environments a WHERE a.job_id = j.id), "                                            \
    "'inputs', " INPUTS_JSON("j.id") ", "                                                                     \
    "'outputs', (SELECT coalesce(jsonb_agg(jsonb_build_object('name', o.name, 'blob', o.blob_id, "            \
    "    'sha256', encode(b.sha256, 'hex'), 'size', b.size, 'content_type', o.content_type) ORDER BY o.name), "\
    "    '[]'::jsonb) FROM job_outputs o JOIN blobs b ON b.id = o.blob_id WHERE o.job_id = j.id))::text "     \
    "FROM jobs j JOIN tenants t ON t.id = j.tenant_id "

/* Appends to arr each row's record; 0, or -1. */
static int append_rows(PGresult *res, json_t *arr)
{
    for (int i = 0; i < PQntuples(res); i++) {
        json_t *o = json_loads(PQgetvalue(res, i, 0), 0, NULL);
        if (!o || json_array_append_new(arr, o))
            return -1;
    }
    return 0;
}

static int load_children(PGconn *conn, const char *job_id, json_t *job)
{
    const char *p[1] = { job_id };
    PGresult *res = gj_db_exec(conn, JOB_SQL "WHERE j.parent_id = $1::uuid ORDER BY j.child_index, j.created_at",
                               1, p, NULL);
    json_t *arr = json_array();
    int rc = res && arr ? append_rows(res, arr) : -1;
    PQclear(res);
    if (rc == 0 && json_object_set_new(job, "children", arr) == 0)
        return 0;
    json_decref(arr);
    return -1;
}

int gj_provenance_load(PGconn *conn, const char *tenant_id, const char *job_id, int with_children,
                       json_t **out)
{
    *out = NULL;
    const char *p[2] = { job_id, tenant_id };
    PGresult *res = gj_db_exec(conn, JOB_SQL "WHERE j.id = $1::uuid AND j.tenant_id = $2::uuid", 2, p, NULL);
    if (!res)
        return -1;
    if (PQntuples(res) == 0) {
        PQclear(res);
        return 0;
    }
    json_t *job = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
    PQclear(res);
    if (!job || (with_children && load_children(conn, job_id, job) != 0)) {
        json_decref(job);
        return -1;
    }
    *out = job;
    return 1;
}

int gj_provenance_rerun_of(PGconn *conn, const char *job_id, char rerun_of[37])
{
    const char *p[1] = { job_id };
    PGresult *res = gj_db_exec(conn, "SELECT rerun_of FROM job_reruns WHERE job_id = $1::uuid", 1, p, NULL);
    if (!res)
        return -1;
    int found = PQntuples(res) > 0;
    if (found)
        snprintf(rerun_of, 37, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return found;
}

int gj_provenance_link_rerun(PGconn *conn, const char *job_id, const char *rerun_of)
{
    const char *p[2] = { job_id, rerun_of };
    return gj_db_cmd(conn, "INSERT INTO job_reruns (job_id, rerun_of) VALUES ($1::uuid, $2::uuid)", 2, p);
}
