/*
 * model_pbtxt.c — config.pbtxt (Triton's ModelConfig in protobuf text format) read with
 * protobuf-c's descriptors (pbtxt.c) and mapped to Triton's JSON ModelConfig. See
 * model_pbtxt.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "infer/serving/model_pbtxt.h"
#include "infer/serving/pbtxt.h"
#include "infer/serving/triton_model_config.pb-c.h"

/* ModelConfig fields of Triton's that are read and thrown away (no effect here). */
static const char *const ignored[] = {
    "inference.ModelConfig.optimization", "inference.ModelConfig.model_warmup",
    "inference.ModelConfig.model_operations", "inference.ModelConfig.model_repository_agents",
    "inference.ModelConfig.model_metrics",
    "inference.ModelInstanceGroup.rate_limiter", "inference.ModelInstanceGroup.secondary_devices",
    NULL,
};
/* ... and the ones that change what a model computes: refused. */
static const char *const unsupported[] = {
    "inference.ModelConfig.sequence_batching", "inference.ModelConfig.ensemble_scheduling",
    "inference.ModelConfig.batch_input", "inference.ModelConfig.batch_output", NULL,
};

static const char *enum_name(const ProtobufCEnumDescriptor *d, int value)
{
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(d, value);
    return v ? v->name : "";
}

static json_t *int64s(const int64_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

static json_t *reshape_json(const Inference__ModelTensorReshape *r)
{
    return json_pack("{s:o}", "shape", int64s(r->shape, r->n_shape));
}

static json_t *input_json(const Inference__ModelInput *in)
{
    json_t *j = json_pack("{s:s, s:s, s:o}", "name", in->name, "data_type",
                          enum_name(&inference__data_type__descriptor, in->data_type), "dims",
                          int64s(in->dims, in->n_dims));
    if (j && in->reshape)
        json_object_set_new(j, "reshape", reshape_json(in->reshape));
    if (j && in->optional)
        json_object_set_new(j, "optional", json_true());
    return j;
}

static json_t *output_json(const Inference__ModelOutput *out)
{
    json_t *j = json_pack("{s:s, s:s, s:o}", "name", out->name, "data_type",
                          enum_name(&inference__data_type__descriptor, out->data_type), "dims",
                          int64s(out->dims, out->n_dims));
    if (j && out->reshape)
        json_object_set_new(j, "reshape", reshape_json(out->reshape));
    if (j && out->label_filename[0])
        json_object_set_new(j, "label_filename", json_string(out->label_filename));
    return j;
}

static json_t *version_policy_json(const Inference__ModelVersionPolicy *vp)
{
    if (!vp || vp->policy_choice_case == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST) {
        /* Triton's default is the latest version; num_versions 0 means 1 there too. */
        uint32_t n = vp && vp->latest->num_versions ? vp->latest->num_versions : 1;
        return json_pack("{s:{s:I}}", "latest", "num_versions", (json_int_t)n);
    }
    if (vp->policy_choice_case == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC)
        return json_pack("{s:{s:o}}", "specific", "versions", int64s(vp->specific->versions, vp->specific->n_versions));
    return json_pack("{s:{}}", "all");
}

static json_t *dynamic_batching_json(const Inference__ModelDynamicBatching *db)
{
    json_t *pref = json_array();
    for (size_t i = 0; pref && i < db->n_preferred_batch_size; i++)
        json_array_append_new(pref, json_integer(db->preferred_batch_size[i]));
    json_t *j = json_pack("{s:o, s:I}", "preferred_batch_size", pref, "max_queue_delay_microseconds",
                          (json_int_t)db->max_queue_delay_microseconds);
    const Inference__ModelQueuePolicy *q = db->default_queue_policy;
    if (j && q)
        json_object_set_new(j, "default_queue_policy",
                            json_pack("{s:s, s:I, s:b, s:I}", "timeout_action",
                                      enum_name(&inference__model_queue_policy__timeout_action__descriptor,
                                                q->timeout_action),
                                      "default_timeout_microseconds", (json_int_t)q->default_timeout_microseconds,
                                      "allow_timeout_override", q->allow_timeout_override, "max_queue_size",
                                      (json_int_t)q->max_queue_size));
    return j;
}

static json_t *instance_group_json(const Inference__ModelInstanceGroup *g)
{
    json_t *j = json_pack("{s:s, s:i}", "kind", enum_name(&inference__model_instance_group__kind__descriptor, g->kind),
                          "count", g->count > 0 ? g->count : 1);   /* Triton's default count: 1 */
    if (j && g->n_gpus) {
        json_t *gpus = json_array();
        for (size_t i = 0; gpus && i < g->n_gpus; i++)
            json_array_append_new(gpus, json_integer(g->gpus[i]));
        json_object_set_new(j, "gpus", gpus);
    }
    return j;
}

/* Appends each of n items made by one() to a new array under key. */
#define ADD_ARRAY(j, key, items, n, one) \
    do { \
        json_t *a_ = json_array(); \
        for (size_t i_ = 0; a_ && i_ < (n); i_++) \
            json_array_append_new(a_, one((items)[i_])); \
        json_object_set_new((j), (key), a_); \
    } while (0)

static json_t *config_json(const Inference__ModelConfig *c)
{
    json_t *j = json_object();
    if (!j)
        return NULL;
    if (c->name[0])
        json_object_set_new(j, "name", json_string(c->name));
    if (c->platform[0])
        json_object_set_new(j, "platform", json_string(c->platform));
    if (c->backend[0])
        json_object_set_new(j, "backend", json_string(c->backend));
    json_object_set_new(j, "max_batch_size", json_integer(c->max_batch_size));
    if (c->n_input)
        ADD_ARRAY(j, "input", c->input, c->n_input, input_json);
    if (c->n_output)
        ADD_ARRAY(j, "output", c->output, c->n_output, output_json);
    if (c->scheduling_choice_case == INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING)
        json_object_set_new(j, "dynamic_batching", dynamic_batching_json(c->dynamic_batching));
    if (c->n_instance_group)
        ADD_ARRAY(j, "instance_group", c->instance_group, c->n_instance_group, instance_group_json);
    json_object_set_new(j, "version_policy", version_policy_json(c->version_policy));
    if (c->n_parameters) {
        json_t *p = json_object();
        for (size_t i = 0; p && i < c->n_parameters; i++) {
            const Inference__ModelConfig__ParametersEntry *e = c->parameters[i];
            json_object_set_new(p, e->key, json_pack("{s:s}", "string_value", e->value ? e->value->string_value : ""));
        }
        json_object_set_new(j, "parameters", p);
    }
    return j;
}

/* Checks what the schema cannot say: the values a model config needs to make sense. */
static int check_config(const Inference__ModelConfig *c, struct gj_error *err)
{
    if (c->max_batch_size < 0)
        return gj_error_set(err, "max_batch_size", GJ_MODEL_PBTXT_NAME ": max_batch_size must be 0 (no batch "
                            "dimension) or more, not %d", c->max_batch_size);
    if (c->default_model_filename[0] && strcmp(c->default_model_filename, "model.onnx") != 0)
        return gj_error_set(err, "default_model_filename", GJ_MODEL_PBTXT_NAME ": default_model_filename '%.100s': "
                            "a version's model is read from model.onnx here", c->default_model_filename);
    for (size_t i = 0; i < c->n_input; i++)
        if (!c->input[i]->name[0])
            return gj_error_set(err, "input", GJ_MODEL_PBTXT_NAME ": input %zu has no name", i);
    for (size_t i = 0; i < c->n_output; i++)
        if (!c->output[i]->name[0])
            return gj_error_set(err, "output", GJ_MODEL_PBTXT_NAME ": output %zu has no name", i);
    for (size_t i = 0; i < c->n_parameters; i++)
        if (!c->parameters[i]->key[0])
            return gj_error_set(err, "parameters", GJ_MODEL_PBTXT_NAME ": a parameter has an empty key");
    return 0;
}

json_t *gj_model_pbtxt_to_json(const char *text, size_t len, struct gj_error *err)
{
    const struct gj_pbtxt_options opt = { .source = GJ_MODEL_PBTXT_NAME, .skip = ignored, .unsupported = unsupported };
    ProtobufCMessage *m = gj_pbtxt_parse(&inference__model_config__descriptor, text, len, &opt, err);
    if (!m)
        return NULL;
    const Inference__ModelConfig *c = (const Inference__ModelConfig *)m;
    json_t *j = check_config(c, err) == 0 ? config_json(c) : NULL;
    if (!j && !err->message[0])
        gj_error_set(err, "", "out of memory");
    protobuf_c_message_free_unpacked(m, NULL);
    return j;
}

char *gj_model_pbtxt_to_json_text(const char *text, size_t len, struct gj_error *err)
{
    json_t *j = gj_model_pbtxt_to_json(text, len, err);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (j && !s)
        gj_error_set(err, "", "out of memory");
    json_decref(j);
    return s;
}

static int regular_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int gj_model_config_file_read(const char *dir, size_t max_bytes, char **text, const char **which,
                              struct gj_error *err)
{
    char path[GJ_PATH_MAX];
    size_t len;
    *text = NULL;
    *which = GJ_MODEL_PBTXT_NAME;
    if (gj_path_join(path, sizeof path, dir, GJ_MODEL_PBTXT_NAME) != 0)
        return gj_error_set(err, "", "the model's path is too long");
    if (regular_file(path)) {
        char *raw = NULL;
        if (gj_read_file(path, max_bytes, &raw, &len) != 0)
            return gj_error_set(err, GJ_MODEL_PBTXT_NAME, "%s cannot be read: %s", path, strerror(errno));
        *text = gj_model_pbtxt_to_json_text(raw, len, err);
        free(raw);
        return *text ? 0 : -1;
    }
    *which = GJ_MODEL_JSON_NAME;
    if (gj_path_join(path, sizeof path, dir, GJ_MODEL_JSON_NAME) != 0)
        return gj_error_set(err, "", "the model's path is too long");
    if (!regular_file(path))
        return 0;
    if (gj_read_file(path, max_bytes, text, &len) != 0)
        return gj_error_set(err, GJ_MODEL_JSON_NAME, "%s cannot be read: %s", path, strerror(errno));
    return 0;
}

int gj_model_version_config_read(const char *model_dir, int64_t version, size_t max_bytes, char **text,
                                 struct gj_error *err)
{
    char vdir[GJ_PATH_MAX], vname[32];
    const char *which;
    snprintf(vname, sizeof vname, "%lld", (long long)version);
    if (gj_path_join(vdir, sizeof vdir, model_dir, vname) != 0)
        return gj_error_set(err, "", "the model's path is too long");
    if (gj_model_config_file_read(vdir, max_bytes, text, &which, err) != 0)
        return -1;
    return *text ? 0 : gj_model_config_file_read(model_dir, max_bytes, text, &which, err);
}
