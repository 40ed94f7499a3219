/*
 * onnx_ir.h — the runtime's in-memory graph (what the loader builds from the protobuf),
 * the tensors kernels see and the backend interface (a vtable with a kernel table).
 *
 * The executor (onnx_session.c and the files of its phases, onnx_exec.h) is backend-agnostic:
 * it does scheduling, shape inference, constant folding (always on the host, with the CPU
 * kernels), fusions and the buffer plan, then calls the backend only through struct
 * onnx_backend. A GPU backend provides the same vtable (device alloc/free/upload/download and
 * a kernel per op).
 *
 * The loader's files: onnx_load.c (the graph), onnx_proto.c (tensors, value infos),
 * onnx_attrs.c (attributes); the operators are onnx_ops.h's, element types
 * onnx_dtype.c's, shapes and strides onnx_layout.c's.
 */
#ifndef ONNX_IR_H
#define ONNX_IR_H

#include <stddef.h>
#include <stdint.h>

#include "infer/onnx/onnx_dtype.h"
#include "infer/onnx/onnx_model.h"
#include "infer/onnx/onnx_ops.h"

#define ONNX_MAX_IO 64   /* inputs and outputs of a graph */

/* A dense tensor. data is host memory for constants and the CPU backend, backend memory
 * otherwise. elem is the type ONNX gives it (enum onnx_elem_type; nothing is widened). */
struct onnx_tensor {
    int elem;
    int rank;
    int64_t dims[ONNX_MAX_RANK];
    int64_t numel;
    void *data;
    int layout;   /* ONNX_LAYOUT_*: how a 4-D activation's bytes are ordered (onnx_plan_layout.c) */
    int64_t nstride;   /* elements from one image (dim 0) to the next, where a slice of a Concat's
                        * buffer at batch > 1 (onnx_plan_concat.c); 0: dense */
};

/* NCHW: row-major, as ONNX defines every tensor. NHWC: channels last, for a 4-D float32
 * activation that only kernels able to read or write it touch (the CPU backend's oneDNN
 * convolutions, onnx_plan_layout.c); the same bytes, in another order. */
enum { ONNX_LAYOUT_NCHW = 0, ONNX_LAYOUT_NHWC };

/* Shapes and strides (onnx_layout.c). */
size_t onnx_tensor_bytes(const struct onnx_tensor *t);
/* numel from dims; -1 when over limit or a dim is negative. */
int64_t onnx_shape_numel(int rank, const int64_t *dims, int64_t limit);
/* Row-major (C order) element strides of t: st[rank-1] = 1. */
void onnx_row_strides(const struct onnx_tensor *t, int64_t *st);
/* The numpy broadcast walk of `out` over n (<= 3) operands, for both backends: dims[] and,
 * per operand k, st[k][] its element stride along each walked dim (0: broadcast), with the
 * output's dims of 1 dropped and runs of dims contiguous in every operand merged. Returns
 * the walk's rank (>= 1: a scalar walks as one dim of 1 with strides 0). */
int onnx_broadcast_walk(const struct onnx_tensor *out, const struct onnx_tensor *const *ins, int n,
                        int64_t *dims, int64_t (*st)[ONNX_MAX_RANK]);
/* The product of t's dims [from, to) (1 when empty). */
int64_t onnx_dims_product(const struct onnx_tensor *t, int from, int to);

/* Operator parameters, parsed and validated from the attributes at load. */
enum { ONNX_PAD_NOTSET = 0, ONNX_PAD_VALID, ONNX_PAD_SAME_UPPER, ONNX_PAD_SAME_LOWER };

struct onnx_params {
    /* Conv, pools */
    int auto_pad;
    int n_kernel;                   /* 0: from the weight (Conv) */
    int64_t kernel[2], strides[2], pads[4], dilations[2];
    int64_t group;
    int ceil_mode, count_include_pad;
    /* Concat, Flatten, Softmax, Gather, LayerNormalization, ... */
    int64_t axis;
    float epsilon, alpha, beta;
    int trans_a, trans_b;
    int n_perm;
    int64_t perm[ONNX_MAX_RANK];
    int has_axes, n_axes;           /* attribute axes (Squeeze/Unsqueeze<13, Reduce*: see onnx_attrs.c) */
    int64_t axes[ONNX_MAX_RANK];
    int keepdims, noop_with_empty_axes;
    int to;                         /* Cast */
    int fmod;                       /* Mod */
    int select_last;                /* ArgMax, ArgMin: select_last_index */
    int gelu_tanh;                  /* Gelu approximate="tanh" */
    int64_t shape_start, shape_end; int has_shape_end;
    struct onnx_tensor value;       /* Constant / ConstantOfShape value (host, owned by the model) */
    int has_value;
    int softmax_legacy;             /* Softmax opset < 13: coerce to 2D at axis */
    /* Resolved by the executor's shape inference for this session: */
    int64_t sl_start[ONNX_MAX_RANK], sl_step[ONNX_MAX_RANK];   /* Slice per axis */
    int64_t pad_begin[ONNX_MAX_RANK];                          /* Pad per axis */
    double pad_value;
    /* Set by the executor's fusion pass: apply ReLU to the output. */
    int fused_relu;
};

struct onnx_node {
    char *name;
    int op;
    int n_in, n_out;
    int *in;                        /* value indices; -1: optional input left empty */
    int *out;
    struct onnx_params p;
};

struct onnx_value {
    char *name;
    int elem;                       /* declared element type (0: unknown) */
    int rank;                       /* declared rank (-1: unknown) */
    int64_t dims[ONNX_MAX_RANK];    /* declared dims (-1: symbolic) */
    struct onnx_tensor *init;       /* initializer (host), or NULL */
    int is_input, is_output;
};

struct onnx_model {
    int64_t opset;
    size_t n_values, n_nodes, n_inputs, n_outputs;
    struct onnx_value *values;
    struct onnx_node *nodes;
    int *inputs, *outputs;          /* value indices */
    struct onnx_io_desc *in_desc, *out_desc;
};

/* The geometry both backends' kernels share (onnx_layout.c), from the parameters shape
 * inference resolved: */
struct onnx_kargs;
/* Softmax: rows of n elements spaced `inner` apart (opset < 13: x coerced to 2-D at the axis,
 * n = the product of the dims from the axis, inner 1). */
void onnx_softmax_extent(const struct onnx_tensor *x, const struct onnx_params *p, int64_t *n, int64_t *inner);
/* Transpose and Slice as a strided read of input 0: output element (i_0, ..) is input element
 * base + sum_d i_d * st[d]; st[] for each output dim, returns base. */
int64_t onnx_view_strides(const struct onnx_kargs *a, int64_t *st);
/* MatMul with broadcast batch dims (the r = rank(Y) - 2 leading dims of Y): for Y's batch entry
 * bi, the element offsets of A's and B's matrices. */
struct onnx_matmul_batch {
    int r;
    int64_t dims[ONNX_MAX_RANK], sa[ONNX_MAX_RANK], sb[ONNX_MAX_RANK];
};
void onnx_matmul_batch_init(struct onnx_matmul_batch *mb, const struct onnx_tensor *A, const struct onnx_tensor *B,
                            const struct onnx_tensor *Y);
void onnx_matmul_batch_offsets(const struct onnx_matmul_batch *mb, int64_t bi, int64_t *oa, int64_t *ob);

/* ---- backend interface ------------------------------------------------------------ */

struct onnx_backend_ctx;   /* a backend's private state */

/* What a kernel gets: tensors with shapes inferred by the executor and data pointers
 * in backend memory; scratch has the bytes scratch_bytes() asked for. */
struct onnx_kargs {
    const struct onnx_node *node;
    const struct onnx_params *p;
    int n_in, n_out;
    const struct onnx_tensor *const *in;  /* n_in entries; NULL for absent optional inputs */
    struct onnx_tensor *const *out;       /* n_out entries; NULL for unused optional outputs */
    void *scratch;
    unsigned const_in;                    /* bit i: input i is a constant (same data every run) */
};

typedef int (*onnx_kernel_fn)(struct onnx_backend_ctx *be, const struct onnx_kargs *a);

struct onnx_backend {
    const char *name;
    /* opt: the session's options (threads, device, precision, cuda_graphs). 0, or -1 with err. */
    int (*init)(struct onnx_backend_ctx **be, const struct onnx_session_options *opt, struct gj_error *err);
    void (*fini)(struct onnx_backend_ctx *be);
    void *(*alloc)(struct onnx_backend_ctx *be, size_t bytes);
    void (*free)(struct onnx_backend_ctx *be, void *p);
    int (*upload)(struct onnx_backend_ctx *be, void *dst, const void *src, size_t bytes);
    int (*download)(struct onnx_backend_ctx *be, void *dst, const void *src, size_t bytes);
    int (*sync)(struct onnx_backend_ctx *be);
    /* Bytes of scratch a node needs (e.g. im2col, a cuDNN workspace); NULL: none. Called once
     * per node at session creation, with the data pointers planned: a backend may choose and
     * cache its algorithm here. (size_t)-1: the backend cannot run this node (last_error). */
    size_t (*scratch_bytes)(struct onnx_backend_ctx *be, const struct onnx_kargs *a);
    /* Optional hooks (NULL: not needed). begin_run is called after the inputs are uploaded:
     * 1 when it already ran the whole recorded schedule (graph replay: the kernels are not
     * called), 0 to call the kernels, -1 on error. end_run follows the kernels (failed: one
     * of them failed); e.g. ends a graph capture and launches the graph. */
    int (*begin_run)(struct onnx_backend_ctx *be);
    int (*end_run)(struct onnx_backend_ctx *be, int failed);
    /* The last failure of an alloc, upload, download, sync, kernel or hook call in words (e.g.
     * the failed CUDA call: "cudaMalloc: out of memory (CUDA error 2)"), or NULL: the detail
     * the executor adds to its error, as sqlite3_errmsg() does for a connection. */
    const char *(*last_error)(struct onnx_backend_ctx *be);
    /* Optional (NULL: every tensor is NCHW). 1 when node a's kernel can read its input 0
     * (output = 0) or write its output 0 (output = 1) in ONNX_LAYOUT_NHWC; called before
     * scratch_bytes, which then sees the layouts chosen. */
    int (*takes_nhwc)(struct onnx_backend_ctx *be, const struct onnx_kargs *a, int output);
    /* Optional (NULL: none). 1 when node a's kernel can read its input 0 (output = 0) or
     * write its output 0 (output = 1) with images nstride elements apart (a channel slice of
     * a Concat at batch > 1, onnx_plan_concat.c); called with the arguments set, before
     * scratch_bytes. */
    int (*takes_strided)(struct onnx_backend_ctx *be, const struct onnx_kargs *a, int output);
    /* Device memory the backend holds besides what alloc returned (workspaces). */
    size_t (*device_bytes)(struct onnx_backend_ctx *be);
    /* Optional: how the backend computes a's Conv, as the library that chose it names it
     * ("onednn brgconv:avx512_core", "cudnn IMPLICIT_PRECOMP_GEMM fma"), into buf. Called
     * after scratch_bytes, for provenance (onnx_session_convolutions). */
    void (*conv_impl)(struct onnx_backend_ctx *be, const struct onnx_kargs *a, char *buf, size_t len);
    int host_memory;   /* 1: alloc returns host memory (not counted as device bytes) */
    /* One kernel per op; NULL: the backend cannot run it (session creation fails). */
    onnx_kernel_fn kernels[ONNX_OP_COUNT];
};

extern const struct onnx_backend onnx_backend_cpu;
#if ONNX_WITH_CUDA
/* onnx_cuda.c: CUDA runtime, cuDNN, cuBLAS and the kernels of kernels/infer/. */
extern const struct onnx_backend onnx_backend_cuda;
/* 1 when a CUDA device can be used, else 0 with the reason in why (field "backend"). */
int onnx_cuda_available(struct gj_error *why);
#endif

/* onnx_cuda_types.c (built with or without CUDA): 1 when the CUDA backend's kernel for a's
 * node computes the element types of its tensors, else 0 with the reason in msg. */
int onnx_cuda_types_ok(const struct onnx_kargs *a, char *msg, size_t len);

/* The CPU backend doubles as the host evaluator for constant folding. */
struct onnx_backend_ctx *onnx_cpu_host_ctx(void);

#endif
