/*
 * onnx_kernels_common.cuh — helpers shared by the ONNX runtime's kernels: launch geometry
 * (grid-stride loops over int64 counts), the broadcast walk and block reductions.
 */
#ifndef ONNX_KERNELS_COMMON_CUH
#define ONNX_KERNELS_COMMON_CUH

#include <math.h>
#include <stdint.h>

#include "../gj_launch.cuh"
#include "infer/onnx/onnx_cuda_kernels.h"

#define OKC_THREADS 256

/* Blocks for a block-stride loop of one block per row over `rows` rows (rows > 0). */
static inline unsigned okc_row_blocks(int64_t rows)
{
    return (unsigned)(rows < (1 << 20) ? rows : (1 << 20));
}

/* Blocks for a grid-stride loop over n elements (n > 0). */
static inline unsigned okc_blocks(int64_t n)
{
    return okc_row_blocks((n + OKC_THREADS - 1) / OKC_THREADS);
}

/* Launch status: the error of the launch just made (not an earlier sticky one if possible). */
static inline int okc_launched(void)
{
    return (int)cudaGetLastError();
}

#define OKC_FOR(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (int64_t)blockDim.x * gridDim.x)

/* Offsets of operands 0..nops-1 at output index i. */
template <int NOPS>
__device__ __forceinline__ void okc_offsets(const okc_walk &w, int64_t i, int64_t *off)
{
    for (int k = 0; k < NOPS; k++)
        off[k] = w.base[k];
    if (w.rank == 1) {
        for (int k = 0; k < NOPS; k++)
            off[k] += i * w.st[k][0];
        return;
    }
    for (int d = w.rank - 1; d >= 0; d--) {
        int64_t idx = i % w.dims[d];
        i /= w.dims[d];
        for (int k = 0; k < NOPS; k++)
            off[k] += idx * w.st[k][d];
    }
}

__device__ __forceinline__ float okc_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float okc_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum (or max) over the block; every thread gets the result. blockDim.x: a multiple of 32,
 * at most 1024. `sh` holds 32 floats. */
__device__ __forceinline__ float okc_block_reduce(float v, float *sh, bool is_max)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = is_max ? okc_warp_max(v) : okc_warp_sum(v);
    __syncthreads();   /* sh may still be read from a previous reduction */
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nw ? sh[lane] : (is_max ? -INFINITY : 0.0f);
        v = is_max ? okc_warp_max(v) : okc_warp_sum(v);
        if (lane == 0)
            sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

#endif
