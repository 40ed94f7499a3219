/*
 * test_onnx_io.c — a session's inputs and outputs: runs on named tensors (any order, a subset
 * of the outputs), every hostile input refused with its name and what was expected (status 400,
 * outputs untouched), models without a batch dimension, scalars, and sizes given for symbolic
 * dimensions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "onnx_test_util.h"

/* a FLOAT [N, 4], idx INT64 [N], flag BOOL [N] -> total = sum(a, 1) + idx (FLOAT [N]),
 * both = total > 0 and flag (BOOL [N]), idx_out = idx. */
static struct gb three_inputs(void)
{
    static const int64_t axes[1] = { 1 };
    static const float zero[1] = { 0 };
    struct gb b = { 0 };
    gb_input(&b, "a", T_FLOAT, 2, D(-1, 4));
    gb_input(&b, "idx", T_INT64, 1, D(-1));
    gb_input(&b, "flag", T_BOOL, 1, D(-1));
    gb_init(&b, "axes", T_INT64, 1, D(1), axes);
    gb_init(&b, "zero", T_FLOAT, 0, D(1), zero);
    struct pb kd[1] = { pb_attr_int("keepdims", 0) }, to[1] = { pb_attr_int("to", T_FLOAT) };
    gb_node(&b, "ReduceSum", S("a", "axes"), S("sum"), 1, kd);
    gb_node(&b, "Cast", S("idx"), S("fi"), 1, to);
    gb_node(&b, "Add", S("sum", "fi"), S("total"), 0, NULL);
    gb_node(&b, "Greater", S("total", "zero"), S("pos"), 0, NULL);
    gb_node(&b, "And", S("pos", "flag"), S("both"), 0, NULL);
    gb_node(&b, "Identity", S("idx"), S("idx_out"), 0, NULL);
    gb_output(&b, "total");
    gb_output(&b, "both");
    gb_output(&b, "idx_out");
    return b;
}

struct fixture {
    onnx_model *m;
    onnx_session *s;
    float a[8];
    int64_t idx[2];
    uint8_t flag[2];
    struct onnx_tensor_buf in[3];
    float total[4];
    uint8_t both[4];
    struct onnx_tensor_buf out[2];
};

/* A batch-2 session of three_inputs() and well-formed tensors (inputs in another order than the
 * model's, outputs a subset in reverse order, with room to spare). */
static void setup(struct fixture *f)
{
    char msg[512];
    struct gb b = three_inputs();
    struct gj_error err = { 0 };
    memset(f, 0, sizeof *f);
    f->m = tu_load(&b, msg);
    assert_non_null(f->m);
    struct onnx_session_options o = { .batch = 2, .threads = 2 };
    f->s = onnx_session_create(f->m, &o, &err);
    assert_non_null(f->s);
    for (int i = 0; i < 8; i++)
        f->a[i] = (float)i - 5.0f;   /* row sums -14 and 2 */
    f->idx[0] = 20;
    f->idx[1] = -3;
    f->flag[0] = 1;
    f->flag[1] = 1;
    f->in[0] = tu_tensor("flag", T_BOOL, 1, D(2), f->flag);
    f->in[1] = tu_tensor("a", T_FLOAT, 2, D(2, 4), f->a);
    f->in[2] = tu_tensor("idx", T_INT64, 1, D(2), f->idx);
    memset(f->total, 0xab, sizeof f->total);
    memset(f->both, 0xab, sizeof f->both);
    f->out[0] = (struct onnx_tensor_buf){ .name = "both", .data = f->both, .bytes = sizeof f->both };
    f->out[1] = (struct onnx_tensor_buf){ .name = "total", .data = f->total, .bytes = sizeof f->total };
}

static void teardown(struct fixture *f)
{
    onnx_session_free(f->s);
    onnx_model_free(f->m);
}

/* The run must be refused with status 400, a message holding needle, and no output written. */
static void expect_refused(struct fixture *f, const char *needle)
{
    struct gj_error err = { 0 };
    assert_int_equal(onnx_session_run_named(f->s, f->in, 3, f->out, 2, &err), -1);
    if (!strstr(err.message, needle))
        fail_msg("message '%s' does not mention '%s'", err.message, needle);
    assert_int_equal(err.status, 400);
    for (int i = 0; i < 4; i++)
        assert_int_equal(f->both[i], 0xab);
}

static void test_named_run(void **st)
{
    (void)st;
    struct fixture f;
    struct gj_error err = { 0 };
    setup(&f);
    assert_int_equal(onnx_session_find_input(f.s, "flag"), 2);
    assert_int_equal(onnx_session_find_output(f.s, "idx_out"), 2);
    assert_int_equal(onnx_session_find_input(f.s, "total"), -1);
    assert_int_equal(onnx_session_run_named(f.s, f.in, 3, f.out, 2, &err), 0);
    assert_true(f.total[0] == 6.0f && f.total[1] == -1.0f);
    assert_true(f.both[0] == 1 && f.both[1] == 0 && f.both[2] == 0xab);
    assert_int_equal(f.out[0].elem_type, ONNX_ELEM_BOOL);
    assert_int_equal(f.out[0].bytes, 2);
    assert_true(f.out[1].elem_type == ONNX_ELEM_FLOAT && f.out[1].rank == 1 && f.out[1].dims[0] == 2);
    assert_int_equal(f.out[1].bytes, 8);
    /* no outputs at all is a valid request (the model still runs) */
    assert_int_equal(onnx_session_run_named(f.s, f.in, 3, NULL, 0, &err), 0);
    teardown(&f);
}

/* Each hostile input, alone, on an otherwise well-formed request. */
static void test_hostile_inputs(void **st)
{
    (void)st;
    struct fixture f;
    setup(&f);
    f.in[0].name = "bogus";
    expect_refused(&f, "the model has no input 'bogus'");
    f.in[0].name = "flag";
    f.in[2].name = "a";
    expect_refused(&f, "input 'a' is given twice");
    teardown(&f);
    setup(&f);
    struct gj_error err = { 0 };
    assert_int_equal(onnx_session_run_named(f.s, f.in + 1, 2, f.out, 2, &err), -1);
    assert_non_null(strstr(err.message, "input 'flag' is missing"));
    f.in[1].elem_type = ONNX_ELEM_FLOAT16;
    expect_refused(&f, "input 'a' is FLOAT16; the model takes FLOAT");
    f.in[1] = tu_tensor("a", T_FLOAT, 3, D(2, 4, 1), f.a);
    expect_refused(&f, "input 'a' has rank 3; this session takes rank 2 (shape [2, 4])");
    f.in[1] = tu_tensor("a", T_FLOAT, 2, D(2, 5), f.a);
    expect_refused(&f, "input 'a' has shape [2, 5]; this session takes [2, 4]");
    f.in[1] = tu_tensor("a", T_FLOAT, 2, D(2, 4), f.a);
    f.in[1].bytes = 28;
    expect_refused(&f, "input 'a' has 28 bytes of data; [2, 4] FLOAT needs 32 (8 elements)");
    f.in[1].bytes = 32;
    f.in[1].data = NULL;
    expect_refused(&f, "input 'a' has no data");
    f.in[1].data = f.a;
    f.flag[1] = 2;
    expect_refused(&f, "input 'flag': element 1 is 2; a BOOL is 0 or 1");
    f.flag[1] = 1;
    f.out[0].name = "nope";
    expect_refused(&f, "the model has no output 'nope'");
    f.out[0] = f.out[1];
    expect_refused(&f, "output 'total' is requested twice");
    f.out[0] = (struct onnx_tensor_buf){ .name = "both", .data = f.both, .bytes = 1 };
    expect_refused(&f, "output 'both' needs 2 bytes; the buffer has 1");
    /* the positional API checks BOOL values too */
    const void *ins[3] = { f.a, f.idx, "\x01\x07" };
    void *outs[3] = { f.total, f.both, f.idx };
    assert_int_equal(onnx_session_run(f.s, ins, outs, &err), -1);
    assert_non_null(strstr(err.message, "input 'flag': element 1 is 7"));
    teardown(&f);
}

/* ---- batch dimension or none --------------------------------------------------------------------- */

/* m FLOAT [3, 4] (its first dimension is not a batch) and k INT64 scalar -> col = sum(m, 0) * k. */
static struct gb no_batch_model(void)
{
    static const int64_t axes[1] = { 0 };
    struct gb b = { 0 };
    gb_input(&b, "m", T_FLOAT, 2, D(3, 4));
    gb_input(&b, "k", T_INT64, 0, D(1));
    gb_init(&b, "axes", T_INT64, 1, D(1), axes);
    struct pb kd[1] = { pb_attr_int("keepdims", 0) }, to[1] = { pb_attr_int("to", T_FLOAT) };
    gb_node(&b, "ReduceSum", S("m", "axes"), S("s"), 1, kd);
    gb_node(&b, "Cast", S("k"), S("kf"), 1, to);
    gb_node(&b, "Mul", S("s", "kf"), S("col"), 0, NULL);
    gb_output(&b, "col");
    return b;
}

static void test_no_batch(void **st)
{
    (void)st;
    char msg[512];
    float m[12], col[4];
    int64_t k = 2;
    for (int i = 0; i < 12; i++)
        m[i] = (float)i;
    struct onnx_tensor_buf in[2] = { tu_tensor("m", T_FLOAT, 2, D(3, 4), m), tu_tensor("k", T_INT64, 0, NULL, &k) };
    struct onnx_tensor_buf out = { .name = "col", .data = col, .bytes = sizeof col };
    struct onnx_session_options o = { .threads = 1, .no_batch = 1 };
    struct gb b = no_batch_model();
    assert_int_equal(tu_run(&b, &o, in, 2, &out, 1, msg, NULL), 0);
    assert_true(col[0] == 24.0f && col[3] == 42.0f && out.rank == 1 && out.dims[0] == 4);
    b = no_batch_model();
    o.batch = 2;
    tu_expect_fail(tu_run(&b, &o, in, 2, &out, 1, msg, NULL), msg, "batch size 2 for a model without a batch dimension");
    /* with a batch dimension: the fixed 3 is not a batch of 2, and a scalar has none */
    b = no_batch_model();
    o = (struct onnx_session_options){ .batch = 2, .threads = 1 };
    tu_expect_fail(tu_run(&b, &o, in, 2, &out, 1, msg, NULL), msg, "input 'm' has a fixed batch dimension of 3");
    b = no_batch_model();
    o.batch = 3;
    tu_expect_fail(tu_run(&b, &o, in, 2, &out, 1, msg, NULL), msg, "input 'k' is a scalar");
}

/* x FLOAT [N, L] (L symbolic), w FLOAT [N, 4] -> rows = sum(x, 1). */
static struct gb symbolic_model(void)
{
    static const int64_t axes[1] = { 1 };
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 2, D(-1, -1));
    gb_input(&b, "w", T_FLOAT, 2, D(-1, 4));
    gb_init(&b, "axes", T_INT64, 1, D(1), axes);
    struct pb kd[1] = { pb_attr_int("keepdims", 0) };
    gb_node(&b, "ReduceSum", S("x", "axes"), S("rows"), 1, kd);
    gb_node(&b, "Identity", S("w"), S("w_out"), 0, NULL);
    gb_output(&b, "rows");
    gb_output(&b, "w_out");
    return b;
}

/* A session of symbolic_model() with these options; NULL with msg. */
static onnx_session *symbolic_session(onnx_model **m, const struct onnx_session_options *o, char *msg)
{
    struct gb b = symbolic_model();
    struct gj_error err = { 0 };
    *m = tu_load(&b, msg);
    onnx_session *s = onnx_session_create(*m, o, &err);
    if (!s)
        snprintf(msg, 512, "%s", err.message);
    return s;
}

static void expect_shape_refused(const struct onnx_io_desc *shapes, size_t n, int no_batch, const char *needle)
{
    char msg[512];
    onnx_model *m;
    struct onnx_session_options o = { .batch = no_batch ? 0 : 2, .threads = 1, .no_batch = no_batch,
                                      .input_shapes = shapes, .n_input_shapes = n };
    assert_null(symbolic_session(&m, &o, msg));
    if (!strstr(msg, needle))
        fail_msg("message '%s' does not mention '%s'", msg, needle);
    onnx_model_free(m);
}

static void test_input_shapes(void **st)
{
    (void)st;
    char msg[512];
    onnx_model *m;
    struct onnx_io_desc shapes[2] = { { .name = "x", .rank = 2, .dims = { -1, 5 } },
                                      { .name = "w", .rank = 2, .dims = { -1, -1 } } };
    struct onnx_session_options o = { .batch = 2, .threads = 1, .input_shapes = shapes, .n_input_shapes = 1 };
    onnx_session *s = symbolic_session(&m, &o, msg);
    assert_non_null(s);
    assert_true(onnx_session_input(s, 0)->dims[0] == 2 && onnx_session_input(s, 0)->dims[1] == 5);
    float x[10] = { 1, 1, 1, 1, 1, 2, 2, 2, 2, 2 }, w[8] = { 0 }, rows[2], wo[8];
    struct onnx_tensor_buf in[2] = { tu_tensor("x", T_FLOAT, 2, D(2, 5), x), tu_tensor("w", T_FLOAT, 2, D(2, 4), w) };
    struct onnx_tensor_buf out[2] = { { .name = "rows", .data = rows, .bytes = sizeof rows },
                                      { .name = "w_out", .data = wo, .bytes = sizeof wo } };
    struct gj_error err = { 0 };
    assert_int_equal(onnx_session_run_named(s, in, 2, out, 2, &err), 0);
    assert_true(rows[0] == 5.0f && rows[1] == 10.0f);
    onnx_session_free(s);
    onnx_model_free(m);
    /* no batch: every size given */
    shapes[0].dims[0] = 3;
    shapes[1].dims[0] = 3;
    shapes[1].dims[1] = -1;   /* fixed by the model */
    o = (struct onnx_session_options){ .threads = 1, .no_batch = 1, .input_shapes = shapes, .n_input_shapes = 2 };
    s = symbolic_session(&m, &o, msg);
    assert_non_null(s);
    assert_true(onnx_session_input(s, 0)->dims[0] == 3 && onnx_session_output(s, 0)->dims[0] == 3);
    onnx_session_free(s);
    onnx_model_free(m);
    expect_shape_refused(NULL, 0, 0, "input 'x' has a symbolic dimension 1 besides the batch; give its size in input_shapes");
    expect_shape_refused(shapes, 1, 1, "input 'w' has a symbolic dimension 0; give its size");
    shapes[1].dims[1] = 5;
    expect_shape_refused(shapes, 2, 1, "input 'w': dimension 1 is 4 in the model; 5 was given");
    shapes[0].rank = 3;
    expect_shape_refused(shapes, 1, 0, "input 'x' has rank 2 in the model; the shape given has rank 3");
    shapes[0].name = "y";
    expect_shape_refused(shapes, 1, 0, "input_shapes[0] names no input of the model ('y')");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_named_run),
        cmocka_unit_test(test_hostile_inputs),
        cmocka_unit_test(test_no_batch),
        cmocka_unit_test(test_input_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
