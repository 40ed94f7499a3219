/*
 * exec_results.c — a succeeded execution's outputs, placed under its resultsLocation
 * (carmin_exec.h).
 */
#include <stdio.h>
#include <string.h>

#include "service/carmin/carmin.h"
#include "service/carmin/carmin_exec.h"
#include "service/carmin/carmin_fs.h"
#include "service/db.h"

/* In the open transaction, the execution row locked: each output to loc/<name>. 0 or -1. */
static int place(PGconn *c, const char *tenant, const char *id, const char *loc)
{
    const char *p[1] = { id };
    PGresult *res = gj_db_exec(c, "SELECT name, blob_id FROM job_outputs WHERE job_id = $1::uuid ORDER BY name", 1,
                               p, NULL);
    if (!res)
        return -1;
    struct carmin_entry e;
    int rc = carmin_fs_stat(c, tenant, loc, &e);
    if (rc == 0 || (rc > 0 && !e.is_dir))   /* made again if it was deleted meanwhile */
        rc = carmin_fs_put(c, tenant, loc, NULL, id);
    else
        rc = rc < 0 ? -1 : 0;
    for (int i = 0; rc == 0 && i < PQntuples(res); i++) {
        char path[CARMIN_PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", loc, PQgetvalue(res, i, 0)) >= (int)sizeof path)
            continue;   /* cannot be named here: it stays a job output */
        rc = carmin_fs_put(c, tenant, path, PQgetvalue(res, i, 1), id);
    }
    PQclear(res);
    if (rc == 0)
        rc = gj_db_cmd(c, "UPDATE blobs SET owner_job = NULL WHERE id IN (SELECT blob_id FROM carmin_paths"
                          " WHERE execution_id = $1::uuid) AND owner_job = $1::uuid", 1, p);
    if (rc == 0)
        rc = gj_db_cmd(c, "UPDATE carmin_executions SET results_placed = true WHERE job_id = $1::uuid", 1, p);
    return rc;
}

int carmin_exec_place_results(PGconn *c, const char *tenant, const char *id)
{
    const char *p[2] = { id, tenant };
    if (gj_db_begin(c) != 0)
        return -1;
    PGresult *res = gj_db_exec(c, "SELECT e.results_location FROM carmin_executions e JOIN jobs j ON j.id = e.job_id"
                                  " WHERE e.job_id = $1::uuid AND e.tenant_id = $2::uuid AND NOT e.results_placed"
                                  " AND j.state = 'succeeded' FOR UPDATE OF e",
                               2, p, NULL);
    int rc = res ? 0 : -1;
    if (res && PQntuples(res) == 1) {
        char loc[CARMIN_PATH_MAX];
        snprintf(loc, sizeof loc, "%s", PQgetvalue(res, 0, 0));
        rc = place(c, tenant, id, loc);
    }
    PQclear(res);
    if (rc == 0 && gj_db_commit(c) == 0)
        return 0;
    gj_db_rollback(c);
    return -1;
}
