/*
 * onnx_bench.h — timing one ONNX session at one batch size: the core shared by
 * `gpujobd bench onnx` (onnx_bench.c) and `gpujobd bench infer --runtime`
 * (compute/infer/serving/bench_infer.c), which only format the result.
 */
#ifndef ONNX_BENCH_H
#define ONNX_BENCH_H

#include <stddef.h>

#include "infer/onnx/onnx_model.h"

struct onnx_bench_params {
    double seconds;   /* time runs for at least this long */
    int warmup;       /* untimed runs first */
    int min_runs;     /* at least this many timed runs (values below 1 count as 1) */
    int max_runs;     /* at most this many timed runs; 0: no limit */
};

/* What one batch size measured; owns no memory. Times in seconds. */
struct onnx_bench_result {
    size_t runs;                  /* timed runs */
    double total_s;               /* wall time of the timed runs */
    double median_s, p90_s, min_s; /* per run: sorted[runs / 2], sorted[runs * 9 / 10], sorted[0] */
    double create_s;              /* onnx_session_create */
    double warmup_s;              /* the warm-up runs */
    size_t arena_bytes, naive_bytes; /* onnx_session_stats */
    size_t device_bytes;          /* onnx_session_device_bytes */
    struct onnx_op_profile profile[ONNX_PROFILE_MAX_OPS];   /* with opt->profile: per op type */
    size_t n_profile;
};

/* Creates a session of `m` with `opt`, fills its inputs (float: a fixed pseudo-random
 * sequence, seed 42; others: zeros), runs the warm-up, then times runs one by one as
 * `p` says. 0 with *r filled, or -1 with err (the session's error where it could not be
 * created or run); frees all it made. */
int onnx_bench_batch(const onnx_model *m, const struct onnx_session_options *opt,
                     const struct onnx_bench_params *p, struct onnx_bench_result *r,
                     struct gj_error *err);

#endif
