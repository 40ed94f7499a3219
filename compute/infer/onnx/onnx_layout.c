/*
 * onnx_layout.c — shapes and strides of dense row-major tensors, shared by the executor and
 * both backends (see onnx_ir.h).
 */
#include "infer/onnx/onnx_ir.h"

size_t onnx_tensor_bytes(const struct onnx_tensor *t)
{
    return (size_t)t->numel * onnx_elem_size(t->elem);
}

int64_t onnx_shape_numel(int rank, const int64_t *dims, int64_t limit)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return -1;
        if (dims[i] != 0 && n > limit / dims[i])
            return -1;
        n *= dims[i];
    }
    return n <= limit ? n : -1;
}

void onnx_row_strides(const struct onnx_tensor *t, int64_t *st)
{
    int64_t s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= t->dims[i];
    }
}

int onnx_broadcast_walk(const struct onnx_tensor *out, const struct onnx_tensor *const *ins, int n,
                        int64_t *dims, int64_t (*st)[ONNX_MAX_RANK])
{
    int r = out->rank, wr = 0;
    int64_t full[3][ONNX_MAX_RANK];   /* every operand's strides over the output's dims */
    for (int k = 0; k < n; k++) {
        int off = r - ins[k]->rank;
        int64_t s = 1;
        for (int i = r - 1; i >= 0; i--) {
            int64_t d = i >= off ? ins[k]->dims[i - off] : 1;
            full[k][i] = d == 1 ? 0 : s;
            s *= d;
        }
    }
    for (int i = 0; i < r; i++) {
        if (out->dims[i] == 1)
            continue;
        if (wr > 0) {
            int ok = 1;
            for (int k = 0; k < n; k++)
                if (st[k][wr - 1] != full[k][i] * out->dims[i])
                    ok = 0;
            if (ok) {
                dims[wr - 1] *= out->dims[i];
                for (int k = 0; k < n; k++)
                    st[k][wr - 1] = full[k][i];
                continue;
            }
        }
        dims[wr] = out->dims[i];
        for (int k = 0; k < n; k++)
            st[k][wr] = full[k][i];
        wr++;
    }
    if (wr == 0) {
        dims[0] = 1;
        for (int k = 0; k < n; k++)
            st[k][0] = 0;
        wr = 1;
    }
    return wr;
}
