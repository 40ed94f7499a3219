/*
 * model_config.c — config.json of a model repository entry: parse, check, describe.
 * See model_repo.h for the format. Every error names the field and says what is wrong.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "infer/onnx/onnx_elem.h"
#include "infer/serving/model_config_internal.h"
#include "infer/serving/model_repo.h"

#define CFG "config.json"

const char *gj_instance_kind_name(enum gj_instance_kind k)
{
    return k == GJ_INSTANCE_GPU ? "KIND_GPU" : k == GJ_INSTANCE_CPU ? "KIND_CPU" : "KIND_AUTO";
}

const char *gj_precision_name(enum gj_precision p)
{
    return p == GJ_PRECISION_TF32 ? "tf32" : p == GJ_PRECISION_FP16 ? "fp16" : "fp32";
}

int gj_model_name_ok(const char *name)
{
    if (!name || !name[0] || name[0] == '.')
        return 0;
    size_t n = 0;
    for (const char *p = name; *p; p++, n++) {
        if (n >= GJ_MODEL_NAME_MAX - 1)
            return 0;
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-')
            return 0;
    }
    return 1;
}

/* Fails with field "config.json: <path>". */
#define FAIL CFG_FAIL

#define check_keys gj_cfg_check_keys
#define get_int gj_cfg_get_int
#define get_str gj_cfg_get_str

static int get_num(const json_t *v, const char *path, double *out, struct gj_error *err)
{
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        FAIL(path, CFG ": %s must be a finite number", path);
    *out = json_number_value(v);
    return 0;
}

static int lookup_enum(const json_t *v, const char *path, const char *const *names, int n,
                       int *out, struct gj_error *err)
{
    if (json_is_string(v))
        for (int i = 0; i < n; i++)
            if (strcasecmp(json_string_value(v), names[i]) == 0) {
                *out = i;
                return 0;
            }
    char list[160] = "";
    for (int i = 0; i < n; i++) {
        strncat(list, names[i], sizeof list - strlen(list) - 1);
        if (i + 1 < n)
            strncat(list, ", ", sizeof list - strlen(list) - 1);
    }
    FAIL(path, CFG ": %s must be one of: %s", path, list);
}

static int parse_tensor(const json_t *t, const char *path, char *name, size_t namelen,
                        int64_t *dims, int want_rank, struct gj_error *err)
{
    static const char *const keys[] = { "name", "dims", "datatype", "data_type", NULL };
    char p[96];
    if (!json_is_object(t))
        FAIL(path, CFG ": %s is required: an object with name and dims", path);
    if (check_keys(t, path, keys, err))
        return -1;
    snprintf(p, sizeof p, "%s.name", path);
    if (get_str(json_object_get(t, "name"), p, name, namelen, err))
        return -1;
    json_t *dt = json_object_get(t, "datatype");
    if (!dt)
        dt = json_object_get(t, "data_type");
    if (dt && (!json_is_string(dt) || (strcmp(json_string_value(dt), "FP32") != 0 &&
                                      strcmp(json_string_value(dt), "TYPE_FP32") != 0)))
        FAIL(path, CFG ": %s.datatype must be FP32 (the only type the preprocessing makes)", path);
    json_t *d = json_object_get(t, "dims");
    snprintf(p, sizeof p, "%s.dims", path);
    if (!json_is_array(d) || (int)json_array_size(d) != want_rank)
        FAIL(p, CFG ": %s must be an array of %d integers (%s, without the batch dimension)",
             p, want_rank, want_rank == 3 ? "[channels, height, width]" : "[number of labels]");
    for (int i = 0; i < want_rank; i++) {
        char pi[112];
        snprintf(pi, sizeof pi, "%s[%d]", p, i);
        if (get_int(json_array_get(d, (size_t)i), pi, 1,
                    want_rank == 3 ? (i == 0 ? 3 : GJ_MODEL_MAX_DIM) : GJ_MODEL_MAX_LABELS,
                    &dims[i], err))
            return -1;
    }
    return 0;
}

static int parse_str_list(const json_t *v, const char *path, char *buf, size_t stride,
                          size_t *n, struct gj_error *err)
{
    if (!json_is_array(v))
        FAIL(path, CFG ": %s must be an array of strings", path);
    if (json_array_size(v) > GJ_MODEL_MAX_FILTER)
        FAIL(path, CFG ": %s has more than %d values", path, GJ_MODEL_MAX_FILTER);
    *n = 0;
    for (size_t i = 0; i < json_array_size(v); i++) {
        char p[112];
        snprintf(p, sizeof p, "%s[%zu]", path, i);
        if (get_str(json_array_get(v, i), p, buf + i * stride, stride, err))
            return -1;
        (*n)++;
    }
    return 0;
}

static int parse_channel_values(const json_t *v, const char *path, int channels, float *out,
                                int positive, struct gj_error *err)
{
    double d;
    if (json_is_number(v)) {
        if (get_num(v, path, &d, err))
            return -1;
        for (int c = 0; c < 3; c++)
            out[c] = (float)d;
    } else if (json_is_array(v) && (json_array_size(v) == 1 ||
                                    json_array_size(v) == (size_t)channels)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            char p[112];
            snprintf(p, sizeof p, "%s[%zu]", path, i);
            if (get_num(json_array_get(v, i), p, &d, err))
                return -1;
            out[i] = (float)d;
        }
        if (json_array_size(v) == 1)
            out[1] = out[2] = out[0];
    } else {
        FAIL(path, CFG ": %s must be a number or an array of 1 or %d numbers (one per channel)",
             path, channels);
    }
    for (int c = 0; c < 3; c++)
        if (positive && !(out[c] > 0.0f))
            FAIL(path, CFG ": %s must be greater than 0", path);
    return 0;
}

static int parse_preprocessing(const json_t *pp, struct gj_model_config *cfg,
                               struct gj_error *err)
{
    static const char *const keys[] = { "window", "invert_monochrome1", "resize", "mean", "std",
                                        "channels", NULL };
    static const char *const win_keys[] = { "source", "center", "width", "function", NULL };
    static const char *const resize_keys[] = { "method", "height", "width", NULL };
    static const char *const sources[] = { "file", "fixed", "minmax" };
    static const char *const functions[] = { "LINEAR", "LINEAR_EXACT", "SIGMOID" };
    static const char *const methods[] = { "bilinear", "area", "nearest" };
    struct gj_preprocess_config *pc = &cfg->pre;
    int64_t iv;
    int e;

    pc->window_source = GJ_WINDOW_FILE;
    pc->function = GJ_VOI_LINEAR;
    pc->invert_monochrome1 = 1;
    pc->resize = GJ_RESIZE_BILINEAR;
    pc->channels = (int)cfg->input_dims[0];
    pc->height = (int)cfg->input_dims[1];
    pc->width_px = (int)cfg->input_dims[2];
    for (int c = 0; c < 3; c++) {
        pc->mean[c] = 0.0f;
        pc->std[c] = 1.0f;
    }
    if (pc->channels == 2)
        FAIL("input.dims[0]", CFG ": input.dims[0] (channels) must be 1 or 3");
    if (!pp)
        return 0;
    if (!json_is_object(pp))
        FAIL("preprocessing", CFG ": preprocessing must be an object");
    if (check_keys(pp, "preprocessing", keys, err))
        return -1;

    json_t *ch = json_object_get(pp, "channels");
    if (ch) {
        if (get_int(ch, "preprocessing.channels", 1, 3, &iv, err))
            return -1;
        if (iv == 2)
            FAIL("preprocessing.channels", CFG ": preprocessing.channels must be 1 or 3");
        if (iv != cfg->input_dims[0])
            FAIL("preprocessing.channels", CFG ": preprocessing.channels is %lld but the input "
                 "has %lld channels (input.dims[0])", (long long)iv,
                 (long long)cfg->input_dims[0]);
    }

    json_t *w = json_object_get(pp, "window");
    if (w) {
        if (!json_is_object(w))
            FAIL("preprocessing.window", CFG ": preprocessing.window must be an object");
        if (check_keys(w, "preprocessing.window", win_keys, err))
            return -1;
        json_t *src = json_object_get(w, "source");
        if (src) {
            if (lookup_enum(src, "preprocessing.window.source", sources, 3, &e, err))
                return -1;
            pc->window_source = (enum gj_window_source)e;
        }
        json_t *fn = json_object_get(w, "function");
        if (fn) {
            if (lookup_enum(fn, "preprocessing.window.function", functions, 3, &e, err))
                return -1;
            pc->function = (enum gj_voi_function)e;
        }
        json_t *c = json_object_get(w, "center"), *wd = json_object_get(w, "width");
        if ((c == NULL) != (wd == NULL))
            FAIL(c ? "preprocessing.window.width" : "preprocessing.window.center",
                 CFG ": preprocessing.window needs both center and width, or neither");
        if (c) {
            if (get_num(c, "preprocessing.window.center", &pc->center, err) ||
                get_num(wd, "preprocessing.window.width", &pc->width, err))
                return -1;
            double min_w = pc->function == GJ_VOI_LINEAR ? 1.0 : 0.0;
            if (!(pc->width >= min_w) || (pc->function != GJ_VOI_LINEAR && pc->width <= 0))
                FAIL("preprocessing.window.width", CFG ": preprocessing.window.width must be %s",
                     pc->function == GJ_VOI_LINEAR ? ">= 1 for LINEAR (DICOM PS3.3 C.11.2.1.2)"
                                                   : "> 0");
            pc->has_fixed_window = 1;
        }
    }
    if (pc->window_source == GJ_WINDOW_FIXED && !pc->has_fixed_window)
        FAIL("preprocessing.window", CFG ": preprocessing.window.source fixed needs center "
             "and width");

    json_t *inv = json_object_get(pp, "invert_monochrome1");
    if (inv) {
        if (!json_is_boolean(inv))
            FAIL("preprocessing.invert_monochrome1", CFG ": preprocessing.invert_monochrome1 "
                 "must be true or false");
        pc->invert_monochrome1 = json_is_true(inv);
    }

    json_t *rs = json_object_get(pp, "resize");
    if (rs) {
        if (!json_is_object(rs))
            FAIL("preprocessing.resize", CFG ": preprocessing.resize must be an object");
        if (check_keys(rs, "preprocessing.resize", resize_keys, err))
            return -1;
        json_t *m = json_object_get(rs, "method");
        if (m) {
            if (lookup_enum(m, "preprocessing.resize.method", methods, 3, &e, err))
                return -1;
            pc->resize = (enum gj_resize_method)e;
        }
        json_t *h = json_object_get(rs, "height"), *wi = json_object_get(rs, "width");
        if (h) {
            if (get_int(h, "preprocessing.resize.height", 1, GJ_MODEL_MAX_DIM, &iv, err))
                return -1;
            if (iv != cfg->input_dims[1])
                FAIL("preprocessing.resize.height", CFG ": preprocessing.resize.height is %lld "
                     "but the input height (input.dims[1]) is %lld", (long long)iv,
                     (long long)cfg->input_dims[1]);
        }
        if (wi) {
            if (get_int(wi, "preprocessing.resize.width", 1, GJ_MODEL_MAX_DIM, &iv, err))
                return -1;
            if (iv != cfg->input_dims[2])
                FAIL("preprocessing.resize.width", CFG ": preprocessing.resize.width is %lld "
                     "but the input width (input.dims[2]) is %lld", (long long)iv,
                     (long long)cfg->input_dims[2]);
        }
    }
    json_t *mean = json_object_get(pp, "mean"), *std = json_object_get(pp, "std");
    if (mean && parse_channel_values(mean, "preprocessing.mean", pc->channels, pc->mean, 0, err))
        return -1;
    if (std && parse_channel_values(std, "preprocessing.std", pc->channels, pc->std, 1, err))
        return -1;
    return 0;
}

static int parse_filter(const json_t *f, struct gj_model_filter *flt, struct gj_error *err)
{
    static const char *const keys[] = { "modalities", "body_parts", "view_positions",
                                        "allow_missing", NULL };
    if (!f)
        return 0;
    if (!json_is_object(f))
        FAIL("filter", CFG ": filter must be an object");
    if (check_keys(f, "filter", keys, err))
        return -1;
    json_t *v;
    if ((v = json_object_get(f, "modalities")) &&
        parse_str_list(v, "filter.modalities", &flt->modalities[0][0], sizeof flt->modalities[0],
                       &flt->n_modalities, err))
        return -1;
    if ((v = json_object_get(f, "body_parts")) &&
        parse_str_list(v, "filter.body_parts", &flt->body_parts[0][0], sizeof flt->body_parts[0],
                       &flt->n_body_parts, err))
        return -1;
    if ((v = json_object_get(f, "view_positions")) &&
        parse_str_list(v, "filter.view_positions", &flt->view_positions[0][0],
                       sizeof flt->view_positions[0], &flt->n_view_positions, err))
        return -1;
    if ((v = json_object_get(f, "allow_missing"))) {
        if (!json_is_boolean(v))
            FAIL("filter.allow_missing", CFG ": filter.allow_missing must be true or false");
        flt->allow_missing = json_is_true(v);
    }
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* instance_group (or the older instances_per_device), precision and cuda_graphs: where
 * and how the model's instances run. */
static int parse_instances(const json_t *root, struct gj_model_config *cfg, struct gj_error *err)
{
    static const char *const keys[] = { "kind", "count", "gpus", "name", "profile", "passive",
                                        "host_policy", "secondary_devices", "rate_limiter", NULL };
    static const char *const kinds[] = { "KIND_AUTO", "KIND_GPU", "KIND_CPU" };
    static const char *const precisions[] = { "fp32", "tf32", "fp16" };
    int64_t iv;
    int e;

    cfg->instances_per_device = 1;
    cfg->instance_kind = GJ_INSTANCE_AUTO;
    cfg->precision = GJ_PRECISION_FP32;
    cfg->cuda_graphs = 1;
    const json_t *old = json_object_get(root, "instances_per_device");
    if (old) {
        if (get_int(old, "instances_per_device", 1, 64, &iv, err))
            return -1;
        cfg->instances_per_device = (int)iv;
    }
    const json_t *g = json_object_get(root, "instance_group");
    int triton_list = json_is_array(g);
    if (json_is_array(g)) {   /* Triton's form: a list of groups */
        if (json_array_size(g) != 1)
            FAIL("instance_group", CFG ": instance_group must be one group (an object, or a "
                 "list of one): several groups are not supported");
        g = json_array_get(g, 0);
    }
    if (g) {
        if (!json_is_object(g))
            FAIL("instance_group", CFG ": instance_group must be an object {\"kind\", "
                 "\"count\", \"gpus\"}");
        if (check_keys(g, "instance_group", keys, err))
            return -1;
        const json_t *k = json_object_get(g, "kind");
        if (k) {
            if (lookup_enum(k, "instance_group.kind", kinds, 3, &e, err))
                return -1;
            cfg->instance_kind = (enum gj_instance_kind)e;
        }
        const json_t *c = json_object_get(g, "count");
        if (c) {
            if (old)
                FAIL("instance_group.count", CFG ": give instance_group.count or "
                     "instances_per_device (its older spelling), not both");
            if (get_int(c, "instance_group.count", 1, 64, &iv, err))
                return -1;
            cfg->instances_per_device = (int)iv;
        }
        const json_t *gpus = json_object_get(g, "gpus");
        if (triton_list && json_is_array(gpus) && json_array_size(gpus) == 0)
            gpus = NULL;   /* Triton's: none listed, every GPU */
        if (gpus) {
            if (!json_is_array(gpus) || json_array_size(gpus) == 0 ||
                json_array_size(gpus) > GJ_MODEL_MAX_GPUS)
                FAIL("instance_group.gpus", CFG ": instance_group.gpus must be an array of 1 to "
                     "%d GPU ordinals", GJ_MODEL_MAX_GPUS);
            if (cfg->instance_kind == GJ_INSTANCE_CPU)
                FAIL("instance_group.gpus", CFG ": instance_group.gpus lists GPUs but "
                     "instance_group.kind is KIND_CPU");
            for (size_t i = 0; i < json_array_size(gpus); i++) {
                char p[48];
                snprintf(p, sizeof p, "instance_group.gpus[%zu]", i);
                if (get_int(json_array_get(gpus, i), p, 0, GJ_MODEL_MAX_GPUS - 1, &iv, err))
                    return -1;
                for (size_t j = 0; j < cfg->n_gpus; j++)
                    if (cfg->gpus[j] == iv)
                        FAIL(p, CFG ": %s: GPU %lld is listed twice", p, (long long)iv);
                cfg->gpus[cfg->n_gpus++] = (int)iv;
            }
            qsort(cfg->gpus, cfg->n_gpus, sizeof cfg->gpus[0], cmp_int);
        }
    }
    const json_t *pr = json_object_get(root, "precision");
    if (pr) {
        if (lookup_enum(pr, "precision", precisions, 3, &e, err))
            return -1;
        cfg->precision = (enum gj_precision)e;
        if (cfg->precision != GJ_PRECISION_FP32 && cfg->instance_kind == GJ_INSTANCE_CPU)
            FAIL("precision", CFG ": precision %s needs a GPU, but instance_group.kind is "
                 "KIND_CPU (CPU instances run in fp32)", precisions[e]);
    }
    const json_t *cg = json_object_get(root, "cuda_graphs");
    if (cg) {
        if (!json_is_boolean(cg))
            FAIL("cuda_graphs", CFG ": cuda_graphs must be true or false");
        cfg->cuda_graphs = json_is_true(cg);
    }
    return 0;
}

/* version_policy, as Triton's: {"all": {}} (the default here: every version is served),
 * {"latest": {"num_versions": N}} or {"specific": {"versions": [...]}}. */
static int parse_version_policy(const json_t *vp, struct gj_model_config *cfg, struct gj_error *err)
{
    static const char *const kinds[] = { "all", "latest", "specific", NULL };
    static const char *const latest_keys[] = { "num_versions", NULL };
    static const char *const specific_keys[] = { "versions", NULL };
    int64_t iv;
    cfg->version_policy = GJ_VERSIONS_ALL;
    if (!vp)
        return 0;
    if (!json_is_object(vp) || json_object_size(vp) != 1)
        FAIL("version_policy", CFG ": version_policy must be one of {\"all\": {}}, {\"latest\": "
             "{\"num_versions\": N}} or {\"specific\": {\"versions\": [...]}}");
    if (check_keys(vp, "version_policy", kinds, err))
        return -1;
    const json_t *all = json_object_get(vp, "all"), *latest = json_object_get(vp, "latest");
    const json_t *spec = json_object_get(vp, "specific");
    if (all && (!json_is_object(all) || json_object_size(all)))
        FAIL("version_policy.all", CFG ": version_policy.all takes no settings: {}");
    if (latest) {
        if (!json_is_object(latest))
            FAIL("version_policy.latest", CFG ": version_policy.latest must be {\"num_versions\": N}");
        if (check_keys(latest, "version_policy.latest", latest_keys, err))
            return -1;
        if (get_int(json_object_get(latest, "num_versions"), "version_policy.latest.num_versions", 1,
                    GJ_MODEL_MAX_VERSIONS, &iv, err))
            return -1;
        cfg->version_policy = GJ_VERSIONS_LATEST;
        cfg->latest_versions = (int)iv;
    }
    if (spec) {
        const json_t *vs = json_is_object(spec) ? json_object_get(spec, "versions") : NULL;
        if (json_is_object(spec) && check_keys(spec, "version_policy.specific", specific_keys, err))
            return -1;
        if (!json_is_array(vs) || json_array_size(vs) < 1 || json_array_size(vs) > GJ_MODEL_MAX_SPECIFIC)
            FAIL("version_policy.specific", CFG ": version_policy.specific must be {\"versions\": "
                 "[1 to %d version numbers]}", GJ_MODEL_MAX_SPECIFIC);
        cfg->version_policy = GJ_VERSIONS_SPECIFIC;
        for (size_t i = 0; i < json_array_size(vs); i++) {
            char p[64];
            snprintf(p, sizeof p, "version_policy.specific.versions[%zu]", i);
            if (gj_cfg_get_int64(json_array_get(vs, i), p, 1, 999999999, &iv, err))
                return -1;
            cfg->specific_versions[cfg->n_specific++] = iv;
        }
    }
    return 0;
}

/* labels: distinct names; want >= 0: exactly that many. */
static int parse_labels(const json_t *labels, int64_t want, struct gj_model_config *cfg,
                        struct gj_error *err)
{
    if (!json_is_array(labels))
        FAIL("labels", CFG ": labels must be an array of strings");
    if (want >= 0 && (int64_t)json_array_size(labels) != want)
        FAIL("labels", CFG ": labels has %zu names but output.dims is [%lld]",
             json_array_size(labels), (long long)want);
    if (json_array_size(labels) > GJ_MODEL_MAX_LABELS)
        FAIL("labels", CFG ": labels has more than %d names", GJ_MODEL_MAX_LABELS);
    cfg->labels = calloc(json_array_size(labels) + 1, sizeof *cfg->labels);
    if (!cfg->labels)
        FAIL("labels", "out of memory");
    for (size_t i = 0; i < json_array_size(labels); i++) {
        char p[64], buf[GJ_MODEL_LABEL_MAX];
        snprintf(p, sizeof p, "labels[%zu]", i);
        if (get_str(json_array_get(labels, i), p, buf, sizeof buf, err))
            return -1;
        for (size_t j = 0; j < cfg->n_labels; j++)
            if (strcmp(cfg->labels[j], buf) == 0)
                FAIL(p, CFG ": label '%s' is given twice", buf);
        if (!(cfg->labels[i] = strdup(buf)))
            FAIL("labels", "out of memory");
        cfg->n_labels++;
    }
    return 0;
}

/* Our own form: one image input object, one output object, labels for it. The Triton
 * lists get the same two tensors. */
static int parse_own_tensors(const json_t *root, struct gj_model_config *cfg, struct gj_error *err)
{
    if (parse_tensor(json_object_get(root, "input"), "input", cfg->input_name,
                     sizeof cfg->input_name, cfg->input_dims, 3, err))
        return -1;
    int64_t od[1];
    if (parse_tensor(json_object_get(root, "output"), "output", cfg->output_name,
                     sizeof cfg->output_name, od, 1, err))
        return -1;
    cfg->n_outputs = od[0];
    json_t *labels = json_object_get(root, "labels");
    if (!labels)
        FAIL("labels", CFG ": labels is missing: the model's output needs %lld label names",
             (long long)cfg->n_outputs);
    if (parse_labels(labels, cfg->n_outputs, cfg, err))
        return -1;
    cfg->inputs = calloc(1, sizeof *cfg->inputs);
    cfg->outputs = calloc(1, sizeof *cfg->outputs);
    if (!cfg->inputs || !cfg->outputs)
        FAIL("input", "out of memory");
    cfg->n_inputs = cfg->n_output_tensors = 1;
    struct gj_tensor_config *in = cfg->inputs, *out = cfg->outputs;
    snprintf(in->name, sizeof in->name, "%s", cfg->input_name);
    in->elem_type = out->elem_type = ONNX_ELEM_FLOAT;
    in->rank = 3;
    memcpy(in->dims, cfg->input_dims, sizeof cfg->input_dims);
    snprintf(out->name, sizeof out->name, "%s", cfg->output_name);
    out->rank = 1;
    out->dims[0] = cfg->n_outputs;
    return 0;
}

/* Triton's form: input and output lists (either may be absent: auto-complete fills it at
 * load), labels optional (the image output's, when there is one). */
static int parse_triton_tensors(const json_t *root, struct gj_model_config *cfg,
                                struct gj_error *err)
{
    cfg->triton_form = 1;
    if (gj_cfg_parse_tensors(json_object_get(root, "input"), 1, &cfg->inputs, &cfg->n_inputs, err) ||
        gj_cfg_parse_tensors(json_object_get(root, "output"), 0, &cfg->outputs,
                             &cfg->n_output_tensors, err))
        return -1;
    json_t *labels = json_object_get(root, "labels");
    if (labels && parse_labels(labels, -1, cfg, err))
        return -1;
    json_t *pp = json_object_get(root, "preprocessing");
    if (pp && !json_is_object(pp))
        FAIL("preprocessing", CFG ": preprocessing must be an object");
    cfg->pre_json = pp ? json_incref(pp) : NULL;
    snprintf(cfg->not_image, sizeof cfg->not_image, "its inputs are not known until it is loaded");
    return 0;
}

static int parse_batching(const json_t *root, struct gj_model_config *cfg, struct gj_error *err)
{
    static const char *const dkeys[] = { "max_queue_delay_us", "preferred_batch_sizes",
        "max_queue_delay_microseconds", "preferred_batch_size", "preserve_ordering",
        "priority_levels", "default_priority_level", "default_queue_policy",
        "priority_queue_policy", NULL };
    int64_t iv;
    json_t *v;
    cfg->max_batch_size = 1;
    if ((v = json_object_get(root, "max_batch_size"))) {
        if (get_int(v, "max_batch_size", 0, GJ_MODEL_MAX_BATCH, &iv, err))
            return -1;
        cfg->max_batch_given = 1;
        cfg->no_batch = iv == 0 && cfg->triton_form;   /* Triton: 0 is no batch dimension */
        cfg->max_batch_size = iv ? (int)iv : 1;
    }
    if (cfg->triton_form && !cfg->max_batch_given && cfg->n_inputs && cfg->n_output_tensors)
        cfg->no_batch = 1;   /* Triton: lists given, no max_batch_size: 0, nothing completes it */
    if (!(v = json_object_get(root, "dynamic_batching")))
        return 0;
    if (!json_is_object(v))
        FAIL("dynamic_batching", CFG ": dynamic_batching must be an object");
    if (check_keys(v, "dynamic_batching", dkeys, err))
        return -1;
    cfg->dynamic_batching = 1;
    json_t *d = json_object_get(v, "max_queue_delay_us");
    if (!d)
        d = json_object_get(v, "max_queue_delay_microseconds");
    if (d && gj_cfg_get_int64(d, "dynamic_batching.max_queue_delay_us", 0, 10000000,
                     &cfg->max_queue_delay_us, err))
        return -1;
    json_t *pl = json_object_get(v, "priority_levels");
    if (pl && (gj_cfg_get_int64(pl, "dynamic_batching.priority_levels", 0, 0, &iv, err)))
        return -1;
    json_t *pq = json_object_get(v, "priority_queue_policy");
    if (pq && (!json_is_object(pq) || json_object_size(pq)))
        FAIL("dynamic_batching.priority_queue_policy", CFG ": priority levels are not supported");
    json_t *qp = json_object_get(v, "default_queue_policy");
    if (qp && gj_cfg_parse_queue_policy(qp, cfg, err))
        return -1;
    json_t *pb = json_object_get(v, "preferred_batch_sizes");
    if (!pb)
        pb = json_object_get(v, "preferred_batch_size");
    if (!pb)
        return 0;
    if (!json_is_array(pb) || json_array_size(pb) > GJ_MODEL_MAX_PREFERRED)
        FAIL("dynamic_batching.preferred_batch_sizes", CFG ": dynamic_batching."
             "preferred_batch_sizes must be an array of at most %d integers",
             GJ_MODEL_MAX_PREFERRED);
    for (size_t i = 0; i < json_array_size(pb); i++) {
        char p[80];
        snprintf(p, sizeof p, "dynamic_batching.preferred_batch_sizes[%zu]", i);
        if (get_int(json_array_get(pb, i), p, 1, GJ_MODEL_MAX_BATCH, &iv, err))
            return -1;
        if (iv > cfg->max_batch_size && (cfg->max_batch_given || !cfg->triton_form))
            FAIL(p, CFG ": %s is %lld, more than max_batch_size %d", p, (long long)iv,
                 cfg->max_batch_size);
        cfg->preferred_batch_sizes[cfg->n_preferred++] = (int)iv;
    }
    return 0;
}

static int parse_config(const json_t *root, const char *expect_name, struct gj_model_config *cfg,
                        struct gj_error *err)
{
    static const char *const keys[] = { "name", "description", "platform", "input", "output",
        "labels", "output_activation", "max_batch_size", "dynamic_batching",
        "instances_per_device", "instance_group", "precision", "cuda_graphs", "default_version",
        "version_policy", "preprocessing", "filter",
        /* Triton's (model_config_triton.c) */
        "backend", "parameters", "optimization", "model_warmup", "default_model_filename",
        "cc_model_filenames", "metric_tags", "batch_input", "batch_output", "response_cache",
        "model_transaction_policy", "runtime", "model_repository_agents", "sequence_batching",
        "ensemble_scheduling", NULL };
    static const char *const acts[] = { "none", "sigmoid", "softmax" };
    int e;

    if (!json_is_object(root))
        FAIL("", CFG ": the file must hold a JSON object");
    if (check_keys(root, "", keys, err))
        return -1;
    json_t *v = json_object_get(root, "name");
    if (v) {
        if (get_str(v, "name", cfg->name, sizeof cfg->name, err))
            return -1;
        if (expect_name && strcmp(cfg->name, expect_name) != 0)
            FAIL("name", CFG ": name is '%s' but the model's directory is '%s'", cfg->name,
                 expect_name);
    } else if (expect_name) {
        snprintf(cfg->name, sizeof cfg->name, "%s", expect_name);
    }
    if ((v = json_object_get(root, "description")) && !json_is_string(v))
        FAIL("description", CFG ": description must be a string");
    if ((v = json_object_get(root, "platform")) &&
        (!json_is_string(v) || (strcmp(json_string_value(v), "onnx") != 0 &&
                                strcmp(json_string_value(v), "onnxruntime_onnx") != 0)))
        FAIL("platform", CFG ": platform must be \"onnxruntime_onnx\" (or \"onnx\": the only "
             "format this server runs)");
    if (gj_cfg_parse_triton_extras(root, cfg, err))
        return -1;
    json_t *in = json_object_get(root, "input"), *out = json_object_get(root, "output");
    int own = json_is_object(in) || json_is_object(out);
    if (own && (json_is_array(in) || json_is_array(out)))
        FAIL("input", CFG ": input and output are both objects (this server's form) or both "
             "lists (Triton's), not one of each");
    if (own ? parse_own_tensors(root, cfg, err) : parse_triton_tensors(root, cfg, err))
        return -1;
    if ((v = json_object_get(root, "output_activation"))) {
        if (lookup_enum(v, "output_activation", acts, 3, &e, err))
            return -1;
        cfg->activation = (enum gj_activation)e;
    }
    if (parse_batching(root, cfg, err) || parse_instances(root, cfg, err))
        return -1;
    if ((v = json_object_get(root, "default_version"))) {
        if (json_is_string(v) && strcmp(json_string_value(v), "latest") == 0)
            cfg->default_version = 0;
        else if (get_int(v, "default_version", 1, INT32_MAX, &cfg->default_version, err))
            return -1;
    }
    if (parse_version_policy(json_object_get(root, "version_policy"), cfg, err))
        return -1;
    if (own && parse_preprocessing(json_object_get(root, "preprocessing"), cfg, err))
        return -1;
    if (parse_filter(json_object_get(root, "filter"), &cfg->filter, err))
        return -1;
    cfg->image_model = own;
    return 0;
}

/* Why a Triton-form config is not a single-image model (NULL: it is one); *oi: the image
 * output (the first FP32 [N] output). */
static const char *image_shape(const struct gj_model_config *cfg, size_t *oi, char *why, size_t n)
{
    const struct gj_tensor_config *in = cfg->inputs;
    if (cfg->no_batch)
        return "it has no batch dimension (max_batch_size 0)";
    if (cfg->n_inputs != 1) {
        snprintf(why, n, "it has %zu inputs (an infer job feeds one image)", cfg->n_inputs);
        return why;
    }
    if (in->elem_type != ONNX_ELEM_FLOAT || in->rank != 3 || (in->dims[0] != 1 && in->dims[0] != 3) ||
        in->dims[1] < 1 || in->dims[1] > GJ_MODEL_MAX_DIM || in->dims[2] < 1 ||
        in->dims[2] > GJ_MODEL_MAX_DIM) {
        snprintf(why, n, "its input '%.100s' is not a FP32 image [C, H, W] with 1 or 3 channels "
                 "and fixed sizes", in->name);
        return why;
    }
    for (*oi = 0; *oi < cfg->n_output_tensors; (*oi)++) {
        const struct gj_tensor_config *o = &cfg->outputs[*oi];
        if (o->elem_type == ONNX_ELEM_FLOAT && o->rank == 1 && o->dims[0] >= 1 &&
            o->dims[0] <= GJ_MODEL_MAX_LABELS)
            return NULL;
    }
    return "it has no FP32 output of fixed size [N] (scores)";
}

static int copy_labels(struct gj_model_config *cfg, char *const *labels, size_t n)
{
    cfg->labels = calloc(n + 1, sizeof *cfg->labels);
    for (size_t i = 0; cfg->labels && i < n; i++) {
        if (!(cfg->labels[i] = strdup(labels[i])))
            return -1;
        cfg->n_labels++;
    }
    return cfg->labels ? 0 : -1;
}

int gj_model_config_settle_image(struct gj_model_config *cfg, char **const *file_labels,
                                 const size_t *n_file_labels, struct gj_error *err)
{
    if (!cfg->triton_form)
        return 0;
    char why[192];
    size_t oi = 0;
    const char *no = image_shape(cfg, &oi, why, sizeof why);
    const struct gj_tensor_config *o = no ? NULL : &cfg->outputs[oi];
    if (o && cfg->n_labels && (int64_t)cfg->n_labels != o->dims[0])
        FAIL("labels", CFG ": labels has %zu names but output '%s' has %lld scores", cfg->n_labels,
             o->name, (long long)o->dims[0]);
    if (o && !cfg->n_labels && file_labels && file_labels[oi]) {
        if ((int64_t)n_file_labels[oi] != o->dims[0]) {
            snprintf(why, sizeof why, "its label file %.100s has %zu labels for %lld scores",
                     o->label_filename, n_file_labels[oi], (long long)o->dims[0]);
            no = why;
        } else if (copy_labels(cfg, file_labels[oi], n_file_labels[oi])) {
            FAIL("labels", "out of memory");
        } else {
            cfg->labels_from_file = 1;
        }
    }
    if (o && !no && !cfg->n_labels) {
        snprintf(why, sizeof why, "its output '%.100s' has no labels (give labels, or its "
                 "label_filename)", o->name);
        no = why;
    }
    cfg->image_model = no == NULL;
    snprintf(cfg->not_image, sizeof cfg->not_image, "%s", no ? no : "");
    if (no && cfg->pre_json)
        FAIL("preprocessing", CFG ": preprocessing is given but the model is not an image model: %s",
             no);
    if (no || !o)
        return 0;
    snprintf(cfg->input_name, sizeof cfg->input_name, "%s", cfg->inputs[0].name);
    memcpy(cfg->input_dims, cfg->inputs[0].dims, sizeof cfg->input_dims);
    snprintf(cfg->output_name, sizeof cfg->output_name, "%s", o->name);
    cfg->n_outputs = o->dims[0];
    return parse_preprocessing(cfg->pre_json, cfg, err);
}

int gj_model_config_parse(const json_t *root, const char *expect_name, struct gj_model_config *cfg,
                          struct gj_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    return parse_config(root, expect_name, cfg, err);
}

int gj_model_config_load(const char *path, const char *expect_name, struct gj_model_config *cfg,
                         struct gj_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    char *text = NULL;
    size_t len = 0;
    if (gj_read_file(path, GJ_MODEL_CONFIG_MAX_BYTES, &text, &len)) {
        int e = errno;
        if (e == ENOENT)   /* no config: completed from the model at load */
            return gj_model_config_load_text(NULL, 0, expect_name, cfg, err);
        if (e == EFBIG || e == E2BIG || e == EOVERFLOW)
            return gj_error_set(err, "config.json", "config.json is larger than %u bytes",
                                GJ_MODEL_CONFIG_MAX_BYTES);
        return gj_error_set(err, "config.json", "cannot read config.json: %s", strerror(e));
    }
    int rc = gj_model_config_load_text(text, len, expect_name, cfg, err);
    free(text);
    return rc;
}

int gj_model_config_load_text(const char *text, size_t len, const char *expect_name,
                              struct gj_model_config *cfg, struct gj_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    if (!text) {   /* no config: Triton's form with nothing given, completed at load */
        text = "{}";
        len = 2;
    }
    if (len > GJ_MODEL_CONFIG_MAX_BYTES)
        return gj_error_set(err, "config.json", "config.json is larger than %u bytes",
                            GJ_MODEL_CONFIG_MAX_BYTES);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return gj_error_set(err, "config.json", "config.json is not valid JSON: line %d: %s",
                            jerr.line, jerr.text);
    int rc = parse_config(root, expect_name, cfg, err);
    json_decref(root);
    return rc;
}

void gj_model_config_free(struct gj_model_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; cfg->labels && i < cfg->n_labels; i++)
        free(cfg->labels[i]);
    free(cfg->labels);
    cfg->labels = NULL;
    cfg->n_labels = 0;
    free(cfg->inputs);
    free(cfg->outputs);
    cfg->inputs = cfg->outputs = NULL;
    cfg->n_inputs = cfg->n_output_tensors = 0;
    json_decref(cfg->parameters);
    json_decref(cfg->pre_json);
    cfg->parameters = cfg->pre_json = NULL;
}

static int copy_tensors(struct gj_tensor_config **dst, const struct gj_tensor_config *src, size_t n)
{
    *dst = NULL;
    if (!src)
        return 0;
    *dst = malloc((n ? n : 1) * sizeof **dst);
    if (*dst && n)
        memcpy(*dst, src, n * sizeof **dst);
    return *dst ? 0 : -1;
}

int gj_model_config_copy(struct gj_model_config *dst, const struct gj_model_config *src)
{
    *dst = *src;
    dst->labels = NULL;
    dst->n_labels = 0;
    dst->inputs = dst->outputs = NULL;
    dst->parameters = dst->pre_json = NULL;
    int rc = copy_tensors(&dst->inputs, src->inputs, src->n_inputs) |
             copy_tensors(&dst->outputs, src->outputs, src->n_output_tensors);
    if (src->labels && !(dst->labels = calloc(src->n_labels + 1, sizeof *dst->labels)))
        rc = -1;
    for (size_t i = 0; !rc && i < src->n_labels; i++, dst->n_labels++)
        if (!(dst->labels[i] = strdup(src->labels[i])))
            rc = -1;
    dst->parameters = src->parameters ? json_deep_copy(src->parameters) : NULL;
    dst->pre_json = src->pre_json ? json_deep_copy(src->pre_json) : NULL;
    if (rc || (src->parameters && !dst->parameters) || (src->pre_json && !dst->pre_json)) {
        gj_model_config_free(dst);
        return -1;
    }
    return 0;
}

/* Case-insensitive match of a DICOM code string against a list. */
static int in_list(const char *value, const char *base, size_t stride, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(value, base + i * stride) == 0)
            return 1;
    return 0;
}

static void list_text(char *out, size_t outlen, const char *base, size_t stride, size_t n)
{
    size_t off = 0;
    out[0] = '\0';
    off += (size_t)snprintf(out + off, outlen - off, "[");
    for (size_t i = 0; i < n && off < outlen; i++)
        off += (size_t)snprintf(out + off, outlen - off, "%s%s", i ? ", " : "", base + i * stride);
    if (off < outlen)
        snprintf(out + off, outlen - off, "]");
}

/* The value as it may be printed in a reason: a code string of letters, digits, space and
 * underscore (so no free text from a file reaches a log), else "(not a code string)". */
static const char *printable_cs(const char *v)
{
    if (strlen(v) > 64)
        return "(not a code string)";
    for (const char *p = v; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != ' ' && *p != '_')
            return "(not a code string)";
    return v;
}

static int check_one(const char *what, const char *value, const char *base, size_t stride,
                     size_t n, int allow_missing, char *reason, size_t reason_len)
{
    if (n == 0)
        return 1;
    int missing = !value || !value[0];
    if (missing ? allow_missing : in_list(value, base, stride, n))
        return 1;
    char list[600];   /* formatted only for a refusal: a passing image costs no snprintf */
    list_text(list, sizeof list, base, stride, n);
    if (missing)
        snprintf(reason, reason_len, "%s missing; the model accepts %s", what, list);
    else
        snprintf(reason, reason_len, "%s %s not in %s", what, printable_cs(value), list);
    return 0;
}

int gj_model_filter_check(const struct gj_model_filter *f, const char *modality,
                          const char *body_part, const char *view_position, char *reason,
                          size_t reason_len)
{
    if (reason_len)
        reason[0] = '\0';
    return check_one("modality", modality, &f->modalities[0][0], sizeof f->modalities[0],
                     f->n_modalities, f->allow_missing, reason, reason_len) &&
           check_one("body part", body_part, &f->body_parts[0][0], sizeof f->body_parts[0],
                     f->n_body_parts, f->allow_missing, reason, reason_len) &&
           check_one("view position", view_position, &f->view_positions[0][0],
                     sizeof f->view_positions[0], f->n_view_positions, f->allow_missing, reason,
                     reason_len);
}

int gj_model_policy_serves(const struct gj_model_config *cfg, const int64_t *all, size_t n,
                           int64_t version)
{
    switch (cfg->version_policy) {
    case GJ_VERSIONS_LATEST: {
        size_t higher = 0;
        for (size_t i = 0; i < n; i++)
            higher += all[i] > version;
        return higher < (size_t)cfg->latest_versions;
    }
    case GJ_VERSIONS_SPECIFIC:
        for (size_t i = 0; i < cfg->n_specific; i++)
            if (cfg->specific_versions[i] == version)
                return 1;
        return 0;
    case GJ_VERSIONS_ALL:
    default:
        return 1;
    }
}
