/*
 * geom.c — geometry and options of the recon and phantom kinds: parsed from the
 * JSON params, bounded and checked, with errors that name the field.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

double rc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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

int rc_geom_parse(const json_t *params, struct rc_geom *g, struct gj_error *err)
{
    memset(g, 0, sizeof *g);
    if (!json_is_object(params))
        return gj_error_set(err, "", "params must be an object");
    const json_t *geo = json_object_get(params, "geometry");
    if (!json_is_object(geo))
        return gj_error_set(err, "geometry", "geometry is required (an object with type, angles_deg, detector)");
    const char *type = json_string_value(json_object_get(geo, "type"));
    if (!type)
        return gj_error_set(err, "geometry.type", "geometry.type must be parallel2d, fan2d or cone3d");
    if (strcmp(type, "parallel2d") == 0)
        g->type = RC_PARALLEL2D;
    else if (strcmp(type, "fan2d") == 0)
        g->type = RC_FAN2D;
    else if (strcmp(type, "cone3d") == 0)
        g->type = RC_CONE3D;
    else
        return gj_error_set(err, "geometry.type", "geometry.type must be parallel2d, fan2d or cone3d, not '%s'", type);

    /* angles */
    const json_t *ang = json_object_get(geo, "angles_deg");
    if (json_is_array(ang)) {
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
            if (!isfinite(d) || fabs(d) > 1e6) {
                rc_geom_free(g);
                return gj_error_set(err, "geometry.angles_deg", "geometry.angles_deg[%zu] must be a finite number of degrees", i);
            }
            g->angles[i] = d * M_PI / 180.0;
        }
    } else if (json_is_object(ang)) {
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
    } else {
        return gj_error_set(err, "geometry.angles_deg", "geometry.angles_deg must be a list of degrees or {start, step, count}");
    }

    /* detector */
    const json_t *det = json_object_get(geo, "detector");
    long long cols, rows;
    if (!json_is_object(det)) {
        rc_geom_free(g);
        return gj_error_set(err, "geometry.detector", "geometry.detector must be an object with cols (and rows, spacing_u...)");
    }
    if (integer(det, "cols", &cols, -1) || cols < 1 || cols > RC_MAX_DIM) {
        rc_geom_free(g);
        return gj_error_set(err, "geometry.detector.cols", "geometry.detector.cols must be an integer from 1 to %d", RC_MAX_DIM);
    }
    if (integer(det, "rows", &rows, 1) || rows < 1 || rows > RC_MAX_DIM) {
        rc_geom_free(g);
        return gj_error_set(err, "geometry.detector.rows", "geometry.detector.rows must be an integer from 1 to %d", RC_MAX_DIM);
    }
    g->cols = (int)cols;
    g->rows = (int)rows;
    if (num(det, "spacing_u", &g->du, 1.0) || !(g->du > 0) || g->du > 1e5) {
        rc_geom_free(g);
        return gj_error_set(err, "geometry.detector.spacing_u", "geometry.detector.spacing_u must be a positive number of mm");
    }
    if (num(det, "spacing_v", &g->dv, g->du) || !(g->dv > 0) || g->dv > 1e5) {
        rc_geom_free(g);
        return gj_error_set(err, "geometry.detector.spacing_v", "geometry.detector.spacing_v must be a positive number of mm");
    }
    if (num(det, "offset_u", &g->off_u, 0) || fabs(g->off_u) > 1e6) {
        rc_geom_free(g);
        return gj_error_set(err, "geometry.detector.offset_u", "geometry.detector.offset_u must be a finite number of mm");
    }
    if (num(det, "offset_v", &g->off_v, 0) || fabs(g->off_v) > 1e6) {
        rc_geom_free(g);
        return gj_error_set(err, "geometry.detector.offset_v", "geometry.detector.offset_v must be a finite number of mm");
    }
    if (g->type != RC_CONE3D && g->rows != 1) {
        rc_geom_free(g);
        return gj_error_set(err, "geometry.detector.rows", "geometry.detector.rows must be 1 for %s (got %d)", type, g->rows);
    }
    if (g->type != RC_PARALLEL2D) {
        if (num(geo, "source_origin_mm", &g->sod, -1) || !(g->sod > 0) || g->sod > 1e6) {
            rc_geom_free(g);
            return gj_error_set(err, "geometry.source_origin_mm", "geometry.source_origin_mm is required for %s: a positive distance in mm", type);
        }
        if (num(geo, "source_detector_mm", &g->sdd, -1) || !(g->sdd > g->sod) || g->sdd > 1e7) {
            rc_geom_free(g);
            return gj_error_set(err, "geometry.source_detector_mm", "geometry.source_detector_mm is required for %s and must exceed source_origin_mm (%g)", type, g->sod);
        }
    }
    const json_t *mats = json_object_get(geo, "matrices");
    if (mats) {
        if (g->type != RC_CONE3D) {
            rc_geom_free(g);
            return gj_error_set(err, "geometry.matrices", "geometry.matrices is only for cone3d");
        }
        if (!json_is_array(mats) || json_array_size(mats) != (size_t)g->nviews) {
            rc_geom_free(g);
            return gj_error_set(err, "geometry.matrices", "geometry.matrices must hold one 3x4 matrix per view: %zu given for %d angles",
                                json_is_array(mats) ? json_array_size(mats) : 0, g->nviews);
        }
        g->mat = malloc((size_t)g->nviews * 12 * sizeof *g->mat);
        if (!g->mat) {
            rc_geom_free(g);
            return gj_error_set(err, "", "out of memory");
        }
        for (int v = 0; v < g->nviews; v++) {
            const json_t *m = json_array_get(mats, (size_t)v);
            if (!json_is_array(m) || json_array_size(m) != 12) {
                rc_geom_free(g);
                return gj_error_set(err, "geometry.matrices", "geometry.matrices[%d] must be 12 numbers (3x4, column-major)", v);
            }
            for (int k = 0; k < 12; k++) {
                const json_t *e = json_array_get(m, (size_t)k);
                double d = json_is_number(e) ? json_number_value(e) : NAN;
                if (!isfinite(d)) {
                    rc_geom_free(g);
                    return gj_error_set(err, "geometry.matrices", "geometry.matrices[%d][%d] must be a finite number", v, k);
                }
                g->mat[v * 12 + k] = d;
            }
            double *A = g->mat + v * 12;
            double nrm = sqrt(A[2] * A[2] + A[5] * A[5] + A[8] * A[8]);
            if (!(nrm > 0)) {
                rc_geom_free(g);
                return gj_error_set(err, "geometry.matrices", "geometry.matrices[%d] has a zero depth row (A2, A5, A8)", v);
            }
            for (int k = 0; k < 12; k++)
                A[k] /= nrm;
        }
    }

    /* batch */
    long long batch;
    if (integer(params, "batch", &batch, 1) || batch < 1 || batch > RC_MAX_BATCH) {
        rc_geom_free(g);
        return gj_error_set(err, "batch", "batch must be an integer from 1 to %d", RC_MAX_BATCH);
    }
    if (g->type == RC_CONE3D && batch != 1) {
        rc_geom_free(g);
        return gj_error_set(err, "batch", "batch must be 1 for cone3d (one projection set per job)");
    }
    g->batch = (int)batch;
    g->short_scan = json_is_true(json_object_get(params, "short_scan"));
    if (g->short_scan && g->type == RC_PARALLEL2D) {
        rc_geom_free(g);
        return gj_error_set(err, "short_scan", "short_scan (Parker weights) applies to fan2d and cone3d only");
    }

    /* volume */
    const json_t *vol = json_object_get(params, "volume");
    if (!vol) {
        /* default: a grid matching the detector at the isocentre */
        double mag = g->type == RC_PARALLEL2D ? 1.0 : g->sdd / g->sod;
        g->nx = g->ny = g->cols;
        g->nz = g->type == RC_CONE3D ? g->rows : g->batch;
        g->vx = g->vy = g->du / mag;
        g->vz = g->type == RC_CONE3D ? g->dv / mag : 1.0;
    } else {
        long long nx, ny, nz;
        double vox[3], off[3];
        if (!json_is_object(vol)) {
            rc_geom_free(g);
            return gj_error_set(err, "volume", "volume must be an object {nx, ny, nz, voxel_mm, offset_mm}");
        }
        if (integer(vol, "nx", &nx, -1) || nx < 1 || nx > RC_MAX_DIM) {
            rc_geom_free(g);
            return gj_error_set(err, "volume.nx", "volume.nx must be an integer from 1 to %d", RC_MAX_DIM);
        }
        if (integer(vol, "ny", &ny, nx) || ny < 1 || ny > RC_MAX_DIM) {
            rc_geom_free(g);
            return gj_error_set(err, "volume.ny", "volume.ny must be an integer from 1 to %d", RC_MAX_DIM);
        }
        if (integer(vol, "nz", &nz, g->type == RC_CONE3D ? nx : g->batch) || nz < 1 || nz > RC_MAX_DIM) {
            rc_geom_free(g);
            return gj_error_set(err, "volume.nz", "volume.nz must be an integer from 1 to %d", RC_MAX_DIM);
        }
        if (g->type != RC_CONE3D && nz != g->batch) {
            rc_geom_free(g);
            return gj_error_set(err, "volume.nz", "volume.nz must equal batch (%d) for 2D geometries, got %lld", g->batch, nz);
        }
        if (vec3(vol, "voxel_mm", vox, 1.0, 1)) {
            rc_geom_free(g);
            return gj_error_set(err, "volume.voxel_mm", "volume.voxel_mm must be a positive number or [x, y, z] in mm");
        }
        if (vec3(vol, "offset_mm", off, 0.0, 0)) {
            rc_geom_free(g);
            return gj_error_set(err, "volume.offset_mm", "volume.offset_mm must be [x, y, z] in mm");
        }
        g->nx = (int)nx;
        g->ny = (int)ny;
        g->nz = (int)nz;
        g->vx = vox[0];
        g->vy = vox[1];
        g->vz = vox[2];
        g->ox = off[0];
        g->oy = off[1];
        g->oz = off[2];
    }
    if (rc_vol_count(g) * 4 > RC_MAX_VOLUME_BYTES) {
        unsigned long long gib = (unsigned long long)(rc_vol_count(g) * 4 >> 30);
        rc_geom_free(g);
        gj_error_set(err, "volume", "the volume needs %llu GiB, over the limit of %llu GiB; reduce nx, ny or nz",
                     gib, RC_MAX_VOLUME_BYTES >> 30);
        err->status = 413;
        return -1;
    }
    if (rc_proj_count(g) * 4 > RC_MAX_PROJ_BYTES) {
        rc_geom_free(g);
        gj_error_set(err, "geometry", "the projections would need more than %llu GiB", RC_MAX_PROJ_BYTES >> 30);
        err->status = 413;
        return -1;
    }
    if (g->type != RC_PARALLEL2D) {
        /* the volume must stay between the source and the detector */
        double rx = 0.5 * g->nx * g->vx + fabs(g->ox), ry = 0.5 * g->ny * g->vy + fabs(g->oy);
        if (sqrt(rx * rx + ry * ry) >= g->sod && !g->mat) {
            rc_geom_free(g);
            return gj_error_set(err, "volume", "the volume (radius %.1f mm) reaches the source at %.1f mm; reduce it or move the source", sqrt(rx * rx + ry * ry), g->sod);
        }
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

/* The circular geometry's matrix of view v: pixel col = (u - off_u)/du + (cols-1)/2 with
 * u = sdd (P.a)/L, L = sod + P.e; row likewise with v = sdd z / L. Its depth row is the unit
 * vector e, so w = L (the normalised form). */
static void circular_matrix(const struct rc_geom *g, int v, double *A)
{
    double b = g->angles[v], ca = cos(b), sa = sin(b);
    double a[3] = { ca, sa, 0 }, e[3] = { -sa, ca, 0 };
    double r0[4], r1[4], r2[4];
    double cu = 0.5 * (g->cols - 1) - g->off_u / g->du, cv = 0.5 * (g->rows - 1) - g->off_v / g->dv;
    for (int k = 0; k < 3; k++) {
        r2[k] = e[k];
        r0[k] = g->sdd / g->du * a[k] + cu * e[k];
        r1[k] = g->sdd / g->dv * (k == 2 ? 1.0 : 0.0) + cv * e[k];
    }
    r2[3] = g->sod;
    r0[3] = cu * g->sod;
    r1[3] = cv * g->sod;
    for (int c = 0; c < 4; c++) {
        A[3 * c + 0] = r0[c];
        A[3 * c + 1] = r1[c];
        A[3 * c + 2] = r2[c];
    }
}

void rc_circular_matrices(const struct rc_geom *g, double *out)
{
    for (int v = 0; v < g->nviews; v++)
        circular_matrix(g, v, out + 12 * v);
}

void rc_view_matrix(const struct rc_geom *g, int v, double A[12])
{
    if (g->mat)
        memcpy(A, g->mat + 12 * v, 12 * sizeof *A);
    else
        circular_matrix(g, v, A);
}

/* Inverse of a 3x3 matrix (row-major); -1 when it is singular. */
int rc_inv3(const double m[9], double r[9])
{
    double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                 m[2] * (m[3] * m[7] - m[4] * m[6]);
    if (fabs(det) < 1e-300)
        return -1;
    r[0] = (m[4] * m[8] - m[5] * m[7]) / det;
    r[1] = (m[2] * m[7] - m[1] * m[8]) / det;
    r[2] = (m[1] * m[5] - m[2] * m[4]) / det;
    r[3] = (m[5] * m[6] - m[3] * m[8]) / det;
    r[4] = (m[0] * m[8] - m[2] * m[6]) / det;
    r[5] = (m[2] * m[3] - m[0] * m[5]) / det;
    r[6] = (m[3] * m[7] - m[4] * m[6]) / det;
    r[7] = (m[1] * m[6] - m[0] * m[7]) / det;
    r[8] = (m[0] * m[4] - m[1] * m[3]) / det;
    return 0;
}
