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

int64_t onnx_dims_product(const struct onnx_tensor *t, int from, int to)
{
    int64_t n = 1;
    for (int i = from; i < to; i++)
        n *= t->dims[i];
    return n;
}

void onnx_softmax_extent(const struct onnx_tensor *x, const struct onnx_params *p, int64_t *n, int64_t *inner)
{
    int ax = (int)p->axis;
    if (p->softmax_legacy) {
        *n = onnx_dims_product(x, ax, x->rank);
        *inner = 1;
    } else {
        *n = x->dims[ax];
        *inner = onnx_dims_product(x, ax + 1, x->rank);
    }
}

int64_t onnx_view_strides(const struct onnx_kargs *a, int64_t *st)
{
    const struct onnx_tensor *x = a->in[0], *y = a->out[0];
    int64_t xst[ONNX_MAX_RANK], base = 0;
    onnx_row_strides(x, xst);
    for (int i = 0; i < y->rank; i++) {
        if (a->node->op == ONNX_OP_TRANSPOSE) {
            st[i] = xst[a->p->perm[i]];
        } else {
            st[i] = xst[i] * a->p->sl_step[i];
            base += a->p->sl_start[i] * xst[i];
        }
    }
    return base;
}

void onnx_matmul_batch_init(struct onnx_matmul_batch *mb, const struct onnx_tensor *A, const struct onnx_tensor *B,
                            const struct onnx_tensor *Y)
{
    int64_t M = A->dims[A->rank - 2], K = A->dims[A->rank - 1], N = B->dims[B->rank - 1];
    int64_t s1 = M * K, s2 = K * N;
    mb->r = Y->rank - 2;
    for (int i = mb->r - 1; i >= 0; i--) {
        int ia = i - (mb->r - (A->rank - 2)), ib = i - (mb->r - (B->rank - 2));
        int64_t da = ia >= 0 ? A->dims[ia] : 1, db = ib >= 0 ? B->dims[ib] : 1;
        mb->dims[i] = Y->dims[i];
        mb->sa[i] = da == 1 ? 0 : s1;
        mb->sb[i] = db == 1 ? 0 : s2;
        s1 *= da;
        s2 *= db;
    }
}

void onnx_matmul_batch_offsets(const struct onnx_matmul_batch *mb, int64_t bi, int64_t *oa, int64_t *ob)
{
    int64_t rem = bi;
    *oa = *ob = 0;
    for (int i = mb->r - 1; i >= 0; i--) {
        int64_t idx = rem % mb->dims[i];
        rem /= mb->dims[i];
        *oa += idx * mb->sa[i];
        *ob += idx * mb->sb[i];
    }
}
