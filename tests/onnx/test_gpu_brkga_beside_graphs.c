/*
 * test_gpu_brkga_beside_graphs — suite 'gpu': BRKGA on the GPU and ONNX sessions that capture
 * CUDA graphs, at once on one GPU, as two slots of gpujobd may run them.
 *
 * A capture fails (or captures the other's work) when anything else on the device touches the
 * legacy default stream or calls cudaDeviceSynchronize while it is under way; BRKGA has a
 * non-blocking stream of its own for that reason. One thread runs BRKGA on the GPU; the other
 * creates one session after another (CUDA graphs on: run 1 warm-up, run 2 captured, run 3
 * replayed) until BRKGA is done, each run's output against the CPU backend's. BRKGA's history
 * must equal the CPU backend's bit for bit, as in brkga_gpu_vs_cpu. Exits 77 without a GPU.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brkga/brkga_engine.h"
#include "brkga/brkga_gpu.h"
#include "brkga/brkga_kind.h"
#include "brkga/brkga_net.h"
#include "infer/onnx/onnx_model.h"
#include "pbw.h"

#define MIN_SESSIONS 8   /* sessions (captures) the ONNX thread runs at least, BRKGA or not */

static atomic_int brkga_done;

/* ---- BRKGA ------------------------------------------------------------------------------------- */

struct brkga_job {
    struct brkga_net net;
    struct brkga_params prm;
    struct brkga_decoder dec;
    struct brkga_result res;
    int rc;
    char msg[sizeof ((struct gj_error *)0)->message];
};

static int brkga_setup(struct brkga_job *j)
{
    char *nt, *dt;
    if (brkga_bench_instance(30, 10, 20, 200, 4000, 7, &nt, &dt))
        return -1;
    struct brkga_net_input in;
    memset(&in, 0, sizeof in);
    struct gj_error ge = { 0 };
    int rc = brkga_net_parse_network(nt, strlen(nt), &in, &ge) || brkga_net_parse_demands(dt, strlen(dt), &in, &ge) ||
             brkga_net_build(&j->net, &in, 3, 20, 0, NULL, &ge);
    brkga_net_input_free(&in);
    free(nt);
    free(dt);
    if (rc) {
        fprintf(stderr, "instance: %s\n", ge.message);
        return -1;
    }
    j->dec = (struct brkga_decoder){ (size_t)(j->net.m.n_vlinks + j->net.m.n_demands),
                                     brkga_net_scratch_bytes(&j->net.m), &j->net.m, brkga_net_decode_cb, 1 };
    struct brkga_params *p = &j->prm;
    memset(p, 0, sizeof *p);
    p->n = j->dec.n_genes;
    p->p = 512;
    p->ne = p->p * 3 / 10;
    p->nm = p->p / 5;
    p->rhoe = 0.65;
    p->K = 2;
    p->exchange_interval = 10;
    p->exchange_count = 2;
    p->reset_after = 25;
    p->primary = BRKGA_STOP_GENERATIONS;
    p->secondary = BRKGA_STOP_NONE;
    p->max_generations = 100;
    p->seed = 6271412974226616250ull;
    p->threads = 2;
    p->stats_interval = 50;
    return 0;
}

static void *brkga_thread(void *arg)
{
    struct brkga_job *j = arg;
    struct gj_error ge = { 0 };
    j->rc = brkga_solve(&j->prm, &j->dec, NULL, &j->res, &ge);
    if (j->rc)
        snprintf(j->msg, sizeof j->msg, "%s", ge.message);
    atomic_store(&brkga_done, 1);
    return NULL;
}

/* ---- ONNX with CUDA graphs --------------------------------------------------------------------- */

static float *rfloats(size_t n, unsigned *seed)
{
    float *v = malloc(n * sizeof *v);
    if (!v)
        abort();
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        v[i] = (float)(*seed >> 8) / 16777216.0f - 0.5f;
    }
    return v;
}

/* conv 3->16, relu, conv 16->8, global average pool, 8x10 matmul: y is 4x10 */
static struct pb small_cnn(float **owned, unsigned *seed)
{
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 4, D(4, 3, 32, 32));
    gb_init(&b, "w", T_FLOAT, 4, D(16, 3, 3, 3), owned[0] = rfloats(16 * 27, seed));
    gb_init(&b, "b", T_FLOAT, 1, D(16), owned[1] = rfloats(16, seed));
    gb_init(&b, "w2", T_FLOAT, 4, D(8, 16, 3, 3), owned[2] = rfloats(8 * 16 * 9, seed));
    gb_init(&b, "fc", T_FLOAT, 2, D(8, 10), owned[3] = rfloats(80, seed));
    struct pb at[1] = { pb_attr_ints("pads", 4, D(1, 1, 1, 1)) };
    gb_node(&b, "Conv", S("x", "w", "b"), S("c1"), 1, at);
    gb_node(&b, "Relu", S("c1"), S("r1"), 0, NULL);
    gb_node(&b, "Conv", S("r1", "w2"), S("c2"), 0, NULL);
    gb_node(&b, "GlobalAveragePool", S("c2"), S("g"), 0, NULL);
    gb_node(&b, "Flatten", S("g"), S("f"), 0, NULL);
    gb_node(&b, "MatMul", S("f", "fc"), S("y"), 0, NULL);
    gb_output(&b, "y");
    return gb_finish(&b);
}

struct onnx_job {
    onnx_model *m;
    const float *x;
    float ref[40];
    int sessions, runs_bad, rc;
    char msg[600];
};

static double rel_l2(const float *a, const float *ref, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* One session: 3 runs (warm-up, capture, replay), each output within 1e-4 of the CPU's. */
static int graph_session(struct onnx_job *j)
{
    struct onnx_session_options o = { .batch = 4, .threads = 1, .backend = "cuda", .cuda_graphs = 1 };
    struct gj_error err = { 0 };
    onnx_session *s = onnx_session_create(j->m, &o, &err);
    if (!s) {
        snprintf(j->msg, sizeof j->msg, "session %d: %s", j->sessions + 1, err.message);
        return -1;
    }
    const void *ins[1] = { j->x };
    float y[40];
    void *outs[1] = { y };
    int rc = 0;
    for (int r = 0; r < 3 && !rc; r++) {
        memset(y, 0xff, sizeof y);
        if (onnx_session_run(s, ins, outs, &err)) {
            snprintf(j->msg, sizeof j->msg, "session %d, run %d: %s", j->sessions + 1, r + 1, err.message);
            rc = -1;
        } else if (!(rel_l2(y, j->ref, 40) <= 1e-4)) {
            snprintf(j->msg, sizeof j->msg, "session %d, run %d: relative L2 %.3g against the CPU", j->sessions + 1,
                     r + 1, rel_l2(y, j->ref, 40));
            rc = -1;
        }
    }
    onnx_session_free(s);
    return rc;
}

static void *onnx_thread(void *arg)
{
    struct onnx_job *j = arg;
    while (!j->rc && (j->sessions < MIN_SESSIONS || !atomic_load(&brkga_done))) {
        j->rc = graph_session(j);
        j->sessions++;
    }
    return NULL;
}

static int onnx_setup(struct onnx_job *j, float **owned)
{
    unsigned seed = 20261129u;
    struct pb mp = small_cnn(owned, &seed);
    struct gj_error err = { 0 };
    j->m = onnx_model_load_memory(mp.b, mp.n, &err);
    free(mp.b);
    if (!j->m) {
        fprintf(stderr, "load: %s\n", err.message);
        return -1;
    }
    j->x = owned[4] = rfloats(4 * 3 * 32 * 32, &seed);
    struct onnx_session_options cpu = { .batch = 4, .threads = 2, .backend = "cpu" };
    onnx_session *s = onnx_session_create(j->m, &cpu, &err);
    const void *ins[1] = { j->x };
    void *outs[1] = { j->ref };
    int rc = !s || onnx_session_run(s, ins, outs, &err);
    if (rc)
        fprintf(stderr, "cpu reference: %s\n", err.message);
    onnx_session_free(s);
    return rc ? -1 : 0;
}

/* ---- both at once ------------------------------------------------------------------------------ */

static int same_history(const struct brkga_result *a, const struct brkga_result *b, size_t n_genes)
{
    if (a->n_hist != b->n_hist)
        return 0;
    for (size_t i = 0; i < a->n_hist; i++)
        if (memcmp(&a->hist_best[i], &b->hist_best[i], sizeof(double)) ||
            memcmp(&a->hist_mean[i], &b->hist_mean[i], sizeof(double)))
            return 0;
    return !memcmp(a->best_keys, b->best_keys, n_genes * sizeof(float));
}

int main(void)
{
    struct gj_error why = { 0 };
    if (brkga_gpu_device_count() <= 0 || !onnx_backend_available("cuda", &why)) {
        printf("SKIP: no GPU for BRKGA or the ONNX CUDA backend%s%s\n", why.message[0] ? ": " : "", why.message);
        return 77;
    }
    static struct brkga_job bj;
    static struct onnx_job oj;
    float *owned[5] = { 0 };
    if (brkga_setup(&bj) || onnx_setup(&oj, owned))
        return 1;
    /* the CPU backend's history first: the GPU's must equal it */
    struct brkga_result cpu;
    struct gj_error ge = { 0 };
    bj.prm.device = -1;
    if (brkga_solve(&bj.prm, &bj.dec, NULL, &cpu, &ge)) {
        fprintf(stderr, "brkga cpu: %s\n", ge.message);
        return 1;
    }
    bj.prm.device = 0;
    pthread_t tb, to;
    if (pthread_create(&to, NULL, onnx_thread, &oj) || pthread_create(&tb, NULL, brkga_thread, &bj)) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    pthread_join(tb, NULL);
    pthread_join(to, NULL);
    int fails = 0;
    if (bj.rc) {
        printf("FAIL brkga on the GPU beside CUDA-graph captures: %s\n", bj.msg);
        fails++;
    } else if (!same_history(&cpu, &bj.res, bj.prm.n)) {
        printf("FAIL brkga on the GPU beside CUDA-graph captures: history differs from the CPU backend's\n");
        fails++;
    }
    if (oj.rc) {
        printf("FAIL onnx with CUDA graphs beside brkga: %s\n", oj.msg);
        fails++;
    }
    printf("brkga %d generations (%s), %d onnx sessions with CUDA graphs beside it: %s\n",
           (int)bj.prm.max_generations, bj.rc ? "failed" : "done", oj.sessions, fails ? "FAILED" : "ok");
    if (!bj.rc)
        brkga_result_free(&bj.res);
    brkga_result_free(&cpu);
    brkga_net_free(&bj.net);
    onnx_model_free(oj.m);
    for (int i = 0; i < 5; i++)
        free(owned[i]);
    return fails ? 1 : 0;
}
