/*
 * onnx_plan_layout.c — activations kept channels-last (NHWC) between kernels that agree on
 * it. oneDNN's convolutions work in NHWC on this CPU; an NCHW activation costs each of them a
 * reorder of its input and one of its output. DenseNet's layers are BatchNormalization+ReLU,
 * a 1x1 convolution, a 3x3 convolution: the normalisation writes NHWC (transposing as it
 * goes), the 1x1 convolution reads it and writes NHWC for the 3x3 one, and three of the four
 * reorders are gone.
 *
 * A value becomes NHWC when its producer can write it so, every reader can read it so (the
 * backend's takes_nhwc), and nothing else sees its bytes: an arena value of its own (no view
 * or Concat slice shares them), not a graph output.
 */
#include <stdlib.h>

#include "infer/onnx/onnx_exec.h"

static int candidate(const struct onnx_session *s, int v)
{
    const struct tinfo *t = &s->v[v];
    return t->storage == ST_ARENA && !s->m->values[v].is_output && t->t.rank == 4 && t->t.elem == ONNX_ELEM_FLOAT;
}

/* 1: v may be NHWC as far as its readers and sharers go. */
static int readers_take_nhwc(const struct onnx_session *s, int v)
{
    for (size_t k = 0; k < s->n_values; k++)
        if (s->v[k].storage == ST_ALIAS && s->v[k].alias_of == v)
            return 0;
    int readers = 0;
    for (size_t k = 0; k < s->n_r; k++) {
        const struct rnode *rn = &s->r[k];
        for (int i = 0; i < rn->n_in; i++) {
            if (rn->in[i] != v)
                continue;
            if (i != 0 || rn->alias || !s->be->takes_nhwc(s->bctx, &rn->a, 0))
                return 0;
            readers++;
        }
    }
    return readers > 0;
}

void onnx_plan_layouts(struct onnx_session *s)
{
    if (!s->be->takes_nhwc || getenv("GJ_ONNX_NCHW"))
        return;
    for (size_t k = 0; k < s->n_r; k++) {
        const struct rnode *rn = &s->r[k];
        int v = rn->n_out >= 1 ? rn->out[0] : -1;
        if (rn->alias || v < 0 || !candidate(s, v) || !s->be->takes_nhwc(s->bctx, &rn->a, 1))
            continue;
        if (readers_take_nhwc(s, v))
            s->v[v].t.layout = ONNX_LAYOUT_NHWC;
    }
}
