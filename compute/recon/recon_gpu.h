/*
 * recon_gpu.h — the C interface of the CUDA kernels in kernels/recon/ (compiled only
 * with -Dcuda=enabled). Every function checks every CUDA call and returns -1 with err
 * set (never aborts) when the device is absent or fails.
 */
#ifndef GJ_RECON_GPU_H
#define GJ_RECON_GPU_H

#include "gj_config.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "recon/recon.h"

/* GJ_CUDA_EMU: the gpu-emu suite, which runs these kernels on the CPU (tests/gpuemu). */
#if GJ_HAVE_CUDA || defined(GJ_CUDA_EMU)
/* Number of CUDA devices; 0 when the runtime or driver is absent (cudaGetDeviceCount fails). */
int rc_gpu_device_count(void);
/* Same contract as rc_reconstruct, on CUDA device `device`: cuFFT filtering, texture
 * backprojection (the CPU's interpolation, or with o->gpu_hw_filter the texture unit's),
 * Joseph projection, SART/SIRT resident on the device. hooks (may be NULL): progress and
 * cancellation, checked between phases and every 8 SART/SIRT sub-iterations; the phase
 * times are filled in. 0, 1 when cancelled, or -1 with err. */
int rc_gpu_reconstruct(int device, const struct rc_geom *g, const struct rc_opts *o, float *proj,
                       float *vol, int z0, int nzs, struct rc_hooks *hooks, struct gj_error *err);
/* Device bytes the calling thread's last rc_gpu_reconstruct (or backproject_matrices) held
 * at most: its buffers, texture arrays and cuFFT work areas (not the CUDA context). The
 * tests check it against the estimate that decides slab splitting. */
uint64_t rc_gpu_peak_bytes(void);
/* RabbitCT-style backprojection of already filtered projections with matrices (benchmark):
 * vol (nx*ny*nz) += sum_v bilinear(proj_v, u, v) / w^2. Returns seconds of kernel time or -1. */
double rc_gpu_backproject_matrices(int device, const struct rc_geom *g, const float *proj, float *vol,
                                   struct gj_error *err);
#endif

#ifdef __cplusplus
}
#endif

#endif
