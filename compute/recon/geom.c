/*
 * geom.c — geometry and options of the recon and phantom kinds: parsed from the
 * JSON params (one parser per geometry type), bounded and checked, with errors that
 * name the field.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "recon/recon.h"

const char *rc_filter_name(int f)
{
    static const char *n[] = { "ram-lak", "shepp-logan", "cosine", "hamming", "hann" };
    return f >= 0 && f < 5 ? n[f] : "?";
}

const char *rc_algo_name(int a)
{
    static const char *n[] = { "fbp", "sart", "sirt", "fdk" };
    return a >= 0 && a < 4 ? n[a] : "?";
}

const char *rc_gtype_name(int t)
{
    static const char *n[] = { "parallel2d", "fan2d", "cone3d" };
    return t >= 0 && t < 3 ? n[t] : "?";
}

void rc_geom_free(struct rc_geom *g)
{
    free(g->angles);
    free(g->mat);
    g->angles = NULL;
    g->mat = NULL;
}

uint64_t rc_proj_count(const struct rc_geom *g)
{
    return (uint64_t)g->batch * (uint64_t)g->nviews * (uint64_t)g->rows * (uint64_t)g->cols;
}

uint64_t rc_vol_count(const struct rc_geom *g)
{
    return (uint64_t)g->nx * (uint64_t)g->ny * (uint64_t)g->nz;
}

static int num(const json_t *obj, const char *key, double *out, double dflt)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!json_is_number(v))
        return -1;
    *out = json_number_value(v);
    return isfinite(*out) ? 0 : -1;
}

static int integer(const json_t *obj, const char *key, long long *out, long long dflt)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 0;
    }
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
        fabs(json_real_value(v)) < 1e15) {
        *out = (long long)json_real_value(v);
        return 0;
    }
    return -1;
}

/* Reads a 1..3 element vector (or a number for all three). */
static int vec3(const json_t *obj, const char *key, double out[3], double dflt, int positive)
{
    const json_t *v = json_object_get(obj, key);
    out[0] = out[1] = out[2] = dflt;
    if (!v)
        return 0;
    if (json_is_number(v)) {
        out[0] = out[1] = out[2] = json_number_value(v);
    } else if (json_is_array(v) && json_array_size(v) >= 1 && json_array_size(v) <= 3) {
        for (size_t i = 0; i < 3; i++) {
            const json_t *e = json_array_get(v, i < json_array_size(v) ? i : json_array_size(v) - 1);
            if (!json_is_number(e))
                return -1;
            out[i] = json_number_value(e);
        }
    } else {
        return -1;
    }
    for (int i = 0; i < 3; i++)
        if (!isfinite(out[i]) || (positive && !(out[i] > 0)) || fabs(out[i]) > 1e7)
            return -1;
    return 0;
}

static int parse_angle_list(const json_t *ang, struct rc_geom *g, struct gj_error *err)
{
    size_t n = json_array_size(ang);
    if (n < 1 || n > RC_MAX_VIEWS)
        return gj_error_set(err, "geometry.angles_deg", "geometry.angles_deg must hold 1 to %d angles", RC_MAX_VIEWS);
    g->nviews = (int)n;
    g->angles = malloc(n * sizeof *g->angles);
    if (!g->angles)
        return gj_error_set(err, "", "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(ang, i);
        double d = json_is_number(e) ? json_number_value(e) : NAN;
        if (!isfinite(d) || fabs(d) > 1e6)
            return gj_error_set(err, "geometry.angles_deg", "geometry.angles_deg[%zu] must be a finite number of degrees", i);
        g->angles[i] = d * M_PI / 180.0;
    }
    return 0;
}

static int parse_angle_range(const json_t *ang, struct rc_geom *g, struct gj_error *err)
{
    double start, step;
    long long count;
    if (num(ang, "start", &start, 0) || fabs(start) > 1e6)
        return gj_error_set(err, "geometry.angles_deg.start", "geometry.angles_deg.start must be a finite number");
    if (integer(ang, "count", &count, -1) || count < 1 || count > RC_MAX_VIEWS)
        return gj_error_set(err, "geometry.angles_deg.count", "geometry.angles_deg.count must be an integer from 1 to %d", RC_MAX_VIEWS);
    if (num(ang, "step", &step, 180.0 / (double)count) || fabs(step) > 1e4)
        return gj_error_set(err, "geometry.angles_deg.step", "geometry.angles_deg.step must be a finite number");
    g->nviews = (int)count;
    g->angles = malloc((size_t)count * sizeof *g->angles);
    if (!g->angles)
        return gj_error_set(err, "", "out of memory");
    for (long long i = 0; i < count; i++)
        g->angles[i] = (start + step * (double)i) * M_PI / 180.0;
    return 0;
}

/* geometry.angles_deg: a list of degrees or {start, step, count}. */
static int parse_angles(const json_t *geo, struct rc_geom *g, struct gj_error *err)
{
    const json_t *ang = json_object_get(geo, "angles_deg");
    if (json_is_array(ang))
        return parse_angle_list(ang, g, err);
    if (json_is_object(ang))
        return parse_angle_range(ang, g, err);
    return gj_error_set(err, "geometry.angles_deg", "geometry.angles_deg must be a list of degrees or {start, step, count}");
}

/* geometry.detector; flat (2D) detectors have one row. */
static int parse_detector(const json_t *geo, struct rc_geom *g, int flat, struct gj_error *err)
{
    const json_t *det = json_object_get(geo, "detector");
    long long cols, rows;
    if (!json_is_object(det))
        return gj_error_set(err, "geometry.detector", "geometry.detector must be an object with cols (and rows, spacing_u...)");
    if (integer(det, "cols", &cols, -1) || cols < 1 || cols > RC_MAX_DIM)
        return gj_error_set(err, "geometry.detector.cols", "geometry.detector.cols must be an integer from 1 to %d", RC_MAX_DIM);
    if (integer(det, "rows", &rows, 1) || rows < 1 || rows > RC_MAX_DIM)
        return gj_error_set(err, "geometry.detector.rows", "geometry.detector.rows must be an integer from 1 to %d", RC_MAX_DIM);
    g->cols = (int)cols;
    g->rows = (int)rows;
    if (num(det, "spacing_u", &g->du, 1.0) || !(g->du > 0) || g->du > 1e5)
        return gj_error_set(err, "geometry.detector.spacing_u", "geometry.detector.spacing_u must be a positive number of mm");
    if (num(det, "spacing_v", &g->dv, g->du) || !(g->dv > 0) || g->dv > 1e5)
        return gj_error_set(err, "geometry.detector.spacing_v", "geometry.detector.spacing_v must be a positive number of mm");
    if (num(det, "offset_u", &g->off_u, 0) || fabs(g->off_u) > 1e6)
        return gj_error_set(err, "geometry.detector.offset_u", "geometry.detector.offset_u must be a finite number of mm");
    if (num(det, "offset_v", &g->off_v, 0) || fabs(g->off_v) > 1e6)
        return gj_error_set(err, "geometry.detector.offset_v", "geometry.detector.offset_v must be a finite number of mm");
    if (flat && g->rows != 1)
        return gj_error_set(err, "geometry.detector.rows", "geometry.detector.rows must be 1 for %s (got %d)",
                            rc_gtype_name(g->type), g->rows);
    return 0;
}

/* The source of a divergent beam: source_origin_mm and source_detector_mm. */
static int parse_source(const json_t *geo, struct rc_geom *g, struct gj_error *err)
{
    const char *type = rc_gtype_name(g->type);
    if (num(geo, "source_origin_mm", &g->sod, -1) || !(g->sod > 0) || g->sod > 1e6)
        return gj_error_set(err, "geometry.source_origin_mm", "geometry.source_origin_mm is required for %s: a positive distance in mm", type);
    if (num(geo, "source_detector_mm", &g->sdd, -1) || !(g->sdd > g->sod) || g->sdd > 1e7)
        return gj_error_set(err, "geometry.source_detector_mm", "geometry.source_detector_mm is required for %s and must exceed source_origin_mm (%g)", type, g->sod);
    return 0;
}

/* 2D geometries take no projection matrices. */
static int no_matrices(const json_t *geo, struct gj_error *err)
{
    if (json_object_get(geo, "matrices"))
        return gj_error_set(err, "geometry.matrices", "geometry.matrices is only for cone3d");
    return 0;
}

/* Matrix v: 12 finite numbers, normalised so that the depth row has unit length. */
static int parse_matrix(const json_t *m, int v, double *A, struct gj_error *err)
{
    if (!json_is_array(m) || json_array_size(m) != 12)
        return gj_error_set(err, "geometry.matrices", "geometry.matrices[%d] must be 12 numbers (3x4, column-major)", v);
    for (int k = 0; k < 12; k++) {
        const json_t *e = json_array_get(m, (size_t)k);
        double d = json_is_number(e) ? json_number_value(e) : NAN;
        if (!isfinite(d))
            return gj_error_set(err, "geometry.matrices", "geometry.matrices[%d][%d] must be a finite number", v, k);
        A[k] = d;
    }
    double nrm = sqrt(A[2] * A[2] + A[5] * A[5] + A[8] * A[8]);
    if (!(nrm > 0))
        return gj_error_set(err, "geometry.matrices", "geometry.matrices[%d] has a zero depth row (A2, A5, A8)", v);
    for (int k = 0; k < 12; k++)
        A[k] /= nrm;
    return 0;
}

/* geometry.matrices (optional): one per view. */
static int parse_matrices(const json_t *geo, struct rc_geom *g, struct gj_error *err)
{
    const json_t *mats = json_object_get(geo, "matrices");
    if (!mats)
        return 0;
    if (!json_is_array(mats) || json_array_size(mats) != (size_t)g->nviews)
        return gj_error_set(err, "geometry.matrices", "geometry.matrices must hold one 3x4 matrix per view: %zu given for %d angles",
                            json_is_array(mats) ? json_array_size(mats) : 0, g->nviews);
    g->mat = malloc((size_t)g->nviews * 12 * sizeof *g->mat);
    if (!g->mat)
        return gj_error_set(err, "", "out of memory");
    for (int v = 0; v < g->nviews; v++)
        if (parse_matrix(json_array_get(mats, (size_t)v), v, g->mat + v * 12, err))
            return -1;
    return 0;
}

/* ---- one parser per geometry type ---- */

static int parse_parallel2d(const json_t *geo, struct rc_geom *g, struct gj_error *err)
{
    return parse_angles(geo, g, err) || parse_detector(geo, g, 1, err) || no_matrices(geo, err) ? -1 : 0;
}

static int parse_fan2d(const json_t *geo, struct rc_geom *g, struct gj_error *err)
{
    return parse_angles(geo, g, err) || parse_detector(geo, g, 1, err) || parse_source(geo, g, err) ||
           no_matrices(geo, err) ? -1 : 0;
}

static int parse_cone3d(const json_t *geo, struct rc_geom *g, struct gj_error *err)
{
    return parse_angles(geo, g, err) || parse_detector(geo, g, 0, err) || parse_source(geo, g, err) ||
           parse_matrices(geo, g, err) ? -1 : 0;
}

static const struct {
    const char *name;
    int type;
    int (*parse)(const json_t *geo, struct rc_geom *g, struct gj_error *err);
} geometry_types[] = {
    { "parallel2d", RC_PARALLEL2D, parse_parallel2d },
    { "fan2d", RC_FAN2D, parse_fan2d },
    { "cone3d", RC_CONE3D, parse_cone3d },
};

static int parse_geometry(const json_t *params, struct rc_geom *g, struct gj_error *err)
{
    const json_t *geo = json_object_get(params, "geometry");
    if (!json_is_object(geo))
        return gj_error_set(err, "geometry", "geometry is required (an object with type, angles_deg, detector)");
    const char *type = json_string_value(json_object_get(geo, "type"));
    if (!type)
        return gj_error_set(err, "geometry.type", "geometry.type must be parallel2d, fan2d or cone3d");
    for (size_t i = 0; i < sizeof geometry_types / sizeof geometry_types[0]; i++)
        if (strcmp(type, geometry_types[i].name) == 0) {
            g->type = geometry_types[i].type;
            return geometry_types[i].parse(geo, g, err);
        }
    return gj_error_set(err, "geometry.type", "geometry.type must be parallel2d, fan2d or cone3d, not '%s'", type);
}

/* batch (2D: sinograms in the input) and short_scan. */
static int parse_batch(const json_t *params, struct rc_geom *g, struct gj_error *err)
{
    long long batch;
    if (integer(params, "batch", &batch, 1) || batch < 1 || batch > RC_MAX_BATCH)
        return gj_error_set(err, "batch", "batch must be an integer from 1 to %d", RC_MAX_BATCH);
    if (g->type == RC_CONE3D && batch != 1)
        return gj_error_set(err, "batch", "batch must be 1 for cone3d (one projection set per job)");
    g->batch = (int)batch;
    g->short_scan = json_is_true(json_object_get(params, "short_scan"));
    if (g->short_scan && g->type == RC_PARALLEL2D)
        return gj_error_set(err, "short_scan", "short_scan (Parker weights) applies to fan2d and cone3d only");
    return 0;
}

/* Without params.volume: a grid matching the detector at the isocentre. */
static void default_volume(struct rc_geom *g)
{
    double mag = g->type == RC_PARALLEL2D ? 1.0 : g->sdd / g->sod;
    g->nx = g->ny = g->cols;
    g->nz = g->type == RC_CONE3D ? g->rows : g->batch;
    g->vx = g->vy = g->du / mag;
    g->vz = g->type == RC_CONE3D ? g->dv / mag : 1.0;
}

static int parse_volume(const json_t *params, struct rc_geom *g, struct gj_error *err)
{
    const json_t *vol = json_object_get(params, "volume");
    if (!vol) {
        default_volume(g);
        return 0;
    }
    long long nx, ny, nz;
    double vox[3], off[3];
    if (!json_is_object(vol))
        return gj_error_set(err, "volume", "volume must be an object {nx, ny, nz, voxel_mm, offset_mm}");
    if (integer(vol, "nx", &nx, -1) || nx < 1 || nx > RC_MAX_DIM)
        return gj_error_set(err, "volume.nx", "volume.nx must be an integer from 1 to %d", RC_MAX_DIM);
    if (integer(vol, "ny", &ny, nx) || ny < 1 || ny > RC_MAX_DIM)
        return gj_error_set(err, "volume.ny", "volume.ny must be an integer from 1 to %d", RC_MAX_DIM);
    if (integer(vol, "nz", &nz, g->type == RC_CONE3D ? nx : g->batch) || nz < 1 || nz > RC_MAX_DIM)
        return gj_error_set(err, "volume.nz", "volume.nz must be an integer from 1 to %d", RC_MAX_DIM);
    if (g->type != RC_CONE3D && nz != g->batch)
        return gj_error_set(err, "volume.nz", "volume.nz must equal batch (%d) for 2D geometries, got %lld", g->batch, nz);
    if (vec3(vol, "voxel_mm", vox, 1.0, 1))
        return gj_error_set(err, "volume.voxel_mm", "volume.voxel_mm must be a positive number or [x, y, z] in mm");
    if (vec3(vol, "offset_mm", off, 0.0, 0))
        return gj_error_set(err, "volume.offset_mm", "volume.offset_mm must be [x, y, z] in mm");
    g->nx = (int)nx;
    g->ny = (int)ny;
    g->nz = (int)nz;
    g->vx = vox[0];
    g->vy = vox[1];
    g->vz = vox[2];
    g->ox = off[0];
    g->oy = off[1];
    g->oz = off[2];
    return 0;
}

/* Host memory bounds of the volume and the projections; a divergent beam's volume stays
 * between the source and the detector. */
static int check_extent(struct rc_geom *g, struct gj_error *err)
{
    if (rc_vol_count(g) * 4 > RC_MAX_VOLUME_BYTES) {
        gj_error_set(err, "volume", "the volume needs %llu GiB, over the limit of %llu GiB; reduce nx, ny or nz",
                     (unsigned long long)(rc_vol_count(g) * 4 >> 30), RC_MAX_VOLUME_BYTES >> 30);
        err->status = 413;
        return -1;
    }
    if (rc_proj_count(g) * 4 > RC_MAX_PROJ_BYTES) {
        gj_error_set(err, "geometry", "the projections would need more than %llu GiB", RC_MAX_PROJ_BYTES >> 30);
        err->status = 413;
        return -1;
    }
    if (g->type != RC_PARALLEL2D && !g->mat) {
        double rx = 0.5 * g->nx * g->vx + fabs(g->ox), ry = 0.5 * g->ny * g->vy + fabs(g->oy);
        if (sqrt(rx * rx + ry * ry) >= g->sod)
            return gj_error_set(err, "volume", "the volume (radius %.1f mm) reaches the source at %.1f mm; reduce it or move the source", sqrt(rx * rx + ry * ry), g->sod);
    }
    return 0;
}

int rc_geom_parse(const json_t *params, struct rc_geom *g, struct gj_error *err)
{
    memset(g, 0, sizeof *g);
    if (!json_is_object(params))
        return gj_error_set(err, "", "params must be an object");
    if (parse_geometry(params, g, err) || parse_batch(params, g, err) || parse_volume(params, g, err) ||
        check_extent(g, err)) {
        rc_geom_free(g);
        return -1;
    }
    return 0;
}

int rc_opts_parse(const json_t *params, const struct rc_geom *g, struct rc_opts *o,
                  struct gj_error *err)
{
    memset(o, 0, sizeof *o);
    const char *a = json_string_value(json_object_get(params, "algorithm"));
    if (!a)
        a = g->type == RC_CONE3D ? "fdk" : "fbp";
    if (strcmp(a, "fbp") == 0)
        o->algo = g->type == RC_CONE3D ? RC_FDK : RC_FBP;
    else if (strcmp(a, "fdk") == 0)
        o->algo = RC_FDK;
    else if (strcmp(a, "sart") == 0)
        o->algo = RC_SART;
    else if (strcmp(a, "sirt") == 0)
        o->algo = RC_SIRT;
    else
        return gj_error_set(err, "algorithm", "algorithm must be fbp, sart, sirt or fdk, not '%s'", a);
    if (o->algo == RC_FDK && g->type != RC_CONE3D)
        return gj_error_set(err, "algorithm", "algorithm fdk needs geometry.type cone3d; use fbp for %s", rc_gtype_name(g->type));
    const char *f = json_string_value(json_object_get(params, "filter"));
    if (!f || strcmp(f, "ram-lak") == 0)
        o->filter = RC_RAMLAK;
    else if (strcmp(f, "shepp-logan") == 0)
        o->filter = RC_SHEPPLOGAN;
    else if (strcmp(f, "cosine") == 0)
        o->filter = RC_COSINE;
    else if (strcmp(f, "hamming") == 0)
        o->filter = RC_HAMMING;
    else if (strcmp(f, "hann") == 0)
        o->filter = RC_HANN;
    else
        return gj_error_set(err, "filter", "filter must be ram-lak, shepp-logan, cosine, hamming or hann, not '%s'", f);
    long long it, sub;
    double rel;
    if (integer(params, "iterations", &it, o->algo == RC_SIRT ? 50 : 5) || it < 1 || it > 100000)
        return gj_error_set(err, "iterations", "iterations must be an integer from 1 to 100000");
    if (integer(params, "subsets", &sub, o->algo == RC_SIRT ? 1 : g->nviews) || sub < 1 || sub > g->nviews)
        return gj_error_set(err, "subsets", "subsets must be an integer from 1 to the number of views (%d)", g->nviews);
    if (o->algo == RC_SIRT && sub != 1)
        return gj_error_set(err, "subsets", "subsets apply to sart only (sirt uses all views at once)");
    if (num(params, "relaxation", &rel, o->algo == RC_SIRT ? 1.0 : 0.5) || !(rel > 0) || rel > 2.0)
        return gj_error_set(err, "relaxation", "relaxation must be a number in (0, 2]");
    o->iterations = (int)it;
    o->subsets = (int)sub;
    o->relaxation = rel;
    const json_t *nn = json_object_get(params, "nonnegative");
    o->nonneg = nn ? json_is_true(nn) : 1;
    o->threads = 1;
    return 0;
}

