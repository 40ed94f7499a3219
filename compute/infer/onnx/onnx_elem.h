/*
 * onnx_elem.h — the element types of the ONNX runtime's public API (onnx_model.h includes
 * this): their numbers, names and sizes (the type table, onnx_dtype.c), and element values:
 * IEEE half and bfloat16, typed get and set (onnx_elem.c). Depends on nothing else of the
 * runtime; what only the runtime needs about types (classes, sets, Cast) is onnx_dtype.h's.
 */
#ifndef ONNX_ELEM_H
#define ONNX_ELEM_H

#include <stddef.h>
#include <stdint.h>

/* Element types, numbered as ONNX's TensorProto.DataType (onnx_dtype.c). Tensors in a
 * session's buffers are dense arrays of these, little-endian as the host: FLOAT16 and BFLOAT16
 * are the 16-bit IEEE half and bfloat16 bit patterns, BOOL one byte 0 or 1, STRING an array of
 * struct onnx_string. */
enum onnx_elem_type {
    ONNX_ELEM_FLOAT = 1,
    ONNX_ELEM_UINT8 = 2,
    ONNX_ELEM_INT8 = 3,
    ONNX_ELEM_UINT16 = 4,
    ONNX_ELEM_INT16 = 5,
    ONNX_ELEM_INT32 = 6,
    ONNX_ELEM_INT64 = 7,
    ONNX_ELEM_STRING = 8,
    ONNX_ELEM_BOOL = 9,
    ONNX_ELEM_FLOAT16 = 10,
    ONNX_ELEM_DOUBLE = 11,
    ONNX_ELEM_UINT32 = 12,
    ONNX_ELEM_UINT64 = 13,
    ONNX_ELEM_BFLOAT16 = 16,
};

/* One STRING element (Triton's BYTES): len bytes at data, not NUL-terminated, any bytes. A
 * session never copies nor frees the bytes: a STRING output element points into an input's
 * bytes (valid while the caller keeps them) or into the model's constants (valid while the
 * model lives). */
struct onnx_string {
    const char *data;
    size_t len;
};

/* ONNX's name of an element type ("FLOAT16"), or "unknown". */
const char *onnx_elem_name(int elem);
/* Triton's (KServe v2) datatype name ("FP16", "BYTES"), or NULL for a type the runtime does
 * not take; and back (0 for an unknown name). */
const char *onnx_elem_triton_name(int elem);
int onnx_elem_from_triton_name(const char *name);
/* Bytes of one element in a session's buffers (STRING: sizeof(struct onnx_string)); 0 for a
 * type the runtime does not take. */
size_t onnx_elem_size(int elem);

/* IEEE half and bfloat16 bit patterns from and to float: to them rounds to nearest, ties to
 * even (overflow gives infinity; NaN stays a quiet NaN); from them is exact. */
uint16_t onnx_float_to_half(float f);
float onnx_half_to_float(uint16_t h);
uint16_t onnx_float_to_bfloat16(float f);
float onnx_bfloat16_to_float(uint16_t h);

/* Element i of an array of numeric or BOOL type elem, read as a double or an int64 (a UINT64
 * above INT64_MAX reads as its bits: cast to uint64_t), or written from one. Written: to a
 * float type rounded to nearest even (DOUBLE to FLOAT16 and BFLOAT16 through float, as ONNX
 * Runtime does); to an integer type from an int64 wrapped to its width (two's complement),
 * from a double truncated toward zero (NaN: 0; beyond the int64 range: saturated, then
 * wrapped); to BOOL as v != 0. STRING: not through these (0, nothing written). */
double onnx_elem_get_f64(int elem, const void *data, size_t i);
int64_t onnx_elem_get_i64(int elem, const void *data, size_t i);
void onnx_elem_set_f64(int elem, void *data, size_t i, double v);
void onnx_elem_set_i64(int elem, void *data, size_t i, int64_t v);

#endif
