/*
 * onnx_ops.c — the operators the runtime knows (ONNX_OPS in onnx_ops.h): their names and how
 * many inputs and outputs a node of each takes.
 */
#include <string.h>

#include "infer/onnx/onnx_ops.h"

static const char *const op_names[] = {
#define ONNX_OP_NAME(e, s) s,
    ONNX_OPS(ONNX_OP_NAME)
#undef ONNX_OP_NAME
};

const char *onnx_op_name(int op)
{
    return op >= 0 && op < ONNX_OP_COUNT ? op_names[op] : "?";
}

int onnx_op_find(const char *op_type)
{
    for (int k = 0; k < ONNX_OP_COUNT; k++)
        if (strcmp(op_names[k], op_type) == 0)
            return k;
    return -1;
}

void onnx_op_arity(int op, int64_t opset, int *imin, int *imax, int *omax)
{
    *omax = 1;
    switch (op) {
    case ONNX_OP_CONV: *imin = 2; *imax = 3; break;
    case ONNX_OP_BATCHNORM: *imin = 5; *imax = 5; break;
    case ONNX_OP_GEMM: *imin = 2; *imax = 3; break;
    case ONNX_OP_MATMUL: case ONNX_OP_ADD: case ONNX_OP_SUB: case ONNX_OP_MUL: case ONNX_OP_DIV:
    case ONNX_OP_POW: case ONNX_OP_EQUAL: case ONNX_OP_EXPAND: case ONNX_OP_GATHER:
    case ONNX_OP_RESHAPE: case ONNX_OP_GREATER: case ONNX_OP_LESS: case ONNX_OP_GREATEREQ:
    case ONNX_OP_LESSEQ: case ONNX_OP_AND: case ONNX_OP_OR: case ONNX_OP_XOR: case ONNX_OP_MOD:
        *imin = 2; *imax = 2; break;
    case ONNX_OP_CONCAT: *imin = 1; *imax = 4096; break;
    case ONNX_OP_LAYERNORM: *imin = 2; *imax = 3; break;
    case ONNX_OP_REDUCEMEAN: case ONNX_OP_REDUCEMAX: case ONNX_OP_REDUCEMIN:
        *imin = 1; *imax = opset >= 18 ? 2 : 1; break;
    case ONNX_OP_REDUCESUM: *imin = 1; *imax = opset >= 13 ? 2 : 1; break;
    case ONNX_OP_SLICE: *imin = 3; *imax = 5; break;
    case ONNX_OP_SQUEEZE: *imin = 1; *imax = opset >= 13 ? 2 : 1; break;
    case ONNX_OP_UNSQUEEZE: *imin = opset >= 13 ? 2 : 1; *imax = *imin; break;
    case ONNX_OP_CONSTANT: *imin = 0; *imax = 0; break;
    case ONNX_OP_DROPOUT: *imin = 1; *imax = 3; *omax = 2; break;
    case ONNX_OP_WHERE: case ONNX_OP_RANGE: *imin = 3; *imax = 3; break;
    case ONNX_OP_PAD: *imin = 2; *imax = 4; break;
    default: *imin = 1; *imax = 1; break;
    }
}
