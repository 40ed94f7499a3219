/*
 * onnx_plan.c — a session's buffers, once the graph is final (onnx_optimize.c):
 *   storage classes: constants and inputs get buffers of their own, intermediates a place
 *     in one arena, outputs of view ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity,
 *     Dropout, a Pad of nothing) alias their input, inputs of a Concat written in place its
 *     output (onnx_plan_concat.c);
 *   lifetimes over the schedule, and a liveness-based arena plan: tensors whose lifetimes
 *     do not overlap share bytes (greedy, largest first);
 *   the memory limit (checked before allocating, and again once scratch is known);
 *   the buffers (constants uploaded) and every kernel call's arguments, the layouts of
 *     activations between kernels that agree on another (onnx_plan_layout.c), and scratch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_exec.h"

#define ALIGN 64

/* A Pad that adds nothing (every pad 0, as PyTorch's exporter puts before each DenseNet
 * transition's AveragePool): its output is its input. */
static int pads_nothing(const struct onnx_session *s, const struct rnode *rn)
{
    if (rn->n_in < 1 || rn->in[0] < 0 || rn->n_out < 1 || rn->out[0] < 0)
        return 0;
    const struct onnx_tensor *x = &s->v[rn->in[0]].t, *y = &s->v[rn->out[0]].t;
    if (x->rank != y->rank || x->elem != y->elem)
        return 0;
    for (int i = 0; i < x->rank; i++)
        if (x->dims[i] != y->dims[i] || rn->p.pad_begin[i] != 0)
            return 0;
    return 1;
}

static int is_view(const struct onnx_session *s, const struct rnode *rn)
{
    int op = rn->op;
    return op == ONNX_OP_RESHAPE || op == ONNX_OP_FLATTEN || op == ONNX_OP_SQUEEZE || op == ONNX_OP_UNSQUEEZE ||
           op == ONNX_OP_IDENTITY || op == ONNX_OP_DROPOUT || (op == ONNX_OP_PAD && pads_nothing(s, rn));
}

static int root_of(const struct onnx_session *s, int v)
{
    while (s->v[v].storage == ST_ALIAS)
        v = s->v[v].alias_of;
    return v;
}

const char *onnx_backend_detail(const struct onnx_session *s, char *buf, size_t len)
{
    const char *e = s->be->last_error ? s->be->last_error(s->bctx) : NULL;
    if (!e || !e[0])
        return "";
    snprintf(buf, len, ": %s", e);
    return buf;
}

/* A constant the run reads (or returns) gets a buffer of its own. */
static int const_needed(const struct onnx_session *s, size_t i)
{
    const struct tinfo *t = &s->v[i];
    return t->storage == ST_CONST && (t->last >= 0 || s->m->values[i].is_output);
}

/* ---- storage classes and lifetimes --------------------------------------------------------- */

/* def and last: the schedule steps that write and last read each value; views alias. */
static void assign_storage(struct onnx_session *s)
{
    s->n_run = 0;
    for (size_t k = 0; k < s->n_r; k++) {
        struct rnode *rn = &s->r[k];
        for (int i = 0; i < rn->n_in; i++)
            if (rn->in[i] >= 0 && (int)k > s->v[rn->in[i]].last)
                s->v[rn->in[i]].last = (int)k;
        int view = is_view(s, rn);
        for (int o = 0; o < rn->n_out; o++) {
            int vo = rn->out[o];
            if (vo < 0)
                continue;
            s->v[vo].def = (int)k;
            if (view && o == 0) {
                s->v[vo].storage = ST_ALIAS;
                s->v[vo].alias_of = rn->in[0];
            } else {
                s->v[vo].storage = ST_ARENA;
            }
        }
        rn->alias = view;
        if (!view)
            s->n_run++;
    }
}

/* Outputs live past the last step; an alias keeps its root alive as long as itself. */
static void extend_lifetimes(struct onnx_session *s)
{
    const onnx_model *m = s->m;
    for (size_t i = 0; i < m->n_outputs; i++)
        s->v[m->outputs[i]].last = (int)s->n_r + 1;
    for (size_t i = 0; i < m->n_values; i++) {
        struct tinfo *t = &s->v[i];
        if (t->storage == ST_NONE && t->is_const)
            t->storage = ST_CONST;
        if (t->def >= 0 && t->last < t->def)
            t->last = t->def;   /* written but never read: still occupies bytes while written */
    }
    for (size_t i = 0; i < m->n_values; i++) {
        if (s->v[i].storage == ST_ALIAS) {
            int r = root_of(s, (int)i);
            if (s->v[i].last > s->v[r].last)
                s->v[r].last = s->v[i].last;
        }
    }
}

/* ---- the arena --------------------------------------------------------------------------- */

struct placed {
    size_t off, size;
    int def, last;
};

static int cmp_size_desc(const void *a, const void *b, void *ctx)
{
    const struct tinfo *v = ctx;
    int ia = *(const int *)a, ib = *(const int *)b;
    size_t sa = onnx_tensor_bytes(&v[ia].t), sb = onnx_tensor_bytes(&v[ib].t);
    if (sa != sb)
        return sa < sb ? 1 : -1;
    return v[ia].def - v[ib].def;
}

static int cmp_off(const void *a, const void *b)
{
    const struct placed *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The lowest offset where sz bytes overlap none of the nc placed tensors in conf (sorted by
 * offset here). */
static size_t lowest_free(struct placed *conf, size_t nc, size_t sz)
{
    size_t off = 0;
    qsort(conf, nc, sizeof *conf, cmp_off);
    for (size_t j = 0; j < nc; j++) {
        if (conf[j].off >= off + sz)
            break;
        if (conf[j].off + conf[j].size > off)
            off = conf[j].off + conf[j].size;
    }
    return off;
}

/* Greedy offset assignment: largest tensors first, each at the lowest offset where it
 * overlaps no placed tensor that is alive at the same time. */
static int plan_arena(struct onnx_session *s, struct gj_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_values; i++)
        if (s->v[i].storage == ST_ARENA)
            n++;
    int *ids = malloc((n + 1) * sizeof(int));
    struct placed *pl = malloc((n + 1) * sizeof *pl);
    struct placed *conf = malloc((n + 1) * sizeof *conf);
    if (!ids || !pl || !conf) {
        free(ids);
        free(pl);
        free(conf);
        return gj_error_set(err, "model", "out of memory");
    }
    n = 0;
    for (size_t i = 0; i < s->n_values; i++)
        if (s->v[i].storage == ST_ARENA)
            ids[n++] = (int)i;
    qsort_r(ids, n, sizeof(int), cmp_size_desc, s->v);
    size_t np = 0, total = 0;
    s->naive_bytes = 0;
    for (size_t k = 0; k < n; k++) {
        struct tinfo *t = &s->v[ids[k]];
        size_t sz = (onnx_tensor_bytes(&t->t) + ALIGN - 1) / ALIGN * ALIGN;
        if (sz == 0)
            sz = ALIGN;
        s->naive_bytes += sz;
        size_t nc = 0;
        for (size_t j = 0; j < np; j++)
            if (!(pl[j].last < t->def || t->last < pl[j].def))
                conf[nc++] = pl[j];
        t->offset = lowest_free(conf, nc, sz);
        pl[np++] = (struct placed){ t->offset, sz, t->def, t->last };
        if (t->offset + sz > total)
            total = t->offset + sz;
    }
    free(ids);
    free(pl);
    free(conf);
    s->arena_bytes = total;
    return 0;
}

/* ---- the memory limit and the buffers ----------------------------------------------------------- */

/* Before anything is allocated: the arena, constants and inputs against max_bytes. */
static int check_limit(const struct onnx_session *s, size_t max_bytes, int batch, struct gj_error *err)
{
    if (!max_bytes)
        return 0;
    size_t need = s->arena_bytes;
    for (size_t i = 0; i < s->n_values; i++)
        if (const_needed(s, i) || s->v[i].storage == ST_INPUT)
            need += onnx_tensor_bytes(&s->v[i].t);
    if (need > max_bytes)
        return gj_error_set(err, "batch", "the model needs %zu bytes of buffers at batch %d; the limit is %zu",
                            need, batch, max_bytes);
    return 0;
}

/* A buffer of its own for value i (a constant, uploaded, or an input). */
static int own_buffer(struct onnx_session *s, size_t i, struct gj_error *err)
{
    struct tinfo *t = &s->v[i];
    const struct onnx_backend *be = s->be;
    char msg[320];
    size_t b = onnx_tensor_bytes(&t->t);
    t->dev = be->alloc(s->bctx, b ? b : 1);
    if (t->storage == ST_CONST && (!t->dev || be->upload(s->bctx, t->dev, t->hdata, b)))
        return gj_error_set(err, "model", "cannot allocate or upload constant '%s'%s", s->m->values[i].name,
                            onnx_backend_detail(s, msg, sizeof msg));
    if (!t->dev)
        return gj_error_set(err, "model", "cannot allocate input '%s'%s", s->m->values[i].name,
                            onnx_backend_detail(s, msg, sizeof msg));
    s->alloc_bytes += b ? b : 1;
    if (t->storage == ST_CONST)
        s->const_bytes += b;
    t->t.data = t->dev;
    return 0;
}

/* The arena, then every value's data pointer (aliases: their root's). */
static int alloc_buffers(struct onnx_session *s, struct gj_error *err)
{
    char msg[320];
    if (s->arena_bytes) {
        s->arena = s->be->alloc(s->bctx, s->arena_bytes);
        if (!s->arena)
            return gj_error_set(err, "model", "cannot allocate %zu bytes of activations%s", s->arena_bytes,
                                onnx_backend_detail(s, msg, sizeof msg));
        s->alloc_bytes += s->arena_bytes;
    }
    for (size_t i = 0; i < s->n_values; i++) {
        struct tinfo *t = &s->v[i];
        if (const_needed(s, i) || t->storage == ST_INPUT) {
            if (own_buffer(s, i, err))
                return -1;
        } else if (t->storage == ST_ARENA) {
            t->t.data = (char *)s->arena + t->offset;
        }
    }
    for (size_t i = 0; i < s->n_values; i++) {
        size_t off = 0;
        int r = (int)i;
        for (; s->v[r].storage == ST_ALIAS; r = s->v[r].alias_of)
            off += s->v[r].alias_off;
        if (r != (int)i)
            s->v[i].t.data = (char *)s->v[r].t.data + off;
    }
    return 0;
}

/* ---- kernel calls ------------------------------------------------------------------------------ */

/* rn's kernel arguments. */
static int prepare_args(struct onnx_session *s, struct rnode *rn, struct gj_error *err)
{
    rn->ain = calloc((size_t)rn->n_in + 1, sizeof *rn->ain);
    rn->aout = calloc((size_t)rn->n_out + 1, sizeof *rn->aout);
    if (!rn->ain || !rn->aout)
        return gj_error_set(err, "model", "out of memory");
    for (int i = 0; i < rn->n_in; i++)
        rn->ain[i] = rn->in[i] >= 0 ? &s->v[rn->in[i]].t : NULL;
    for (int o = 0; o < rn->n_out; o++)
        rn->aout[o] = rn->out[o] >= 0 ? &s->v[rn->out[o]].t : NULL;
    rn->a = (struct onnx_kargs){ rn->n, &rn->p, rn->n_in, rn->n_out, rn->ain, rn->aout, NULL, 0 };
    for (int i = 0; i < rn->n_in && i < 32; i++)   /* (set before storage: they become ST_CONST) */
        if (rn->in[i] >= 0 && s->v[rn->in[i]].is_const)
            rn->a.const_in |= 1u << i;
    if (!rn->alias && !s->be->kernels[rn->op])
        return gj_error_set(err, "model", "node '%s' (%s): backend '%s' has no kernel for it", rn->n->name,
                            onnx_op_name(rn->op), s->be->name);
    return 0;
}

/* The scratch rn's kernel asks for (the largest of all is kept). */
static int prepare_scratch(struct onnx_session *s, struct rnode *rn, struct gj_error *err)
{
    const struct onnx_backend *be = s->be;
    char msg[320];
    if (!be->scratch_bytes)
        return 0;
    size_t sb = be->scratch_bytes(s->bctx, &rn->a);
    if (sb == (size_t)-1)   /* the backend cannot prepare this node */
        return gj_error_set(err, "model", "node '%s' (%s): backend '%s' cannot run it%s", rn->n->name,
                            onnx_op_name(rn->op), be->name, onnx_backend_detail(s, msg, sizeof msg));
    if (sb > s->scratch_bytes)
        s->scratch_bytes = sb;
    return 0;
}

/* One scratch buffer for all kernels, once the limit (which covers scratch too: known only
 * now that every node has said what it needs) allows it. */
static int alloc_scratch(struct onnx_session *s, size_t max_bytes, int batch, struct gj_error *err)
{
    char msg[320];
    if (max_bytes && s->alloc_bytes + s->scratch_bytes > max_bytes)
        return gj_error_set(err, "batch", "the model needs %zu bytes of buffers at batch %d (%zu of them "
                            "scratch); the limit is %zu", s->alloc_bytes + s->scratch_bytes, batch,
                            s->scratch_bytes, max_bytes);
    if (!s->scratch_bytes)
        return 0;
    s->scratch = s->be->alloc(s->bctx, s->scratch_bytes);
    if (!s->scratch)
        return gj_error_set(err, "model", "cannot allocate %zu bytes of scratch%s", s->scratch_bytes,
                            onnx_backend_detail(s, msg, sizeof msg));
    s->alloc_bytes += s->scratch_bytes;
    for (size_t k = 0; k < s->n_r; k++)
        s->r[k].a.scratch = s->scratch;
    return 0;
}

int onnx_plan(struct onnx_session *s, size_t max_bytes, int batch, struct gj_error *err)
{
    assign_storage(s);
    for (size_t k = 0; k < s->n_r; k++)   /* (the Concat and layout plans ask the backend about calls) */
        if (prepare_args(s, &s->r[k], err))
            return -1;
    onnx_plan_concats(s);
    extend_lifetimes(s);
    if (plan_arena(s, err) || check_limit(s, max_bytes, batch, err) || alloc_buffers(s, err))
        return -1;
    onnx_plan_layouts(s);
    for (size_t k = 0; k < s->n_r; k++)
        if (prepare_scratch(s, &s->r[k], err))
            return -1;
    return alloc_scratch(s, max_bytes, batch, err);
}

void onnx_plan_free(struct onnx_session *s)
{
    if (!s->bctx)
        return;
    for (size_t i = 0; i < s->n_values; i++) {
        if (s->v[i].dev) {
            s->be->free(s->bctx, s->v[i].dev);
            s->v[i].dev = NULL;
        }
    }
    if (s->arena)
        s->be->free(s->bctx, s->arena);
    if (s->scratch)
        s->be->free(s->bctx, s->scratch);
    s->arena = s->scratch = NULL;
}
