/*
 * exec_submit.c — POST /rest/executions: a CARMIN execution becomes a job of the pipeline's
 * kind (gj_queue_submit), its File inputs the blobs of the tenant's files (no bytes copied),
 * its `params` input the job's params. Its results go to a directory of its own made now,
 * <resultsLocation>/<execution id> (resultsLocation made too when missing, as VIP does), or
 * by default /vip/Home/<execution id>; exec_results.c places them there, never over a path
 * of the user's. The job is queued at once: CARMIN's play has nothing left to start. Its
 * timeout is the job's timeout_seconds (absent: the server's --job-timeout-seconds): a run past it is
 * stopped and the execution fails; its files are kept, not deleted as the spec has it
 * (nothing a user uploaded or a job produced is lost).
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

/* One File input: a path of the tenant's space. 0, or -1 answered. */
static int add_file(struct gj_req *r, PGconn *c, struct exec_req *q, const char *name, json_t *v)
{
    char path[CARMIN_PATH_MAX];
    const char *s = json_string_value(v);
    struct carmin_entry e;
    struct gj_blob_info info;
    if (q->n >= MAX_FILES) {
        carmin_error(r, CARMIN_BAD_REQUEST, "at most %d input files", MAX_FILES);
        return -1;
    }
    if (!s || carmin_path_normalize(s[0] == '/' ? s + 1 : s, path) != 0) {
        carmin_error(r, CARMIN_BAD_REQUEST, "input %s is the path of a file under %s", name, CARMIN_HOME);
        return -1;
    }
    int rc = carmin_fs_stat(c, r->who.tenant_id, path, &e);
    if (rc > 0 && !e.is_dir)
        rc = gj_blob_lookup(c, r->who.tenant_id, e.blob_id, &info);
    else if (rc > 0)
        rc = 0;
    if (rc <= 0) {
        if (rc < 0)
            carmin_unavailable(r);
        else
            carmin_error(r, CARMIN_NOT_FOUND, "input %s: no file %s", name, path);
        return -1;
    }
    size_t i = q->n++;
    snprintf(q->names[i], sizeof q->names[i], "%s", name);
    snprintf(q->blobs[i], sizeof q->blobs[i], "%s", e.blob_id);
    q->in[i] = (struct gj_input){ q->names[i], NULL, info.size };
    q->sub[i] = (struct gj_submit_input){ q->names[i], q->blobs[i], 0 };
    return 0;
}

/* A kind's input from inputValues: one path, or several for an input that repeats. */
static int add_input(struct gj_req *r, PGconn *c, struct exec_req *q, const struct gj_input_spec *spec, json_t *v)
{
    if (!json_is_array(v))
        return add_file(r, c, q, spec->name, v);
    if (!spec->multiple || json_array_size(v) == 0) {
        carmin_error(r, CARMIN_BAD_REQUEST, "input %s takes one path", spec->name);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        char name[80];
        snprintf(name, sizeof name, i ? "%s.%zu" : "%s", spec->name, i);
        if (add_file(r, c, q, name, json_array_get(v, i)) != 0)
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

/* inputValues: the kind's File inputs and `params` (a JSON text or an object). 0, or -1 answered. */
static int read_inputs(struct gj_req *r, PGconn *c, struct exec_req *q, json_t *values)
{
    const char *key;
    json_t *v;
    json_object_foreach(values, key, v) {
        const struct gj_input_spec *spec = input_spec(q->kind, key);
        if (strcmp(key, "params") == 0) {
            q->params = json_is_string(v) ? json_loads(json_string_value(v), 0, NULL) : json_incref(v);
            if (!json_is_object(q->params)) {
                carmin_error(r, CARMIN_BAD_REQUEST, "params is a JSON object (or its text)");
                return -1;
            }
        } else if (!spec) {
            carmin_error(r, CARMIN_BAD_REQUEST, "pipeline %s has no parameter %s", q->kind->name, key);
            return -1;
        } else if (add_input(r, c, q, spec, v) != 0) {
            return -1;
        }
    }
    return 0;
}

/* The kind's checks, as POST /v1/jobs makes them. 0, or -1 answered. */
static int kind_check(struct gj_req *r, PGconn *c, struct exec_req *q)
{
    struct gj_job job = { q->kind->name, q->params, q->in, q->n };
    struct gj_error err;
    gj_error_clear(&err);
    int rc = gj_kind_validate(q->kind, &job, &err);
    if (rc == 0 && (rc = gj_host_admit(c, q->kind, &job, &err)) < 0) {
        carmin_unavailable(r);
        return -1;
    }
    if (rc != 0)
        carmin_error(r, CARMIN_BAD_REQUEST, "%s%s%s", err.field, err.field[0] ? ": " : "",
                     err.message[0] ? err.message : "invalid execution");
    return rc != 0 ? -1 : 0;
}

int carmin_exec_timeout_ok(const json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= GJ_JOB_TIMEOUT_MAX;
}

/* timeout, when given (else the server's default). 0, or -1 answered. */
static int read_timeout(struct gj_req *r, struct exec_req *q, json_t *v)
{
    q->timeout = r->srv->cfg.job_timeout_seconds;
    if (!v)
        return 0;
    if (!carmin_exec_timeout_ok(v)) {
        carmin_error(r, CARMIN_BAD_REQUEST, CARMIN_TIMEOUT_RULE);
        return -1;
    }
    q->timeout = (int)json_integer_value(v);
    return 0;
}

/* resultsLocation, when given: a directory under home, made (with its missing parents) when
 * it does not exist yet, as VIP does; refused when it or a parent is a file. In the open
 * transaction: what it made goes if the execution is refused. 0, or -1 answered. */
static int read_results(struct gj_req *r, PGconn *c, struct exec_req *q, json_t *loc)
{
    const char *s = json_string_value(loc);
    if (!loc)
        return 0;
    if (!s || carmin_path_normalize(s[0] == '/' ? s + 1 : s, q->results) != 0 ||
        strlen(q->results) + 1 + GJ_UUID_LEN >= CARMIN_PATH_MAX) {
        carmin_error(r, CARMIN_BAD_REQUEST, "resultsLocation is a directory under %s (at most %d characters)",
                     CARMIN_HOME, CARMIN_PATH_MAX - 2 - GJ_UUID_LEN);
        return -1;
    }
    int rc = carmin_fs_mkdirs(c, r->who.tenant_id, q->results);
    if (rc < 0)
        carmin_unavailable(r);
    else if (rc > 0)
        carmin_error(r, CARMIN_CONFLICT,
                     "resultsLocation %s is not a directory: it, or a directory above it, is a file", q->results);
    return rc == 0 ? 0 : -1;
}

/* The execution's own results directory, <location>/<execution id>, made now (so results
 * never replace what the user keeps at the location): 0, or -1 answered. */
static int make_results_dir(struct gj_req *r, PGconn *c, const char *location, const char *id,
                            char dir[CARMIN_PATH_MAX])
{
    int rc = carmin_fs_create_free(c, r->who.tenant_id, location, id, NULL, id, dir);
    if (rc < 0)
        carmin_unavailable(r);
    else if (rc > 0)
        carmin_error(r, CARMIN_CONFLICT, "no free name for the results under %s", location);
    return rc == 0 ? 0 : -1;
}

/* The job, its execution row and its results directory, in one transaction. */
static void store(struct gj_req *r, PGconn *c, struct exec_req *q, const char *name, json_t *values)
{
    struct gj_submit sub = { .tenant_id = r->who.tenant_id, .kind = q->kind->name, .params = q->params,
                             .inputs = q->sub, .n_inputs = q->n, .name = name, .timeout_seconds = q->timeout };
    struct gj_submitted out;
    int rc = gj_queue_submit(c, &sub, &out);
    if (rc == GJ_SUBMIT_INPUT_GONE) {
        carmin_error(r, CARMIN_CONFLICT, "input %s was deleted meanwhile", out.bad_input);
        return;
    }
    if (rc != GJ_SUBMIT_OK) {
        carmin_unavailable(r);
        return;
    }
    char dir[CARMIN_PATH_MAX];
    if (make_results_dir(r, c, q->results[0] ? q->results : CARMIN_HOME, out.id, dir) != 0)
        return;
    char *text = json_dumps(values, JSON_COMPACT);
    const char *p[7] = { out.id, r->who.tenant_id, name, q->kind->name, text, q->results[0] ? q->results : dir, dir };
    if (!text ||
        gj_db_cmd(c, "INSERT INTO carmin_executions (job_id, tenant_id, name, pipeline, input_values,"
                     " results_location, results_dir) VALUES ($1::uuid, $2::uuid, $3, $4, $5::jsonb, $6, $7)",
                  7, p) != 0 ||
        gj_db_commit(c) != 0) {
        free(text);
        carmin_unavailable(r);
        return;
    }
    free(text);
    json_t *e = carmin_exec_read(c, r->who.tenant_id, out.id);
    if (!e)
        carmin_unavailable(r);
    else
        gj_respond_json(r, 200, e);
}

static const struct gj_kind *body_pipeline(struct gj_req *r, json_t *b, json_t **values, const char **name)
{
    const struct gj_kind *k = NULL;
    *values = json_object_get(b, "inputValues");
    *name = json_string_value(json_object_get(b, "name"));
    const char *pid = json_string_value(json_object_get(b, "pipelineIdentifier"));
    if (!json_is_object(b) || gj_job_name_problem(*name) || !pid || !json_is_object(*values))
        carmin_error(r, CARMIN_BAD_REQUEST, "an execution is {name (1 to 200 characters, no control characters), "
                                            "pipelineIdentifier, inputValues (an object), resultsLocation and "
                                            "timeout (optional)}");
    else if (!(k = gj_kind_find(pid)))
        carmin_error(r, CARMIN_NOT_FOUND, "no pipeline %s", pid);
    return k;
}

void carmin_exec_create(struct gj_req *r)
{
    json_t *values;
    const char *name;
    struct exec_req *q = calloc(1, sizeof *q);
    if (!q) {
        carmin_error(r, CARMIN_INTERNAL, "out of memory");
        return;
    }
    PGconn *c = NULL;
    if ((q->kind = body_pipeline(r, r->json, &values, &name)) && !(c = gj_req_db(r)))
        carmin_unavailable(r);
    if (c && gj_db_begin(c) != 0) {
        carmin_unavailable(r);
        c = NULL;
    }
    if (c && read_inputs(r, c, q, values) == 0 && (q->params || (q->params = json_object())) &&
        read_results(r, c, q, json_object_get(r->json, "resultsLocation")) == 0 &&
        read_timeout(r, q, json_object_get(r->json, "timeout")) == 0 && kind_check(r, c, q) == 0)
        store(r, c, q, name, values);
    if (c && PQtransactionStatus(c) != PQTRANS_IDLE)
        gj_db_rollback(c);
    json_decref(q->params);
    free(q);
}
