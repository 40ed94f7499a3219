/*
 * onnx_cpu.c — the CPU backend: host memory, a thread pool for element-wise, pooling and
 * data-movement kernels, OpenBLAS (cblas_sgemm) for Conv (im2col + GEMM; 1x1 convolutions
 * go straight to GEMM), Gemm and MatMul. OpenBLAS gets the same thread count as the pool;
 * OpenBLAS runs single-threaded (process-wide setting) and GEMMs are split across the
 * pool's threads by blocks of rows or columns, so exactly `threads` threads compute.
 *
 * Every kernel also serves constant folding (onnx_cpu_host_ctx(): one thread), so the
 * integer paths (shape arithmetic) are implemented too.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <xmmintrin.h>
#endif

#include "infer/onnx/onnx_cpu.h"

static struct onnx_backend_ctx host_ctx = { NULL, 1, NULL };

const char *onnx_cpu_blas_config(void)
{
    return openblas_get_config();
}

struct onnx_backend_ctx *onnx_cpu_host_ctx(void)
{
    return &host_ctx;
}

static int cpu_init(struct onnx_backend_ctx **out, const struct onnx_session_options *opt,
                    struct gj_error *err)
{
    int threads = opt->threads;
    struct onnx_backend_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return gj_error_set(err, "backend", "out of memory");
    c->threads = threads;
    c->pool = onnx_pool_create(threads);
    if (!c->pool) {
        free(c);
        return gj_error_set(err, "threads", "cannot start a pool of %d threads", threads);
    }
    /* GEMMs are split across the pool's threads, each calling a single-threaded
     * OpenBLAS: only our threads run, and OpenBLAS's own workers never spin against them. */
    openblas_set_num_threads(1);
    c->dnnl = onnx_dnnl_create(threads);
    *out = c;
    return 0;
}

static void cpu_fini(struct onnx_backend_ctx *c)
{
    if (c && c != &host_ctx) {
        onnx_dnnl_free(c->dnnl);
        onnx_pool_free(c->pool);
        free(c);
    }
}

static void *cpu_alloc(struct onnx_backend_ctx *c, size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? (bytes + 63) / 64 * 64 : 64))
        return NULL;
    return p;
}

static void cpu_free(struct onnx_backend_ctx *c, void *p)
{
    free(p);
}

static int cpu_copy(struct onnx_backend_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src)
        memcpy(dst, src, bytes);
    return 0;
}

/* C[M,N] = alpha op(A) op(B) + beta C (row-major), split over the pool: by rows of C when
 * M is large enough, else by columns. */
struct gemm_job {
    int ta, tb;
    int64_t M, N, K, lda, ldb, ldc, blocks;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int by_rows;
    const float *row_bias;   /* per-row bias added after the product (Conv), or NULL */
    int relu;
};

static void gemm_task(void *vctx, int64_t b, int64_t e)
{
    const struct gemm_job *j = vctx;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t total = j->by_rows ? j->M : j->N;
        int64_t step = (total + j->blocks - 1) / j->blocks;
        if (j->by_rows)
            step = (step + 3) / 4 * 4;
        else
            step = (step + 15) / 16 * 16;
        int64_t lo = blk * step, hi = lo + step < total ? lo + step : total;
        if (lo >= hi)
            continue;
        int64_t m0 = 0, m1 = j->M, n0 = 0, n1 = j->N;
        if (j->by_rows) { m0 = lo; m1 = hi; } else { n0 = lo; n1 = hi; }
        const float *A = j->A + (j->ta ? m0 : m0 * j->lda);
        const float *B = j->B + (j->tb ? n0 * j->ldb : n0);
        float *C = j->C + m0 * j->ldc + n0;
        cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans,
                    (int)(m1 - m0), (int)(n1 - n0), (int)j->K, j->alpha, A, (int)j->lda, B, (int)j->ldb,
                    j->beta, C, (int)j->ldc);
        if (j->row_bias || j->relu) {
            for (int64_t m = m0; m < m1; m++) {
                float *y = j->C + m * j->ldc + n0;
                float bv = j->row_bias ? j->row_bias[m] : 0.0f;
                if (j->relu)
                    for (int64_t i = 0; i < n1 - n0; i++) {
                        float v = y[i] + bv;
                        y[i] = v > 0 ? v : 0;
                    }
                else
                    for (int64_t i = 0; i < n1 - n0; i++)
                        y[i] += bv;
            }
        }
    }
}

static void par_gemm(struct onnx_backend_ctx *c, struct gemm_job *j)
{
    int T = onnx_pool_threads(c->pool);
    double flops = 2.0 * (double)j->M * (double)j->N * (double)j->K;
    j->by_rows = j->M >= 4 * T && (j->M >= j->N / 4 || j->N < 64 * T);
    int64_t total = j->by_rows ? j->M : j->N;
    j->blocks = flops < 2e5 ? 1 : T;
    if (j->blocks > total)
        j->blocks = total > 0 ? total : 1;
    if (j->blocks == 1)
        gemm_task(j, 0, 1);
    else
        par(c, j->blocks, 1, gemm_task, j);
}

#define IN(k) (a->n_in > (k) ? a->in[k] : NULL)
#define OUTT(k) (a->out[k])
#define F(t) ((float *)(t)->data)
#define CF(t) ((const float *)(t)->data)
#define I64(t) ((int64_t *)(t)->data)
#define CI64(t) ((const int64_t *)(t)->data)

static void relu_inplace(float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = y[i] > 0 ? y[i] : 0;
}

/* ---- Conv ---------------------------------------------------------------------------------- */

struct conv_job {
    const float *src;
    float *col;
    int64_t H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw;
};

/* Row r = (channel, ki, kj) of the im2col matrix of j->src, written to d. */
static void im2col_row(const struct conv_job *j, int64_t r, float *d)
{
    int64_t kk = j->kh * j->kw;
    {
        int64_t c = r / kk, ki = (r % kk) / j->kw, kj = r % j->kw;
        const float *s = j->src + c * j->H * j->W;
        for (int64_t oh = 0; oh < j->OH; oh++) {
            int64_t ih = oh * j->sh - j->ph + ki * j->dh;
            float *drow = d + oh * j->OW;
            if (ih < 0 || ih >= j->H) {
                memset(drow, 0, (size_t)j->OW * sizeof(float));
                continue;
            }
            const float *srow = s + ih * j->W;
            int64_t iw0 = -j->pw + kj * j->dw;
            if (j->sw == 1) {
                int64_t lo = iw0 < 0 ? -iw0 : 0;
                int64_t hi = j->W - iw0;
                if (hi > j->OW) hi = j->OW;
                if (hi < lo) hi = lo;
                if (lo > j->OW) lo = hi = j->OW;
                for (int64_t ow = 0; ow < lo; ow++) drow[ow] = 0;
                memcpy(drow + lo, srow + iw0 + lo, (size_t)(hi - lo) * sizeof(float));
                for (int64_t ow = hi; ow < j->OW; ow++) drow[ow] = 0;
            } else {
                for (int64_t ow = 0; ow < j->OW; ow++) {
                    int64_t iw = iw0 + ow * j->sw;
                    drow[ow] = iw >= 0 && iw < j->W ? srow[iw] : 0.0f;
                }
            }
        }
    }
}

static void im2col_task(void *vctx, int64_t b, int64_t e)
{
    const struct conv_job *j = vctx;
    for (int64_t r = b; r < e; r++)
        im2col_row(j, r, j->col + r * j->OH * j->OW);
}

static int conv_is_1x1(const struct onnx_params *p)
{
    return p->kernel[0] == 1 && p->kernel[1] == 1 && p->strides[0] == 1 && p->strides[1] == 1 &&
           p->pads[0] == 0 && p->pads[1] == 0 && p->pads[2] == 0 && p->pads[3] == 0;
}

/* Each image: im2col (rows split across the pool; 1x1 stride-1 convolutions need none),
 * then one GEMM (M x OH*OW x C*kh*kw) split across the pool by rows or columns, with the
 * bias and a fused ReLU applied by each thread to its block. (Grouping several images into
 * one wider GEMM, and one image per thread with single-threaded GEMMs, were both tried:
 * neither used less CPU time per image for ResNet-18 at 224x224.) */
static size_t conv_scratch(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *w = a->in[1], *y = a->out[0];
    if (conv_is_1x1(a->p))
        return 0;
    return (size_t)(w->dims[1] * w->dims[2] * w->dims[3]) * (size_t)(y->dims[2] * y->dims[3]) * sizeof(float);
}

/* What our own kernels read and write (not an NHWC activation or a strided Concat slice). */
static int dense_nchw(const struct onnx_tensor *t)
{
    return t->layout == ONNX_LAYOUT_NCHW && !t->nstride;
}

static int k_conv(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0], *w = a->in[1], *bt = IN(2);
    struct onnx_tensor *y = OUTT(0);
    const struct onnx_params *p = a->p;
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t M = w->dims[0], G = p->group, Cg = C / G, Mg = M / G;
    int64_t OH = y->dims[2], OW = y->dims[3], plane = OH * OW;
    int64_t K = Cg * p->kernel[0] * p->kernel[1];
    int one = conv_is_1x1(p);
    if (y->numel == 0)   /* an empty output (a dim of 0) has no scratch to index */
        return 0;
    int rc = onnx_dnnl_conv_run(c, c->dnnl, a);
    if (rc <= 0)
        return rc;
    if (!dense_nchw(x) || !dense_nchw(y))
        return -1;   /* only oneDNN's path reads and writes NHWC or strided images (prepare refused it) */
    struct conv_job j = { .H = H, .W = W, .OH = OH, .OW = OW, .kh = p->kernel[0], .kw = p->kernel[1],
        .sh = p->strides[0], .sw = p->strides[1], .ph = p->pads[0], .pw = p->pads[1],
        .dh = p->dilations[0], .dw = p->dilations[1], .col = a->scratch };
    for (int64_t n = 0; n < N; n++) {
        for (int64_t g = 0; g < G; g++) {
            const float *src = CF(x) + (n * C + g * Cg) * H * W;
            const float *B = src;
            if (!one) {
                j.src = src;
                par(c, K, (PAR_GRAIN + plane - 1) / (plane ? plane : 1), im2col_task, &j);
                B = j.col;
            }
            struct gemm_job gj = { 0, 0, Mg, plane, K, K, plane, plane, 1, 1.0f, 0.0f, CF(w) + g * Mg * K, B,
                                   F(y) + (n * M + g * Mg) * plane, 0, bt ? CF(bt) + g * Mg : NULL, p->fused_relu };
            par_gemm(c, &gj);
        }
    }
    return 0;
}

/* ---- BatchNormalization ------------------------------------------------------------------- */

struct bn_job {
    const float *x, *scale, *bias, *mean, *var;
    float *y;
    int64_t C, plane, xs;   /* xs: elements from one image of x to the next */
    float eps;
    int relu;
};

static void bn_task(void *vctx, int64_t b, int64_t e)
{
    const struct bn_job *j = vctx;
    for (int64_t r = b; r < e; r++) {
        int64_t ch = r % j->C;
        float sc = j->scale[ch] / sqrtf(j->var[ch] + j->eps);
        float sh = j->bias[ch] - j->mean[ch] * sc;
        const float *x = j->x + r / j->C * j->xs + ch * j->plane;
        float *y = j->y + r * j->plane;
        if (j->relu)
            for (int64_t i = 0; i < j->plane; i++) {
                float v = x[i] * sc + sh;
                y[i] = v > 0 ? v : 0;
            }
        else
            for (int64_t i = 0; i < j->plane; i++)
                y[i] = x[i] * sc + sh;
    }
}

/* NCHW in, NHWC out (the input of oneDNN convolutions, onnx_plan_layout.c), by tiles of
 * BN_TILE pixels of one image: 4 channels x 4 pixels at a time are normalised and
 * transposed in registers, so that reads and writes both run along cache lines. */
#define BN_TILE 32

static inline float bn1(const struct bn_job *j, float x, float sc, float sh)
{
    float v = x * sc + sh;
    return j->relu && !(v > 0) ? 0 : v;
}

#ifdef __SSE2__
/* Channels [c, c+4) of pixels [0, np) of a tile: x at the tile's first pixel of channel 0. */
static void bn_nhwc_4(const struct bn_job *j, const float *x, float *y, int64_t c, int64_t np)
{
    int64_t C = j->C, plane = j->plane, i = 0;
    float sc[4], sh[4];
    for (int k = 0; k < 4; k++) {
        sc[k] = j->scale[c + k] / sqrtf(j->var[c + k] + j->eps);
        sh[k] = j->bias[c + k] - j->mean[c + k] * sc[k];
    }
    __m128 s0 = _mm_set1_ps(sc[0]), s1 = _mm_set1_ps(sc[1]), s2 = _mm_set1_ps(sc[2]), s3 = _mm_set1_ps(sc[3]);
    __m128 h0 = _mm_set1_ps(sh[0]), h1 = _mm_set1_ps(sh[1]), h2 = _mm_set1_ps(sh[2]), h3 = _mm_set1_ps(sh[3]);
    const float *x0 = x + c * plane, *x1 = x0 + plane, *x2 = x1 + plane, *x3 = x2 + plane;
    for (; i + 4 <= np; i += 4) {
        __m128 a0 = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(x0 + i), s0), h0);
        __m128 a1 = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(x1 + i), s1), h1);
        __m128 a2 = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(x2 + i), s2), h2);
        __m128 a3 = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(x3 + i), s3), h3);
        if (j->relu) {   /* max(0, NaN) is 0, as in the scalar ReLU */
            __m128 z = _mm_setzero_ps();
            a0 = _mm_max_ps(z, a0);
            a1 = _mm_max_ps(z, a1);
            a2 = _mm_max_ps(z, a2);
            a3 = _mm_max_ps(z, a3);
        }
        _MM_TRANSPOSE4_PS(a0, a1, a2, a3);
        _mm_storeu_ps(y + i * C + c, a0);
        _mm_storeu_ps(y + (i + 1) * C + c, a1);
        _mm_storeu_ps(y + (i + 2) * C + c, a2);
        _mm_storeu_ps(y + (i + 3) * C + c, a3);
    }
    for (; i < np; i++)
        for (int k = 0; k < 4; k++)
            y[i * C + c + k] = bn1(j, x[(c + k) * plane + i], sc[k], sh[k]);
}
#endif

static void bn_nhwc_task(void *vctx, int64_t b, int64_t e)
{
    const struct bn_job *j = vctx;
    int64_t tiles = (j->plane + BN_TILE - 1) / BN_TILE;
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / tiles, p0 = r % tiles * BN_TILE, np = j->plane - p0 < BN_TILE ? j->plane - p0 : BN_TILE;
        const float *x = j->x + n * j->xs + p0;
        float *y = j->y + (n * j->plane + p0) * j->C;
        int64_t c = 0;
#ifdef __SSE2__
        for (; c + 4 <= j->C; c += 4)
            bn_nhwc_4(j, x, y, c, np);
#endif
        for (; c < j->C; c++) {
            float sc = j->scale[c] / sqrtf(j->var[c] + j->eps), sh = j->bias[c] - j->mean[c] * sc;
            for (int64_t i = 0; i < np; i++)
                y[i * j->C + c] = bn1(j, x[c * j->plane + i], sc, sh);
        }
    }
}

static int k_batchnorm(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    int64_t C = x->dims[1], plane = x->numel / (x->dims[0] * C > 0 ? x->dims[0] * C : 1);
    struct bn_job j = { CF(x), CF(a->in[1]), CF(a->in[2]), CF(a->in[3]), CF(a->in[4]), F(OUTT(0)),
                        C, plane, x->nstride ? x->nstride : C * plane, a->p->epsilon, a->p->fused_relu };
    if (OUTT(0)->layout == ONNX_LAYOUT_NHWC) {
        int64_t tiles = (plane + BN_TILE - 1) / BN_TILE;
        par(c, x->dims[0] * tiles, (PAR_GRAIN + BN_TILE * C - 1) / (BN_TILE * C > 0 ? BN_TILE * C : 1), bn_nhwc_task,
            &j);
        return 0;
    }
    par(c, x->dims[0] * C, (PAR_GRAIN + plane - 1) / (plane ? plane : 1), bn_task, &j);
    return 0;
}

/* ---- pooling --------------------------------------------------------------------------------- */

struct pool_job {
    const float *x;
    float *y;
    const struct onnx_params *p;
    int64_t H, W, OH, OW, C, ys;   /* ys: elements from one image of y to the next */
    int max;
};

/* Outputs [ow0, ow1) of row oh whose windows lie wholly inside x (no bounds to check, the
 * same sums and comparisons in the same order as the general loop in pool_task). */
static void pool_interior(const struct pool_job *j, const float *x, float *y, int64_t oh, int64_t ow0, int64_t ow1)
{
    const struct onnx_params *p = j->p;
    int64_t kh = p->kernel[0], kw = p->kernel[1], sh = p->strides[0], sw = p->strides[1];
    int64_t dh = j->max ? p->dilations[0] : 1, dw = j->max ? p->dilations[1] : 1;
    const float *row = x + (oh * sh - p->pads[0]) * j->W - p->pads[1];
    for (int64_t ow = ow0; ow < ow1; ow++) {
        const float *w = row + ow * sw;
        if (j->max) {
            float m = -INFINITY;
            for (int64_t i = 0; i < kh; i++)
                for (int64_t k = 0; k < kw; k++)
                    if (w[i * dh * j->W + k * dw] > m)
                        m = w[i * dh * j->W + k * dw];
            y[oh * j->OW + ow] = m;
        } else {
            float sum = 0;
            for (int64_t i = 0; i < kh; i++)
                for (int64_t k = 0; k < kw; k++)
                    sum += w[i * j->W + k];
            y[oh * j->OW + ow] = sum / (float)(kh * kw);
        }
    }
}

/* The outputs of a row whose windows lie inside x horizontally: [*lo, *hi). */
static void pool_inside_cols(const struct pool_job *j, int64_t *lo, int64_t *hi)
{
    const struct onnx_params *p = j->p;
    int64_t sw = p->strides[1], pw = p->pads[1], ext = (p->kernel[1] - 1) * (j->max ? p->dilations[1] : 1) + 1;
    *lo = (pw + sw - 1) / sw;
    *hi = j->W - ext + pw >= 0 ? (j->W - ext + pw) / sw + 1 : 0;
    if (*hi > j->OW)
        *hi = j->OW;
    if (*lo > *hi)
        *lo = *hi;
}

static void pool_task(void *vctx, int64_t b, int64_t e)
{
    const struct pool_job *j = vctx;
    const struct onnx_params *p = j->p;
    int64_t kh = p->kernel[0], kw = p->kernel[1], sh = p->strides[0], sw = p->strides[1];
    int64_t dh = p->dilations[0], dw = p->dilations[1], ph = p->pads[0], pw = p->pads[1];
    int64_t lo, hi, ext_h = (kh - 1) * (j->max ? dh : 1) + 1;
    pool_inside_cols(j, &lo, &hi);
    for (int64_t r = b; r < e; r++) {
        const float *x = j->x + r * j->H * j->W;
        float *y = j->y + r / j->C * j->ys + r % j->C * j->OH * j->OW;
        for (int64_t oh = 0; oh < j->OH; oh++) {
            int inside = oh * sh - ph >= 0 && oh * sh - ph + ext_h <= j->H;
            if (inside && lo < hi)
                pool_interior(j, x, y, oh, lo, hi);
            for (int64_t ow = 0; ow < j->OW; ow++) {
                if (inside && ow >= lo && ow < hi)
                    continue;
                int64_t h0 = oh * sh - ph, w0 = ow * sw - pw;
                if (j->max) {
                    float m = -INFINITY;
                    for (int64_t i = 0; i < kh; i++) {
                        int64_t ih = h0 + i * dh;
                        if (ih < 0 || ih >= j->H)
                            continue;
                        for (int64_t k = 0; k < kw; k++) {
                            int64_t iw = w0 + k * dw;
                            if (iw >= 0 && iw < j->W && x[ih * j->W + iw] > m)
                                m = x[ih * j->W + iw];
                        }
                    }
                    y[oh * j->OW + ow] = m;
                } else {
                    int64_t h1 = h0 + kh, w1 = w0 + kw;
                    int64_t hp = h1 < j->H + p->pads[2] ? h1 : j->H + p->pads[2];
                    int64_t wp = w1 < j->W + p->pads[3] ? w1 : j->W + p->pads[3];
                    int64_t padded = (hp - h0) * (wp - w0);
                    int64_t ha = h0 < 0 ? 0 : h0, wa = w0 < 0 ? 0 : w0;
                    int64_t hb = h1 < j->H ? h1 : j->H, wb = w1 < j->W ? w1 : j->W;
                    float s = 0;
                    for (int64_t ih = ha; ih < hb; ih++)
                        for (int64_t iw = wa; iw < wb; iw++)
                            s += x[ih * j->W + iw];
                    int64_t cnt = p->count_include_pad ? padded : (hb - ha) * (wb - wa);
                    y[oh * j->OW + ow] = cnt > 0 ? s / (float)cnt : 0.0f;
                }
            }
        }
    }
}

static int k_pool(struct onnx_backend_ctx *c, const struct onnx_kargs *a, int max)
{
    const struct onnx_tensor *x = a->in[0];
    struct onnx_tensor *y = OUTT(0);
    int64_t C = x->dims[1] ? x->dims[1] : 1;
    struct pool_job j = { CF(x), F(y), a->p, x->dims[2], x->dims[3], y->dims[2], y->dims[3], C,
                          y->nstride ? y->nstride : C * y->dims[2] * y->dims[3], max };
    par(c, x->dims[0] * x->dims[1], 1 + PAR_GRAIN / (1 + j.OH * j.OW * a->p->kernel[0] * a->p->kernel[1]),
        pool_task, &j);
    return 0;
}

static int k_maxpool(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_pool(c, a, 1); }
static int k_avgpool(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_pool(c, a, 0); }

static void gap_task(void *vctx, int64_t b, int64_t e)
{
    const struct pool_job *j = vctx;
    int64_t plane = j->H;
    for (int64_t r = b; r < e; r++) {
        const float *x = j->x + r * plane;
        double s = 0;
        for (int64_t i = 0; i < plane; i++)
            s += x[i];
        j->y[r] = (float)(s / (double)plane);
    }
}

static int k_gap(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    int64_t rows = x->dims[0] * x->dims[1];
    struct pool_job j = { CF(x), F(OUTT(0)), a->p, rows ? x->numel / rows : 0, 0, 0, 0, 0, 0, 0 };
    par(c, rows, 1 + PAR_GRAIN / (1 + j.H), gap_task, &j);
    return 0;
}

/* ---- broadcasting element-wise machinery ------------------------------------------------------ */

enum { BOP_ADD, BOP_SUB, BOP_MUL, BOP_DIV, BOP_POW, BOP_EQ };

struct bin_job {
    struct bc b;
    const void *x, *y;
    void *o;
    int op, elem, relu;
    int yelem;   /* Pow: exponent type */
};

#define BIN_INNER(T, TO, EXPR) do { \
        const T *A = (const T *)j->x + off[0], *B = (const T *)j->y + off[1]; \
        TO *O = (TO *)j->o + row * inner; \
        if (sa && sb) { for (int64_t i = 0; i < inner; i++) { T a_ = A[i], b_ = B[i]; O[i] = EXPR; } } \
        else if (sa) { T b_ = B[0]; for (int64_t i = 0; i < inner; i++) { T a_ = A[i]; O[i] = EXPR; } } \
        else if (sb) { T a_ = A[0]; for (int64_t i = 0; i < inner; i++) { T b_ = B[i]; O[i] = EXPR; } } \
        else { T a_ = A[0], b_ = B[0]; for (int64_t i = 0; i < inner; i++) O[i] = EXPR; } \
    } while (0)

static inline int64_t idiv(int64_t a, int64_t b)
{
    return b ? a / b : 0;
}

static inline float fpow(float a, float b)
{
    if (b == 2.0f) return a * a;
    if (b == 0.5f) return sqrtf(a);
    if (b == 1.0f) return a;
    return powf(a, b);
}

static void bin_task(void *vctx, int64_t b0, int64_t e0)
{
    const struct bin_job *j = vctx;
    int64_t inner = j->b.od[j->b.r - 1];
    int sa = j->b.st[0][j->b.r - 1] != 0, sb = j->b.st[1][j->b.r - 1] != 0;
    for (int64_t row = b0; row < e0; row++) {
        int64_t off[3];
        bc_row(&j->b, row, off);
        if (j->elem == ONNX_ELEM_FLOAT) {
            switch (j->op) {
            case BOP_ADD: BIN_INNER(float, float, a_ + b_); break;
            case BOP_SUB: BIN_INNER(float, float, a_ - b_); break;
            case BOP_MUL: BIN_INNER(float, float, a_ * b_); break;
            case BOP_DIV: BIN_INNER(float, float, a_ / b_); break;
            case BOP_POW:
                if (j->yelem == ONNX_ELEM_FLOAT) {
                    BIN_INNER(float, float, fpow(a_, b_));
                } else {
                    const float *A = (const float *)j->x + off[0];
                    const int64_t *B = (const int64_t *)j->y + off[1];
                    float *O = (float *)j->o + row * inner;
                    for (int64_t i = 0; i < inner; i++)
                        O[i] = fpow(A[sa ? i : 0], (float)B[sb ? i : 0]);
                }
                break;
            case BOP_EQ: BIN_INNER(float, uint8_t, a_ == b_); break;
            }
            if (j->relu)
                relu_inplace((float *)j->o + row * inner, inner);
        } else if (j->elem == ONNX_ELEM_INT64) {
            switch (j->op) {
            case BOP_ADD: BIN_INNER(int64_t, int64_t, (int64_t)((uint64_t)a_ + (uint64_t)b_)); break;
            case BOP_SUB: BIN_INNER(int64_t, int64_t, (int64_t)((uint64_t)a_ - (uint64_t)b_)); break;
            case BOP_MUL: BIN_INNER(int64_t, int64_t, (int64_t)((uint64_t)a_ * (uint64_t)b_)); break;
            case BOP_DIV: BIN_INNER(int64_t, int64_t, (b_ == -1 ? (int64_t)(0 - (uint64_t)a_) : idiv(a_, b_))); break;
            case BOP_EQ: BIN_INNER(int64_t, uint8_t, a_ == b_); break;
            default: break;
            }
        } else {
            BIN_INNER(uint8_t, uint8_t, a_ == b_);
        }
    }
}

/* The types bin_task computes: float32 (Pow: with a float32 or int64 exponent), int64 (but
 * Pow) and BOOL equality; onnx_cpu_typed.c the others. */
static int bin_fast(const struct onnx_kargs *a, int op)
{
    int x = a->in[0]->elem, y = a->in[1]->elem;
    if (x == ONNX_ELEM_FLOAT)
        return op != BOP_POW || y == ONNX_ELEM_FLOAT || y == ONNX_ELEM_INT64;
    if (x == ONNX_ELEM_INT64)
        return op != BOP_POW;
    return x == ONNX_ELEM_BOOL && op == BOP_EQ;
}

static int k_binary(struct onnx_backend_ctx *c, const struct onnx_kargs *a, int op)
{
    struct bin_job j;
    if (!bin_fast(a, op))
        return onnx_cpu_typed_binary(c, a);
    struct onnx_tensor *o = OUTT(0);
    bc_setup(&j.b, o, a->in, 2);
    j.x = a->in[0]->data;
    j.y = a->in[1]->data;
    j.o = o->data;
    j.op = op;
    j.elem = a->in[0]->elem;
    j.yelem = a->in[1]->elem;
    j.relu = a->p->fused_relu;
    if (j.elem == ONNX_ELEM_INT64 && op == BOP_DIV) {
        const int64_t *d = a->in[1]->data;
        for (int64_t i = 0; i < a->in[1]->numel; i++)
            if (d[i] == 0)
                return -1;   /* integer division by zero */
    }
    int64_t inner = j.b.od[j.b.r - 1], rows = o->numel / (inner ? inner : 1);
    if (o->numel == 0)
        return 0;
    par(c, rows, 1 + PAR_GRAIN / (inner ? inner : 1), bin_task, &j);
    return 0;
}

static int k_add(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_binary(c, a, BOP_ADD); }
static int k_sub(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_binary(c, a, BOP_SUB); }
static int k_mul(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_binary(c, a, BOP_MUL); }
static int k_div(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_binary(c, a, BOP_DIV); }
static int k_pow(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_binary(c, a, BOP_POW); }
static int k_equal(struct onnx_backend_ctx *c, const struct onnx_kargs *a) { return k_binary(c, a, BOP_EQ); }

/* Broadcast copy (Expand) and select (Where), by element size. */
struct sel_job {
    struct bc b;
    const void *cond, *x, *y;
    void *o;
    size_t es;
};

static void sel_task(void *vctx, int64_t b0, int64_t e0)
{
    const struct sel_job *j = vctx;
    int64_t inner = j->b.od[j->b.r - 1];
    int where = j->cond != NULL;
    for (int64_t row = b0; row < e0; row++) {
        int64_t off[3];
        bc_row(&j->b, row, off);
        char *O = (char *)j->o + (size_t)(row * inner) * j->es;
        if (!where) {
            int64_t s = j->b.st[0][j->b.r - 1];
            const char *X = (const char *)j->x + (size_t)off[0] * j->es;
            if (s)
                memcpy(O, X, (size_t)inner * j->es);
            else
                for (int64_t i = 0; i < inner; i++)
                    memcpy(O + (size_t)i * j->es, X, j->es);
            continue;
        }
        int64_t sc = j->b.st[0][j->b.r - 1] != 0, sx = j->b.st[1][j->b.r - 1] != 0,
                sy = j->b.st[2][j->b.r - 1] != 0;
        const uint8_t *C = (const uint8_t *)j->cond + off[0];
        const char *X = (const char *)j->x + (size_t)off[1] * j->es;
        const char *Y = (const char *)j->y + (size_t)off[2] * j->es;
        for (int64_t i = 0; i < inner; i++)
            memcpy(O + (size_t)i * j->es, C[i * sc] ? X + (size_t)(i * sx) * j->es : Y + (size_t)(i * sy) * j->es,
                   j->es);
    }
}

/* y = x broadcast to y's shape (Expand, and Gemm's C). */
static void broadcast_copy(struct onnx_backend_ctx *c, const struct onnx_tensor *x, struct onnx_tensor *y)
{
    struct sel_job j = { .x = x->data, .o = y->data, .es = onnx_elem_size(x->elem) };
    bc_setup(&j.b, y, &x, 1);
    int64_t inner = j.b.od[j.b.r - 1];
    if (y->numel)
        par(c, y->numel / inner, 1 + PAR_GRAIN / inner, sel_task, &j);
}

static int k_expand(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    broadcast_copy(c, a->in[0], OUTT(0));
    return 0;
}

static int k_where(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    struct sel_job j = { .cond = a->in[0]->data, .x = a->in[1]->data, .y = a->in[2]->data,
                         .o = OUTT(0)->data, .es = onnx_elem_size(a->in[1]->elem) };
    bc_setup(&j.b, OUTT(0), a->in, 3);
    int64_t inner = j.b.od[j.b.r - 1];
    if (OUTT(0)->numel)
        par(c, OUTT(0)->numel / inner, 1 + PAR_GRAIN / inner, sel_task, &j);
    return 0;
}

/* ---- unary ------------------------------------------------------------------------------------- */

struct un_job {
    const void *x;
    void *y;
    int op, elem;
    float f;
};

static void un_task(void *vctx, int64_t b, int64_t e)
{
    const struct un_job *j = vctx;
    const float *x = j->x;
    float *y = j->y;
    switch (j->op) {
    case ONNX_OP_RELU: for (int64_t i = b; i < e; i++) y[i] = x[i] > 0 ? x[i] : 0; break;
    case ONNX_OP_SIGMOID: for (int64_t i = b; i < e; i++) y[i] = 1.0f / (1.0f + expf(-x[i])); break;
    case ONNX_OP_SQRT: for (int64_t i = b; i < e; i++) y[i] = sqrtf(x[i]); break;
    case ONNX_OP_ERF: for (int64_t i = b; i < e; i++) y[i] = erff(x[i]); break;
    case ONNX_OP_TANH: for (int64_t i = b; i < e; i++) y[i] = tanhf(x[i]); break;
    case ONNX_OP_GELU:
        if (j->f)
            for (int64_t i = b; i < e; i++)
                y[i] = 0.5f * x[i] * (1.0f + tanhf(0.7978845608028654f * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
        else
            for (int64_t i = b; i < e; i++)
                y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.7071067811865476f));
        break;
    case ONNX_OP_NEG:
        if (j->elem == ONNX_ELEM_INT64) {
            const int64_t *xi = j->x;
            int64_t *yi = j->y;
            for (int64_t i = b; i < e; i++) yi[i] = (int64_t)(0 - (uint64_t)xi[i]);
        } else {
            for (int64_t i = b; i < e; i++) y[i] = -x[i];
        }
        break;
    }
}

static int k_unary(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    int e = a->in[0]->elem;
    if (e != ONNX_ELEM_FLOAT && !(e == ONNX_ELEM_INT64 && a->node->op == ONNX_OP_NEG))
        return onnx_cpu_typed_unary(c, a);
    struct un_job j = { a->in[0]->data, OUTT(0)->data, a->node->op, a->in[0]->elem, (float)a->p->gelu_tanh };
    par(c, a->in[0]->numel, PAR_GRAIN, un_task, &j);
    return 0;
}

static int k_copy(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    return cpu_copy(c, OUTT(0)->data, a->in[0]->data, onnx_tensor_bytes(a->in[0]));
}

/* ---- Concat ------------------------------------------------------------------------------------- */

struct cat_job {
    const struct onnx_kargs *a;
    int64_t axis;
    size_t es, out_row;
};

static void cat_task(void *vctx, int64_t b, int64_t e)
{
    const struct cat_job *j = vctx;
    const struct onnx_kargs *a = j->a;
    for (int64_t o = b; o < e; o++) {
        char *dst = (char *)a->out[0]->data + (size_t)o * j->out_row;
        for (int k = 0; k < a->n_in; k++) {
            const struct onnx_tensor *t = a->in[k];
            size_t bytes = (size_t)onnx_dims_product(t, (int)j->axis, t->rank) * j->es;
            size_t step = t->nstride ? (size_t)t->nstride * j->es : bytes;   /* a slice at batch > 1 */
            memcpy(dst, (const char *)t->data + (size_t)o * step, bytes);
            dst += bytes;
        }
    }
}

static int k_concat(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *y = a->out[0];
    struct cat_job j = { a, a->p->axis, onnx_elem_size(y->elem), 0 };
    int64_t outer = onnx_dims_product(y, 0, (int)j.axis), inner = onnx_dims_product(y, (int)j.axis, y->rank);
    j.out_row = (size_t)inner * j.es;
    if (y->numel)
        par(c, outer, 1 + PAR_GRAIN / (inner ? inner : 1), cat_task, &j);
    return 0;
}

/* ---- Gemm / MatMul ------------------------------------------------------------------------------ */

static int k_gemm(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *A = a->in[0], *B = a->in[1], *C = IN(2);
    struct onnx_tensor *Y = OUTT(0);
    const struct onnx_params *p = a->p;
    int64_t M = Y->dims[0], N = Y->dims[1], K = p->trans_a ? A->dims[0] : A->dims[1];
    float beta = 0.0f;
    if (C && p->beta != 0.0f) {   /* Y = broadcast C, then the product accumulates onto it */
        broadcast_copy(c, C, Y);
        beta = p->beta;
    }
    if (M && N) {
        struct gemm_job j = { p->trans_a, p->trans_b, M, N, K, A->dims[1], B->dims[1], N, 1, p->alpha, beta,
                              CF(A), CF(B), F(Y), 0, NULL, p->fused_relu };
        par_gemm(c, &j);
    } else if (p->fused_relu) {
        relu_inplace(F(Y), Y->numel);
    }
    return 0;
}

struct bmm_job {
    const struct onnx_tensor *A, *B;
    struct onnx_tensor *Y;
    int64_t M, N, K;
    struct onnx_matmul_batch mb;
};

static void bmm_task(void *vctx, int64_t b, int64_t e)
{
    const struct bmm_job *j = vctx;
    for (int64_t bi = b; bi < e; bi++) {
        int64_t oa, ob;
        onnx_matmul_batch_offsets(&j->mb, bi, &oa, &ob);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)j->M, (int)j->N, (int)j->K, 1.0f,
                    CF(j->A) + oa, (int)j->K, CF(j->B) + ob, (int)j->N, 0.0f, F(j->Y) + bi * j->M * j->N,
                    (int)j->N);
    }
}

static int k_matmul(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *A = a->in[0], *B = a->in[1];
    struct onnx_tensor *Y = OUTT(0);
    int64_t M = A->dims[A->rank - 2], K = A->dims[A->rank - 1], N = B->dims[B->rank - 1];
    int64_t bB = B->numel / (K * N > 0 ? K * N : 1);
    if (Y->numel == 0)
        return 0;
    if (bB == 1 || B->numel == 0) {
        /* B is one matrix: fold A's batch into M */
        int64_t Mall = A->numel / (K > 0 ? K : 1);
        if (K == 0) {
            memset(Y->data, 0, onnx_tensor_bytes(Y));
            return 0;
        }
        struct gemm_job j = { 0, 0, Mall, N, K, K, N, N, 1, 1.0f, 0.0f, CF(A), CF(B), F(Y), 0, NULL, 0 };
        par_gemm(c, &j);
        return 0;
    }
    /* batched with broadcasting of the batch dims */
    int64_t batch = Y->numel / (M * N);
    struct bmm_job j = { A, B, Y, M, N, K, { 0 } };
    onnx_matmul_batch_init(&j.mb, A, B, Y);
    par(c, batch, 1 + (int64_t)(2e5 / (2.0 * (double)(M * N * K) + 1)), bmm_task, &j);
    return 0;
}

/* ---- Softmax / LayerNormalization / ReduceMean ----------------------------------------------------- */

struct row_job {
    const float *x, *scale, *bias;
    float *y;
    int64_t n, inner;
    float eps;
};

static void softmax_task(void *vctx, int64_t b, int64_t e)
{
    const struct row_job *j = vctx;
    for (int64_t r = b; r < e; r++) {
        int64_t o = r / j->inner, in = r % j->inner;
        const float *x = j->x + o * j->n * j->inner + in;
        float *y = j->y + o * j->n * j->inner + in;
        int64_t s = j->inner;
        float m = -INFINITY;
        for (int64_t i = 0; i < j->n; i++)
            if (x[i * s] > m)
                m = x[i * s];
        float sum = 0;
        for (int64_t i = 0; i < j->n; i++) {
            float v = expf(x[i * s] - m);
            y[i * s] = v;
            sum += v;
        }
        float inv = 1.0f / sum;
        for (int64_t i = 0; i < j->n; i++)
            y[i * s] *= inv;
    }
}

static int k_softmax(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    int64_t n, inner;
    onnx_softmax_extent(x, a->p, &n, &inner);
    if (x->numel == 0)
        return 0;
    struct row_job j = { CF(x), NULL, NULL, F(OUTT(0)), n, inner, 0 };
    par(c, x->numel / n, 1 + PAR_GRAIN / n, softmax_task, &j);
    return 0;
}

static void ln_task(void *vctx, int64_t b, int64_t e)
{
    const struct row_job *j = vctx;
    for (int64_t r = b; r < e; r++) {
        const float *x = j->x + r * j->n;
        float *y = j->y + r * j->n;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < j->n; i++)
            mean += x[i];
        mean /= (double)j->n;
        for (int64_t i = 0; i < j->n; i++)
            var += (x[i] - mean) * (x[i] - mean);
        var /= (double)j->n;
        float inv = (float)(1.0 / sqrt(var + j->eps)), mf = (float)mean;
        for (int64_t i = 0; i < j->n; i++) {
            float v = (x[i] - mf) * inv * j->scale[i];
            y[i] = j->bias ? v + j->bias[i] : v;
        }
    }
}

static int k_layernorm(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    int64_t n = onnx_dims_product(x, (int)a->p->axis, x->rank);
    if (x->numel == 0 || n == 0)
        return 0;
    struct row_job j = { CF(x), CF(a->in[1]), IN(2) ? CF(IN(2)) : NULL, F(OUTT(0)), n, 1, a->p->epsilon };
    par(c, x->numel / n, 1 + PAR_GRAIN / n, ln_task, &j);
    return 0;
}

static int k_reducemean(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    struct onnx_tensor *y = OUTT(0);
    if (x->elem != ONNX_ELEM_FLOAT)
        return onnx_cpu_typed_reduce(c, a);
    if (!a->p->has_axes) {   /* noop_with_empty_axes */
        return cpu_copy(c, y->data, x->data, onnx_tensor_bytes(x));
    }
    int64_t ost[ONNX_MAX_RANK], cnt = onnx_cpu_reduce_strides(x, (unsigned)a->p->n_axes, ost);
    double *acc = a->scratch;   /* onnx_cpu_reduce_scratch() bytes */
    memset(acc, 0, (size_t)y->numel * sizeof(double));
    int64_t idx[ONNX_MAX_RANK] = { 0 }, o = 0;
    const float *xv = x->data;
    for (int64_t i = 0; i < x->numel; i++) {
        acc[o] += xv[i];
        onnx_cpu_reduce_next(x, ost, idx, &o);
    }
    for (int64_t i = 0; i < y->numel; i++)
        F(y)[i] = cnt ? (float)(acc[i] / (double)cnt) : NAN;
    return 0;
}

/* ---- data movement ------------------------------------------------------------------------------------ */

struct strided_job {
    const char *x;
    char *y;
    size_t es;
    int rank;
    int64_t od[ONNX_MAX_RANK];    /* output dims */
    int64_t ist[ONNX_MAX_RANK];   /* input element stride per output dim */
    int64_t base;                 /* input element offset of output index 0 */
};

/* Generic gather of a strided view: y[i] = x[base + sum idx_d * ist_d]. */
static void strided_task(void *vctx, int64_t b, int64_t e)
{
    const struct strided_job *j = vctx;
    int64_t inner = j->od[j->rank - 1], is = j->ist[j->rank - 1];
    for (int64_t row = b; row < e; row++) {
        int64_t rem = row, off = j->base;
        for (int d = j->rank - 2; d >= 0; d--) {
            off += (rem % j->od[d]) * j->ist[d];
            rem /= j->od[d];
        }
        char *dst = j->y + (size_t)(row * inner) * j->es;
        if (is == 1) {
            memcpy(dst, j->x + (size_t)off * j->es, (size_t)inner * j->es);
        } else if (j->es == 4) {
            const uint32_t *s = (const uint32_t *)j->x + off;
            uint32_t *d = (uint32_t *)dst;
            for (int64_t i = 0; i < inner; i++)
                d[i] = s[i * is];
        } else {
            for (int64_t i = 0; i < inner; i++)
                memcpy(dst + (size_t)i * j->es, j->x + (size_t)(off + i * is) * j->es, j->es);
        }
    }
}

static void run_strided(struct onnx_backend_ctx *c, struct strided_job *j, int64_t numel)
{
    if (numel == 0)
        return;
    if (j->rank == 0) {
        j->rank = 1;
        j->od[0] = 1;
        j->ist[0] = 1;
    }
    int64_t inner = j->od[j->rank - 1];
    if (inner == 0)
        return;
    par(c, numel / inner, 1 + PAR_GRAIN / inner, strided_task, j);
}

/* Transpose, Slice */
static int k_view_copy(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    struct onnx_tensor *y = OUTT(0);
    struct strided_job j = { x->data, y->data, onnx_elem_size(x->elem), y->rank, { 0 }, { 0 }, 0 };
    j.base = onnx_view_strides(a, j.ist);
    for (int i = 0; i < y->rank; i++)
        j.od[i] = y->dims[i];
    run_strided(c, &j, y->numel);
    return 0;
}

static int k_gather(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0], *idx = a->in[1];
    struct onnx_tensor *y = OUTT(0);
    int ax = (int)a->p->axis;
    int64_t outer = onnx_dims_product(x, 0, ax), inner = onnx_dims_product(x, ax + 1, x->rank), dim = x->dims[ax];
    size_t es = onnx_elem_size(x->elem), row = (size_t)inner * es;
    const struct onnx_elem_io *ii = onnx_elem_io(idx->elem);   /* INT64 or INT32 */
    for (int64_t k = 0; k < idx->numel; k++)
        if (ii->get_i64(idx->data, k) < -dim || ii->get_i64(idx->data, k) >= dim)
            return -1;
    char *dst = y->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < idx->numel; k++) {
            int64_t i = ii->get_i64(idx->data, k);
            i = i < 0 ? i + dim : i;
            memcpy(dst, (const char *)x->data + ((size_t)(o * dim + i)) * row, row);
            dst += row;
        }
    return 0;
}

static int k_pad(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    struct onnx_tensor *y = OUTT(0);
    size_t es = onnx_elem_size(x->elem);
    if (y->elem == ONNX_ELEM_FLOAT) {
        float v = (float)a->p->pad_value;
        for (int64_t i = 0; i < y->numel; i++)
            F(y)[i] = v;
    } else if (y->numel) {   /* the value in y's type, repeated */
        onnx_elem_set_f64(y->elem, y->data, 0, a->p->pad_value);
        for (int64_t i = 1; i < y->numel; i++)
            memcpy((char *)y->data + (size_t)i * es, y->data, es);
    }
    if (x->numel == 0)
        return 0;
    int r = x->rank;
    int64_t inner = r ? x->dims[r - 1] : 1, ost[ONNX_MAX_RANK];
    onnx_row_strides(y, ost);
    int64_t rows = x->numel / inner;
    for (int64_t row = 0; row < rows; row++) {
        int64_t rem = row, off = r ? a->p->pad_begin[r - 1] : 0;
        for (int d = r - 2; d >= 0; d--) {
            off += (rem % x->dims[d] + a->p->pad_begin[d]) * ost[d];
            rem /= x->dims[d];
        }
        memcpy((char *)y->data + (size_t)off * es, (const char *)x->data + (size_t)(row * inner) * es,
               (size_t)inner * es);
    }
    return 0;
}

/* ---- small ops (mostly shape arithmetic, folded) -------------------------------------------------------- */

static int k_shape(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    struct onnx_tensor *y = OUTT(0);
    for (int64_t i = 0; i < y->numel; i++)
        I64(y)[i] = a->in[0]->dims[a->p->shape_start + i];
    return 0;
}

static int k_constant(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    return cpu_copy(c, OUTT(0)->data, a->p->value.data, onnx_tensor_bytes(&a->p->value));
}

static int k_constantofshape(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    struct onnx_tensor *y = OUTT(0);
    size_t es = onnx_elem_size(y->elem);
    for (int64_t i = 0; i < y->numel; i++)
        memcpy((char *)y->data + (size_t)i * es, a->p->value.data, es);
    return 0;
}

/* Cast (onnx_elem.c); a NaN or out-of-range float to an integer, or a string that is not a
 * number, fails the run. */
static int k_cast(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    return onnx_convert(OUTT(0)->elem, OUTT(0)->data, a->in[0]->elem, a->in[0]->data, a->in[0]->numel);
}

/* start + i * delta: float32 and int64 as they always were, other types through double or
 * int64 arithmetic. */
static int k_range(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    struct onnx_tensor *y = OUTT(0);
    const struct onnx_elem_io *io = onnx_elem_io(y->elem);
    if (y->elem == ONNX_ELEM_FLOAT) {
        float s = CF(a->in[0])[0], d = CF(a->in[2])[0];
        for (int64_t i = 0; i < y->numel; i++)
            F(y)[i] = s + (float)i * d;
    } else if (onnx_elem_class(y->elem) == ONNX_EC_FLOAT) {
        double s = io->get_f64(a->in[0]->data, 0), d = io->get_f64(a->in[2]->data, 0);
        for (int64_t i = 0; i < y->numel; i++)
            io->set_f64(y->data, i, s + (double)i * d);
    } else {
        int64_t s = io->get_i64(a->in[0]->data, 0), d = io->get_i64(a->in[2]->data, 0);
        for (int64_t i = 0; i < y->numel; i++)
            io->set_i64(y->data, i, (int64_t)((uint64_t)s + (uint64_t)i * (uint64_t)d));
    }
    return 0;
}

/* ---- the float family: FLOAT16 and BFLOAT16 through float32, DOUBLE (onnx_cpu_floats.c) ------ */

static const onnx_kernel_fn f32_kernels[ONNX_OP_COUNT] = {
    [ONNX_OP_CONV] = k_conv, [ONNX_OP_BATCHNORM] = k_batchnorm, [ONNX_OP_MAXPOOL] = k_maxpool,
    [ONNX_OP_AVGPOOL] = k_avgpool, [ONNX_OP_GLOBALAVGPOOL] = k_gap, [ONNX_OP_GEMM] = k_gemm,
    [ONNX_OP_MATMUL] = k_matmul, [ONNX_OP_SOFTMAX] = k_softmax, [ONNX_OP_LAYERNORM] = k_layernorm,
};

static const onnx_kernel_fn f64_kernels[ONNX_OP_COUNT] = {
    [ONNX_OP_GEMM] = onnx_cpu_gemm_f64, [ONNX_OP_MATMUL] = onnx_cpu_matmul_f64,
    [ONNX_OP_SOFTMAX] = onnx_cpu_softmax_f64,
};

static int is_half(int elem)
{
    return elem == ONNX_ELEM_FLOAT16 || elem == ONNX_ELEM_BFLOAT16;
}

/* Scratch of the float32 kernels (the same for the half types, which add their copies). */
static size_t f32_scratch(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    return a->node->op == ONNX_OP_CONV ? conv_scratch(c, a) : 0;
}

/* A float32 Conv goes to oneDNN where it takes it (its primitive is made now), else to
 * our im2col + GEMM. */
static size_t conv_or_dnnl_scratch(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    size_t sb = a->in[0]->elem == ONNX_ELEM_FLOAT ? onnx_dnnl_conv_prepare(c->dnnl, a) : (size_t)-1;
    if (sb == (size_t)-1 && (!dense_nchw(a->in[0]) || !dense_nchw(a->out[0])))
        return (size_t)-1;   /* NHWC or strided images were planned for oneDNN, which failed to take them */
    return sb != (size_t)-1 ? sb : conv_scratch(c, a);
}

/* The backend's takes_strided (a Concat's slice at batch > 1): oneDNN's convolutions both
 * ways, BatchNormalization and Concat (on axis 1) read it, 2-D pools write it. */
static int cpu_takes_strided(struct onnx_backend_ctx *c, const struct onnx_kargs *a, int output)
{
    int op = a->node->op;
    const struct onnx_tensor *x = a->in[0];
    if (op == ONNX_OP_CONV)
        return onnx_dnnl_conv_takes(c->dnnl, a);
    if (!x || x->elem != ONNX_ELEM_FLOAT || x->rank != 4)
        return 0;
    if (op == ONNX_OP_BATCHNORM || (op == ONNX_OP_CONCAT && a->p->axis == 1))
        return !output;
    return (op == ONNX_OP_MAXPOOL || op == ONNX_OP_AVGPOOL) && output && a->n_out == 1;
}

/* The backend's takes_nhwc: oneDNN's convolutions read and write NHWC, BatchNormalization
 * writes it (from an NCHW input). */
static int cpu_takes_nhwc(struct onnx_backend_ctx *c, const struct onnx_kargs *a, int output)
{
    int op = a->node->op;
    if (op == ONNX_OP_CONV)
        return onnx_dnnl_conv_takes(c->dnnl, a);
    return op == ONNX_OP_BATCHNORM && output && a->n_in == 5 && a->in[0]->elem == ONNX_ELEM_FLOAT &&
           a->in[0]->rank == 4 && a->in[0]->layout == ONNX_LAYOUT_NCHW && c->dnnl;
}

static int k_floats(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    int op = a->node->op, e = a->in[0]->elem;
    if (e == ONNX_ELEM_FLOAT)
        return f32_kernels[op](c, a);
    if (e == ONNX_ELEM_DOUBLE)
        return f64_kernels[op] ? f64_kernels[op](c, a) : -1;
    return onnx_cpu_via_f32(c, a, f32_kernels[op], f32_scratch(c, a));
}

static size_t cpu_scratch(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    int op = a->node->op;
    if (op == ONNX_OP_REDUCEMEAN || op == ONNX_OP_REDUCESUM || op == ONNX_OP_REDUCEMAX || op == ONNX_OP_REDUCEMIN)
        return onnx_cpu_reduce_scratch(a);
    if (!f32_kernels[op])
        return 0;
    if (op == ONNX_OP_CONV && a->in[0]->elem == ONNX_ELEM_FLOAT)
        return conv_or_dnnl_scratch(c, a);
    return f32_scratch(c, a) + (is_half(a->in[0]->elem) ? onnx_cpu_via_f32_scratch(a) : 0);
}

/* oneDNN's kernel where it convolves, else ours: im2col (none for 1x1) and OpenBLAS's sgemm. */
static void cpu_conv_impl(struct onnx_backend_ctx *c, const struct onnx_kargs *a, char *buf, size_t len)
{
    if (a->in[0]->elem == ONNX_ELEM_FLOAT && onnx_dnnl_conv_impl(c->dnnl, a->node, buf, len))
        return;
    snprintf(buf, len, "gpujobd %sopenblas sgemm%s", conv_is_1x1(a->p) ? "" : "im2col+",
             a->in[0]->elem == ONNX_ELEM_FLOAT ? "" : " on float32 copies");
}

const struct onnx_backend onnx_backend_cpu = {
    .name = "cpu",
    .init = cpu_init,
    .fini = cpu_fini,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .sync = NULL,
    .scratch_bytes = cpu_scratch,
    .takes_nhwc = cpu_takes_nhwc,
    .takes_strided = cpu_takes_strided,
    .conv_impl = cpu_conv_impl,
    .host_memory = 1,
    .kernels = {
        [ONNX_OP_CONV] = k_floats,
        [ONNX_OP_BATCHNORM] = k_floats,
        [ONNX_OP_RELU] = k_unary,
        [ONNX_OP_MAXPOOL] = k_floats,
        [ONNX_OP_AVGPOOL] = k_floats,
        [ONNX_OP_GLOBALAVGPOOL] = k_floats,
        [ONNX_OP_CONCAT] = k_concat,
        [ONNX_OP_GEMM] = k_floats,
        [ONNX_OP_MATMUL] = k_floats,
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
        [ONNX_OP_SOFTMAX] = k_floats,
        [ONNX_OP_LAYERNORM] = k_floats,
        [ONNX_OP_REDUCEMEAN] = k_reducemean,
        [ONNX_OP_FLATTEN] = k_copy,
        [ONNX_OP_RESHAPE] = k_copy,
        [ONNX_OP_TRANSPOSE] = k_view_copy,
        [ONNX_OP_GATHER] = k_gather,
        [ONNX_OP_SHAPE] = k_shape,
        [ONNX_OP_SLICE] = k_view_copy,
        [ONNX_OP_SQUEEZE] = k_copy,
        [ONNX_OP_UNSQUEEZE] = k_copy,
        [ONNX_OP_CONSTANT] = k_constant,
        [ONNX_OP_IDENTITY] = k_copy,
        [ONNX_OP_DROPOUT] = k_copy,
        [ONNX_OP_CAST] = k_cast,
        [ONNX_OP_EXPAND] = k_expand,
        [ONNX_OP_WHERE] = k_where,
        [ONNX_OP_EQUAL] = k_equal,
        [ONNX_OP_CONSTANTOFSHAPE] = k_constantofshape,
        [ONNX_OP_RANGE] = k_range,
        [ONNX_OP_PAD] = k_pad,
        [ONNX_OP_GREATER] = onnx_cpu_typed_binary,
        [ONNX_OP_LESS] = onnx_cpu_typed_binary,
        [ONNX_OP_GREATEREQ] = onnx_cpu_typed_binary,
        [ONNX_OP_LESSEQ] = onnx_cpu_typed_binary,
        [ONNX_OP_AND] = onnx_cpu_typed_binary,
        [ONNX_OP_OR] = onnx_cpu_typed_binary,
        [ONNX_OP_XOR] = onnx_cpu_typed_binary,
        [ONNX_OP_MOD] = onnx_cpu_typed_binary,
        [ONNX_OP_NOT] = onnx_cpu_typed_unary,
        [ONNX_OP_ABS] = onnx_cpu_typed_unary,
        [ONNX_OP_EXP] = onnx_cpu_typed_unary,
        [ONNX_OP_LOG] = onnx_cpu_typed_unary,
        [ONNX_OP_REDUCESUM] = onnx_cpu_typed_reduce,
        [ONNX_OP_REDUCEMAX] = onnx_cpu_typed_reduce,
        [ONNX_OP_REDUCEMIN] = onnx_cpu_typed_reduce,
        [ONNX_OP_ARGMAX] = onnx_cpu_argmax,
        [ONNX_OP_ARGMIN] = onnx_cpu_argmax,
    },
};
