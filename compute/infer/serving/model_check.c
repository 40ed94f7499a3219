/*
 * model_check.c — a model's config against its ONNX model at load: what the config leaves
 * out is completed from the model as Triton's auto-complete does, and what it gives is
 * checked (names, element types, dims, batch dimension), each refusal naming the tensor.
 *
 * Auto-complete follows Triton's ONNX Runtime backend (onnxruntime_backend/src/onnxruntime.cc,
 * ModelState::AutoCompleteConfig, AutoCompleteMaxBatch and AutoCompleteIO; Triton's
 * docs/user_guide/model_configuration.md, "Auto-Generated Model Configuration" and "Default
 * Max Batch Size and Dynamic Batcher"): a config that lists both inputs and outputs is not
 * completed (its max_batch_size as given, 0 when absent). Otherwise the model "can support
 * batching" when every input and output has a variable (-1) first dimension; then a
 * max_batch_size of 0 (or none) becomes the default, 4 (Triton's --backend-config
 * default-max-batch-size), and a max_batch_size > 1 with no scheduler configured gets the
 * dynamic batcher with default settings; a model that cannot batch keeps 0 (a non-zero
 * max_batch_size is refused). The missing lists come from the model's graph inputs and
 * outputs, dims after the first when batching; a tensor with nothing after the batch
 * dimension gets dims [1] with reshape [] as Triton writes it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_model.h"
#include "infer/serving/model_config_internal.h"

#define TRITON_DEFAULT_MAX_BATCH 4

const char *gj_dims_text(char *buf, size_t n, int rank, const int64_t *dims, int open_as_n)
{
    size_t off = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && off < n; i++)
        off += open_as_n && dims[i] < 0
                   ? (size_t)snprintf(buf + off, n - off, "%sN", i ? ", " : "")
                   : (size_t)snprintf(buf + off, n - off, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (off < n)
        snprintf(buf + off, n - off, "]");
    return buf;
}

static const char *tname(int elem)
{
    const char *t = gj_cfg_triton_type(elem);
    return t ? t : onnx_elem_name(elem);
}

void gj_model_io_names(char *buf, size_t n, const onnx_model *om, int outputs)
{
    size_t cnt = outputs ? onnx_model_num_outputs(om) : onnx_model_num_inputs(om), off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < cnt && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? ", " : "",
                                (outputs ? onnx_model_output(om, i) : onnx_model_input(om, i))->name);
}

static const struct onnx_io_desc *find_io(const onnx_model *om, const char *name, int outputs)
{
    size_t cnt = outputs ? onnx_model_num_outputs(om) : onnx_model_num_inputs(om);
    for (size_t i = 0; i < cnt; i++) {
        const struct onnx_io_desc *d = outputs ? onnx_model_output(om, i) : onnx_model_input(om, i);
        if (strcmp(d->name, name) == 0)
            return d;
    }
    return NULL;
}

/* 1 when every input and output (of known rank) has a variable-size first dimension. */
static int can_batch(const onnx_model *om)
{
    for (size_t i = 0; i < onnx_model_num_inputs(om); i++) {
        const struct onnx_io_desc *d = onnx_model_input(om, i);
        if (d->rank < 1 || d->dims[0] >= 0)
            return 0;
    }
    for (size_t i = 0; i < onnx_model_num_outputs(om); i++) {
        const struct onnx_io_desc *d = onnx_model_output(om, i);
        if (d->rank == 0 || (d->rank > 0 && d->dims[0] >= 0))
            return 0;
    }
    return 1;
}

static void complete_batching(struct gj_model_config *cfg, const onnx_model *om)
{
    if (!cfg->triton_form || (cfg->n_inputs && cfg->n_output_tensors))
        return;   /* our own form, or nothing to complete: max_batch_size as given */
    if (!can_batch(om)) {
        if (!cfg->max_batch_given || cfg->no_batch) {
            cfg->no_batch = 1;
            cfg->max_batch_size = 1;
        }   /* else refused by check_tensor: the first dimension is fixed */
        return;
    }
    if (cfg->no_batch || !cfg->max_batch_given) {   /* 0 or none: Triton's default */
        cfg->no_batch = 0;
        cfg->max_batch_size = TRITON_DEFAULT_MAX_BATCH;
    }
    if (cfg->max_batch_size > 1)   /* and no scheduler: the dynamic batcher, defaults */
        cfg->dynamic_batching = 1;
    size_t k = 0;   /* preferred sizes beyond the max are dropped */
    for (size_t i = 0; i < cfg->n_preferred; i++)
        if (cfg->preferred_batch_sizes[i] <= cfg->max_batch_size)
            cfg->preferred_batch_sizes[k++] = cfg->preferred_batch_sizes[i];
    cfg->n_preferred = k;
}

/* A model tensor as a config entry: its dims after the batch dimension. */
static void from_model(struct gj_tensor_config *t, const struct onnx_io_desc *d, int batching)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", d->name);
    t->elem_type = d->elem_type;
    if (d->rank < 0) {   /* unknown until the trial session infers it (served_model.c) */
        t->rank = -1;
        return;
    }
    t->rank = d->rank - batching;
    for (int k = 0; k < t->rank && k < GJ_TENSOR_MAX_RANK; k++)
        t->dims[k] = d->dims[k + batching];
    if (batching && t->rank == 0) {   /* Triton: dims [1], reshape [] */
        t->rank = 1;
        t->dims[0] = 1;
        t->has_reshape = 1;
        t->reshape_rank = 0;
    }
}

static int complete_list(struct gj_tensor_config **list, size_t *n, const onnx_model *om,
                         int outputs, int batching, struct gj_error *err)
{
    size_t cnt = outputs ? onnx_model_num_outputs(om) : onnx_model_num_inputs(om);
    if (*n)
        return 0;
    if (cnt > GJ_MODEL_MAX_TENSORS)
        return gj_error_set(err, "model.onnx", "the model has %zu %s; at most %d are served", cnt,
                            outputs ? "outputs" : "inputs", GJ_MODEL_MAX_TENSORS);
    free(*list);
    *list = calloc(cnt ? cnt : 1, sizeof **list);
    if (!*list)
        return gj_error_set(err, "", "out of memory");
    for (size_t i = 0; i < cnt; i++)
        from_model(&(*list)[i], outputs ? onnx_model_output(om, i) : onnx_model_input(om, i), batching);
    *n = cnt;
    return 0;
}

/* One config tensor against the model's of the same name. */
static int check_tensor(const struct gj_model_config *cfg, const onnx_model *om,
                        const struct gj_tensor_config *t, int outputs, struct gj_error *err)
{
    const char *what = outputs ? "output" : "input";
    int batching = !cfg->no_batch;
    char a[160], b[160], names[400];
    const struct onnx_io_desc *d = find_io(om, t->name, outputs);
    if (!d) {
        gj_model_io_names(names, sizeof names, om, outputs);
        return gj_error_set(err, what, "config: %s '%s' is not an %s of the model; its %ss are: %s",
                            what, t->name, what, what, names);
    }
    if (d->elem_type && d->elem_type != t->elem_type)   /* 0: left to shape inference */
        return gj_error_set(err, what, "config: %s '%s' is %s but the model's is %s", what, t->name,
                            tname(t->elem_type), tname(d->elem_type));
    if (d->rank < 0)
        return 0;   /* checked by the trial session */
    int rank = t->has_reshape ? t->reshape_rank : t->rank;
    const int64_t *dims = t->has_reshape ? t->reshape : t->dims;
    gj_dims_text(a, sizeof a, rank, dims, 0);
    gj_dims_text(b, sizeof b, d->rank, d->dims, 0);
    for (int k = batching; t->has_reshape && k < d->rank; k++)
        if (d->dims[k] < 0)
            return gj_error_set(err, what, "config: %s '%s' has a reshape but the model leaves "
                                "its dimension %d open: a reshape needs the model's sizes fixed",
                                what, t->name, k);
    if (d->rank != rank + batching)
        return gj_error_set(err, what, "config: %s '%s' has %s %s%s but the model's is %s", what,
                            t->name, t->has_reshape ? "reshape" : "dims", a, batching ? " (after the batch dimension)" : " (no batch "
                            "dimension: max_batch_size 0)", b);
    if (batching && d->dims[0] >= 0 && !(d->dims[0] == 1 && cfg->max_batch_size == 1))
        return gj_error_set(err, "max_batch_size", "config: max_batch_size is %d but the model's %s "
                            "'%s' has a fixed first dimension %lld (%s): export it with a dynamic "
                            "batch dimension, or give max_batch_size 0", cfg->max_batch_size, what,
                            t->name, (long long)d->dims[0], b);
    for (int k = 0; k < rank; k++)
        if (dims[k] >= 0 && d->dims[k + batching] >= 0 && dims[k] != d->dims[k + batching])
            return gj_error_set(err, what, "config: %s '%s' has %s %s but the model's is %s%s", what,
                                t->name, t->has_reshape ? "reshape" : "dims", a, b,
                                batching ? " (the batch first)" : "");
    return 0;
}

/* config.json (our own form): its image input and output, in its own words. */
static int check_own_form(const struct gj_model_config *cfg, const onnx_model *om, struct gj_error *err)
{
    char a[160], b[160], names[400];
    const struct onnx_io_desc *in = onnx_model_input(om, 0);
    if (onnx_model_num_inputs(om) == 1 && strcmp(in->name, cfg->input_name) != 0)
        return gj_error_set(err, "input.name", "config.json: input.name is '%s' but the model's "
                            "input is named '%.200s'", cfg->input_name, in->name);
    in = find_io(om, cfg->input_name, 0);
    int64_t want[4] = { -1, cfg->input_dims[0], cfg->input_dims[1], cfg->input_dims[2] };
    int bad = in && in->rank != 4;
    for (int i = 1; in && !bad && i < 4; i++)
        bad = in->dims[i] >= 0 && in->dims[i] != want[i];
    if (bad)
        return gj_error_set(err, "input.dims", "config.json: input.dims is %s but the model's input "
                            "'%s' is %s", gj_dims_text(a, sizeof a, 3, cfg->input_dims, 1), cfg->input_name,
                            gj_dims_text(b, sizeof b, in->rank, in->dims, 1));
    const struct onnx_io_desc *out = find_io(om, cfg->output_name, 1);
    if (!out) {
        gj_model_io_names(names, sizeof names, om, 1);
        return gj_error_set(err, "output.name", "config.json: output.name is '%s' but the model's "
                            "outputs are: %s", cfg->output_name, names);
    }
    if (out->rank >= 0 && (out->rank != 2 || (out->dims[1] >= 0 && out->dims[1] != cfg->n_outputs)))
        return gj_error_set(err, "output.dims", "config.json: output.dims is [%lld] (%zu labels) "
                            "but the model's output '%s' is %s", (long long)cfg->n_outputs,
                            cfg->n_labels, cfg->output_name, gj_dims_text(b, sizeof b, out->rank, out->dims, 1));
    return 0;
}

int gj_model_config_complete(struct gj_model_config *cfg, const onnx_model *om, struct gj_error *err)
{
    if (!cfg->triton_form && check_own_form(cfg, om, err))
        return -1;
    complete_batching(cfg, om);
    int batching = !cfg->no_batch;
    cfg->autocompleted = cfg->n_inputs == 0 || cfg->n_output_tensors == 0;
    if (complete_list(&cfg->inputs, &cfg->n_inputs, om, 0, batching, err) ||
        complete_list(&cfg->outputs, &cfg->n_output_tensors, om, 1, batching, err))
        return -1;
    for (size_t i = 0; i < cfg->n_inputs; i++)
        if (check_tensor(cfg, om, &cfg->inputs[i], 0, err))
            return -1;
    for (size_t i = 0; i < onnx_model_num_inputs(om); i++) {
        const char *name = onnx_model_input(om, i)->name;
        size_t j = 0;
        while (j < cfg->n_inputs && strcmp(cfg->inputs[j].name, name) != 0)
            j++;
        if (j == cfg->n_inputs)
            return gj_error_set(err, "input", "config: the model's input '%s' is missing from the "
                                "config's inputs (every input of the model is needed)", name);
    }
    for (size_t i = 0; i < cfg->n_output_tensors; i++)
        if (check_tensor(cfg, om, &cfg->outputs[i], 1, err))
            return -1;
    for (size_t i = 0; i < cfg->n_preferred; i++)
        if (cfg->preferred_batch_sizes[i] > cfg->max_batch_size)
            return gj_error_set(err, "dynamic_batching.preferred_batch_sizes", "config: a preferred "
                                "batch size is %d, more than max_batch_size %d",
                                cfg->preferred_batch_sizes[i], cfg->max_batch_size);
    return 0;
}
