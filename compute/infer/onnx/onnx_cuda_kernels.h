/*
 * onnx_cuda_kernels.h — the CUDA kernels of the ONNX runtime's GPU backend (kernels/infer/),
 * as C-callable launchers for onnx_cuda.c.
 *
 * Every launcher enqueues its work on `stream` (no synchronisation, no allocation: all of
 * them may be captured into a CUDA graph) and returns the launch status as a cudaError_t
 * value (0: launched). Pointers are device memory; element counts may be 0 (nothing is
 * launched). Data-dependent failures (an index out of range, an integer division by zero,
 * a NaN cast to int64) cannot be returned from a kernel: the kernel stores an OKC_ERR_* code
 * in the device word `err` with atomicCAS, only where it still holds OKC_ERR_NONE (so the run's
 * first error is the one reported), which the backend reads after the run.
 */
#ifndef ONNX_CUDA_KERNELS_H
#define ONNX_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OKC_MAX_RANK 8

enum { OKC_ERR_NONE = 0, OKC_ERR_INDEX = 1, OKC_ERR_DIV_ZERO = 2, OKC_ERR_CAST = 3 };

/* Element types, as enum onnx_elem_type. */
enum { OKC_F32 = 1, OKC_I64 = 7, OKC_BOOL = 9 };

/* A walk over an output of `rank` dims (row-major) reading up to three operands: st[k][d] is
 * operand k's element stride along output dim d (0: broadcast; negative: a reversed slice).
 * Operand k's element at output index (i_0..i_r-1) is base[k] + sum_d i_d * st[k][d]. */
struct okc_walk {
    int rank;                          /* 1..OKC_MAX_RANK */
    int64_t dims[OKC_MAX_RANK];
    int64_t st[3][OKC_MAX_RANK];
    int64_t base[3];
};

/* y[n, c, :] = act(y[n, c, :] + bias[c]) over `rows` = N*C planes of `plane` elements; bias may
 * be NULL (activation only). The epilogue of a convolution. */
int okc_bias_act(cudaStream_t stream, float *y, const float *bias, int64_t rows, int64_t channels,
                 int64_t plane, int relu);

enum { OKC_RELU, OKC_SIGMOID, OKC_SQRT, OKC_ERF, OKC_TANH, OKC_GELU, OKC_GELU_TANH, OKC_NEG };
int okc_unary_f32(cudaStream_t stream, int op, const float *x, float *y, int64_t n);
int okc_neg_i64(cudaStream_t stream, const int64_t *x, int64_t *y, int64_t n);

enum { OKC_ADD, OKC_SUB, OKC_MUL, OKC_DIV, OKC_POW, OKC_EQ };
/* y = a OP b with numpy broadcasting (w: operands 0 = a, 1 = b). elem: the type of a (F32:
 * every op; I64: ADD SUB MUL DIV EQ; BOOL: EQ); b_elem: b's type (differs only for POW, which
 * takes an I64 exponent too). EQ writes bool. relu (F32 only): a fused ReLU. */
int okc_binary(cudaStream_t stream, int op, int elem, int b_elem, const struct okc_walk *w,
               const void *a, const void *b, void *y, int64_t n, int relu, int *err);

/* y = cond ? x : z with broadcasting (operands 0 = cond, 1 = x, 2 = z); es: element bytes. */
int okc_where(cudaStream_t stream, const struct okc_walk *w, const uint8_t *cond, const void *x,
              const void *z, void *y, int64_t n, int es);

/* y[i] = x[walk of operand 0]: Expand, Transpose, Slice and Gemm's bias broadcast. */
int okc_strided_copy(cudaStream_t stream, const struct okc_walk *w, const void *x, void *y, int64_t n,
                     int es);

/* Cast between F32, I64 and BOOL (from != to). */
int okc_cast(cudaStream_t stream, int from, int to, const void *x, void *y, int64_t n, int *err);

/* 2-D max or average pooling of `rows` = N*C planes (ONNX semantics, as onnx_cpu.c). */
struct okc_pool {
    int64_t rows, H, W, OH, OW;
    int64_t kh, kw, sh, sw, dh, dw, ph, pw, pad_end_h, pad_end_w;
    int max, count_include_pad;
};
int okc_pool2d(cudaStream_t stream, const struct okc_pool *p, const float *x, float *y);
/* y[r] = mean of x[r, 0..plane). */
int okc_global_avgpool(cudaStream_t stream, const float *x, float *y, int64_t rows, int64_t plane);
/* Inference BatchNormalization over NC... (channel = (i / plane) % channels), fused ReLU. */
int okc_batchnorm(cudaStream_t stream, const float *x, float *y, const float *scale, const float *bias,
                  const float *mean, const float *var, int64_t n, int64_t channels, int64_t plane,
                  float eps, int relu);

/* Softmax over n elements spaced `inner` apart, for outer*inner rows. */
int okc_softmax(cudaStream_t stream, const float *x, float *y, int64_t outer, int64_t n, int64_t inner);
/* LayerNormalization of rows of n contiguous elements; bias may be NULL. */
int okc_layernorm(cudaStream_t stream, const float *x, float *y, const float *scale, const float *bias,
                  int64_t rows, int64_t n, float eps);

/* ReduceMean: y has the kept dims (kdims, input strides kst, row-major order); each output
 * averages the `count` inputs spanned by the reduced dims (rdims, input strides rst). */
struct okc_reduce {
    int kr, rr;
    int64_t kdims[OKC_MAX_RANK], kst[OKC_MAX_RANK];
    int64_t rdims[OKC_MAX_RANK], rst[OKC_MAX_RANK];
    int64_t count;
};
int okc_reduce_mean(cudaStream_t stream, const struct okc_reduce *r, const float *x, float *y, int64_t n_out);

/* Gather along an axis: y[o, k, i] = x[o, idx[k] (negative: + dim), i]; an index outside
 * [-dim, dim) sets OKC_ERR_INDEX and writes 0. */
int okc_gather(cudaStream_t stream, const void *x, const int64_t *idx, void *y, int64_t outer, int64_t dim,
               int64_t n_idx, int64_t inner, int es, int *err);

/* Constant padding: y (ydims) = value outside, x (xdims) at offset begin. es 4 (F32) or 8 (I64). */
struct okc_pad {
    int rank;
    int64_t xdims[OKC_MAX_RANK], ydims[OKC_MAX_RANK], begin[OKC_MAX_RANK];
};
int okc_pad(cudaStream_t stream, const struct okc_pad *p, const void *x, void *y, int64_t n, int es,
            float fvalue, int64_t ivalue);

#ifdef __cplusplus
}
#endif

#endif
