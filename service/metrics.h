/*
 * metrics.h — Prometheus text exposition. Counters and histograms kept in
 * process (HTTP requests by route and code, job durations by kind); gauges
 * that live in the database (jobs by kind and state, queue depth) or the
 * placement (per-GPU reserved memory, running tasks) are read at scrape time.
 * Every name starts with gpujobd_.
 */
#ifndef GJ_METRICS_H
#define GJ_METRICS_H

#include <stdio.h>

void gj_metrics_init(void);
void gj_metrics_http(const char *method, const char *route, int status, double seconds);
void gj_metrics_job_finished(const char *kind, const char *state, double seconds);
/* Appends the in-process metrics in text format to f. */
void gj_metrics_write(FILE *f);

#endif
