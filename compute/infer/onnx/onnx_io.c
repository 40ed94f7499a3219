/*
 * onnx_io.c — a session's graph inputs and outputs: their shapes when the session is created
 * (a batch dimension or none, sizes given for symbolic dimensions), the checks of the values a
 * run is given (BOOL bytes, STRING elements), and runs on named tensors (onnx_model.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "infer/onnx/onnx_exec.h"

/* ---- shapes at creation ------------------------------------------------------------------ */

/* The entry of opt->input_shapes for input `name`, or NULL. */
static const struct onnx_io_desc *given_shape(const struct onnx_session_options *opt, const char *name)
{
    for (size_t k = 0; opt->input_shapes && k < opt->n_input_shapes; k++)
        if (opt->input_shapes[k].name && strcmp(opt->input_shapes[k].name, name) == 0)
            return &opt->input_shapes[k];
    return NULL;
}

/* Dimension k of input mv: the batch, the model's size, or the size given for it. */
static int input_dim(const struct onnx_value *mv, const struct onnx_io_desc *g, int k, const struct onnx_session_options *opt,
                     int64_t *d, struct gj_error *err)
{
    int64_t want = g && g->dims[k] >= 0 ? g->dims[k] : -1;
    *d = mv->dims[k];
    if (k == 0 && !opt->no_batch) {
        if (*d >= 0 && *d != opt->batch)
            return gj_error_set(err, "batch", "input '%s' has a fixed batch dimension of %lld; this session asks "
                                "for %d", mv->name, (long long)*d, opt->batch);
        *d = opt->batch;
        want = want >= 0 && want != opt->batch ? want : -1;
    }
    if (want >= 0 && *d >= 0 && want != *d)
        return gj_error_set(err, "input_shapes", "input '%s': dimension %d is %lld in the model; %lld was given",
                            mv->name, k, (long long)*d, (long long)want);
    if (*d < 0 && want > ONNX_MAX_ELEMS)
        return gj_error_set(err, "input_shapes", "input '%s': dimension %d of %lld is too large", mv->name, k,
                            (long long)want);
    if (*d < 0)
        *d = want;
    if (*d < 0)
        return gj_error_set(err, "input_shapes", "input '%s' has a symbolic dimension %d%s; give its size in "
                            "input_shapes", mv->name, k, !opt->no_batch && k ? " besides the batch" : "");
    return 0;
}

/* Graph input i's shape for this session. */
static int bind_input(struct onnx_session *s, size_t i, const struct onnx_session_options *opt, struct gj_error *err)
{
    int vi = s->m->inputs[i];
    const struct onnx_value *mv = &s->m->values[vi];
    const struct onnx_io_desc *g = given_shape(opt, mv->name);
    int64_t d[ONNX_MAX_RANK] = { 0 };
    if (mv->rank == 0 && !opt->no_batch)
        return gj_error_set(err, "model", "input '%s' is a scalar; inputs need a batch dimension (or no_batch)",
                            mv->name);
    if (g && g->rank != mv->rank)
        return gj_error_set(err, "input_shapes", "input '%s' has rank %d in the model; the shape given has rank %d",
                            mv->name, mv->rank, g->rank);
    for (int k = 0; k < mv->rank; k++)
        if (input_dim(mv, g, k, opt, &d[k], err))
            return -1;
    if (onnx_set_shape(&s->v[vi].t, mv->elem, mv->rank, d))
        return gj_error_set(err, "model", "input '%s' is too large", mv->name);
    s->v[vi].storage = ST_INPUT;
    s->in_desc[i] = s->m->in_desc[i];
    memcpy(s->in_desc[i].dims, d, sizeof d);
    return 0;
}

int onnx_bind_inputs(struct onnx_session *s, const struct onnx_session_options *opt, struct gj_error *err)
{
    for (size_t k = 0; opt->input_shapes && k < opt->n_input_shapes; k++)
        if (!opt->input_shapes[k].name || onnx_session_find_input(s, opt->input_shapes[k].name) < 0)
            return gj_error_set(err, "input_shapes", "input_shapes[%zu] names no input of the model ('%s')", k,
                                opt->input_shapes[k].name ? opt->input_shapes[k].name : "");
    for (size_t i = 0; i < s->m->n_inputs; i++)
        if (bind_input(s, i, opt, err))
            return -1;
    return 0;
}

/* ---- values ---------------------------------------------------------------------------------- */

int onnx_check_input_values(const struct onnx_session *s, size_t i, const void *data, struct gj_error *err)
{
    const struct onnx_tensor *t = &s->v[s->m->inputs[i]].t;
    const char *name = s->m->values[s->m->inputs[i]].name;
    for (int64_t k = 0; t->elem == ONNX_ELEM_BOOL && k < t->numel; k++)
        if (((const uint8_t *)data)[k] > 1)
            return gj_error_set(err, "inputs", "input '%s': element %lld is %u; a BOOL is 0 or 1", name,
                                (long long)k, ((const uint8_t *)data)[k]);
    for (int64_t k = 0; t->elem == ONNX_ELEM_STRING && k < t->numel; k++)
        if (!((const struct onnx_string *)data)[k].data && ((const struct onnx_string *)data)[k].len)
            return gj_error_set(err, "inputs", "input '%s': string %lld has a length but no bytes", name,
                                (long long)k);
    return 0;
}

/* ---- runs on named tensors ------------------------------------------------------------------ */

int onnx_session_find_input(const onnx_session *s, const char *name)
{
    for (size_t i = 0; name && i < s->m->n_inputs; i++)
        if (strcmp(s->m->values[s->m->inputs[i]].name, name) == 0)
            return (int)i;
    return -1;
}

int onnx_session_find_output(const onnx_session *s, const char *name)
{
    for (size_t i = 0; name && i < s->m->n_outputs; i++)
        if (strcmp(s->m->values[s->m->outputs[i]].name, name) == 0)
            return (int)i;
    return -1;
}

/* "[2, 3, 16, 16]" */
static const char *dims_str(int rank, const int64_t *dims, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int k = 0; k < rank && n < len; k++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", k ? ", " : "", (long long)dims[k]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
    return buf;
}

static int refuse(struct gj_error *err, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* An error about what the caller sent: HTTP 400. */
static int refuse(struct gj_error *err, const char *field, const char *fmt, ...)
{
    char msg[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gj_error_set(err, field, "%s", msg);
    if (err)
        err->status = 400;
    return -1;
}

/* Input tensor b against session input i: type, rank, dims, bytes. */
static int check_input(const onnx_session *s, size_t i, const struct onnx_tensor_buf *b, struct gj_error *err)
{
    const struct onnx_io_desc *d = &s->in_desc[i];
    char want[160], got[160];
    size_t bytes = onnx_session_input_bytes(s, i);
    if (b->elem_type != d->elem_type)
        return refuse(err, "inputs", "input '%s' is %s; the model takes %s", b->name, onnx_elem_name(b->elem_type),
                      onnx_elem_name(d->elem_type));
    dims_str(d->rank, d->dims, want, sizeof want);
    if (b->rank != d->rank)
        return refuse(err, "inputs", "input '%s' has rank %d; this session takes rank %d (shape %s)", b->name,
                      b->rank, d->rank, want);
    if (memcmp(b->dims, d->dims, (size_t)d->rank * sizeof d->dims[0]) != 0)
        return refuse(err, "inputs", "input '%s' has shape %s; this session takes %s", b->name,
                      dims_str(b->rank, b->dims, got, sizeof got), want);
    if (b->bytes != bytes)
        return refuse(err, "inputs", "input '%s' has %zu bytes of data; %s %s needs %zu (%zu elements)", b->name,
                      b->bytes, want, onnx_elem_name(d->elem_type), bytes, bytes / onnx_elem_size(d->elem_type));
    if (!b->data && bytes)
        return refuse(err, "inputs", "input '%s' has no data", b->name);
    if (onnx_check_input_values(s, i, b->data, err) == 0)
        return 0;
    if (err)
        err->status = 400;
    return -1;
}

/* The inputs by position; each model input exactly once. */
static int map_inputs(const onnx_session *s, const struct onnx_tensor_buf *in, size_t n, const void **ins,
                      struct gj_error *err)
{
    for (size_t i = 0; i < s->m->n_inputs; i++)
        ins[i] = NULL;
    for (size_t k = 0; k < n; k++) {
        int i = onnx_session_find_input(s, in[k].name);
        if (i < 0)
            return refuse(err, "inputs", "the model has no input '%s'", in[k].name ? in[k].name : "(no name)");
        if (ins[i])
            return refuse(err, "inputs", "input '%s' is given twice", in[k].name);
        if (check_input(s, (size_t)i, &in[k], err))
            return -1;
        ins[i] = in[k].data ? in[k].data : "";
    }
    for (size_t i = 0; i < s->m->n_inputs; i++)
        if (!ins[i])
            return refuse(err, "inputs", "input '%s' is missing", s->in_desc[i].name);
    return 0;
}

/* The requested outputs by position (NULL: not requested), each with room for its data. */
static int map_outputs(const onnx_session *s, const struct onnx_tensor_buf *out, size_t n, void **outs,
                       struct gj_error *err)
{
    for (size_t i = 0; i < s->m->n_outputs; i++)
        outs[i] = NULL;
    for (size_t k = 0; k < n; k++) {
        int i = onnx_session_find_output(s, out[k].name);
        if (i < 0)
            return refuse(err, "outputs", "the model has no output '%s'", out[k].name ? out[k].name : "(no name)");
        if (outs[i])
            return refuse(err, "outputs", "output '%s' is requested twice", out[k].name);
        size_t need = onnx_session_output_bytes(s, (size_t)i);
        if (out[k].bytes < need || (!out[k].data && need))
            return refuse(err, "outputs", "output '%s' needs %zu bytes; the buffer has %zu", out[k].name, need,
                          out[k].data ? out[k].bytes : 0);
        outs[i] = out[k].data ? out[k].data : (void *)"";
    }
    return 0;
}

int onnx_session_run_named(onnx_session *s, const struct onnx_tensor_buf *inputs, size_t n_inputs,
                           struct onnx_tensor_buf *outputs, size_t n_outputs, struct gj_error *err)
{
    const void *ins[ONNX_MAX_IO];
    void *outs[ONNX_MAX_IO];
    if (map_inputs(s, inputs, n_inputs, ins, err) || map_outputs(s, outputs, n_outputs, outs, err) ||
        onnx_session_exec(s, ins, outs, 0, err))
        return -1;
    for (size_t k = 0; k < n_outputs; k++) {
        int i = onnx_session_find_output(s, outputs[k].name);
        const struct onnx_io_desc *d = &s->out_desc[i];
        outputs[k].elem_type = d->elem_type;
        outputs[k].rank = d->rank;
        memcpy(outputs[k].dims, d->dims, sizeof d->dims);
        outputs[k].bytes = onnx_session_output_bytes(s, (size_t)i);
    }
    return 0;
}
