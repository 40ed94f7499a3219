/*
 * test_emu_onnx.c — suite gpu-emu: every launcher of kernels/infer (onnx_cuda_kernels.h) run on
 * the CPU emulation against a reference written here from onnx_cpu.c's formulas, on shapes that
 * cross block (256 or 128 threads) and warp boundaries and odd sizes. Float results within
 * 1e-5 relative (reductions sum in another order), everything else exactly; the device error
 * word set by an index out of range, an integer division by zero and a NaN cast.
 * (The test_onnx_gpu comparisons themselves need cuDNN and cuBLAS, which are not emulated.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_cuda_kernels.h"

static int failures;
static uint32_t seed = 7u;

static float rf(float lo, float hi)
{
    seed = seed * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(seed >> 8) / 16777216.0f;
}

static float *floats(int64_t n, float lo, float hi)
{
    float *p = malloc((size_t)n * sizeof *p);
    if (!p)
        exit(1);
    for (int64_t i = 0; i < n; i++)
        p[i] = rf(lo, hi);
    return p;
}

/* an output buffer filled with NaN: an element no thread wrote is a failure */
static float *out_floats(int64_t n)
{
    float *p = malloc((size_t)n * sizeof *p);
    if (!p)
        exit(1);
    for (int64_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

static void check_f(const char *what, const float *got, const float *ref, int64_t n, double tol)
{
    double worst = 0;
    int64_t at = -1;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]), s = fabs((double)ref[i]) > 1 ? fabs((double)ref[i]) : 1;
        if (!(d / s <= tol) && !(isnan(ref[i]) && isnan(got[i]))) {
            at = i;
            worst = d / s;
            break;
        }
    }
    if (at >= 0) {
        printf("%-28s FAILED at %lld: %.9g, expected %.9g (%.3g)\n", what, (long long)at, got[at], ref[at], worst);
        failures++;
    } else {
        printf("%-28s ok (%lld elements)\n", what, (long long)n);
    }
}

static void check_bytes(const char *what, const void *got, const void *ref, size_t bytes)
{
    int bad = memcmp(got, ref, bytes) != 0;
    printf("%-28s %s\n", what, bad ? "FAILED" : "ok");
    failures += bad;
}

static void check_int(const char *what, long long got, long long want)
{
    if (got != want) {
        printf("%-28s FAILED: %lld, expected %lld\n", what, got, want);
        failures++;
    }
}

static float ref_unary(int op, float v)
{
    switch (op) {
    case OKC_RELU: return v > 0.0f ? v : 0.0f;
    case OKC_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case OKC_SQRT: return sqrtf(v);
    case OKC_ERF: return erff(v);
    case OKC_TANH: return tanhf(v);
    case OKC_GELU: return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
    case OKC_GELU_TANH: return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    default: return -v;
    }
}

static void test_unary(void)
{
    const int64_t n = 1001;
    float *x = floats(n, -3, 3), *y = out_floats(n), *r = out_floats(n);
    for (int op = OKC_RELU; op <= OKC_NEG; op++) {
        for (int64_t i = 0; i < n; i++) {
            if (op == OKC_SQRT)
                x[i] = fabsf(x[i]);
            r[i] = ref_unary(op, x[i]);
        }
        check_int("unary launch", okc_unary_f32(NULL, op, x, y, n), 0);
        char what[64];
        snprintf(what, sizeof what, "unary op %d", op);
        check_f(what, y, r, n, 1e-6);
    }
    int64_t xi[300], yi[300], ri[300];
    for (int i = 0; i < 300; i++) {
        xi[i] = (int64_t)i * 7919 - 1000000;
        ri[i] = -xi[i];
    }
    okc_neg_i64(NULL, xi, yi, 300);
    check_bytes("neg i64", yi, ri, sizeof ri);
    /* bias + ReLU epilogue: rows = N*C planes */
    const int64_t rows = 6, ch = 3, plane = 77;
    float *b = floats(ch, -1, 1), *v = floats(rows * plane, -2, 2), *rv = out_floats(rows * plane);
    for (int64_t i = 0; i < rows * plane; i++)
        rv[i] = fmaxf(v[i] + b[(i / plane) % ch], 0.0f);
    okc_bias_act(NULL, v, b, rows, ch, plane, 1);
    check_f("bias + relu", v, rv, rows * plane, 1e-6);
    free(x), free(y), free(r), free(b), free(v), free(rv);
}

/* out [3, 70, 5]: a [3, 1, 5] and b [1, 70, 5] broadcast, as operands k and k + 1 */
static void make_walk(struct okc_walk *w, int k)
{
    memset(w, 0, sizeof *w);
    w->rank = 3;
    w->dims[0] = 3, w->dims[1] = 70, w->dims[2] = 5;
    w->st[k][0] = 5, w->st[k][1] = 0, w->st[k][2] = 1;
    w->st[k + 1][0] = 0, w->st[k + 1][1] = 5, w->st[k + 1][2] = 1;
}

static void test_binary_where(void)
{
    struct okc_walk w;
    make_walk(&w, 0);
    const int64_t n = 3 * 70 * 5;
    float *a = floats(15, 0.5f, 2), *b = floats(350, -2, 2), *y = out_floats(n), *r = out_floats(n);
    int err = 0;
    for (int op = OKC_ADD; op <= OKC_POW; op++) {
        for (int64_t i = 0; i < n; i++) {
            int64_t o = i / 350, m = (i / 5) % 70, k = i % 5;
            float x = a[o * 5 + k], z = b[m * 5 + k], v;
            switch (op) {
            case OKC_ADD: v = x + z; break;
            case OKC_SUB: v = x - z; break;
            case OKC_MUL: v = x * z; break;
            case OKC_DIV: v = x / z; break;
            default: v = z == 2.0f ? x * x : z == 0.5f ? sqrtf(x) : z == 1.0f ? x : powf(x, z); break;
            }
            r[i] = op == OKC_SUB ? fmaxf(v, 0.0f) : v;   /* SUB with the fused ReLU */
        }
        check_int("binary launch", okc_binary(NULL, op, OKC_F32, OKC_F32, &w, a, b, y, n, op == OKC_SUB, &err), 0);
        char what[64];
        snprintf(what, sizeof what, "binary f32 op %d", op);
        check_f(what, y, r, n, 1e-6);
    }
    /* integer division, with a zero divisor: the error word, and 0 there */
    int64_t ia[15], ib[350], iy[1050], ir[1050];
    for (int i = 0; i < 15; i++)
        ia[i] = (int64_t)i * 1000003 - 7000000;
    for (int i = 0; i < 350; i++)
        ib[i] = i == 123 ? 0 : (i % 2 ? -1 : 1) * (int64_t)(i % 17 + 1);
    for (int64_t i = 0; i < n; i++) {
        int64_t z = ib[((i / 5) % 70) * 5 + i % 5], x = ia[(i / 350) * 5 + i % 5];
        ir[i] = z == 0 ? 0 : x / z;
    }
    err = 0;
    okc_binary(NULL, OKC_DIV, OKC_I64, OKC_I64, &w, ia, ib, iy, n, 0, &err);
    check_bytes("binary i64 div", iy, ir, sizeof ir);
    check_int("i64 div by zero: error", err, OKC_ERR_DIV_ZERO);
    /* a run reports its first error: a later kernel's error leaves an earlier one in place */
    err = OKC_ERR_INDEX;
    okc_binary(NULL, OKC_DIV, OKC_I64, OKC_I64, &w, ia, ib, iy, n, 0, &err);
    check_int("earlier error kept (div)", err, OKC_ERR_INDEX);
    /* Where: operand 0 the condition [70, 1], then a and b */
    struct okc_walk wc;
    make_walk(&wc, 1);
    wc.st[0][1] = 1;
    uint8_t c[70];
    for (int i = 0; i < 70; i++)
        c[i] = (uint8_t)(i % 3 == 0);
    for (int64_t i = 0; i < n; i++)
        r[i] = c[(i / 5) % 70] ? a[(i / 350) * 5 + i % 5] : b[((i / 5) % 70) * 5 + i % 5];
    okc_where(NULL, &wc, c, a, b, y, n, 4);
    check_f("where", y, r, n, 0);
    /* EQ writes bool */
    uint8_t eq[1050], req[1050];
    ia[3] = ib[3] = 5;   /* some equal pairs */
    for (int64_t i = 0; i < n; i++)
        req[i] = ia[(i / 350) * 5 + i % 5] == ib[((i / 5) % 70) * 5 + i % 5];
    okc_binary(NULL, OKC_EQ, OKC_I64, OKC_I64, &w, ia, ib, eq, n, 0, &err);
    check_bytes("equal i64", eq, req, sizeof req);
    free(a), free(b), free(y), free(r);
}

static void test_copy_cast(void)
{
    /* transpose x [4, 5, 13] -> y [13, 4, 5] */
    struct okc_walk w;
    memset(&w, 0, sizeof w);
    w.rank = 3;
    w.dims[0] = 13, w.dims[1] = 4, w.dims[2] = 5;
    w.st[0][0] = 1, w.st[0][1] = 65, w.st[0][2] = 13;
    const int64_t n = 260;
    float *x = floats(n, -1, 1), *y = out_floats(n), *r = out_floats(n);
    for (int64_t i = 0; i < n; i++)
        r[i] = x[(i % 5) * 13 + ((i / 5) % 4) * 65 + i / 20];
    okc_strided_copy(NULL, &w, x, y, n, 4);
    check_f("strided copy (transpose)", y, r, n, 0);
    /* casts */
    int64_t li[n], lr[n];
    for (int64_t i = 0; i < n; i++) {
        x[i] *= 1000;
        lr[i] = (int64_t)(double)x[i];
    }
    int err = 0;
    okc_cast(NULL, OKC_F32, OKC_I64, x, li, n, &err);
    check_bytes("cast f32 -> i64", li, lr, sizeof lr);
    check_int("cast: no error", err, 0);
    for (int64_t i = 0; i < n; i++)
        r[i] = (float)lr[i];
    okc_cast(NULL, OKC_I64, OKC_F32, lr, y, n, &err);
    check_f("cast i64 -> f32", y, r, n, 0);
    uint8_t bo[n], br[n];
    for (int64_t i = 0; i < n; i++) {
        x[i] = i % 4 ? x[i] : 0.0f;
        br[i] = x[i] != 0.0f;
    }
    okc_cast(NULL, OKC_F32, OKC_BOOL, x, bo, n, &err);
    check_bytes("cast f32 -> bool", bo, br, sizeof br);
    x[200] = NAN;
    okc_cast(NULL, OKC_F32, OKC_I64, x, li, n, &err);
    check_int("cast NaN -> i64: error", err, OKC_ERR_CAST);
    err = OKC_ERR_DIV_ZERO;
    okc_cast(NULL, OKC_F32, OKC_I64, x, li, n, &err);
    check_int("earlier error kept (cast)", err, OKC_ERR_DIV_ZERO);
    free(x), free(y), free(r);
}

static void test_pool_norm(void)
{
    struct okc_pool p = { 0 };
    p.rows = 3, p.H = 17, p.W = 19, p.kh = 3, p.kw = 2, p.sh = 2, p.sw = 1, p.dh = 1, p.dw = 2, p.ph = 1, p.pw = 1;
    p.pad_end_h = 1, p.pad_end_w = 0;
    p.OH = (p.H + p.ph + p.pad_end_h - ((p.kh - 1) * p.dh + 1)) / p.sh + 1;
    p.OW = (p.W + p.pw + p.pad_end_w - ((p.kw - 1) * p.dw + 1)) / p.sw + 1;
    int64_t nx = p.rows * p.H * p.W, ny = p.rows * p.OH * p.OW;
    float *x = floats(nx, -1, 1), *y = out_floats(nx), *r = out_floats(nx);   /* ny < nx */
    for (int mx = 0; mx <= 1; mx++) {
        p.max = mx;
        p.dh = p.dw = mx ? 2 : 1;   /* average pooling has no dilation */
        p.OH = (p.H + p.ph + p.pad_end_h - ((p.kh - 1) * p.dh + 1)) / p.sh + 1;
        p.OW = (p.W + p.pw + p.pad_end_w - ((p.kw - 1) * p.dw + 1)) / p.sw + 1;
        ny = p.rows * p.OH * p.OW;
        for (int64_t i = 0; i < ny; i++) {
            int64_t ow = i % p.OW, oh = (i / p.OW) % p.OH, rr = i / (p.OW * p.OH);
            float m = -INFINITY, s = 0;
            int64_t cnt = 0;
            for (int64_t a = 0; a < p.kh; a++)
                for (int64_t b = 0; b < p.kw; b++) {
                    int64_t ih = oh * p.sh - p.ph + a * p.dh, iw = ow * p.sw - p.pw + b * p.dw;
                    if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W)
                        continue;
                    float v = x[(rr * p.H + ih) * p.W + iw];
                    m = fmaxf(m, v);
                    s += v;
                    cnt++;
                }
            r[i] = mx ? m : cnt ? s / (float)cnt : 0.0f;
        }
        okc_pool2d(NULL, &p, x, y);
        check_f(mx ? "max pool (dilated, padded)" : "average pool (padded)", y, r, ny, 1e-6);
    }
    /* global average pooling: 3 planes of 300 (a block of 128 threads per plane) */
    float *g = out_floats(3), *gr = out_floats(3);
    for (int rr = 0; rr < 3; rr++) {
        double s = 0;
        for (int i = 0; i < 300; i++)
            s += x[rr * 300 + i];
        gr[rr] = (float)(s / 300);
    }
    okc_global_avgpool(NULL, x, g, 3, 300);
    check_f("global average pool", g, gr, 3, 1e-5);
    /* batch normalisation with ReLU, 2 x 3 channels x 41 */
    float sc[3] = { 0.5f, -1.25f, 2 }, bi[3] = { 0.1f, 0.2f, -0.3f }, mu[3] = { 0.05f, -0.1f, 0 }, va[3] = { 1, 0.25f, 4 };
    for (int64_t i = 0; i < 246; i++) {
        int64_t c = (i / 41) % 3;
        float k = sc[c] / sqrtf(va[c] + 1e-5f);
        r[i] = fmaxf(x[i] * k + (bi[c] - mu[c] * k), 0.0f);
    }
    okc_batchnorm(NULL, x, y, sc, bi, mu, va, 246, 3, 41, 1e-5f, 1);
    check_f("batch normalisation + relu", y, r, 246, 1e-6);
    free(x), free(y), free(r), free(g), free(gr);
}

static void test_rows(void)
{
    /* softmax over n spaced inner apart: n = 300 (several warps), and n = 5 (part of one) */
    const int64_t shapes[2][3] = { { 3, 300, 2 }, { 7, 5, 3 } };
    for (int s = 0; s < 2; s++) {
        int64_t outer = shapes[s][0], n = shapes[s][1], inner = shapes[s][2], tot = outer * n * inner;
        float *x = floats(tot, -4, 4), *y = out_floats(tot), *r = out_floats(tot);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t in = 0; in < inner; in++) {
                const float *xp = x + o * n * inner + in;
                float m = -INFINITY;
                double sum = 0;
                for (int64_t i = 0; i < n; i++)
                    m = fmaxf(m, xp[i * inner]);
                for (int64_t i = 0; i < n; i++)
                    sum += expf(xp[i * inner] - m);
                for (int64_t i = 0; i < n; i++)
                    r[o * n * inner + in + i * inner] = (float)(expf(xp[i * inner] - m) / sum);
            }
        okc_softmax(NULL, x, y, outer, n, inner);
        check_f(s ? "softmax (5 per row)" : "softmax (300 per row)", y, r, tot, 1e-5);
        free(x), free(y), free(r);
    }
    /* layer normalisation: 4 rows of 1000, with and without bias */
    const int64_t rows = 4, n = 1000;
    float *x = floats(rows * n, -2, 3), *y = out_floats(rows * n), *r = out_floats(rows * n);
    float *sc = floats(n, 0.5f, 1.5f), *bi = floats(n, -1, 1);
    for (int with_bias = 0; with_bias <= 1; with_bias++) {
        for (int64_t rr = 0; rr < rows; rr++) {
            const float *xp = x + rr * n;
            double s = 0, v = 0;
            for (int64_t i = 0; i < n; i++)
                s += xp[i];
            double mean = s / n;
            for (int64_t i = 0; i < n; i++)
                v += (xp[i] - mean) * (xp[i] - mean);
            double inv = 1 / sqrt(v / n + 1e-5);
            for (int64_t i = 0; i < n; i++)
                r[rr * n + i] = (float)((xp[i] - mean) * inv * sc[i] + (with_bias ? bi[i] : 0));
        }
        okc_layernorm(NULL, x, y, sc, with_bias ? bi : NULL, rows, n, 1e-5f);
        check_f(with_bias ? "layer normalisation + bias" : "layer normalisation", y, r, rows * n, 1e-5);
    }
    /* ReduceMean of x [4, 6, 50] over axis 1 -> [4, 50] */
    struct okc_reduce red = { 0 };
    red.kr = 2, red.kdims[0] = 4, red.kdims[1] = 50, red.kst[0] = 300, red.kst[1] = 1;
    red.rr = 1, red.rdims[0] = 6, red.rst[0] = 50, red.count = 6;
    for (int64_t o = 0; o < 200; o++) {
        double s = 0;
        for (int j = 0; j < 6; j++)
            s += x[(o / 50) * 300 + j * 50 + o % 50];
        r[o] = (float)(s / 6);
    }
    okc_reduce_mean(NULL, &red, x, y, 200);
    check_f("reduce mean", y, r, 200, 1e-6);
    free(x), free(y), free(r), free(sc), free(bi);
}

static void test_gather_pad(void)
{
    /* x [3, 7, 33] gathered along axis 1 by {0, -1, 6, 2, -7} */
    const int64_t outer = 3, dim = 7, inner = 33, nidx = 5, n = outer * nidx * inner;
    int64_t idx[5] = { 0, -1, 6, 2, -7 };
    float *x = floats(outer * dim * inner, -1, 1), *y = out_floats(n), *r = out_floats(n);
    for (int64_t i = 0; i < n; i++) {
        int64_t in = i % inner, k = (i / inner) % nidx, o = i / (inner * nidx), j = idx[k] < 0 ? idx[k] + dim : idx[k];
        r[i] = x[(o * dim + j) * inner + in];
    }
    int err = 0;
    okc_gather(NULL, x, idx, y, outer, dim, nidx, inner, 4, &err);
    check_f("gather", y, r, n, 0);
    check_int("gather: no error", err, 0);
    idx[3] = 7;
    okc_gather(NULL, x, idx, y, outer, dim, nidx, inner, 4, &err);
    check_int("gather index 7 of 7: error", err, OKC_ERR_INDEX);
    err = OKC_ERR_CAST;
    okc_gather(NULL, x, idx, y, outer, dim, nidx, inner, 4, &err);
    check_int("earlier error kept (gather)", err, OKC_ERR_CAST);
    /* pad x [3, 4, 45] to [5, 7, 50] at (1, 2, 3) with 1.5 */
    struct okc_pad p = { 0 };
    p.rank = 3;
    p.xdims[0] = 3, p.xdims[1] = 4, p.xdims[2] = 45;
    p.ydims[0] = 5, p.ydims[1] = 7, p.ydims[2] = 50;
    p.begin[0] = 1, p.begin[1] = 2, p.begin[2] = 3;
    const int64_t np = 5 * 7 * 50;
    float *py = out_floats(np), *pr = out_floats(np);
    for (int64_t i = 0; i < np; i++) {
        int64_t a = i / 350 - 1, b = (i / 50) % 7 - 2, c = i % 50 - 3;
        pr[i] = a >= 0 && a < 3 && b >= 0 && b < 4 && c >= 0 && c < 45 ? x[(a * 4 + b) * 45 + c] : 1.5f;
    }
    okc_pad(NULL, &p, x, py, np, 4, 1.5f, 0);
    check_f("pad", py, pr, np, 0);
    free(x), free(y), free(r), free(py), free(pr);
}

int main(void)
{
    test_unary();
    test_binary_where();
    test_copy_cast();
    test_pool_norm();
    test_rows();
    test_gather_pad();
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
