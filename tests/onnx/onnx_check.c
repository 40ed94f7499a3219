/*
 * onnx_check — runs an ONNX model over a raw float32 input and compares with a reference
 * output (raw float32, written by PyTorch in models.py) by relative L2 error.
 *
 *   onnx_check MODEL INPUT.f32 EXPECTED.f32 BATCH THREADS TOL [BACKEND [PRECISION [GRAPHS]]]
 *   onnx_check --available BACKEND      exit 0 when the backend can run here, else 77 (skip)
 *
 * BACKEND: cpu (default) or cuda; PRECISION: fp32 (default), tf32 or fp16; GRAPHS: 1 to
 * capture CUDA graphs (each session then runs three times: warm-up, capture, replay, and
 * every run is checked). It also runs the first sample alone in a batch-1 session and
 * compares it with the first part of the reference (a different session for the same model).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fsutil.h"
#include "infer/onnx/onnx_model.h"

static double rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1e-30));
}

static const char *backend = "cpu";
static int precision = ONNX_PRECISION_FP32, graphs = 0;

static int run(onnx_model *m, int batch, int threads, const float *in, float *out, size_t *in_n,
               size_t *out_n)
{
    struct gj_error err = { 0 };
    struct onnx_session_options o = { .batch = batch, .threads = threads, .backend = backend,
                                      .precision = precision, .cuda_graphs = graphs };
    onnx_session *s = onnx_session_create(m, &o, &err);
    if (!s) {
        fprintf(stderr, "session (batch %d): %s\n", batch, err.message);
        return -1;
    }
    struct onnx_session_stats st;
    onnx_session_get_stats(s, &st);
    printf("batch %d: %zu nodes run, %zu folded, arena %.1f MiB (without reuse %.1f MiB), weights %.1f MiB, "
           "device %.1f MiB\n", batch, st.n_nodes_run, st.n_nodes_folded, st.arena_bytes / 1048576.0,
           st.naive_bytes / 1048576.0, st.const_bytes / 1048576.0, onnx_session_device_bytes(s) / 1048576.0);
    *in_n = onnx_session_input_bytes(s, 0) / 4;
    *out_n = onnx_session_output_bytes(s, 0) / 4;
    int rc = 0;
    /* with graphs: warm-up, capture and replay; the caller checks the last, runs 2 and 3
     * must also equal run 1 (a replay that skipped work would leave the NaNs) */
    int reps = graphs ? 3 : 1;
    float *first = NULL;
    for (int r = 0; in && out && r < reps && rc == 0; r++) {
        const void *ins[1] = { in };
        void *outs[1] = { out };
        memset(out, 0xff, *out_n * 4);   /* NaN */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = onnx_session_run(s, ins, outs, &err);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (rc) {
            fprintf(stderr, "run: %s\n", err.message);
            break;
        }
        printf("batch %d: run %d %.1f ms\n", batch, r + 1,
               (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
        if (reps > 1 && r == 0 && !(first = malloc(*out_n * 4 + 4)))
            rc = -1;
        else if (reps > 1 && r == 0)
            memcpy(first, out, *out_n * 4);
        else if (reps > 1 && memcmp(first, out, *out_n * 4)) {
            fprintf(stderr, "run %d differs from run 1 (rel. L2 %.3g)\n", r + 1, rel_l2(out, first, *out_n));
            rc = -1;
        }
    }
    free(first);
    onnx_session_free(s);
    return rc;
}

/* BACKEND, PRECISION and GRAPHS from argv[7..9]; 0, or 2 on a usage error. */
static int parse_backend(int argc, char **argv)
{
    if (argc > 7)
        backend = argv[7];
    if (argc > 8) {
        const char *p = argv[8];
        precision = strcmp(p, "tf32") == 0 ? ONNX_PRECISION_TF32 : strcmp(p, "fp16") == 0 ? ONNX_PRECISION_FP16
                  : strcmp(p, "fp32") == 0 ? ONNX_PRECISION_FP32 : -1;
        if (precision < 0) {
            fprintf(stderr, "precision '%s': fp32, tf32 or fp16\n", p);
            return 2;
        }
    }
    if (argc > 9)
        graphs = atoi(argv[9]) != 0;
    return 0;
}

/* The model's output at `batch` against ref (in_len and ref_len bytes), then its first sample
 * alone in a batch-1 session against the first part of ref. 0 when both are within tol. */
static int check(onnx_model *m, int batch, int threads, double tol, const char *in, size_t in_len, const char *ref,
                 size_t ref_len)
{
    size_t in_n = 0, out_n = 0;
    if (run(m, batch, threads, NULL, NULL, &in_n, &out_n))
        return 1;
    if (in_n * 4 != in_len || out_n * 4 != ref_len) {
        fprintf(stderr, "sizes differ: input %zu vs %zu floats, output %zu vs %zu\n", in_n, in_len / 4,
                out_n, ref_len / 4);
        return 1;
    }
    float *y = malloc(out_n * 4);
    if (!y || run(m, batch, threads, (const float *)in, y, &in_n, &out_n)) {
        free(y);
        return 1;
    }
    double e = rel_l2(y, (const float *)ref, out_n);
    printf("batch %d: relative L2 error %.3g (tolerance %.3g)\n", batch, e, tol);
    int rc = e <= tol ? 0 : 1;
    if (batch > 1) {
        size_t on1 = out_n / batch;
        if (run(m, 1, threads, (const float *)in, y, &in_n, &out_n) == 0) {
            double e1 = rel_l2(y, (const float *)ref, on1);
            printf("batch 1: relative L2 error %.3g\n", e1);
            if (!(e1 <= tol))
                rc = 1;
        } else {
            rc = 1;
        }
    }
    if (!(e <= tol))
        fprintf(stderr, "FAIL: error %.3g over %.3g\n", e, tol);
    free(y);
    return rc;
}

/* 0 when the backend can run here, else 77 (skip) with the reason. */
static int available(const char *name)
{
    struct gj_error why = { 0 };
    if (onnx_backend_available(name, &why))
        return 0;
    printf("backend %s not available: %s\n", name, why.message);
    return 77;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--available") == 0)
        return available(argv[2]);
    if (argc < 7 || argc > 10) {
        fprintf(stderr, "usage: onnx_check MODEL INPUT.f32 EXPECTED.f32 BATCH THREADS TOL [BACKEND [fp32|tf32|fp16 "
                "[GRAPHS]]]\n       onnx_check --available BACKEND\n");
        return 2;
    }
    int rc = parse_backend(argc, argv);
    if (rc == 0)
        rc = available(backend);
    if (rc)
        return rc;
    printf("backend %s, precision %s, CUDA graphs %s\n", backend, argc > 8 ? argv[8] : "fp32", graphs ? "on" : "off");
    struct gj_error err = { 0 };
    onnx_model *m = onnx_model_load_file(argv[1], 0, &err);
    if (!m) {
        fprintf(stderr, "load: %s\n", err.message);
        return 1;
    }
    printf("%s: %zu nodes, opset %lld\n", argv[1], onnx_model_num_nodes(m), (long long)onnx_model_opset(m));
    char *in = NULL, *ref = NULL;
    size_t in_len, ref_len;
    if (gj_read_file(argv[2], (size_t)1 << 30, &in, &in_len) ||
        gj_read_file(argv[3], (size_t)1 << 30, &ref, &ref_len)) {
        perror("read");
        rc = 1;
    } else {
        rc = check(m, atoi(argv[4]), atoi(argv[5]), atof(argv[6]), in, in_len, ref, ref_len);
    }
    free(in);
    free(ref);
    onnx_model_free(m);
    return rc;
}
