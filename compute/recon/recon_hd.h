/*
 * recon_hd.h — the projector arithmetic written once for the CPU (project.c) and the GPU
 * (kernels/recon/recon_gpu.cu): in plain C these are static inline functions; compiled by
 * nvcc they are __host__ __device__, so the GPU runs the same source the CPU tests check.
 *
 *  - rc_ray:     the ray of a detector pixel (parallel, fan / cone circular, or matrices);
 *  - rc_joseph:  Joseph's line integral through a float volume (double arithmetic);
 *  - rc_tap_*:   the detector interpolation of the voxel-driven backprojector with its
 *                weight (the SART / SIRT normalisation), exactly as bp_rows on the CPU.
 */
#ifndef GJ_RECON_HD_H
#define GJ_RECON_HD_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define RC_HD __host__ __device__ __forceinline__
#else
#define RC_HD static inline
#endif

/* The volume grid (see recon.h for the voxel-centre convention). */
struct rc_grid {
    int nx, ny, nz;
    double vx, vy, vz, ox, oy, oz;
};

/* The ray of detector pixel (c, r) of a view: point p and direction d (physical, not unit).
 * type: enum rc_gtype (0 parallel2d, 1 fan2d, 2 cone3d); ca, sa: cos, sin of the view angle;
 * u, vv: the pixel's detector coordinates in mm; Minv, C (matrices, or NULL): the inverse of
 * the 3x3 part of the view's matrix (row-major) and the source position. */
RC_HD void rc_ray(int type, double ca, double sa, double sod, double sdd, double u, double vv,
                  const double *Minv, const double *C, int c, int r, double p[3], double d[3])
{
    if (Minv) {
        double pix[3] = { (double)c, (double)r, 1 };
        for (int k = 0; k < 3; k++) {
            d[k] = Minv[3 * k] * pix[0] + Minv[3 * k + 1] * pix[1] + Minv[3 * k + 2] * pix[2];
            p[k] = C[k];
        }
    } else if (type == 0) {
        p[0] = u * ca;
        p[1] = u * sa;
        p[2] = 0;
        d[0] = -sa;
        d[1] = ca;
        d[2] = 0;
    } else {
        p[0] = sod * sa;
        p[1] = -sod * ca;
        p[2] = 0;
        d[0] = -sdd * sa + u * ca;
        d[1] = sdd * ca + u * sa;
        d[2] = type == 2 ? vv : 0;
    }
}

/* Line integral of vol (nz_vol slices; 2D: nz_vol = 1, z ignored) along p + t d: step one
 * voxel along the dominant axis, interpolate linearly in the others, times the step in mm. */
RC_HD double rc_joseph(const struct rc_grid *g, const float *vol, int nz_vol, const double p[3],
                       const double d[3])
{
    const int nx = g->nx, ny = g->ny;
    /* index space: I = (x - xmin)/vx */
    double xmin = -0.5 * (nx - 1) * g->vx + g->ox, ymin = -0.5 * (ny - 1) * g->vy + g->oy;
    double zmin = -0.5 * (g->nz - 1) * g->vz + g->oz;
    double P[3] = { (p[0] - xmin) / g->vx, (p[1] - ymin) / g->vy, nz_vol > 1 ? (p[2] - zmin) / g->vz : 0 };
    double D[3] = { d[0] / g->vx, d[1] / g->vy, nz_vol > 1 ? d[2] / g->vz : 0 };
    double dl = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    int m = fabs(D[0]) >= fabs(D[1]) ? 0 : 1;
    if (nz_vol > 1 && fabs(D[2]) > fabs(D[m]))
        m = 2;
    if (!(fabs(D[m]) > 0))
        return 0;
    int n[3] = { nx, ny, nz_vol };
    int o1 = (m + 1) % 3, o2 = (m + 2) % 3;
    if (nz_vol == 1) {   /* 2D: the other axis is whichever of x, y is not m */
        o1 = 1 - m;
        o2 = 2;
    }
    double step = dl / fabs(D[m]);   /* mm per voxel step along m */
    if (nz_vol == 1)
        step = sqrt(d[0] * d[0] + d[1] * d[1]) / fabs(D[m]);
    const int64_t str[3] = { 1, nx, (int64_t)nx * ny };
    double sum = 0;
    for (int im = 0; im < n[m]; im++) {
        double t = (im - P[m]) / D[m];
        double a1 = P[o1] + t * D[o1];
        if (!(a1 > -1.0 && a1 < n[o1]))
            continue;
        int i1 = (int)floor(a1);
        double f1 = a1 - i1;
        if (nz_vol == 1) {
            double s = 0;
            if (i1 >= 0)
                s += (1 - f1) * vol[im * str[m] + i1 * str[o1]];
            if (i1 + 1 < n[o1])
                s += f1 * vol[im * str[m] + (i1 + 1) * str[o1]];
            sum += s;
            continue;
        }
        double a2 = P[o2] + t * D[o2];
        if (!(a2 > -1.0 && a2 < n[o2]))
            continue;
        int i2 = (int)floor(a2);
        double f2 = a2 - i2;
        double s = 0;
        for (int e2 = 0; e2 < 2; e2++) {
            int j2 = i2 + e2;
            if (j2 < 0 || j2 >= n[o2])
                continue;
            double w2 = e2 ? f2 : 1 - f2;
            if (i1 >= 0)
                s += w2 * (1 - f1) * vol[im * str[m] + i1 * str[o1] + j2 * str[o2]];
            if (i1 + 1 < n[o1])
                s += w2 * f1 * vol[im * str[m] + (i1 + 1) * str[o1] + j2 * str[o2]];
        }
        sum += s;
    }
    return sum * step;
}

/* The detector taps below return 0 when the position is off the detector (nothing to add),
 * else 1 with *val the interpolated value and *sn its weight: 1 inside, fading linearly to 0
 * over the pixel beyond each edge (zero padding). */

/* Parallel beam: linear interpolation of the view's row qv (cols) at column t. */
RC_HD int rc_tap_par(const float *qv, int cols, float t, float *val, float *sn)
{
    const float hi = (float)(cols - 1);
    if (t < 0.0f || t > hi) {
        if (t > -1.0f && t < 0.0f) {   /* fractional edge toward zero padding */
            *sn = 1.0f + t;
            *val = (1.0f + t) * qv[0];
            return 1;
        }
        if (t > hi && t < hi + 1.0f) {
            *sn = 1.0f - (t - hi);
            *val = (1.0f - (t - hi)) * qv[cols - 1];
            return 1;
        }
        return 0;
    }
    int ic = (int)t;
    if (ic > cols - 2)
        ic = cols - 2 >= 0 ? cols - 2 : 0;
    float fr = t - (float)ic;
    float a0 = qv[ic], a1 = cols > 1 ? qv[ic + 1] : a0;
    *sn = 1.0f;
    *val = a0 + fr * (a1 - a0);
    return 1;
}

/* Fan beam (one detector row): linear interpolation at column uc. */
RC_HD int rc_tap_fan(const float *qv, int cols, float uc, float *val, float *sn)
{
    const float cmax = (float)(cols - 1);
    if (uc >= 0.0f && uc < cmax) {
        int ic = (int)uc;
        float fu = uc - (float)ic;
        *val = qv[ic] + fu * (qv[ic + 1] - qv[ic]);
        *sn = 1.0f;
    } else if (uc > -1.0f && uc < 0.0f) {
        *val = (1.0f + uc) * qv[0];
        *sn = 1.0f + uc;
    } else if (uc >= cmax && uc < cmax + 1.0f) {
        *val = (1.0f - (uc - cmax)) * qv[cols - 1];
        *sn = 1.0f - (uc - cmax);
    } else {
        return 0;
    }
    return 1;
}

/* Cone beam: bilinear interpolation of the view qv (rows x cols) at (uc, vr). */
RC_HD int rc_tap_cone(const float *qv, int cols, int rows, float uc, float vr, float *val, float *sn)
{
    const float cmax = (float)(cols - 1), rmax = (float)(rows - 1);
    if (uc >= 0.0f && uc < cmax && vr >= 0.0f && vr < rmax) {
        int ic = (int)uc, ir = (int)vr;
        float fu = uc - (float)ic, fv = vr - (float)ir;
        const float *q0 = qv + (int64_t)ir * cols + ic, *q1 = q0 + cols;
        float a0 = q0[0] + fu * (q0[1] - q0[0]);
        float a1 = q1[0] + fu * (q1[1] - q1[0]);
        *val = a0 + fv * (a1 - a0);
        *sn = 1.0f;
        return 1;
    }
    if (!(uc > -1.0f && uc < cols && vr > -1.0f && vr < rows))
        return 0;
    int ic = (int)floorf(uc), ir = (int)floorf(vr);
    float fu = uc - (float)ic, fv = vr - (float)ir;
    float v = 0, s = 0;
    for (int e2 = 0; e2 < 2; e2++) {
        int rr = ir + e2;
        if (rr < 0 || rr >= rows)
            continue;
        for (int e1 = 0; e1 < 2; e1++) {
            int cc = ic + e1;
            if (cc < 0 || cc >= cols)
                continue;
            float wt = (e2 ? fv : 1 - fv) * (e1 ? fu : 1 - fu);
            v += wt * qv[(int64_t)rr * cols + cc];
            s += wt;
        }
    }
    *val = v;
    *sn = s;
    return 1;
}

#endif
