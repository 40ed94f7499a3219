/*
 * onnx_load.c — ONNX protobuf -> struct onnx_model, with every length bounded.
 *
 * The protobuf is decoded by protobuf-c (code generated from onnx.proto at build time)
 * through an allocator with a budget, so a hostile file cannot make the decoder allocate
 * much more than the file's size. Everything the runtime does not implement (an operator,
 * an attribute, an attribute value, a data type, external data, subgraphs) is refused
 * here with its name.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "infer/onnx/onnx_ir.h"
#include "onnx.pb-c.h"

/* Caps on what a model may declare. */
#define MAX_NODES 100000
#define MAX_VALUES 400000
#define MAX_IO 64
#define MAX_NAME 4096
#define MAX_TENSOR_ELEMS ((int64_t)1 << 31)

static const char *const op_names[] = {
#define ONNX_OP_NAME(e, s) s,
    ONNX_OPS(ONNX_OP_NAME)
#undef ONNX_OP_NAME
};

const char *onnx_op_name(int op)
{
    return op >= 0 && op < ONNX_OP_COUNT ? op_names[op] : "?";
}

size_t onnx_tensor_bytes(const struct onnx_tensor *t)
{
    return (size_t)t->numel * onnx_elem_size(t->elem);
}

int64_t onnx_shape_numel(int rank, const int64_t *dims, int64_t limit)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return -1;
        if (dims[i] != 0 && n > limit / dims[i])
            return -1;
        n *= dims[i];
    }
    return n <= limit ? n : -1;
}

void onnx_row_strides(const struct onnx_tensor *t, int64_t *st)
{
    int64_t s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= t->dims[i];
    }
}

int onnx_broadcast_walk(const struct onnx_tensor *out, const struct onnx_tensor *const *ins, int n,
                        int64_t *dims, int64_t (*st)[ONNX_MAX_RANK])
{
    int r = out->rank, wr = 0;
    int64_t full[3][ONNX_MAX_RANK];   /* every operand's strides over the output's dims */
    for (int k = 0; k < n; k++) {
        int off = r - ins[k]->rank;
        int64_t s = 1;
        for (int i = r - 1; i >= 0; i--) {
            int64_t d = i >= off ? ins[k]->dims[i - off] : 1;
            full[k][i] = d == 1 ? 0 : s;
            s *= d;
        }
    }
    for (int i = 0; i < r; i++) {
        if (out->dims[i] == 1)
            continue;
        if (wr > 0) {
            int ok = 1;
            for (int k = 0; k < n; k++)
                if (st[k][wr - 1] != full[k][i] * out->dims[i])
                    ok = 0;
            if (ok) {
                dims[wr - 1] *= out->dims[i];
                for (int k = 0; k < n; k++)
                    st[k][wr - 1] = full[k][i];
                continue;
            }
        }
        dims[wr] = out->dims[i];
        for (int k = 0; k < n; k++)
            st[k][wr] = full[k][i];
        wr++;
    }
    if (wr == 0) {
        dims[0] = 1;
        for (int k = 0; k < n; k++)
            st[k][0] = 0;
        wr = 1;
    }
    return wr;
}

/* ---- a protobuf-c allocator with a budget ------------------------------------------ */

struct budget {
    size_t used, cap;
};

static void *budget_alloc(void *ad, size_t n)
{
    struct budget *b = ad;
    if (n > b->cap - b->used || n > SIZE_MAX - 16)
        return NULL;
    size_t *p = malloc(n + 16);
    if (!p)
        return NULL;
    b->used += n;
    p[0] = n;
    return (char *)p + 16;
}

static void budget_free(void *ad, void *ptr)
{
    struct budget *b = ad;
    if (!ptr)
        return;
    size_t *p = (size_t *)((char *)ptr - 16);
    b->used -= p[0];
    free(p);
}

/* ---- name table ---------------------------------------------------------------------- */

struct names {
    size_t cap;       /* power of two */
    int *slot;        /* value index or -1 */
    struct onnx_model *m;
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot holding `name`, or the empty slot where it would go (linear probing). */
static size_t names_slot(const struct names *t, const char *name)
{
    size_t i = hash_str(name) & (t->cap - 1);
    while (t->slot[i] >= 0 && strcmp(t->m->values[t->slot[i]].name, name) != 0)
        i = (i + 1) & (t->cap - 1);
    return i;
}

static int names_find(const struct names *t, const char *name)
{
    return t->slot[names_slot(t, name)];
}

static int names_add(struct names *t, const char *name, int *created, struct gj_error *err)
{
    size_t i = names_slot(t, name);
    if (t->slot[i] >= 0) {
        *created = 0;
        return t->slot[i];
    }
    struct onnx_model *m = t->m;
    if (m->n_values >= MAX_VALUES)
        return gj_error_set(err, "model", "the graph names more than %d values", MAX_VALUES);
    struct onnx_value *v = &m->values[m->n_values];
    memset(v, 0, sizeof *v);
    v->name = strdup(name);
    if (!v->name)
        return gj_error_set(err, "model", "out of memory");
    v->rank = -1;
    t->slot[i] = (int)m->n_values;
    *created = 1;
    return (int)m->n_values++;
}

/* ---- tensors --------------------------------------------------------------------------- */

static int check_name(const char *s, const char *what, struct gj_error *err)
{
    if (!s)
        return 0;
    size_t n = strnlen(s, MAX_NAME + 1);
    if (n > MAX_NAME)
        return gj_error_set(err, "model", "a %s name is longer than %d bytes", what, MAX_NAME);
    return 0;
}

/* Converts a TensorProto to a host tensor (FLOAT, INT64 or BOOL; INT32 widened). */
static int tensor_from_proto(const Onnx__TensorProto *tp, struct onnx_tensor *t, const char *what,
                             struct gj_error *err)
{
    memset(t, 0, sizeof *t);
    const char *nm = tp->name && tp->name[0] ? tp->name : what;
    if ((tp->has_data_location && tp->data_location == 1) || tp->n_external_data > 0)
        return gj_error_set(err, "model", "tensor '%s' keeps its data in an external file; "
                            "external data is not supported (save the model as one file)", nm);
    if (tp->has_segment)
        return gj_error_set(err, "model", "tensor '%s' is segmented; not supported", nm);
    if (tp->n_dims > ONNX_MAX_RANK)
        return gj_error_set(err, "model", "tensor '%s' has rank %zu (at most %d)", nm, tp->n_dims,
                            ONNX_MAX_RANK);
    t->rank = (int)tp->n_dims;
    for (size_t i = 0; i < tp->n_dims; i++)
        t->dims[i] = tp->dims[i];
    t->numel = onnx_shape_numel(t->rank, t->dims, MAX_TENSOR_ELEMS);
    if (t->numel < 0)
        return gj_error_set(err, "model", "tensor '%s' declares invalid or huge dimensions", nm);
    return onnx_tensor_decode_data(tp, t, nm, err);
}

static void tensor_free(struct onnx_tensor *t)
{
    if (t) {
        free(t->data);
        t->data = NULL;
    }
}

/* ---- value infos ------------------------------------------------------------------------ */

static int value_info(const Onnx__ValueInfoProto *vi, struct onnx_value *v, struct gj_error *err)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp) {
        return 0;   /* untyped (allowed for outputs / value_info): inferred */
    }
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return gj_error_set(err, "model", "value '%s' is not a dense tensor (sequence, map, "
                            "optional and sparse types are not supported)", v->name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int et = tt->has_elem_type ? tt->elem_type : 0;
    if (!onnx_elem_computed(et))
        return gj_error_set(err, "model", "value '%s' has element type %s (%d); supported: "
                            ONNX_ELEMS_SUPPORTED, v->name, onnx_elem_name(et), et);
    v->elem = et;
    if (tt->shape) {
        if (tt->shape->n_dim > ONNX_MAX_RANK)
            return gj_error_set(err, "model", "value '%s' has rank %zu (at most %d)", v->name,
                                tt->shape->n_dim, ONNX_MAX_RANK);
        v->rank = (int)tt->shape->n_dim;
        for (int i = 0; i < v->rank; i++) {
            const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
            if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
                if (d->dim_value < 0 || d->dim_value > ((int64_t)1 << 31))
                    return gj_error_set(err, "model", "value '%s' has dimension %d of size %lld",
                                        v->name, i, (long long)d->dim_value);
                v->dims[i] = d->dim_value;
            } else {
                v->dims[i] = -1;
            }
        }
    }
    return 0;
}

/* ---- attributes ---------------------------------------------------------------------------- */

enum { AT_FLOAT = 1, AT_INT = 2, AT_STRING = 3, AT_TENSOR = 4, AT_GRAPH = 5, AT_FLOATS = 6,
       AT_INTS = 7 };

struct actx {
    const Onnx__NodeProto *np;
    const char *nname;
    const char *opname;
    struct gj_error *err;
};

static int attr_err(const struct actx *c, const Onnx__AttributeProto *a, const char *what)
{
    return gj_error_set(c->err, "model", "node '%s' (%s): attribute '%s' %s", c->nname, c->opname,
                        a->name ? a->name : "", what);
}

static int want_type(const struct actx *c, const Onnx__AttributeProto *a, int type)
{
    int t = a->has_type ? a->type : 0;
    if (t == 0) {   /* IR < 4 files may leave type out: infer from the fields */
        if (a->has_f) t = AT_FLOAT;
        else if (a->has_i) t = AT_INT;
        else if (a->has_s) t = AT_STRING;
        else if (a->t) t = AT_TENSOR;
        else if (a->n_floats) t = AT_FLOATS;
        else if (a->n_ints) t = AT_INTS;
    }
    if (t != type)
        return attr_err(c, a, "has an unexpected type");
    return 0;
}

static int get_int(const struct actx *c, const Onnx__AttributeProto *a, int64_t *v)
{
    if (want_type(c, a, AT_INT))
        return -1;
    *v = a->i;
    return 0;
}

static int get_float(const struct actx *c, const Onnx__AttributeProto *a, float *v)
{
    if (want_type(c, a, AT_FLOAT))
        return -1;
    *v = a->f;
    return 0;
}

static int get_ints(const struct actx *c, const Onnx__AttributeProto *a, int64_t *v, int maxn,
                    int *n)
{
    if (want_type(c, a, AT_INTS))
        return -1;
    if (a->n_ints > (size_t)maxn)
        return attr_err(c, a, "has too many values");
    for (size_t i = 0; i < a->n_ints; i++)
        v[i] = a->ints[i];
    *n = (int)a->n_ints;
    return 0;
}

static int get_string(const struct actx *c, const Onnx__AttributeProto *a, char *buf, size_t len)
{
    if (want_type(c, a, AT_STRING))
        return -1;
    if (a->s.len >= len)
        return attr_err(c, a, "has an unsupported value");
    memcpy(buf, a->s.data, a->s.len);
    buf[a->s.len] = 0;
    return 0;
}

/* Conv / MaxPool / AveragePool attributes. */
static int pool_attr(const struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p,
                     int *handled)
{
    int n;
    const char *nm = a->name;
    *handled = 1;
    if (strcmp(nm, "auto_pad") == 0) {
        char s[32];
        if (get_string(c, a, s, sizeof s))
            return -1;
        if (strcmp(s, "NOTSET") == 0) p->auto_pad = ONNX_PAD_NOTSET;
        else if (strcmp(s, "VALID") == 0) p->auto_pad = ONNX_PAD_VALID;
        else if (strcmp(s, "SAME_UPPER") == 0) p->auto_pad = ONNX_PAD_SAME_UPPER;
        else if (strcmp(s, "SAME_LOWER") == 0) p->auto_pad = ONNX_PAD_SAME_LOWER;
        else return attr_err(c, a, "has an unsupported value");
    } else if (strcmp(nm, "kernel_shape") == 0) {
        if (get_ints(c, a, p->kernel, 2, &n))
            return -1;
        if (n != 2)
            return attr_err(c, a, "must have 2 values: only 2-D convolution and pooling are supported");
        p->n_kernel = 2;
        if (p->kernel[0] < 1 || p->kernel[1] < 1 || p->kernel[0] > 4096 || p->kernel[1] > 4096)
            return attr_err(c, a, "has an invalid value");
    } else if (strcmp(nm, "strides") == 0) {
        if (get_ints(c, a, p->strides, 2, &n))
            return -1;
        if (n != 2 || p->strides[0] < 1 || p->strides[1] < 1 || p->strides[0] > 4096 || p->strides[1] > 4096)
            return attr_err(c, a, "must be 2 positive values (2-D only)");
    } else if (strcmp(nm, "dilations") == 0) {
        if (get_ints(c, a, p->dilations, 2, &n))
            return -1;
        if (n != 2 || p->dilations[0] < 1 || p->dilations[1] < 1 || p->dilations[0] > 4096 || p->dilations[1] > 4096)
            return attr_err(c, a, "must be 2 positive values (2-D only)");
    } else if (strcmp(nm, "pads") == 0) {
        if (get_ints(c, a, p->pads, 4, &n))
            return -1;
        if (n != 4)
            return attr_err(c, a, "must have 4 values (2-D only)");
        for (int i = 0; i < 4; i++)
            if (p->pads[i] < 0 || p->pads[i] > 4096)
                return attr_err(c, a, "has an invalid value");
    } else if (strcmp(nm, "ceil_mode") == 0) {
        int64_t v;
        if (get_int(c, a, &v))
            return -1;
        p->ceil_mode = v != 0;
    } else {
        *handled = 0;
    }
    return 0;
}

static int parse_attrs(const struct actx *c, int op, int64_t opset, struct onnx_params *p)
{
    const Onnx__NodeProto *np = c->np;
    /* defaults */
    p->strides[0] = p->strides[1] = 1;
    p->dilations[0] = p->dilations[1] = 1;
    p->group = 1;
    p->alpha = 1.0f;
    p->beta = 1.0f;
    p->epsilon = 1e-5f;
    p->keepdims = 1;
    p->axis = 0;
    p->shape_end = INT64_MAX;
    if (op == ONNX_OP_FLATTEN || op == ONNX_OP_SOFTMAX)
        p->axis = op == ONNX_OP_SOFTMAX && opset >= 13 ? -1 : 1;
    if (op == ONNX_OP_SOFTMAX)
        p->softmax_legacy = opset < 13;
    if (op == ONNX_OP_LAYERNORM)
        p->axis = -1;
    int have_axis = 0, have_to = 0, have_kernel = 0;

    for (size_t k = 0; k < np->n_attribute; k++) {
        const Onnx__AttributeProto *a = np->attribute[k];
        if (!a->name)
            return gj_error_set(c->err, "model", "node '%s' (%s): an attribute has no name", c->nname, c->opname);
        if (check_name(a->name, "attribute", c->err))
            return -1;
        if (a->ref_attr_name && a->ref_attr_name[0])
            return attr_err(c, a, "refers to a function attribute; not supported");
        const char *nm = a->name;
        int64_t iv;
        float fv;
        int handled = 0;
        switch (op) {
        case ONNX_OP_CONV:
            if (pool_attr(c, a, p, &handled))
                return -1;
            if (strcmp(nm, "kernel_shape") == 0)
                have_kernel = 1;
            if (!handled && strcmp(nm, "group") == 0) {
                if (get_int(c, a, &p->group))
                    return -1;
                if (p->group < 1 || p->group > 65536)
                    return attr_err(c, a, "has an invalid value");
                handled = 1;
            }
            if (strcmp(nm, "ceil_mode") == 0)
                handled = 0;   /* not a Conv attribute */
            break;
        case ONNX_OP_MAXPOOL:
        case ONNX_OP_AVGPOOL:
            if (pool_attr(c, a, p, &handled))
                return -1;
            if (strcmp(nm, "kernel_shape") == 0)
                have_kernel = 1;
            if (!handled && op == ONNX_OP_MAXPOOL && strcmp(nm, "storage_order") == 0) {
                if (get_int(c, a, &iv))
                    return -1;
                if (iv != 0)
                    return attr_err(c, a, "= 1 (column-major indices) is not supported");
                handled = 1;
            }
            if (!handled && op == ONNX_OP_AVGPOOL && strcmp(nm, "count_include_pad") == 0) {
                if (get_int(c, a, &iv))
                    return -1;
                p->count_include_pad = iv != 0;
                handled = 1;
            }
            if (op == ONNX_OP_AVGPOOL && strcmp(nm, "dilations") == 0 &&
                (p->dilations[0] != 1 || p->dilations[1] != 1))
                return attr_err(c, a, "other than 1 is not supported for AveragePool");
            break;
        case ONNX_OP_BATCHNORM:
            if (strcmp(nm, "epsilon") == 0) {
                if (get_float(c, a, &p->epsilon))
                    return -1;
                handled = 1;
            } else if (strcmp(nm, "momentum") == 0) {
                if (get_float(c, a, &fv))
                    return -1;
                handled = 1;
            } else if (strcmp(nm, "training_mode") == 0) {
                if (get_int(c, a, &iv))
                    return -1;
                if (iv != 0)
                    return attr_err(c, a, "= 1 (training) is not supported");
                handled = 1;
            }
            break;
        case ONNX_OP_CONCAT:
        case ONNX_OP_GATHER:
        case ONNX_OP_FLATTEN:
        case ONNX_OP_SOFTMAX:
            if (strcmp(nm, "axis") == 0) {
                if (get_int(c, a, &p->axis))
                    return -1;
                have_axis = handled = 1;
            }
            break;
        case ONNX_OP_LAYERNORM:
            if (strcmp(nm, "axis") == 0) {
                if (get_int(c, a, &p->axis))
                    return -1;
                handled = 1;
            } else if (strcmp(nm, "epsilon") == 0) {
                if (get_float(c, a, &p->epsilon))
                    return -1;
                handled = 1;
            } else if (strcmp(nm, "stash_type") == 0) {
                if (get_int(c, a, &iv))
                    return -1;
                if (iv != 1)
                    return attr_err(c, a, "other than 1 (float) is not supported");
                handled = 1;
            }
            break;
        case ONNX_OP_GEMM:
            if (strcmp(nm, "alpha") == 0) {
                if (get_float(c, a, &p->alpha))
                    return -1;
                handled = 1;
            } else if (strcmp(nm, "beta") == 0) {
                if (get_float(c, a, &p->beta))
                    return -1;
                handled = 1;
            } else if (strcmp(nm, "transA") == 0 || strcmp(nm, "transB") == 0) {
                if (get_int(c, a, &iv))
                    return -1;
                if (nm[5] == 'A') p->trans_a = iv != 0; else p->trans_b = iv != 0;
                handled = 1;
            }
            break;
        case ONNX_OP_GELU:
            if (strcmp(nm, "approximate") == 0) {
                char s[16];
                if (get_string(c, a, s, sizeof s))
                    return -1;
                if (strcmp(s, "tanh") == 0) p->gelu_tanh = 1;
                else if (strcmp(s, "none") != 0) return attr_err(c, a, "has an unsupported value");
                handled = 1;
            }
            break;
        case ONNX_OP_REDUCEMEAN:
            if (strcmp(nm, "keepdims") == 0) {
                if (get_int(c, a, &iv))
                    return -1;
                p->keepdims = iv != 0;
                handled = 1;
            } else if (strcmp(nm, "noop_with_empty_axes") == 0) {
                if (get_int(c, a, &iv))
                    return -1;
                p->noop_with_empty_axes = iv != 0;
                handled = 1;
            } else if (strcmp(nm, "axes") == 0 && opset < 18) {
                if (get_ints(c, a, p->axes, ONNX_MAX_RANK, &p->n_axes))
                    return -1;
                p->has_axes = handled = 1;
            }
            break;
        case ONNX_OP_SQUEEZE:
        case ONNX_OP_UNSQUEEZE:
            if (strcmp(nm, "axes") == 0 && opset < 13) {
                if (get_ints(c, a, p->axes, ONNX_MAX_RANK, &p->n_axes))
                    return -1;
                p->has_axes = handled = 1;
            }
            break;
        case ONNX_OP_TRANSPOSE:
            if (strcmp(nm, "perm") == 0) {
                if (get_ints(c, a, p->perm, ONNX_MAX_RANK, &p->n_perm))
                    return -1;
                handled = 1;
            }
            break;
        case ONNX_OP_RESHAPE:
            if (strcmp(nm, "allowzero") == 0) {
                if (get_int(c, a, &iv))
                    return -1;
                p->keepdims = 0;
                p->has_axes = iv != 0;   /* reused as the allowzero flag */
                handled = 1;
            }
            break;
        case ONNX_OP_SHAPE:
            if (strcmp(nm, "start") == 0) {
                if (get_int(c, a, &p->shape_start))
                    return -1;
                handled = 1;
            } else if (strcmp(nm, "end") == 0) {
                if (get_int(c, a, &p->shape_end))
                    return -1;
                p->has_shape_end = handled = 1;
            }
            break;
        case ONNX_OP_CAST:
            if (strcmp(nm, "to") == 0) {
                if (get_int(c, a, &iv))
                    return -1;
                if (iv < 0 || iv > 64 || !onnx_elem_computed((int)iv))
                    return gj_error_set(c->err, "model", "node '%s' (Cast): cast to %s is not supported",
                                        c->nname, onnx_elem_name((int)iv));
                p->to = onnx_elem_computed((int)iv);
                have_to = handled = 1;
            } else if (strcmp(nm, "saturate") == 0) {
                handled = 1;   /* only affects float8 */
            }
            break;
        case ONNX_OP_DROPOUT:
            if (strcmp(nm, "seed") == 0 || (strcmp(nm, "ratio") == 0 && opset < 12))
                handled = 1;
            break;
        case ONNX_OP_PAD:
            if (strcmp(nm, "mode") == 0) {
                char s[16];
                if (get_string(c, a, s, sizeof s))
                    return -1;
                if (strcmp(s, "constant") != 0)
                    return attr_err(c, a, "other than \"constant\" is not supported");
                handled = 1;
            }
            break;
        case ONNX_OP_CONSTANT:
        case ONNX_OP_CONSTANTOFSHAPE:
            if (p->has_value)
                return attr_err(c, a, "is a second value");
            if (strcmp(nm, "value") == 0) {
                if (want_type(c, a, AT_TENSOR) || !a->t)
                    return attr_err(c, a, "is not a tensor");
                if (tensor_from_proto(a->t, &p->value, c->nname, c->err))
                    return -1;
                if (op == ONNX_OP_CONSTANTOFSHAPE && p->value.numel != 1) {
                    tensor_free(&p->value);
                    return attr_err(c, a, "must hold one element");
                }
                p->has_value = handled = 1;
            } else if (op == ONNX_OP_CONSTANT && (strcmp(nm, "value_float") == 0 || strcmp(nm, "value_int") == 0 ||
                                                 strcmp(nm, "value_floats") == 0 || strcmp(nm, "value_ints") == 0)) {
                int isf = nm[6] == 'f';
                int many = nm[strlen(nm) - 1] == 's';
                if (want_type(c, a, isf ? (many ? AT_FLOATS : AT_FLOAT) : (many ? AT_INTS : AT_INT)))
                    return -1;
                size_t n = many ? (isf ? a->n_floats : a->n_ints) : 1;
                p->value.elem = isf ? ONNX_ELEM_FLOAT : ONNX_ELEM_INT64;
                p->value.rank = many ? 1 : 0;
                p->value.dims[0] = (int64_t)n;
                p->value.numel = (int64_t)n;
                p->value.data = malloc(n ? n * 8 : 1);
                if (!p->value.data)
                    return gj_error_set(c->err, "model", "out of memory");
                if (isf)
                    memcpy(p->value.data, many ? a->floats : &a->f, n * 4);
                else
                    memcpy(p->value.data, many ? a->ints : &a->i, n * 8);
                p->has_value = handled = 1;
            }
            break;
        default:
            break;
        }
        if (!handled)
            return gj_error_set(c->err, "model", "node '%s' (%s): attribute '%s' is not supported",
                                c->nname, c->opname, nm);
    }
    if ((op == ONNX_OP_MAXPOOL || op == ONNX_OP_AVGPOOL) && !have_kernel)
        return gj_error_set(c->err, "model", "node '%s' (%s): attribute 'kernel_shape' is missing",
                            c->nname, c->opname);
    if (op == ONNX_OP_CONCAT && !have_axis)
        return gj_error_set(c->err, "model", "node '%s' (Concat): attribute 'axis' is missing", c->nname);
    if (op == ONNX_OP_CAST && !have_to)
        return gj_error_set(c->err, "model", "node '%s' (Cast): attribute 'to' is missing", c->nname);
    if (op == ONNX_OP_CONSTANT && !p->has_value)
        return gj_error_set(c->err, "model", "node '%s' (Constant): no supported value attribute", c->nname);
    if (op == ONNX_OP_CONSTANTOFSHAPE && !p->has_value) {
        p->value.elem = ONNX_ELEM_FLOAT;
        p->value.numel = 1;
        p->value.data = calloc(1, 8);
        if (!p->value.data)
            return gj_error_set(c->err, "model", "out of memory");
        p->has_value = 1;
    }
    if (op == ONNX_OP_TRANSPOSE) {
        int seen = 0;
        for (int i = 0; i < p->n_perm; i++) {
            if (p->perm[i] < 0 || p->perm[i] >= p->n_perm || (seen & (1 << p->perm[i])))
                return gj_error_set(c->err, "model", "node '%s' (Transpose): 'perm' is not a permutation", c->nname);
            seen |= 1 << p->perm[i];
        }
    }
    return 0;
}

/* Input counts per op: min, max; output counts: max. */
static int arity(int op, int64_t opset, int *imin, int *imax, int *omax)
{
    *omax = 1;
    switch (op) {
    case ONNX_OP_CONV: *imin = 2; *imax = 3; break;
    case ONNX_OP_BATCHNORM: *imin = 5; *imax = 5; break;
    case ONNX_OP_GEMM: *imin = 2; *imax = 3; break;
    case ONNX_OP_MATMUL: case ONNX_OP_ADD: case ONNX_OP_SUB: case ONNX_OP_MUL: case ONNX_OP_DIV:
    case ONNX_OP_POW: case ONNX_OP_EQUAL: case ONNX_OP_EXPAND: case ONNX_OP_GATHER:
    case ONNX_OP_RESHAPE:
        *imin = 2; *imax = 2; break;
    case ONNX_OP_CONCAT: *imin = 1; *imax = 4096; break;
    case ONNX_OP_LAYERNORM: *imin = 2; *imax = 3; break;
    case ONNX_OP_REDUCEMEAN: *imin = 1; *imax = opset >= 18 ? 2 : 1; break;
    case ONNX_OP_SLICE: *imin = 3; *imax = 5; break;
    case ONNX_OP_SQUEEZE: *imin = 1; *imax = opset >= 13 ? 2 : 1; break;
    case ONNX_OP_UNSQUEEZE: *imin = opset >= 13 ? 2 : 1; *imax = *imin; break;
    case ONNX_OP_CONSTANT: *imin = 0; *imax = 0; break;
    case ONNX_OP_DROPOUT: *imin = 1; *imax = 3; *omax = 2; break;
    case ONNX_OP_WHERE: case ONNX_OP_RANGE: *imin = 3; *imax = 3; break;
    case ONNX_OP_PAD: *imin = 2; *imax = 4; break;
    default: *imin = 1; *imax = 1; break;
    }
    return 0;
}

/* ---- the model ------------------------------------------------------------------------------- */

void onnx_model_free(onnx_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_nodes; i++) {
        free(m->nodes[i].name);
        free(m->nodes[i].in);
        free(m->nodes[i].out);
        tensor_free(&m->nodes[i].p.value);
    }
    for (size_t i = 0; i < m->n_values; i++) {
        free(m->values[i].name);
        if (m->values[i].init) {
            tensor_free(m->values[i].init);
            free(m->values[i].init);
        }
    }
    free(m->nodes);
    free(m->values);
    free(m->inputs);
    free(m->outputs);
    free(m->in_desc);
    free(m->out_desc);
    free(m);
}

static int io_desc(struct onnx_model *m, int vi, struct onnx_io_desc *d, const char *what,
                   struct gj_error *err)
{
    const struct onnx_value *v = &m->values[vi];
    d->name = v->name;
    d->elem_type = v->elem;
    d->rank = v->rank;
    for (int i = 0; i < v->rank && i < ONNX_MAX_RANK; i++)
        d->dims[i] = v->dims[i];
    if (strcmp(what, "input") == 0 && (v->rank < 0 || v->elem == 0))
        return gj_error_set(err, "model", "graph input '%s' has no tensor type or shape", v->name);
    return 0;
}

static onnx_model *build(const Onnx__ModelProto *mp, struct gj_error *err)
{
    const Onnx__GraphProto *g = mp->graph;
    if (!g)
        return gj_error_set(err, "model", "the file holds no graph (is it an ONNX model?)"), NULL;
    if (mp->has_ir_version && (mp->ir_version < 3 || mp->ir_version > 10))
        return gj_error_set(err, "model", "ONNX IR version %lld is not supported (3 to 10)",
                            (long long)mp->ir_version), NULL;
    int64_t opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const char *d = mp->opset_import[i]->domain;
        if (!d || !d[0] || strcmp(d, "ai.onnx") == 0)
            opset = mp->opset_import[i]->has_version ? mp->opset_import[i]->version : -1;
    }
    if (opset < 0 && mp->n_opset_import == 0)
        opset = 1;
    if (opset < 11 || opset > 20)
        return gj_error_set(err, "model", "the model uses ONNX opset %lld; supported: 11 to 20 "
                            "(re-export with opset_version=17)", (long long)opset), NULL;
    if (g->n_sparse_initializer)
        return gj_error_set(err, "model", "sparse initializers are not supported"), NULL;
    if (g->n_node > MAX_NODES)
        return gj_error_set(err, "model", "the graph has %zu nodes (at most %d)", g->n_node, MAX_NODES), NULL;
    /* (older exporters list every initializer as a graph input too: those are not counted) */
    if (g->n_input > MAX_VALUES || g->n_output > MAX_IO || g->n_output == 0)
        return gj_error_set(err, "model", "the graph has %zu outputs (1 to %d)", g->n_output, MAX_IO), NULL;
    if (g->n_initializer > MAX_VALUES)
        return gj_error_set(err, "model", "too many initializers"), NULL;

    onnx_model *m = calloc(1, sizeof *m);
    if (!m)
        return gj_error_set(err, "model", "out of memory"), NULL;
    m->opset = opset;
    size_t max_values = g->n_initializer + g->n_input;
    for (size_t i = 0; i < g->n_node; i++) {
        if (g->node[i]->n_output > 16 || g->node[i]->n_input > 4096) {
            gj_error_set(err, "model", "node %zu has too many inputs or outputs", i);
            goto fail;
        }
        max_values += g->node[i]->n_output + g->node[i]->n_input;
    }
    if (max_values > MAX_VALUES) {
        gj_error_set(err, "model", "the graph names too many values");
        goto fail;
    }
    m->values = calloc(max_values + 1, sizeof *m->values);
    m->nodes = calloc(g->n_node + 1, sizeof *m->nodes);
    struct names nt = { .m = m };
    nt.cap = 16;
    while (nt.cap < 2 * (max_values + 1))
        nt.cap *= 2;
    nt.slot = malloc(nt.cap * sizeof *nt.slot);
    if (!m->values || !m->nodes || !nt.slot) {
        free(nt.slot);
        gj_error_set(err, "model", "out of memory");
        goto fail;
    }
    memset(nt.slot, 0xff, nt.cap * sizeof *nt.slot);
    int created;

    /* initializers */
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        if (!tp->name || !tp->name[0] || check_name(tp->name, "tensor", err)) {
            if (!err || !err->message[0])
                gj_error_set(err, "model", "initializer %zu has no name", i);
            goto fail_nt;
        }
        int vi = names_add(&nt, tp->name, &created, err);
        if (vi < 0)
            goto fail_nt;
        if (!created) {
            gj_error_set(err, "model", "initializer '%s' is defined twice", tp->name);
            goto fail_nt;
        }
        struct onnx_tensor *t = calloc(1, sizeof *t);
        if (!t) {
            gj_error_set(err, "model", "out of memory");
            goto fail_nt;
        }
        m->values[vi].init = t;
        if (tensor_from_proto(tp, t, tp->name, err))
            goto fail_nt;
        m->values[vi].elem = t->elem;
        m->values[vi].rank = t->rank;
        memcpy(m->values[vi].dims, t->dims, sizeof t->dims);
    }
    /* graph inputs (those with an initializer are constants with a default) */
    m->inputs = calloc(g->n_input + 1, sizeof(int));
    m->outputs = calloc(g->n_output + 1, sizeof(int));
    m->in_desc = calloc(g->n_input + 1, sizeof *m->in_desc);
    m->out_desc = calloc(g->n_output + 1, sizeof *m->out_desc);
    if (!m->inputs || !m->outputs || !m->in_desc || !m->out_desc) {
        gj_error_set(err, "model", "out of memory");
        goto fail_nt;
    }
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (!vi->name || !vi->name[0] || check_name(vi->name, "input", err)) {
            gj_error_set(err, "model", "graph input %zu has no valid name", i);
            goto fail_nt;
        }
        int v = names_add(&nt, vi->name, &created, err);
        if (v < 0)
            goto fail_nt;
        if (m->values[v].init)
            continue;
        if (!created) {
            gj_error_set(err, "model", "graph input '%s' is listed twice", vi->name);
            goto fail_nt;
        }
        if (value_info(vi, &m->values[v], err))
            goto fail_nt;
        if (onnx_elem_computed(m->values[v].elem) != m->values[v].elem) {
            gj_error_set(err, "model", "graph input '%s' is %s; supported: FLOAT, INT64, BOOL", vi->name,
                         onnx_elem_name(m->values[v].elem));
            goto fail_nt;
        }
        if (m->n_inputs >= MAX_IO) {
            gj_error_set(err, "model", "the graph has more than %d inputs", MAX_IO);
            goto fail_nt;
        }
        m->values[v].is_input = 1;
        m->inputs[m->n_inputs] = v;
        if (io_desc(m, v, &m->in_desc[m->n_inputs], "input", err))
            goto fail_nt;
        m->n_inputs++;
    }
    if (m->n_inputs == 0) {
        gj_error_set(err, "model", "the graph has no inputs");
        goto fail_nt;
    }
    /* nodes */
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *np = g->node[i];
        struct onnx_node *n = &m->nodes[m->n_nodes];
        char autoname[32];
        snprintf(autoname, sizeof autoname, "#%zu", i);
        const char *nname = np->name && np->name[0] ? np->name : autoname;
        if (check_name(nname, "node", err))
            goto fail_nt;
        n->name = strdup(nname);
        if (!n->name) {
            gj_error_set(err, "model", "out of memory");
            goto fail_nt;
        }
        m->n_nodes++;
        const char *opn = np->op_type ? np->op_type : "";
        if (np->domain && np->domain[0] && strcmp(np->domain, "ai.onnx") != 0) {
            gj_error_set(err, "model", "node '%s': operator '%s' of domain '%.64s' is not supported",
                         nname, opn, np->domain);
            goto fail_nt;
        }
        n->op = -1;
        for (int k = 0; k < ONNX_OP_COUNT; k++)
            if (strcmp(op_names[k], opn) == 0)
                n->op = k;
        if (n->op < 0) {
            gj_error_set(err, "model", "node '%s': operator '%.128s' is not supported", nname, opn);
            goto fail_nt;
        }
        int imin, imax, omax;
        arity(n->op, opset, &imin, &imax, &omax);
        if ((int)np->n_input < imin || (int)np->n_input > imax) {
            gj_error_set(err, "model", "node '%s' (%s): %zu inputs (expected %d to %d)", nname, opn,
                         np->n_input, imin, imax);
            goto fail_nt;
        }
        if (np->n_output < 1 || (int)np->n_output > omax) {
            /* Trailing optional outputs left empty are fine. */
            size_t used = 0;
            for (size_t k = 0; k < np->n_output; k++)
                if (np->output[k][0])
                    used = k + 1;
            if (used < 1 || (int)used > omax) {
                gj_error_set(err, "model", "node '%s' (%s): %zu outputs (this runtime computes %d)",
                             nname, opn, np->n_output, omax);
                goto fail_nt;
            }
        }
        n->n_in = (int)np->n_input;
        n->n_out = (int)(np->n_output < (size_t)omax ? np->n_output : (size_t)omax);
        n->in = malloc((n->n_in + 1) * sizeof(int));
        n->out = malloc((n->n_out + 1) * sizeof(int));
        if (!n->in || !n->out) {
            gj_error_set(err, "model", "out of memory");
            goto fail_nt;
        }
        for (int k = 0; k < n->n_in; k++) {
            if (!np->input[k][0]) {
                n->in[k] = -1;
                continue;
            }
            if (check_name(np->input[k], "value", err))
                goto fail_nt;
            n->in[k] = names_add(&nt, np->input[k], &created, err);
            if (n->in[k] < 0)
                goto fail_nt;
        }
        if (n->in[0] < 0 && imin > 0) {
            gj_error_set(err, "model", "node '%s' (%s): its first input is empty", nname, opn);
            goto fail_nt;
        }
        for (int k = 0; k < n->n_out; k++) {
            if (!np->output[k][0]) {
                n->out[k] = -1;
                continue;
            }
            if (check_name(np->output[k], "value", err))
                goto fail_nt;
            n->out[k] = names_add(&nt, np->output[k], &created, err);
            if (n->out[k] < 0)
                goto fail_nt;
        }
        if (n->out[0] < 0) {
            gj_error_set(err, "model", "node '%s' (%s): its first output is empty", nname, opn);
            goto fail_nt;
        }
        struct actx ac = { np, nname, opn, err };
        if (parse_attrs(&ac, n->op, opset, &n->p))
            goto fail_nt;
    }
    /* outputs */
    for (size_t i = 0; i < g->n_output; i++) {
        const Onnx__ValueInfoProto *vi = g->output[i];
        int v = vi->name ? names_find(&nt, vi->name) : -1;
        if (v < 0) {
            gj_error_set(err, "model", "graph output '%s' is not computed by the graph",
                         vi->name ? vi->name : "");
            goto fail_nt;
        }
        if (!m->values[v].init && !m->values[v].is_input) {
            struct onnx_value tmp = m->values[v];
            if (value_info(vi, &tmp, err))
                goto fail_nt;
            m->values[v].elem = tmp.elem;   /* declared; checked against inference */
        }
        m->values[v].is_output = 1;
        m->outputs[m->n_outputs] = v;
        io_desc(m, v, &m->out_desc[m->n_outputs], "output", err);
        m->n_outputs++;
    }
    free(nt.slot);
    return m;
fail_nt:
    free(nt.slot);
fail:
    onnx_model_free(m);
    return NULL;
}

onnx_model *onnx_model_load_memory(const void *data, size_t len, struct gj_error *err)
{
    if (!data || len == 0)
        return gj_error_set(err, "model", "the model is empty"), NULL;
    if (len > ONNX_MODEL_HARD_MAX_BYTES)
        return gj_error_set(err, "model", "the model is %zu bytes; at most %zu", len,
                            (size_t)ONNX_MODEL_HARD_MAX_BYTES), NULL;
    struct budget b = { 0, 4 * len + ((size_t)64 << 20) };
    ProtobufCAllocator al = { budget_alloc, budget_free, &b };
    Onnx__ModelProto *mp = onnx__model_proto__unpack(&al, len, data);
    if (!mp) {
        if (b.used > b.cap / 2)
            return gj_error_set(err, "model", "the model is too complex to decode within its memory "
                                "budget"), NULL;
        return gj_error_set(err, "model", "the file is not a valid ONNX protobuf (truncated or "
                            "corrupt)"), NULL;
    }
    onnx_model *m = build(mp, err);
    onnx__model_proto__free_unpacked(mp, &al);
    return m;
}

onnx_model *onnx_model_load_file(const char *path, size_t max_bytes, struct gj_error *err)
{
    if (max_bytes == 0)
        max_bytes = ONNX_MODEL_DEFAULT_MAX_BYTES;
    if (max_bytes > ONNX_MODEL_HARD_MAX_BYTES)
        max_bytes = ONNX_MODEL_HARD_MAX_BYTES;
    char *data;
    size_t len;
    if (gj_read_file(path, max_bytes, &data, &len) != 0) {
        if (errno == EFBIG)
            return gj_error_set(err, "model", "the model file is larger than %zu bytes", max_bytes), NULL;
        return gj_error_set(err, "model", "cannot read the model file: %s", strerror(errno)), NULL;
    }
    onnx_model *m = onnx_model_load_memory(data, len, err);
    free(data);
    return m;
}

size_t onnx_model_num_inputs(const onnx_model *m) { return m->n_inputs; }
size_t onnx_model_num_outputs(const onnx_model *m) { return m->n_outputs; }
size_t onnx_model_num_nodes(const onnx_model *m) { return m->n_nodes; }
int64_t onnx_model_opset(const onnx_model *m) { return m->opset; }

const struct onnx_io_desc *onnx_model_input(const onnx_model *m, size_t i)
{
    return i < m->n_inputs ? &m->in_desc[i] : NULL;
}

const struct onnx_io_desc *onnx_model_output(const onnx_model *m, size_t i)
{
    return i < m->n_outputs ? &m->out_desc[i] : NULL;
}
