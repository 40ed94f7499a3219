/*
 * onnx_cuda_types.c — the element types the CUDA backend's kernels compute, per operator: the
 * backend refuses (when the session is planned, naming the node and the type) every node whose
 * tensors are of another type, rather than run a float32 kernel on half bits. Plain C without
 * CUDA, so the policy is built and tested everywhere.
 *
 * Today: float32 math; int64 arithmetic; Equal and Cast among FLOAT, INT64 and BOOL; data
 * movement (Transpose, Slice, Expand, Where, Gather) of 1-, 4- and 8-byte elements; Concat and
 * views of any type but STRING. FLOAT16, BFLOAT16, the 2-byte integers and STRING run on the
 * CPU backend only.
 */
#include <stdio.h>

#include "infer/onnx/onnx_ir.h"

#define F32 ONNX_TM(ONNX_ELEM_FLOAT)
#define I64 ONNX_TM(ONNX_ELEM_INT64)
/* element sizes the size-generic kernels (okc_strided_copy, okc_where, okc_gather) take */
#define MOVE (F32 | I64 | ONNX_TM(ONNX_ELEM_DOUBLE) | ONNX_TM(ONNX_ELEM_INT32) | ONNX_TM(ONNX_ELEM_UINT32) | \
              ONNX_TM(ONNX_ELEM_UINT64) | ONNX_TM(ONNX_ELEM_INT8) | ONNX_TM(ONNX_ELEM_UINT8) | ONNX_TM_BOOL)
#define NOT_STRING (ONNX_TM_NUMERIC | ONNX_TM_BOOL)
#define ANY 0xffffffffu

/* The types of input k (k < 0: the outputs) that op's CUDA kernel takes. */
static unsigned cuda_types(int op, int k)
{
    switch (op) {
    case ONNX_OP_ADD: case ONNX_OP_SUB: case ONNX_OP_MUL: case ONNX_OP_DIV: case ONNX_OP_NEG:
        return F32 | I64;
    case ONNX_OP_POW: return k == 1 ? F32 | I64 : F32;
    case ONNX_OP_EQUAL: return k < 0 ? ONNX_TM_BOOL : F32 | I64 | ONNX_TM_BOOL;
    case ONNX_OP_CAST: return F32 | I64 | ONNX_TM_BOOL;
    case ONNX_OP_WHERE: return k == 0 ? ONNX_TM_BOOL : MOVE;
    case ONNX_OP_TRANSPOSE: case ONNX_OP_SLICE: case ONNX_OP_EXPAND:
        return k <= 0 ? MOVE : ANY;
    case ONNX_OP_GATHER: return k == 1 ? I64 : MOVE;
    case ONNX_OP_PAD: return k <= 0 ? F32 | I64 : ANY;   /* okc_pad's value is float32 or int64 */
    case ONNX_OP_CONCAT: return NOT_STRING;
    case ONNX_OP_RESHAPE: case ONNX_OP_FLATTEN: case ONNX_OP_SQUEEZE: case ONNX_OP_UNSQUEEZE:
    case ONNX_OP_IDENTITY: case ONNX_OP_DROPOUT:
        return k <= 0 ? NOT_STRING : ANY;
    case ONNX_OP_REDUCEMEAN: return k <= 0 ? F32 : ANY;
    case ONNX_OP_CONV: case ONNX_OP_BATCHNORM: case ONNX_OP_RELU: case ONNX_OP_MAXPOOL: case ONNX_OP_AVGPOOL:
    case ONNX_OP_GLOBALAVGPOOL: case ONNX_OP_GEMM: case ONNX_OP_MATMUL: case ONNX_OP_SQRT: case ONNX_OP_ERF:
    case ONNX_OP_GELU: case ONNX_OP_SIGMOID: case ONNX_OP_TANH: case ONNX_OP_SOFTMAX: case ONNX_OP_LAYERNORM:
        return F32;
    default: return ANY;   /* no CUDA kernel (refused as such), or always folded */
    }
}

/* One tensor against its mask; the message when it is refused. */
static int check(const struct onnx_kargs *a, const struct onnx_tensor *t, int k, char *msg, size_t len)
{
    unsigned mask = cuda_types(a->node->op, k);
    char names[200];
    if (!t || mask == ANY || onnx_elem_in(t->elem, mask))
        return 0;
    snprintf(msg, len, "%s %d is %s; the cuda backend computes %s only for %s (the cpu backend takes it)",
             k < 0 ? "output" : "input", k < 0 ? 0 : k, onnx_elem_name(t->elem),
             onnx_elem_mask_names(mask, names, sizeof names), onnx_op_name(a->node->op));
    return -1;
}

int onnx_cuda_types_ok(const struct onnx_kargs *a, char *msg, size_t len)
{
    for (int k = 0; k < a->n_in; k++)
        if (check(a, a->in[k], k, msg, len))
            return 0;
    for (int k = 0; k < a->n_out; k++)
        if (check(a, a->out[k], -1, msg, len))
            return 0;
    return 1;
}
