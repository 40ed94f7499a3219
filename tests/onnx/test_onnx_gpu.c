/*
 * test_onnx_gpu — the CUDA backend against the CPU backend, operator by operator (suite gpu).
 *
 * Small graphs (written with pbw.h) with random shapes, attributes and values cover every
 * operator the CUDA backend runs; each runs on the CPU backend (the reference, itself checked
 * by test_onnx_ops and against PyTorch) and on CUDA in FP32 without and with CUDA graphs
 * (three runs: warm-up, capture, replay). Relative L2 error <= 1e-5, or 1e-4 for Conv, Gemm
 * and MatMul (cuDNN/cuBLAS sum in another order); integer and bool outputs must be equal.
 * Then: TF32 and FP16 sessions run (1e-2), a session names each convolution's cuDNN algorithm
 * (FMA math in FP32), the errors only the device can see (a Gather index
 * out of range, an integer division by zero) are reported, device memory is accounted, and
 * the element types and operators the backend does not compute are refused.
 * Exits 77 (skipped) where the CUDA backend cannot run.
 *
 *   test_onnx_gpu [SEED]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_log.h"
#include "infer/onnx/onnx_model.h"
#include "pbw.h"

static int failures, checks;
static uint32_t seed = 20240917u;

static uint32_t rnd(void)
{
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
}

/* uniform integer in [lo, hi] */
static int64_t ri(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd() % (uint32_t)(hi - lo + 1));
}

static float rf(float lo, float hi)
{
    return lo + (hi - lo) * (float)rnd() / 16777216.0f;
}

/* ---- buffers of one case, freed together -------------------------------------------------- */

static void *bufs[64];
static int n_bufs;

static void *keep(void *p)
{
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    if (n_bufs < 64)
        bufs[n_bufs++] = p;
    return p;
}

static void free_bufs(void)
{
    for (int i = 0; i < n_bufs; i++)
        free(bufs[i]);
    n_bufs = 0;
}

static int64_t numel(int rank, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= d[i];
    return n;
}

static float *rfloats(int64_t n, float lo, float hi)
{
    float *p = keep(malloc((size_t)n * 4 + 4));
    for (int64_t i = 0; i < n; i++)
        p[i] = rf(lo, hi);
    return p;
}

/* ---- running and comparing ----------------------------------------------------------------- */

static double rel_l2(const float *a, const float *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return sqrt(num / (den > 0 ? den : 1e-30));
}

/* Runs a session over ins, outputs into freshly allocated buffers (kept). NULL: error in msg. */
static void **run_session(onnx_model *m, const struct onnx_session_options *o, int reps, const void *const *ins,
                          char *msg, size_t msglen, size_t *device_bytes)
{
    struct gj_error err = { 0 };
    onnx_session *s = onnx_session_create(m, o, &err);
    if (!s) {
        snprintf(msg, msglen, "%s", err.message);
        return NULL;
    }
    size_t no = onnx_model_num_outputs(m);
    void **outs = keep(calloc(no + 1, sizeof *outs));
    for (size_t i = 0; i < no; i++)
        outs[i] = keep(malloc(onnx_session_output_bytes(s, i) + 8));
    if (device_bytes)
        *device_bytes = onnx_session_device_bytes(s);
    for (int r = 0; r < reps; r++) {
        for (size_t i = 0; i < no; i++)
            memset(outs[i], 0xff, onnx_session_output_bytes(s, i));   /* NaN: a skipped write shows */
        if (onnx_session_run(s, ins, outs, &err)) {
            snprintf(msg, msglen, "run %d: %s", r + 1, err.message);
            onnx_session_free(s);
            return NULL;
        }
    }
    onnx_session_free(s);
    return outs;
}

/* The model on CPU and on CUDA (FP32, CUDA graphs off and on): every output within tol. */
static void compare(const char *what, struct pb *mp, int batch, const void *const *ins, double tol)
{
    struct gj_error err = { 0 };
    char msg[600];
    checks++;
    onnx_model *m = onnx_model_load_memory(mp->b, mp->n, &err);
    free(mp->b);
    mp->b = NULL;
    if (!m) {
        printf("FAIL %s: load: %s\n", what, err.message);
        failures++;
        free_bufs();
        return;
    }
    struct onnx_session_options cpu = { .batch = batch, .threads = 2, .backend = "cpu" };
    void **ref = run_session(m, &cpu, 1, ins, msg, sizeof msg, NULL);
    if (!ref) {
        printf("FAIL %s: cpu: %s\n", what, msg);
        failures++;
        goto out;
    }
    for (int graphs = 0; graphs < 2; graphs++) {
        struct onnx_session_options o = { .batch = batch, .threads = 2, .backend = "cuda", .cuda_graphs = graphs };
        size_t dev = 0;
        void **got = run_session(m, &o, graphs ? 3 : 1, ins, msg, sizeof msg, &dev);
        if (!got) {
            printf("FAIL %s (graphs %d): cuda: %s\n", what, graphs, msg);
            failures++;
            continue;
        }
        if (dev == 0) {
            printf("FAIL %s: onnx_session_device_bytes is 0 for a cuda session\n", what);
            failures++;
        }
        /* sizes from a CPU session of the same shapes */
        onnx_session *s = onnx_session_create(m, &cpu, &err);
        for (size_t i = 0; s && i < onnx_model_num_outputs(m); i++) {
            const struct onnx_io_desc *d = onnx_session_output(s, i);
            size_t bytes = onnx_session_output_bytes(s, i);
            if (d->elem_type == T_FLOAT) {
                double e = rel_l2(got[i], ref[i], (int64_t)(bytes / 4));
                if (!(e <= tol)) {
                    printf("FAIL %s (graphs %d): output %zu: relative L2 %.3g over %.3g\n", what, graphs, i, e, tol);
                    failures++;
                }
            } else if (memcmp(got[i], ref[i], bytes)) {
                printf("FAIL %s (graphs %d): output %zu (%s) differs\n", what, graphs, i,
                       d->elem_type == T_INT64 ? "int64" : "bool");
                failures++;
            }
        }
        onnx_session_free(s);
    }
out:
    onnx_model_free(m);
    free_bufs();
}

/* A model with one float input x of dims (batch = dims[0]). */
static void compare1(const char *what, struct pb *mp, const int64_t *dims, const float *x, double tol)
{
    const void *ins[1] = { x };
    compare(what, mp, (int)dims[0], ins, tol);
}

/* ---- operators ------------------------------------------------------------------------------ */

static void test_conv(void)
{
    for (int it = 0; it < 24; it++) {
        int64_t N = ri(1, 3), G = it % 4 == 3 ? ri(2, 4) : 1, Cg = ri(1, 5), Mg = ri(1, 6);
        int64_t C = Cg * G, M = Mg * G;
        if (it % 6 == 5) {   /* depthwise */
            G = C = M = ri(2, 8);
            Cg = 1;
        }
        int64_t kh = ri(1, 5), kw = ri(1, 5), sh = ri(1, 3), sw = ri(1, 3), dh = ri(1, 2), dw = ri(1, 2);
        int64_t pads[4] = { ri(0, 2), ri(0, 2), ri(0, 2), ri(0, 2) };
        if (it % 3 == 0) {   /* symmetric (cuDNN's own padding); else asymmetric (padded first) */
            pads[2] = pads[0];
            pads[3] = pads[1];
        }
        int64_t H = (kh - 1) * dh + 1 + ri(0, 12), W = (kw - 1) * dw + 1 + ri(0, 12);
        int64_t xd[4] = { N, C, H, W }, wd[4] = { M, C / G, kh, kw };
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 4, xd);
        gb_init(&b, "w", T_FLOAT, 4, wd, rfloats(numel(4, wd), -0.5f, 0.5f));
        int bias = it % 2, relu = (it / 2) % 2;
        if (bias)
            gb_init(&b, "b", T_FLOAT, 1, D(M), rfloats(M, -0.5f, 0.5f));
        struct pb at[4] = { pb_attr_ints("pads", 4, pads), pb_attr_ints("strides", 2, D(sh, sw)),
                            pb_attr_ints("dilations", 2, D(dh, dw)), pb_attr_int("group", G) };
        gb_node(&b, "Conv", bias ? S("x", "w", "b") : S("x", "w"), S(relu ? "c" : "y"), 4, at);
        if (relu)
            gb_node(&b, "Relu", S("c"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        char what[160];
        snprintf(what, sizeof what, "Conv x%lldx%lldx%lldx%lld w%lldx%lldx%lldx%lld s%lld,%lld d%lld,%lld p%lld,%lld,%lld,%lld g%lld%s%s",
                 (long long)N, (long long)C, (long long)H, (long long)W, (long long)M, (long long)(C / G),
                 (long long)kh, (long long)kw, (long long)sh, (long long)sw, (long long)dh, (long long)dw,
                 (long long)pads[0], (long long)pads[1], (long long)pads[2], (long long)pads[3], (long long)G,
                 bias ? " bias" : "", relu ? " relu" : "");
        compare1(what, &m, xd, rfloats(numel(4, xd), -1, 1), 1e-4);
    }
    /* Conv -> BatchNormalization -> Relu: folded into the Conv at session creation */
    int64_t xd[4] = { 2, 3, 9, 7 }, wd[4] = { 5, 3, 3, 3 };
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 4, xd);
    gb_init(&b, "w", T_FLOAT, 4, wd, rfloats(numel(4, wd), -0.5f, 0.5f));
    gb_init(&b, "s", T_FLOAT, 1, D(5), rfloats(5, 0.5f, 1.5f));
    gb_init(&b, "bb", T_FLOAT, 1, D(5), rfloats(5, -0.2f, 0.2f));
    gb_init(&b, "mu", T_FLOAT, 1, D(5), rfloats(5, -0.2f, 0.2f));
    gb_init(&b, "var", T_FLOAT, 1, D(5), rfloats(5, 0.5f, 1.5f));
    struct pb at[1] = { pb_attr_ints("pads", 4, D(1, 1, 1, 1)) };
    gb_node(&b, "Conv", S("x", "w"), S("c"), 1, at);
    gb_node(&b, "BatchNormalization", S("c", "s", "bb", "mu", "var"), S("n"), 0, NULL);
    gb_node(&b, "Relu", S("n"), S("y"), 0, NULL);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    compare1("Conv+BatchNormalization+Relu", &m, xd, rfloats(numel(4, xd), -1, 1), 1e-4);
}

static void test_batchnorm_pools(void)
{
    for (int it = 0; it < 4; it++) {   /* BatchNormalization on an input: not folded */
        int64_t C = ri(1, 6), xd[4] = { ri(1, 3), C, ri(1, 9), ri(1, 9) };
        int rank = it == 3 ? 2 : 4;
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, rank, xd);
        gb_init(&b, "s", T_FLOAT, 1, D(C), rfloats(C, 0.5f, 1.5f));
        gb_init(&b, "bb", T_FLOAT, 1, D(C), rfloats(C, -0.2f, 0.2f));
        gb_init(&b, "mu", T_FLOAT, 1, D(C), rfloats(C, -0.2f, 0.2f));
        gb_init(&b, "var", T_FLOAT, 1, D(C), rfloats(C, 0.5f, 1.5f));
        gb_node(&b, "BatchNormalization", S("x", "s", "bb", "mu", "var"), S(it % 2 ? "n" : "y"), 0, NULL);
        if (it % 2)
            gb_node(&b, "Relu", S("n"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1("BatchNormalization", &m, xd, rfloats(numel(rank, xd), -1, 1), 1e-5);
    }
    for (int it = 0; it < 16; it++) {
        int max = it % 2;
        int64_t kh = ri(1, 4), kw = ri(1, 4), sh = ri(1, 3), sw = ri(1, 3);
        int64_t dh = max ? ri(1, 2) : 1, dw = max ? ri(1, 2) : 1;
        int64_t pads[4] = { ri(0, kh - 1), ri(0, kw - 1), ri(0, kh - 1), ri(0, kw - 1) };
        int64_t xd[4] = { ri(1, 3), ri(1, 4), (kh - 1) * dh + 1 + ri(0, 9), (kw - 1) * dw + 1 + ri(0, 9) };
        int ceil = (it / 2) % 2, cip = (it / 4) % 2;
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 4, xd);
        struct pb at[5] = { pb_attr_ints("kernel_shape", 2, D(kh, kw)), pb_attr_ints("strides", 2, D(sh, sw)),
                            pb_attr_ints("pads", 4, pads), pb_attr_int("ceil_mode", ceil),
                            max ? pb_attr_ints("dilations", 2, D(dh, dw)) : pb_attr_int("count_include_pad", cip) };
        gb_node(&b, max ? "MaxPool" : "AveragePool", S("x"), S("y"), 5, at);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1(max ? "MaxPool" : "AveragePool", &m, xd, rfloats(numel(4, xd), -1, 1), 1e-5);
    }
    int64_t xd[4] = { 3, 5, 7, 6 };
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 4, xd);
    gb_node(&b, "GlobalAveragePool", S("x"), S("y"), 0, NULL);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    compare1("GlobalAveragePool", &m, xd, rfloats(numel(4, xd), -1, 1), 1e-5);
}

static void test_gemm_matmul(void)
{
    for (int it = 0; it < 16; it++) {
        int64_t M = ri(1, 9), K = ri(1, 40), N = ri(1, 33);
        int ta = it % 2, tb = (it / 2) % 2, cshape = it % 6, relu = it % 3 == 0;
        int64_t ad[2] = { ta ? K : M, ta ? M : K }, bd[2] = { tb ? N : K, tb ? K : N };
        struct gb b = { 0 };
        gb_input(&b, "a", T_FLOAT, 2, ad);
        gb_init(&b, "w", T_FLOAT, 2, bd, rfloats(K * N, -0.5f, 0.5f));
        static const int crank[6] = { -1, 1, 2, 2, 2, 0 };
        int64_t cd[2] = { 1, N };
        if (cshape == 3) { cd[0] = M; cd[1] = 1; }
        if (cshape == 4) { cd[0] = M; cd[1] = N; }
        if (cshape == 1) cd[0] = N;
        if (crank[cshape] >= 0)
            gb_init(&b, "c", T_FLOAT, crank[cshape], cd, rfloats(M * N, -1, 1));
        struct pb at[4] = { pb_attr_int("transA", ta), pb_attr_int("transB", tb), pb_attr_float("alpha", rf(0.5f, 2)),
                            pb_attr_float("beta", rf(0.5f, 2)) };
        gb_node(&b, "Gemm", crank[cshape] >= 0 ? S("a", "w", "c") : S("a", "w"), S(relu ? "g" : "y"), 4, at);
        if (relu)
            gb_node(&b, "Relu", S("g"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1("Gemm", &m, ad, rfloats(numel(2, ad), -1, 1), 1e-4);
    }
    /* MatMul: one B (A's batch folded into M), equal batches (strided batched), a broadcast A,
     * and a general batch broadcast (one GEMM per batch entry) */
    for (int it = 0; it < 8; it++) {
        int64_t Bt = ri(1, 3), M = ri(1, 17), K = ri(1, 30), N = ri(1, 20);
        struct gb b = { 0 };
        int64_t ad[4], bd[4];
        int ar = 3, br = 2;
        ad[0] = Bt; ad[1] = M; ad[2] = K;
        bd[0] = K; bd[1] = N;
        switch (it % 4) {
        case 1: br = 3; bd[0] = Bt; bd[1] = K; bd[2] = N; break;
        case 2: ar = 2; ad[0] = M; ad[1] = K; br = 3; bd[0] = Bt; bd[1] = K; bd[2] = N; break;
        case 3: ar = 4; ad[1] = 1; ad[2] = M; ad[3] = K; br = 3; bd[0] = 3; bd[1] = K; bd[2] = N; break;
        default: break;
        }
        gb_input(&b, "a", T_FLOAT, ar, ad);
        gb_init(&b, "w", T_FLOAT, br, bd, rfloats(numel(br, bd), -0.5f, 0.5f));
        gb_node(&b, "MatMul", S("a", "w"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1("MatMul", &m, ad, rfloats(numel(ar, ad), -1, 1), 1e-4);
    }
    {   /* both operands computed: attention-like [B,h,T,d] x [B,h,d,T] */
        int64_t xd[4] = { 2, 3, 5, 8 };
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 4, xd);
        struct pb tp[1] = { pb_attr_ints("perm", 4, D(0, 1, 3, 2)) };
        gb_node(&b, "Transpose", S("x"), S("xt"), 1, tp);
        gb_node(&b, "MatMul", S("x", "xt"), S("s"), 0, NULL);
        gb_node(&b, "Softmax", S("s"), S("p"), 0, NULL);
        gb_node(&b, "MatMul", S("p", "x"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1("attention", &m, xd, rfloats(numel(4, xd), -1, 1), 1e-4);
    }
}

/* A random shape of rank r (batch first) and one that broadcasts to it. */
static void bshape(int r, int64_t *d, int *rb, int64_t *db)
{
    for (int i = 0; i < r; i++)
        d[i] = ri(1, 6);
    *rb = (int)ri(0, r);
    for (int i = 0; i < *rb; i++)
        db[i] = rnd() % 2 ? d[r - *rb + i] : 1;
}

/* Add, Sub, Mul, Div, Pow with broadcasting (fused ReLU after Add) */
static void test_binary(void)
{
    const char *ops[] = { "Add", "Sub", "Mul", "Div", "Pow" };
    for (int it = 0; it < 20; it++) {
        const char *op = ops[it % 5];
        int r = (int)ri(1, 5), rb;
        int64_t d[8], db[8];
        bshape(r, d, &rb, db);
        int pos = it % 5 >= 3;   /* Div, Pow: keep away from 0 and negative bases */
        int swap = it % 2 && strcmp(op, "Pow");
        int relu = strcmp(op, "Add") == 0 && it % 2 == 0;
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, r, d);
        gb_init(&b, "c", T_FLOAT, rb, db, rfloats(numel(rb, db), pos ? 0.5f : -1, pos ? 2 : 1));
        gb_node(&b, op, swap ? S("c", "x") : S("x", "c"), S(relu ? "s" : "y"), 0, NULL);
        if (relu)
            gb_node(&b, "Relu", S("s"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1(op, &m, d, rfloats(numel(r, d), pos ? 0.5f : -1, pos ? 2 : 1), 1e-5);
    }
}

/* Pow with the exponents 2 and 0.5 (the special cases) and an int64 exponent */
static void test_pow(void)
{
    int64_t d[2] = { 3, 7 };
    float two = 2, half = 0.5f;
    int64_t three = 3;
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 2, d);
    gb_init(&b, "two", T_FLOAT, 0, NULL, &two);
    gb_init(&b, "half", T_FLOAT, 0, NULL, &half);
    gb_init(&b, "three", T_INT64, 0, NULL, &three);
    gb_node(&b, "Pow", S("x", "two"), S("p2"), 0, NULL);
    gb_node(&b, "Pow", S("p2", "half"), S("p3"), 0, NULL);
    gb_node(&b, "Pow", S("p3", "three"), S("y"), 0, NULL);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    compare1("Pow special exponents", &m, d, rfloats(6 * 7, 0.1f, 2), 1e-5);
}

/* every unary operator; Gelu with approximate="tanh" */
static void test_unary(void)
{
    const char *un[] = { "Relu", "Sigmoid", "Sqrt", "Erf", "Gelu", "Tanh", "Neg" };
    for (int k = 0; k < 7; k++) {
        int64_t d[3] = { ri(1, 4), ri(1, 50), ri(1, 50) };
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 3, d);
        gb_node(&b, un[k], S("x"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1(un[k], &m, d, rfloats(numel(3, d), k == 2 ? 0 : -3, 3), 1e-5);
    }
    {
        int64_t d[2] = { 4, 33 };
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 2, d);
        struct pb ga[1] = { pb_attr_str("approximate", "tanh") };
        gb_node(&b, "Gelu", S("x"), S("y"), 1, ga);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1("Gelu tanh", &m, d, rfloats(4 * 33, -3, 3), 1e-5);
    }
}

/* Where(Equal(round(x), c), x, z) with broadcasting; Equal's bool output too */
static void test_where(void)
{
    int64_t d[3] = { 3, 4, 5 };
    float cv[5] = { 0, 1, -1, 0, 1 };
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 3, d);
    gb_init(&b, "c", T_FLOAT, 1, D(5), cv);
    gb_init(&b, "z", T_FLOAT, 2, D(4, 1), rfloats(4, -1, 1));
    gb_node(&b, "Equal", S("x", "c"), S("e"), 0, NULL);
    gb_node(&b, "Where", S("e", "x", "z"), S("y"), 0, NULL);
    gb_output(&b, "y");
    gb_output(&b, "e");
    struct pb m = gb_finish(&b);
    float *x = rfloats(60, -1, 1);
    for (int i = 0; i < 60; i++)
        x[i] = (float)(int)(x[i] * 1.5f);   /* -1, 0, 1: many equal */
    compare1("Equal/Where", &m, d, x, 0);
}

/* int64 arithmetic from a Cast of the input, Neg, and back */
static void test_int64(void)
{
    int64_t d[2] = { 3, 8 };
    int64_t dv[8] = { 1, 2, 3, -1, -2, 5, 7, -3 };
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 2, d);
    gb_init(&b, "dv", T_INT64, 1, D(8), dv);
    struct pb to_i[1] = { pb_attr_int("to", 7) }, to_f[1] = { pb_attr_int("to", 1) }, to_b[1] = { pb_attr_int("to", 9) };
    gb_node(&b, "Cast", S("x"), S("i"), 1, to_i);
    gb_node(&b, "Add", S("i", "dv"), S("a"), 0, NULL);
    gb_node(&b, "Mul", S("a", "dv"), S("mu"), 0, NULL);
    gb_node(&b, "Sub", S("mu", "i"), S("sb"), 0, NULL);
    gb_node(&b, "Div", S("sb", "dv"), S("dq"), 0, NULL);
    gb_node(&b, "Neg", S("dq"), S("ng"), 0, NULL);
    gb_node(&b, "Equal", S("ng", "dv"), S("eq"), 0, NULL);
    gb_node(&b, "Cast", S("ng"), S("y"), 1, to_f);
    gb_node(&b, "Cast", S("x"), S("xb"), 1, to_b);
    gb_node(&b, "Cast", S("xb"), S("yb"), 1, to_f);
    gb_output(&b, "y");
    gb_output(&b, "eq");
    gb_output(&b, "yb");
    gb_output(&b, "ng");
    struct pb m = gb_finish(&b);
    float *x = rfloats(24, -20, 20);
    x[3] = 0;
    compare1("int64 arithmetic and Cast", &m, d, x, 0);
}

static void test_elementwise(void)
{
    test_binary();
    test_pow();
    test_unary();
    test_where();
    test_int64();
}

static void test_rows(void)
{
    for (int it = 0; it < 6; it++) {   /* Softmax: any axis (opset 13), coerced 2-D (opset 11) */
        int r = (int)ri(2, 4);
        int64_t d[4];
        for (int i = 0; i < r; i++)
            d[i] = ri(1, 7);
        if (it == 5)
            d[r - 1] = 700;   /* longer rows than a block */
        struct gb b = { 0 };
        b.opset = it % 2 ? 11 : 13;
        gb_input(&b, "x", T_FLOAT, r, d);
        struct pb at[1] = { pb_attr_int("axis", ri(-r, r - 1)) };
        gb_node(&b, "Softmax", S("x"), S("y"), 1, at);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1(b.opset == 11 ? "Softmax opset 11" : "Softmax", &m, d, rfloats(numel(r, d), -4, 4), 1e-5);
    }
    for (int it = 0; it < 4; it++) {
        int64_t d[3] = { ri(1, 4), ri(1, 9), it == 3 ? 1000 : ri(1, 70) };
        int ax = it == 2 ? 1 : 2;
        int64_t inner = ax == 1 ? d[1] * d[2] : d[2];
        int64_t sd[2] = { d[1], d[2] };
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 3, d);
        gb_init(&b, "s", T_FLOAT, ax == 1 ? 2 : 1, ax == 1 ? sd : &d[2], rfloats(inner, 0.5f, 1.5f));
        gb_init(&b, "bb", T_FLOAT, ax == 1 ? 2 : 1, ax == 1 ? sd : &d[2], rfloats(inner, -1, 1));
        struct pb at[2] = { pb_attr_int("axis", ax), pb_attr_float("epsilon", 1e-5f) };
        gb_node(&b, "LayerNormalization", it % 2 ? S("x", "s") : S("x", "s", "bb"), S("y"), 2, at);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1("LayerNormalization", &m, d, rfloats(numel(3, d), -2, 3), 1e-5);
    }
    for (int it = 0; it < 6; it++) {   /* ReduceMean: attribute axes (13), input axes (18), keepdims */
        int64_t d[4] = { ri(1, 3), ri(1, 5), ri(1, 6), ri(1, 7) };
        int64_t axes[2] = { ri(-4, 3), 0 };
        axes[1] = (axes[0] + 4 + ri(1, 3)) % 4;
        int na = (int)ri(1, 2);
        struct gb b = { 0 };
        b.opset = it % 2 ? 18 : 13;
        gb_input(&b, "x", T_FLOAT, 4, d);
        struct pb at[2] = { pb_attr_int("keepdims", it / 2 % 2), pb_attr_ints("axes", na, axes) };
        if (b.opset == 18) {
            gb_init(&b, "ax", T_INT64, 1, D(na), axes);
            gb_node(&b, "ReduceMean", S("x", "ax"), S("y"), 1, at);
        } else {
            gb_node(&b, "ReduceMean", S("x"), S("y"), 2, at);
        }
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1("ReduceMean", &m, d, rfloats(numel(4, d), -1, 1), 1e-5);
    }
}

/* Transpose of a random permutation */
static void test_transpose(void)
{
    for (int it = 0; it < 8; it++) {
        int r = (int)ri(2, 5);
        int64_t d[5], perm[5];
        for (int i = 0; i < r; i++) {
            d[i] = ri(1, 5);
            perm[i] = i;
        }
        for (int i = r - 1; i > 0; i--) {
            int j = (int)ri(0, i);
            int64_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, r, d);
        struct pb at[1] = { pb_attr_ints("perm", r, perm) };
        gb_node(&b, "Transpose", S("x"), S("y"), 1, at);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1("Transpose", &m, d, rfloats(numel(r, d), -1, 1), 0);
    }
}

/* Slice, steps of either sign, clamped ends */
static void test_slice(void)
{
    for (int it = 0; it < 8; it++) {
        int64_t d[3] = { ri(1, 3), ri(2, 9), ri(2, 9) };
        int64_t st[2], en[2], ax[2] = { 1, 2 }, sp[2];
        for (int k = 0; k < 2; k++) {
            int64_t dim = d[1 + k];
            sp[k] = rnd() % 2 ? ri(1, 3) : -ri(1, 3);
            st[k] = ri(-dim, dim);
            en[k] = sp[k] > 0 ? (rnd() % 3 ? ri(-dim, dim) : INT64_MAX) : (rnd() % 3 ? ri(-dim, dim) : INT64_MIN);
        }
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 3, d);
        gb_init(&b, "st", T_INT64, 1, D(2), st);
        gb_init(&b, "en", T_INT64, 1, D(2), en);
        gb_init(&b, "ax", T_INT64, 1, D(2), ax);
        gb_init(&b, "sp", T_INT64, 1, D(2), sp);
        gb_node(&b, "Slice", S("x", "st", "en", "ax", "sp"), S("s"), 0, NULL);
        /* a Relu after it keeps an empty slice from being the graph output itself */
        gb_node(&b, "Relu", S("s"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1("Slice", &m, d, rfloats(numel(3, d), -1, 1), 0);
    }
}

/* Concat of the input, a computed value and a constant */
static void test_concat(void)
{
    for (int it = 0; it < 6; it++) {
        int64_t d[3] = { ri(1, 3), ri(1, 5), ri(1, 6) };
        int ax = (int)ri(0, 2);
        int64_t cd[3] = { d[0], d[1], d[2] };
        cd[ax] = ri(1, 4);
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 3, d);
        gb_init(&b, "c", T_FLOAT, 3, cd, rfloats(numel(3, cd), -1, 1));
        gb_node(&b, "Neg", S("x"), S("n"), 0, NULL);
        struct pb at[1] = { pb_attr_int("axis", ax - (it % 2 ? 3 : 0)) };
        gb_node(&b, "Concat", S("x", "c", "n", "x"), S("y"), 1, at);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1("Concat", &m, d, rfloats(numel(3, d), -1, 1), 0);
    }
}

/* Expand to a broadcast shape, with new leading dims */
static void test_expand(void)
{
    for (int it = 0; it < 4; it++) {
        int64_t d[3] = { ri(1, 3), 1, ri(1, 5) };
        int64_t sh[4] = { 2, d[0], ri(1, 4), d[2] };
        int n = it % 2 ? 4 : 3;
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 3, d);
        gb_init(&b, "sh", T_INT64, 1, D(n), n == 4 ? sh : sh + 1);
        gb_node(&b, "Expand", S("x", "sh"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1("Expand", &m, d, rfloats(numel(3, d), -1, 1), 0);
    }
}

/* Gather: constant indices (negative too), any axis; indices from a graph input */
static void test_gather(void)
{
    for (int it = 0; it < 6; it++) {
        int64_t d[3] = { ri(1, 3), ri(1, 6), ri(1, 6) };
        int ax = (int)ri(0, 2);
        int64_t idx[4];
        for (int k = 0; k < 4; k++)
            idx[k] = ri(-d[ax], d[ax] - 1);
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 3, d);
        gb_init(&b, "i", T_INT64, it % 2 ? 0 : 2, D(2, 2), idx);
        struct pb at[1] = { pb_attr_int("axis", ax) };
        gb_node(&b, "Gather", S("x", "i"), S("y"), 1, at);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1("Gather", &m, d, rfloats(numel(3, d), -1, 1), 0);
    }
    {   /* Gather with indices from a graph input */
        int64_t d[3] = { 3, 5, 2 };
        int64_t idx[3] = { 4, -5, 0 };
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 3, d);
        gb_input(&b, "i", T_INT64, 1, D(3));
        struct pb at[1] = { pb_attr_int("axis", 1) };
        gb_node(&b, "Gather", S("x", "i"), S("y"), 1, at);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        const void *ins[2] = { rfloats(30, -1, 1), idx };
        compare("Gather (input indices)", &m, 3, ins, 0);
    }
}

/* Pad: float, and int64 after a Cast; a Constant value */
static void test_pad(void)
{
    for (int it = 0; it < 4; it++) {
        int64_t d[3] = { ri(1, 3), ri(1, 4), ri(1, 5) };
        int64_t pads[6];
        for (int k = 0; k < 6; k++)
            pads[k] = ri(0, 2);
        float cv = rf(-2, 2);
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 3, d);
        gb_init(&b, "pads", T_INT64, 1, D(6), pads);
        struct pb ct = pb_tensor(NULL, T_FLOAT, 0, NULL, &cv, 4);
        struct pb cat[1] = { pb_attr_tensor("value", &ct) };
        gb_node(&b, "Constant", NULL, S("cv"), 1, cat);
        if (it % 2) {
            struct pb to_i[1] = { pb_attr_int("to", 7) };
            gb_node(&b, "Cast", S("x"), S("xi"), 1, to_i);
            gb_node(&b, "Pad", S("xi", "pads"), S("y"), 0, NULL);
        } else {
            gb_node(&b, "Pad", S("x", "pads", "cv"), S("y"), 0, NULL);
        }
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        compare1("Pad", &m, d, rfloats(numel(3, d), -9, 9), 0);
    }
}

/* Every data-movement operator, in a fixed order (the random sequence is the seed's). */
static void test_movement(void)
{
    test_transpose();
    test_slice();
    test_concat();
    test_expand();
    test_gather();
    test_pad();
}

/* ---- precision modes, device-side errors ---------------------------------------------------- */

static struct pb small_cnn(int64_t *xd)
{
    int64_t wd[4] = { 8, 3, 3, 3 }, w2[4] = { 4, 8, 3, 3 };
    xd[0] = 2; xd[1] = 3; xd[2] = 16; xd[3] = 16;
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 4, xd);
    gb_init(&b, "w", T_FLOAT, 4, wd, rfloats(numel(4, wd), -0.3f, 0.3f));
    gb_init(&b, "b", T_FLOAT, 1, D(8), rfloats(8, -0.1f, 0.1f));
    gb_init(&b, "w2", T_FLOAT, 4, w2, rfloats(numel(4, w2), -0.3f, 0.3f));
    gb_init(&b, "fc", T_FLOAT, 2, D(4, 10), rfloats(40, -0.5f, 0.5f));
    struct pb at[1] = { pb_attr_ints("pads", 4, D(1, 1, 1, 1)) };
    gb_node(&b, "Conv", S("x", "w", "b"), S("c1"), 1, at);
    gb_node(&b, "Relu", S("c1"), S("r1"), 0, NULL);
    gb_node(&b, "Conv", S("r1", "w2"), S("c2"), 0, NULL);
    gb_node(&b, "GlobalAveragePool", S("c2"), S("g"), 0, NULL);
    gb_node(&b, "Flatten", S("g"), S("f"), 0, NULL);
    gb_node(&b, "MatMul", S("f", "fc"), S("y"), 0, NULL);
    gb_output(&b, "y");
    return gb_finish(&b);
}

static void test_precisions(void)
{
    static const char *names[3] = { "FP32", "TF32", "FP16" };
    static const double tol[3] = { 1e-4, 1e-2, 1e-2 };
    int64_t xd[4];
    struct pb mp = small_cnn(xd);
    float *x = rfloats(numel(4, xd), -1, 1);
    const void *ins[1] = { x };
    struct gj_error err = { 0 };
    char msg[600];
    onnx_model *m = onnx_model_load_memory(mp.b, mp.n, &err);
    free(mp.b);
    if (!m) {
        printf("FAIL precisions: load: %s\n", err.message);
        failures++;
        free_bufs();
        return;
    }
    struct onnx_session_options cpu = { .batch = 2, .threads = 2, .backend = "cpu" };
    void **ref = run_session(m, &cpu, 1, ins, msg, sizeof msg, NULL);
    for (int p = 0; ref && p < 3; p++) {
        checks++;
        struct onnx_session_options o = { .batch = 2, .threads = 1, .backend = "cuda", .precision = p,
                                          .cuda_graphs = 1 };
        void **got = run_session(m, &o, 3, ins, msg, sizeof msg, NULL);
        double e = got ? rel_l2(got[0], ref[0], 20) : INFINITY;
        printf("%s: relative L2 %.3g\n", names[p], e);
        if (!(e <= tol[p])) {
            printf("FAIL precision %s: %s (error %.3g, tolerance %.3g)\n", names[p], got ? "" : msg, e, tol[p]);
            failures++;
        }
    }
    if (!ref) {
        printf("FAIL precisions: cpu: %s\n", msg);
        failures++;
    }
    onnx_model_free(m);
    free_bufs();
}

/* A CUDA session names the cuDNN algorithm and math type of each convolution shape (what a
 * job's provenance records): in FP32, FMA math (no tensor cores), never "unknown". */
static void test_convolutions_named(void)
{
    int64_t xd[4];
    struct pb mp = small_cnn(xd);
    struct gj_error err = { 0 };
    onnx_model *m = onnx_model_load_memory(mp.b, mp.n, &err);
    free(mp.b);
    struct onnx_session_options o = { .batch = 2, .threads = 1, .backend = "cuda" };
    onnx_session *s = m ? onnx_session_create(m, &o, &err) : NULL;
    checks++;
    const char *text = s ? onnx_session_convolutions(s) : "";
    printf("convolutions (fp32):\n%s\n", text);
    int lines = 0;
    for (const char *l = text; *l; lines++) {
        size_t n = strcspn(l, "\n");
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)n, l);
        if (!strstr(line, ": cudnn ") || !strstr(line, " math fma") || strstr(line, "unknown") ||
            strstr(line, " ?")) {
            printf("FAIL convolutions: %s\n", line);
            failures++;
        }
        l += n + (l[n] == '\n');
    }
    if (!s || lines != 2) {   /* small_cnn: two shapes */
        printf("FAIL convolutions: %d lines (%s)\n", lines, s ? "want 2" : err.message);
        failures++;
    }
    onnx_session_free(s);
    onnx_model_free(m);
}

/* The cuDNN algorithm chosen for each convolution shape is logged once, by the session that
 * searched it; a later session of the same shapes and precision takes the process's cached
 * choice (no search, no note); another precision searches (and logs) again. */
static int algo_notes;
static void count_algo_note(enum onnx_log_level level, const char *message)
{
    if (level == ONNX_LOG_INFO && strstr(message, "cuDNN convolution") && strstr(message, "algorithm "))
        algo_notes++;
    printf("  note: %s\n", message);
}

static void test_conv_algo_log(void)
{
    int64_t xd[4];
    struct pb mp = small_cnn(xd);   /* two convolutions of different shapes */
    float *x = rfloats(numel(4, xd), -1, 1);
    const void *ins[1] = { x };
    struct gj_error err = { 0 };
    char msg[600];
    onnx_model *m = onnx_model_load_memory(mp.b, mp.n, &err);
    free(mp.b);
    if (!m) {
        printf("FAIL algorithm log: load: %s\n", err.message);
        failures++;
        free_bufs();
        return;
    }
    onnx_set_log(count_algo_note);
    static const int precision[3] = { ONNX_PRECISION_FP32, ONNX_PRECISION_FP32, ONNX_PRECISION_FP16 };
    static const int want[3] = { 2, 0, 2 };   /* new notes of each session */
    for (int i = 0; i < 3; i++) {
        checks++;
        algo_notes = 0;
        struct onnx_session_options o = { .batch = 2, .threads = 1, .backend = "cuda", .precision = precision[i] };
        if (!run_session(m, &o, 1, ins, msg, sizeof msg, NULL)) {
            printf("FAIL algorithm log: session %d: %s\n", i + 1, msg);
            failures++;
        } else if (algo_notes != want[i]) {
            printf("FAIL algorithm log: session %d logged %d algorithm choices, wanted %d\n", i + 1, algo_notes,
                   want[i]);
            failures++;
        }
    }
    onnx_set_log(NULL);
    onnx_model_free(m);
    free_bufs();
}

/* A run that must fail with a message containing `needle`. */
static void expect_run_error(const char *what, struct pb *mp, int batch, const void *const *ins, const char *needle)
{
    struct gj_error err = { 0 };
    checks++;
    onnx_model *m = onnx_model_load_memory(mp->b, mp->n, &err);
    free(mp->b);
    for (int graphs = 0; m && graphs < 2; graphs++) {
        struct onnx_session_options o = { .batch = batch, .threads = 1, .backend = "cuda", .cuda_graphs = graphs };
        onnx_session *s = onnx_session_create(m, &o, &err);
        if (!s) {
            printf("FAIL %s: session: %s\n", what, err.message);
            failures++;
            break;
        }
        float out[64];
        void *outs[1] = { out };
        for (int r = 0; r < (graphs ? 3 : 1); r++) {
            memset(&err, 0, sizeof err);
            if (onnx_session_run(s, ins, outs, &err) == 0 || !strstr(err.message, needle)) {
                printf("FAIL %s (graphs %d, run %d): wanted an error with '%s', got '%s'\n", what, graphs, r + 1,
                       needle, err.message);
                failures++;
            }
        }
        onnx_session_free(s);
    }
    if (!m) {
        printf("FAIL %s: load: %s\n", what, err.message);
        failures++;
    }
    onnx_model_free(m);
    free_bufs();
}

static void test_device_errors(void)
{
    {
        int64_t d[2] = { 2, 4 }, idx[2] = { 1, 4 };
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 2, d);
        gb_input(&b, "i", T_INT64, 1, D(2));
        struct pb at[1] = { pb_attr_int("axis", 1) };
        gb_node(&b, "Gather", S("x", "i"), S("y"), 1, at);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        const void *ins[2] = { rfloats(8, -1, 1), idx };
        expect_run_error("Gather index out of range", &m, 2, ins, "out of range");
    }
    {
        int64_t d[2] = { 1, 3 }, dv[3] = { 1, 0, 2 };
        struct gb b = { 0 };
        gb_input(&b, "x", T_INT64, 2, d);
        gb_init(&b, "dv", T_INT64, 1, D(3), dv);
        gb_node(&b, "Div", S("x", "dv"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        int64_t x[3] = { 5, 6, 7 };
        const void *ins[1] = { x };
        expect_run_error("int64 division by zero", &m, 1, ins, "division by zero");
    }
}

/* Session creation on cuda must fail with a message containing `needle`. */
static void expect_refused(const char *what, struct gb *b, const char *needle)
{
    struct pb mp = gb_finish(b);
    struct gj_error err = { 0 };
    struct onnx_session_options o = { .batch = 1, .threads = 1, .backend = "cuda" };
    onnx_model *m = onnx_model_load_memory(mp.b, mp.n, &err);
    onnx_session *s = m ? onnx_session_create(m, &o, &err) : NULL;
    checks++;
    if (s || !strstr(err.message, needle)) {
        printf("FAIL %s: wanted a refusal with '%s', got '%s'\n", what, needle, s ? "a session" : err.message);
        failures++;
    }
    onnx_session_free(s);
    onnx_model_free(m);
    free(mp.b);
}

/* The types and operators the CUDA backend does not compute are refused when the session is
 * created (the CPU backend runs them), never run as float32. */
static void test_refused_types(void)
{
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT16, 4, D(1, 1, 4, 4));
    gb_input(&b, "w", T_FLOAT16, 4, D(1, 1, 3, 3));
    gb_node(&b, "Conv", S("x", "w"), S("y"), 0, NULL);
    gb_output(&b, "y");
    expect_refused("FLOAT16 Conv", &b, "input 0 is FLOAT16; the cuda backend computes FLOAT only for Conv");
    struct gb a = { 0 };
    gb_input(&a, "x", T_INT32, 2, D(1, 4));
    gb_node(&a, "Add", S("x", "x"), S("y"), 0, NULL);
    gb_output(&a, "y");
    expect_refused("INT32 Add", &a, "INT32");
    struct gb g = { 0 };
    gb_input(&g, "x", T_FLOAT, 2, D(1, 4));
    gb_node(&g, "Greater", S("x", "x"), S("y"), 0, NULL);
    gb_output(&g, "y");
    expect_refused("Greater", &g, "backend 'cuda' has no kernel for it");
}

int main(int argc, char **argv)
{
    struct gj_error why = { 0 };
    if (!onnx_backend_available("cuda", &why)) {
        printf("SKIP: %s\n", why.message);
        return 77;
    }
    if (argc > 1)
        seed = (uint32_t)strtoul(argv[1], NULL, 10);
    printf("seed %u\n", seed);
    test_conv_algo_log();   /* first: no shape of it is cached yet */
    test_conv();
    test_batchnorm_pools();
    test_gemm_matmul();
    test_elementwise();
    test_rows();
    test_movement();
    test_precisions();
    test_convolutions_named();
    test_device_errors();
    test_refused_types();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
