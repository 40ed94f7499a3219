/*
 * onnx_dtype.c — see onnx_dtype.h.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_dtype.h"
#include "infer/onnx/onnx_ir.h"
#include "onnx.pb-c.h"

/* Which repeated field of a TensorProto holds a type's values when raw_data is absent. */
enum field { FIELD_NONE, FIELD_FLOAT, FIELD_INT32, FIELD_INT64, FIELD_DOUBLE, FIELD_UINT64, FIELD_STRING };

struct dtype {
    const char *name;
    size_t wire_size;   /* bytes per element in raw_data (0: variable) */
    int computed;       /* the type it is computed in; 0: not supported */
    enum field field;
};

/* TensorProto.DataType, in ONNX's numbering. */
static const struct dtype dtypes[] = {
    [0] = { "UNDEFINED", 0, 0, FIELD_NONE },
    [ONNX_ELEM_FLOAT] = { "FLOAT", 4, ONNX_ELEM_FLOAT, FIELD_FLOAT },
    [2] = { "UINT8", 1, 0, FIELD_INT32 },
    [3] = { "INT8", 1, 0, FIELD_INT32 },
    [4] = { "UINT16", 2, 0, FIELD_INT32 },
    [5] = { "INT16", 2, 0, FIELD_INT32 },
    [ONNX_ELEM_INT32] = { "INT32", 4, ONNX_ELEM_INT64, FIELD_INT32 },
    [ONNX_ELEM_INT64] = { "INT64", 8, ONNX_ELEM_INT64, FIELD_INT64 },
    [8] = { "STRING", 0, 0, FIELD_STRING },
    [ONNX_ELEM_BOOL] = { "BOOL", 1, ONNX_ELEM_BOOL, FIELD_INT32 },
    [10] = { "FLOAT16", 2, 0, FIELD_INT32 },
    [11] = { "DOUBLE", 8, 0, FIELD_DOUBLE },
    [12] = { "UINT32", 4, 0, FIELD_UINT64 },
    [13] = { "UINT64", 8, 0, FIELD_UINT64 },
    [14] = { "COMPLEX64", 8, 0, FIELD_FLOAT },
    [15] = { "COMPLEX128", 16, 0, FIELD_DOUBLE },
    [16] = { "BFLOAT16", 2, 0, FIELD_INT32 },
};

static const struct dtype *dtype(int elem)
{
    return elem >= 0 && elem < (int)(sizeof dtypes / sizeof dtypes[0]) ? &dtypes[elem] : NULL;
}

const char *onnx_elem_name(int elem)
{
    return dtype(elem) ? dtype(elem)->name : "unknown";
}

size_t onnx_elem_size(int elem)
{
    const struct dtype *d = dtype(elem);
    return d && d->computed ? d->wire_size : 0;
}

int onnx_elem_computed(int elem)
{
    return dtype(elem) ? dtype(elem)->computed : 0;
}

/* Elements in the typed field that holds this type's values. */
static size_t field_count(const Onnx__TensorProto *tp, enum field f)
{
    switch (f) {
    case FIELD_FLOAT: return tp->n_float_data;
    case FIELD_INT32: return tp->n_int32_data;
    case FIELD_INT64: return tp->n_int64_data;
    case FIELD_DOUBLE: return tp->n_double_data;
    case FIELD_UINT64: return tp->n_uint64_data;
    case FIELD_STRING: return tp->n_string_data;
    default: return 0;
    }
}

/* n elements of declared type dt from raw (little-endian bytes) or tp's typed field into out,
 * as the computed type. Raw FLOAT and INT64 are copied as they are: the host is little-endian
 * (x86-64, arm64). */
static void decode(int dt, const Onnx__TensorProto *tp, const uint8_t *raw, void *out, size_t n)
{
    if (n == 0)
        return;
    switch (dt) {
    case ONNX_ELEM_FLOAT:
        memcpy(out, raw ? (const void *)raw : (const void *)tp->float_data, n * 4);
        break;
    case ONNX_ELEM_INT64:
        memcpy(out, raw ? (const void *)raw : (const void *)tp->int64_data, n * 8);
        break;
    case ONNX_ELEM_INT32: {
        int64_t *o = out;
        for (size_t i = 0; i < n; i++) {
            int32_t v;
            if (raw)
                memcpy(&v, raw + 4 * i, 4);
            else
                v = tp->int32_data[i];
            o[i] = v;
        }
        break;
    }
    case ONNX_ELEM_BOOL: {
        uint8_t *o = out;
        for (size_t i = 0; i < n; i++)
            o[i] = (raw ? raw[i] : tp->int32_data[i]) != 0;
        break;
    }
    }
}

int onnx_tensor_decode_data(const Onnx__TensorProto *tp, struct onnx_tensor *t, const char *nm,
                            struct gj_error *err)
{
    int dt = tp->has_data_type ? tp->data_type : 0;
    const struct dtype *d = dtype(dt);
    if (!d || !d->computed)
        return gj_error_set(err, "model", "tensor '%s' has data type %s (%d); supported: "
                            ONNX_ELEMS_SUPPORTED, nm, onnx_elem_name(dt), dt);
    size_t n = (size_t)t->numel;
    size_t have = tp->has_raw_data ? tp->raw_data.len / d->wire_size : field_count(tp, d->field);
    if ((tp->has_raw_data && tp->raw_data.len != n * d->wire_size) || (!tp->has_raw_data && have != n))
        return gj_error_set(err, "model", "tensor '%s': its data (%zu elements) does not match "
                            "its dimensions (%zu elements)", nm, have, n);
    t->elem = d->computed;
    t->data = malloc(n ? n * onnx_elem_size(t->elem) : 1);
    if (!t->data)
        return gj_error_set(err, "model", "out of memory for tensor '%s'", nm);
    decode(dt, tp, tp->has_raw_data ? tp->raw_data.data : NULL, t->data, n);
    return 0;
}
