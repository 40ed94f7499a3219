/*
 * placement.c — choosing the device for a job (ARCHITECTURE.md: a job's life, seed 000).
 *
 * least-loaded is load-aware: among the GPUs that can take the job now (a free
 * slot and enough free memory) it picks the fewest running tasks, then the most
 * free memory, then the lowest index. round-robin and random are load-oblivious,
 * as the policies seed 000 compares them against: they choose the GPU first (the
 * next one in turn, or one drawn at random among those the job fits in total)
 * and the job waits for that GPU when it is busy.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "service/base/log.h"
#include "service/jobs/placement.h"

static uint64_t xorshift64(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

void gj_placement_init(struct gj_placement *p, enum gj_placement_policy policy, int n_gpus,
                       const uint64_t *gpu_total_bytes, int slots_per_gpu, int cpu_slots,
                       uint64_t seed)
{
    memset(p, 0, sizeof *p);
    int rc = pthread_mutex_init(&p->lock, NULL);
    if (rc)
        gj_log_error("placement", "pthread_mutex_init: %s", strerror(rc));
    pthread_condattr_t attr;
    rc = pthread_condattr_init(&attr);
    if (rc == 0) {
        rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        if (rc == 0)
            rc = pthread_cond_init(&p->freed, &attr);
        pthread_condattr_destroy(&attr);
    }
    if (rc)
        gj_log_error("placement", "pthread_cond_init: %s", strerror(rc));
    p->policy = policy;
    if (n_gpus < 0)
        n_gpus = 0;
    if (n_gpus > GJ_PLACE_MAX_GPUS) {
        gj_log_warn("placement", "%d GPUs; using the first %d", n_gpus, GJ_PLACE_MAX_GPUS);
        n_gpus = GJ_PLACE_MAX_GPUS;
    }
    p->n_gpus = n_gpus;
    for (int i = 0; i < n_gpus; i++) {
        p->gpus[i].index = i;
        p->gpus[i].total_bytes = gpu_total_bytes ? gpu_total_bytes[i] : 0;
        p->gpus[i].slots = slots_per_gpu > 0 ? slots_per_gpu : 0;
    }
    p->cpu_slots = cpu_slots > 0 ? cpu_slots : 0;
    p->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
}

void gj_placement_set_host(struct gj_placement *p, uint64_t usable_bytes)
{
    pthread_mutex_lock(&p->lock);
    p->host_bytes = usable_bytes;
    pthread_mutex_unlock(&p->lock);
}

void gj_placement_destroy(struct gj_placement *p)
{
    pthread_cond_destroy(&p->freed);
    pthread_mutex_destroy(&p->lock);
}

static uint64_t gpu_free_bytes(const struct gj_gpu_slotinfo *g)
{
    return g->total_bytes > g->reserved_bytes ? g->total_bytes - g->reserved_bytes : 0;
}

/* The job can run there now. */
static int gpu_can_take(const struct gj_gpu_slotinfo *g, uint64_t bytes)
{
    return g->running < g->slots && gpu_free_bytes(g) >= bytes;
}

/* The job could ever run there. */
static int gpu_fits(const struct gj_gpu_slotinfo *g, uint64_t bytes)
{
    return g->slots > 0 && g->total_bytes >= bytes;
}

static void take_gpu(struct gj_placement *p, int i, uint64_t bytes, int *device)
{
    p->gpus[i].running++;
    p->gpus[i].reserved_bytes += bytes;
    *device = p->gpus[i].index;
}

static enum gj_place_outcome place_cpu(struct gj_placement *p, int *device)
{
    if (p->cpu_slots == 0)
        return GJ_PLACE_NEVER;
    if (p->cpu_running >= p->cpu_slots)
        return GJ_PLACE_WAIT;
    p->cpu_running++;
    *device = -1;
    return GJ_PLACED_CPU;
}

/* Picks a GPU by policy: its index, -1 for "wait", -2 for "fits none". */
static int pick_gpu(struct gj_placement *p, uint64_t bytes)
{
    int fitting = 0;
    for (int i = 0; i < p->n_gpus; i++)
        fitting += gpu_fits(&p->gpus[i], bytes);
    if (fitting == 0)
        return -2;

    switch (p->policy) {
    case GJ_PLACE_ROUND_ROBIN: {
        /* The next GPU in turn that the job fits at all; wait for it if busy. */
        for (int k = 0; k < p->n_gpus; k++) {
            int i = (int)((p->rr_next + (unsigned)k) % (unsigned)p->n_gpus);
            if (!gpu_fits(&p->gpus[i], bytes))
                continue;
            p->rr_next = (unsigned)i;
            if (!gpu_can_take(&p->gpus[i], bytes))
                return -1;
            p->rr_next = (unsigned)(i + 1) % (unsigned)p->n_gpus;
            return i;
        }
        return -2;
    }
    case GJ_PLACE_RANDOM: {
        /* One draw among the GPUs the job fits at all; wait if that one is busy. */
        int k = (int)(xorshift64(&p->rng) % (uint64_t)fitting);
        for (int i = 0; i < p->n_gpus; i++) {
            if (!gpu_fits(&p->gpus[i], bytes))
                continue;
            if (k-- == 0)
                return gpu_can_take(&p->gpus[i], bytes) ? i : -1;
        }
        return -2;
    }
    case GJ_PLACE_LEAST_LOADED:
    default: {
        int best = -1;
        for (int i = 0; i < p->n_gpus; i++) {
            const struct gj_gpu_slotinfo *g = &p->gpus[i];
            if (!gpu_can_take(g, bytes))
                continue;
            if (best < 0 || g->running < p->gpus[best].running ||
                (g->running == p->gpus[best].running &&
                 gpu_free_bytes(g) > gpu_free_bytes(&p->gpus[best])))
                best = i;
        }
        return best;
    }
    }
}

/* Host memory: the job could never fit (NEVER_HOST), not now (WAIT), or now (PLACED_CPU
 * stands for "go on"). */
static enum gj_place_outcome host_fits(const struct gj_placement *p, uint64_t bytes)
{
    if (!p->host_bytes)
        return GJ_PLACED_CPU;
    if (bytes > p->host_bytes)
        return GJ_PLACE_NEVER_HOST;
    return bytes > p->host_bytes - p->host_reserved ? GJ_PLACE_WAIT : GJ_PLACED_CPU;
}

static enum gj_place_outcome place_device(struct gj_placement *p, const struct gj_place_request *req,
                                          int *device)
{
    int wants_gpu = req->can_use_gpu || req->needs_gpu;
    if (!wants_gpu)
        return place_cpu(p, device);
    if (p->n_gpus == 0)
        return req->needs_gpu ? GJ_PLACE_NEVER : place_cpu(p, device);
    int i = pick_gpu(p, req->device_bytes);
    if (i >= 0) {
        take_gpu(p, i, req->device_bytes, device);
        return GJ_PLACED_GPU;
    }
    if (i == -1)
        return GJ_PLACE_WAIT;
    /* Fits no GPU at all: the CPU, unless the job cannot run there. */
    return req->needs_gpu ? GJ_PLACE_NEVER : place_cpu(p, device);
}

static enum gj_place_outcome place_locked(struct gj_placement *p, const struct gj_place_request *req,
                                          int *device)
{
    enum gj_place_outcome host = host_fits(p, req->host_bytes);
    if (host != GJ_PLACED_CPU)
        return host;
    enum gj_place_outcome o = place_device(p, req, device);
    if (o == GJ_PLACED_GPU || o == GJ_PLACED_CPU)
        p->host_reserved += p->host_bytes ? req->host_bytes : 0;
    return o;
}

enum gj_place_outcome gj_place_try(struct gj_placement *p, const struct gj_place_request *req,
                                   int *device)
{
    pthread_mutex_lock(&p->lock);
    enum gj_place_outcome o = place_locked(p, req, device);
    pthread_mutex_unlock(&p->lock);
    return o;
}

enum gj_place_outcome gj_place_wait(struct gj_placement *p, const struct gj_place_request *req,
                                    int *device, const volatile int *stop)
{
    pthread_mutex_lock(&p->lock);
    enum gj_place_outcome o;
    for (;;) {
        o = place_locked(p, req, device);
        if (o != GJ_PLACE_WAIT || (stop && *stop))
            break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 200 * 1000000L;   /* re-check *stop at least every 200 ms */
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        int rc = pthread_cond_timedwait(&p->freed, &p->lock, &ts);
        if (rc && rc != ETIMEDOUT) {
            gj_log_error("placement", "pthread_cond_timedwait: %s", strerror(rc));
            break;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return o;
}

void gj_place_release(struct gj_placement *p, int device, uint64_t device_bytes)
{
    gj_place_release_job(p, device, device_bytes, 0);
}

void gj_place_release_job(struct gj_placement *p, int device, uint64_t device_bytes, uint64_t host_bytes)
{
    pthread_mutex_lock(&p->lock);
    if (p->host_bytes)
        p->host_reserved = p->host_reserved > host_bytes ? p->host_reserved - host_bytes : 0;
    if (device < 0) {
        if (p->cpu_running > 0)
            p->cpu_running--;
        p->cpu_completed++;
    } else {
        struct gj_gpu_slotinfo *g = NULL;
        for (int i = 0; i < p->n_gpus; i++)
            if (p->gpus[i].index == device)
                g = &p->gpus[i];
        if (g) {
            if (g->running > 0)
                g->running--;
            g->reserved_bytes = g->reserved_bytes > device_bytes ? g->reserved_bytes - device_bytes : 0;
            g->completed++;
        } else {
            gj_log_error("placement", "release of unknown GPU %d", device);
        }
    }
    pthread_cond_broadcast(&p->freed);
    pthread_mutex_unlock(&p->lock);
}

int gj_place_free_slots(struct gj_placement *p)
{
    pthread_mutex_lock(&p->lock);
    int n = p->cpu_slots - p->cpu_running;
    for (int i = 0; i < p->n_gpus; i++)
        n += p->gpus[i].slots - p->gpus[i].running;
    pthread_mutex_unlock(&p->lock);
    return n > 0 ? n : 0;
}

void gj_place_snapshot(struct gj_placement *p, struct gj_placement *copy)
{
    memset(copy, 0, sizeof *copy);
    pthread_mutex_lock(&p->lock);
    copy->policy = p->policy;
    copy->n_gpus = p->n_gpus;
    memcpy(copy->gpus, p->gpus, sizeof p->gpus);
    copy->cpu_slots = p->cpu_slots;
    copy->cpu_running = p->cpu_running;
    copy->cpu_completed = p->cpu_completed;
    copy->host_bytes = p->host_bytes;
    copy->host_reserved = p->host_reserved;
    copy->rr_next = p->rr_next;
    copy->rng = p->rng;
    pthread_mutex_unlock(&p->lock);
}

/* ---- device memory of loaded models ------------------------------------------------------ */

static struct gj_gpu_slotinfo *gpu_by_index(struct gj_placement *p, int device)
{
    for (int i = 0; i < p->n_gpus; i++)
        if (p->gpus[i].index == device)
            return &p->gpus[i];
    return NULL;
}

int gj_place_reserve_memory(struct gj_placement *p, int device, uint64_t bytes)
{
    pthread_mutex_lock(&p->lock);
    struct gj_gpu_slotinfo *g = gpu_by_index(p, device);
    int rc = g && gpu_free_bytes(g) >= bytes ? 0 : -1;
    if (rc == 0)
        g->reserved_bytes += bytes;
    pthread_mutex_unlock(&p->lock);
    return rc;
}

void gj_place_release_memory(struct gj_placement *p, int device, uint64_t bytes)
{
    pthread_mutex_lock(&p->lock);
    struct gj_gpu_slotinfo *g = gpu_by_index(p, device);
    if (g)
        g->reserved_bytes = g->reserved_bytes > bytes ? g->reserved_bytes - bytes : 0;
    else
        gj_log_error("placement", "memory release on unknown GPU %d", device);
    pthread_cond_broadcast(&p->freed);   /* jobs waiting for memory may fit now */
    pthread_mutex_unlock(&p->lock);
}

int gj_place_gpu_count(struct gj_placement *p)
{
    pthread_mutex_lock(&p->lock);
    int n = p->n_gpus;
    pthread_mutex_unlock(&p->lock);
    return n;
}

int gj_place_gpu_load(struct gj_placement *p, int device, struct gj_place_gpu_load *out)
{
    pthread_mutex_lock(&p->lock);
    struct gj_gpu_slotinfo *g = gpu_by_index(p, device);
    if (g) {
        out->running = g->running;
        out->total_bytes = g->total_bytes;
        out->reserved_bytes = g->reserved_bytes;
    }
    pthread_mutex_unlock(&p->lock);
    return g ? 0 : -1;
}
