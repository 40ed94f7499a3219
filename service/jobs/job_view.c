/*
 * job_view.c — a job as /v1 shows it (GET /v1/jobs/{id}, the listing, what submit, cancel
 * and a rerun answer): its row, inputs and workflow as one JSON object (job_store.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/base/log.h"
#include "service/db/db.h"
#include "service/jobs/job_store_internal.h"
#include "service/jobs/reproduction.h"

#define TS(c) "to_char(" c " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
#define JOB_SELECT                                                                                          \
    "SELECT j.id, j.kind, j.params::text, gj_public_state(j.state, j.stage), j.priority, j.attempts, "      \
    "j.max_attempts, j.progress, j.message, j.error::text, j.device, " TS("j.created_at") ", "             \
    TS("j.started_at") ", " TS("j.finished_at") ", " TS("j.updated_at") ", "                               \
    "(SELECT coalesce(json_object_agg(i.name, i.blob_id ORDER BY i.name), '{}'::json)::text "              \
    "   FROM job_inputs i WHERE i.job_id = j.id), j.state, j.parent_id, j.cancel_requested, "               \
    "gj_job_workflow(j)::text, j.timeout_seconds FROM jobs j "
enum { C_ID, C_KIND, C_PARAMS, C_STATE, C_PRIO, C_ATT, C_MAXATT, C_PROG, C_MSG, C_ERR, C_DEV, C_CREATED,
       C_STARTED, C_FINISHED, C_UPDATED, C_INPUTS, C_ISTATE, C_PARENT, C_CANCEL, C_WORKFLOW, C_TIMEOUT };

static json_t *text_or_null(PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? json_null() : json_string(PQgetvalue(res, row, col));
}

static json_t *json_col(PGresult *res, int row, int col, int object_default)
{
    if (PQgetisnull(res, row, col))
        return object_default ? json_object() : json_null();
    json_t *v = json_loads(PQgetvalue(res, row, col), JSON_DECODE_ANY, NULL);
    return v ? v : (object_default ? json_object() : json_null());
}

static json_t *job_from_row(PGresult *res, int row)
{
    const char *id = PQgetvalue(res, row, C_ID);
    char url[96];
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "kind", json_string(PQgetvalue(res, row, C_KIND)));
    json_object_set_new(o, "state", json_string(PQgetvalue(res, row, C_STATE)));
    json_object_set_new(o, "params", json_col(res, row, C_PARAMS, 1));
    json_object_set_new(o, "priority", json_integer(strtoll(PQgetvalue(res, row, C_PRIO), NULL, 10)));
    json_object_set_new(o, "attempts", json_integer(strtoll(PQgetvalue(res, row, C_ATT), NULL, 10)));
    json_object_set_new(o, "max_attempts", json_integer(strtoll(PQgetvalue(res, row, C_MAXATT), NULL, 10)));
    json_int_t timeout = strtoll(PQgetvalue(res, row, C_TIMEOUT), NULL, 10);
    json_object_set_new(o, "timeout_seconds", timeout > 0 ? json_integer(timeout) : json_null());
    json_object_set_new(o, "progress", json_real(strtod(PQgetvalue(res, row, C_PROG), NULL)));
    json_object_set_new(o, "message", text_or_null(res, row, C_MSG));
    json_object_set_new(o, "error", json_col(res, row, C_ERR, 0));
    json_object_set_new(o, "device", text_or_null(res, row, C_DEV));
    json_object_set_new(o, "created_at", text_or_null(res, row, C_CREATED));
    json_object_set_new(o, "started_at", text_or_null(res, row, C_STARTED));
    json_object_set_new(o, "finished_at", text_or_null(res, row, C_FINISHED));
    json_object_set_new(o, "updated_at", text_or_null(res, row, C_UPDATED));
    json_object_set_new(o, "inputs", json_col(res, row, C_INPUTS, 1));
    if (!PQgetisnull(res, row, C_PARENT))
        json_object_set_new(o, "parent_id", json_string(PQgetvalue(res, row, C_PARENT)));
    snprintf(url, sizeof url, "/v1/jobs/%s/outputs", id);
    json_object_set_new(o, "outputs_url", json_string(url));
    snprintf(url, sizeof url, "/v1/jobs/%s/events", id);
    json_object_set_new(o, "events_url", json_string(url));
    json_t *wf = json_col(res, row, C_WORKFLOW, 1);   /* name, labels, inputs_from, callback, log_url */
    json_object_update(o, wf);
    json_decref(wf);
    return o;
}

int gj_job_read(PGconn *c, const char *tenant_id, const char *job_id, json_t **job, char state[16])
{
    const char *p[2] = { job_id, tenant_id };
    PGresult *res = gj_db_exec_prepared(c, "gj_job_fetch", JOB_SELECT "WHERE j.id = $1::uuid AND j.tenant_id = $2::uuid",
                                        2, p, NULL);
    if (!res)
        return -1;
    if (PQntuples(res) == 0) {
        PQclear(res);
        return 0;
    }
    if (job)
        *job = job_from_row(res, 0);
    if (job && gj_reproduction_annotate(c, tenant_id, *job) < 0)
        gj_log_warn("jobs", "job %s: cannot tell what it reruns", job_id);   /* the job is answered all the same */
    if (state)
        snprintf(state, 16, "%s", PQgetvalue(res, 0, C_STATE));
    PQclear(res);
    return 1;
}

int gj_job_list(PGconn *c, const char *tenant_id, const struct gj_job_filter *f, json_t **jobs,
                char last_created[40], char last_id[GJ_UUID_LEN + 1], struct gj_error *err)
{
    *jobs = NULL;
    last_created[0] = last_id[0] = '\0';
    char lim[24];
    snprintf(lim, sizeof lim, "%ld", f->limit + 1);   /* one more: whether a next page follows */
    const char *p[10] = { tenant_id, f->state, f->kind, f->created_after, f->created_before, f->cursor_created,
                          f->cursor_id, lim, f->name, f->labels };
    char sqlstate[6] = "";
    PGresult *res = gj_db_exec(c,
                               JOB_SELECT "WHERE j.tenant_id = $1::uuid AND j.parent_id IS NULL"
                               " AND ($2::text IS NULL OR gj_public_state(j.state, j.stage) = $2)"
                               " AND ($3::text IS NULL OR j.kind = $3)"
                               " AND ($4::timestamptz IS NULL OR j.created_at > $4::timestamptz)"
                               " AND ($5::timestamptz IS NULL OR j.created_at < $5::timestamptz)"
                               " AND ($6::timestamptz IS NULL OR (j.created_at, j.id) < ($6::timestamptz, $7::uuid))"
                               " AND ($9::text IS NULL OR j.name = $9)"
                               " AND ($10::jsonb IS NULL OR j.labels @> $10::jsonb)"
                               " ORDER BY j.created_at DESC, j.id DESC LIMIT $8::int",
                               10, p, sqlstate);
    if (!res) {
        if (strncmp(sqlstate, "22", 2) == 0)
            return gj_error_status(err, 400, NULL, "a query parameter is out of range or not valid text");
        return gj_job_store_unavailable(err);
    }
    int n = PQntuples(res);
    json_t *arr = json_array();
    for (int i = 0; i < n && i < f->limit; i++)
        json_array_append_new(arr, job_from_row(res, i));
    if (n > f->limit) {
        snprintf(last_created, 40, "%s", PQgetvalue(res, (int)f->limit - 1, C_CREATED));
        snprintf(last_id, GJ_UUID_LEN + 1, "%s", PQgetvalue(res, (int)f->limit - 1, C_ID));
    }
    PQclear(res);
    *jobs = arr;
    return 0;
}
