/*
 * kind_recon.c — job kind `recon`: batch 2D FBP / SART / SIRT and 3D FDK (or cone
 * SART / SIRT), with z-slab splitting into child tasks when the volume and its
 * projections do not fit the device memory limit.
 *
 * Stage 0: parse, estimate; when a split is needed spawn one child per slab (same
 * params plus "slab": {z0, nz}, same projections input) and wait; otherwise
 * reconstruct. Stage 1: assemble the children's volume.nrrd slabs into one volume.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/gj_kind.h"
#include "recon/recon.h"
#include "recon/recon_gpu.h"
#include "recon/recon_schema.h"

#define SCHEMA_HEAD "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\","

static const char recon_schema[] =
    SCHEMA_HEAD "\"additionalProperties\":false,\"required\":[\"geometry\"],\"properties\":{"
    "\"algorithm\":{\"enum\":[\"fbp\",\"sart\",\"sirt\",\"fdk\"],\"description\":\"fbp (2D), fdk (cone3d), sart, sirt; default fbp / fdk\"},"
    "\"geometry\":" RC_GEOMETRY_SCHEMA ",\"volume\":" RC_VOLUME_SCHEMA ","
    "\"filter\":{\"enum\":[\"ram-lak\",\"shepp-logan\",\"cosine\",\"hamming\",\"hann\"],\"description\":\"FBP/FDK ramp window (zero-padded); default ram-lak\"},"
    "\"short_scan\":{\"type\":\"boolean\",\"description\":\"fan2d / cone3d: Parker weights for a scan of 180 degrees plus the fan angle\"},"
    "\"iterations\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,\"description\":\"sart/sirt passes over all views (default 5 / 50)\"},"
    "\"relaxation\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":2,\"description\":\"sart/sirt relaxation (default 0.5 / 1.0)\"},"
    "\"subsets\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,\"description\":\"sart ordered subsets of views (default: one view per subset)\"},"
    "\"nonnegative\":{\"type\":\"boolean\",\"description\":\"clamp negative values after each update (default true)\"},"
    "\"batch\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,\"description\":\"2D: sinograms stacked in the input\"},"
    "\"max_device_bytes\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"split into z-slabs so that each needs at most this much device memory\"},"
    "\"threads\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1024,\"description\":\"CPU threads (default: all the job may use)\"},"
    "\"slab\":{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"z0\",\"nz\"],\"properties\":{"
    "\"z0\":{\"type\":\"integer\",\"minimum\":0},\"nz\":{\"type\":\"integer\",\"minimum\":1}},"
    "\"description\":\"internal (slab child tasks): reconstruct only slices z0..z0+nz-1\"}"
    "}}";

static const struct gj_input_spec recon_inputs[] = {
    { "projections", 1, 0, "float32 little-endian [batch][views][rows][cols] (raw), or an NRRD file of the same values" },
};

/* Device bytes to reconstruct nzs slices at once on the GPU path (kernels/recon): the
 * projections (plus their copy in a texture array for FBP / FDK, plus row sums, residual and
 * forward projection for SART / SIRT), the slices (plus update, normalisation and ones for
 * SART / SIRT), and a fixed 320 MiB for cuFFT work areas and the context. */
#define RC_GPU_OVERHEAD (320ull << 20)
uint64_t rc_estimate_bytes(const struct rc_geom *g, const struct rc_opts *o, int nzs)
{
    uint64_t slice = (uint64_t)g->nx * g->ny * 4, pset = (uint64_t)g->nviews * g->rows * g->cols * 4;
    int iterative = o->algo == RC_SART || o->algo == RC_SIRT;
    uint64_t vol_mult = iterative ? 4 : 1, proj_mult = iterative ? 4 : 2;
    if (g->type != RC_CONE3D)
        return (uint64_t)nzs * (slice * vol_mult + pset * proj_mult) + RC_GPU_OVERHEAD;
    return (uint64_t)nzs * slice * vol_mult + pset * proj_mult + RC_GPU_OVERHEAD;
}

static uint64_t param_limit(const struct gj_job *job)
{
    json_t *v = json_object_get(job->params, "max_device_bytes");
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

/* Slices per slab for a limit (0: no limit): >= 1, or -1 with err when one slice does not fit. */
static int slab_size(const struct rc_geom *g, const struct rc_opts *o, uint64_t limit, int *per,
                     struct gj_error *err)
{
    *per = g->nz;
    if (!limit || rc_estimate_bytes(g, o, g->nz) <= limit)
        return 0;
    if ((o->algo == RC_SART || o->algo == RC_SIRT) && g->type == RC_CONE3D) {
        gj_error_set(err, "volume", "cone-beam %s needs %llu MiB of device memory, over the limit of %llu MiB, and cannot be split "
                     "into slabs (rays cross every slab); use fdk or a smaller volume", rc_algo_name(o->algo),
                     (unsigned long long)(rc_estimate_bytes(g, o, g->nz) >> 20), (unsigned long long)(limit >> 20));
        err->status = 413;
        return -1;
    }
    if (rc_estimate_bytes(g, o, 1) > limit) {
        gj_error_set(err, "volume", "even one slice needs %llu bytes of device memory, over the limit of %llu",
                     (unsigned long long)rc_estimate_bytes(g, o, 1), (unsigned long long)limit);
        err->status = 413;
        return -1;
    }
    int lo = 1, hi = g->nz;   /* largest n with estimate(n) <= limit */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (rc_estimate_bytes(g, o, mid) <= limit)
            lo = mid;
        else
            hi = mid - 1;
    }
    *per = lo;
    return 0;
}

static int parse_all(const struct gj_job *job, struct rc_geom *g, struct rc_opts *o, int *z0, int *nzs,
                     struct gj_error *err)
{
    if (rc_geom_parse(job->params, g, err))
        return -1;
    if (rc_opts_parse(job->params, g, o, err)) {
        rc_geom_free(g);
        return -1;
    }
    *z0 = 0;
    *nzs = g->nz;
    json_t *slab = json_object_get(job->params, "slab");
    if (slab) {
        json_int_t a = json_integer_value(json_object_get(slab, "z0"));
        json_int_t n = json_integer_value(json_object_get(slab, "nz"));
        if (a < 0 || n < 1 || a + n > g->nz) {
            rc_geom_free(g);
            return gj_error_set(err, "slab", "slab z0=%lld nz=%lld lies outside the volume's %d slices", (long long)a,
                                (long long)n, g->nz);
        }
        if (g->type == RC_CONE3D && o->algo != RC_FDK) {
            rc_geom_free(g);
            return gj_error_set(err, "slab", "slabs apply to fdk and to 2D batches only");
        }
        *z0 = (int)a;
        *nzs = (int)n;
    }
    return 0;
}

static int recon_validate(const struct gj_job *job, struct gj_error *err)
{
    struct rc_geom g;
    struct rc_opts o;
    int z0, nzs, per;
    if (parse_all(job, &g, &o, &z0, &nzs, err))
        return -1;
    int rc = 0;
    const struct gj_input *in = gj_job_input(job, "projections");
    if (in && in->size == GJ_INPUT_SIZE_UNKNOWN)
        in = NULL;   /* another job's output, not written yet: the run checks its size */
    uint64_t want = rc_proj_count(&g) * 4;
    if (in && in->size < want) {
        rc = gj_error_set(err, "projections", "projections are %llu bytes, shorter than the %llu bytes the geometry needs "
                          "(batch %d x views %d x rows %d x cols %d x 4)", (unsigned long long)in->size,
                          (unsigned long long)want, g.batch, g.nviews, g.rows, g.cols);
    } else if (in && in->size > want + 65536) {
        rc = gj_error_set(err, "projections", "projections are %llu bytes, longer than the %llu bytes the geometry needs "
                          "(batch %d x views %d x rows %d x cols %d x 4)", (unsigned long long)in->size,
                          (unsigned long long)want, g.batch, g.nviews, g.rows, g.cols);
    } else if (slab_size(&g, &o, param_limit(job), &per, err)) {
        rc = -1;
    } else if (rc_check_short_scan(&g, err)) {
        rc = -1;
    }
    if (rc && !err->status)
        err->status = 422;
    rc_geom_free(&g);
    return rc;
}

/* Host bytes of reconstructing nzs slices on the CPU, at the peak: the projections read
 * (2D: those of the slices), the slices, and the larger of the algorithm's work arrays
 * and the preview. FBP of parallel beams pads the sinograms of a piece of slices;
 * SART / SIRT hold row sums and residuals per ray and ones, updates and normalisation
 * per voxel, for as many slices at once as threads in a 2D batch. */
static uint64_t cpu_bytes(const struct rc_geom *g, const struct rc_opts *o, int nzs, int threads)
{
    const int two_d = g->type != RC_CONE3D;
    uint64_t slice = (uint64_t)g->nx * g->ny * 4, pset = (uint64_t)g->nviews * g->rows * g->cols * 4;
    uint64_t proj = two_d ? (uint64_t)nzs * pset : pset, vol = (uint64_t)nzs * slice, work = 0;
    if ((o->algo == RC_FBP || o->algo == RC_FDK) && g->type == RC_PARALLEL2D) {
        double chunk = floor(2e8 / ((double)g->nx * g->ny * g->nviews));
        uint64_t piece = chunk < 1 ? 1 : chunk > nzs ? (uint64_t)nzs : (uint64_t)chunk;
        work = piece * (uint64_t)g->nviews * (uint64_t)(g->cols + 4) * 4;
    } else if (o->algo == RC_FDK) {
        work = 8ull * (uint64_t)(g->cols + 3) * (uint64_t)(g->rows + 3) * 4;
    } else if (o->algo == RC_SART || o->algo == RC_SIRT) {
        int at_once = two_d && (nzs >= threads || threads == 1) ? (nzs < threads ? nzs : threads) : 1;
        work = two_d ? (uint64_t)at_once * (3 * slice + 2 * pset) : 3 * vol + 2 * proj;
    }
    uint64_t preview = rc_preview_bytes(g->nx, g->ny, two_d ? 1 : nzs);
    return proj + vol + (work > preview ? work : preview);
}

/* Host bytes of the assembly of a split volume: the volume, one slab's file, the preview. */
static uint64_t assembly_bytes(const struct rc_geom *g, int per)
{
    return rc_vol_count(g) * 4 + (uint64_t)g->nx * g->ny * per * 4 + 65536 +
           rc_preview_bytes(g->nx, g->ny, g->type == RC_CONE3D ? g->nz : 1);
}

/* Threads a run may use at most: the param, else every core of the host. */
static int max_threads(const struct gj_job *job)
{
    json_t *tj = json_object_get(job->params, "threads");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return json_is_integer(tj) ? (int)json_integer_value(tj) : cores > 0 ? (int)cores : 1;
}

/* The GPU path's host side: the CUDA context and cuFFT (a few hundred MiB resident). */
#define RC_GPU_HOST_BYTES (512ull << 20)

static int recon_estimate(const struct gj_job *job, struct gj_needs *needs, struct gj_error *err)
{
    struct rc_geom g;
    struct rc_opts o;
    int z0, nzs, per;
    if (parse_all(job, &g, &o, &z0, &nzs, err))
        return -1;
    if (slab_size(&g, &o, param_limit(job), &per, err)) {
        rc_geom_free(&g);
        return -1;
    }
    int is_slab = json_object_get(job->params, "slab") != NULL;
    needs->can_use_gpu = rc_gpu_available();
    needs->needs_gpu = 0;
    /* a job that splits needs one slab's worth; a slab child its own slices */
    needs->device_bytes = rc_estimate_bytes(&g, &o, nzs < per ? nzs : per);
    needs->host_bytes = (!is_slab && per < g.nz ? assembly_bytes(&g, per) : cpu_bytes(&g, &o, nzs, max_threads(job))) +
                        RC_HOST_OVERHEAD + (needs->can_use_gpu ? RC_GPU_HOST_BYTES : 0);
    rc_geom_free(&g);
    return 0;
}

/* What any run holds at once: the projections it reads and its slices, or (split into
 * slabs by max_device_bytes) the whole volume while it is assembled. */
static uint64_t recon_host_floor(const struct gj_job *job)
{
    struct rc_geom g;
    struct rc_opts o;
    struct gj_error ignored = { 0 };
    int z0, nzs, per;
    if (parse_all(job, &g, &o, &z0, &nzs, &ignored))
        return 0;
    uint64_t floor_bytes = 0;
    if (slab_size(&g, &o, param_limit(job), &per, &ignored) == 0) {
        int split = json_object_get(job->params, "slab") == NULL && per < g.nz;
        uint64_t pset = (uint64_t)g.nviews * g.rows * g.cols * 4;
        floor_bytes = split ? rc_vol_count(&g) * 4
                            : (g.type != RC_CONE3D ? (uint64_t)nzs * pset : pset) + (uint64_t)g.nx * g.ny * nzs * 4;
    }
    rc_geom_free(&g);
    return floor_bytes;
}

struct hook_ctx {
    struct gj_ctx *ctx;
    double lo, hi;
};

static void hk_progress(void *p, double f)
{
    struct hook_ctx *h = p;
    gj_progress(h->ctx, h->lo + (h->hi - h->lo) * f, "reconstructing");
}

static int hk_cancelled(void *p)
{
    struct hook_ctx *h = p;
    return gj_cancelled(h->ctx);
}

static json_t *geometry_json(const struct rc_geom *g)
{
    json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:f, s:f, s:f, s:f}", "type", rc_gtype_name(g->type), "views",
                          g->nviews, "cols", g->cols, "rows", g->rows, "spacing_u", g->du, "spacing_v", g->dv,
                          "offset_u", g->off_u, "offset_v", g->off_v);
    if (g->type != RC_PARALLEL2D) {
        json_object_set_new(j, "source_origin_mm", json_real(g->sod));
        json_object_set_new(j, "source_detector_mm", json_real(g->sdd));
    }
    json_object_set_new(j, "matrices", json_boolean(g->mat != NULL));
    json_object_set_new(j, "first_angle_deg", json_real(g->angles[0] * 180 / M_PI));
    json_object_set_new(j, "last_angle_deg", json_real(g->angles[g->nviews - 1] * 180 / M_PI));
    json_object_set_new(j, "short_scan", json_boolean(g->short_scan));
    return j;
}

static int write_outputs(struct gj_ctx *ctx, const struct rc_geom *g, const struct rc_opts *o, const float *vol,
                         int z0, int nzs, json_t *times, int slabs, double updates, int on_gpu, struct gj_error *err)
{
    char path[GJ_PATH_MAX];
    int64_t sizes[3] = { g->nx, g->ny, nzs };
    double sp[3] = { g->vx, g->vy, g->vz };
    double org[3] = { -0.5 * (g->nx - 1) * g->vx + g->ox, -0.5 * (g->ny - 1) * g->vy + g->oy,
                      (z0 - 0.5 * (g->nz - 1)) * g->vz + g->oz };
    double t0 = gj_now();
    struct gj_poll poll;
    gj_poll_init_ctx(&poll, ctx, "writing the volume");
    int w = gj_path_join(path, sizeof path, ctx->output_dir, "volume.nrrd") ? -1
            : rc_nrrd_write(path, vol, 3, sizes, sp, org, 1, &poll);
    if (w)
        return w > 0 ? 1 : gj_error_set(err, "", "cannot write volume.nrrd: %s", strerror(errno));
    if (gj_path_join(path, sizeof path, ctx->output_dir, "preview.png") ||
        rc_write_preview(path, vol, g->nx, g->ny, g->type == RC_CONE3D ? nzs : 1))
        return gj_error_set(err, "", "cannot write preview.png: %s", strerror(errno));
    json_object_set_new(times, "write_s", json_real(gj_now() - t0));
    double total = 0;
    const char *k;
    json_t *v;
    json_object_foreach(times, k, v)
        total += json_real_value(v);
    double recon_s = json_real_value(json_object_get(times, "reconstruct_s"));
    json_t *rep = json_pack("{s:s, s:s, s:o, s:{s:i, s:i, s:i, s:[f,f,f], s:[f,f,f]}, s:s, s:i, s:O, s:f, s:f, s:i}",
                            "kind", "recon", "algorithm", rc_algo_name(o->algo), "geometry", geometry_json(g), "volume",
                            "nx", g->nx, "ny", g->ny, "nz", nzs, "voxel_mm", g->vx, g->vy, g->vz, "origin_mm", org[0],
                            org[1], org[2], "device", on_gpu ? "gpu" : "cpu", "threads", o->threads,
                            "time_s", times, "total_s", total, "updates_per_second",
                            recon_s > 0 ? updates / recon_s : 0.0, "slabs", slabs);
    if (o->algo == RC_FBP || o->algo == RC_FDK)
        json_object_set_new(rep, "filter", json_string(rc_filter_name(o->filter)));
    else {
        json_object_set_new(rep, "iterations", json_integer(o->iterations));
        json_object_set_new(rep, "relaxation", json_real(o->relaxation));
        json_object_set_new(rep, "subsets", json_integer(o->algo == RC_SIRT ? 1 : o->subsets));
    }
    if (z0 != 0 || nzs != g->nz)
        json_object_set_new(rep, "slab", json_pack("{s:i, s:i}", "z0", z0, "nz", nzs));
    char *text = json_dumps(rep, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(rep);
    int ok = text && gj_path_join(path, sizeof path, ctx->output_dir, "report.json") == 0 &&
             gj_write_file(path, text, strlen(text)) == 0;
    free(text);
    if (!ok)
        return gj_error_set(err, "", "cannot write report.json: %s", strerror(errno));
    return 0;
}

/* Child c's slab (volume.nrrd) into its slices of vol, from slice *z on. */
static int read_slab(struct gj_ctx *ctx, const struct rc_geom *g, size_t c, float *vol, int *z, struct gj_error *err)
{
    const struct gj_child_result *ch = NULL;
    for (size_t i = 0; i < ctx->n_children; i++)
        if (ctx->children[i].index == (int)c)
            ch = &ctx->children[i];
    char path[GJ_PATH_MAX];
    if (!ch || gj_path_join(path, sizeof path, ch->output_dir, "volume.nrrd"))
        return gj_error_set(err, "", "slab %zu is missing", c);
    char *data = NULL;
    size_t len = 0;
    if (gj_read_file(path, RC_MAX_VOLUME_BYTES + 65536, &data, &len))
        return gj_error_set(err, "", "cannot read slab %zu: %s", c, strerror(errno));
    uint64_t slice = (uint64_t)g->nx * g->ny;
    struct gj_nrrd h;
    int rc = 0;
    if (gj_nrrd_parse(data, len < 65536 ? len : 65536, len, &h, err) || h.dim != 3 || h.sizes[0] != g->nx ||
        h.sizes[1] != g->ny || *z + h.sizes[2] > g->nz)
        rc = gj_error_set(err, "", "slab %zu has the wrong size", c);
    else {
        memcpy(vol + (uint64_t)*z * slice, data + h.data_offset, (size_t)(h.sizes[2] * (int64_t)slice) * 4);
        *z += (int)h.sizes[2];
    }
    free(data);
    return rc;
}

/* Stage 1: the children's slabs, in their order, into one volume and its outputs. */
static int assemble(struct gj_ctx *ctx, const struct rc_geom *g, const struct rc_opts *o, struct gj_error *err)
{
    double t0 = gj_now();
    float *vol = malloc(sizeof(float) * rc_vol_count(g));
    if (!vol)
        return gj_error_set(err, "", "out of memory for the %llu MiB volume", (unsigned long long)(rc_vol_count(g) * 4 >> 20));
    int z = 0, rc = 0;
    for (size_t c = 0; c < ctx->n_children && rc == 0; c++) {
        rc = gj_cancelled(ctx) ? 1 : read_slab(ctx, g, c, vol, &z, err);
        gj_progress(ctx, 0.5 * (double)(c + 1) / (double)ctx->n_children, "assembling slabs");
    }
    if (rc == 0 && z != g->nz)
        rc = gj_error_set(err, "", "slabs hold %d slices, the volume %d", z, g->nz);
    if (rc == 0) {
        json_t *times = json_object();
        json_object_set_new(times, "assemble_s", json_real(gj_now() - t0));
        json_object_set_new(times, "reconstruct_s", json_real(0));
        rc = write_outputs(ctx, g, o, vol, 0, g->nz, times, (int)ctx->n_children, 0, ctx->device != GJ_DEVICE_CPU, err);
        json_decref(times);
    }
    free(vol);
    return rc == 0 ? GJ_RUN_OK : rc > 0 ? GJ_RUN_CANCELED : GJ_RUN_FAILED;
}

/* Stage 0 of a volume over the device limit: one child per z-slab, then wait. */
static int spawn_slabs(struct gj_ctx *ctx, const struct rc_geom *g, int per, uint64_t limit,
                       const struct gj_input *in, struct gj_error *err)
{
    const struct gj_job *job = ctx->job;
    if (!ctx->spawn_child)
        return gj_error_set(err, "volume", "the volume needs %d slabs but this host cannot run child tasks",
                            (g->nz + per - 1) / per);
    int n = 0;
    for (int z = 0; z < g->nz; z += per, n++) {
        json_t *p = json_deep_copy(job->params);
        json_object_del(p, "max_device_bytes");
        json_object_set_new(p, "slab", json_pack("{s:i, s:i}", "z0", z, "nz", z + per <= g->nz ? per : g->nz - z));
        int r = ctx->spawn_child(ctx, "recon", p, in, 1, err);
        json_decref(p);
        if (r)
            return -1;
    }
    gj_logf(ctx, "recon: %d z-slabs of at most %d slices (device limit %llu bytes)", n, per, (unsigned long long)limit);
    return GJ_RUN_WAIT_CHILDREN;
}

/* The reconstruction on the job's GPU, or on the CPU (also when the GPU fails). 0, 1
 * when cancelled, or -1 with err; *on_gpu says where it ran. */
static int reconstruct(struct gj_ctx *ctx, const struct rc_geom *g, const struct rc_opts *o, float *proj,
                       float *vol, int z0, int nzs, struct rc_hooks *hooks, int *on_gpu, struct gj_error *err)
{
    *on_gpu = 0;
#if GJ_HAVE_CUDA
    if (ctx->device != GJ_DEVICE_CPU) {
        int r = rc_gpu_reconstruct(ctx->device, g, o, proj, vol, z0, nzs, hooks, err);
        if (r >= 0) {   /* done, or cancelled: no CPU retry */
            *on_gpu = 1;
            return r;
        }
        gj_logf(ctx, "recon: GPU %d failed (%s); reconstructing on the CPU", ctx->device, err->message);
        gj_error_clear(err);
    }
#else
    (void)ctx;
#endif
    return rc_reconstruct(g, o, proj, vol, z0, nzs, hooks, err);
}

/* Phase times and updates of the report. */
static double add_phase_times(json_t *times, const struct rc_geom *g, const struct rc_opts *o, int nzs,
                              const struct rc_hooks *hooks)
{
    json_t *ph = json_object();
    if (o->algo == RC_FBP || o->algo == RC_FDK) {
        json_object_set_new(ph, "filter_s", json_real(hooks->t_filter));
        json_object_set_new(ph, "backproject_s", json_real(hooks->t_backproject));
    } else {
        json_object_set_new(ph, "iterate_s", json_real(hooks->t_iterate));
    }
    json_object_set_new(times, "phases", ph);
    double updates = (double)g->nx * g->ny * nzs * g->nviews;
    if (o->algo == RC_SART || o->algo == RC_SIRT)
        updates *= 2.0 * o->iterations;
    return updates;
}

/* Slices [z0, z0 + nzs): their projections read, reconstructed, written. */
static int reconstruct_slab(struct gj_ctx *ctx, const struct rc_geom *g, const struct rc_opts *o, int z0,
                            int nzs, const struct gj_input *in, json_t *times, struct gj_error *err)
{
    double t0 = gj_now();
    const int two_d = g->type != RC_CONE3D;
    uint64_t pset = (uint64_t)g->nviews * g->rows * g->cols;
    uint64_t first = two_d ? (uint64_t)z0 * pset : 0, count = two_d ? (uint64_t)nzs * pset : pset;
    float *proj = malloc(sizeof(float) * count);
    float *vol = malloc(sizeof(float) * (uint64_t)g->nx * g->ny * nzs);
    struct hook_ctx hc = { ctx, 0.05, 0.95 };
    struct rc_hooks hooks = { &hc, hk_progress, hk_cancelled, 0, 0, 0 };
    struct gj_poll poll;
    gj_poll_init_ctx(&poll, ctx, "reading projections");
    int r = -1, on_gpu = 0;
    if (!proj || !vol)
        gj_error_set(err, "", "out of memory (%llu MiB of projections, %llu MiB of volume)", (unsigned long long)(count >> 18),
                     (unsigned long long)((uint64_t)g->nx * g->ny * nzs >> 18));
    else
        r = rc_read_projections(in->path, proj, rc_proj_count(g), first, count, &poll, err);
    if (r == 0) {
        json_object_set_new(times, "read_s", json_real(gj_now() - t0));
        gj_progress(ctx, 0.05, "projections read");
        t0 = gj_now();
        r = reconstruct(ctx, g, o, proj, vol, z0, nzs, &hooks, &on_gpu, err);
    }
    if (r == 0) {
        json_object_set_new(times, "reconstruct_s", json_real(gj_now() - t0));
        double updates = add_phase_times(times, g, o, nzs, &hooks);
        r = write_outputs(ctx, g, o, vol, z0, nzs, times, 1, updates, on_gpu, err);
    }
    free(proj);
    free(vol);
    return r;
}

static int recon_run(struct gj_ctx *ctx, struct gj_error *err)
{
    const struct gj_job *job = ctx->job;
    struct rc_geom g;
    struct rc_opts o;
    int z0, nzs, per;
    if (parse_all(job, &g, &o, &z0, &nzs, err))
        return GJ_RUN_FAILED;
    o.threads = ctx->cpu_threads > 0 ? ctx->cpu_threads : 1;
    json_t *tj = json_object_get(job->params, "threads");
    if (json_is_integer(tj) && json_integer_value(tj) < o.threads)
        o.threads = (int)json_integer_value(tj);
    int result = GJ_RUN_FAILED, r = -1;
    json_t *times = json_object();
    const struct gj_input *in = gj_job_input(job, "projections");
    int is_slab = json_object_get(job->params, "slab") != NULL;
    uint64_t limit = param_limit(job);
    if (ctx->device != GJ_DEVICE_CPU && ctx->device_bytes_limit && (!limit || ctx->device_bytes_limit < limit))
        limit = ctx->device_bytes_limit;
    if (ctx->stage > 0)
        result = assemble(ctx, &g, &o, err);
    else if (!in || !in->path)
        gj_error_set(err, "projections", "the input 'projections' is required");
    else if (slab_size(&g, &o, is_slab ? 0 : limit, &per, err) == 0) {
        if (!is_slab && per < g.nz)
            result = spawn_slabs(ctx, &g, per, limit, in, err) < 0 ? GJ_RUN_FAILED : GJ_RUN_WAIT_CHILDREN;
        else if ((r = reconstruct_slab(ctx, &g, &o, z0, nzs, in, times, err)) == 0) {
            gj_progress(ctx, 1.0, "done");
            result = GJ_RUN_OK;
        } else if (r > 0) {
            result = GJ_RUN_CANCELED;
        }
    }
    json_decref(times);
    rc_geom_free(&g);
    return result;
}

/* report.json holds the run's times. */
static const char *const recon_run_records[] = { "report.json", NULL };

/* The CPU path filters with FFTW; the GPU path with cuFFT (gj_device_environment). */
static int recon_environment(const struct gj_job *job, int device, json_t *env)
{
    (void)job;
    json_t *libs = json_object_get(env, "libraries");
    return device == GJ_DEVICE_CPU && json_object_set_new(libs, "fftw", json_string(rc_fftw_version())) ? -1 : 0;
}

const struct gj_kind gj_kind_recon = {
    .name = "recon",
    .summary = "CT reconstruction: batch 2D FBP / SART / SIRT, 3D FDK; split into z-slabs to fit device memory",
    .params_schema = recon_schema,
    .inputs = recon_inputs,
    .n_inputs = sizeof recon_inputs / sizeof recon_inputs[0],
    .validate = recon_validate,
    .estimate = recon_estimate,
    .run = recon_run,
    .host_bytes_floor = recon_host_floor,
    .version = "1",
    .reproducible = GJ_REPRO_CPU,
    .run_record_outputs = recon_run_records,
    .environment = recon_environment,
};
