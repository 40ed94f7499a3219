/*
 * onnx_cpu_floats.c — the float types other than float32 in the CPU backend's float kernels:
 *   FLOAT16 and BFLOAT16 run the float32 kernel (Conv, pooling, normalisation, Softmax, Gemm,
 *     MatMul) on converted copies in scratch, and each output is rounded back to its type
 *     once (ties to even): half-precision storage, float32 arithmetic, as ONNX Runtime's CPU
 *     provider and PyTorch's half kernels accumulate in float. Weights are converted at
 *     every run (not cached: the CPU backend is not where half models are fast);
 *   DOUBLE has kernels of its own for Gemm and MatMul (cblas_dgemm) and Softmax; the other
 *     float kernels refuse it in shape inference (onnx_shape.c).
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "infer/onnx/onnx_cpu.h"

#define VIA_MAX 8      /* inputs and outputs of the operators run through float32 */
#define VIA_ALIGN 64

static size_t aligned(size_t n)
{
    return (n + VIA_ALIGN - 1) / VIA_ALIGN * VIA_ALIGN;
}

static int is_half(const struct onnx_tensor *t)
{
    return t && (t->elem == ONNX_ELEM_FLOAT16 || t->elem == ONNX_ELEM_BFLOAT16);
}

size_t onnx_cpu_via_f32_scratch(const struct onnx_kargs *a)
{
    size_t n = VIA_ALIGN;
    for (int k = 0; k < a->n_in; k++)
        if (is_half(a->in[k]))
            n += aligned((size_t)a->in[k]->numel * sizeof(float));
    for (int k = 0; k < a->n_out; k++)
        if (is_half(a->out[k]))
            n += aligned((size_t)a->out[k]->numel * sizeof(float));
    return n;
}

/* t as a float32 tensor at *sp (advanced past it); with its values converted when `load`. */
static struct onnx_tensor *as_f32(const struct onnx_tensor *t, struct onnx_tensor *tmp, char **sp, int load)
{
    *tmp = *t;
    tmp->elem = ONNX_ELEM_FLOAT;
    tmp->data = *sp;
    *sp += aligned((size_t)t->numel * sizeof(float));
    if (load)
        onnx_convert(ONNX_ELEM_FLOAT, tmp->data, t->elem, t->data, t->numel);
    return tmp;
}

int onnx_cpu_via_f32(struct onnx_backend_ctx *c, const struct onnx_kargs *a, onnx_kernel_fn f32,
                     size_t inner_scratch)
{
    struct onnx_tensor tin[VIA_MAX], tout[VIA_MAX];
    const struct onnx_tensor *ins[VIA_MAX];
    struct onnx_tensor *outs[VIA_MAX];
    char *sp = (char *)a->scratch + aligned(inner_scratch);
    if (a->n_in > VIA_MAX || a->n_out > VIA_MAX)
        return -1;
    for (int k = 0; k < a->n_in; k++)
        ins[k] = is_half(a->in[k]) ? as_f32(a->in[k], &tin[k], &sp, 1) : a->in[k];
    for (int k = 0; k < a->n_out; k++)
        outs[k] = is_half(a->out[k]) ? as_f32(a->out[k], &tout[k], &sp, 0) : a->out[k];
    struct onnx_kargs b = *a;
    b.in = ins;
    b.out = outs;
    if (f32(c, &b))
        return -1;
    for (int k = 0; k < a->n_out; k++)
        if (is_half(a->out[k]))
            onnx_convert(a->out[k]->elem, a->out[k]->data, ONNX_ELEM_FLOAT, outs[k]->data, outs[k]->numel);
    return 0;
}

/* ---- DOUBLE ------------------------------------------------------------------------------ */

/* Element (m, n) of Gemm's C, broadcast to M x N (rank 0, 1 or 2). */
static double gemm_c(const struct onnx_tensor *C, int64_t m, int64_t n)
{
    const double *d = C->data;
    if (C->rank == 0)
        return d[0];
    if (C->rank == 1)
        return d[C->dims[0] == 1 ? 0 : n];
    return d[(C->dims[0] == 1 ? 0 : m) * C->dims[1] + (C->dims[1] == 1 ? 0 : n)];
}

int onnx_cpu_gemm_f64(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *A = a->in[0], *B = a->in[1], *C = a->n_in > 2 ? a->in[2] : NULL;
    struct onnx_tensor *Y = a->out[0];
    const struct onnx_params *p = a->p;
    int64_t M = Y->dims[0], N = Y->dims[1], K = p->trans_a ? A->dims[0] : A->dims[1];
    double *y = Y->data, beta = C && p->beta != 0.0f ? p->beta : 0.0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++)
            y[m * N + n] = beta != 0.0 ? gemm_c(C, m, n) : 0.0;
    if (M == 0 || N == 0)
        return 0;
    if (K == 0) {
        for (int64_t i = 0; i < M * N; i++)
            y[i] *= beta;
        return 0;
    }
    cblas_dgemm(CblasRowMajor, p->trans_a ? CblasTrans : CblasNoTrans, p->trans_b ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, p->alpha, A->data, (int)A->dims[1], B->data, (int)B->dims[1], beta, y,
                (int)N);
    return 0;
}

int onnx_cpu_matmul_f64(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *A = a->in[0], *B = a->in[1];
    struct onnx_tensor *Y = a->out[0];
    int64_t M = A->dims[A->rank - 2], K = A->dims[A->rank - 1], N = B->dims[B->rank - 1];
    if (Y->numel == 0)
        return 0;
    if (K == 0) {
        memset(Y->data, 0, onnx_tensor_bytes(Y));
        return 0;
    }
    struct onnx_matmul_batch mb;
    onnx_matmul_batch_init(&mb, A, B, Y);
    for (int64_t bi = 0; bi < Y->numel / (M * N); bi++) {
        int64_t oa, ob;
        onnx_matmul_batch_offsets(&mb, bi, &oa, &ob);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0,
                    (const double *)A->data + oa, (int)K, (const double *)B->data + ob, (int)N, 0.0,
                    (double *)Y->data + bi * M * N, (int)N);
    }
    return 0;
}

int onnx_cpu_softmax_f64(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    int64_t n, inner;
    onnx_softmax_extent(x, a->p, &n, &inner);
    const double *xv = x->data;
    double *yv = a->out[0]->data;
    for (int64_t r = 0; x->numel && r < x->numel / n; r++) {
        int64_t base = (r / inner) * n * inner + r % inner;
        double m = -INFINITY, sum = 0;
        for (int64_t i = 0; i < n; i++)
            m = xv[base + i * inner] > m ? xv[base + i * inner] : m;
        for (int64_t i = 0; i < n; i++)
            sum += yv[base + i * inner] = exp(xv[base + i * inner] - m);
        for (int64_t i = 0; i < n; i++)
            yv[base + i * inner] /= sum;
    }
    return 0;
}
