/*
 * onnx_pool.c — see onnx_pool.h.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "infer/onnx/onnx_pool.h"

struct onnx_pool {
    int threads;
    pthread_t *tid;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    uint64_t generation;  /* written under mu, atomically: workers spinning read it without */
    int stop;
    long spin_ns;         /* how long a worker watches for the next job before it sleeps */
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

/* Kernels come back to back: a worker that watches for the next job a few microseconds
 * (with pause) joins it at once, where a sleeping one is woken through the kernel, which on
 * a VM can take longer than a small kernel; the same for the caller waiting for the
 * workers' end of its job (seen UINT64_MAX). Off unless GJ_ONNX_SPIN_US is set: with 20 us,
 * DenseNet-121 at batch 1 (~300 jobs per image) went from a median of 35.6 to 27-28 ms at
 * load average 1.5 for the same CPU per image, but the demo model (tiny jobs) from 0.36-0.40
 * to 0.5-0.6 ms at load average 4-6, even with the watch bounded by the job's own time
 * (BENCH_NOTES.md). */
static long ns_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/* limit: at most spin_ns, and no longer than the job just done took (work_ns): where jobs
 * are tiny (the demo model's), watching would cost more CPU than the work, and on a loaded
 * machine that CPU is taken from the work (measured: median 0.36 -> 0.6 ms). */
static void spin_for_job(struct onnx_pool *p, uint64_t seen, long work_ns)
{
    long limit = work_ns < p->spin_ns ? work_ns : p->spin_ns;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 0;; i++) {
        if (seen == UINT64_MAX ? __atomic_load_n(&p->active, __ATOMIC_ACQUIRE) == 0
                               : __atomic_load_n(&p->generation, __ATOMIC_ACQUIRE) != seen ||
                                     __atomic_load_n(&p->stop, __ATOMIC_ACQUIRE))
            return;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if (i % 16 == 0 && ns_since(&t0) > limit)
            return;
    }
}

static void *worker(void *arg)
{
    struct onnx_pool *p = arg;
    uint64_t seen = 0;
    long work_ns = 0;   /* how long this worker's part of the last job took */
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (work_ns > 0 && !p->stop && p->generation == seen) {
            pthread_mutex_unlock(&p->mu);
            spin_for_job(p, seen, work_ns);
            pthread_mutex_lock(&p->mu);
        }
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        run_chunks(p);
        work_ns = p->spin_ns > 0 ? ns_since(&t0) : 0;
        pthread_mutex_lock(&p->mu);
        if (__atomic_sub_fetch(&p->active, 1, __ATOMIC_RELEASE) == 0)
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
    const char *spin = getenv("GJ_ONNX_SPIN_US");   /* unset or 0: sleep at once (see spin_for_job) */
    p->spin_ns = (spin && *spin ? atol(spin) : 0) * 1000L;
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
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
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
    __atomic_store_n(&p->active, p->n_started, __ATOMIC_RELEASE);
    __atomic_store_n(&p->generation, p->generation + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    run_chunks(p);
    if (p->spin_ns > 0)   /* here: the caller watching for the workers' end */
        spin_for_job(p, UINT64_MAX, ns_since(&t0));
    pthread_mutex_lock(&p->mu);
    while (p->active > 0)
        pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
