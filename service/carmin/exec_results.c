/*
 * exec_results.c — a succeeded execution's outputs, placed under its resultsLocation
 * (carmin_exec.h).
 */
#include <stdio.h>
#include <string.h>

#include "service/carmin/carmin.h"
#include "service/carmin/carmin_exec.h"
#include "service/carmin/carmin_fs.h"
#include "service/db/db.h"
#include "service/jobs/job_store.h"

/* The directory the results go to: want, made at the execution's creation, while it is a
 * directory; else a fresh one of a free name beside it (want is now a file of the user's),
 * or where it was (made again with its parents; under home when a file is in the way).
 * Nothing of the user's is replaced. 0 (out filled) or -1. */
static int results_dir(PGconn *c, const char *tenant, const char *id, const char *want, char out[CARMIN_PATH_MAX])
{
    struct carmin_entry e;
    char parent[CARMIN_PATH_MAX];
    int rc = carmin_fs_stat(c, tenant, want, &e);
    if (rc < 0)
        return -1;
    if (rc > 0 && e.is_dir) {
        snprintf(out, CARMIN_PATH_MAX, "%s", want);
        return 0;
    }
    carmin_path_parent(want, parent);
    if (rc == 0) {   /* deleted meanwhile: made again with its parents, under home when a file is in the way */
        rc = carmin_fs_mkdirs(c, tenant, parent);
        if (rc < 0)
            return -1;
        if (rc > 0)
            snprintf(parent, sizeof parent, "%s", CARMIN_HOME);
    }   /* else want is a file of the user's now: a fresh directory beside it */
    return carmin_fs_create_free(c, tenant, parent, strrchr(want, '/') + 1, NULL, id, out) == 0 ? 0 : -1;
}

/* In the open transaction, the execution row locked: each output to <dir>/<name>, or to a
 * free variant of the name when the user has put something there. 0 or -1. */
static int place(PGconn *c, const char *tenant, const char *id, const char *want)
{
    const char *p[1] = { id };
    char dir[CARMIN_PATH_MAX];
    int rc = results_dir(c, tenant, id, want, dir);
    json_t *outputs = rc == 0 ? gj_job_outputs_read(c, id) : NULL;
    if (!outputs)
        return -1;
    for (size_t i = 0; rc >= 0 && i < json_array_size(outputs); i++) {
        char path[CARMIN_PATH_MAX];   /* no free name: it stays a job output (rc 1) */
        json_t *o = json_array_get(outputs, i);
        rc = carmin_fs_create_free(c, tenant, dir, json_string_value(json_object_get(o, "name")),
                                   json_string_value(json_object_get(o, "blob_id")), id, path);
    }
    json_decref(outputs);
    if (rc >= 0)
        rc = gj_db_cmd(c, "UPDATE blobs SET owner_job = NULL WHERE id IN (SELECT blob_id FROM carmin_paths"
                          " WHERE execution_id = $1::uuid) AND owner_job = $1::uuid", 1, p);
    if (rc == 0)
        rc = gj_db_cmd(c, "UPDATE carmin_executions SET results_placed = true WHERE job_id = $1::uuid", 1, p);
    return rc;
}

int carmin_exec_place_results(PGconn *c, const char *tenant, const char *id)
{
    const char *p[2] = { id, tenant };
    struct gj_job_status st;
    struct gj_error err;
    if (gj_db_begin(c) != 0)
        return -1;
    int known = gj_job_status_read(c, tenant, id, 0, &st, &err);
    if (known != 0 || st.state != GJ_JOB_SUCCEEDED) {    /* a succeeded job's outputs only */
        gj_db_rollback(c);
        return known != 0 && err.status != 404 ? -1 : 0;
    }
    PGresult *res = gj_db_exec(c, "SELECT coalesce(e.results_dir, e.results_location) FROM carmin_executions e"
                                  " WHERE e.job_id = $1::uuid AND e.tenant_id = $2::uuid AND NOT e.results_placed"
                                  " FOR UPDATE OF e",
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
