/*
 * onnx_cuda.c — the CUDA backend of the ONNX runtime (struct onnx_backend "cuda").
 *
 * One session = one context: a non-blocking stream of its own, a cuDNN and a cuBLAS handle
 * bound to it, an explicit cuBLAS workspace (so a run can be captured into a CUDA graph) and
 * a device error word for data-dependent kernel errors. Conv goes to cuDNN (algorithm found
 * once per convolution shape and precision, cached for the process and logged once, onnx_log.h;
 * bias and ReLU in our own epilogue kernel), Gemm and MatMul to cuBLAS, Concat to 2-D async
 * copies, everything else to the kernels of kernels/infer/ (onnx_cuda_kernels.h). Every CUDA,
 * cuDNN and cuBLAS call is checked; a failure leaves "call: reason" in ctx->msg (the executor
 * adds it to its error).
 *
 * CUDA graphs (cuda_graphs=1): run 1 launches normally (warm-up: lazy module loading and
 * library initialisation happen outside any capture), run 2 is captured and then launched,
 * later runs replay the graph. Inputs and outputs are copied outside the graph, so the
 * caller's buffers may change between runs; the session's device buffers never move.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "infer/onnx/onnx_cuda_kernels.h"
#include "infer/onnx/onnx_ir.h"
#include "infer/onnx/onnx_log.h"

#define BLAS_WORKSPACE ((size_t)32 << 20)     /* cuBLAS's recommendation for Hopper */
#define CONV_WORKSPACE_MAX ((size_t)512 << 20) /* largest cuDNN workspace an algorithm may take */

/* One convolution shape as cuDNN sees it, with its chosen algorithm. */
struct conv_plan {
    int64_t key[20];
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t algo;
    cudnnMathType_t math;      /* as set on cd */
    size_t ws;                 /* cuDNN workspace bytes */
    int pad_input;             /* asymmetric padding: the input is padded into scratch first */
    size_t pad_bytes;
    struct okc_pad pad;
    struct conv_plan *next;
};

struct onnx_backend_ctx {
    int device, precision, graphs;
    cudaStream_t stream;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    cublasComputeType_t compute;
    cudnnMathType_t conv_math;
    void *blas_ws;
    int *dev_err;              /* OKC_ERR_* set by kernels during a run */
    struct conv_plan *plans;
    long runs;
    int capturing;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    char msg[256];
};

/* ---- error reporting ------------------------------------------------------------------------ */

static int cu_ok(struct onnx_backend_ctx *c, cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return 0;
    snprintf(c->msg, sizeof c->msg, "%s: %s (CUDA error %d)", call, cudaGetErrorString(e), (int)e);
    return -1;
}

static int dnn_ok(struct onnx_backend_ctx *c, cudnnStatus_t e, const char *call)
{
    if (e == CUDNN_STATUS_SUCCESS)
        return 0;
    snprintf(c->msg, sizeof c->msg, "%s: %s (cuDNN status %d)", call, cudnnGetErrorString(e), (int)e);
    return -1;
}

static int blas_ok(struct onnx_backend_ctx *c, cublasStatus_t e, const char *call)
{
    if (e == CUBLAS_STATUS_SUCCESS)
        return 0;
    snprintf(c->msg, sizeof c->msg, "%s: %s (cuBLAS status %d)", call, cublasGetStatusString(e), (int)e);
    return -1;
}

/* A kernel launcher's status. */
static int launch_ok(struct onnx_backend_ctx *c, int rc, const char *kernel)
{
    return cu_ok(c, (cudaError_t)rc, kernel);
}

static int fail(struct onnx_backend_ctx *c, const char *what)
{
    snprintf(c->msg, sizeof c->msg, "%s", what);
    return -1;
}

/* ---- availability, context ------------------------------------------------------------------ */

int onnx_cuda_available(struct gj_error *why)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* cudaErrorInsufficientDriver (35) / cudaErrorNoDevice (100): no driver or no GPU */
        gj_error_set(why, "backend", "no usable CUDA device (no GPU, or no NVIDIA driver for it): "
                     "cudaGetDeviceCount: %s (CUDA error %d)", cudaGetErrorString(e), (int)e);
        return 0;
    }
    if (n < 1) {
        gj_error_set(why, "backend", "no CUDA device (cudaGetDeviceCount found 0)");
        return 0;
    }
    return 1;
}

static void plans_free(struct conv_plan *p)
{
    while (p) {
        struct conv_plan *n = p->next;
        if (p->xd)
            cudnnDestroyTensorDescriptor(p->xd);
        if (p->yd)
            cudnnDestroyTensorDescriptor(p->yd);
        if (p->wd)
            cudnnDestroyFilterDescriptor(p->wd);
        if (p->cd)
            cudnnDestroyConvolutionDescriptor(p->cd);
        free(p);
        p = n;
    }
}

/* Teardown: statuses are ignored (nothing can be done about them), every resource is freed. */
static void cuda_fini(struct onnx_backend_ctx *c)
{
    if (!c)
        return;
    cudaSetDevice(c->device);
    if (c->capturing) {
        cudaGraph_t g = NULL;
        cudaStreamEndCapture(c->stream, &g);
        if (g)
            cudaGraphDestroy(g);
    }
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    if (c->exec)
        cudaGraphExecDestroy(c->exec);
    if (c->graph)
        cudaGraphDestroy(c->graph);
    plans_free(c->plans);
    if (c->blas)
        cublasDestroy(c->blas);
    if (c->dnn)
        cudnnDestroy(c->dnn);
    if (c->blas_ws)
        cudaFree(c->blas_ws);
    if (c->dev_err)
        cudaFree(c->dev_err);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    free(c);
}

/* The cuBLAS compute type and cuDNN math type of the context's precision. */
static void set_math(struct onnx_backend_ctx *c)
{
    switch (c->precision) {
    case ONNX_PRECISION_TF32:
        c->compute = CUBLAS_COMPUTE_32F_FAST_TF32;
        c->conv_math = CUDNN_TENSOR_OP_MATH;
        break;
    case ONNX_PRECISION_FP16:
        c->compute = CUBLAS_COMPUTE_32F_FAST_16F;
        c->conv_math = CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
        break;
    default:
        c->compute = CUBLAS_COMPUTE_32F_PEDANTIC;
        c->conv_math = CUDNN_FMA_MATH;
        break;
    }
}

/* The stream, the error word, the cuBLAS workspace and both library handles bound to the
 * stream; -1 with the failed call in c->msg. */
static int create_resources(struct onnx_backend_ctx *c)
{
    if (cu_ok(c, cudaSetDevice(c->device), "cudaSetDevice") ||
        cu_ok(c, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags") ||
        cu_ok(c, cudaMalloc((void **)&c->dev_err, sizeof(int)), "cudaMalloc") ||
        cu_ok(c, cudaMemsetAsync(c->dev_err, 0, sizeof(int), c->stream), "cudaMemsetAsync") ||
        cu_ok(c, cudaMalloc(&c->blas_ws, BLAS_WORKSPACE), "cudaMalloc") ||
        dnn_ok(c, cudnnCreate(&c->dnn), "cudnnCreate") ||
        dnn_ok(c, cudnnSetStream(c->dnn, c->stream), "cudnnSetStream") ||
        blas_ok(c, cublasCreate(&c->blas), "cublasCreate") ||
        blas_ok(c, cublasSetStream(c->blas, c->stream), "cublasSetStream") ||
        blas_ok(c, cublasSetWorkspace(c->blas, c->blas_ws, BLAS_WORKSPACE), "cublasSetWorkspace") ||
        blas_ok(c, cublasSetMathMode(c->blas, c->precision == ONNX_PRECISION_FP32 ? CUBLAS_PEDANTIC_MATH
                                                                                  : CUBLAS_DEFAULT_MATH),
                "cublasSetMathMode") ||
        cu_ok(c, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize"))
        return -1;
    return 0;
}

static int cuda_init(struct onnx_backend_ctx **out, const struct onnx_session_options *opt,
                     struct gj_error *err)
{
    *out = NULL;
    if (!onnx_cuda_available(err))
        return -1;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || opt->device >= n)
        return gj_error_set(err, "device", "CUDA device %d does not exist (%d device%s)", opt->device, n,
                            n == 1 ? "" : "s");
    struct onnx_backend_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return gj_error_set(err, "backend", "out of memory");
    c->device = opt->device;
    c->precision = opt->precision;
    c->graphs = opt->cuda_graphs != 0;
    set_math(c);
    if (create_resources(c)) {
        gj_error_set(err, "device", "device %d: %s", opt->device, c->msg);
        cuda_fini(c);
        return -1;
    }
    *out = c;
    return 0;
}

static void *cuda_alloc(struct onnx_backend_ctx *c, size_t bytes)
{
    void *p = NULL;
    if (cu_ok(c, cudaSetDevice(c->device), "cudaSetDevice") ||
        cu_ok(c, cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc"))
        return NULL;
    return p;
}

static void cuda_free(struct onnx_backend_ctx *c, void *p)
{
    cudaSetDevice(c->device);
    cudaFree(p);
}

/* Host to device on the session's stream; the call returns once the (pageable) source has
 * been staged, so the caller may reuse it. */
static int cuda_upload(struct onnx_backend_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return 0;
    if (cu_ok(c, cudaSetDevice(c->device), "cudaSetDevice") ||
        cu_ok(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream), "cudaMemcpyAsync"))
        return -1;
    return 0;
}

static int cuda_download(struct onnx_backend_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return 0;
    if (cu_ok(c, cudaSetDevice(c->device), "cudaSetDevice") ||
        cu_ok(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream), "cudaMemcpyAsync") ||
        cu_ok(c, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize"))
        return -1;
    return 0;
}

/* Waits for the run and reports what the kernels flagged. */
static int cuda_sync(struct onnx_backend_ctx *c)
{
    int flag = 0;
    if (cu_ok(c, cudaSetDevice(c->device), "cudaSetDevice") ||
        cu_ok(c, cudaMemcpyAsync(&flag, c->dev_err, sizeof flag, cudaMemcpyDeviceToHost, c->stream),
              "cudaMemcpyAsync") ||
        cu_ok(c, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize"))
        return -1;
    switch (flag) {
    case OKC_ERR_NONE: return 0;
    case OKC_ERR_INDEX: return fail(c, "a Gather index is out of range");
    case OKC_ERR_DIV_ZERO: return fail(c, "an integer division by zero");
    case OKC_ERR_CAST: return fail(c, "a Cast of NaN or of a value outside the int64 range");
    default: return fail(c, "a kernel reported an unknown error");
    }
}

static int cuda_begin_run(struct onnx_backend_ctx *c)
{
    c->msg[0] = 0;
    if (cu_ok(c, cudaSetDevice(c->device), "cudaSetDevice") ||
        cu_ok(c, cudaMemsetAsync(c->dev_err, 0, sizeof(int), c->stream), "cudaMemsetAsync"))
        return -1;
    c->runs++;
    if (!c->graphs || c->runs == 1)
        return 0;   /* plain launches (the first run of a graph session warms up) */
    if (c->exec)
        return cu_ok(c, cudaGraphLaunch(c->exec, c->stream), "cudaGraphLaunch") ? -1 : 1;
    /* thread-local: other threads' sessions may allocate while this one captures */
    if (cu_ok(c, cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture"))
        return -1;
    c->capturing = 1;
    return 0;
}

static int cuda_end_run(struct onnx_backend_ctx *c, int failed)
{
    if (!c->capturing)
        return failed ? -1 : 0;
    c->capturing = 0;
    cudaGraph_t g = NULL;
    char keep[sizeof c->msg];
    memcpy(keep, c->msg, sizeof keep);
    cudaError_t e = cudaStreamEndCapture(c->stream, &g);
    if (failed) {   /* the kernel's message matters more than the capture's */
        if (g)
            cudaGraphDestroy(g);
        memcpy(c->msg, keep, sizeof keep);
        return -1;
    }
    if (cu_ok(c, e, "cudaStreamEndCapture")) {
        if (g)
            cudaGraphDestroy(g);
        return -1;
    }
    if (cu_ok(c, cudaGraphInstantiate(&c->exec, g, 0), "cudaGraphInstantiate")) {
        c->exec = NULL;
        cudaGraphDestroy(g);
        return -1;
    }
    c->graph = g;
    return cu_ok(c, cudaGraphLaunch(c->exec, c->stream), "cudaGraphLaunch");
}

static const char *cuda_last_error(struct onnx_backend_ctx *c)
{
    return c->msg;
}

static size_t cuda_device_bytes(struct onnx_backend_ctx *c)
{
    return BLAS_WORKSPACE + sizeof(int);
}

/* ---- helpers ---------------------------------------------------------------------------------- */

#define IN(k) (a->n_in > (k) ? a->in[k] : NULL)
#define OUT0 (a->out[0])
#define F(t) ((float *)(t)->data)
#define CF(t) ((const float *)(t)->data)

static int fits_int(int64_t v)
{
    return v >= 0 && v <= 0x7fffffff;
}

_Static_assert(OKC_MAX_RANK == ONNX_MAX_RANK, "okc_walk and onnx_broadcast_walk share their dims");

/* The numpy broadcast walk of `out` over up to three operands (onnx_broadcast_walk). */
static void walk_setup(struct okc_walk *w, const struct onnx_tensor *out, const struct onnx_tensor *const *ins,
                       int n)
{
    memset(w, 0, sizeof *w);
    w->rank = onnx_broadcast_walk(out, ins, n, w->dims, w->st);
}

/* y = x broadcast to y's shape (Expand, and Gemm's C). */
static int broadcast_copy(struct onnx_backend_ctx *c, const struct onnx_tensor *x, struct onnx_tensor *y)
{
    struct okc_walk w;
    walk_setup(&w, y, &x, 1);
    return launch_ok(c, okc_strided_copy(c->stream, &w, x->data, y->data, y->numel, (int)onnx_elem_size(y->elem)),
                     "okc_strided_copy");
}

static int copy_d2d(struct onnx_backend_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src)
        return 0;
    return cu_ok(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream), "cudaMemcpyAsync");
}

/* ---- Conv (cuDNN) ------------------------------------------------------------------------------ */

static void conv_key(const struct onnx_kargs *a, int64_t *key)
{
    const struct onnx_tensor *x = a->in[0], *w = a->in[1];
    const struct onnx_params *p = a->p;
    int64_t k[20] = { x->dims[0], x->dims[1], x->dims[2], x->dims[3], w->dims[0], w->dims[1], w->dims[2],
                      w->dims[3], p->pads[0], p->pads[1], p->pads[2], p->pads[3], p->strides[0], p->strides[1],
                      p->dilations[0], p->dilations[1], p->group, 0, 0, 0 };
    memcpy(key, k, sizeof k);
}

/* The process-wide cache of algorithm choices: (device, precision, shape) -> algorithm. */
struct algo_choice {
    int device, precision;
    int64_t key[20];
    cudnnConvolutionFwdAlgo_t algo;
    cudnnMathType_t math;
    struct algo_choice *next;
};
static struct algo_choice *algo_cache;
static pthread_mutex_t algo_lock = PTHREAD_MUTEX_INITIALIZER;

/* Is an algorithm's math type allowed at this precision? (FP32: the descriptor is then set to
 * CUDNN_FMA_MATH whatever cuDNN reported, so no tensor-core path can be taken.) */
static int math_allowed(int precision, cudnnMathType_t m)
{
    switch (precision) {
    case ONNX_PRECISION_FP32: return m == CUDNN_FMA_MATH || m == CUDNN_DEFAULT_MATH;
    case ONNX_PRECISION_TF32: return m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    default: return 1;
    }
}

static cudnnMathType_t math_to_set(int precision, cudnnMathType_t reported)
{
    return precision == ONNX_PRECISION_FP32 ? CUDNN_FMA_MATH : reported;
}

/* The cached choice for this device, precision and shape: 1 with *algo and *math, else 0. */
static int cached_algo(const struct onnx_backend_ctx *c, const struct conv_plan *pl, cudnnConvolutionFwdAlgo_t *algo,
                       cudnnMathType_t *math)
{
    int found = 0;
    pthread_mutex_lock(&algo_lock);
    for (struct algo_choice *ch = algo_cache; ch && !found; ch = ch->next)
        if (ch->device == c->device && ch->precision == c->precision && !memcmp(ch->key, pl->key, sizeof pl->key)) {
            *algo = ch->algo;
            *math = ch->math;
            found = 1;
        }
    pthread_mutex_unlock(&algo_lock);
    return found;
}

/* Remembers pl's choice for the process (a failed allocation only costs a later search).
 * 1 if it is new (another session may have searched the same shape at the same time). */
static int cache_algo(const struct onnx_backend_ctx *c, const struct conv_plan *pl, cudnnMathType_t math)
{
    struct algo_choice *ch = calloc(1, sizeof *ch);
    if (!ch)
        return 1;
    ch->device = c->device;
    ch->precision = c->precision;
    memcpy(ch->key, pl->key, sizeof ch->key);
    ch->algo = pl->algo;
    ch->math = math;
    int fresh = 1;
    pthread_mutex_lock(&algo_lock);
    for (struct algo_choice *o = algo_cache; o && fresh; o = o->next)
        fresh = !(o->device == ch->device && o->precision == ch->precision && !memcmp(o->key, ch->key, sizeof ch->key));
    if (fresh) {
        ch->next = algo_cache;
        algo_cache = ch;
    }
    pthread_mutex_unlock(&algo_lock);
    if (!fresh)
        free(ch);
    return fresh;
}

static const char *algo_name(cudnnConvolutionFwdAlgo_t a)
{
    static const char *names[] = { "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT",
                                   "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED" };
    return (unsigned)a < sizeof names / sizeof *names ? names[a] : "?";
}

static const char *math_name(cudnnMathType_t m)
{
    switch (m) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor-op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op-allow-conversion";
    case CUDNN_FMA_MATH: return "fma";
    default: return "?";
    }
}

/* Once per process, device, precision and shape (the first session to search it): which
 * algorithm cuDNN gave, so a slow or inexact convolution can be traced to its choice. */
static void log_algo(const struct onnx_backend_ctx *c, const struct conv_plan *pl, cudnnMathType_t math,
                     const char *how)
{
    static const char *prec[] = { "fp32", "tf32", "fp16" };
    const int64_t *k = pl->key;
    onnx_log(ONNX_LOG_INFO,
             "cuDNN convolution x %ldx%ldx%ldx%ld w %ldx%ldx%ldx%ld pads %ld,%ld,%ld,%ld strides %ld,%ld "
             "dilations %ld,%ld group %ld, %s on device %d: algorithm %s (%d), math %s, workspace %zu bytes (%s)",
             (long)k[0], (long)k[1], (long)k[2], (long)k[3], (long)k[4], (long)k[5], (long)k[6], (long)k[7],
             (long)k[8], (long)k[9], (long)k[10], (long)k[11], (long)k[12], (long)k[13], (long)k[14], (long)k[15],
             (long)k[16], (unsigned)c->precision < 3 ? prec[c->precision] : "?", c->device, algo_name(pl->algo),
             (int)pl->algo, math_name(math_to_set(c->precision, math)), pl->ws, how);
}

/* The first of n candidates (fastest first) that succeeded, fits CONV_WORKSPACE_MAX and keeps
 * to the precision, or -1. */
static int pick_algo(const struct onnx_backend_ctx *c, const cudnnConvolutionFwdAlgoPerf_t *perf, int n)
{
    for (int i = 0; i < n; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= CONV_WORKSPACE_MAX &&
            math_allowed(c->precision, perf[i].mathType))
            return i;
    return -1;
}

/* cudnnFindConvolutionForwardAlgorithm (measured); the cuDNN heuristics
 * (cudnnGetConvolutionForwardAlgorithm_v7) where Find fails or offers nothing usable. */
static int search_algo(struct onnx_backend_ctx *c, struct conv_plan *pl, cudnnMathType_t *math, const char **how)
{
    *how = "measured by cudnnFindConvolutionForwardAlgorithm";
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    cudnnStatus_t st = cudnnFindConvolutionForwardAlgorithm(c->dnn, pl->xd, pl->wd, pl->cd, pl->yd,
                                                            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf);
    if (st != CUDNN_STATUS_SUCCESS)
        got = 0;
    int pick = pick_algo(c, perf, got);
    if (pick < 0) {
        *how = "cuDNN's heuristics: Find offered nothing usable";
        st = cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, pl->xd, pl->wd, pl->cd, pl->yd,
                                                    CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf);
        if (dnn_ok(c, st, "cudnnGetConvolutionForwardAlgorithm_v7"))
            return -1;
        pick = pick_algo(c, perf, got);
    }
    if (pick < 0)
        return fail(c, "cuDNN offers no convolution algorithm for this shape at this precision");
    /* the sticky CUDA error a failed trial may leave must not fail the next launch */
    (void)cudaGetLastError();
    pl->algo = perf[pick].algo;
    *math = perf[pick].mathType;
    return 0;
}

/* Chooses the algorithm (cached for the process per device, precision and shape, else
 * searched), sets its math type, then its workspace size. */
static int choose_algo(struct onnx_backend_ctx *c, struct conv_plan *pl)
{
    cudnnMathType_t math;
    const char *how = "";
    int cached = cached_algo(c, pl, &pl->algo, &math);
    if (!cached && search_algo(c, pl, &math, &how))
        return -1;
    pl->math = math_to_set(c->precision, math);
    if (dnn_ok(c, cudnnSetConvolutionMathType(pl->cd, pl->math), "cudnnSetConvolutionMathType") ||
        dnn_ok(c, cudnnGetConvolutionForwardWorkspaceSize(c->dnn, pl->xd, pl->wd, pl->cd, pl->yd, pl->algo, &pl->ws),
               "cudnnGetConvolutionForwardWorkspaceSize"))
        return -1;
    if (!cached && cache_algo(c, pl, math))
        log_algo(c, pl, math, how);
    return 0;
}

static struct conv_plan *find_plan(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    int64_t key[20];
    conv_key(a, key);
    for (struct conv_plan *p = c->plans; p; p = p->next)
        if (!memcmp(p->key, key, sizeof key))
            return p;
    return NULL;
}

/* cuDNN pads symmetrically: asymmetric padding is applied by our pad kernel first, into
 * scratch. The input height and width cuDNN sees into hw[2], its padding into pad[2]. */
static int plan_padding(struct onnx_backend_ctx *c, struct conv_plan *pl, const struct onnx_tensor *x,
                        const struct onnx_params *p, int64_t *hw, int64_t *pad)
{
    int64_t pt = p->pads[0], pleft = p->pads[1], pb = p->pads[2], pr = p->pads[3];
    hw[0] = x->dims[2];
    hw[1] = x->dims[3];
    pad[0] = pt;
    pad[1] = pleft;
    if (pt == pb && pleft == pr)
        return 0;
    pl->pad_input = 1;
    pl->pad.rank = 4;
    for (int i = 0; i < 4; i++)
        pl->pad.xdims[i] = pl->pad.ydims[i] = x->dims[i];
    pl->pad.ydims[2] = hw[0] + pt + pb;
    pl->pad.ydims[3] = hw[1] + pleft + pr;
    pl->pad.begin[2] = pt;
    pl->pad.begin[3] = pleft;
    hw[0] = pl->pad.ydims[2];
    hw[1] = pl->pad.ydims[3];
    pl->pad_bytes = (size_t)(x->dims[0] * x->dims[1] * hw[0] * hw[1]) * sizeof(float);
    pl->pad_bytes = (pl->pad_bytes + 255) / 256 * 256;
    pad[0] = pad[1] = 0;
    if (!fits_int(hw[0]) || !fits_int(hw[1]))
        return fail(c, "a convolution dimension is over 2^31");
    return 0;
}

/* The tensor, filter and convolution descriptors of the plan; cuDNN's output shape must be
 * the model's. */
static int set_descriptors(struct onnx_backend_ctx *c, struct conv_plan *pl, const struct onnx_kargs *a,
                           const int64_t *hw, const int64_t *pad)
{
    const struct onnx_tensor *x = a->in[0], *w = a->in[1], *y = a->out[0];
    const struct onnx_params *p = a->p;
    int n, ch, oh, ow;
    if (dnn_ok(c, cudnnCreateTensorDescriptor(&pl->xd), "cudnnCreateTensorDescriptor") ||
        dnn_ok(c, cudnnCreateTensorDescriptor(&pl->yd), "cudnnCreateTensorDescriptor") ||
        dnn_ok(c, cudnnCreateFilterDescriptor(&pl->wd), "cudnnCreateFilterDescriptor") ||
        dnn_ok(c, cudnnCreateConvolutionDescriptor(&pl->cd), "cudnnCreateConvolutionDescriptor") ||
        dnn_ok(c, cudnnSetTensor4dDescriptor(pl->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)x->dims[0],
                                             (int)x->dims[1], (int)hw[0], (int)hw[1]), "cudnnSetTensor4dDescriptor") ||
        dnn_ok(c, cudnnSetTensor4dDescriptor(pl->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)y->dims[0],
                                             (int)y->dims[1], (int)y->dims[2], (int)y->dims[3]),
               "cudnnSetTensor4dDescriptor") ||
        dnn_ok(c, cudnnSetFilter4dDescriptor(pl->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, (int)w->dims[0],
                                             (int)w->dims[1], (int)w->dims[2], (int)w->dims[3]),
               "cudnnSetFilter4dDescriptor") ||
        dnn_ok(c, cudnnSetConvolution2dDescriptor(pl->cd, (int)pad[0], (int)pad[1], (int)p->strides[0],
                                                  (int)p->strides[1], (int)p->dilations[0], (int)p->dilations[1],
                                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
               "cudnnSetConvolution2dDescriptor") ||
        dnn_ok(c, cudnnSetConvolutionGroupCount(pl->cd, (int)p->group), "cudnnSetConvolutionGroupCount") ||
        dnn_ok(c, cudnnSetConvolutionMathType(pl->cd, c->conv_math), "cudnnSetConvolutionMathType") ||
        dnn_ok(c, cudnnGetConvolution2dForwardOutputDim(pl->cd, pl->xd, pl->wd, &n, &ch, &oh, &ow),
               "cudnnGetConvolution2dForwardOutputDim"))
        return -1;
    if (n != y->dims[0] || ch != y->dims[1] || oh != y->dims[2] || ow != y->dims[3]) {
        snprintf(c->msg, sizeof c->msg, "cuDNN computes a %dx%dx%dx%d output where the model has %lldx%lldx%lldx%lld",
                 n, ch, oh, ow, (long long)y->dims[0], (long long)y->dims[1], (long long)y->dims[2],
                 (long long)y->dims[3]);
        return -1;
    }
    return 0;
}

/* Descriptors and algorithm of one convolution shape (once per session and shape). */
static struct conv_plan *conv_prepare(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    struct conv_plan *pl = find_plan(c, a);
    if (pl)
        return pl;
    const struct onnx_tensor *x = a->in[0], *w = a->in[1], *y = a->out[0];
    for (int i = 0; i < 4; i++)
        if (!fits_int(x->dims[i]) || !fits_int(w->dims[i]) || !fits_int(y->dims[i]) || !fits_int(a->p->pads[i])) {
            fail(c, "a convolution dimension is over 2^31");
            return NULL;
        }
    pl = calloc(1, sizeof *pl);
    if (!pl) {
        fail(c, "out of memory");
        return NULL;
    }
    conv_key(a, pl->key);
    pl->next = c->plans;
    c->plans = pl;   /* owned by the context from here: freed with it on every path */
    int64_t hw[2], pad[2];
    if (plan_padding(c, pl, x, a->p, hw, pad) || set_descriptors(c, pl, a, hw, pad) || choose_algo(c, pl))
        return NULL;
    return pl;
}

static int k_conv(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0], *w = a->in[1], *b = IN(2);
    struct onnx_tensor *y = OUT0;
    struct conv_plan *pl = find_plan(c, a);
    if (!pl)
        return fail(c, "no cuDNN plan for this convolution (not prepared at session creation)");
    const void *src = x->data;
    char *ws = a->scratch;
    if (pl->pad_input) {
        if (launch_ok(c, okc_pad(c->stream, &pl->pad, x->data, ws, x->numel ? y->dims[0] * x->dims[1] *
                                 pl->pad.ydims[2] * pl->pad.ydims[3] : 0, 4, 0.0f, 0), "okc_pad"))
            return -1;
        src = ws;
        ws += pl->pad_bytes;
    }
    const float one = 1.0f, zero = 0.0f;
    if (y->numel == 0)
        return 0;
    if (dnn_ok(c, cudnnConvolutionForward(c->dnn, &one, pl->xd, src, pl->wd, w->data, pl->cd, pl->algo,
                                          pl->ws ? ws : NULL, pl->ws, &zero, pl->yd, y->data),
               "cudnnConvolutionForward"))
        return -1;
    return launch_ok(c, okc_bias_act(c->stream, F(y), b ? CF(b) : NULL, y->dims[0] * y->dims[1], y->dims[1],
                                     y->dims[2] * y->dims[3], a->p->fused_relu), "okc_bias_act");
}

/* Also where the backend refuses the element types its kernels do not compute. */
static size_t cuda_scratch(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    if (!onnx_cuda_types_ok(a, c->msg, sizeof c->msg))
        return (size_t)-1;
    if (a->node->op != ONNX_OP_CONV)
        return 0;
    struct conv_plan *pl = conv_prepare(c, a);
    if (!pl)
        return (size_t)-1;
    return pl->pad_bytes + pl->ws;
}

/* ---- Gemm / MatMul (cuBLAS, row-major as the transposed column-major product) ------------------ */

/* Y[M,N] (row-major, ld ldy) = alpha op(A) op(B) + beta Y, batched with element strides. */
static int gemm(struct onnx_backend_ctx *c, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                const float *A, int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float beta,
                float *Y, int64_t ldy, int64_t sy, int64_t batch)
{
    if (!fits_int(M) || !fits_int(N) || !fits_int(K) || !fits_int(lda) || !fits_int(ldb) || !fits_int(ldy) ||
        !fits_int(batch))
        return fail(c, "a matrix dimension is over 2^31");
    if (M == 0 || N == 0 || batch == 0)
        return 0;
    /* cuBLAS wants leading dimensions >= 1 even where K = 0 makes them 0 */
    lda = lda > 0 ? lda : 1;
    ldb = ldb > 0 ? ldb : 1;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (batch == 1)
        return blas_ok(c, cublasGemmEx(c->blas, opb, opa, (int)N, (int)M, (int)K, &alpha, B, CUDA_R_32F, (int)ldb, A,
                                       CUDA_R_32F, (int)lda, &beta, Y, CUDA_R_32F, (int)ldy, c->compute,
                                       CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx");
    return blas_ok(c, cublasGemmStridedBatchedEx(c->blas, opb, opa, (int)N, (int)M, (int)K, &alpha, B, CUDA_R_32F,
                                                 (int)ldb, sb, A, CUDA_R_32F, (int)lda, sa, &beta, Y, CUDA_R_32F,
                                                 (int)ldy, sy, (int)batch, c->compute, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx");
}

static int k_gemm(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *A = a->in[0], *B = a->in[1], *C = IN(2);
    struct onnx_tensor *Y = OUT0;
    const struct onnx_params *p = a->p;
    int64_t M = Y->dims[0], N = Y->dims[1], K = p->trans_a ? A->dims[0] : A->dims[1];
    float beta = 0.0f;
    if (C && p->beta != 0.0f) {   /* Y = broadcast C, then the product accumulates onto it */
        if (broadcast_copy(c, C, Y))
            return -1;
        beta = p->beta;
    }
    if (K == 0 && beta == 0.0f && Y->numel) {
        if (cu_ok(c, cudaMemsetAsync(Y->data, 0, onnx_tensor_bytes(Y), c->stream), "cudaMemsetAsync"))
            return -1;
    } else if (gemm(c, p->trans_a, p->trans_b, M, N, K, p->alpha, CF(A), A->dims[1], 0, CF(B), B->dims[1], 0, beta,
                    F(Y), N, 0, 1)) {
        return -1;
    }
    if (p->fused_relu)
        return launch_ok(c, okc_unary_f32(c->stream, OKC_RELU, F(Y), F(Y), Y->numel), "okc_unary_f32");
    return 0;
}

static int k_matmul(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *A = a->in[0], *B = a->in[1];
    struct onnx_tensor *Y = OUT0;
    int64_t M = A->dims[A->rank - 2], K = A->dims[A->rank - 1], N = B->dims[B->rank - 1];
    if (Y->numel == 0)
        return 0;
    if (K == 0)
        return cu_ok(c, cudaMemsetAsync(Y->data, 0, onnx_tensor_bytes(Y), c->stream), "cudaMemsetAsync");
    int64_t bA = A->numel / (M * K), bB = B->numel / (K * N), batch = Y->numel / (M * N);
    if (bB == 1)   /* one B: A's batch folds into M */
        return gemm(c, 0, 0, bA * M, N, K, 1.0f, CF(A), K, 0, CF(B), N, 0, 0.0f, F(Y), N, 0, 1);
    /* strided batches when each operand is either one matrix or has Y's whole batch */
    if ((bA == 1 || bA == batch) && bB == batch)
        return gemm(c, 0, 0, M, N, K, 1.0f, CF(A), K, bA == 1 ? 0 : M * K, CF(B), N, K * N, 0.0f, F(Y), N, M * N,
                    batch);
    /* general broadcasting of the batch dims: one GEMM per batch entry */
    struct onnx_matmul_batch mb;
    onnx_matmul_batch_init(&mb, A, B, Y);
    for (int64_t bi = 0; bi < batch; bi++) {
        int64_t oa, ob;
        onnx_matmul_batch_offsets(&mb, bi, &oa, &ob);
        if (gemm(c, 0, 0, M, N, K, 1.0f, CF(A) + oa, K, 0, CF(B) + ob, N, 0, 0.0f, F(Y) + bi * M * N, N, 0, 1))
            return -1;
    }
    return 0;
}

/* ---- element-wise --------------------------------------------------------------------------- */

static int k_unary(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    struct onnx_tensor *y = OUT0;
    int op;
    switch (a->node->op) {
    case ONNX_OP_RELU: op = OKC_RELU; break;
    case ONNX_OP_SIGMOID: op = OKC_SIGMOID; break;
    case ONNX_OP_SQRT: op = OKC_SQRT; break;
    case ONNX_OP_ERF: op = OKC_ERF; break;
    case ONNX_OP_TANH: op = OKC_TANH; break;
    case ONNX_OP_GELU: op = a->p->gelu_tanh ? OKC_GELU_TANH : OKC_GELU; break;
    default:
        if (x->elem == ONNX_ELEM_INT64)
            return launch_ok(c, okc_neg_i64(c->stream, x->data, y->data, x->numel), "okc_neg_i64");
        op = OKC_NEG;
        break;
    }
    return launch_ok(c, okc_unary_f32(c->stream, op, CF(x), F(y), x->numel), "okc_unary_f32");
}

static int k_binary(struct onnx_backend_ctx *c, const struct onnx_kargs *a, int op)
{
    struct onnx_tensor *y = OUT0;
    struct okc_walk w;
    walk_setup(&w, y, a->in, 2);
    return launch_ok(c, okc_binary(c->stream, op, a->in[0]->elem, a->in[1]->elem, &w, a->in[0]->data,
                                   a->in[1]->data, y->data, y->numel, a->p->fused_relu, c->dev_err),
                     "okc_binary");
}

static int k_add(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_binary(c, a, OKC_ADD); }
static int k_sub(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_binary(c, a, OKC_SUB); }
static int k_mul(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_binary(c, a, OKC_MUL); }
static int k_div(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_binary(c, a, OKC_DIV); }
static int k_pow(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_binary(c, a, OKC_POW); }
static int k_equal(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_binary(c, a, OKC_EQ); }

static int k_where(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    struct onnx_tensor *y = OUT0;
    struct okc_walk w;
    walk_setup(&w, y, a->in, 3);
    return launch_ok(c, okc_where(c->stream, &w, a->in[0]->data, a->in[1]->data, a->in[2]->data, y->data, y->numel,
                                  (int)onnx_elem_size(y->elem)),
                     "okc_where");
}

static int k_expand(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    return broadcast_copy(c, a->in[0], OUT0);
}

static int k_cast(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    struct onnx_tensor *y = OUT0;
    if (x->elem == y->elem)
        return copy_d2d(c, y->data, x->data, onnx_tensor_bytes(x));
    return launch_ok(c, okc_cast(c->stream, x->elem, y->elem, x->data, y->data, x->numel, c->dev_err), "okc_cast");
}

/* ---- pooling, normalisation ------------------------------------------------------------------- */

static int k_pool(struct onnx_backend_ctx *c, const struct onnx_kargs *a, int max)
{
    const struct onnx_tensor *x = a->in[0];
    struct onnx_tensor *y = OUT0;
    const struct onnx_params *p = a->p;
    struct okc_pool pp = { x->dims[0] * x->dims[1], x->dims[2], x->dims[3], y->dims[2], y->dims[3],
                           p->kernel[0], p->kernel[1], p->strides[0], p->strides[1], p->dilations[0],
                           p->dilations[1], p->pads[0], p->pads[1], p->pads[2], p->pads[3], max,
                           p->count_include_pad };
    return launch_ok(c, okc_pool2d(c->stream, &pp, CF(x), F(y)), "okc_pool2d");
}

static int k_maxpool(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_pool(c, a, 1); }
static int k_avgpool(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_pool(c, a, 0); }

static int k_gap(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    int64_t rows = x->dims[0] * x->dims[1];
    return launch_ok(c, okc_global_avgpool(c->stream, CF(x), F(OUT0), rows, rows ? x->numel / rows : 0),
                     "okc_global_avgpool");
}

static int k_batchnorm(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    int64_t C = x->dims[1], nc = x->dims[0] * C, plane = nc > 0 ? x->numel / nc : 0;
    return launch_ok(c, okc_batchnorm(c->stream, CF(x), F(OUT0), CF(a->in[1]), CF(a->in[2]), CF(a->in[3]),
                                      CF(a->in[4]), x->numel, C, plane, a->p->epsilon, a->p->fused_relu),
                     "okc_batchnorm");
}

static int k_softmax(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    int64_t n, inner;
    onnx_softmax_extent(x, a->p, &n, &inner);
    if (x->numel == 0)
        return 0;
    return launch_ok(c, okc_softmax(c->stream, CF(x), F(OUT0), x->numel / (n * inner), n, inner), "okc_softmax");
}

static int k_layernorm(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    int64_t n = onnx_dims_product(x, (int)a->p->axis, x->rank);
    if (x->numel == 0 || n == 0)
        return 0;
    return launch_ok(c, okc_layernorm(c->stream, CF(x), F(OUT0), CF(a->in[1]), IN(2) ? CF(IN(2)) : NULL,
                                      x->numel / n, n, a->p->epsilon),
                     "okc_layernorm");
}

static int k_reducemean(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    struct onnx_tensor *y = OUT0;
    if (!a->p->has_axes)   /* noop_with_empty_axes */
        return copy_d2d(c, y->data, x->data, onnx_tensor_bytes(x));
    unsigned mask = (unsigned)a->p->n_axes;
    int64_t st[ONNX_MAX_RANK];
    onnx_row_strides(x, st);
    struct okc_reduce r;
    memset(&r, 0, sizeof r);
    r.count = 1;
    for (int i = 0; i < x->rank; i++) {
        if (mask & (1u << i)) {
            r.rdims[r.rr] = x->dims[i];
            r.rst[r.rr++] = st[i];
            r.count *= x->dims[i];
        } else {
            r.kdims[r.kr] = x->dims[i];
            r.kst[r.kr++] = st[i];
        }
    }
    return launch_ok(c, okc_reduce_mean(c->stream, &r, CF(x), F(y), y->numel), "okc_reduce_mean");
}

/* ---- data movement ------------------------------------------------------------------------------ */

/* Transpose, Slice */
static int k_view_copy(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    struct onnx_tensor *y = OUT0;
    struct okc_walk w;
    memset(&w, 0, sizeof w);
    w.rank = y->rank > 0 ? y->rank : 1;
    w.dims[0] = 1;
    w.base[0] = onnx_view_strides(a, w.st[0]);
    for (int i = 0; i < y->rank; i++)
        w.dims[i] = y->dims[i];
    return launch_ok(c, okc_strided_copy(c->stream, &w, x->data, y->data, y->numel, (int)onnx_elem_size(x->elem)),
                     "okc_strided_copy");
}

static int k_gather(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0], *idx = a->in[1];
    int ax = (int)a->p->axis;
    int64_t outer = onnx_dims_product(x, 0, ax), inner = onnx_dims_product(x, ax + 1, x->rank);
    return launch_ok(c, okc_gather(c->stream, x->data, idx->data, OUT0->data, outer, x->dims[ax], idx->numel, inner,
                                   (int)onnx_elem_size(x->elem), c->dev_err),
                     "okc_gather");
}

static int k_pad(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    struct onnx_tensor *y = OUT0;
    struct okc_pad p;
    memset(&p, 0, sizeof p);
    p.rank = x->rank;
    for (int i = 0; i < x->rank; i++) {
        p.xdims[i] = x->dims[i];
        p.ydims[i] = y->dims[i];
        p.begin[i] = a->p->pad_begin[i];
    }
    return launch_ok(c, okc_pad(c->stream, &p, x->data, y->data, y->numel, (int)onnx_elem_size(x->elem),
                                (float)a->p->pad_value, (int64_t)a->p->pad_value),
                     "okc_pad");
}

/* Concat: one 2-D copy per input (its rows of `inner` elements into the output's wider rows). */
static int k_concat(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    struct onnx_tensor *y = OUT0;
    size_t es = onnx_elem_size(y->elem);
    int ax = (int)a->p->axis;
    int64_t outer = onnx_dims_product(y, 0, ax), yinner = onnx_dims_product(y, ax, y->rank);
    if (y->numel == 0)
        return 0;
    size_t off = 0, pitch = (size_t)yinner * es;
    for (int k = 0; k < a->n_in; k++) {
        const struct onnx_tensor *t = a->in[k];
        size_t width = (size_t)onnx_dims_product(t, ax, t->rank) * es;
        if (width && outer) {
            if (outer == 1) {
                if (copy_d2d(c, (char *)y->data + off, t->data, width))
                    return -1;
            } else if (cu_ok(c, cudaMemcpy2DAsync((char *)y->data + off, pitch, t->data, width, width, (size_t)outer,
                                                  cudaMemcpyDeviceToDevice, c->stream),
                             "cudaMemcpy2DAsync")) {
                return -1;
            }
        }
        off += width;
    }
    return 0;
}

/* The algorithm and math type cuDNN was given for a's shape (provenance: they change bits). */
static void cuda_conv_impl(struct onnx_backend_ctx *c, const struct onnx_kargs *a, char *buf, size_t len)
{
    const struct conv_plan *pl = find_plan(c, a);
    if (pl)
        snprintf(buf, len, "cudnn %s math %s", algo_name(pl->algo), math_name(pl->math));
    else
        snprintf(buf, len, "unknown (no cuDNN plan)");
}

const struct onnx_backend onnx_backend_cuda = {
    .name = "cuda",
    .init = cuda_init,
    .fini = cuda_fini,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .sync = cuda_sync,
    .scratch_bytes = cuda_scratch,
    .begin_run = cuda_begin_run,
    .end_run = cuda_end_run,
    .last_error = cuda_last_error,
    .device_bytes = cuda_device_bytes,
    .conv_impl = cuda_conv_impl,
    .host_memory = 0,
    .kernels = {
        [ONNX_OP_CONV] = k_conv,
        [ONNX_OP_BATCHNORM] = k_batchnorm,
        [ONNX_OP_RELU] = k_unary,
        [ONNX_OP_MAXPOOL] = k_maxpool,
        [ONNX_OP_AVGPOOL] = k_avgpool,
        [ONNX_OP_GLOBALAVGPOOL] = k_gap,
        [ONNX_OP_CONCAT] = k_concat,
        [ONNX_OP_GEMM] = k_gemm,
        [ONNX_OP_MATMUL] = k_matmul,
        [ONNX_OP_ADD] = k_add,
        [ONNX_OP_SUB] = k_sub,
        [ONNX_OP_MUL] = k_mul,
        [ONNX_OP_DIV] = k_div,
        [ONNX_OP_POW] = k_pow,
        [ONNX_OP_SQRT] = k_unary,
        [ONNX_OP_ERF] = k_unary,
        [ONNX_OP_GELU] = k_unary,
        [ONNX_OP_SIGMOID] = k_unary,
        [ONNX_OP_TANH] = k_unary,
        [ONNX_OP_NEG] = k_unary,
        [ONNX_OP_SOFTMAX] = k_softmax,
        [ONNX_OP_LAYERNORM] = k_layernorm,
        [ONNX_OP_REDUCEMEAN] = k_reducemean,
        [ONNX_OP_TRANSPOSE] = k_view_copy,
        [ONNX_OP_GATHER] = k_gather,
        [ONNX_OP_SLICE] = k_view_copy,
        [ONNX_OP_CAST] = k_cast,
        [ONNX_OP_EXPAND] = k_expand,
        [ONNX_OP_WHERE] = k_where,
        [ONNX_OP_EQUAL] = k_equal,
        [ONNX_OP_PAD] = k_pad,
        /* Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout: views, no kernel call.
         * Shape, Constant, ConstantOfShape, Range: always folded at session creation. */
    },
};
