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

/* Host bytes at the peak: the projections while they are computed and written, then
 * the ground truth (with its preview when with_preview), one after the other. */
static uint64_t phantom_host_bytes(const struct gj_job *job, const struct rc_geom *g, int with_preview)
{
    json_t *tv = json_object_get(job->params, "truth");
    uint64_t proj = rc_proj_count(g) * 4, truth = 0;
    if (!tv || json_is_true(tv))
        truth = rc_vol_count(g) * 4 +
                (with_preview ? rc_preview_bytes(g->nx, g->ny, g->type == RC_CONE3D ? g->nz : 1) : 0);
    return proj > truth ? proj : truth;
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

/* No inputs: the buffers are known at submit (the floor leaves out the preview). */
static uint64_t phantom_host_floor(const struct gj_job *job)
{
    struct rc_geom g;
    struct rc_phantom ph;
    struct gj_error ignored = { 0 };
    if (phantom_parse(job, &g, &ph, &ignored))
        return 0;
    uint64_t bytes = phantom_host_bytes(job, &g, 0);
    rc_geom_free(&g);
    return bytes;
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
    needs->host_bytes = phantom_host_bytes(job, &g, 1) + RC_HOST_OVERHEAD;
    rc_geom_free(&g);
    return 0;
}

/* 0, -1 with err, or 1 when cancelled: the value of a write through the poll. */
static int written(int rc, const char *name, struct gj_error *err)
{
    return rc < 0 ? gj_error_set(err, "", "cannot write %s: %s", name, strerror(errno)) : rc;
}

/* projections.nrrd (or .raw): computed, written, freed. */
static int write_projections(struct gj_ctx *ctx, const struct rc_geom *g, const struct rc_phantom *ph,
                             int threads, struct gj_poll *poll, int raw, struct gj_error *err)
{
    char path[GJ_PATH_MAX];
    float *proj = malloc(sizeof(float) * rc_proj_count(g));
    if (!proj)
        return gj_error_set(err, "", "out of memory for the projections");
    gj_poll_phase(poll, 0.0, 0.5, rc_phantom_project_units(g));
    int rc = rc_phantom_project(ph, g, proj, threads, poll);
    const char *name = raw ? "projections.raw" : "projections.nrrd";
    if (rc == 0 && gj_path_join(path, sizeof path, ctx->output_dir, name))
        rc = gj_error_set(err, "", "output path too long");
    if (rc == 0 && raw) {
        rc = written(rc_raw_write(path, proj, rc_proj_count(g), poll), name, err);
    } else if (rc == 0) {
        int64_t sizes[3] = { g->cols, g->rows, (int64_t)g->batch * g->nviews };
        double sp[3] = { g->du, g->dv, 1 };
        rc = written(rc_nrrd_write(path, proj, 3, sizes, sp, NULL, 0, poll), name, err);
    }
    free(proj);
    return rc;
}

/* truth.nrrd and preview.png. */
static int write_truth(struct gj_ctx *ctx, const struct rc_geom *g, const struct rc_phantom *ph,
                       int threads, struct gj_poll *poll, struct gj_error *err)
{
    char path[GJ_PATH_MAX];
    float *truth = malloc(sizeof(float) * rc_vol_count(g));
    if (!truth)
        return gj_error_set(err, "", "out of memory for the ground truth");
    json_t *ss = json_object_get(ctx->job->params, "supersample");
    int s = json_is_integer(ss) ? (int)json_integer_value(ss) : (g->type == RC_CONE3D ? 2 : 4);
    gj_poll_phase(poll, 0.5, 1.0, rc_phantom_truth_units(g));
    int rc = rc_phantom_truth(ph, g, s, truth, threads, poll);
    int64_t sizes[3] = { g->nx, g->ny, g->nz };
    double sp[3] = { g->vx, g->vy, g->vz };
    double org[3] = { -0.5 * (g->nx - 1) * g->vx + g->ox, -0.5 * (g->ny - 1) * g->vy + g->oy,
                      -0.5 * (g->nz - 1) * g->vz + g->oz };
    if (rc == 0) {
        rc = gj_path_join(path, sizeof path, ctx->output_dir, "truth.nrrd") ? -1
             : rc_nrrd_write(path, truth, 3, sizes, sp, org, 1, poll);
        rc = written(rc, "truth.nrrd", err);
    }
    if (rc == 0 && (gj_path_join(path, sizeof path, ctx->output_dir, "preview.png") ||
                    rc_write_preview(path, truth, g->nx, g->ny, g->type == RC_CONE3D ? g->nz : 1)))
        rc = gj_error_set(err, "", "cannot write preview.png");
    free(truth);
    return rc;
}

static int write_report(struct gj_ctx *ctx, const struct rc_geom *g, const struct rc_phantom *ph, int raw,
                        double t_proj, double t_truth, struct gj_error *err)
{
    char path[GJ_PATH_MAX];
    json_t *ell = json_array();
    for (int i = 0; i < ph->n; i++)
        json_array_append_new(ell, json_pack("[f,f,f,f,f,f,f,f]", ph->e[i].A, ph->e[i].a, ph->e[i].b, ph->e[i].c,
                                             ph->e[i].x0, ph->e[i].y0, ph->e[i].z0, ph->e[i].phi * 180 / M_PI));
    json_t *rep = json_pack("{s:s, s:s, s:o, s:s, s:{s:f, s:f}, s:i, s:i, s:i, s:i}", "kind", "phantom", "geometry",
                            rc_gtype_name(g->type), "ellipsoids_A_a_b_c_x0_y0_z0_phi", ell, "projections",
                            raw ? "projections.raw" : "projections.nrrd", "time_s", "projections", t_proj, "truth",
                            t_truth, "views", g->nviews, "cols", g->cols, "rows", g->rows, "batch", g->batch);
    char *text = json_dumps(rep, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(rep);
    int ok = text && gj_path_join(path, sizeof path, ctx->output_dir, "report.json") == 0 &&
             gj_write_file(path, text, strlen(text)) == 0;
    free(text);
    return ok ? 0 : gj_error_set(err, "", "cannot write report.json");
}

static int phantom_run(struct gj_ctx *ctx, struct gj_error *err)
{
    const struct gj_job *job = ctx->job;
    struct rc_geom g;
    struct rc_phantom ph;
    if (phantom_parse(job, &g, &ph, err))
        return GJ_RUN_FAILED;
    int threads = ctx->cpu_threads > 0 ? ctx->cpu_threads : 1;
    const char *fmt = json_string_value(json_object_get(job->params, "format"));
    int raw = fmt && strcmp(fmt, "raw") == 0;
    json_t *tv = json_object_get(job->params, "truth");
    struct gj_poll poll;
    gj_poll_init_ctx(&poll, ctx, "phantom");
    double t0 = gj_now(), t_proj, t_truth = 0;
    int rc = write_projections(ctx, &g, &ph, threads, &poll, raw, err);
    t_proj = gj_now() - t0;
    if (rc == 0)
        gj_progress(ctx, 0.5, "projections computed");
    if (rc == 0 && (!tv || json_is_true(tv))) {
        t0 = gj_now();
        rc = write_truth(ctx, &g, &ph, threads, &poll, err);
        t_truth = gj_now() - t0;
    }
    if (rc == 0)
        rc = write_report(ctx, &g, &ph, raw, t_proj, t_truth, err);
    rc_geom_free(&g);
    return rc == 0 ? GJ_RUN_OK : rc > 0 ? GJ_RUN_CANCELED : GJ_RUN_FAILED;
}

/* report.json holds the run's times. */
static const char *const phantom_run_records[] = { "report.json", NULL };

const struct gj_kind gj_kind_phantom = {
    .name = "phantom",
    .summary = "Shepp-Logan / Kak-Slaney / Yu-Ye-Wang phantoms with exact projections and ground truth",
    .params_schema = phantom_schema,
    .inputs = NULL,
    .n_inputs = 0,
    .validate = phantom_validate,
    .estimate = phantom_estimate,
    .run = phantom_run,
    .host_bytes_floor = phantom_host_floor,
    .version = "1",
    .reproducible = GJ_REPRO_CPU,
    .run_record_outputs = phantom_run_records,
};
