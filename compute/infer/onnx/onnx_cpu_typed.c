/*
 * onnx_cpu_typed.c — CPU kernels for every element type through typed element access
 * (onnx_elem_io): element-wise binary and unary operators, reductions and ArgMax/ArgMin.
 * onnx_cpu.c keeps its own loops for float32 (and int64 shape arithmetic), which models spend
 * their time in; these serve every other type and the operators those loops lack.
 *
 * Arithmetic: float types compute in double and round once to their type (for FLOAT16 and
 * BFLOAT16 the correctly rounded result of +, -, *, /); integers compute in 64 bits and wrap to
 * their width (two's complement, as ONNX Runtime); comparisons are exact (unsigned as
 * unsigned); an integer division or Mod by zero fails the run.
 */
#include <math.h>
#include <string.h>

#include "infer/onnx/onnx_cpu.h"

/* ---- binary ------------------------------------------------------------------------------ */

enum { TB_ADD, TB_SUB, TB_MUL, TB_DIV, TB_POW, TB_MOD, TB_EQ, TB_GT, TB_LT, TB_GE, TB_LE, TB_AND, TB_OR, TB_XOR,
       TB_NONE };

static int binary_op(int op)
{
    switch (op) {
    case ONNX_OP_ADD: return TB_ADD;
    case ONNX_OP_SUB: return TB_SUB;
    case ONNX_OP_MUL: return TB_MUL;
    case ONNX_OP_DIV: return TB_DIV;
    case ONNX_OP_POW: return TB_POW;
    case ONNX_OP_MOD: return TB_MOD;
    case ONNX_OP_EQUAL: return TB_EQ;
    case ONNX_OP_GREATER: return TB_GT;
    case ONNX_OP_LESS: return TB_LT;
    case ONNX_OP_GREATEREQ: return TB_GE;
    case ONNX_OP_LESSEQ: return TB_LE;
    case ONNX_OP_AND: return TB_AND;
    case ONNX_OP_OR: return TB_OR;
    case ONNX_OP_XOR: return TB_XOR;
    default: return TB_NONE;
    }
}

static double fbin(int op, double a, double b)
{
    switch (op) {
    case TB_ADD: return a + b;
    case TB_SUB: return a - b;
    case TB_MUL: return a * b;
    case TB_DIV: return a / b;
    case TB_POW: return pow(a, b);
    case TB_MOD: return fmod(a, b);
    case TB_EQ: return a == b;
    case TB_GT: return a > b;
    case TB_LT: return a < b;
    case TB_GE: return a >= b;
    case TB_LE: return a <= b;
    default: return 0;
    }
}

/* a ** e with wrapping; a negative exponent gives 0 unless |a| is 1 (integer division). */
static int64_t ipow(int64_t a, int64_t e)
{
    if (e < 0)
        return a == 1 ? 1 : a == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)a;
    for (uint64_t k = (uint64_t)e; k; k >>= 1) {
        if (k & 1)
            r *= b;
        b *= b;
    }
    return (int64_t)r;
}

/* Mod: fmod = 0 takes the divisor's sign (Python's %), 1 the dividend's (C's %). b != 0. */
static int64_t imod(int64_t a, int64_t b, int uns, int fmod_)
{
    if (uns)
        return (int64_t)((uint64_t)a % (uint64_t)b);
    if (b == -1)
        return 0;
    int64_t r = a % b;
    if (!fmod_ && r != 0 && ((r < 0) != (b < 0)))
        r += b;
    return r;
}

static int64_t idivide(int64_t a, int64_t b, int uns)
{
    if (uns)
        return (int64_t)((uint64_t)a / (uint64_t)b);
    return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
}

/* Integers and BOOL (0/1) as int64 bits; uns: unsigned comparisons and division. */
static int64_t ibin(int op, int uns, int fmod_, int64_t a, int64_t b)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case TB_ADD: return (int64_t)(ua + ub);
    case TB_SUB: return (int64_t)(ua - ub);
    case TB_MUL: return (int64_t)(ua * ub);
    case TB_DIV: return idivide(a, b, uns);
    case TB_POW: return ipow(a, b);
    case TB_MOD: return imod(a, b, uns, fmod_);
    case TB_EQ: return a == b;
    case TB_GT: return uns ? ua > ub : a > b;
    case TB_LT: return uns ? ua < ub : a < b;
    case TB_GE: return uns ? ua >= ub : a >= b;
    case TB_LE: return uns ? ua <= ub : a <= b;
    case TB_AND: return a && b;
    case TB_OR: return a || b;
    case TB_XOR: return (a != 0) != (b != 0);
    default: return 0;
    }
}

static int string_eq(const struct onnx_string *a, const struct onnx_string *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

struct tbin_job {
    struct bc b;
    const void *x, *y;
    void *o;
    const struct onnx_elem_io *ix, *iy, *io;
    int op, cls, uns, fmod;
};

/* One row of the broadcast walk. */
static void tbin_row(const struct tbin_job *j, int64_t row)
{
    int64_t off[3], inner = j->b.od[j->b.r - 1], o = row * inner;
    int64_t sa = j->b.st[0][j->b.r - 1], sb = j->b.st[1][j->b.r - 1];
    bc_row(&j->b, row, off);
    for (int64_t i = 0; i < inner; i++) {
        int64_t ia = off[0] + i * sa, ib = off[1] + i * sb;
        if (j->cls == ONNX_EC_FLOAT)
            j->io->set_f64(j->o, o + i, fbin(j->op, j->ix->get_f64(j->x, ia), j->iy->get_f64(j->y, ib)));
        else if (j->cls == ONNX_EC_STRING)
            ((uint8_t *)j->o)[o + i] = (uint8_t)string_eq((const struct onnx_string *)j->x + ia,
                                                          (const struct onnx_string *)j->y + ib);
        else
            j->io->set_i64(j->o, o + i, ibin(j->op, j->uns, j->fmod, j->ix->get_i64(j->x, ia),
                                             j->iy->get_i64(j->y, ib)));
    }
}

static void tbin_task(void *vctx, int64_t b, int64_t e)
{
    for (int64_t row = b; row < e; row++)
        tbin_row(vctx, row);
}

/* An integer divisor holds a zero. */
static int has_zero(const struct onnx_tensor *t)
{
    const struct onnx_elem_io *io = onnx_elem_io(t->elem);
    for (int64_t i = 0; i < t->numel; i++)
        if (io->get_i64(t->data, i) == 0)
            return 1;
    return 0;
}

int onnx_cpu_typed_binary(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0], *y = a->in[1];
    struct onnx_tensor *o = a->out[0];
    struct tbin_job j = { .x = x->data, .y = y->data, .o = o->data, .ix = onnx_elem_io(x->elem),
                          .iy = onnx_elem_io(y->elem), .io = onnx_elem_io(o->elem), .op = binary_op(a->node->op),
                          .cls = onnx_elem_class(x->elem), .uns = onnx_elem_class(x->elem) == ONNX_EC_UNSIGNED,
                          .fmod = a->p->fmod };
    if (j.op == TB_NONE || (j.cls != ONNX_EC_STRING && (!j.ix || !j.iy)) || !j.io)
        return -1;
    if (j.cls != ONNX_EC_FLOAT && (j.op == TB_DIV || j.op == TB_MOD) && has_zero(y))
        return -1;   /* integer division by zero */
    bc_setup(&j.b, o, a->in, 2);
    int64_t inner = j.b.od[j.b.r - 1];
    if (o->numel)
        par(c, o->numel / inner, 1 + PAR_GRAIN / inner, tbin_task, &j);
    return 0;
}

/* ---- unary ------------------------------------------------------------------------------- */

static double funary(int op, int gelu_tanh, double x)
{
    switch (op) {
    case ONNX_OP_RELU: return x > 0 ? x : 0;
    case ONNX_OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case ONNX_OP_SQRT: return sqrt(x);
    case ONNX_OP_ERF: return erf(x);
    case ONNX_OP_TANH: return tanh(x);
    case ONNX_OP_GELU:
        if (gelu_tanh)
            return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
    case ONNX_OP_NEG: return -x;
    case ONNX_OP_ABS: return fabs(x);
    case ONNX_OP_EXP: return exp(x);
    case ONNX_OP_LOG: return log(x);
    default: return 0;
    }
}

static int64_t iunary(int op, int uns, int64_t x)
{
    switch (op) {
    case ONNX_OP_RELU: return uns || x > 0 ? x : 0;
    case ONNX_OP_NEG: return (int64_t)(0 - (uint64_t)x);
    case ONNX_OP_ABS: return uns || x >= 0 ? x : (int64_t)(0 - (uint64_t)x);
    case ONNX_OP_NOT: return !x;
    default: return 0;
    }
}

struct tun_job {
    const void *x;
    void *y;
    const struct onnx_elem_io *io;
    int op, cls, gelu_tanh;
};

static void tun_task(void *vctx, int64_t b, int64_t e)
{
    const struct tun_job *j = vctx;
    int uns = j->cls == ONNX_EC_UNSIGNED;
    for (int64_t i = b; i < e; i++) {
        if (j->cls == ONNX_EC_FLOAT)
            j->io->set_f64(j->y, i, funary(j->op, j->gelu_tanh, j->io->get_f64(j->x, i)));
        else
            j->io->set_i64(j->y, i, iunary(j->op, uns, j->io->get_i64(j->x, i)));
    }
}

int onnx_cpu_typed_unary(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    struct tun_job j = { x->data, a->out[0]->data, onnx_elem_io(x->elem), a->node->op, onnx_elem_class(x->elem),
                         a->p->gelu_tanh };
    if (!j.io)
        return -1;
    par(c, x->numel, PAR_GRAIN, tun_task, &j);
    return 0;
}

/* ---- reductions ------------------------------------------------------------------------------- */

/* One 8-byte accumulator per output (noop_with_empty_axes: a copy, none). */
size_t onnx_cpu_reduce_scratch(const struct onnx_kargs *a)
{
    return a->p->has_axes ? ((size_t)a->out[0]->numel + 1) * 8 : 0;
}

/* Accumulators: double for float types, int64 bits for the others. */
union acc {
    double f;
    int64_t i;
};

/* Max starts at the lowest value, Min at the highest, Sum and Mean at 0. */
static void acc_init(union acc *acc, int64_t n, int op, int cls)
{
    union acc v = { .i = 0 };
    int uns = cls == ONNX_EC_UNSIGNED;
    if (cls == ONNX_EC_FLOAT && op == ONNX_OP_REDUCEMAX)
        v.f = -INFINITY;
    else if (cls == ONNX_EC_FLOAT && op == ONNX_OP_REDUCEMIN)
        v.f = INFINITY;
    else if (cls == ONNX_EC_FLOAT)
        v.f = 0;
    else if (op == ONNX_OP_REDUCEMAX)
        v.i = uns ? 0 : INT64_MIN;
    else if (op == ONNX_OP_REDUCEMIN)
        v.i = uns ? -1 : INT64_MAX;
    for (int64_t k = 0; k < n; k++)
        acc[k] = v;
}

/* acc combined with element i of x (NaN sticks in Max and Min). */
static void acc_add(union acc *acc, int op, int cls, const struct onnx_elem_io *io, const void *x, int64_t i)
{
    if (cls == ONNX_EC_FLOAT) {
        double v = io->get_f64(x, i);
        if (op == ONNX_OP_REDUCEMAX)
            acc->f = v != v || v > acc->f ? v : acc->f;
        else if (op == ONNX_OP_REDUCEMIN)
            acc->f = v != v || v < acc->f ? v : acc->f;
        else
            acc->f += v;
        return;
    }
    int64_t v = io->get_i64(x, i);
    int uns = cls == ONNX_EC_UNSIGNED;
    if (op == ONNX_OP_REDUCEMAX)
        acc->i = (uns ? (uint64_t)v > (uint64_t)acc->i : v > acc->i) ? v : acc->i;
    else if (op == ONNX_OP_REDUCEMIN)
        acc->i = (uns ? (uint64_t)v < (uint64_t)acc->i : v < acc->i) ? v : acc->i;
    else
        acc->i = (int64_t)((uint64_t)acc->i + (uint64_t)v);
}

int64_t onnx_cpu_reduce_strides(const struct onnx_tensor *x, unsigned mask, int64_t *ost)
{
    int64_t s = 1, cnt = 1;
    for (int i = x->rank - 1; i >= 0; i--) {
        if (mask & (1u << i)) {
            ost[i] = 0;
            cnt *= x->dims[i];
        } else {
            ost[i] = s;
            s *= x->dims[i];
        }
    }
    return cnt;
}

/* Stores the accumulators (Mean: divided by cnt; integers: truncated) into y. */
static void reduce_store(const union acc *acc, struct onnx_tensor *y, int op, int cls, int64_t cnt)
{
    const struct onnx_elem_io *io = onnx_elem_io(y->elem);
    int mean = op == ONNX_OP_REDUCEMEAN;
    for (int64_t k = 0; k < y->numel; k++) {
        if (cls == ONNX_EC_FLOAT)
            io->set_f64(y->data, k, mean ? (cnt ? acc[k].f / (double)cnt : NAN) : acc[k].f);
        else if (cls == ONNX_EC_UNSIGNED && mean)
            io->set_i64(y->data, k, cnt ? (int64_t)((uint64_t)acc[k].i / (uint64_t)cnt) : 0);
        else
            io->set_i64(y->data, k, mean ? (cnt ? acc[k].i / cnt : 0) : acc[k].i);
    }
}

/* ReduceMean (other than float32), ReduceSum, ReduceMax, ReduceMin over the axes mask that
 * shape inference left in p->n_axes. */
int onnx_cpu_typed_reduce(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    struct onnx_tensor *y = a->out[0];
    const struct onnx_elem_io *io = onnx_elem_io(x->elem);
    int op = a->node->op, cls = onnx_elem_class(x->elem);
    if (!a->p->has_axes) {   /* noop_with_empty_axes */
        memcpy(y->data, x->data, onnx_tensor_bytes(x));
        return 0;
    }
    int64_t ost[ONNX_MAX_RANK], idx[ONNX_MAX_RANK] = { 0 }, o = 0;
    int64_t cnt = onnx_cpu_reduce_strides(x, (unsigned)a->p->n_axes, ost);
    union acc *acc = a->scratch;   /* onnx_cpu_reduce_scratch() bytes */
    acc_init(acc, y->numel, op, cls);
    for (int64_t i = 0; i < x->numel; i++) {
        acc_add(&acc[o], op, cls, io, x->data, i);
        onnx_cpu_reduce_next(x, ost, idx, &o);
    }
    reduce_store(acc, y, op, cls, cnt);
    return 0;
}

/* ---- ArgMax, ArgMin ------------------------------------------------------------------------------ */

/* Whether element k beats element best (ties: the later one with select_last). */
static int arg_better(const struct onnx_elem_io *io, int cls, const void *x, int64_t k, int64_t best, int max,
                      int last)
{
    int gt, eq;
    if (cls == ONNX_EC_FLOAT) {
        double v = io->get_f64(x, k), b = io->get_f64(x, best);
        gt = max ? v > b : v < b;
        eq = v == b;
    } else {
        int64_t v = io->get_i64(x, k), b = io->get_i64(x, best);
        int uns = cls == ONNX_EC_UNSIGNED;
        gt = max ? (uns ? (uint64_t)v > (uint64_t)b : v > b) : (uns ? (uint64_t)v < (uint64_t)b : v < b);
        eq = v == b;
    }
    return gt || (last && eq);
}

/* The index along p->axis of the largest (ArgMax) or smallest (ArgMin) element, as INT64. */
int onnx_cpu_argmax(struct onnx_backend_ctx *c, const struct onnx_kargs *a)
{
    const struct onnx_tensor *x = a->in[0];
    const struct onnx_elem_io *io = onnx_elem_io(x->elem);
    int ax = (int)a->p->axis, max = a->node->op == ONNX_OP_ARGMAX, cls = onnx_elem_class(x->elem);
    int64_t outer = onnx_dims_product(x, 0, ax), n = x->dims[ax], inner = onnx_dims_product(x, ax + 1, x->rank);
    int64_t *y = a->out[0]->data;
    if (n == 0)
        return -1;   /* refused by shape inference */
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i, best = 0;
            for (int64_t k = 1; k < n; k++)
                if (arg_better(io, cls, x->data, base + k * inner, base + best * inner, max, a->p->select_last))
                    best = k;
            y[o * inner + i] = best;
        }
    }
    return 0;
}
