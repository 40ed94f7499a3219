/*
 * model_config_triton.c — Triton's JSON ModelConfig (what Triton's GET /v2/models/{m}/config
 * answers and load_model(config=...) sends; the field names of model_config.proto in
 * triton-inference-server/common): input/output lists, the keys that only Triton has, and the
 * config written back in Triton's shape is model_config_json.c's. Fields that do not
 * apply to this server (optimization, model_warmup, ...) are read and ignored; those that
 * would change what a model computes and are not implemented (sequence_batching, ragged
 * batches, shape tensors, ...) are refused by name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "infer/onnx/onnx_elem.h"
#include "infer/serving/model_config_internal.h"

#define CFG "config"

const char *gj_cfg_triton_type(int elem_type)
{
    switch (elem_type) {
    case ONNX_ELEM_BOOL: return "TYPE_BOOL";
    case ONNX_ELEM_UINT8: return "TYPE_UINT8";
    case ONNX_ELEM_UINT16: return "TYPE_UINT16";
    case ONNX_ELEM_UINT32: return "TYPE_UINT32";
    case ONNX_ELEM_UINT64: return "TYPE_UINT64";
    case ONNX_ELEM_INT8: return "TYPE_INT8";
    case ONNX_ELEM_INT16: return "TYPE_INT16";
    case ONNX_ELEM_INT32: return "TYPE_INT32";
    case ONNX_ELEM_INT64: return "TYPE_INT64";
    case ONNX_ELEM_FLOAT16: return "TYPE_FP16";
    case ONNX_ELEM_FLOAT: return "TYPE_FP32";
    case ONNX_ELEM_DOUBLE: return "TYPE_FP64";
    case ONNX_ELEM_BFLOAT16: return "TYPE_BF16";
    case ONNX_ELEM_STRING: return "TYPE_STRING";
    default: return NULL;
    }
}

/* data_type "TYPE_FP32" (or the protocol's "FP32", as our own config.json spells it). */
static int parse_type(const json_t *v, const char *path, int *out, struct gj_error *err)
{
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    if (s && strncmp(s, "TYPE_", 5) == 0)
        s += 5;
    if (s && strcmp(s, "STRING") == 0)
        s = "BYTES";
    *out = s ? onnx_elem_from_triton_name(s) : 0;
    if (!*out)
        CFG_FAIL(path, CFG ": %s must be one of TYPE_BOOL, TYPE_UINT8, TYPE_UINT16, TYPE_UINT32, "
                 "TYPE_UINT64, TYPE_INT8, TYPE_INT16, TYPE_INT32, TYPE_INT64, TYPE_FP16, TYPE_FP32, "
                 "TYPE_FP64, TYPE_BF16, TYPE_STRING", path);
    return 0;
}

static int parse_dims(const json_t *d, const char *path, int64_t *dims, int *rank,
                      struct gj_error *err)
{
    if (!json_is_array(d) || json_array_size(d) > GJ_TENSOR_MAX_RANK)
        CFG_FAIL(path, CFG ": %s must be an array of at most %d sizes (-1: any size)", path,
                 GJ_TENSOR_MAX_RANK);
    *rank = (int)json_array_size(d);
    for (int i = 0; i < *rank; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s[%d]", path, i);
        if (gj_cfg_get_int64(json_array_get(d, (size_t)i), p, -1, INT32_MAX, &dims[i], err))
            return -1;
        if (dims[i] == 0)
            CFG_FAIL(p, CFG ": %s is 0: a size is -1 (any) or at least 1", p);
    }
    return 0;
}

/* Keys of a tensor that must keep their default here (what they ask is not implemented). */
static int refuse_true(const json_t *t, const char *path, const char *key, const char *why,
                       struct gj_error *err)
{
    const json_t *v = json_object_get(t, key);
    int on = 0;
    char p[160];
    snprintf(p, sizeof p, "%s.%s", path, key);
    if (v && gj_cfg_get_bool(v, p, &on, err))
        return -1;
    if (on)
        CFG_FAIL(p, CFG ": %s: %s", p, why);
    return 0;
}

static int64_t elements(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n = dims[i] < 0 ? -1 : n * dims[i];
    return n;
}

/* reshape {shape}: the shape the model has for what clients send as dims (the same elements
 * in the same order). Fixed sizes only. */
static int parse_reshape(const json_t *t, const char *path, struct gj_tensor_config *tc,
                         struct gj_error *err)
{
    const json_t *rs = json_object_get(t, "reshape");
    if (!rs)
        return 0;
    static const char *const keys[] = { "shape", NULL };
    char p[160];
    snprintf(p, sizeof p, "%s.reshape", path);
    int64_t dims[GJ_TENSOR_MAX_RANK];
    int rank = 0;
    if (!json_is_object(rs) || gj_cfg_check_keys(rs, p, keys, err))
        CFG_FAIL(p, CFG ": %s must be {\"shape\": [...]}", p);
    snprintf(p, sizeof p, "%s.reshape.shape", path);
    if (parse_dims(json_object_get(rs, "shape"), p, dims, &rank, err))
        return -1;
    int64_t n = elements(rank, dims), want = elements(tc->rank, tc->dims);
    if (n < 0 || want < 0)
        CFG_FAIL(p, CFG ": %s: a reshape needs fixed sizes in dims and shape", p);
    if (n != want)
        CFG_FAIL(p, CFG ": %s has %lld elements but dims has %lld", p, (long long)n, (long long)want);
    tc->has_reshape = 1;
    tc->reshape_rank = rank;
    memcpy(tc->reshape, dims, sizeof dims);
    return 0;
}

static int parse_one(const json_t *t, const char *path, int is_input, struct gj_tensor_config *tc,
                     struct gj_error *err)
{
    static const char *const in_keys[] = { "name", "data_type", "datatype", "dims", "reshape",
        "optional", "format", "is_shape_tensor", "allow_ragged_batch", "is_non_linear_format_io",
        NULL };
    static const char *const out_keys[] = { "name", "data_type", "datatype", "dims", "reshape",
        "label_filename", "is_shape_tensor", "is_non_linear_format_io", NULL };
    char p[160];
    if (!json_is_object(t))
        CFG_FAIL(path, CFG ": %s must be an object {name, data_type, dims}", path);
    if (gj_cfg_check_keys(t, path, is_input ? in_keys : out_keys, err))
        return -1;
    snprintf(p, sizeof p, "%s.name", path);
    if (gj_cfg_get_str(json_object_get(t, "name"), p, tc->name, sizeof tc->name, err))
        return -1;
    const json_t *dt = json_object_get(t, "data_type");
    snprintf(p, sizeof p, "%s.data_type", path);
    if (parse_type(dt ? dt : json_object_get(t, "datatype"), p, &tc->elem_type, err))
        return -1;
    snprintf(p, sizeof p, "%s.dims", path);
    if (parse_dims(json_object_get(t, "dims"), p, tc->dims, &tc->rank, err))
        return -1;
    const json_t *lf = json_object_get(t, "label_filename");
    if (lf && !(json_is_string(lf) && json_string_length(lf) == 0)) {
        snprintf(p, sizeof p, "%s.label_filename", path);
        if (gj_cfg_get_str(lf, p, tc->label_filename, sizeof tc->label_filename, err))
            return -1;
        if (!gj_safe_name(tc->label_filename))
            CFG_FAIL(p, CFG ": %s must be a file name in the model's directory", p);
    }
    const json_t *fmt = json_object_get(t, "format");
    if (fmt && (!json_is_string(fmt) || (strcmp(json_string_value(fmt), "FORMAT_NONE") != 0 &&
                                        strcmp(json_string_value(fmt), "FORMAT_NCHW") != 0 &&
                                        strcmp(json_string_value(fmt), "FORMAT_NHWC") != 0)))
        CFG_FAIL(path, CFG ": %s.format must be FORMAT_NONE, FORMAT_NCHW or FORMAT_NHWC", path);
    if (refuse_true(t, path, "optional", "optional inputs are not supported (every input of an "
                    "ONNX model is needed)", err) ||
        refuse_true(t, path, "is_shape_tensor", "shape tensors are not supported", err) ||
        refuse_true(t, path, "allow_ragged_batch", "ragged batches are not supported", err) ||
        refuse_true(t, path, "is_non_linear_format_io", "non-linear formats are not supported", err))
        return -1;
    return parse_reshape(t, path, tc, err);
}

int gj_cfg_parse_tensors(const json_t *arr, int is_input, struct gj_tensor_config **out,
                         size_t *n, struct gj_error *err)
{
    const char *what = is_input ? "input" : "output";
    *out = NULL;
    *n = 0;
    if (!arr)
        return 0;
    if (!json_is_array(arr) || json_array_size(arr) > GJ_MODEL_MAX_TENSORS)
        CFG_FAIL(what, CFG ": %s must be an array of at most %d tensors", what, GJ_MODEL_MAX_TENSORS);
    size_t cnt = json_array_size(arr);
    struct gj_tensor_config *t = calloc(cnt ? cnt : 1, sizeof *t);
    if (!t)
        CFG_FAIL(what, "out of memory");
    *out = t;   /* owned by the config from here: freed with it on any error */
    for (size_t i = 0; i < cnt; i++) {
        char p[48];
        snprintf(p, sizeof p, "%s[%zu]", what, i);
        if (parse_one(json_array_get(arr, i), p, is_input, &t[i], err))
            return -1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(t[j].name, t[i].name) == 0)
                CFG_FAIL(p, CFG ": %s: %s '%s' is given twice", p, what, t[i].name);
        (*n)++;
    }
    return 0;
}

/* parameters: {key: {"string_value": "..."}}, kept as given. */
static int parse_parameters(const json_t *v, struct gj_model_config *cfg, struct gj_error *err)
{
    static const char *const keys[] = { "string_value", NULL };
    const char *key;
    json_t *p;
    if (!json_is_object(v))
        CFG_FAIL("parameters", CFG ": parameters must be an object {key: {\"string_value\": ...}}");
    json_object_foreach((json_t *)v, key, p) {
        char path[160];
        snprintf(path, sizeof path, "parameters.%.100s", key);
        if (!json_is_object(p) || gj_cfg_check_keys(p, path, keys, err) ||
            !json_is_string(json_object_get(p, "string_value")))
            CFG_FAIL(path, CFG ": %s must be {\"string_value\": \"...\"}", path);
    }
    cfg->parameters = json_incref((json_t *)v);
    return 0;
}

/* An object or list that must be empty or absent (what it configures is not implemented). */
static int must_be_empty(const json_t *root, const char *key, const char *why, struct gj_error *err)
{
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0) ||
        (json_is_object(v) && json_object_size(v) == 0))
        return 0;
    CFG_FAIL(key, CFG ": %s: %s", key, why);
}

int gj_cfg_parse_triton_extras(const json_t *root, struct gj_model_config *cfg, struct gj_error *err)
{
    const json_t *v = json_object_get(root, "backend");
    if (v && (!json_is_string(v) || (json_string_length(v) && strcmp(json_string_value(v), "onnxruntime") != 0)))
        CFG_FAIL("backend", CFG ": backend must be \"onnxruntime\" (the only backend this server runs)");
    v = json_object_get(root, "default_model_filename");
    if (v && (!json_is_string(v) || (json_string_length(v) && strcmp(json_string_value(v), "model.onnx") != 0)))
        CFG_FAIL("default_model_filename", CFG ": default_model_filename must be \"model.onnx\" "
                 "(each version's file)");
    v = json_object_get(root, "model_transaction_policy");
    if (v && json_is_object(v) && json_is_true(json_object_get(v, "decoupled")))
        CFG_FAIL("model_transaction_policy", CFG ": decoupled models are not supported");
    if (must_be_empty(root, "sequence_batching", "sequence batching is not supported", err) ||
        must_be_empty(root, "ensemble_scheduling", "ensembles are not supported", err) ||
        must_be_empty(root, "batch_input", "batch inputs are not supported", err) ||
        must_be_empty(root, "batch_output", "batch outputs are not supported", err))
        return -1;
    v = json_object_get(root, "parameters");
    return v ? parse_parameters(v, cfg, err) : 0;
}

int gj_cfg_parse_queue_policy(const json_t *qp, struct gj_model_config *cfg, struct gj_error *err)
{
    static const char *const keys[] = { "timeout_action", "default_timeout_microseconds",
                                        "allow_timeout_override", "max_queue_size", NULL };
    int64_t iv;
    if (!json_is_object(qp))
        CFG_FAIL("dynamic_batching.default_queue_policy", CFG ": dynamic_batching."
                 "default_queue_policy must be an object");
    if (gj_cfg_check_keys(qp, "dynamic_batching.default_queue_policy", keys, err))
        return -1;
    const json_t *a = json_object_get(qp, "timeout_action");
    if (a && (!json_is_string(a) || strcmp(json_string_value(a), "REJECT") != 0))
        CFG_FAIL("dynamic_batching.default_queue_policy.timeout_action", CFG ": dynamic_batching."
                 "default_queue_policy.timeout_action must be REJECT (DELAY is not supported)");
    const json_t *t = json_object_get(qp, "default_timeout_microseconds");
    if (t && gj_cfg_get_int64(t, "dynamic_batching.default_queue_policy.default_timeout_microseconds",
                            0, 3600000000LL, &cfg->queue_timeout_us, err))
        return -1;
    const json_t *q = json_object_get(qp, "max_queue_size");
    if (q) {
        if (gj_cfg_get_int(q, "dynamic_batching.default_queue_policy.max_queue_size", 0, 1000000,
                           &iv, err))
            return -1;
        cfg->max_queue_size = (size_t)iv;
    }
    return 0;
}
