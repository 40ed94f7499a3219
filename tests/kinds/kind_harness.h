/*
 * kind_harness.h — running a job kind in the test process as a worker would: a job
 * from JSON params and input files, a context with scratch and output directories,
 * and hooks that can turn the cancel flag on after a delay and record progress.
 */
#ifndef GJ_KIND_HARNESS_H
#define GJ_KIND_HARNESS_H

#include <stdint.h>

#include "common/gj_kind.h"

struct harness {
    char dir[256];                 /* private temporary directory (removed by harness_end) */
    char out[300], scratch[300];
    json_t *params;
    struct gj_input inputs[4];
    char input_paths[4][300];
    size_t n_inputs;
    struct gj_job job;
    struct gj_ctx ctx;
    double t_start;                /* when harness_run started */
    double cancel_after_s;         /* cancelled() is true this long after the start; < 0 never */
    double first_cancel_seen_s;    /* when cancelled() first answered 1, relative to the start */
    int progress_calls;
    double last_fraction;
};

/* params: JSON text. Fails the test when it does not parse or the directory cannot be made. */
void harness_begin(struct harness *h, const char *kind, const char *params);
/* An input named name holding bytes (a sparse file of zeros when data is NULL). */
void harness_input(struct harness *h, const char *name, const void *data, uint64_t bytes);
/* Validates, then runs the kind on the CPU with `threads` threads; returns run()'s result
 * and the seconds it took in *seconds. err receives the error. */
int harness_run(struct harness *h, const struct gj_kind *kind, int threads, double *seconds,
                struct gj_error *err);
void harness_end(struct harness *h);
double harness_now(void);
/* TSPLIB text of n random cities (EUC_2D); the caller frees it. */
char *harness_tsp_text(int n, uint32_t seed);

#endif
