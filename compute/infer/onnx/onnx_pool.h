/*
 * onnx_pool.h — a small persistent thread pool for the CPU backend: parallel_for over
 * task indices, the calling thread taking part. Workers sleep on a condition variable
 * between calls (GJ_ONNX_SPIN_US=N: they first watch N us for the next one).
 */
#ifndef ONNX_POOL_H
#define ONNX_POOL_H

#include <stdint.h>

struct onnx_pool;

typedef void (*onnx_task_fn)(void *ctx, int64_t begin, int64_t end);

/* threads: total threads including the caller (1: no workers, everything inline). */
struct onnx_pool *onnx_pool_create(int threads);
void onnx_pool_free(struct onnx_pool *p);
int onnx_pool_threads(const struct onnx_pool *p);
/* Runs fn over [0, n) in chunks of at least grain indices; returns when all are done. */
void onnx_pool_for(struct onnx_pool *p, int64_t n, int64_t grain, onnx_task_fn fn, void *ctx);

#endif
