/*
 * gpu_metrics.h — nv_gpu_utilization, nv_gpu_memory_total_bytes and nv_gpu_memory_used_bytes
 * per GPU of the placement, as Triton names them (gpu_metrics.c says where they come from).
 */
#ifndef GJ_GPU_METRICS_H
#define GJ_GPU_METRICS_H

#include <stdio.h>

struct gj_placement;

/* The placement whose GPUs the series cover (cmd_serve.c, once it is up); NULL before
 * it goes. None: no series. */
void gj_gpu_metrics_watch(struct gj_placement *p);

/* Appends the series in text format to f; nothing when no GPU can be read. */
void gj_gpu_metrics_write(FILE *f);

#endif
