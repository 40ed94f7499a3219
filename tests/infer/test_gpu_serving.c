/*
 * test_gpu_serving.c — where models run, on any machine (no GPU needed): config.json's
 * instance_group / precision / cuda_graphs (every bad value refused with its field), the
 * GPU accounting hook (compute/infer/serving/gpu_accounting.h) driven by a fake host with
 * simulated GPUs, and the batcher registry's device choice through it: KIND_AUTO and
 * KIND_CPU stay on the CPU without a CUDA backend, KIND_GPU without a GPU or on a GPU that
 * does not exist is refused (503), a model whose estimated device memory exceeds the GPUs'
 * free memory is refused naming it, the least-loaded GPU is tried first, a job's GPU is
 * honoured, and every reservation is released when the batcher goes or fails. Where the
 * runtime has a CUDA backend the same tests also check the batchers that do get created.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "common/fsutil.h"
#include "infer/onnx/onnx_model.h"
#include "infer/serving/batcher.h"
#include "infer/serving/gpu_accounting.h"
#include "infer/serving/model_repo.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

static char g_dir[256];
static int g_cuda;   /* the runtime has a usable CUDA backend here */

/* ---- a fake host: simulated GPUs and a log of reservations ---------------------------- */

struct fake_host {
    int n;
    uint64_t total[4], reserved[4];
    int running[4];
    int log_gpu[64], log_ok[64];
    size_t n_log;
};

static int fake_count(void *ctx)
{
    return ((struct fake_host *)ctx)->n;
}

static int fake_load(void *ctx, int gpu, struct gj_gpu_load *out)
{
    struct fake_host *h = ctx;
    if (gpu < 0 || gpu >= h->n)
        return -1;
    out->running = h->running[gpu];
    out->total_bytes = h->total[gpu];
    out->reserved_bytes = h->reserved[gpu];
    return 0;
}

static int fake_reserve(void *ctx, int gpu, uint64_t bytes)
{
    struct fake_host *h = ctx;
    int ok = gpu >= 0 && gpu < h->n && h->total[gpu] - h->reserved[gpu] >= bytes;
    if (h->n_log < 64) {
        h->log_gpu[h->n_log] = gpu;
        h->log_ok[h->n_log++] = ok;
    }
    if (ok)
        h->reserved[gpu] += bytes;
    return ok ? 0 : -1;
}

static void fake_release(void *ctx, int gpu, uint64_t bytes)
{
    struct fake_host *h = ctx;
    assert_true(gpu >= 0 && gpu < h->n);
    assert_true(h->reserved[gpu] >= bytes);
    h->reserved[gpu] -= bytes;
}

static void fake_attach(struct fake_host *h, int n, uint64_t bytes_each)
{
    memset(h, 0, sizeof *h);
    h->n = n;
    for (int i = 0; i < n; i++)
        h->total[i] = bytes_each;
    struct gj_gpu_accounting a = { h, fake_count, fake_load, fake_reserve, fake_release };
    gj_gpu_accounting_set(&a);
}

/* ---- models: the demo model's weights with a config of the test's ------------------- */

/* DIR/<name>/config.json = the demo's config with `extra` merged in; 1/model.onnx links
 * to the demo's. The loaded version (release it). */
static gj_served_model *demo_with(const char *name, const char *extra)
{
    const char *src = getenv("GJ_SOURCE_ROOT");
    char p[1024], q[1024];
    snprintf(p, sizeof p, "%s/models/chest-xray-demo/config.json", src ? src : ".");
    json_error_t je;
    json_t *cfg = json_load_file(p, 0, &je);
    assert_non_null(cfg);
    json_object_del(cfg, "name");
    json_t *x = json_loads(extra, 0, &je);
    assert_non_null(x);
    if (json_object_get(x, "instance_group"))
        json_object_del(cfg, "instances_per_device");
    json_object_update(cfg, x);
    json_decref(x);
    snprintf(q, sizeof q, "%s/%s/1", g_dir, name);
    assert_int_equal(gj_mkdir_p(q, 0755), 0);
    snprintf(q, sizeof q, "%s/%s/config.json", g_dir, name);
    assert_int_equal(json_dump_file(cfg, q, 0), 0);
    json_decref(cfg);
    snprintf(p, sizeof p, "%s/models/chest-xray-demo/1/model.onnx", src ? src : ".");
    char *abs = realpath(p, NULL);
    assert_non_null(abs);
    snprintf(q, sizeof q, "%s/%s/1/model.onnx", g_dir, name);
    unlink(q);
    assert_int_equal(symlink(abs, q), 0);
    free(abs);
    snprintf(q, sizeof q, "%s/%s", g_dir, name);
    struct gj_error err = { 0 };
    gj_served_model *m = gj_served_model_load(q, name, 1, &err);
    if (!m)
        fail_msg("%s: %s", name, err.message);
    return m;
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/gj-gpu-serving-XXXXXX");
    if (!mkdtemp(g_dir))
        return -1;
    struct gj_error why = { 0 };
    g_cuda = onnx_backend_available("cuda", &why);
    if (!g_cuda)
        print_message("    no CUDA backend here (%s): GPU batchers are refused after the "
                      "memory check\n", why.message);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gj_rm_rf(g_dir);
    return 0;
}

/* Each test leaves no batcher and no accounting behind. */
static int clean(void **state)
{
    (void)state;
    gj_batcher_registry_shutdown();
    gj_gpu_accounting_set(NULL);
    return 0;
}

/* ---- config.json ------------------------------------------------------------------------ */

static const char base_cfg[] =
    "{\"input\": {\"name\": \"image\", \"dims\": [1, 8, 8]},"
    " \"output\": {\"name\": \"logits\", \"dims\": [2]}, \"labels\": [\"a\", \"b\"]";

static int parse_with(const char *extra, struct gj_model_config *cfg, struct gj_error *err)
{
    char text[2048];
    snprintf(text, sizeof text, "%s%s%s}", base_cfg, extra[0] ? ", " : "", extra);
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!root)
        fail_msg("test JSON: %s: %s", text, je.text);
    memset(err, 0, sizeof *err);
    int rc = gj_model_config_parse(root, NULL, cfg, err);
    json_decref(root);
    return rc;
}

static void config_instance_group(void **state)
{
    (void)state;
    struct gj_model_config cfg;
    struct gj_error err;

    assert_int_equal(parse_with("", &cfg, &err), 0);
    assert_int_equal(cfg.instance_kind, GJ_INSTANCE_AUTO);
    assert_int_equal(cfg.instances_per_device, 1);
    assert_int_equal(cfg.n_gpus, 0);
    assert_int_equal(cfg.precision, GJ_PRECISION_FP32);
    assert_int_equal(cfg.cuda_graphs, 1);
    gj_model_config_free(&cfg);

    assert_int_equal(parse_with("\"instance_group\": {\"kind\": \"KIND_GPU\", \"count\": 2, "
                                "\"gpus\": [3, 0]}, \"precision\": \"fp16\", "
                                "\"cuda_graphs\": false", &cfg, &err), 0);
    assert_int_equal(cfg.instance_kind, GJ_INSTANCE_GPU);
    assert_int_equal(cfg.instances_per_device, 2);
    assert_int_equal(cfg.n_gpus, 2);
    assert_int_equal(cfg.gpus[0], 0);   /* ascending */
    assert_int_equal(cfg.gpus[1], 3);
    assert_int_equal(cfg.precision, GJ_PRECISION_FP16);
    assert_int_equal(cfg.cuda_graphs, 0);
    json_t *j = gj_model_config_to_json(&cfg);
    json_t *g = json_object_get(j, "instance_group");
    assert_string_equal(json_string_value(json_object_get(g, "kind")), "KIND_GPU");
    assert_int_equal(json_integer_value(json_object_get(g, "count")), 2);
    assert_int_equal(json_array_size(json_object_get(g, "gpus")), 2);
    assert_string_equal(json_string_value(json_object_get(j, "precision")), "fp16");
    assert_true(json_is_false(json_object_get(j, "cuda_graphs")));
    assert_int_equal(json_integer_value(json_object_get(j, "instances_per_device")), 2);
    json_decref(j);
    gj_model_config_free(&cfg);

    /* Triton's list form; the older spelling of count; tf32 on KIND_AUTO */
    assert_int_equal(parse_with("\"instance_group\": [{\"kind\": \"KIND_CPU\"}], "
                                "\"instances_per_device\": 3", &cfg, &err), 0);
    assert_int_equal(cfg.instance_kind, GJ_INSTANCE_CPU);
    assert_int_equal(cfg.instances_per_device, 3);
    gj_model_config_free(&cfg);
    assert_int_equal(parse_with("\"precision\": \"tf32\"", &cfg, &err), 0);
    assert_int_equal(cfg.precision, GJ_PRECISION_TF32);
    gj_model_config_free(&cfg);
}

static void config_instance_errors(void **state)
{
    (void)state;
    static const struct { const char *extra, *field, *says; } bad[] = {
        { "\"instance_group\": {\"kind\": \"KIND_TPU\"}", "instance_group.kind", "KIND_AUTO, KIND_GPU, KIND_CPU" },
        { "\"instance_group\": {\"kind\": 1}", "instance_group.kind", "must be one of" },
        { "\"instance_group\": {\"count\": 0}", "instance_group.count", "from 1 to 64" },
        { "\"instance_group\": {\"count\": 65}", "instance_group.count", "from 1 to 64" },
        { "\"instance_group\": {\"count\": 1.5}", "instance_group.count", "integer" },
        { "\"instance_group\": {\"count\": \"2\"}", "instance_group.count", "integer" },
        { "\"instance_group\": {\"count\": 2}, \"instances_per_device\": 2", "instance_group.count", "not both" },
        { "\"instances_per_device\": 0", "instances_per_device", "from 1 to 64" },
        { "\"instance_group\": {\"gpus\": []}", "instance_group.gpus", "array of 1 to 64" },
        { "\"instance_group\": {\"gpus\": \"0\"}", "instance_group.gpus", "array of 1 to 64" },
        { "\"instance_group\": {\"gpus\": [64]}", "instance_group.gpus[0]", "from 0 to 63" },
        { "\"instance_group\": {\"gpus\": [0, -1]}", "instance_group.gpus[1]", "from 0 to 63" },
        { "\"instance_group\": {\"gpus\": [1, 1]}", "instance_group.gpus[1]", "listed twice" },
        { "\"instance_group\": {\"kind\": \"KIND_CPU\", \"gpus\": [0]}", "instance_group.gpus", "KIND_CPU" },
        { "\"instance_group\": {\"kinds\": \"KIND_GPU\"}", "instance_group.kinds", "unknown key" },
        { "\"instance_group\": [{}, {}]", "instance_group", "several groups" },
        { "\"instance_group\": []", "instance_group", "several groups" },
        { "\"instance_group\": 5", "instance_group", "must be an object" },
        { "\"precision\": \"fp64\"", "precision", "fp32, tf32, fp16" },
        { "\"precision\": 16", "precision", "fp32, tf32, fp16" },
        { "\"instance_group\": {\"kind\": \"KIND_CPU\"}, \"precision\": \"fp16\"", "precision", "needs a GPU" },
        { "\"instance_group\": {\"kind\": \"KIND_CPU\"}, \"precision\": \"tf32\"", "precision", "KIND_CPU" },
        { "\"cuda_graphs\": \"yes\"", "cuda_graphs", "true or false" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gj_model_config cfg;
        struct gj_error err;
        if (parse_with(bad[i].extra, &cfg, &err) == 0)
            fail_msg("accepted: %s", bad[i].extra);
        if (strcmp(err.field, bad[i].field) != 0 || !strstr(err.message, bad[i].says))
            fail_msg("%s: field '%s', message '%s'", bad[i].extra, err.field, err.message);
        gj_model_config_free(&cfg);
    }
    /* fp32 on KIND_CPU is fine */
    struct gj_model_config cfg;
    struct gj_error err;
    assert_int_equal(parse_with("\"instance_group\": {\"kind\": \"KIND_CPU\"}, "
                                "\"precision\": \"fp32\"", &cfg, &err), 0);
    gj_model_config_free(&cfg);
}

/* ---- the accounting hook ---------------------------------------------------------------- */

static void accounting_generations(void **state)
{
    (void)state;
    struct fake_host a, b;
    uint64_t gen;
    struct gj_gpu_load now;
    assert_int_equal(gj_gpu_acct_count(), -1);                  /* none registered */
    assert_int_equal(gj_gpu_acct_reserve(0, GIB, &gen, &now), 0);   /* nothing to count */
    gj_gpu_acct_release(0, GIB, gen);

    fake_attach(&a, 2, 8 * MIB);
    assert_int_equal(gj_gpu_acct_count(), 2);
    assert_int_equal(gj_gpu_acct_reserve(1, 5 * MIB, &gen, &now), 0);
    assert_int_equal(a.reserved[1], 5 * MIB);
    assert_int_equal(gj_gpu_acct_load(1, &now), 0);
    assert_int_equal(now.reserved_bytes, 5 * MIB);
    uint64_t gen2;
    assert_int_equal(gj_gpu_acct_reserve(1, 4 * MIB, &gen2, &now), -1);   /* 3 MiB free */
    assert_int_equal(now.total_bytes, 8 * MIB);
    assert_int_equal(now.reserved_bytes, 5 * MIB);
    assert_int_equal(gj_gpu_acct_load(2, &now), -1);

    /* a release made after the accounting was replaced goes nowhere */
    fake_attach(&b, 2, 8 * MIB);
    gj_gpu_acct_release(1, 5 * MIB, gen);
    assert_int_equal(b.reserved[1], 0);
    assert_int_equal(a.reserved[1], 5 * MIB);
    assert_int_equal(gj_gpu_acct_reserve(0, MIB, &gen, &now), 0);
    gj_gpu_acct_release(0, MIB, gen);
    assert_int_equal(b.reserved[0], 0);
}

static void device_estimate(void **state)
{
    (void)state;
    gj_served_model *m = demo_with("estimate", "{}");
    uint64_t one = gj_served_model_device_estimate(m, 1, 1);
    uint64_t eight = gj_served_model_device_estimate(m, 8, 1);
    print_message("    demo model: about %.1f MiB at batch 1, %.1f MiB at batch 8\n",
                  (double)one / MIB, (double)eight / MIB);
    assert_true(one > gj_served_model_file_bytes(m) / 2);   /* the weights at least */
    assert_true(eight > one);
    assert_int_equal(gj_served_model_device_estimate(m, 8, 3), 3 * eight);
    gj_served_model_release(m);
}

/* ---- device choice ---------------------------------------------------------------------- */

static void assert_refused(gj_batcher *b, const struct gj_error *err, const char *says)
{
    if (b)
        fail_msg("a batcher was created on device %d", gj_batcher_device(b));
    assert_int_equal(err->status, 503);
    if (!strstr(err->message, says))
        fail_msg("message '%s' lacks '%s'", err->message, says);
}

static void cpu_models_stay_on_cpu(void **state)
{
    (void)state;
    struct fake_host h;
    fake_attach(&h, 2, 16 * GIB);
    gj_served_model *cpu = demo_with("cpu", "{\"instance_group\": {\"kind\": \"KIND_CPU\"}}");
    gj_served_model *aut = demo_with("auto", "{}");
    struct gj_error err = { 0 };
    gj_batcher *b = gj_batcher_acquire_on(cpu, 1, &err);   /* a job placed on GPU 1 */
    assert_non_null(b);
    assert_int_equal(gj_batcher_device(b), -1);
    assert_int_equal(gj_batcher_reserved_bytes(b), 0);
    gj_batcher_release(b);
    assert_int_equal(gj_model_uses_gpu(gj_served_model_config(aut)), g_cuda);
    if (!g_cuda) {   /* KIND_AUTO without a CUDA backend: the CPU */
        b = gj_batcher_acquire(aut, &err);
        assert_non_null(b);
        assert_int_equal(gj_batcher_device(b), -1);
        gj_batcher_release(b);
        int d[4];
        assert_int_equal(gj_batcher_registry_devices("auto", 1, d, 4), 1);
        assert_int_equal(d[0], -1);
    }
    assert_int_equal(h.n_log, 0);   /* the CPU reserves nothing */
    gj_served_model_release(cpu);
    gj_served_model_release(aut);
}

static void gpu_model_without_gpu(void **state)
{
    (void)state;
    struct fake_host h;
    fake_attach(&h, 0, 0);   /* a host with no GPU */
    gj_served_model *m = demo_with("gpu", "{\"instance_group\": {\"kind\": \"KIND_GPU\"}}");
    struct gj_error err = { 0 };
    gj_batcher *b = gj_batcher_acquire(m, &err);
    assert_refused(b, &err, "needs a GPU (config.json instance_group.kind KIND_GPU) but this "
                   "server has none");
    assert_int_equal(err.transient, 0);
    assert_string_equal(err.field, "instance_group.kind");
    memset(&err, 0, sizeof err);
    assert_refused(gj_batcher_acquire_on(m, -1, &err), &err, "has none");

    /* no accounting at all (gpujobd run): GPU 0, refused there without a CUDA backend */
    gj_gpu_accounting_set(NULL);
    memset(&err, 0, sizeof err);
    b = gj_batcher_acquire(m, &err);
    if (g_cuda) {
        assert_non_null(b);
        assert_int_equal(gj_batcher_device(b), 0);
        gj_batcher_release(b);
    } else {
        assert_refused(b, &err, "cannot run on GPU 0");
    }
    gj_served_model_release(m);
}

static void gpus_out_of_range(void **state)
{
    (void)state;
    struct fake_host h;
    fake_attach(&h, 2, 16 * GIB);
    gj_served_model *m = demo_with("gpu3", "{\"instance_group\": {\"kind\": \"KIND_GPU\", "
                                           "\"gpus\": [1, 3]}}");
    struct gj_error err = { 0 };
    assert_refused(gj_batcher_acquire(m, &err), &err,
                   "instance_group.gpus lists GPU 3 but this server has 2 GPUs (0 to 1)");
    assert_string_equal(err.field, "instance_group.gpus");
    assert_int_equal(h.n_log, 0);
    gj_served_model_release(m);

    /* a batcher asked for directly on a GPU the host lacks */
    m = demo_with("gpu", "{\"instance_group\": {\"kind\": \"KIND_GPU\"}}");
    struct gj_batcher_options o = { .max_queue_delay_us = -1, .dynamic_batching = -1,
                                    .device = 5 };
    memset(&err, 0, sizeof err);
    assert_refused(gj_batcher_create(m, &o, &err), &err, "GPU 5 does not exist here (2 GPUs)");
    gj_served_model_release(m);
}

static void memory_refused(void **state)
{
    (void)state;
    struct fake_host h;
    fake_attach(&h, 2, 1 * MIB);   /* the demo model needs several MiB */
    gj_served_model *m = demo_with("gpu", "{\"instance_group\": {\"kind\": \"KIND_GPU\"}}");
    struct gj_error err = { 0 };
    gj_batcher *b = gj_batcher_acquire(m, &err);
    assert_refused(b, &err, "does not fit in the free memory of any of its 2 GPUs");
    assert_non_null(strstr(err.message, "model gpu v1 needs about"));
    assert_non_null(strstr(err.message, "MiB of GPU memory"));
    assert_non_null(strstr(err.message, "has 1.0 MiB free of 1.0 MiB"));
    assert_int_equal(err.transient, 1);   /* an infer job is retried later */
    assert_int_equal(h.n_log, 2);         /* both GPUs tried, neither fitted */
    assert_int_equal(h.log_ok[0] + h.log_ok[1], 0);
    assert_int_equal(h.reserved[0] + h.reserved[1], 0);

    /* one GPU listed: its own message */
    gj_served_model *one = demo_with("gpu1", "{\"instance_group\": {\"kind\": \"KIND_GPU\", "
                                             "\"gpus\": [1]}}");
    memset(&err, 0, sizeof err);
    assert_refused(gj_batcher_acquire(one, &err), &err, "but GPU 1 has 1.0 MiB free of 1.0 MiB");
    gj_served_model_release(one);
    gj_served_model_release(m);
}

static void least_loaded_first(void **state)
{
    (void)state;
    struct fake_host h;
    fake_attach(&h, 2, 16 * GIB);
    h.running[0] = 2;   /* GPU 1 is less loaded */
    gj_served_model *m = demo_with("gpu", "{\"instance_group\": {\"kind\": \"KIND_GPU\", "
                                          "\"count\": 2}}");
    uint64_t est = gj_served_model_device_estimate(m, gj_served_model_config(m)->max_batch_size,
                                                   2);
    struct gj_error err = { 0 };
    gj_batcher *b = gj_batcher_acquire(m, &err);
    assert_true(h.n_log >= 1);
    assert_int_equal(h.log_gpu[0], 1);
    assert_int_equal(h.log_ok[0], 1);
    if (g_cuda) {
        assert_non_null(b);
        assert_int_equal(gj_batcher_device(b), 1);
        assert_int_equal(h.reserved[1], est);
        assert_int_equal(gj_batcher_reserved_bytes(b), est);
        gj_batcher_release(b);
        assert_int_equal(gj_batcher_registry_drop("gpu", 1), 1);
    } else {
        assert_refused(b, &err, "cannot run on GPU 1");
        assert_int_equal(err.transient, 0);   /* no CUDA will not come back by retrying */
    }
    assert_int_equal(h.reserved[0] + h.reserved[1], 0);   /* released with the batcher */

    /* a job placed on GPU 0 uses GPU 0 */
    h.n_log = 0;
    memset(&err, 0, sizeof err);
    b = gj_batcher_acquire_on(m, 0, &err);
    assert_int_equal(h.log_gpu[0], 0);
    if (g_cuda) {
        assert_non_null(b);
        assert_int_equal(gj_batcher_device(b), 0);
        gj_batcher_release(b);
        gj_batcher_registry_drop("gpu", 1);
    }

    /* the least loaded GPU without room is passed over */
    h.n_log = 0;
    h.total[1] = MIB;
    memset(&err, 0, sizeof err);
    b = gj_batcher_acquire(m, &err);
    assert_int_equal(h.n_log, 2);
    assert_int_equal(h.log_gpu[0], 1);
    assert_int_equal(h.log_ok[0], 0);
    assert_int_equal(h.log_gpu[1], 0);
    assert_int_equal(h.log_ok[1], 1);
    if (g_cuda) {
        assert_int_equal(gj_batcher_device(b), 0);
        gj_batcher_release(b);
        gj_batcher_registry_drop("gpu", 1);
    } else {
        assert_refused(b, &err, "cannot run on GPU 0");
    }
    assert_int_equal(h.reserved[0] + h.reserved[1], 0);
    gj_served_model_release(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(config_instance_group),
        cmocka_unit_test(config_instance_errors),
        cmocka_unit_test_teardown(accounting_generations, clean),
        cmocka_unit_test(device_estimate),
        cmocka_unit_test_teardown(cpu_models_stay_on_cpu, clean),
        cmocka_unit_test_teardown(gpu_model_without_gpu, clean),
        cmocka_unit_test_teardown(gpus_out_of_range, clean),
        cmocka_unit_test_teardown(memory_refused, clean),
        cmocka_unit_test_teardown(least_loaded_first, clean),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
