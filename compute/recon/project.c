/*
 * project.c — the CPU projectors and the reconstruction drivers.
 *
 *  - rc_backproject: voxel-driven backprojection with linear (2D) / bilinear (cone)
 *    interpolation on the detector, shared by FBP, FDK, SART and SIRT.
 *  - rc_forward: Joseph's forward projector (step one voxel along the dominant axis,
 *    interpolate linearly in the others, weight by the step length in mm).
 *  - SART (ordered subsets of views, relaxation, nonnegativity) and SIRT:
 *      x += lambda * BP_s( (p - A_s x) / A_s 1 ) / BP_s(1)
 *    where the row sums A 1 come from the same Joseph projector and BP_s(1) is the
 *    backprojection of ones through the same interpolation, so the scale of the
 *    unmatched backprojector cancels.
 * Threads: OpenMP with num_threads = opts->threads (the job's cpu_threads); a 2D batch
 * runs whole slices per thread, a single slice or a cone volume splits rows / rays.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "recon/recon.h"
#include "recon/recon_hd.h"

/* Vectorised inner loops: an AVX2 clone picked at run time on x86-64 (GCC, clang). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RC_VEC_ATTR __attribute__((target_clones("avx2", "default")))
#else
#define RC_VEC_ATTR
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RC_CONE_ATTR __attribute__((target_clones("avx2", "default"), optimize("no-trapping-math", "finite-math-only")))
#else
#define RC_CONE_ATTR RC_VEC_ATTR
#endif

/* Per-view constants of the backprojection. */
struct bpview {
    double ca, sa;        /* cos, sin */
    const double *A;      /* matrix or NULL */
};

/* One row of a parallel-beam slice: the column position is linear in i, t = t0 + i dt. */
static void bp_row_parallel(const float *qv, int cols, float *out, float *nout, int nx, float t0, float dt, float wv)
{
    for (int i = 0; i < nx; i++) {
        float val, sn;
        if (!rc_tap_par(qv, cols, t0 + dt * (float)i, &val, &sn))
            continue;
        out[i] += wv * val;
        if (nout)
            nout[i] += sn;
    }
}

/* A divergent beam's row: w, w*col and w*row are linear in x (matrix form). */
struct bp_line { float w0, dw, c0, dc, r0, dr; };

static struct bp_line bp_line_of(const struct rc_geom *g, const double *A, double x0, double y, double z)
{
    struct bp_line l;
    l.w0 = (float)(A[2] * x0 + A[5] * y + A[8] * z + A[11]);
    l.dw = (float)(A[2] * g->vx);
    l.c0 = (float)(A[0] * x0 + A[3] * y + A[6] * z + A[9]);
    l.dc = (float)(A[0] * g->vx);
    l.r0 = (float)(A[1] * x0 + A[4] * y + A[7] * z + A[10]);
    l.dr = (float)(A[1] * g->vx);
    return l;
}

/* One row of a fan (rows == 1) or cone slice; scale: the FDK distance weight's sod^2
 * (0: none). */
static void bp_row_divergent(const float *qv, int cols, int rows, float *out, float *nout, int nx,
                             struct bp_line l, float wv, int fdk, float sod2)
{
    for (int i = 0; i < nx; i++) {
        float w = l.w0 + l.dw * (float)i;
        if (!(w > 1e-6f))
            continue;
        float iw = 1.0f / w, uc = (l.c0 + l.dc * (float)i) * iw;
        float val, sn;
        if (rows == 1) {
            if (!rc_tap_fan(qv, cols, uc, &val, &sn))
                continue;
        } else {
            float vr = (l.r0 + l.dr * (float)i) * iw;
            if (!rc_tap_cone(qv, cols, rows, uc, vr, &val, &sn))
                continue;
        }
        out[i] += wv * (fdk ? sod2 * iw * iw : 1.0f) * val;
        if (nout)
            nout[i] += sn;
    }
}

/* Backprojects views vlist[0..nv) into rows [j0, j1) of slice k (global index) of vol_slice.
 * q: the projection set (views x rows x cols) this slice reads. If norm: also accumulate the
 * backprojection of ones (SART normalisation). */
static void bp_rows(const struct rc_geom *g, const float *q, float *slice, float *norm, int k,
                    int j0, int j1, const int *vlist, int nv, const float *vw, int fdk)
{
    const int cols = g->cols, rows = g->rows, nx = g->nx;
    const double cu = 0.5 * (cols - 1) - g->off_u / g->du;
    const double z = g->type == RC_CONE3D ? (k - 0.5 * (g->nz - 1)) * g->vz + g->oz : 0.0;
    const double x0 = -0.5 * (nx - 1) * g->vx + g->ox;
    const float sod2 = fdk ? (float)(g->sod * g->sod) : 1.0f;
    for (int vi = 0; vi < nv; vi++) {
        const int v = vlist ? vlist[vi] : vi;
        const double b = g->angles[v], ca = cos(b), sa = sin(b);
        const float wv = vw ? vw[v] : 1.0f;
        const float *qv = q + (int64_t)v * rows * cols;
        double Av[12];
        if (g->type != RC_PARALLEL2D)
            rc_view_matrix(g, v, Av);
        for (int j = j0; j < j1; j++) {
            const double y = (j - 0.5 * (g->ny - 1)) * g->vy + g->oy;
            float *out = slice + (int64_t)j * nx;
            float *nout = norm ? norm + (int64_t)j * nx : NULL;
            if (g->type == RC_PARALLEL2D)
                bp_row_parallel(qv, cols, out, nout, nx, (float)((x0 * ca + y * sa) / g->du + cu),
                                (float)(g->vx * ca / g->du), wv);
            else
                bp_row_divergent(qv, cols, rows, out, nout, nx, bp_line_of(g, Av, x0, y, z), wv, fdk, sod2);
        }
    }
}

/* Views per piece of a row block's backprojection: many views of wide slices are
 * seconds of work, and poll is asked between pieces. The views are added in the same
 * order as in one call, so the sums are the same. */
#define BP_VIEWS 64

/* bp_rows in pieces of BP_VIEWS views; stops once poll saw a cancel. Each view is a
 * unit of poll's progress when count_views. poll or vlist NULL: one call. */
static void bp_rows_polled(const struct rc_geom *g, const float *q, float *slice, float *norm, int k, int j0,
                           int j1, const int *vlist, int nv, const float *vw, int fdk, struct gj_poll *poll,
                           int count_views)
{
    if (!poll || !vlist) {
        bp_rows(g, q, slice, norm, k, j0, j1, vlist, nv, vw, fdk);
        return;
    }
    for (int c = 0; c < nv && !gj_poll_step(poll, 0); c += BP_VIEWS) {
        int n = nv - c < BP_VIEWS ? nv - c : BP_VIEWS;
        bp_rows(g, q, slice, norm, k, j0, j1, vlist + c, n, vw, fdk);
        gj_poll_step(poll, count_views ? (uint64_t)n : 0);
    }
}

/* Parallel-beam FBP inner loop: qp is a view's row with two zeros padded on each side,
 * so clamping the position to [0, cols+2] makes every tap valid and the edges fade to
 * zero exactly as the general path. Branch-free, so the compiler vectorises it (AVX2
 * gathers in the avx2 clone, chosen at run time). */
RC_VEC_ATTR
static void bp_par_row(float *restrict out, const float *restrict qp, float t0, float dt, int nx, float hi, float wv)
{
    for (int i = 0; i < nx; i++) {
        float t = t0 + dt * (float)i;
        t = t < 0.0f ? 0.0f : t;
        t = t > hi ? hi : t;
        int ic = (int)t;
        float fr = t - (float)ic;
        out[i] += wv * (qp[ic] + fr * (qp[ic + 1] - qp[ic]));
    }
}

/* Parallel-beam backprojection of rows [j0, j1) of one slice from padded sinograms
 * (views x (cols + 4)). */
static void bp_parallel(const struct rc_geom *g, const float *qpad, float *slice, int j0, int j1, int v0,
                        int v1, const float *vw)
{
    const int cols = g->cols, nx = g->nx, pc = cols + 4;
    const double cu = 0.5 * (cols - 1) - g->off_u / g->du;
    const double x0 = -0.5 * (nx - 1) * g->vx + g->ox;
    for (int v = v0; v < v1; v++) {
        const double ca = cos(g->angles[v]), sa = sin(g->angles[v]);
        const float wv = vw ? vw[v] : 1.0f;
        for (int j = j0; j < j1; j++) {
            const double y = (j - 0.5 * (g->ny - 1)) * g->vy + g->oy;
            bp_par_row(slice + (int64_t)j * nx, qpad + (int64_t)v * pc, (float)((x0 * ca + y * sa) / g->du + cu + 2.0),
                       (float)(g->vx * ca / g->du), nx, (float)(cols + 2), wv);
        }
    }
}

/* Cone-beam inner loop over one volume row: qp is a view padded with one zero pixel on the
 * left / top and two on the right / bottom ((rows+3) x (cols+3)); clamping the detector
 * position to [-1, cols] x [-1, rows] keeps every tap inside, and positions off the detector
 * read zeros, as in the general path. Branch-free: vectorised (AVX2 gathers) in the avx2 clone. */
RC_CONE_ATTR
static void bp_cone_row(float *restrict out, const float *restrict qp, int pc, float w0, float dw, float c0,
                        float dc, float r0, float dr, int nx, float cmax, float rmax, float scale)
{
    for (int i = 0; i < nx; i++) {
        float w = w0 + dw * (float)i;
        float iw = 1.0f / (w > 1e-6f ? w : 1e30f);   /* behind the source: weight ~1e-60, i.e. 0 */
        float uc = (c0 + dc * (float)i) * iw, vr = (r0 + dr * (float)i) * iw;
        uc = uc < -1.0f ? -1.0f : uc;
        uc = uc > cmax ? cmax : uc;
        vr = vr < -1.0f ? -1.0f : vr;
        vr = vr > rmax ? rmax : vr;
        float pu = uc + 1.0f, pv = vr + 1.0f;
        int ic = (int)pu, ir = (int)pv;
        float fu = pu - (float)ic, fv = pv - (float)ir;
        int id = ir * pc + ic;
        float a0 = qp[id] + fu * (qp[id + 1] - qp[id]);
        float a1 = qp[id + pc] + fu * (qp[id + pc + 1] - qp[id + pc]);
        out[i] += scale * iw * iw * (a0 + fv * (a1 - a0));
    }
}

/* FDK backprojection (cone, optional matrices) of views [v0, v1) into slices [z0, z0+nzs):
 * views are padded in chunks and every thread takes blocks of 8 rows of one slice. */
static int bp_cone_fast(const struct rc_geom *g, const float *proj, float *vol, int z0, int nzs,
                        const float *vw, int v0, int v1, int threads, struct gj_poll *poll)
{
    enum { VC = 8 };
    const int cols = g->cols, rows = g->rows, pc = cols + 3, pr = rows + 3;
    const int64_t pview = (int64_t)pc * pr, slice = (int64_t)g->nx * g->ny;
    float *pad = calloc((size_t)VC * (size_t)pview, sizeof *pad);
    double *mats = malloc(sizeof(double) * 12 * VC);
    if (!pad || !mats) {
        free(pad);
        free(mats);
        return -1;
    }
    const int njb = (g->ny + 7) / 8;
    const double x0 = -0.5 * (g->nx - 1) * g->vx + g->ox;
    for (int c0v = v0; c0v < v1 && !gj_poll_stopped(poll); c0v += VC) {
        int nv = v1 - c0v < VC ? v1 - c0v : VC;
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int k = 0; k < nv * rows; k++) {
            int vv = k / rows, r = k % rows;
            memcpy(pad + vv * pview + (int64_t)(r + 1) * pc + 1, proj + ((int64_t)(c0v + vv) * rows + r) * cols,
                   sizeof(float) * (size_t)cols);
        }
        for (int vv = 0; vv < nv; vv++) {
            rc_view_matrix(g, c0v + vv, mats + 12 * vv);
        }
#pragma omp parallel for num_threads(threads) schedule(dynamic) collapse(2)
        for (int k = 0; k < nzs; k++)
            for (int jb = 0; jb < njb; jb++) {
                if (gj_poll_step(poll, (uint64_t)nv))
                    continue;
                const double z = (z0 + k - 0.5 * (g->nz - 1)) * g->vz + g->oz;
                int j0 = jb * 8, j1 = j0 + 8 < g->ny ? j0 + 8 : g->ny;
                for (int vv = 0; vv < nv; vv++) {
                    const double *A = mats + 12 * vv;
                    const float sc = (float)(g->sod * g->sod) * (vw ? vw[c0v + vv] : 1.0f);
                    for (int j = j0; j < j1; j++) {
                        const double y = (j - 0.5 * (g->ny - 1)) * g->vy + g->oy;
                        bp_cone_row(vol + k * slice + (int64_t)j * g->nx, pad + vv * pview, pc,
                                    (float)(A[2] * x0 + A[5] * y + A[8] * z + A[11]), (float)(A[2] * g->vx),
                                    (float)(A[0] * x0 + A[3] * y + A[6] * z + A[9]), (float)(A[0] * g->vx),
                                    (float)(A[1] * x0 + A[4] * y + A[7] * z + A[10]), (float)(A[1] * g->vx), g->nx,
                                    (float)cols, (float)rows, sc);
                    }
                }
            }
    }
    free(pad);
    free(mats);
    return gj_poll_stopped(poll);
}

/* Parallel beam: sinograms padded with two zeros on each side (see bp_par_row). */
static int bp_parallel_sets(const struct rc_geom *g, const float *proj, float *vol, int nzs,
                            const float *vw, int v0, int v1, int threads, struct gj_poll *poll)
{
    const int pc = g->cols + 4;
    float *pad = calloc((size_t)nzs * g->nviews * pc, sizeof *pad);
    if (!pad)
        return -1;
    for (int64_t r = 0; r < (int64_t)nzs * g->nviews; r++)
        memcpy(pad + r * pc + 2, proj + r * g->cols, sizeof(float) * (size_t)g->cols);
    const int njb = (g->ny + 7) / 8;
    const int64_t slice = (int64_t)g->nx * g->ny;
#pragma omp parallel for num_threads(threads) schedule(dynamic) collapse(2)
    for (int k = 0; k < nzs; k++)
        for (int jb = 0; jb < njb; jb++) {
            int j0 = jb * 8, j1 = j0 + 8 < g->ny ? j0 + 8 : g->ny;
            for (int c = v0; c < v1 && !gj_poll_step(poll, 0); c += BP_VIEWS) {
                int c1 = c + BP_VIEWS < v1 ? c + BP_VIEWS : v1;
                bp_parallel(g, pad + (int64_t)k * g->nviews * pc, vol + k * slice, j0, j1, c, c1, vw);
                gj_poll_step(poll, (uint64_t)(c1 - c));
            }
        }
    free(pad);
    return gj_poll_stopped(poll);
}

/* The views v0..v1-1 as a list (one element at least); NULL when out of memory. */
static int *view_list(int v0, int v1)
{
    int nv = v1 - v0;
    int *vl = malloc(sizeof(int) * (size_t)(nv > 0 ? nv : 1));
    for (int i = 0; vl && i < nv; i++)
        vl[i] = v0 + i;
    return vl;
}

int rc_backproject(const struct rc_geom *g, const float *proj, float *vol, int z0, int nzs,
                   const float *view_weight, int fdk, int v0, int v1, int threads, struct gj_poll *poll)
{
    if (g->type == RC_CONE3D && fdk)
        return bp_cone_fast(g, proj, vol, z0, nzs, view_weight, v0, v1, threads, poll);
    if (g->type == RC_PARALLEL2D)
        return bp_parallel_sets(g, proj, vol, nzs, view_weight, v0, v1, threads, poll);
    int nv = v1 - v0;
    int *vl = view_list(v0, v1);
    if (!vl)
        return -1;
    const int64_t slice = (int64_t)g->nx * g->ny;
    const int64_t pset = (int64_t)g->nviews * g->rows * g->cols;
    const int two_d = g->type != RC_CONE3D;
    const int njb = (g->ny + 7) / 8;   /* blocks of 8 rows */
#pragma omp parallel for num_threads(threads) schedule(dynamic) collapse(2)
    for (int k = 0; k < nzs; k++)
        for (int jb = 0; jb < njb; jb++) {
            int j0 = jb * 8, j1 = j0 + 8 < g->ny ? j0 + 8 : g->ny;
            const float *q = two_d ? proj + (int64_t)k * pset : proj;
            bp_rows_polled(g, q, vol + k * slice, NULL, z0 + k, j0, j1, vl, nv, view_weight, fdk, poll, 1);
        }
    free(vl);
    return gj_poll_stopped(poll);
}

/* ---- Joseph forward projection ---- */

/* Forward projects views vlist into q (views x rows x cols layout of the full set). */
static void fp_views(const struct rc_geom *g, const float *vol, int nz_vol, float *q,
                     const int *vlist, int nv, int threads, struct gj_poll *poll)
{
    const int cols = g->cols, rows = g->rows;
    const struct rc_grid grid = { g->nx, g->ny, g->nz, g->vx, g->vy, g->vz, g->ox, g->oy, g->oz };
#pragma omp parallel for num_threads(threads) schedule(dynamic) collapse(2) if (threads > 1)
    for (int vi = 0; vi < nv; vi++)
        for (int r = 0; r < rows; r++) {
            if (gj_poll_step(poll, 0))
                continue;
            int v = vlist[vi];
            const double ca = cos(g->angles[v]), sa = sin(g->angles[v]);
            double Mi[9] = { 0 }, C[3] = { 0 };
            int ok = 0;
            if (g->mat)
                ok = rc_matrix_ray(g, v, Mi, C) == 0;
            double vv = (r - 0.5 * (rows - 1)) * g->dv + g->off_v;
            float *out = q + (int64_t)v * rows * cols + (int64_t)r * cols;
            for (int c = 0; c < cols; c++) {
                double u = (c - 0.5 * (cols - 1)) * g->du + g->off_u, p[3], d[3];
                if (g->mat && !ok) {
                    out[c] = 0;
                    continue;
                }
                rc_ray(g->type, ca, sa, g->sod, g->sdd, u, vv, g->mat ? Mi : NULL, C, c, r, p, d);
                out[c] = (float)rc_joseph(&grid, vol, nz_vol, p, d);
            }
        }
}

int rc_forward(const struct rc_geom *g, const float *vol, float *proj, int z0, int nzs, int v0,
               int v1, int threads)
{
    int nv = v1 - v0;
    int *vl = view_list(v0, v1);
    if (!vl)
        return -1;
    if (g->type == RC_CONE3D) {
        fp_views(g, vol, g->nz, proj, vl, nv, threads, NULL);
    } else {
        const int64_t slice = (int64_t)g->nx * g->ny, pset = (int64_t)g->nviews * g->cols;
        for (int k = 0; k < nzs; k++)
            fp_views(g, vol + k * slice, 1, proj + k * pset, vl, nv, threads, NULL);
    }
    (void)z0;
    free(vl);
    return 0;
}

/* ---- SART / SIRT ---- */

void rc_subset_order(int subsets, int *order)
{
    int stride = (int)(subsets / 1.618 + 0.5);
    if (stride < 1)
        stride = 1;
    for (;; stride++) {
        int a = stride, b = subsets;
        while (b) {
            int t = a % b;
            a = b;
            b = t;
        }
        if (a == 1)
            break;
    }
    for (int s = 0; s < subsets; s++)
        order[s] = (int)(((int64_t)s * stride) % subsets);
}

/* The state of one iterative reconstruction (a 2D slice, or the cone volume). */
struct iter_ws {
    const struct rc_geom *g;
    const struct rc_opts *o;
    int nz_vol, k, threads, subsets;
    int64_t nrays, nvox;
    float *rowsum;   /* A 1 per ray (views x rows x cols) */
    float *res;      /* residual per ray */
    float *upd, *norm;
    int *vl, *order;
};

static void iter_free(struct iter_ws *w)
{
    free(w->rowsum);
    free(w->res);
    free(w->upd);
    free(w->norm);
    free(w->vl);
    free(w->order);
}

/* Buffers, the row sums A 1 (through the same projector) and the subset order. */
static int iter_setup(struct iter_ws *w, struct gj_poll *poll)
{
    const struct rc_geom *g = w->g;
    w->subsets = w->o->algo == RC_SIRT ? 1 : w->o->subsets;
    w->nrays = (int64_t)g->nviews * g->rows * g->cols;
    w->nvox = (int64_t)g->nx * g->ny * w->nz_vol;
    float *ones = malloc(sizeof(float) * (size_t)w->nvox);
    w->rowsum = malloc(sizeof(float) * (size_t)w->nrays);
    w->res = malloc(sizeof(float) * (size_t)w->nrays);
    w->upd = malloc(sizeof(float) * (size_t)w->nvox);
    w->norm = malloc(sizeof(float) * (size_t)w->nvox);
    w->vl = malloc(sizeof(int) * (size_t)g->nviews);
    w->order = malloc(sizeof(int) * (size_t)w->subsets);
    if (!ones || !w->rowsum || !w->res || !w->upd || !w->norm || !w->vl || !w->order) {
        free(ones);
        return -1;
    }
    for (int64_t i = 0; i < w->nvox; i++)
        ones[i] = 1.0f;
    for (int i = 0; i < g->nviews; i++)
        w->vl[i] = i;
    fp_views(g, ones, w->nz_vol, w->rowsum, w->vl, g->nviews, w->threads, poll);
    free(ones);
    rc_subset_order(w->subsets, w->order);
    /* a parallel region per sub-iteration only pays off when a subset holds enough work
     * (one view of a 2D slice does not: the threads would mostly wait at barriers) */
    int64_t work = (int64_t)((g->nviews + w->subsets - 1) / w->subsets) * g->rows * g->cols *
                   (g->nx > g->ny ? g->nx : g->ny);
    if (work < (1 << 22))
        w->threads = 1;
    return 0;
}

/* x += lambda * BP_s((p - A_s x) / A_s 1) / BP_s(1) over subset s's views. */
static void sub_iteration(struct iter_ws *w, int s, const float *p, float *x, struct gj_poll *poll)
{
    const struct rc_geom *g = w->g;
    const int nzb = g->type == RC_CONE3D ? w->nz_vol : 1, njb = (g->ny + 7) / 8;
    const int64_t slice = (int64_t)g->nx * g->ny;
    int nv = 0;
    for (int v = s; v < g->nviews; v += w->subsets)
        w->vl[nv++] = v;
    fp_views(g, x, w->nz_vol, w->res, w->vl, nv, w->threads, poll);
    for (int a = 0; a < nv; a++) {
        int64_t base = (int64_t)w->vl[a] * g->rows * g->cols;
        for (int64_t r = 0; r < (int64_t)g->rows * g->cols; r++) {
            float wt = w->rowsum[base + r];
            w->res[base + r] = wt > 1e-6f ? (p[base + r] - w->res[base + r]) / wt : 0.0f;
        }
    }
    memset(w->upd, 0, sizeof(float) * (size_t)w->nvox);
    memset(w->norm, 0, sizeof(float) * (size_t)w->nvox);
#pragma omp parallel for num_threads(w->threads) schedule(dynamic) collapse(2) if (w->threads > 1)
    for (int kk = 0; kk < nzb; kk++)
        for (int jb = 0; jb < njb; jb++) {
            int j0 = jb * 8, j1 = j0 + 8 < g->ny ? j0 + 8 : g->ny;
            bp_rows_polled(g, w->res, w->upd + kk * slice, w->norm + kk * slice,
                           g->type == RC_CONE3D ? kk : w->k, j0, j1, w->vl, nv, NULL, 0, poll, 0);
        }
    const float lam = (float)w->o->relaxation;
    for (int64_t i = 0; i < w->nvox; i++) {
        if (w->norm[i] > 1e-6f)
            x[i] += lam * w->upd[i] / w->norm[i];
        if (w->o->nonneg && x[i] < 0)
            x[i] = 0;
    }
}

/* Runs the iterative algorithm on one problem: a 2D slice (nz_vol = 1, z index k) or the
 * whole cone volume, with `threads` inner threads. Steps poll once per sub-iteration.
 * 0, 1 when cancelled, -1 when out of memory. */
static int iterate(const struct rc_geom *g, const struct rc_opts *o, const float *p, float *x,
                   int nz_vol, int k, int threads, struct gj_poll *poll)
{
    struct iter_ws w = { .g = g, .o = o, .nz_vol = nz_vol, .k = k, .threads = threads };
    int rc = iter_setup(&w, poll) ? -1 : 0;
    for (int it = 0; it < o->iterations && rc == 0; it++)
        for (int si = 0; si < w.subsets && rc == 0; si++) {
            if (gj_poll_stopped(poll))
                rc = 1;
            else {
                sub_iteration(&w, w.order[si], p, x, poll);
                rc = gj_poll_step(poll, 1);
            }
        }
    iter_free(&w);
    return rc;
}

/* FBP / FDK: filtering, then backprojection in pieces of about 2e8 updates (slices in 2D,
 * views for a cone volume); poll sees both. 0, 1 when cancelled, or -1 with err. */
static int analytic(const struct rc_geom *g, const struct rc_opts *o, float *proj, float *vol, int z0,
                    int nzs, int T, struct rc_hooks *hooks, struct gj_poll *poll, struct gj_error *err)
{
    const int two_d = g->type != RC_CONE3D;
    const int64_t slice = (int64_t)g->nx * g->ny, pset = (int64_t)g->nviews * g->rows * g->cols;
    double t0 = gj_now();
    gj_poll_phase(poll, 0.0, 0.1, (uint64_t)(two_d ? nzs : 1) * g->nviews * g->rows);
    int r = rc_filter_projections(g, o->filter, proj, two_d ? nzs : 1, T, poll, err);
    if (r)
        return r;
    if (hooks)
        hooks->t_filter = gj_now() - t0;
    t0 = gj_now();
    gj_poll_phase(poll, 0.1, 1.0, (uint64_t)nzs * ((g->ny + 7) / 8) * g->nviews);
    if (two_d) {
        int chunk = (int)(2e8 / ((double)slice * g->nviews));
        chunk = chunk < 1 ? 1 : chunk;
        for (int k = 0; k < nzs && r == 0; k += chunk) {
            int n = k + chunk <= nzs ? chunk : nzs - k;
            r = rc_backproject(g, proj + k * pset, vol + k * slice, z0 + k, n, NULL, g->type != RC_PARALLEL2D, 0,
                               g->nviews, T, poll);
        }
    } else {
        int vc = (int)(2e8 / ((double)slice * nzs));
        vc = vc < 8 ? 8 : vc;
        for (int v = 0; v < g->nviews && r == 0; v += vc)
            r = rc_backproject(g, proj, vol, z0, nzs, NULL, 1, v, v + vc <= g->nviews ? v + vc : g->nviews, T, poll);
    }
    if (r < 0)
        return gj_error_set(err, "", "out of memory");
    if (hooks)
        hooks->t_backproject = gj_now() - t0;
    return r;
}

/* SART / SIRT of a 2D batch: whole slices per thread when there are enough of them,
 * else one slice after another with all threads. */
static int iterative_2d(const struct rc_geom *g, const struct rc_opts *o, const float *proj, float *vol,
                        int z0, int nzs, int T, struct gj_poll *poll)
{
    const int64_t slice = (int64_t)g->nx * g->ny, pset = (int64_t)g->nviews * g->rows * g->cols;
    int fail = 0;
    if (nzs >= T || T == 1) {
#pragma omp parallel for num_threads(T) schedule(dynamic)
        for (int k = 0; k < nzs; k++) {
            if (gj_poll_stopped(poll) || fail)
                continue;
            if (iterate(g, o, proj + k * pset, vol + k * slice, 1, z0 + k, 1, poll) < 0) {
#pragma omp atomic write
                fail = 1;
            }
        }
    } else {
        for (int k = 0; k < nzs && !gj_poll_stopped(poll) && !fail; k++)
            fail = iterate(g, o, proj + k * pset, vol + k * slice, 1, z0 + k, T, poll) < 0;
    }
    return fail ? -1 : gj_poll_stopped(poll);
}

int rc_reconstruct(const struct rc_geom *g, const struct rc_opts *o, float *proj, float *vol,
                   int z0, int nzs, struct rc_hooks *hooks, struct gj_error *err)
{
    const int T = o->threads > 0 ? o->threads : 1;
    memset(vol, 0, sizeof(float) * (size_t)((int64_t)g->nx * g->ny * nzs));
    struct gj_poll poll;
    gj_poll_init(&poll, hooks ? hooks->ctx : NULL, hooks ? hooks->cancelled : NULL, hooks ? hooks->progress : NULL);
    if (o->algo == RC_FBP || o->algo == RC_FDK)
        return analytic(g, o, proj, vol, z0, nzs, T, hooks, &poll, err);
    double t_it = gj_now();
    const int subsets = o->algo == RC_SIRT ? 1 : o->subsets;
    int r;
    if (g->type == RC_CONE3D) {
        if (z0 != 0 || nzs != g->nz)
            return gj_error_set(err, "algorithm", "internal: iterative cone reconstruction needs the whole volume");
        gj_poll_phase(&poll, 0.0, 1.0, (uint64_t)o->iterations * subsets);
        r = iterate(g, o, proj, vol, g->nz, 0, T, &poll);
    } else {
        gj_poll_phase(&poll, 0.0, 1.0, (uint64_t)nzs * o->iterations * subsets);
        r = iterative_2d(g, o, proj, vol, z0, nzs, T, &poll);
    }
    if (r < 0)
        return gj_error_set(err, "", "out of memory");
    if (hooks)
        hooks->t_iterate = gj_now() - t_it;
    return r;
}
