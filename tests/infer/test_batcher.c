/*
 * test_batcher.c — cmocka tests of the dynamic batcher (compute/infer/serving/batcher.c)
 * on a small ONNX model written here (Conv + Relu + Flatten + Gemm on 1x8x8 images) and
 * the shipped demo model (part of the tree: missing, it fails): batching happens under
 * concurrent load, preferred sizes go at once, full queues and timeouts reject with 429 / 503,
 * every request gets its own answer exactly once and equal to an unbatched run (waiting in
 * gj_batcher_run or submitted with gj_batcher_submit), and destroying a batcher with
 * requests in flight answers all of them.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "common/fsutil.h"
#include "infer/onnx/onnx_model.h"
#include "infer/serving/batcher.h"
#include "infer/serving/model_repo.h"
#include "infer/serving/serving_host.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "../onnx/pbw.h"
#pragma GCC diagnostic pop

#define IN_FLOATS 64     /* 1 x 8 x 8 */
#define OUT_FLOATS 4

static char g_dir[256];
static gj_served_model *g_tiny;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint32_t rng_state = 12345;
static float frand(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((rng_state >> 8) & 0xffff) / 65536.0f - 0.5f;
}

/* image [N,1,8,8] -> Conv 2x(3x3, pad 1) -> Relu -> Flatten -> Gemm [128 -> 4] -> logits. */
static void write_tiny_model(const char *path)
{
    struct pb g = { 0 };
    int64_t wd[4] = { 2, 1, 3, 3 }, bd[1] = { 2 }, gd[2] = { 4, 128 }, gbd[1] = { 4 };
    float w[18], bc[2], gw[4 * 128], gb[4];
    for (int i = 0; i < 18; i++)
        w[i] = frand();
    for (int i = 0; i < 2; i++)
        bc[i] = frand() * 0.1f;
    for (int i = 0; i < 4 * 128; i++)
        gw[i] = frand() * 0.3f;
    for (int i = 0; i < 4; i++)
        gb[i] = frand();
    const char *conv_in[] = { "image", "w", "b", NULL }, *conv_out[] = { "c", NULL };
    int64_t pads[4] = { 1, 1, 1, 1 }, ks[2] = { 3, 3 };
    struct pb cattr[2] = { pb_attr_ints("pads", 4, pads), pb_attr_ints("kernel_shape", 2, ks) };
    struct pb n1 = pb_node("Conv", conv_in, conv_out, 2, cattr);
    pb_msg(&g, 1, &n1);
    const char *relu_in[] = { "c", NULL }, *relu_out[] = { "r", NULL };
    struct pb n2 = pb_node("Relu", relu_in, relu_out, 0, NULL);
    pb_msg(&g, 1, &n2);
    const char *fl_in[] = { "r", NULL }, *fl_out[] = { "f", NULL };
    struct pb fattr[1] = { pb_attr_int("axis", 1) };
    struct pb n3 = pb_node("Flatten", fl_in, fl_out, 1, fattr);
    pb_msg(&g, 1, &n3);
    const char *gm_in[] = { "f", "gw", "gb", NULL }, *gm_out[] = { "logits", NULL };
    struct pb gattr[1] = { pb_attr_int("transB", 1) };
    struct pb n4 = pb_node("Gemm", gm_in, gm_out, 1, gattr);
    pb_msg(&g, 1, &n4);
    pb_str(&g, 2, "tiny");
    struct pb t;
    t = pb_tensor("w", T_FLOAT, 4, wd, w, sizeof w);
    pb_msg(&g, 5, &t);
    t = pb_tensor("b", T_FLOAT, 1, bd, bc, sizeof bc);
    pb_msg(&g, 5, &t);
    t = pb_tensor("gw", T_FLOAT, 2, gd, gw, sizeof gw);
    pb_msg(&g, 5, &t);
    t = pb_tensor("gb", T_FLOAT, 1, gbd, gb, sizeof gb);
    pb_msg(&g, 5, &t);
    int64_t ind[4] = { -1, 1, 8, 8 }, outd[2] = { -1, 4 };
    struct pb vi = pb_vinfo("image", T_FLOAT, 4, ind);
    pb_msg(&g, 11, &vi);
    vi = pb_vinfo("logits", T_FLOAT, 2, outd);
    pb_msg(&g, 12, &vi);
    struct pb m = pb_model(&g, 17);
    assert_int_equal(gj_write_file(path, m.b, m.n), 0);
    free(m.b);
}

static const char tiny_config[] =
    "{\"platform\": \"onnx\","
    " \"input\": {\"name\": \"image\", \"dims\": [1, 8, 8], \"datatype\": \"FP32\"},"
    " \"output\": {\"name\": \"logits\", \"dims\": [4], \"datatype\": \"FP32\"},"
    " \"labels\": [\"a\", \"b\", \"c\", \"d\"],"
    " \"max_batch_size\": 8,"
    " \"dynamic_batching\": {\"max_queue_delay_us\": 20000, \"preferred_batch_sizes\": [4, 8]},"
    " \"instances_per_device\": 2,"
    " \"preprocessing\": {\"resize\": {\"method\": \"area\", \"height\": 8, \"width\": 8},"
    "                    \"channels\": 1},"
    " \"filter\": {\"allow_missing\": true}}";

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/gj-batcher-test-XXXXXX");
    if (!mkdtemp(g_dir))
        return -1;
    char p[512];
    snprintf(p, sizeof p, "%s/tiny/1", g_dir);
    if (gj_mkdir_p(p, 0755))
        return -1;
    snprintf(p, sizeof p, "%s/tiny/1/model.onnx", g_dir);
    write_tiny_model(p);
    snprintf(p, sizeof p, "%s/tiny/config.json", g_dir);
    if (gj_write_file(p, tiny_config, strlen(tiny_config)))
        return -1;
    snprintf(p, sizeof p, "%s/tiny", g_dir);
    struct gj_error err = { 0 };
    g_tiny = gj_served_model_load(p, "tiny", 1, &err);
    if (!g_tiny) {
        fprintf(stderr, "tiny model: %s: %s\n", err.field, err.message);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gj_batcher_registry_shutdown();
    gj_served_model_release(g_tiny);
    gj_rm_rf(g_dir);
    return 0;
}

/* The model run unbatched (batch 1, its own session): the reference. */
static void reference(gj_served_model *m, const float *in, size_t n, size_t in_floats,
                      size_t out_floats, float *out)
{
    const onnx_model *om = gj_served_model_onnx(m);
    struct onnx_session_options o = { .batch = 1, .threads = 1, .backend = "cpu" };
    struct gj_error err = { 0 };
    onnx_session *s = onnx_session_create(om, &o, &err);
    assert_non_null(s);
    size_t no = onnx_model_num_outputs(om), oi = gj_served_model_output_index(m);
    void **outs = calloc(no, sizeof *outs);
    for (size_t i = 0; i < no; i++)
        outs[i] = malloc(onnx_session_output_bytes(s, i));
    for (size_t k = 0; k < n; k++) {
        const void *ins[1] = { in + k * in_floats };
        assert_int_equal(onnx_session_run(s, ins, (void *const *)outs, &err), 0);
        memcpy(out + k * out_floats, outs[oi], out_floats * sizeof(float));
    }
    for (size_t i = 0; i < no; i++)
        free(outs[i]);
    free(outs);
    onnx_session_free(s);
}

static void assert_close(const float *a, const float *b, size_t n, double tol)
{
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += a[i] != b[i];
    print_message("    %zu of %zu values differ from the unbatched run\n", differ, n);
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > tol * (1.0 + fabs((double)b[i])))
            fail_msg("element %zu: %.9g vs reference %.9g", i, (double)a[i], (double)b[i]);
    }
}

/* ---- concurrent clients -------------------------------------------------------------- */

struct client {
    gj_batcher *b;
    const float *in;
    float *out;
    size_t n;
    int64_t timeout_us;
    int rc;
    int status;
    int answered;          /* times gj_batcher_infer returned */
    struct gj_batch_timing t;
    double start_delay_s;
};

static void *client_main(void *arg)
{
    struct client *c = arg;
    if (c->start_delay_s > 0)
        usleep((useconds_t)(c->start_delay_s * 1e6));
    struct gj_error err = { 0 };
    c->rc = gj_batcher_infer(c->b, c->in, c->n, c->out, c->timeout_us, &c->t, &err);
    c->status = err.status;
    c->answered++;
    return NULL;
}

/* Waits (up to 10 s) until the queue holds n requests. */
static void wait_queued(gj_batcher *b, size_t n)
{
    for (int i = 0; i < 10000 && gj_batcher_queue_length(b) != n; i++)
        usleep(1000);
    assert_int_equal(gj_batcher_queue_length(b), n);
}

static void run_clients(struct client *c, size_t n)
{
    pthread_t *th = calloc(n, sizeof *th);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(pthread_create(&th[i], NULL, client_main, &c[i]), 0);
    for (size_t i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    free(th);
}

static void batching_under_load(void **state)
{
    (void)state;
    enum { N = 48 };
    struct gj_batcher_options o = { .max_queue_delay_us = 20000, .dynamic_batching = -1,
                                    .instances = 2, .threads_per_instance = 1, .device = -1 };
    struct gj_error err = { 0 };
    gj_batcher *b = gj_batcher_create(g_tiny, &o, &err);
    assert_non_null(b);
    assert_int_equal(gj_batcher_input_floats(b), IN_FLOATS);
    assert_int_equal(gj_batcher_output_floats(b), OUT_FLOATS);
    assert_int_equal(gj_batcher_max_batch_size(b), 8);
    struct gj_batch_stats s0, s1;
    gj_batch_stats_get("tiny", 1, &s0);

    /* requests of 1, 2 or 3 samples */
    static float in[N * 3 * IN_FLOATS], out[N * 3 * OUT_FLOATS], ref[N * 3 * OUT_FLOATS];
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        in[i] = frand() * 4.0f;
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        out[i] = NAN;
    struct client c[N];
    memset(c, 0, sizeof c);
    size_t off = 0, samples = 0;
    for (int i = 0; i < N; i++) {
        c[i].b = b;
        c[i].n = (size_t)(i % 3) + 1;
        c[i].in = in + off * IN_FLOATS;
        c[i].out = out + off * OUT_FLOATS;
        c[i].start_delay_s = (i % 5) * 0.002;
        off += c[i].n;
        samples += c[i].n;
    }
    run_clients(c, N);
    reference(g_tiny, in, samples, IN_FLOATS, OUT_FLOATS, ref);
    int max_seen = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(c[i].rc, GJ_BATCH_OK);
        assert_int_equal(c[i].answered, 1);
        if (c[i].t.batch_size > max_seen)
            max_seen = c[i].t.batch_size;
        assert_true(c[i].t.batch_size >= (int)c[i].n && c[i].t.batch_size <= 8);
    }
    /* same session math; batch sizes may change the GEMM blocking: 1e-5 relative */
    assert_close(out, ref, samples * OUT_FLOATS, 1e-5);
    gj_batch_stats_get("tiny", 1, &s1);
    uint64_t execs = s1.exec_count - s0.exec_count;
    assert_int_equal(s1.request_success - s0.request_success, N);
    assert_int_equal(s1.request_failure - s0.request_failure, 0);
    assert_int_equal(s1.inference_count - s0.inference_count, samples);
    assert_true(execs < N);                 /* batching happened */
    assert_true(execs >= (samples + 7) / 8);
    assert_true(max_seen > 1);
    assert_true(gj_batcher_sessions(b) >= 1);
    print_message("    %d requests (%zu samples) in %llu batches, largest %d, %zu sessions\n", N,
                  samples, (unsigned long long)execs, max_seen, gj_batcher_sessions(b));
    gj_batcher_destroy(b);
}

/* Preferred size 4 goes at once even with a 10 s delay. */
static void preferred_size_goes_at_once(void **state)
{
    (void)state;
    struct gj_batcher_options o = { .max_queue_delay_us = 10000000, .dynamic_batching = 1,
                                    .preferred_batch_sizes = { 4 }, .n_preferred = 1,
                                    .instances = 1, .threads_per_instance = 1, .device = -1 };
    struct gj_error err = { 0 };
    gj_batcher *b = gj_batcher_create(g_tiny, &o, &err);
    assert_non_null(b);
    float in[4 * IN_FLOATS], out[4 * OUT_FLOATS], ref[4 * OUT_FLOATS];
    for (size_t i = 0; i < 4 * IN_FLOATS; i++)
        in[i] = frand();
    struct client c[4];
    memset(c, 0, sizeof c);
    for (int i = 0; i < 4; i++) {
        c[i].b = b;
        c[i].n = 1;
        c[i].in = in + i * IN_FLOATS;
        c[i].out = out + i * OUT_FLOATS;
    }
    double t0 = now_s();
    run_clients(c, 4);
    double el = now_s() - t0;
    assert_true(el < 2.0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(c[i].rc, GJ_BATCH_OK);
        assert_int_equal(c[i].t.batch_size, 4);
    }
    reference(g_tiny, in, 4, IN_FLOATS, OUT_FLOATS, ref);
    assert_close(out, ref, 4 * OUT_FLOATS, 1e-5);
    gj_batcher_destroy(b);
}

/* The delay bounds the wait of a lone request; max_batch_size goes at once. The delay is a
 * whole second so that a loaded CI machine (sanitizers, two cores) cannot blur the two. */
static void delay_and_full_batch(void **state)
{
    (void)state;
    struct gj_batcher_options o = { .max_queue_delay_us = 1000000, .dynamic_batching = 1,
                                    .preferred_batch_sizes = { 8 }, .n_preferred = 1,
                                    .instances = 1, .threads_per_instance = 1, .device = -1 };
    struct gj_error err = { 0 };
    gj_batcher *b = gj_batcher_create(g_tiny, &o, &err);
    assert_non_null(b);
    float in[8 * IN_FLOATS], out[8 * OUT_FLOATS];
    for (size_t i = 0; i < 8 * IN_FLOATS; i++)
        in[i] = frand();
    struct gj_batch_timing t;
    double t0 = now_s();
    assert_int_equal(gj_batcher_infer(b, in, 1, out, 0, &t, &err), GJ_BATCH_OK);
    double el = now_s() - t0;
    assert_true(el >= 0.995 && el < 10.0);
    assert_true(t.queue_us >= 995000);
    assert_int_equal(t.batch_size, 1);
    assert_int_equal(gj_batcher_infer(b, in, 8, out, 0, &t, &err), GJ_BATCH_OK);
    assert_true(t.queue_us < 500000);         /* a full batch does not wait the second */
    assert_int_equal(t.batch_size, 8);
    /* more than max_batch_size, or none: 400 */
    assert_int_equal(gj_batcher_infer(b, in, 9, out, 0, &t, &err), GJ_BATCH_EINVAL);
    assert_int_equal(err.status, 400);
    assert_int_equal(gj_batcher_infer(b, in, 0, out, 0, &t, &err), GJ_BATCH_EINVAL);
    gj_batcher_destroy(b);
}

/* A full queue rejects at once (429); a request past its timeout leaves the queue (503);
 * destroying answers the queued ones (503) and returns. */
static void queue_full_timeout_shutdown(void **state)
{
    (void)state;
    struct gj_batcher_options o = { .max_queue_delay_us = 30000000, .dynamic_batching = 1,
                                    .instances = 1, .threads_per_instance = 1,
                                    .max_queue_size = 3, .device = -1 };
    struct gj_error err = { 0 };
    gj_batcher *b = gj_batcher_create(g_tiny, &o, &err);
    assert_non_null(b);
    struct gj_batch_stats s0, s1;
    gj_batch_stats_get("tiny", 1, &s0);
    float in[IN_FLOATS] = { 0 }, out[3][OUT_FLOATS];
    struct client c[3];
    memset(c, 0, sizeof c);
    for (int i = 0; i < 3; i++) {
        c[i].b = b;
        c[i].n = 1;
        c[i].in = in;
        c[i].out = out[i];
        c[i].timeout_us = i == 2 ? 100000 : 60000000;   /* the third: 100 ms */
    }
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, client_main, &c[i]), 0);
    wait_queued(b, 3);    /* all three queued (the 30 s delay holds them) */
    struct gj_batch_stats sp;
    gj_batch_stats_get("tiny", 1, &sp);
    assert_int_equal(sp.pending_request_count, 3);
    float o4[OUT_FLOATS];
    double t0 = now_s();
    assert_int_equal(gj_batcher_infer(b, in, 1, o4, 0, NULL, &err), GJ_BATCH_EFULL);
    assert_int_equal(err.status, 429);
    assert_non_null(strstr(err.message, "full"));
    assert_true(now_s() - t0 < 1.0);          /* not the 30 s delay */
    pthread_join(th[2], NULL);                /* times out after 100 ms */
    assert_int_equal(c[2].rc, GJ_BATCH_ETIMEDOUT);
    assert_int_equal(c[2].status, 503);
    assert_true(c[2].t.queue_us >= 99000);
    /* room again: one more request queues, then shutdown with three in the queue */
    struct client extra = { .b = b, .n = 1, .in = in, .out = o4, .timeout_us = 60000000 };
    pthread_t te;
    assert_int_equal(pthread_create(&te, NULL, client_main, &extra), 0);
    wait_queued(b, 3);
    t0 = now_s();
    gj_batcher_destroy(b);
    assert_true(now_s() - t0 < 2.0);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    pthread_join(te, NULL);
    assert_int_equal(c[0].rc, GJ_BATCH_ESHUTDOWN);
    assert_int_equal(c[1].rc, GJ_BATCH_ESHUTDOWN);
    assert_int_equal(extra.rc, GJ_BATCH_ESHUTDOWN);
    assert_int_equal(c[0].status, 503);
    for (int i = 0; i < 3; i++)
        assert_int_equal(c[i].answered, 1);
    gj_batch_stats_get("tiny", 1, &s1);
    assert_int_equal(s1.request_failure - s0.request_failure, 5);   /* full, timeout, 3 shut */
    assert_int_equal(s1.pending_request_count, 0);
    assert_int_equal(s1.request_success - s0.request_success, 0);
}

/* A cancelled caller (an `infer` job asked to stop) leaves the queue within the poll
 * period, not the batcher's delay; the others in the queue stay and are answered. */
static int cancel_flag;
static int cancel_hook(void *arg)
{
    (void)arg;
    return __atomic_load_n(&cancel_flag, __ATOMIC_SEQ_CST);
}

struct cancel_client {
    gj_batcher *b;
    const float *in;
    float *out;
    int rc, status;
    double returned_at;
};

static void *cancel_client_main(void *arg)
{
    struct cancel_client *c = arg;
    struct gj_error err = { 0 };
    c->rc = gj_batcher_infer_cancellable(c->b, c->in, 1, c->out, 60000000, NULL, &err, cancel_hook, NULL);
    c->status = err.status;
    c->returned_at = now_s();
    return NULL;
}

static void cancelled_caller_leaves_queue(void **state)
{
    (void)state;
    struct gj_batcher_options o = { .max_queue_delay_us = 30000000, .dynamic_batching = 1,
                                    .instances = 1, .threads_per_instance = 1, .device = -1 };
    struct gj_error err = { 0 };
    gj_batcher *b = gj_batcher_create(g_tiny, &o, &err);
    assert_non_null(b);
    float in[IN_FLOATS] = { 0 }, out[2][OUT_FLOATS];
    struct client other = { .b = b, .n = 1, .in = in, .out = out[0], .timeout_us = 2000000 };
    struct cancel_client c = { .b = b, .in = in, .out = out[1] };
    __atomic_store_n(&cancel_flag, 0, __ATOMIC_SEQ_CST);
    pthread_t th[2];
    assert_int_equal(pthread_create(&th[0], NULL, cancel_client_main, &c), 0);
    assert_int_equal(pthread_create(&th[1], NULL, client_main, &other), 0);
    wait_queued(b, 2);   /* the 30 s delay holds both */
    usleep(300000);
    assert_int_equal(gj_batcher_queue_length(b), 2);   /* not cancelled: still waiting */
    double t0 = now_s();
    __atomic_store_n(&cancel_flag, 1, __ATOMIC_SEQ_CST);
    pthread_join(th[0], NULL);
    assert_int_equal(c.rc, GJ_BATCH_ECANCELED);
    assert_int_equal(c.status, 499);
    assert_true(c.returned_at - t0 < 0.5);
    pthread_join(th[1], NULL);   /* the other one keeps its place until its own timeout */
    assert_int_equal(other.rc, GJ_BATCH_ETIMEDOUT);
    gj_batcher_destroy(b);
}

/* Shutdown while batches run: every request is answered exactly once, OK or 503. */
struct hammer {
    gj_batcher *b;
    int ok, shut, other, calls;
};

static void *hammer_main(void *arg)
{
    struct hammer *h = arg;
    float in[2 * IN_FLOATS], out[2 * OUT_FLOATS];
    for (size_t i = 0; i < 2 * IN_FLOATS; i++)
        in[i] = (float)i / 100.0f;
    for (;;) {
        struct gj_error err = { 0 };
        int rc = gj_batcher_infer(h->b, in, 1 + (size_t)(h->calls % 2), out, 0, NULL, &err);
        h->calls++;
        if (rc == GJ_BATCH_OK)
            h->ok++;
        else if (rc == GJ_BATCH_ESHUTDOWN) {
            h->shut++;
            return NULL;
        } else {
            h->other++;
            return NULL;
        }
    }
}

static void shutdown_in_flight(void **state)
{
    (void)state;
    enum { T = 16 };
    struct gj_batcher_options o = { .max_queue_delay_us = 1000, .dynamic_batching = 1,
                                    .instances = 2, .threads_per_instance = 1, .device = -1 };
    struct gj_error err = { 0 };
    gj_batcher *b = gj_batcher_create(g_tiny, &o, &err);
    assert_non_null(b);
    struct gj_batch_stats s0, s1;
    gj_batch_stats_get("tiny", 1, &s0);
    struct hammer h[T];
    pthread_t th[T];
    memset(h, 0, sizeof h);
    for (int i = 0; i < T; i++) {
        h[i].b = b;
        assert_int_equal(pthread_create(&th[i], NULL, hammer_main, &h[i]), 0);
    }
    usleep(200000);
    /* Stop while clients keep submitting: queued requests and later calls get
     * ESHUTDOWN, running batches finish; each client stops at its first non-OK answer. */
    double t0 = now_s();
    gj_batcher_shutdown(b);
    assert_true(now_s() - t0 < 2.0);
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    int ok = 0, shut = 0, other = 0, calls = 0;
    for (int i = 0; i < T; i++) {
        ok += h[i].ok;
        shut += h[i].shut;
        other += h[i].other;
        calls += h[i].calls;
    }
    gj_batch_stats_get("tiny", 1, &s1);
    print_message("    %d calls: %d ok, %d shut down, %d other\n", calls, ok, shut, other);
    assert_int_equal(other, 0);
    assert_int_equal(ok + shut, calls);
    assert_true(ok > 0);
    assert_int_equal(s1.request_success - s0.request_success, (uint64_t)ok);
    assert_int_equal(s1.request_failure - s0.request_failure, (uint64_t)shut);
    gj_batcher_destroy(b);
}

/* ---- gj_batcher_submit: answered on the batcher's thread, once ------------------------ */

struct submitted {
    struct gj_tensor in, out;
    float data[IN_FLOATS];
    pthread_mutex_t mu;
    int calls, rc, status;
    pthread_t thread;          /* the thread that called back */
    struct gj_batch_timing t;
};

static void submitted_done(void *arg, int rc, const struct gj_batch_timing *t, const struct gj_error *err)
{
    struct submitted *s = arg;
    pthread_mutex_lock(&s->mu);
    s->calls++;
    s->rc = rc;
    s->status = err ? err->status : 0;
    s->t = *t;
    s->thread = pthread_self();
    pthread_mutex_unlock(&s->mu);
}

static void submitted_init(struct submitted *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    for (int i = 0; i < IN_FLOATS; i++)
        s->data[i] = frand();
    s->in = (struct gj_tensor){ .name = "image", .elem_type = ONNX_ELEM_FLOAT, .rank = 4, .dims = { 1, 1, 8, 8 },
                                .data = s->data, .bytes = sizeof s->data };
    snprintf(s->out.name, sizeof s->out.name, "logits");
}

static int submitted_calls(struct submitted *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->calls;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Waits (up to 10 s) until s was called back. */
static void wait_called(struct submitted *s)
{
    for (int i = 0; i < 10000 && submitted_calls(s) == 0; i++)
        usleep(1000);
    assert_int_equal(submitted_calls(s), 1);
}

static int submit(gj_batcher *b, struct submitted *s, int64_t timeout_us, struct gj_error *err)
{
    return gj_batcher_submit(b, &s->in, 1, &s->out, 1, timeout_us, submitted_done, s, err);
}

/* Submitted requests are batched with each other and answered right, each once, on the
 * batcher's thread; one past its timeout is answered 503 by the executor, within the
 * timeout, not the 30 s batching delay; a bad one is refused at once and never called back;
 * destroying the batcher answers the queued ones ESHUTDOWN. */
static void submitted_requests(void **state)
{
    (void)state;
    enum { N = 12 };
    struct gj_batcher_options o = { .max_queue_delay_us = 30000000, .dynamic_batching = 1,
                                    .instances = 1, .threads_per_instance = 1, .device = -1 };
    struct gj_error err = { 0 };
    gj_batcher *b = gj_batcher_create(g_tiny, &o, &err);
    assert_non_null(b);
    struct submitted *s = calloc(N + 3, sizeof *s);
    for (int i = 0; i < N + 3; i++)
        submitted_init(&s[i]);
    struct gj_tensor wrong = s[0].in;
    snprintf(wrong.name, sizeof wrong.name, "nope");
    assert_int_equal(gj_batcher_submit(b, &wrong, 1, &s[N + 2].out, 1, 0, submitted_done, &s[N + 2], &err),
                     GJ_BATCH_EINVAL);
    assert_int_equal(err.status, 400);
    double t0 = now_s();
    assert_int_equal(submit(b, &s[N], 100000, &err), GJ_BATCH_OK);   /* 100 ms, alone in the queue */
    wait_called(&s[N]);
    assert_true(now_s() - t0 < 5.0);
    assert_int_equal(s[N].rc, GJ_BATCH_ETIMEDOUT);
    assert_int_equal(s[N].status, 503);
    assert_true(s[N].t.queue_us >= 99000);
    assert_false(pthread_equal(s[N].thread, pthread_self()));
    for (int i = 0; i < N; i++)   /* 12 with preferred sizes 4 and 8: batches go at once */
        assert_int_equal(submit(b, &s[i], 60000000, &err), GJ_BATCH_OK);
    float in[N * IN_FLOATS], out[N * OUT_FLOATS], ref[N * OUT_FLOATS];
    int batched = 0;
    for (int i = 0; i < N; i++) {
        wait_called(&s[i]);
        assert_int_equal(s[i].rc, GJ_BATCH_OK);
        assert_int_equal(s[i].out.bytes, OUT_FLOATS * sizeof(float));
        memcpy(in + i * IN_FLOATS, s[i].data, sizeof s[i].data);
        memcpy(out + i * OUT_FLOATS, s[i].out.data, OUT_FLOATS * sizeof(float));
        gj_tensors_free(&s[i].out, 1);
        batched |= s[i].t.batch_size > 1;
    }
    assert_true(batched);
    reference(g_tiny, in, N, IN_FLOATS, OUT_FLOATS, ref);
    assert_close(out, ref, N * OUT_FLOATS, 1e-5);
    assert_int_equal(submit(b, &s[N + 1], 60000000, &err), GJ_BATCH_OK);   /* waits for company */
    wait_queued(b, 1);
    t0 = now_s();
    gj_batcher_destroy(b);
    assert_true(now_s() - t0 < 2.0);
    assert_int_equal(submitted_calls(&s[N + 1]), 1);
    assert_int_equal(s[N + 1].rc, GJ_BATCH_ESHUTDOWN);
    assert_int_equal(s[N + 1].status, 503);
    assert_null(s[N + 1].out.data);
    assert_int_equal(submitted_calls(&s[N + 2]), 0);
    for (int i = 0; i < N + 2; i++)
        assert_int_equal(submitted_calls(&s[i]), 1);
    for (int i = 0; i < N + 3; i++)
        pthread_mutex_destroy(&s[i].mu);
    free(s);
}

/* The registry: one batcher per model version, shared; statistics listed. */
/* The host's threads per executor when it sets none: the CPUs it does not reserve (a
 * server's HTTP threads) over the instances (2 in the tiny model's config), at least 1. */
static void default_threads_leave_reserved_cpus(void **state)
{
    (void)state;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    struct { int reserved; long want; } cases[] = {
        { 0, ncpu / 2 > 16 ? 16 : ncpu / 2 > 0 ? ncpu / 2 : 1 },
        { 1, (ncpu - 1) / 2 > 16 ? 16 : (ncpu - 1) / 2 > 0 ? (ncpu - 1) / 2 : 1 },
        { 1000, 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gj_serving_host host = { .reserved_cpus = cases[i].reserved };
        gj_serving_host_set(&host);
        struct gj_error err = { 0 };
        gj_batcher *b = gj_batcher_acquire(g_tiny, &err);
        assert_non_null(b);
        assert_int_equal(gj_batcher_threads(b), cases[i].want);
        gj_batcher_release(b);
        gj_batcher_registry_drop("tiny", 1);
    }
    struct gj_serving_host set = { .threads_per_instance = 3, .reserved_cpus = 1 };   /* set: taken as it is */
    gj_serving_host_set(&set);
    struct gj_error err = { 0 };
    gj_batcher *b = gj_batcher_acquire(g_tiny, &err);
    assert_int_equal(gj_batcher_threads(b), 3);
    gj_batcher_release(b);
    gj_batcher_registry_drop("tiny", 1);
    gj_serving_host_set(NULL);
}

static void registry_shares(void **state)
{
    (void)state;
    struct gj_error err = { 0 };
    gj_batcher *a = gj_batcher_acquire(g_tiny, &err);
    assert_non_null(a);
    gj_batcher *b2 = gj_batcher_acquire(g_tiny, &err);
    assert_ptr_equal(a, b2);
    float in[IN_FLOATS] = { 0 }, out[OUT_FLOATS];
    assert_int_equal(gj_batcher_infer(a, in, 1, out, 0, NULL, &err), GJ_BATCH_OK);
    gj_batcher_release(b2);
    assert_int_equal(gj_batcher_registry_drop("tiny", 1), 1);      /* a is still usable */
    assert_int_equal(gj_batcher_registry_drop("tiny", 1), 0);
    assert_int_equal(gj_batcher_infer(a, in, 1, out, 0, NULL, &err), GJ_BATCH_OK);
    gj_batcher_release(a);                                          /* now it goes */
    gj_batcher *c = gj_batcher_acquire(g_tiny, &err);               /* a fresh one */
    assert_non_null(c);
    assert_int_equal(gj_batcher_infer(c, in, 1, out, 0, NULL, &err), GJ_BATCH_OK);
    gj_batcher_release(c);
    struct gj_batch_stats st[8];
    size_t n = gj_batch_stats_snapshot(st, 8);
    assert_true(n >= 1);
    int found = 0;
    for (size_t i = 0; i < n && i < 8; i++)
        found |= strcmp(st[i].model, "tiny") == 0 && st[i].version == 1;
    assert_true(found);
    gj_batcher_registry_shutdown();
}

/* A model's identity is its content: two models of one name, version and file size but
 * other weights (a tenant's copy, a replaced model.onnx) never share a batcher; another
 * load of the same file does. */
static void identity_is_content(void **state)
{
    (void)state;
    char dir[512], p[600];
    snprintf(dir, sizeof dir, "%s/other", g_dir);
    snprintf(p, sizeof p, "%s/tiny/1", dir);
    assert_int_equal(gj_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/tiny/1/model.onnx", dir);
    write_tiny_model(p);                             /* the same graph, other random weights */
    snprintf(p, sizeof p, "%s/tiny/config.json", dir);
    assert_int_equal(gj_write_file(p, tiny_config, strlen(tiny_config)), 0);
    snprintf(p, sizeof p, "%s/tiny", dir);
    struct gj_error err = { 0 };
    gj_served_model *other = gj_served_model_load(p, "tiny", 1, &err);
    assert_non_null(other);
    assert_int_equal(gj_served_model_file_bytes(other), gj_served_model_file_bytes(g_tiny));
    assert_string_not_equal(gj_served_model_digest(other), gj_served_model_digest(g_tiny));
    assert_int_equal(strlen(gj_served_model_digest(other)), 64);

    gj_batcher *a = gj_batcher_acquire(g_tiny, &err);
    gj_batcher *b = gj_batcher_acquire(other, &err);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_ptr_equal(gj_batcher_model(b), other);
    float in[IN_FLOATS], out_a[OUT_FLOATS], out_b[OUT_FLOATS], ref_b[OUT_FLOATS];
    for (int i = 0; i < IN_FLOATS; i++)
        in[i] = frand();
    assert_int_equal(gj_batcher_infer(a, in, 1, out_a, 0, NULL, &err), GJ_BATCH_OK);
    assert_int_equal(gj_batcher_infer(b, in, 1, out_b, 0, NULL, &err), GJ_BATCH_OK);
    reference(other, in, 1, IN_FLOATS, OUT_FLOATS, ref_b);
    assert_close(out_b, ref_b, OUT_FLOATS, 1e-5);
    assert_memory_not_equal(out_a, out_b, sizeof out_a);
    /* Asked again for the first model: not the other's batcher. */
    gj_batcher *a2 = gj_batcher_acquire(g_tiny, &err);
    assert_non_null(a2);
    assert_ptr_not_equal(a2, b);
    assert_ptr_equal(gj_batcher_model(a2), g_tiny);
    /* Another load of the first file is the same model: it shares that batcher. */
    snprintf(p, sizeof p, "%s/tiny", g_dir);
    gj_served_model *again = gj_served_model_load(p, "tiny", 1, &err);
    assert_non_null(again);
    assert_string_equal(gj_served_model_digest(again), gj_served_model_digest(g_tiny));
    gj_batcher *a3 = gj_batcher_acquire(again, &err);
    assert_ptr_equal(a3, a2);
    gj_batcher_release(a3);
    gj_batcher_release(a2);
    gj_batcher_release(b);
    gj_batcher_release(a);
    gj_served_model_release(again);
    gj_served_model_release(other);
    gj_batcher_registry_shutdown();
}

/* The demo model: batched results equal unbatched ones (1e-5). */
static void demo_model_batched_equals_unbatched(void **state)
{
    (void)state;
    const char *root = getenv("GJ_SOURCE_ROOT");
    char dir[4096], p[4200];
    snprintf(dir, sizeof dir, "%s/models/chest-xray-demo", root ? root : ".");
    snprintf(p, sizeof p, "%s/1/model.onnx", dir);
    if (access(p, R_OK) != 0)   /* part of the tree (the build embeds it): missing is a failure */
        fail_msg("%s: %s (the demo model belongs to the tree)", p, strerror(errno));
    struct gj_error err = { 0 };
    gj_served_model *m = gj_served_model_load(dir, "chest-xray-demo", 1, &err);
    assert_non_null(m);
    struct gj_batcher_options o = { .max_queue_delay_us = 50000, .dynamic_batching = 1,
                                    .instances = 1, .threads_per_instance = 2, .device = -1 };
    gj_batcher *b = gj_batcher_create(m, &o, &err);
    assert_non_null(b);
    enum { N = 6 };
    size_t inf = gj_batcher_input_floats(b), outf = gj_batcher_output_floats(b);
    float *in = malloc(N * inf * sizeof *in), *out = malloc(N * outf * sizeof *out);
    float *ref = malloc(N * outf * sizeof *ref);
    for (size_t i = 0; i < N * inf; i++)
        in[i] = frand() * 4.0f;
    struct client c[N];
    memset(c, 0, sizeof c);
    for (int i = 0; i < N; i++) {
        c[i].b = b;
        c[i].n = 1;
        c[i].in = in + i * inf;
        c[i].out = out + i * outf;
    }
    run_clients(c, N);
    int batched = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(c[i].rc, GJ_BATCH_OK);
        batched |= c[i].t.batch_size > 1;
    }
    assert_true(batched);
    reference(m, in, N, inf, outf, ref);
    assert_close(out, ref, N * outf, 1e-5);
    gj_batcher_destroy(b);
    gj_served_model_release(m);
    free(in);
    free(out);
    free(ref);
}

static void bad_model_refused(void **state)
{
    (void)state;
    struct gj_error err = { 0 };
    assert_null(gj_batcher_create(NULL, NULL, &err));
    /* GPU 0 without the runtime's CUDA backend: refused with the reason (503) */
    if (!onnx_backend_available("cuda", NULL)) {
        struct gj_batcher_options o = { .max_queue_delay_us = -1, .dynamic_batching = -1,
                                        .device = 0 };
        assert_null(gj_batcher_create(g_tiny, &o, &err));
        assert_int_equal(err.status, 503);
        assert_non_null(strstr(err.message, "cannot run on GPU 0"));
    }
}

/* The in-process benchmark that lived here is `gpujobd bench infer`
 * (compute/infer/serving/bench_infer.c). */
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batching_under_load),
        cmocka_unit_test(preferred_size_goes_at_once),
        cmocka_unit_test(delay_and_full_batch),
        cmocka_unit_test(queue_full_timeout_shutdown),
        cmocka_unit_test(cancelled_caller_leaves_queue),
        cmocka_unit_test(shutdown_in_flight),
        cmocka_unit_test(submitted_requests),
        cmocka_unit_test(default_threads_leave_reserved_cpus),
        cmocka_unit_test(registry_shares),
        cmocka_unit_test(identity_is_content),
        cmocka_unit_test(demo_model_batched_equals_unbatched),
        cmocka_unit_test(bad_model_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
