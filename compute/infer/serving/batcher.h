/*
 * batcher.h — dynamic batching of inference requests (Triton's dynamic batcher, plain C).
 *
 * One batcher per model version and device: a single FIFO queue that `infer` jobs and
 * the Open Inference Protocol endpoint share. A request (gj_batcher_run) carries every
 * input of the model as a named tensor of its element type, with 1..max_batch_size samples
 * along dimension 0 when the model batches, and names the outputs it wants back; each gets
 * its own slice of those outputs. Requests are never split: a batch is a prefix of the queue
 * whose samples add up to at most max_batch_size and whose per-sample shapes (every input's
 * dims after the batch dimension) are all equal; a request of another shape starts the
 * next batch. A model without a batch dimension (max_batch_size 0 in Triton's config) runs
 * one request per run. Inputs with sizes the model leaves symbolic besides the batch (a
 * sequence length) get one session per distinct shape (cached, least recently used ones
 * freed beyond a bound). gj_batcher_infer is the float form for image models (`infer`
 * jobs): one FP32 input of C*H*W floats per sample, the configured output back.
 *
 * When a batch leaves (Triton semantics):
 *   - the queue holds max_batch_size samples or more (the next request does not fit):
 *     the largest prefix that fits goes at once;
 *   - preferred_batch_sizes given: the largest preferred size that a queue prefix adds
 *     up to exactly goes at once;
 *   - otherwise it waits until the oldest request has waited max_queue_delay_us, then
 *     sends what there is (up to max_batch_size);
 *   - without a dynamic_batching section in config.json each request is its own batch.
 *
 * Queue policy: at most max_queue_size requests wait (more: GJ_BATCH_EFULL at once, HTTP
 * 429); a request still waiting when its timeout expires leaves the queue with
 * GJ_BATCH_ETIMEDOUT (HTTP 503). Once in a batch a request always completes. Destroying
 * a batcher answers waiting requests GJ_BATCH_ESHUTDOWN (503), lets running batches
 * finish, and waits for every caller to return: no request is lost or answered twice.
 *
 * Executors: instance_group.count threads; each owns one onnx_session per batch size it
 * has run (created on first use, cached until the batcher goes). Sessions of one model
 * run concurrently (onnx_model.h).
 *
 * Devices: a batcher runs on the CPU (device -1) or on one GPU (the ONNX runtime's "cuda"
 * backend, with the config's precision and cuda_graphs). A GPU batcher reserves device
 * memory through the host's accounting (gpu_accounting.h): at creation the model's
 * estimate (gj_served_model_device_estimate), refused with 503 when the GPU has not that
 * much free; as sessions are created, what they really hold beyond it (a session that
 * does not fit fails its batch with 503, never an out-of-memory on the device). All of
 * it is released when the batcher goes.
 *
 * Statistics are kept per model name and version (they survive a batcher being
 * replaced, e.g. when a model is reloaded) and are named as Triton's:
 * inference_request_success / _failure (requests), inference_count (samples),
 * inference_exec_count (batches run), inference_queue_duration_us (summed over requests:
 * enqueue to start of the batch), inference_compute_infer_duration_us (summed over
 * requests: the run of the batch each request was in), and the gauge
 * inference_pending_request_count (requests in the queue now).
 */
#ifndef GJ_BATCHER_H
#define GJ_BATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "common/gj_error.h"
#include "infer/serving/model_repo.h"

/* Return codes of gj_batcher_infer; err->status holds the HTTP status to answer. */
enum gj_batch_rc {
    GJ_BATCH_OK = 0,
    GJ_BATCH_EINVAL = -1,      /* 400: bad sample count or sizes */
    GJ_BATCH_EFULL = -2,       /* 429: queue full */
    GJ_BATCH_ETIMEDOUT = -3,   /* 503: waited past its timeout in the queue */
    GJ_BATCH_ESHUTDOWN = -4,   /* 503: the batcher is going away */
    GJ_BATCH_EFAILED = -5,     /* 500: the model run failed */
    GJ_BATCH_ECANCELED = -6,   /* 499: the caller gave up while it waited in the queue */
};

#define GJ_BATCH_DEFAULT_MAX_QUEUE 1024
#define GJ_BATCH_DEFAULT_TIMEOUT_US 30000000LL      /* 30 s in the queue */

struct gj_batcher_options {
    /* 0 / negative fields take the model's config.json (or the defaults above). */
    int max_batch_size;               /* <= the config's */
    int64_t max_queue_delay_us;       /* -1: the config's; 0: no waiting */
    int dynamic_batching;             /* -1: the config's; 0: off; 1: on */
    int preferred_batch_sizes[GJ_MODEL_MAX_PREFERRED];
    size_t n_preferred;               /* 0: the config's */
    int instances;                    /* executor threads: the config's instances_per_device */
    int threads_per_instance;         /* ONNX CPU threads per executor (0: 1) */
    size_t max_queue_size;            /* requests (0: the host's, serving_host.h, else 1024) */
    int64_t default_timeout_us;       /* 0: the host's, else 30 s */
    int device;                       /* -1: CPU; >= 0: that GPU (CUDA ordinal) */
};

typedef struct gj_batcher gj_batcher;

/* Creates a batcher for a loaded model (takes its own reference). The model must have
 * one input (float32) and its configured output. NULL with err. */
gj_batcher *gj_batcher_create(gj_served_model *m, const struct gj_batcher_options *opt,
                              struct gj_error *err);
/* Stops it: queued requests and later calls get GJ_BATCH_ESHUTDOWN, running batches
 * finish; returns when the executors have stopped. The batcher stays valid (callers
 * still holding it get ESHUTDOWN) until destroyed. Idempotent. */
void gj_batcher_shutdown(gj_batcher *b);
/* Shuts it down, waits until every caller of gj_batcher_infer has returned, frees it.
 * Nobody may call it afterwards. */
void gj_batcher_destroy(gj_batcher *b);

/* Per-call timings (microseconds), may be NULL. */
struct gj_batch_timing {
    int64_t queue_us;      /* enqueue to start of its batch */
    int64_t compute_us;    /* the batch's model run */
    int batch_size;        /* samples in the batch it ran in */
    /* how that batch's session convolves (onnx_session_convolutions: the process's text,
     * never freed), or NULL when it did not run */
    const char *convolutions;
};

/* A tensor crossing gj_batcher_run. */
struct gj_tensor {
    char name[256];
    int elem_type;            /* ONNX_ELEM_* */
    int rank;                 /* batch dimension included when the model batches */
    int64_t dims[8];
    void *data;               /* inputs: the caller's, borrowed; outputs: malloc'd by the
                               * batcher on success, the caller frees */
    size_t bytes;             /* ONNX_ELEM_STRING: count * sizeof(struct onnx_string) */
};

/* Runs one request through the shared queue and waits for its outputs.
 * in: every model input once, any order, its type and shape (dims[0], the sample count
 * 1..max_batch_size, the same in every input when the model batches); BOOL values 0 or 1;
 * STRING inputs (struct onnx_string elements) point into the caller's memory, which must stay
 * alive until the call returns. Everything is checked before the request is queued (400 with
 * the tensor named), so a bad request never fails a batch of others.
 * out: only name set by the caller (the outputs wanted, each once). On success the batcher
 * fills elem_type, rank, dims (the request's sample count first when batching), data
 * (malloc'd; STRING outputs are one block: the onnx_string array, then the bytes it points
 * to) and bytes. On failure nothing is allocated (data NULL).
 * timeout_us: time allowed in the queue (0: the batcher's default). GJ_BATCH_OK or a negative
 * enum gj_batch_rc with err (err->status: the HTTP status). Thread-safe. */
int gj_batcher_run(gj_batcher *b, const struct gj_tensor *in, size_t n_in, struct gj_tensor *out,
                   size_t n_out, int64_t timeout_us, struct gj_batch_timing *timing,
                   struct gj_error *err);
/* The same, for a caller that may give up (see gj_batcher_infer_cancellable). */
int gj_batcher_run_cancellable(gj_batcher *b, const struct gj_tensor *in, size_t n_in,
                               struct gj_tensor *out, size_t n_out, int64_t timeout_us,
                               struct gj_batch_timing *timing, struct gj_error *err,
                               int (*cancelled)(void *arg), void *arg);
/* Frees the data of n outputs gj_batcher_run filled (and sets it NULL). */
void gj_tensors_free(struct gj_tensor *t, size_t n);

/* How a request given to gj_batcher_submit is answered: rc GJ_BATCH_OK (out filled as
 * gj_batcher_run fills it) or a negative enum gj_batch_rc with err. Called once, on a
 * batcher thread (an executor, or the one shutting the batcher down) with no lock of the
 * batcher held: it must be short (hand the answer over and return) and must not call into
 * this batcher. */
typedef void (*gj_batch_done_fn)(void *arg, int rc, const struct gj_batch_timing *timing,
                                 const struct gj_error *err);
/* gj_batcher_run for a caller that does not wait (an HTTP request that suspends its
 * connection): checked and queued as gj_batcher_run does, then done(arg, ...) is called once
 * the request is answered, times out in the queue (checked by the executors, so at most a
 * batch's run late) or the batcher shuts down. in (the array and its data) and out must stay
 * alive until then, and the batcher until done was called (gj_batcher_destroy waits for it).
 * GJ_BATCH_OK: queued, done will be called; a negative rc with err: refused at once (bad
 * request, queue full, shutting down), done is never called. Thread-safe. */
int gj_batcher_submit(gj_batcher *b, const struct gj_tensor *in, size_t n_in, struct gj_tensor *out,
                      size_t n_out, int64_t timeout_us, gj_batch_done_fn done, void *arg,
                      struct gj_error *err);

/* Image models only (gj_model_config.image_model; else GJ_BATCH_EINVAL, 400, saying why):
 * runs n_samples (1..max_batch_size) through the shared queue and waits for the result.
 * input: n_samples * gj_batcher_input_floats floats; output: n_samples *
 * gj_batcher_output_floats floats. timeout_us: time allowed in the queue (0: the
 * batcher's default). GJ_BATCH_OK or a negative enum gj_batch_rc with err. Thread-safe. */
int gj_batcher_infer(gj_batcher *b, const float *input, size_t n_samples, float *output,
                     int64_t timeout_us, struct gj_batch_timing *timing, struct gj_error *err);
/* The same for a caller that may give up (a cancelled job): while the request waits in
 * the queue, cancelled(arg) is asked every 100 ms on the calling thread, and once it
 * returns nonzero the request leaves the queue with GJ_BATCH_ECANCELED. A request
 * already in a running batch completes. cancelled NULL: gj_batcher_infer. */
int gj_batcher_infer_cancellable(gj_batcher *b, const float *input, size_t n_samples, float *output,
                                 int64_t timeout_us, struct gj_batch_timing *timing, struct gj_error *err,
                                 int (*cancelled)(void *arg), void *arg);

size_t gj_batcher_input_floats(const gj_batcher *b);    /* per sample; 0: not an image model */
size_t gj_batcher_output_floats(const gj_batcher *b);   /* per sample; 0: not an image model */
int gj_batcher_max_batch_size(const gj_batcher *b);
gj_served_model *gj_batcher_model(const gj_batcher *b);   /* borrowed */
int gj_batcher_device(const gj_batcher *b);               /* -1: CPU */
int gj_batcher_threads(const gj_batcher *b);              /* ONNX CPU threads per executor */
/* The precision it computes in: the config's on a GPU, always fp32 on the CPU. */
enum gj_precision gj_batcher_precision(const gj_batcher *b);
/* Device memory the batcher holds reserved now (0 on the CPU). */
uint64_t gj_batcher_reserved_bytes(gj_batcher *b);
/* Requests waiting in the queue now (not yet in a batch). */
size_t gj_batcher_queue_length(gj_batcher *b);
/* Sessions created so far by all executors (batch sizes x instances). */
size_t gj_batcher_sessions(gj_batcher *b);

/* ---- the per-process registry ------------------------------------------------------ */

/* 1 when the model's instances run on a GPU: instance_group.kind KIND_GPU, or KIND_AUTO
 * where the ONNX runtime's CUDA backend is available, the host has a GPU and every input and
 * output is of a type the CUDA backend takes (FP32, INT64, INT32, BOOL, UINT8, INT8; models
 * with others run on the CPU under KIND_AUTO). */
int gj_model_uses_gpu(const struct gj_model_config *cfg);

/* The shared batcher of this model version on the device it runs on, keyed by the model's
 * name, version and content (gj_served_model_digest: two models of one name, version and
 * size but other content never share one) and the device: created on first use from the
 * model's config.json (options as gj_batcher_create with all fields 0 / -1 except
 * threads_per_instance, the host's (serving_host.h), else CPUs / instances). A model of
 * the same name and version with other content (a new model.onnx) replaces its batchers:
 * the old ones drain and go when their last user releases them.
 *
 * The device: -1 for a CPU model. For a GPU model, among instance_group.gpus (default:
 * every GPU of the host's accounting), the least loaded now: fewest running jobs plus
 * requests queued in this model's batcher there, then most free memory, then the lowest
 * ordinal; a GPU where the model has no batcher yet and not enough free memory is passed
 * over. No GPU, or none with room: NULL, err->status 503, the message naming the model
 * and the GPU memory. A new reference (release it), or NULL with err. */
gj_batcher *gj_batcher_acquire(gj_served_model *m, struct gj_error *err);
/* The same on a given device: an `infer` job placed on GPU k uses the model's batcher of
 * GPU k (when instance_group.gpus allows k; otherwise, and for device -1, as
 * gj_batcher_acquire). A CPU model always gets its CPU batcher. */
gj_batcher *gj_batcher_acquire_on(gj_served_model *m, int device, struct gj_error *err);
void gj_batcher_release(gj_batcher *b);
/* Takes a model version's batchers (every device) out of the registry (call it when the
 * version is unloaded or deleted, so the model's memory, host and device, can go):
 * queued requests are still run; each batcher goes when its last user releases it. 1 when
 * one was registered, else 0. */
int gj_batcher_registry_drop(const char *name, int64_t version);
/* Devices (-1: CPU) on which the registry holds a batcher of this model version, ascending:
 * fills up to cap, returns the total. */
size_t gj_batcher_registry_devices(const char *name, int64_t version, int *devices, size_t cap);
/* Shuts every registered batcher down (their callers get GJ_BATCH_ESHUTDOWN) and drops
 * the registry's references (process exit; tests). Batchers still held elsewhere are
 * freed when released. */
void gj_batcher_registry_shutdown(void);

/* ---- statistics ---------------------------------------------------------------------- */

/* Triton's StatisticDuration: how many, and their summed nanoseconds. */
struct gj_stat_duration {
    uint64_t count, ns;
};

/* Upper bounds, in seconds, of the latency histogram of successful requests (enqueue to
 * answer): Prometheus' cumulative buckets, +Inf being success.count. */
#define GJ_LATENCY_BUCKETS 14
extern const double gj_latency_bounds[GJ_LATENCY_BUCKETS];

struct gj_batch_stats {
    char model[GJ_MODEL_NAME_MAX];
    int64_t version;
    uint64_t request_success, request_failure;
    uint64_t inference_count, exec_count;
    uint64_t queue_duration_us, compute_infer_duration_us;
    uint64_t pending_request_count;   /* gauge: requests waiting in the queue now */
    /* Triton's InferStatistics (per request; a request's compute_* are those of the batch it
     * ran in): success and fail (enqueue to answer), queue (enqueue to the start of its
     * batch), compute_input (gathering the batch's inputs), compute_infer (the model run),
     * compute_output (splitting and copying the outputs out). */
    uint64_t last_inference_ms;       /* ms since the epoch of the last batch run, 0 never */
    struct gj_stat_duration success, fail, queue, compute_input, compute_infer, compute_output;
    uint64_t success_le[GJ_LATENCY_BUCKETS];   /* successes at most gj_latency_bounds[i] */
};

/* Triton's InferBatchStatistics: per batch size, the batches run (count) and their times. */
struct gj_batch_size_stats {
    int batch_size;
    struct gj_stat_duration compute_input, compute_infer, compute_output;
};
/* The batch sizes a model version has run, ascending: fills up to cap, returns the total
 * (0 when it has run none). */
size_t gj_batch_stats_batches(const char *model, int64_t version, struct gj_batch_size_stats *out,
                              size_t cap);

/* Copies up to cap entries (every model/version that has seen a request, sorted by
 * name then version); returns the total number. */
size_t gj_batch_stats_snapshot(struct gj_batch_stats *out, size_t cap);
/* One model/version: 0, or -1 when it has no statistics yet (out zeroed). */
int gj_batch_stats_get(const char *model, int64_t version, struct gj_batch_stats *out);

#endif
