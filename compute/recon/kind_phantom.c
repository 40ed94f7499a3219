/*
 * kind_phantom.c — job kind `phantom`: a Shepp-Logan (2D modified, 3D Kak-Slaney or
 * Yu-Ye-Wang), disc or ball phantom with its exact analytic projections for any
 * recon geometry, and the ground truth on the volume grid (sub-sample averaged).
 * Outputs: projections.nrrd (or projections.raw), truth.nrrd, preview.png, report.json.
 * The projections feed a recon job with the same geometry, volume and batch.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "common/gj_kind.h"
#include "recon/recon.h"
#include "recon/recon_schema.h"

static const char phantom_schema[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\","
    "\"additionalProperties\":false,\"required\":[\"geometry\"],\"properties\":{"
    "\"phantom\":{\"enum\":[\"shepp-logan\",\"kak-slaney\",\"yu-ye-wang\",\"disc\",\"ball\"],"
    "\"description\":\"shepp-logan (2D modified), kak-slaney / yu-ye-wang (3D), disc (uniform cylinder), ball\"},"
    "\"geometry\":" RC_GEOMETRY_SCHEMA ",\"volume\":" RC_VOLUME_SCHEMA ","
    "\"scale_mm\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"description\":\"mm per phantom unit (its [-1,1] square); default: half the volume's width\"},"
    "\"value\":{\"type\":\"number\",\"description\":\"multiplies every attenuation (1/mm); default 1\"},"
    "\"supersample\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16,\"description\":\"ground truth samples per voxel and axis (default 4 in 2D, 2 in 3D)\"},"
    "\"batch\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,\"description\":\"2D: repeat the sinogram this many times\"},"
    "\"short_scan\":{\"type\":\"boolean\"},"
    "\"format\":{\"enum\":[\"nrrd\",\"raw\"],\"description\":\"projections file: projections.nrrd (default) or projections.raw\"},"
    "\"truth\":{\"type\":\"boolean\",\"description\":\"write truth.nrrd (default true)\"}"
    "}}";

static int phantom_parse(const struct gj_job *job, struct rc_geom *g, struct rc_phantom *ph, struct gj_error *err)
{
    if (rc_geom_parse(job->params, g, err))
        return -1;
    const char *name = json_string_value(json_object_get(job->params, "phantom"));
    if (!name)
        name = g->type == RC_CONE3D ? "kak-slaney" : "shepp-logan";
    int id = rc_phantom_id(name);
    if (id < 0) {
        rc_geom_free(g);
        return gj_error_set(err, "phantom", "unknown phantom '%s'", name);
    }
    json_t *s = json_object_get(job->params, "scale_mm");
    double scale = json_is_number(s) ? json_number_value(s) : 0.5 * fmin(g->nx * g->vx, g->ny * g->vy);
    json_t *vv = json_object_get(job->params, "value");
    double value = json_is_number(vv) ? json_number_value(vv) : 1.0;
    if (!(scale > 0) || !isfinite(scale) || scale > 1e6) {
        rc_geom_free(g);
        return gj_error_set(err, "scale_mm", "scale_mm must be a positive number of mm");
    }
    if (!isfinite(value) || fabs(value) > 1e6) {
        rc_geom_free(g);
        return gj_error_set(err, "value", "value must be a finite number");
    }
    rc_phantom_make(id, scale, value, ph);
    return 0;
}

static int phantom_validate(const struct gj_job *job, struct gj_error *err)
{
    struct rc_geom g;
    struct rc_phantom ph;
    if (phantom_parse(job, &g, &ph, err))
        return -1;
    rc_geom_free(&g);
    return 0;
}

static int phantom_estimate(const struct gj_job *job, struct gj_needs *needs, struct gj_error *err)
{
    struct rc_geom g;
    struct rc_phantom ph;
    if (phantom_parse(job, &g, &ph, err))
        return -1;
    needs->can_use_gpu = 0;
    needs->needs_gpu = 0;
    needs->device_bytes = 0;
    needs->host_bytes = (rc_proj_count(&g) + rc_vol_count(&g)) * 4;
    rc_geom_free(&g);
    return 0;
}

static int phantom_run(struct gj_ctx *ctx, struct gj_error *err)
{
    const struct gj_job *job = ctx->job;
    struct rc_geom g;
    struct rc_phantom ph;
    if (phantom_parse(job, &g, &ph, err))
        return GJ_RUN_FAILED;
    int threads = ctx->cpu_threads > 0 ? ctx->cpu_threads : 1;
    int result = GJ_RUN_FAILED;
    float *proj = malloc(sizeof(float) * rc_proj_count(&g));
    float *truth = NULL;
    char path[4096];
    double t0 = rc_now();
    if (!proj) {
        gj_error_set(err, "", "out of memory for the projections");
        goto out;
    }
    rc_phantom_project(&ph, &g, proj, threads);
    double t_proj = rc_now() - t0;
    gj_progress(ctx, 0.5, "projections computed");
    if (gj_cancelled(ctx)) {
        result = GJ_RUN_CANCELED;
        goto out;
    }
    const char *fmt = json_string_value(json_object_get(job->params, "format"));
    int raw = fmt && strcmp(fmt, "raw") == 0;
    if (raw) {
        if (gj_path_join(path, sizeof path, ctx->output_dir, "projections.raw") ||
            gj_write_file(path, proj, rc_proj_count(&g) * 4)) {
            gj_error_set(err, "", "cannot write projections.raw: %s", strerror(errno));
            goto out;
        }
    } else {
        int64_t sizes[3] = { g.cols, g.rows, (int64_t)g.batch * g.nviews };
        double sp[3] = { g.du, g.dv, 1 };
        if (gj_path_join(path, sizeof path, ctx->output_dir, "projections.nrrd") ||
            rc_nrrd_write(path, proj, 3, sizes, sp, NULL, 0)) {
            gj_error_set(err, "", "cannot write projections.nrrd: %s", strerror(errno));
            goto out;
        }
    }
    free(proj);
    proj = NULL;
    json_t *tv = json_object_get(job->params, "truth");
    double t_truth = 0;
    if (!tv || json_is_true(tv)) {
        t0 = rc_now();
        truth = malloc(sizeof(float) * rc_vol_count(&g));
        if (!truth) {
            gj_error_set(err, "", "out of memory for the ground truth");
            goto out;
        }
        json_t *ss = json_object_get(job->params, "supersample");
        int s = json_is_integer(ss) ? (int)json_integer_value(ss) : (g.type == RC_CONE3D ? 2 : 4);
        rc_phantom_truth(&ph, &g, s, truth, threads);
        int64_t sizes[3] = { g.nx, g.ny, g.nz };
        double sp[3] = { g.vx, g.vy, g.vz };
        double org[3] = { -0.5 * (g.nx - 1) * g.vx + g.ox, -0.5 * (g.ny - 1) * g.vy + g.oy,
                          -0.5 * (g.nz - 1) * g.vz + g.oz };
        if (gj_path_join(path, sizeof path, ctx->output_dir, "truth.nrrd") ||
            rc_nrrd_write(path, truth, 3, sizes, sp, org, 1)) {
            gj_error_set(err, "", "cannot write truth.nrrd: %s", strerror(errno));
            goto out;
        }
        if (gj_path_join(path, sizeof path, ctx->output_dir, "preview.png") ||
            rc_write_preview(path, truth, g.nx, g.ny, g.type == RC_CONE3D ? g.nz : 1)) {
            gj_error_set(err, "", "cannot write preview.png");
            goto out;
        }
        t_truth = rc_now() - t0;
    }
    json_t *ell = json_array();
    for (int i = 0; i < ph.n; i++)
        json_array_append_new(ell, json_pack("[f,f,f,f,f,f,f,f]", ph.e[i].A, ph.e[i].a, ph.e[i].b, ph.e[i].c,
                                             ph.e[i].x0, ph.e[i].y0, ph.e[i].z0, ph.e[i].phi * 180 / M_PI));
    json_t *rep = json_pack("{s:s, s:s, s:o, s:s, s:{s:f, s:f}, s:i, s:i, s:i, s:i}", "kind", "phantom", "geometry",
                            rc_gtype_name(g.type), "ellipsoids_A_a_b_c_x0_y0_z0_phi", ell, "projections",
                            raw ? "projections.raw" : "projections.nrrd", "time_s", "projections", t_proj, "truth",
                            t_truth, "views", g.nviews, "cols", g.cols, "rows", g.rows, "batch", g.batch);
    char *text = json_dumps(rep, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(rep);
    int ok = text && gj_path_join(path, sizeof path, ctx->output_dir, "report.json") == 0 &&
             gj_write_file(path, text, strlen(text)) == 0;
    free(text);
    if (!ok) {
        gj_error_set(err, "", "cannot write report.json");
        goto out;
    }
    result = GJ_RUN_OK;
out:
    free(proj);
    free(truth);
    rc_geom_free(&g);
    return result;
}

const struct gj_kind gj_kind_phantom = {
    .name = "phantom",
    .summary = "Shepp-Logan / Kak-Slaney / Yu-Ye-Wang phantoms with exact projections and ground truth",
    .params_schema = phantom_schema,
    .inputs = NULL,
    .n_inputs = 0,
    .validate = phantom_validate,
    .estimate = phantom_estimate,
    .run = phantom_run,
};
