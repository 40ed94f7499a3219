/*
 * onnx_rows.cu — row reductions of the ONNX runtime's GPU backend: Softmax, LayerNormalization
 * (one block per row, two passes: mean, then the sum of squared deviations, as the CPU) and
 * ReduceMean (one thread per output; accumulated in double as the CPU).
 */
#include "onnx_kernels_common.cuh"

#define ROW_THREADS 128

__global__ void k_softmax(const float *x, float *y, int64_t rows, int64_t n, int64_t inner)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t o = r / inner, in = r % inner;
        const float *xp = x + o * n * inner + in;
        float *yp = y + o * n * inner + in;
        float m = -INFINITY;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            m = fmaxf(m, xp[i * inner]);
        m = okc_block_reduce(m, sh, true);
        float s = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            float e = expf(xp[i * inner] - m);
            yp[i * inner] = e;
            s += e;
        }
        s = okc_block_reduce(s, sh, false);
        float inv = 1.0f / s;
        /* each thread rescales the elements it wrote itself: no barrier needed */
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            yp[i * inner] *= inv;
    }
}

extern "C" int okc_softmax(cudaStream_t stream, const float *x, float *y, int64_t outer, int64_t n, int64_t inner)
{
    int64_t rows = outer * inner;
    if (rows <= 0 || n <= 0)
        return 0;
    unsigned g = okc_row_blocks(rows);
    GJ_LAUNCH(k_softmax, g, ROW_THREADS, 0, stream)(x, y, rows, n, inner);
    return okc_launched();
}

__global__ void k_layernorm(const float *x, float *y, const float *scale, const float *bias, int64_t rows,
                            int64_t n, float eps)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xp = x + r * n;
        float *yp = y + r * n;
        float s = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            s += xp[i];
        float mean = okc_block_reduce(s, sh, false) / (float)n;
        float v = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            float d = xp[i] - mean;
            v += d * d;
        }
        float var = okc_block_reduce(v, sh, false) / (float)n;
        float inv = 1.0f / sqrtf(var + eps);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            float t = (xp[i] - mean) * inv * scale[i];
            yp[i] = bias ? t + bias[i] : t;
        }
    }
}

extern "C" int okc_layernorm(cudaStream_t stream, const float *x, float *y, const float *scale, const float *bias,
                             int64_t rows, int64_t n, float eps)
{
    if (rows <= 0 || n <= 0)
        return 0;
    unsigned g = okc_row_blocks(rows);
    GJ_LAUNCH(k_layernorm, g, ROW_THREADS, 0, stream)(x, y, scale, bias, rows, n, eps);
    return okc_launched();
}

__global__ void k_reduce_mean(okc_reduce r, const float *x, float *y, int64_t n_out)
{
    OKC_FOR(o, n_out) {
        int64_t base = 0, rem = o;
        for (int d = r.kr - 1; d >= 0; d--) {
            base += (rem % r.kdims[d]) * r.kst[d];
            rem /= r.kdims[d];
        }
        double s = 0.0;
        for (int64_t j = 0; j < r.count; j++) {
            int64_t off = base, q = j;
            for (int d = r.rr - 1; d >= 0; d--) {
                off += (q % r.rdims[d]) * r.rst[d];
                q /= r.rdims[d];
            }
            s += x[off];
        }
        y[o] = r.count ? (float)(s / (double)r.count) : NAN;
    }
}

extern "C" int okc_reduce_mean(cudaStream_t stream, const struct okc_reduce *r, const float *x, float *y,
                               int64_t n_out)
{
    if (n_out <= 0)
        return 0;
    GJ_LAUNCH(k_reduce_mean, okc_blocks(n_out), OKC_THREADS, 0, stream)(*r, x, y, n_out);
    return okc_launched();
}
