/*
 * onnx_cpu.h — what the CPU backend's files share (internal to the backend): the context with
 * its thread pool, the broadcast walk of element-wise kernels, and the kernels that live
 * outside onnx_cpu.c:
 *   onnx_cpu_typed.c   element-wise operators, reductions and ArgMax/ArgMin for the element
 *                      types onnx_cpu.c's float32 and int64 loops do not cover, through
 *                      typed element access (onnx_elem.c);
 *   onnx_cpu_floats.c  FLOAT16 and BFLOAT16 through the float32 kernels, DOUBLE Gemm, MatMul
 *                      and Softmax.
 */
#ifndef ONNX_CPU_H
#define ONNX_CPU_H

#include "infer/onnx/onnx_ir.h"
#include "infer/onnx/onnx_pool.h"

struct onnx_backend_ctx {
    struct onnx_pool *pool;
    int threads;
    struct onnx_dnnl *dnnl;   /* oneDNN's convolutions (onnx_cpu_dnnl.c), or NULL */
};

#define PAR_GRAIN 16384   /* elements below which a loop runs on one thread */

/* parallel_for over [0, n) with a per-call closure */
static inline void par(struct onnx_backend_ctx *c, int64_t n, int64_t grain, onnx_task_fn fn, void *ctx)
{
    onnx_pool_for(c->pool, n, grain, fn, ctx);
}

/* The broadcast walk of an output over up to 3 operands (onnx_broadcast_walk), by rows of its
 * last walked dim. */
struct bc {
    int r;                       /* collapsed rank (>= 1) */
    int64_t od[ONNX_MAX_RANK];
    int64_t st[3][ONNX_MAX_RANK];/* element strides of up to 3 inputs (0: broadcast) */
    int n;
};

static inline void bc_setup(struct bc *b, const struct onnx_tensor *out, const struct onnx_tensor *const *ins, int n)
{
    b->n = n;
    b->r = onnx_broadcast_walk(out, ins, n, b->od, b->st);
}

/* Offsets of row `row` (all dims but the last) for each input. */
static inline void bc_row(const struct bc *b, int64_t row, int64_t *off)
{
    for (int k = 0; k < b->n; k++)
        off[k] = 0;
    for (int i = b->r - 2; i >= 0; i--) {
        int64_t idx = row % b->od[i];
        row /= b->od[i];
        for (int k = 0; k < b->n; k++)
            off[k] += idx * b->st[k][i];
    }
}

/* onnx_cpu_typed.c */
int onnx_cpu_typed_binary(struct onnx_backend_ctx *c, const struct onnx_kargs *a);
int onnx_cpu_typed_unary(struct onnx_backend_ctx *c, const struct onnx_kargs *a);
int onnx_cpu_typed_reduce(struct onnx_backend_ctx *c, const struct onnx_kargs *a);
int onnx_cpu_argmax(struct onnx_backend_ctx *c, const struct onnx_kargs *a);
size_t onnx_cpu_reduce_scratch(const struct onnx_kargs *a);
/* For each dim of x, the output element stride of a reduction over the axes in mask (0 on
 * reduced axes); returns how many inputs each output reduces. */
int64_t onnx_cpu_reduce_strides(const struct onnx_tensor *x, unsigned mask, int64_t *ost);
/* A reduction's step to the next input element in row-major order: idx (x's index) moves
 * on by one, *o (the output element it adds to) by the strides ost of
 * onnx_cpu_reduce_strides. */
static inline void onnx_cpu_reduce_next(const struct onnx_tensor *x, const int64_t *ost, int64_t *idx, int64_t *o)
{
    for (int d = x->rank - 1; d >= 0; d--) {
        idx[d]++;
        *o += ost[d];
        if (idx[d] < x->dims[d])
            return;
        *o -= ost[d] * idx[d];
        idx[d] = 0;
    }
}

/* onnx_cpu_dnnl.c: float32 convolutions through oneDNN where the build has it (else these
 * do nothing and our im2col + GEMM kernel runs). create: NULL when oneDNN is absent, fails,
 * or GJ_ONNX_DNNL=0. prepare (at session creation): builds node a's primitive and packs its
 * weights; returns the scratch bytes its runs need, or (size_t)-1 where it takes no part.
 * run: 0 done, 1 not prepared (run our kernel), -1 failed. */
struct onnx_dnnl *onnx_dnnl_create(int threads);
void onnx_dnnl_free(struct onnx_dnnl *d);
size_t onnx_dnnl_conv_prepare(struct onnx_dnnl *d, const struct onnx_kargs *a);
/* 1 when prepare would take node a (it then also reads and writes NHWC activations). */
int onnx_dnnl_conv_takes(const struct onnx_dnnl *d, const struct onnx_kargs *a);
/* 1 with the implementation oneDNN chose for node's primitive(s) in buf ("onednn
 * brgconv:avx512_core"), 0 when oneDNN does not compute it. */
int onnx_dnnl_conv_impl(struct onnx_dnnl *d, const struct onnx_node *node, char *buf, size_t len);
int onnx_dnnl_conv_run(struct onnx_backend_ctx *c, struct onnx_dnnl *d, const struct onnx_kargs *a);

/* onnx_cpu_floats.c: runs `f32` (a float32 kernel) on a node whose float tensors are FLOAT16
 * or BFLOAT16: they are converted to float32 in scratch (after the kernel's own scratch,
 * `inner_scratch` bytes), and its outputs rounded back. */
int onnx_cpu_via_f32(struct onnx_backend_ctx *c, const struct onnx_kargs *a, onnx_kernel_fn f32,
                     size_t inner_scratch);
/* The scratch onnx_cpu_via_f32 needs besides the kernel's. */
size_t onnx_cpu_via_f32_scratch(const struct onnx_kargs *a);
int onnx_cpu_gemm_f64(struct onnx_backend_ctx *c, const struct onnx_kargs *a);
int onnx_cpu_matmul_f64(struct onnx_backend_ctx *c, const struct onnx_kargs *a);
int onnx_cpu_softmax_f64(struct onnx_backend_ctx *c, const struct onnx_kargs *a);

#endif
