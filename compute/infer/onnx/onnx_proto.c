/*
 * onnx_proto.c — TensorProto and ValueInfoProto -> the runtime's tensors and values, with
 * every length bounded (see onnx_proto.h).
 */
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_proto.h"

#define ONNX_MAX_TENSOR_ELEMS ((int64_t)1 << 31)   /* elements of one constant */

int onnx_check_name(const char *s, const char *what, struct gj_error *err)
{
    if (!s)
        return 0;
    size_t n = strnlen(s, ONNX_MAX_NAME + 1);
    if (n > ONNX_MAX_NAME)
        return gj_error_set(err, "model", "a %s name is longer than %d bytes", what, ONNX_MAX_NAME);
    return 0;
}

int onnx_tensor_from_proto(const Onnx__TensorProto *tp, struct onnx_tensor *t, const char *what,
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
    t->numel = onnx_shape_numel(t->rank, t->dims, ONNX_MAX_TENSOR_ELEMS);
    if (t->numel < 0)
        return gj_error_set(err, "model", "tensor '%s' declares invalid or huge dimensions", nm);
    return onnx_tensor_decode_data(tp, t, nm, err);
}

void onnx_tensor_free_data(struct onnx_tensor *t)
{
    if (t) {
        free(t->data);
        t->data = NULL;
    }
}

int onnx_value_info(const Onnx__ValueInfoProto *vi, struct onnx_value *v, struct gj_error *err)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp)
        return 0;   /* untyped (allowed for outputs / value_info): inferred */
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return gj_error_set(err, "model", "value '%s' is not a dense tensor (sequence, map, "
                            "optional and sparse types are not supported)", v->name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int et = tt->has_elem_type ? tt->elem_type : 0;
    if (!onnx_elem_supported(et))
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
