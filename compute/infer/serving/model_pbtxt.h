/*
 * model_pbtxt.h — a Triton model's config.pbtxt (the protobuf text format of Triton's
 * ModelConfig, triton_model_config.proto) as Triton's JSON ModelConfig, the form
 * gj_model_config_parse (model_repo.h) reads.
 *
 * The JSON holds the fields that apply here, spelled as Triton's GET
 * /v2/models/{m}/config spells them: name, platform, backend, max_batch_size, input and
 * output ({name, data_type: "TYPE_FP32", dims, reshape?: {shape}, optional?,
 * label_filename?}), dynamic_batching ({preferred_batch_size, max_queue_delay_microseconds,
 * default_queue_policy?}), instance_group ([{kind, count, gpus?}]), version_policy and
 * parameters ({key: {string_value}}). version_policy is Triton's default when the file has
 * none: {"latest": {"num_versions": 1}} (Triton serves only the highest version unless told).
 * Triton fields without effect here (optimization, model_warmup, model_operations,
 * model_repository_agents, model_metrics, response_cache, model_transaction_policy,
 * cc_model_filenames, metric_tags, default_model_filename (only "model.onnx"), runtime, an input's format and
 * the shape-tensor / ragged flags) are read and left out; sequence_batching,
 * ensemble_scheduling, batch_input and batch_output change what a model computes and are
 * refused.
 *
 * Where a model directory has both config.pbtxt and config.json, config.pbtxt is the one
 * read (model repositories written for Triton keep working when a config.json is left
 * beside them): GJ_MODEL_PBTXT_NAME before GJ_MODEL_JSON_NAME, everywhere a config is read.
 */
#ifndef GJ_MODEL_PBTXT_H
#define GJ_MODEL_PBTXT_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/gj_error.h"

#define GJ_MODEL_PBTXT_NAME "config.pbtxt"
#define GJ_MODEL_JSON_NAME "config.json"

/* Triton's JSON ModelConfig from config.pbtxt's text (len bytes), or NULL with err, whose
 * message names the line and column ("config.pbtxt line 4, column 3: ..."). */
json_t *gj_model_pbtxt_to_json(const char *text, size_t len, struct gj_error *err);

/* The same as JSON text (json_dumps, compact, keys in the order above), for where a config
 * travels as text (the model store); malloc'd, or NULL with err. */
char *gj_model_pbtxt_to_json_text(const char *text, size_t len, struct gj_error *err);

/* The config file of a model (or version) directory: dir/config.pbtxt when it is a
 * file, else dir/config.json. Its contents (malloc'd, NUL-terminated) in *text, as JSON
 * text (a config.pbtxt is converted), and in *which the file's name; *text NULL when there
 * is neither. 0, or -1 with err (unreadable, too large, a bad config.pbtxt). */
int gj_model_config_file_read(const char *dir, size_t max_bytes, char **text, const char **which,
                              struct gj_error *err);

/* The config version `version` of the model in model_dir runs with, as JSON text: the
 * version directory's own config file, else the model directory's (each: config.pbtxt
 * before config.json). *text NULL when neither has one. 0, or -1 with err. */
int gj_model_version_config_read(const char *model_dir, int64_t version, size_t max_bytes, char **text,
                                 struct gj_error *err);

#endif
