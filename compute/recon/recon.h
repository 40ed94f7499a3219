/*
 * recon.h — internal interface of the CT reconstruction module (kinds `recon`
 * and `phantom`, benchmark `recon`).
 *
 * Conventions (all lengths in mm, attenuation in 1/mm):
 *  - Volume voxel (i, j, k) has its centre at
 *      x = (i - (nx-1)/2) vx + ox,  y = (j - (ny-1)/2) vy + oy,  z = (k - (nz-1)/2) vz + oz
 *    and is stored C order [k][j][i] (x fastest). A 2D batch is nx x ny x batch.
 *  - View angle b (radians): detector axis a = (cos b, sin b), ray direction e = (-sin b, cos b).
 *    parallel2d: the ray of detector coordinate t is {t a + s e}; p(b, t) = int f.
 *    fan2d/cone3d: source S = -sod e (z = 0), flat detector at distance sdd from the source,
 *    detector point S + sdd e + u a + v z^.
 *  - Detector column c has coordinate u = (c - (cols-1)/2) du + off_u (rows likewise, v).
 *  - Projections are float32 [batch][views][rows][cols] (rows = 1 in 2D).
 *  - Optional cone matrices (RabbitCT convention, 12 doubles per view, column-major):
 *    w = A2 x + A5 y + A8 z + A11, col = (A0 x + A3 y + A6 z + A9)/w,
 *    row = (A1 x + A4 y + A7 z + A10)/w (detector pixel indices). They are normalised
 *    at parse time so that (A2, A5, A8) has unit length: w is then the depth in mm.
 */
#ifndef GJ_RECON_H
#define GJ_RECON_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/gj_error.h"
#include "common/gj_poll.h"
#include "common/nrrd.h"

enum rc_gtype { RC_PARALLEL2D = 0, RC_FAN2D = 1, RC_CONE3D = 2 };
enum rc_algo { RC_FBP = 0, RC_SART = 1, RC_SIRT = 2, RC_FDK = 3 };
enum rc_filter { RC_RAMLAK = 0, RC_SHEPPLOGAN, RC_COSINE, RC_HAMMING, RC_HANN };

/* Limits: every size a user gives is bounded before anything is allocated. */
#define RC_MAX_DIM 16384
#define RC_MAX_VIEWS 100000
#define RC_MAX_BATCH 100000
#define RC_MAX_VOLUME_BYTES (32ull << 30)   /* host memory for one volume */
#define RC_MAX_PROJ_BYTES (32ull << 30)     /* host memory for the projections */
/* Host memory of a run besides its buffers: stdio, threads' stacks and FFT plans. */
#define RC_HOST_OVERHEAD (16ull << 20)

struct rc_geom {
    int type;                 /* enum rc_gtype */
    int nviews;
    double *angles;           /* nviews, radians */
    int cols, rows;
    double du, dv, off_u, off_v;
    double sod, sdd;          /* source-origin, source-detector (fan, cone) */
    double *mat;              /* 12 * nviews, normalised; NULL without matrices */
    int nx, ny, nz;           /* nz = batch for 2D */
    double vx, vy, vz, ox, oy, oz;
    int batch;                /* 2D: sinograms in the input; cone: 1 */
    int short_scan;
};

struct rc_opts {
    int algo;                 /* enum rc_algo */
    int filter;               /* enum rc_filter */
    int iterations;
    double relaxation;
    int subsets;
    int nonneg;
    int threads;
    int gpu_hw_filter;        /* GPU FBP/FDK: hardware texture filtering (8-bit weights, about 1e-3
                               * relative to the CPU) instead of the exact software interpolation */
};

/* Parses params.geometry / params.volume / params.batch (and short_scan). On error
 * sets err with the field path and returns -1. g is zeroed first; free with rc_geom_free. */
int rc_geom_parse(const json_t *params, struct rc_geom *g, struct gj_error *err);
void rc_geom_free(struct rc_geom *g);
/* Options of the recon kind (algorithm, filter, iterations...). */
int rc_opts_parse(const json_t *params, const struct rc_geom *g, struct rc_opts *o,
                  struct gj_error *err);
uint64_t rc_proj_count(const struct rc_geom *g);   /* floats in the projections */
uint64_t rc_vol_count(const struct rc_geom *g);    /* floats in the volume */
const char *rc_filter_name(int f);
const char *rc_algo_name(int a);
const char *rc_gtype_name(int t);
/* Inverse of a 3x3 matrix (row-major); -1 when it is singular. */
int rc_inv3(const double m[9], double r[9]);
/* Builds cone matrices (unnormalised pixel convention) for a circular geometry; out: 12*nviews. */
void rc_circular_matrices(const struct rc_geom *g, double *out);
/* The normalised 3x4 matrix of view v (column-major, as g->mat): given, or that of the
 * circular geometry (depth row the unit vector e, so w = L = sod + P.e). CPU and GPU use it. */
void rc_view_matrix(const struct rc_geom *g, int v, double A[12]);
/* Matrices: the inverse (row-major) of the 3x3 part of view v's matrix and the source
 * position C, for the forward projector's rays; -1 when the matrix is singular. */
int rc_matrix_ray(const struct rc_geom *g, int v, double Mi[9], double C[3]);

/* ---- phantoms (phantom.c) ---- */
enum rc_phantom_id { RC_PH_SHEPP2D = 0, RC_PH_KAK3D, RC_PH_YYW3D, RC_PH_DISC, RC_PH_BALL };
struct rc_ellipsoid {
    double A, a, b, c, x0, y0, z0, phi;  /* phi radians, rotation about z */
};
struct rc_phantom {
    int n;
    struct rc_ellipsoid e[16];
    double cphi[16], sphi[16];   /* cos, sin of each phi (filled by rc_phantom_make) */
};
/* scale_mm: the phantom's unit maps to this many mm; value: multiplies every A. */
int rc_phantom_make(int id, double scale_mm, double value, struct rc_phantom *ph);
int rc_phantom_id(const char *name);
/* Exact line integral along the ray p + t d (d need not be unit; result in mm * 1/mm). */
double rc_phantom_ray(const struct rc_phantom *ph, const double p[3], const double d[3]);
/* Analytic projections of the geometry; out has rc_proj_count(g) floats
 * (the same sinogram repeated over the batch). poll (may be NULL): one unit per detector
 * row. 0, or 1 when poll saw a cancel. */
int rc_phantom_project(const struct rc_phantom *ph, const struct rc_geom *g, float *out, int threads,
                       struct gj_poll *poll);
/* Ground truth on the volume grid, averaged over ss^d sub-samples per voxel (d = 2 in 2D).
 * poll: one unit per 256 voxels of a row. 0, or 1 when cancelled. */
int rc_phantom_truth(const struct rc_phantom *ph, const struct rc_geom *g, int ss, float *out,
                     int threads, struct gj_poll *poll);
/* Units of poll progress the two take. */
uint64_t rc_phantom_project_units(const struct rc_geom *g);
uint64_t rc_phantom_truth_units(const struct rc_geom *g);

/* ---- I/O (io.c) ---- */
/* Writes float32 little-endian NRRD; space-directions form when space=1 (volumes).
 * poll (may be NULL) is asked between pieces of 64 MiB: 0, -1 (errno), or 1 when
 * cancelled (nothing is left behind). */
int rc_nrrd_write(const char *path, const float *data, int dim, const int64_t *sizes,
                  const double *spacing, const double *origin, int space, struct gj_poll *poll);
/* Raw float32 little-endian, written like rc_nrrd_write. */
int rc_raw_write(const char *path, const float *data, uint64_t n, struct gj_poll *poll);
/* Reads floats [first, first+count) of projections from a raw or NRRD file of exactly
 * total floats; rejects wrong sizes and non-finite values. poll (may be NULL) is asked
 * between pieces of 64 MiB. 0, -1 with err, or 1 when cancelled. */
int rc_read_projections(const char *path, float *out, uint64_t total, uint64_t first,
                        uint64_t count, struct gj_poll *poll, struct gj_error *err);
/* PNG preview (8-bit grey) of the central slices, windowed to [lo, hi] of the data. */
int rc_write_preview(const char *path, const float *vol, int nx, int ny, int nz);
/* Host bytes rc_write_preview takes besides the volume. */
uint64_t rc_preview_bytes(int nx, int ny, int nz);

/* ---- algorithms (filter.c, project.c) ---- */
/* The FFTW the CPU filter computes with (its fftwf_version), for provenance. */
const char *rc_fftw_version(void);
/* Filters projections in place: weights (fan/cone cosine, Parker), ramp with the window,
 * and scale so that backprojection with rc_backproject gives 1/mm. nsets x views x rows x cols. */
int rc_filter_projections(const struct rc_geom *g, int filter, float *proj, int nsets, int threads,
                          struct gj_poll *poll, struct gj_error *err);
/* 0, or -1 with err when short_scan is set and the angles do not cover 180 degrees plus the fan angle. */
int rc_check_short_scan(const struct rc_geom *g, struct gj_error *err);
/* The tables of that filtering, for the GPU path: FFT length L, the response H (L/2+1,
 * already divided by L), Parker weights (views x cols; 1 without short scan) and the view
 * weights. Caller frees the three arrays. */
int rc_filter_tables(const struct rc_geom *g, int filter, int *L, float **H, float **parker_w,
                     float **vw, struct gj_error *err);
/* Voxel-driven bilinear backprojection of one projection set into slices [z0, z0+nzs)
 * of the volume (vol points to slice z0). view_weight per view (NULL: 1); fdk=1 applies the
 * sod^2/L^2 distance weight of FBP/FDK; views [v0, v1). Adds to vol. poll (may be NULL):
 * one unit per view and block of 8 rows. 0, -1 when out of memory, 1 when poll saw a
 * cancel (vol then partly updated). */
int rc_backproject(const struct rc_geom *g, const float *proj, float *vol, int z0, int nzs,
                   const float *view_weight, int fdk, int v0, int v1, int threads, struct gj_poll *poll);
/* Joseph forward projection of slices [z0,z0+nzs) (2D: one slice at z0) for views [v0,v1).
 * 0, or -1 when out of memory. */
int rc_forward(const struct rc_geom *g, const float *vol, float *proj, int z0, int nzs, int v0,
               int v1, int threads);
/* SART's order of its subsets (order[0..subsets)): a stride near subsets / golden ratio,
 * coprime to subsets. Shared by the CPU and GPU paths. */
void rc_subset_order(int subsets, int *order);
/* Per-view FBP weights (angular step, redundancy, Parker handled per ray in filtering). */
void rc_view_weights(const struct rc_geom *g, float *w);
/* Reconstructs slices [z0, z0+nzs) into vol (nx*ny*nzs floats). proj: for 2D the sinograms
 * of exactly those slices; for cone the whole projection set. The hooks (may be NULL) are
 * called from the calling thread only, at least every 0.1 s of work (gj_poll.h); 0, 1
 * when cancelled, or -1 with err. */
struct rc_hooks {
    void *ctx;
    void (*progress)(void *ctx, double fraction);
    int (*cancelled)(void *ctx);
    double t_filter, t_backproject, t_iterate;   /* out: seconds per phase */
};
int rc_reconstruct(const struct rc_geom *g, const struct rc_opts *o, float *proj, float *vol,
                   int z0, int nzs, struct rc_hooks *hooks, struct gj_error *err);

/* PSNR (data range given) and SSIM (Gaussian 11x11 sigma 1.5, per slice mean) of a vs ref. */
double rc_psnr(const float *a, const float *ref, size_t n, double range);
double rc_ssim2d(const float *a, const float *ref, int nx, int ny, double range);

/* ---- GPU (kernels/recon via recon_gpu.h) ---- */
int rc_gpu_available(void);

#endif
