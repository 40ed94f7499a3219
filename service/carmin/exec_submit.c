/*
 * exec_submit.c — POST /rest/executions: a CARMIN execution becomes a job of the pipeline's
 * kind (gj_queue_submit), its File inputs the blobs of the tenant's files (no bytes copied),
 * its `params` input the job's params. Its results go to a directory of its own made now,
 * <resultsLocation>/<execution id> (resultsLocation made too when missing, as VIP does), or
 * by default /vip/Home/<execution id>; exec_results.c places them there, never over a path
 * of the user's. The job is queued at once: CARMIN's play has nothing left to start. Its
 * timeout is the job's timeout_seconds (absent: the server's --job-timeout-seconds): a run past it is
 * stopped and the execution fails; its files are kept, not deleted as the spec has it
 * (nothing a user uploaded or a job produced is lost). Its checks fill a struct gj_error;
 * carmin_exec_create answers a refusal once (carmin_respond_error).
 */
#include <stdlib.h>
#include <string.h>

#include "common/gj_kind.h"
#include "service/db/blobstore.h"
#include "service/carmin/carmin.h"
#include "service/carmin/carmin_exec.h"
#include "service/carmin/carmin_fs.h"
#include "service/db/db.h"
#include "service/jobs/host_admission.h"
#include "service/jobs/job_fields.h"
#include "service/jobs/queue.h"

#define MAX_FILES 64

struct exec_req {
    const struct gj_kind *kind;
    json_t *params;                      /* owned */
    struct gj_input in[MAX_FILES];
    struct gj_submit_input sub[MAX_FILES];
    char names[MAX_FILES][80];
    char blobs[MAX_FILES][GJ_UUID_LEN + 1];
    size_t n;
    char results[CARMIN_PATH_MAX];       /* "" : the default */
    int timeout;                         /* seconds; 0: none */
};

/* One File input: a path of the tenant's space. 0, or -1 with err filled. */
static int add_file(PGconn *c, const char *tenant, struct exec_req *q, const char *name, json_t *v,
                    struct gj_error *err)
{
    char path[CARMIN_PATH_MAX];
    const char *s = json_string_value(v);
    struct carmin_entry e;
    struct gj_blob_info info;
    if (q->n >= MAX_FILES)
        return gj_error_status(err, 400, NULL, "at most %d input files", MAX_FILES);
    if (!s || carmin_path_normalize(s[0] == '/' ? s + 1 : s, path) != 0)
        return gj_error_status(err, 400, NULL, "input %s is the path of a file under %s", name, CARMIN_HOME);
    int rc = carmin_fs_stat(c, tenant, path, &e);
    if (rc > 0 && !e.is_dir)
        rc = gj_blob_lookup(c, tenant, e.blob_id, &info);
    else if (rc > 0)
        rc = 0;
    if (rc < 0)
        return gj_error_status(err, 503, NULL, "the database is unavailable");
    if (rc == 0)
        return gj_error_status(err, 404, NULL, "input %s: no file %s", name, path);
    size_t i = q->n++;
    snprintf(q->names[i], sizeof q->names[i], "%s", name);
    snprintf(q->blobs[i], sizeof q->blobs[i], "%s", e.blob_id);
    q->in[i] = (struct gj_input){ q->names[i], NULL, info.size };
    q->sub[i] = (struct gj_submit_input){ q->names[i], q->blobs[i], 0 };
    return 0;
}

/* A kind's input from inputValues: one path, or several for an input that repeats. */
static int add_input(PGconn *c, const char *tenant, struct exec_req *q, const struct gj_input_spec *spec,
                     json_t *v, struct gj_error *err)
{
    if (!json_is_array(v))
        return add_file(c, tenant, q, spec->name, v, err);
    if (!spec->multiple || json_array_size(v) == 0)
        return gj_error_status(err, 400, NULL, "input %s takes one path", spec->name);
    for (size_t i = 0; i < json_array_size(v); i++) {
        char name[80];
        snprintf(name, sizeof name, i ? "%s.%zu" : "%s", spec->name, i);
        if (add_file(c, tenant, q, name, json_array_get(v, i), err) != 0)
            return -1;
    }
    return 0;
}

static const struct gj_input_spec *input_spec(const struct gj_kind *k, const char *name)
{
    for (size_t i = 0; i < k->n_inputs; i++)
        if (strcmp(k->inputs[i].name, name) == 0)
            return &k->inputs[i];
    return NULL;
}

/* inputValues: the kind's File inputs and `params` (a JSON text or an object). 0, or -1
 * with err filled. */
static int read_inputs(PGconn *c, const char *tenant, struct exec_req *q, json_t *values, struct gj_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(values, key, v) {
        const struct gj_input_spec *spec = input_spec(q->kind, key);
        if (strcmp(key, "params") == 0) {
            q->params = json_is_string(v) ? json_loads(json_string_value(v), 0, NULL) : json_incref(v);
            if (!json_is_object(q->params))
                return gj_error_status(err, 400, NULL, "params is a JSON object (or its text)");
        } else if (!spec) {
            return gj_error_status(err, 400, NULL, "pipeline %s has no parameter %s", q->kind->name, key);
        } else if (add_input(c, tenant, q, spec, v, err) != 0) {
            return -1;
        }
    }
    if (!q->params && !(q->params = json_object()))
        return gj_error_status(err, 500, NULL, "out of memory");
    return 0;
}

/* The kind's checks, as POST /v1/jobs makes them. 0, or -1 with err filled (CARMIN says
 * which field in the message). */
static int kind_check(PGconn *c, struct exec_req *q, struct gj_error *err)
{
    struct gj_job job = { q->kind->name, q->params, q->in, q->n };
    struct gj_error why;
    gj_error_clear(&why);
    int rc = gj_kind_validate(q->kind, &job, &why);
    if (rc == 0 && (rc = gj_host_admit(c, q->kind, &job, &why)) < 0)
        return gj_error_status(err, 503, NULL, "the database is unavailable");
    if (rc != 0)
        return gj_error_status(err, 400, NULL, "%s%s%s", why.field, why.field[0] ? ": " : "",
                               why.message[0] ? why.message : "invalid execution");
    return 0;
}

int carmin_exec_timeout_ok(const json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= GJ_JOB_TIMEOUT_MAX;
}

/* timeout, when given (else the server's default seconds). 0, or -1 with err filled. */
static int read_timeout(struct exec_req *q, json_t *v, int default_seconds, struct gj_error *err)
{
    q->timeout = default_seconds;
    if (!v)
        return 0;
    if (!carmin_exec_timeout_ok(v))
        return gj_error_status(err, 400, NULL, CARMIN_TIMEOUT_RULE);
    q->timeout = (int)json_integer_value(v);
    return 0;
}

/* resultsLocation, when given: a directory under home, made (with its missing parents) when
 * it does not exist yet, as VIP does; refused when it or a parent is a file. In the open
 * transaction: what it made goes if the execution is refused. 0, or -1 with err filled. */
static int read_results(PGconn *c, const char *tenant, struct exec_req *q, json_t *loc, struct gj_error *err)
{
    const char *s = json_string_value(loc);
    if (!loc)
        return 0;
    if (!s || carmin_path_normalize(s[0] == '/' ? s + 1 : s, q->results) != 0 ||
        strlen(q->results) + 1 + GJ_UUID_LEN >= CARMIN_PATH_MAX)
        return gj_error_status(err, 400, NULL, "resultsLocation is a directory under %s (at most %d characters)",
                               CARMIN_HOME, CARMIN_PATH_MAX - 2 - GJ_UUID_LEN);
    int rc = carmin_fs_mkdirs(c, tenant, q->results);
    if (rc < 0)
        return gj_error_status(err, 503, NULL, "the database is unavailable");
    if (rc > 0)
        return gj_error_status(err, 409, NULL,
                               "resultsLocation %s is not a directory: it, or a directory above it, is a file",
                               q->results);
    return 0;
}

/* The execution's own results directory, <location>/<execution id>, made now (so results
 * never replace what the user keeps at the location): 0, or -1 with err filled. */
static int make_results_dir(PGconn *c, const char *tenant, const char *location, const char *id,
                            char dir[CARMIN_PATH_MAX], struct gj_error *err)
{
    int rc = carmin_fs_create_free(c, tenant, location, id, NULL, id, dir);
    if (rc < 0)
        return gj_error_status(err, 503, NULL, "the database is unavailable");
    if (rc > 0)
        return gj_error_status(err, 409, NULL, "no free name for the results under %s", location);
    return 0;
}

/* The job, its execution row and its results directory, in one transaction; answers the
 * execution. 0, or -1 with err filled. */
static int store(struct gj_req *r, PGconn *c, struct exec_req *q, const char *name, json_t *values,
                 struct gj_error *err)
{
    struct gj_submit sub = { .tenant_id = r->who.tenant_id, .kind = q->kind->name, .params = q->params,
                             .inputs = q->sub, .n_inputs = q->n, .name = name, .timeout_seconds = q->timeout };
    struct gj_submitted out;
    int rc = gj_queue_submit(c, &sub, &out);
    if (rc == GJ_SUBMIT_INPUT_GONE)
        return gj_error_status(err, 409, NULL, "input %s was deleted meanwhile", out.bad_input);
    if (rc != GJ_SUBMIT_OK)
        return gj_error_status(err, 503, NULL, "the database is unavailable");
    char dir[CARMIN_PATH_MAX];
    if (make_results_dir(c, r->who.tenant_id, q->results[0] ? q->results : CARMIN_HOME, out.id, dir, err) != 0)
        return -1;
    char *text = json_dumps(values, JSON_COMPACT);
    const char *p[7] = { out.id, r->who.tenant_id, name, q->kind->name, text, q->results[0] ? q->results : dir, dir };
    if (!text ||
        gj_db_cmd(c, "INSERT INTO carmin_executions (job_id, tenant_id, name, pipeline, input_values,"
                     " results_location, results_dir) VALUES ($1::uuid, $2::uuid, $3, $4, $5::jsonb, $6, $7)",
                  7, p) != 0 ||
        gj_db_commit(c) != 0) {
        free(text);
        return gj_error_status(err, 503, NULL, "the database is unavailable");
    }
    free(text);
    json_t *e = carmin_exec_read(c, r->who.tenant_id, out.id);
    if (!e)
        return gj_error_status(err, 503, NULL, "the database is unavailable");
    gj_respond_json(r, 200, e);
    return 0;
}

/* The body's pipeline (its kind), inputValues and name. NULL with err filled when bad. */
static const struct gj_kind *body_pipeline(json_t *b, json_t **values, const char **name, struct gj_error *err)
{
    const struct gj_kind *k = NULL;
    *values = json_object_get(b, "inputValues");
    *name = json_string_value(json_object_get(b, "name"));
    const char *pid = json_string_value(json_object_get(b, "pipelineIdentifier"));
    if (!json_is_object(b) || gj_job_name_problem(*name) || !pid || !json_is_object(*values))
        gj_error_status(err, 400, NULL, "an execution is {name (1 to 200 characters, no control characters), "
                                        "pipelineIdentifier, inputValues (an object), resultsLocation and "
                                        "timeout (optional)}");
    else if (!(k = gj_kind_find(pid)))
        gj_error_status(err, 404, NULL, "no pipeline %s", pid);
    return k;
}

/* Every check below fills err and stops the chain; the one answer of a refusal is here. */
void carmin_exec_create(struct gj_req *r)
{
    json_t *values;
    const char *name;
    struct exec_req *q = calloc(1, sizeof *q);
    if (!q) {
        carmin_error(r, CARMIN_INTERNAL, "out of memory");
        return;
    }
    const char *tenant = r->who.tenant_id;
    struct gj_error err;
    gj_error_clear(&err);
    PGconn *c = NULL;
    int rc = (q->kind = body_pipeline(r->json, &values, &name, &err)) ? 0 : -1;
    if (rc == 0 && (!(c = gj_req_db(r)) || gj_db_begin(c) != 0)) {
        c = NULL;
        rc = gj_error_status(&err, 503, NULL, "the database is unavailable");
    }
    if (rc == 0)
        rc = read_inputs(c, tenant, q, values, &err);
    if (rc == 0)
        rc = read_results(c, tenant, q, json_object_get(r->json, "resultsLocation"), &err);
    if (rc == 0)
        rc = read_timeout(q, json_object_get(r->json, "timeout"), r->srv->cfg.job_timeout_seconds, &err);
    if (rc == 0)
        rc = kind_check(c, q, &err);
    if (rc == 0)
        rc = store(r, c, q, name, values, &err);
    if (rc != 0)
        carmin_respond_error(r, &err);
    if (c && PQtransactionStatus(c) != PQTRANS_IDLE)
        gj_db_rollback(c);
    json_decref(q->params);
    free(q);
}
