/*
 * batch_stats.c — statistics of the batchers per model name and version, named as Triton's
 * (see batcher.h and batch_stats.h). One mutex guards every node.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "infer/serving/batch_stats.h"
#include "infer/serving/batcher.h"

struct gj_stats_node {
    struct gj_batch_stats s;
    struct gj_batch_size_stats *sizes;   /* ascending batch_size */
    size_t n_sizes, cap_sizes;
    struct gj_stats_node *next;
};

const double gj_latency_bounds[GJ_LATENCY_BUCKETS] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                       0.25,  0.5,    1,     2.5,  5,     10,  30 };

static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gj_stats_node *stats_head;

struct gj_stats_node *gj_stats_node_for(const char *model, int64_t version)
{
    pthread_mutex_lock(&stats_mu);
    struct gj_stats_node *n = stats_head;
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

static uint64_t pos(int64_t v)
{
    return v > 0 ? (uint64_t)v : 0;
}

static void add(struct gj_stat_duration *d, int64_t ns)
{
    d->count++;
    d->ns += pos(ns);
}

void gj_stats_fail(struct gj_stats_node *n, int64_t waited_ns)
{
    if (!n)
        return;
    pthread_mutex_lock(&stats_mu);
    n->s.request_failure++;
    add(&n->s.fail, waited_ns);
    pthread_mutex_unlock(&stats_mu);
}

void gj_stats_pending(struct gj_stats_node *n, int delta)
{
    if (!n)
        return;
    pthread_mutex_lock(&stats_mu);
    if (delta > 0)
        n->s.pending_request_count++;
    else if (n->s.pending_request_count > 0)
        n->s.pending_request_count--;
    pthread_mutex_unlock(&stats_mu);
}

/* The entry of a batch size, inserted in order when absent; NULL when out of memory. */
static struct gj_batch_size_stats *size_entry(struct gj_stats_node *n, int batch_size)
{
    size_t at = 0;
    while (at < n->n_sizes && n->sizes[at].batch_size < batch_size)
        at++;
    if (at < n->n_sizes && n->sizes[at].batch_size == batch_size)
        return &n->sizes[at];
    if (n->n_sizes == n->cap_sizes) {
        size_t cap = n->cap_sizes ? n->cap_sizes * 2 : 8;
        struct gj_batch_size_stats *g = realloc(n->sizes, cap * sizeof *g);
        if (!g)
            return NULL;
        n->sizes = g;
        n->cap_sizes = cap;
    }
    memmove(&n->sizes[at + 1], &n->sizes[at], (n->n_sizes - at) * sizeof *n->sizes);
    n->n_sizes++;
    memset(&n->sizes[at], 0, sizeof n->sizes[at]);
    n->sizes[at].batch_size = batch_size;
    return &n->sizes[at];
}

static void count_latency(struct gj_batch_stats *s, int64_t ns)
{
    double secs = (double)pos(ns) / 1e9;
    for (size_t b = 0; b < GJ_LATENCY_BUCKETS; b++)
        if (secs <= gj_latency_bounds[b])
            s->success_le[b]++;
}

static uint64_t epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void gj_stats_batch(struct gj_stats_node *n, int ran, size_t batch_size, int64_t input_ns,
                    int64_t infer_ns, int64_t output_ns, const struct gj_stats_req *reqs, size_t k)
{
    if (!n)
        return;
    uint64_t now = epoch_ms();
    pthread_mutex_lock(&stats_mu);
    struct gj_batch_stats *s = &n->s;
    if (ran) {
        s->exec_count++;
        s->last_inference_ms = now;
        struct gj_batch_size_stats *bs = size_entry(n, (int)batch_size);
        if (bs) {
            add(&bs->compute_input, input_ns);
            add(&bs->compute_infer, infer_ns);
            add(&bs->compute_output, output_ns);
        }
    }
    for (size_t i = 0; i < k; i++) {
        s->queue_duration_us += pos(reqs[i].queue_ns) / 1000u;
        if (!reqs[i].ok) {
            s->request_failure++;
            add(&s->fail, reqs[i].total_ns);
            continue;
        }
        s->request_success++;
        s->inference_count += reqs[i].samples;
        s->compute_infer_duration_us += pos(infer_ns) / 1000u;
        add(&s->success, reqs[i].total_ns);
        count_latency(s, reqs[i].total_ns);
        add(&s->queue, reqs[i].queue_ns);
        add(&s->compute_input, input_ns);
        add(&s->compute_infer, infer_ns);
        add(&s->compute_output, output_ns);
    }
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
    for (struct gj_stats_node *s = stats_head; s; s = s->next) {
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
    for (struct gj_stats_node *s = stats_head; s; s = s->next)
        if (s->s.version == version && strcmp(s->s.model, model) == 0) {
            *out = s->s;
            rc = 0;
            break;
        }
    pthread_mutex_unlock(&stats_mu);
    return rc;
}

size_t gj_batch_stats_batches(const char *model, int64_t version, struct gj_batch_size_stats *out,
                              size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&stats_mu);
    for (struct gj_stats_node *s = stats_head; s; s = s->next)
        if (s->s.version == version && strcmp(s->s.model, model) == 0) {
            n = s->n_sizes;
            for (size_t i = 0; i < n && i < cap; i++)
                out[i] = s->sizes[i];
            break;
        }
    pthread_mutex_unlock(&stats_mu);
    return n;
}
