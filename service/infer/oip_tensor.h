/*
 * oip_tensor.h — tensors of the Open Inference Protocol (KServe v2 / Triton REST) in and out
 * of the ONNX runtime's element layout (onnx_elem.h): an input's JSON `data` (flat or nested)
 * or its bytes in Triton's binary tensor extension, an output as JSON `data` or raw bytes,
 * and Triton's classification extension. Every Triton datatype the runtime takes: BOOL,
 * UINT8..UINT64, INT8..INT64, FP16, BF16, FP32, FP64 and BYTES (ONNX STRING). Private to
 * service/infer; no HTTP here.
 *
 * Binary layouts are Triton's: little-endian elements as the host's (x86-64, aarch64), BOOL
 * one byte, FP16/BF16 their 16-bit patterns, BYTES each element as a 4-byte little-endian
 * length and its bytes.
 */
#ifndef GJ_OIP_TENSOR_H
#define GJ_OIP_TENSOR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define OIP_MAX_RANK 8

struct oip_tensor {
    char name[256];
    int elem_type;             /* ONNX_ELEM_* */
    int rank;
    int64_t dims[OIP_MAX_RANK];
    void *data;                /* malloc'd by the functions below (free() it); BYTES: an array
                                * of struct onnx_string pointing into the request's JSON or
                                * binary part (oip_tensor_read) or into the same block (after
                                * the array: oip_classify) */
    size_t bytes;              /* count * onnx_elem_size */
    int borrowed;              /* data points into the request's binary part, not malloc'd
                                * (oip_tensor_read, when the bytes lie aligned there) */
};

/* Frees t's values (unless borrowed) and sets data NULL. */
void oip_tensor_free_data(struct oip_tensor *t);

/* The number of elements its dims give; SIZE_MAX when that overflows. */
size_t oip_tensor_count(int rank, const int64_t *dims);

/* An input's name, datatype and shape from its JSON object (no data yet). 0, or -1 with msg
 * (the request's fault: 400). */
int oip_tensor_head(const json_t *jt, struct oip_tensor *t, char *msg, size_t msglen);

struct oip_json_values;

/* Its values (after oip_tensor_head): from `data` (or, where `data` is 0, from pre: the
 * values oip_json_data read from its text, checked and converted as `data` would be; NULL:
 * none), or from the next parameters.binary_data_size bytes of the binary part (*bin,
 * *bin_left advance past them). Allocation follows what the request holds, never only
 * what its shape claims. Binary values aligned for their type (not BOOL, which is
 * normalised to 0 / 1) are not copied: t->data points at them (borrowed). BYTES elements
 * point into jt's strings or into the binary part. jt and the binary part must outlive t
 * (pre need not). 0, or -1 with msg (400; t->data NULL). */
int oip_tensor_read(const json_t *jt, const struct oip_json_values *pre, const unsigned char **bin,
                    size_t *bin_left, struct oip_tensor *t, char *msg, size_t msglen);

/* An output's values as a flat JSON array (Triton writes them flat): BOOL true/false,
 * integers, floats (FP16/BF16 widened), BYTES strings. NULL with msg when one cannot be JSON
 * (NaN or infinity, BYTES not UTF-8: ask for binary_data) or on allocation failure. */
json_t *oip_tensor_json(const struct oip_tensor *t, char *msg, size_t msglen);

/* Bytes of its binary form, and the form itself written to dst (that many bytes). */
size_t oip_tensor_binary_size(const struct oip_tensor *t);
void oip_tensor_binary_write(const struct oip_tensor *t, unsigned char *dst);

/* Triton's classification extension: for each sample (the first dimension when batched,
 * else the whole tensor) the top k values, highest first (equal values by index), each as
 * the BYTES string "value:index[:label]" formatted as Triton does (std::to_string: "%f" for
 * FP32 and FP64, decimal integers). labels[i] names index i (NULL / n_labels 0: none). out:
 * a BYTES tensor named as t, shape [batch, min(k, per-sample count)] or [min(k, count)],
 * its strings in the same block. 0, or -1 with msg (400: a type Triton does not classify). */
int oip_classify(const struct oip_tensor *t, int batched, uint64_t k, const char *const *labels,
                 size_t n_labels, struct oip_tensor *out, char *msg, size_t msglen);

#endif
