/*
 * onnx_dtype.h — element types: ONNX's TensorProto.DataType numbers (enum onnx_elem_type in
 * onnx_model.h), their names and sizes, which of them the runtime computes with, and the
 * decoding of a TensorProto's data. Every decision about element types outside the kernels
 * is made here: a type the runtime learns to compute is added in this one place (and in the
 * kernels that take it).
 */
#ifndef ONNX_DTYPE_H
#define ONNX_DTYPE_H

#include <stddef.h>

#include "common/gj_error.h"

struct onnx_tensor;
struct Onnx__TensorProto;

/* The types the runtime accepts in a model, for messages. */
#define ONNX_ELEMS_SUPPORTED "FLOAT, INT32, INT64, BOOL"

/* ONNX's name of a data type ("FLOAT16"), or "unknown". */
const char *onnx_elem_name(int elem);
/* Bytes of one element as stored in memory; 0 for a type the runtime does not store. */
size_t onnx_elem_size(int elem);
/* The type the runtime computes a declared type in (INT32 is widened to INT64); 0: a type
 * the runtime does not support. A graph input must be of a type computed as itself. */
int onnx_elem_computed(int elem);

/* Decodes tp's data (raw_data or the typed field) into t->data, converted to the computed
 * type (t->elem). t->numel must be set; t->data is malloc'ed (the caller frees it). `nm`
 * names the tensor in messages. 0, or -1 with err. */
int onnx_tensor_decode_data(const struct Onnx__TensorProto *tp, struct onnx_tensor *t, const char *nm,
                            struct gj_error *err);

#endif
