/*
 * bench_infer.c — `gpujobd bench infer`: the inference service's model path in process.
 *
 *   gpujobd bench infer [options] MODEL_DIR|MODEL.onnx
 *
 * Batcher mode (the default): client threads (--concurrency 1,2,...,64), each sending one
 * request of --samples samples (default 1) at a time through the dynamic batcher
 * (compute/infer/serving/batcher.c) and waiting for its answer, as the `infer` kind and
 * /v2/models/{m}/infer do; per level: requests/s, inferences/s, p50/p99 latency, mean batch
 * size (inference_count / inference_exec_count), mean queue and compute time per request,
 * and the process's CPU seconds (bench/infer_bench.py compares them with the HTTP path's). The model's config.json is copied into a
 * temporary repository with --max-batch, --delay-us, --preferred, --instances, --backend,
 * --precision and --cuda-graphs written into it (given a bare MODEL.onnx, a config is made
 * from the model's input and output shapes).
 *
 * Runtime mode (--runtime): the ONNX session alone, no batcher, one session per batch size
 * (--batch 1,4,8,16): inferences/s and median/p90 time per batch, host buffers in and out
 * (what the batcher's executors do), so GPU figures compare directly with PyTorch at equal
 * batch sizes (bench/infer_gpu_bench.py runs both in one go).
 *
 * Output: a markdown table, or JSON lines (--json), one per level / batch size.
 * Backend options (--backend cuda, --device, --precision fp32|tf32|fp16, --cuda-graphs) are
 * passed through to the ONNX session options and to config.json ("instance_group",
 * "precision", "cuda_graphs"); a build or runtime without them says so and exits non-zero.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/fsutil.h"
#include "infer/onnx/onnx_bench.h"
#include "infer/onnx/onnx_model.h"
#include "infer/serving/batcher.h"
#include "infer/serving/model_repo.h"

#define MAX_LIST 32

struct bench_opts {
    int runtime;
    int json;
    const char *name;
    int64_t version;
    /* batcher */
    int conc[MAX_LIST], n_conc;
    int samples;                /* per request */
    int max_batch;              /* 0: the config's */
    long delay_us;              /* -2: the config's; -1: no dynamic batching */
    int preferred[GJ_MODEL_MAX_PREFERRED], n_preferred;
    int instances;              /* 0: the config's */
    double seconds;             /* per level (batcher) or per batch size (runtime) */
    long requests;              /* > 0: a fixed number of requests per level instead */
    const char *label;
    struct { char label[48]; int max_batch; long delay_us; } configs[MAX_LIST];
    int n_configs;
    int warm_all;               /* warm-up: every batch size 1..max (default) */
    int warm[MAX_LIST], n_warm; /* else these (0 in the list: none) */
    /* runtime */
    int batch[MAX_LIST], n_batch;
    int warmup;
    int min_runs;
    /* both */
    int threads;
    const char *backend;
    int device;
    const char *precision;      /* NULL: not given (fp32) */
    int cuda_graphs;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* User + system CPU seconds of this process so far. */
static double cpu_s(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double pct(const double *sorted, size_t n, double q)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)((double)n * q);
    return sorted[i < n ? i : n - 1];
}

static void fill_random(float *p, size_t n, uint32_t seed)
{
    for (size_t k = 0; k < n; k++) {
        seed = seed * 1664525u + 1013904223u;
        p[k] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
}

static int parse_list(const char *s, int *out, int cap, int lo)
{
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < lo || v > 1 << 20 || n >= cap)
            return -1;
        out[n++] = (int)v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return n;
}

static int precision_code(const char *p)
{
    if (!p || strcmp(p, "fp32") == 0)
        return 0;
    if (strcmp(p, "tf32") == 0)
        return 1;
    if (strcmp(p, "fp16") == 0)
        return 2;
    return -1;
}

/* Fills a session's options (runtime_main has checked the backend once for all sizes). */
static void session_options(const struct bench_opts *o, int batch, struct onnx_session_options *so)
{
    memset(so, 0, sizeof *so);
    so->batch = batch;
    so->threads = o->threads;
    so->backend = o->backend;
    so->device = o->device;
    so->precision = precision_code(o->precision);   /* numbered as enum onnx_precision */
    so->cuda_graphs = o->cuda_graphs;
}

/* ---- runtime mode -------------------------------------------------------------------- */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The last component of a directory path, trailing slashes ignored, into out (size n). */
static void dir_name_of(const char *path, char *out, size_t n)
{
    size_t l = strlen(path);
    while (l > 1 && path[l - 1] == '/')
        l--;
    size_t b = l;
    while (b > 0 && path[b - 1] != '/')
        b--;
    snprintf(out, n, "%.*s", (int)(l - b), path + b);
}

static int runtime_one(const struct bench_opts *o, const char *label, const onnx_model *m, int batch)
{
    struct gj_error err = { 0 };
    struct onnx_session_options so;
    session_options(o, batch, &so);
    struct onnx_bench_params bp = { .seconds = o->seconds, .warmup = o->warmup,
                                    .min_runs = o->min_runs };
    struct onnx_bench_result r;
    if (onnx_bench_batch(m, &so, &bp, &r, &err)) {
        fprintf(stderr, "bench infer: %s batch %d (%s): %s\n", label, batch, o->backend, err.message);
        return -1;
    }
    double thr = (double)r.runs * batch / r.total_s, med = r.median_s * 1e3;
    const char *prec = o->precision ? o->precision : "fp32";
    if (o->json)
        printf("{\"mode\": \"runtime\", \"model\": \"%s\", \"backend\": \"%s\", \"device\": %d, "
               "\"precision\": \"%s\", \"cuda_graphs\": %s, \"threads\": %d, \"batch\": %d, "
               "\"runs\": %zu, \"seconds\": %.3f, \"throughput\": %.2f, \"median_ms\": %.3f, "
               "\"median_throughput\": %.2f, \"p90_ms\": %.3f, \"min_ms\": %.3f, "
               "\"session_ms\": %.1f, \"warmup_ms\": %.1f, \"arena_mib\": %.1f}\n",
               label, o->backend, o->device, prec, o->cuda_graphs ? "true" : "false", o->threads,
               batch, r.runs, r.total_s, thr, med, med > 0 ? batch * 1e3 / med : 0.0,
               r.p90_s * 1e3, r.min_s * 1e3, r.create_s * 1e3, r.warmup_s * 1e3,
               (double)r.arena_bytes / 1048576.0);
    else
        printf("| %s | %s | %s | %d | %.1f | %.2f | %.2f | %zu | %.0f |\n", label, o->backend, prec,
               batch, thr, med, r.p90_s * 1e3, r.runs, r.create_s * 1e3);
    fflush(stdout);
    return 0;
}

static int runtime_main(const struct bench_opts *o, const char *onnx_path)
{
    struct gj_error err = { 0 };
    onnx_model *m = onnx_model_load_file(onnx_path, 0, &err);
    if (!m) {
        fprintf(stderr, "bench infer: %s: %s\n", onnx_path, err.message);
        return 1;
    }
    const char *label = o->name ? o->name : base_name(onnx_path);
    struct gj_error why = { 0 };
    if (!onnx_backend_available(o->backend, &why)) {
        fprintf(stderr, "bench infer: backend %s: %s\n", o->backend, why.message);
        onnx_model_free(m);
        return 1;
    }
    if (!o->json) {
        printf("| model | backend | precision | batch | inferences/s | median ms/batch | p90 ms "
               "| runs | session ms |\n|---|---|---|---|---|---|---|---|---|\n");
        fflush(stdout);
    }
    int rc = 0;
    for (int i = 0; i < o->n_batch; i++)
        if (runtime_one(o, label, m, o->batch[i]))
            rc = 1;
    onnx_model_free(m);
    return rc;
}

/* ---- batcher mode --------------------------------------------------------------------- */

struct client {
    gj_batcher *b;
    const float *in;
    size_t samples;
    float *out;
    double deadline;    /* time mode */
    size_t fixed;       /* > 0: this many requests */
    double *lat;
    size_t n, cap;
    int failures;
    char first_error[512];
};

static void *client_main(void *arg)
{
    struct client *c = arg;
    for (;;) {
        if (c->fixed ? c->n >= c->fixed : (c->n > 0 && now_s() >= c->deadline))
            break;
        if (c->n == c->cap) {
            size_t cap = c->cap ? 2 * c->cap : 256;
            double *bigger = realloc(c->lat, cap * sizeof *bigger);
            if (!bigger)
                break;
            c->lat = bigger;
            c->cap = cap;
        }
        struct gj_error err = { 0 };
        double t0 = now_s();
        if (gj_batcher_infer(c->b, c->in, c->samples, c->out, 0, NULL, &err) != GJ_BATCH_OK) {
            if (!c->failures++)
                snprintf(c->first_error, sizeof c->first_error, "%s", err.message);
            if (!c->fixed && now_s() >= c->deadline)
                break;
        }
        c->lat[c->n++] = now_s() - t0;
    }
    return NULL;
}

/* Writes DIR/NAME/config.json from the source config (or one made from the model's
 * shapes) with the options of the run. 0 or -1. */
static int write_config(const struct bench_opts *o, const char *src_cfg, const char *onnx_path,
                        const char *dst)
{
    json_t *cfg;
    if (src_cfg) {
        json_error_t je;
        cfg = json_load_file(src_cfg, 0, &je);
        if (!cfg) {
            fprintf(stderr, "bench infer: %s: line %d: %s\n", src_cfg, je.line, je.text);
            return -1;
        }
    } else {
        struct gj_error err = { 0 };
        onnx_model *m = onnx_model_load_file(onnx_path, 0, &err);
        if (!m) {
            fprintf(stderr, "bench infer: %s: %s\n", onnx_path, err.message);
            return -1;
        }
        /* The concrete shapes of a batch-1 CPU session (a graph's declared output shape
         * may be missing). */
        struct onnx_session_options so = { .batch = 1, .threads = 1, .backend = "cpu" };
        onnx_session *s = onnx_model_num_inputs(m) == 1 ? onnx_session_create(m, &so, &err) : NULL;
        const struct onnx_io_desc *in = s ? onnx_session_input(s, 0) : NULL;
        const struct onnx_io_desc *out = s ? onnx_session_output(s, 0) : NULL;
        if (!s || in->rank != 4 || out->rank != 2 || out->dims[1] < 1) {
            fprintf(stderr, "bench infer: %s: need one input [N, C, H, W] and an output [N, K] "
                            "(or a model directory with a config.json)%s%s\n", onnx_path,
                    s ? "" : ": ", s ? "" : err.message);
            onnx_session_free(s);
            onnx_model_free(m);
            return -1;
        }
        json_t *labels = json_array();
        for (int64_t k = 0; k < out->dims[1]; k++) {
            char l[32];
            snprintf(l, sizeof l, "label%lld", (long long)k);
            json_array_append_new(labels, json_string(l));
        }
        cfg = json_pack("{s:s, s:{s:s, s:[I,I,I], s:s}, s:{s:s, s:[I], s:s}, s:o}",
                        "platform", "onnx",
                        "input", "name", in->name, "dims", (json_int_t)in->dims[1],
                        (json_int_t)in->dims[2], (json_int_t)in->dims[3], "datatype", "FP32",
                        "output", "name", out->name, "dims", (json_int_t)out->dims[1],
                        "datatype", "FP32", "labels", labels);
        onnx_session_free(s);
        onnx_model_free(m);
        if (!cfg)
            return -1;
    }
    json_object_del(cfg, "name");
    if (o->max_batch > 0)
        json_object_set_new(cfg, "max_batch_size", json_integer(o->max_batch));
    if (o->delay_us == -1) {
        json_object_del(cfg, "dynamic_batching");
    } else if (o->delay_us >= 0 || o->n_preferred) {
        json_t *db = json_object_get(cfg, "dynamic_batching");
        if (!json_is_object(db)) {
            db = json_object();
            json_object_set_new(cfg, "dynamic_batching", db);
        }
        if (o->delay_us >= 0)
            json_object_set_new(db, "max_queue_delay_us", json_integer(o->delay_us));
        if (o->n_preferred < 0) {
            json_object_del(db, "preferred_batch_sizes");
        } else if (o->n_preferred) {
            json_t *p = json_array();
            for (int i = 0; i < o->n_preferred; i++)
                json_array_append_new(p, json_integer(o->preferred[i]));
            json_object_set_new(db, "preferred_batch_sizes", p);
        }
    }
    {   /* preferred sizes above a lowered max batch would be refused: drop them */
        json_t *db = json_object_get(cfg, "dynamic_batching");
        json_t *pref = json_is_object(db) ? json_object_get(db, "preferred_batch_sizes") : NULL;
        json_int_t mbv = json_integer_value(json_object_get(cfg, "max_batch_size"));
        if (json_is_array(pref) && mbv > 0) {
            for (size_t k = json_array_size(pref); k-- > 0;)
                if (json_integer_value(json_array_get(pref, k)) > mbv)
                    json_array_remove(pref, k);
            if (json_array_size(pref) == 0)
                json_object_del(db, "preferred_batch_sizes");
        }
    }
    /* Where the instances run: KIND_GPU for --backend cuda, KIND_CPU for cpu (KIND_AUTO,
     * the config's default, would take a GPU where there is one). */
    json_t *ig = json_object_get(cfg, "instance_group");
    if (json_is_array(ig))
        ig = json_array_get(ig, 0);
    int count = o->instances;
    if (count <= 0)
        count = json_is_object(ig) && json_integer_value(json_object_get(ig, "count")) > 0
                ? (int)json_integer_value(json_object_get(ig, "count"))
                : json_integer_value(json_object_get(cfg, "instances_per_device")) > 0
                ? (int)json_integer_value(json_object_get(cfg, "instances_per_device")) : 1;
    json_t *group = json_pack("{s:s, s:i}", "kind", strcmp(o->backend, "cpu") == 0 ? "KIND_CPU"
                              : "KIND_GPU", "count", count);
    if (strcmp(o->backend, "cpu") != 0)
        json_object_set_new(group, "gpus", json_pack("[i]", o->device));
    json_object_set_new(cfg, "instance_group", group);
    json_object_del(cfg, "instances_per_device");
    if (o->precision)
        json_object_set_new(cfg, "precision", json_string(o->precision));
    if (strcmp(o->backend, "cpu") != 0)
        json_object_set_new(cfg, "cuda_graphs", json_boolean(o->cuda_graphs));
    int rc = json_dump_file(cfg, dst, JSON_INDENT(2)) == 0 ? 0 : -1;
    json_decref(cfg);
    return rc;
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_reg(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static void level(const struct bench_opts *o, gj_batcher *b, const char *name, const float *in,
                  int conc, int *rc)
{
    struct client *c = calloc((size_t)conc, sizeof *c);
    pthread_t *th = calloc((size_t)conc, sizeof *th);
    size_t per = o->requests > 0 ? (size_t)((o->requests + conc - 1) / conc) : 0;
    size_t out_floats = gj_batcher_output_floats(b);
    if (!c || !th) {
        free(c);
        free(th);
        *rc = 1;
        return;
    }
    struct gj_batch_stats s0, s1;
    gj_batch_stats_get(name, o->version, &s0);
    double cpu0 = cpu_s(), t0 = now_s();
    int started = 0;
    for (int i = 0; i < conc; i++) {
        c[i].b = b;
        c[i].in = in;
        c[i].samples = (size_t)o->samples;
        c[i].out = malloc((size_t)o->samples * out_floats * sizeof(float));
        c[i].fixed = per;
        c[i].deadline = t0 + o->seconds;
        if (!c[i].out || pthread_create(&th[i], NULL, client_main, &c[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    double el = now_s() - t0, cpu = cpu_s() - cpu0;
    gj_batch_stats_get(name, o->version, &s1);
    size_t n = 0, k = 0;
    int fails = 0;
    const char *first_error = "";
    for (int i = 0; i < started; i++) {
        n += c[i].n;
        fails += c[i].failures;
        if (c[i].failures && !*first_error)
            first_error = c[i].first_error;
    }
    double *all = malloc((n ? n : 1) * sizeof *all);
    for (int i = 0; all && i < started; i++) {
        memcpy(all + k, c[i].lat, c[i].n * sizeof(double));
        k += c[i].n;
    }
    if (all)
        qsort(all, n, sizeof *all, cmp_double);
    uint64_t execs = s1.exec_count - s0.exec_count, samples = s1.inference_count - s0.inference_count;
    uint64_t reqs = (s1.request_success - s0.request_success);
    double mean_batch = execs ? (double)samples / (double)execs : 0.0;
    double queue_ms = reqs ? (double)(s1.queue_duration_us - s0.queue_duration_us) / (double)reqs / 1e3 : 0;
    double compute_ms = reqs ? (double)(s1.compute_infer_duration_us - s0.compute_infer_duration_us) /
                               (double)reqs / 1e3 : 0;
    double p50 = all ? pct(all, n, 0.5) * 1e3 : 0, p99 = all ? pct(all, n, 0.99) * 1e3 : 0;
    double thr = el > 0 ? (double)(n - (size_t)fails) / el : 0;
    const char *prec = o->precision ? o->precision : "fp32";
    char delay[32];
    if (o->delay_us >= 0)
        snprintf(delay, sizeof delay, "%ld", o->delay_us);
    else
        snprintf(delay, sizeof delay, "%s", o->delay_us == -1 ? "off" : "config");
    if (o->json)
        printf("{\"mode\": \"batcher\", \"model\": \"%s\", \"label\": \"%s\", \"backend\": \"%s\", "
               "\"precision\": \"%s\", \"cuda_graphs\": %s, \"max_batch\": %d, \"delay_us\": %ld, "
               "\"instances\": %d, \"threads\": %d, \"concurrency\": %d, \"requests\": %zu, "
               "\"failures\": %d, \"seconds\": %.3f, \"throughput\": %.1f, \"p50_ms\": %.2f, "
               "\"p99_ms\": %.2f, \"mean_batch\": %.2f, \"queue_ms\": %.2f, \"compute_ms\": %.2f, "
               "\"samples\": %d, \"inferences_per_s\": %.1f, \"cpu_s\": %.3f%s%s%s}\n",
               name, o->label ? o->label : name, o->backend, prec, o->cuda_graphs ? "true" : "false",
               gj_batcher_max_batch_size(b), o->delay_us, o->instances, o->threads, conc, n, fails,
               el, thr, p50, p99, mean_batch, queue_ms, compute_ms, o->samples, thr * o->samples, cpu,
               fails ? ", \"error\": \"" : "", fails ? first_error : "", fails ? "\"" : "");
    else
        printf("| %s | %s | %d | %s | %d | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %d |\n",
               o->label ? o->label : name, prec, gj_batcher_max_batch_size(b), delay, conc, thr, p50, p99, mean_batch, queue_ms,
               compute_ms, fails);
    if (fails) {
        fprintf(stderr, "bench infer: concurrency %d: %d failed requests, first: %s\n", conc, fails,
                first_error);
        *rc = 1;
    }
    fflush(stdout);
    for (int i = 0; i < conc; i++) {
        free(c[i].lat);
        free(c[i].out);
    }
    free(all);
    free(c);
    free(th);
}

static int warm_this(const struct bench_opts *o, int k, int max_batch)
{
    if (o->warm_all)
        return 1;
    for (int i = 0; i < o->n_warm; i++)
        if (o->warm[i] == k || (o->warm[i] == -1 && k == max_batch))
            return 1;
    return 0;
}

static int batcher_one(const struct bench_opts *o, const char *name, const char *cfg_path,
                       const char *src_onnx);

static int batcher_main(struct bench_opts *o, const char *path)
{
    char src_cfg[GJ_PATH_MAX], src_onnx[GJ_PATH_MAX];
    const char *cfg_path = NULL;
    if (is_dir(path)) {
        snprintf(src_onnx, sizeof src_onnx, "%s/%lld/model.onnx", path, (long long)o->version);
        snprintf(src_cfg, sizeof src_cfg, "%s/%lld/config.json", path, (long long)o->version);
        if (!is_reg(src_cfg))
            snprintf(src_cfg, sizeof src_cfg, "%s/config.json", path);
        if (!is_reg(src_onnx)) {
            fprintf(stderr, "bench infer: no %s\n", src_onnx);
            return 1;
        }
        if (is_reg(src_cfg))
            cfg_path = src_cfg;
        if (!o->name) {
            static char nm[GJ_MODEL_NAME_MAX];
            dir_name_of(path, nm, sizeof nm);
            o->name = nm;
        }
    } else {
        if (!is_reg(path)) {
            fprintf(stderr, "bench infer: no model directory or .onnx file at %s\n", path);
            return 1;
        }
        snprintf(src_onnx, sizeof src_onnx, "%s", path);
        if (!o->name) {
            static char nm[GJ_MODEL_NAME_MAX];
            snprintf(nm, sizeof nm, "%s", base_name(path));
            char *dot = strrchr(nm, '.');
            if (dot && dot != nm)
                *dot = '\0';
            o->name = nm;
        }
    }
    if (!gj_model_name_ok(o->name)) {
        fprintf(stderr, "bench infer: '%s' is not a model name (--name)\n", o->name);
        return 2;
    }
    if (o->n_configs == 0)
        return batcher_one(o, o->name, cfg_path, src_onnx);
    /* Several configurations in one process: the CUDA backend's algorithm choices (per
     * convolution shape, process-wide) are found once. */
    int rc = 0;
    const char *base = o->name;
    for (int i = 0; i < o->n_configs; i++) {
        char nm[GJ_MODEL_NAME_MAX];
        snprintf(nm, sizeof nm, "%s-%s", base, o->configs[i].label);
        o->max_batch = o->configs[i].max_batch;
        o->delay_us = o->configs[i].delay_us;
        o->label = o->configs[i].label;
        if (!gj_model_name_ok(nm)) {
            fprintf(stderr, "bench infer: '%s' is not a model name (--config label)\n", nm);
            rc = 2;
            continue;
        }
        if (batcher_one(o, nm, cfg_path, src_onnx))
            rc = 1;
    }
    return rc;
}

/* One configuration: a temporary repository, a batcher, the warm-up, the levels. */
static int batcher_one(const struct bench_opts *o, const char *name, const char *cfg_path,
                       const char *src_onnx)
{
    char dir[GJ_PATH_MAX], mdir[GJ_PATH_MAX], vdir[GJ_PATH_MAX], p[GJ_PATH_MAX], vname[24];
    if (gj_make_temp_dir(dir, sizeof dir, "gj-bench-infer") != 0) {
        perror("bench infer: temporary directory");
        return 1;
    }
    int rc = 1;
    gj_served_model *m = NULL;
    gj_batcher *b = NULL;
    float *in = NULL;
    snprintf(vname, sizeof vname, "%lld", (long long)o->version);
    if (gj_path_join(mdir, sizeof mdir, dir, name) || gj_path_join(vdir, sizeof vdir, mdir, vname) ||
        gj_mkdir_p(vdir, 0755) != 0) {
        fprintf(stderr, "bench infer: cannot create the model's directory in %s: %s\n", dir, strerror(errno));
        goto out;
    }
    char *abs = realpath(src_onnx, NULL);
    if (!abs || gj_path_join(p, sizeof p, vdir, "model.onnx") || symlink(abs, p) != 0) {
        fprintf(stderr, "bench infer: cannot link %s: %s\n", src_onnx, strerror(errno));
        free(abs);
        goto out;
    }
    free(abs);
    if (gj_path_join(p, sizeof p, mdir, "config.json")) {
        fprintf(stderr, "bench infer: %s/config.json: %s\n", mdir, strerror(errno));
        goto out;
    }
    if (write_config(o, cfg_path, src_onnx, p))
        goto out;
    struct gj_error err = { 0 };
    m = gj_served_model_load(mdir, name, o->version, &err);
    if (!m) {
        fprintf(stderr, "bench infer: %s\n", err.message);
        goto out;
    }
    struct gj_batcher_options bo = { .max_queue_delay_us = -1, .dynamic_batching = -1,
                                     .threads_per_instance = o->threads,
                                     .max_queue_size = 1 << 16,
                                     .device = strcmp(o->backend, "cpu") == 0 ? -1 : o->device };
    b = gj_batcher_create(m, &bo, &err);
    if (!b) {
        fprintf(stderr, "bench infer: %s\n", err.message);
        goto out;
    }
    size_t inf = gj_batcher_input_floats(b), outf = gj_batcher_output_floats(b);
    int mb = gj_batcher_max_batch_size(b);
    if (o->samples > mb) {
        fprintf(stderr, "bench infer: --samples %d is over the max batch size %d of model '%s'\n",
                o->samples, mb, name);
        goto out;
    }
    in = malloc((size_t)o->samples * inf * sizeof *in);
    if (!in)
        goto out;
    fill_random(in, (size_t)o->samples * inf, 12345);
    {   /* warm-up: a session per batch size (the executors create them on first use) */
        double tw = now_s();
        float *many = malloc((size_t)mb * inf * sizeof *many), *mo = malloc((size_t)mb * outf * sizeof *mo);
        int ok = many && mo;
        int nw = 0;
        for (int k = 1; ok && k <= mb; k++) {
            if (!warm_this(o, k, mb))
                continue;
            nw++;
            for (size_t i = 0; i < (size_t)k; i++)
                memcpy(many + i * inf, in, inf * sizeof *in);
            for (int w = 0; ok && w < (k == 1 || k == mb ? 2 : 1); w++)
                if (gj_batcher_infer(b, many, (size_t)k, mo, 0, NULL, &err) != GJ_BATCH_OK) {
                    fprintf(stderr, "bench infer: warm-up at batch %d: %s\n", k, err.message);
                    ok = 0;
                }
        }
        free(many);
        free(mo);
        if (!ok)
            goto out;
        fprintf(stderr, "bench infer: %s: warm-up (%d batch sizes of 1..%d) %.1f s\n", name, nw, mb,
                now_s() - tw);
    }
    if (!o->json) {
        printf("| config | precision | max batch | delay us | conc | req/s | p50 ms | p99 ms | "
               "mean batch | queue ms | compute ms | failed |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        fflush(stdout);
    }
    rc = 0;
    for (int i = 0; i < o->n_conc; i++)
        level(o, b, name, in, o->conc[i], &rc);
out:
    if (b)
        gj_batcher_destroy(b);
    if (m)
        gj_served_model_release(m);
    free(in);
    gj_rm_rf(dir);
    return rc;
}

static void usage(void)
{
    fprintf(stderr,
        "usage: gpujobd bench infer [options] MODEL_DIR|MODEL.onnx\n"
        "  Batcher (default): client threads each sending requests of --samples samples through\n"
        "  the dynamic batcher; requests/s, p50/p99 ms, mean batch per concurrency level.\n"
        "    --concurrency 1,2,4,8,16,32,64   client threads per level\n"
        "    --samples N          samples per request (default 1; at most the max batch size)\n"
        "    --seconds S          per level (default 3), or --requests N per level\n"
        "    --max-batch N        max_batch_size (default: the config's)\n"
        "    --delay-us D|off     dynamic_batching.max_queue_delay_us; off: no dynamic batching\n"
        "    --preferred 4,8|none dynamic_batching.preferred_batch_sizes (none: drop the config's)\n"
        "    --instances N        executor instances (instances_per_device / instance_group.count)\n"
        "    --label L            a label for the output rows\n"
        "    --config L:MB:D      a configuration (label, max batch, delay us|off); repeat it to run\n"
        "                         several in one process (model name NAME-L each)\n"
        "    --warmup-batches all|none|1,4,max   batch sizes run once before measuring (default all:\n"
        "                         every size 1..max batch, so each session exists beforehand)\n"
        "  Runtime (--runtime): the ONNX session alone, per batch size.\n"
        "    --batch 1,4,8,16     batch sizes   --seconds S (default 3)   --warmup N (default 3)\n"
        "    --min-runs N         (default 5)\n"
        "  Both:\n"
        "    --threads N          CPU threads per session/instance (default 2)\n"
        "    --backend cpu|cuda   --device N   --precision fp32|tf32|fp16   --cuda-graphs\n"
        "    --name NAME --version V   --json (JSON lines instead of a markdown table)\n"
        "  Full GPU comparison with PyTorch, torch.compile, ONNX Runtime and the HTTPS path:\n"
        "    python3 bench/infer_gpu_bench.py (bench/INFER_NOTES.md)\n");
}

int gj_bench_infer_main(int argc, char **argv)
{
    struct bench_opts o = { .version = 1, .samples = 1, .delay_us = -2, .seconds = 3, .warmup = 3, .warm_all = 1,
                            .min_runs = 5, .threads = 2, .backend = "cpu", .device = 0 };
    static const int dconc[] = { 1, 2, 4, 8, 16, 32, 64 };
    memcpy(o.conc, dconc, sizeof dconc);
    o.n_conc = 7;
    o.batch[0] = 1;
    o.batch[1] = 4;
    o.batch[2] = 8;
    o.batch[3] = 16;
    o.n_batch = 4;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV() do { if (!v) { fprintf(stderr, "bench infer: %s needs a value\n", a); return 2; } i++; } while (0)
        if (strcmp(a, "--runtime") == 0) {
            o.runtime = 1;
        } else if (strcmp(a, "--json") == 0) {
            o.json = 1;
        } else if (strcmp(a, "--cuda-graphs") == 0) {
            o.cuda_graphs = 1;
        } else if (strcmp(a, "--concurrency") == 0) {
            NEEDV();
            if ((o.n_conc = parse_list(v, o.conc, MAX_LIST, 1)) < 1)
                return fprintf(stderr, "bench infer: bad --concurrency %s\n", v), 2;
        } else if (strcmp(a, "--batch") == 0) {
            NEEDV();
            if ((o.n_batch = parse_list(v, o.batch, MAX_LIST, 1)) < 1)
                return fprintf(stderr, "bench infer: bad --batch %s\n", v), 2;
        } else if (strcmp(a, "--preferred") == 0) {
            NEEDV();
            if (strcmp(v, "none") == 0)
                o.n_preferred = -1;
            else if ((o.n_preferred = parse_list(v, o.preferred, GJ_MODEL_MAX_PREFERRED, 1)) < 1)
                return fprintf(stderr, "bench infer: bad --preferred %s\n", v), 2;
        } else if (strcmp(a, "--config") == 0) {
            NEEDV();
            char lab[48], dl[32];
            int mbv;
            if (o.n_configs >= MAX_LIST || sscanf(v, "%47[A-Za-z0-9._-]:%d:%31s", lab, &mbv, dl) != 3 ||
                mbv < 1 || mbv > GJ_MODEL_MAX_BATCH ||
                (strcmp(dl, "off") != 0 && (atol(dl) < 0 || strspn(dl, "0123456789") != strlen(dl))))
                return fprintf(stderr, "bench infer: bad --config %s (LABEL:MAX_BATCH:DELAY_US|off)\n", v), 2;
            snprintf(o.configs[o.n_configs].label, sizeof o.configs[0].label, "%s", lab);
            o.configs[o.n_configs].max_batch = mbv;
            o.configs[o.n_configs].delay_us = strcmp(dl, "off") == 0 ? -1 : atol(dl);
            o.n_configs++;
        } else if (strcmp(a, "--warmup-batches") == 0) {
            NEEDV();
            o.warm_all = strcmp(v, "all") == 0;
            o.n_warm = 0;
            if (!o.warm_all && strcmp(v, "none") != 0) {
                char tmp[256];
                snprintf(tmp, sizeof tmp, "%s", v);
                for (char *t = strtok(tmp, ","); t && o.n_warm < MAX_LIST; t = strtok(NULL, ","))
                    o.warm[o.n_warm++] = strcmp(t, "max") == 0 ? -1 : atoi(t);
            }
        } else if (strcmp(a, "--max-batch") == 0) {
            NEEDV();
            o.max_batch = atoi(v);
        } else if (strcmp(a, "--delay-us") == 0) {
            NEEDV();
            o.delay_us = strcmp(v, "off") == 0 ? -1 : atol(v);
            if (o.delay_us < -1)
                return fprintf(stderr, "bench infer: bad --delay-us %s\n", v), 2;
        } else if (strcmp(a, "--samples") == 0) {
            NEEDV();
            o.samples = atoi(v);
        } else if (strcmp(a, "--instances") == 0) {
            NEEDV();
            o.instances = atoi(v);
        } else if (strcmp(a, "--threads") == 0) {
            NEEDV();
            o.threads = atoi(v);
        } else if (strcmp(a, "--seconds") == 0) {
            NEEDV();
            o.seconds = atof(v);
        } else if (strcmp(a, "--requests") == 0) {
            NEEDV();
            o.requests = atol(v);
        } else if (strcmp(a, "--warmup") == 0) {
            NEEDV();
            o.warmup = atoi(v);
        } else if (strcmp(a, "--min-runs") == 0) {
            NEEDV();
            o.min_runs = atoi(v);
        } else if (strcmp(a, "--backend") == 0) {
            NEEDV();
            o.backend = v;
        } else if (strcmp(a, "--device") == 0) {
            NEEDV();
            o.device = atoi(v);
        } else if (strcmp(a, "--precision") == 0) {
            NEEDV();
            o.precision = v;
        } else if (strcmp(a, "--name") == 0) {
            NEEDV();
            o.name = v;
        } else if (strcmp(a, "--label") == 0) {
            NEEDV();
            o.label = v;
        } else if (strcmp(a, "--version") == 0) {
            NEEDV();
            o.version = atoll(v);
        } else {
            usage();
            return 2;
        }
#undef NEEDV
    }
    if (i != argc - 1 || o.threads < 1 || o.seconds <= 0 || o.warmup < 0 || o.min_runs < 1 ||
        o.version < 1 || o.device < 0 || o.samples < 1 || o.instances < 0 || o.max_batch < 0 ||
        o.max_batch > GJ_MODEL_MAX_BATCH || precision_code(o.precision) < 0 ||
        (strcmp(o.backend, "cpu") != 0 && strcmp(o.backend, "cuda") != 0)) {
        usage();
        return 2;
    }
    const char *path = argv[i];
    if (o.runtime) {
        char onnx_path[GJ_PATH_MAX];
        if (is_dir(path))
            snprintf(onnx_path, sizeof onnx_path, "%s/%lld/model.onnx", path, (long long)o.version);
        else
            snprintf(onnx_path, sizeof onnx_path, "%s", path);
        if (!o.name && is_dir(path)) {
            static char nm[GJ_MODEL_NAME_MAX];
            dir_name_of(path, nm, sizeof nm);
            o.name = nm;
        }
        return runtime_main(&o, onnx_path);
    }
    return batcher_main(&o, path);
}
