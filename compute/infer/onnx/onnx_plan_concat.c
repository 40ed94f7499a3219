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
 *
 * At batch > 1 (a Concat on axis 1), a slice is one run per image, images a whole root image
 * apart (the tensor's nstride): planned so only where the backend says that every kernel
 * writing or reading such a slice takes it strided (takes_strided), and none is a graph
 * output (its bytes are copied out as one run).
 */
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_elem.h"
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

/* Bytes of one run of t: its dims from the Concat's axis on (at batch 1 on axis 1, all of it). */
static size_t run_bytes(const struct onnx_tensor *t, int64_t axis)
{
    return (size_t)onnx_dims_product(t, (int)axis, t->rank) * onnx_elem_size(t->elem);
}

/* Where runs are strided: 1 when v's bytes may be a strided slice, i.e. every kernel that
 * reads it (as input 0, or any input of a Concat) and, for a slice the Concat places, the
 * one that writes it takes it so. */
static int may_stride(const struct onnx_session *s, int v, int placed)
{
    if (s->m->values[v].is_output || !s->be->takes_strided)
        return 0;
    for (size_t k = 0; k < s->n_r; k++) {
        const struct rnode *rn = &s->r[k];
        for (int i = 0; i < rn->n_in; i++)
            if (rn->in[i] == v && (rn->alias || (i != 0 && rn->op != ONNX_OP_CONCAT) ||
                                   !s->be->takes_strided(s->bctx, &rn->a, 0)))
                return 0;
        if (placed && rn->n_out >= 1 && rn->out[0] == v && (rn->alias || !s->be->takes_strided(s->bctx, &rn->a, 1)))
            return 0;
        for (int o = 1; placed && o < rn->n_out; o++)
            if (rn->out[o] == v)
                return 0;
    }
    return 1;
}

/* Inputs that lie back to back in one arena value: O becomes a view at their start. */
static int as_prefix_view(struct onnx_session *s, const struct rnode *rn, int o, int strided)
{
    size_t start, off;
    int root = storage_of(s, rn->in[0], &start);
    if (root < 0 || root == o)
        return 0;
    size_t next = start;
    for (int i = 0; i < rn->n_in; i++) {
        if (storage_of(s, rn->in[i], &off) != root || off != next)
            return 0;
        next += run_bytes(&s->v[rn->in[i]].t, rn->p.axis);
    }
    if (strided && !may_stride(s, o, 0))
        return 0;
    if (strided)
        s->v[o].t.nstride = onnx_dims_product(&s->v[root].t, 1, s->v[root].t.rank);
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
static int as_root(struct onnx_session *s, const struct rnode *rn, int o, int strided)
{
    for (int i = 0; i < rn->n_in; i++)
        if (!placeable(s, rn, i) || (strided && !may_stride(s, rn->in[i], 1)))
            return 0;
    size_t off = 0;
    for (int i = 0; i < rn->n_in; i++) {
        struct tinfo *t = &s->v[rn->in[i]];
        t->storage = ST_ALIAS;
        t->alias_of = o;
        t->alias_off = off;
        if (strided)
            t->t.nstride = onnx_dims_product(&s->v[o].t, 1, s->v[o].t.rank);
        off += run_bytes(&t->t, rn->p.axis);
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
        int strided = onnx_dims_product(y, 0, (int)rn->p.axis) != 1;
        if (strided && (rn->p.axis != 1 || y->dims[0] < 2))
            continue;   /* runs of the inputs that are not one per image */
        if (as_prefix_view(s, rn, o, strided) || as_root(s, rn, o, strided)) {
            rn->alias = 1;
            s->n_run--;
        }
    }
}
