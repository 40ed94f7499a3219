/*
 * onnx_dtype.c — the table of element types: names (ONNX's and Triton's), sizes, classes, and
 * the decoding of a TensorProto's data (see onnx_dtype.h). Element access is onnx_elem.c's,
 * conversion onnx_cast.c's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_dtype.h"
#include "infer/onnx/onnx_ir.h"
#include "onnx.pb-c.h"

/* Which repeated field of a TensorProto holds a type's values when raw_data is absent. */
enum field { FIELD_NONE, FIELD_FLOAT, FIELD_INT32, FIELD_INT64, FIELD_DOUBLE, FIELD_UINT64, FIELD_STRING };

struct dtype {
    const char *name;
    const char *triton;   /* KServe v2 datatype; NULL: not taken */
    size_t size;          /* bytes per element in memory; 0: not supported */
    size_t wire;          /* bytes per element in raw_data (0: no raw form) */
    enum field field;
    int cls;              /* enum onnx_elem_class */
};

/* TensorProto.DataType, in ONNX's numbering. */
static const struct dtype dtypes[] = {
    [0] = { "UNDEFINED", NULL, 0, 0, FIELD_NONE, ONNX_EC_NONE },
    [ONNX_ELEM_FLOAT] = { "FLOAT", "FP32", 4, 4, FIELD_FLOAT, ONNX_EC_FLOAT },
    [ONNX_ELEM_UINT8] = { "UINT8", "UINT8", 1, 1, FIELD_INT32, ONNX_EC_UNSIGNED },
    [ONNX_ELEM_INT8] = { "INT8", "INT8", 1, 1, FIELD_INT32, ONNX_EC_SIGNED },
    [ONNX_ELEM_UINT16] = { "UINT16", "UINT16", 2, 2, FIELD_INT32, ONNX_EC_UNSIGNED },
    [ONNX_ELEM_INT16] = { "INT16", "INT16", 2, 2, FIELD_INT32, ONNX_EC_SIGNED },
    [ONNX_ELEM_INT32] = { "INT32", "INT32", 4, 4, FIELD_INT32, ONNX_EC_SIGNED },
    [ONNX_ELEM_INT64] = { "INT64", "INT64", 8, 8, FIELD_INT64, ONNX_EC_SIGNED },
    [ONNX_ELEM_STRING] = { "STRING", "BYTES", sizeof(struct onnx_string), 0, FIELD_STRING, ONNX_EC_STRING },
    [ONNX_ELEM_BOOL] = { "BOOL", "BOOL", 1, 1, FIELD_INT32, ONNX_EC_BOOL },
    [ONNX_ELEM_FLOAT16] = { "FLOAT16", "FP16", 2, 2, FIELD_INT32, ONNX_EC_FLOAT },
    [ONNX_ELEM_DOUBLE] = { "DOUBLE", "FP64", 8, 8, FIELD_DOUBLE, ONNX_EC_FLOAT },
    [ONNX_ELEM_UINT32] = { "UINT32", "UINT32", 4, 4, FIELD_UINT64, ONNX_EC_UNSIGNED },
    [ONNX_ELEM_UINT64] = { "UINT64", "UINT64", 8, 8, FIELD_UINT64, ONNX_EC_UNSIGNED },
    [14] = { "COMPLEX64", NULL, 0, 0, FIELD_NONE, ONNX_EC_NONE },
    [15] = { "COMPLEX128", NULL, 0, 0, FIELD_NONE, ONNX_EC_NONE },
    [ONNX_ELEM_BFLOAT16] = { "BFLOAT16", "BF16", 2, 2, FIELD_INT32, ONNX_EC_FLOAT },
    [17] = { "FLOAT8E4M3FN", NULL, 0, 0, FIELD_NONE, ONNX_EC_NONE },
    [18] = { "FLOAT8E4M3FNUZ", NULL, 0, 0, FIELD_NONE, ONNX_EC_NONE },
    [19] = { "FLOAT8E5M2", NULL, 0, 0, FIELD_NONE, ONNX_EC_NONE },
    [20] = { "FLOAT8E5M2FNUZ", NULL, 0, 0, FIELD_NONE, ONNX_EC_NONE },
    [21] = { "UINT4", NULL, 0, 0, FIELD_NONE, ONNX_EC_NONE },
    [22] = { "INT4", NULL, 0, 0, FIELD_NONE, ONNX_EC_NONE },
};

#define N_DTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

static const struct dtype *dtype(int elem)
{
    return elem >= 0 && elem < N_DTYPES ? &dtypes[elem] : NULL;
}

const char *onnx_elem_name(int elem)
{
    return dtype(elem) && dtype(elem)->name ? dtype(elem)->name : "unknown";
}

const char *onnx_elem_triton_name(int elem)
{
    return dtype(elem) ? dtype(elem)->triton : NULL;
}

int onnx_elem_from_triton_name(const char *name)
{
    for (int e = 1; name && e < N_DTYPES; e++)
        if (dtypes[e].triton && strcmp(dtypes[e].triton, name) == 0)
            return e;
    return 0;
}

size_t onnx_elem_size(int elem)
{
    return dtype(elem) ? dtype(elem)->size : 0;
}

int onnx_elem_supported(int elem)
{
    return onnx_elem_size(elem) != 0;
}

int onnx_elem_class(int elem)
{
    return dtype(elem) ? dtype(elem)->cls : ONNX_EC_NONE;
}

int onnx_elem_in(int elem, unsigned mask)
{
    return elem > 0 && elem < 32 && (mask & ONNX_TM(elem));
}

const char *onnx_elem_mask_names(unsigned mask, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    /* FLOAT first, then ONNX's order */
    static const int order[] = { ONNX_ELEM_FLOAT, ONNX_ELEM_FLOAT16, ONNX_ELEM_BFLOAT16, ONNX_ELEM_DOUBLE,
                                 ONNX_ELEM_INT8, ONNX_ELEM_INT16, ONNX_ELEM_INT32, ONNX_ELEM_INT64,
                                 ONNX_ELEM_UINT8, ONNX_ELEM_UINT16, ONNX_ELEM_UINT32, ONNX_ELEM_UINT64,
                                 ONNX_ELEM_BOOL, ONNX_ELEM_STRING };
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        if (!(mask & ONNX_TM(order[k])) || n >= len)
            continue;
        int w = snprintf(buf + n, len - n, "%s%s", n ? ", " : "", dtypes[order[k]].name);
        n = w > 0 ? n + (size_t)w : n;
    }
    return buf;
}

/* ---- TensorProto data ------------------------------------------------------------------- */

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

/* n elements of type dt from tp's typed field into out. Types narrower than 32 bits sit in
 * int32_data (FLOAT16 and BFLOAT16 as their bit patterns), UINT32 and UINT64 in uint64_data. */
static void decode_field(int dt, const Onnx__TensorProto *tp, void *out, size_t n)
{
    const struct onnx_elem_io *io = onnx_elem_io(dt);
    switch (dtypes[dt].field) {
    case FIELD_FLOAT: memcpy(out, tp->float_data, n * 4); break;
    case FIELD_INT64: memcpy(out, tp->int64_data, n * 8); break;
    case FIELD_DOUBLE: memcpy(out, tp->double_data, n * 8); break;
    case FIELD_UINT64:
        for (size_t i = 0; i < n; i++)
            io->set_i64(out, (int64_t)i, (int64_t)tp->uint64_data[i]);
        break;
    case FIELD_INT32:
        for (size_t i = 0; i < n; i++) {
            if (dt == ONNX_ELEM_FLOAT16 || dt == ONNX_ELEM_BFLOAT16)
                ((uint16_t *)out)[i] = (uint16_t)tp->int32_data[i];
            else
                io->set_i64(out, (int64_t)i, tp->int32_data[i]);
        }
        break;
    default: break;
    }
}

/* STRING: one block with the n elements, then their bytes. */
static int decode_strings(const Onnx__TensorProto *tp, struct onnx_tensor *t, const char *nm, struct gj_error *err)
{
    size_t n = (size_t)t->numel, total = 0;
    for (size_t i = 0; i < n; i++) {
        if (tp->string_data[i].len > ((size_t)1 << 31) - total)
            return gj_error_set(err, "model", "tensor '%s': its strings are too long", nm);
        total += tp->string_data[i].len;
    }
    struct onnx_string *s = malloc(n * sizeof *s + total + 1);
    if (!s)
        return gj_error_set(err, "model", "out of memory for tensor '%s'", nm);
    char *bytes = (char *)(s + n);
    for (size_t i = 0; i < n; i++) {
        size_t len = tp->string_data[i].len;
        if (len)
            memcpy(bytes, tp->string_data[i].data, len);
        s[i] = (struct onnx_string){ bytes, len };
        bytes += len;
    }
    t->data = s;
    return 0;
}

int onnx_tensor_decode_data(const Onnx__TensorProto *tp, struct onnx_tensor *t, const char *nm,
                            struct gj_error *err)
{
    int dt = tp->has_data_type ? tp->data_type : 0;
    const struct dtype *d = dtype(dt);
    if (!d || !d->size)
        return gj_error_set(err, "model", "tensor '%s' has data type %s (%d); supported: "
                            ONNX_ELEMS_SUPPORTED, nm, onnx_elem_name(dt), dt);
    size_t n = (size_t)t->numel;
    if (tp->has_raw_data && !d->wire)
        return gj_error_set(err, "model", "tensor '%s': %s data cannot be raw", nm, d->name);
    size_t have = tp->has_raw_data ? tp->raw_data.len / d->wire : field_count(tp, d->field);
    if ((tp->has_raw_data && tp->raw_data.len != n * d->wire) || (!tp->has_raw_data && have != n))
        return gj_error_set(err, "model", "tensor '%s': its data (%zu elements) does not match "
                            "its dimensions (%zu elements)", nm, have, n);
    t->elem = dt;
    if (dt == ONNX_ELEM_STRING)
        return decode_strings(tp, t, nm, err);
    t->data = malloc(n ? n * d->size : 1);
    if (!t->data)
        return gj_error_set(err, "model", "out of memory for tensor '%s'", nm);
    if (!n)
        return 0;
    if (!tp->has_raw_data) {
        decode_field(dt, tp, t->data, n);
    } else if (dt == ONNX_ELEM_BOOL) {   /* any non-zero byte is true */
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)t->data)[i] = tp->raw_data.data[i] != 0;
    } else {   /* raw_data is little-endian, as the host (x86-64, arm64) */
        memcpy(t->data, tp->raw_data.data, n * d->size);
    }
    return 0;
}
