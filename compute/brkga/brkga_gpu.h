/*
 * brkga_gpu.h — the CUDA backend of the engine (kernels/brkga/brkga_gpu.cu): populations
 * in device memory, Philox keys/crossover/mutant kernels drawing exactly what the CPU
 * draws, ranking by CUB segmented radix sort (stable: ties by slot index), and the
 * network decoder with per-chromosome scratch. Only the network decoder has a GPU
 * form. Without CUDA these functions report that the build has no GPU path.
 */
#ifndef BRKGA_GPU_H
#define BRKGA_GPU_H

#include "brkga/brkga_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices (0 without CUDA, driver or device). */
int brkga_gpu_device_count(void);
/* Fills be with the GPU backend for prm->device; -1 with be->err set. */
int brkga_gpu_backend(const struct brkga_params *prm, const struct brkga_decoder *dec,
                      struct brkga_backend *be);

#ifdef __cplusplus
}
#endif

#endif
