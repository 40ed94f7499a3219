/*
 * routes_provenance.c — GET /v1/jobs/{id}/provenance (the job as a Process Run Crate,
 * ro_crate.h; ?format=zip with its files, crate_zip.c) and POST /v1/jobs/{id}/rerun (the
 * same kind, params and input blobs again; the rerun's JSON names rerun_of and, once it has
 * finished, whether it reproduced the original: reproduction.h). Issue 26.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>

#include "common/gj_kind.h"
#include "service/api/crate_zip.h"
#include "service/api/job_json.h"
#include "service/api/ro_crate.h"
#include "service/api/routes_provenance.h"
#include "service/base/log.h"
#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/http/http_server.h"
#include "service/jobs/provenance_store.h"
#include "service/jobs/queue.h"
#include "service/jobs/reproduction.h"

#define COMPONENT "provenance"
#define MAX_RERUN_INPUTS 256

/* The records of the jobs whose outputs job (and its children) took as inputs. 0, or -1. */
static int load_upstreams(PGconn *c, const char *tenant, const json_t *job, json_t *ups)
{
    json_t *attempts = json_object_get(job, "attempts");
    size_t n = json_array_size(attempts), i;
    const json_t *inputs = n ? json_object_get(json_array_get(attempts, n - 1), "inputs")
                             : json_object_get(job, "inputs");
    json_t *in, *child;
    json_array_foreach((json_t *)inputs, i, in) {
        const char *up = json_string_value(json_object_get(in, "job"));
        json_t *rec = NULL;
        if (!up || json_object_get(ups, up))
            continue;
        if (gj_provenance_load(c, tenant, up, 0, &rec) < 0)
            return -1;
        if (rec && json_object_set_new(ups, up, rec))
            return -1;
    }
    json_array_foreach(json_object_get(job, "children"), i, child)
        if (load_upstreams(c, tenant, child, ups))
            return -1;
    return 0;
}

/* The crate of job id of tenant: 1 (*crate), 0 not found, -1 database error. */
static int build_crate(PGconn *c, const char *tenant, const char *id, json_t **crate, json_t **record)
{
    json_t *rec = NULL, *ups = json_object(), *orig = NULL, *repro = NULL;
    *crate = NULL;
    int rc = ups ? gj_provenance_load(c, tenant, id, 1, &rec) : -1;
    const char *of = rc > 0 ? json_string_value(json_object_get(rec, "rerun_of")) : NULL;
    if (rc > 0 && load_upstreams(c, tenant, rec, ups))
        rc = -1;
    if (rc > 0 && of && gj_provenance_load(c, tenant, of, 0, &orig) < 0)
        rc = -1;
    if (rc > 0 && orig)
        repro = gj_reproduction_compare(orig, rec);
    if (rc > 0 && !(*crate = gj_ro_crate(rec, ups, orig, repro)))
        rc = -1;
    json_decref(ups);
    json_decref(orig);
    json_decref(repro);
    if (rc > 0 && record)
        *record = rec;
    else
        json_decref(rec);
    return rc;
}

static void provenance_get(struct gj_req *r)
{
    const char *format = gj_req_query(r, "format");
    if (format && strcmp(format, "json") != 0 && strcmp(format, "zip") != 0) {
        gj_problem(r, 400, "format", "format is json (the crate's metadata, the default) or zip (the crate with "
                   "its files)");
        return;
    }
    PGconn *c = gj_req_db(r);
    if (!c) {
        gj_respond_unavailable(r);
        return;
    }
    json_t *crate = NULL, *record = NULL;
    int zip = format && strcmp(format, "zip") == 0;
    int rc = build_crate(c, r->who.tenant_id, r->params[0], &crate, zip ? &record : NULL);
    if (rc <= 0) {
        gj_respond_lookup_failed(r, rc);
        return;
    }
    if (zip) {
        gj_crate_zip_respond(r, crate, record);   /* takes both */
        return;
    }
    struct MHD_Response *resp = gj_respond_json(r, 200, crate);
    if (resp) {
        MHD_del_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/ld+json");
    }
}

/* ---- rerun ---- */

struct rerun_inputs {
    struct gj_submit_input sub[MAX_RERUN_INPUTS];
    struct gj_input val[MAX_RERUN_INPUTS];
    const json_t *rec[MAX_RERUN_INPUTS];
    size_t n;
};

/* The inputs as the original's last attempt read them (they outlive a blob deleted since),
 * else as the job has them. 0, or -1 when there are too many. */
static int rerun_inputs(const json_t *orig, struct rerun_inputs *in)
{
    json_t *attempts = json_object_get(orig, "attempts");
    size_t n = json_array_size(attempts), i;
    const json_t *list = n ? json_object_get(json_array_get(attempts, n - 1), "inputs")
                           : json_object_get(orig, "inputs");
    json_t *f;
    in->n = 0;
    json_array_foreach((json_t *)list, i, f) {
        if (in->n == MAX_RERUN_INPUTS)
            return -1;
        const char *name = json_string_value(json_object_get(f, "name"));
        in->sub[in->n] = (struct gj_submit_input){ name, json_string_value(json_object_get(f, "blob")), 0 };
        in->val[in->n] = (struct gj_input){ name, NULL, (uint64_t)json_integer_value(json_object_get(f, "size")) };
        in->rec[in->n++] = f;
    }
    return 0;
}

/* The original's params, with the seed its last attempt recorded when they lack one (a job
 * made before seeds were written into params at submit). A new object. */
static json_t *rerun_params(const json_t *orig)
{
    json_t *p = json_deep_copy(json_object_get(orig, "params"));
    json_t *seed = json_object_get(gj_provenance_last_environment(orig), "seed");
    if (p && seed && !json_object_get(p, "seed"))
        json_object_set(p, "seed", seed);
    return p;
}

static const json_t *input_named(const struct rerun_inputs *in, const char *name)
{
    for (size_t i = 0; name && i < in->n; i++)
        if (strcmp(in->sub[i].name, name) == 0)
            return in->rec[i];
    return NULL;
}

/* Checks the rerun as a submit would (the kind may have changed since). 0, or -1 answered. */
static int rerun_validate(struct gj_req *r, const struct gj_kind *kind, json_t *params,
                          const struct rerun_inputs *in)
{
    struct gj_job job = { kind->name, params, in->val, in->n };
    struct gj_error err;
    gj_error_clear(&err);
    if (gj_kind_validate(kind, &job, &err) == 0)
        return 0;
    gj_problem(r, 409, "params", "this job cannot run again as it was: %s%s%s", err.message,
               err.field[0] ? " at " : "", err.field);
    return -1;
}

/* An Idempotency-Key as POST /v1/jobs takes it: 1 to 200 visible ASCII characters. */
static int key_ok(const char *key)
{
    size_t n = strlen(key);
    int ok = n >= 1 && n <= 200;
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)key[i] >= 0x21 && (unsigned char)key[i] <= 0x7e;
    return ok;
}

/* What an Idempotency-Key of a rerun stands for: "rerun" and the job, hashed. */
static void rerun_hash(const char *job_id, char hex[65])
{
    char text[64];
    unsigned char md[32];
    unsigned int n = 0;
    int len = snprintf(text, sizeof text, "rerun %s", job_id);
    EVP_Digest(text, (size_t)len, md, &n, EVP_sha256(), NULL);
    gj_sha256_hex(md, hex);
}

/* Creates the rerun and its link in one transaction; answers every refusal. 0 with id; 1
 * answered (a retry under the same Idempotency-Key gets the rerun it made). */
static int rerun_store(struct gj_req *r, PGconn *c, const json_t *orig, json_t *params,
                       const struct rerun_inputs *in, char id[GJ_UUID_LEN + 1])
{
    char hash[65];
    const char *key = gj_req_header(r, "Idempotency-Key");
    rerun_hash(json_string_value(json_object_get(orig, "id")), hash);
    struct gj_submit s = {
        .tenant_id = r->who.tenant_id, .kind = json_string_value(json_object_get(orig, "kind")),
        .params = params, .priority = (int)json_integer_value(json_object_get(orig, "priority")),
        .max_attempts = (int)json_integer_value(json_object_get(orig, "max_attempts")),
        .inputs = in->sub, .n_inputs = in->n, .name = json_string_value(json_object_get(orig, "name")),
        .labels = json_object_get(orig, "labels"),
        .timeout_seconds = (int)json_integer_value(json_object_get(orig, "timeout_seconds")),
        .idempotency_key = key, .request_hash = key ? hash : NULL,
    };
    if (json_is_null(s.labels))
        s.labels = NULL;
    struct gj_submitted out;
    if (gj_db_begin(c) != 0) {
        gj_respond_unavailable(r);
        return -1;
    }
    int rc = gj_queue_submit(c, &s, &out);
    if (rc == GJ_SUBMIT_OK && gj_provenance_link_rerun(c, out.id, json_string_value(json_object_get(orig, "id"))))
        rc = GJ_SUBMIT_ERROR;
    if (rc == GJ_SUBMIT_OK && gj_db_commit(c) == 0) {
        snprintf(id, GJ_UUID_LEN + 1, "%s", out.id);
        return 0;
    }
    gj_db_rollback(c);
    if (rc == GJ_SUBMIT_DUPLICATE && gj_api_idempotent_replay(r, c, key, hash) > 0)
        return 1;   /* a concurrent request with the same key made it */
    const json_t *gone = rc == GJ_SUBMIT_INPUT_GONE ? input_named(in, out.bad_input) : NULL;
    if (rc == GJ_SUBMIT_INPUT_GONE) {
        char field[160];
        const char *name = out.bad_input ? out.bad_input : "";
        snprintf(field, sizeof field, "inputs.%.100s", name);
        gj_problem(r, 409, field, "input '%s' cannot be given again: its blob %s (sha256 %s) was deleted; upload "
                   "the same bytes and submit the job anew", name,
                   gone ? json_string_value(json_object_get(gone, "blob")) : "?",
                   gone ? json_string_value(json_object_get(gone, "sha256")) : "?");
    } else {
        gj_respond_unavailable(r);
    }
    return -1;
}

static void rerun(struct gj_req *r)
{
    PGconn *c = gj_req_db(r);
    const char *key = gj_req_header(r, "Idempotency-Key");
    if (key && !key_ok(key)) {
        gj_problem(r, 400, "Idempotency-Key", "Idempotency-Key must be 1 to 200 visible ASCII characters");
        return;
    }
    if (!c) {
        gj_respond_unavailable(r);
        return;
    }
    if (key) {   /* a retry: the rerun this key made, before anything is checked again */
        char hash[65];
        rerun_hash(r->params[0], hash);
        int replayed = gj_api_idempotent_replay(r, c, key, hash);
        if (replayed != 0) {
            if (replayed < 0)
                gj_respond_unavailable(r);
            return;
        }
    }
    json_t *orig = NULL, *params = NULL, *job = NULL;
    struct rerun_inputs *in = calloc(1, sizeof *in);
    int rc = in ? gj_provenance_load(c, r->who.tenant_id, r->params[0], 0, &orig) : -1;
    const struct gj_kind *kind = rc > 0 ? gj_kind_find(json_string_value(json_object_get(orig, "kind"))) : NULL;
    char id[GJ_UUID_LEN + 1];
    if (rc < 0)
        gj_respond_unavailable(r);
    else if (rc == 0)
        gj_respond_not_found(r);
    else if (json_string_value(json_object_get(orig, "parent_id")))
        gj_problem(r, 409, NULL, "this job is a sub-task of job %s: rerun that job",
                   json_string_value(json_object_get(orig, "parent_id")));
    else if (!kind)
        gj_problem(r, 409, "kind", "this server does not know kind %s any more",
                   json_string_value(json_object_get(orig, "kind")));
    else if (rerun_inputs(orig, in))
        gj_problem(r, 409, "inputs", "the job has more than %d inputs", MAX_RERUN_INPUTS);
    else if (!(params = rerun_params(orig)))
        gj_problem(r, 500, NULL, "out of memory");
    else if (rerun_validate(r, kind, params, in) == 0 && rerun_store(r, c, orig, params, in, id) == 0) {
        if (gj_api_job_json(c, r->who.tenant_id, id, &job) > 0)
            gj_api_respond_job(r, 201, job);
        else
            gj_respond_unavailable(r);
        gj_log_info(COMPONENT, "job %s reruns job %s", id, r->params[0]);
    }
    json_decref(params);
    json_decref(orig);
    free(in);
}

static const struct gj_route provenance_routes[] = {
    { "GET", "/v1/jobs/{id}/provenance", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, provenance_get, NULL },
    { "POST", "/v1/jobs/{id}/rerun", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, rerun, NULL },
};
const struct gj_route_table gj_routes_provenance = { provenance_routes,
                                                     sizeof provenance_routes / sizeof provenance_routes[0] };
