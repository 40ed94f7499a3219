/*
 * metrics.h — Prometheus text exposition. Counters and histograms kept in
 * process (HTTP requests by route and code, job durations by kind); gauges
 * that live in the database or the placement are written at scrape time by
 * writers their layers add (gj_metrics_add_writer).
 * Every name starts with gpujobd_ (the per-GPU series: jobs/gpu_metrics.h).
 */
#ifndef GJ_METRICS_H
#define GJ_METRICS_H

#include <stdint.h>
#include <stdio.h>

void gj_metrics_init(void);
/* One answered request: its count, its duration, and the bytes of its body. */
void gj_metrics_http(const char *method, const char *route, int status, double seconds, uint64_t body_bytes);
void gj_metrics_job_finished(const char *kind, const char *state, double seconds);
/* A job claimed after waiting this long in the queue (since it could first run). */
void gj_metrics_job_waited(const char *kind, double seconds);
/* A job failed because it could never be placed: reason "device_memory" or "host_memory". */
void gj_metrics_placement_refused(const char *kind, const char *reason);
/* Appends the in-process metrics in text format to f, then each added writer's. */
void gj_metrics_write(FILE *f);
/* Adds a module's metrics (module.h: write_metrics), written by every gj_metrics_write
 * after the in-process ones; called by cmd_serve.c before the HTTP server starts. 0, or
 * -1 when the table (32) is full. */
typedef void (*gj_metrics_writer)(FILE *f);
int gj_metrics_add_writer(gj_metrics_writer write);
/* Writes v as a label value, its backslashes, double quotes and newlines escaped (for
 * writers that name a label themselves). */
void gj_metrics_put_label(FILE *f, const char *v);

#endif
