/*
 * oip_model_io.h — a model's inputs and outputs as the /v2 routes present and check them
 * (Triton's model metadata): the config's tensor lists (for a config in this server's
 * single-image form, its one FP32 input and output), with the batch dimension's rule.
 * Private to service/infer.
 */
#ifndef GJ_OIP_MODEL_IO_H
#define GJ_OIP_MODEL_IO_H

#include <stddef.h>

#include "infer/serving/model_repo.h"

struct oip_model_io {
    const struct gj_tensor_config *inputs, *outputs;
    size_t n_inputs, n_outputs;
    int batched;                          /* 1: every tensor has a batch dimension first */
    int max_batch_size;                   /* batched: 1..; else 0 */
};

/* Fills io from cfg (io points into cfg, which must outlive it). 0, or -1 when the config
 * names no tensors yet (auto-complete: they come from the model file at load). */
int oip_model_io(const struct gj_model_config *cfg, struct oip_model_io *io);

#endif
