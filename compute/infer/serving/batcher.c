/*
 * batcher.c — dynamic batching of inference requests (see batcher.h).
 *
 * Locking: one mutex per batcher guards its queue, request states and counters; the
 * statistics have their own mutex (batch_stats.c, taken after a batcher's, never before);
 * the registry mutex is taken before any batcher's. A request of gj_batcher_run lives on its
 * caller's stack: the caller waits on the request's condition variable until the state is
 * DONE, and leaves the queue by itself when its timeout passes while still QUEUED. A request
 * of gj_batcher_submit lives on the heap, owned by the batcher: nobody waits on it, so the
 * executors time it out, and whoever answers it calls its done function after dropping the
 * mutex, then frees it. An executor that took a request into a batch (RUNNING) always
 * completes it.
 *
 * Tensors: a request is checked whole before it is queued (names, types, shapes, sizes,
 * BOOL and STRING values), so a batch only holds requests the model can run. A batch of one
 * request runs on the caller's buffers; a larger one gathers each input into the executor's
 * buffer along dimension 0. Every model output is computed into the session's buffers and
 * each request gets a copy of its rows of the outputs it asked for.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "infer/onnx/onnx_model.h"
#include "infer/serving/batch_stats.h"
#include "infer/serving/batcher.h"
#include "infer/serving/gpu_accounting.h"
#include "infer/serving/model_config_internal.h"
#include "infer/serving/serving_host.h"

#define MIB (1024.0 * 1024.0)
/* Sessions an executor keeps beyond one per batch size (models with symbolic dimensions
 * get one per shape: the least recently used go first). */
#define SHAPE_SESSIONS 32
/* A tensor of a request: at most this many elements (the runtime caps a tensor at 4 GiB). */
#define MAX_ELEMS ((int64_t)1 << 32)

enum req_state { RQ_QUEUED = 0, RQ_RUNNING, RQ_DONE };

struct request {
    const struct gj_tensor **in;   /* [model input]: the caller's tensor */
    struct gj_tensor *out;         /* the caller's, n_out */
    const int *out_index;          /* [n_out]: the model output each one is */
    size_t n_out;
    size_t n;                      /* samples */
    int64_t t_enqueue, deadline;   /* ns, monotonic */
    enum req_state state;
    int rc;
    struct gj_error error;
    struct gj_batch_timing timing;
    pthread_cond_t cv;             /* a waiting caller's (done NULL) */
    gj_batch_done_fn done;         /* gj_batcher_submit's: called once answered */
    void *done_arg;
    struct request *prev, *next;   /* in the queue */
    struct request *answered;      /* in a list of answered ones to call back */
};

/* A request of gj_batcher_submit with the arrays a waiting caller keeps on its stack. */
struct async_request {
    struct request r;
    const struct gj_tensor *by_input[GJ_MODEL_MAX_TENSORS];
    int out_index[GJ_MODEL_MAX_TENSORS];
};

/* A session of one batch size and per-sample shape, with its output buffers. */
struct sess_entry {
    size_t n;
    int64_t *shape;           /* the per-sample dims of every input, concatenated */
    onnx_session *s;
    void **outs;              /* [model output] */
    uint64_t dev;             /* device bytes it holds (GPU) */
    uint64_t used_at;         /* executor tick of its last use */
};

struct executor {
    gj_batcher *b;
    pthread_t thread;
    int started;
    struct sess_entry *cache;
    size_t n_cache;
    uint64_t tick;
    void **in_buf;            /* [model input]: a batch's gathered input */
    size_t *in_cap;
    const void **ins;         /* [model input]: what the run reads */
    struct request **reqs;    /* max_batch: the batch being run */
};

struct gj_batcher {
    gj_served_model *model;
    const onnx_model *onnx;
    size_t n_in, n_model_outputs;
    int batching;             /* 1: dimension 0 of every input and output is the batch */
    int symbolic;             /* 1: an input has a symbolic dimension besides the batch */
    int64_t (*want)[GJ_TENSOR_MAX_RANK];   /* [input]: each dim's size, -1 any (config and model) */
    int *want_rank;           /* [input]: the rank requests give (the config's under a reshape) */
    const struct gj_tensor_config **out_reshape;   /* [model output]: the config's, when it
                                                     * reshapes what the model gives; else NULL */
    unsigned char *out_served; /* [model output]: 1 when the config lists it (what Triton
                                * answers: the model's other outputs are not served) */
    size_t shape_len;         /* per-sample dims of all inputs together */
    size_t cache_cap;         /* sessions per executor */
    size_t in_floats, out_floats;   /* image models (gj_batcher_infer), else 0 */
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
    struct gj_stats_node *stats;

    pthread_mutex_t mu;
    pthread_cond_t cv_work;   /* executors: new work or stopping */
    pthread_cond_t cv_idle;   /* destroy: last caller left */
    struct request *head, *tail;
    size_t queued;            /* requests in the queue */
    size_t queued_async;      /* of them, gj_batcher_submit's (the executors time them out) */
    int callers;              /* inside gj_batcher_run, or submitted and not yet called back */
    int stopping;
    pthread_mutex_t join_mu;  /* one thread joins the executors */
    int joined;
    size_t n_sessions;
    int refs;                 /* registry references (gj_batcher_acquire) */
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void to_timespec(int64_t ns, struct timespec *ts)
{
    ts->tv_sec = (time_t)(ns / 1000000000);
    ts->tv_nsec = (long)(ns % 1000000000);
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

static const char *type_name(int elem)
{
    const char *t = onnx_elem_triton_name(elem);
    return t ? t : onnx_elem_name(elem);
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
    if (r->done)
        b->queued_async--;
    gj_stats_pending(b->stats, -1);
}

/* A queued request past its deadline leaves the queue. Called with b->mu held. */
static void time_out(gj_batcher *b, struct request *r, int64_t now)
{
    queue_remove(b, r);
    r->state = RQ_DONE;
    r->rc = GJ_BATCH_ETIMEDOUT;
    r->timing.queue_us = (now - r->t_enqueue) / 1000;
    gj_error_set(&r->error, "", "the request waited %.1f ms in the queue of model %s v%lld, over its "
                 "timeout: the server is overloaded", (double)(now - r->t_enqueue) / 1e6,
                 gj_served_model_name(b->model), (long long)gj_served_model_version(b->model));
    r->error.status = 503;
    gj_stats_fail(b->stats, now - r->t_enqueue);
}

/* r is DONE: its waiting caller is woken, or (gj_batcher_submit's) it joins *later, to be
 * called back once b->mu is dropped. Called with b->mu held. */
static void answered(struct request *r, struct request **later)
{
    if (!r->done) {
        pthread_cond_signal(&r->cv);
        return;
    }
    r->answered = *later;
    *later = r;
}

/* Calls back and frees the submitted requests of list (answered); they stop counting as
 * callers. Called without b->mu. */
static void call_back(gj_batcher *b, struct request *list)
{
    int n = 0;
    while (list) {
        struct request *r = list;
        list = r->answered;
        r->done(r->done_arg, r->rc, &r->timing, r->rc == GJ_BATCH_OK ? NULL : &r->error);
        free((struct async_request *)r);
        n++;
    }
    if (!n)
        return;
    pthread_mutex_lock(&b->mu);
    b->callers -= n;
    if (b->callers == 0 && b->stopping)
        pthread_cond_broadcast(&b->cv_idle);
    pthread_mutex_unlock(&b->mu);
}

/* Submitted requests past their deadline leave the queue into *later; *next: the earliest
 * deadline of those left (0: none). Called with b->mu held. */
static void expire_submitted(gj_batcher *b, int64_t now, struct request **later, int64_t *next)
{
    *next = 0;
    for (struct request *r = b->head, *nx; r && b->queued_async; r = nx) {
        nx = r->next;
        if (!r->done)
            continue;
        if (now >= r->deadline) {
            time_out(b, r, now);
            answered(r, later);
        } else if (!*next || r->deadline < *next) {
            *next = r->deadline;
        }
    }
}

static int is_preferred(const gj_batcher *b, size_t n)
{
    for (size_t i = 0; i < b->n_preferred; i++)
        if ((size_t)b->preferred[i] == n)
            return 1;
    return 0;
}

/* 1 when two requests' inputs have the same dims after the batch dimension. */
static int same_shape(const gj_batcher *b, const struct request *x, const struct request *y)
{
    for (size_t i = 0; i < b->n_in; i++) {
        const struct gj_tensor *a = x->in[i], *c = y->in[i];
        if (memcmp(a->dims + b->batching, c->dims + b->batching,
                   (size_t)(a->rank - b->batching) * sizeof a->dims[0]) != 0)
            return 0;
    }
    return 1;
}

/* How many requests from the head form the next batch now (0: none yet; *wake_at is then
 * when to look again, 0 for "when something arrives"). A request of another per-sample
 * shape than the head's ends the batch as a full queue would. Called with b->mu held. */
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
        if (cum + r->n > (size_t)b->max_batch || (r != b->head && !same_shape(b, b->head, r))) {
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
    int64_t due = b->head->t_enqueue + b->delay_us * 1000;
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

static void entry_free(gj_batcher *b, struct sess_entry *c)
{
    for (size_t i = 0; c->outs && i < b->n_model_outputs; i++)
        free(c->outs[i]);
    free(c->outs);
    free(c->shape);
    onnx_session_free(c->s);
    memset(c, 0, sizeof *c);
}

/* The per-sample dims of r's inputs, concatenated, into key (b->shape_len). */
static void shape_key(const gj_batcher *b, const struct request *r, int64_t *key)
{
    size_t off = 0;
    for (size_t i = 0; i < b->n_in; i++) {
        size_t d = (size_t)(r->in[i]->rank - b->batching);
        memcpy(key + off, r->in[i]->dims + b->batching, d * sizeof *key);
        off += d;
    }
}

/* The sizes of the model's symbolic dimensions besides the batch, from request r (what
 * onnx_session_options.input_shapes takes). *n set; the array is malloc'd (NULL when none). */
static struct onnx_io_desc *symbolic_shapes(const gj_batcher *b, const struct request *r, size_t *n)
{
    *n = 0;
    if (!b->symbolic)
        return NULL;
    struct onnx_io_desc *d = calloc(b->n_in, sizeof *d);
    for (size_t i = 0; d && i < b->n_in; i++) {
        const struct onnx_io_desc *mi = onnx_model_input(b->onnx, i);
        int any = 0;
        struct onnx_io_desc one = { .name = mi->name, .elem_type = mi->elem_type, .rank = mi->rank };
        for (int k = 0; k < mi->rank; k++) {
            int sym = k >= b->batching && mi->dims[k] < 0;
            one.dims[k] = sym ? r->in[i]->dims[k] : -1;
            any |= sym;
        }
        if (any)
            d[(*n)++] = one;
    }
    return d;
}

/* Each output of a batching model has the batch first: its rows are split among requests. */
static int check_batch_outputs(const gj_batcher *b, onnx_session *s, size_t n, struct gj_error *err)
{
    for (size_t i = 0; b->batching && i < b->n_model_outputs; i++) {
        const struct onnx_io_desc *o = onnx_session_output(s, i);
        if (o->rank < 1 || o->dims[0] != (int64_t)n) {
            char d[128];
            gj_dims_text(d, sizeof d, o->rank, o->dims, 0);
            return gj_error_set(err, "", "the model's output '%s' is %s for a batch of %zu: its "
                                "first dimension is not the batch (give the model max_batch_size "
                                "0)", o->name, d, n);
        }
    }
    return 0;
}

static onnx_session *new_session(struct executor *e, size_t n, const struct request *r,
                                 struct gj_error *err)
{
    gj_batcher *b = e->b;
    size_t n_shapes = 0;
    struct onnx_io_desc *shapes = symbolic_shapes(b, r, &n_shapes);
    if (b->symbolic && !shapes)
        return gj_error_set(err, "", "out of memory"), NULL;
    struct onnx_session_options opt = { .batch = b->batching ? (int)n : 0, .no_batch = !b->batching,
                                        .threads = b->threads,
                                        .backend = b->device >= 0 ? "cuda" : "cpu",
                                        .device = b->device >= 0 ? b->device : 0,
                                        .precision = b->precision,
                                        .cuda_graphs = b->device >= 0 && b->cuda_graphs,
                                        .input_shapes = shapes, .n_input_shapes = n_shapes };
    struct gj_error serr = { 0 };
    onnx_session *s = onnx_session_create(b->onnx, &opt, &serr);
    free(shapes);
    if (!s) {
        gj_error_set(err, "", "cannot create an inference session for batch size %zu: %s", n,
                     serr.message);
        return NULL;
    }
    if (check_batch_outputs(b, s, n, err)) {
        onnx_session_free(s);
        return NULL;
    }
    return s;
}

/* Frees the least recently used session when the cache is full. */
static void make_room(struct executor *e)
{
    gj_batcher *b = e->b;
    if (e->n_cache < b->cache_cap)
        return;
    size_t lru = 0;
    for (size_t i = 1; i < e->n_cache; i++)
        if (e->cache[i].used_at < e->cache[lru].used_at)
            lru = i;
    if (b->device >= 0)
        unreserve_session(b, e->cache[lru].dev);
    entry_free(b, &e->cache[lru]);
    e->cache[lru] = e->cache[--e->n_cache];
    pthread_mutex_lock(&b->mu);
    b->n_sessions--;
    pthread_mutex_unlock(&b->mu);
}

/* The session for n samples shaped as request r, created when absent. NULL with err. */
static struct sess_entry *session_for(struct executor *e, size_t n, const struct request *r,
                                      struct gj_error *err)
{
    gj_batcher *b = e->b;
    int64_t key[GJ_MODEL_MAX_TENSORS * GJ_TENSOR_MAX_RANK];
    shape_key(b, r, key);
    e->tick++;
    for (size_t i = 0; i < e->n_cache; i++) {
        struct sess_entry *c = &e->cache[i];
        if (c->n == n && memcmp(c->shape, key, b->shape_len * sizeof *key) == 0) {
            c->used_at = e->tick;
            return c;
        }
    }
    onnx_session *s = new_session(e, n, r, err);
    if (!s)
        return NULL;
    uint64_t dev = b->device >= 0 ? onnx_session_device_bytes(s) : 0;
    if (b->device >= 0 && reserve_session(b, dev, n, err)) {
        onnx_session_free(s);
        return NULL;
    }
    make_room(e);
    struct sess_entry c = { .n = n, .s = s, .dev = dev, .used_at = e->tick };
    c.shape = malloc(b->shape_len ? b->shape_len * sizeof *key : 1);
    c.outs = calloc(b->n_model_outputs, sizeof *c.outs);
    int ok = c.shape && c.outs;
    for (size_t i = 0; ok && i < b->n_model_outputs; i++) {
        size_t bytes = onnx_session_output_bytes(s, i);
        ok = (c.outs[i] = malloc(bytes ? bytes : 1)) != NULL;
    }
    if (!ok) {
        gj_error_set(err, "", "out of memory for the outputs of batch size %zu", n);
        if (b->device >= 0)
            unreserve_session(b, dev);
        entry_free(b, &c);
        return NULL;
    }
    memcpy(c.shape, key, b->shape_len * sizeof *key);
    e->cache[e->n_cache] = c;
    pthread_mutex_lock(&b->mu);
    b->n_sessions++;
    pthread_mutex_unlock(&b->mu);
    return &e->cache[e->n_cache++];
}

/* The batch's inputs: a lone request's own buffers, else gathered along dimension 0.
 * 0, or -1 with err (out of memory). */
static int gather_inputs(struct executor *e, struct request **reqs, size_t k, struct gj_error *err)
{
    gj_batcher *b = e->b;
    for (size_t i = 0; i < b->n_in; i++) {
        if (k == 1) {
            e->ins[i] = reqs[0]->in[i]->data;
            continue;
        }
        size_t total = 0;
        for (size_t j = 0; j < k; j++)
            total += reqs[j]->in[i]->bytes;
        if (total > e->in_cap[i]) {
            void *g = realloc(e->in_buf[i], total);
            if (!g)
                return gj_error_set(err, "", "out of memory gathering a batch of %zu requests", k);
            e->in_buf[i] = g;
            e->in_cap[i] = total;
        }
        size_t off = 0;
        for (size_t j = 0; j < k; j++) {
            if (reqs[j]->in[i]->bytes)
                memcpy((char *)e->in_buf[i] + off, reqs[j]->in[i]->data, reqs[j]->in[i]->bytes);
            off += reqs[j]->in[i]->bytes;
        }
        e->ins[i] = e->in_buf[i];
    }
    return 0;
}

/* A copy of bytes of STRING elements at src: one block, the onnx_string array first, then
 * the bytes they point to. NULL when out of memory. */
static void *copy_strings(const void *src, size_t bytes)
{
    const struct onnx_string *s = src;
    size_t count = bytes / sizeof *s, total = bytes;
    for (size_t i = 0; i < count; i++)
        total += s[i].len;
    char *block = malloc(total ? total : 1);
    if (!block)
        return NULL;
    struct onnx_string *d = (struct onnx_string *)(void *)block;
    char *p = block + bytes;
    for (size_t i = 0; i < count; i++) {
        if (s[i].len)
            memcpy(p, s[i].data, s[i].len);
        d[i].data = p;
        d[i].len = s[i].len;
        p += s[i].len;
    }
    return block;
}

/* Request r's rows (from sample `first`) of the outputs it asked for. 0, or -1 (out of
 * memory: nothing left allocated). */
static int split_outputs(const gj_batcher *b, const struct sess_entry *c, struct request *r,
                         size_t first)
{
    for (size_t j = 0; j < r->n_out; j++) {
        int oi = r->out_index[j];
        const struct onnx_io_desc *o = onnx_session_output(c->s, (size_t)oi);
        size_t all = onnx_session_output_bytes(c->s, (size_t)oi);
        size_t row = b->batching ? all / c->n : all;
        struct gj_tensor *t = &r->out[j];
        const char *src = (const char *)c->outs[oi] + first * row;
        size_t bytes = b->batching ? r->n * row : all;
        t->elem_type = o->elem_type;
        t->rank = o->rank;
        memcpy(t->dims, o->dims, sizeof t->dims);
        const struct gj_tensor_config *rs = b->out_reshape[oi];
        if (rs) {   /* the config's dims for what the model gives in its reshape */
            t->rank = rs->rank + b->batching;
            memcpy(t->dims + b->batching, rs->dims, (size_t)rs->rank * sizeof t->dims[0]);
        }
        if (b->batching)
            t->dims[0] = (int64_t)r->n;
        t->bytes = bytes;
        t->data = o->elem_type == ONNX_ELEM_STRING ? copy_strings(src, bytes) : malloc(bytes ? bytes : 1);
        if (!t->data) {
            gj_tensors_free(r->out, j);
            return -1;
        }
        if (o->elem_type != ONNX_ELEM_STRING && bytes)
            memcpy(t->data, src, bytes);
    }
    return 0;
}

void gj_tensors_free(struct gj_tensor *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++) {
        free(t[i].data);
        t[i].data = NULL;
    }
}

/* Answers the k requests of a batch (rc per request in ok[]), with the statistics and how
 * its session convolves (conv: onnx_session_convolutions, or NULL). */
static void finish_batch(gj_batcher *b, struct request **reqs, size_t k, size_t n, int ran,
                         const int64_t t[4], const struct gj_error *err, const int *ok, const char *conv)
{
    struct gj_stats_req st[k ? k : 1];
    int64_t done = now_ns();
    for (size_t i = 0; i < k; i++)
        st[i] = (struct gj_stats_req){ .ok = ok[i], .samples = reqs[i]->n,
                                       .queue_ns = reqs[i]->timing.queue_us * 1000,
                                       .total_ns = done - reqs[i]->t_enqueue };
    gj_stats_batch(b->stats, ran, n, t[1] - t[0], t[2] - t[1], t[3] - t[2], st, k);
    struct request *later = NULL;
    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < k; i++) {
        struct request *r = reqs[i];
        r->rc = ok[i] ? GJ_BATCH_OK : GJ_BATCH_EFAILED;
        if (!ok[i]) {
            r->error = *err;
            if (!r->error.status)
                r->error.status = 500;
        }
        r->timing.compute_us = (t[2] - t[1]) / 1000;
        r->timing.batch_size = (int)n;
        r->timing.convolutions = conv;
        r->state = RQ_DONE;
        answered(r, &later);
    }
    pthread_mutex_unlock(&b->mu);
    call_back(b, later);
}

static void run_batch(struct executor *e, struct request **reqs, size_t k, size_t n)
{
    gj_batcher *b = e->b;
    struct gj_error err = { 0 };
    int64_t t[4];
    int ok[k], ran = 0;
    memset(ok, 0, sizeof ok);
    t[0] = t[1] = t[2] = t[3] = now_ns();
    struct sess_entry *c = session_for(e, n, reqs[0], &err);
    if (c && gather_inputs(e, reqs, k, &err) == 0) {
        t[0] = t[1] = now_ns();   /* compute_input: the gathering, not the session's creation */
        struct gj_error rerr = { 0 };
        ran = onnx_session_run(c->s, e->ins, (void *const *)c->outs, &rerr) == 0;
        if (!ran)
            gj_error_set(&err, "", "inference failed: %s", rerr.message);
        t[2] = now_ns();
        size_t first = 0;
        for (size_t i = 0; ran && i < k; i++) {
            ok[i] = split_outputs(b, c, reqs[i], first) == 0;
            first += reqs[i]->n;
        }
        if (ran)   /* what a request whose outputs could not be copied is told */
            gj_error_set(&err, "", "out of memory for the outputs of a batch of %zu", n);
        t[3] = now_ns();
    }
    finish_batch(b, reqs, k, n, ran, t, &err, ok, c ? onnx_session_convolutions(c->s) : NULL);
}

static void *executor_main(void *arg)
{
    struct executor *e = arg;
    gj_batcher *b = e->b;
    struct request **reqs = e->reqs;
    pthread_mutex_lock(&b->mu);
    while (!b->stopping) {
        int64_t now = now_ns(), wake = 0, deadline = 0;
        if (b->queued_async) {
            struct request *late = NULL;
            expire_submitted(b, now, &late, &deadline);
            if (late) {
                pthread_mutex_unlock(&b->mu);
                call_back(b, late);
                pthread_mutex_lock(&b->mu);
                continue;
            }
        }
        size_t k = plan_batch(b, now, &wake);
        if (k == 0) {
            if (deadline && (!wake || deadline < wake))
                wake = deadline;
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
            r->timing.queue_us = (now - r->t_enqueue) / 1000;
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
    for (size_t i = 0; e->cache && i < e->n_cache; i++)
        entry_free(b, &e->cache[i]);
    for (size_t i = 0; e->in_buf && i < b->n_in; i++)
        free(e->in_buf[i]);
    free(e->cache);
    free(e->in_buf);
    free(e->in_cap);
    free(e->ins);
    free(e->reqs);
}

static void batcher_free(gj_batcher *b)
{
    for (int i = 0; b->exec && i < b->n_exec; i++)
        free_executor(b, &b->exec[i]);
    free(b->exec);
    free(b->want);
    free(b->want_rank);
    free(b->out_reshape);
    free(b->out_served);
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

/* What each input's dims may be: the model's, narrowed by the config's where it fixes a
 * size the model leaves open. The batch dimension stays -1 (checked on its own). */
static int plan_inputs(gj_batcher *b, const struct gj_model_config *cfg, struct gj_error *err)
{
    b->want = calloc(b->n_in ? b->n_in : 1, sizeof *b->want);
    b->want_rank = calloc(b->n_in ? b->n_in : 1, sizeof *b->want_rank);
    if (!b->want || !b->want_rank)
        return gj_error_set(err, "", "out of memory");
    for (size_t i = 0; i < b->n_in; i++) {
        const struct onnx_io_desc *mi = onnx_model_input(b->onnx, i);
        if (mi->rank < b->batching || mi->rank > GJ_TENSOR_MAX_RANK)
            return gj_error_set(err, "model", "model %s: input '%s' has rank %d, which cannot "
                                "have %s", cfg->name, mi->name, mi->rank,
                                b->batching ? "a batch dimension" : "more than 8 dimensions");
        const struct gj_tensor_config *tc = NULL;
        for (size_t j = 0; j < cfg->n_inputs; j++)
            if (strcmp(cfg->inputs[j].name, mi->name) == 0)
                tc = &cfg->inputs[j];
        b->want_rank[i] = mi->rank;
        for (int d = 0; d < mi->rank; d++) {
            int64_t w = d < b->batching ? -1 : mi->dims[d];
            int cd = d - b->batching;
            if (w < 0 && tc && cd >= 0 && cd < tc->rank && tc->rank == mi->rank - b->batching)
                w = tc->dims[cd];
            b->want[i][d] = w;
            b->symbolic |= d >= b->batching && mi->dims[d] < 0;
        }
        if (tc && tc->has_reshape) {   /* clients send the config's dims; the model reads its own */
            b->want_rank[i] = tc->rank + b->batching;
            for (int d = 0; d < tc->rank; d++)
                b->want[i][d + b->batching] = tc->dims[d];
        }
        b->shape_len += (size_t)(b->want_rank[i] - b->batching);
    }
    b->n_model_outputs = onnx_model_num_outputs(b->onnx);
    b->out_reshape = calloc(b->n_model_outputs ? b->n_model_outputs : 1, sizeof *b->out_reshape);
    if (!b->out_reshape)
        return gj_error_set(err, "", "out of memory");
    b->out_served = calloc(b->n_model_outputs ? b->n_model_outputs : 1, 1);
    if (!b->out_served)
        return gj_error_set(err, "", "out of memory");
    for (size_t i = 0; i < b->n_model_outputs; i++)
        for (size_t j = 0; j < cfg->n_output_tensors; j++)
            if (strcmp(cfg->outputs[j].name, onnx_model_output(b->onnx, i)->name) == 0) {
                b->out_served[i] = 1;
                b->out_reshape[i] = cfg->outputs[j].has_reshape ? &cfg->outputs[j] : NULL;
            }
    if (cfg->image_model) {
        b->in_floats = (size_t)(cfg->input_dims[0] * cfg->input_dims[1] * cfg->input_dims[2]);
        b->out_floats = (size_t)cfg->n_outputs;
    }
    return 0;
}

/* Batching, queue and instance settings: the options', else the config's, else the host's. */
static void take_settings(gj_batcher *b, const struct gj_model_config *cfg,
                          const struct gj_batcher_options *opt)
{
    b->batching = !cfg->no_batch;
    b->max_batch = cfg->max_batch_size > 0 && b->batching ? cfg->max_batch_size : 1;
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
                   : cfg->max_queue_size ? cfg->max_queue_size
                   : host.max_queue ? host.max_queue : GJ_BATCH_DEFAULT_MAX_QUEUE;
    b->default_timeout_us = opt->default_timeout_us > 0 ? opt->default_timeout_us
                            : cfg->queue_timeout_us > 0 ? cfg->queue_timeout_us
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
    b->cache_cap = (size_t)b->max_batch + SHAPE_SESSIONS;
}

static int start_executors(gj_batcher *b, struct gj_error *err)
{
    b->exec = calloc((size_t)b->n_exec, sizeof *b->exec);
    if (!b->exec)
        return gj_error_set(err, "", "out of memory for a batcher of batch size %d", b->max_batch);
    size_t n_in = b->n_in ? b->n_in : 1;
    for (int i = 0; i < b->n_exec; i++) {
        struct executor *e = &b->exec[i];
        e->b = b;
        e->cache = calloc(b->cache_cap, sizeof *e->cache);
        e->in_buf = calloc(n_in, sizeof *e->in_buf);
        e->in_cap = calloc(n_in, sizeof *e->in_cap);
        e->ins = calloc(n_in, sizeof *e->ins);
        e->reqs = calloc((size_t)b->max_batch, sizeof *e->reqs);
        if (!e->cache || !e->in_buf || !e->in_cap || !e->ins || !e->reqs)
            return gj_error_set(err, "", "out of memory for a batcher of batch size %d",
                                b->max_batch);
    }
    for (int i = 0; i < b->n_exec; i++) {
        if (pthread_create(&b->exec[i].thread, NULL, executor_main, &b->exec[i]))
            return gj_error_set(err, "", "cannot start the batcher's executor threads");
        b->exec[i].started = 1;
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
    gj_batcher *b = calloc(1, sizeof *b);
    if (!b)
        return gj_error_set(err, "", "out of memory"), NULL;
    b->onnx = om;
    b->n_in = onnx_model_num_inputs(om);
    take_settings(b, cfg, opt);
    if (pthread_mutex_init(&b->mu, NULL) || pthread_mutex_init(&b->join_mu, NULL) ||
        cond_init_mono(&b->cv_work) || cond_init_mono(&b->cv_idle)) {
        free(b);
        return gj_error_set(err, "", "cannot create the batcher's locks"), NULL;
    }
    b->model = gj_served_model_ref(m);
    if (plan_inputs(b, cfg, err) || (b->device >= 0 && reserve_model(b, no_room, err))) {
        batcher_free(b);
        return NULL;
    }
    b->stats = gj_stats_node_for(gj_served_model_name(m), gj_served_model_version(m));
    if (start_executors(b, err)) {
        gj_batcher_destroy(b);
        return NULL;
    }
    return b;
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
    struct request *later = NULL;
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
        gj_stats_fail(b->stats, now_ns() - r->t_enqueue);
        answered(r, &later);
    }
    pthread_cond_broadcast(&b->cv_work);
    pthread_mutex_unlock(&b->mu);
    call_back(b, later);
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

static int input_index(const gj_batcher *b, const char *name)
{
    for (size_t i = 0; i < b->n_in; i++)
        if (strcmp(onnx_model_input(b->onnx, i)->name, name) == 0)
            return (int)i;
    return -1;
}

/* The model output of that name when the config serves it, else -1. */
static int output_index(const gj_batcher *b, const char *name)
{
    for (size_t i = 0; i < b->n_model_outputs; i++)
        if (b->out_served[i] && strcmp(onnx_model_output(b->onnx, i)->name, name) == 0)
            return (int)i;
    return -1;
}

static void served_names(const gj_batcher *b, char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < b->n_model_outputs && off < n; i++)
        if (b->out_served[i])
            off += (size_t)snprintf(buf + off, n - off, "%s%s", off ? ", " : "",
                                    onnx_model_output(b->onnx, i)->name);
}

static int status_400(struct gj_error *err)
{
    if (err)
        err->status = 400;
    return -1;
}

/* Sets a 400 error; -1. */
#define BAD(...) (gj_error_set(err, "", __VA_ARGS__), status_400(err))

/* The shape and size of input i: its dims against what the model takes; *count its elements. */
static int check_shape(const gj_batcher *b, size_t i, const struct gj_tensor *t, int64_t *count,
                       struct gj_error *err)
{
    char got[160], want[160];
    gj_dims_text(got, sizeof got, t->rank < 0 || t->rank > 8 ? 0 : t->rank, t->dims, 0);
    gj_dims_text(want, sizeof want, b->want_rank[i], b->want[i], 0);
    if (t->rank != b->want_rank[i])
        return BAD("input '%s' has shape %s but the model takes %s%s (-1: any size)", t->name, got,
                   want, b->batching ? ", the batch first" : "");
    *count = 1;
    for (int d = 0; d < t->rank; d++) {
        int64_t w = b->want[i][d];
        if (t->dims[d] < 0 || (w >= 0 && t->dims[d] != w) || (d == 0 && b->batching &&
                                                             (t->dims[0] < 1 || t->dims[0] > b->max_batch)))
            return BAD("input '%s' has shape %s but the model takes %s%s", t->name, got, want,
                       d == 0 && b->batching ? " with a batch of 1 to max_batch_size" : "");
        if (t->dims[d] > MAX_ELEMS || (*count *= t->dims[d]) > MAX_ELEMS)
            return BAD("input '%s' (%s) is too large", t->name, got);
    }
    if (b->batching && b->max_batch < t->dims[0])
        return BAD("input '%s' has %lld samples, more than max_batch_size %d", t->name,
                   (long long)t->dims[0], b->max_batch);
    return 0;
}

/* The values a run checks, checked here so that a bad request never fails a batch. */
static int check_values(const struct gj_tensor *t, int64_t count, struct gj_error *err)
{
    size_t want = (size_t)count * onnx_elem_size(t->elem_type);
    if (t->bytes != want)
        return BAD("input '%s' has %zu bytes but its shape and type take %zu", t->name, t->bytes, want);
    if (want && !t->data)
        return BAD("input '%s' has no data", t->name);
    if (t->elem_type == ONNX_ELEM_BOOL)
        for (int64_t k = 0; k < count; k++)
            if (((const uint8_t *)t->data)[k] > 1)
                return BAD("input '%s': element %lld of a BOOL tensor is %u, not 0 or 1", t->name,
                           (long long)k, ((const uint8_t *)t->data)[k]);
    if (t->elem_type == ONNX_ELEM_STRING)
        for (int64_t k = 0; k < count; k++)
            if (((const struct onnx_string *)t->data)[k].len &&
                !((const struct onnx_string *)t->data)[k].data)
                return BAD("input '%s': element %lld of a BYTES tensor has no data", t->name,
                           (long long)k);
    return 0;
}

/* Every model input once, each of its type, shape and size; the requested outputs known and
 * once each. Fills r->in (by model input), r->n and out_index. 0, or -1 with a 400 error. */
static int check_request(const gj_batcher *b, const struct gj_tensor *in, size_t n_in,
                         const struct gj_tensor *out, size_t n_out, struct request *r,
                         int *out_index, struct gj_error *err)
{
    char names[512];
    const char *model = gj_served_model_name(b->model);
    for (size_t j = 0; j < n_in; j++) {
        int i = input_index(b, in[j].name);
        if (i < 0) {
            gj_model_io_names(names, sizeof names, b->onnx, 0);
            return BAD("model %s has no input '%.200s'; its inputs are: %s", model, in[j].name, names);
        }
        if (r->in[i])
            return BAD("input '%.200s' is given twice", in[j].name);
        const struct onnx_io_desc *mi = onnx_model_input(b->onnx, (size_t)i);
        if (in[j].elem_type != mi->elem_type)
            return BAD("input '%s' is %s but the model takes %s", mi->name, type_name(in[j].elem_type),
                       type_name(mi->elem_type));
        int64_t count;
        if (check_shape(b, (size_t)i, &in[j], &count, err) || check_values(&in[j], count, err))
            return -1;
        if (b->batching && j == 0)
            r->n = (size_t)in[j].dims[0];
        if (b->batching && (size_t)in[j].dims[0] != r->n)
            return BAD("input '%s' has %lld samples but input '%s' has %zu: every input has the same "
                       "batch size", mi->name, (long long)in[j].dims[0], in[0].name, r->n);
        r->in[i] = &in[j];
    }
    for (size_t i = 0; i < b->n_in; i++)
        if (!r->in[i]) {
            gj_model_io_names(names, sizeof names, b->onnx, 0);
            return BAD("input '%s' is missing (model %s takes %s)", onnx_model_input(b->onnx, i)->name,
                       model, names);
        }
    if (!b->batching)
        r->n = 1;
    for (size_t j = 0; j < n_out; j++) {
        out_index[j] = output_index(b, out[j].name);
        if (out_index[j] < 0) {
            served_names(b, names, sizeof names);
            return BAD("model %s has no output '%.200s'; its outputs are: %s", model, out[j].name, names);
        }
        for (size_t k = 0; k < j; k++)
            if (out_index[k] == out_index[j])
                return BAD("output '%.200s' is requested twice", out[j].name);
    }
    return 0;
}

/* How often a queued request asks its caller whether it still wants the answer. */
#define CANCEL_POLL_NS 100000000LL

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
    r->timing.queue_us = (now_ns() - r->t_enqueue) / 1000;
    gj_error_set(&r->error, "", "the request was cancelled while it waited in the queue of model %s v%lld",
                 gj_served_model_name(b->model), (long long)gj_served_model_version(b->model));
    r->error.status = 499;
    gj_stats_fail(b->stats, now_ns() - r->t_enqueue);
    return 1;
}

/* Refuses a request at the door (shut down, queue full): rc with err. Called with b->mu
 * held, which it releases. */
static int refuse(gj_batcher *b, int rc, struct gj_error *err)
{
    size_t q = b->queued;
    pthread_mutex_unlock(&b->mu);
    gj_stats_fail(b->stats, 0);
    const char *name = gj_served_model_name(b->model);
    long long v = (long long)gj_served_model_version(b->model);
    if (rc == GJ_BATCH_ESHUTDOWN)
        gj_error_set(err, "", "model %s v%lld is being unloaded", name, v);
    else
        gj_error_set(err, "", "the queue of model %s v%lld is full (%zu requests waiting): retry "
                     "later", name, v, q);
    if (err)
        err->status = rc == GJ_BATCH_ESHUTDOWN ? 503 : 429;
    return rc;
}

/* Queues r (a caller from now until it is answered). Called with b->mu held. */
static void enqueue(gj_batcher *b, struct request *r, int64_t timeout_us)
{
    b->callers++;
    r->t_enqueue = now_ns();
    r->deadline = r->t_enqueue + (timeout_us > 0 ? timeout_us : b->default_timeout_us) * 1000;
    r->state = RQ_QUEUED;
    r->prev = b->tail;
    if (b->tail)
        b->tail->next = r;
    else
        b->head = r;
    b->tail = r;
    b->queued++;
    if (r->done)
        b->queued_async++;
    gj_stats_pending(b->stats, +1);
    pthread_cond_signal(&b->cv_work);
}

/* Queues r and waits until it is answered. Called with b->mu held; returns without it. */
static void enqueue_and_wait(gj_batcher *b, struct request *r, int64_t timeout_us,
                             int (*cancelled)(void *arg), void *arg)
{
    enqueue(b, r, timeout_us);
    while (r->state != RQ_DONE) {
        if (r->state != RQ_QUEUED) {
            pthread_cond_wait(&r->cv, &b->mu);
            continue;
        }
        int64_t now = now_ns();
        if (now >= r->deadline) {
            time_out(b, r, now);
            break;
        }
        int64_t until = r->deadline;
        if (cancelled && now + CANCEL_POLL_NS < until)
            until = now + CANCEL_POLL_NS;
        struct timespec ts;
        to_timespec(until, &ts);
        pthread_cond_timedwait(&r->cv, &b->mu, &ts);
        if (cancelled && r->state == RQ_QUEUED && leave_if_cancelled(b, r, cancelled, arg))
            break;
    }
    b->callers--;
    if (b->callers == 0 && b->stopping)
        pthread_cond_broadcast(&b->cv_idle);
    pthread_mutex_unlock(&b->mu);
}

/* r (zeroed, its in and out_index arrays GJ_MODEL_MAX_TENSORS long) made of the caller's
 * tensors, checked whole. 0, or GJ_BATCH_EINVAL with err (counted as a failure). */
static int make_request(gj_batcher *b, const struct gj_tensor *in, size_t n_in, struct gj_tensor *out,
                        size_t n_out, struct request *r, int *out_index, struct gj_error *err)
{
    for (size_t j = 0; out && j < n_out; j++)
        out[j].data = NULL;
    if (!b || (n_in && !in) || (n_out && !out) || n_out > GJ_MODEL_MAX_TENSORS) {
        if (b)
            gj_stats_fail(b->stats, 0);
        return BAD("bad request: no tensors or more than %d outputs", GJ_MODEL_MAX_TENSORS),
               GJ_BATCH_EINVAL;
    }
    r->out = out;
    r->n_out = n_out;
    r->out_index = out_index;
    if (b->n_in > GJ_MODEL_MAX_TENSORS || n_in > GJ_MODEL_MAX_TENSORS) {
        gj_stats_fail(b->stats, 0);
        return BAD("more than %d inputs", GJ_MODEL_MAX_TENSORS), GJ_BATCH_EINVAL;
    }
    if (check_request(b, in, n_in, out, n_out, r, out_index, err)) {
        gj_stats_fail(b->stats, 0);
        return GJ_BATCH_EINVAL;
    }
    return 0;
}

int gj_batcher_submit(gj_batcher *b, const struct gj_tensor *in, size_t n_in, struct gj_tensor *out,
                      size_t n_out, int64_t timeout_us, gj_batch_done_fn done, void *arg,
                      struct gj_error *err)
{
    struct async_request *a = calloc(1, sizeof *a);
    if (!a) {
        gj_error_set(err, "", "out of memory queueing the request");
        if (err)
            err->status = 500;
        return GJ_BATCH_EFAILED;
    }
    a->r.in = a->by_input;
    int rc = make_request(b, in, n_in, out, n_out, &a->r, a->out_index, err);
    if (rc) {
        free(a);
        return rc;
    }
    a->r.done = done;
    a->r.done_arg = arg;
    pthread_mutex_lock(&b->mu);
    rc = b->stopping ? GJ_BATCH_ESHUTDOWN : b->queued >= b->max_queue ? GJ_BATCH_EFULL : 0;
    if (rc) {
        rc = refuse(b, rc, err);
        free(a);
        return rc;
    }
    enqueue(b, &a->r, timeout_us);
    pthread_mutex_unlock(&b->mu);
    return GJ_BATCH_OK;
}

int gj_batcher_run_cancellable(gj_batcher *b, const struct gj_tensor *in, size_t n_in,
                               struct gj_tensor *out, size_t n_out, int64_t timeout_us,
                               struct gj_batch_timing *timing, struct gj_error *err,
                               int (*cancelled)(void *arg), void *arg)
{
    if (timing)
        memset(timing, 0, sizeof *timing);
    struct request r = { 0 };
    const struct gj_tensor *by_input[GJ_MODEL_MAX_TENSORS] = { 0 };
    int out_index[GJ_MODEL_MAX_TENSORS];
    r.in = by_input;
    int rc = make_request(b, in, n_in, out, n_out, &r, out_index, err);
    if (rc)
        return rc;
    if (cond_init_mono(&r.cv)) {
        gj_error_set(err, "", "cannot create a condition variable");
        if (err)
            err->status = 500;
        return GJ_BATCH_EFAILED;
    }
    pthread_mutex_lock(&b->mu);
    rc = b->stopping ? GJ_BATCH_ESHUTDOWN : b->queued >= b->max_queue ? GJ_BATCH_EFULL : 0;
    if (rc) {
        rc = refuse(b, rc, err);
        pthread_cond_destroy(&r.cv);
        return rc;
    }
    enqueue_and_wait(b, &r, timeout_us, cancelled, arg);
    pthread_cond_destroy(&r.cv);
    if (timing)
        *timing = r.timing;
    if (r.rc != GJ_BATCH_OK && err)
        *err = r.error;
    return r.rc;
}

int gj_batcher_run(gj_batcher *b, const struct gj_tensor *in, size_t n_in, struct gj_tensor *out,
                   size_t n_out, int64_t timeout_us, struct gj_batch_timing *timing,
                   struct gj_error *err)
{
    return gj_batcher_run_cancellable(b, in, n_in, out, n_out, timeout_us, timing, err, NULL, NULL);
}

int gj_batcher_infer(gj_batcher *b, const float *input, size_t n_samples, float *output,
                     int64_t timeout_us, struct gj_batch_timing *timing, struct gj_error *err)
{
    return gj_batcher_infer_cancellable(b, input, n_samples, output, timeout_us, timing, err, NULL, NULL);
}

int gj_batcher_infer_cancellable(gj_batcher *b, const float *input, size_t n_samples, float *output,
                                 int64_t timeout_us, struct gj_batch_timing *timing, struct gj_error *err,
                                 int (*cancelled)(void *arg), void *arg)
{
    if (timing)
        memset(timing, 0, sizeof *timing);
    const struct gj_model_config *cfg = b ? gj_served_model_config(b->model) : NULL;
    if (!b || !cfg->image_model || !input || !output || n_samples < 1 ||
        n_samples > (size_t)b->max_batch) {
        if (b)
            gj_stats_fail(b->stats, 0);
        if (b && !cfg->image_model)
            return BAD("model %s is not an image model, which `infer` jobs need: %s", cfg->name,
                       cfg->not_image), GJ_BATCH_EINVAL;
        return BAD("bad request: %zu samples (1 to %d)", n_samples, b ? b->max_batch : 0),
               GJ_BATCH_EINVAL;
    }
    struct gj_tensor in = { .elem_type = ONNX_ELEM_FLOAT, .rank = 4,
                            .dims = { (int64_t)n_samples, cfg->input_dims[0], cfg->input_dims[1],
                                      cfg->input_dims[2] },
                            .data = (void *)input, .bytes = n_samples * b->in_floats * sizeof(float) };
    struct gj_tensor out = { 0 };
    snprintf(in.name, sizeof in.name, "%s", cfg->input_name);
    snprintf(out.name, sizeof out.name, "%s", cfg->output_name);
    int rc = gj_batcher_run_cancellable(b, &in, 1, &out, 1, timeout_us, timing, err, cancelled, arg);
    if (rc != GJ_BATCH_OK)
        return rc;
    size_t want = n_samples * b->out_floats * sizeof(float);
    if (out.bytes != want || out.elem_type != ONNX_ELEM_FLOAT) {
        gj_tensors_free(&out, 1);
        gj_error_set(err, "", "the model's output '%s' has %zu bytes, not %zu", cfg->output_name,
                     out.bytes, want);
        if (err)
            err->status = 500;
        return GJ_BATCH_EFAILED;
    }
    memcpy(output, out.data, want);
    gj_tensors_free(&out, 1);
    return GJ_BATCH_OK;
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

int gj_batcher_threads(const gj_batcher *b)
{
    return b->threads;
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
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN) - (host.reserved_cpus > 0 ? host.reserved_cpus : 0);
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

/* 1 when every tensor of the config is of a type the CUDA backend computes or moves
 * (onnx_model.h: FLOAT, INT64, BOOL and 1-, 4- and 8-byte moves; not STRING, the 2-byte types
 * or DOUBLE arithmetic). */
static int cuda_types(const struct gj_model_config *cfg)
{
    for (size_t i = 0; i < cfg->n_inputs + cfg->n_output_tensors; i++) {
        int t = i < cfg->n_inputs ? cfg->inputs[i].elem_type : cfg->outputs[i - cfg->n_inputs].elem_type;
        if (t != ONNX_ELEM_FLOAT && t != ONNX_ELEM_INT64 && t != ONNX_ELEM_INT32 &&
            t != ONNX_ELEM_BOOL && t != ONNX_ELEM_UINT8 && t != ONNX_ELEM_INT8)
            return 0;
    }
    return 1;
}

int gj_model_uses_gpu(const struct gj_model_config *cfg)
{
    if (cfg->instance_kind != GJ_INSTANCE_AUTO)
        return cfg->instance_kind == GJ_INSTANCE_GPU;
    if (!cuda_types(cfg))
        return 0;   /* KIND_AUTO: the CPU runs every type */
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
