/*
 * onnx_session.c — a session's life: creation in phases, runs, teardown. The executor is
 * backend-agnostic; it calls the backend only through struct onnx_backend.
 *
 * Session creation, for one batch size (the phases' files: onnx_exec.h):
 *   1. the options are checked and the backend started;
 *   2. values: initializers are constants, inputs get the batch size;
 *   3. a topological schedule of the nodes (onnx_schedule.c);
 *   4. shape inference in that order (onnx_shape.c); every node whose inputs are all known at
 *      this point (initializers, Constant, Shape of a known shape, ...) is evaluated once on
 *      the host with the CPU kernels (constant folding, onnx_optimize.c);
 *   5. outputs are checked against their declared types;
 *   6. dead nodes are dropped, a BatchNormalization after a Conv is folded into the Conv's
 *      weights and bias, ReLU is fused into Conv/Gemm/Add/BatchNormalization (onnx_optimize.c);
 *   7. the buffer plan (onnx_plan.c): view ops (Reshape, Flatten, Squeeze, Unsqueeze,
 *      Identity, Dropout) alias their input, every intermediate gets an offset in one arena,
 *      and tensors whose lifetimes do not overlap share bytes (greedy, largest first).
 * Running is then a walk over prepared kernel calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if ONNX_WITH_CUDA
#include <cudnn.h>
#endif
#include "infer/onnx/onnx_exec.h"

/* ---- the backend ------------------------------------------------------------------------- */

/* The backend of that name when it can run here, else NULL with the reason in why. */
static const struct onnx_backend *find_backend(const char *name, struct gj_error *why)
{
    if (!name || strcmp(name, "cpu") == 0)
        return &onnx_backend_cpu;
    if (strcmp(name, "cuda") == 0) {
#if ONNX_WITH_CUDA
        return onnx_cuda_available(why) ? &onnx_backend_cuda : NULL;
#else
        gj_error_set(why, "backend", "this build has no CUDA backend (built without CUDA or cuDNN)");
        return NULL;
#endif
    }
    gj_error_set(why, "backend", "unknown backend '%s' (cpu or cuda)", name);
    return NULL;
}

size_t onnx_cudnn_version(void)
{
#if ONNX_WITH_CUDA
    return cudnnGetVersion();
#else
    return 0;
#endif
}

int onnx_backend_available(const char *backend, struct gj_error *why)
{
    return find_backend(backend, why) != NULL;
}

/* The options' ranges and the backend that will run them, or NULL with err. */
static const struct onnx_backend *check_options(const struct onnx_session_options *opt, struct gj_error *err)
{
    if (!opt->no_batch && (opt->batch < 1 || opt->batch > 65536))
        return gj_error_set(err, "batch", "batch size %d is out of range (1 to 65536)", opt->batch), NULL;
    if (opt->no_batch && opt->batch != 0 && opt->batch != 1)
        return gj_error_set(err, "batch", "batch size %d for a model without a batch dimension (no_batch): "
                            "0 or 1", opt->batch), NULL;
    if (opt->threads < 1 || opt->threads > 256)
        return gj_error_set(err, "threads", "thread count %d is out of range (1 to 256)", opt->threads), NULL;
    if (opt->precision < ONNX_PRECISION_FP32 || opt->precision > ONNX_PRECISION_FP16)
        return gj_error_set(err, "precision", "precision %d is not one of FP32 (0), TF32 (1), FP16 (2)",
                            opt->precision), NULL;
    if (opt->device < 0)
        return gj_error_set(err, "device", "device ordinal %d is negative", opt->device), NULL;
    struct gj_error why = { 0 };
    const struct onnx_backend *be = find_backend(opt->backend, &why);
    if (!be)
        return gj_error_set(err, "backend", "backend '%s': %s", opt->backend, why.message), NULL;
    if (be == &onnx_backend_cpu && opt->precision != ONNX_PRECISION_FP32)
        return gj_error_set(err, "precision", "the cpu backend computes in FP32 only; TF32 and FP16 "
                            "need the cuda backend"), NULL;
    return be;
}

/* ---- creation --------------------------------------------------------------------------- */

static onnx_session *session_alloc(const onnx_model *m, const struct onnx_backend *be,
                                   const struct onnx_session_options *opt, struct gj_error *err)
{
    onnx_session *s = calloc(1, sizeof *s);
    if (!s)
        return gj_error_set(err, "model", "out of memory"), NULL;
    s->m = m;
    s->be = be;
    s->max_bytes = opt->max_bytes;
    /* per-op timing synchronises after every kernel: impossible inside a graph capture */
    s->profile = opt->profile && !opt->cuda_graphs;
    s->n_values = m->n_values;
    s->v = calloc(m->n_values + 1, sizeof *s->v);
    s->r = calloc(m->n_nodes + 1, sizeof *s->r);
    s->in_desc = calloc(m->n_inputs + 1, sizeof *s->in_desc);
    s->out_desc = calloc(m->n_outputs + 1, sizeof *s->out_desc);
    if (!s->v || !s->r || !s->in_desc || !s->out_desc) {
        onnx_session_free(s);
        return gj_error_set(err, "model", "out of memory"), NULL;
    }
    return s;
}

static int start_backend(onnx_session *s, const struct onnx_session_options *opt, struct gj_error *err)
{
    struct gj_error why = { 0 };
    if (s->be->init(&s->bctx, opt, &why)) {
        s->bctx = NULL;
        return gj_error_set(err, why.field[0] ? why.field : "backend", "backend '%s' failed to start: %s",
                            s->be->name, why.message);
    }
    return 0;
}

/* Initializers are constants; inputs get their shapes (onnx_io.c). */
static int bind_values(onnx_session *s, const struct onnx_session_options *opt, struct gj_error *err)
{
    const onnx_model *m = s->m;
    for (size_t i = 0; i < m->n_values; i++) {
        const struct onnx_value *mv = &m->values[i];
        struct tinfo *t = &s->v[i];
        t->def = -1;
        t->last = -1;
        if (mv->init) {
            t->t = *mv->init;
            t->t.data = NULL;
            t->hdata = mv->init->data;
            t->is_const = 1;
        }
    }
    return onnx_bind_inputs(s, opt, err);
}

/* Node nd as runtime node rn: its shapes, then folded when its inputs are all constants. */
static int infer_node(onnx_session *s, struct rnode *rn, const struct onnx_node *nd, struct gj_error *err)
{
    *rn = (struct rnode){ .n = nd, .op = nd->op, .p = nd->p, .n_in = nd->n_in, .n_out = nd->n_out,
                          .in = nd->in, .out = nd->out };
    if (!s->be->kernels[nd->op] && !onnx_backend_cpu.kernels[nd->op])
        return gj_error_set(err, "model", "node '%s' (%s): no kernel in backend '%s'", nd->name,
                            onnx_op_name(nd->op), s->be->name);
    if (onnx_infer_shape(s->m, s->v, rn, err))
        return -1;
    int all_const = 1;
    for (int i = 0; i < rn->n_in; i++)
        if (rn->in[i] >= 0 && !s->v[rn->in[i]].is_const)
            all_const = 0;
    if (rn->op == ONNX_OP_SHAPE || all_const) {
        if (onnx_fold(s, rn, err))
            return -1;
        rn->dead = 1;
        s->n_folded++;
    }
    return 0;
}

/* Shape inference and constant folding, in schedule order. */
static int infer_graph(onnx_session *s, struct gj_error *err)
{
    const onnx_model *m = s->m;
    int *order = malloc((m->n_nodes + 1) * sizeof(int));
    if (!order)
        return gj_error_set(err, "model", "out of memory");
    int rc = onnx_schedule(m, order, err);
    for (size_t k = 0; rc == 0 && k < m->n_nodes; k++)
        rc = infer_node(s, &s->r[s->n_r++], &m->nodes[order[k]], err);
    free(order);
    return rc;
}

/* The outputs' computed types against their declared ones; the caller reads each. */
static int bind_outputs(onnx_session *s, struct gj_error *err)
{
    const onnx_model *m = s->m;
    for (size_t i = 0; i < m->n_outputs; i++) {
        int vi = m->outputs[i];
        const struct onnx_value *mv = &m->values[vi];
        const struct onnx_tensor *t = &s->v[vi].t;
        if (mv->elem && mv->elem != t->elem)
            return gj_error_set(err, "model", "output '%s' is declared as %s but computes %s", mv->name,
                                onnx_elem_name(mv->elem), onnx_elem_name(t->elem));
        s->out_desc[i] = m->out_desc[i];
        s->out_desc[i].elem_type = t->elem;
        s->out_desc[i].rank = t->rank;
        memcpy(s->out_desc[i].dims, t->dims, sizeof s->out_desc[i].dims);
        s->v[vi].n_consumers++;
    }
    return 0;
}

/* What the backend chose for each Conv, once the plan has made its choices (provenance). */
static int summarize_convolutions(onnx_session *s, struct gj_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_r; i++)
        n += s->r[i].op == ONNX_OP_CONV && !s->r[i].dead;
    char **lines = n ? calloc(n, sizeof *lines) : NULL;
    size_t k = 0;
    int ok = !n || lines;
    for (size_t i = 0; ok && i < s->n_r; i++) {
        const struct rnode *rn = &s->r[i];
        if (rn->op != ONNX_OP_CONV || rn->dead)
            continue;
        char shape[256], impl[128] = "unknown (the backend does not say)";
        onnx_conv_shape_text(&rn->a, shape, sizeof shape);
        if (s->be->conv_impl)
            s->be->conv_impl(s->bctx, &rn->a, impl, sizeof impl);
        size_t bytes = strlen(shape) + strlen(impl) + 3;
        ok = (lines[k] = malloc(bytes)) != NULL;
        if (ok)
            snprintf(lines[k++], bytes, "%s: %s", shape, impl);
    }
    s->convolutions = ok ? onnx_conv_summary(lines, k) : NULL;
    for (size_t i = 0; i < k; i++)
        free(lines[i]);
    free(lines);
    return s->convolutions ? 0 : gj_error_set(err, "", "out of memory");
}

onnx_session *onnx_session_create(const onnx_model *m, const struct onnx_session_options *opt,
                                  struct gj_error *err)
{
    if (!m || !opt)
        return gj_error_set(err, "model", "no model or options"), NULL;
    const struct onnx_backend *be = check_options(opt, err);
    if (!be)
        return NULL;
    onnx_session *s = session_alloc(m, be, opt, err);
    if (!s)
        return NULL;
    int batch = opt->no_batch ? 1 : opt->batch;
    if (start_backend(s, opt, err) || bind_values(s, opt, err) || infer_graph(s, err) ||
        bind_outputs(s, err) || onnx_optimize(s, err) || onnx_plan(s, opt->max_bytes, batch, err) ||
        summarize_convolutions(s, err)) {
        onnx_session_free(s);
        return NULL;
    }
    return s;
}

void onnx_session_free(onnx_session *s)
{
    if (!s)
        return;
    onnx_plan_free(s);
    for (size_t i = 0; i < s->n_values; i++)
        if (s->v && s->v[i].own_hdata)
            free(s->v[i].hdata);
    for (size_t i = 0; i < s->n_r; i++) {
        free(s->r[i].ain);
        free(s->r[i].aout);
    }
    free(s->r);
    free(s->v);
    free(s->in_desc);
    free(s->out_desc);
    if (s->bctx)
        s->be->fini(s->bctx);
    free(s);
}

/* ---- running ------------------------------------------------------------------------------ */

static int upload_inputs(onnx_session *s, const void *const *inputs, struct gj_error *err)
{
    const onnx_model *m = s->m;
    char msg[320];
    for (size_t i = 0; i < m->n_inputs; i++) {
        struct tinfo *t = &s->v[m->inputs[i]];
        if (!inputs || !inputs[i])
            return gj_error_set(err, "inputs", "input '%s' is missing", m->values[m->inputs[i]].name);
        if (onnx_check_input_values(s, i, inputs[i], err))
            return -1;
        if (s->be->upload(s->bctx, t->dev, inputs[i], onnx_tensor_bytes(&t->t)))
            return gj_error_set(err, "model", "cannot upload input '%s'%s", m->values[m->inputs[i]].name,
                                onnx_backend_detail(s, msg, sizeof msg));
    }
    return 0;
}

/* Every output into its buffer; all_outputs = 0: the outputs without one are dropped. */
static int download_outputs(onnx_session *s, void *const *outputs, int all_outputs, struct gj_error *err)
{
    const onnx_model *m = s->m;
    char msg[320];
    for (size_t i = 0; i < m->n_outputs; i++) {
        const struct tinfo *t = &s->v[m->outputs[i]];
        if ((!outputs || !outputs[i]) && !all_outputs)
            continue;
        if (!outputs || !outputs[i])
            return gj_error_set(err, "outputs", "no buffer for output %zu", i);
        if (s->be->download(s->bctx, outputs[i], t->t.data, onnx_tensor_bytes(&t->t)))
            return gj_error_set(err, "model", "cannot download output '%s'%s", m->values[m->outputs[i]].name,
                                onnx_backend_detail(s, msg, sizeof msg));
    }
    return 0;
}

/* One kernel call; profiled: waits for it and adds its time to its operator's. */
static int run_node(onnx_session *s, const struct rnode *rn)
{
    struct timespec t0, t1;
    if (s->profile)
        clock_gettime(CLOCK_MONOTONIC, &t0);
    if (s->be->kernels[rn->op](s->bctx, &rn->a))
        return -1;
    if (s->profile) {
        if (s->be->sync)
            s->be->sync(s->bctx);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        s->prof_s[rn->op] += (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        s->prof_n[rn->op]++;
    }
    return 0;
}

/* The schedule's kernels, between the backend's begin_run and end_run (a replayed graph runs
 * none of them). */
static int run_kernels(onnx_session *s, struct gj_error *err)
{
    char msg[320];
    int replayed = 0;
    if (s->be->begin_run && (replayed = s->be->begin_run(s->bctx)) < 0)
        return gj_error_set(err, "model", "the backend cannot start the run%s",
                            onnx_backend_detail(s, msg, sizeof msg));
    for (size_t k = 0; k < s->n_r && !replayed; k++) {
        const struct rnode *rn = &s->r[k];
        if (rn->alias || run_node(s, rn) == 0)
            continue;
        const char *d = onnx_backend_detail(s, msg, sizeof msg);
        if (s->be->end_run)
            s->be->end_run(s->bctx, 1);
        return gj_error_set(err, "model", "node '%s' (%s): the kernel failed%s", rn->n->name, onnx_op_name(rn->op),
                            d[0] ? d : " (e.g. an index out of range)");
    }
    if (!replayed && s->be->end_run && s->be->end_run(s->bctx, 0))
        return gj_error_set(err, "model", "the backend failed to finish the run%s",
                            onnx_backend_detail(s, msg, sizeof msg));
    if (s->be->sync && s->be->sync(s->bctx))
        return gj_error_set(err, "model", "the backend failed%s", onnx_backend_detail(s, msg, sizeof msg));
    return 0;
}

int onnx_session_exec(onnx_session *s, const void *const *inputs, void *const *outputs, int all_outputs,
                      struct gj_error *err)
{
    if (upload_inputs(s, inputs, err) || run_kernels(s, err) || download_outputs(s, outputs, all_outputs, err))
        return -1;
    return 0;
}

int onnx_session_run(onnx_session *s, const void *const *inputs, void *const *outputs,
                     struct gj_error *err)
{
    return onnx_session_exec(s, inputs, outputs, 1, err);
}

const struct onnx_io_desc *onnx_session_input(const onnx_session *s, size_t i)
{
    return i < s->m->n_inputs ? &s->in_desc[i] : NULL;
}

const struct onnx_io_desc *onnx_session_output(const onnx_session *s, size_t i)
{
    return i < s->m->n_outputs ? &s->out_desc[i] : NULL;
}

size_t onnx_session_input_bytes(const onnx_session *s, size_t i)
{
    return i < s->m->n_inputs ? onnx_tensor_bytes(&s->v[s->m->inputs[i]].t) : 0;
}

size_t onnx_session_output_bytes(const onnx_session *s, size_t i)
{
    return i < s->m->n_outputs ? onnx_tensor_bytes(&s->v[s->m->outputs[i]].t) : 0;
}

void onnx_session_get_stats(const onnx_session *s, struct onnx_session_stats *st)
{
    st->n_nodes_run = s->n_run;
    st->n_nhwc = 0;
    for (size_t i = 0; i < s->n_values; i++)
        st->n_nhwc += s->v[i].t.layout == ONNX_LAYOUT_NHWC;
    st->n_nodes_folded = s->n_folded;
    st->arena_bytes = s->arena_bytes;
    st->naive_bytes = s->naive_bytes;
    st->const_bytes = s->const_bytes;
}

_Static_assert(ONNX_OP_COUNT <= ONNX_PROFILE_MAX_OPS, "a profile holds every operator");

size_t onnx_session_profile(const onnx_session *s, struct onnx_op_profile *prof, size_t cap)
{
    size_t n = 0;
    for (int i = 0; s->profile && i < ONNX_OP_COUNT && n < cap; i++)
        if (s->prof_n[i])
            prof[n++] = (struct onnx_op_profile){ onnx_op_name(i), s->prof_n[i], s->prof_s[i] };
    return n;
}

const char *onnx_session_convolutions(const onnx_session *s)
{
    return s && s->convolutions ? s->convolutions : "";
}

size_t onnx_session_device_bytes(const onnx_session *s)
{
    if (!s || s->be->host_memory)
        return 0;
    return s->alloc_bytes + (s->be->device_bytes ? s->be->device_bytes(s->bctx) : 0);
}
