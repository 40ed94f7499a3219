/*
 * onnx_shape.c — shape inference for one session's batch size: one function per operator
 * (or family of operators with one rule), looked up by operator in `rules`. Each checks what
 * its kernels assume (element types, ranks, matching dimensions), sets its outputs' element
 * type and shape, and resolves the parameters that depend on shapes (Conv's padding, a
 * normalised axis, Slice's starts and steps, Pad's amounts) into the node's parameters.
 * Inputs that give shapes (Reshape's shape, Slice's starts, axes...) must be constants by
 * now: initializers, or folded (onnx_optimize.c) because all their inputs were.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "infer/onnx/onnx_exec.h"

/* The element types each family of operators takes: what the CPU backend's kernels compute
 * (a backend that computes fewer refuses the rest when the session is planned). */
#define TM_F32 ONNX_TM_F32ISH           /* Conv, pooling, normalisation: float32 (halves through it) */
#define TM_MATMUL ONNX_TM_FLOATS        /* Gemm, MatMul */
#define TM_SOFTMAX ONNX_TM_FLOATS
#define TM_REDUCE ONNX_TM_NUMERIC       /* ReduceMean, ReduceSum, ReduceMax, ReduceMin, ArgMax, ArgMin */
#define TM_ARITH ONNX_TM_NUMERIC        /* Add, Sub, Mul, Div, Mod, Pow, Greater, Less, ... */
#define TM_EQUAL ONNX_TM_ALL
#define TM_LOGIC ONNX_TM_BOOL           /* And, Or, Xor, Not */
#define TM_INDEX (ONNX_TM(ONNX_ELEM_INT64) | ONNX_TM(ONNX_ELEM_INT32))   /* Gather's indices */
#define TM_PAD ONNX_TM_NUMERIC
#define TM_RANGE ONNX_TM_NUMERIC

/* One node's inference: the model, the session's values, the node, its first input and
 * output. */
struct shape_ctx {
    const onnx_model *m;
    struct tinfo *v;
    struct rnode *rn;
    struct onnx_params *p;
    const struct onnx_tensor *x;   /* input 0 (NULL: none) */
    struct onnx_tensor *y;         /* output 0 */
    struct gj_error *err;
};

typedef int (*shape_rule)(struct shape_ctx *c);

/* Sets err to "node 'NAME' (Op): <message>" and returns -1. */
static int fail(const struct shape_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(const struct shape_ctx *c, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gj_error_set(c->err, "model", "node '%s' (%s): %s", c->rn->n->name, onnx_op_name(c->rn->op), msg);
}

int onnx_set_shape(struct onnx_tensor *t, int elem, int rank, const int64_t *dims)
{
    t->elem = elem;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->dims[i] = dims[i];
    int64_t n = onnx_shape_numel(rank, dims, ONNX_MAX_ELEMS);
    if (n < 0)
        return -1;
    if (n * (int64_t)onnx_elem_size(elem) > ONNX_MAX_TENSOR_BYTES)
        return -1;
    t->numel = n;
    return 0;
}

/* Output 0's type and shape. */
static int out(struct shape_ctx *c, int elem, int rank, const int64_t *dims)
{
    if (onnx_set_shape(c->y, elem, rank, dims))
        return fail(c, "the output would be too large");
    return 0;
}

/* Input k, or NULL where the node has none. */
static const struct onnx_tensor *in(const struct shape_ctx *c, int k)
{
    return c->rn->n_in > k && c->rn->in[k] >= 0 ? &c->v[c->rn->in[k]].t : NULL;
}

/* Input k (when present) is of a type in mask, else a message naming it and the types taken. */
static int need(const struct shape_ctx *c, int k, unsigned mask)
{
    const struct onnx_tensor *t = in(c, k);
    char names[200];
    if (!t || onnx_elem_in(t->elem, mask))
        return 0;
    return fail(c, "input %d ('%s') is %s; this operator takes %s here", k, c->m->values[c->rn->in[k]].name,
                onnx_elem_name(t->elem), onnx_elem_mask_names(mask, names, sizeof names));
}

/* Inputs k of [from, to) (when present) have input `from`'s type. */
static int same_type(const struct shape_ctx *c, int from, int to)
{
    for (int k = from + 1; k < to; k++)
        if (in(c, k) && in(c, from) && in(c, k)->elem != in(c, from)->elem)
            return fail(c, "input %d is %s, input %d %s: they must be of one type", from,
                        onnx_elem_name(in(c, from)->elem), k, onnx_elem_name(in(c, k)->elem));
    return 0;
}

/* Inputs [0, n) of one type, in mask. */
static int need_all(const struct shape_ctx *c, int n, unsigned mask)
{
    return need(c, 0, mask) || same_type(c, 0, n);
}

static int norm_axis(int64_t axis, int rank, int64_t *res)
{
    if (axis < -rank || axis >= rank)
        return -1;
    *res = axis < 0 ? axis + rank : axis;
    return 0;
}

/* p->axis normalised for rank, or a message. */
static int resolve_axis(struct shape_ctx *c, int rank)
{
    int64_t ax;
    if (norm_axis(c->p->axis, rank, &ax))
        return fail(c, "axis out of range");
    c->p->axis = ax;
    return 0;
}

/* Numpy broadcasting of two shapes into dout. */
static int broadcast(int ra, const int64_t *da, int rb, const int64_t *db, int *ro, int64_t *dout)
{
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int64_t a = i - (r - ra) >= 0 ? da[i - (r - ra)] : 1;
        int64_t b = i - (r - rb) >= 0 ? db[i - (r - rb)] : 1;
        if (a != b && a != 1 && b != 1)
            return -1;
        dout[i] = a == 1 ? b : a;
    }
    *ro = r;
    return 0;
}

/* Input k as a constant int64 vector (INT64 or INT32) of at most maxn values (axes, a shape...). */
static int const_ints(const struct shape_ctx *c, int k, int64_t *res, int maxn, int *n)
{
    int vi = c->rn->n_in > k ? c->rn->in[k] : -1;
    const struct tinfo *t = vi >= 0 ? &c->v[vi] : NULL;
    if (!t || !t->is_const || (t->t.elem != ONNX_ELEM_INT64 && t->t.elem != ONNX_ELEM_INT32) ||
        t->t.rank > 1 || t->t.numel > maxn)
        return -1;
    onnx_convert(ONNX_ELEM_INT64, res, t->t.elem, t->hdata, t->t.numel);
    *n = (int)t->t.numel;
    return 0;
}

/* Input k as a constant scalar. */
static int const_scalar(const struct shape_ctx *c, int k, double *res)
{
    int vi = c->rn->n_in > k ? c->rn->in[k] : -1;
    const struct tinfo *t = vi >= 0 ? &c->v[vi] : NULL;
    if (!t || !t->is_const || t->t.numel != 1 || !onnx_elem_in(t->t.elem, ONNX_TM_NUMERIC | ONNX_TM_BOOL))
        return -1;
    *res = onnx_elem_get_f64(t->t.elem, t->hdata, 0);
    return 0;
}

/* The axes of ReduceMean, Squeeze or Unsqueeze: the constant input 1 (newer opsets), else the
 * attribute, else none (*na = 0). -1 when input 1 is not a constant int64 vector. */
static int node_axes(const struct shape_ctx *c, int64_t *axes, int *na)
{
    *na = 0;
    if (in(c, 1))
        return const_ints(c, 1, axes, ONNX_MAX_RANK, na);
    if (c->p->has_axes) {
        *na = c->p->n_axes;
        memcpy(axes, c->p->axes, sizeof c->p->axes);
    }
    return 0;
}

/* ---- convolution and pooling ------------------------------------------------------------- */

/* One spatial dimension of a window: its padding (auto_pad resolved) and output size. */
static int window_out(int64_t in, int64_t k, int64_t s, int64_t d, int auto_pad, int ceil_mode,
                      int64_t *pb, int64_t *pe, int64_t *res)
{
    int64_t ek = (k - 1) * d + 1;
    if (auto_pad == ONNX_PAD_VALID) {
        *pb = *pe = 0;
    } else if (auto_pad == ONNX_PAD_SAME_UPPER || auto_pad == ONNX_PAD_SAME_LOWER) {
        int64_t o = (in + s - 1) / s;
        int64_t total = (o - 1) * s + ek - in;
        if (total < 0)
            total = 0;
        *pb = auto_pad == ONNX_PAD_SAME_UPPER ? total / 2 : total - total / 2;
        *pe = total - *pb;
        *res = o;
        return 0;
    }
    int64_t span = in + *pb + *pe - ek;
    if (span < 0)
        return -1;
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + *pb)
        o--;
    *res = o;
    return 0;
}

/* The two spatial output dims of a 4-D window op into d[2], d[3]; pooling (explicit pads
 * must be smaller than the kernel) or not (a convolution). */
static int window_dims(struct shape_ctx *c, int pooling, int64_t *d)
{
    struct onnx_params *p = c->p;
    for (int i = 0; i < 2; i++) {
        if (pooling && (p->pads[i] >= p->kernel[i] || p->pads[2 + i] >= p->kernel[i]) &&
            p->auto_pad == ONNX_PAD_NOTSET)
            return fail(c, "padding must be smaller than the kernel");
        if (window_out(c->x->dims[2 + i], p->kernel[i], p->strides[i], p->dilations[i], p->auto_pad,
                       pooling && p->ceil_mode, &p->pads[i], &p->pads[2 + i], &d[2 + i]))
            return fail(c, "the kernel is larger than the padded input");
    }
    return 0;
}

static int shape_conv(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x, *w = in(c, 1), *b = in(c, 2);
    struct onnx_params *p = c->p;
    int64_t d[ONNX_MAX_RANK];
    if (need_all(c, 3, TM_F32))
        return -1;
    if (x->rank != 4 || w->rank != 4)
        return fail(c, "only 2-D convolution (4-D input and weight) is supported");
    if (x->dims[1] != w->dims[1] * p->group || w->dims[0] % p->group)
        return fail(c, "input channels %lld do not match the weight %lldx%lld (group %lld)", (long long)x->dims[1],
                    (long long)w->dims[0], (long long)w->dims[1], (long long)p->group);
    if (p->n_kernel && (p->kernel[0] != w->dims[2] || p->kernel[1] != w->dims[3]))
        return fail(c, "kernel_shape does not match the weight");
    p->kernel[0] = w->dims[2];
    p->kernel[1] = w->dims[3];
    if (b && b->numel != w->dims[0])
        return fail(c, "the bias does not match the output channels");
    d[0] = x->dims[0];
    d[1] = w->dims[0];
    if (window_dims(c, 0, d))
        return -1;
    return out(c, x->elem, 4, d);
}

/* MaxPool, AveragePool */
static int shape_pool(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    int64_t d[ONNX_MAX_RANK];
    if (need(c, 0, TM_F32))
        return -1;
    if (x->rank != 4)
        return fail(c, "only 2-D pooling (4-D input) is supported");
    d[0] = x->dims[0];
    d[1] = x->dims[1];
    if (window_dims(c, 1, d))
        return -1;
    return out(c, x->elem, 4, d);
}

static int shape_global_pool(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    int64_t d[ONNX_MAX_RANK];
    if (need(c, 0, TM_F32))
        return -1;
    if (x->rank < 3)
        return fail(c, "the input needs rank 3 or more");
    memcpy(d, x->dims, sizeof d);
    for (int i = 2; i < x->rank; i++)
        d[i] = 1;
    return out(c, x->elem, x->rank, d);
}

static int shape_batchnorm(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    if (need_all(c, 5, TM_F32))
        return -1;
    if (x->rank < 2)
        return fail(c, "the input needs rank 2 or more");
    for (int k = 1; k < 5; k++)
        if (!in(c, k) || in(c, k)->numel != x->dims[1])
            return fail(c, "parameter %d does not have %lld channels", k, (long long)x->dims[1]);
    return out(c, x->elem, x->rank, x->dims);
}

/* ---- element-wise ------------------------------------------------------------------------ */

/* The types an element-wise unary operator takes. */
static unsigned unary_types(int op)
{
    switch (op) {
    case ONNX_OP_RELU: case ONNX_OP_NEG: return ONNX_TM_FLOATS | ONNX_TM_SIGNED_INTS;
    case ONNX_OP_ABS: return ONNX_TM_NUMERIC;
    case ONNX_OP_NOT: return TM_LOGIC;
    default: return ONNX_TM_FLOATS;   /* Sigmoid, Sqrt, Erf, Gelu, Tanh, Exp, Log */
    }
}

static int shape_unary(struct shape_ctx *c)
{
    if (need(c, 0, unary_types(c->rn->op)))
        return -1;
    return out(c, c->x->elem, c->x->rank, c->x->dims);
}

static int shape_identity(struct shape_ctx *c)
{
    return out(c, c->x->elem, c->x->rank, c->x->dims);
}

static int shape_dropout(struct shape_ctx *c)
{
    const struct rnode *rn = c->rn;
    if (in(c, 2) && (!c->v[rn->in[2]].is_const || in(c, 2)->elem != ONNX_ELEM_BOOL || in(c, 2)->numel != 1 ||
                     *(uint8_t *)c->v[rn->in[2]].hdata))
        return fail(c, "training_mode must be a constant false");
    if (rn->n_out > 1 && rn->out[1] >= 0)
        return fail(c, "the mask output is not supported");
    return out(c, c->x->elem, c->x->rank, c->x->dims);
}

static int shape_cast(struct shape_ctx *c)
{
    if (need(c, 0, ONNX_TM_ALL))
        return -1;
    return out(c, c->p->to, c->x->rank, c->x->dims);
}

static int is_comparison(int op)
{
    return op == ONNX_OP_EQUAL || op == ONNX_OP_GREATER || op == ONNX_OP_LESS || op == ONNX_OP_GREATEREQ ||
           op == ONNX_OP_LESSEQ;
}

/* Add, Sub, Mul, Div, Mod, Pow (any numeric exponent), comparisons (BOOL out), And, Or, Xor. */
static int shape_binary(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x, *b = in(c, 1);
    int op = c->rn->op, r;
    int64_t d[ONNX_MAX_RANK];
    unsigned types = op == ONNX_OP_EQUAL ? TM_EQUAL : op == ONNX_OP_AND || op == ONNX_OP_OR || op == ONNX_OP_XOR
                   ? TM_LOGIC : TM_ARITH;
    if (op == ONNX_OP_POW ? need(c, 0, TM_ARITH) || need(c, 1, TM_ARITH) : need(c, 0, types) || same_type(c, 0, 2))
        return -1;
    if (op == ONNX_OP_MOD && !c->p->fmod && onnx_elem_class(x->elem) == ONNX_EC_FLOAT)
        return fail(c, "a float Mod needs fmod = 1");
    if (broadcast(x->rank, x->dims, b->rank, b->dims, &r, d))
        return fail(c, "shapes cannot be broadcast together");
    return out(c, is_comparison(op) || types == TM_LOGIC ? ONNX_ELEM_BOOL : x->elem, r, d);
}

static int shape_where(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x, *a = in(c, 1), *b = in(c, 2);
    int64_t d[ONNX_MAX_RANK], d2[ONNX_MAX_RANK];
    int r, r2;
    if (need(c, 0, ONNX_TM_BOOL) || need(c, 1, ONNX_TM_ALL) || same_type(c, 1, 3))
        return -1;
    if (broadcast(x->rank, x->dims, a->rank, a->dims, &r, d) || broadcast(r, d, b->rank, b->dims, &r2, d2))
        return fail(c, "shapes cannot be broadcast together");
    return out(c, a->elem, r2, d2);
}

static int shape_expand(struct shape_ctx *c)
{
    int64_t sh[ONNX_MAX_RANK], d[ONNX_MAX_RANK];
    int n, r;
    if (const_ints(c, 1, sh, ONNX_MAX_RANK, &n))
        return fail(c, "the shape must be a constant int64 vector of rank <= 8");
    if (broadcast(c->x->rank, c->x->dims, n, sh, &r, d))
        return fail(c, "shapes cannot be broadcast together");
    return out(c, c->x->elem, r, d);
}

/* ---- matrix products ---------------------------------------------------------------------- */

static int shape_gemm(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x, *b = in(c, 1), *bias = in(c, 2);
    const struct onnx_params *p = c->p;
    int64_t d[ONNX_MAX_RANK], d3[ONNX_MAX_RANK];
    int r;
    if (need_all(c, 3, TM_MATMUL))
        return -1;
    if (x->rank != 2 || b->rank != 2)
        return fail(c, "A and B must be matrices");
    int64_t M = p->trans_a ? x->dims[1] : x->dims[0], K = p->trans_a ? x->dims[0] : x->dims[1];
    int64_t K2 = p->trans_b ? b->dims[1] : b->dims[0], N = p->trans_b ? b->dims[0] : b->dims[1];
    if (K != K2)
        return fail(c, "inner dimensions differ (%lld, %lld)", (long long)K, (long long)K2);
    d[0] = M;
    d[1] = N;
    if (bias) {
        if (bias->rank > 2 || broadcast(2, d, bias->rank, bias->dims, &r, d3) || d3[0] != M || d3[1] != N)
            return fail(c, "C cannot be broadcast to %lldx%lld", (long long)M, (long long)N);
    }
    return out(c, x->elem, 2, d);
}

static int shape_matmul(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x, *b = in(c, 1);
    int64_t d[ONNX_MAX_RANK];
    int r;
    if (need_all(c, 2, TM_MATMUL))
        return -1;
    if (x->rank < 2 || b->rank < 2)
        return fail(c, "1-D operands are not supported");
    if (x->dims[x->rank - 1] != b->dims[b->rank - 2])
        return fail(c, "inner dimensions differ");
    if (broadcast(x->rank - 2, x->dims, b->rank - 2, b->dims, &r, d))
        return fail(c, "batch dimensions cannot be broadcast");
    d[r] = x->dims[x->rank - 2];
    d[r + 1] = b->dims[b->rank - 1];
    return out(c, x->elem, r + 2, d);
}

/* ---- normalisation and reduction ---------------------------------------------------------- */

static int shape_softmax(struct shape_ctx *c)
{
    if (need(c, 0, TM_SOFTMAX) || resolve_axis(c, c->x->rank))
        return -1;
    return out(c, c->x->elem, c->x->rank, c->x->dims);
}

static int shape_layernorm(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    if (need_all(c, 3, TM_F32) || resolve_axis(c, x->rank))
        return -1;
    int64_t inner = 1;
    for (int i = (int)c->p->axis; i < x->rank; i++)
        inner *= x->dims[i];
    for (int k = 1; k < 3; k++)
        if (in(c, k) && in(c, k)->numel != inner)
            return fail(c, "scale/bias must have the normalized shape");
    for (int k = 1; k < c->rn->n_out; k++)
        if (c->rn->out[k] >= 0)
            return fail(c, "the Mean and InvStdDev outputs are not supported");
    return out(c, x->elem, x->rank, x->dims);
}

/* ReduceMean, ReduceSum, ReduceMax, ReduceMin: the reduced axes become a mask in p->n_axes
 * (with has_axes = 1), which the kernels read; no axes with noop_with_empty_axes: a copy
 * (has_axes = 0). */
static int shape_reduce(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    struct onnx_params *p = c->p;
    int64_t axes[ONNX_MAX_RANK], d[ONNX_MAX_RANK], ax;
    int na, r = 0;
    if (need(c, 0, TM_REDUCE))
        return -1;
    if (node_axes(c, axes, &na))
        return fail(c, "axes must be a constant int64 vector");
    if (na == 0 && p->noop_with_empty_axes) {
        p->n_axes = 0;
        p->has_axes = 0;
        return out(c, x->elem, x->rank, x->dims);
    }
    unsigned mask = na == 0 ? (1u << x->rank) - 1 : 0;
    for (int i = 0; i < na; i++) {
        if (norm_axis(axes[i], x->rank, &ax))
            return fail(c, "axis out of range");
        mask |= 1u << ax;
    }
    for (int i = 0; i < x->rank; i++) {
        if (!(mask & (1u << i)))
            d[r++] = x->dims[i];
        else if (p->keepdims)
            d[r++] = 1;
        if ((mask & (1u << i)) && x->dims[i] == 0 && (c->rn->op == ONNX_OP_REDUCEMAX || c->rn->op == ONNX_OP_REDUCEMIN))
            return fail(c, "the maximum or minimum of no elements");
    }
    p->n_axes = (int)mask;
    p->has_axes = 1;
    return out(c, x->elem, r, d);
}

/* The index of the largest or smallest element along p->axis, as INT64. */
static int shape_argmax(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    int64_t d[ONNX_MAX_RANK];
    int r = 0;
    if (need(c, 0, TM_REDUCE) || resolve_axis(c, x->rank))
        return -1;
    if (x->dims[c->p->axis] == 0)
        return fail(c, "the axis has no elements");
    for (int i = 0; i < x->rank; i++)
        if (i != c->p->axis || c->p->keepdims)
            d[r++] = i == c->p->axis ? 1 : x->dims[i];
    return out(c, ONNX_ELEM_INT64, r, d);
}

/* ---- views and data movement ---------------------------------------------------------------- */

static int shape_flatten(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    int64_t d[2] = { 1, 1 };
    if (c->p->axis < -x->rank || c->p->axis > x->rank)
        return fail(c, "axis out of range");
    int64_t ax = c->p->axis < 0 ? c->p->axis + x->rank : c->p->axis;
    for (int i = 0; i < x->rank; i++)
        d[i < ax ? 0 : 1] *= x->dims[i];
    return out(c, x->elem, 2, d);
}

/* Reshape's target shape: 0 copies the input's dim (unless allowzero, kept in has_axes), one
 * -1 is inferred. */
static int shape_reshape(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    int64_t sh[ONNX_MAX_RANK], known = 1;
    int n, neg = -1;
    if (const_ints(c, 1, sh, ONNX_MAX_RANK, &n))
        return fail(c, "the shape must be a constant int64 vector of rank <= 8");
    for (int i = 0; i < n; i++) {
        if (sh[i] == 0 && !c->p->has_axes) {
            if (i >= x->rank)
                return fail(c, "a 0 in the shape has no input dimension");
            sh[i] = x->dims[i];
        }
        if (sh[i] == -1) {
            if (neg >= 0)
                return fail(c, "the shape has two -1");
            neg = i;
        } else if (sh[i] < 0) {
            return fail(c, "the shape has a negative dimension");
        } else {
            if (sh[i] && known > ONNX_MAX_ELEMS / sh[i])
                return fail(c, "the shape is too large");
            known *= sh[i];
        }
    }
    if (neg >= 0) {
        if (known == 0 || x->numel % known)
            return fail(c, "cannot infer -1 in the shape");
        sh[neg] = x->numel / known;
    } else if (known != x->numel) {
        return fail(c, "the shape has %lld elements, the input %lld", (long long)known, (long long)x->numel);
    }
    return out(c, x->elem, n, sh);
}

static int shape_transpose(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    struct onnx_params *p = c->p;
    int64_t d[ONNX_MAX_RANK];
    if (p->n_perm == 0) {   /* default: reverse the dims */
        p->n_perm = x->rank;
        for (int i = 0; i < x->rank; i++)
            p->perm[i] = x->rank - 1 - i;
    }
    if (p->n_perm != x->rank)
        return fail(c, "perm has %d entries for rank %d", p->n_perm, x->rank);
    for (int i = 0; i < x->rank; i++)
        d[i] = x->dims[p->perm[i]];
    return out(c, x->elem, x->rank, d);
}

static int shape_gather(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x, *idx = in(c, 1);
    int64_t d[ONNX_MAX_RANK];
    int r = 0;
    if (need(c, 1, TM_INDEX) || resolve_axis(c, x->rank))
        return -1;
    int ax = (int)c->p->axis;
    if (x->rank + idx->rank - 1 > ONNX_MAX_RANK)
        return fail(c, "the output rank is over %d", ONNX_MAX_RANK);
    for (int i = 0; i < ax; i++)
        d[r++] = x->dims[i];
    for (int i = 0; i < idx->rank; i++)
        d[r++] = idx->dims[i];
    for (int i = ax + 1; i < x->rank; i++)
        d[r++] = x->dims[i];
    return out(c, x->elem, r, d);
}

static int shape_shape(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    struct onnx_params *p = c->p;
    int64_t st = p->shape_start, en = p->has_shape_end ? p->shape_end : x->rank, d[1];
    if (st < 0) st += x->rank;
    if (en < 0) en += x->rank;
    if (st < 0) st = 0;
    if (en > x->rank) en = x->rank;
    if (st > x->rank) st = x->rank;
    d[0] = en > st ? en - st : 0;
    if (out(c, ONNX_ELEM_INT64, 1, d))
        return -1;
    p->shape_start = st;
    return 0;
}

/* Slice's constant inputs: starts, ends, and axes and steps (defaults: 0.., 1). */
static int slice_inputs(const struct shape_ctx *c, int64_t *st, int64_t *en, int64_t *axes, int64_t *steps, int *ns)
{
    int ne, na, nst;
    if (const_ints(c, 1, st, ONNX_MAX_RANK, ns) || const_ints(c, 2, en, ONNX_MAX_RANK, &ne) || *ns != ne)
        return fail(c, "starts/ends must be constant int64 vectors of one length");
    if (in(c, 3)) {
        if (const_ints(c, 3, axes, ONNX_MAX_RANK, &na) || na != *ns)
            return fail(c, "axes must be a constant int64 vector");
    } else {
        for (int i = 0; i < *ns; i++)
            axes[i] = i;
    }
    if (in(c, 4)) {
        if (const_ints(c, 4, steps, ONNX_MAX_RANK, &nst) || nst != *ns)
            return fail(c, "steps must be a constant int64 vector");
    } else {
        for (int i = 0; i < *ns; i++)
            steps[i] = 1;
    }
    return 0;
}

/* The first index *b and the length of a slice [b, e) by step of a dim (ONNX's clamping). */
static int64_t slice_len(int64_t dim, int64_t step, int64_t *b, int64_t e)
{
    if (*b < 0) *b += dim;
    if (e < 0 && e > INT64_MIN / 2) e += dim;
    if (step > 0) {
        *b = *b < 0 ? 0 : (*b > dim ? dim : *b);
        e = e < 0 ? 0 : (e > dim ? dim : e);
        return e > *b ? (e - *b + step - 1) / step : 0;
    }
    *b = *b < 0 ? -1 : (*b > dim - 1 ? dim - 1 : *b);
    e = e < -1 ? -1 : (e > dim - 1 ? dim - 1 : e);
    return *b > e ? (*b - e + (-step) - 1) / (-step) : 0;
}

/* Resolves p->sl_start and p->sl_step per input dim. */
static int shape_slice(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    struct onnx_params *p = c->p;
    int64_t st[ONNX_MAX_RANK], en[ONNX_MAX_RANK], axes[ONNX_MAX_RANK], steps[ONNX_MAX_RANK], d[ONNX_MAX_RANK], ax;
    int ns;
    unsigned seen = 0;
    if (slice_inputs(c, st, en, axes, steps, &ns))
        return -1;
    memcpy(d, x->dims, sizeof d);
    for (int i = 0; i < x->rank; i++) {
        p->sl_start[i] = 0;
        p->sl_step[i] = 1;
    }
    for (int i = 0; i < ns; i++) {
        if (norm_axis(axes[i], x->rank, &ax) || (seen & (1u << ax)))
            return fail(c, "axes out of range or repeated");
        seen |= 1u << ax;
        if (steps[i] == 0)
            return fail(c, "a step is 0");
        /* a step beyond the dim takes one element at most: clamped, no stride overflows */
        int64_t b = st[i], lim = x->dims[ax] > 1 ? x->dims[ax] : 1;
        int64_t step = steps[i] > lim ? lim : steps[i] < -lim ? -lim : steps[i];
        d[ax] = slice_len(x->dims[ax], step, &b, en[i]);
        p->sl_start[ax] = b;
        p->sl_step[ax] = step;
    }
    return out(c, x->elem, x->rank, d);
}

static int shape_squeeze(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    int64_t axes[ONNX_MAX_RANK], d[ONNX_MAX_RANK], ax;
    int na, r = 0;
    unsigned mask = 0;
    if (node_axes(c, axes, &na))
        return fail(c, "axes must be a constant int64 vector");
    for (int i = 0; i < na; i++) {
        if (norm_axis(axes[i], x->rank, &ax) || x->dims[ax] != 1)
            return fail(c, "cannot squeeze axis %lld", (long long)axes[i]);
        mask |= 1u << ax;
    }
    for (int i = 0; i < x->rank; i++)   /* no axes: every dim of 1 */
        if (!(na ? (mask & (1u << i)) : x->dims[i] == 1))
            d[r++] = x->dims[i];
    return out(c, x->elem, r, d);
}

static int shape_unsqueeze(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    int64_t axes[ONNX_MAX_RANK], d[ONNX_MAX_RANK], ax;
    int na, k = 0;
    unsigned mask = 0;
    if (node_axes(c, axes, &na))
        return fail(c, "axes must be a constant int64 vector");
    int ro = x->rank + na;
    if (ro > ONNX_MAX_RANK || na == 0)
        return fail(c, "invalid axes");
    for (int i = 0; i < na; i++) {
        if (norm_axis(axes[i], ro, &ax) || (mask & (1u << ax)))
            return fail(c, "axes out of range or repeated");
        mask |= 1u << ax;
    }
    for (int i = 0; i < ro; i++)
        d[i] = (mask & (1u << i)) ? 1 : x->dims[k++];
    return out(c, x->elem, ro, d);
}

static int shape_pad(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    struct onnx_params *p = c->p;
    int64_t pads[2 * ONNX_MAX_RANK], d[ONNX_MAX_RANK];
    int n;
    double cv = 0;
    if (need(c, 0, TM_PAD) || need(c, 2, ONNX_TM(x->elem)))
        return -1;
    if (in(c, 3))
        return fail(c, "the axes input is not supported");
    if (const_ints(c, 1, pads, 2 * ONNX_MAX_RANK, &n) || n != 2 * x->rank)
        return fail(c, "pads must be a constant int64 vector of 2*rank values");
    if (in(c, 2) && const_scalar(c, 2, &cv))
        return fail(c, "constant_value must be a constant scalar");
    p->pad_value = cv;
    for (int i = 0; i < x->rank; i++) {
        if (pads[i] < 0 || pads[i + x->rank] < 0 || pads[i] > ONNX_MAX_ELEMS || pads[i + x->rank] > ONNX_MAX_ELEMS)
            return fail(c, "negative pads (cropping) are not supported");
        p->pad_begin[i] = pads[i];
        d[i] = x->dims[i] + pads[i] + pads[i + x->rank];
    }
    return out(c, x->elem, x->rank, d);
}

/* ---- constants and shape arithmetic (folded) --------------------------------------------------- */

static int shape_concat(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    int64_t d[ONNX_MAX_RANK];
    if (resolve_axis(c, x->rank))
        return -1;
    int ax = (int)c->p->axis;
    memcpy(d, x->dims, sizeof d);
    d[ax] = 0;
    for (int k = 0; k < c->rn->n_in; k++) {
        const struct onnx_tensor *t = in(c, k);
        if (!t)
            return fail(c, "an input is empty");
        if (t->rank != x->rank || t->elem != x->elem)
            return fail(c, "inputs differ in rank or type");
        for (int i = 0; i < x->rank; i++)
            if (i != ax && t->dims[i] != x->dims[i])
                return fail(c, "inputs differ in dimension %d", i);
        d[ax] += t->dims[ax];
    }
    return out(c, x->elem, x->rank, d);
}

static int shape_constant(struct shape_ctx *c)
{
    return out(c, c->p->value.elem, c->p->value.rank, c->p->value.dims);
}

static int shape_constantofshape(struct shape_ctx *c)
{
    int64_t sh[ONNX_MAX_RANK];
    int n;
    if (const_ints(c, 0, sh, ONNX_MAX_RANK, &n))
        return fail(c, "the shape must be a constant int64 vector of rank <= 8");
    for (int i = 0; i < n; i++)
        if (sh[i] < 0)
            return fail(c, "negative dimension");
    return out(c, c->p->value.elem, n, sh);
}

/* Elements of an int64 Range: exact, in unsigned arithmetic (the span may exceed INT64_MAX). */
static int64_t range_len(int64_t a, int64_t b, int64_t step)
{
    uint64_t span, by;
    if (step > 0 && b > a) {
        span = (uint64_t)b - (uint64_t)a;
        by = (uint64_t)step;
    } else if (step < 0 && a > b) {
        span = (uint64_t)a - (uint64_t)b;
        by = 0 - (uint64_t)step;
    } else {
        return 0;
    }
    uint64_t n = span / by + (span % by != 0);
    return n > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)n;
}

static int shape_range(struct shape_ctx *c)
{
    const struct onnx_tensor *x = c->x;
    double a, b, step;
    int64_t len;
    if (need(c, 0, TM_RANGE) || same_type(c, 0, 3))
        return -1;
    if (const_scalar(c, 0, &a) || const_scalar(c, 1, &b) || const_scalar(c, 2, &step) || step == 0)
        return fail(c, "start, limit and delta must be constant scalars");
    if (x->elem == ONNX_ELEM_INT64) {
        int64_t iv[3];
        int n;
        for (int k = 0; k < 3; k++)
            if (const_ints(c, k, &iv[k], 1, &n))
                return fail(c, "start, limit and delta must be constant scalars");
        len = range_len(iv[0], iv[1], iv[2]);
    } else {
        double cnt = (b - a) / step;
        if (cnt > (double)ONNX_MAX_ELEMS)
            return fail(c, "the range is too large");
        len = cnt > 0 ? (int64_t)(cnt + 0.999999999) : 0;
    }
    return out(c, x->elem, 1, &len);
}

static const shape_rule rules[ONNX_OP_COUNT] = {
    [ONNX_OP_CONV] = shape_conv,
    [ONNX_OP_MAXPOOL] = shape_pool,
    [ONNX_OP_AVGPOOL] = shape_pool,
    [ONNX_OP_GLOBALAVGPOOL] = shape_global_pool,
    [ONNX_OP_BATCHNORM] = shape_batchnorm,
    [ONNX_OP_RELU] = shape_unary,
    [ONNX_OP_SIGMOID] = shape_unary,
    [ONNX_OP_SQRT] = shape_unary,
    [ONNX_OP_ERF] = shape_unary,
    [ONNX_OP_GELU] = shape_unary,
    [ONNX_OP_TANH] = shape_unary,
    [ONNX_OP_NEG] = shape_unary,
    [ONNX_OP_ABS] = shape_unary,
    [ONNX_OP_EXP] = shape_unary,
    [ONNX_OP_LOG] = shape_unary,
    [ONNX_OP_NOT] = shape_unary,
    [ONNX_OP_GREATER] = shape_binary,
    [ONNX_OP_LESS] = shape_binary,
    [ONNX_OP_GREATEREQ] = shape_binary,
    [ONNX_OP_LESSEQ] = shape_binary,
    [ONNX_OP_AND] = shape_binary,
    [ONNX_OP_OR] = shape_binary,
    [ONNX_OP_XOR] = shape_binary,
    [ONNX_OP_MOD] = shape_binary,
    [ONNX_OP_REDUCESUM] = shape_reduce,
    [ONNX_OP_REDUCEMAX] = shape_reduce,
    [ONNX_OP_REDUCEMIN] = shape_reduce,
    [ONNX_OP_ARGMAX] = shape_argmax,
    [ONNX_OP_ARGMIN] = shape_argmax,
    [ONNX_OP_IDENTITY] = shape_identity,
    [ONNX_OP_DROPOUT] = shape_dropout,
    [ONNX_OP_CAST] = shape_cast,
    [ONNX_OP_ADD] = shape_binary,
    [ONNX_OP_SUB] = shape_binary,
    [ONNX_OP_MUL] = shape_binary,
    [ONNX_OP_DIV] = shape_binary,
    [ONNX_OP_POW] = shape_binary,
    [ONNX_OP_EQUAL] = shape_binary,
    [ONNX_OP_WHERE] = shape_where,
    [ONNX_OP_EXPAND] = shape_expand,
    [ONNX_OP_CONCAT] = shape_concat,
    [ONNX_OP_GEMM] = shape_gemm,
    [ONNX_OP_MATMUL] = shape_matmul,
    [ONNX_OP_SOFTMAX] = shape_softmax,
    [ONNX_OP_LAYERNORM] = shape_layernorm,
    [ONNX_OP_REDUCEMEAN] = shape_reduce,
    [ONNX_OP_FLATTEN] = shape_flatten,
    [ONNX_OP_RESHAPE] = shape_reshape,
    [ONNX_OP_TRANSPOSE] = shape_transpose,
    [ONNX_OP_GATHER] = shape_gather,
    [ONNX_OP_SHAPE] = shape_shape,
    [ONNX_OP_SLICE] = shape_slice,
    [ONNX_OP_SQUEEZE] = shape_squeeze,
    [ONNX_OP_UNSQUEEZE] = shape_unsqueeze,
    [ONNX_OP_CONSTANT] = shape_constant,
    [ONNX_OP_CONSTANTOFSHAPE] = shape_constantofshape,
    [ONNX_OP_RANGE] = shape_range,
    [ONNX_OP_PAD] = shape_pad,
};

int onnx_infer_shape(const onnx_model *m, struct tinfo *v, struct rnode *rn, struct gj_error *err)
{
    struct shape_ctx c = { .m = m, .v = v, .rn = rn, .p = &rn->p, .y = &v[rn->out[0]].t, .err = err };
    c.x = rn->n_in > 0 && rn->in[0] >= 0 ? &v[rn->in[0]].t : NULL;
    if (rn->op < 0 || rn->op >= ONNX_OP_COUNT || !rules[rn->op])
        return fail(&c, "no shape inference");
    return rules[rn->op](&c);
}
