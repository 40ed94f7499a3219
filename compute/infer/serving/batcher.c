/*
 * batcher.c — dynamic batching of inference requests (see batcher.h).
 *
 * Locking: one mutex per batcher guards its queue, request states and counters; the
 * statistics have their own mutex (taken after a batcher's, never before); the registry
 * mutex is taken before any batcher's. A request lives on its caller's stack: the
 * caller waits on the request's condition variable until the state is DONE, and leaves
 * the queue by itself when its timeout passes while still QUEUED. An executor that took
 * a request into a batch (RUNNING) always completes it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "infer/onnx/onnx_model.h"
#include "infer/serving/batcher.h"
#include "infer/serving/gpu_accounting.h"
#include "infer/serving/serving_host.h"

#define MIB (1024.0 * 1024.0)

enum req_state { RQ_QUEUED = 0, RQ_RUNNING, RQ_DONE };

struct request {
    const float *input;
    float *output;
    size_t n;
    int64_t t_enqueue, deadline;
    enum req_state state;
    int rc;
    struct gj_error error;
    struct gj_batch_timing timing;
    pthread_cond_t cv;
    struct request *prev, *next;
};

struct stats_node {
    struct gj_batch_stats s;
    struct stats_node *next;
};

struct executor {
    gj_batcher *b;
    pthread_t thread;
    int started;
    onnx_session **sess;      /* [batch size], 1..max_batch */
    void ***outs;             /* [batch size][model output] */
    float *in_buf;            /* max_batch * in_floats */
    struct request **reqs;    /* max_batch: the batch being run */
};

struct gj_batcher {
    gj_served_model *model;
    const onnx_model *onnx;
    size_t in_floats, out_floats, out_index, n_model_outputs;
    int max_batch;
    int dynamic;
    int64_t delay_us;
    int preferred[GJ_MODEL_MAX_PREFERRED];
    size_t n_preferred;
    size_t max_queue;
    int64_t default_timeout_us;
    int threads;
    int device;               /* -1: CPU */
    int precision;            /* enum onnx_precision (FP32 on the CPU) */
    int cuda_graphs;
    uint64_t reserved;        /* device bytes reserved through gpu_accounting.h (under mu) */
    uint64_t used;            /* device bytes the sessions hold (under mu) */
    uint64_t acct_gen;        /* the accounting the reservation was made under */
    int n_exec;
    struct executor *exec;
    struct stats_node *stats;

    pthread_mutex_t mu;
    pthread_cond_t cv_work;   /* executors: new work or stopping */
    pthread_cond_t cv_idle;   /* destroy: last caller left */
    struct request *head, *tail;
    size_t queued;            /* requests in the queue */
    int callers;              /* inside gj_batcher_infer */
    int stopping;
    pthread_mutex_t join_mu;  /* one thread joins the executors */
    int joined;
    size_t n_sessions;
    int refs;                 /* registry references (gj_batcher_acquire) */
};

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void to_timespec(int64_t us, struct timespec *ts)
{
    ts->tv_sec = (time_t)(us / 1000000);
    ts->tv_nsec = (long)(us % 1000000) * 1000;
}

static int cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    if (pthread_condattr_init(&a))
        return -1;
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
    return rc ? -1 : 0;
}

/* Bytes of a GPU the accounting has not handed out. */
static uint64_t free_bytes(const struct gj_gpu_load *l)
{
    return l->total_bytes > l->reserved_bytes ? l->total_bytes - l->reserved_bytes : 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* ---- statistics -------------------------------------------------------------------- */

static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static struct stats_node *stats_head;

/* The node of a model/version, created when absent (never freed: process lifetime). */
static struct stats_node *stats_node_for(const char *model, int64_t version)
{
    pthread_mutex_lock(&stats_mu);
    struct stats_node *n = stats_head;
    for (; n; n = n->next)
        if (n->s.version == version && strcmp(n->s.model, model) == 0)
            break;
    if (!n && (n = calloc(1, sizeof *n))) {
        snprintf(n->s.model, sizeof n->s.model, "%s", model);
        n->s.version = version;
        n->next = stats_head;
        stats_head = n;
    }
    pthread_mutex_unlock(&stats_mu);
    return n;
}

static void stats_fail(struct stats_node *n)
{
    if (!n)
        return;
    pthread_mutex_lock(&stats_mu);
    n->s.request_failure++;
    pthread_mutex_unlock(&stats_mu);
}

static int stats_cmp(const void *a, const void *b)
{
    const struct gj_batch_stats *x = a, *y = b;
    int c = strcmp(x->model, y->model);
    if (c)
        return c;
    return x->version < y->version ? -1 : x->version > y->version;
}

size_t gj_batch_stats_snapshot(struct gj_batch_stats *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&stats_mu);
    for (struct stats_node *s = stats_head; s; s = s->next) {
        if (n < cap)
            out[n] = s->s;
        n++;
    }
    pthread_mutex_unlock(&stats_mu);
    if (out && cap)
        qsort(out, n < cap ? n : cap, sizeof *out, stats_cmp);
    return n;
}

int gj_batch_stats_get(const char *model, int64_t version, struct gj_batch_stats *out)
{
    memset(out, 0, sizeof *out);
    int rc = -1;
    pthread_mutex_lock(&stats_mu);
    for (struct stats_node *s = stats_head; s; s = s->next)
        if (s->s.version == version && strcmp(s->s.model, model) == 0) {
            *out = s->s;
            rc = 0;
            break;
        }
    pthread_mutex_unlock(&stats_mu);
    return rc;
}

/* ---- the queue ----------------------------------------------------------------------- */

static void queue_remove(gj_batcher *b, struct request *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        b->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        b->tail = r->prev;
    r->prev = r->next = NULL;
    b->queued--;
    if (b->stats) {
        pthread_mutex_lock(&stats_mu);
        b->stats->s.pending_request_count--;
        pthread_mutex_unlock(&stats_mu);
    }
}

static int is_preferred(const gj_batcher *b, size_t n)
{
    for (size_t i = 0; i < b->n_preferred; i++)
        if ((size_t)b->preferred[i] == n)
            return 1;
    return 0;
}

/* How many requests from the head form the next batch now (0: none yet; *wake_at is then
 * when to look again, 0 for "when something arrives"). Called with b->mu held. */
static size_t plan_batch(const gj_batcher *b, int64_t now, int64_t *wake_at)
{
    *wake_at = 0;
    if (!b->head)
        return 0;
    if (!b->dynamic)
        return 1;
    size_t k = 0, cum = 0, best_pref = 0;
    int full = 0;
    for (const struct request *r = b->head; r; r = r->next) {
        if (cum + r->n > (size_t)b->max_batch) {
            full = 1;
            break;
        }
        cum += r->n;
        k++;
        if (is_preferred(b, cum))
            best_pref = k;
    }
    if (full || cum == (size_t)b->max_batch)
        return k;
    if (best_pref)
        return best_pref;
    int64_t due = b->head->t_enqueue + b->delay_us;
    if (now >= due)
        return k;
    *wake_at = due;
    return 0;
}

/* ---- executors ------------------------------------------------------------------------- */

/* A new session of batch n holds dev bytes on the GPU: counted, and reserved beyond what
 * the batcher holds already. 0, or -1 with a 503 error when the GPU has no room. */
static int reserve_session(gj_batcher *b, uint64_t dev, size_t n, struct gj_error *err)
{
    int rc = 0;
    pthread_mutex_lock(&b->mu);
    if (b->used + dev > b->reserved) {
        uint64_t need = b->used + dev - b->reserved, gen;
        struct gj_gpu_load now;
        if (gj_gpu_acct_reserve(b->device, need, &gen, &now) == 0) {
            b->reserved += need;
        } else {
            gj_error_set(err, "", "model %s v%lld: GPU %d has no room for the session of batch "
                         "size %zu (%.1f MiB more; %.1f MiB free of %.1f MiB)",
                         gj_served_model_name(b->model),
                         (long long)gj_served_model_version(b->model), b->device, n,
                         (double)need / MIB,
                         (double)free_bytes(&now) / MIB,
                         (double)now.total_bytes / MIB);
            err->status = 503;
            err->transient = 1;   /* room may free up */
            rc = -1;
        }
    }
    if (rc == 0)
        b->used += dev;
    pthread_mutex_unlock(&b->mu);
    return rc;
}

/* A session that will not be kept: no longer counted (the reservation stays until the
 * batcher goes: another session will take it). */
static void unreserve_session(gj_batcher *b, uint64_t dev)
{
    pthread_mutex_lock(&b->mu);
    b->used = b->used > dev ? b->used - dev : 0;
    pthread_mutex_unlock(&b->mu);
}

static onnx_session *session_for(struct executor *e, size_t n, struct gj_error *err)
{
    gj_batcher *b = e->b;
    if (e->sess[n])
        return e->sess[n];
    struct onnx_session_options opt = { .batch = (int)n, .threads = b->threads,
                                        .backend = b->device >= 0 ? "cuda" : "cpu",
                                        .device = b->device >= 0 ? b->device : 0,
                                        .precision = b->precision,
                                        .cuda_graphs = b->device >= 0 && b->cuda_graphs };
    struct gj_error serr = { 0 };
    onnx_session *s = onnx_session_create(b->onnx, &opt, &serr);
    if (!s) {
        gj_error_set(err, "", "cannot create an inference session for batch size %zu: %s", n,
                     serr.message);
        return NULL;
    }
    if (b->device >= 0 && reserve_session(b, onnx_session_device_bytes(s), n, err)) {
        onnx_session_free(s);
        return NULL;
    }
    void **outs = calloc(b->n_model_outputs, sizeof *outs);
    int ok = outs != NULL;
    for (size_t i = 0; ok && i < b->n_model_outputs; i++) {
        size_t bytes = onnx_session_output_bytes(s, i);
        ok = (outs[i] = malloc(bytes ? bytes : 1)) != NULL;
    }
    if (ok && onnx_session_output_bytes(s, b->out_index) != n * b->out_floats * sizeof(float)) {
        gj_error_set(err, "", "the model's output for batch size %zu has %zu bytes, not %zu", n,
                     onnx_session_output_bytes(s, b->out_index), n * b->out_floats * sizeof(float));
        ok = -1;
    } else if (!ok) {
        gj_error_set(err, "", "out of memory for the outputs of batch size %zu", n);
    }
    if (ok != 1) {
        for (size_t i = 0; outs && i < b->n_model_outputs; i++)
            free(outs[i]);
        free(outs);
        if (b->device >= 0)
            unreserve_session(b, onnx_session_device_bytes(s));
        onnx_session_free(s);
        return NULL;
    }
    e->sess[n] = s;
    e->outs[n] = outs;
    pthread_mutex_lock(&b->mu);
    b->n_sessions++;
    pthread_mutex_unlock(&b->mu);
    return s;
}

static void run_batch(struct executor *e, struct request **reqs, size_t k, size_t n)
{
    gj_batcher *b = e->b;
    struct gj_error err = { 0 };
    int rc = GJ_BATCH_OK;
    int64_t t0 = now_us(), t1 = t0;
    onnx_session *s = session_for(e, n, &err);
    if (!s) {
        rc = GJ_BATCH_EFAILED;
    } else {
        size_t off = 0;
        for (size_t i = 0; i < k; i++) {
            memcpy(e->in_buf + off * b->in_floats, reqs[i]->input,
                   reqs[i]->n * b->in_floats * sizeof(float));
            off += reqs[i]->n;
        }
        const void *ins[1] = { e->in_buf };
        t0 = now_us();
        struct gj_error rerr = { 0 };
        if (onnx_session_run(s, ins, (void *const *)e->outs[n], &rerr)) {
            gj_error_set(&err, "", "inference failed: %s", rerr.message);
            rc = GJ_BATCH_EFAILED;
        }
        t1 = now_us();
        if (rc == GJ_BATCH_OK) {
            const float *out = e->outs[n][b->out_index];
            off = 0;
            for (size_t i = 0; i < k; i++) {
                memcpy(reqs[i]->output, out + off * b->out_floats,
                       reqs[i]->n * b->out_floats * sizeof(float));
                off += reqs[i]->n;
            }
        }
    }
    if (rc != GJ_BATCH_OK && !err.status)
        err.status = 500;
    int64_t compute = t1 - t0;
    pthread_mutex_lock(&stats_mu);
    if (b->stats) {
        b->stats->s.exec_count += rc == GJ_BATCH_OK;
        for (size_t i = 0; i < k; i++) {
            b->stats->s.queue_duration_us += (uint64_t)reqs[i]->timing.queue_us;
            if (rc == GJ_BATCH_OK) {
                b->stats->s.request_success++;
                b->stats->s.inference_count += reqs[i]->n;
                b->stats->s.compute_infer_duration_us += (uint64_t)compute;
            } else {
                b->stats->s.request_failure++;
            }
        }
    }
    pthread_mutex_unlock(&stats_mu);
    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < k; i++) {
        struct request *r = reqs[i];
        r->rc = rc;
        if (rc != GJ_BATCH_OK)
            r->error = err;
        r->timing.compute_us = compute;
        r->timing.batch_size = (int)n;
        r->state = RQ_DONE;
        pthread_cond_signal(&r->cv);
    }
    pthread_mutex_unlock(&b->mu);
}

static void *executor_main(void *arg)
{
    struct executor *e = arg;
    gj_batcher *b = e->b;
    struct request **reqs = e->reqs;
    pthread_mutex_lock(&b->mu);
    while (!b->stopping) {
        int64_t now = now_us(), wake = 0;
        size_t k = plan_batch(b, now, &wake);
        if (k == 0) {
            if (wake) {
                struct timespec ts;
                to_timespec(wake, &ts);
                pthread_cond_timedwait(&b->cv_work, &b->mu, &ts);
            } else {
                pthread_cond_wait(&b->cv_work, &b->mu);
            }
            continue;
        }
        size_t n = 0;
        for (size_t i = 0; i < k; i++) {
            struct request *r = b->head;
            queue_remove(b, r);
            r->state = RQ_RUNNING;
            r->timing.queue_us = now - r->t_enqueue;
            reqs[i] = r;
            n += r->n;
        }
        if (b->head)     /* more work: another executor may take it */
            pthread_cond_signal(&b->cv_work);
        pthread_mutex_unlock(&b->mu);
        run_batch(e, reqs, k, n);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* ---- create / destroy ------------------------------------------------------------------ */

static void free_executor(gj_batcher *b, struct executor *e)
{
    for (int n = 0; e->sess && n <= b->max_batch; n++) {
        if (e->outs && e->outs[n]) {
            for (size_t i = 0; i < b->n_model_outputs; i++)
                free(e->outs[n][i]);
            free(e->outs[n]);
        }
        onnx_session_free(e->sess[n]);
    }
    free(e->sess);
    free(e->outs);
    free(e->in_buf);
    free(e->reqs);
}

static void batcher_free(gj_batcher *b)
{
    for (int i = 0; b->exec && i < b->n_exec; i++)
        free_executor(b, &b->exec[i]);
    free(b->exec);
    pthread_cond_destroy(&b->cv_work);
    pthread_cond_destroy(&b->cv_idle);
    pthread_mutex_destroy(&b->mu);
    pthread_mutex_destroy(&b->join_mu);
    if (b->device >= 0 && b->reserved)
        gj_gpu_acct_release(b->device, b->reserved, b->acct_gen);
    gj_served_model_release(b->model);
    free(b);
}

/* A GPU batcher, before any session: the model's estimate reserved on its GPU, then the
 * CUDA backend checked (memory first, so that hosts with simulated GPUs test it too).
 * 0, or -1 with a 503 error (*no_room set when the GPU lacks the memory). */
static int reserve_model(gj_batcher *b, int *no_room, struct gj_error *err)
{
    const char *name = gj_served_model_name(b->model);
    long long v = (long long)gj_served_model_version(b->model);
    int n_gpus = gj_gpu_acct_count();
    if (n_gpus >= 0 && b->device >= n_gpus) {
        gj_error_set(err, "device", "model %s v%lld: GPU %d does not exist here (%d GPU%s)", name,
                     v, b->device, n_gpus, n_gpus == 1 ? "" : "s");
        if (err)
            err->status = 503;
        return -1;
    }
    uint64_t est = gj_served_model_device_estimate(b->model, b->max_batch, b->n_exec);
    struct gj_gpu_load now;
    if (gj_gpu_acct_reserve(b->device, est, &b->acct_gen, &now) != 0) {
        if (no_room)
            *no_room = 1;
        gj_error_set(err, "", "model %s v%lld needs about %.1f MiB of GPU memory (%d instance%s, "
                     "batches of up to %d) but GPU %d has %.1f MiB free of %.1f MiB", name, v,
                     (double)est / MIB, b->n_exec, b->n_exec == 1 ? "" : "s", b->max_batch,
                     b->device,
                     (double)free_bytes(&now) / MIB,
                     (double)now.total_bytes / MIB);
        if (err) {
            err->status = 503;
            err->transient = 1;   /* room may free up */
        }
        return -1;
    }
    b->reserved = est;
    struct gj_error why = { 0 };
    if (!onnx_backend_available("cuda", &why)) {
        gj_error_set(err, "", "model %s v%lld cannot run on GPU %d: %s", name, v, b->device, why.message);
        if (err)
            err->status = 503;
        return -1;   /* the caller's batcher_free releases the reservation */
    }
    return 0;
}

static gj_batcher *create(gj_served_model *m, const struct gj_batcher_options *opt, int *no_room,
                          struct gj_error *err)
{
    static const struct gj_batcher_options defaults = { .max_queue_delay_us = -1,
                                                        .dynamic_batching = -1, .device = -1 };
    if (!opt)
        opt = &defaults;
    if (!m)
        return gj_error_set(err, "model", "no model"), NULL;
    const struct gj_model_config *cfg = gj_served_model_config(m);
    const onnx_model *om = gj_served_model_onnx(m);
    if (!om)
        return gj_error_set(err, "model", "the ONNX runtime is not built in"), NULL;
    if (onnx_model_num_inputs(om) != 1)
        return gj_error_set(err, "model", "model %s has %zu inputs: the batcher takes models "
                            "with one input", cfg->name, onnx_model_num_inputs(om)), NULL;
    if (onnx_model_input(om, 0)->elem_type != ONNX_ELEM_FLOAT)
        return gj_error_set(err, "model", "model %s: the input is not float32", cfg->name), NULL;

    gj_batcher *b = calloc(1, sizeof *b);
    if (!b)
        return gj_error_set(err, "", "out of memory"), NULL;
    b->onnx = om;
    b->in_floats = (size_t)cfg->input_dims[0] * (size_t)cfg->input_dims[1] *
                   (size_t)cfg->input_dims[2];
    b->out_floats = (size_t)cfg->n_outputs;
    b->out_index = gj_served_model_output_index(m);
    b->n_model_outputs = onnx_model_num_outputs(om);
    b->max_batch = cfg->max_batch_size > 0 ? cfg->max_batch_size : 1;
    if (opt->max_batch_size > 0 && opt->max_batch_size < b->max_batch)
        b->max_batch = opt->max_batch_size;
    b->dynamic = opt->dynamic_batching >= 0 ? opt->dynamic_batching : cfg->dynamic_batching;
    b->delay_us = opt->max_queue_delay_us >= 0 ? opt->max_queue_delay_us
                                              : cfg->max_queue_delay_us;
    if (b->delay_us < 0)
        b->delay_us = 0;
    const int *pref = opt->n_preferred ? opt->preferred_batch_sizes : cfg->preferred_batch_sizes;
    size_t np = opt->n_preferred ? opt->n_preferred : cfg->n_preferred;
    for (size_t i = 0; i < np && i < GJ_MODEL_MAX_PREFERRED; i++)
        if (pref[i] >= 1 && pref[i] <= b->max_batch)
            b->preferred[b->n_preferred++] = pref[i];
    struct gj_serving_host host;
    gj_serving_host_get(&host);
    b->max_queue = opt->max_queue_size ? opt->max_queue_size
                   : host.max_queue ? host.max_queue : GJ_BATCH_DEFAULT_MAX_QUEUE;
    b->default_timeout_us = opt->default_timeout_us > 0 ? opt->default_timeout_us
                            : host.queue_timeout_us > 0 ? host.queue_timeout_us
                            : GJ_BATCH_DEFAULT_TIMEOUT_US;
    b->threads = opt->threads_per_instance > 0 ? opt->threads_per_instance : 1;
    if (b->threads > 256)
        b->threads = 256;
    b->n_exec = opt->instances > 0 ? opt->instances
                : (cfg->instances_per_device > 0 ? cfg->instances_per_device : 1);
    if (b->n_exec > 64)
        b->n_exec = 64;
    b->device = opt->device >= 0 ? opt->device : -1;
    b->precision = b->device >= 0 ? (int)cfg->precision : ONNX_PRECISION_FP32;
    b->cuda_graphs = cfg->cuda_graphs;
    if (b->in_floats == 0 || b->out_floats == 0) {
        free(b);
        return gj_error_set(err, "model", "model %s: empty input or output shape", cfg->name),
               NULL;
    }
    b->stats = stats_node_for(gj_served_model_name(m), gj_served_model_version(m));
    if (pthread_mutex_init(&b->mu, NULL) || pthread_mutex_init(&b->join_mu, NULL) ||
        cond_init_mono(&b->cv_work) ||
        cond_init_mono(&b->cv_idle)) {
        free(b);
        return gj_error_set(err, "", "cannot create the batcher's locks"), NULL;
    }
    b->model = gj_served_model_ref(m);
    if (b->device >= 0 && reserve_model(b, no_room, err)) {
        batcher_free(b);
        return NULL;
    }
    b->exec = calloc((size_t)b->n_exec, sizeof *b->exec);
    if (!b->exec)
        goto oom;
    for (int i = 0; i < b->n_exec; i++) {
        struct executor *e = &b->exec[i];
        e->b = b;
        e->sess = calloc((size_t)b->max_batch + 1, sizeof *e->sess);
        e->outs = calloc((size_t)b->max_batch + 1, sizeof *e->outs);
        e->in_buf = malloc((size_t)b->max_batch * b->in_floats * sizeof(float));
        e->reqs = calloc((size_t)b->max_batch, sizeof *e->reqs);
        if (!e->sess || !e->outs || !e->in_buf || !e->reqs)
            goto oom;
    }
    for (int i = 0; i < b->n_exec; i++) {
        if (pthread_create(&b->exec[i].thread, NULL, executor_main, &b->exec[i])) {
            gj_error_set(err, "", "cannot start the batcher's executor threads");
            gj_batcher_destroy(b);
            return NULL;
        }
        b->exec[i].started = 1;
    }
    return b;
oom:
    gj_error_set(err, "", "out of memory for a batcher of batch size %d", b->max_batch);
    batcher_free(b);
    return NULL;
}

gj_batcher *gj_batcher_create(gj_served_model *m, const struct gj_batcher_options *opt,
                              struct gj_error *err)
{
    return create(m, opt, NULL, err);
}

void gj_batcher_shutdown(gj_batcher *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&b->mu);
    b->stopping = 1;
    while (b->head) {
        struct request *r = b->head;
        queue_remove(b, r);
        r->rc = GJ_BATCH_ESHUTDOWN;
        gj_error_set(&r->error, "", "model %s v%lld is being unloaded: the request was not run",
                     gj_served_model_name(b->model), (long long)gj_served_model_version(b->model));
        r->error.status = 503;
        r->state = RQ_DONE;
        stats_fail(b->stats);
        pthread_cond_signal(&r->cv);
    }
    pthread_cond_broadcast(&b->cv_work);
    pthread_mutex_unlock(&b->mu);
    pthread_mutex_lock(&b->join_mu);
    if (!b->joined) {
        for (int i = 0; i < b->n_exec; i++)
            if (b->exec[i].started)
                pthread_join(b->exec[i].thread, NULL);
        b->joined = 1;
    }
    pthread_mutex_unlock(&b->join_mu);
}

void gj_batcher_destroy(gj_batcher *b)
{
    if (!b)
        return;
    gj_batcher_shutdown(b);
    pthread_mutex_lock(&b->mu);
    while (b->callers > 0)
        pthread_cond_wait(&b->cv_idle, &b->mu);
    pthread_mutex_unlock(&b->mu);
    batcher_free(b);
}

/* ---- requests ---------------------------------------------------------------------------- */

int gj_batcher_infer(gj_batcher *b, const float *input, size_t n_samples, float *output,
                     int64_t timeout_us, struct gj_batch_timing *timing, struct gj_error *err)
{
    return gj_batcher_infer_cancellable(b, input, n_samples, output, timeout_us, timing, err, NULL, NULL);
}

/* How often a queued request asks its caller whether it still wants the answer. */
#define CANCEL_POLL_US 100000

/* A queued request whose caller gave up leaves the queue (called with b->mu held,
 * which it drops around the caller's hook). 1 when it left. */
static int leave_if_cancelled(gj_batcher *b, struct request *r, int (*cancelled)(void *), void *arg)
{
    pthread_mutex_unlock(&b->mu);
    int stop = cancelled(arg);
    pthread_mutex_lock(&b->mu);
    if (!stop || r->state != RQ_QUEUED)
        return 0;
    queue_remove(b, r);
    r->state = RQ_DONE;
    r->rc = GJ_BATCH_ECANCELED;
    r->timing.queue_us = now_us() - r->t_enqueue;
    gj_error_set(&r->error, "", "the request was cancelled while it waited in the queue of model %s v%lld",
                 gj_served_model_name(b->model), (long long)gj_served_model_version(b->model));
    r->error.status = 499;
    stats_fail(b->stats);
    return 1;
}

int gj_batcher_infer_cancellable(gj_batcher *b, const float *input, size_t n_samples, float *output,
                                 int64_t timeout_us, struct gj_batch_timing *timing, struct gj_error *err,
                                 int (*cancelled)(void *arg), void *arg)
{
    if (timing)
        memset(timing, 0, sizeof *timing);
    if (!b || !input || !output || n_samples < 1 || n_samples > (size_t)b->max_batch) {
        if (b)
            stats_fail(b->stats);
        gj_error_set(err, "inputs", "a request carries 1 to %d samples, not %zu",
                     b ? b->max_batch : 0, n_samples);
        if (err)
            err->status = 400;
        return GJ_BATCH_EINVAL;
    }
    struct request r;
    memset(&r, 0, sizeof r);
    r.input = input;
    r.output = output;
    r.n = n_samples;
    if (cond_init_mono(&r.cv)) {
        stats_fail(b->stats);
        gj_error_set(err, "", "cannot wait for the request");
        if (err)
            err->status = 500;
        return GJ_BATCH_EFAILED;
    }
    pthread_mutex_lock(&b->mu);
    if (b->stopping) {
        pthread_mutex_unlock(&b->mu);
        pthread_cond_destroy(&r.cv);
        stats_fail(b->stats);
        gj_error_set(err, "", "model %s v%lld is being unloaded", gj_served_model_name(b->model),
                     (long long)gj_served_model_version(b->model));
        if (err)
            err->status = 503;
        return GJ_BATCH_ESHUTDOWN;
    }
    if (b->queued >= b->max_queue) {
        size_t q = b->queued;
        pthread_mutex_unlock(&b->mu);
        pthread_cond_destroy(&r.cv);
        stats_fail(b->stats);
        gj_error_set(err, "", "the queue of model %s v%lld is full (%zu requests waiting): "
                     "retry later", gj_served_model_name(b->model),
                     (long long)gj_served_model_version(b->model), q);
        if (err)
            err->status = 429;
        return GJ_BATCH_EFULL;
    }
    b->callers++;
    r.t_enqueue = now_us();
    r.deadline = r.t_enqueue + (timeout_us > 0 ? timeout_us : b->default_timeout_us);
    r.state = RQ_QUEUED;
    r.prev = b->tail;
    if (b->tail)
        b->tail->next = &r;
    else
        b->head = &r;
    b->tail = &r;
    b->queued++;
    if (b->stats) {
        pthread_mutex_lock(&stats_mu);
        b->stats->s.pending_request_count++;
        pthread_mutex_unlock(&stats_mu);
    }
    pthread_cond_signal(&b->cv_work);
    while (r.state != RQ_DONE) {
        if (r.state == RQ_QUEUED) {
            int64_t now = now_us();
            if (now >= r.deadline) {
                queue_remove(b, &r);
                r.state = RQ_DONE;
                r.rc = GJ_BATCH_ETIMEDOUT;
                r.timing.queue_us = now - r.t_enqueue;
                gj_error_set(&r.error, "", "the request waited %.1f ms in the queue of model %s "
                             "v%lld, over its timeout: the server is overloaded",
                             (double)(now - r.t_enqueue) / 1000.0, gj_served_model_name(b->model),
                             (long long)gj_served_model_version(b->model));
                r.error.status = 503;
                stats_fail(b->stats);
                break;
            }
            int64_t until = r.deadline;
            if (cancelled && now + CANCEL_POLL_US < until)
                until = now + CANCEL_POLL_US;
            struct timespec ts;
            to_timespec(until, &ts);
            pthread_cond_timedwait(&r.cv, &b->mu, &ts);
            if (cancelled && r.state == RQ_QUEUED && leave_if_cancelled(b, &r, cancelled, arg))
                break;
        } else {
            pthread_cond_wait(&r.cv, &b->mu);
        }
    }
    b->callers--;
    if (b->callers == 0 && b->stopping)
        pthread_cond_broadcast(&b->cv_idle);
    pthread_mutex_unlock(&b->mu);
    pthread_cond_destroy(&r.cv);
    if (timing)
        *timing = r.timing;
    if (r.rc != GJ_BATCH_OK && err)
        *err = r.error;
    return r.rc;
}

size_t gj_batcher_input_floats(const gj_batcher *b)
{
    return b->in_floats;
}

size_t gj_batcher_output_floats(const gj_batcher *b)
{
    return b->out_floats;
}

int gj_batcher_max_batch_size(const gj_batcher *b)
{
    return b->max_batch;
}

gj_served_model *gj_batcher_model(const gj_batcher *b)
{
    return b->model;
}

int gj_batcher_device(const gj_batcher *b)
{
    return b->device;
}

enum gj_precision gj_batcher_precision(const gj_batcher *b)
{
    /* b->precision is numbered as enum onnx_precision, which matches enum gj_precision */
    return (enum gj_precision)b->precision;
}

uint64_t gj_batcher_reserved_bytes(gj_batcher *b)
{
    pthread_mutex_lock(&b->mu);
    uint64_t n = b->reserved;
    pthread_mutex_unlock(&b->mu);
    return n;
}

size_t gj_batcher_queue_length(gj_batcher *b)
{
    pthread_mutex_lock(&b->mu);
    size_t n = b->queued;
    pthread_mutex_unlock(&b->mu);
    return n;
}

size_t gj_batcher_sessions(gj_batcher *b)
{
    pthread_mutex_lock(&b->mu);
    size_t n = b->n_sessions;
    pthread_mutex_unlock(&b->mu);
    return n;
}

/* ---- registry ------------------------------------------------------------------------------ */

struct reg_entry {
    gj_batcher *b;             /* registered (holds one of b->refs); keyed by name, version,
                                  model digest and device */
    struct reg_entry *next;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct reg_entry *reg_head;

static int default_threads(int instances)
{
    struct gj_serving_host host;
    gj_serving_host_get(&host);
    if (host.threads_per_instance > 0)
        return host.threads_per_instance;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1)
        ncpu = 1;
    long per = ncpu / (instances > 0 ? instances : 1);
    return per < 1 ? 1 : per > 16 ? 16 : (int)per;
}

/* Drops one reference; the caller holds reg_mu. Returns the batcher to destroy (outside
 * the lock), or NULL. */
static gj_batcher *unref_locked(gj_batcher *b)
{
    return --b->refs == 0 ? b : NULL;
}

static int same_version(const gj_batcher *b, const char *name, int64_t version)
{
    return gj_served_model_version(b->model) == version &&
           strcmp(gj_served_model_name(b->model), name) == 0;
}

/* The same model: name, version and content (the SHA-256 of model.onnx), whichever load
 * of it the batcher was made from. Never the file size: two files of one size differ. */
static int same_model(const gj_batcher *b, const gj_served_model *m)
{
    return b->model == m ||
           (same_version(b, gj_served_model_name(m), gj_served_model_version(m)) &&
            strcmp(gj_served_model_digest(b->model), gj_served_model_digest(m)) == 0);
}

/* The CUDA backend, asked once: whether a KIND_AUTO model goes to a GPU. */
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static int cuda_ok;

static void probe_cuda(void)
{
    cuda_ok = onnx_backend_available("cuda", NULL);
}

int gj_model_uses_gpu(const struct gj_model_config *cfg)
{
    if (cfg->instance_kind != GJ_INSTANCE_AUTO)
        return cfg->instance_kind == GJ_INSTANCE_GPU;
    pthread_once(&cuda_once, probe_cuda);
    return cuda_ok && gj_gpu_acct_count() != 0;
}

/* Removes the batchers of m's name and version whose model has other content (a new
 * model.onnx under the same name and version); they are put on *dead to be released
 * outside the lock. Caller holds reg_mu. */
static void drop_stale_locked(gj_served_model *m, struct reg_entry **dead)
{
    const char *name = gj_served_model_name(m);
    int64_t version = gj_served_model_version(m);
    for (struct reg_entry **pp = &reg_head; *pp;) {
        if (!same_version((*pp)->b, name, version) || same_model((*pp)->b, m)) {
            pp = &(*pp)->next;
            continue;
        }
        struct reg_entry *e = *pp;
        *pp = e->next;
        e->next = *dead;
        *dead = e;
    }
}

static gj_batcher *find_locked(gj_served_model *m, int device)
{
    for (struct reg_entry *e = reg_head; e; e = e->next)
        if (e->b->device == device && same_model(e->b, m))
            return e->b;
    return NULL;
}

/* The registered batcher of m on device, created when absent. Caller holds reg_mu. */
static gj_batcher *get_or_create_locked(gj_served_model *m, int device, int *no_room,
                                        struct gj_error *err)
{
    gj_batcher *b = find_locked(m, device);
    if (b) {
        b->refs++;
        return b;
    }
    const struct gj_model_config *cfg = gj_served_model_config(m);
    struct gj_batcher_options opt = { .max_queue_delay_us = -1, .dynamic_batching = -1,
                                      .device = device };
    opt.threads_per_instance = default_threads(cfg->instances_per_device);
    struct reg_entry *e = calloc(1, sizeof *e);
    if (!e)
        return gj_error_set(err, "", "out of memory"), NULL;
    b = create(m, &opt, no_room, err);
    if (!b) {
        free(e);
        return NULL;
    }
    b->refs = 2;   /* the registry's and the caller's */
    e->b = b;
    e->next = reg_head;
    reg_head = e;
    return b;
}

/* How busy a GPU is for this model now: jobs running there plus requests waiting in the
 * model's batcher there; and its free memory. Caller holds reg_mu. */
struct gpu_rank {
    int gpu;
    long load;
    uint64_t free_bytes;
};

static int cmp_rank(const void *a, const void *b)
{
    const struct gpu_rank *x = a, *y = b;
    if (x->load != y->load)
        return x->load < y->load ? -1 : 1;
    if (x->free_bytes != y->free_bytes)
        return x->free_bytes > y->free_bytes ? -1 : 1;
    return x->gpu < y->gpu ? -1 : x->gpu > y->gpu;
}

/* The GPUs a request for m may go to now, least loaded first. want >= 0: that GPU when
 * the config allows it. 0, or -1 with a 503 error. Caller holds reg_mu. */
static int gpu_candidates(gj_served_model *m, int want, struct gpu_rank *out, size_t *n,
                          struct gj_error *err)
{
    const struct gj_model_config *cfg = gj_served_model_config(m);
    const char *name = gj_served_model_name(m);
    int n_sys = gj_gpu_acct_count();   /* -1: no accounting (gpujobd run, tests) */
    *n = 0;
    if (n_sys == 0) {
        gj_error_set(err, "instance_group.kind", "model %s needs a GPU (config.json "
                     "instance_group.kind %s) but this server has none", name,
                     gj_instance_kind_name(cfg->instance_kind));
        if (err)
            err->status = 503;
        return -1;
    }
    int all[GJ_MODEL_MAX_GPUS];
    size_t n_all = 0;
    if (cfg->n_gpus) {
        for (size_t i = 0; i < cfg->n_gpus; i++) {
            if (n_sys > 0 && cfg->gpus[i] >= n_sys) {
                gj_error_set(err, "instance_group.gpus", "model %s: config.json "
                             "instance_group.gpus lists GPU %d but this server has %d GPU%s "
                             "(0 to %d)", name, cfg->gpus[i], n_sys, n_sys == 1 ? "" : "s",
                             n_sys - 1);
                if (err)
                    err->status = 503;
                return -1;
            }
            all[n_all++] = cfg->gpus[i];
        }
    } else if (n_sys > 0) {
        for (int g = 0; g < n_sys && g < GJ_MODEL_MAX_GPUS; g++)
            all[n_all++] = g;
    } else {
        all[n_all++] = want >= 0 ? want : 0;   /* no accounting: the GPU asked for, else 0 */
    }
    for (size_t i = 0; i < n_all; i++)
        if (all[i] == want) {   /* a job placed on this GPU */
            all[0] = want;
            n_all = 1;
            break;
        }
    for (size_t i = 0; i < n_all; i++) {
        struct gj_gpu_load l;
        struct gpu_rank *r = &out[(*n)++];
        r->gpu = all[i];
        r->load = 0;
        r->free_bytes = 0;
        if (gj_gpu_acct_load(all[i], &l) == 0) {
            r->load = l.running;
            r->free_bytes = free_bytes(&l);
        }
        gj_batcher *b = find_locked(m, all[i]);
        if (b)
            r->load += (long)gj_batcher_queue_length(b);
    }
    qsort(out, *n, sizeof *out, cmp_rank);
    return 0;
}

static gj_batcher *acquire(gj_served_model *m, int want, struct gj_error *err)
{
    if (!m)
        return gj_error_set(err, "model", "no model"), NULL;
    const struct gj_model_config *cfg = gj_served_model_config(m);
    struct reg_entry *dead = NULL;
    gj_batcher *b = NULL;
    pthread_mutex_lock(&reg_mu);
    drop_stale_locked(m, &dead);
    if (!gj_model_uses_gpu(cfg)) {
        b = get_or_create_locked(m, -1, NULL, err);
    } else {
        struct gpu_rank r[GJ_MODEL_MAX_GPUS];
        size_t n = 0, full = 0;
        char why[512] = "";
        if (gpu_candidates(m, want, r, &n, err) == 0) {
            for (size_t i = 0; i < n && !b; i++) {
                int no_room = 0;
                struct gj_error e = { 0 };
                b = get_or_create_locked(m, r[i].gpu, &no_room, &e);
                if (!b && !no_room) {   /* not a matter of memory: say why */
                    if (err)
                        *err = e;
                    break;
                }
                if (!b) {
                    full++;
                    if (full == 1)
                        snprintf(why, sizeof why, "%s", e.message);
                }
            }
            if (!b && full == n) {
                if (n == 1)
                    gj_error_set(err, "", "%s", why);
                else
                    gj_error_set(err, "", "model %s does not fit in the free memory of any of its "
                                 "%zu GPUs now; on the least loaded: %s",
                                 gj_served_model_name(m), n, why);
                if (err) {
                    err->status = 503;
                    err->transient = 1;
                }
            }
        }
    }
    pthread_mutex_unlock(&reg_mu);
    while (dead) {
        struct reg_entry *e = dead;
        dead = e->next;
        gj_batcher_release(e->b);   /* the registry's reference */
        free(e);
    }
    return b;
}

gj_batcher *gj_batcher_acquire(gj_served_model *m, struct gj_error *err)
{
    return acquire(m, -1, err);
}

gj_batcher *gj_batcher_acquire_on(gj_served_model *m, int device, struct gj_error *err)
{
    return acquire(m, device, err);
}

void gj_batcher_release(gj_batcher *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&reg_mu);
    gj_batcher *dead = unref_locked(b);
    pthread_mutex_unlock(&reg_mu);
    if (dead)
        gj_batcher_destroy(dead);
}

int gj_batcher_registry_drop(const char *name, int64_t version)
{
    struct reg_entry *dead = NULL;
    pthread_mutex_lock(&reg_mu);
    for (struct reg_entry **pp = &reg_head; *pp;) {
        if (!same_version((*pp)->b, name, version)) {
            pp = &(*pp)->next;
            continue;
        }
        struct reg_entry *e = *pp;
        *pp = e->next;
        e->next = dead;
        dead = e;
    }
    pthread_mutex_unlock(&reg_mu);
    int found = dead != NULL;
    while (dead) {
        struct reg_entry *e = dead;
        dead = e->next;
        gj_batcher_release(e->b);
        free(e);
    }
    return found;
}

size_t gj_batcher_registry_devices(const char *name, int64_t version, int *devices, size_t cap)
{
    int seen[GJ_MODEL_MAX_GPUS + 1];
    size_t n = 0;
    pthread_mutex_lock(&reg_mu);
    for (struct reg_entry *e = reg_head; e && n < GJ_MODEL_MAX_GPUS + 1; e = e->next)
        if (same_version(e->b, name, version))
            seen[n++] = e->b->device;
    pthread_mutex_unlock(&reg_mu);
    qsort(seen, n, sizeof seen[0], cmp_int);
    for (size_t i = 0; i < n && i < cap; i++)
        devices[i] = seen[i];
    return n;
}

void gj_batcher_registry_shutdown(void)
{
    pthread_mutex_lock(&reg_mu);
    struct reg_entry *list = reg_head, *dead = NULL;
    reg_head = NULL;
    while (list) {
        struct reg_entry *e = list;
        list = e->next;
        if (unref_locked(e->b)) {
            e->next = dead;
            dead = e;
        } else {
            free(e);
        }
    }
    pthread_mutex_unlock(&reg_mu);
    for (struct reg_entry *e = dead; e; e = e->next)
        gj_batcher_shutdown(e->b);
    while (dead) {
        struct reg_entry *e = dead;
        dead = e->next;
        gj_batcher_destroy(e->b);
        free(e);
    }
}
