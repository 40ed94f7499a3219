/*
 * onnx_ops.h — the operators the runtime knows: one enum, their ONNX names both ways, and how
 * many inputs and outputs a node of each takes (onnx_ops.c). Shared by the loader, the
 * executor and the backends; depends on nothing else of the runtime.
 */
#ifndef ONNX_OPS_H
#define ONNX_OPS_H

#include <stdint.h>

/* Every operator the runtime knows: X(enum suffix, ONNX op_type). */
#define ONNX_OPS(X) \
    X(CONV, "Conv") X(BATCHNORM, "BatchNormalization") X(RELU, "Relu") \
    X(MAXPOOL, "MaxPool") X(AVGPOOL, "AveragePool") X(GLOBALAVGPOOL, "GlobalAveragePool") \
    X(CONCAT, "Concat") X(GEMM, "Gemm") X(MATMUL, "MatMul") X(ADD, "Add") X(SUB, "Sub") \
    X(MUL, "Mul") X(DIV, "Div") X(POW, "Pow") X(SQRT, "Sqrt") X(ERF, "Erf") X(GELU, "Gelu") \
    X(SIGMOID, "Sigmoid") X(SOFTMAX, "Softmax") X(LAYERNORM, "LayerNormalization") \
    X(REDUCEMEAN, "ReduceMean") X(FLATTEN, "Flatten") X(RESHAPE, "Reshape") \
    X(TRANSPOSE, "Transpose") X(GATHER, "Gather") X(SHAPE, "Shape") X(SLICE, "Slice") \
    X(SQUEEZE, "Squeeze") X(UNSQUEEZE, "Unsqueeze") X(CONSTANT, "Constant") \
    X(IDENTITY, "Identity") X(DROPOUT, "Dropout") X(CAST, "Cast") X(EXPAND, "Expand") \
    X(WHERE, "Where") X(EQUAL, "Equal") X(CONSTANTOFSHAPE, "ConstantOfShape") \
    X(RANGE, "Range") X(PAD, "Pad") X(TANH, "Tanh") X(NEG, "Neg") \
    X(GREATER, "Greater") X(LESS, "Less") X(GREATEREQ, "GreaterOrEqual") X(LESSEQ, "LessOrEqual") \
    X(NOT, "Not") X(AND, "And") X(OR, "Or") X(XOR, "Xor") X(MOD, "Mod") X(ABS, "Abs") X(EXP, "Exp") \
    X(LOG, "Log") X(REDUCESUM, "ReduceSum") X(REDUCEMAX, "ReduceMax") X(REDUCEMIN, "ReduceMin") \
    X(ARGMAX, "ArgMax") X(ARGMIN, "ArgMin")

enum onnx_op {
#define ONNX_OP_ENUM(e, s) ONNX_OP_##e,
    ONNX_OPS(ONNX_OP_ENUM)
#undef ONNX_OP_ENUM
    ONNX_OP_COUNT
};

/* The ONNX op_type of op ("Conv"), or "?". */
const char *onnx_op_name(int op);

/* The operator of that op_type in the default domain, or -1. */
int onnx_op_find(const char *op_type);
/* How many inputs a node of `op` takes at `opset` (min, max) and how many outputs the runtime
 * computes (max). */
void onnx_op_arity(int op, int64_t opset, int *imin, int *imax, int *omax);

#endif
