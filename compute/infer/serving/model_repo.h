/*
 * model_repo.h — the model repository of the inference module (Triton-like layout).
 *
 *   <models_dir>/<name>/config.json             the model's configuration (below)
 *   <models_dir>/<name>/<version>/model.onnx    one directory per version: a positive integer
 *   <models_dir>/<name>/<version>/config.json   optional: replaces the model's config for
 *                                               this version only
 *
 * config.json (every key but input, output and labels has a default; unknown keys are
 * refused, so a typo does not silently fall back to a default):
 *
 *   {
 *     "name": "chest-xray-demo",               optional; must equal the directory name
 *     "description": "...", "platform": "onnx",
 *     "input":  {"name": "image",  "dims": [C, H, W], "datatype": "FP32"},
 *     "output": {"name": "logits", "dims": [N], "datatype": "FP32"},
 *     "labels": ["no_finding", ...],           N distinct names
 *     "output_activation": "sigmoid",          sigmoid | softmax | none (default none)
 *     "max_batch_size": 8,                     1..1024 (0 or absent: 1, no batching)
 *     "dynamic_batching": {"max_queue_delay_us": 2000, "preferred_batch_sizes": [4, 8]},
 *     "instance_group": {"kind": "KIND_AUTO", "count": 1, "gpus": [0, 1]},
 *                 kind: KIND_AUTO (a GPU when the ONNX runtime has a usable CUDA backend,
 *                 else the CPU; the default), KIND_GPU (refused where there is no GPU),
 *                 KIND_CPU; count: instances (executor threads) per device, 1..64
 *                 (default 1); gpus: the CUDA ordinals it may use (default: every GPU).
 *                 Triton's list form [{...}] with one group is accepted too.
 *     "instances_per_device": 1,               older spelling of instance_group.count
 *     "precision": "fp32",                     fp32 | tf32 | fp16: GPU instances only (CPU
 *                                              instances run fp32; tf32/fp16 with KIND_CPU
 *                                              are refused)
 *     "cuda_graphs": true,                     GPU: capture and replay CUDA graphs
 *     "default_version": "latest",             or a version number
 *     "version_policy": {"all": {}},           the versions served, as Triton's: {"all": {}}
 *                 (the default: every version), {"latest": {"num_versions": N}} (the N
 *                 highest), {"specific": {"versions": [1, 3]}}; the others are listed but
 *                 never loaded (gj_model_policy_serves)
 *     "preprocessing": {
 *       "window": {"source": "file", "center": 128, "width": 256, "function": "LINEAR"},
 *                 source: file (the file's VOI window; center/width, when given, are the
 *                 fallback for files without one, else min-max), fixed, or minmax;
 *                 function: LINEAR | LINEAR_EXACT | SIGMOID (for fixed; a file's own
 *                 VOI LUT Function wins for its window)
 *       "invert_monochrome1": true,
 *       "resize": {"method": "area", "height": H, "width": W},    bilinear | area | nearest
 *       "mean": [0.5], "std": [0.25],          a number, or 1 or C numbers
 *       "channels": C                          1, or 3 (the gray image replicated)
 *     },
 *     "filter": {"modalities": ["CR", "DX"], "body_parts": ["CHEST"],
 *                "view_positions": ["PA", "AP"], "allow_missing": false}
 *   }
 *
 * Triton's JSON ModelConfig is read too (what Triton's GET /v2/models/{m}/config answers and
 * load_model(config=...) sends; model_config_triton.c): "input" and "output" as lists of
 * {name, data_type: "TYPE_FP32"..., dims (numbers or strings, -1: any size), reshape?,
 * label_filename?}, max_batch_size 0 for a model without a batch dimension, dynamic_batching
 * {max_queue_delay_microseconds, preferred_batch_size, default_queue_policy}, instance_group
 * [{kind, count, gpus}], parameters; Triton's fields that do not apply (optimization,
 * model_warmup, ...) are accepted and ignored, those that are not implemented
 * (sequence_batching, optional inputs, ...) refused by name. Our own keys (labels,
 * preprocessing, filter, ...) may sit beside them. Such a config describes any ONNX model:
 * several inputs and outputs of every element type.
 *
 * A config without input/output lists, or no config file at all, is completed from the ONNX
 * model at load as Triton's auto-complete does (model_check.c: the inputs and outputs, and
 * max_batch_size 4 with the dynamic batcher when every input and output has a variable first
 * dimension, else 0).
 *
 * Loading a version checks the config against the model itself (input and output names,
 * element types, shapes, batch dimension, number of labels), reads the outputs' label files
 * (next to model.onnx, else in the model's directory) and creates a trial session of batch 1,
 * so a model the runtime cannot run is refused at load with the reason. A model is an "image
 * model" (image_model: one FP32 [C, H, W] input, a FP32 [N] output with N labels), which
 * `infer` jobs need, when its config is our own form or its Triton form fits that.
 *
 * Two kinds of repository, one interface:
 *   - scanned (gj_model_repo_open): a directory in the layout above, read at open, by
 *     gj_model_repo_scan, and when a request names a model or version not seen yet
 *     (`gpujobd run --models-dir`, tests);
 *   - declared (gj_model_repo_new): it reads no directory of its own; its host declares
 *     each model as it is (config.json text, versions, where each version's files are,
 *     unloaded or not) with gj_model_repo_declare and takes models away with
 *     gj_model_repo_remove. The service declares what the shared model store in
 *     PostgreSQL holds (service/infer/model_sync.c), files cached by content.
 *
 * A repository is thread-safe: the service may list, load and unload from HTTP handlers
 * while workers use loaded models. A loaded model is reference-counted: unloading drops
 * the repository's reference; jobs holding one keep using it until they release it.
 *
 * Loading is explicit (gj_model_repo_load, an admin's POST /v1/models/{name}/load) or
 * on first use (gj_model_repo_acquire: `infer` jobs, /v2 infer). A version an admin
 * unloaded stays unloaded: use does not load it again, only an explicit load does.
 * Readiness (gj_model_repo_get_loaded) never loads.
 *
 * A request that names no version is served the config's default_version, parsed once per
 * model and kept until the config may have changed: declared anew, a scan, a load, an unload
 * or a failed load (in a scanned repository an edit of config.json on disk counts from then).
 *
 * A loaded model's identity is its content: the SHA-256 of its model.onnx
 * (gj_served_model_digest), which the batchers are keyed by.
 */
#ifndef GJ_MODEL_REPO_H
#define GJ_MODEL_REPO_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/gj_error.h"

#define GJ_MODEL_NAME_MAX 128          /* bytes of a model name, NUL included */
#define GJ_MODEL_MAX_LABELS 4096
#define GJ_MODEL_LABEL_MAX 128         /* bytes of a label, NUL included */
#define GJ_MODEL_MAX_FILTER 32         /* values per filter list */
#define GJ_MODEL_MAX_BATCH 1024
#define GJ_MODEL_MAX_PREFERRED 16
#define GJ_MODEL_MAX_VERSIONS 1024
#define GJ_MODEL_MAX_MODELS 4096
#define GJ_MODEL_MAX_DIM 8192          /* input height / width */
#define GJ_MODEL_CONFIG_MAX_BYTES (1u << 20)
#define GJ_MODEL_MAX_GPUS 64           /* instance_group.gpus: ordinals 0..63 */

enum gj_resize_method { GJ_RESIZE_BILINEAR = 0, GJ_RESIZE_AREA, GJ_RESIZE_NEAREST };
enum gj_window_source { GJ_WINDOW_FILE = 0, GJ_WINDOW_FIXED, GJ_WINDOW_MINMAX };
enum gj_voi_function { GJ_VOI_LINEAR = 0, GJ_VOI_LINEAR_EXACT, GJ_VOI_SIGMOID };
enum gj_activation { GJ_ACT_NONE = 0, GJ_ACT_SIGMOID, GJ_ACT_SOFTMAX };
enum gj_instance_kind { GJ_INSTANCE_AUTO = 0, GJ_INSTANCE_GPU, GJ_INSTANCE_CPU };
/* Numbered as the ONNX runtime's enum onnx_precision (FP32 0, TF32 1, FP16 2). */
enum gj_precision { GJ_PRECISION_FP32 = 0, GJ_PRECISION_TF32 = 1, GJ_PRECISION_FP16 = 2 };
enum gj_version_policy { GJ_VERSIONS_ALL = 0, GJ_VERSIONS_LATEST, GJ_VERSIONS_SPECIFIC };
#define GJ_MODEL_MAX_SPECIFIC 64       /* version_policy.specific.versions */

struct gj_preprocess_config {
    enum gj_window_source window_source;
    int has_fixed_window;              /* center/width given */
    double center, width;
    enum gj_voi_function function;
    int invert_monochrome1;            /* default 1 */
    enum gj_resize_method resize;
    int height, width_px;              /* output size (the model's H, W) */
    int channels;                      /* 1 or 3 */
    float mean[3], std[3];             /* per output channel */
};

struct gj_model_filter {
    size_t n_modalities, n_body_parts, n_view_positions;
    char modalities[GJ_MODEL_MAX_FILTER][20];
    char body_parts[GJ_MODEL_MAX_FILTER][68];
    char view_positions[GJ_MODEL_MAX_FILTER][20];
    int allow_missing;                 /* 1: an absent attribute passes its filter */
};

#define GJ_MODEL_MAX_TENSORS 64
#define GJ_TENSOR_MAX_RANK 8

/* One input or output as Triton's ModelConfig gives it. */
struct gj_tensor_config {
    char name[256];
    int elem_type;             /* ONNX_ELEM_* (onnx_model.h) */
    int rank;                  /* dims without the batch dimension */
    int64_t dims[GJ_TENSOR_MAX_RANK];   /* -1: any size */
    char label_filename[128];  /* "" none (outputs) */
    int has_reshape;           /* Triton's reshape: the model's shape of the tensor (without the */
    int reshape_rank;          /* batch dimension) when it differs from dims (Triton's idiom for */
    int64_t reshape[GJ_TENSOR_MAX_RANK];   /* a model input [N]: dims [1], reshape []) */
};

struct gj_model_config {
    char name[GJ_MODEL_NAME_MAX];
    char input_name[256];
    int64_t input_dims[3];             /* C, H, W (no batch dimension) */
    char output_name[256];
    int64_t n_outputs;                 /* N: the output is [batch, N] */
    char **labels;                     /* n_labels == n_outputs */
    size_t n_labels;
    enum gj_activation activation;
    int max_batch_size;                /* >= 1 */
    int dynamic_batching;              /* 1: the section was given */
    int64_t max_queue_delay_us;
    int preferred_batch_sizes[GJ_MODEL_MAX_PREFERRED];
    size_t n_preferred;
    int instances_per_device;          /* instance_group.count */
    enum gj_instance_kind instance_kind;
    int gpus[GJ_MODEL_MAX_GPUS];       /* instance_group.gpus, ascending; n_gpus 0: every GPU */
    size_t n_gpus;
    enum gj_precision precision;
    int cuda_graphs;                   /* default 1 */
    int64_t default_version;           /* 0: latest */
    enum gj_version_policy version_policy;
    int latest_versions;               /* GJ_VERSIONS_LATEST: how many */
    int64_t specific_versions[GJ_MODEL_MAX_SPECIFIC];   /* GJ_VERSIONS_SPECIFIC */
    size_t n_specific;
    struct gj_preprocess_config pre;
    struct gj_model_filter filter;
    /* Every input and output (Triton's ModelConfig; heap arrays freed by
     * gj_model_config_free). Empty in a config that leaves them to auto-complete: loading
     * fills them from the model (served_model.c). */
    struct gj_tensor_config *inputs;
    size_t n_inputs;
    struct gj_tensor_config *outputs;
    size_t n_output_tensors;
    int no_batch;                      /* Triton's max_batch_size 0: no batch dimension (the
                                        * batcher runs one request at a time; max_batch_size 1) */
    int max_batch_given;               /* max_batch_size was given (else auto-complete sets it) */
    int triton_form;                   /* input/output as Triton's lists (or absent) */
    int autocompleted;                 /* inputs/outputs were completed from the model */
    /* 1: input_name, input_dims, output_name, n_outputs, labels and preprocessing describe a
     * single-image model (one FP32 [C, H, W] input, a FP32 [N] output with N labels), as
     * `infer` jobs need; else not_image says why not. */
    int image_model;
    char not_image[192];
    size_t max_queue_size;             /* dynamic_batching.default_queue_policy (0: host's) */
    int64_t queue_timeout_us;          /* its default_timeout_microseconds (0: host's) */
    json_t *parameters;                /* Triton's parameters object (owned), or NULL */
    int labels_from_file;              /* labels were read from the output's label_filename */
    json_t *pre_json;                  /* Triton form: preprocessing as given (owned), applied
                                        * once the image input is known */
};

/* Parses a config object (field paths in err are "config.json: preprocessing.window...").
 * expect_name: the directory name the config's "name" must equal (NULL: not checked).
 * 0, or -1 with err; free with gj_model_config_free either way. */
int gj_model_config_parse(const json_t *root, const char *expect_name, struct gj_model_config *cfg,
                          struct gj_error *err);
int gj_model_config_load(const char *path, const char *expect_name, struct gj_model_config *cfg,
                         struct gj_error *err);
/* The same from config.json's text (len bytes; NULL: "the model has no config.json"). */
int gj_model_config_load_text(const char *text, size_t len, const char *expect_name,
                              struct gj_model_config *cfg, struct gj_error *err);
void gj_model_config_free(struct gj_model_config *cfg);
/* A deep copy (free it with gj_model_config_free). 0, or -1 out of memory (dst freed). */
int gj_model_config_copy(struct gj_model_config *dst, const struct gj_model_config *src);
/* The config as JSON (for GET /v1/models/{name}): config.json's shape for image models, else
 * Triton's (gj_model_config_to_triton_json); NULL on allocation failure. */
json_t *gj_model_config_to_json(const struct gj_model_config *cfg);
/* The config in the shape of Triton's JSON ModelConfig (GET /v2/models/{m}/config): name,
 * platform "onnxruntime_onnx", backend, max_batch_size (0: no batch dimension), input and
 * output lists with TYPE_* data types, version_policy, instance_group, dynamic_batching,
 * parameters, and this server's own keys (labels, preprocessing, ...) for image models, so
 * that it can be sent back to a load unchanged. NULL on allocation failure. */
json_t *gj_model_config_to_triton_json(const struct gj_model_config *cfg);

/* 1 when the model's version_policy serves `version`, one of the model's versions
 * (all: ascending, n of them). */
int gj_model_policy_serves(const struct gj_model_config *cfg, const int64_t *all, size_t n,
                           int64_t version);

/* "KIND_AUTO", "KIND_GPU", "KIND_CPU"; "fp32", "tf32", "fp16". */
const char *gj_instance_kind_name(enum gj_instance_kind k);
const char *gj_precision_name(enum gj_precision p);

/* 1 when name is a model name: 1..127 bytes of [A-Za-z0-9._-], not starting with '.'. */
int gj_model_name_ok(const char *name);

/* Filter: 1 when an image with these attributes (NULL: absent) passes; 0 and a reason
 * ("modality MR not in [CR, DX]") when not. */
int gj_model_filter_check(const struct gj_model_filter *f, const char *modality,
                          const char *body_part, const char *view_position, char *reason,
                          size_t reason_len);

/* ---- the repository --------------------------------------------------------------- */

enum gj_model_state {
    GJ_MODEL_AVAILABLE = 0,   /* on disk, not loaded (loads on first use) */
    GJ_MODEL_READY,           /* loaded and checked */
    GJ_MODEL_FAILED,          /* the last load failed: reason says why */
    GJ_MODEL_UNLOADED,        /* unloaded: only an explicit load loads it again */
};
const char *gj_model_state_name(enum gj_model_state s);   /* "AVAILABLE", "READY", ... */

struct gj_model_version_info {
    int64_t version;
    enum gj_model_state state;
    char reason[512];
};

typedef struct gj_model_repo gj_model_repo;
/* A loaded version: config + ONNX model. Reference-counted. */
typedef struct gj_served_model gj_served_model;

/* Opens and scans dir (which must exist). NULL with err. */
gj_model_repo *gj_model_repo_open(const char *dir, struct gj_error *err);
/* An empty declared repository; NULL when out of memory. */
gj_model_repo *gj_model_repo_new(void);
/* Frees the repository and drops its references (models still held elsewhere stay
 * alive until released). */
void gj_model_repo_free(gj_model_repo *repo);
/* Rescans the directory: new models and versions appear, removed ones go (loaded ones
 * stay listed until unloaded). 0 or -1 with err. A declared repository: 0, nothing done. */
int gj_model_repo_scan(gj_model_repo *repo, struct gj_error *err);
/* on 0: use (gj_model_repo_acquire) never loads: a version not loaded is refused (400,
 * "not ready") until an explicit load; Triton's --model-control-mode none, explicit and
 * poll. 1 (the default): a version loads on its first use. */
void gj_model_repo_set_load_on_use(gj_model_repo *repo, int on);
/* The directory of a scanned repository; NULL for a declared one. */
const char *gj_model_repo_dir(const gj_model_repo *repo);

/* One version of a declared model. */
struct gj_model_version_decl {
    int64_t version;           /* 1..999999999, once each */
    const char *dir;           /* the directory holding its model.onnx; NULL: its files are not
                                * on this host (listed, its metadata answered, never loaded:
                                * use answers 503 with `absent`) */
    const char *absent;        /* dir NULL: why, in words a client can act on */
    const char *config;        /* its own config.json text; NULL: the model's */
    int unloaded;              /* 1: unloaded (its loaded model dropped; use refused with 400
                                * "it was unloaded"); 0: it loads on use or explicitly */
};
/* Declares model `name` as it is now, replacing what was declared before: its config.json
 * text (NULL: none; loading says so) and its versions (any order). A version whose dir and
 * effective config are unchanged keeps its loaded model and state; one that is new or
 * changed starts AVAILABLE (its old loaded model dropped); versions no longer listed go.
 * Jobs holding a dropped model keep using it until they release it. 0, or -1 with err
 * (a bad name or version, too many, no memory): nothing changed. Declared only. */
int gj_model_repo_declare(gj_model_repo *repo, const char *name, const char *config,
                          const struct gj_model_version_decl *versions, size_t n,
                          struct gj_error *err);
/* Takes model `name` away (its loaded versions dropped). 0, or -1 when it is unknown. */
int gj_model_repo_remove(gj_model_repo *repo, const char *name);
/* 1 when the repository has the model (a scanned one looks on disk again first). */
int gj_model_repo_has(gj_model_repo *repo, const char *name);

/* Models, sorted by name. gj_model_repo_name copies the i-th name; -1 when out of range. */
size_t gj_model_repo_count(gj_model_repo *repo);
int gj_model_repo_name(gj_model_repo *repo, size_t i, char *buf, size_t buflen);
/* Versions of a model, ascending: fills up to cap entries, *n gets the total.
 * -1 with err when the model is unknown. */
int gj_model_repo_versions(gj_model_repo *repo, const char *name, struct gj_model_version_info *out,
                           size_t cap, size_t *n, struct gj_error *err);
/* The version a request without one gets: config default_version, else the latest.
 * requested > 0: checks it exists. The version, or -1 with err naming the model. */
int64_t gj_model_repo_resolve(gj_model_repo *repo, const char *name, int64_t requested,
                              struct gj_error *err);
/* Every model with its versions and states, for GET /v1/models:
 * [{"name", "default_version", "versions": [{"version", "state", "reason"?}]}]. */
json_t *gj_model_repo_describe(gj_model_repo *repo);

/* Loads (or finds loaded) a version, whatever its state (the explicit load); version 0:
 * the default. On success *out holds a new reference (release it). A bad config or
 * model: -1, err says why, the version's state becomes FAILED with that reason. */
int gj_model_repo_load(gj_model_repo *repo, const char *name, int64_t version,
                       gj_served_model **out, struct gj_error *err);
/* The same on use (a job, an inference request): an unknown model or version is looked
 * for again on disk first (added since the last scan), and an UNLOADED version is
 * refused: -1, err->status 400, "model 'x' version N is not ready: it was unloaded ...";
 * a declared version whose files are not on this host: -1, err->status 503. */
int gj_model_repo_acquire(gj_model_repo *repo, const char *name, int64_t version,
                          gj_served_model **out, struct gj_error *err);
/* The loaded version, never loading it (readiness): 0 with a new reference, or -1 with
 * err->status 400 and the reason it is not ready (not loaded yet, unloaded, its load
 * failed), or 404 when the model or version is unknown. */
int gj_model_repo_get_loaded(gj_model_repo *repo, const char *name, int64_t version,
                             gj_served_model **out, struct gj_error *err);
/* A version's config.json (the version's own, else the model's), without loading the
 * model; when the version is loaded, its config as loaded (completed from the model: every
 * input and output, label files read). 0, or -1 with err; free cfg with gj_model_config_free
 * either way. */
int gj_model_repo_config(gj_model_repo *repo, const char *name, int64_t version,
                         struct gj_model_config *cfg, struct gj_error *err);
/* Drops the repository's reference; the state becomes UNLOADED. 0, or -1 when the
 * version is not loaded. */
int gj_model_repo_unload(gj_model_repo *repo, const char *name, int64_t version,
                         struct gj_error *err);

/* Marks a loaded or available version FAILED with reason (dropping the repository's
 * reference): for a load that succeeded here but could not be placed on a device. 0, or
 * -1 when the version is unknown. */
int gj_model_repo_fail(gj_model_repo *repo, const char *name, int64_t version,
                       const char *reason);

/* Loads one version directory directly, without a repository (tests, tools):
 * dir/<version>/model.onnx with dir/config.json or dir/<version>/config.json. */
gj_served_model *gj_served_model_load(const char *model_dir, const char *name, int64_t version,
                                      struct gj_error *err);
/* The same from its parts: model.onnx at onnx_path and the config.json text it runs with
 * (config_len bytes; NULL: none). A declared repository's loads, and uploads checked
 * before they are stored. */
gj_served_model *gj_served_model_load_parts(const char *onnx_path, const char *config,
                                            size_t config_len, const char *name, int64_t version,
                                            struct gj_error *err);
/* The config.json a version directory uses: model_dir/<version>/config.json when there is
 * one, else model_dir/config.json. 0, or -1 when the path does not fit in n. */
int gj_model_version_config_path(const char *model_dir, int64_t version, char *path, size_t n);
gj_served_model *gj_served_model_ref(gj_served_model *m);
void gj_served_model_release(gj_served_model *m);
const struct gj_model_config *gj_served_model_config(const gj_served_model *m);
const char *gj_served_model_name(const gj_served_model *m);
int64_t gj_served_model_version(const gj_served_model *m);
/* The ONNX model (struct onnx_model *), or NULL where the runtime is not built in. */
void *gj_served_model_onnx(const gj_served_model *m);
/* Index of the configured input / output among the model's inputs / outputs. */
size_t gj_served_model_input_index(const gj_served_model *m);
size_t gj_served_model_output_index(const gj_served_model *m);
/* The labels of the config's output i (cfg->outputs[i]): the config's labels for the image
 * output, else the lines of the output's label_filename read at load; NULL, *n 0 when none. */
const char *const *gj_served_model_output_labels(const gj_served_model *m, size_t output, size_t *n);
/* Size of model.onnx in bytes. */
uint64_t gj_served_model_file_bytes(const gj_served_model *m);
/* SHA-256 of model.onnx as 64 lower-case hex digits: the model's identity. */
const char *gj_served_model_digest(const gj_served_model *m);
/* SHA-256 of a file (streamed) as 64 lower-case hex digits. 0, or -1 with errno. */
int gj_model_file_sha256(const char *path, char hex[65]);
/* Device memory that `instances` executors running batches of up to max_batch samples
 * are expected to hold, from the load's trial session (weights, activation arena and
 * input/output tensors, scaled by the batch): what a GPU batcher reserves before it
 * creates any session (the sessions' real figures top it up). */
uint64_t gj_served_model_device_estimate(const gj_served_model *m, int max_batch, int instances);

#endif
