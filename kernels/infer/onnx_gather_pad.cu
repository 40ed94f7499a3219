/*
 * onnx_gather_pad.cu — Gather (indices checked on the device: out of range sets the error
 * word) and constant Pad kernels of the ONNX runtime's GPU backend.
 */
#include "onnx_kernels_common.cuh"

template <typename T>
__global__ void k_gather(const T *x, const int64_t *idx, T *y, int64_t outer, int64_t dim, int64_t n_idx,
                         int64_t inner, int *err)
{
    int64_t n = outer * n_idx * inner;
    OKC_FOR(i, n) {
        int64_t in = i % inner, k = (i / inner) % n_idx, o = i / (inner * n_idx);
        int64_t j = idx[k];
        if (j < -dim || j >= dim) {
            atomicCAS(err, (int)OKC_ERR_NONE, (int)OKC_ERR_INDEX);   /* the run's first error stays */
            y[i] = T(0);
            continue;
        }
        if (j < 0)
            j += dim;
        y[i] = x[(o * dim + j) * inner + in];
    }
}

extern "C" int okc_gather(cudaStream_t stream, const void *x, const int64_t *idx, void *y, int64_t outer,
                          int64_t dim, int64_t n_idx, int64_t inner, int es, int *err)
{
    int64_t n = outer * n_idx * inner;
    if (n <= 0)
        return 0;
    unsigned g = okc_blocks(n);
    switch (es) {
    case 1: GJ_LAUNCH(k_gather<uint8_t>, g, OKC_THREADS, 0, stream)((const uint8_t *)x, idx, (uint8_t *)y, outer, dim, n_idx, inner, err); break;
    case 4: GJ_LAUNCH(k_gather<uint32_t>, g, OKC_THREADS, 0, stream)((const uint32_t *)x, idx, (uint32_t *)y, outer, dim, n_idx, inner, err); break;
    case 8: GJ_LAUNCH(k_gather<uint64_t>, g, OKC_THREADS, 0, stream)((const uint64_t *)x, idx, (uint64_t *)y, outer, dim, n_idx, inner, err); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return okc_launched();
}

/* One thread per output element: the input element it maps to, or the pad value. */
template <typename T>
__global__ void k_pad(struct okc_pad p, const T *x, T *y, int64_t n, T value)
{
    OKC_FOR(i, n) {
        int64_t rem = i, off = 0, xs = 1;
        bool inside = true;
        for (int d = p.rank - 1; d >= 0; d--) {
            int64_t c = rem % p.ydims[d] - p.begin[d];
            rem /= p.ydims[d];
            if (c < 0 || c >= p.xdims[d])
                inside = false;
            off += c * xs;
            xs *= p.xdims[d];
        }
        y[i] = inside ? x[off] : value;
    }
}

extern "C" int okc_pad(cudaStream_t stream, const struct okc_pad *p, const void *x, void *y, int64_t n, int es,
                       float fvalue, int64_t ivalue)
{
    if (n <= 0)
        return 0;
    unsigned g = okc_blocks(n);
    if (es == 4)
        GJ_LAUNCH(k_pad<float>, g, OKC_THREADS, 0, stream)(*p, (const float *)x, (float *)y, n, fvalue);
    else if (es == 8)
        GJ_LAUNCH(k_pad<int64_t>, g, OKC_THREADS, 0, stream)(*p, (const int64_t *)x, (int64_t *)y, n, ivalue);
    else
        return (int)cudaErrorInvalidValue;
    return okc_launched();
}
