/*
 * onnx_bench.c — `gpujobd bench onnx`: inferences per second of ONNX models on a backend,
 * per batch size, with a fixed thread count (CPU) or precision and CUDA graphs (CUDA).
 *
 *   gpujobd bench onnx [--threads N] [--batch 1,8] [--seconds S] [--backend cpu|cuda]
 *                      [--device N] [--precision fp32|tf32|fp16] [--cuda-graphs] [--profile]
 *                      MODEL.onnx...
 *
 * Models of the benchmark (ResNet-18 and DenseNet-121 at 224x224, random weights) are
 * written by tests/onnx/models.py; tests/onnx/bench_vs_onnxruntime.sh runs this and
 * ONNX Runtime on the same files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "infer/onnx/onnx_bench.h"
#include "infer/onnx/onnx_model.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Host buffers of the session's inputs (float: a fixed pseudo-random sequence, seed 42;
 * others: zeros) and outputs; ins[i] / outs[i] stay NULL where malloc failed. */
static int host_buffers(onnx_session *s, size_t ni, size_t no, const void **ins, void **outs)
{
    for (size_t i = 0; i < ni; i++) {
        size_t b = onnx_session_input_bytes(s, i);
        float *in = malloc(b + 4);
        if (!in)
            return -1;
        uint32_t seed = 42;
        if (onnx_session_input(s, i)->elem_type == ONNX_ELEM_FLOAT)
            for (size_t k = 0; k < b / 4; k++) {
                seed = seed * 1664525u + 1013904223u;
                in[k] = (float)(seed >> 8) / 16777216.0f - 0.5f;
            }
        else
            memset(in, 0, b);
        ins[i] = in;
    }
    for (size_t i = 0; i < no; i++)
        if (!(outs[i] = malloc(onnx_session_output_bytes(s, i) + 4)))
            return -1;
    return 0;
}

/* Latencies of timed runs, grown by doubling. */
struct latencies {
    double *t;
    size_t n, cap;
};

/* Runs one by one until p's limits say stop: at least min_runs, then until `seconds` passed,
 * at most max_runs. r->runs, r->total_s and the sorted latencies' median, p90, min. */
static int timed_runs(onnx_session *s, const void *const *ins, void *const *outs,
                      const struct onnx_bench_params *p, struct latencies *l, struct onnx_bench_result *r,
                      struct gj_error *err)
{
    size_t min_runs = p->min_runs > 1 ? (size_t)p->min_runs : 1;
    size_t max_runs = p->max_runs > 0 ? (size_t)p->max_runs : 0;
    double start = now();
    while ((!max_runs || l->n < max_runs) && (l->n < min_runs || now() - start < p->seconds)) {
        if (l->n == l->cap) {
            double *bigger = realloc(l->t, 2 * l->cap * sizeof *l->t);
            if (!bigger)
                return gj_error_set(err, "", "out of memory for the benchmark's host buffers");
            l->t = bigger;
            l->cap *= 2;
        }
        double a = now();
        if (onnx_session_run(s, ins, outs, err))
            return -1;
        l->t[l->n++] = now() - a;
    }
    r->total_s = now() - start;
    qsort(l->t, l->n, sizeof *l->t, cmp_d);
    r->runs = l->n;
    r->median_s = l->t[l->n / 2];
    r->p90_s = l->t[l->n * 9 / 10];
    r->min_s = l->t[0];
    return 0;
}

/* The warm-up (with CUDA graphs: the plain run and the captured one), the timed runs and the
 * session's figures. */
static int measure(onnx_session *s, const void *const *ins, void *const *outs, const struct onnx_bench_params *p,
                   struct onnx_bench_result *r, struct gj_error *err)
{
    size_t min_runs = p->min_runs > 1 ? (size_t)p->min_runs : 1;
    size_t max_runs = p->max_runs > 0 ? (size_t)p->max_runs : 0;
    struct latencies l = { .cap = max_runs && max_runs < 1024 ? max_runs : 1024 };
    if (l.cap < min_runs)
        l.cap = min_runs;
    l.t = malloc(l.cap * sizeof *l.t);
    if (!l.t)
        return gj_error_set(err, "", "out of memory for the benchmark's host buffers");
    double tw = now();
    int rc = 0;
    for (int w = 0; w < p->warmup && rc == 0; w++)
        rc = onnx_session_run(s, ins, outs, err);
    r->warmup_s = now() - tw;
    if (rc == 0)
        rc = timed_runs(s, ins, outs, p, &l, r, err);
    free(l.t);
    if (rc)
        return -1;
    struct onnx_session_stats st;
    onnx_session_get_stats(s, &st);
    r->arena_bytes = st.arena_bytes;
    r->naive_bytes = st.naive_bytes;
    r->device_bytes = onnx_session_device_bytes(s);
    r->n_profile = onnx_session_profile(s, r->profile, ONNX_PROFILE_MAX_OPS);
    return 0;
}

int onnx_bench_batch(const onnx_model *m, const struct onnx_session_options *opt,
                     const struct onnx_bench_params *p, struct onnx_bench_result *r,
                     struct gj_error *err)
{
    memset(r, 0, sizeof *r);
    double t0 = now();
    onnx_session *s = onnx_session_create(m, opt, err);
    if (!s)
        return -1;
    r->create_s = now() - t0;
    size_t ni = onnx_model_num_inputs(m), no = onnx_model_num_outputs(m);
    const void **ins = calloc(ni, sizeof *ins);
    void **outs = calloc(no, sizeof *outs);
    int rc;
    if (!ins || !outs || host_buffers(s, ni, no, ins, outs))
        rc = gj_error_set(err, "", "out of memory for the benchmark's host buffers");
    else
        rc = measure(s, ins, (void *const *)outs, p, r, err);
    for (size_t i = 0; ins && i < ni; i++)
        free((void *)ins[i]);
    for (size_t i = 0; outs && i < no; i++)
        free(outs[i]);
    free(ins);
    free(outs);
    onnx_session_free(s);
    return rc;
}

/* The command's flags. */
struct bench_opts {
    const char *backend;
    int device, precision, graphs, profile, threads;
    double seconds;
    int batches[16], n_batches;
    int first_model;   /* argv index of the first model */
};

static const char *const precision_names[] = { "fp32", "tf32", "fp16" };

/* Time per operator type, as the share of all kernel time (stderr: the figures stay apart). */
static void print_profile(const struct onnx_bench_result *r)
{
    double tot = 0;
    for (size_t i = 0; i < r->n_profile; i++)
        tot += r->profile[i].seconds;
    for (size_t i = 0; i < r->n_profile; i++) {
        const struct onnx_op_profile *p = &r->profile[i];
        fprintf(stderr, "onnx profile: %-20s %8ld calls %10.2f ms %5.1f%%\n", p->op, p->calls, p->seconds * 1e3,
                tot > 0 ? 100 * p->seconds / tot : 0.0);
    }
}

static int bench_one(const char *path, onnx_model *m, int batch, const struct bench_opts *bo)
{
    struct gj_error err = { 0 };
    struct onnx_session_options o = { .batch = batch, .threads = bo->threads, .backend = bo->backend,
                                      .device = bo->device, .precision = bo->precision,
                                      .cuda_graphs = bo->graphs, .profile = bo->profile };
    struct onnx_bench_params bp = { .seconds = bo->seconds, .warmup = 3, .min_runs = 5,
                                    .max_runs = 4096 };
    struct onnx_bench_result r;
    if (onnx_bench_batch(m, &o, &bp, &r, &err)) {
        fprintf(stderr, "%s: batch %d: %s\n", path, batch, err.message);
        return -1;
    }
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char how[64];
    if (strcmp(bo->backend, "cpu") == 0)
        snprintf(how, sizeof how, "cpu threads %d", bo->threads);
    else
        snprintf(how, sizeof how, "%s %s%s", bo->backend, precision_names[bo->precision],
                 bo->graphs ? " graphs" : "");
    double per_s = (double)r.runs * batch / r.total_s;   /* 3 decimals below 10 (1024x1024 models) */
    printf("%-24s batch %2d %s: %8.*f inferences/s  median %8.2f ms/batch  p90 %8.2f ms  "
           "(%d runs, session %.0f ms, arena %.1f MiB, %.1f MiB without reuse, device %.1f MiB)\n",
           name, batch, how, per_s < 10 ? 3 : 1, per_s, r.median_s * 1e3, r.p90_s * 1e3,
           (int)r.runs, r.create_s * 1e3, r.arena_bytes / 1048576.0, r.naive_bytes / 1048576.0,
           r.device_bytes / 1048576.0);
    fflush(stdout);
    print_profile(&r);
    return 0;
}

/* "1,8,32" into bo->batches. */
static void parse_batches(char *p, struct bench_opts *bo)
{
    bo->n_batches = 0;
    while (*p && bo->n_batches < 16) {
        bo->batches[bo->n_batches++] = (int)strtol(p, &p, 10);
        if (*p == ',')
            p++;
        else
            break;
    }
}

static int parse_precision(const char *p)
{
    for (int k = 0; k < 3; k++)
        if (strcmp(p, precision_names[k]) == 0)
            return k;
    return -1;
}

/* The flags before the models; 0, or -1 on a usage error. */
static int parse_args(int argc, char **argv, struct bench_opts *bo)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (strcmp(a, "--threads") == 0 && has_value)
            bo->threads = atoi(argv[++i]);
        else if (strcmp(a, "--seconds") == 0 && has_value)
            bo->seconds = atof(argv[++i]);
        else if (strcmp(a, "--backend") == 0 && has_value)
            bo->backend = argv[++i];
        else if (strcmp(a, "--device") == 0 && has_value)
            bo->device = atoi(argv[++i]);
        else if (strcmp(a, "--precision") == 0 && has_value)
            bo->precision = parse_precision(argv[++i]);
        else if (strcmp(a, "--cuda-graphs") == 0)
            bo->graphs = 1;
        else if (strcmp(a, "--profile") == 0)
            bo->profile = 1;
        else if (strcmp(a, "--batch") == 0 && has_value)
            parse_batches(argv[++i], bo);
        else
            return -1;
    }
    bo->first_model = i;
    if (i >= argc || bo->threads < 1 || bo->n_batches < 1 || bo->seconds <= 0 || bo->precision < 0)
        return -1;
    return 0;
}

int gj_bench_onnx_main(int argc, char **argv)
{
    struct bench_opts bo = { .backend = "cpu", .precision = ONNX_PRECISION_FP32, .threads = 2, .seconds = 5,
                             .batches = { 1, 8 }, .n_batches = 2 };
    if (parse_args(argc, argv, &bo)) {
        fprintf(stderr,
                "usage: gpujobd bench onnx [--threads N] [--batch 1,8] [--seconds S] [--backend cpu|cuda]\n"
                "                          [--device N] [--precision fp32|tf32|fp16] [--cuda-graphs] [--profile]\n"
                "                          MODEL.onnx...\n"
                "  Inferences per second of each model on a backend (default: cpu, fp32).\n"
                "  --profile: time per operator type on stderr (synchronises after every kernel;\n"
                "  not with --cuda-graphs).\n"
                "  Benchmark models (ResNet-18, DenseNet-121 at 224x224):\n"
                "    /usr/bin/python3 tests/onnx/models.py DIR resnet18 --size 224 --no-reference\n"
                "  Comparison with ONNX Runtime: tests/onnx/bench_vs_onnxruntime.sh\n");
        return 2;
    }
    struct gj_error why = { 0 };
    if (!onnx_backend_available(bo.backend, &why)) {
        fprintf(stderr, "backend %s: %s\n", bo.backend, why.message);
        return 1;
    }
    int rc = 0;
    for (int i = bo.first_model; i < argc; i++) {
        struct gj_error err = { 0 };
        onnx_model *m = onnx_model_load_file(argv[i], 0, &err);
        if (!m) {
            fprintf(stderr, "%s: %s\n", argv[i], err.message);
            rc = 1;
            continue;
        }
        for (int b = 0; b < bo.n_batches; b++)
            if (bench_one(argv[i], m, bo.batches[b], &bo))
                rc = 1;
        onnx_model_free(m);
    }
    return rc;
}
