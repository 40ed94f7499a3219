/*
 * onnx_dtype.h — what the runtime alone needs about element types (the public part, enum
 * onnx_elem_type, names, sizes and values, is onnx_elem.h's): their classes (what operators
 * may take them), typed element access (onnx_elem.c), conversion (Cast, onnx_cast.c) and the
 * decoding of a TensorProto's data (onnx_dtype.c). Every decision about element types outside
 * the kernels and the shape rules is made here.
 *
 * Every type of onnx_elem.h is stored as itself (nothing is widened): a tensor's elem is the
 * type ONNX says it has, and each operator's shape rule (onnx_shape.c) says which types it
 * takes.
 */
#ifndef ONNX_DTYPE_H
#define ONNX_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "common/gj_error.h"
#include "infer/onnx/onnx_elem.h"

struct onnx_tensor;
struct Onnx__TensorProto;

/* The types the runtime takes, for messages. */
#define ONNX_ELEMS_SUPPORTED "FLOAT, FLOAT16, BFLOAT16, DOUBLE, INT8, INT16, INT32, INT64, " \
    "UINT8, UINT16, UINT32, UINT64, BOOL, STRING"

/* 1 when the runtime stores and moves tensors of this type. */
int onnx_elem_supported(int elem);

/* What kind of values a type holds. */
enum onnx_elem_class { ONNX_EC_NONE = 0, ONNX_EC_FLOAT, ONNX_EC_SIGNED, ONNX_EC_UNSIGNED, ONNX_EC_BOOL, ONNX_EC_STRING };
int onnx_elem_class(int elem);

/* Sets of types, for shape rules: bit `elem` set. */
#define ONNX_TM(e) (1u << (e))
#define ONNX_TM_HALVES (ONNX_TM(ONNX_ELEM_FLOAT16) | ONNX_TM(ONNX_ELEM_BFLOAT16))
#define ONNX_TM_F32ISH (ONNX_TM(ONNX_ELEM_FLOAT) | ONNX_TM_HALVES)   /* computed in float32 */
#define ONNX_TM_FLOATS (ONNX_TM_F32ISH | ONNX_TM(ONNX_ELEM_DOUBLE))
#define ONNX_TM_SIGNED_INTS (ONNX_TM(ONNX_ELEM_INT8) | ONNX_TM(ONNX_ELEM_INT16) | ONNX_TM(ONNX_ELEM_INT32) | \
                             ONNX_TM(ONNX_ELEM_INT64))
#define ONNX_TM_INTS (ONNX_TM_SIGNED_INTS | ONNX_TM(ONNX_ELEM_UINT8) | ONNX_TM(ONNX_ELEM_UINT16) | \
                      ONNX_TM(ONNX_ELEM_UINT32) | ONNX_TM(ONNX_ELEM_UINT64))
#define ONNX_TM_NUMERIC (ONNX_TM_FLOATS | ONNX_TM_INTS)
#define ONNX_TM_BOOL ONNX_TM(ONNX_ELEM_BOOL)
#define ONNX_TM_STRING ONNX_TM(ONNX_ELEM_STRING)
#define ONNX_TM_ALL (ONNX_TM_NUMERIC | ONNX_TM_BOOL | ONNX_TM_STRING)

/* 1 when elem is in the set mask. */
int onnx_elem_in(int elem, unsigned mask);
/* The names of the types in mask ("FLOAT, FLOAT16, ...") into buf. */
const char *onnx_elem_mask_names(unsigned mask, char *buf, size_t len);

/* Typed element access (as the public onnx_elem_get_f64 ...), resolved once per type so a
 * kernel's loop calls through a pointer instead of switching per element. NULL for STRING and
 * unsupported types. */
struct onnx_elem_io {
    double (*get_f64)(const void *p, int64_t i);
    int64_t (*get_i64)(const void *p, int64_t i);
    void (*set_f64)(void *p, int64_t i, double v);
    void (*set_i64)(void *p, int64_t i, int64_t v);
};
const struct onnx_elem_io *onnx_elem_io(int elem);

/* Cast: n elements of type `from` at src into type `to` at dst (ONNX's Cast; see
 * onnx_elem_set_f64 for rounding and wrapping). A float that is NaN or outside the target
 * integer's range (int64's for signed targets), and a STRING that is not a number of the
 * target's kind, fail: -1. `to` may not be STRING. */
int onnx_convert(int to, void *dst, int from, const void *src, int64_t n);

/* Decodes tp's data (raw_data or the typed field) into t->data as type t->elem. t->numel must
 * be set; t->data is malloc'ed (the caller frees it; for STRING one block holds the elements
 * and their bytes). `nm` names the tensor in messages. 0, or -1 with err. */
int onnx_tensor_decode_data(const struct Onnx__TensorProto *tp, struct onnx_tensor *t, const char *nm,
                            struct gj_error *err);

#endif
