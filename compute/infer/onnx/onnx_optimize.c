/*
 * onnx_optimize.c — what a session does to the graph once shapes are known:
 *   constant folding: a node whose inputs are all constants (or a Shape) is evaluated once
 *     on the host with the CPU kernels, so shape arithmetic never runs per call;
 *   dead-code elimination: nodes no graph output needs are dropped (consumers counted);
 *   fusions: a BatchNormalization after a Conv is folded into the Conv's weights and bias,
 *     ReLU is fused into Conv, Gemm, Add and BatchNormalization;
 *   compaction of the runtime node list to the nodes that remain.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_exec.h"

/* ---- constant folding ------------------------------------------------------------------ */

#define FOLD_MAX_INPUTS 4096   /* Concat's limit (onnx_ops.c) */

/* Host buffers for rn's outputs (owned by their values), as the tensors the kernel writes. */
static int host_outputs(struct onnx_session *s, const struct rnode *rn, struct onnx_tensor *to,
                        struct onnx_tensor **outs, struct gj_error *err)
{
    for (int k = 0; k < rn->n_out; k++) {
        outs[k] = NULL;
        if (rn->out[k] < 0)
            continue;
        struct tinfo *ti = &s->v[rn->out[k]];
        /* folded values count against the session's limit before they are computed */
        s->fold_bytes += onnx_tensor_bytes(&ti->t);
        if (s->max_bytes && s->fold_bytes > s->max_bytes)
            return gj_error_set(err, "model", "node '%s' (%s): its folded constants take %zu bytes, over the "
                                "session's limit of %zu", rn->n->name, onnx_op_name(rn->op), s->fold_bytes,
                                s->max_bytes);
        ti->hdata = malloc(onnx_tensor_bytes(&ti->t) + 8);
        if (!ti->hdata)
            return gj_error_set(err, "model", "out of memory while folding constants");
        ti->own_hdata = 1;
        to[k] = ti->t;
        to[k].data = ti->hdata;
        outs[k] = &to[k];
    }
    return 0;
}

/* rn's CPU kernel on the host, with the scratch it asks for. */
static int host_kernel(const struct rnode *rn, const struct onnx_tensor *const *ins, struct onnx_tensor *const *outs)
{
    struct onnx_kargs a = { rn->n, &rn->p, rn->n_in, rn->n_out, ins, outs, NULL, 0 };
    struct onnx_backend_ctx *h = onnx_cpu_host_ctx();
    size_t sb = onnx_backend_cpu.scratch_bytes ? onnx_backend_cpu.scratch_bytes(h, &a) : 0;
    a.scratch = sb ? malloc(sb) : NULL;
    int rc = sb && !a.scratch ? -1 : onnx_backend_cpu.kernels[rn->op](h, &a);
    free(a.scratch);
    return rc;
}

int onnx_fold(struct onnx_session *s, struct rnode *rn, struct gj_error *err)
{
    const struct onnx_tensor *ins[FOLD_MAX_INPUTS + 1];
    struct onnx_tensor *outs[4], to[4], tin[64];
    if (rn->n_in > FOLD_MAX_INPUTS || rn->n_out > 4)
        return gj_error_set(err, "model", "node '%s' (%s): too many inputs to fold", rn->n->name,
                            onnx_op_name(rn->op));
    struct onnx_tensor *tmp = rn->n_in > 64 ? malloc(rn->n_in * sizeof *tmp) : tin;
    if (!tmp)
        return gj_error_set(err, "model", "out of memory");
    /* the kernel sees the inputs' host values */
    for (int k = 0; k < rn->n_in; k++) {
        ins[k] = NULL;
        if (rn->in[k] < 0)
            continue;
        tmp[k] = s->v[rn->in[k]].t;
        tmp[k].data = s->v[rn->in[k]].hdata;
        ins[k] = &tmp[k];
    }
    int rc = host_outputs(s, rn, to, outs, err);
    if (rc == 0 && (rc = host_kernel(rn, ins, outs)) != 0)
        gj_error_set(err, "model", "node '%s' (%s): evaluation failed (invalid constant input, e.g. an index "
                     "out of range)", rn->n->name, onnx_op_name(rn->op));
    if (tmp != tin)
        free(tmp);
    if (rc)
        return -1;
    for (int k = 0; k < rn->n_out; k++)
        if (rn->out[k] >= 0)
            s->v[rn->out[k]].is_const = 1;
    return 0;
}

/* ---- dead-code elimination ------------------------------------------------------------- */

/* Backwards over the schedule: a node none of whose outputs is needed dies; a live node's
 * inputs are needed, and each read counts as a consumer. */
static int eliminate_dead(struct onnx_session *s, struct gj_error *err)
{
    const onnx_model *m = s->m;
    char *needed = calloc(m->n_values + 1, 1);
    if (!needed)
        return gj_error_set(err, "model", "out of memory");
    for (size_t i = 0; i < m->n_outputs; i++)
        needed[m->outputs[i]] = 1;
    for (size_t k = s->n_r; k-- > 0;) {
        struct rnode *rn = &s->r[k];
        if (rn->dead)
            continue;
        int use = 0;
        for (int o = 0; o < rn->n_out; o++)
            if (rn->out[o] >= 0 && needed[rn->out[o]])
                use = 1;
        if (!use) {
            rn->dead = 1;
            continue;
        }
        for (int i = 0; i < rn->n_in; i++)
            if (rn->in[i] >= 0) {
                needed[rn->in[i]] = 1;
                s->v[rn->in[i]].n_consumers++;
            }
    }
    free(needed);
    return 0;
}

/* ---- fusions ----------------------------------------------------------------------------- */

/* Gives constant value vi new host data (owned by the session). */
static void replace_hdata(struct tinfo *t, float *data)
{
    if (t->own_hdata)
        free(t->hdata);
    t->hdata = data;
    t->own_hdata = 1;
}

static int const_f32(const struct onnx_session *s, int vi)
{
    return vi >= 0 && s->v[vi].is_const && s->v[vi].t.elem == ONNX_ELEM_FLOAT;
}

/* Runs one fusion over the schedule: for each live node of `op` whose first input comes
 * from an earlier node, is read by this node alone and is not a graph output, asks
 * fuse(s, node, producer) whether the producer absorbs the node (1: yes; 0: leave it; -1:
 * error). An absorbed node dies and its producer writes the node's output instead. */
typedef int (*fuse_fn)(struct onnx_session *s, struct rnode *rn, struct rnode *pr, struct gj_error *err);

static int fuse_into_producers(struct onnx_session *s, int op, fuse_fn fuse, struct gj_error *err)
{
    const onnx_model *m = s->m;
    int *prod = malloc((m->n_values + 1) * sizeof(int));   /* value -> producing node */
    if (!prod)
        return gj_error_set(err, "model", "out of memory");
    for (size_t i = 0; i < m->n_values; i++)
        prod[i] = -1;
    for (size_t k = 0; k < s->n_r; k++) {
        struct rnode *rn = &s->r[k];
        if (rn->dead)
            continue;
        for (int o = 0; o < rn->n_out; o++)
            if (rn->out[o] >= 0)
                prod[rn->out[o]] = (int)k;
        if (rn->op != op)
            continue;
        int x = rn->n_in > 0 ? rn->in[0] : -1;
        if (x < 0 || prod[x] < 0 || s->v[x].n_consumers != 1 || m->values[x].is_output)
            continue;
        int pk = prod[x];
        struct rnode *pr = &s->r[pk];
        int r = fuse(s, rn, pr, err);
        if (r < 0) {
            free(prod);
            return -1;
        }
        if (r == 0)
            continue;
        pr->fused_out[0] = rn->out[0];
        pr->out = pr->fused_out;
        pr->out_fused = 1;
        s->v[x].n_consumers = 0;
        prod[rn->out[0]] = pk;
        rn->dead = 1;
    }
    free(prod);
    return 0;
}

/* Value v is a float constant that only this fold reads and nobody gets back. */
static int private_const_f32(const struct onnx_session *s, int v)
{
    return const_f32(s, v) && s->v[v].n_consumers == 1 && !s->m->values[v].is_output;
}

/* Whether BatchNormalization rn can fold into its producer pr: a 2-D Conv not yet fused with
 * anything, constant BN parameters, a weight and a bias slot of the Conv's own. */
static int bn_foldable(const struct onnx_session *s, const struct rnode *rn, const struct rnode *pr)
{
    if (rn->n_out != 1 || rn->n_in < 5)
        return 0;
    if (pr->op != ONNX_OP_CONV || pr->p.fused_relu || pr->n_out != 1 || pr->in_fused)
        return 0;
    int wv = pr->in[1], bv = pr->n_in > 2 ? pr->in[2] : -1;
    int ok = private_const_f32(s, wv);
    for (int i = 1; i < 5; i++)
        ok = ok && const_f32(s, rn->in[i]);
    /* the value that will hold the new bias must be ours alone */
    ok = ok && private_const_f32(s, bv >= 0 ? bv : rn->in[2]);
    const struct tinfo *x = &s->v[rn->in[0]];
    if (!ok || x->t.rank != 4)
        return 0;
    int64_t M = s->v[wv].t.dims[0];
    return M == x->t.dims[1] && s->v[rn->in[1]].t.numel == M;
}

/* Conv -> BatchNormalization, where every BN parameter is a constant read by no other
 * node: the BN is folded into the Conv (for every backend), saving one pass over the
 * activations:
 *   W'[c] = W[c] * sc[c],  b'[c] = (b[c] - mean[c]) * sc[c] + beta[c],  sc = scale / sqrt(var + eps).
 * The new bias takes the place of the Conv's bias, or of the BN's beta when the Conv has none. */
static int fold_batchnorm(struct onnx_session *s, struct rnode *rn, struct rnode *pr, struct gj_error *err)
{
    if (!bn_foldable(s, rn, pr))
        return 0;
    int wv = pr->in[1], bv = pr->n_in > 2 ? pr->in[2] : -1, beta = rn->in[2];
    int nbv = bv >= 0 ? bv : beta;
    const struct onnx_tensor *w = &s->v[wv].t;
    int64_t M = w->dims[0], K = w->numel / (M > 0 ? M : 1);
    float *nw = malloc((size_t)w->numel * sizeof(float) + 4);
    float *nb = malloc((size_t)M * sizeof(float) + 4);
    if (!nw || !nb) {
        free(nw);
        free(nb);
        return gj_error_set(err, "model", "out of memory");
    }
    const float *W = s->v[wv].hdata, *B = bv >= 0 ? s->v[bv].hdata : NULL;
    const float *sc = s->v[rn->in[1]].hdata, *be = s->v[beta].hdata;
    const float *mean = s->v[rn->in[3]].hdata, *var = s->v[rn->in[4]].hdata;
    for (int64_t c = 0; c < M; c++) {
        float f = sc[c] / sqrtf(var[c] + rn->p.epsilon);
        for (int64_t i = 0; i < K; i++)
            nw[c * K + i] = W[c * K + i] * f;
        nb[c] = ((B ? B[c] : 0.0f) - mean[c]) * f + be[c];
    }
    replace_hdata(&s->v[wv], nw);
    replace_hdata(&s->v[nbv], nb);
    if (bv >= 0)
        s->v[beta].n_consumers--;
    for (int i = 1; i < 5; i++)
        if (i != 2)
            s->v[rn->in[i]].n_consumers--;
    /* the Conv now reads the new bias */
    pr->fused_in[0] = pr->in[0];
    pr->fused_in[1] = wv;
    pr->fused_in[2] = nbv;
    pr->in = pr->fused_in;
    pr->n_in = 3;
    pr->in_fused = 1;
    return 1;
}

/* X -> Relu where X is Conv/Gemm/Add/BatchNormalization: X applies the ReLU itself. */
static int fuse_relu(struct onnx_session *s, struct rnode *rn, struct rnode *pr, struct gj_error *err)
{
    if ((pr->op != ONNX_OP_CONV && pr->op != ONNX_OP_GEMM && pr->op != ONNX_OP_ADD &&
         pr->op != ONNX_OP_BATCHNORM) || pr->p.fused_relu || pr->n_out != 1 ||
        s->v[rn->in[0]].t.elem != ONNX_ELEM_FLOAT)
        return 0;
    pr->p.fused_relu = 1;
    return 1;
}

/* The runtime node list without the dead nodes (folded, unused, fused away). */
static void compact(struct onnx_session *s)
{
    size_t w = 0;
    for (size_t k = 0; k < s->n_r; k++) {
        if (s->r[k].dead)
            continue;
        s->r[w] = s->r[k];
        if (s->r[w].out_fused)
            s->r[w].out = s->r[w].fused_out;
        if (s->r[w].in_fused)
            s->r[w].in = s->r[w].fused_in;
        w++;
    }
    for (size_t k = w; k < s->n_r; k++)
        memset(&s->r[k], 0, sizeof s->r[k]);
    s->n_r = w;
}

int onnx_optimize(struct onnx_session *s, struct gj_error *err)
{
    if (eliminate_dead(s, err) || fuse_into_producers(s, ONNX_OP_BATCHNORM, fold_batchnorm, err) ||
        fuse_into_producers(s, ONNX_OP_RELU, fuse_relu, err))
        return -1;
    compact(s);
    return 0;
}
