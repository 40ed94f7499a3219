/*
 * oip_model_io.c — a model's tensors for the /v2 routes (oip_model_io.h).
 */
#include <string.h>

#include "service/infer/oip_model_io.h"

int oip_model_io(const struct gj_model_config *cfg, struct oip_model_io *io)
{
    memset(io, 0, sizeof *io);
    if (cfg->n_inputs == 0 || cfg->n_output_tensors == 0 || cfg->n_inputs > GJ_MODEL_MAX_TENSORS ||
        cfg->n_output_tensors > GJ_MODEL_MAX_TENSORS)
        return -1;   /* the config refuses more than GJ_MODEL_MAX_TENSORS; the routes count on it */
    io->batched = !cfg->no_batch && cfg->max_batch_size > 0;
    io->max_batch_size = io->batched ? cfg->max_batch_size : 0;
    io->inputs = cfg->inputs;
    io->n_inputs = cfg->n_inputs;
    io->outputs = cfg->outputs;
    io->n_outputs = cfg->n_output_tensors;
    return 0;
}
