/*
 * onnx_pool.c — see onnx_pool.h.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "infer/onnx/onnx_pool.h"

struct onnx_pool {
    int threads;
    pthread_t *tid;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    uint64_t generation;
    int stop;
    /* the current job */
    onnx_task_fn fn;
    void *ctx;
    int64_t n, chunk;
    atomic_llong next;
    int active;           /* workers still inside the current job */
};

static void run_chunks(struct onnx_pool *p)
{
    for (;;) {
        int64_t b = atomic_fetch_add(&p->next, p->chunk);
        if (b >= p->n)
            break;
        int64_t e = b + p->chunk < p->n ? b + p->chunk : p->n;
        p->fn(p->ctx, b, e);
    }
}

static void *worker(void *arg)
{
    struct onnx_pool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_chunks(p);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0)
            pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct onnx_pool *onnx_pool_create(int threads)
{
    struct onnx_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (threads < 1)
        threads = 1;
    if (threads > 256)
        threads = 256;
    int mu = pthread_mutex_init(&p->mu, NULL) == 0;
    int cw = pthread_cond_init(&p->cv_work, NULL) == 0;
    int cd = pthread_cond_init(&p->cv_done, NULL) == 0;
    if (!mu || !cw || !cd) {
        if (mu)
            pthread_mutex_destroy(&p->mu);
        if (cw)
            pthread_cond_destroy(&p->cv_work);
        if (cd)
            pthread_cond_destroy(&p->cv_done);
        free(p);
        return NULL;
    }
    atomic_init(&p->next, 0);
    if (threads > 1) {
        p->tid = calloc((size_t)threads - 1, sizeof *p->tid);
        if (!p->tid) {
            onnx_pool_free(p);
            return NULL;
        }
        for (int i = 0; i < threads - 1; i++) {
            if (pthread_create(&p->tid[i], NULL, worker, p) != 0)
                break;
            p->n_started++;
        }
    }
    p->threads = p->n_started + 1;
    return p;
}

void onnx_pool_free(struct onnx_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_started; i++)
        pthread_join(p->tid[i], NULL);
    free(p->tid);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    free(p);
}

int onnx_pool_threads(const struct onnx_pool *p)
{
    return p ? p->threads : 1;
}

void onnx_pool_for(struct onnx_pool *p, int64_t n, int64_t grain, onnx_task_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (!p || p->n_started == 0 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    int64_t chunk = (n + 4 * p->threads - 1) / (4 * p->threads);
    if (chunk < grain)
        chunk = grain;
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    atomic_store(&p->next, 0);
    p->active = p->n_started;
    p->generation++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p);
    pthread_mutex_lock(&p->mu);
    while (p->active > 0)
        pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
