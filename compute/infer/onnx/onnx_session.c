/*
 * onnx_session.c — the backend-agnostic executor.
 *
 * Session creation, for one batch size:
 *   1. a topological schedule of the nodes (Kahn), refusing cycles and undefined values;
 *   2. shape inference in that order; every node whose inputs are all known at this point
 *      (initializers, Constant, Shape of a known shape, ...) is evaluated once on the host
 *      with the CPU kernels (constant folding), so shape arithmetic never runs per call;
 *   3. dead nodes are dropped, a BatchNormalization after a Conv is folded into the Conv's
 *      weights and bias, ReLU is fused into Conv/Gemm/Add/BatchNormalization,
 *      view ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout) alias their input;
 *   4. a liveness-based buffer plan: every intermediate gets an offset in one arena, and
 *      tensors whose lifetimes do not overlap share bytes (greedy, largest first).
 * Running is then a walk over prepared kernel calls through struct onnx_backend.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "infer/onnx/onnx_ir.h"

#define MAX_TENSOR_BYTES ((int64_t)1 << 32)
#define MAX_ELEMS ((int64_t)1 << 31)
#define ALIGN 64

enum { ST_NONE = 0, ST_CONST, ST_INPUT, ST_ARENA, ST_ALIAS };

struct tinfo {
    struct onnx_tensor t;     /* shape and element type; data: backend pointer once planned */
    int known;                /* shape inferred */
    int is_const;             /* value known at session creation (host in hdata) */
    void *hdata;              /* host value of a constant */
    int own_hdata;
    int storage;
    int alias_of;             /* ST_ALIAS: the value whose storage this one shares */
    size_t offset;            /* ST_ARENA */
    int def, last;            /* schedule steps */
    int n_consumers;
    void *dev;                /* ST_CONST / ST_INPUT: backend buffer owned by the session */
};

struct rnode {
    const struct onnx_node *n;
    int op;
    struct onnx_params p;
    int n_in, n_out;
    int *in, *out;            /* value indices (in: -1 for absent) */
    int alias;                /* view op: no kernel call */
    int dead;
    int fused_out[1];         /* out[] of a node with a fused ReLU or a folded BatchNormalization */
    int fused_in[3];          /* in[] of a Conv with a folded BatchNormalization */
    int out_fused, in_fused;  /* out / in point to fused_out / fused_in */
    const struct onnx_tensor **ain;
    struct onnx_tensor **aout;
    struct onnx_kargs a;
};

struct onnx_session {
    const onnx_model *m;
    const struct onnx_backend *be;
    struct onnx_backend_ctx *bctx;
    size_t n_values;
    struct tinfo *v;
    struct rnode *r;          /* runtime nodes in schedule order */
    size_t n_r;
    void *arena, *scratch;
    size_t arena_bytes, scratch_bytes, naive_bytes, const_bytes, n_folded, n_run;
    size_t alloc_bytes;       /* everything allocated through be->alloc */
    struct onnx_io_desc *in_desc, *out_desc;
    int profile;              /* GJ_ONNX_PROFILE set: time per op type, printed at free */
    double prof_s[ONNX_OP_COUNT];
    long prof_n[ONNX_OP_COUNT];
};

/* ---- helpers -------------------------------------------------------------------------- */

static int norm_axis(int64_t axis, int rank, int64_t *out)
{
    if (axis < -rank || axis >= rank)
        return -1;
    *out = axis < 0 ? axis + rank : axis;
    return 0;
}

#define NERR(...) gj_error_set(err, "model", __VA_ARGS__)
#define NODE_FMT "node '%s' (%s): "
#define NODE_ARGS rn->n->name, onnx_op_name(rn->op)

static int set_shape(struct onnx_tensor *t, int elem, int rank, const int64_t *dims)
{
    t->elem = elem;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->dims[i] = dims[i];
    int64_t n = onnx_shape_numel(rank, dims, MAX_ELEMS);
    if (n < 0)
        return -1;
    if (n * (int64_t)onnx_elem_size(elem) > MAX_TENSOR_BYTES)
        return -1;
    t->numel = n;
    return 0;
}

/* Numpy broadcasting of two shapes into out. */
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

/* Reads a constant int64 vector input (axes, shape, ...). */
static int const_ints(struct onnx_session *s, int vi, int64_t *out, int maxn, int *n)
{
    if (vi < 0 || !s->v[vi].is_const || s->v[vi].t.elem != ONNX_ELEM_INT64 || s->v[vi].t.rank > 1 ||
        s->v[vi].t.numel > maxn)
        return -1;
    memcpy(out, s->v[vi].hdata, (size_t)s->v[vi].t.numel * 8);
    *n = (int)s->v[vi].t.numel;
    return 0;
}

static int const_scalar_f(struct onnx_session *s, int vi, double *out)
{
    if (vi < 0 || !s->v[vi].is_const || s->v[vi].t.numel != 1)
        return -1;
    switch (s->v[vi].t.elem) {
    case ONNX_ELEM_FLOAT: *out = *(float *)s->v[vi].hdata; return 0;
    case ONNX_ELEM_INT64: *out = (double)*(int64_t *)s->v[vi].hdata; return 0;
    default: return -1;
    }
}

static int pool_out(int64_t in, int64_t k, int64_t s, int64_t d, int auto_pad, int ceil_mode,
                    int64_t *pb, int64_t *pe, int64_t *out)
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
        *out = o;
        return 0;
    }
    int64_t span = in + *pb + *pe - ek;
    if (span < 0)
        return -1;
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + *pb)
        o--;
    *out = o;
    return 0;
}

/* ---- shape inference --------------------------------------------------------------------- */

static const struct onnx_tensor *in_t(const struct onnx_session *s, const struct rnode *rn, int k)
{
    return rn->n_in > k && rn->in[k] >= 0 ? &s->v[rn->in[k]].t : NULL;
}

/* The axes of ReduceMean, Squeeze or Unsqueeze: the constant input 1 (newer opsets), else the
 * attribute, else none (*na = 0). -1 when input 1 is not a constant int64 vector. */
static int node_axes(struct onnx_session *s, const struct rnode *rn, int64_t *axes, int *na)
{
    *na = 0;
    if (in_t(s, rn, 1))
        return const_ints(s, rn->in[1], axes, ONNX_MAX_RANK, na);
    if (rn->p.has_axes) {
        *na = rn->p.n_axes;
        memcpy(axes, rn->p.axes, sizeof rn->p.axes);
    }
    return 0;
}

static int infer(struct onnx_session *s, struct rnode *rn, struct gj_error *err)
{
    struct onnx_params *p = &rn->p;
    const struct onnx_tensor *x = &s->v[rn->in[0] >= 0 ? rn->in[0] : 0].t;
    struct onnx_tensor *y = &s->v[rn->out[0]].t;
    int64_t d[ONNX_MAX_RANK];
    int r, n;
    int64_t ax;
#define IN(k) in_t(s, rn, k)
#define NEED_F32(t) do { if ((t)->elem != ONNX_ELEM_FLOAT) \
        return NERR(NODE_FMT "only float32 is supported here", NODE_ARGS); } while (0)
#define OUT(elem, rank, dims) do { if (set_shape(y, elem, rank, dims)) \
        return NERR(NODE_FMT "the output would be too large", NODE_ARGS); } while (0)

    switch (rn->op) {
    case ONNX_OP_CONV: {
        const struct onnx_tensor *w = IN(1), *b = IN(2);
        NEED_F32(x);
        NEED_F32(w);
        if (x->rank != 4 || w->rank != 4)
            return NERR(NODE_FMT "only 2-D convolution (4-D input and weight) is supported", NODE_ARGS);
        if (x->dims[1] != w->dims[1] * p->group || w->dims[0] % p->group)
            return NERR(NODE_FMT "input channels %lld do not match the weight %lldx%lld (group %lld)",
                        NODE_ARGS, (long long)x->dims[1], (long long)w->dims[0], (long long)w->dims[1],
                        (long long)p->group);
        if (p->n_kernel && (p->kernel[0] != w->dims[2] || p->kernel[1] != w->dims[3]))
            return NERR(NODE_FMT "kernel_shape does not match the weight", NODE_ARGS);
        p->kernel[0] = w->dims[2];
        p->kernel[1] = w->dims[3];
        if (b && (b->elem != ONNX_ELEM_FLOAT || b->numel != w->dims[0]))
            return NERR(NODE_FMT "the bias does not match the output channels", NODE_ARGS);
        d[0] = x->dims[0];
        d[1] = w->dims[0];
        for (int i = 0; i < 2; i++)
            if (pool_out(x->dims[2 + i], p->kernel[i], p->strides[i], p->dilations[i], p->auto_pad, 0,
                         &p->pads[i], &p->pads[2 + i], &d[2 + i]))
                return NERR(NODE_FMT "the kernel is larger than the padded input", NODE_ARGS);
        OUT(ONNX_ELEM_FLOAT, 4, d);
        return 0;
    }
    case ONNX_OP_MAXPOOL:
    case ONNX_OP_AVGPOOL:
        NEED_F32(x);
        if (x->rank != 4)
            return NERR(NODE_FMT "only 2-D pooling (4-D input) is supported", NODE_ARGS);
        d[0] = x->dims[0];
        d[1] = x->dims[1];
        for (int i = 0; i < 2; i++) {
            if (p->pads[i] >= p->kernel[i] || p->pads[2 + i] >= p->kernel[i])
                if (p->auto_pad == ONNX_PAD_NOTSET)
                    return NERR(NODE_FMT "padding must be smaller than the kernel", NODE_ARGS);
            if (pool_out(x->dims[2 + i], p->kernel[i], p->strides[i], p->dilations[i], p->auto_pad,
                         p->ceil_mode, &p->pads[i], &p->pads[2 + i], &d[2 + i]))
                return NERR(NODE_FMT "the kernel is larger than the padded input", NODE_ARGS);
        }
        OUT(ONNX_ELEM_FLOAT, 4, d);
        return 0;
    case ONNX_OP_GLOBALAVGPOOL:
        NEED_F32(x);
        if (x->rank < 3)
            return NERR(NODE_FMT "the input needs rank 3 or more", NODE_ARGS);
        memcpy(d, x->dims, sizeof d);
        for (int i = 2; i < x->rank; i++)
            d[i] = 1;
        OUT(ONNX_ELEM_FLOAT, x->rank, d);
        return 0;
    case ONNX_OP_BATCHNORM:
        NEED_F32(x);
        if (x->rank < 2)
            return NERR(NODE_FMT "the input needs rank 2 or more", NODE_ARGS);
        for (int k = 1; k < 5; k++)
            if (!IN(k) || IN(k)->elem != ONNX_ELEM_FLOAT || IN(k)->numel != x->dims[1])
                return NERR(NODE_FMT "parameter %d does not have %lld channels", NODE_ARGS, k,
                            (long long)x->dims[1]);
        OUT(ONNX_ELEM_FLOAT, x->rank, x->dims);
        return 0;
    case ONNX_OP_RELU: case ONNX_OP_SIGMOID: case ONNX_OP_SQRT: case ONNX_OP_ERF: case ONNX_OP_GELU:
    case ONNX_OP_TANH:
        NEED_F32(x);
        OUT(x->elem, x->rank, x->dims);
        return 0;
    case ONNX_OP_NEG:
        if (x->elem == ONNX_ELEM_BOOL)
            return NERR(NODE_FMT "bool is not supported", NODE_ARGS);
        OUT(x->elem, x->rank, x->dims);
        return 0;
    case ONNX_OP_IDENTITY:
        OUT(x->elem, x->rank, x->dims);
        return 0;
    case ONNX_OP_DROPOUT:
        if (IN(2)) {
            if (!s->v[rn->in[2]].is_const || IN(2)->numel != 1 || *(uint8_t *)s->v[rn->in[2]].hdata)
                return NERR(NODE_FMT "training_mode must be a constant false", NODE_ARGS);
        }
        if (rn->n_out > 1 && rn->out[1] >= 0)
            return NERR(NODE_FMT "the mask output is not supported", NODE_ARGS);
        OUT(x->elem, x->rank, x->dims);
        return 0;
    case ONNX_OP_CAST:
        OUT(p->to, x->rank, x->dims);
        return 0;
    case ONNX_OP_ADD: case ONNX_OP_SUB: case ONNX_OP_MUL: case ONNX_OP_DIV: case ONNX_OP_POW:
    case ONNX_OP_EQUAL: {
        const struct onnx_tensor *b = IN(1);
        if (x->elem != b->elem && rn->op != ONNX_OP_POW)
            return NERR(NODE_FMT "the inputs have different element types", NODE_ARGS);
        if (x->elem == ONNX_ELEM_BOOL && rn->op != ONNX_OP_EQUAL)
            return NERR(NODE_FMT "bool inputs are not supported", NODE_ARGS);
        if (rn->op == ONNX_OP_POW && (x->elem != ONNX_ELEM_FLOAT || b->elem == ONNX_ELEM_BOOL))
            return NERR(NODE_FMT "only a float32 base is supported", NODE_ARGS);
        if (broadcast(x->rank, x->dims, b->rank, b->dims, &r, d))
            return NERR(NODE_FMT "shapes cannot be broadcast together", NODE_ARGS);
        OUT(rn->op == ONNX_OP_EQUAL ? ONNX_ELEM_BOOL : x->elem, r, d);
        return 0;
    }
    case ONNX_OP_WHERE: {
        const struct onnx_tensor *a = IN(1), *b = IN(2);
        int64_t d2[ONNX_MAX_RANK];
        int r2;
        if (x->elem != ONNX_ELEM_BOOL || a->elem != b->elem)
            return NERR(NODE_FMT "needs a bool condition and two inputs of one type", NODE_ARGS);
        if (broadcast(x->rank, x->dims, a->rank, a->dims, &r, d) ||
            broadcast(r, d, b->rank, b->dims, &r2, d2))
            return NERR(NODE_FMT "shapes cannot be broadcast together", NODE_ARGS);
        OUT(a->elem, r2, d2);
        return 0;
    }
    case ONNX_OP_EXPAND: {
        int64_t sh[ONNX_MAX_RANK];
        if (const_ints(s, rn->in[1], sh, ONNX_MAX_RANK, &n))
            return NERR(NODE_FMT "the shape must be a constant int64 vector of rank <= 8", NODE_ARGS);
        if (broadcast(x->rank, x->dims, n, sh, &r, d))
            return NERR(NODE_FMT "shapes cannot be broadcast together", NODE_ARGS);
        OUT(x->elem, r, d);
        return 0;
    }
    case ONNX_OP_CONCAT: {
        if (norm_axis(p->axis, x->rank, &ax))
            return NERR(NODE_FMT "axis out of range", NODE_ARGS);
        p->axis = ax;
        memcpy(d, x->dims, sizeof d);
        d[ax] = 0;
        for (int k = 0; k < rn->n_in; k++) {
            const struct onnx_tensor *t = IN(k);
            if (!t)
                return NERR(NODE_FMT "an input is empty", NODE_ARGS);
            if (t->rank != x->rank || t->elem != x->elem)
                return NERR(NODE_FMT "inputs differ in rank or type", NODE_ARGS);
            for (int i = 0; i < x->rank; i++)
                if (i != ax && t->dims[i] != x->dims[i])
                    return NERR(NODE_FMT "inputs differ in dimension %d", NODE_ARGS, i);
            d[ax] += t->dims[ax];
        }
        OUT(x->elem, x->rank, d);
        return 0;
    }
    case ONNX_OP_GEMM: {
        const struct onnx_tensor *b = IN(1), *c = IN(2);
        NEED_F32(x);
        NEED_F32(b);
        if (x->rank != 2 || b->rank != 2)
            return NERR(NODE_FMT "A and B must be matrices", NODE_ARGS);
        int64_t M = p->trans_a ? x->dims[1] : x->dims[0], K = p->trans_a ? x->dims[0] : x->dims[1];
        int64_t K2 = p->trans_b ? b->dims[1] : b->dims[0], N = p->trans_b ? b->dims[0] : b->dims[1];
        if (K != K2)
            return NERR(NODE_FMT "inner dimensions differ (%lld, %lld)", NODE_ARGS, (long long)K, (long long)K2);
        d[0] = M;
        d[1] = N;
        if (c) {
            NEED_F32(c);
            int64_t d3[ONNX_MAX_RANK];
            if (c->rank > 2 || broadcast(2, d, c->rank, c->dims, &r, d3) || d3[0] != M || d3[1] != N)
                return NERR(NODE_FMT "C cannot be broadcast to %lldx%lld", NODE_ARGS, (long long)M, (long long)N);
        }
        OUT(ONNX_ELEM_FLOAT, 2, d);
        return 0;
    }
    case ONNX_OP_MATMUL: {
        const struct onnx_tensor *b = IN(1);
        NEED_F32(x);
        NEED_F32(b);
        if (x->rank < 2 || b->rank < 2)
            return NERR(NODE_FMT "1-D operands are not supported", NODE_ARGS);
        if (x->dims[x->rank - 1] != b->dims[b->rank - 2])
            return NERR(NODE_FMT "inner dimensions differ", NODE_ARGS);
        if (broadcast(x->rank - 2, x->dims, b->rank - 2, b->dims, &r, d))
            return NERR(NODE_FMT "batch dimensions cannot be broadcast", NODE_ARGS);
        d[r] = x->dims[x->rank - 2];
        d[r + 1] = b->dims[b->rank - 1];
        OUT(ONNX_ELEM_FLOAT, r + 2, d);
        return 0;
    }
    case ONNX_OP_SOFTMAX:
        NEED_F32(x);
        if (norm_axis(p->axis, x->rank, &ax))
            return NERR(NODE_FMT "axis out of range", NODE_ARGS);
        p->axis = ax;
        OUT(ONNX_ELEM_FLOAT, x->rank, x->dims);
        return 0;
    case ONNX_OP_LAYERNORM: {
        NEED_F32(x);
        if (norm_axis(p->axis, x->rank, &ax))
            return NERR(NODE_FMT "axis out of range", NODE_ARGS);
        p->axis = ax;
        int64_t inner = 1;
        for (int i = (int)ax; i < x->rank; i++)
            inner *= x->dims[i];
        for (int k = 1; k < 3; k++)
            if (IN(k) && (IN(k)->elem != ONNX_ELEM_FLOAT || IN(k)->numel != inner))
                return NERR(NODE_FMT "scale/bias must have the normalized shape", NODE_ARGS);
        if (rn->n_out > 1)
            for (int k = 1; k < rn->n_out; k++)
                if (rn->out[k] >= 0)
                    return NERR(NODE_FMT "the Mean and InvStdDev outputs are not supported", NODE_ARGS);
        OUT(ONNX_ELEM_FLOAT, x->rank, x->dims);
        return 0;
    }
    case ONNX_OP_REDUCEMEAN: {
        NEED_F32(x);
        int64_t axes[ONNX_MAX_RANK];
        int na;
        if (node_axes(s, rn, axes, &na))
            return NERR(NODE_FMT "axes must be a constant int64 vector", NODE_ARGS);
        if (na == 0 && p->noop_with_empty_axes) {
            OUT(ONNX_ELEM_FLOAT, x->rank, x->dims);
            p->n_axes = 0;
            p->has_axes = 0;
            return 0;
        }
        unsigned mask = 0;
        if (na == 0)
            mask = (1u << x->rank) - 1;
        for (int i = 0; i < na; i++) {
            if (norm_axis(axes[i], x->rank, &ax))
                return NERR(NODE_FMT "axis out of range", NODE_ARGS);
            mask |= 1u << ax;
        }
        r = 0;
        for (int i = 0; i < x->rank; i++) {
            if (mask & (1u << i)) {
                if (p->keepdims)
                    d[r++] = 1;
            } else {
                d[r++] = x->dims[i];
            }
        }
        p->n_axes = (int)mask;   /* kernels read the mask */
        p->has_axes = 1;
        OUT(ONNX_ELEM_FLOAT, r, d);
        return 0;
    }
    case ONNX_OP_FLATTEN: {
        if (p->axis < -x->rank || p->axis > x->rank)
            return NERR(NODE_FMT "axis out of range", NODE_ARGS);
        ax = p->axis < 0 ? p->axis + x->rank : p->axis;
        d[0] = d[1] = 1;
        for (int i = 0; i < x->rank; i++)
            d[i < ax ? 0 : 1] *= x->dims[i];
        OUT(x->elem, 2, d);
        return 0;
    }
    case ONNX_OP_RESHAPE: {
        int64_t sh[ONNX_MAX_RANK];
        if (const_ints(s, rn->in[1], sh, ONNX_MAX_RANK, &n))
            return NERR(NODE_FMT "the shape must be a constant int64 vector of rank <= 8", NODE_ARGS);
        int neg = -1;
        int64_t known = 1;
        for (int i = 0; i < n; i++) {
            if (sh[i] == 0 && !p->has_axes) {
                if (i >= x->rank)
                    return NERR(NODE_FMT "a 0 in the shape has no input dimension", NODE_ARGS);
                sh[i] = x->dims[i];
            }
            if (sh[i] == -1) {
                if (neg >= 0)
                    return NERR(NODE_FMT "the shape has two -1", NODE_ARGS);
                neg = i;
            } else if (sh[i] < 0) {
                return NERR(NODE_FMT "the shape has a negative dimension", NODE_ARGS);
            } else {
                if (sh[i] && known > MAX_ELEMS / sh[i])
                    return NERR(NODE_FMT "the shape is too large", NODE_ARGS);
                known *= sh[i];
            }
        }
        if (neg >= 0) {
            if (known == 0 || x->numel % known)
                return NERR(NODE_FMT "cannot infer -1 in the shape", NODE_ARGS);
            sh[neg] = x->numel / known;
        } else if (known != x->numel) {
            return NERR(NODE_FMT "the shape has %lld elements, the input %lld", NODE_ARGS,
                        (long long)known, (long long)x->numel);
        }
        OUT(x->elem, n, sh);
        return 0;
    }
    case ONNX_OP_TRANSPOSE:
        if (p->n_perm == 0) {
            p->n_perm = x->rank;
            for (int i = 0; i < x->rank; i++)
                p->perm[i] = x->rank - 1 - i;
        }
        if (p->n_perm != x->rank)
            return NERR(NODE_FMT "perm has %d entries for rank %d", NODE_ARGS, p->n_perm, x->rank);
        for (int i = 0; i < x->rank; i++)
            d[i] = x->dims[p->perm[i]];
        OUT(x->elem, x->rank, d);
        return 0;
    case ONNX_OP_GATHER: {
        const struct onnx_tensor *idx = IN(1);
        if (idx->elem != ONNX_ELEM_INT64)
            return NERR(NODE_FMT "indices must be int64 or int32", NODE_ARGS);
        if (norm_axis(p->axis, x->rank, &ax))
            return NERR(NODE_FMT "axis out of range", NODE_ARGS);
        p->axis = ax;
        if (x->rank + idx->rank - 1 > ONNX_MAX_RANK)
            return NERR(NODE_FMT "the output rank is over %d", NODE_ARGS, ONNX_MAX_RANK);
        r = 0;
        for (int i = 0; i < ax; i++)
            d[r++] = x->dims[i];
        for (int i = 0; i < idx->rank; i++)
            d[r++] = idx->dims[i];
        for (int i = (int)ax + 1; i < x->rank; i++)
            d[r++] = x->dims[i];
        OUT(x->elem, r, d);
        return 0;
    }
    case ONNX_OP_SHAPE: {
        int64_t st = p->shape_start, en = p->has_shape_end ? p->shape_end : x->rank;
        if (st < 0) st += x->rank;
        if (en < 0) en += x->rank;
        if (st < 0) st = 0;
        if (en > x->rank) en = x->rank;
        if (st > x->rank) st = x->rank;
        d[0] = en > st ? en - st : 0;
        OUT(ONNX_ELEM_INT64, 1, d);
        p->shape_start = st;
        return 0;
    }
    case ONNX_OP_SLICE: {
        int64_t st[ONNX_MAX_RANK], en[ONNX_MAX_RANK], axes[ONNX_MAX_RANK], steps[ONNX_MAX_RANK];
        int ns, ne, na, nst;
        if (const_ints(s, rn->in[1], st, ONNX_MAX_RANK, &ns) ||
            const_ints(s, rn->in[2], en, ONNX_MAX_RANK, &ne) || ns != ne)
            return NERR(NODE_FMT "starts/ends must be constant int64 vectors of one length", NODE_ARGS);
        if (IN(3)) {
            if (const_ints(s, rn->in[3], axes, ONNX_MAX_RANK, &na) || na != ns)
                return NERR(NODE_FMT "axes must be a constant int64 vector", NODE_ARGS);
        } else {
            for (int i = 0; i < ns; i++)
                axes[i] = i;
        }
        if (IN(4)) {
            if (const_ints(s, rn->in[4], steps, ONNX_MAX_RANK, &nst) || nst != ns)
                return NERR(NODE_FMT "steps must be a constant int64 vector", NODE_ARGS);
        } else {
            for (int i = 0; i < ns; i++)
                steps[i] = 1;
        }
        memcpy(d, x->dims, sizeof d);
        for (int i = 0; i < x->rank; i++) {
            p->sl_start[i] = 0;
            p->sl_step[i] = 1;
        }
        unsigned seen = 0;
        for (int i = 0; i < ns; i++) {
            if (norm_axis(axes[i], x->rank, &ax) || (seen & (1u << ax)))
                return NERR(NODE_FMT "axes out of range or repeated", NODE_ARGS);
            seen |= 1u << ax;
            int64_t dim = x->dims[ax], step = steps[i], b = st[i], e = en[i];
            if (step == 0)
                return NERR(NODE_FMT "a step is 0", NODE_ARGS);
            if (b < 0) b += dim;
            if (e < 0 && e > INT64_MIN / 2) e += dim;
            int64_t len;
            if (step > 0) {
                b = b < 0 ? 0 : (b > dim ? dim : b);
                e = e < 0 ? 0 : (e > dim ? dim : e);
                len = e > b ? (e - b + step - 1) / step : 0;
            } else {
                b = b < 0 ? -1 : (b > dim - 1 ? dim - 1 : b);
                e = e < -1 ? -1 : (e > dim - 1 ? dim - 1 : e);
                len = b > e ? (b - e + (-step) - 1) / (-step) : 0;
            }
            p->sl_start[ax] = b;
            p->sl_step[ax] = step;
            d[ax] = len;
        }
        OUT(x->elem, x->rank, d);
        return 0;
    }
    case ONNX_OP_SQUEEZE:
    case ONNX_OP_UNSQUEEZE: {
        int64_t axes[ONNX_MAX_RANK];
        int na;
        if (node_axes(s, rn, axes, &na))
            return NERR(NODE_FMT "axes must be a constant int64 vector", NODE_ARGS);
        unsigned mask = 0;
        if (rn->op == ONNX_OP_SQUEEZE) {
            for (int i = 0; i < na; i++) {
                if (norm_axis(axes[i], x->rank, &ax) || x->dims[ax] != 1)
                    return NERR(NODE_FMT "cannot squeeze axis %lld", NODE_ARGS, (long long)axes[i]);
                mask |= 1u << ax;
            }
            r = 0;
            for (int i = 0; i < x->rank; i++)
                if (!(na ? (mask & (1u << i)) : x->dims[i] == 1))
                    d[r++] = x->dims[i];
        } else {
            int ro = x->rank + na;
            if (ro > ONNX_MAX_RANK || na == 0)
                return NERR(NODE_FMT "invalid axes", NODE_ARGS);
            for (int i = 0; i < na; i++) {
                if (norm_axis(axes[i], ro, &ax) || (mask & (1u << ax)))
                    return NERR(NODE_FMT "axes out of range or repeated", NODE_ARGS);
                mask |= 1u << ax;
            }
            int k = 0;
            for (int i = 0; i < ro; i++)
                d[i] = (mask & (1u << i)) ? 1 : x->dims[k++];
            r = ro;
        }
        OUT(x->elem, r, d);
        return 0;
    }
    case ONNX_OP_CONSTANT:
        OUT(p->value.elem, p->value.rank, p->value.dims);
        return 0;
    case ONNX_OP_CONSTANTOFSHAPE: {
        int64_t sh[ONNX_MAX_RANK];
        if (const_ints(s, rn->in[0], sh, ONNX_MAX_RANK, &n))
            return NERR(NODE_FMT "the shape must be a constant int64 vector of rank <= 8", NODE_ARGS);
        for (int i = 0; i < n; i++)
            if (sh[i] < 0)
                return NERR(NODE_FMT "negative dimension", NODE_ARGS);
        if (set_shape(y, p->value.elem, n, sh))
            return NERR(NODE_FMT "the output would be too large", NODE_ARGS);
        return 0;
    }
    case ONNX_OP_RANGE: {
        double a, b, c;
        if (const_scalar_f(s, rn->in[0], &a) || const_scalar_f(s, rn->in[1], &b) ||
            const_scalar_f(s, rn->in[2], &c) || c == 0)
            return NERR(NODE_FMT "start, limit and delta must be constant scalars", NODE_ARGS);
        if (IN(1)->elem != x->elem || IN(2)->elem != x->elem)
            return NERR(NODE_FMT "inputs differ in type", NODE_ARGS);
        double cnt = (b - a) / c;
        int64_t len = cnt > 0 ? (int64_t)(cnt + 0.999999999) : 0;
        if (x->elem == ONNX_ELEM_INT64) {
            int64_t ia = (int64_t)a, ib = (int64_t)b, ic = (int64_t)c;
            len = ic > 0 ? (ib > ia ? (ib - ia + ic - 1) / ic : 0) : (ia > ib ? (ia - ib - ic - 1) / -ic : 0);
        }
        d[0] = len;
        OUT(x->elem, 1, d);
        return 0;
    }
    case ONNX_OP_PAD: {
        int64_t pads[2 * ONNX_MAX_RANK];
        if (rn->n_in > 3 && rn->in[3] >= 0)
            return NERR(NODE_FMT "the axes input is not supported", NODE_ARGS);
        if (const_ints(s, rn->in[1], pads, 2 * ONNX_MAX_RANK, &n) || n != 2 * x->rank)
            return NERR(NODE_FMT "pads must be a constant int64 vector of 2*rank values", NODE_ARGS);
        double cv = 0;
        if (IN(2) && const_scalar_f(s, rn->in[2], &cv))
            return NERR(NODE_FMT "constant_value must be a constant scalar", NODE_ARGS);
        p->pad_value = (float)cv;
        for (int i = 0; i < x->rank; i++) {
            if (pads[i] < 0 || pads[i + x->rank] < 0 || pads[i] > MAX_ELEMS || pads[i + x->rank] > MAX_ELEMS)
                return NERR(NODE_FMT "negative pads (cropping) are not supported", NODE_ARGS);
            p->pad_begin[i] = pads[i];
            d[i] = x->dims[i] + pads[i] + pads[i + x->rank];
        }
        if (x->elem == ONNX_ELEM_BOOL)
            return NERR(NODE_FMT "bool is not supported", NODE_ARGS);
        OUT(x->elem, x->rank, d);
        return 0;
    }
    default:
        return NERR(NODE_FMT "no shape inference", NODE_ARGS);
    }
#undef IN
#undef NEED_F32
#undef OUT
}

/* ---- session creation --------------------------------------------------------------------- */

/* The backend of that name when it can run here, else NULL with the reason in msg. */
static const struct onnx_backend *find_backend(const char *name, char *msg, size_t msglen)
{
    if (!name || strcmp(name, "cpu") == 0)
        return &onnx_backend_cpu;
    if (strcmp(name, "cuda") == 0) {
#if ONNX_WITH_CUDA
        return onnx_cuda_available(msg, msglen) ? &onnx_backend_cuda : NULL;
#else
        snprintf(msg, msglen, "this build has no CUDA backend (built without CUDA or cuDNN)");
        return NULL;
#endif
    }
    snprintf(msg, msglen, "unknown backend '%s' (cpu or cuda)", name);
    return NULL;
}

int onnx_backend_available(const char *backend, char *msg, size_t msglen)
{
    char tmp[256];
    if (!msg || msglen == 0) {
        msg = tmp;
        msglen = sizeof tmp;
    }
    msg[0] = 0;
    return find_backend(backend, msg, msglen) != NULL;
}

/* ": <the backend's last error>" or "" */
static const char *be_detail(const struct onnx_session *s, char *buf, size_t len)
{
    const char *e = s->be->last_error ? s->be->last_error(s->bctx) : NULL;
    if (!e || !e[0])
        return "";
    snprintf(buf, len, ": %s", e);
    return buf;
}

static int is_view(int op)
{
    return op == ONNX_OP_RESHAPE || op == ONNX_OP_FLATTEN || op == ONNX_OP_SQUEEZE ||
           op == ONNX_OP_UNSQUEEZE || op == ONNX_OP_IDENTITY || op == ONNX_OP_DROPOUT;
}

static int root_of(const struct onnx_session *s, int v)
{
    while (s->v[v].storage == ST_ALIAS)
        v = s->v[v].alias_of;
    return v;
}

/* Evaluates one node on the host (constant folding). */
static int fold(struct onnx_session *s, struct rnode *rn, struct gj_error *err)
{
    const struct onnx_tensor *ins[4096 + 1];
    struct onnx_tensor *outs[4];
    struct onnx_tensor tin[64];
    if (rn->n_in > 4096)
        return -1;
    struct onnx_tensor *tmp = rn->n_in > 64 ? malloc(rn->n_in * sizeof *tmp) : tin;
    if (!tmp)
        return NERR("out of memory");
    for (int k = 0; k < rn->n_in; k++) {
        if (rn->in[k] < 0) {
            ins[k] = NULL;
            continue;
        }
        tmp[k] = s->v[rn->in[k]].t;
        tmp[k].data = s->v[rn->in[k]].hdata;
        ins[k] = &tmp[k];
    }
    struct onnx_tensor to[4];
    for (int k = 0; k < rn->n_out; k++) {
        outs[k] = NULL;
        if (rn->out[k] < 0)
            continue;
        struct tinfo *ti = &s->v[rn->out[k]];
        ti->hdata = malloc(onnx_tensor_bytes(&ti->t) + 8);
        if (!ti->hdata) {
            if (tmp != tin)
                free(tmp);
            return NERR("out of memory while folding constants");
        }
        ti->own_hdata = 1;
        to[k] = ti->t;
        to[k].data = ti->hdata;
        outs[k] = &to[k];
    }
    struct onnx_kargs a = { rn->n, &rn->p, rn->n_in, rn->n_out, ins, outs, NULL };
    struct onnx_backend_ctx *h = onnx_cpu_host_ctx();
    size_t sb = onnx_backend_cpu.scratch_bytes ? onnx_backend_cpu.scratch_bytes(h, &a) : 0;
    void *scratch = sb ? malloc(sb) : NULL;
    int rc = -1;
    if (!sb || scratch) {
        a.scratch = scratch;
        rc = onnx_backend_cpu.kernels[rn->op](h, &a);
    }
    free(scratch);
    if (tmp != tin)
        free(tmp);
    if (rc)
        return NERR(NODE_FMT "evaluation failed (invalid constant input, e.g. an index out of range)",
                    NODE_ARGS);
    for (int k = 0; k < rn->n_out; k++)
        if (rn->out[k] >= 0)
            s->v[rn->out[k]].is_const = 1;
    return 0;
}

static void plan_free(struct onnx_session *s);

void onnx_session_free(onnx_session *s)
{
    if (!s)
        return;
    if (s->profile) {
        double tot = 0;
        for (int i = 0; i < ONNX_OP_COUNT; i++)
            tot += s->prof_s[i];
        for (int i = 0; i < ONNX_OP_COUNT; i++)
            if (s->prof_n[i])
                fprintf(stderr, "onnx profile: %-20s %8ld calls %10.2f ms %5.1f%%\n", onnx_op_name(i),
                        s->prof_n[i], s->prof_s[i] * 1e3, tot > 0 ? 100 * s->prof_s[i] / tot : 0.0);
    }
    plan_free(s);
    for (size_t i = 0; i < s->n_values; i++)
        if (s->v && s->v[i].own_hdata)
            free(s->v[i].hdata);
    for (size_t i = 0; i < s->n_r; i++) {
        free(s->r[i].ain);
        free(s->r[i].aout);
    }
    free(s->r);
    free(s->v);
    free(s->in_desc);
    free(s->out_desc);
    if (s->bctx)
        s->be->fini(s->bctx);
    free(s);
}

static void plan_free(struct onnx_session *s)
{
    if (!s->bctx)
        return;
    for (size_t i = 0; i < s->n_values; i++) {
        if (s->v[i].dev) {
            s->be->free(s->bctx, s->v[i].dev);
            s->v[i].dev = NULL;
        }
    }
    if (s->arena)
        s->be->free(s->bctx, s->arena);
    if (s->scratch)
        s->be->free(s->bctx, s->scratch);
    s->arena = s->scratch = NULL;
}

/* Topological order of the model's nodes (Kahn's algorithm). */
static int schedule(const onnx_model *m, int *order, struct gj_error *err)
{
    int *producer = malloc((m->n_values + 1) * sizeof(int));
    int *indeg = calloc(m->n_nodes + 1, sizeof(int));
    int *cons_start = calloc(m->n_values + 2, sizeof(int));
    int *cons = NULL;
    int rc = -1;
    if (!producer || !indeg || !cons_start)
        goto out;
    for (size_t i = 0; i < m->n_values; i++)
        producer[i] = -1;
    for (size_t i = 0; i < m->n_nodes; i++)
        for (int k = 0; k < m->nodes[i].n_out; k++) {
            int v = m->nodes[i].out[k];
            if (v < 0)
                continue;
            if (producer[v] >= 0 || m->values[v].init || m->values[v].is_input) {
                NERR("value '%s' is produced twice (or overwrites an input or initializer)", m->values[v].name);
                goto out;
            }
            producer[v] = (int)i;
        }
    size_t total = 0;
    for (size_t i = 0; i < m->n_nodes; i++)
        for (int k = 0; k < m->nodes[i].n_in; k++) {
            int v = m->nodes[i].in[k];
            if (v < 0)
                continue;
            if (producer[v] < 0 && !m->values[v].init && !m->values[v].is_input) {
                NERR("node '%s' (%s) reads '%s', which nothing defines", m->nodes[i].name,
                     onnx_op_name(m->nodes[i].op), m->values[v].name);
                goto out;
            }
            if (producer[v] >= 0) {
                indeg[i]++;
                cons_start[v + 1]++;
                total++;
            }
        }
    for (size_t v = 0; v < m->n_values; v++)
        cons_start[v + 1] += cons_start[v];
    cons = malloc((total + 1) * sizeof(int));
    int *fill = calloc(m->n_values + 1, sizeof(int));
    if (!cons || !fill) {
        free(fill);
        goto out;
    }
    for (size_t i = 0; i < m->n_nodes; i++)
        for (int k = 0; k < m->nodes[i].n_in; k++) {
            int v = m->nodes[i].in[k];
            if (v >= 0 && producer[v] >= 0)
                cons[cons_start[v] + fill[v]++] = (int)i;
        }
    free(fill);
    size_t head = 0, tail = 0;
    for (size_t i = 0; i < m->n_nodes; i++)
        if (indeg[i] == 0)
            order[tail++] = (int)i;
    while (head < tail) {
        int i = order[head++];
        for (int k = 0; k < m->nodes[i].n_out; k++) {
            int v = m->nodes[i].out[k];
            if (v < 0)
                continue;
            for (int c = cons_start[v]; c < cons_start[v + 1]; c++)
                if (--indeg[cons[c]] == 0)
                    order[tail++] = cons[c];
        }
    }
    if (tail != m->n_nodes) {
        NERR("the graph has a cycle");
        goto out;
    }
    rc = 0;
out:
    if (rc && (!err || !err->message[0]))
        NERR("out of memory");
    free(producer);
    free(indeg);
    free(cons_start);
    free(cons);
    return rc;
}

struct placed {
    size_t off, size;
    int def, last;
};

static int cmp_size_desc(const void *a, const void *b, void *ctx)
{
    const struct tinfo *v = ctx;
    int ia = *(const int *)a, ib = *(const int *)b;
    size_t sa = onnx_tensor_bytes(&v[ia].t), sb = onnx_tensor_bytes(&v[ib].t);
    if (sa != sb)
        return sa < sb ? 1 : -1;
    return v[ia].def - v[ib].def;
}

static int cmp_off(const void *a, const void *b)
{
    const struct placed *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Greedy offset assignment: largest tensors first, each at the lowest offset where it
 * overlaps no placed tensor that is alive at the same time. */
static int plan_arena(struct onnx_session *s, struct gj_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_values; i++)
        if (s->v[i].storage == ST_ARENA)
            n++;
    int *ids = malloc((n + 1) * sizeof(int));
    struct placed *pl = malloc((n + 1) * sizeof *pl);
    struct placed *conf = malloc((n + 1) * sizeof *conf);
    if (!ids || !pl || !conf) {
        free(ids);
        free(pl);
        free(conf);
        return NERR("out of memory");
    }
    n = 0;
    for (size_t i = 0; i < s->n_values; i++)
        if (s->v[i].storage == ST_ARENA)
            ids[n++] = (int)i;
    qsort_r(ids, n, sizeof(int), cmp_size_desc, s->v);
    size_t np = 0, total = 0;
    s->naive_bytes = 0;
    for (size_t k = 0; k < n; k++) {
        struct tinfo *t = &s->v[ids[k]];
        size_t sz = (onnx_tensor_bytes(&t->t) + ALIGN - 1) / ALIGN * ALIGN;
        if (sz == 0)
            sz = ALIGN;
        s->naive_bytes += sz;
        size_t nc = 0;
        for (size_t j = 0; j < np; j++)
            if (!(pl[j].last < t->def || t->last < pl[j].def))
                conf[nc++] = pl[j];
        qsort(conf, nc, sizeof *conf, cmp_off);
        size_t off = 0;
        for (size_t j = 0; j < nc; j++) {
            if (conf[j].off >= off + sz)
                break;
            if (conf[j].off + conf[j].size > off)
                off = conf[j].off + conf[j].size;
        }
        t->offset = off;
        pl[np++] = (struct placed){ off, sz, t->def, t->last };
        if (off + sz > total)
            total = off + sz;
    }
    free(ids);
    free(pl);
    free(conf);
    s->arena_bytes = total;
    return 0;
}

/* Gives constant value vi new host data (owned by the session). */
static void replace_hdata(struct tinfo *t, float *data)
{
    if (t->own_hdata)
        free(t->hdata);
    t->hdata = data;
    t->own_hdata = 1;
}

static int const_f32(const struct onnx_session *s, int vi)
{
    return vi >= 0 && s->v[vi].is_const && s->v[vi].t.elem == ONNX_ELEM_FLOAT;
}

/* Runs one fusion over the schedule: for each live node of `op` whose first input comes
 * from an earlier node, is read by this node alone and is not a graph output, asks
 * fuse(s, node, producer) whether the producer absorbs the node (1: yes; 0: leave it; -1:
 * error). An absorbed node dies and its producer writes the node's output instead. */
typedef int (*fuse_fn)(struct onnx_session *s, struct rnode *rn, struct rnode *pr, struct gj_error *err);

static int fuse_into_producers(struct onnx_session *s, int op, fuse_fn fuse, struct gj_error *err)
{
    const onnx_model *m = s->m;
    int *prod = malloc((m->n_values + 1) * sizeof(int));   /* value -> producing node */
    if (!prod)
        return NERR("out of memory");
    for (size_t i = 0; i < m->n_values; i++)
        prod[i] = -1;
    for (size_t k = 0; k < s->n_r; k++) {
        struct rnode *rn = &s->r[k];
        if (rn->dead)
            continue;
        for (int o = 0; o < rn->n_out; o++)
            if (rn->out[o] >= 0)
                prod[rn->out[o]] = (int)k;
        if (rn->op != op)
            continue;
        int x = rn->n_in > 0 ? rn->in[0] : -1;
        if (x < 0 || prod[x] < 0 || s->v[x].n_consumers != 1 || m->values[x].is_output)
            continue;
        int pk = prod[x];
        struct rnode *pr = &s->r[pk];
        int r = fuse(s, rn, pr, err);
        if (r < 0) {
            free(prod);
            return -1;
        }
        if (r == 0)
            continue;
        pr->fused_out[0] = rn->out[0];
        pr->out = pr->fused_out;
        pr->out_fused = 1;
        s->v[x].n_consumers = 0;
        prod[rn->out[0]] = pk;
        rn->dead = 1;
    }
    free(prod);
    return 0;
}

/* Conv -> BatchNormalization, where every BN parameter is a constant read by no other
 * node: the BN is folded into the Conv (for every backend), saving one pass over the
 * activations:
 *   W'[c] = W[c] * sc[c],  b'[c] = (b[c] - mean[c]) * sc[c] + beta[c],  sc = scale / sqrt(var + eps).
 * The new bias takes the place of the Conv's bias, or of the BN's beta when the Conv has none. */
static int fold_batchnorm(struct onnx_session *s, struct rnode *rn, struct rnode *pr, struct gj_error *err)
{
    const onnx_model *m = s->m;
    int x = rn->in[0];
    if (rn->n_out != 1 || rn->n_in < 5)
        return 0;
    if (pr->op != ONNX_OP_CONV || pr->p.fused_relu || pr->n_out != 1 || pr->in_fused)
        return 0;
    int wv = pr->in[1], bv = pr->n_in > 2 ? pr->in[2] : -1, beta = rn->in[2];
    int ok = const_f32(s, wv) && s->v[wv].n_consumers == 1 && !m->values[wv].is_output;
    for (int i = 1; i < 5; i++)
        ok = ok && const_f32(s, rn->in[i]);
    /* the value that will hold the new bias must be ours alone */
    int nbv = bv >= 0 ? bv : beta;
    ok = ok && const_f32(s, nbv) && s->v[nbv].n_consumers == 1 && !m->values[nbv].is_output;
    if (!ok || s->v[x].t.rank != 4)
        return 0;
    const struct onnx_tensor *w = &s->v[wv].t;
    int64_t M = w->dims[0], K = w->numel / (M > 0 ? M : 1);
    if (M != s->v[x].t.dims[1] || s->v[rn->in[1]].t.numel != M)
        return 0;
    float *nw = malloc((size_t)w->numel * sizeof(float) + 4);
    float *nb = malloc((size_t)M * sizeof(float) + 4);
    if (!nw || !nb) {
        free(nw);
        free(nb);
        return NERR("out of memory");
    }
    const float *W = s->v[wv].hdata, *B = bv >= 0 ? s->v[bv].hdata : NULL;
    const float *sc = s->v[rn->in[1]].hdata, *be = s->v[beta].hdata;
    const float *mean = s->v[rn->in[3]].hdata, *var = s->v[rn->in[4]].hdata;
    for (int64_t c = 0; c < M; c++) {
        float f = sc[c] / sqrtf(var[c] + rn->p.epsilon);
        for (int64_t i = 0; i < K; i++)
            nw[c * K + i] = W[c * K + i] * f;
        nb[c] = ((B ? B[c] : 0.0f) - mean[c]) * f + be[c];
    }
    replace_hdata(&s->v[wv], nw);
    replace_hdata(&s->v[nbv], nb);
    if (bv >= 0)
        s->v[beta].n_consumers--;
    for (int i = 1; i < 5; i++)
        if (i != 2)
            s->v[rn->in[i]].n_consumers--;
    /* the Conv now reads the new bias */
    pr->fused_in[0] = pr->in[0];
    pr->fused_in[1] = wv;
    pr->fused_in[2] = nbv;
    pr->in = pr->fused_in;
    pr->n_in = 3;
    pr->in_fused = 1;
    return 1;
}

/* X -> Relu where X is Conv/Gemm/Add/BatchNormalization: X applies the ReLU itself. */
static int fuse_relu(struct onnx_session *s, struct rnode *rn, struct rnode *pr, struct gj_error *err)
{
    if ((pr->op != ONNX_OP_CONV && pr->op != ONNX_OP_GEMM && pr->op != ONNX_OP_ADD &&
         pr->op != ONNX_OP_BATCHNORM) || pr->p.fused_relu || pr->n_out != 1 ||
        s->v[rn->in[0]].t.elem != ONNX_ELEM_FLOAT)
        return 0;
    pr->p.fused_relu = 1;
    return 1;
}

onnx_session *onnx_session_create(const onnx_model *m, const struct onnx_session_options *opt,
                                  struct gj_error *err)
{
    if (!m || !opt)
        return NERR("no model or options"), NULL;
    if (opt->batch < 1 || opt->batch > 65536)
        return gj_error_set(err, "batch", "batch size %d is out of range (1 to 65536)", opt->batch), NULL;
    if (opt->threads < 1 || opt->threads > 256)
        return gj_error_set(err, "threads", "thread count %d is out of range (1 to 256)", opt->threads), NULL;
    if (opt->precision < ONNX_PRECISION_FP32 || opt->precision > ONNX_PRECISION_FP16)
        return gj_error_set(err, "precision", "precision %d is not one of FP32 (0), TF32 (1), FP16 (2)",
                            opt->precision), NULL;
    if (opt->device < 0)
        return gj_error_set(err, "device", "device ordinal %d is negative", opt->device), NULL;
    char bmsg[256] = "";
    const struct onnx_backend *be = find_backend(opt->backend, bmsg, sizeof bmsg);
    if (!be)
        return gj_error_set(err, "backend", "backend '%s': %s", opt->backend, bmsg), NULL;
    if (be == &onnx_backend_cpu && opt->precision != ONNX_PRECISION_FP32)
        return gj_error_set(err, "precision", "the cpu backend computes in FP32 only; TF32 and FP16 "
                            "need the cuda backend"), NULL;

    onnx_session *s = calloc(1, sizeof *s);
    if (!s)
        return NERR("out of memory"), NULL;
    s->m = m;
    s->be = be;
    /* per-op timing synchronises after every kernel: impossible inside a graph capture */
    s->profile = getenv("GJ_ONNX_PROFILE") != NULL && !opt->cuda_graphs;
    s->n_values = m->n_values;
    s->v = calloc(m->n_values + 1, sizeof *s->v);
    s->r = calloc(m->n_nodes + 1, sizeof *s->r);
    s->in_desc = calloc(m->n_inputs + 1, sizeof *s->in_desc);
    s->out_desc = calloc(m->n_outputs + 1, sizeof *s->out_desc);
    int *order = malloc((m->n_nodes + 1) * sizeof(int));
    if (!s->v || !s->r || !s->in_desc || !s->out_desc || !order) {
        NERR("out of memory");
        goto fail;
    }
    char msg[256] = "";
    if (be->init(&s->bctx, opt, msg, sizeof msg)) {
        s->bctx = NULL;
        NERR("backend '%s' failed to start: %s", be->name, msg);
        goto fail;
    }
    /* values: initializers are constants; inputs get the batch size */
    for (size_t i = 0; i < m->n_values; i++) {
        const struct onnx_value *mv = &m->values[i];
        struct tinfo *t = &s->v[i];
        t->def = -1;
        t->last = -1;
        if (mv->init) {
            t->t = *mv->init;
            t->t.data = NULL;
            t->hdata = mv->init->data;
            t->known = t->is_const = 1;
        }
    }
    for (size_t i = 0; i < m->n_inputs; i++) {
        int vi = m->inputs[i];
        const struct onnx_value *mv = &m->values[vi];
        int64_t d[ONNX_MAX_RANK];
        for (int k = 0; k < mv->rank; k++) {
            d[k] = mv->dims[k];
            if (k == 0 && (d[k] < 0 || d[k] != opt->batch)) {
                if (d[k] >= 0 && d[k] != opt->batch) {
                    gj_error_set(err, "batch", "input '%s' has a fixed batch dimension of %lld; "
                                 "this session asks for %d", mv->name, (long long)d[k], opt->batch);
                    goto fail;
                }
                d[k] = opt->batch;
            }
            if (d[k] < 0) {
                NERR("input '%s' has a symbolic dimension %d besides the batch; not supported",
                     mv->name, k);
                goto fail;
            }
        }
        if (mv->rank == 0) {
            NERR("input '%s' is a scalar; inputs need a batch dimension", mv->name);
            goto fail;
        }
        int elem = onnx_elem_computed(mv->elem);
        if (set_shape(&s->v[vi].t, elem, mv->rank, d)) {
            NERR("input '%s' is too large", mv->name);
            goto fail;
        }
        s->v[vi].known = 1;
        s->v[vi].storage = ST_INPUT;
        s->in_desc[i] = m->in_desc[i];
        s->in_desc[i].elem_type = elem;
        memcpy(s->in_desc[i].dims, d, sizeof d);
    }

    if (schedule(m, order, err))
        goto fail;
    /* shape inference and constant folding, in schedule order */
    for (size_t k = 0; k < m->n_nodes; k++) {
        const struct onnx_node *nd = &m->nodes[order[k]];
        struct rnode *rn = &s->r[s->n_r++];
        rn->n = nd;
        rn->op = nd->op;
        rn->p = nd->p;
        rn->n_in = nd->n_in;
        rn->n_out = nd->n_out;
        rn->in = nd->in;
        rn->out = nd->out;
        if (!be->kernels[nd->op] && !onnx_backend_cpu.kernels[nd->op]) {
            NERR(NODE_FMT "no kernel in backend '%s'", nd->name, onnx_op_name(nd->op), be->name);
            goto fail;
        }
        if (infer(s, rn, err))
            goto fail;
        for (int o = 0; o < rn->n_out; o++)
            if (rn->out[o] >= 0)
                s->v[rn->out[o]].known = 1;
        int all_const = 1;
        for (int i = 0; i < rn->n_in; i++)
            if (rn->in[i] >= 0 && !s->v[rn->in[i]].is_const)
                all_const = 0;
        if (rn->op == ONNX_OP_SHAPE || all_const) {
            if (fold(s, rn, err))
                goto fail;
            rn->dead = 1;
            s->n_folded++;
        }
    }
    /* outputs */
    for (size_t i = 0; i < m->n_outputs; i++) {
        int vi = m->outputs[i];
        const struct onnx_value *mv = &m->values[vi];
        if (mv->elem && onnx_elem_computed(mv->elem) != s->v[vi].t.elem) {
            NERR("output '%s' is declared as %s but computes %s", mv->name, onnx_elem_name(mv->elem),
                 onnx_elem_name(s->v[vi].t.elem));
            goto fail;
        }
        s->out_desc[i] = m->out_desc[i];
        s->out_desc[i].elem_type = s->v[vi].t.elem;
        s->out_desc[i].rank = s->v[vi].t.rank;
        memcpy(s->out_desc[i].dims, s->v[vi].t.dims, sizeof s->out_desc[i].dims);
        s->v[vi].n_consumers++;   /* the caller reads it */
    }
    /* liveness: dead-code elimination, backwards over the schedule */
    {
        char *needed = calloc(m->n_values + 1, 1);
        if (!needed) {
            NERR("out of memory");
            goto fail;
        }
        for (size_t i = 0; i < m->n_outputs; i++)
            needed[m->outputs[i]] = 1;
        for (size_t k = s->n_r; k-- > 0;) {
            struct rnode *rn = &s->r[k];
            if (rn->dead)
                continue;
            int use = 0;
            for (int o = 0; o < rn->n_out; o++)
                if (rn->out[o] >= 0 && needed[rn->out[o]])
                    use = 1;
            if (!use) {
                rn->dead = 1;
                continue;
            }
            for (int i = 0; i < rn->n_in; i++)
                if (rn->in[i] >= 0) {
                    needed[rn->in[i]] = 1;
                    s->v[rn->in[i]].n_consumers++;
                }
        }
        free(needed);
    }
    if (fuse_into_producers(s, ONNX_OP_BATCHNORM, fold_batchnorm, err) ||
        fuse_into_producers(s, ONNX_OP_RELU, fuse_relu, err))
        goto fail;
    /* compact the runtime node list */
    {
        size_t w = 0;
        for (size_t k = 0; k < s->n_r; k++) {
            if (s->r[k].dead) {
                continue;
            }
            s->r[w] = s->r[k];
            if (s->r[w].out_fused)
                s->r[w].out = s->r[w].fused_out;
            if (s->r[w].in_fused)
                s->r[w].in = s->r[w].fused_in;
            w++;
        }
        for (size_t k = w; k < s->n_r; k++)
            memset(&s->r[k], 0, sizeof s->r[k]);
        s->n_r = w;
        s->n_run = 0;
    }
    /* storage classes and lifetimes */
    for (size_t k = 0; k < s->n_r; k++) {
        struct rnode *rn = &s->r[k];
        for (int i = 0; i < rn->n_in; i++)
            if (rn->in[i] >= 0 && (int)k > s->v[rn->in[i]].last)
                s->v[rn->in[i]].last = (int)k;
        int view = is_view(rn->op);
        for (int o = 0; o < rn->n_out; o++) {
            int vo = rn->out[o];
            if (vo < 0)
                continue;
            s->v[vo].def = (int)k;
            if (view && o == 0) {
                s->v[vo].storage = ST_ALIAS;
                s->v[vo].alias_of = rn->in[0];
            } else {
                s->v[vo].storage = ST_ARENA;
            }
        }
        rn->alias = view;
        if (!view)
            s->n_run++;
    }
    for (size_t i = 0; i < m->n_outputs; i++)
        s->v[m->outputs[i]].last = (int)s->n_r + 1;
    for (size_t i = 0; i < m->n_values; i++) {
        struct tinfo *t = &s->v[i];
        if (t->storage == ST_NONE && t->is_const)
            t->storage = ST_CONST;
        if (t->def >= 0 && t->last < t->def)
            t->last = t->def;   /* written but never read: still occupies bytes while written */
    }
    for (size_t i = 0; i < m->n_values; i++) {
        if (s->v[i].storage == ST_ALIAS) {
            int r = root_of(s, (int)i);
            if (s->v[i].last > s->v[r].last)
                s->v[r].last = s->v[i].last;
        }
    }
    if (plan_arena(s, err))
        goto fail;
    if (opt->max_bytes) {
        size_t need = s->arena_bytes;
        for (size_t i = 0; i < m->n_values; i++) {
            const struct tinfo *t = &s->v[i];
            if ((t->storage == ST_CONST && (t->last >= 0 || m->values[i].is_output)) || t->storage == ST_INPUT)
                need += onnx_tensor_bytes(&t->t);
        }
        if (need > opt->max_bytes) {
            gj_error_set(err, "batch", "the model needs %zu bytes of buffers at batch %d; the limit is %zu",
                         need, opt->batch, opt->max_bytes);
            goto fail;
        }
    }
    /* buffers */
    if (s->arena_bytes) {
        s->arena = be->alloc(s->bctx, s->arena_bytes);
        if (!s->arena) {
            NERR("cannot allocate %zu bytes of activations%s", s->arena_bytes, be_detail(s, msg, sizeof msg));
            goto fail;
        }
        s->alloc_bytes += s->arena_bytes;
    }
    for (size_t i = 0; i < m->n_values; i++) {
        struct tinfo *t = &s->v[i];
        if (t->storage == ST_CONST && (t->last >= 0 || m->values[i].is_output)) {
            size_t b = onnx_tensor_bytes(&t->t);
            t->dev = be->alloc(s->bctx, b ? b : 1);
            if (!t->dev || be->upload(s->bctx, t->dev, t->hdata, b)) {
                NERR("cannot allocate or upload constant '%s'%s", m->values[i].name,
                     be_detail(s, msg, sizeof msg));
                goto fail;
            }
            s->alloc_bytes += b ? b : 1;
            s->const_bytes += b;
            t->t.data = t->dev;
        } else if (t->storage == ST_INPUT) {
            size_t b = onnx_tensor_bytes(&t->t);
            t->dev = be->alloc(s->bctx, b ? b : 1);
            if (!t->dev) {
                NERR("cannot allocate input '%s'%s", m->values[i].name, be_detail(s, msg, sizeof msg));
                goto fail;
            }
            s->alloc_bytes += b ? b : 1;
            t->t.data = t->dev;
        } else if (t->storage == ST_ARENA) {
            t->t.data = (char *)s->arena + t->offset;
        }
    }
    for (size_t i = 0; i < m->n_values; i++)
        if (s->v[i].storage == ST_ALIAS)
            s->v[i].t.data = s->v[root_of(s, (int)i)].t.data;
    /* kernel arguments */
    for (size_t k = 0; k < s->n_r; k++) {
        struct rnode *rn = &s->r[k];
        rn->ain = calloc((size_t)rn->n_in + 1, sizeof *rn->ain);
        rn->aout = calloc((size_t)rn->n_out + 1, sizeof *rn->aout);
        if (!rn->ain || !rn->aout) {
            NERR("out of memory");
            goto fail;
        }
        for (int i = 0; i < rn->n_in; i++)
            rn->ain[i] = rn->in[i] >= 0 ? &s->v[rn->in[i]].t : NULL;
        for (int o = 0; o < rn->n_out; o++)
            rn->aout[o] = rn->out[o] >= 0 ? &s->v[rn->out[o]].t : NULL;
        rn->a = (struct onnx_kargs){ rn->n, &rn->p, rn->n_in, rn->n_out, rn->ain, rn->aout, NULL };
        if (!rn->alias && !be->kernels[rn->op]) {
            NERR(NODE_FMT "backend '%s' has no kernel for it", NODE_ARGS, be->name);
            goto fail;
        }
        if (be->scratch_bytes) {
            size_t sb = be->scratch_bytes(s->bctx, &rn->a);
            if (sb == (size_t)-1) {   /* the backend cannot prepare this node */
                NERR(NODE_FMT "backend '%s' cannot run it%s", NODE_ARGS, be->name, be_detail(s, msg, sizeof msg));
                goto fail;
            }
            if (sb > s->scratch_bytes)
                s->scratch_bytes = sb;
        }
    }
    /* the limit covers scratch too, known only now that every node has said what it needs */
    if (opt->max_bytes && s->alloc_bytes + s->scratch_bytes > opt->max_bytes) {
        gj_error_set(err, "batch", "the model needs %zu bytes of buffers at batch %d (%zu of them "
                     "scratch); the limit is %zu", s->alloc_bytes + s->scratch_bytes, opt->batch,
                     s->scratch_bytes, opt->max_bytes);
        goto fail;
    }
    if (s->scratch_bytes) {
        s->scratch = be->alloc(s->bctx, s->scratch_bytes);
        if (!s->scratch) {
            NERR("cannot allocate %zu bytes of scratch%s", s->scratch_bytes, be_detail(s, msg, sizeof msg));
            goto fail;
        }
        s->alloc_bytes += s->scratch_bytes;
        for (size_t k = 0; k < s->n_r; k++)
            s->r[k].a.scratch = s->scratch;
    }
    free(order);
    return s;
fail:
    free(order);
    onnx_session_free(s);
    return NULL;
}

/* ---- running ------------------------------------------------------------------------------ */

int onnx_session_run(onnx_session *s, const void *const *inputs, void *const *outputs,
                     struct gj_error *err)
{
    const onnx_model *m = s->m;
    char msg[320];
    for (size_t i = 0; i < m->n_inputs; i++) {
        struct tinfo *t = &s->v[m->inputs[i]];
        if (!inputs || !inputs[i])
            return gj_error_set(err, "inputs", "input '%s' is missing", m->values[m->inputs[i]].name);
        if (s->be->upload(s->bctx, t->dev, inputs[i], onnx_tensor_bytes(&t->t)))
            return NERR("cannot upload input '%s'%s", m->values[m->inputs[i]].name, be_detail(s, msg, sizeof msg));
    }
    int replayed = 0;
    if (s->be->begin_run && (replayed = s->be->begin_run(s->bctx)) < 0)
        return NERR("the backend cannot start the run%s", be_detail(s, msg, sizeof msg));
    for (size_t k = 0; k < s->n_r && !replayed; k++) {
        struct rnode *rn = &s->r[k];
        if (rn->alias)
            continue;
        struct timespec t0, t1;
        if (s->profile)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        if (s->be->kernels[rn->op](s->bctx, &rn->a)) {
            const char *d = be_detail(s, msg, sizeof msg);
            if (s->be->end_run)
                s->be->end_run(s->bctx, 1);
            return NERR(NODE_FMT "the kernel failed%s", NODE_ARGS, d[0] ? d : " (e.g. an index out of range)");
        }
        if (s->profile) {
            if (s->be->sync)
                s->be->sync(s->bctx);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            s->prof_s[rn->op] += (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
            s->prof_n[rn->op]++;
        }
    }
    if (!replayed && s->be->end_run && s->be->end_run(s->bctx, 0))
        return NERR("the backend failed to finish the run%s", be_detail(s, msg, sizeof msg));
    if (s->be->sync && s->be->sync(s->bctx))
        return NERR("the backend failed%s", be_detail(s, msg, sizeof msg));
    for (size_t i = 0; i < m->n_outputs; i++) {
        const struct tinfo *t = &s->v[m->outputs[i]];
        if (!outputs || !outputs[i])
            return gj_error_set(err, "outputs", "no buffer for output %zu", i);
        if (s->be->download(s->bctx, outputs[i], t->t.data, onnx_tensor_bytes(&t->t)))
            return NERR("cannot download output '%s'%s", m->values[m->outputs[i]].name,
                        be_detail(s, msg, sizeof msg));
    }
    return 0;
}

const struct onnx_io_desc *onnx_session_input(const onnx_session *s, size_t i)
{
    return i < s->m->n_inputs ? &s->in_desc[i] : NULL;
}

const struct onnx_io_desc *onnx_session_output(const onnx_session *s, size_t i)
{
    return i < s->m->n_outputs ? &s->out_desc[i] : NULL;
}

size_t onnx_session_input_bytes(const onnx_session *s, size_t i)
{
    return i < s->m->n_inputs ? onnx_tensor_bytes(&s->v[s->m->inputs[i]].t) : 0;
}

size_t onnx_session_output_bytes(const onnx_session *s, size_t i)
{
    return i < s->m->n_outputs ? onnx_tensor_bytes(&s->v[s->m->outputs[i]].t) : 0;
}

void onnx_session_get_stats(const onnx_session *s, struct onnx_session_stats *st)
{
    st->n_nodes_run = s->n_run;
    st->n_nodes_folded = s->n_folded;
    st->arena_bytes = s->arena_bytes;
    st->naive_bytes = s->naive_bytes;
    st->const_bytes = s->const_bytes;
}

size_t onnx_session_device_bytes(const onnx_session *s)
{
    if (!s || s->be->host_memory)
        return 0;
    return s->alloc_bytes + (s->be->device_bytes ? s->be->device_bytes(s->bctx) : 0);
}
