/*
 * routes_misc.c — kinds, GPUs, API keys, health, readiness and metrics; and the
 * metrics listener's routes (health, readiness and metrics without a key).
 */
#include <stdlib.h>
#include <string.h>

#include "common/gj_provenance.h"
#include "common/gj_kind.h"
#include "service/auth/auth.h"
#include "service/jobs/devices.h"
#include "service/jobs/job_store.h"
#include "service/http/http_server.h"
#include "service/auth/key_cache.h"
#include "service/jobs/job_cache.h"
#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/db/storage_quota.h"
#include "service/db/migrate.h"
#include "service/jobs/placement.h"


/* GET /healthz: the process answers. */
static void healthz(struct gj_req *r)
{
    gj_respond_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

/* A reason about the database: while the pool finds it unreachable, that (with how long
 * and libpq's word), whatever step noticed; else what the step saw. */
static void add_db_reason(json_t *reasons, struct gj_db_pool *db, const char *seen)
{
    char why[400], line[420];
    if (!gj_db_pool_health(db, why, sizeof why))
        snprintf(line, sizeof line, "database: %s", why);
    else
        snprintf(line, sizeof line, "%s", seen);
    json_array_append_new(reasons, json_string(line));
}

/* The request's connection: the one its authentication may have borrowed (a second one in
 * r->db would lose it: only r->db is given back at the request's end), else one borrowed for
 * it within 2 s (a probe's budget, not gj_req_db's 5 s). */
static PGconn *request_db(struct gj_req *r)
{
    if (!r->db)
        r->db = gj_db_acquire(r->srv->db, 2000);
    return r->db;
}

#define READY_PING_MS 2000

/* GET /readyz: database reachable, migrations applied, workers running. */
static void readyz(struct gj_req *r)
{
    json_t *reasons = json_array();
    PGconn *c = request_db(r);
    if (!c) {
        add_db_reason(reasons, r->srv->db, "database: no connection available");
    } else {
        /* within the probe's budget: a database cut off by the network does not answer */
        if (!gj_db_ping(c, READY_PING_MS)) {
            add_db_reason(reasons, r->srv->db, "database: not answering");
        } else {
            int m = gj_migrate_is_current(c);
            if (m < 0)
                add_db_reason(reasons, r->srv->db, "migrations: cannot be checked");
            else if (m == 0)
                json_array_append_new(reasons, json_string("migrations: not applied"));
        }
    }
    char store_why[400];
    if (!gj_blob_store_ready(store_why, sizeof store_why))
        json_array_append_new(reasons, json_string(store_why));
    if (!atomic_load(&r->srv->ready))
        json_array_append_new(reasons, json_string("service: starting (workers not running yet)"));
    if (atomic_load(&r->srv->stopping))
        json_array_append_new(reasons, json_string("service: shutting down"));
    if (json_array_size(reasons) == 0) {
        json_decref(reasons);
        gj_respond_json(r, 200, json_pack("{s:s}", "status", "ready"));
        return;
    }
    /* a problem document, with the reasons as an extension member */
    json_t *o = json_pack("{s:s, s:s, s:i, s:s, s:o, s:s}", "type", "urn:gpujobd:problem:not-ready", "title",
                          "Service Unavailable", "status", 503, "detail", "the service is not ready", "reasons",
                          reasons, "request_id", r->request_id);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (!text) {
        gj_problem(r, 503, NULL, "the service is not ready");
        return;
    }
    size_t len = strlen(text);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/problem+json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    gj_respond(r, 503, resp, len);
}

/* Deliveries not yet made, and those of them already tried and failed at least once
 * (retries piling up: the receiver is down or refusing). */
static int write_delivery_gauges(PGconn *c, FILE *f)
{
    PGresult *res = gj_db_exec(c,
        "SELECT 'callback', count(*), count(*) FILTER (WHERE attempts > 0) FROM webhook_deliveries"
        " WHERE state = 'pending'"
        " UNION ALL SELECT 'dicomweb', count(*), count(*) FILTER (WHERE attempts > 0) FROM report_deliveries"
        " WHERE state = 'pending'", 0, NULL, NULL);
    if (!res)
        return -1;
    fputs("# HELP gpujobd_deliveries_pending Callbacks and DICOMweb result deliveries not yet made.\n"
          "# TYPE gpujobd_deliveries_pending gauge\n", f);
    for (int i = 0; i < PQntuples(res); i++)
        fprintf(f, "gpujobd_deliveries_pending{target=\"%s\"} %s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
    fputs("# HELP gpujobd_deliveries_retrying Pending deliveries whose earlier attempts failed.\n"
          "# TYPE gpujobd_deliveries_retrying gauge\n", f);
    for (int i = 0; i < PQntuples(res); i++)
        fprintf(f, "gpujobd_deliveries_retrying{target=\"%s\"} %s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 2));
    PQclear(res);
    return 0;
}

static void write_job_gauge(FILE *f, const char *kind, const char *state, long long n)
{
    fputs("gpujobd_jobs{kind=\"", f);
    gj_metrics_put_label(f, kind);
    fputs("\",state=\"", f);
    gj_metrics_put_label(f, state);
    fprintf(f, "\"} %lld\n", n);
}

static int write_job_gauges(PGconn *c, FILE *f)
{
    struct gj_job_counts counts;
    if (gj_job_counts_read(c, &counts) != 0)
        return -1;
    fputs("# HELP gpujobd_jobs Jobs (sub-tasks included) by kind and public state.\n"
          "# TYPE gpujobd_jobs gauge\n", f);
    /* every known kind in every public state, zero when absent, so series do not vanish */
    int n;
    const char *const *states = gj_job_public_states(&n);
    for (size_t k = 0; k < gj_kind_count(); k++)
        for (int s = 0; s < n; s++)
            write_job_gauge(f, gj_kind_at(k)->name, states[s], gj_job_counts_of(&counts, gj_kind_at(k)->name, states[s]));
    for (size_t i = 0; i < counts.n; i++)
        if (!gj_kind_find(counts.rows[i].kind))     /* a kind this binary lacks: as found */
            write_job_gauge(f, counts.rows[i].kind, counts.rows[i].state, counts.rows[i].n);
    fprintf(f, "# HELP gpujobd_queue_depth Jobs waiting to be claimed.\n"
               "# TYPE gpujobd_queue_depth gauge\ngpujobd_queue_depth %lld\n", counts.queued);
    gj_job_counts_free(&counts);
    return 0;
}

/* The gauges read from the database; then gpujobd_database_up, 1 when they all were. */
static void write_db_gauges(struct gj_req *r, FILE *f)
{
    PGconn *c = request_db(r);
    int up = c && write_job_gauges(c, f) == 0 && write_delivery_gauges(c, f) == 0 &&
             gj_storage_write_metrics(c, f) == 0;
    fprintf(f, "# HELP gpujobd_database_up 1 when this scrape could read the database.\n"
               "# TYPE gpujobd_database_up gauge\ngpujobd_database_up %d\n", up);
}

static void write_placement_gauges(struct gj_req *r, FILE *f)
{
    struct gj_placement *snap = malloc(sizeof *snap);
    if (!snap)
        return;
    gj_place_snapshot(&r->srv->placement, snap);
    fputs("# HELP gpujobd_gpu_total_bytes Device memory of each GPU.\n# TYPE gpujobd_gpu_total_bytes gauge\n", f);
    for (int i = 0; i < snap->n_gpus; i++)
        fprintf(f, "gpujobd_gpu_total_bytes{gpu=\"%d\"} %llu\n", snap->gpus[i].index,
                (unsigned long long)snap->gpus[i].total_bytes);
    fputs("# HELP gpujobd_gpu_reserved_bytes Device memory reserved by running jobs.\n"
          "# TYPE gpujobd_gpu_reserved_bytes gauge\n", f);
    for (int i = 0; i < snap->n_gpus; i++)
        fprintf(f, "gpujobd_gpu_reserved_bytes{gpu=\"%d\"} %llu\n", snap->gpus[i].index,
                (unsigned long long)snap->gpus[i].reserved_bytes);
    fputs("# HELP gpujobd_gpu_running_tasks Jobs running on each GPU.\n# TYPE gpujobd_gpu_running_tasks gauge\n", f);
    for (int i = 0; i < snap->n_gpus; i++)
        fprintf(f, "gpujobd_gpu_running_tasks{gpu=\"%d\"} %d\n", snap->gpus[i].index, snap->gpus[i].running);
    fputs("# HELP gpujobd_gpu_completed_tasks_total Jobs completed on each GPU by this process.\n"
          "# TYPE gpujobd_gpu_completed_tasks_total counter\n", f);
    for (int i = 0; i < snap->n_gpus; i++)
        fprintf(f, "gpujobd_gpu_completed_tasks_total{gpu=\"%d\"} %llu\n", snap->gpus[i].index,
                (unsigned long long)snap->gpus[i].completed);
    fprintf(f, "# HELP gpujobd_cpu_running_tasks Jobs running on CPU slots.\n"
               "# TYPE gpujobd_cpu_running_tasks gauge\ngpujobd_cpu_running_tasks %d\n"
               "# HELP gpujobd_cpu_slots CPU job slots.\n# TYPE gpujobd_cpu_slots gauge\ngpujobd_cpu_slots %d\n",
            snap->cpu_running, snap->cpu_slots);
    free(snap);
}

/* GET /metrics: Prometheus text format. */
static void metrics(struct gj_req *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    gj_metrics_write(f);
    gj_key_cache_write_metrics(r->srv->api_keys, f);
    gj_job_cache_write_metrics(r->srv->job_cache, f);
    write_db_gauges(r, f);
    write_placement_gauges(r, f);
    fprintf(f, "# HELP gpujobd_ready 1 when the service is ready.\n# TYPE gpujobd_ready gauge\ngpujobd_ready %d\n",
            atomic_load(&r->srv->ready) ? 1 : 0);
    if (fclose(f) != 0 || !text) {
        free(text);
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    gj_respond(r, 200, resp, len);
}

/* GET /v1/kinds */
static void kinds(struct gj_req *r)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < gj_kind_count(); i++) {
        const struct gj_kind *k = gj_kind_at(i);
        json_t *schema = k->params_schema ? json_loads(k->params_schema, 0, NULL) : NULL;
        json_t *inputs = json_array();
        for (size_t j = 0; j < k->n_inputs; j++)
            json_array_append_new(inputs, json_pack("{s:s, s:b, s:b, s:s}", "name", k->inputs[j].name, "required",
                                                    k->inputs[j].required, "multiple", k->inputs[j].multiple,
                                                    "description",
                                                    k->inputs[j].description ? k->inputs[j].description : ""));
        json_t *entry = json_pack("{s:s, s:s, s:o, s:o}", "name", k->name, "summary", k->summary ? k->summary : "",
                                  "params_schema", schema ? schema : json_object(), "inputs", inputs);
        json_object_update_new(entry, gj_kind_provenance(k));   /* version, bit_identical_on */
        json_array_append_new(arr, entry);
    }
    gj_respond_json(r, 200, json_pack("{s:o}", "kinds", arr));
}

/* GET /v1/gpus */
static void gpus(struct gj_req *r)
{
    struct gj_placement *snap = malloc(sizeof *snap);
    if (!snap) {
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    gj_place_snapshot(&r->srv->placement, snap);
    json_t *arr = json_array();
    for (int i = 0; i < snap->n_gpus; i++) {
        const struct gj_gpu_slotinfo *g = &snap->gpus[i];
        struct gj_device_info di;
        int have = gj_device_info(g->index, &di) == 0;
        json_t *o = json_pack("{s:i, s:s, s:I, s:I, s:I, s:i, s:i, s:I, s:b}", "index", g->index, "name",
                              have ? di.name : "", "memory_total_bytes", (json_int_t)g->total_bytes,
                              "memory_reserved_bytes", (json_int_t)g->reserved_bytes, "memory_free_bytes",
                              (json_int_t)(g->total_bytes > g->reserved_bytes ? g->total_bytes - g->reserved_bytes : 0),
                              "slots", g->slots, "running_tasks", g->running, "completed_tasks",
                              (json_int_t)g->completed, "simulated", have ? di.simulated : 0);
        json_array_append_new(arr, o);
    }
    json_t *body = json_pack("{s:s, s:o, s:{s:i, s:i, s:I}}", "policy", gj_placement_name(snap->policy), "gpus", arr,
                             "cpu", "slots", snap->cpu_slots, "running_tasks", snap->cpu_running,
                             "completed_tasks", (json_int_t)snap->cpu_completed);
    free(snap);
    gj_respond_json(r, 200, body);
}

/* POST /v1/api-keys (admin): {tenant, role?, label?} */
static void create_key(struct gj_req *r)
{
    json_t *b = r->json;
    if (!json_is_object(b)) {
        gj_problem(r, 422, "tenant", "the body must be a JSON object with a tenant name");
        return;
    }
    const char *k;
    json_t *v;
    json_object_foreach(b, k, v) {
        if (strcmp(k, "tenant") && strcmp(k, "role") && strcmp(k, "label")) {
            gj_problem(r, 422, k, "unknown field '%s'", k);
            return;
        }
    }
    json_t *tenant = json_object_get(b, "tenant"), *role = json_object_get(b, "role"),
           *label = json_object_get(b, "label");
    if (!json_is_string(tenant) || json_string_length(tenant) < 1 || json_string_length(tenant) > 200) {
        gj_problem(r, 422, "tenant", "tenant must be a string of 1 to 200 characters");
        return;
    }
    const char *role_s = "user";
    if (role && !json_is_null(role)) {
        if (!json_is_string(role) ||
            (strcmp(json_string_value(role), "user") && strcmp(json_string_value(role), "admin"))) {
            gj_problem(r, 422, "role", "role must be \"user\" or \"admin\"");
            return;
        }
        role_s = json_string_value(role);
    }
    const char *label_s = NULL;
    if (label && !json_is_null(label)) {
        if (!json_is_string(label) || json_string_length(label) > 200) {
            gj_problem(r, 422, "label", "label must be a string of at most 200 characters");
            return;
        }
        label_s = json_string_value(label);
    }
    PGconn *c = gj_req_db(r);
    if (!c) {
        gj_respond_unavailable(r);
        return;
    }
    char key[GJ_API_KEY_LEN + 1], key_id[GJ_UUID_LEN + 1], tenant_id[GJ_UUID_LEN + 1];
    if (gj_api_key_create(c, json_string_value(tenant), role_s, label_s, key, key_id, tenant_id) != 0) {
        gj_problem(r, 500, NULL, "the key could not be created");
        return;
    }
    json_t *out = json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", key_id, "key", key, "tenant", json_string_value(tenant),
                            "tenant_id", tenant_id, "role", role_s);
    if (out)
        json_object_set_new(out, "label", label_s ? json_string(label_s) : json_null());
    explicit_bzero(key, sizeof key);
    struct MHD_Response *resp = gj_respond_json(r, 201, out);
    if (resp && r->status == 201) {
        char loc[64];
        snprintf(loc, sizeof loc, "/v1/api-keys/%s", key_id);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, loc);
    }
}

/* GET /v1/api-keys (admin): every key's id, tenant, role, label, prefix and dates; never
 * the key nor its hash. */
static void list_keys(struct gj_req *r)
{
    PGconn *c = gj_req_db(r);
    PGresult *res = c ? gj_db_exec(c,
        "SELECT k.id, t.name, k.tenant_id, k.role, k.label, k.prefix,"
        " to_char(k.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
        " to_char(k.revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
        " FROM api_keys k JOIN tenants t ON t.id = k.tenant_id ORDER BY t.name, k.created_at, k.id",
        0, NULL, NULL) : NULL;
    if (!res) {
        gj_respond_unavailable(r);
        return;
    }
    json_t *arr = json_array();
    for (int i = 0; i < PQntuples(res); i++) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", PQgetvalue(res, i, 0), "tenant",
                              PQgetvalue(res, i, 1), "tenant_id", PQgetvalue(res, i, 2), "role",
                              PQgetvalue(res, i, 3), "prefix", PQgetvalue(res, i, 5), "created_at",
                              PQgetvalue(res, i, 6));
        json_object_set_new(o, "label", PQgetisnull(res, i, 4) ? json_null() : json_string(PQgetvalue(res, i, 4)));
        json_object_set_new(o, "revoked_at",
                            PQgetisnull(res, i, 7) ? json_null() : json_string(PQgetvalue(res, i, 7)));
        json_array_append_new(arr, o);
    }
    PQclear(res);
    gj_respond_json(r, 200, json_pack("{s:o}", "keys", arr));
}

/* DELETE /v1/api-keys/{id} (admin) */
static void revoke_key(struct gj_req *r)
{
    PGconn *c = gj_req_db(r);
    if (!c) {
        gj_respond_unavailable(r);
        return;
    }
    int rc = gj_api_key_revoke(c, r->params[0]);
    /* After the UPDATE committed (no transaction is open here), and whatever it answered: a
     * key already revoked (through another replica) or an error leaves no entry either. */
    gj_key_cache_drop_key(r->srv->api_keys, r->params[0]);
    if (rc < 0)
        gj_respond_unavailable(r);
    else if (rc == 0)
        gj_respond_not_found(r);
    else
        gj_respond_empty(r, 204);
}

static const struct gj_route misc_routes[] = {
    { "GET", "/healthz", GJ_AUTH_NONE, GJ_BODY_NONE, NULL, NULL, healthz, NULL },
    { "GET", "/readyz", GJ_AUTH_NONE, GJ_BODY_NONE, NULL, NULL, readyz, NULL },
    /* every tenant's job counts: the admin's here, anyone's on the metrics listener */
    { "GET", "/metrics", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, metrics, NULL },
    { "GET", "/v1/kinds", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, kinds, NULL },
    { "GET", "/v1/gpus", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, gpus, NULL },
    { "GET", "/v1/api-keys", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, list_keys, NULL },
    { "POST", "/v1/api-keys", GJ_AUTH_ADMIN, GJ_BODY_JSON, NULL, NULL, create_key, NULL },
    { "DELETE", "/v1/api-keys/{id}", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, revoke_key, NULL },
};
const struct gj_route_table gj_routes_misc = { misc_routes, sizeof misc_routes / sizeof misc_routes[0] };

/* The metrics listener (--metrics-listen): for the scraper and the kubelet, no key. */
static const struct gj_route probe_routes[] = {
    { "GET", "/healthz", GJ_AUTH_NONE, GJ_BODY_NONE, NULL, NULL, healthz, NULL },
    { "GET", "/readyz", GJ_AUTH_NONE, GJ_BODY_NONE, NULL, NULL, readyz, NULL },
    { "GET", "/metrics", GJ_AUTH_NONE, GJ_BODY_NONE, NULL, NULL, metrics, NULL },
};
const struct gj_route_table gj_routes_probes = { probe_routes, sizeof probe_routes / sizeof probe_routes[0] };
