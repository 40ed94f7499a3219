/*
 * phantom.c — Shepp-Logan phantoms (2D modified, 3D Kak-Slaney and Yu-Ye-Wang),
 * a uniform disc and ball, with exact line integrals for any geometry of
 * recon.h and a sub-sampled (area / volume averaged) ground truth.
 * Tables: REFERENCE.md (Toft; Kak & Slaney). Phantom units map to scale_mm.
 */
#include <math.h>
#include <string.h>

#include "recon/recon.h"

/* A, a, b, x0, y0, phi(deg) */
static const double shepp2d[10][6] = {
    { 1, .69, .92, 0, 0, 0 },          { -.8, .6624, .874, 0, -.0184, 0 },
    { -.2, .11, .31, .22, 0, -18 },    { -.2, .16, .41, -.22, 0, 18 },
    { .1, .21, .25, 0, .35, 0 },       { .1, .046, .046, 0, .1, 0 },
    { .1, .046, .046, 0, -.1, 0 },     { .1, .046, .023, -.08, -.605, 0 },
    { .1, .023, .023, 0, -.606, 0 },   { .1, .023, .046, .06, -.605, 0 },
};
/* a, b, c, x0, y0, z0, phi(deg), A (Kak-Slaney) */
static const double kak3d[10][8] = {
    { .69, .92, .90, 0, 0, 0, 0, 2.0 },          { .6624, .874, .88, 0, 0, 0, 0, -.98 },
    { .41, .16, .21, -.22, 0, -.25, 108, -.02 }, { .31, .11, .22, .22, 0, -.25, 72, -.02 },
    { .21, .25, .50, 0, .35, -.25, 0, .02 },     { .046, .046, .046, 0, .1, -.25, 0, .02 },
    { .046, .023, .02, -.08, -.65, -.25, 0, .01 }, { .046, .023, .02, .06, -.65, -.25, 90, .01 },
    { .056, .04, .10, .06, -.105, .625, 90, .02 }, { .056, .056, .10, 0, .1, .625, 0, -.02 },
};
static const double yyw_A[10] = { 1, -.8, -.2, -.2, .2, .2, .1, .1, .2, -.2 };

/* The 2D kinds (shepp2d, disc) are cylinders: c = 0 marks "no z extent". */
int rc_phantom_id(const char *name)
{
    if (!name)
        return -1;
    if (strcmp(name, "shepp-logan") == 0 || strcmp(name, "shepp-logan-2d") == 0)
        return RC_PH_SHEPP2D;
    if (strcmp(name, "kak-slaney") == 0 || strcmp(name, "shepp-logan-3d") == 0)
        return RC_PH_KAK3D;
    if (strcmp(name, "yu-ye-wang") == 0)
        return RC_PH_YYW3D;
    if (strcmp(name, "disc") == 0)
        return RC_PH_DISC;
    if (strcmp(name, "ball") == 0)
        return RC_PH_BALL;
    return -1;
}

static void trig(struct rc_phantom *ph)
{
    for (int i = 0; i < ph->n; i++) {
        ph->cphi[i] = cos(ph->e[i].phi);
        ph->sphi[i] = sin(ph->e[i].phi);
    }
}

static int make(int id, double s, double value, struct rc_phantom *ph);

int rc_phantom_make(int id, double s, double value, struct rc_phantom *ph)
{
    int rc = make(id, s, value, ph);
    trig(ph);
    return rc;
}

static int make(int id, double s, double value, struct rc_phantom *ph)
{
    memset(ph, 0, sizeof *ph);
    switch (id) {
    case RC_PH_SHEPP2D:
        ph->n = 10;
        for (int i = 0; i < 10; i++)
            ph->e[i] = (struct rc_ellipsoid){ value * shepp2d[i][0], s * shepp2d[i][1], s * shepp2d[i][2], 0,
                                              s * shepp2d[i][3], s * shepp2d[i][4], 0, shepp2d[i][5] * M_PI / 180 };
        return 0;
    case RC_PH_KAK3D:
    case RC_PH_YYW3D:
        ph->n = 10;
        for (int i = 0; i < 10; i++)
            ph->e[i] = (struct rc_ellipsoid){ value * (id == RC_PH_KAK3D ? kak3d[i][7] : yyw_A[i]),
                                              s * kak3d[i][0], s * kak3d[i][1], s * kak3d[i][2],
                                              s * kak3d[i][3], s * kak3d[i][4], s * kak3d[i][5],
                                              kak3d[i][6] * M_PI / 180 };
        return 0;
    case RC_PH_DISC:
        ph->n = 1;
        ph->e[0] = (struct rc_ellipsoid){ value, 0.8 * s, 0.8 * s, 0, 0, 0, 0, 0 };
        return 0;
    case RC_PH_BALL:
        ph->n = 1;
        ph->e[0] = (struct rc_ellipsoid){ value, 0.8 * s, 0.8 * s, 0.8 * s, 0, 0, 0, 0 };
        return 0;
    default:
        return -1;
    }
}

double rc_phantom_ray(const struct rc_phantom *ph, const double p[3], const double d[3])
{
    double sum = 0;
    const double dd3 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2], dd2 = d[0] * d[0] + d[1] * d[1];
    for (int i = 0; i < ph->n; i++) {
        const struct rc_ellipsoid *e = &ph->e[i];
        /* cull: the line's distance to the centre exceeds the bounding radius */
        double w0 = e->x0 - p[0], w1 = e->y0 - p[1], w2 = e->c > 0 ? e->z0 - p[2] : 0;
        double wd = w0 * d[0] + w1 * d[1] + (e->c > 0 ? w2 * d[2] : 0), dd = e->c > 0 ? dd3 : dd2;
        double r = e->a > e->b ? e->a : e->b;
        if (e->c > r)
            r = e->c;
        if (dd > 0 && w0 * w0 + w1 * w1 + w2 * w2 - wd * wd / dd > r * r * 1.0000001)
            continue;
        double c = ph->cphi[i], s = ph->sphi[i];
        double qx = p[0] - e->x0, qy = p[1] - e->y0;
        double q0 = (c * qx + s * qy) / e->a, q1 = (-s * qx + c * qy) / e->b;
        double d0 = (c * d[0] + s * d[1]) / e->a, d1 = (-s * d[0] + c * d[1]) / e->b;
        double q2 = 0, d2 = 0;
        if (e->c > 0) {
            q2 = (p[2] - e->z0) / e->c;
            d2 = d[2] / e->c;
        }
        double A = d0 * d0 + d1 * d1 + d2 * d2;
        if (!(A > 0))
            continue;
        double B = q0 * d0 + q1 * d1 + q2 * d2;
        double C = q0 * q0 + q1 * q1 + q2 * q2 - 1;
        double disc = B * B - A * C;
        if (disc <= 0)
            continue;
        double dt = 2 * sqrt(disc) / A;
        sum += e->A * dt * sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    }
    return sum;
}

/* The ray through detector pixel (c, r) of view v: origin p and direction d. Mi and C
 * (have_m) are the view's inverse matrix and source when the geometry has matrices. */
static void pixel_ray(const struct rc_geom *g, int v, int c, int r, int have_m, const double Mi[9],
                      const double C[3], double p[3], double d[3])
{
    double b = g->angles[v], ca = cos(b), sa = sin(b);
    double a[3] = { ca, sa, 0 }, e[3] = { -sa, ca, 0 };
    double vv = (r - 0.5 * (g->rows - 1)) * g->dv + g->off_v;
    double u = (c - 0.5 * (g->cols - 1)) * g->du + g->off_u;
    if (have_m) {
        double pix[3] = { c, r, 1 };
        for (int k = 0; k < 3; k++) {
            d[k] = Mi[3 * k] * pix[0] + Mi[3 * k + 1] * pix[1] + Mi[3 * k + 2] * pix[2];
            p[k] = C[k];
        }
    } else if (g->type == RC_PARALLEL2D) {
        for (int k = 0; k < 3; k++) {
            p[k] = u * a[k];
            d[k] = e[k];
        }
    } else {
        for (int k = 0; k < 3; k++) {
            p[k] = -g->sod * e[k];
            d[k] = g->sdd * e[k] + u * a[k];
        }
        p[2] = 0;
        d[2] = g->type == RC_CONE3D ? vv : 0;
    }
}

int rc_phantom_project(const struct rc_phantom *ph, const struct rc_geom *g, float *out, int threads,
                       struct gj_poll *poll)
{
    const int64_t per = (int64_t)g->nviews * g->rows * g->cols;
    /* one detector row per piece of work: a large cone detector is cancellable within a view */
#pragma omp parallel for num_threads(threads) schedule(dynamic) collapse(2)
    for (int v = 0; v < g->nviews; v++)
        for (int r = 0; r < g->rows; r++) {
            if (gj_poll_step(poll, 1))
                continue;
            double Mi[9] = { 0 }, C[3] = { 0, 0, 0 };
            int have_m = g->mat && rc_matrix_ray(g, v, Mi, C) == 0;
            float *row = out + (int64_t)v * g->rows * g->cols + (int64_t)r * g->cols;
            for (int c = 0; c < g->cols; c++) {
                double p[3], d[3];
                pixel_ray(g, v, c, r, have_m, Mi, C, p, d);
                row[c] = (float)rc_phantom_ray(ph, p, d);
            }
        }
    if (gj_poll_stopped(poll))
        return 1;
    for (int bch = 1; bch < g->batch; bch++)
        memcpy(out + bch * per, out, (size_t)per * sizeof *out);
    return 0;
}

static int inside_sum(const struct rc_phantom *ph, double x, double y, double z, double *val)
{
    double s = 0;
    for (int i = 0; i < ph->n; i++) {
        const struct rc_ellipsoid *e = &ph->e[i];
        double qx = x - e->x0, qy = y - e->y0;
        double r = e->a > e->b ? e->a : e->b;
        if (fabs(qx) > r || fabs(qy) > r)
            continue;
        double c = ph->cphi[i], sn = ph->sphi[i];
        double q0 = (c * qx + sn * qy) / e->a, q1 = (-sn * qx + c * qy) / e->b, q2 = 0;
        if (e->c > 0)
            q2 = (z - e->z0) / e->c;
        if (q0 * q0 + q1 * q1 + q2 * q2 <= 1)
            s += e->A;
    }
    *val = s;
    return 0;
}

/* Voxel (i, j, k): the mean of ss^d sub-samples inside the phantom. */
static float truth_voxel(const struct rc_phantom *ph, const struct rc_geom *g, int ss, int i, int j, int k)
{
    int two_d = g->type != RC_CONE3D, ssz = two_d ? 1 : ss;
    double x0 = (i - 0.5 * (g->nx - 1)) * g->vx + g->ox;
    double y0 = (j - 0.5 * (g->ny - 1)) * g->vy + g->oy;
    double z0 = two_d ? 0 : (k - 0.5 * (g->nz - 1)) * g->vz + g->oz;
    double acc = 0;
    for (int c = 0; c < ssz; c++)
        for (int b = 0; b < ss; b++)
            for (int a = 0; a < ss; a++) {
                double x = x0 + ((a + 0.5) / ss - 0.5) * g->vx;
                double y = y0 + ((b + 0.5) / ss - 0.5) * g->vy;
                double z = two_d ? 0 : z0 + ((c + 0.5) / ssz - 0.5) * g->vz;
                double v;
                inside_sum(ph, x, y, z, &v);
                acc += v;
            }
    return (float)(acc / (ss * ss * ssz));
}

uint64_t rc_phantom_project_units(const struct rc_geom *g)
{
    return (uint64_t)g->nviews * (uint64_t)g->rows;
}

uint64_t rc_phantom_truth_units(const struct rc_geom *g)
{
    return (uint64_t)(g->type != RC_CONE3D ? 1 : g->nz) * (uint64_t)g->ny * (uint64_t)((g->nx + 255) / 256);
}

int rc_phantom_truth(const struct rc_phantom *ph, const struct rc_geom *g, int ss, float *out,
                     int threads, struct gj_poll *poll)
{
    enum { IB = 256 };   /* voxels of a row per piece of work */
    if (ss < 1)
        ss = 1;
    int two_d = g->type != RC_CONE3D;
    int nzc = two_d ? 1 : g->nz;     /* 2D: one slice, copied over the batch */
    const int nib = (g->nx + IB - 1) / IB;
    const int64_t slice = (int64_t)g->nx * g->ny;
#pragma omp parallel for num_threads(threads) schedule(dynamic) collapse(3)
    for (int k = 0; k < nzc; k++)
        for (int j = 0; j < g->ny; j++)
            for (int ib = 0; ib < nib; ib++) {
                if (gj_poll_step(poll, 1))
                    continue;
                int i1 = (ib + 1) * IB < g->nx ? (ib + 1) * IB : g->nx;
                for (int i = ib * IB; i < i1; i++)
                    out[(int64_t)k * slice + (int64_t)j * g->nx + i] = truth_voxel(ph, g, ss, i, j, k);
            }
    if (gj_poll_stopped(poll))
        return 1;
    if (two_d)
        for (int k = 1; k < g->nz; k++)
            memcpy(out + k * slice, out, (size_t)slice * sizeof *out);
    return 0;
}
