/*
 * placement.h — choosing the device for a job (ARCHITECTURE.md: a job's life, seed 000). Plain C,
 * no CUDA and no SQL, so tests drive it with simulated devices.
 *
 * Each GPU has `slots` concurrent tasks and `total_bytes` of memory; a job
 * reserves its estimate's device bytes while it runs. CPU slots are separate.
 * Host memory is one more budget (host_memory.h): every job reserves its
 * estimate's host bytes wherever it runs, and waits while they are not free.
 */
#ifndef GJ_PLACEMENT_H
#define GJ_PLACEMENT_H

#include <pthread.h>
#include <stdint.h>

#include "service/config.h"

#define GJ_PLACE_MAX_GPUS 64

struct gj_gpu_slotinfo {
    int index;
    uint64_t total_bytes;
    uint64_t reserved_bytes;
    int slots;
    int running;
    uint64_t completed;
};

struct gj_placement {
    pthread_mutex_t lock;
    pthread_cond_t freed;
    enum gj_placement_policy policy;
    int n_gpus;
    struct gj_gpu_slotinfo gpus[GJ_PLACE_MAX_GPUS];
    int cpu_slots;
    int cpu_running;
    uint64_t cpu_completed;
    uint64_t host_bytes;       /* host memory jobs may reserve together; 0: not counted */
    uint64_t host_reserved;
    unsigned rr_next;          /* round-robin cursor */
    uint64_t rng;              /* random policy state (xorshift), seedable for tests */
};

void gj_placement_init(struct gj_placement *p, enum gj_placement_policy policy, int n_gpus,
                       const uint64_t *gpu_total_bytes, int slots_per_gpu, int cpu_slots,
                       uint64_t seed);
void gj_placement_destroy(struct gj_placement *p);

/* Host memory jobs may reserve together (0: not counted); set before jobs are placed. */
void gj_placement_set_host(struct gj_placement *p, uint64_t usable_bytes);

/* What a job asks for (from the module's estimate). */
struct gj_place_request {
    int can_use_gpu;
    int needs_gpu;
    uint64_t device_bytes;
    uint64_t host_bytes;
};

enum gj_place_outcome {
    GJ_PLACED_GPU,       /* *device = GPU index; slot and memory reserved */
    GJ_PLACED_CPU,       /* *device = -1; a CPU slot reserved */
    GJ_PLACE_WAIT,       /* fits some GPU, but not now: wait for a release */
    GJ_PLACE_NEVER,      /* needs a GPU and fits none at all (or there is none) */
    GJ_PLACE_NEVER_HOST, /* needs more host memory than jobs may ever hold here */
};

/* One decision, without blocking. Host memory first: more than p->host_bytes is
 * NEVER_HOST, more than is free now WAIT (as device memory), else the device: least-loaded picks among GPUs with a free
 * slot and enough free memory; round-robin and random are load-oblivious (seed
 * 000): they pick the next / a random GPU the job fits in total, and the job
 * waits when that GPU is busy. A job that can use a GPU but fits none at all
 * runs on the CPU; one that fits a busy GPU waits (CPU fallback only when no GPU
 * is configured). NEVER also when the job must run on the CPU and there are no
 * CPU slots. */
enum gj_place_outcome gj_place_try(struct gj_placement *p, const struct gj_place_request *req,
                                   int *device);
/* Blocks until placed or never-placeable, or until *stop becomes nonzero
 * (then returns GJ_PLACE_WAIT). */
enum gj_place_outcome gj_place_wait(struct gj_placement *p, const struct gj_place_request *req,
                                    int *device, const volatile int *stop);
/* Releases what gj_place_* reserved: the slot, device_bytes on a GPU, and host_bytes
 * (gj_place_release: none). */
void gj_place_release(struct gj_placement *p, int device, uint64_t device_bytes);
void gj_place_release_job(struct gj_placement *p, int device, uint64_t device_bytes, uint64_t host_bytes);

/* Device memory held outside jobs (models loaded by the inference batchers): reserved
 * and released without a task slot, counted in reserved_bytes like a job's. 0, or -1
 * when the GPU does not exist or has not that much free now. */
int gj_place_reserve_memory(struct gj_placement *p, int device, uint64_t bytes);
void gj_place_release_memory(struct gj_placement *p, int device, uint64_t bytes);

/* GPUs and one GPU's load now, for accounting kept outside jobs (the inference module
 * hands them to its batchers as their GPU accounting). gj_place_gpu_load: 0, or -1 when
 * the GPU does not exist. */
struct gj_place_gpu_load {
    int running;               /* task slots taken */
    uint64_t total_bytes;
    uint64_t reserved_bytes;   /* by jobs and by memory held outside them */
};
int gj_place_gpu_count(struct gj_placement *p);
int gj_place_gpu_load(struct gj_placement *p, int device, struct gj_place_gpu_load *out);

/* Free slots anywhere (the worker claims only when one exists). */
int gj_place_free_slots(struct gj_placement *p);
/* A consistent copy for /v1/gpus and /metrics. */
void gj_place_snapshot(struct gj_placement *p, struct gj_placement *copy);

#endif
