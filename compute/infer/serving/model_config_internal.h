/*
 * model_config_internal.h — what model_config.c shares with model_config_triton.c (Triton's
 * JSON ModelConfig) and served_model.c: the field readers, whose errors name the field
 * ("config.json: input[0].dims[1] must be ..."). Not part of model_repo.h's interface.
 */
#ifndef GJ_MODEL_CONFIG_INTERNAL_H
#define GJ_MODEL_CONFIG_INTERNAL_H

#include <jansson.h>

#include "infer/serving/model_repo.h"

/* Fails with field path: the error set, -1 returned. */
#define CFG_FAIL(path, ...) \
    do { \
        char field_[128]; \
        snprintf(field_, sizeof field_, "%.127s", (path)); \
        gj_error_set(err, field_, __VA_ARGS__); \
        return -1; \
    } while (0)

int gj_cfg_check_keys(const json_t *obj, const char *path, const char *const *allowed,
                      struct gj_error *err);
/* An integer in [lo, hi]: a JSON number without fraction; _int64: or a string of one
 * (Triton's JSON writes 64-bit integers as strings: dims, microseconds, versions). */
int gj_cfg_get_int(const json_t *v, const char *path, int64_t lo, int64_t hi, int64_t *out,
                   struct gj_error *err);
int gj_cfg_get_int64(const json_t *v, const char *path, int64_t lo, int64_t hi, int64_t *out,
                     struct gj_error *err);
int gj_cfg_get_str(const json_t *v, const char *path, char *buf, size_t buflen,
                   struct gj_error *err);
int gj_cfg_get_bool(const json_t *v, const char *path, int *out, struct gj_error *err);

/* Triton's form (model_config_triton.c). */
/* input or output: an array of tensor objects into a heap array (*out, *n). */
int gj_cfg_parse_tensors(const json_t *arr, int is_input, struct gj_tensor_config **out,
                         size_t *n, struct gj_error *err);
/* The Triton-only top-level keys: backend, parameters, the ignored ones (optimization,
 * model_warmup, ...) and refusals of what does not apply (sequence_batching, ...). */
int gj_cfg_parse_triton_extras(const json_t *root, struct gj_model_config *cfg,
                               struct gj_error *err);
/* Triton's dynamic_batching keys beside ours. */
int gj_cfg_parse_queue_policy(const json_t *qp, struct gj_model_config *cfg, struct gj_error *err);

/* Triton form, once the tensors are complete (at load): whether it is a single-image model
 * (model_repo.h's image_model), with the image output's labels from the config or from its
 * label file (file_labels[i], n_file_labels[i]: output i's; NULL when none), and the
 * preprocessing applied to its input. 0, or -1 with err (labels or preprocessing that do not
 * fit). Our own form: 0, nothing to do. */
int gj_model_config_settle_image(struct gj_model_config *cfg, char **const *file_labels,
                                 const size_t *n_file_labels, struct gj_error *err);

/* Completes the config from the ONNX model (struct onnx_model *) as Triton's auto-complete
 * does and checks what it gives against the model (model_check.c). 0, or -1 with err. */
struct onnx_model;
int gj_model_config_complete(struct gj_model_config *cfg, const struct onnx_model *om,
                             struct gj_error *err);

/* The config in this server's own config.json shape (gj_model_config_to_json for image
 * models and our own form). */
json_t *gj_cfg_own_json(const struct gj_model_config *cfg);

/* "[1, 3, 224, 224]" (open_as_n: -1 written N) into buf; buf. */
const char *gj_dims_text(char *buf, size_t n, int rank, const int64_t *dims, int open_as_n);
/* The model's input (outputs 0) or output names, "a, b, c", into buf. */
void gj_model_io_names(char *buf, size_t n, const struct onnx_model *om, int outputs);

/* "TYPE_FP32" for an ONNX element type; NULL when Triton has none. */
const char *gj_cfg_triton_type(int elem_type);

#endif
