/*
 * oip_model_io.c — a model's tensors for the /v2 routes (oip_model_io.h).
 */
#include <stdio.h>
#include <string.h>

#include "infer/onnx/onnx_elem.h"
#include "service/infer/oip_model_io.h"

int oip_model_io(const struct gj_model_config *cfg, struct oip_model_io *io)
{
    memset(io, 0, sizeof *io);
    io->batched = !cfg->no_batch && cfg->max_batch_size > 0;
    io->max_batch_size = io->batched ? cfg->max_batch_size : 0;
    if (cfg->n_inputs > GJ_MODEL_MAX_TENSORS || cfg->n_output_tensors > GJ_MODEL_MAX_TENSORS)
        return -1;   /* the config refuses more; the routes' bookkeeping counts on it */
    if (cfg->n_inputs > 0) {
        io->inputs = cfg->inputs;
        io->n_inputs = cfg->n_inputs;
        io->outputs = cfg->outputs;
        io->n_outputs = cfg->n_output_tensors;
        return 0;
    }
    if (!cfg->image_model)
        return -1;
    struct gj_tensor_config *in = &io->image[0], *out = &io->image[1];
    snprintf(in->name, sizeof in->name, "%s", cfg->input_name);
    in->elem_type = ONNX_ELEM_FLOAT;
    in->rank = 3;
    memcpy(in->dims, cfg->input_dims, sizeof cfg->input_dims);
    snprintf(out->name, sizeof out->name, "%s", cfg->output_name);
    out->elem_type = ONNX_ELEM_FLOAT;
    out->rank = 1;
    out->dims[0] = cfg->n_outputs;
    io->inputs = in;
    io->n_inputs = 1;
    io->outputs = out;
    io->n_outputs = 1;
    return 0;
}

const char *const *oip_output_labels(const gj_served_model *m, size_t i, size_t *n)
{
    const struct gj_model_config *cfg = gj_served_model_config(m);
    *n = 0;
    if (!cfg->image_model || cfg->n_output_tensors > 1 || i != 0 || !cfg->labels)
        return NULL;
    *n = cfg->n_labels;
    return (const char *const *)cfg->labels;
}
