/*
 * job_inputs.c — a job's inputs seen from other requests: a submit's Idempotency-Key and its
 * inputs from other jobs' outputs, a deleted blob let go by the jobs that took it, a module's
 * purge of a job's own inputs and blobs (job_store.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/base/log.h"
#include "service/base/uuid.h"
#include "service/db/db.h"
#include "service/jobs/job_store_internal.h"

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
        return gj_job_store_unavailable(err);
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

int gj_job_inputs_release_blob(PGconn *c, const char *blob_id, struct gj_error *err)
{
    char finals[128];
    gj_job_states_array(gj_job_state_final, finals, sizeof finals);
    const char *p[2] = { blob_id, finals };
    PGresult *res = gj_db_exec(c,
                               "SELECT j.id FROM job_inputs i JOIN jobs j ON j.id = i.job_id"
                               " WHERE i.blob_id = $1::uuid AND NOT j.state = ANY($2::text[]) LIMIT 1",
                               2, p, NULL);
    if (!res)
        return gj_job_store_unavailable(err);
    if (PQntuples(res) > 0) {
        gj_error_status(err, 409, NULL, "job %s, not finished yet, uses this blob", PQgetvalue(res, 0, 0));
        PQclear(res);
        return -1;
    }
    PQclear(res);
    return gj_db_cmd(c, "DELETE FROM job_inputs WHERE blob_id = $1::uuid", 1, p) == 0 ? 0 : gj_job_store_unavailable(err);
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

int gj_job_blobs_settle(PGconn *c, const char *tenant_id, const char *ids)
{
    const char *p[2] = { tenant_id, ids };
    if (gj_db_cmd(c, "DELETE FROM blobs b WHERE b.id = ANY ($2::uuid[]) AND b.tenant_id = $1::uuid"
                     " AND b.owner_job IS NULL"
                     " AND NOT EXISTS (SELECT 1 FROM job_inputs i WHERE i.blob_id = b.id)"
                     " AND NOT EXISTS (SELECT 1 FROM job_outputs o WHERE o.blob_id = b.id)",
                  2, p) != 0)
        return -1;
    return gj_db_cmd(c, "UPDATE blobs b SET owner_job = coalesce("
                        " (SELECT o.job_id FROM job_outputs o WHERE o.blob_id = b.id ORDER BY o.job_id LIMIT 1),"
                        " (SELECT i.job_id FROM job_inputs i WHERE i.blob_id = b.id ORDER BY i.job_id LIMIT 1))"
                        " WHERE b.id = ANY ($2::uuid[]) AND b.tenant_id = $1::uuid AND b.owner_job IS NULL",
                     2, p);
}
