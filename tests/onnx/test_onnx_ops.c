/*
 * test_onnx_ops.c — cmocka unit tests of the ONNX runtime: single operators against
 * hand-computed values, broadcasting, fusion and aliasing, and hostile or malformed model
 * files (truncated protobufs, wrong dims, unsupported operators/attributes named in the
 * error, huge declared sizes, external data, cycles).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include "infer/onnx/onnx_model.h"
#include "pbw.h"

/* Loads, creates a session (batch, 2 threads), runs with one or two inputs, returns 0 or -1
 * and leaves the error message in msg. out gets output 0. */
static int run_model(struct pb *mp, int batch, const void *in0, const void *in1, void *out, size_t out_bytes,
                     char *msg)
{
    struct gj_error err = { 0 };
    msg[0] = 0;
    onnx_model *m = onnx_model_load_memory(mp->b, mp->n, &err);
    free(mp->b);
    mp->b = NULL;
    if (!m) {
        strcpy(msg, err.message);
        return -1;
    }
    struct onnx_session_options o = { .batch = batch, .threads = 2, .backend = "cpu" };
    onnx_session *s = onnx_session_create(m, &o, &err);
    if (!s) {
        strcpy(msg, err.message);
        onnx_model_free(m);
        return -1;
    }
    int rc = 0;
    if (out) {
        assert_int_equal(onnx_session_output_bytes(s, 0), out_bytes);
        const void *ins[2] = { in0, in1 };
        void *outs[1] = { out };
        rc = onnx_session_run(s, ins, outs, &err);
        if (rc)
            strcpy(msg, err.message);
    }
    onnx_session_free(s);
    onnx_model_free(m);
    return rc;
}

static void expect_f(const float *got, const float *want, int n, float tol)
{
    for (int i = 0; i < n; i++) {
        if (!(fabsf(got[i] - want[i]) <= tol * (1.0f + fabsf(want[i])))) {
            fail_msg("element %d: got %.7g, want %.7g", i, got[i], want[i]);
        }
    }
}

#define NA(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Runs a unary-input float model: input "x" of dims, one node op, output "y". */
static void one_op(const char *op, int rank, const int64_t *dims, const float *x, int n_attr, struct pb *attrs,
                   const float *want, int n_out, float tol)
{
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, rank, dims);
    gb_node(&b, op, S("x"), S("y"), n_attr, attrs);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    float *y = calloc((size_t)n_out, 4);
    char msg[600];
    int rc = run_model(&m, (int)dims[0], x, NULL, y, (size_t)n_out * 4, msg);
    if (rc)
        fail_msg("%s: %s", op, msg);
    expect_f(y, want, n_out, tol);
    free(y);
}

/* ---- operators ---- */

static void test_conv(void **st)
{
    (void)st;
    float x[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    float w[4] = { 1, 1, 1, 1 }, bias[1] = { 0.5f };
    {   /* valid 2x2 */
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 4, D(1, 1, 3, 3));
        gb_init(&b, "w", T_FLOAT, 4, D(1, 1, 2, 2), w);
        gb_init(&b, "b", T_FLOAT, 1, D(1), bias);
        struct pb at[1] = { pb_attr_ints("kernel_shape", 2, D(2, 2)) };
        gb_node(&b, "Conv", S("x", "w", "b"), S("y"), 1, at);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        float y[4], want[4] = { 12.5f, 16.5f, 24.5f, 28.5f };
        char msg[600];
        assert_int_equal(run_model(&m, 1, x, NULL, y, sizeof y, msg), 0);
        expect_f(y, want, 4, 1e-6f);
    }
    {   /* pads 1, stride 2: corners of the padded sums */
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 4, D(1, 1, 3, 3));
        gb_init(&b, "w", T_FLOAT, 4, D(1, 1, 2, 2), w);
        struct pb at[2] = { pb_attr_ints("pads", 4, D(1, 1, 1, 1)), pb_attr_ints("strides", 2, D(2, 2)) };
        gb_node(&b, "Conv", S("x", "w"), S("y"), 2, at);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        float y[4], want[4] = { 1, 5, 11, 28 };
        char msg[600];
        assert_int_equal(run_model(&m, 1, x, NULL, y, sizeof y, msg), 0);
        expect_f(y, want, 4, 1e-6f);
    }
    {   /* group 2, 1x1, fused ReLU: channel 0 * 1, channel 1 * -1 */
        float x2[4] = { 1, -2, 3, -4 }, w2[2] = { 1, -1 };
        struct gb b = { 0 };
        gb_input(&b, "x", T_FLOAT, 4, D(1, 2, 1, 2));
        gb_init(&b, "w", T_FLOAT, 4, D(2, 1, 1, 1), w2);
        struct pb at[1] = { pb_attr_int("group", 2) };
        gb_node(&b, "Conv", S("x", "w"), S("c"), 1, at);
        gb_node(&b, "Relu", S("c"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        float y[4], want[4] = { 1, 0, 0, 4 };
        char msg[600];
        assert_int_equal(run_model(&m, 1, x2, NULL, y, sizeof y, msg), 0);
        expect_f(y, want, 4, 1e-6f);
    }
}

/* A Conv's geometry for conv_case: input N x C x H x W, M filters of kh x kw. */
struct conv_geom {
    int64_t N, C, H, W, M, kh, kw, sh, sw, dh, dw, pads[4];
    int bias, relu;
};

/* y = Conv(x) computed directly (the reference for conv_case). */
static void conv_direct(const struct conv_geom *g, const float *x, const float *w, const float *bias, float *y,
                        int64_t OH, int64_t OW)
{
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t m = 0; m < g->M; m++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double acc = g->bias ? bias[m] : 0;
                    for (int64_t c = 0; c < g->C; c++)
                        for (int64_t i = 0; i < g->kh; i++)
                            for (int64_t j = 0; j < g->kw; j++) {
                                int64_t ih = oh * g->sh - g->pads[0] + i * g->dh, iw = ow * g->sw - g->pads[1] + j * g->dw;
                                if (ih >= 0 && ih < g->H && iw >= 0 && iw < g->W)
                                    acc += (double)x[((n * g->C + c) * g->H + ih) * g->W + iw] *
                                           w[((m * g->C + c) * g->kh + i) * g->kw + j];
                            }
                    float v = (float)acc;
                    y[((n * g->M + m) * OH + oh) * OW + ow] = g->relu && v < 0 ? 0 : v;
                }
}

/* One Conv (with bias and a following Relu where asked) on pseudo-random data, run by the CPU
 * backend (dnnl "1": oneDNN where the build has it; "0": our im2col + GEMM), against
 * conv_direct. */
static void conv_case(const struct conv_geom *g, const char *dnnl)
{
    int64_t OH = (g->H + g->pads[0] + g->pads[2] - ((g->kh - 1) * g->dh + 1)) / g->sh + 1;
    int64_t OW = (g->W + g->pads[1] + g->pads[3] - ((g->kw - 1) * g->dw + 1)) / g->sw + 1;
    size_t nx = (size_t)(g->N * g->C * g->H * g->W), nw = (size_t)(g->M * g->C * g->kh * g->kw);
    size_t ny = (size_t)(g->N * g->M * OH * OW);
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *bias = malloc((size_t)g->M * 4);
    float *y = malloc(ny * 4), *want = malloc(ny * 4);
    assert_true(x && w && bias && y && want);
    uint32_t seed = 12345;
    for (size_t i = 0; i < nx + nw + (size_t)g->M; i++) {
        seed = seed * 1664525u + 1013904223u;
        float v = (float)(seed >> 8) / 16777216.0f - 0.5f;
        if (i < nx)
            x[i] = v;
        else if (i < nx + nw)
            w[i - nx] = v;
        else
            bias[i - nx - nw] = v;
    }
    conv_direct(g, x, w, bias, want, OH, OW);
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 4, D(g->N, g->C, g->H, g->W));
    gb_init(&b, "w", T_FLOAT, 4, D(g->M, g->C, g->kh, g->kw), w);
    if (g->bias)
        gb_init(&b, "b", T_FLOAT, 1, D(g->M), bias);
    struct pb at[3] = { pb_attr_ints("pads", 4, g->pads), pb_attr_ints("strides", 2, D(g->sh, g->sw)),
                        pb_attr_ints("dilations", 2, D(g->dh, g->dw)) };
    gb_node(&b, "Conv", g->bias ? S("x", "w", "b") : S("x", "w"), S(g->relu ? "c" : "y"), 3, at);
    if (g->relu)
        gb_node(&b, "Relu", S("c"), S("y"), 0, NULL);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    char msg[600];
    setenv("GJ_ONNX_DNNL", dnnl, 1);
    int rc = run_model(&m, (int)g->N, x, NULL, y, ny * 4, msg);
    unsetenv("GJ_ONNX_DNNL");
    if (rc)
        fail_msg("%s", msg);
    expect_f(y, want, (int)ny, 1e-4f);
    free(x);
    free(w);
    free(bias);
    free(y);
    free(want);
}

/* Convolutions large enough to be split across 2 threads: by images (batch 2) and, at batch
 * 1, by output channels (40 filters: a partial block of 16 in the last slice; 48 input
 * channels of 40x40: the input's reorder in two parts), with stride 2 and uneven padding (an
 * end padding the output size makes negative: 1x1 stride 2 on an even size), dilation, with
 * and without bias and ReLU: the CPU backend's kernels (oneDNN's where built, and ours)
 * against a direct convolution. */
static void test_conv_shapes(void **st)
{
    (void)st;
    const struct conv_geom g[] = {
        { 2, 16, 20, 20, 40, 3, 3, 2, 2, 1, 1, { 1, 0, 2, 1 }, 1, 1 },
        { 1, 3, 17, 15, 20, 3, 3, 1, 1, 2, 2, { 2, 2, 2, 2 }, 0, 0 },
        { 2, 64, 14, 14, 128, 1, 1, 2, 2, 1, 1, { 0, 0, 0, 0 }, 1, 0 },
        { 1, 24, 9, 9, 33, 1, 1, 1, 1, 1, 1, { 0, 0, 0, 0 }, 0, 1 },
        { 1, 16, 20, 20, 40, 3, 3, 2, 2, 1, 1, { 1, 0, 2, 1 }, 1, 1 },
        { 1, 48, 40, 40, 64, 1, 1, 1, 1, 1, 1, { 0, 0, 0, 0 }, 1, 0 },
    };
    for (size_t i = 0; i < sizeof g / sizeof *g; i++) {
        conv_case(&g[i], "1");
        conv_case(&g[i], "0");
    }
}

static void test_pools(void **st)
{
    (void)st;
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)i;
    struct pb a1[2] = { pb_attr_ints("kernel_shape", 2, D(2, 2)), pb_attr_ints("strides", 2, D(2, 2)) };
    one_op("MaxPool", 4, D(1, 1, 4, 4), x, 2, a1, (const float[]){ 5, 7, 13, 15 }, 4, 0);
    struct pb a2[2] = { pb_attr_ints("kernel_shape", 2, D(2, 2)), pb_attr_ints("strides", 2, D(2, 2)) };
    one_op("AveragePool", 4, D(1, 1, 4, 4), x, 2, a2, (const float[]){ 2.5f, 4.5f, 10.5f, 12.5f }, 4, 1e-6f);
    /* 3x3 window, pad 1, stride 2 on 4x4: corner (0,0) covers x[0,1,4,5] */
    struct pb a3[3] = { pb_attr_ints("kernel_shape", 2, D(3, 3)), pb_attr_ints("strides", 2, D(2, 2)),
                        pb_attr_ints("pads", 4, D(1, 1, 1, 1)) };
    one_op("AveragePool", 4, D(1, 1, 4, 4), x, 3, a3, (const float[]){ 2.5f, 4.0f, 8.5f, 10.0f }, 4, 1e-6f);
    struct pb a4[4] = { pb_attr_ints("kernel_shape", 2, D(3, 3)), pb_attr_ints("strides", 2, D(2, 2)),
                        pb_attr_ints("pads", 4, D(1, 1, 1, 1)), pb_attr_int("count_include_pad", 1) };
    one_op("AveragePool", 4, D(1, 1, 4, 4), x, 4, a4, (const float[]){ 10.0f / 9, 24.0f / 9, 51.0f / 9, 90.0f / 9 },
           4, 1e-6f);
    /* ceil_mode: 4x4, k 3, s 2 -> 2x2 (floor gives 1x1) */
    struct pb a5[3] = { pb_attr_ints("kernel_shape", 2, D(3, 3)), pb_attr_ints("strides", 2, D(2, 2)),
                        pb_attr_int("ceil_mode", 1) };
    one_op("MaxPool", 4, D(1, 1, 4, 4), x, 3, a5, (const float[]){ 10, 11, 14, 15 }, 4, 0);
    one_op("GlobalAveragePool", 4, D(1, 1, 4, 4), x, 0, NULL, (const float[]){ 7.5f }, 1, 1e-6f);
}

/* Pools on 2 x 3 x 9 x 11 against a direct computation: windows inside the input and on
 * its borders, strides, pads, dilation (MaxPool), count_include_pad (AveragePool). */
static void pool_case(int max, int64_t k, int64_t st, int64_t pad, int64_t dil, int incl)
{
    enum { N = 2, C = 3, H = 9, W = 11 };
    float x[N * C * H * W], want[N * C * H * W];
    for (int i = 0; i < N * C * H * W; i++)
        x[i] = (float)((i * 7919) % 113) / 17.0f - 3.0f;
    int64_t ext = (k - 1) * dil + 1, OH = (H + 2 * pad - ext) / st + 1, OW = (W + 2 * pad - ext) / st + 1;
    for (int64_t r = 0; r < N * C; r++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                float m = -INFINITY, sum = 0;
                int64_t cnt = 0;
                for (int64_t i = 0; i < k; i++)
                    for (int64_t j = 0; j < k; j++) {
                        int64_t ih = oh * st - pad + i * dil, iw = ow * st - pad + j * dil;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                            continue;
                        float v = x[(r * H + ih) * W + iw];
                        m = v > m ? v : m;
                        sum += v;
                        cnt++;
                    }
                want[(r * OH + oh) * OW + ow] = max ? m : sum / (float)(incl ? k * k : cnt);
            }
    struct pb at[5] = { pb_attr_ints("kernel_shape", 2, D(k, k)), pb_attr_ints("strides", 2, D(st, st)),
                        pb_attr_ints("pads", 4, D(pad, pad, pad, pad)),
                        max ? pb_attr_ints("dilations", 2, D(dil, dil)) : pb_attr_int("count_include_pad", incl) };
    one_op(max ? "MaxPool" : "AveragePool", 4, D(N, C, H, W), x, 4, at, want, (int)(N * C * OH * OW), 1e-6f);
}

static void test_pool_shapes(void **st)
{
    (void)st;
    pool_case(1, 3, 2, 1, 1, 0);
    pool_case(1, 3, 1, 0, 1, 0);
    pool_case(1, 2, 2, 0, 2, 0);
    pool_case(1, 3, 1, 2, 2, 0);
    pool_case(0, 2, 2, 0, 1, 0);
    pool_case(0, 3, 2, 1, 1, 0);
    pool_case(0, 3, 1, 1, 1, 1);
}

static void test_unary(void **st)
{
    (void)st;
    float x[4] = { -1.0f, 0.0f, 0.5f, 2.0f };
    one_op("Relu", 2, D(1, 4), x, 0, NULL, (const float[]){ 0, 0, 0.5f, 2 }, 4, 0);
    one_op("Sigmoid", 2, D(1, 4), x, 0, NULL, (const float[]){ 0.26894142f, 0.5f, 0.62245933f, 0.88079708f }, 4, 1e-6f);
    one_op("Erf", 2, D(1, 4), x, 0, NULL, (const float[]){ -0.84270079f, 0, 0.52049988f, 0.99532227f }, 4, 1e-6f);
    one_op("Gelu", 2, D(1, 4), x, 0, NULL, (const float[]){ -0.15865525f, 0, 0.34573123f, 1.95449974f }, 4, 1e-6f);
    float xs[4] = { 0, 1, 4, 9 };
    one_op("Sqrt", 2, D(1, 4), xs, 0, NULL, (const float[]){ 0, 1, 2, 3 }, 4, 1e-7f);
    one_op("Identity", 2, D(1, 4), xs, 0, NULL, xs, 4, 0);
}

static void test_softmax_layernorm(void **st)
{
    (void)st;
    float x[6] = { 1, 2, 3, 1, 1, 1 };
    one_op("Softmax", 2, D(2, 3), x, 0, NULL,
           (const float[]){ 0.09003057f, 0.24472847f, 0.66524096f, 1.f / 3, 1.f / 3, 1.f / 3 }, 6, 1e-6f);
    struct pb ax[1] = { pb_attr_int("axis", 0) };
    one_op("Softmax", 2, D(2, 3), x, 1, ax,
           (const float[]){ 0.5f, 0.73105858f, 0.88079708f, 0.5f, 0.26894142f, 0.11920292f }, 6, 1e-6f);
    /* LayerNormalization over the last axis, scale 2, bias 1 */
    struct gb b = { 0 };
    float sc[3] = { 2, 2, 2 }, bi[3] = { 1, 1, 1 };
    gb_input(&b, "x", T_FLOAT, 2, D(2, 3));
    gb_init(&b, "s", T_FLOAT, 1, D(3), sc);
    gb_init(&b, "b", T_FLOAT, 1, D(3), bi);
    struct pb at[1] = { pb_attr_float("epsilon", 0.0f) };
    gb_node(&b, "LayerNormalization", S("x", "s", "b"), S("y"), 1, at);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    float y[6], k = 2.0f * 1.2247449f;
    char msg[600];
    float xx[6] = { 1, 2, 3, 4, 5, 6 };
    assert_int_equal(run_model(&m, 2, xx, NULL, y, sizeof y, msg), 0);
    expect_f(y, (const float[]){ 1 - k, 1, 1 + k, 1 - k, 1, 1 + k }, 6, 1e-5f);
}

static void test_broadcast(void **st)
{
    (void)st;
    const char *ops[] = { "Add", "Sub", "Mul", "Div", "Pow" };
    float a[6] = { 1, 2, 3, 4, 5, 6 }, bb[3] = { 1, 2, 0.5f };
    float want[5][6] = {
        { 2, 4, 3.5f, 5, 7, 6.5f }, { 0, 0, 2.5f, 3, 3, 5.5f }, { 1, 4, 1.5f, 4, 10, 3 },
        { 1, 1, 6, 4, 2.5f, 12 }, { 1, 4, 1.7320508f, 4, 25, 2.4494897f } };
    for (int k = 0; k < 5; k++) {
        struct gb b = { 0 };
        gb_input(&b, "a", T_FLOAT, 2, D(2, 3));
        gb_init(&b, "b", T_FLOAT, 1, D(3), bb);
        gb_node(&b, ops[k], S("a", "b"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        float y[6];
        char msg[600];
        assert_int_equal(run_model(&m, 2, a, NULL, y, sizeof y, msg), 0);
        expect_f(y, want[k], 6, 1e-6f);
    }
    {   /* [2,1,3] + [4,1] -> [2,4,3]; both inputs from the graph */
        struct gb b = { 0 };
        gb_input(&b, "a", T_FLOAT, 3, D(2, 1, 3));
        gb_input(&b, "b", T_FLOAT, 2, D(4, 1));
        gb_node(&b, "Add", S("a", "b"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        float bv[4] = { 0, 10, 20, 30 }, y[24], w[24];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 3; k++)
                    w[i * 12 + j * 3 + k] = a[i * 3 + k] + bv[j];
        char msg[600];
        /* the batch dimension of input b is 4, of a 2: the session sets only the first
         * dimension of each input to the batch, so use fixed dims with batch 2 -> b fails */
        int rc = run_model(&m, 2, a, bv, y, sizeof y, msg);
        assert_int_equal(rc, -1);
        assert_non_null(strstr(msg, "batch"));
        struct gb b2 = { 0 };
        gb_input(&b2, "a", T_FLOAT, 3, D(2, 1, 3));
        gb_init(&b2, "b", T_FLOAT, 2, D(4, 1), bv);
        gb_node(&b2, "Add", S("a", "b"), S("y"), 0, NULL);
        gb_output(&b2, "y");
        m = gb_finish(&b2);
        assert_int_equal(run_model(&m, 2, a, NULL, y, sizeof y, msg), 0);
        expect_f(y, w, 24, 0);
    }
    {   /* Where(Equal(a, 2), a, -1) with a scalar; Expand */
        struct gb b = { 0 };
        float two = 2, m1 = -1;
        gb_input(&b, "a", T_FLOAT, 2, D(2, 3));
        gb_init(&b, "two", T_FLOAT, 0, NULL, &two);
        gb_init(&b, "m1", T_FLOAT, 0, NULL, &m1);
        gb_init(&b, "shape", T_INT64, 1, D(3), D(2, 2, 3));
        gb_node(&b, "Equal", S("a", "two"), S("c"), 0, NULL);
        gb_node(&b, "Where", S("c", "a", "m1"), S("w"), 0, NULL);
        gb_node(&b, "Expand", S("w", "shape"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct pb m = gb_finish(&b);
        float y[12];
        char msg[600];
        assert_int_equal(run_model(&m, 2, a, NULL, y, sizeof y, msg), 0);
        expect_f(y, (const float[]){ -1, 2, -1, -1, -1, -1, -1, 2, -1, -1, -1, -1 }, 12, 0);
    }
}

static void test_gemm_matmul(void **st)
{
    (void)st;
    float a[6] = { 1, 2, 3, 4, 5, 6 };
    float w[6] = { 1, 0, 1, 0, 1, 1 };   /* B^T: 2x3 */
    float c[2] = { 10, 20 };
    struct gb b = { 0 };
    gb_input(&b, "a", T_FLOAT, 2, D(2, 3));
    gb_init(&b, "w", T_FLOAT, 2, D(2, 3), w);
    gb_init(&b, "c", T_FLOAT, 1, D(2), c);
    struct pb at[2] = { pb_attr_int("transB", 1), pb_attr_float("alpha", 2.0f) };
    gb_node(&b, "Gemm", S("a", "w", "c"), S("y"), 2, at);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    float y[4];
    char msg[600];
    assert_int_equal(run_model(&m, 2, a, NULL, y, sizeof y, msg), 0);
    expect_f(y, (const float[]){ 18, 30, 30, 42 }, 4, 1e-6f);

    /* batched MatMul [2,2,3] x [2,3,1] and [2,2,3] x [3,2] */
    float x[12];
    for (int i = 0; i < 12; i++)
        x[i] = (float)(i + 1);
    float bm[6] = { 1, 1, 1, 2, 2, 2 };
    struct gb g2 = { 0 };
    gb_input(&g2, "x", T_FLOAT, 3, D(2, 2, 3));
    gb_init(&g2, "b", T_FLOAT, 3, D(2, 3, 1), bm);
    gb_node(&g2, "MatMul", S("x", "b"), S("y"), 0, NULL);
    gb_output(&g2, "y");
    m = gb_finish(&g2);
    assert_int_equal(run_model(&m, 2, x, NULL, y, sizeof y, msg), 0);
    expect_f(y, (const float[]){ 6, 15, 48, 66 }, 4, 1e-6f);
    float b2[6] = { 1, 0, 0, 1, 1, 1 }, y8[8];
    struct gb g3 = { 0 };
    gb_input(&g3, "x", T_FLOAT, 3, D(2, 2, 3));
    gb_init(&g3, "b", T_FLOAT, 2, D(3, 2), b2);
    gb_node(&g3, "MatMul", S("x", "b"), S("y"), 0, NULL);
    gb_output(&g3, "y");
    m = gb_finish(&g3);
    assert_int_equal(run_model(&m, 2, x, NULL, y8, sizeof y8, msg), 0);
    expect_f(y8, (const float[]){ 4, 5, 10, 11, 16, 17, 22, 23 }, 8, 1e-6f);
}

static void test_shape_ops(void **st)
{
    (void)st;
    /* Shape -> Gather(0) -> Unsqueeze -> Concat(-1) -> Reshape: flattens x to [N, 6] as the
     * exporter's shape arithmetic does; then Transpose, Slice with a negative step, Concat. */
    float x[12];
    for (int i = 0; i < 12; i++)
        x[i] = (float)i;
    struct gb b = { 0 };
    int64_t zero = 0;
    gb_input(&b, "x", T_FLOAT, 3, D(-1, 2, 3));
    gb_init(&b, "i0", T_INT64, 0, NULL, &zero);
    gb_init(&b, "ax0", T_INT64, 1, D(1), D(0));
    gb_init(&b, "m1", T_INT64, 1, D(1), D(-1));
    gb_node(&b, "Shape", S("x"), S("s"), 0, NULL);
    gb_node(&b, "Gather", S("s", "i0"), S("n"), 0, NULL);
    gb_node(&b, "Unsqueeze", S("n", "ax0"), S("n1"), 0, NULL);
    struct pb cat[1] = { pb_attr_int("axis", 0) };
    gb_node(&b, "Concat", S("n1", "m1"), S("shape"), 1, cat);
    gb_node(&b, "Reshape", S("x", "shape"), S("r"), 0, NULL);          /* [2,6] */
    struct pb tp[1] = { pb_attr_ints("perm", 2, D(1, 0)) };
    gb_node(&b, "Transpose", S("r"), S("t"), 1, tp);                    /* [6,2] */
    gb_init(&b, "st", T_INT64, 1, D(1), D(-1));
    gb_init(&b, "en", T_INT64, 1, D(1), D(INT64_MIN));
    gb_init(&b, "ax", T_INT64, 1, D(1), D(0));
    gb_init(&b, "sp", T_INT64, 1, D(1), D(-2));
    gb_node(&b, "Slice", S("t", "st", "en", "ax", "sp"), S("sl"), 0, NULL);   /* rows 5,3,1 */
    struct pb cat2[1] = { pb_attr_int("axis", 1) };
    gb_node(&b, "Concat", S("sl", "sl"), S("y"), 1, cat2);             /* [3,4] */
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    float y[12];
    char msg[600];
    if (run_model(&m, 2, x, NULL, y, sizeof y, msg))
        fail_msg("%s", msg);
    expect_f(y, (const float[]){ 5, 11, 5, 11, 3, 9, 3, 9, 1, 7, 1, 7 }, 12, 0);
}

static void test_misc_ops(void **st)
{
    (void)st;
    float x[6] = { 1, 2, 3, 4, 5, 6 };
    /* ReduceMean over axis 1 (attribute at opset 13), keepdims 0 */
    struct gb b = { 0 };
    b.opset = 13;
    gb_input(&b, "x", T_FLOAT, 2, D(2, 3));
    struct pb at[2] = { pb_attr_ints("axes", 1, D(1)), pb_attr_int("keepdims", 0) };
    gb_node(&b, "ReduceMean", S("x"), S("y"), 2, at);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    float y[12];
    char msg[600];
    assert_int_equal(run_model(&m, 2, x, NULL, y, 8, msg), 0);
    expect_f(y, (const float[]){ 2, 5 }, 2, 1e-6f);
    /* BatchNormalization: (x - mean) / sqrt(var + eps) * s + b, two channels */
    struct gb g = { 0 };
    float sc[2] = { 1, 2 }, bi[2] = { 0, 1 }, mu[2] = { 1, 2 }, var[2] = { 4, 1 };
    gb_input(&g, "x", T_FLOAT, 4, D(1, 2, 1, 2));
    gb_init(&g, "s", T_FLOAT, 1, D(2), sc);
    gb_init(&g, "b", T_FLOAT, 1, D(2), bi);
    gb_init(&g, "m", T_FLOAT, 1, D(2), mu);
    gb_init(&g, "v", T_FLOAT, 1, D(2), var);
    struct pb eps[1] = { pb_attr_float("epsilon", 0.0f) };
    gb_node(&g, "BatchNormalization", S("x", "s", "b", "m", "v"), S("y"), 1, eps);
    gb_output(&g, "y");
    m = gb_finish(&g);
    float xb[4] = { 1, 3, 2, 4 };
    assert_int_equal(run_model(&m, 1, xb, NULL, y, 16, msg), 0);
    expect_f(y, (const float[]){ 0, 1, 1, 5 }, 4, 1e-6f);
    /* Pad (constant 9) then Flatten, Cast to int64 and back; Range and ConstantOfShape folded */
    struct gb p = { 0 };
    float nine = 9;
    gb_input(&p, "x", T_FLOAT, 2, D(1, 2));
    gb_init(&p, "pads", T_INT64, 1, D(4), D(0, 1, 0, 2));
    gb_init(&p, "cv", T_FLOAT, 0, NULL, &nine);
    gb_node(&p, "Pad", S("x", "pads", "cv"), S("pd"), 0, NULL);        /* [1,5] 9 x0 x1 9 9 */
    struct pb to1[1] = { pb_attr_int("to", 7) }, to2[1] = { pb_attr_int("to", 1) };
    gb_node(&p, "Cast", S("pd"), S("pi"), 1, to1);
    gb_init(&p, "r0", T_INT64, 0, NULL, D(0));
    gb_init(&p, "r1", T_INT64, 0, NULL, D(5));
    gb_init(&p, "r2", T_INT64, 0, NULL, D(1));
    gb_node(&p, "Range", S("r0", "r1", "r2"), S("rg"), 0, NULL);      /* 0..4 */
    gb_node(&p, "Add", S("pi", "rg"), S("sum"), 0, NULL);
    gb_node(&p, "Cast", S("sum"), S("y"), 1, to2);
    gb_output(&p, "y");
    m = gb_finish(&p);
    float xp[2] = { 1.7f, -2.2f };
    if (run_model(&m, 1, xp, NULL, y, 20, msg))
        fail_msg("%s", msg);
    expect_f(y, (const float[]){ 9, 2, 0, 12, 13 }, 5, 0);
}

static void test_more_ops(void **st)
{
    (void)st;
    float x[4] = { -1.0f, 0.0f, 0.5f, 2.0f };
    one_op("Tanh", 2, D(1, 4), x, 0, NULL, (const float[]){ -0.76159416f, 0, 0.46211716f, 0.96402758f }, 4, 1e-6f);
    one_op("Neg", 2, D(1, 4), x, 0, NULL, (const float[]){ 1, 0, -0.5f, -2 }, 4, 0);
    struct pb ga[1] = { pb_attr_str("approximate", "tanh") };
    one_op("Gelu", 2, D(1, 4), x, 1, ga, (const float[]){ -0.15880801f, 0, 0.34571401f, 1.95459769f }, 4, 1e-5f);
    one_op("Dropout", 2, D(1, 4), x, 0, NULL, x, 4, 0);
    struct pb fa[1] = { pb_attr_int("axis", 2) };
    one_op("Flatten", 4, D(1, 2, 2, 1), x, 1, fa, x, 4, 0);
    /* Squeeze(axes input) of [1,4,1] -> [1,4]... with batch 1, then + ConstantOfShape(3.0) */
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 3, D(1, 4, 1));
    gb_init(&b, "ax", T_INT64, 1, D(1), D(2));
    gb_init(&b, "shape", T_INT64, 1, D(2), D(1, 4));
    gb_node(&b, "Squeeze", S("x", "ax"), S("sq"), 0, NULL);
    float three = 3;
    struct pb vt = pb_tensor(NULL, T_FLOAT, 1, D(1), &three, 4);
    struct pb cv[1] = { pb_attr_tensor("value", &vt) };
    gb_node(&b, "ConstantOfShape", S("shape"), S("c3"), 1, cv);
    gb_node(&b, "Mul", S("sq", "c3"), S("y"), 0, NULL);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    float y[4];
    char msg[600];
    if (run_model(&m, 1, x, NULL, y, sizeof y, msg))
        fail_msg("%s", msg);
    expect_f(y, (const float[]){ -3, 0, 1.5f, 6 }, 4, 0);
}

static void test_view_outputs(void **st)
{
    (void)st;
    /* an output that is a view of the input, and a value read twice (no ReLU fusion) */
    float x[4] = { -1, 2, -3, 4 };
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 2, D(1, 4));
    gb_init(&b, "sh", T_INT64, 1, D(2), D(2, 2));
    struct pb ct = pb_tensor(NULL, T_FLOAT, 1, D(1), (const float[]){ 0.0f }, 4);
    struct pb cv[1] = { pb_attr_tensor("value", &ct) };
    gb_node(&b, "Constant", NULL, S("zero"), 1, cv);
    gb_node(&b, "Add", S("x", "x"), S("a0"), 0, NULL);
    gb_node(&b, "Add", S("a0", "zero"), S("a"), 0, NULL);
    gb_node(&b, "Relu", S("a"), S("r"), 0, NULL);
    gb_node(&b, "Add", S("a", "r"), S("s"), 0, NULL);
    gb_node(&b, "Reshape", S("s", "sh"), S("y"), 0, NULL);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    float y[4];
    char msg[600];
    assert_int_equal(run_model(&m, 1, x, NULL, y, sizeof y, msg), 0);
    expect_f(y, (const float[]){ -2, 8, -6, 16 }, 4, 0);
}

/* y = Relu(Pad(Sigmoid(x), pads)) on x of 1 x 4 (pads: 4 int64): returns the nodes run. */
static size_t run_pad(const int64_t *pads, const float *x, float *out, size_t out_bytes)
{
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 2, D(1, 4));
    gb_init(&b, "pads", T_INT64, 1, D(4), pads);
    gb_node(&b, "Sigmoid", S("x"), S("s"), 0, NULL);
    gb_node(&b, "Pad", S("s", "pads"), S("p"), 0, NULL);
    gb_node(&b, "Relu", S("p"), S("y"), 0, NULL);
    gb_output(&b, "y");
    struct pb mp = gb_finish(&b);
    struct gj_error err = { 0 };
    onnx_model *m = onnx_model_load_memory(mp.b, mp.n, &err);
    free(mp.b);
    if (!m)
        fail_msg("%s", err.message);
    struct onnx_session_options o = { .batch = 1, .threads = 2, .backend = "cpu" };
    onnx_session *s = onnx_session_create(m, &o, &err);
    if (!s)
        fail_msg("%s", err.message);
    assert_int_equal(onnx_session_output_bytes(s, 0), out_bytes);
    const void *ins[1] = { x };
    void *outs[1] = { out };
    assert_int_equal(onnx_session_run(s, ins, outs, &err), 0);
    struct onnx_session_stats st;
    onnx_session_get_stats(s, &st);
    onnx_session_free(s);
    onnx_model_free(m);
    return st.n_nodes_run;
}

/* A Pad of nothing (DenseNet's exporter puts one before each transition's pool) is a view:
 * no kernel, the same result; one that pads still runs. */
static void test_pad_of_nothing(void **st)
{
    (void)st;
    float x[4] = { -1, 0, 1, 2 }, y[6], want[6] = { 0 };
    for (int i = 0; i < 4; i++)
        want[i] = 1.0f / (1.0f + expf(-x[i]));
    assert_int_equal(run_pad(D(0, 0, 0, 0), x, y, 4 * sizeof(float)), 2);
    expect_f(y, want, 4, 1e-6f);
    assert_int_equal(run_pad(D(0, 1, 0, 1), x, y, 6 * sizeof(float)), 3);
    for (int i = 4; i > 0; i--)
        want[i] = want[i - 1];
    want[0] = 0;
    expect_f(y, want, 6, 1e-6f);
}

/* ---- Concats written in place (onnx_plan_concat.c) ---- */

/* A dense block in small: c2 = Concat(a, f1), c3 = Concat(a, f1, f2), each feature read
 * elsewhere too; w = Concat(x, f2) has a graph input (copied). Outputs c3, Sigmoid(c2), w. */
static struct pb dense_block_model(void)
{
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 4, D(-1, 2, 2, 2));
    struct pb cat[3] = { pb_attr_int("axis", 1), pb_attr_int("axis", 1), pb_attr_int("axis", 1) };
    gb_node(&b, "Relu", S("x"), S("a"), 0, NULL);
    gb_node(&b, "Sigmoid", S("a"), S("f1"), 0, NULL);
    gb_node(&b, "Concat", S("a", "f1"), S("c2"), 1, cat);
    gb_node(&b, "Mul", S("f1", "a"), S("f2"), 0, NULL);
    gb_node(&b, "Concat", S("a", "f1", "f2"), S("c3"), 1, cat + 1);
    gb_node(&b, "Sigmoid", S("c2"), S("z"), 0, NULL);
    gb_node(&b, "Concat", S("x", "f2"), S("w"), 1, cat + 2);
    gb_output(&b, "c3");
    gb_output(&b, "z");
    gb_output(&b, "w");
    return gb_finish(&b);
}

/* Runs the model at batch n into out (c3, z, w back to back); returns the nodes run. */
static size_t run_dense_block(int n, const float *x, float *out)
{
    struct pb mp = dense_block_model();
    struct gj_error err = { 0 };
    onnx_model *m = onnx_model_load_memory(mp.b, mp.n, &err);
    free(mp.b);
    if (!m)
        fail_msg("%s", err.message);
    struct onnx_session_options o = { .batch = n, .threads = 2, .backend = "cpu" };
    onnx_session *s = onnx_session_create(m, &o, &err);
    if (!s)
        fail_msg("%s", err.message);
    const void *ins[1] = { x };
    void *outs[3] = { out, out + n * 24, out + n * 24 + n * 16 };
    assert_int_equal(onnx_session_run(s, ins, outs, &err), 0);
    struct onnx_session_stats st;
    onnx_session_get_stats(s, &st);
    onnx_session_free(s);
    onnx_model_free(m);
    return st.n_nodes_run;
}

static float sigm(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

static void test_concat_in_place(void **st)
{
    (void)st;
    float x[16], want[2 * 56], got[2 * 56], copied[2 * 56];
    for (int i = 0; i < 16; i++)
        x[i] = (float)(i % 5) - 2.0f + 0.25f * (float)i;
    for (int n = 1; n <= 2; n++) {
        for (int b = 0; b < n; b++) {
            float *c3 = want + b * 24, *z = want + n * 24 + b * 16, *w = want + n * 40 + b * 16;
            for (int i = 0; i < 8; i++) {
                float xv = x[b * 8 + i], a = xv > 0 ? xv : 0, f1 = sigm(a), f2 = f1 * a;
                c3[i] = a, c3[8 + i] = f1, c3[16 + i] = f2;
                z[i] = sigm(a), z[8 + i] = sigm(f1);
                w[i] = xv, w[8 + i] = f2;
            }
        }
        /* batch 1: both Concats of features run no kernel; batch 2: slices are not contiguous */
        assert_int_equal(run_dense_block(n, x, got), n == 1 ? 5 : 7);
        expect_f(got, want, n * 56, 1e-6f);
        setenv("GJ_ONNX_CONCAT_COPY", "1", 1);
        assert_int_equal(run_dense_block(n, x, copied), 7);
        unsetenv("GJ_ONNX_CONCAT_COPY");
        assert_memory_equal(got, copied, sizeof(float) * (size_t)n * 56);
    }
}

/* A DenseNet layer on pseudo-random data: BatchNormalization+ReLU, a 1x1 convolution (bias,
 * ReLU), a 3x3 one (pad 1); with `side`, the 1x1 convolution's output is also a graph
 * output (through an Identity, a view). Channels and pixels that are no multiple of 4, 16 or the
 * normalisation's tile (75 channels, 11x13), and convolutions large enough to be split
 * across 2 threads by images (batch 3) or channels (batch 1). */
enum { NL_C = 75, NL_H = 11, NL_W = 13, NL_M1 = 48, NL_M2 = 40 };

struct nl_data {
    float x[3 * NL_C * NL_H * NL_W], bn[4 * NL_C], w1[NL_M1 * NL_C], b1[NL_M1], w2[NL_M2 * NL_M1 * 9];
};

static void nl_fill(struct nl_data *d)
{
    uint32_t seed = 777;
    float *all = d->x;
    for (size_t i = 0; i < sizeof *d / sizeof(float); i++) {
        seed = seed * 1664525u + 1013904223u;
        all[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    for (int c = 0; c < NL_C; c++)
        d->bn[3 * NL_C + c] += 1.0f;   /* variances > 0 */
}

/* The layer computed directly: y (N x M2 x H x W) and h (the 1x1 convolution's output). */
static void nl_reference(const struct nl_data *d, int n, float *y, float *h)
{
    size_t plane = NL_H * NL_W;
    float *r = malloc((size_t)n * NL_C * plane * 4);
    assert_non_null(r);
    for (int b = 0; b < n; b++)
        for (int c = 0; c < NL_C; c++) {
            float sc = d->bn[c] / sqrtf(d->bn[3 * NL_C + c] + 1e-5f), sh = d->bn[NL_C + c] - d->bn[2 * NL_C + c] * sc;
            for (size_t i = 0; i < plane; i++) {
                float v = d->x[(b * NL_C + c) * plane + i] * sc + sh;
                r[(b * NL_C + c) * plane + i] = v > 0 ? v : 0;
            }
        }
    struct conv_geom g1 = { n, NL_C, NL_H, NL_W, NL_M1, 1, 1, 1, 1, 1, 1, { 0, 0, 0, 0 }, 1, 1 };
    struct conv_geom g2 = { n, NL_M1, NL_H, NL_W, NL_M2, 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1 }, 0, 0 };
    conv_direct(&g1, r, d->w1, d->b1, h, NL_H, NL_W);
    conv_direct(&g2, h, d->w2, NULL, y, NL_H, NL_W);
    free(r);
}

/* Runs the layer at batch n into y (and h where side); returns the activations kept NHWC. */
static size_t nl_run(const struct nl_data *d, int n, int side, float *y, float *h)
{
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 4, D(-1, NL_C, NL_H, NL_W));
    gb_init(&b, "s", T_FLOAT, 1, D(NL_C), d->bn);
    gb_init(&b, "bb", T_FLOAT, 1, D(NL_C), d->bn + NL_C);
    gb_init(&b, "mean", T_FLOAT, 1, D(NL_C), d->bn + 2 * NL_C);
    gb_init(&b, "var", T_FLOAT, 1, D(NL_C), d->bn + 3 * NL_C);
    gb_init(&b, "w1", T_FLOAT, 4, D(NL_M1, NL_C, 1, 1), d->w1);
    gb_init(&b, "b1", T_FLOAT, 1, D(NL_M1), d->b1);
    gb_init(&b, "w2", T_FLOAT, 4, D(NL_M2, NL_M1, 3, 3), d->w2);
    struct pb eps[1] = { pb_attr_float("epsilon", 1e-5f) }, pads[1] = { pb_attr_ints("pads", 4, D(1, 1, 1, 1)) };
    gb_node(&b, "BatchNormalization", S("x", "s", "bb", "mean", "var"), S("a"), 1, eps);
    gb_node(&b, "Relu", S("a"), S("r"), 0, NULL);
    gb_node(&b, "Conv", S("r", "w1", "b1"), S("c1"), 0, NULL);
    gb_node(&b, "Relu", S("c1"), S("h"), 0, NULL);
    gb_node(&b, "Conv", S("h", "w2"), S("y"), 1, pads);
    gb_output(&b, "y");
    if (side) {
        gb_node(&b, "Identity", S("h"), S("h_out"), 0, NULL);
        gb_output(&b, "h_out");
    }
    struct pb mp = gb_finish(&b);
    struct gj_error err = { 0 };
    onnx_model *m = onnx_model_load_memory(mp.b, mp.n, &err);
    free(mp.b);
    if (!m)
        fail_msg("%s", err.message);
    struct onnx_session_options o = { .batch = n, .threads = 2, .backend = "cpu" };
    onnx_session *s = onnx_session_create(m, &o, &err);
    if (!s)
        fail_msg("%s", err.message);
    const void *ins[1] = { d->x };
    void *outs[2] = { y, h };
    assert_int_equal(onnx_session_run(s, ins, outs, &err), 0);
    struct onnx_session_stats st;
    onnx_session_get_stats(s, &st);
    onnx_session_free(s);
    onnx_model_free(m);
    return st.n_nhwc;
}

/* With oneDNN, the normalisation's output and the 1x1 convolution's are kept NHWC between
 * the kernels (not the latter where something else reads it); the results are the
 * reference's either way, and with the layouts turned off (GJ_ONNX_NCHW) or oneDNN off. */
static void test_nhwc_between_convs(void **st)
{
    (void)st;
    struct nl_data *d = malloc(sizeof *d);
    size_t ny = 3 * NL_M2 * NL_H * NL_W, nh = 3 * NL_M1 * NL_H * NL_W;
    float *want = malloc(ny * 4), *want_h = malloc(nh * 4), *y = malloc(ny * 4), *h = malloc(nh * 4);
    assert_true(d && want && want_h && y && h);
    nl_fill(d);
    int dnnl = onnx_dnnl_version() != NULL;
    for (int n = 1; n <= 3; n += 2) {
        nl_reference(d, n, want, want_h);
        for (int side = 0; side <= 1; side++) {
            const char *envs[] = { NULL, "GJ_ONNX_NCHW", "GJ_ONNX_DNNL" };
            for (size_t e = 0; e < sizeof envs / sizeof *envs; e++) {
                if (envs[e])
                    setenv(envs[e], e == 2 ? "0" : "1", 1);
                memset(y, 0, ny * 4);
                size_t nhwc = nl_run(d, n, side, y, h);
                if (envs[e])
                    unsetenv(envs[e]);
                assert_int_equal(nhwc, dnnl && !envs[e] ? 2 - side : 0);
                expect_f(y, want, n * NL_M2 * NL_H * NL_W, 1e-4f);
                if (side)
                    expect_f(h, want_h, n * NL_M1 * NL_H * NL_W, 1e-4f);
            }
        }
    }
    free(d);
    free(want);
    free(want_h);
    free(y);
    free(h);
}

/* Two small dense blocks at batch n: a MaxPool's output, then an AveragePool's, each followed
 * by layers of BatchNormalization+ReLU and a convolution whose outputs are concatenated:
 *   p = MaxPool(x); f1 = Conv3x3(BR(Concat(p))); f2 = Conv1x1(BR(Concat(p, f1)));
 *   q = AveragePool(Concat(p, f1, f2)); y = Concat(q, Conv1x1(BR(Concat(q)))).
 * out: y (n x 64 x 5 x 5); returns the nodes run. */
enum { SB_X = 16 * 10 * 10, SB_Y = 64 * 5 * 5 };

static size_t run_strided_blocks(int n, const float *x, float *out)
{
    static float prm[2 * (16 * 16 * 9 + 16 * 32 + 16 * 48) + 4 * (16 + 32 + 48)];
    uint32_t seed = 99;
    for (size_t i = 0; i < sizeof prm / sizeof *prm; i++) {
        seed = seed * 1664525u + 1013904223u;
        prm[i] = (float)(seed >> 8) / 16777216.0f - 0.25f;
    }
    float *w1 = prm, *w2 = w1 + 16 * 16 * 9, *w3 = w2 + 16 * 32, *bn = w3 + 16 * 48;
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 4, D(-1, 16, 10, 10));
    gb_init(&b, "w1", T_FLOAT, 4, D(16, 16, 3, 3), w1);
    gb_init(&b, "w2", T_FLOAT, 4, D(16, 32, 1, 1), w2);
    gb_init(&b, "w3", T_FLOAT, 4, D(16, 48, 1, 1), w3);
    const char *bn_names[3][4] = { { "s1", "b1", "m1", "v1" }, { "s2", "b2", "m2", "v2" }, { "s3", "b3", "m3", "v3" } };
    int64_t bn_c[3] = { 16, 32, 48 };
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 4; i++) {
            if (i == 3)
                for (int64_t c = 0; c < bn_c[k]; c++)
                    bn[c] = fabsf(bn[c]) + 0.5f;   /* variances */
            gb_init(&b, bn_names[k][i], T_FLOAT, 1, D(bn_c[k]), bn);
            bn += bn_c[k];
        }
    }
    struct pb mp3[3] = { pb_attr_ints("kernel_shape", 2, D(3, 3)), pb_attr_ints("pads", 4, D(1, 1, 1, 1)),
                         pb_attr_ints("strides", 2, D(1, 1)) };
    struct pb ap2[2] = { pb_attr_ints("kernel_shape", 2, D(2, 2)), pb_attr_ints("strides", 2, D(2, 2)) };
    struct pb pad1[1] = { pb_attr_ints("pads", 4, D(1, 1, 1, 1)) };
    struct pb cat[5] = { pb_attr_int("axis", 1), pb_attr_int("axis", 1), pb_attr_int("axis", 1),
                         pb_attr_int("axis", 1), pb_attr_int("axis", 1) };
    gb_node(&b, "MaxPool", S("x"), S("p"), 3, mp3);
    gb_node(&b, "Concat", S("p"), S("c1"), 1, cat);
    gb_node(&b, "BatchNormalization", S("c1", "s1", "b1", "m1", "v1"), S("n1"), 0, NULL);
    gb_node(&b, "Relu", S("n1"), S("r1"), 0, NULL);
    gb_node(&b, "Conv", S("r1", "w1"), S("f1"), 1, pad1);
    gb_node(&b, "Concat", S("p", "f1"), S("c2"), 1, cat + 1);
    gb_node(&b, "BatchNormalization", S("c2", "s2", "b2", "m2", "v2"), S("n2"), 0, NULL);
    gb_node(&b, "Relu", S("n2"), S("r2"), 0, NULL);
    gb_node(&b, "Conv", S("r2", "w2"), S("f2"), 0, NULL);
    gb_node(&b, "Concat", S("p", "f1", "f2"), S("c3"), 1, cat + 2);
    gb_node(&b, "AveragePool", S("c3"), S("q"), 2, ap2);
    gb_node(&b, "Concat", S("q"), S("c4"), 1, cat + 3);
    gb_node(&b, "BatchNormalization", S("c4", "s3", "b3", "m3", "v3"), S("n3"), 0, NULL);
    gb_node(&b, "Relu", S("n3"), S("r3"), 0, NULL);
    gb_node(&b, "Conv", S("r3", "w3"), S("f3"), 0, NULL);
    gb_node(&b, "Concat", S("q", "f3"), S("y"), 1, cat + 4);
    gb_output(&b, "y");
    struct pb mp = gb_finish(&b);
    struct gj_error err = { 0 };
    onnx_model *m = onnx_model_load_memory(mp.b, mp.n, &err);
    free(mp.b);
    if (!m)
        fail_msg("%s", err.message);
    struct onnx_session_options o = { .batch = n, .threads = 2, .backend = "cpu" };
    onnx_session *s = onnx_session_create(m, &o, &err);
    if (!s)
        fail_msg("%s", err.message);
    const void *ins[1] = { x };
    void *outs[1] = { out };
    assert_int_equal(onnx_session_run(s, ins, outs, &err), 0);
    struct onnx_session_stats st;
    onnx_session_get_stats(s, &st);
    onnx_session_free(s);
    onnx_model_free(m);
    return st.n_nodes_run;
}

/* A normalisation that reads a Concat's slice and writes a graph output (NCHW):
 * p = MaxPool(x); z = BN(Concat(p)); y = Concat(p, Conv1x1(z)). out: y (n x 32 x 10 x 10),
 * then z (n x 16 x 10 x 10); returns the nodes run. */
static size_t run_bn_of_slice(int n, const float *x, float *out)
{
    static float prm[16 * 16 + 4 * 16];
    for (int i = 0; i < 16 * 16 + 4 * 16; i++)
        prm[i] = (float)((i * 29) % 31) / 31.0f - 0.4f + (i >= 16 * 16 + 48 ? 1.0f : 0.0f);
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 4, D(-1, 16, 10, 10));
    gb_init(&b, "w", T_FLOAT, 4, D(16, 16, 1, 1), prm);
    const char *names[4] = { "s", "b", "m", "v" };
    for (int i = 0; i < 4; i++)
        gb_init(&b, names[i], T_FLOAT, 1, D(16), prm + 16 * 16 + 16 * i);
    struct pb mp3[2] = { pb_attr_ints("kernel_shape", 2, D(3, 3)), pb_attr_ints("pads", 4, D(1, 1, 1, 1)) };
    struct pb cat[2] = { pb_attr_int("axis", 1), pb_attr_int("axis", 1) };
    gb_node(&b, "MaxPool", S("x"), S("p"), 2, mp3);
    gb_node(&b, "Concat", S("p"), S("c1"), 1, cat);
    gb_node(&b, "BatchNormalization", S("c1", "s", "b", "m", "v"), S("z"), 0, NULL);
    gb_node(&b, "Conv", S("z", "w"), S("f"), 0, NULL);
    gb_node(&b, "Concat", S("p", "f"), S("y"), 1, cat + 1);
    gb_output(&b, "y");
    gb_output(&b, "z");
    struct pb mp = gb_finish(&b);
    struct gj_error err = { 0 };
    onnx_model *m = onnx_model_load_memory(mp.b, mp.n, &err);
    free(mp.b);
    if (!m)
        fail_msg("%s", err.message);
    struct onnx_session_options o = { .batch = n, .threads = 2, .backend = "cpu" };
    onnx_session *s = onnx_session_create(m, &o, &err);
    if (!s)
        fail_msg("%s", err.message);
    const void *ins[1] = { x };
    void *outs[2] = { out, out + n * 3200 };
    assert_int_equal(onnx_session_run(s, ins, outs, &err), 0);
    struct onnx_session_stats st;
    onnx_session_get_stats(s, &st);
    onnx_session_free(s);
    onnx_model_free(m);
    return st.n_nodes_run;
}

/* At batch > 1, with oneDNN, the Concats are written in place as at batch 1 (the pools and
 * convolutions write strided slices, BatchNormalization and the convolutions read them): 8
 * nodes run, not 13; the results are those of every Concat copying with our own kernels. */
static void test_concat_in_place_batches(void **st)
{
    (void)st;
    float x[3 * SB_X], want[3 * SB_Y], got[3 * SB_Y];
    for (int i = 0; i < 3 * SB_X; i++)
        x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    int dnnl = onnx_dnnl_version() != NULL;
    for (int n = 1; n <= 3; n++) {
        setenv("GJ_ONNX_CONCAT_COPY", "1", 1);
        setenv("GJ_ONNX_DNNL", "0", 1);
        assert_int_equal(run_strided_blocks(n, x, want), 13);
        unsetenv("GJ_ONNX_DNNL");
        unsetenv("GJ_ONNX_CONCAT_COPY");
        memset(got, 0, sizeof got);
        assert_int_equal(run_strided_blocks(n, x, got), dnnl || n == 1 ? 8 : 13 - 2);
        expect_f(got, want, n * SB_Y, 1e-4f);
        setenv("GJ_ONNX_DNNL", "0", 1);   /* our kernels: in place at batch 1 only */
        memset(got, 0, sizeof got);
        run_strided_blocks(n, x, got);
        unsetenv("GJ_ONNX_DNNL");
        expect_f(got, want, n * SB_Y, 1e-4f);
    }
    float want2[3 * 4800], got2[3 * 4800];
    for (int n = 2; n <= 3; n++) {
        setenv("GJ_ONNX_CONCAT_COPY", "1", 1);
        assert_int_equal(run_bn_of_slice(n, x, want2), 5);
        unsetenv("GJ_ONNX_CONCAT_COPY");
        assert_int_equal(run_bn_of_slice(n, x, got2), dnnl ? 3 : 5 - 1);
        expect_f(got2, want2, n * 4800, 1e-5f);
    }
}

/* ---- refusals ---- */

static struct pb tiny_model(const char *op, int n_attr, struct pb *attrs)
{
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 2, D(1, 4));
    gb_node(&b, op, S("x"), S("y"), n_attr, attrs);
    gb_output(&b, "y");
    return gb_finish(&b);
}

static void expect_refusal(struct pb *m, const char *needle)
{
    char msg[600];
    float x[4] = { 0 }, y[4];
    int rc = run_model(m, 1, x, NULL, y, sizeof y, msg);
    assert_int_equal(rc, -1);
    if (!strstr(msg, needle))
        fail_msg("message '%s' does not mention '%s'", msg, needle);
}

static void test_unsupported(void **st)
{
    (void)st;
    struct pb m = tiny_model("FancyOp", 0, NULL);
    expect_refusal(&m, "FancyOp");
    struct pb at[1] = { pb_attr_int("frobnicate", 1) };
    m = tiny_model("Relu", 1, at);
    expect_refusal(&m, "frobnicate");
    struct pb at2[1] = { pb_attr_str("approximate", "cubic") };
    m = tiny_model("Gelu", 1, at2);
    expect_refusal(&m, "approximate");
    struct pb at3[1] = { pb_attr_int("to", 14) };   /* COMPLEX64 */
    m = tiny_model("Cast", 1, at3);
    expect_refusal(&m, "cast to COMPLEX64 is not supported");
    struct pb at4[1] = { pb_attr_int("to", 8) };   /* STRING: strings are never made */
    m = tiny_model("Cast", 1, at4);
    expect_refusal(&m, "cast to STRING is not supported");
    m = tiny_model("If", 0, NULL);
    expect_refusal(&m, "If");
    /* an op of a custom domain */
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 2, D(1, 4));
    struct pb nd = pb_node("Relu", S("x"), S("y"), 0, NULL);
    pb_str(&nd, 7, "com.microsoft");
    pb_msg(&b.g, 1, &nd);
    gb_output(&b, "y");
    m = gb_finish(&b);
    expect_refusal(&m, "com.microsoft");
    /* opset too old */
    struct gb o = { 0 };
    o.opset = 7;
    gb_input(&o, "x", T_FLOAT, 2, D(1, 4));
    gb_node(&o, "Relu", S("x"), S("y"), 0, NULL);
    gb_output(&o, "y");
    m = gb_finish(&o);
    expect_refusal(&m, "opset 7");
    /* a non-constant Reshape shape is refused at session creation, by node name */
    struct gb r = { 0 };
    gb_input(&r, "x", T_FLOAT, 2, D(2, 2));
    gb_input(&r, "s", T_INT64, 1, D(2));
    gb_node(&r, "Reshape", S("x", "s"), S("y"), 0, NULL);
    gb_output(&r, "y");
    m = gb_finish(&r);
    char msg[600];
    assert_int_equal(run_model(&m, 2, NULL, NULL, NULL, 0, msg), -1);
    assert_non_null(strstr(msg, "Reshape"));
    assert_non_null(strstr(msg, "constant"));
}

/* Each operator reads its own attributes: a pooling attribute is refused on Conv, required
 * ones are named when missing, values and types the runtime does not take are refused, and
 * the message names the node and the attribute. */
static void test_attribute_refusals(void **st)
{
    (void)st;
    float w[4] = { 0 };
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 4, D(1, 1, 2, 2));
    gb_init(&b, "w", T_FLOAT, 4, D(1, 1, 2, 2), w);
    struct pb ceil[1] = { pb_attr_int("ceil_mode", 1) };
    gb_node(&b, "Conv", S("x", "w"), S("y"), 1, ceil);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    expect_refusal(&m, "node 'Conv' (Conv): attribute 'ceil_mode' is not supported");
    m = tiny_model("MaxPool", 0, NULL);
    expect_refusal(&m, "'kernel_shape' is missing");
    struct pb dil[2] = { pb_attr_ints("kernel_shape", 2, D(1, 1)), pb_attr_ints("dilations", 2, D(2, 2)) };
    m = tiny_model("AveragePool", 2, dil);
    expect_refusal(&m, "attribute 'dilations' other than 1 is not supported for AveragePool");
    struct pb so[2] = { pb_attr_ints("kernel_shape", 2, D(1, 1)), pb_attr_int("storage_order", 1) };
    m = tiny_model("MaxPool", 2, so);
    expect_refusal(&m, "storage_order");
    struct pb perm[1] = { pb_attr_ints("perm", 2, D(0, 0)) };
    m = tiny_model("Transpose", 1, perm);
    expect_refusal(&m, "'perm' is not a permutation");
    struct pb alpha[1] = { pb_attr_int("alpha", 2) };
    m = tiny_model("Softmax", 1, alpha);
    expect_refusal(&m, "attribute 'alpha' is not supported");
    struct pb axes[1] = { pb_attr_int("axis", 0) };
    m = tiny_model("Relu", 1, axes);
    expect_refusal(&m, "node 'Relu' (Relu): attribute 'axis'");
    struct pb gelu[1] = { pb_attr_int("approximate", 1) };
    m = tiny_model("Gelu", 1, gelu);
    expect_refusal(&m, "attribute 'approximate' has an unexpected type");
    struct pb sq[1] = { pb_attr_ints("axes", 1, D(0)) };   /* an input since opset 13 */
    m = tiny_model("Squeeze", 1, sq);
    expect_refusal(&m, "attribute 'axes' is not supported");
}

static void test_wrong_dims(void **st)
{
    (void)st;
    /* Conv weight with 3 input channels on a 1-channel input */
    float w[27] = { 0 };
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 4, D(1, 1, 2, 2));
    gb_init(&b, "w", T_FLOAT, 4, D(1, 3, 3, 3), w);
    gb_node(&b, "Conv", S("x", "w"), S("y"), 0, NULL);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    expect_refusal(&m, "channels");
    /* initializer whose raw data does not match its dims */
    struct gb c = { 0 };
    gb_input(&c, "x", T_FLOAT, 2, D(1, 4));
    struct pb t = pb_tensor("w", T_FLOAT, 2, D(4, 4), w, 12);
    pb_msg(&c.g, 5, &t);
    gb_node(&c, "Add", S("x", "w"), S("y"), 0, NULL);
    gb_output(&c, "y");
    m = gb_finish(&c);
    expect_refusal(&m, "does not match");
    /* MatMul inner dims */
    struct gb d = { 0 };
    gb_input(&d, "x", T_FLOAT, 2, D(1, 4));
    gb_init(&d, "w", T_FLOAT, 2, D(3, 1), w);
    gb_node(&d, "MatMul", S("x", "w"), S("y"), 0, NULL);
    gb_output(&d, "y");
    m = gb_finish(&d);
    expect_refusal(&m, "inner");
}

/* The model b holds: no session with `over` (the error mentions needle), one with `ok`. */
static void expect_limit(struct gb *b, const struct onnx_session_options *over, const char *needle,
                         const struct onnx_session_options *ok)
{
    struct pb mm = gb_finish(b);
    struct gj_error er = { 0 };
    onnx_model *o = onnx_model_load_memory(mm.b, mm.n, &er);
    free(mm.b);
    assert_non_null(o);
    assert_null(onnx_session_create(o, over, &er));
    assert_non_null(strstr(er.message, needle));
    onnx_session *ss = onnx_session_create(o, ok, &er);
    assert_non_null(ss);
    onnx_session_free(ss);
    onnx_model_free(o);
}

static void test_huge_sizes(void **st)
{
    (void)st;
    /* dims 2^40 x 2^40 declared with 4 bytes of data */
    float w[1] = { 0 };
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 2, D(1, 4));
    struct pb t = pb_tensor("w", T_FLOAT, 2, D((int64_t)1 << 40, (int64_t)1 << 40), w, 4);
    pb_msg(&b.g, 5, &t);
    gb_node(&b, "Add", S("x", "w"), S("y"), 0, NULL);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    expect_refusal(&m, "huge");
    /* ConstantOfShape asking for 10^12 elements */
    struct gb c = { 0 };
    gb_input(&c, "x", T_FLOAT, 2, D(1, 4));
    gb_init(&c, "s", T_INT64, 1, D(2), D(1000000, 1000000));
    gb_node(&c, "ConstantOfShape", S("s"), S("z"), 0, NULL);
    gb_node(&c, "Add", S("x", "z"), S("y"), 0, NULL);
    gb_output(&c, "y");
    m = gb_finish(&c);
    expect_refusal(&m, "too large");
    /* a huge input dimension */
    struct gb d = { 0 };
    gb_input(&d, "x", T_FLOAT, 3, D(1, 1 << 30, 1 << 30));
    gb_node(&d, "Relu", S("x"), S("y"), 0, NULL);
    gb_output(&d, "y");
    m = gb_finish(&d);
    char msg[600];
    assert_int_equal(run_model(&m, 1, NULL, NULL, NULL, 0, msg), -1);
    assert_non_null(strstr(msg, "too large"));
    /* a memory limit per session */
    {
        struct gb e = { 0 };
        gb_input(&e, "x", T_FLOAT, 2, D(-1, 1000));
        gb_node(&e, "Relu", S("x"), S("y"), 0, NULL);
        gb_output(&e, "y");
        struct onnx_session_options op = { .batch = 100, .threads = 1, .backend = "cpu", .max_bytes = 500000 };
        struct onnx_session_options ok = op;
        ok.batch = 10;
        expect_limit(&e, &op, "limit", &ok);
    }
    /* the limit counts scratch: a 3x3 Conv on 100x100 holds about 80 kB of tensors but needs
     * 360 kB of im2col scratch on the CPU (our kernel: oneDNN's needs none here) */
    {
        setenv("GJ_ONNX_DNNL", "0", 1);
        float w9[9] = { 0 };
        struct gb e = { 0 };
        gb_input(&e, "x", T_FLOAT, 4, D(1, 1, 100, 100));
        gb_init(&e, "w", T_FLOAT, 4, D(1, 1, 3, 3), w9);
        struct pb at[1] = { pb_attr_ints("pads", 4, D(1, 1, 1, 1)) };
        gb_node(&e, "Conv", S("x", "w"), S("y"), 1, at);
        gb_output(&e, "y");
        struct onnx_session_options op = { .batch = 1, .threads = 1, .backend = "cpu", .max_bytes = 200000 };
        struct onnx_session_options ok = op;
        ok.max_bytes = 500000;
        expect_limit(&e, &op, "scratch", &ok);
        unsetenv("GJ_ONNX_DNNL");
    }
    /* a length prefix claiming 2^60 bytes */
    uint8_t bad[16] = { (7 << 3) | 2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10 };
    struct gj_error err = { 0 };
    assert_null(onnx_model_load_memory(bad, sizeof bad, &err));
    assert_true(err.message[0] != 0);
}

static void test_external_and_structure(void **st)
{
    (void)st;
    /* external data */
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 2, D(1, 4));
    struct pb t = { 0 };
    pb_int(&t, 1, 4);
    pb_int(&t, 2, T_FLOAT);
    pb_str(&t, 8, "w");
    pb_int(&t, 14, 1);
    pb_msg(&b.g, 5, &t);
    gb_node(&b, "Add", S("x", "w"), S("y"), 0, NULL);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    expect_refusal(&m, "external");
    /* cycle */
    struct gb c = { 0 };
    gb_input(&c, "x", T_FLOAT, 2, D(1, 4));
    gb_node(&c, "Add", S("x", "b"), S("a"), 0, NULL);
    gb_node(&c, "Relu", S("a"), S("b"), 0, NULL);
    gb_output(&c, "b");
    m = gb_finish(&c);
    expect_refusal(&m, "cycle");
    /* undefined value */
    struct gb d = { 0 };
    gb_input(&d, "x", T_FLOAT, 2, D(1, 4));
    gb_node(&d, "Add", S("x", "ghost"), S("y"), 0, NULL);
    gb_output(&d, "y");
    m = gb_finish(&d);
    expect_refusal(&m, "ghost");
    /* a Gather index out of range, constant (folding) and at run time */
    struct gb e = { 0 };
    float w[4] = { 1, 2, 3, 4 };
    gb_input(&e, "i", T_INT64, 1, D(1));
    gb_init(&e, "w", T_FLOAT, 1, D(4), w);
    gb_node(&e, "Gather", S("w", "i"), S("y"), 0, NULL);
    gb_output(&e, "y");
    m = gb_finish(&e);
    char msg[600];
    int64_t idx = 7;
    float y[1];
    assert_int_equal(run_model(&m, 1, &idx, NULL, y, 4, msg), -1);
    assert_non_null(strstr(msg, "Gather"));
    struct gb f = { 0 };
    gb_input(&f, "i", T_INT64, 1, D(1));
    gb_init(&f, "w", T_FLOAT, 1, D(4), w);
    gb_node(&f, "Gather", S("w", "i"), S("y"), 0, NULL);
    gb_output(&f, "y");
    m = gb_finish(&f);
    idx = -1;
    assert_int_equal(run_model(&m, 1, &idx, NULL, y, 4, msg), 0);
    assert_true(y[0] == 4.0f);
}

static void test_truncated_and_fuzzed(void **st)
{
    (void)st;
    float w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (float)i;
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 4, D(1, 1, 4, 4));
    gb_init(&b, "w", T_FLOAT, 4, D(1, 1, 2, 2), w);
    struct pb at[1] = { pb_attr_ints("pads", 4, D(0, 0, 1, 1)) };
    gb_node(&b, "Conv", S("x", "w"), S("c"), 1, at);
    gb_node(&b, "Relu", S("c"), S("y"), 0, NULL);
    gb_output(&b, "y");
    struct pb m = gb_finish(&b);
    struct gj_error err;
    /* every truncation: either refused or a complete prefix; never a crash */
    int refused = 0;
    for (size_t n = 0; n < m.n; n++) {
        memset(&err, 0, sizeof err);
        onnx_model *o = onnx_model_load_memory(m.b, n, &err);
        if (!o) {
            refused++;
            assert_true(err.message[0] != 0);
        }
        onnx_model_free(o);
    }
    assert_true(refused >= (int)m.n - 2);
    /* byte flips, deterministic: load, and run what loads */
    uint8_t *c = malloc(m.n);
    uint32_t seed = 12345;
    for (int it = 0; it < 3000; it++) {
        memcpy(c, m.b, m.n);
        for (int k = 0; k < 1 + it % 4; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t pos = (seed >> 8) % m.n;
            seed = seed * 1103515245u + 12345u;
            c[pos] = (uint8_t)(seed >> 16);
        }
        memset(&err, 0, sizeof err);
        onnx_model *o = onnx_model_load_memory(c, m.n, &err);
        if (!o)
            continue;
        struct onnx_session_options opt = { .batch = 1, .threads = 1, .backend = "cpu" };
        onnx_session *s = onnx_session_create(o, &opt, &err);
        if (s && onnx_session_input_bytes(s, 0) <= ((size_t)1 << 24)) {
            void *in = calloc(1, onnx_session_input_bytes(s, 0) + 1);
            void *out = calloc(1, onnx_session_output_bytes(s, 0) + 1);
            const void *ins[1] = { in };
            void *outs[1] = { out };
            if (onnx_model_num_inputs(o) == 1 && onnx_model_num_outputs(o) == 1)
                (void)onnx_session_run(s, ins, outs, &err);
            free(in);
            free(out);
        }
        onnx_session_free(s);
        onnx_model_free(o);
    }
    free(c);
    free(m.b);
    memset(&err, 0, sizeof err);
    assert_null(onnx_model_load_memory("garbage!", 8, &err));
    assert_null(onnx_model_load_memory("", 0, &err));
}

/* Models that fuzz/onnx_fuzz.c found to overflow or to escape the memory limit. */
static struct pb range_model(int64_t start, int64_t limit, int64_t delta)
{
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 2, D(1, 4));
    gb_init(&b, "a", T_INT64, 0, NULL, &start);
    gb_init(&b, "l", T_INT64, 0, NULL, &limit);
    gb_init(&b, "d", T_INT64, 0, NULL, &delta);
    gb_node(&b, "Range", S("a", "l", "d"), S("y"), 0, NULL);
    gb_output(&b, "y");
    return gb_finish(&b);
}

static void test_fuzz_findings(void **st)
{
    (void)st;
    char msg[600];
    const float zeros[4] = { 0 };
    /* int64 Range whose span exceeds INT64_MAX: counted exactly, values without overflow */
    struct pb m = range_model(INT64_MIN, INT64_MAX, INT64_MAX);
    int64_t y3[3];
    assert_int_equal(run_model(&m, 1, zeros, NULL, y3, sizeof y3, msg), 0);
    assert_true(y3[0] == INT64_MIN && y3[1] == -1 && y3[2] == INT64_MAX - 1);
    m = range_model(-((int64_t)1 << 62), 8000000000000000000, 8000000000000000000);
    int64_t y2[2];
    assert_int_equal(run_model(&m, 1, zeros, NULL, y2, sizeof y2, msg), 0);
    assert_true(y2[0] == -((int64_t)1 << 62) && y2[1] == 8000000000000000000 - ((int64_t)1 << 62));
    m = range_model(0, INT64_MAX, 1);
    expect_refusal(&m, "too large");
    /* folding counts against the session's limit before it allocates (2 GiB here) */
    m = range_model(0, (int64_t)1 << 28, 1);
    struct gj_error err = { 0 };
    onnx_model *o = onnx_model_load_memory(m.b, m.n, &err);
    free(m.b);
    assert_non_null(o);
    struct onnx_session_options opt = { .batch = 1, .threads = 1, .backend = "cpu", .max_bytes = 1 << 20 };
    assert_null(onnx_session_create(o, &opt, &err));
    if (!strstr(err.message, "folded constants"))
        fail_msg("unexpected message '%s'", err.message);
    onnx_model_free(o);
    /* a Slice step far beyond the dim (its stride overflowed): one element */
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 2, D(1, 4));
    gb_init(&b, "s", T_INT64, 1, D(1), D(1));
    gb_init(&b, "e", T_INT64, 1, D(1), D(4));
    gb_init(&b, "a", T_INT64, 1, D(1), D(1));
    gb_init(&b, "p", T_INT64, 1, D(1), D(((int64_t)1 << 57) - 1));
    gb_node(&b, "Slice", S("x", "s", "e", "a", "p"), S("y"), 0, NULL);
    gb_output(&b, "y");
    m = gb_finish(&b);
    float x[4] = { 1, 2, 3, 4 }, y1[1];
    assert_int_equal(run_model(&m, 1, x, NULL, y1, sizeof y1, msg), 0);
    assert_true(y1[0] == 2);
    /* an empty string attribute (no data pointer) is refused by value */
    struct pb at[1] = { pb_attr_str("mode", "") };
    struct gb c = { 0 };
    gb_input(&c, "x", T_FLOAT, 2, D(1, 4));
    gb_init(&c, "pads", T_INT64, 1, D(4), D(0, 0, 0, 0));
    gb_node(&c, "Pad", S("x", "pads"), S("y"), 1, at);
    gb_output(&c, "y");
    m = gb_finish(&c);
    expect_refusal(&m, "mode");
    /* a required input named "" (absent): LayerNormalization's scale was read from NULL */
    struct gb e = { 0 };
    gb_input(&e, "x", T_FLOAT, 2, D(1, 4));
    gb_node(&e, "LayerNormalization", S("x", ""), S("y"), 0, NULL);
    gb_output(&e, "y");
    m = gb_finish(&e);
    expect_refusal(&m, "required input 2 is empty");
    /* a Conv whose output has a dim of 0 (input width 0): nothing to compute, no scratch */
    float w8[8] = { 1, 1, 1, 1, 1, 1, 1, 1 }, none[1];
    struct gb f = { 0 };
    gb_input(&f, "x", T_FLOAT, 4, D(1, 2, 4, 0));
    gb_init(&f, "w", T_FLOAT, 4, D(2, 1, 2, 2), w8);
    struct pb ca[3] = { pb_attr_str("auto_pad", "SAME_UPPER"), pb_attr_int("group", 2),
                        pb_attr_ints("strides", 2, D(2, 2)) };
    gb_node(&f, "Conv", S("x", "w"), S("y"), 3, ca);
    gb_output(&f, "y");
    m = gb_finish(&f);
    assert_int_equal(run_model(&m, 1, none, NULL, none, 0, msg), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_conv_shapes),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_pool_shapes),
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_softmax_layernorm),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_gemm_matmul),
        cmocka_unit_test(test_shape_ops),
        cmocka_unit_test(test_misc_ops),
        cmocka_unit_test(test_more_ops),
        cmocka_unit_test(test_view_outputs),
        cmocka_unit_test(test_pad_of_nothing),
        cmocka_unit_test(test_concat_in_place),
        cmocka_unit_test(test_nhwc_between_convs),
        cmocka_unit_test(test_concat_in_place_batches),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_attribute_refusals),
        cmocka_unit_test(test_wrong_dims),
        cmocka_unit_test(test_huge_sizes),
        cmocka_unit_test(test_external_and_structure),
        cmocka_unit_test(test_truncated_and_fuzzed),
        cmocka_unit_test(test_fuzz_findings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
