/*
 * gpu_accounting.h — the host's GPU memory accounting, as the serving code sees it.
 *
 * Loaded models hold device memory for as long as their batchers live, outside any job.
 * The service's worker pool already accounts for each GPU's memory and running tasks
 * (service/jobs/placement.c), and compute/ may not call service/: so the service registers
 * its accounting here at start (gj_gpu_accounting_set) and the batchers reserve and
 * release through it. Without a registration (`gpujobd run`, tests) nothing is counted:
 * the GPU count is unknown and every reservation succeeds.
 *
 * Reservations carry the generation of the accounting they were made under, so a
 * release after the accounting was replaced or removed (process exit, a test's fake)
 * goes nowhere instead of into the wrong books. Thread-safe.
 */
#ifndef GJ_GPU_ACCOUNTING_H
#define GJ_GPU_ACCOUNTING_H

#include <stdint.h>

/* One GPU as the accounting sees it now. */
struct gj_gpu_load {
    int running;               /* jobs running on it */
    uint64_t total_bytes;
    uint64_t reserved_bytes;   /* by jobs and loaded models */
};

struct gj_gpu_accounting {
    void *ctx;
    int (*count)(void *ctx);                                   /* GPUs, ordinals 0..n-1 */
    int (*load)(void *ctx, int gpu, struct gj_gpu_load *out);   /* 0, or -1: no such GPU */
    int (*reserve)(void *ctx, int gpu, uint64_t bytes);         /* 0, or -1: does not fit now */
    void (*release)(void *ctx, int gpu, uint64_t bytes);
};

/* Registers the host's accounting (copied); NULL removes it. */
void gj_gpu_accounting_set(const struct gj_gpu_accounting *a);

/* GPUs the host has; -1 when no accounting is registered. */
int gj_gpu_acct_count(void);
/* 0 with *out, or -1 (no accounting, or no such GPU). */
int gj_gpu_acct_load(int gpu, struct gj_gpu_load *out);
/* Reserves bytes on gpu: 0 and *gen (pass it to the release), or -1 when they do not fit
 * (*now then holds the GPU's state, for the message). */
int gj_gpu_acct_reserve(int gpu, uint64_t bytes, uint64_t *gen, struct gj_gpu_load *now);
void gj_gpu_acct_release(int gpu, uint64_t bytes, uint64_t gen);

#endif
