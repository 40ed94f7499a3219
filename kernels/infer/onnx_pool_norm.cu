/*
 * onnx_pool_norm.cu — pooling and BatchNormalization kernels of the ONNX runtime's GPU
 * backend (ONNX semantics as onnx_cpu.c: max pooling skips padding, average pooling counts
 * padding only with count_include_pad, and never past the end padding).
 */
#include "onnx_kernels_common.cuh"

/* One thread per output element. */
__global__ void k_pool2d(okc_pool p, const float *x, float *y, int64_t n)
{
    OKC_FOR(i, n) {
        int64_t ow = i % p.OW, oh = (i / p.OW) % p.OH, r = i / (p.OW * p.OH);
        const float *xp = x + r * p.H * p.W;
        int64_t h0 = oh * p.sh - p.ph, w0 = ow * p.sw - p.pw;
        float out;
        if (p.max) {
            float m = -INFINITY;
            for (int64_t a = 0; a < p.kh; a++) {
                int64_t ih = h0 + a * p.dh;
                if (ih < 0 || ih >= p.H)
                    continue;
                for (int64_t b = 0; b < p.kw; b++) {
                    int64_t iw = w0 + b * p.dw;
                    if (iw >= 0 && iw < p.W)
                        m = fmaxf(m, xp[ih * p.W + iw]);
                }
            }
            out = m;
        } else {
            int64_t h1 = h0 + p.kh, w1 = w0 + p.kw;
            int64_t hp = h1 < p.H + p.pad_end_h ? h1 : p.H + p.pad_end_h;
            int64_t wp = w1 < p.W + p.pad_end_w ? w1 : p.W + p.pad_end_w;
            int64_t padded = (hp - h0) * (wp - w0);
            int64_t ha = h0 < 0 ? 0 : h0, wa = w0 < 0 ? 0 : w0;
            int64_t hb = h1 < p.H ? h1 : p.H, wb = w1 < p.W ? w1 : p.W;
            float s = 0.0f;
            for (int64_t ih = ha; ih < hb; ih++)
                for (int64_t iw = wa; iw < wb; iw++)
                    s += xp[ih * p.W + iw];
            int64_t cnt = p.count_include_pad ? padded : (hb - ha) * (wb - wa);
            out = cnt > 0 ? s / (float)cnt : 0.0f;
        }
        y[i] = out;
    }
}

extern "C" int okc_pool2d(cudaStream_t stream, const struct okc_pool *p, const float *x, float *y)
{
    int64_t n = p->rows * p->OH * p->OW;
    if (n <= 0)
        return 0;
    GJ_LAUNCH(k_pool2d, okc_blocks(n), OKC_THREADS, 0, stream)(*p, x, y, n);
    return okc_launched();
}

/* One block of 128 threads per (n, c) plane. */
__global__ void k_global_avgpool(const float *x, float *y, int64_t rows, int64_t plane)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xp = x + r * plane;
        float s = 0.0f;
        for (int64_t i = threadIdx.x; i < plane; i += blockDim.x)
            s += xp[i];
        s = okc_block_reduce(s, sh, false);
        if (threadIdx.x == 0)
            y[r] = s / (float)plane;
    }
}

extern "C" int okc_global_avgpool(cudaStream_t stream, const float *x, float *y, int64_t rows, int64_t plane)
{
    if (rows <= 0 || plane <= 0)
        return 0;
    unsigned g = okc_row_blocks(rows);
    GJ_LAUNCH(k_global_avgpool, g, 128, 0, stream)(x, y, rows, plane);
    return okc_launched();
}

__global__ void k_batchnorm(const float *x, float *y, const float *scale, const float *bias, const float *mean,
                            const float *var, int64_t n, int64_t channels, int64_t plane, float eps, int relu)
{
    OKC_FOR(i, n) {
        int64_t c = (i / plane) % channels;
        float sc = scale[c] / sqrtf(var[c] + eps);
        float v = x[i] * sc + (bias[c] - mean[c] * sc);
        y[i] = relu ? fmaxf(v, 0.0f) : v;
    }
}

extern "C" int okc_batchnorm(cudaStream_t stream, const float *x, float *y, const float *scale, const float *bias,
                             const float *mean, const float *var, int64_t n, int64_t channels, int64_t plane,
                             float eps, int relu)
{
    if (n <= 0 || plane <= 0 || channels <= 0)
        return 0;
    GJ_LAUNCH(k_batchnorm, okc_blocks(n), OKC_THREADS, 0, stream)(x, y, scale, bias, mean, var, n, channels, plane, eps,
                                                           relu);
    return okc_launched();
}
