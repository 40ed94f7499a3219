/*
 * filter.c — FBP / FDK projection filtering on the CPU with FFTW (single precision):
 * cosine pre-weighting (fan, cone), Parker short-scan weights, the band-limited
 * ramp (Kak & Slaney's spatial Ram-Lak kernel, zero-padded to at least 2 x cols)
 * times a window, and the per-view angular weight, so that a plain sum of
 * backprojections (times sod^2/L^2 for divergent beams) gives 1/mm.
 */
#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "recon/recon.h"

const char *rc_fftw_version(void)
{
    return fftwf_version;
}

/* Smallest length >= n of the form 2^a 3^b 5^c (FFTW is fast on those). */
static int good_size(int n)
{
    for (int m = n;; m++) {
        int r = m;
        while (r % 2 == 0)
            r /= 2;
        while (r % 3 == 0)
            r /= 3;
        while (r % 5 == 0)
            r /= 5;
        if (r == 1)
            return m;
    }
}

/* Real frequency response (length L/2+1) of tau * ramp kernel with spacing tau, times window. */
static int ramp_response(int L, double tau, int filter, float *H)
{
    float *h = fftwf_malloc(sizeof(float) * (size_t)L);
    fftwf_complex *F = fftwf_malloc(sizeof(fftwf_complex) * (size_t)(L / 2 + 1));
    if (!h || !F) {
        fftwf_free(h);
        fftwf_free(F);
        return -1;
    }
    fftwf_plan p;
#pragma omp critical(rc_fftw_plan)
    p = fftwf_plan_dft_r2c_1d(L, h, F, FFTW_ESTIMATE);
    for (int i = 0; i < L; i++) {
        int n = i <= L / 2 ? i : i - L;   /* circular index */
        double v;
        if (n == 0)
            v = 1.0 / (4.0 * tau * tau);
        else if (n % 2)
            v = -1.0 / ((double)n * M_PI * tau) / ((double)n * M_PI * tau);
        else
            v = 0;
        h[i] = (float)(v * tau);
    }
    fftwf_execute(p);
    for (int k = 0; k <= L / 2; k++) {
        double f = (double)k / L;   /* cycles per sample, 0..0.5 */
        double w = 1;
        switch (filter) {
        case RC_SHEPPLOGAN: w = k ? sin(M_PI * f) / (M_PI * f) : 1; break;
        case RC_COSINE: w = cos(M_PI * f); break;
        case RC_HAMMING: w = 0.54 + 0.46 * cos(2 * M_PI * f); break;
        case RC_HANN: w = 0.5 + 0.5 * cos(2 * M_PI * f); break;
        default: break;
        }
        /* the response is real and even: keep the real part, scaled for the inverse FFT */
        H[k] = (float)(F[k][0] * w / L);
    }
#pragma omp critical(rc_fftw_plan)
    fftwf_destroy_plan(p);
    fftwf_free(h);
    fftwf_free(F);
    return 0;
}

static double angle_step(const struct rc_geom *g)
{
    if (g->nviews < 2)
        return M_PI;
    return (g->angles[g->nviews - 1] - g->angles[0]) / (g->nviews - 1);
}

void rc_view_weights(const struct rc_geom *g, float *w)
{
    /* pi / N: a parallel scan over 180 degrees, or a full 360-degree scan counting each ray twice */
    for (int v = 0; v < g->nviews; v++)
        w[v] = (float)(M_PI / g->nviews);
    if (g->short_scan)
        for (int v = 0; v < g->nviews; v++)
            w[v] = (float)fabs(angle_step(g));
}

/* Parker weight of the ray at relative angle beta, fan angle gam, overscan half-angle delta. */
static double parker(double beta, double gam, double delta)
{
    double s;
    if (beta < 0)
        return 0;
    if (beta < 2 * delta - 2 * gam) {
        s = sin(M_PI / 4 * beta / (delta - gam));
        return s * s;
    }
    if (beta <= M_PI - 2 * gam)
        return 1;
    if (beta <= M_PI + 2 * delta) {
        s = sin(M_PI / 4 * (M_PI + 2 * delta - beta) / (delta + gam));
        return s * s;
    }
    return 0;
}

/* Checks that a short scan covers 180 degrees plus the fan angle. */
static int short_scan_delta(const struct rc_geom *g, double *delta, struct gj_error *err)
{
    double umax = 0;
    for (int c = 0; c < g->cols; c += g->cols - 1 > 0 ? g->cols - 1 : 1) {
        double u = fabs((c - 0.5 * (g->cols - 1)) * g->du + g->off_u);
        if (u > umax)
            umax = u;
    }
    double gm = atan(umax / g->sdd);
    double range = fabs(g->angles[g->nviews - 1] - g->angles[0]);
    *delta = (range - M_PI) / 2;
    if (*delta < gm * 0.999)
        return gj_error_set(err, "short_scan", "a short scan must cover 180 degrees plus the fan angle (%.2f degrees); the angles cover %.2f",
                            360 * gm / M_PI + 180, range * 180 / M_PI);
    return 0;
}

/* What the CPU filtering and the GPU tables share: the short-scan overscan delta, the FFT
 * length L, the response H (L/2+1) and the view weights vw (caller frees both). */
static int filter_setup(const struct rc_geom *g, int filter, double *delta, int *L_out, float **H, float **vw,
                        struct gj_error *err)
{
    *delta = 0;
    *H = *vw = NULL;
    if (g->short_scan && short_scan_delta(g, delta, err))
        return -1;
    const int L = good_size(2 * g->cols > 64 ? 2 * g->cols : 64);
    const double tau = g->type == RC_PARALLEL2D ? g->du : g->du * g->sod / g->sdd;
    *H = malloc(sizeof(float) * (size_t)(L / 2 + 1));
    *vw = malloc(sizeof(float) * (size_t)g->nviews);
    if (!*H || !*vw || ramp_response(L, tau, filter, *H)) {
        free(*H);
        free(*vw);
        *H = *vw = NULL;
        return gj_error_set(err, "", "out of memory");
    }
    rc_view_weights(g, *vw);
    *L_out = L;
    return 0;
}

/* The filter's constants, shared by the threads. */
struct filter_job {
    const struct rc_geom *g;
    float *proj;
    const float *H, *vw;
    double delta, sign;
    int L;
};

/* Row r of the projections: weighted (cosine, Parker), zero-padded to L, multiplied by
 * the response in Fourier space, scaled by its view's weight. buf holds L floats. */
static void filter_row(const struct filter_job *fj, int64_t r, float *buf, fftwf_complex *F, fftwf_plan pf,
                       fftwf_plan pb)
{
    const struct rc_geom *g = fj->g;
    const int cols = g->cols, L = fj->L;
    int view = (int)((r / g->rows) % g->nviews);
    int row = (int)(r % g->rows);
    float *p = fj->proj + r * cols;
    double vv = (row - 0.5 * (g->rows - 1)) * g->dv + g->off_v;
    double beta = fj->sign * (g->angles[view] - g->angles[0]);
    for (int c = 0; c < cols; c++) {
        double w = 1;
        if (g->type != RC_PARALLEL2D) {
            double u = (c - 0.5 * (cols - 1)) * g->du + g->off_u;
            w = g->sdd / sqrt(g->sdd * g->sdd + u * u + (g->type == RC_CONE3D ? vv * vv : 0));
            if (g->short_scan)
                w *= parker(beta, -fj->sign * atan(u / g->sdd), fj->delta);
        }
        buf[c] = (float)(p[c] * w);
    }
    memset(buf + cols, 0, sizeof(float) * (size_t)(L - cols));
    fftwf_execute_dft_r2c(pf, buf, F);
    for (int k = 0; k <= L / 2; k++) {
        F[k][0] *= fj->H[k];
        F[k][1] *= fj->H[k];
    }
    fftwf_execute_dft_c2r(pb, F, buf);
    for (int c = 0; c < cols; c++)
        p[c] = buf[c] * fj->vw[view];
}

int rc_filter_projections(const struct rc_geom *g, int filter, float *proj, int nsets, int threads,
                          struct gj_poll *poll, struct gj_error *err)
{
    struct filter_job fj = { .g = g, .proj = proj };
    float *H, *vw;
    if (filter_setup(g, filter, &fj.delta, &fj.L, &H, &vw, err))
        return -1;
    fj.H = H;
    fj.vw = vw;
    fj.sign = angle_step(g) >= 0 ? 1 : -1;
    const int L = fj.L;
    const int64_t nrows = (int64_t)nsets * g->nviews * g->rows;
    int failed = 0;
#pragma omp parallel num_threads(threads)
    {
        float *buf = fftwf_malloc(sizeof(float) * (size_t)L);
        fftwf_complex *F = fftwf_malloc(sizeof(fftwf_complex) * (size_t)(L / 2 + 1));
        fftwf_plan pf = NULL, pb = NULL;
        if (buf && F) {
#pragma omp critical(rc_fftw_plan)
            {
                pf = fftwf_plan_dft_r2c_1d(L, buf, F, FFTW_ESTIMATE);
                pb = fftwf_plan_dft_c2r_1d(L, F, buf, FFTW_ESTIMATE);
            }
        }
        if (!pf || !pb) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < nrows; r++)
            if (pf && pb && !gj_poll_step(poll, 1))
                filter_row(&fj, r, buf, F, pf, pb);
#pragma omp critical(rc_fftw_plan)
        {
            if (pf)
                fftwf_destroy_plan(pf);
            if (pb)
                fftwf_destroy_plan(pb);
        }
        fftwf_free(buf);
        fftwf_free(F);
    }
    free(H);
    free(vw);
    if (failed)
        return gj_error_set(err, "", "out of memory (FFT plans)");
    return gj_poll_stopped(poll);
}

int rc_filter_tables(const struct rc_geom *g, int filter, int *L_out, float **H, float **parker_w,
                     float **vw, struct gj_error *err)
{
    double delta;
    int L;
    *parker_w = NULL;
    if (filter_setup(g, filter, &delta, &L, H, vw, err))
        return -1;
    *parker_w = malloc(sizeof(float) * (size_t)g->nviews * (size_t)g->cols);
    if (!*parker_w) {
        free(*H);
        free(*vw);
        *H = *vw = NULL;
        return gj_error_set(err, "", "out of memory");
    }
    const double sign = angle_step(g) >= 0 ? 1 : -1;
    for (int v = 0; v < g->nviews; v++)
        for (int c = 0; c < g->cols; c++) {
            double u = (c - 0.5 * (g->cols - 1)) * g->du + g->off_u;
            (*parker_w)[(size_t)v * g->cols + c] =
                g->short_scan ? (float)parker(sign * (g->angles[v] - g->angles[0]), -sign * atan(u / g->sdd), delta) : 1.0f;
        }
    *L_out = L;
    return 0;
}

int rc_check_short_scan(const struct rc_geom *g, struct gj_error *err)
{
    double delta;
    return g->short_scan && g->type != RC_PARALLEL2D ? short_scan_delta(g, &delta, err) : 0;
}
