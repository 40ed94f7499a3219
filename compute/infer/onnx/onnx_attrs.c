/*
 * onnx_attrs.c — node attributes -> struct onnx_params, one reader per operator (family),
 * looked up by operator. A reader takes one attribute: 1 when it is one of the operator's and
 * was read, 0 when the runtime does not know it for this operator (refused by name), -1 on a
 * value it refuses (message set). Checks that need every attribute (one that is required,
 * a permutation) follow the loop.
 */
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_proto.h"

enum { AT_FLOAT = 1, AT_INT = 2, AT_STRING = 3, AT_TENSOR = 4, AT_GRAPH = 5, AT_FLOATS = 6,
       AT_INTS = 7 };

/* What the readers of one node share. */
struct actx {
    const char *nname;
    const char *opname;
    int op;
    int64_t opset;
    struct gj_error *err;
    int have_axis, have_to, have_kernel;
};

static int attr_err(const struct actx *c, const Onnx__AttributeProto *a, const char *what)
{
    return gj_error_set(c->err, "model", "node '%s' (%s): attribute '%s' %s", c->nname, c->opname,
                        a->name ? a->name : "", what);
}

static int node_err(const struct actx *c, const char *what)
{
    return gj_error_set(c->err, "model", "node '%s' (%s): %s", c->nname, c->opname, what);
}

static int is(const Onnx__AttributeProto *a, const char *name)
{
    return strcmp(a->name, name) == 0;
}

/* A reader's result from a getter's: read (1) or refused (-1). */
static int done(int getter_rc)
{
    return getter_rc ? -1 : 1;
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

/* An int attribute as a flag (any non-zero value: 1). */
static int get_flag(const struct actx *c, const Onnx__AttributeProto *a, int *v)
{
    int64_t iv;
    if (get_int(c, a, &iv))
        return -1;
    *v = iv != 0;
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
    if (a->s.len)   /* an empty string has no data */
        memcpy(buf, a->s.data, a->s.len);
    buf[a->s.len] = 0;
    return 0;
}

/* An int attribute the runtime supports at one value only (e.g. training_mode = 0). */
static int require_int(const struct actx *c, const Onnx__AttributeProto *a, int64_t want, const char *why)
{
    int64_t iv;
    if (get_int(c, a, &iv))
        return -1;
    return iv == want ? 1 : attr_err(c, a, why);
}

/* ---- convolution and pooling ------------------------------------------------------------- */

static int auto_pad_attr(const struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    char s[32];
    if (get_string(c, a, s, sizeof s))
        return -1;
    if (strcmp(s, "NOTSET") == 0) p->auto_pad = ONNX_PAD_NOTSET;
    else if (strcmp(s, "VALID") == 0) p->auto_pad = ONNX_PAD_VALID;
    else if (strcmp(s, "SAME_UPPER") == 0) p->auto_pad = ONNX_PAD_SAME_UPPER;
    else if (strcmp(s, "SAME_LOWER") == 0) p->auto_pad = ONNX_PAD_SAME_LOWER;
    else return attr_err(c, a, "has an unsupported value");
    return 1;
}

/* Two values in 1..4096 (strides, dilations). */
static int pair_attr(const struct actx *c, const Onnx__AttributeProto *a, int64_t *v)
{
    int n;
    if (get_ints(c, a, v, 2, &n))
        return -1;
    if (n != 2 || v[0] < 1 || v[1] < 1 || v[0] > 4096 || v[1] > 4096)
        return attr_err(c, a, "must be 2 positive values (2-D only)");
    return 1;
}

static int kernel_shape_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    int n;
    if (get_ints(c, a, p->kernel, 2, &n))
        return -1;
    if (n != 2)
        return attr_err(c, a, "must have 2 values: only 2-D convolution and pooling are supported");
    p->n_kernel = 2;
    if (p->kernel[0] < 1 || p->kernel[1] < 1 || p->kernel[0] > 4096 || p->kernel[1] > 4096)
        return attr_err(c, a, "has an invalid value");
    c->have_kernel = 1;
    return 1;
}

static int pads_attr(const struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    int n;
    if (get_ints(c, a, p->pads, 4, &n))
        return -1;
    if (n != 4)
        return attr_err(c, a, "must have 4 values (2-D only)");
    for (int i = 0; i < 4; i++)
        if (p->pads[i] < 0 || p->pads[i] > 4096)
            return attr_err(c, a, "has an invalid value");
    return 1;
}

/* The window attributes Conv, MaxPool and AveragePool share. */
static int window_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    if (is(a, "auto_pad"))
        return auto_pad_attr(c, a, p);
    if (is(a, "kernel_shape"))
        return kernel_shape_attr(c, a, p);
    if (is(a, "strides"))
        return pair_attr(c, a, p->strides);
    if (is(a, "dilations"))
        return pair_attr(c, a, p->dilations);
    if (is(a, "pads"))
        return pads_attr(c, a, p);
    return 0;
}

static int conv_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    if (is(a, "group")) {
        if (get_int(c, a, &p->group))
            return -1;
        if (p->group < 1 || p->group > 65536)
            return attr_err(c, a, "has an invalid value");
        return 1;
    }
    return window_attr(c, a, p);
}

static int pool_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    if (is(a, "ceil_mode"))
        return done(get_flag(c, a, &p->ceil_mode));
    if (c->op == ONNX_OP_MAXPOOL && is(a, "storage_order"))
        return require_int(c, a, 0, "= 1 (column-major indices) is not supported");
    if (c->op == ONNX_OP_AVGPOOL && is(a, "count_include_pad"))
        return done(get_flag(c, a, &p->count_include_pad));
    int rc = window_attr(c, a, p);
    if (rc > 0 && c->op == ONNX_OP_AVGPOOL && is(a, "dilations") &&
        (p->dilations[0] != 1 || p->dilations[1] != 1))
        return attr_err(c, a, "other than 1 is not supported for AveragePool");
    return rc;
}

/* ---- other operators ------------------------------------------------------------------- */

static int batchnorm_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    float momentum;
    if (is(a, "epsilon"))
        return done(get_float(c, a, &p->epsilon));
    if (is(a, "momentum"))
        return done(get_float(c, a, &momentum));   /* training only */
    if (is(a, "training_mode"))
        return require_int(c, a, 0, "= 1 (training) is not supported");
    return 0;
}

/* Concat, Gather, Flatten, Softmax. */
static int axis_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    if (!is(a, "axis"))
        return 0;
    c->have_axis = 1;
    return done(get_int(c, a, &p->axis));
}

static int layernorm_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    if (is(a, "axis"))
        return done(get_int(c, a, &p->axis));
    if (is(a, "epsilon"))
        return done(get_float(c, a, &p->epsilon));
    if (is(a, "stash_type"))
        return require_int(c, a, 1, "other than 1 (float) is not supported");
    return 0;
}

static int gemm_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    if (is(a, "alpha"))
        return done(get_float(c, a, &p->alpha));
    if (is(a, "beta"))
        return done(get_float(c, a, &p->beta));
    if (is(a, "transA"))
        return done(get_flag(c, a, &p->trans_a));
    if (is(a, "transB"))
        return done(get_flag(c, a, &p->trans_b));
    return 0;
}

static int gelu_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    char s[16];
    if (!is(a, "approximate"))
        return 0;
    if (get_string(c, a, s, sizeof s))
        return -1;
    if (strcmp(s, "tanh") == 0)
        p->gelu_tanh = 1;
    else if (strcmp(s, "none") != 0)
        return attr_err(c, a, "has an unsupported value");
    return 1;
}

/* The attribute `axes` of the opsets before it became an input (Squeeze, Unsqueeze and
 * ReduceSum: 13, ReduceMean, ReduceMax and ReduceMin: 18). */
static int axes_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    int64_t input_since = c->op == ONNX_OP_REDUCEMEAN || c->op == ONNX_OP_REDUCEMAX || c->op == ONNX_OP_REDUCEMIN
                        ? 18 : 13;
    if (!is(a, "axes") || c->opset >= input_since)
        return 0;
    if (get_ints(c, a, p->axes, ONNX_MAX_RANK, &p->n_axes))
        return -1;
    p->has_axes = 1;
    return 1;
}

static int reduce_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    if (is(a, "keepdims"))
        return done(get_flag(c, a, &p->keepdims));
    if (is(a, "noop_with_empty_axes"))
        return done(get_flag(c, a, &p->noop_with_empty_axes));
    return axes_attr(c, a, p);
}

static int argmax_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    if (is(a, "axis"))
        return done(get_int(c, a, &p->axis));
    if (is(a, "keepdims"))
        return done(get_flag(c, a, &p->keepdims));
    if (is(a, "select_last_index"))
        return done(get_flag(c, a, &p->select_last));
    return 0;
}

static int mod_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    if (!is(a, "fmod"))
        return 0;
    return done(get_flag(c, a, &p->fmod));
}

static int transpose_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    if (!is(a, "perm"))
        return 0;
    return done(get_ints(c, a, p->perm, ONNX_MAX_RANK, &p->n_perm));
}

static int reshape_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    if (!is(a, "allowzero"))
        return 0;
    p->keepdims = 0;
    return done(get_flag(c, a, &p->has_axes));   /* has_axes is reused as the allowzero flag */
}

static int shape_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    if (is(a, "start"))
        return done(get_int(c, a, &p->shape_start));
    if (is(a, "end")) {
        p->has_shape_end = 1;
        return done(get_int(c, a, &p->shape_end));
    }
    return 0;
}

static int cast_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    int64_t iv;
    if (is(a, "saturate"))
        return 1;   /* only affects float8 */
    if (!is(a, "to"))
        return 0;
    if (get_int(c, a, &iv))
        return -1;
    if (iv < 0 || iv > 64 || !onnx_elem_supported((int)iv) || iv == ONNX_ELEM_STRING)
        return gj_error_set(c->err, "model", "node '%s' (Cast): cast to %s is not supported", c->nname,
                            onnx_elem_name((int)iv));
    p->to = (int)iv;
    c->have_to = 1;
    return 1;
}

static int dropout_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    return is(a, "seed") || (is(a, "ratio") && c->opset < 12);   /* inference: no effect */
}

static int pad_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    char s[16];
    if (!is(a, "mode"))
        return 0;
    if (get_string(c, a, s, sizeof s))
        return -1;
    if (strcmp(s, "constant") != 0)
        return attr_err(c, a, "other than \"constant\" is not supported");
    return 1;
}

/* Constant's value_float, value_int, value_floats, value_ints. */
static int constant_list_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    const char *nm = a->name;
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
    p->has_value = 1;
    return 1;
}

/* Constant and ConstantOfShape: one value attribute. */
static int value_attr(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p)
{
    if (p->has_value)
        return attr_err(c, a, "is a second value");
    if (c->op == ONNX_OP_CONSTANT && (is(a, "value_float") || is(a, "value_int") || is(a, "value_floats") ||
                                      is(a, "value_ints")))
        return constant_list_attr(c, a, p);
    if (!is(a, "value"))
        return 0;
    if (want_type(c, a, AT_TENSOR) || !a->t)
        return attr_err(c, a, "is not a tensor");
    if (onnx_tensor_from_proto(a->t, &p->value, c->nname, c->err))
        return -1;
    if (c->op == ONNX_OP_CONSTANTOFSHAPE && p->value.numel != 1) {
        onnx_tensor_free_data(&p->value);
        return attr_err(c, a, "must hold one element");
    }
    p->has_value = 1;
    return 1;
}

typedef int (*attr_reader)(struct actx *c, const Onnx__AttributeProto *a, struct onnx_params *p);

/* Operators without a reader take no attributes. */
static const attr_reader readers[ONNX_OP_COUNT] = {
    [ONNX_OP_CONV] = conv_attr,
    [ONNX_OP_MAXPOOL] = pool_attr,
    [ONNX_OP_AVGPOOL] = pool_attr,
    [ONNX_OP_BATCHNORM] = batchnorm_attr,
    [ONNX_OP_CONCAT] = axis_attr,
    [ONNX_OP_GATHER] = axis_attr,
    [ONNX_OP_FLATTEN] = axis_attr,
    [ONNX_OP_SOFTMAX] = axis_attr,
    [ONNX_OP_LAYERNORM] = layernorm_attr,
    [ONNX_OP_GEMM] = gemm_attr,
    [ONNX_OP_GELU] = gelu_attr,
    [ONNX_OP_REDUCEMEAN] = reduce_attr,
    [ONNX_OP_REDUCESUM] = reduce_attr,
    [ONNX_OP_REDUCEMAX] = reduce_attr,
    [ONNX_OP_REDUCEMIN] = reduce_attr,
    [ONNX_OP_ARGMAX] = argmax_attr,
    [ONNX_OP_ARGMIN] = argmax_attr,
    [ONNX_OP_MOD] = mod_attr,
    [ONNX_OP_SQUEEZE] = axes_attr,
    [ONNX_OP_UNSQUEEZE] = axes_attr,
    [ONNX_OP_TRANSPOSE] = transpose_attr,
    [ONNX_OP_RESHAPE] = reshape_attr,
    [ONNX_OP_SHAPE] = shape_attr,
    [ONNX_OP_CAST] = cast_attr,
    [ONNX_OP_DROPOUT] = dropout_attr,
    [ONNX_OP_PAD] = pad_attr,
    [ONNX_OP_CONSTANT] = value_attr,
    [ONNX_OP_CONSTANTOFSHAPE] = value_attr,
};

/* ONNX's defaults of the attributes. */
static void set_defaults(int op, int64_t opset, struct onnx_params *p)
{
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
}

static int check_perm(const struct actx *c, const struct onnx_params *p)
{
    int seen = 0;
    for (int i = 0; i < p->n_perm; i++) {
        if (p->perm[i] < 0 || p->perm[i] >= p->n_perm || (seen & (1 << p->perm[i])))
            return node_err(c, "'perm' is not a permutation");
        seen |= 1 << p->perm[i];
    }
    return 0;
}

/* What only the whole attribute list can tell: required ones, defaults that are values. */
static int finish(const struct actx *c, struct onnx_params *p)
{
    int op = c->op;
    if ((op == ONNX_OP_MAXPOOL || op == ONNX_OP_AVGPOOL) && !c->have_kernel)
        return node_err(c, "attribute 'kernel_shape' is missing");
    if (op == ONNX_OP_CONCAT && !c->have_axis)
        return node_err(c, "attribute 'axis' is missing");
    if (op == ONNX_OP_CAST && !c->have_to)
        return node_err(c, "attribute 'to' is missing");
    if (op == ONNX_OP_CONSTANT && !p->has_value)
        return node_err(c, "no supported value attribute");
    if (op == ONNX_OP_CONSTANTOFSHAPE && !p->has_value) {   /* default: a float 0 */
        p->value.elem = ONNX_ELEM_FLOAT;
        p->value.numel = 1;
        p->value.data = calloc(1, 8);
        if (!p->value.data)
            return gj_error_set(c->err, "model", "out of memory");
        p->has_value = 1;
    }
    if (op == ONNX_OP_TRANSPOSE)
        return check_perm(c, p);
    return 0;
}

int onnx_parse_attrs(const Onnx__NodeProto *np, const char *nname, int op, int64_t opset,
                     struct onnx_params *p, struct gj_error *err)
{
    struct actx c = { .nname = nname, .opname = onnx_op_name(op), .op = op, .opset = opset, .err = err };
    set_defaults(op, opset, p);
    for (size_t k = 0; k < np->n_attribute; k++) {
        const Onnx__AttributeProto *a = np->attribute[k];
        if (!a->name)
            return node_err(&c, "an attribute has no name");
        if (onnx_check_name(a->name, "attribute", err))
            return -1;
        if (a->ref_attr_name && a->ref_attr_name[0])
            return attr_err(&c, a, "refers to a function attribute; not supported");
        int rc = readers[op] ? readers[op](&c, a, p) : 0;
        if (rc < 0)
            return -1;
        if (rc == 0)
            return attr_err(&c, a, "is not supported");
    }
    return finish(&c, p);
}
