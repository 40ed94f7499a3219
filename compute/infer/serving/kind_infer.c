/*
 * kind_infer.c — the `infer` job kind: DICOM images in, a model's scores out.
 *
 * Inputs: dicom, dicom.1, dicom.2, ... (one image each; frame 0 of a multi-frame file).
 * Params: model, version?, batch_size? (threads? is accepted and ignored: jobs share the
 * model's batcher, see batcher.h). The model comes from the repository the host hands in
 * (serving_host.h: the service's, or `gpujobd run --models-dir`), never from a directory a
 * job names.
 * For each file: parse, apply the model's filter (an image the model is not for is
 * reported as skipped with the reason), decode, preprocess, batch up to the model's
 * max_batch_size, run, apply the output activation. result.json holds per image the SOP
 * Instance UID, the acquisition time (acquired_at.h: what the service's results table
 * needs, so it never reads the inputs), the scores per label, the top label and timings,
 * and per study (by Study Instance UID only) a summary. No patient name or id is read into
 * the result or written to a log. scores.csv holds the scores alone (one row per input: its
 * name, status and a score per label): result.json and the Structured Reports also record the
 * run (times, new UIDs), so scores.csv is what a rerun compares (gj_kind.h: run_record_outputs).
 *
 * Device: a model that runs on a GPU (batcher.h, gj_model_uses_gpu) makes the job ask for
 * a GPU slot, and the job uses the model's batcher on the GPU it was placed on; result.json
 * says where the model ran ("device": "gpu:0" or "cpu") and in what precision ("precision":
 * the config's on a GPU; fp32 on the CPU whatever the config asks, so a KIND_AUTO fp16 model
 * that fell back to the CPU says so).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/fsutil.h"
#include "common/gj_kind.h"
#include "infer/dicom.h"
#include "infer/onnx/onnx_model.h"
#include "infer/serving/acquired_at.h"
#include "infer/serving/batcher.h"
#include "infer/serving/infer_report.h"
#include "infer/serving/model_repo.h"
#include "infer/serving/preprocess.h"
#include "infer/serving/serving_host.h"

#define INFER_MAX_INPUTS 4096
#define INFER_MAX_FRAME_PIXELS ((uint64_t)1 << 26)   /* 8192 x 8192 */
#define INFER_MAX_BATCH_BYTES ((uint64_t)1 << 30)

static const char infer_schema[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
    "\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"model\"],"
    "\"properties\":{"
    "\"model\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":127,"
    "\"description\":\"model name in the repository (letters, digits, '.', '_', '-')\"},"
    "\"version\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":999999999,"
    "\"description\":\"model version (default: the model's default_version, else the latest)\"},"
    "\"threads\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":256,"
    "\"description\":\"Accepted for older clients and ignored: jobs share the model's batcher, "
    "whose CPU threads per instance are the server's --infer-threads (default: CPUs / instances)\"},"
    "\"batch_size\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1024,"
    "\"description\":\"images per inference batch (default and upper bound: the model's "
    "max_batch_size)\"}"
    "}}";

static const struct gj_input_spec infer_inputs[] = {
    { "dicom", 1, 1, "DICOM Part 10 files (dicom, dicom.1, ...), one image each" },
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The repository the host handed in (serving_host.h), or NULL. */
static gj_model_repo *host_repo(void)
{
    struct gj_serving_host host;
    gj_serving_host_get(&host);
    return host.repo;
}

static int is_dicom_input(const char *name)
{
    return strcmp(name, "dicom") == 0 || (strncmp(name, "dicom.", 6) == 0 && name[6]);
}

static int infer_validate(const struct gj_job *job, struct gj_error *err)
{
    const char *model = json_string_value(json_object_get(job->params, "model"));
    if (!model || !gj_model_name_ok(model))
        return gj_error_set(err, "model", "model name '%.130s' is not valid: use 1 to 127 "
                            "letters, digits, '.', '_' or '-', not starting with '.'",
                            model ? model : "");
    size_t n = 0;
    for (size_t i = 0; i < job->n_inputs; i++)
        n += is_dicom_input(job->inputs[i].name);
    if (n > INFER_MAX_INPUTS)
        return gj_error_set(err, "inputs", "%zu DICOM files: at most %d per job", n,
                            INFER_MAX_INPUTS);
    /* Where there is a repository, an unknown model is refused now rather than queued. */
    gj_model_repo *repo = host_repo();
    if (repo && !gj_model_repo_has(repo, model))
        return gj_error_set(err, "model", "unknown model '%s': it is not in the model "
                            "repository", model);
    return 0;
}

/* Whether the job's model runs on a GPU (its config.json, read without loading the model).
 * Unreadable: 0 (the run says what is wrong with it). */
static int model_wants_gpu(const struct gj_job *job)
{
    const char *model = json_string_value(json_object_get(job->params, "model"));
    json_t *jv = json_object_get(job->params, "version");
    gj_model_repo *repo = host_repo();
    if (!repo || !model || !gj_model_name_ok(model))
        return 0;
    struct gj_model_config cfg;
    struct gj_error err = { 0 };
    int gpu = gj_model_repo_config(repo, model, json_is_integer(jv) ? (int64_t)json_integer_value(jv) : 0,
                                   &cfg, &err) == 0 &&
              gj_model_uses_gpu(&cfg);
    gj_model_config_free(&cfg);
    return gpu;
}

static int infer_estimate(const struct gj_job *job, struct gj_needs *needs, struct gj_error *err)
{
    (void)err;
    /* A GPU model's job goes to a GPU slot and uses the model's batcher there; the device
     * memory is the batcher's (reserved when it is created), not the job's. A KIND_GPU
     * model on a host without a GPU still runs on the CPU slot, where the batcher refuses
     * it with the reason. */
    needs->can_use_gpu = model_wants_gpu(job);
    needs->needs_gpu = 0;
    needs->device_bytes = 0;
    uint64_t largest = 0;
    size_t opened = 0;
    for (size_t i = 0; i < job->n_inputs; i++) {
        if (!is_dicom_input(job->inputs[i].name))
            continue;
        uint64_t frame = 0;
        gj_dicom *d = NULL;
        struct gj_dicom_image img;
        /* The header of the first files gives the frame size; past that (or for a
         * very large file) the file size does, without reading it. */
        if (job->inputs[i].path && job->inputs[i].size < ((uint64_t)256 << 20) &&
            opened++ < 64 && gj_dicom_open_file(job->inputs[i].path, &d, NULL) == 0 &&
            gj_dicom_image_info(d, &img, NULL) == 0)
            frame = gj_dicom_frame_floats(&img) * sizeof(float);
        else
            frame = job->inputs[i].size * 4;   /* 16-bit samples to float, no header read */
        gj_dicom_free(d);
        uint64_t one = job->inputs[i].size + 2 * frame;
        if (one > largest)
            largest = one;
    }
    /* File + frame + resize scratch, the model (weights ~ file) and its activations
     * (bounded guess: 256 MiB for a batch), and the result. */
    uint64_t model_bytes = 64ull << 20;
    needs->host_bytes = largest + 3 * model_bytes + (256ull << 20);
    return 0;
}

/* ---- one run ----------------------------------------------------------------------- */

enum image_status { IMG_PENDING = 0, IMG_OK, IMG_SKIPPED, IMG_FAILED };

struct image {
    const struct gj_input *input;
    enum image_status status;
    char reason[600];
    char sop_uid[68], study_uid[68];
    char acquired_at[32];   /* "YYYY-MM-DD HH:MM:SS[.f]" (acquired_at.h), "" when unknown */
    uint32_t rows, columns, frames;
    struct gj_preprocess_applied applied;
    double decode_ms, preprocess_ms, inference_ms;
    int batch_index, batch_size;
    float *scores;          /* n_labels, after the activation */
    struct gj_sr_identity sr_id;   /* for the study's Structured Report (infer_report.h) */
    struct gj_sr_ref sr_ref;
};

/* A UID as the file gives it, kept only when it is a valid UI value (digits and dots). */
static void get_uid(const gj_dicom *d, uint32_t tag, char *out, size_t outlen)
{
    char buf[128];
    out[0] = '\0';
    if (gj_dicom_get_string(d, tag, buf, sizeof buf) != 0)
        return;
    size_t n = strlen(buf);
    if (n == 0 || n > 64)
        return;
    for (size_t i = 0; i < n; i++)
        if ((buf[i] < '0' || buf[i] > '9') && buf[i] != '.')
            return;
    snprintf(out, outlen, "%s", buf);
}

static const char *get_cs(const gj_dicom *d, uint32_t tag, char *buf, size_t buflen)
{
    if (gj_dicom_get_string(d, tag, buf, buflen) != 0 || !buf[0])
        return NULL;
    return buf;
}

static int cmp_input(const void *a, const void *b)
{
    const struct image *x = a, *y = b;
    const char *p = x->input->name, *q = y->input->name;
    long i = p[5] == '.' ? strtol(p + 6, NULL, 10) : 0;
    long j = q[5] == '.' ? strtol(q + 6, NULL, 10) : 0;
    if (i != j)
        return i < j ? -1 : 1;
    return strcmp(p, q);
}

struct batcher {
    struct gj_ctx *ctx;      /* the job: its cancel flag is honoured while a batch waits */
    const gj_served_model *sm;
    int device;              /* where the worker placed the job (GJ_DEVICE_CPU: the CPU) */
    int ran_on;              /* the device of the batcher used (-2: none yet) */
    enum gj_precision ran_in; /* and its precision */
    int capacity;            /* images per full batch */
    size_t item_floats;      /* C*H*W */
    float *input;            /* capacity * item_floats */
    struct image **slots;
    int filled;
    int batches_run;
    json_t *convolutions;    /* shape -> how it was computed, over the batches run */
    const char *merged;      /* the last session text merged into it (interned) */
};

static void batcher_free(struct batcher *b)
{
    free(b->input);
    free(b->slots);
    json_decref(b->convolutions);
}

/* Adds a batch's session text (onnx_session_convolutions: "shape: how" lines) to
 * b->convolutions; a shape computed two ways by the job's batches (a batcher replaced on
 * another device between them) keeps both, joined by " | ". 0, or -1 (no memory). */
static int merge_convolutions(struct batcher *b, const char *text)
{
    if (!text || text == b->merged)
        return 0;
    if (!b->convolutions && !(b->convolutions = json_object()))
        return -1;
    for (const char *line = text; *line;) {
        size_t len = strcspn(line, "\n");
        char shape[640], how[800];
        snprintf(shape, sizeof shape, "%.*s", (int)len, line);
        char *colon = strstr(shape, ": ");   /* a shape has none; oneDNN's names have ':' alone */
        line += len + (line[len] == '\n');
        if (!colon)
            continue;
        *colon = '\0';
        const char *had = json_string_value(json_object_get(b->convolutions, shape));
        if (had && strstr(had, colon + 2))
            continue;
        snprintf(how, sizeof how, "%s%s%s", had ? had : "", had ? " | " : "", colon + 2);
        if (json_object_set_new(b->convolutions, shape, json_string(how)))
            return -1;
    }
    b->merged = text;
    return 0;
}

static void activate(enum gj_activation act, const float *logits, float *out, size_t n)
{
    if (act == GJ_ACT_SIGMOID) {
        for (size_t i = 0; i < n; i++)
            out[i] = (float)(1.0 / (1.0 + exp(-(double)logits[i])));
    } else if (act == GJ_ACT_SOFTMAX) {
        double mx = logits[0], sum = 0;
        for (size_t i = 1; i < n; i++)
            if (logits[i] > mx)
                mx = logits[i];
        for (size_t i = 0; i < n; i++)
            sum += exp((double)logits[i] - mx);
        for (size_t i = 0; i < n; i++)
            out[i] = (float)(exp((double)logits[i] - mx) / sum);
    } else {
        memcpy(out, logits, n * sizeof *out);
    }
}

static int job_cancelled(void *ctx)
{
    return gj_cancelled(ctx);
}

/* Runs the filled batch. 0, -1 with err, or 1 when the job was cancelled before the
 * batch ran (a batch that runs is not interrupted: one ONNX run of a batch). */
static int batcher_flush(struct batcher *b, struct gj_error *err)
{
    if (b->filled == 0)
        return 0;
    if (gj_cancelled(b->ctx))
        return 1;
    const struct gj_model_config *cfg = gj_served_model_config(b->sm);
    /* The model version's shared queue (compute/infer/serving/batcher.h): the images of
     * this job batch with other jobs' and with /v2 protocol requests. */
    gj_batcher *q = gj_batcher_acquire_on((gj_served_model *)b->sm, b->device, err);
    if (!q)   /* transient (retried) when a GPU lacks free memory now, as the batcher says */
        return -1;
    b->ran_on = gj_batcher_device(q);
    b->ran_in = gj_batcher_precision(q);
    float *logits = malloc((size_t)b->filled * gj_batcher_output_floats(q) * sizeof *logits);
    if (!logits) {
        gj_batcher_release(q);
        return gj_error_set(err, "", "out of memory");
    }
    struct gj_batch_timing t;
    int rc = gj_batcher_infer_cancellable(q, b->input, (size_t)b->filled, logits, 0, &t, err,
                                          job_cancelled, b->ctx);
    gj_batcher_release(q);
    if (rc == GJ_BATCH_ECANCELED) {
        free(logits);
        return 1;
    }
    if (rc != GJ_BATCH_OK) {
        free(logits);
        err->transient = err->transient || rc == GJ_BATCH_EFULL || rc == GJ_BATCH_ETIMEDOUT ||
                         rc == GJ_BATCH_ESHUTDOWN;   /* retried later */
        return -1;
    }
    if (merge_convolutions(b, t.convolutions)) {
        free(logits);
        return gj_error_set(err, "", "out of memory");
    }
    double per = (double)t.compute_us / 1000.0 / b->filled;
    for (int i = 0; i < b->filled; i++) {
        struct image *im = b->slots[i];
        im->scores = malloc(cfg->n_labels * sizeof *im->scores);
        if (!im->scores) {
            free(logits);
            return gj_error_set(err, "", "out of memory");
        }
        activate(cfg->activation, logits + (size_t)i * cfg->n_labels, im->scores, cfg->n_labels);
        im->inference_ms = per;
        im->batch_index = b->batches_run;
        im->batch_size = t.batch_size;
        im->status = IMG_OK;
    }
    free(logits);
    b->batches_run++;
    b->filled = 0;
    return 0;
}

/* Reads, filters, decodes and preprocesses one file into the next batch slot. A problem
 * with the file is the image's (failed, with the reason); -1 only for job-level errors. */
static int prepare_image(struct batcher *b, struct image *im, struct gj_error *err)
{
    const struct gj_model_config *cfg = gj_served_model_config(b->sm);
    char msg[400];
    struct gj_error derr = { 0 };
    double t0 = now_ms();
    gj_dicom *d = NULL;
    if (gj_dicom_open_file(im->input->path, &d, &derr)) {
        im->status = IMG_FAILED;
        snprintf(im->reason, sizeof im->reason, "not a readable DICOM file: %s", derr.message);
        return 0;
    }
    get_uid(d, GJ_DCM_SOPInstanceUID, im->sop_uid, sizeof im->sop_uid);
    get_uid(d, GJ_DCM_StudyInstanceUID, im->study_uid, sizeof im->study_uid);
    gj_dicom_acquired_at(d, im->acquired_at);
    gj_sr_identity_read(d, &im->sr_id);
    gj_sr_ref_read(d, &im->sr_ref);
    char mod[64], body[80], view[64];
    if (!gj_model_filter_check(&cfg->filter, get_cs(d, GJ_DCM_Modality, mod, sizeof mod),
                               get_cs(d, GJ_DCM_BodyPartExamined, body, sizeof body),
                               get_cs(d, GJ_DCM_ViewPosition, view, sizeof view), im->reason,
                               sizeof im->reason)) {
        im->status = IMG_SKIPPED;
        gj_dicom_free(d);
        return 0;
    }
    struct gj_dicom_image info;
    if (gj_dicom_image_info(d, &info, &derr)) {
        im->status = IMG_FAILED;
        snprintf(im->reason, sizeof im->reason, "no usable image: %s", derr.message);
        gj_dicom_free(d);
        return 0;
    }
    im->rows = info.rows;
    im->columns = info.columns;
    im->frames = info.frames;
    if (info.samples_per_pixel != 1 || (info.photometric != GJ_PI_MONOCHROME1 &&
                                        info.photometric != GJ_PI_MONOCHROME2)) {
        im->status = IMG_FAILED;
        snprintf(im->reason, sizeof im->reason, "photometric interpretation %.16s is not "
                 "supported: the model takes grayscale (MONOCHROME1/2) images",
                 info.photometric_name[0] ? info.photometric_name : "(unknown)");
        gj_dicom_free(d);
        return 0;
    }
    uint64_t nf = gj_dicom_frame_floats(&info);
    if (nf == 0 || nf > INFER_MAX_FRAME_PIXELS) {
        im->status = IMG_FAILED;
        snprintf(im->reason, sizeof im->reason, "image of %u x %u pixels: at most %llu pixels "
                 "are accepted for inference", info.rows, info.columns,
                 (unsigned long long)INFER_MAX_FRAME_PIXELS);
        gj_dicom_free(d);
        return 0;
    }
    float *frame = malloc(nf * sizeof *frame);
    if (!frame) {
        gj_dicom_free(d);
        gj_error_set(err, "", "out of memory decoding %s", im->input->name);
        err->transient = 1;
        return -1;
    }
    if (gj_dicom_decode_frame(d, 0, frame, nf, &derr)) {
        im->status = IMG_FAILED;
        snprintf(im->reason, sizeof im->reason, "cannot decode the pixel data: %s", derr.message);
        free(frame);
        gj_dicom_free(d);
        return 0;
    }
    struct gj_frame_info fi = { .rows = info.rows, .columns = info.columns,
                                .monochrome1 = info.photometric == GJ_PI_MONOCHROME1 };
    double c, w;
    if (gj_dicom_window(d, &c, &w) == 0 && isfinite(c) && isfinite(w)) {
        char fn[32];
        fi.voi_function = GJ_VOI_LINEAR;
        if (gj_dicom_get_string(d, GJ_DCM_VOILUTFunction, fn, sizeof fn) == 0) {
            if (strcmp(fn, "LINEAR_EXACT") == 0)
                fi.voi_function = GJ_VOI_LINEAR_EXACT;
            else if (strcmp(fn, "SIGMOID") == 0)
                fi.voi_function = GJ_VOI_SIGMOID;
        }
        /* PS3.3: width >= 1 for LINEAR, > 0 otherwise; a window outside that is ignored. */
        fi.has_voi = fi.voi_function == GJ_VOI_LINEAR ? w >= 1.0 : w > 0.0;
        fi.voi_center = c;
        fi.voi_width = w;
    }
    gj_dicom_free(d);
    double t1 = now_ms();
    im->decode_ms = t1 - t0;
    float *dst = b->input + (size_t)b->filled * b->item_floats;
    if (gj_preprocess_frame(&cfg->pre, &fi, frame, dst, &im->applied, msg, sizeof msg)) {
        free(frame);
        gj_error_set(err, "", "%s", msg);
        err->transient = 1;
        return -1;
    }
    free(frame);
    im->preprocess_ms = now_ms() - t1;
    b->slots[b->filled++] = im;
    return 0;
}

static json_t *scores_json(const struct gj_model_config *cfg, const float *s)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < cfg->n_labels; i++)
        json_object_set_new(o, cfg->labels[i], json_real(s[i]));
    return o;
}

static size_t argmax(const float *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 1; i < n; i++)
        if (s[i] > s[k])
            k = i;
    return k;
}

static const char *status_name(enum image_status s)
{
    return s == IMG_OK ? "ok" : s == IMG_SKIPPED ? "skipped" : "failed";
}

static json_t *image_json(const struct gj_model_config *cfg, const gj_served_model *sm,
                          const struct image *im)
{
    json_t *o = json_pack("{s:s, s:s, s:o, s:o, s:s, s:I}", "input", im->input->name,
                          "status", status_name(im->status),
                          "sop_instance_uid", im->sop_uid[0] ? json_string(im->sop_uid)
                                                             : json_null(),
                          "study_instance_uid", im->study_uid[0] ? json_string(im->study_uid)
                                                                 : json_null(),
                          "model", gj_served_model_name(sm),
                          "model_version", (json_int_t)gj_served_model_version(sm));
    if (!o)
        return NULL;
    /* for the service's results table: the finish reads result.json, never the inputs */
    json_object_set_new(o, "acquired_at", im->acquired_at[0] ? json_string(im->acquired_at) : json_null());
    if (im->status != IMG_OK) {
        json_object_set_new(o, "reason", json_string(im->reason));
        return o;
    }
    size_t k = argmax(im->scores, cfg->n_labels);
    json_object_set_new(o, "scores", scores_json(cfg, im->scores));
    json_object_set_new(o, "top_label", json_string(cfg->labels[k]));
    json_object_set_new(o, "top_score", json_real(im->scores[k]));
    json_object_set_new(o, "rows", json_integer(im->rows));
    json_object_set_new(o, "columns", json_integer(im->columns));
    if (im->frames > 1)
        json_object_set_new(o, "frames", json_integer(im->frames));   /* frame 0 was used */
    json_object_set_new(o, "window", json_pack("{s:s, s:f, s:f, s:s, s:b}", "source",
                                               im->applied.window_source, "center",
                                               im->applied.center, "width", im->applied.width,
                                               "function", im->applied.function,
                                               "inverted", im->applied.inverted));
    json_object_set_new(o, "batch", json_pack("{s:i, s:i}", "index", im->batch_index, "size",
                                              im->batch_size));
    json_object_set_new(o, "timings_ms", json_pack("{s:f, s:f, s:f}", "decode", im->decode_ms,
                                                   "preprocess", im->preprocess_ms,
                                                   "inference", im->inference_ms));
    return o;
}

/* One entry per Study Instance UID (images without a readable one are grouped under null). */
static json_t *studies_json(const struct gj_model_config *cfg, const struct image *ims, size_t n)
{
    json_t *arr = json_array();
    char *done = calloc(n ? n : 1, 1);
    float *mx = malloc(cfg->n_labels * sizeof *mx);
    if (!arr || !done || !mx) {
        free(done);
        free(mx);
        json_decref(arr);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        int counts[4] = { 0 };
        int have = 0;
        for (size_t j = i; j < n; j++) {
            if (done[j] || strcmp(ims[j].study_uid, ims[i].study_uid) != 0)
                continue;
            done[j] = 1;
            counts[ims[j].status]++;
            if (ims[j].status != IMG_OK)
                continue;
            for (size_t l = 0; l < cfg->n_labels; l++)
                if (!have || ims[j].scores[l] > mx[l])
                    mx[l] = ims[j].scores[l];
            have = 1;
        }
        json_t *s = json_pack("{s:o, s:i, s:i, s:i, s:i}", "study_instance_uid",
                              ims[i].study_uid[0] ? json_string(ims[i].study_uid) : json_null(),
                              "images", counts[IMG_OK] + counts[IMG_SKIPPED] + counts[IMG_FAILED],
                              "inferred", counts[IMG_OK], "skipped", counts[IMG_SKIPPED],
                              "failed", counts[IMG_FAILED]);
        if (s && have) {
            size_t k = argmax(mx, cfg->n_labels);
            json_object_set_new(s, "max_scores", scores_json(cfg, mx));
            json_object_set_new(s, "top_label", json_string(cfg->labels[k]));
            json_object_set_new(s, "top_score", json_real(mx[k]));
        }
        json_array_append_new(arr, s);
    }
    free(done);
    free(mx);
    return arr;
}

/* The studies' Structured Reports (result.dcm, ...): result.json's "reports", NULL when
 * out of memory. A report that could not be written is said there and in the job's log. */
static json_t *write_reports(struct gj_ctx *ctx, const gj_served_model *sm, const struct image *ims, size_t n)
{
    const struct gj_model_config *cfg = gj_served_model_config(sm);
    struct gj_infer_report_image *v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++)
        v[i] = (struct gj_infer_report_image){ &ims[i].sr_id, &ims[i].sr_ref,
                                               ims[i].status == IMG_OK ? ims[i].scores : NULL };
    json_t *reports = gj_infer_reports_write(ctx->output_dir, gj_served_model_name(sm),
                                             gj_served_model_version(sm), (const char *const *)cfg->labels,
                                             cfg->n_labels, v, n);
    free(v);
    size_t i;
    json_t *o;
    json_array_foreach(reports, i, o)
        if (json_object_get(o, "error"))
            gj_logf(ctx, "infer: a study's report was not written: %s",
                    json_string_value(json_object_get(o, "error")));
    return reports;
}

/* scores.csv: the result without the run's times, in input order; %.9g keeps every bit of
 * a float. 0, or -1 with err. */
static int write_scores(struct gj_ctx *ctx, const gj_served_model *sm, const struct image *ims, size_t n,
                        struct gj_error *err)
{
    static const char *const status[] = { "pending", "ok", "skipped", "failed" };
    const struct gj_model_config *cfg = gj_served_model_config(sm);
    char path[GJ_PATH_MAX];
    FILE *f = gj_path_join(path, sizeof path, ctx->output_dir, "scores.csv") == 0 ? fopen(path, "w") : NULL;
    if (!f)
        return gj_error_set(err, "", "cannot write scores.csv: %s", strerror(errno));
    fputs("input,status", f);
    for (size_t l = 0; l < cfg->n_labels; l++)
        fprintf(f, ",%s", cfg->labels[l]);
    fputc('\n', f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s,%s", ims[i].input->name, status[ims[i].status]);
        for (size_t l = 0; l < cfg->n_labels; l++)
            if (ims[i].status == IMG_OK && ims[i].scores)
                fprintf(f, ",%.9g", (double)ims[i].scores[l]);
            else
                fputc(',', f);
        fputc('\n', f);
    }
    if (fclose(f) != 0)
        return gj_error_set(err, "", "cannot write scores.csv: %s", strerror(errno));
    return 0;
}

static int write_result(struct gj_ctx *ctx, const gj_served_model *sm, struct image *ims, size_t n,
                        int batch, int device, enum gj_precision precision, double load_ms,
                        double t_start, struct gj_error *err)
{
    const struct gj_model_config *cfg = gj_served_model_config(sm);
    static const char *const acts[] = { "none", "sigmoid", "softmax" };
    json_t *labels = json_array(), *images = json_array();
    int counts[4] = { 0 };
    for (size_t i = 0; i < cfg->n_labels; i++)
        json_array_append_new(labels, json_string(cfg->labels[i]));
    for (size_t i = 0; i < n; i++) {
        counts[ims[i].status]++;
        json_array_append_new(images, image_json(cfg, sm, &ims[i]));
    }
    json_t *r = json_pack("{s:s, s:{s:s, s:I, s:o, s:s}, s:i, s:{s:i, s:i, s:i, s:i},"
                          " s:o, s:o, s:{s:f, s:f}}",
                          "kind", "infer",
                          "model", "name", gj_served_model_name(sm), "version",
                          (json_int_t)gj_served_model_version(sm), "labels", labels,
                          "output_activation", acts[cfg->activation],
                          "batch_size", batch,
                          "counts", "images", (int)n, "inferred", counts[IMG_OK], "skipped",
                          counts[IMG_SKIPPED], "failed", counts[IMG_FAILED],
                          "images", images, "studies", studies_json(cfg, ims, n),
                          "timings_ms", "load_model", load_ms, "total", now_ms() - t_start);
    if (!r)
        return gj_error_set(err, "", "out of memory writing result.json");
    if (device >= -1) {   /* where the model ran (none when no image was inferred) */
        char dev[24];
        if (device >= 0)
            snprintf(dev, sizeof dev, "gpu:%d", device);
        else
            snprintf(dev, sizeof dev, "cpu");
        json_object_set_new(r, "device", json_string(dev));
        json_object_set_new(r, "precision", json_string(gj_precision_name(precision)));
    }
    json_t *reports = write_reports(ctx, sm, ims, n);
    if (!reports) {
        json_decref(r);
        return gj_error_set(err, "", "out of memory writing the reports");
    }
    json_object_set_new(r, "reports", reports);
    char *text = json_dumps(r, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    json_decref(r);
    char path[GJ_PATH_MAX];
    int ok = text && gj_path_join(path, sizeof path, ctx->output_dir, "result.json") == 0 &&
             gj_write_file(path, text, strlen(text)) == 0;
    free(text);
    if (!ok)
        return gj_error_set(err, "", "cannot write result.json: %s", strerror(errno));
    gj_logf(ctx, "infer: %s v%lld: %zu images, %d inferred, %d skipped, %d failed",
            gj_served_model_name(sm), (long long)gj_served_model_version(sm), n, counts[IMG_OK],
            counts[IMG_SKIPPED], counts[IMG_FAILED]);
    return 0;
}

static int infer_run(struct gj_ctx *ctx, struct gj_error *err)
{
    const struct gj_job *job = ctx->job;
    double t_start = now_ms();
    const char *name = json_string_value(json_object_get(job->params, "model"));
    json_t *jv = json_object_get(job->params, "version");
    int64_t version = json_is_integer(jv) ? (int64_t)json_integer_value(jv) : 0;
    if (!name || !gj_model_name_ok(name))
        return gj_error_set(err, "model", "model name is not valid");
    gj_model_repo *repo = host_repo();
    if (!repo) {
        gj_error_set(err, "model", "model '%s': there is no model repository here (gpujobd run "
                     "takes it from --models-dir, default ./models)", name);
        return GJ_RUN_FAILED;
    }
    /* The repository's loaded model, shared with /v2 and every other job (loaded now when
     * it is not yet; refused when an admin unloaded it). */
    gj_served_model *sm = NULL;
    if (gj_model_repo_acquire(repo, name, version, &sm, err) != 0)
        return GJ_RUN_FAILED;
    double load_ms = now_ms() - t_start;
    const struct gj_model_config *cfg = gj_served_model_config(sm);
    if (!cfg->image_model) {   /* DICOM images need one image input and scores with labels */
        gj_error_set(err, "model", "model '%s' is not an image model, which infer jobs need: %s; "
                     "use the /v2 inference endpoint for it", name, cfg->not_image);
        gj_served_model_release(sm);
        return GJ_RUN_FAILED;
    }

    size_t n = 0;
    for (size_t i = 0; i < job->n_inputs; i++)
        n += is_dicom_input(job->inputs[i].name);
    struct image *ims = calloc(n ? n : 1, sizeof *ims);
    struct batcher b = { 0 };
    int result = GJ_RUN_FAILED;
    if (!ims) {
        gj_error_set(err, "", "out of memory");
        goto out;
    }
    for (size_t i = 0, k = 0; i < job->n_inputs; i++)
        if (is_dicom_input(job->inputs[i].name))
            ims[k++].input = &job->inputs[i];
    qsort(ims, n, sizeof *ims, cmp_input);

    json_t *jb = json_object_get(job->params, "batch_size");
    int batch = cfg->max_batch_size;
    if (json_is_integer(jb) && json_integer_value(jb) < batch)
        batch = (int)json_integer_value(jb);
    if ((size_t)batch > n && n > 0)
        batch = (int)n;

    /* A batch's input tensor stays under INFER_MAX_BATCH_BYTES: fewer images per batch
     * for very large inputs. */
    b.item_floats = (size_t)cfg->input_dims[0] * (size_t)cfg->input_dims[1] *
                    (size_t)cfg->input_dims[2];
    size_t item_bytes = b.item_floats * sizeof(float);
    if ((uint64_t)batch * item_bytes > INFER_MAX_BATCH_BYTES)
        batch = (int)(INFER_MAX_BATCH_BYTES / item_bytes) > 0
                    ? (int)(INFER_MAX_BATCH_BYTES / item_bytes) : 1;
    b.ctx = ctx;
    b.sm = sm;
    b.device = ctx->device;
    b.ran_on = -2;
    b.capacity = batch;
    b.input = calloc((size_t)batch * b.item_floats, sizeof *b.input);
    b.slots = calloc((size_t)batch, sizeof *b.slots);
    if (!b.input || !b.slots) {
        gj_error_set(err, "", "out of memory for a batch of %d images", batch);
        goto out;
    }
    gj_logf(ctx, "infer: model %s v%lld, %zu images, batch %d", name,
            (long long)gj_served_model_version(sm), n, batch);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (gj_cancelled(ctx)) {
            result = GJ_RUN_CANCELED;
            goto out;
        }
        if (prepare_image(&b, &ims[i], err))
            goto out;
        if (b.filled == b.capacity)
            rc = batcher_flush(&b, err);
        gj_progress(ctx, (double)(i + 1) / (double)(n + 1), NULL);
    }
    if (rc == 0)
        rc = batcher_flush(&b, err);
    if (rc) {
        result = rc > 0 ? GJ_RUN_CANCELED : GJ_RUN_FAILED;
        goto out;
    }
    if (write_result(ctx, sm, ims, n, batch, b.ran_on, b.ran_in, load_ms, t_start, err) ||
        write_scores(ctx, sm, ims, n, err))
        goto out;
    gj_progress(ctx, 1.0, NULL);
    result = GJ_RUN_OK;
out:
    /* what the batches chose, known now: recorded with the attempt's environment */
    if (b.convolutions && gj_record_environment(ctx, "convolutions", json_incref(b.convolutions)))
        gj_logf(ctx, "infer: out of memory recording the convolution algorithms");
    for (size_t i = 0; ims && i < n; i++)
        free(ims[i].scores);
    free(ims);
    batcher_free(&b);
    gj_served_model_release(sm);
    return result;
}

/* result.json holds the run's times; each Structured Report new UIDs and its time. */
static const char *const infer_run_records[] = { "result.json", "result*.dcm", NULL };

/* The model as this attempt will run it: its version, digest (SHA-256 of model.onnx),
 * config, precision and TF32 on or off; OpenBLAS and oneDNN (where it convolves) for the
 * cpu backend. How each convolution was computed is added once the run chose it (above). */
static int infer_environment(const struct gj_job *job, int device, json_t *env)
{
    json_t *libs = json_object_get(env, "libraries");
    const char *dnnl = onnx_dnnl_version();
    if (json_object_set_new(libs, "openblas", json_string(onnx_cpu_blas_config())) ||
        (dnnl && json_object_set_new(libs, "onednn", json_string(dnnl))) ||
        (device != GJ_DEVICE_CPU && onnx_cudnn_version() &&
         json_object_set_new(libs, "cudnn", json_integer((json_int_t)onnx_cudnn_version()))))
        return -1;
    const char *name = json_string_value(json_object_get(job->params, "model"));
    json_t *jv = json_object_get(job->params, "version");
    gj_model_repo *repo = host_repo();
    gj_served_model *sm = NULL;
    struct gj_error err = { 0 };
    json_t *model = json_object();
    if (!model || json_object_set_new(env, "model", model))
        return -1;
    if (!repo || !name ||
        gj_model_repo_acquire(repo, name, json_is_integer(jv) ? (int64_t)json_integer_value(jv) : 0, &sm, &err)) {
        json_object_set_new(model, "error", json_string(repo ? err.message : "no model repository"));
        return 0;
    }
    const struct gj_model_config *cfg = gj_served_model_config(sm);
    int rc = json_object_set_new(model, "name", json_string(gj_served_model_name(sm))) ||
             json_object_set_new(model, "version", json_integer((json_int_t)gj_served_model_version(sm))) ||
             json_object_set_new(model, "sha256", json_string(gj_served_model_digest(sm))) ||
             json_object_set_new(model, "config", gj_model_config_to_json(cfg)) ||
             json_object_set_new(env, "precision", json_string(device == GJ_DEVICE_CPU ? "fp32"
                                                               : gj_precision_name(cfg->precision))) ||
             json_object_set_new(env, "tf32", json_boolean(device != GJ_DEVICE_CPU &&
                                                           cfg->precision == GJ_PRECISION_TF32))
             ? -1 : 0;
    gj_served_model_release(sm);
    return rc;
}

const struct gj_kind gj_kind_infer = {
    .name = "infer",
    .summary = "Runs an image model of the model repository on DICOM images (chest X-ray triage "
               "and the like): filter, window, resize, batch, scores per label",
    .params_schema = infer_schema,
    .inputs = infer_inputs,
    .n_inputs = sizeof infer_inputs / sizeof infer_inputs[0],
    .validate = infer_validate,
    .estimate = infer_estimate,
    .run = infer_run,
    .version = "1",
    .reproducible = GJ_REPRO_CPU,
    .run_record_outputs = infer_run_records,
    .environment = infer_environment,
};
