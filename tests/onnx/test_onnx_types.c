/*
 * test_onnx_types.c — element types in the ONNX runtime: half and bfloat16 conversion (every
 * bit pattern, every tie), typed access and Triton's names, Cast, integer arithmetic of every
 * width against C's wrapping, FLOAT16/BFLOAT16 operators bit-identical to float32 then rounded,
 * DOUBLE in double precision, BOOL logic, reductions and ArgMax, STRING tensors, and the CUDA
 * backend's refusal of the types its kernels do not compute.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "infer/onnx/onnx_ir.h"
#include "onnx_test_util.h"

/* ---- half and bfloat16 -------------------------------------------------------------------- */

typedef uint16_t (*to16_fn)(float);
typedef float (*from16_fn)(uint16_t);

/* Every pattern of a 16-bit float type with exponent mask emask and mantissa mask mmask: exact
 * round trip (NaN stays NaN), the midpoint to the next pattern ties to even, one float ulp
 * either side of it rounds to the nearer. */
static void check_16(to16_fn to, from16_fn from, uint16_t emask, uint16_t mmask, uint16_t max_finite)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = from((uint16_t)h);
        if ((h & emask) == emask && (h & mmask)) {
            uint16_t back = to(f);
            assert_true(isnan(f) && (back & emask) == emask && (back & mmask));
            continue;
        }
        if (to(f) != h)
            fail_msg("pattern 0x%04x (%g) comes back as 0x%04x", h, (double)f, to(f));
        if ((h & 0x7fff) >= max_finite)
            continue;
        float next = from((uint16_t)(h + 1)), mid = f + (next - f) / 2;   /* exact: one more bit */
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        if (to(mid) != even)
            fail_msg("the tie %g between 0x%04x and 0x%04x gives 0x%04x", (double)mid, h, h + 1, to(mid));
        assert_int_equal(to(nextafterf(mid, 0.0f)), h);
        assert_int_equal(to(nextafterf(mid, copysignf(INFINITY, mid))), h + 1);
    }
}

static void test_half_bfloat16(void **st)
{
    (void)st;
    check_16(onnx_float_to_half, onnx_half_to_float, 0x7c00, 0x03ff, 0x7bff);
    check_16(onnx_float_to_bfloat16, onnx_bfloat16_to_float, 0x7f80, 0x007f, 0x7f7f);
    /* overflow: the largest half is 65504; from 65520 (its tie with 65536) on, infinity */
    assert_int_equal(onnx_float_to_half(65504.0f), 0x7bff);
    assert_int_equal(onnx_float_to_half(nextafterf(65520.0f, 0.0f)), 0x7bff);
    assert_int_equal(onnx_float_to_half(65520.0f), 0x7c00);
    assert_int_equal(onnx_float_to_half(-1e10f), 0xfc00);
    assert_int_equal(onnx_float_to_half(INFINITY), 0x7c00);
    assert_int_equal(onnx_float_to_bfloat16(3.4028235e38f), 0x7f80);
    /* subnormals: 2^-24 is the smallest half; 2^-25 ties to 0, 3 * 2^-25 to 2 * 2^-24 */
    assert_int_equal(onnx_float_to_half(ldexpf(1, -24)), 1);
    assert_int_equal(onnx_float_to_half(ldexpf(1, -25)), 0);
    assert_int_equal(onnx_float_to_half(ldexpf(3, -25)), 2);
    assert_int_equal(onnx_float_to_half(1.0f / 3), 0x3555);
    assert_int_equal(onnx_float_to_bfloat16(1.0f), 0x3f80);
    /* any float rounds to the nearest half (random bit patterns within the finite range) */
    uint32_t r = 12345;
    for (int i = 0; i < 200000; i++) {
        r = r * 1664525u + 1013904223u;
        uint32_t bits = (r >> 1) % 0x477fe000u;
        float f;
        memcpy(&f, &bits, 4);
        uint16_t h = onnx_float_to_half(f);
        double e = fabs((double)f - onnx_half_to_float(h));
        if (h > 0)
            assert_true(e <= fabs((double)f - onnx_half_to_float((uint16_t)(h - 1))));
        if (h < 0x7bff)
            assert_true(e <= fabs((double)f - onnx_half_to_float((uint16_t)(h + 1))));
    }
}

/* ---- names, sizes, typed access ----------------------------------------------------------------- */

static void test_names_and_access(void **st)
{
    (void)st;
    static const int types[] = { T_FLOAT, T_UINT8, T_INT8, T_UINT16, T_INT16, T_INT32, T_INT64, T_STRING, T_BOOL,
                                 T_FLOAT16, T_DOUBLE, T_UINT32, T_UINT64, T_BFLOAT16 };
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        assert_non_null(onnx_elem_triton_name(types[k]));
        assert_int_equal(onnx_elem_from_triton_name(onnx_elem_triton_name(types[k])), types[k]);
        assert_true(types[k] == T_STRING ? onnx_elem_size(T_STRING) == sizeof(struct onnx_string)
                                         : onnx_elem_size(types[k]) == pb_elem_size(types[k]));
    }
    assert_string_equal(onnx_elem_triton_name(ONNX_ELEM_FLOAT), "FP32");
    assert_string_equal(onnx_elem_triton_name(ONNX_ELEM_BFLOAT16), "BF16");
    assert_int_equal(onnx_elem_from_triton_name("BYTES"), ONNX_ELEM_STRING);
    assert_int_equal(onnx_elem_from_triton_name("FP8"), 0);
    assert_null(onnx_elem_triton_name(14));   /* COMPLEX64 */
    assert_int_equal(onnx_elem_size(14), 0);
    assert_string_equal(onnx_elem_name(ONNX_ELEM_FLOAT16), "FLOAT16");

    uint8_t buf[16];
    onnx_elem_set_i64(ONNX_ELEM_INT8, buf, 0, 200);        /* wraps */
    assert_int_equal(onnx_elem_get_i64(ONNX_ELEM_INT8, buf, 0), -56);
    onnx_elem_set_i64(ONNX_ELEM_UINT16, buf, 0, -1);
    assert_int_equal(onnx_elem_get_i64(ONNX_ELEM_UINT16, buf, 0), 65535);
    onnx_elem_set_f64(ONNX_ELEM_INT32, buf, 0, -3.7);      /* truncates */
    assert_int_equal(onnx_elem_get_i64(ONNX_ELEM_INT32, buf, 0), -3);
    onnx_elem_set_f64(ONNX_ELEM_INT64, buf, 0, 1e30);      /* saturates */
    assert_true(onnx_elem_get_i64(ONNX_ELEM_INT64, buf, 0) == INT64_MAX);
    onnx_elem_set_f64(ONNX_ELEM_INT64, buf, 0, NAN);
    assert_int_equal(onnx_elem_get_i64(ONNX_ELEM_INT64, buf, 0), 0);
    onnx_elem_set_f64(ONNX_ELEM_UINT64, buf, 0, 1.8e19);
    assert_true((uint64_t)onnx_elem_get_i64(ONNX_ELEM_UINT64, buf, 0) == 18000000000000000000ull);
    assert_true(onnx_elem_get_f64(ONNX_ELEM_UINT64, buf, 0) == 1.8e19);
    onnx_elem_set_i64(ONNX_ELEM_BOOL, buf, 0, 5);
    assert_int_equal(buf[0], 1);
    onnx_elem_set_f64(ONNX_ELEM_FLOAT16, buf, 1, 1.0 / 3);
    assert_int_equal(((uint16_t *)buf)[1], 0x3555);
    assert_true(onnx_elem_get_f64(ONNX_ELEM_BFLOAT16, "\x80\x3f", 0) == 1.0);
}

/* ---- Cast ---------------------------------------------------------------------------------------- */

/* Cast x (type from, n elements) to type `to`; 0 and y, or -1 with msg. */
static int cast(int from, int to, int n, const void *x, void *y, char *msg)
{
    struct gb b = { 0 };
    struct pb at[1] = { pb_attr_int("to", to) };
    gb_input(&b, "x", from, 1, D(n));
    gb_node(&b, "Cast", S("x"), S("y"), 1, at);
    gb_output(&b, "y");
    struct onnx_session_options o = { .threads = 1, .no_batch = 1 };
    struct onnx_tensor_buf in = tu_tensor("x", from, 1, D(n), x), out = tu_tensor("y", to, 1, D(n), y);
    return tu_run(&b, &o, &in, 1, &out, 1, msg, NULL);
}

static void test_cast(void **st)
{
    (void)st;
    char msg[512];
    float f[4] = { 300.7f, -1.5f, 0.0f, 65535.0f };
    int8_t i8[4];
    assert_int_equal(cast(T_FLOAT, T_INT8, 4, f, i8, msg), 0);   /* truncated, then wrapped */
    assert_true(i8[0] == 44 && i8[1] == -1 && i8[2] == 0 && i8[3] == -1);
    uint16_t h[4];
    assert_int_equal(cast(T_FLOAT, T_FLOAT16, 4, f, h, msg), 0);
    assert_true(h[0] == onnx_float_to_half(300.7f) && h[1] == 0xbe00 && h[3] == 0x7c00);
    double d[2] = { 1.0 + 1e-12, -2.5 };
    float back[2];
    assert_int_equal(cast(T_DOUBLE, T_FLOAT, 2, d, back, msg), 0);
    assert_true(back[0] == 1.0f && back[1] == -2.5f);
    int64_t big[2] = { 70000, -1 };
    uint16_t u16[2];
    assert_int_equal(cast(T_INT64, T_UINT16, 2, big, u16, msg), 0);
    assert_true(u16[0] == 4464 && u16[1] == 65535);
    uint8_t u8[3] = { 0, 7, 255 }, bl[3];
    assert_int_equal(cast(T_UINT8, T_BOOL, 3, u8, bl, msg), 0);
    assert_true(bl[0] == 0 && bl[1] == 1 && bl[2] == 1);
    /* strings parse as numbers of the target's kind */
    struct onnx_string s[3] = { { "2.5", 3 }, { "-1e3", 4 }, { " 7", 2 } };
    float fs[3];
    assert_int_equal(cast(T_STRING, T_FLOAT, 3, s, fs, msg), 0);
    assert_true(fs[0] == 2.5f && fs[1] == -1000.0f && fs[2] == 7.0f);
    struct onnx_string si[2] = { { "12", 2 }, { "-3", 2 } };
    int32_t i32[2];
    assert_int_equal(cast(T_STRING, T_INT32, 2, si, i32, msg), 0);
    assert_true(i32[0] == 12 && i32[1] == -3);
    uint32_t u32[2];
    tu_expect_fail(cast(T_STRING, T_UINT32, 2, si, u32, msg), msg, "Cast");   /* "-3" is no UINT32 */
    struct onnx_string bad[1] = { { "abc", 3 } };
    tu_expect_fail(cast(T_STRING, T_FLOAT, 1, bad, fs, msg), msg, "the kernel failed");
    float nan[1] = { NAN };
    int64_t i64[1];
    tu_expect_fail(cast(T_FLOAT, T_INT64, 1, nan, i64, msg), msg, "the kernel failed");
}

/* ---- integer arithmetic and comparisons ----------------------------------------------------------- */

/* v wrapped to the width of integer type t, as C converts. */
static int64_t wrap(int t, int64_t v)
{
    switch (t) {
    case T_INT8: return (int8_t)v;
    case T_UINT8: return (uint8_t)v;
    case T_INT16: return (int16_t)v;
    case T_UINT16: return (uint16_t)v;
    case T_INT32: return (int32_t)v;
    case T_UINT32: return (uint32_t)v;
    default: return v;
    }
}

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD0, OP_MOD1, OP_GT, OP_LT, OP_GE, OP_LE, OP_EQ, N_OPS };
static const char *const op_names[N_OPS] = { "Add", "Sub", "Mul", "Div", "Mod", "Mod", "Greater", "Less",
                                             "GreaterOrEqual", "LessOrEqual", "Equal" };

/* What ONNX says op gives for a and b (values of type t; unsigned types compare unsigned). */
static int64_t expect_int(int op, int t, int64_t a, int64_t b)
{
    int uns = t == T_UINT8 || t == T_UINT16 || t == T_UINT32 || t == T_UINT64;
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case OP_ADD: return wrap(t, (int64_t)(ua + ub));
    case OP_SUB: return wrap(t, (int64_t)(ua - ub));
    case OP_MUL: return wrap(t, (int64_t)(ua * ub));
    case OP_DIV: return wrap(t, uns ? (int64_t)(ua / ub) : a / b);
    case OP_MOD0: return uns ? (int64_t)(ua % ub) : a - b * (int64_t)floor((double)a / (double)b);
    case OP_MOD1: return uns ? (int64_t)(ua % ub) : a % b;
    case OP_GT: return uns ? ua > ub : a > b;
    case OP_LT: return uns ? ua < ub : a < b;
    case OP_GE: return uns ? ua >= ub : a >= b;
    default: return op == OP_LE ? (uns ? ua <= ub : a <= b) : a == b;
    }
}

/* x op y over 8 elements of integer type t against expect_int. */
static void check_int_op(int op, int t, const void *x, const void *y)
{
    char msg[512];
    uint8_t z[64];
    struct gb b = { 0 };
    int is_bool = op >= OP_GT, is_mod = op == OP_MOD0 || op == OP_MOD1;
    struct pb at[1] = { is_mod ? pb_attr_int("fmod", op == OP_MOD1) : (struct pb){ 0 } };
    gb_input(&b, "x", t, 1, D(8));
    gb_input(&b, "y", t, 1, D(8));
    gb_node(&b, op_names[op], S("x", "y"), S("z"), is_mod, at);
    gb_output(&b, "z");
    struct onnx_session_options o = { .threads = 2, .no_batch = 1 };
    struct onnx_tensor_buf in[2] = { tu_tensor("x", t, 1, D(8), x), tu_tensor("y", t, 1, D(8), y) };
    struct onnx_tensor_buf out = tu_tensor("z", is_bool ? T_BOOL : t, 1, D(8), z);
    if (tu_run(&b, &o, in, 2, &out, 1, msg, NULL))
        fail_msg("%s on %s: %s", op_names[op], onnx_elem_name(t), msg);
    for (size_t i = 0; i < 8; i++) {
        int64_t a = onnx_elem_get_i64(t, x, i), bv = onnx_elem_get_i64(t, y, i), want = expect_int(op, t, a, bv);
        int64_t got = onnx_elem_get_i64(out.elem_type, z, i);
        if (got != want)
            fail_msg("%s(%lld, %lld) on %s: %lld, expected %lld", op_names[op], (long long)a, (long long)bv,
                     onnx_elem_name(t), (long long)got, (long long)want);
    }
}

static void test_integer_arithmetic(void **st)
{
    (void)st;
    static const int types[] = { T_INT8, T_UINT8, T_INT16, T_UINT16, T_INT32, T_UINT32, T_INT64, T_UINT64 };
    static const int64_t av[8] = { 100, -100, 127, 200, 7, -1, 0, 55 }, bv[8] = { 3, 7, -2, 100, 2, 5, 9, -9 };
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        uint64_t x[8], y[8];
        for (size_t i = 0; i < 8; i++) {
            onnx_elem_set_i64(types[k], x, i, av[i]);
            onnx_elem_set_i64(types[k], y, i, bv[i]);
        }
        for (int op = 0; op < N_OPS; op++)
            check_int_op(op, types[k], x, y);
    }
    /* integer division by zero fails the run; a float Mod needs fmod = 1 */
    char msg[512];
    int32_t x[2] = { 4, 5 }, y[2] = { 1, 0 }, z[2];
    struct gb b = { 0 };
    gb_input(&b, "x", T_INT32, 1, D(2));
    gb_input(&b, "y", T_INT32, 1, D(2));
    gb_node(&b, "Div", S("x", "y"), S("z"), 0, NULL);
    gb_output(&b, "z");
    struct onnx_session_options o = { .threads = 1, .no_batch = 1 };
    struct onnx_tensor_buf in[2] = { tu_tensor("x", T_INT32, 1, D(2), x), tu_tensor("y", T_INT32, 1, D(2), y) };
    struct onnx_tensor_buf out = tu_tensor("z", T_INT32, 1, D(2), z);
    tu_expect_fail(tu_run(&b, &o, in, 2, &out, 1, msg, NULL), msg, "the kernel failed");
    struct gb m = { 0 };
    gb_input(&m, "x", T_FLOAT, 1, D(2));
    gb_input(&m, "y", T_FLOAT, 1, D(2));
    gb_node(&m, "Mod", S("x", "y"), S("z"), 0, NULL);
    gb_output(&m, "z");
    tu_expect_fail(tu_run(&m, &o, NULL, 0, NULL, 0, msg, NULL), msg, "fmod = 1");
}

/* Not, And, Or, Xor over the four pairs of truth values; Neg, Abs, Relu on integers. */
static void test_logic_and_integer_unary(void **st)
{
    (void)st;
    char msg[512];
    static const char *const ops[] = { "And", "Or", "Xor" };
    static const uint8_t want[3][4] = { { 0, 0, 0, 1 }, { 0, 1, 1, 1 }, { 0, 1, 1, 0 } };
    uint8_t x[4] = { 0, 0, 1, 1 }, y[4] = { 0, 1, 0, 1 }, z[4];
    struct onnx_session_options o = { .threads = 1, .no_batch = 1 };
    for (int k = 0; k < 3; k++) {
        struct gb b = { 0 };
        gb_input(&b, "x", T_BOOL, 1, D(4));
        gb_input(&b, "y", T_BOOL, 1, D(4));
        gb_node(&b, ops[k], S("x", "y"), S("z"), 0, NULL);
        gb_node(&b, "Not", S("z"), S("nz"), 0, NULL);
        gb_output(&b, "z");
        gb_output(&b, "nz");
        uint8_t nz[4];
        struct onnx_tensor_buf in[2] = { tu_tensor("x", T_BOOL, 1, D(4), x), tu_tensor("y", T_BOOL, 1, D(4), y) };
        struct onnx_tensor_buf out[2] = { tu_tensor("z", T_BOOL, 1, D(4), z), tu_tensor("nz", T_BOOL, 1, D(4), nz) };
        assert_int_equal(tu_run(&b, &o, in, 2, out, 2, msg, NULL), 0);
        for (int i = 0; i < 4; i++)
            assert_true(z[i] == want[k][i] && nz[i] == !want[k][i]);
    }
    static const char *const un[] = { "Neg", "Abs", "Relu" };
    int8_t v[4] = { -128, -5, 0, 7 }, w[4];
    static const int8_t uwant[3][4] = { { -128, 5, 0, -7 }, { -128, 5, 0, 7 }, { 0, 0, 0, 7 } };
    for (int k = 0; k < 3; k++) {
        struct gb b = { 0 };
        gb_input(&b, "x", T_INT8, 1, D(4));
        gb_node(&b, un[k], S("x"), S("y"), 0, NULL);
        gb_output(&b, "y");
        struct onnx_tensor_buf in = tu_tensor("x", T_INT8, 1, D(4), v), out = tu_tensor("y", T_INT8, 1, D(4), w);
        assert_int_equal(tu_run(&b, &o, &in, 1, &out, 1, msg, NULL), 0);
        assert_memory_equal(w, uwant[k], 4);
    }
}

/* ---- FLOAT16, BFLOAT16, DOUBLE ------------------------------------------------------------------- */

/* One operator over graph inputs of one float type; op inputs' shapes and attributes. */
struct float_case {
    const char *op;
    int n_in, rank[5];
    int64_t dims[5][4];
    int n_attr;
    const char *attr;      /* one int or ints attribute ("pads" 4 x 1, "kernel_shape" 2 x 2, ...) */
    int64_t attr_v[4];
    int attr_n;            /* 0: an int attribute */
};

static const struct float_case float_cases[] = {
    { "BatchNormalization", 5, { 4, 1, 1, 1, 1 }, { { 1, 3, 2, 2 }, { 3 }, { 3 }, { 3 }, { 3 } }, 0, NULL, { 0 }, 0 },
    { "Conv", 3, { 4, 4, 1 }, { { 1, 2, 5, 5 }, { 3, 2, 3, 3 }, { 3 } }, 1, "pads", { 1, 1, 1, 1 }, 4 },
    { "MaxPool", 1, { 4 }, { { 1, 2, 4, 4 } }, 1, "kernel_shape", { 2, 2 }, 2 },
    { "AveragePool", 1, { 4 }, { { 1, 2, 4, 4 } }, 1, "kernel_shape", { 3, 3 }, 2 },
    { "GlobalAveragePool", 1, { 4 }, { { 1, 3, 4, 4 } }, 0, NULL, { 0 }, 0 },
    { "Gemm", 3, { 2, 2, 1 }, { { 2, 3 }, { 4, 3 }, { 4 } }, 1, "transB", { 1 }, 0 },
    { "MatMul", 2, { 3, 2 }, { { 2, 2, 3 }, { 3, 4 } }, 0, NULL, { 0 }, 0 },
    { "Softmax", 1, { 2 }, { { 2, 5 } }, 0, NULL, { 0 }, 0 },
    { "LayerNormalization", 3, { 2, 1, 1 }, { { 2, 4 }, { 4 }, { 4 } }, 0, NULL, { 0 }, 0 },
};

static int64_t numel_of(int rank, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= d[i];
    return n;
}

/* Runs case c with inputs of type t (values v: one array per input, as float32, or as t's bits
 * when t is 16-bit); y gets the output's bytes. Returns the output's element count. */
static size_t run_float_case(const struct float_case *c, int t, void *const *v, void *y, size_t ybytes)
{
    static const char *const names[5] = { "x", "w", "b", "m", "v" };
    char msg[512];
    struct gb b = { 0 };
    struct pb at[1];
    struct onnx_tensor_buf in[5];
    for (int k = 0; k < c->n_in; k++) {
        gb_input(&b, names[k], t, c->rank[k], c->dims[k]);
        in[k] = tu_tensor(names[k], t, c->rank[k], c->dims[k], v[k]);
    }
    if (c->n_attr)
        at[0] = c->attr_n ? pb_attr_ints(c->attr, c->attr_n, c->attr_v) : pb_attr_int(c->attr, c->attr_v[0]);
    const char *ins[6] = { 0 };
    for (int k = 0; k < c->n_in; k++)
        ins[k] = names[k];
    gb_node(&b, c->op, ins, S("y"), c->n_attr, at);
    gb_output(&b, "y");
    struct onnx_session_options o = { .threads = 2, .no_batch = 1 };
    struct onnx_tensor_buf out = { .name = "y", .data = y, .bytes = ybytes };
    if (tu_run(&b, &o, in, (size_t)c->n_in, &out, 1, msg, NULL))
        fail_msg("%s on %s: %s", c->op, onnx_elem_name(t), msg);
    assert_int_equal(out.elem_type, t);
    return out.bytes / onnx_elem_size(t);
}

/* FLOAT16 and BFLOAT16 compute in float32 and round each output once: the same operator on the
 * same values in float32, rounded, is bit-identical. */
static void test_half_ops_match_float32(void **st)
{
    (void)st;
    static const int halves[2] = { T_FLOAT16, T_BFLOAT16 };
    uint32_t r = 7;
    for (size_t ci = 0; ci < sizeof float_cases / sizeof float_cases[0]; ci++) {
        const struct float_case *c = &float_cases[ci];
        for (int hk = 0; hk < 2; hk++) {
            int t = halves[hk];
            float fv[5][256], fy[256];
            uint16_t hv[5][256], hy[256];
            void *fp[5] = { fv[0], fv[1], fv[2], fv[3], fv[4] }, *hp[5] = { hv[0], hv[1], hv[2], hv[3], hv[4] };
            for (int k = 0; k < c->n_in; k++)
                for (int64_t i = 0; i < numel_of(c->rank[k], c->dims[k]); i++) {
                    r = r * 1664525u + 1013904223u;
                    onnx_elem_set_f64(t, hv[k], (size_t)i, ((double)(r >> 8) / (1 << 24)) * 4.0 - 2.0);
                    fv[k][i] = (float)onnx_elem_get_f64(t, hv[k], (size_t)i);
                }
            size_t n = run_float_case(c, T_FLOAT, fp, fy, sizeof fy);
            assert_int_equal(run_float_case(c, t, hp, hy, sizeof hy), n);
            for (size_t i = 0; i < n; i++) {
                uint16_t want = t == T_FLOAT16 ? onnx_float_to_half(fy[i]) : onnx_float_to_bfloat16(fy[i]);
                if (hy[i] != want)
                    fail_msg("%s on %s: element %zu is 0x%04x, float32 rounded 0x%04x", c->op, onnx_elem_name(t), i,
                             hy[i], want);
            }
        }
    }
}

/* Element-wise FLOAT16 arithmetic is correctly rounded: 1 + 2^-11 ties to 1, 1 + 3 * 2^-11 to
 * 1 + 2^-9; DOUBLE keeps what float32 would lose. */
static void test_float_elementwise(void **st)
{
    (void)st;
    char msg[512];
    uint16_t x[2] = { 0x3c00, 0x3c00 }, y[2] = { onnx_float_to_half(ldexpf(1, -11)), onnx_float_to_half(ldexpf(3, -11)) }, z[2];
    struct onnx_session_options o = { .threads = 1, .no_batch = 1 };
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT16, 1, D(2));
    gb_input(&b, "y", T_FLOAT16, 1, D(2));
    gb_node(&b, "Add", S("x", "y"), S("s"), 0, NULL);
    gb_node(&b, "Sqrt", S("s"), S("z"), 0, NULL);
    gb_output(&b, "s");
    gb_output(&b, "z");
    uint16_t s[2];
    struct onnx_tensor_buf in[2] = { tu_tensor("x", T_FLOAT16, 1, D(2), x), tu_tensor("y", T_FLOAT16, 1, D(2), y) };
    struct onnx_tensor_buf out[2] = { tu_tensor("s", T_FLOAT16, 1, D(2), s), tu_tensor("z", T_FLOAT16, 1, D(2), z) };
    assert_int_equal(tu_run(&b, &o, in, 2, out, 2, msg, NULL), 0);
    assert_true(s[0] == 0x3c00 && s[1] == 0x3c02);
    assert_int_equal(z[1], onnx_float_to_half(sqrtf(onnx_half_to_float(0x3c02))));
    double dx[2] = { 1.0, 3.0 }, dy[2] = { 1e-12, 0.5 }, dz[2];
    struct gb d = { 0 };
    gb_input(&d, "x", T_DOUBLE, 1, D(2));
    gb_input(&d, "y", T_DOUBLE, 1, D(2));
    gb_node(&d, "Add", S("x", "y"), S("z"), 0, NULL);
    gb_output(&d, "z");
    struct onnx_tensor_buf din[2] = { tu_tensor("x", T_DOUBLE, 1, D(2), dx), tu_tensor("y", T_DOUBLE, 1, D(2), dy) };
    struct onnx_tensor_buf dout = tu_tensor("z", T_DOUBLE, 1, D(2), dz);
    assert_int_equal(tu_run(&d, &o, din, 2, &dout, 1, msg, NULL), 0);
    assert_true(dz[0] == 1.0 + 1e-12 && dz[1] == 3.5);
}

/* DOUBLE Gemm, MatMul and Softmax against a plain double computation; DOUBLE Conv is refused by
 * name. */
static void test_double_kernels(void **st)
{
    (void)st;
    char msg[512];
    double a[6] = { 1, 2, 3, 4, 5, 6 }, w[6] = { 0.5, -1, 2, 1e-9, 3, -0.25 }, c[2] = { 0.125, -7 }, y[4];
    struct gb b = { 0 };
    gb_input(&b, "a", T_DOUBLE, 2, D(2, 3));
    gb_input(&b, "w", T_DOUBLE, 2, D(2, 3));
    gb_input(&b, "c", T_DOUBLE, 1, D(2));
    struct pb at[1] = { pb_attr_int("transB", 1) };
    gb_node(&b, "Gemm", S("a", "w", "c"), S("g"), 1, at);
    gb_node(&b, "Softmax", S("g"), S("y"), 0, NULL);
    gb_output(&b, "y");
    struct onnx_session_options o = { .threads = 1, .no_batch = 1 };
    struct onnx_tensor_buf in[3] = { tu_tensor("a", T_DOUBLE, 2, D(2, 3), a), tu_tensor("w", T_DOUBLE, 2, D(2, 3), w),
                                     tu_tensor("c", T_DOUBLE, 1, D(2), c) };
    struct onnx_tensor_buf out = tu_tensor("y", T_DOUBLE, 2, D(2, 2), y);
    assert_int_equal(tu_run(&b, &o, in, 3, &out, 1, msg, NULL), 0);
    for (int m = 0; m < 2; m++) {
        double g[2];
        for (int n = 0; n < 2; n++)
            g[n] = a[m * 3] * w[n * 3] + a[m * 3 + 1] * w[n * 3 + 1] + a[m * 3 + 2] * w[n * 3 + 2] + c[n];
        double mx = fmax(g[0], g[1]), e0 = exp(g[0] - mx), e1 = exp(g[1] - mx);
        assert_true(fabs(y[m * 2] - e0 / (e0 + e1)) < 1e-15 && fabs(y[m * 2 + 1] - e1 / (e0 + e1)) < 1e-15);
    }
    struct gb mm = { 0 };
    gb_input(&mm, "a", T_DOUBLE, 2, D(2, 3));
    gb_input(&mm, "w", T_DOUBLE, 2, D(3, 2));
    gb_node(&mm, "MatMul", S("a", "w"), S("y"), 0, NULL);
    gb_output(&mm, "y");
    in[1] = tu_tensor("w", T_DOUBLE, 2, D(3, 2), w);
    assert_int_equal(tu_run(&mm, &o, in, 2, &out, 1, msg, NULL), 0);
    assert_true(fabs(y[1] - (1 * -1 + 2 * 1e-9 + 3 * -0.25)) < 1e-15);
    struct gb cv = { 0 };
    gb_input(&cv, "x", T_DOUBLE, 4, D(1, 1, 3, 3));
    gb_input(&cv, "k", T_DOUBLE, 4, D(1, 1, 1, 1));
    gb_node(&cv, "Conv", S("x", "k"), S("y"), 0, NULL);
    gb_output(&cv, "y");
    tu_expect_fail(tu_run(&cv, &o, NULL, 0, NULL, 0, msg, NULL), msg,
                   "node 'Conv' (Conv): input 0 ('x') is DOUBLE; this operator takes FLOAT, FLOAT16, BFLOAT16");
}

/* ---- reductions, ArgMax, data movement ------------------------------------------------------------ */

/* op over x ([2, 3] of type t) along axis 1 into y (type yt), with an int attribute. */
static void reduce_case(const char *op, int t, const void *x, int yt, void *y, int n_attr, struct pb *at,
                        const char *axes)
{
    char msg[512];
    int64_t ax[1] = { 1 };
    struct gb b = { 0 };
    gb_input(&b, "x", t, 2, D(2, 3));
    if (axes)
        gb_init(&b, axes, T_INT64, 1, D(1), ax);
    gb_node(&b, op, axes ? S("x", axes) : S("x"), S("y"), n_attr, at);
    gb_output(&b, "y");
    struct onnx_session_options o = { .threads = 1, .no_batch = 1 };
    struct onnx_tensor_buf in = tu_tensor("x", t, 2, D(2, 3), x), out = { .name = "y", .data = y, .bytes = 64 };
    if (tu_run(&b, &o, &in, 1, &out, 1, msg, NULL))
        fail_msg("%s on %s: %s", op, onnx_elem_name(t), msg);
    assert_int_equal(out.elem_type, yt);
}

static void test_reductions_and_argmax(void **st)
{
    (void)st;
    int32_t xi[6] = { 1, -7, 3, 10, 20, 31 }, yi[8];
    struct pb k0[1] = { pb_attr_int("keepdims", 0) };
    reduce_case("ReduceSum", T_INT32, xi, T_INT32, yi, 1, k0, "axes");
    assert_true(yi[0] == -3 && yi[1] == 61);
    struct pb k1[1] = { pb_attr_int("keepdims", 0) };
    reduce_case("ReduceMean", T_INT32, xi, T_INT32, yi, 1, k1, NULL);   /* opset 17: axes attribute or all */
    assert_int_equal(yi[0], 9);   /* 58 / 6, truncated */
    uint8_t xu[6] = { 200, 100, 3, 0, 255, 1 }, yu[8];
    reduce_case("ReduceMax", T_UINT8, xu, T_UINT8, yu, 0, NULL, NULL);
    assert_int_equal(yu[0], 255);
    int8_t xs[6] = { -56, 100, 3, -128, 0, 1 }, ys[8];
    struct pb ka[1] = { pb_attr_ints("axes", 1, D(1)) };
    reduce_case("ReduceMin", T_INT8, xs, T_INT8, ys, 1, ka, NULL);
    assert_true(ys[0] == -56 && ys[1] == -128);
    uint16_t xh[6], yh[8];
    for (int i = 0; i < 6; i++)
        xh[i] = onnx_float_to_half((float)i * 0.5f - 1.0f);
    reduce_case("ReduceSum", T_FLOAT16, xh, T_FLOAT16, yh, 0, NULL, "axes");
    assert_true(yh[0] == onnx_float_to_half(-1.5f) && yh[1] == onnx_float_to_half(3.0f));
    /* ArgMax ties: the first, or the last with select_last_index; ArgMin; unsigned order */
    int64_t ai[8];
    int32_t xt[6] = { 3, 7, 7, 9, 1, 1 };
    reduce_case("ArgMax", T_INT32, xt, T_INT64, ai, 0, NULL, NULL);   /* axis 0 */
    assert_true(ai[0] == 1 && ai[1] == 0 && ai[2] == 0);
    struct pb ax[2] = { pb_attr_int("axis", -1), pb_attr_int("keepdims", 0) };
    reduce_case("ArgMax", T_INT32, xt, T_INT64, ai, 2, ax, NULL);
    assert_true(ai[0] == 1 && ai[1] == 0);
    struct pb last[2] = { pb_attr_int("axis", 1), pb_attr_int("select_last_index", 1) };
    reduce_case("ArgMin", T_INT32, xt, T_INT64, ai, 2, last, NULL);
    assert_true(ai[0] == 0 && ai[1] == 2);
    uint64_t xl[6] = { 1, (1ull << 63) + 5, 2, 0, 0, 0 };
    struct pb a1[1] = { pb_attr_int("axis", 1) };
    reduce_case("ArgMax", T_UINT64, xl, T_INT64, ai, 1, a1, NULL);
    assert_int_equal(ai[0], 1);
}

/* Gather with INT32 indices (out of range: the run fails), Pad of INT32 with a value, Range of
 * INT32 (folded), Where over FLOAT16, Concat of BFLOAT16. */
static void test_data_movement(void **st)
{
    (void)st;
    char msg[512];
    int32_t data[6] = { 10, 11, 12, 13, 14, 15 }, idx[2] = { 2, -3 }, g[4], padv[1] = { 7 }, padded[10];
    int64_t pads[4] = { 0, 1, 0, 1 };
    int32_t rs[1] = { 5 }, rl[1] = { -1 }, rd[1] = { -2 }, range[3];
    struct gb b = { 0 };
    gb_input(&b, "x", T_INT32, 2, D(2, 3));
    gb_input(&b, "i", T_INT32, 1, D(2));
    gb_init(&b, "pads", T_INT64, 1, D(4), pads);
    gb_init(&b, "v", T_INT32, 0, D(1), padv);
    gb_init(&b, "rs", T_INT32, 0, D(1), rs);
    gb_init(&b, "rl", T_INT32, 0, D(1), rl);
    gb_init(&b, "rd", T_INT32, 0, D(1), rd);
    struct pb at[1] = { pb_attr_int("axis", 1) };
    gb_node(&b, "Gather", S("x", "i"), S("g"), 1, at);
    gb_node(&b, "Pad", S("x", "pads", "v"), S("p"), 0, NULL);
    gb_node(&b, "Range", S("rs", "rl", "rd"), S("r"), 0, NULL);
    gb_output(&b, "g");
    gb_output(&b, "p");
    gb_output(&b, "r");
    struct onnx_session_options o = { .threads = 1, .no_batch = 1 };
    struct onnx_tensor_buf in[2] = { tu_tensor("x", T_INT32, 2, D(2, 3), data), tu_tensor("i", T_INT32, 1, D(2), idx) };
    struct onnx_tensor_buf out[3] = { tu_tensor("g", T_INT32, 2, D(2, 2), g), tu_tensor("p", T_INT32, 2, D(2, 5), padded),
                                      tu_tensor("r", T_INT32, 1, D(3), range) };
    assert_int_equal(tu_run(&b, &o, in, 2, out, 3, msg, NULL), 0);
    assert_true(g[0] == 12 && g[1] == 10 && g[2] == 15 && g[3] == 13);
    assert_true(padded[0] == 7 && padded[1] == 10 && padded[3] == 12 && padded[4] == 7 && padded[6] == 13);
    assert_true(range[0] == 5 && range[1] == 3 && range[2] == 1);
    struct gb bad = { 0 };
    struct pb at1[1] = { pb_attr_int("axis", 1) };
    gb_input(&bad, "x", T_INT32, 2, D(2, 3));
    gb_input(&bad, "i", T_INT32, 1, D(2));
    gb_node(&bad, "Gather", S("x", "i"), S("g"), 1, at1);
    gb_output(&bad, "g");
    idx[0] = 3;   /* dim 3 of axis 1 */
    tu_expect_fail(tu_run(&bad, &o, in, 2, out, 1, msg, NULL), msg, "index out of range");
    /* Where over FLOAT16, Concat of BFLOAT16 */
    uint8_t cond[2] = { 1, 0 };
    uint16_t a[2] = { 0x3c00, 0x4000 }, c[2] = { 0xbc00, 0xc000 }, w[2], cat[4];
    struct gb h = { 0 };
    gb_input(&h, "c", T_BOOL, 1, D(2));
    gb_input(&h, "a", T_FLOAT16, 1, D(2));
    gb_input(&h, "b", T_FLOAT16, 1, D(2));
    gb_input(&h, "f", T_BFLOAT16, 1, D(2));
    gb_node(&h, "Where", S("c", "a", "b"), S("w"), 0, NULL);
    struct pb ax0[1] = { pb_attr_int("axis", 0) };
    gb_node(&h, "Concat", S("f", "f"), S("cat"), 1, ax0);
    gb_output(&h, "w");
    gb_output(&h, "cat");
    struct onnx_tensor_buf hin[4] = { tu_tensor("c", T_BOOL, 1, D(2), cond), tu_tensor("a", T_FLOAT16, 1, D(2), a),
                                      tu_tensor("b", T_FLOAT16, 1, D(2), c), tu_tensor("f", T_BFLOAT16, 1, D(2), c) };
    struct onnx_tensor_buf hout[2] = { tu_tensor("w", T_FLOAT16, 1, D(2), w), tu_tensor("cat", T_BFLOAT16, 1, D(4), cat) };
    assert_int_equal(tu_run(&h, &o, hin, 4, hout, 2, msg, NULL), 0);
    assert_true(w[0] == 0x3c00 && w[1] == 0xc000 && cat[0] == 0xbc00 && cat[3] == 0xc000);
}

/* ---- STRING ------------------------------------------------------------------------------------- */

/* Strings pass through views, Gather and Concat (the elements point at the caller's bytes or the
 * model's), compare with Equal and parse with Cast; a numeric operator refuses them by name. */
static struct gb strings_graph(void)
{
    const char *vocab[2] = { "cat", "dog" };
    struct gb b = { 0 };
    gb_input(&b, "text", T_STRING, 1, D(-1));
    gb_input(&b, "pick", T_INT32, 1, D(-1));
    gb_init_strings(&b, "vocab", 2, vocab);
    struct pb ax[1] = { pb_attr_int("axis", 0) };
    gb_node(&b, "Identity", S("text"), S("same"), 0, NULL);
    gb_node(&b, "Equal", S("text", "vocab"), S("eq"), 0, NULL);
    gb_node(&b, "Concat", S("text", "vocab"), S("all"), 1, ax);
    gb_node(&b, "Gather", S("vocab", "pick"), S("picked"), 0, NULL);
    gb_output(&b, "same");
    gb_output(&b, "eq");
    gb_output(&b, "all");
    gb_output(&b, "picked");
    return b;
}

static void test_strings(void **st)
{
    (void)st;
    char msg[512];
    struct gb b = strings_graph();
    char bytes[] = "catbird";
    struct onnx_string text[2] = { { bytes, 3 }, { bytes + 3, 4 } }, same[2], all[4], picked[2];
    int32_t pick[2] = { 1, 0 };
    uint8_t eq[2];
    struct onnx_session_options o = { .batch = 2, .threads = 1 };
    struct onnx_tensor_buf in[2] = { tu_tensor("text", T_STRING, 1, D(2), text), tu_tensor("pick", T_INT32, 1, D(2), pick) };
    struct onnx_tensor_buf out[4] = { tu_tensor("same", T_STRING, 1, D(2), same), tu_tensor("eq", T_BOOL, 1, D(2), eq),
                                      tu_tensor("all", T_STRING, 1, D(4), all), tu_tensor("picked", T_STRING, 1, D(2), picked) };
    /* the vocabulary's elements point into the model: read them while it lives */
    struct gj_error err = { 0 };
    onnx_model *m = tu_load(&b, msg);
    onnx_session *s = onnx_session_create(m, &o, &err);
    assert_non_null(s);
    assert_int_equal(onnx_session_run_named(s, in, 2, out, 4, &err), 0);
    assert_true(same[0].data == bytes && same[1].data == bytes + 3 && same[1].len == 4);
    assert_true(eq[0] == 1 && eq[1] == 0);
    assert_true(all[1].data == bytes + 3 && all[2].len == 3 && memcmp(all[3].data, "dog", 3) == 0);
    assert_true(picked[0].len == 3 && memcmp(picked[0].data, "dog", 3) == 0 && memcmp(picked[1].data, "cat", 3) == 0);
    /* a string with a length and no bytes is refused, naming the input */
    text[1].data = NULL;
    assert_int_equal(onnx_session_run_named(s, in, 2, out, 4, &err), -1);
    assert_non_null(strstr(err.message, "input 'text': string 1 has a length but no bytes"));
    assert_int_equal(err.status, 400);
    onnx_session_free(s);
    onnx_model_free(m);
    struct gb r = { 0 };
    gb_input(&r, "text", T_STRING, 1, D(-1));
    gb_node(&r, "Relu", S("text"), S("y"), 0, NULL);
    gb_output(&r, "y");
    tu_expect_fail(tu_run(&r, &o, NULL, 0, NULL, 0, msg, NULL), msg, "input 0 ('text') is STRING");
}

/* ---- the CUDA backend's types ------------------------------------------------------------------------ */

/* Whether the CUDA backend takes op over x (and y) of these types; msg gets its reason. */
static int cuda_takes(int op, int xe, int ye, int ne, char *msg)
{
    struct onnx_node nd = { .name = "n", .op = op };
    struct onnx_params p = { 0 };
    struct onnx_tensor x = { .elem = xe }, y = { .elem = ye }, o = { .elem = ne };
    const struct onnx_tensor *ins[2] = { &x, &y };
    struct onnx_tensor *outs[1] = { &o };
    struct onnx_kargs a = { &nd, &p, ye ? 2 : 1, 1, ins, outs, NULL, 0 };
    return onnx_cuda_types_ok(&a, msg, 256);
}

/* Without a GPU here, the policy itself: float32 math and int64 arithmetic run, the rest is
 * refused with the type named. */
static void test_cuda_refuses_types(void **st)
{
    (void)st;
    char msg[256];
    assert_true(cuda_takes(ONNX_OP_CONV, T_FLOAT, T_FLOAT, T_FLOAT, msg));
    assert_false(cuda_takes(ONNX_OP_CONV, T_FLOAT16, T_FLOAT16, T_FLOAT16, msg));
    assert_non_null(strstr(msg, "input 0 is FLOAT16; the cuda backend computes FLOAT only for Conv"));
    assert_true(cuda_takes(ONNX_OP_ADD, T_INT64, T_INT64, T_INT64, msg));
    assert_false(cuda_takes(ONNX_OP_ADD, T_INT32, T_INT32, T_INT32, msg));
    assert_false(cuda_takes(ONNX_OP_CAST, T_FLOAT, 0, T_FLOAT16, msg));
    assert_non_null(strstr(msg, "output 0 is FLOAT16"));
    assert_true(cuda_takes(ONNX_OP_GATHER, T_INT32, T_INT64, T_INT32, msg));
    assert_false(cuda_takes(ONNX_OP_GATHER, T_FLOAT, T_INT32, T_FLOAT, msg));
    assert_false(cuda_takes(ONNX_OP_TRANSPOSE, T_INT16, 0, T_INT16, msg));
    assert_false(cuda_takes(ONNX_OP_IDENTITY, T_STRING, 0, T_STRING, msg));
    assert_true(cuda_takes(ONNX_OP_RESHAPE, T_BFLOAT16, T_INT64, T_BFLOAT16, msg));
    assert_false(cuda_takes(ONNX_OP_PAD, T_INT32, T_INT64, T_INT32, msg));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_bfloat16),
        cmocka_unit_test(test_names_and_access),
        cmocka_unit_test(test_cast),
        cmocka_unit_test(test_integer_arithmetic),
        cmocka_unit_test(test_logic_and_integer_unary),
        cmocka_unit_test(test_half_ops_match_float32),
        cmocka_unit_test(test_float_elementwise),
        cmocka_unit_test(test_double_kernels),
        cmocka_unit_test(test_reductions_and_argmax),
        cmocka_unit_test(test_data_movement),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_cuda_refuses_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
