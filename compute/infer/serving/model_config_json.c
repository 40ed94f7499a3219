/*
 * model_config_json.c — a config written as JSON: this server's config.json shape
 * (gj_model_config_to_json, GET /v1/models/{name}) and Triton's JSON ModelConfig
 * (gj_model_config_to_triton_json, GET /v2/models/{m}/config). See model_repo.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/serving/model_config_internal.h"
#include "infer/serving/model_repo.h"

static json_t *str_list(const char *base, size_t stride, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(base + i * stride));
    return a;
}

static json_t *version_policy_json(const struct gj_model_config *cfg)
{
    if (cfg->version_policy == GJ_VERSIONS_LATEST)
        return json_pack("{s:{s:i}}", "latest", "num_versions", cfg->latest_versions);
    if (cfg->version_policy != GJ_VERSIONS_SPECIFIC)
        return json_pack("{s:{}}", "all");
    json_t *vs = json_array();
    for (size_t i = 0; vs && i < cfg->n_specific; i++)
        json_array_append_new(vs, json_integer(cfg->specific_versions[i]));
    return json_pack("{s:{s:o}}", "specific", "versions", vs);
}

json_t *gj_model_config_to_json(const struct gj_model_config *cfg)
{
    /* a model that is not an image model has no image fields to show: Triton's shape */
    return cfg->triton_form && !cfg->image_model ? gj_model_config_to_triton_json(cfg)
                                                 : gj_cfg_own_json(cfg);
}

json_t *gj_cfg_own_json(const struct gj_model_config *cfg)
{
    static const char *const acts[] = { "none", "sigmoid", "softmax" };
    static const char *const sources[] = { "file", "fixed", "minmax" };
    static const char *const functions[] = { "LINEAR", "LINEAR_EXACT", "SIGMOID" };
    static const char *const methods[] = { "bilinear", "area", "nearest" };
    const struct gj_preprocess_config *pc = &cfg->pre;
    json_t *labels = json_array(), *pref = json_array(), *mean = json_array(), *std = json_array();
    for (size_t i = 0; i < cfg->n_labels; i++)
        json_array_append_new(labels, json_string(cfg->labels[i]));
    for (size_t i = 0; i < cfg->n_preferred; i++)
        json_array_append_new(pref, json_integer(cfg->preferred_batch_sizes[i]));
    for (int c = 0; c < pc->channels; c++) {
        json_array_append_new(mean, json_real(pc->mean[c]));
        json_array_append_new(std, json_real(pc->std[c]));
    }
    json_t *window = json_pack("{s:s, s:s}", "source", sources[pc->window_source], "function",
                               functions[pc->function]);
    if (window && pc->has_fixed_window) {
        json_object_set_new(window, "center", json_real(pc->center));
        json_object_set_new(window, "width", json_real(pc->width));
    }
    json_t *j = json_pack(
        "{s:s, s:s, s:{s:s, s:[I,I,I], s:s}, s:{s:s, s:[I], s:s}, s:o, s:s, s:i, s:i, s:o,"
        " s:{s:o, s:b, s:{s:s, s:i, s:i}, s:o, s:o, s:i},"
        " s:{s:o, s:o, s:o, s:b}}",
        "name", cfg->name, "platform", "onnx",
        "input", "name", cfg->input_name, "dims", (json_int_t)cfg->input_dims[0],
        (json_int_t)cfg->input_dims[1], (json_int_t)cfg->input_dims[2], "datatype", "FP32",
        "output", "name", cfg->output_name, "dims", (json_int_t)cfg->n_outputs, "datatype", "FP32",
        "labels", labels, "output_activation", acts[cfg->activation],
        "max_batch_size", cfg->max_batch_size, "instances_per_device", cfg->instances_per_device,
        "default_version", cfg->default_version ? json_integer(cfg->default_version)
                                                : json_string("latest"),
        "preprocessing", "window", window ? window : json_null(),
        "invert_monochrome1", pc->invert_monochrome1,
        "resize", "method", methods[pc->resize], "height", pc->height, "width", pc->width_px,
        "mean", mean, "std", std, "channels", pc->channels,
        "filter", "modalities",
        str_list(&cfg->filter.modalities[0][0], sizeof cfg->filter.modalities[0],
                 cfg->filter.n_modalities),
        "body_parts",
        str_list(&cfg->filter.body_parts[0][0], sizeof cfg->filter.body_parts[0],
                 cfg->filter.n_body_parts),
        "view_positions",
        str_list(&cfg->filter.view_positions[0][0], sizeof cfg->filter.view_positions[0],
                 cfg->filter.n_view_positions),
        "allow_missing", cfg->filter.allow_missing);
    if (j) {
        json_t *gpus = json_array();
        for (size_t i = 0; gpus && i < cfg->n_gpus; i++)
            json_array_append_new(gpus, json_integer(cfg->gpus[i]));
        json_t *group = json_pack("{s:s, s:i}", "kind", gj_instance_kind_name(cfg->instance_kind),
                                  "count", cfg->instances_per_device);
        if (group && cfg->n_gpus)
            json_object_set_new(group, "gpus", gpus);
        else
            json_decref(gpus);
        json_object_set_new(j, "instance_group", group);
        json_object_set_new(j, "precision", json_string(gj_precision_name(cfg->precision)));
        json_object_set_new(j, "cuda_graphs", json_boolean(cfg->cuda_graphs));
        json_object_set_new(j, "version_policy", version_policy_json(cfg));
    }
    if (j && cfg->dynamic_batching)
        json_object_set_new(j, "dynamic_batching",
                            json_pack("{s:I, s:o}", "max_queue_delay_us",
                                      (json_int_t)cfg->max_queue_delay_us,
                                      "preferred_batch_sizes", pref));
    else
        json_decref(pref);
    return j;
}

/* ---- Triton's shape ------------------------------------------------------------------------ */

static json_t *dims_json(const struct gj_tensor_config *t)
{
    json_t *a = json_array();
    for (int i = 0; a && i < t->rank; i++)
        json_array_append_new(a, json_integer(t->dims[i]));
    return a;
}

static json_t *tensors_json(const struct gj_tensor_config *t, size_t n, int is_input)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        const char *type = gj_cfg_triton_type(t[i].elem_type);
        json_t *o = json_pack("{s:s, s:s, s:o, s:b}", "name", t[i].name, "data_type",
                              type ? type : "TYPE_INVALID", "dims", dims_json(&t[i]),
                              "is_shape_tensor", 0);
        if (o && t[i].has_reshape) {
            json_t *shape = json_array();
            for (int k = 0; shape && k < t[i].reshape_rank; k++)
                json_array_append_new(shape, json_integer(t[i].reshape[k]));
            json_object_set_new(o, "reshape", json_pack("{s:o}", "shape", shape));
        }
        if (o && is_input) {
            json_object_set_new(o, "format", json_string("FORMAT_NONE"));
            json_object_set_new(o, "allow_ragged_batch", json_false());
            json_object_set_new(o, "optional", json_false());
        } else if (o) {
            json_object_set_new(o, "label_filename", json_string(t[i].label_filename));
        }
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *batching_json(const struct gj_model_config *cfg)
{
    json_t *pref = json_array();
    for (size_t i = 0; pref && i < cfg->n_preferred; i++)
        json_array_append_new(pref, json_integer(cfg->preferred_batch_sizes[i]));
    json_t *d = json_pack("{s:o, s:I, s:b, s:i, s:i}", "preferred_batch_size", pref,
                          "max_queue_delay_microseconds", (json_int_t)cfg->max_queue_delay_us,
                          "preserve_ordering", 0, "priority_levels", 0, "default_priority_level", 0);
    if (d && (cfg->max_queue_size || cfg->queue_timeout_us))
        json_object_set_new(d, "default_queue_policy",
                            json_pack("{s:s, s:I, s:b, s:I}", "timeout_action", "REJECT",
                                      "default_timeout_microseconds", (json_int_t)cfg->queue_timeout_us,
                                      "allow_timeout_override", 0, "max_queue_size",
                                      (json_int_t)cfg->max_queue_size));
    return d;
}

static json_t *instance_json(const struct gj_model_config *cfg)
{
    json_t *gpus = json_array();
    for (size_t i = 0; gpus && i < cfg->n_gpus; i++)
        json_array_append_new(gpus, json_integer(cfg->gpus[i]));
    char name[GJ_MODEL_NAME_MAX + 4];
    snprintf(name, sizeof name, "%s_0", cfg->name);
    return json_pack("[{s:s, s:s, s:i, s:o}]", "name", name, "kind",
                     gj_instance_kind_name(cfg->instance_kind), "count", cfg->instances_per_device,
                     "gpus", gpus);
}

/* What only this server reads (labels, preprocessing, ...), so that a config fetched,
 * changed and sent back to load_model keeps them. */
static void add_own_keys(json_t *j, const struct gj_model_config *cfg)
{
    json_t *ours = gj_cfg_own_json(cfg);
    static const char *const keep[] = { "output_activation", "preprocessing", "filter",
                                        "precision", "cuda_graphs", "default_version", NULL };
    for (size_t i = 0; ours && keep[i]; i++) {
        if (!cfg->image_model && (!strcmp(keep[i], "output_activation") ||
                                  !strcmp(keep[i], "preprocessing") || !strcmp(keep[i], "filter")))
            continue;
        json_object_set(j, keep[i], json_object_get(ours, keep[i]));
    }
    if (ours && cfg->image_model && cfg->n_labels && !cfg->labels_from_file)
        json_object_set(j, "labels", json_object_get(ours, "labels"));
    json_decref(ours);
}

json_t *gj_model_config_to_triton_json(const struct gj_model_config *cfg)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:o, s:o, s:s}", "name", cfg->name,
                          "platform", "onnxruntime_onnx", "backend", "onnxruntime",
                          "max_batch_size", cfg->no_batch ? 0 : cfg->max_batch_size,
                          "input", tensors_json(cfg->inputs, cfg->n_inputs, 1),
                          "output", tensors_json(cfg->outputs, cfg->n_output_tensors, 0),
                          "default_model_filename", "model.onnx");
    if (!j)
        return NULL;
    json_t *ours = gj_cfg_own_json(cfg);
    if (ours)
        json_object_set(j, "version_policy", json_object_get(ours, "version_policy"));
    json_decref(ours);
    json_object_set_new(j, "instance_group", instance_json(cfg));
    if (cfg->dynamic_batching)
        json_object_set_new(j, "dynamic_batching", batching_json(cfg));
    json_object_set_new(j, "parameters", cfg->parameters ? json_deep_copy(cfg->parameters)
                                                         : json_object());
    add_own_keys(j, cfg);
    return j;
}
