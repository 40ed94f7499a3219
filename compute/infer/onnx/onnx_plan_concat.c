/*
 * onnx_plan_concat.c — Concats written in place (DenseNet's dense blocks): when a Concat's
 * output is one contiguous run of its inputs (every dimension before the axis is 1, e.g. axis
 * 1 at batch 1), each input's producer writes straight into its slice of the Concat's buffer
 * and the Concat runs no kernel. Saves a pass over every concatenated byte.
 *
 * DenseNet concatenates the block's input and all features so far before every layer:
 * Concat_k(x0, f1 .. f_k-1), Concat_k+1(x0, f1 .. f_k), ... Taken last first, the block's
 * final Concat places every feature in its own buffer ("root"), and each earlier Concat, whose
 * inputs now lie back to back at the start of that buffer, becomes a view of that prefix.
 */
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_exec.h"

/* The arena value whose bytes hold v, and v's byte offset into it (-1: none). */
static int storage_of(const struct onnx_session *s, int v, size_t *off)
{
    *off = 0;
    while (s->v[v].storage == ST_ALIAS) {
        *off += s->v[v].alias_off;
        v = s->v[v].alias_of;
    }
    return s->v[v].storage == ST_ARENA ? v : -1;
}

/* Inputs that lie back to back in one arena value: O becomes a view at their start. */
static int as_prefix_view(struct onnx_session *s, const struct rnode *rn, int o)
{
    size_t start, off;
    int root = storage_of(s, rn->in[0], &start);
    if (root < 0 || root == o)
        return 0;
    size_t next = start;
    for (int i = 0; i < rn->n_in; i++) {
        if (storage_of(s, rn->in[i], &off) != root || off != next)
            return 0;
        next += onnx_tensor_bytes(&s->v[rn->in[i]].t);
    }
    s->v[o].storage = ST_ALIAS;
    s->v[o].alias_of = root;
    s->v[o].alias_off = start;
    return 1;
}

/* An input the Concat may place: an arena value of its own (not a view, input or constant),
 * listed once. Its other readers read the slice. */
static int placeable(const struct onnx_session *s, const struct rnode *rn, int i)
{
    int v = rn->in[i];
    if (v < 0 || s->v[v].storage != ST_ARENA || s->v[v].def < 0)
        return 0;
    for (int j = 0; j < i; j++)
        if (rn->in[j] == v)
            return 0;
    return 1;
}

/* Every input a slice of O (the Concat's own buffer, from the earliest input's step on). */
static int as_root(struct onnx_session *s, const struct rnode *rn, int o)
{
    for (int i = 0; i < rn->n_in; i++)
        if (!placeable(s, rn, i))
            return 0;
    size_t off = 0;
    for (int i = 0; i < rn->n_in; i++) {
        struct tinfo *t = &s->v[rn->in[i]];
        t->storage = ST_ALIAS;
        t->alias_of = o;
        t->alias_off = off;
        off += onnx_tensor_bytes(&t->t);
        if (t->def < s->v[o].def)
            s->v[o].def = t->def;
    }
    return 1;
}

void onnx_plan_concats(struct onnx_session *s)
{
    /* Device pointers may not take offsets, and device kernels may assume aligned buffers. */
    if (strcmp(s->be->name, "cpu") != 0 || getenv("GJ_ONNX_CONCAT_COPY"))
        return;
    for (size_t k = s->n_r; k-- > 0;) {
        struct rnode *rn = &s->r[k];
        int o = rn->n_out == 1 ? rn->out[0] : -1;
        if (rn->op != ONNX_OP_CONCAT || rn->alias || rn->n_in < 1 || o < 0 || s->v[o].storage != ST_ARENA)
            continue;
        const struct onnx_tensor *y = &s->v[o].t;
        if (onnx_dims_product(y, 0, (int)rn->p.axis) != 1)
            continue;   /* the inputs are not contiguous runs of the output */
        if (as_prefix_view(s, rn, o) || as_root(s, rn, o)) {
            rn->alias = 1;
            s->n_run--;
        }
    }
}
