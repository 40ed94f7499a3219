/*
 * job_reads.c — what the routes read of a job beyond its row: an output, the outputs, the
 * event stream's state and history, the log's head and text, the portal's changed jobs and
 * the counts metrics show (job_store.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/base/log.h"
#include "service/base/uuid.h"
#include "service/db/db.h"
#include "service/jobs/job_store_internal.h"

int gj_job_output_find(PGconn *c, const char *tenant_id, const char *job_id, const char *name,
                       char blob_id[GJ_UUID_LEN + 1], char *content_type, size_t ctype_n, struct gj_error *err)
{
    if (!gj_is_uuid(job_id) || !tenant_id || !gj_is_uuid(tenant_id))
        return gj_job_store_not_found(err, job_id);
    const char *p[3] = { job_id, tenant_id, name };
    PGresult *res = gj_db_exec(c,
                               "SELECT o.blob_id, o.content_type FROM job_outputs o JOIN jobs j ON j.id = o.job_id"
                               " WHERE j.id = $1::uuid AND j.tenant_id = $2::uuid AND o.name = $3",
                               3, p, NULL);
    if (!res)
        return gj_job_store_unavailable(err);
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
        gj_log_error(GJ_JOB_STORE_LOG, "job %s: log text: out of memory", job_id);
    return *text ? 0 : -1;
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
        gj_log_error(GJ_JOB_STORE_LOG, "job counts: out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        enum gj_job_state s;
        long long count = atoll(PQgetvalue(res, i, 3));
        if (gj_job_state_parse(PQgetvalue(res, i, 1), &s) != 0) {
            gj_log_warn(GJ_JOB_STORE_LOG, "job counts: unknown stored state %s", PQgetvalue(res, i, 1));
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

int gj_job_created_at(PGconn *c, const char *job_id, char out[64])
{
    out[0] = '\0';
    const char *p[1] = { job_id };
    PGresult *res = gj_db_exec(c, "SELECT created_at::text FROM jobs WHERE id = $1::uuid", 1, p, NULL);
    if (!res)
        return -1;
    int found = PQntuples(res) == 1;
    if (found)
        snprintf(out, 64, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return found;
}

int gj_job_times_read(PGconn *c, const char *tenant_id, const char *job_id, struct gj_job_times *out)
{
    const char *p[2] = { tenant_id, job_id };
    PGresult *res = gj_db_exec(c,
                               "SELECT gj_public_state(state, stage),"
                               " extract(epoch FROM coalesce(started_at, created_at))::bigint,"
                               " extract(epoch FROM finished_at)::bigint, timeout_seconds"
                               " FROM jobs WHERE id = $2::uuid AND tenant_id = $1::uuid",
                               2, p, NULL);
    if (!res)
        return -1;
    int found = PQntuples(res) == 1;
    if (found) {
        snprintf(out->state, sizeof out->state, "%s", PQgetvalue(res, 0, 0));
        out->started = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
        out->finished = PQgetisnull(res, 0, 2) ? -1 : strtoll(PQgetvalue(res, 0, 2), NULL, 10);
        out->timeout_seconds = atoi(PQgetvalue(res, 0, 3));
    }
    PQclear(res);
    return found;
}
