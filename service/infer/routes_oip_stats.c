/*
 * routes_oip_stats.c — Triton's statistics extension on /v2: the dynamic batchers'
 * statistics (compute/infer/serving/batcher.h) of this replica, per model version, in
 * Triton's shape:
 *
 *   GET /v2/models/stats                                every version of every model
 *   GET /v2/models/{name}/stats                         every version of the model
 *   GET /v2/models/{name}/versions/{version}/stats      that version
 *
 *   {"model_stats": [{"name", "version", "last_inference" (ms since the epoch, 0 never),
 *     "inference_count" (samples), "execution_count" (batches run),
 *     "inference_stats": {"success", "fail", "queue", "compute_input", "compute_infer",
 *                         "compute_output", "cache_hit", "cache_miss": {"count", "ns"}},
 *     "batch_stats": [{"batch_size", "compute_input", "compute_infer", "compute_output"}],
 *     "response_stats": {}, "memory_usage": []}]}
 *
 * Durations are cumulative nanoseconds, as Triton's. There is no response cache here, so
 * cache_hit and cache_miss stay 0. Admin only: the counts add up every tenant's requests.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/serving/batcher.h"
#include "service/http/http_server.h"
#include "service/infer/infer.h"
#include "service/infer/oip.h"

#define MAX_BATCH_SIZES 64   /* batch_stats entries per version */

static json_t *duration_json(struct gj_stat_duration d)
{
    return json_pack("{s:I, s:I}", "count", (json_int_t)d.count, "ns", (json_int_t)d.ns);
}

static json_t *inference_stats_json(const struct gj_batch_stats *st)
{
    struct gj_stat_duration none = { 0, 0 };
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "success", duration_json(st->success), "fail",
                     duration_json(st->fail), "queue", duration_json(st->queue), "compute_input",
                     duration_json(st->compute_input), "compute_infer", duration_json(st->compute_infer),
                     "compute_output", duration_json(st->compute_output), "cache_hit", duration_json(none),
                     "cache_miss", duration_json(none));
}

static json_t *batch_stats_json(const char *name, int64_t version)
{
    struct gj_batch_size_stats bs[MAX_BATCH_SIZES];
    size_t n = gj_batch_stats_batches(name, version, bs, MAX_BATCH_SIZES);
    json_t *a = json_array();
    for (size_t i = 0; i < n && i < MAX_BATCH_SIZES; i++)
        json_array_append_new(a, json_pack("{s:i, s:o, s:o, s:o}", "batch_size", bs[i].batch_size,
                                           "compute_input", duration_json(bs[i].compute_input), "compute_infer",
                                           duration_json(bs[i].compute_infer), "compute_output",
                                           duration_json(bs[i].compute_output)));
    return a;
}

/* One version's entry: zeros when it has seen no request. */
static json_t *version_stats_json(const char *name, int64_t version)
{
    struct gj_batch_stats st;
    if (gj_batch_stats_get(name, version, &st) != 0)
        memset(&st, 0, sizeof st);   /* no request yet */
    char v[24];
    snprintf(v, sizeof v, "%" PRId64, version);
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:o, s:o, s:{}, s:[]}", "name", name, "version", v,
                     "last_inference", (json_int_t)st.last_inference_ms, "inference_count",
                     (json_int_t)st.inference_count, "execution_count", (json_int_t)st.exec_count,
                     "inference_stats", inference_stats_json(&st), "batch_stats", batch_stats_json(name, version),
                     "response_stats", "memory_usage");
}

/* Appends the entries of a model's versions (only `version` when > 0). 0, or -1 with err
 * (404: no such model or version). */
static int append_model(gj_model_repo *repo, const char *name, int64_t version, json_t *out,
                        struct gj_model_version_info *vi, struct gj_error *err)
{
    size_t n = 0;
    if (gj_model_repo_versions(repo, name, vi, GJ_MODEL_MAX_VERSIONS, &n, err) != 0) {
        err->status = 404;
        return -1;
    }
    int found = 0;
    for (size_t i = 0; i < n && i < GJ_MODEL_MAX_VERSIONS; i++) {
        if (version > 0 && vi[i].version != version)
            continue;
        json_array_append_new(out, version_stats_json(name, vi[i].version));
        found = 1;
    }
    if (version > 0 && !found) {
        gj_error_set(err, "version", "unknown model '%s' version %" PRId64, name, version);
        err->status = 404;
        return -1;
    }
    return 0;
}

json_t *oip_model_stats_json(gj_model_repo *repo, const char *name, int64_t version, struct gj_error *err)
{
    struct gj_model_version_info *vi = calloc(GJ_MODEL_MAX_VERSIONS, sizeof *vi);
    json_t *a = json_array();
    int rc = vi && a ? 0 : -1;
    if (rc == 0 && name) {
        rc = append_model(repo, name, version, a, vi, err);
    } else if (rc == 0) {
        size_t n = gj_model_repo_count(repo);
        for (size_t i = 0; i < n; i++) {
            char model[GJ_MODEL_NAME_MAX];
            struct gj_error ignored = { 0 };   /* a model taken away meanwhile */
            if (gj_model_repo_name(repo, i, model, sizeof model) == 0)
                append_model(repo, model, 0, a, vi, &ignored);
        }
    }
    free(vi);
    if (rc != 0) {
        json_decref(a);
        if (!err->status) {
            gj_error_set(err, "", "out of memory");
            err->status = 500;
        }
        return NULL;
    }
    return json_pack("{s:o}", "model_stats", a);
}

static void model_stats(struct gj_req *r)
{
    int64_t version = 0;
    gj_model_repo *repo = r->n_params ? oip_requested(r, &version) : gj_infer_repo();
    if (!repo) {
        if (!r->n_params)
            oip_error(r, 503, "the model repository is not available");
        return;
    }
    struct gj_error err = { 0 };
    json_t *o = oip_model_stats_json(repo, r->n_params ? r->params[0] : NULL, version, &err);
    if (o)
        gj_respond_json(r, 200, o);
    else if (err.status == 500)
        oip_error(r, 500, "%s", err.message);
    else
        oip_lookup_failed(r, version, &err);
}

static const struct gj_route stats_routes[] = {
    { "GET", "/v2/models/stats", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, model_stats, NULL },
    { "GET", "/v2/models/{name}/stats", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, model_stats, NULL },
    { "GET", "/v2/models/{name}/versions/{version}/stats", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, model_stats,
      NULL },
};
const struct gj_route_table gj_infer_routes_oip_stats = { stats_routes, sizeof stats_routes / sizeof stats_routes[0] };
