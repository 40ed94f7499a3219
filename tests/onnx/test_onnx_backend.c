/*
 * test_onnx_backend.c — choosing a backend, in the normal suite (no GPU needed): the "cuda"
 * backend gives a clear error where this build has no CUDA backend or the machine has no
 * device, and works where both exist; unknown backends and precisions are refused; the CPU
 * backend refuses TF32 and FP16 and holds no device memory; zero-initialised options still
 * mean CPU, FP32. BatchNormalization after a Conv is folded at session creation. Profiling is
 * an option of the session, off by default. A session names how it computes each
 * convolution shape (provenance).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "infer/onnx/onnx_exec.h"
#include "infer/onnx/onnx_model.h"
#include "pbw.h"

/* The model the builder holds, loaded (the builder is consumed). */
static onnx_model *load(struct gb *b)
{
    struct pb m = gb_finish(b);
    struct gj_error err = { 0 };
    onnx_model *model = onnx_model_load_memory(m.b, m.n, &err);
    free(m.b);
    if (!model)
        fail_msg("load: %s", err.message);
    return model;
}

static onnx_model *relu_model(void)
{
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 2, D(-1, 4));
    gb_node(&b, "Relu", S("x"), S("y"), 0, NULL);
    gb_output(&b, "y");
    return load(&b);
}

static void test_cpu_defaults(void **st)
{
    (void)st;
    struct gj_error why = { 0 };
    assert_int_equal(onnx_backend_available("cpu", &why), 1);
    assert_int_equal(onnx_backend_available(NULL, NULL), 1);
    onnx_model *m = relu_model();
    struct gj_error err = { 0 };
    struct onnx_session_options o = { .batch = 2, .threads = 1 };   /* backend NULL, FP32 */
    onnx_session *s = onnx_session_create(m, &o, &err);
    assert_non_null(s);
    assert_int_equal(onnx_session_device_bytes(s), 0);
    float x[8] = { -1, 2, -3, 4, 5, -6, 7, -8 }, y[8];
    const void *ins[1] = { x };
    void *outs[1] = { y };
    assert_int_equal(onnx_session_run(s, ins, outs, &err), 0);
    assert_true(y[0] == 0 && y[1] == 2 && y[6] == 7 && y[7] == 0);
    onnx_session_free(s);
    /* cuda_graphs and device mean nothing to the CPU backend */
    o.cuda_graphs = 1;
    o.device = 3;
    s = onnx_session_create(m, &o, &err);
    assert_non_null(s);
    onnx_session_free(s);
    onnx_model_free(m);
}

static void test_refusals(void **st)
{
    (void)st;
    onnx_model *m = relu_model();
    struct gj_error err = { 0 };
    struct gj_error why = { 0 };
    assert_int_equal(onnx_backend_available("tpu", &why), 0);
    assert_non_null(strstr(why.message, "unknown backend"));
    assert_string_equal(why.field, "backend");
    struct onnx_session_options o = { .batch = 1, .threads = 1, .backend = "tpu" };
    assert_null(onnx_session_create(m, &o, &err));
    assert_non_null(strstr(err.message, "unknown backend"));
    /* the CPU backend computes in FP32 only */
    for (int p = ONNX_PRECISION_TF32; p <= ONNX_PRECISION_FP16; p++) {
        memset(&err, 0, sizeof err);
        o = (struct onnx_session_options){ .batch = 1, .threads = 1, .backend = "cpu", .precision = p };
        assert_null(onnx_session_create(m, &o, &err));
        assert_string_equal(err.field, "precision");
        assert_non_null(strstr(err.message, "FP32 only"));
    }
    memset(&err, 0, sizeof err);
    o = (struct onnx_session_options){ .batch = 1, .threads = 1, .precision = 7 };
    assert_null(onnx_session_create(m, &o, &err));
    assert_non_null(strstr(err.message, "precision 7"));
    memset(&err, 0, sizeof err);
    o = (struct onnx_session_options){ .batch = 1, .threads = 1, .backend = "cuda", .device = -1 };
    assert_null(onnx_session_create(m, &o, &err));
    assert_non_null(strstr(err.message, "negative"));
    onnx_model_free(m);
}

/* Where the CUDA backend cannot run (no CUDA build, or no device), both the availability
 * check and session creation say why; where it can, a session runs and holds device memory. */
static void test_cuda_backend(void **st)
{
    (void)st;
    onnx_model *m = relu_model();
    struct gj_error why = { 0 }, err = { 0 };
    const char *msg = why.message;
    struct onnx_session_options o = { .batch = 2, .threads = 1, .backend = "cuda" };
    if (!onnx_backend_available("cuda", &why)) {
        printf("cuda: %s\n", msg);
        assert_true(strstr(msg, "this build has no CUDA backend") || strstr(msg, "CUDA device"));
        assert_null(onnx_session_create(m, &o, &err));
        assert_string_equal(err.field, "backend");
        assert_non_null(strstr(err.message, msg));
        o.precision = ONNX_PRECISION_FP16;
        o.cuda_graphs = 1;
        assert_null(onnx_session_create(m, &o, &err));
        assert_non_null(strstr(err.message, msg));
    } else {
        onnx_session *s = onnx_session_create(m, &o, &err);
        if (!s)
            fail_msg("cuda session: %s", err.message);
        assert_true(onnx_session_device_bytes(s) >= onnx_session_input_bytes(s, 0));
        float x[8] = { -1, 2, -3, 4, 5, -6, 7, -8 }, y[8];
        const void *ins[1] = { x };
        void *outs[1] = { y };
        assert_int_equal(onnx_session_run(s, ins, outs, &err), 0);
        assert_true(y[0] == 0 && y[1] == 2 && y[6] == 7 && y[7] == 0);
        onnx_session_free(s);
        o.device = 1000;
        assert_null(onnx_session_create(m, &o, &err));
        assert_non_null(strstr(err.message, "does not exist"));
    }
    onnx_model_free(m);
}

/* Conv -> BatchNormalization -> Relu becomes one Conv (with bias and ReLU) on every backend. */
static void test_batchnorm_folding(void **st)
{
    (void)st;
    /* 1x1 conv, 2 -> 2 channels: c0 = x0 + x1, c1 = x0 - x1; BN: (c - mean) / sqrt(var) * s + b */
    float w[4] = { 1, 1, 1, -1 }, sc[2] = { 2, 1 }, bi[2] = { 1, -1 }, mu[2] = { 1, 0 }, var[2] = { 4, 1 };
    struct gb g = { 0 };
    gb_input(&g, "x", T_FLOAT, 4, D(1, 2, 1, 2));
    gb_init(&g, "w", T_FLOAT, 4, D(2, 2, 1, 1), w);
    const char *names[4] = { "s", "b", "m", "v" };
    const float *data[4] = { sc, bi, mu, var };
    for (int i = 0; i < 4; i++)
        gb_init(&g, names[i], T_FLOAT, 1, D(2), data[i]);
    struct pb eps[1] = { pb_attr_float("epsilon", 0.0f) };
    gb_node(&g, "Conv", S("x", "w"), S("c"), 0, NULL);
    gb_node(&g, "BatchNormalization", S("c", "s", "b", "m", "v"), S("n"), 1, eps);
    gb_node(&g, "Relu", S("n"), S("y"), 0, NULL);
    gb_output(&g, "y");
    onnx_model *m = load(&g);
    struct gj_error err = { 0 };
    struct onnx_session_options opt = { .batch = 1, .threads = 1, .backend = "cpu" };
    onnx_session *s = onnx_session_create(m, &opt, &err);
    assert_non_null(s);
    struct onnx_session_stats stt;
    onnx_session_get_stats(s, &stt);
    assert_int_equal(stt.n_nodes_run, 1);
    /* x = [[1, 3], [2, -1]] (channel, w): c0 = [3, 2], c1 = [-1, 4]
     * y0 = relu((c0 - 1) / 2 * 2 + 1) = [3, 2]; y1 = relu((c1 - 0) / 1 * 1 - 1) = [0, 3] */
    float x[4] = { 1, 3, 2, -1 }, y[4];
    const void *ins[1] = { x };
    void *outs[1] = { y };
    assert_int_equal(onnx_session_run(s, ins, outs, &err), 0);
    const float want[4] = { 3, 2, 0, 3 };
    for (int i = 0; i < 4; i++)
        if (fabsf(y[i] - want[i]) > 1e-6f)
            fail_msg("element %d: %g, want %g", i, y[i], want[i]);
    onnx_session_free(s);
    onnx_model_free(m);
}

/* options.profile counts the calls of each operator type the runs made; without it (or with
 * CUDA graphs, which it cannot time) there is no profile. */
static void test_profile(void **st)
{
    (void)st;
    onnx_model *m = relu_model();
    struct gj_error err = { 0 };
    struct onnx_session_options o = { .batch = 2, .threads = 1, .profile = 1 };
    float x[8] = { 0 }, y[8];
    const void *ins[1] = { x };
    void *outs[1] = { y };
    struct onnx_op_profile prof[ONNX_PROFILE_MAX_OPS];
    onnx_session *s = onnx_session_create(m, &o, &err);
    assert_non_null(s);
    assert_int_equal(onnx_session_profile(s, prof, ONNX_PROFILE_MAX_OPS), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(onnx_session_run(s, ins, outs, &err), 0);
    assert_int_equal(onnx_session_profile(s, prof, ONNX_PROFILE_MAX_OPS), 1);
    assert_string_equal(prof[0].op, "Relu");
    assert_int_equal(prof[0].calls, 3);
    assert_true(prof[0].seconds >= 0);
    onnx_session_free(s);
    for (int k = 0; k < 2; k++) {
        o.profile = k;   /* off, then on but with CUDA graphs */
        o.cuda_graphs = k;
        s = onnx_session_create(m, &o, &err);
        assert_non_null(s);
        assert_int_equal(onnx_session_run(s, ins, outs, &err), 0);
        assert_int_equal(onnx_session_profile(s, prof, ONNX_PROFILE_MAX_OPS), 0);
        onnx_session_free(s);
    }
    onnx_model_free(m);
}

/* Three 1x1 convolutions, two of one shape: x 1x16x8x8 -> 16 -> 16 -> 8 channels. */
static onnx_model *conv_model(void)
{
    static float w16[16 * 16], w8[8 * 16];
    for (int i = 0; i < 16 * 16; i++)
        w16[i] = (float)(i % 7) * 0.125f;
    for (int i = 0; i < 8 * 16; i++)
        w8[i] = (float)(i % 5) * 0.25f;
    struct gb g = { 0 };
    gb_input(&g, "x", T_FLOAT, 4, D(-1, 16, 8, 8));
    gb_init(&g, "wa", T_FLOAT, 4, D(16, 16, 1, 1), w16);
    gb_init(&g, "wb", T_FLOAT, 4, D(16, 16, 1, 1), w16);
    gb_init(&g, "wc", T_FLOAT, 4, D(8, 16, 1, 1), w8);
    gb_node(&g, "Conv", S("x", "wa"), S("a"), 0, NULL);
    gb_node(&g, "Conv", S("a", "wb"), S("b"), 0, NULL);
    gb_node(&g, "Conv", S("b", "wc"), S("y"), 0, NULL);
    gb_output(&g, "y");
    return load(&g);
}

static const char *cpu_convolutions(const onnx_model *m)
{
    struct gj_error err = { 0 };
    struct onnx_session_options o = { .batch = 1, .threads = 2, .backend = "cpu" };
    onnx_session *s = onnx_session_create(m, &o, &err);
    if (!s)
        fail_msg("session: %s", err.message);
    const char *text = onnx_session_convolutions(s);
    onnx_session_free(s);   /* the text outlives its session */
    return text;
}

/* The provenance of a session's convolutions: one sorted line per distinct shape naming the
 * implementation (oneDNN's kernel, or ours where oneDNN is off), the same text (one pointer)
 * for sessions that compute alike, "" without Conv. */
static void test_convolutions_summary(void **st)
{
    (void)st;
    onnx_model *m = conv_model();
    const char *shape16 = "x 1x16x8x8 w 16x16x1x1 pads 0,0,0,0 strides 1,1 dilations 1,1 group 1: ";
    const char *shape8 = "x 1x16x8x8 w 8x16x1x1 pads 0,0,0,0 strides 1,1 dilations 1,1 group 1: ";
    const char *text = cpu_convolutions(m);
    assert_ptr_equal(cpu_convolutions(m), text);
    assert_int_equal(strncmp(text, shape16, strlen(shape16)), 0);
    const char *second = strchr(text, '\n');
    assert_non_null(second);
    assert_int_equal(strncmp(second + 1, shape8, strlen(shape8)), 0);
    assert_null(strchr(second + 1, '\n'));
    const char *dnnl = onnx_dnnl_version();
    const char *how = text + strlen(shape16);
    if (dnnl) {   /* oneDNN's own name for the kernel it generated for this CPU */
        assert_int_equal(strncmp(how, "onednn ", 7), 0);
        assert_true(how[7] != '\n' && how[7] != '\0');
        assert_null(strstr(text, "unknown"));
    } else {
        assert_int_equal(strncmp(how, "gpujobd openblas sgemm\n", 23), 0);
    }
    setenv("GJ_ONNX_DNNL", "0", 1);   /* our kernel: 1x1, so no im2col */
    const char *ours = cpu_convolutions(m);
    unsetenv("GJ_ONNX_DNNL");
    assert_int_equal(strncmp(ours + strlen(shape16), "gpujobd openblas sgemm\n", 23), 0);
    assert_true(dnnl ? ours != text : ours == text);
    onnx_model_free(m);
    m = relu_model();
    assert_string_equal(cpu_convolutions(m), "");
    onnx_model_free(m);
}

/* The summary as the CUDA backend's names make it (no GPU needed): sorted, one line per
 * distinct shape and choice, one interned text whatever the order the nodes came in. */
static void test_convolutions_lines(void **st)
{
    (void)st;
    char a[] = "x 4x64x56x56 w 64x64x3x3 pads 1,1,1,1 strides 1,1 dilations 1,1 group 1: cudnn WINOGRAD math fma";
    char b[] = "x 4x3x224x224 w 64x3x7x7 pads 3,3,3,3 strides 2,2 dilations 1,1 group 1: cudnn "
               "IMPLICIT_PRECOMP_GEMM math fma";
    char a2[sizeof a];
    memcpy(a2, a, sizeof a);
    char *lines[3] = { a, b, a2 };
    const char *text = onnx_conv_summary(lines, 3);
    char want[512];
    snprintf(want, sizeof want, "%s\n%s", b, a);
    assert_string_equal(text, want);
    char *again[2] = { a, b };
    assert_ptr_equal(onnx_conv_summary(again, 2), text);
    assert_string_equal(onnx_conv_summary(NULL, 0), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_defaults),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_cuda_backend),
        cmocka_unit_test(test_batchnorm_folding),
        cmocka_unit_test(test_profile),
        cmocka_unit_test(test_convolutions_summary),
        cmocka_unit_test(test_convolutions_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
