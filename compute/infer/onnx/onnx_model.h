/*
 * onnx_model.h — the ONNX model runtime of the inference module (public API).
 *
 * Load an ONNX model (a protobuf file, parsed with bounds), look at its inputs and
 * outputs, create a session for one batch size and a thread count, run it, free it.
 * A model using an operator, attribute or data type this runtime does not implement
 * fails to load (or, for shape-dependent cases, to create a session) with a message
 * that names it: it never runs wrong.
 *
 * Tensors are dense, row-major (C order), in host memory, of the element type of their
 * description (enum onnx_elem_type, onnx_elem.h). A session keeps a pointer to its model:
 * free every session before its model. A session is not thread-safe; use one per thread
 * (sessions of one model may run concurrently). A session runs on tensors by position (onnx_session_run) or by
 * name (onnx_session_run_named: each input checked, any subset of outputs).
 *
 * Supported: ONNX IR 3-10, default-domain opset 11-20; operators Conv (2-D, groups,
 * dilations, auto_pad), BatchNormalization (inference), Relu, MaxPool, AveragePool (2-D,
 * ceil_mode, count_include_pad), GlobalAveragePool, Concat, Gemm, MatMul (rank >= 2, batch
 * broadcasting), Add, Sub, Mul, Div, Mod, Pow, Equal, Greater, Less, GreaterOrEqual,
 * LessOrEqual, And, Or, Xor, Not, Where, Expand (numpy broadcasting), Sqrt, Erf, Gelu,
 * Sigmoid, Tanh, Neg, Abs, Exp, Log, Softmax, LayerNormalization, ReduceMean, ReduceSum,
 * ReduceMax, ReduceMin, ArgMax, ArgMin, Flatten, Reshape, Transpose, Gather, Shape, Slice,
 * Squeeze, Unsqueeze, Constant, ConstantOfShape, Range, Identity, Dropout (inference), Cast,
 * Pad (constant mode). Shape inputs (Reshape, Expand, Slice, Pad, axes...) must be known once
 * the input shapes are: constants, or computed from shapes (folded).
 *
 * Element types (every graph input and output may be any of them; what each operator takes is
 * checked at session creation, naming the node and the input):
 *   FLOAT      everything. FLOAT16, BFLOAT16: stored as themselves; Conv, pooling,
 *              normalisation, Softmax, Gemm and MatMul compute in float32 and round each
 *              output once (ties to even); element-wise arithmetic is correctly rounded.
 *   DOUBLE     in double precision: element-wise, reductions, Gemm, MatMul, Softmax (not
 *              Conv, pooling, normalisation).
 *   INT8..INT64, UINT8..UINT64: arithmetic wraps to the type's width, comparisons, Mod,
 *              Abs, Neg and Relu (signed), reductions, ArgMax; Gather indices INT32 or INT64.
 *   BOOL       one byte 0 or 1: And, Or, Xor, Not, Equal, Where's condition.
 *   STRING     (Triton's BYTES; struct onnx_string) passes through every operator that moves
 *              data (views, Identity, Gather, Concat, Slice, Transpose, Expand, Where), compares
 *              with Equal and parses as a number with Cast; a STRING is never made (Cast to
 *              STRING is refused), and operators that compute refuse it by name.
 *   All of this on the CPU backend. The CUDA backend computes FLOAT (and INT64 arithmetic,
 *   casts among FLOAT, INT64 and BOOL, moves of 1-, 4- and 8-byte types) and refuses the
 *   rest, naming node and type, when the session is planned (onnx_cuda_types.c).
 * Batch: by default the first dimension of every graph input is the batch (the session's
 * batch size); with options.no_batch inputs keep the model's shapes (scalars too). Other
 * symbolic dimensions take the sizes options.input_shapes gives.
 * The CPU backend sets OpenBLAS to one thread (process-wide) and splits GEMMs itself.
 *
 * Backends: "cpu" (always) and "cuda" (builds with CUDA and cuDNN; onnx_cuda.c). The CUDA
 * backend runs every operator above on one device, on a stream of its own per session:
 * cuDNN for Conv (algorithm found once per convolution shape at session creation and
 * cached), cuBLAS for Gemm/MatMul, own kernels for the rest (bias and ReLU fused into the
 * convolution's epilogue; BatchNormalization after a Conv is folded into its weights at
 * session creation, for every backend). Precision (enum onnx_precision):
 *   FP32  strict float32: cuDNN CUDNN_FMA_MATH, cuBLAS CUBLAS_COMPUTE_32F_PEDANTIC (no TF32);
 *         matches PyTorch within 1e-4 relative L2.
 *   TF32  Conv/Gemm/MatMul may use TF32 tensor cores (10-bit mantissa inputs, FP32
 *         accumulation): about 1e-3 relative L2 on the test models (tests allow 5e-3).
 *   FP16  FP32 storage everywhere; Conv/Gemm/MatMul may down-convert their inputs to half
 *         on tensor cores (cuDNN CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, cuBLAS
 *         CUBLAS_COMPUTE_32F_FAST_16F), FP32 accumulation; other ops stay FP32. Saves no
 *         memory; tests allow 1e-2 relative L2.
 * With cuda_graphs, the first run is captured into a CUDA graph and later runs replay it
 * (inputs and outputs are copied in and out of the session's fixed device buffers).
 */
#ifndef ONNX_MODEL_H
#define ONNX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/gj_error.h"
#include "infer/onnx/onnx_elem.h"   /* element types, their names, sizes and values */

#define ONNX_MAX_RANK 8
/* Default and hard caps for a model file (a protobuf message cannot exceed 2 GiB). */
#define ONNX_MODEL_DEFAULT_MAX_BYTES ((size_t)1 << 30)
#define ONNX_MODEL_HARD_MAX_BYTES ((size_t)2047 << 20)

struct onnx_io_desc {
    const char *name;
    int elem_type;                  /* enum onnx_elem_type */
    int rank;
    int64_t dims[ONNX_MAX_RANK];    /* -1: not fixed by the model (the batch dimension) */
};

typedef struct onnx_model onnx_model;
typedef struct onnx_session onnx_session;

/* Loads a model file of at most max_bytes (0: ONNX_MODEL_DEFAULT_MAX_BYTES). NULL with err. */
onnx_model *onnx_model_load_file(const char *path, size_t max_bytes, struct gj_error *err);
/* Loads a model from memory (the data is copied where needed; the caller keeps it). */
onnx_model *onnx_model_load_memory(const void *data, size_t len, struct gj_error *err);
void onnx_model_free(onnx_model *model);

size_t onnx_model_num_inputs(const onnx_model *model);
size_t onnx_model_num_outputs(const onnx_model *model);
const struct onnx_io_desc *onnx_model_input(const onnx_model *model, size_t i);
const struct onnx_io_desc *onnx_model_output(const onnx_model *model, size_t i);
/* Number of nodes and the opset of the default domain. */
size_t onnx_model_num_nodes(const onnx_model *model);
int64_t onnx_model_opset(const onnx_model *model);

enum onnx_precision {
    ONNX_PRECISION_FP32 = 0,   /* strict float32 (no TF32): every backend */
    ONNX_PRECISION_TF32 = 1,   /* "cuda" only */
    ONNX_PRECISION_FP16 = 2,   /* "cuda" only: FP32 storage, half-precision tensor-core math */
};

/* Zero-initialised fields mean: CPU backend, device 0, FP32, no CUDA graphs, no profiling, a
 * batch dimension, no shapes given. */
struct onnx_session_options {
    int batch;             /* the first dimension of every input (1 to 65536); with no_batch: 0
                              or 1 (one inference per run) */
    int threads;           /* worker threads for the CPU backend (>= 1) */
    const char *backend;   /* "cpu" or "cuda" (NULL: "cpu") */
    size_t max_bytes;      /* refuse a session whose buffers (weights, inputs, activation arena,
                              scratch) exceed this, or whose constants folded at creation
                              would; 0: no limit beyond 4 GiB per tensor */
    int device;            /* CUDA device ordinal for "cuda" (ignored by "cpu") */
    int precision;         /* enum onnx_precision; the CPU backend accepts FP32 only */
    int cuda_graphs;       /* 1: capture the run into a CUDA graph and replay it; 0: plain
                              launches (ignored by "cpu") */
    int profile;           /* 1: time each operator type (onnx_session_profile); the backend
                              synchronises after every kernel. Ignored with cuda_graphs. */
    int no_batch;          /* 1: the model has no batch dimension (Triton's max_batch_size 0):
                              every input keeps the shape the model declares, scalars too */
    /* Sizes of the dimensions the model leaves symbolic besides the batch (e.g. a sequence
     * length): one entry per such input, matched by name, with the input's rank and dims (-1
     * where the model fixes the size or for the batch dimension). NULL: none; an input with
     * such a dimension and no entry is refused. */
    const struct onnx_io_desc *input_shapes;
    size_t n_input_shapes;
};

/* 1 when `backend` can run here (for "cuda": built with CUDA and at least one device),
 * else 0 with the reason in why (field "backend"; why may be NULL). */
int onnx_backend_available(const char *backend, struct gj_error *why);
/* The BLAS the cpu backend computes with: OpenBLAS's build configuration (version, kernel
 * core and threading), for provenance records. */
const char *onnx_cpu_blas_config(void);
/* oneDNN's version, "MAJOR.MINOR.PATCH (commit)", when it runs the float32 convolutions;
 * NULL when not built in or turned off (GJ_ONNX_DNNL=0). */
const char *onnx_dnnl_version(void);
/* cuDNN's version (cudnnGetVersion, e.g. 90100) for the cuda backend; 0 when built without it. */
size_t onnx_cudnn_version(void);

/* Creates a session: shape inference for this batch size, constant folding, a schedule
 * and a buffer plan. NULL with err (e.g. a shape the model cannot take). */
onnx_session *onnx_session_create(const onnx_model *model, const struct onnx_session_options *opt,
                                  struct gj_error *err);
void onnx_session_free(onnx_session *s);

/* Concrete shapes for this session. */
const struct onnx_io_desc *onnx_session_input(const onnx_session *s, size_t i);
const struct onnx_io_desc *onnx_session_output(const onnx_session *s, size_t i);
/* Bytes of one input / output tensor of this session. */
size_t onnx_session_input_bytes(const onnx_session *s, size_t i);
size_t onnx_session_output_bytes(const onnx_session *s, size_t i);

/* Runs the model: inputs[i] and outputs[i] point to host buffers of the sizes above,
 * in the order of the model's inputs and outputs. BOOL inputs must hold 0 or 1, STRING inputs
 * elements with data (or len 0). 0 or -1 with err. */
int onnx_session_run(onnx_session *s, const void *const *inputs, void *const *outputs,
                     struct gj_error *err);

/* A tensor crossing the API by name. Inputs: everything is given, and data is only read.
 * Outputs: the caller gives name, data and bytes (the buffer's capacity); the run fills
 * elem_type, rank, dims and bytes (what it wrote). */
struct onnx_tensor_buf {
    const char *name;
    int elem_type;                  /* enum onnx_elem_type */
    int rank;
    int64_t dims[ONNX_MAX_RANK];
    void *data;
    size_t bytes;
};

/* Runs the model on named tensors: every model input exactly once, in any order, each checked
 * against this session (name, type, rank, dims, bytes = element count x element size, BOOL
 * and STRING values); any subset of the outputs (the others are computed and dropped). A
 * refusal names the tensor, says what was expected and sets err->status 400; nothing is
 * written to the outputs then. 0 or -1 with err. */
int onnx_session_run_named(onnx_session *s, const struct onnx_tensor_buf *inputs, size_t n_inputs,
                           struct onnx_tensor_buf *outputs, size_t n_outputs, struct gj_error *err);

/* The index of the input or output of that name, or -1. */
int onnx_session_find_input(const onnx_session *s, const char *name);
int onnx_session_find_output(const onnx_session *s, const char *name);

struct onnx_session_stats {
    size_t n_nodes_run;       /* nodes executed per run after folding and fusion */
    size_t n_nodes_folded;    /* nodes evaluated once at session creation */
    size_t arena_bytes;       /* activation arena (with buffer reuse) */
    size_t naive_bytes;       /* what one buffer per tensor would need */
    size_t const_bytes;       /* weights and folded constants */
    size_t n_nhwc;            /* activations kept channels-last between kernels (oneDNN's) */
};
void onnx_session_get_stats(const onnx_session *s, struct onnx_session_stats *st);

/* Time per operator type of the runs so far, where the session profiles (options.profile). */
struct onnx_op_profile {
    const char *op;           /* ONNX op_type, e.g. "Conv" (static storage) */
    long calls;
    double seconds;
};
#define ONNX_PROFILE_MAX_OPS 64   /* at least every operator the runtime knows */
/* Fills prof with up to cap operator types that ran, in the runtime's operator order; returns
 * how many. 0 for a session that does not profile. */
size_t onnx_session_profile(const onnx_session *s, struct onnx_op_profile *prof, size_t cap);

/* How the session computes its convolutions, for provenance records: one line per distinct
 * shape, "x NxCxHxW w MxCxKhxKw pads t,l,b,r strides h,w dilations h,w group g: <how>", where
 * <how> is the implementation the library chose ("onednn brgconv:avx512_core", "gpujobd
 * im2col+openblas sgemm", "cudnn IMPLICIT_PRECOMP_GEMM math fma"), sorted; "" without Conv.
 * The text lives as long as the process (equal texts are one pointer). */
const char *onnx_session_convolutions(const onnx_session *s);

/* Device memory this session holds (weights, inputs, arena, scratch, cuBLAS workspace):
 * what the serving layer reserves on the GPU. 0 for the CPU backend. The CUDA context
 * itself (a few hundred MiB per process and device) is not included. */
size_t onnx_session_device_bytes(const onnx_session *s);

/* `gpujobd bench onnx`. */
int gj_bench_onnx_main(int argc, char **argv);

#endif
