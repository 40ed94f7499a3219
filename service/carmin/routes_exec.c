/*
 * routes_exec.c — CARMIN's /rest/executions: list, count, one, its results, its stdout and
 * stderr (the job's log: every line, or warnings and errors), its new name and timeout, play (nothing to do: the job
 * was queued at creation), kill (cancel), delete (with ?deleteFiles=true, its result files).
 * POST is exec_submit.c. Another tenant's execution is "no such execution".
 */
#include <stdlib.h>
#include <string.h>

#include "service/carmin/carmin.h"
#include "service/carmin/carmin_routes.h"
#include "service/carmin/carmin_exec.h"
#include "service/carmin/carmin_fs.h"
#include "service/db/db.h"
#include "service/jobs/job_fields.h"
#include "service/jobs/job_store.h"
#include "service/base/uuid.h"

#define DEFAULT_LIMIT 500

const char *carmin_exec_status(const char *s)
{
    static const char *const map[][2] = { { "waiting", "Initializing" },
                                          { "queued", "Ready" },         { "running", "Running" },
                                          { "succeeded", "Finished" },   { "failed", "ExecutionFailed" },
                                          { "canceled", "Killed" } };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(s, map[i][0]) == 0)
            return map[i][1];
    return "Unknown";
}

/* The execution's own row; its job's public columns come from the job store. */
#define EXEC_SELECT                                                                                          \
    "SELECT e.job_id, e.name, e.pipeline, e.input_values::text, e.results_location, e.results_placed"     \
    " FROM carmin_executions e WHERE e.tenant_id = $1::uuid"

static json_t *exec_json(PGresult *res, int i, const struct gj_job_times *t)
{
    const char *id = PQgetvalue(res, i, 0), *status = carmin_exec_status(t->state);
    json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:s, s:I, s:s}", "identifier", id, "name", PQgetvalue(res, i, 1),
                          "pipelineIdentifier", PQgetvalue(res, i, 2), "inputValues",
                          json_loads(PQgetvalue(res, i, 3), 0, NULL), "status", status, "startDate",
                          (json_int_t)t->started, "resultsLocation", PQgetvalue(res, i, 4));
    if (!o)
        return NULL;
    if (t->finished >= 0)
        json_object_set_new(o, "endDate", json_integer(t->finished));
    if (strcmp(status, "ExecutionFailed") == 0)
        json_object_set_new(o, "errorCode", json_integer(CARMIN_INTERNAL));
    if (t->timeout_seconds > 0)   /* 0: none, which CARMIN says by leaving it out */
        json_object_set_new(o, "timeout", json_integer(t->timeout_seconds));
    if (PQgetvalue(res, i, 5)[0] == 't')   /* once placed: the result files, as content URLs */
        json_object_set_new(o, "returnedFiles", json_object());
    return o;
}

/* returnedFiles: {"results": [URL of each placed file]}. */
static int add_returned(PGconn *c, const char *tenant, json_t *e)
{
    json_t *rf = json_object_get(e, "returnedFiles");
    if (!rf)
        return 0;
    json_t *files = carmin_fs_describe(c, tenant, json_string_value(json_object_get(e, "identifier")),
                                       CARMIN_OF_EXECUTION);
    if (!files)
        return -1;
    json_t *urls = json_array(), *f;
    size_t i;
    json_array_foreach(files, i, f) {
        if (json_is_false(json_object_get(f, "isDirectory"))) {
            char url[CARMIN_PATH_MAX + 40];
            snprintf(url, sizeof url, "/rest/path%s?action=content",
                     json_string_value(json_object_get(f, "platformPath")));
            json_array_append_new(urls, json_string(url));
        }
    }
    json_decref(files);
    json_object_set_new(rf, "results", urls);
    return 0;
}

json_t *carmin_exec_read(PGconn *c, const char *tenant, const char *id)
{
    if (!gj_is_uuid(id))
        return json_null();
    if (carmin_exec_place_results(c, tenant, id) != 0)
        return NULL;
    const char *p[2] = { tenant, id };
    PGresult *res = gj_db_exec(c, EXEC_SELECT " AND e.job_id = $2::uuid", 2, p, NULL);
    if (!res)
        return NULL;
    struct gj_job_times t;
    int found = PQntuples(res) == 1 ? gj_job_times_read(c, tenant, id, &t) : 0;
    json_t *e = found > 0 ? exec_json(res, 0, &t) : found == 0 ? json_null() : NULL;
    PQclear(res);
    if (e && add_returned(c, tenant, e) != 0) {
        json_decref(e);
        return NULL;
    }
    return e;
}

/* The execution of the path, or NULL answered. */
static json_t *find(struct gj_req *r, PGconn **out)
{
    PGconn *c = *out = gj_req_db(r);
    json_t *e = c ? carmin_exec_read(c, r->who.tenant_id, r->params[0]) : NULL;
    if (!e)
        carmin_unavailable(r);
    else if (json_is_null(e))
        carmin_error(r, CARMIN_NOT_FOUND, "no execution %s", r->params[0]);
    if (e && json_is_null(e)) {
        json_decref(e);
        return NULL;
    }
    return e;
}

static void exec_get(struct gj_req *r)
{
    PGconn *c;
    json_t *e = find(r, &c);
    if (e)
        gj_respond_json(r, 200, e);
}

/* ?offset, ?limit: 0, or -1 answered. */
static int paging(struct gj_req *r, char offset[24], char limit[24])
{
    const char *o = gj_req_query(r, "offset"), *l = gj_req_query(r, "limit");
    char *end;
    long long ov = o ? strtoll(o, &end, 10) : 0, lv = l ? strtoll(l, &end, 10) : DEFAULT_LIMIT;
    if ((o && (!*o || strspn(o, "0123456789") != strlen(o))) || (l && (!*l || strspn(l, "0123456789") != strlen(l))) ||
        ov > 1000000000 || lv < 1 || lv > DEFAULT_LIMIT) {
        carmin_error(r, CARMIN_BAD_REQUEST, "offset is a number from 0, limit from 1 to %d", DEFAULT_LIMIT);
        return -1;
    }
    snprintf(offset, 24, "%lld", ov);
    snprintf(limit, 24, "%lld", lv);
    return 0;
}

static void exec_list(struct gj_req *r)
{
    char offset[24], limit[24];
    if (paging(r, offset, limit) != 0)
        return;
    PGconn *c = gj_req_db(r);
    const char *p[3] = { r->who.tenant_id, offset, limit };
    PGresult *res = c ? gj_db_exec(c, "SELECT e.job_id FROM carmin_executions e WHERE e.tenant_id = $1::uuid"
                                      " ORDER BY e.created_at DESC, e.job_id OFFSET $2::bigint LIMIT $3::int",
                                   3, p, NULL)
                      : NULL;
    json_t *a = json_array();
    for (int i = 0; res && a && i < PQntuples(res); i++) {
        json_t *e = carmin_exec_read(c, r->who.tenant_id, PQgetvalue(res, i, 0));
        if (!e || json_is_null(e)) {   /* deleted meanwhile: skipped; an error: stop */
            int err = !e;
            json_decref(e);
            if (err) {
                json_decref(a);
                a = NULL;
            }
            continue;
        }
        json_array_append_new(a, e);
    }
    PQclear(res);
    if (!res || !a) {
        json_decref(a);
        carmin_unavailable(r);
        return;
    }
    gj_respond_json(r, 200, a);
}

static void exec_count(struct gj_req *r)
{
    PGconn *c = gj_req_db(r);
    const char *p[1] = { r->who.tenant_id };
    PGresult *res = c ? gj_db_exec(c, "SELECT count(*) FROM carmin_executions WHERE tenant_id = $1::uuid", 1, p,
                                   NULL)
                      : NULL;
    if (!res) {
        carmin_unavailable(r);
        return;
    }
    char text[24];
    snprintf(text, sizeof text, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_COPY);
    if (!resp) {
        carmin_error(r, CARMIN_INTERNAL, "out of memory");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    gj_respond(r, 200, resp, strlen(text));
}

static void exec_results(struct gj_req *r)
{
    PGconn *c;
    json_t *e = find(r, &c);
    if (!e)
        return;
    json_decref(e);
    json_t *files = carmin_fs_describe(c, r->who.tenant_id, r->params[0], CARMIN_OF_EXECUTION);
    json_t *only = json_array(), *f;
    size_t i;
    json_array_foreach(files, i, f)
        if (json_is_false(json_object_get(f, "isDirectory")))
            json_array_append(only, f);
    json_decref(files);
    if (!files)
        carmin_unavailable(r);
    else
        gj_respond_json(r, 200, only);
    if (!files)
        json_decref(only);
}

/* The job's log as text (stderr: warnings and errors only), at most its 10000 lines. */
static void exec_log(struct gj_req *r, int errors_only)
{
    PGconn *c;
    json_t *e = find(r, &c);
    if (!e)
        return;
    json_decref(e);
    char *text;
    size_t n;
    if (gj_job_log_text(c, r->params[0], errors_only, &text, &n) != 0) {
        carmin_unavailable(r);
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        carmin_error(r, CARMIN_INTERNAL, "out of memory");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    gj_http_user_bytes(resp, 0, NULL);
    gj_respond(r, 200, resp, n);
}

static void exec_stdout(struct gj_req *r)
{
    exec_log(r, 0);
}

static void exec_stderr(struct gj_req *r)
{
    exec_log(r, 1);
}

/* PUT /play: the job was queued when the execution was created. */
static void exec_play(struct gj_req *r)
{
    PGconn *c;
    json_t *e = find(r, &c);
    if (e)
        gj_respond_empty(r, 204);
    json_decref(e);
}

static void exec_kill(struct gj_req *r)
{
    PGconn *c;
    json_t *e = find(r, &c);
    if (!e)
        return;
    json_decref(e);
    int rc = gj_job_cancel(c, r->srv->job_cache, r->who.tenant_id, r->params[0]);
    if (rc < 0)
        carmin_unavailable(r);
    else if (rc == 0)
        carmin_error(r, CARMIN_CONFLICT, "execution %s has already ended", r->params[0]);
    else
        gj_respond_empty(r, 204);
}

/* PUT's body: the name (1 to 200 characters) and timeout (as POST's) that change, the same
 * identifier and status if given (the rest is ignored, as the spec says). NULL when bad. */
static const char *update_problem(json_t *b, json_t *e)
{
    const char *name = json_string_value(json_object_get(b, "name"));
    json_t *id = json_object_get(b, "identifier"), *st = json_object_get(b, "status"), *t = json_object_get(b, "timeout");
    if (!json_is_object(b) || (json_object_get(b, "name") && gj_job_name_problem(name)) ||
        (id && !json_equal(id, json_object_get(e, "identifier"))) ||
        (st && !json_equal(st, json_object_get(e, "status"))))
        return "only the name (1 to 200 characters, no control characters) and the timeout of an execution "
               "can change";
    if (t && !carmin_exec_timeout_ok(t))
        return CARMIN_TIMEOUT_RULE;
    return NULL;
}

/* PUT: the name (the job's too) and the timeout change, in one transaction. */
static void exec_update(struct gj_req *r)
{
    PGconn *c;
    json_t *e = find(r, &c), *b = r->json;
    if (!e)
        return;
    const char *why = update_problem(b, e);
    json_decref(e);
    if (why) {
        carmin_error(r, CARMIN_BAD_REQUEST, "%s", why);
        return;
    }
    const char *name = json_string_value(json_object_get(b, "name"));
    json_t *t = json_object_get(b, "timeout");
    const char *p[3] = { r->params[0], r->who.tenant_id, name };
    struct gj_error err = { 0 };
    int rc = gj_db_begin(c) == 0 ? 0 : gj_error_status(&err, 503, NULL, "the database is unavailable");
    if (rc == 0 && name &&
        (gj_db_cmd(c, "UPDATE carmin_executions SET name = $3 WHERE job_id = $1::uuid AND tenant_id = $2::uuid",
                   3, p) != 0 ||
         gj_job_rename(c, r->srv->job_cache, r->who.tenant_id, r->params[0], name, &err) != 0))
        rc = err.status ? -1 : gj_error_status(&err, 503, NULL, "the database is unavailable");
    if (rc == 0 && t &&
        gj_job_set_timeout(c, r->srv->job_cache, r->who.tenant_id, r->params[0], (int)json_integer_value(t), &err) != 0)
        rc = -1;
    if (rc == 0 && gj_db_commit(c) == 0) {
        gj_respond_empty(r, 204);
        return;
    }
    gj_db_rollback(c);
    if (rc == 0)
        gj_error_status(&err, 503, NULL, "the database is unavailable");
    if (err.status == 409)
        carmin_error(r, CARMIN_CONFLICT, "the timeout of an execution can change only before it runs");
    else
        carmin_respond_error(r, &err);
}

/* DELETE: the job's delete rule (job_store.h, as DELETE /v1/jobs/{id}): 204 the execution
 * and its job are gone; 202 it was running: canceled, and both go once it has stopped.
 * ?deleteFiles=true: its result files too, at once. */
static void exec_delete(struct gj_req *r)
{
    const char *df = gj_req_query(r, "deleteFiles");
    if (df && strcmp(df, "true") != 0 && strcmp(df, "false") != 0) {
        carmin_error(r, CARMIN_BAD_REQUEST, "deleteFiles is true or false");
        return;
    }
    PGconn *c;
    json_t *e = find(r, &c);
    if (!e)
        return;
    json_decref(e);
    struct gj_error err = { 0 };
    enum gj_job_deleted how;
    int rc = gj_db_begin(c) == 0 ? 0 : gj_error_status(&err, 503, NULL, "the database is unavailable");
    if (rc == 0 && df && strcmp(df, "true") == 0 && carmin_fs_delete_execution(c, r->who.tenant_id, r->params[0]) < 0)
        rc = gj_error_status(&err, 503, NULL, "the database is unavailable");
    if (rc == 0)
        rc = gj_job_delete(c, r->srv->job_cache, r->who.tenant_id, r->params[0], &how, &err);
    if (rc == 0 && gj_db_commit(c) == 0) {
        gj_respond_empty(r, how == GJ_JOB_DELETED ? 204 : 202);
        return;
    }
    gj_db_rollback(c);
    if (rc == 0)
        gj_error_status(&err, 503, NULL, "the database is unavailable");
    carmin_respond_error(r, &err);
}

#define EXEC "/rest/executions/{executionIdentifier}"
static const struct gj_route exec_routes[] = {
    { "GET", "/rest/executions", GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, exec_list, NULL },
    { "POST", "/rest/executions", GJ_AUTH_NONE, GJ_BODY_JSON, carmin_begin, NULL, carmin_exec_create, NULL },
    { "GET", "/rest/executions/count", GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, exec_count, NULL },
    { "GET", EXEC, GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, exec_get, NULL },
    { "PUT", EXEC, GJ_AUTH_NONE, GJ_BODY_JSON, carmin_begin, NULL, exec_update, NULL },
    { "DELETE", EXEC, GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, exec_delete, NULL },
    { "GET", EXEC "/results", GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, exec_results, NULL },
    { "GET", EXEC "/stdout", GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, exec_stdout, NULL },
    { "GET", EXEC "/stderr", GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, exec_stderr, NULL },
    { "PUT", EXEC "/play", GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, exec_play, NULL },
    { "PUT", EXEC "/kill", GJ_AUTH_NONE, GJ_BODY_NONE, carmin_begin, NULL, exec_kill, NULL },
};
const struct gj_route_table gj_routes_carmin_exec = { exec_routes, sizeof exec_routes / sizeof exec_routes[0] };
