/*
 * test_triton_models.c — cmocka tests of what a Triton user brings to the serving core
 * (compute/infer/serving): models of several inputs and outputs of any element type (FP32,
 * INT64, BOOL, FP16, STRING), models without a batch dimension, sizes left open besides the
 * batch; their configs in Triton's JSON ModelConfig or none at all (auto-complete), refusals
 * that name the tensor; gj_batcher_run batching them, splitting outputs per request and keeping
 * Triton's statistics. Models are written here with the ONNX tests' protobuf writer (pbw.h),
 * and exported by PyTorch with tests/onnx/typed_models.py (its outputs the reference).
 */
#include <math.h>
#include <pthread.h>
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
#include "infer/serving/model_repo.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "../onnx/pbw.h"
#pragma GCC diagnostic pop

static char g_dir[256];

/* ---- models ------------------------------------------------------------------------------ */

/* a FP32 [N,4] -> y = a*a; k INT64 [N,3] -> k2 = k+k; f BOOL [N,2] -> nf = !f;
 * h FP16 [N,2] -> h2 = h+h; s STRING [N,2] -> s_out = s. Outputs of unknown shape (the
 * runtime infers them), as many exporters leave them. */
static struct gb multi_model(void)
{
    struct gb b = { 0 };
    gb_input(&b, "a", T_FLOAT, 2, D(-1, 4));
    gb_input(&b, "k", T_INT64, 2, D(-1, 3));
    gb_input(&b, "f", T_BOOL, 2, D(-1, 2));
    gb_input(&b, "h", T_FLOAT16, 2, D(-1, 2));
    gb_input(&b, "s", T_STRING, 2, D(-1, 2));
    gb_node(&b, "Mul", S("a", "a"), S("y"), 0, NULL);
    gb_node(&b, "Add", S("k", "k"), S("k2"), 0, NULL);
    gb_node(&b, "Not", S("f"), S("nf"), 0, NULL);
    gb_node(&b, "Add", S("h", "h"), S("h2"), 0, NULL);
    gb_node(&b, "Identity", S("s"), S("s_out"), 0, NULL);
    gb_output(&b, "y");
    gb_output(&b, "k2");
    gb_output(&b, "nf");
    gb_output(&b, "h2");
    gb_output(&b, "s_out");
    return b;
}

/* No batch dimension: m FP32 [3, 2] and k INT64 scalar -> mk = m * float(k). */
static struct gb nobatch_model(void)
{
    struct gb b = { 0 };
    gb_input(&b, "m", T_FLOAT, 2, D(3, 2));
    gb_input(&b, "k", T_INT64, 0, D(1));
    struct pb to[1] = { pb_attr_int("to", T_FLOAT) };
    gb_node(&b, "Cast", S("k"), S("kf"), 1, to);
    gb_node(&b, "Mul", S("m", "kf"), S("mk"), 0, NULL);
    gb_output(&b, "mk");
    return b;
}

/* x FP32 [N, L] with L open -> rows = sum(x, 1) [N]; w FP32 [N, 4] -> w_out. */
static struct gb seq_model(void)
{
    static const int64_t axes[1] = { 1 };
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 2, D(-1, -1));
    gb_input(&b, "w", T_FLOAT, 2, D(-1, 4));
    gb_init(&b, "axes", T_INT64, 1, D(1), axes);
    struct pb kd[1] = { pb_attr_int("keepdims", 0) };
    gb_node(&b, "ReduceSum", S("x", "axes"), S("rows"), 1, kd);
    gb_node(&b, "Identity", S("w"), S("w_out"), 0, NULL);
    gb_output(&b, "rows");
    gb_output(&b, "w_out");
    return b;
}

/* image FP32 [N,1,2,2] -> scores = Flatten(image) [N, 4] (declared), an image model. */
static struct gb image_model(void)
{
    struct gb b = { 0 };
    gb_input(&b, "image", T_FLOAT, 4, D(-1, 1, 2, 2));
    struct pb ax[1] = { pb_attr_int("axis", 1) };
    gb_node(&b, "Flatten", S("image"), S("scores"), 1, ax);
    struct pb v = pb_vinfo("scores", T_FLOAT, 2, D(-1, 4));
    pb_msg(&b.g, 12, &v);
    return b;
}

/* The shapes of Triton's quickstart densenet_onnx: data_0 FP32 [1, 3, 224, 224] -> fc6_1 FP32
 * [1, 1000, 1, 1] (a global average pool and a 1x1 convolution, weights w[o][c] = o + c). */
static struct gb densenet_shaped_model(void)
{
    static float w[1000 * 3];
    for (int o = 0; o < 1000; o++)
        for (int c = 0; c < 3; c++)
            w[o * 3 + c] = (float)(o + c);
    struct gb b = { 0 };
    gb_input(&b, "data_0", T_FLOAT, 4, D(1, 3, 224, 224));
    gb_init(&b, "w", T_FLOAT, 4, D(1000, 3, 1, 1), w);
    gb_node(&b, "GlobalAveragePool", S("data_0"), S("pooled"), 0, NULL);
    gb_node(&b, "Conv", S("pooled", "w"), S("fc6_1"), 0, NULL);
    struct pb v = pb_vinfo("fc6_1", T_FLOAT, 4, D(1, 1000, 1, 1));
    pb_msg(&b.g, 12, &v);
    return b;
}

/* <g_dir>/<name>/1/model.onnx from b; config text (NULL: none) as config.json, and files. */
static void write_model(const char *name, struct gb *b, const char *config)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s/1", g_dir, name);
    assert_int_equal(gj_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/%s/1/model.onnx", g_dir, name);
    struct pb m = gb_finish(b);
    assert_int_equal(gj_write_file(p, m.b, m.n), 0);
    free(m.b);
    snprintf(p, sizeof p, "%s/%s/config.json", g_dir, name);
    unlink(p);
    if (config)
        assert_int_equal(gj_write_file(p, config, strlen(config)), 0);
}

static gj_served_model *load(const char *name, struct gj_error *err)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    memset(err, 0, sizeof *err);
    return gj_served_model_load(p, name, 1, err);
}

static void expect_load_error(const char *name, struct gb b, const char *config, const char *needle)
{
    struct gj_error err;
    write_model(name, &b, config);
    gj_served_model *m = load(name, &err);
    if (m || !strstr(err.message, needle))
        fail_msg("%s: expected a refusal mentioning \"%s\", got %s", name, needle,
                 m ? "a loaded model" : err.message);
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/gj-triton-models-XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    gj_batcher_registry_shutdown();
    gj_rm_rf(g_dir);
    return 0;
}

/* ---- tensors of a request ------------------------------------------------------------------ */

static struct gj_tensor tensor(const char *name, int elem, int rank, const int64_t *dims, void *data)
{
    struct gj_tensor t = { .elem_type = elem, .rank = rank, .data = data };
    snprintf(t.name, sizeof t.name, "%s", name);
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)(t.dims[i] = dims[i]);
    t.bytes = n * onnx_elem_size(elem);
    return t;
}

static struct gj_tensor wanted(const char *name)
{
    struct gj_tensor t = { 0 };
    snprintf(t.name, sizeof t.name, "%s", name);
    return t;
}

/* One request of multi_model with n samples, values derived from seed. */
struct multi_req {
    size_t n;
    float a[8 * 4];
    int64_t k[8 * 3];
    uint8_t f[8 * 2];
    uint16_t h[8 * 2];
    char text[8 * 2][40];   /* "s" int "-" size_t */
    struct onnx_string s[8 * 2];
    struct gj_tensor in[5], out[5];
    gj_batcher *b;
    int rc;
    struct gj_error err;
    struct gj_batch_timing t;
};

static void multi_fill(struct multi_req *r, size_t n, int seed)
{
    r->n = n;
    for (size_t i = 0; i < n * 4; i++)
        r->a[i] = (float)seed + 0.25f * (float)i;
    for (size_t i = 0; i < n * 3; i++)
        r->k[i] = (int64_t)seed * 1000000000000LL + (int64_t)i;
    for (size_t i = 0; i < n * 2; i++) {
        r->f[i] = (uint8_t)((seed + i) % 2);
        r->h[i] = onnx_float_to_half((float)seed + 0.5f * (float)i);
        snprintf(r->text[i], sizeof r->text[i], "s%d-%zu", seed, i);
        r->s[i] = (struct onnx_string){ r->text[i], strlen(r->text[i]) };
    }
    int64_t N = (int64_t)n;
    r->in[0] = tensor("a", ONNX_ELEM_FLOAT, 2, D(N, 4), r->a);
    r->in[1] = tensor("k", ONNX_ELEM_INT64, 2, D(N, 3), r->k);
    r->in[2] = tensor("f", ONNX_ELEM_BOOL, 2, D(N, 2), r->f);
    r->in[3] = tensor("h", ONNX_ELEM_FLOAT16, 2, D(N, 2), r->h);
    r->in[4] = tensor("s", ONNX_ELEM_STRING, 2, D(N, 2), r->s);
    const char *names[5] = { "s_out", "y", "k2", "nf", "h2" };   /* another order */
    for (int i = 0; i < 5; i++)
        r->out[i] = wanted(names[i]);
}

static void multi_check(struct multi_req *r, int seed)
{
    if (r->rc != GJ_BATCH_OK)
        fail_msg("request %d: %s", seed, r->err.message);
    size_t n = r->n;
    memset(r->text, 'X', sizeof r->text);   /* the STRING output is a copy, not the input's bytes */
    const struct onnx_string *so = r->out[0].data;
    const float *y = r->out[1].data;
    const int64_t *k2 = r->out[2].data;
    const uint8_t *nf = r->out[3].data;
    const uint16_t *h2 = r->out[4].data;
    assert_int_equal(r->out[0].elem_type, ONNX_ELEM_STRING);
    assert_int_equal(r->out[0].bytes, n * 2 * sizeof(struct onnx_string));
    assert_int_equal(r->out[1].dims[0], (int64_t)n);
    assert_int_equal(r->out[1].dims[1], 4);
    assert_int_equal(r->out[2].elem_type, ONNX_ELEM_INT64);
    for (size_t i = 0; i < n * 2; i++) {
        char want[48];
        snprintf(want, sizeof want, "s%d-%zu", seed, i);
        assert_int_equal(so[i].len, strlen(want));
        assert_memory_equal(so[i].data, want, so[i].len);
        assert_int_equal(nf[i], (uint8_t)(1 - (seed + i) % 2));
        assert_true(onnx_half_to_float(h2[i]) == 2.0f * ((float)seed + 0.5f * (float)i));
    }
    for (size_t i = 0; i < n * 4; i++)
        assert_true(y[i] == ((float)seed + 0.25f * (float)i) * ((float)seed + 0.25f * (float)i));
    for (size_t i = 0; i < n * 3; i++)
        assert_true(k2[i] == 2 * ((int64_t)seed * 1000000000000LL + (int64_t)i));
    gj_tensors_free(r->out, 5);
}

static void *multi_client(void *arg)
{
    struct multi_req *r = arg;
    r->rc = gj_batcher_run(r->b, r->in, 5, r->out, 5, 0, &r->t, &r->err);
    return NULL;
}

/* ---- tests --------------------------------------------------------------------------------- */

/* No config: Triton's auto-complete. Every input and output has a variable first dimension,
 * so max_batch_size 4 and the dynamic batcher; types and dims from the model. */
static void autocomplete_multi(void **state)
{
    (void)state;
    struct gb b = multi_model();
    write_model("multi", &b, NULL);
    struct gj_error err;
    gj_served_model *m = load("multi", &err);
    if (!m)
        fail_msg("%s", err.message);
    const struct gj_model_config *cfg = gj_served_model_config(m);
    assert_int_equal(cfg->max_batch_size, 4);
    assert_int_equal(cfg->no_batch, 0);
    assert_int_equal(cfg->dynamic_batching, 1);
    assert_true(cfg->autocompleted);
    assert_int_equal(cfg->n_inputs, 5);
    assert_int_equal(cfg->n_output_tensors, 5);
    assert_int_equal(cfg->inputs[4].elem_type, ONNX_ELEM_STRING);
    assert_int_equal(cfg->inputs[1].rank, 1);
    assert_int_equal(cfg->inputs[1].dims[0], 3);
    assert_int_equal(cfg->outputs[3].rank, 1);   /* h2: its shape from the trial session */
    assert_int_equal(cfg->outputs[3].dims[0], 2);
    assert_int_equal(cfg->image_model, 0);
    assert_non_null(strstr(cfg->not_image, "5 inputs"));
    json_t *j = gj_model_config_to_triton_json(cfg);
    assert_string_equal(json_string_value(json_object_get(j, "platform")), "onnxruntime_onnx");
    assert_int_equal(json_integer_value(json_object_get(j, "max_batch_size")), 4);
    json_t *in = json_object_get(j, "input");
    assert_string_equal(json_string_value(json_object_get(json_array_get(in, 4), "data_type")), "TYPE_STRING");
    assert_string_equal(json_string_value(json_object_get(json_array_get(in, 3), "data_type")), "TYPE_FP16");
    assert_string_equal(json_string_value(json_object_get(json_array_get(in, 2), "data_type")), "TYPE_BOOL");
    /* what GET config answers parses back (load_model(config=...) sends it) */
    struct gj_model_config back;
    if (gj_model_config_parse(j, "multi", &back, &err))
        fail_msg("the Triton JSON does not parse back: %s: %s", err.field, err.message);
    assert_int_equal(back.n_inputs, 5);
    assert_int_equal(back.max_batch_size, 4);
    assert_int_equal(back.inputs[0].dims[0], 4);
    gj_model_config_free(&back);
    json_decref(j);
    j = gj_model_config_to_json(cfg);   /* GET /v1/models/{m}: no image fields to show */
    assert_string_equal(json_string_value(json_object_get(j, "backend")), "onnxruntime");
    json_decref(j);
    gj_served_model_release(m);

    /* the repository's config: as written until loaded, then as completed */
    gj_model_repo *repo = gj_model_repo_open(g_dir, &err);
    assert_non_null(repo);
    struct gj_model_config rc;
    assert_int_equal(gj_model_repo_config(repo, "multi", 1, &rc, &err), 0);
    assert_int_equal(rc.n_inputs, 0);
    gj_model_config_free(&rc);
    assert_int_equal(gj_model_repo_load(repo, "multi", 1, &m, &err), 0);
    assert_int_equal(gj_model_repo_config(repo, "multi", 1, &rc, &err), 0);
    assert_int_equal(rc.n_inputs, 5);
    assert_int_equal(rc.max_batch_size, 4);
    assert_string_equal(rc.outputs[4].name, "s_out");
    gj_model_config_free(&rc);
    gj_served_model_release(m);
    gj_model_repo_free(repo);
}

/* Four concurrent requests of one sample each form one batch of 4 (preferred size); each gets
 * its own rows of every output; Triton's statistics count them. */
static void batches_typed_tensors(void **state)
{
    (void)state;
    struct gb b = multi_model();
    write_model("multi", &b, "{\"max_batch_size\": 4, \"dynamic_batching\": "
                "{\"max_queue_delay_microseconds\": \"2000000\", \"preferred_batch_size\": [4]}}");
    struct gj_error err;
    gj_served_model *m = load("multi", &err);
    if (!m)
        fail_msg("%s", err.message);
    gj_batcher *bt = gj_batcher_create(m, NULL, &err);
    assert_non_null(bt);
    static struct multi_req r[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        multi_fill(&r[i], 1, i + 1);
        r[i].b = bt;
        assert_int_equal(pthread_create(&th[i], NULL, multi_client, &r[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        multi_check(&r[i], i + 1);
        assert_int_equal(r[i].t.batch_size, 4);
    }
    /* several samples in one request, a subset of the outputs */
    static struct multi_req big;
    multi_fill(&big, 3, 7);
    struct gj_tensor k2 = wanted("k2");
    assert_int_equal(gj_batcher_run(bt, big.in, 5, &k2, 1, 0, NULL, &err), GJ_BATCH_OK);
    assert_int_equal(k2.dims[0], 3);
    assert_int_equal(((int64_t *)k2.data)[8], 2 * (7 * 1000000000000LL + 8));
    gj_tensors_free(&k2, 1);

    struct gj_batch_stats st;
    assert_int_equal(gj_batch_stats_get("multi", 1, &st), 0);
    assert_int_equal(st.request_success, 5);
    assert_int_equal(st.success.count, 5);
    assert_int_equal(st.compute_infer.count, 5);
    assert_int_equal(st.inference_count, 7);
    assert_int_equal(st.exec_count, 2);
    assert_true(st.queue.ns > 0 && st.compute_infer.ns > 0 && st.success.ns >= st.queue.ns);
    assert_true(st.last_inference_ms > 1700000000000ULL);
    struct gj_batch_size_stats bs[8];
    assert_int_equal(gj_batch_stats_batches("multi", 1, bs, 8), 2);
    assert_int_equal(bs[0].batch_size, 3);
    assert_int_equal(bs[1].batch_size, 4);
    assert_int_equal(bs[1].compute_infer.count, 1);
    gj_batcher_destroy(bt);
    gj_served_model_release(m);
}

static void expect_refused(gj_batcher *bt, struct gj_tensor *in, size_t n_in, struct gj_tensor *out,
                           size_t n_out, const char *needle)
{
    struct gj_error err = { 0 };
    int rc = gj_batcher_run(bt, in, n_in, out, n_out, 0, NULL, &err);
    if (rc != GJ_BATCH_EINVAL || err.status != 400 || !strstr(err.message, needle))
        fail_msg("expected 400 mentioning \"%s\", got %d %d: %s", needle, rc, err.status, err.message);
    for (size_t i = 0; i < n_out; i++)
        assert_null(out[i].data);
}

/* Every way a request can be wrong: 400, the tensor named, nothing allocated. */
static void refuses_bad_requests(void **state)
{
    (void)state;
    struct gb b = multi_model();
    write_model("multi", &b, NULL);
    struct gj_error err;
    gj_served_model *m = load("multi", &err);
    gj_batcher *bt = gj_batcher_create(m, NULL, &err);
    assert_non_null(bt);
    struct gj_batch_stats s0, s1;
    gj_batch_stats_get("multi", 1, &s0);
    static struct multi_req r;
    multi_fill(&r, 2, 1);
    struct gj_tensor in[6];
    memcpy(in, r.in, sizeof r.in);
    in[1].elem_type = ONNX_ELEM_INT32;
    expect_refused(bt, in, 5, r.out, 5, "input 'k' is INT32 but the model takes INT64");
    memcpy(in, r.in, sizeof r.in);
    expect_refused(bt, in, 4, r.out, 5, "input 's' is missing");
    in[5] = in[0];
    snprintf(in[5].name, sizeof in[5].name, "zz");
    expect_refused(bt, in, 6, r.out, 5, "has no input 'zz'; its inputs are: a, k, f, h, s");
    in[5] = in[0];
    expect_refused(bt, in, 6, r.out, 5, "input 'a' is given twice");
    struct gj_tensor o2[2] = { wanted("y"), wanted("nope") };
    expect_refused(bt, r.in, 5, o2, 2, "has no output 'nope'");
    o2[1] = wanted("y");
    expect_refused(bt, r.in, 5, o2, 2, "output 'y' is requested twice");
    r.f[1] = 2;
    expect_refused(bt, r.in, 5, r.out, 5, "input 'f': element 1 of a BOOL tensor is 2");
    r.f[1] = 1;
    memcpy(in, r.in, sizeof r.in);
    in[3].dims[0] = 1;
    in[3].bytes /= 2;
    expect_refused(bt, in, 5, r.out, 5, "every input has the same batch size");
    memcpy(in, r.in, sizeof r.in);
    in[0].dims[1] = 5;
    expect_refused(bt, in, 5, r.out, 5, "input 'a' has shape [2, 5] but the model takes [-1, 4]");
    memcpy(in, r.in, sizeof r.in);
    in[0].bytes -= 4;
    expect_refused(bt, in, 5, r.out, 5, "input 'a' has 28 bytes but its shape and type take 32");
    static struct multi_req many;
    multi_fill(&many, 5, 1);
    expect_refused(bt, many.in, 5, r.out, 5, "the model takes [-1, 4] with a batch of 1 to max_batch_size");
    r.s[0].data = NULL;
    expect_refused(bt, r.in, 5, r.out, 5, "input 's': element 0 of a BYTES tensor has no data");
    /* image-only entry points refuse a model that is not one, saying why */
    float x[4], y[4];
    assert_int_equal(gj_batcher_infer(bt, x, 1, y, 0, NULL, &err), GJ_BATCH_EINVAL);
    assert_non_null(strstr(err.message, "is not an image model"));
    gj_batch_stats_get("multi", 1, &s1);   /* each refusal is a failed request, none ran */
    assert_int_equal(s1.fail.count - s0.fail.count, 13);
    assert_int_equal(s1.request_failure - s0.request_failure, 13);
    assert_int_equal(s1.success.count, s0.success.count);
    assert_int_equal(s1.exec_count, s0.exec_count);
    gj_batcher_destroy(bt);
    gj_served_model_release(m);
}

struct nb_req {
    gj_batcher *b;
    float mat[6];
    int64_t k;
    struct gj_tensor out;
    int rc;
    struct gj_batch_timing t;
};

static void *nb_client(void *arg)
{
    struct nb_req *r = arg;
    struct gj_tensor in[2] = { tensor("k", ONNX_ELEM_INT64, 0, NULL, &r->k),
                               tensor("m", ONNX_ELEM_FLOAT, 2, D(3, 2), r->mat) };
    struct gj_error err = { 0 };
    r->out = wanted("mk");
    r->rc = gj_batcher_run(r->b, in, 2, &r->out, 1, 0, &r->t, &err);
    return NULL;
}

/* Fixed first dimensions: auto-complete gives max_batch_size 0; one request per run, the
 * tensors keep the model's shapes (a scalar too). */
static void no_batch_dimension(void **state)
{
    (void)state;
    struct gb b = nobatch_model();
    write_model("nb", &b, NULL);
    struct gj_error err;
    gj_served_model *m = load("nb", &err);
    if (!m)
        fail_msg("%s", err.message);
    const struct gj_model_config *cfg = gj_served_model_config(m);
    assert_int_equal(cfg->no_batch, 1);
    assert_int_equal(cfg->inputs[0].rank, 2);
    assert_int_equal(cfg->inputs[1].rank, 0);
    json_t *j = gj_model_config_to_triton_json(cfg);
    assert_int_equal(json_integer_value(json_object_get(j, "max_batch_size")), 0);
    json_decref(j);
    struct gj_batcher_options opt = { .dynamic_batching = 1, .max_queue_delay_us = 100000,
                                      .device = -1 };
    gj_batcher *bt = gj_batcher_create(m, &opt, &err);
    assert_non_null(bt);
    struct nb_req r[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].b = bt;
        r[i].k = i + 2;
        for (int e = 0; e < 6; e++)
            r[i].mat[e] = (float)e;
        assert_int_equal(pthread_create(&th[i], NULL, nb_client, &r[i]), 0);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r[i].rc, GJ_BATCH_OK);
        assert_int_equal(r[i].t.batch_size, 1);
        assert_int_equal(r[i].out.rank, 2);
        assert_int_equal(r[i].out.dims[0], 3);
        for (int e = 0; e < 6; e++)
            assert_true(((float *)r[i].out.data)[e] == (float)e * (float)(i + 2));
        gj_tensors_free(&r[i].out, 1);
    }
    /* with the batch dimension it does not have */
    struct gj_tensor in[2] = { tensor("k", ONNX_ELEM_INT64, 1, D(1), &r[0].k),
                               tensor("m", ONNX_ELEM_FLOAT, 2, D(3, 2), r[0].mat) };
    struct gj_tensor out = wanted("mk");
    expect_refused(bt, in, 2, &out, 1, "input 'k' has shape [1] but the model takes []");
    gj_batcher_destroy(bt);
    gj_served_model_release(m);
    /* max_batch_size > 0 on such a model is refused at load */
    expect_load_error("nb", nobatch_model(), "{\"max_batch_size\": 2}", "fixed first dimension 3");
}

struct seq_req {
    gj_batcher *b;
    int64_t len;
    float x[16], w[4];
    struct gj_tensor out[2];
    int rc;
    struct gj_batch_timing t;
    struct gj_error err;
};

static void *seq_client(void *arg)
{
    struct seq_req *r = arg;
    struct gj_tensor in[2] = { tensor("x", ONNX_ELEM_FLOAT, 2, D(1, r->len), r->x),
                               tensor("w", ONNX_ELEM_FLOAT, 2, D(1, 4), r->w) };
    r->out[0] = wanted("rows");
    r->out[1] = wanted("w_out");
    r->rc = gj_batcher_run(r->b, in, 2, r->out, 2, 0, &r->t, &r->err);
    return NULL;
}

/* A size the model leaves open besides the batch: requests of equal length batch together,
 * another length runs in its own batch with its own session. */
static void open_sizes_batch_by_shape(void **state)
{
    (void)state;
    struct gb b = seq_model();
    write_model("seq", &b, "{\"max_batch_size\": 8, \"input\": ["
                "{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [\"-1\"]},"
                "{\"name\": \"w\", \"data_type\": \"TYPE_FP32\", \"dims\": [4]}],"
                " \"output\": [{\"name\": \"rows\", \"data_type\": \"TYPE_FP32\", \"dims\": []},"
                "{\"name\": \"w_out\", \"data_type\": \"TYPE_FP32\", \"dims\": [4]}],"
                " \"dynamic_batching\": {\"max_queue_delay_microseconds\": 300000}}");
    struct gj_error err;
    gj_served_model *m = load("seq", &err);
    if (!m)
        fail_msg("%s", err.message);
    gj_batcher *bt = gj_batcher_create(m, NULL, &err);
    assert_non_null(bt);
    struct seq_req r[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].b = bt;
        r[i].len = i % 2 ? 5 : 3;
        for (int e = 0; e < r[i].len; e++)
            r[i].x[e] = (float)(i + 1);
        for (int e = 0; e < 4; e++)
            r[i].w[e] = (float)(10 * i + e);
        assert_int_equal(pthread_create(&th[i], NULL, seq_client, &r[i]), 0);
        usleep(20000);   /* in this order: 3, 5, 3, 5 */
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        if (r[i].rc != GJ_BATCH_OK)
            fail_msg("request %d: %s", i, r[i].err.message);
        assert_true(r[i].t.batch_size <= 2);
        assert_int_equal(r[i].out[0].dims[0], 1);
        assert_true(((float *)r[i].out[0].data)[0] == (float)(i + 1) * (float)r[i].len);
        assert_true(((float *)r[i].out[1].data)[3] == (float)(10 * i + 3));
        gj_tensors_free(r[i].out, 2);
    }
    assert_true(gj_batcher_sessions(bt) >= 2);
    gj_batcher_destroy(bt);
    gj_served_model_release(m);
    /* a config that lists some outputs serves those only, as Triton */
    b = seq_model();
    write_model("seq", &b, "{\"max_batch_size\": 8, \"output\": [{\"name\": \"rows\", \"data_type\":"
                " \"TYPE_FP32\", \"dims\": []}]}");
    m = load("seq", &err);
    if (!m)
        fail_msg("%s", err.message);
    bt = gj_batcher_create(m, NULL, &err);
    float x[3] = { 1, 2, 3 }, w[4] = { 0 };
    struct gj_tensor in[2] = { tensor("x", ONNX_ELEM_FLOAT, 2, D(1, 3), x),
                               tensor("w", ONNX_ELEM_FLOAT, 2, D(1, 4), w) };
    struct gj_tensor out = wanted("w_out");
    expect_refused(bt, in, 2, &out, 1, "model seq has no output 'w_out'; its outputs are: rows");
    gj_batcher_destroy(bt);
    gj_served_model_release(m);
}

/* A real Triton config (a BERT classifier served with onnxruntime_onnx, from a public model
 * repository's config.pbtxt), in the JSON Triton's GET /v2/models/{m}/config answers:
 * 64-bit integers as strings, every field present. */
static const char bert_triton_json[] =
    "{\"name\": \"bert\", \"platform\": \"onnxruntime_onnx\", \"backend\": \"onnxruntime\","
    " \"version_policy\": {\"all\": {}}, \"max_batch_size\": 192,"
    " \"input\": ["
    "  {\"name\": \"input_ids\", \"data_type\": \"TYPE_INT64\", \"format\": \"FORMAT_NONE\","
    "   \"dims\": [\"512\"], \"is_shape_tensor\": false, \"allow_ragged_batch\": false, \"optional\": false},"
    "  {\"name\": \"input_mask\", \"data_type\": \"TYPE_INT64\", \"format\": \"FORMAT_NONE\","
    "   \"dims\": [\"512\"], \"is_shape_tensor\": false, \"allow_ragged_batch\": false, \"optional\": false},"
    "  {\"name\": \"token_type_ids\", \"data_type\": \"TYPE_INT64\", \"format\": \"FORMAT_NONE\","
    "   \"dims\": [\"512\"], \"is_shape_tensor\": false, \"allow_ragged_batch\": false, \"optional\": false}],"
    " \"output\": [{\"name\": \"output\", \"data_type\": \"TYPE_FP32\", \"dims\": [\"112\"],"
    "   \"label_filename\": \"\", \"is_shape_tensor\": false}],"
    " \"batch_input\": [], \"batch_output\": [],"
    " \"optimization\": {\"priority\": \"PRIORITY_DEFAULT\", \"input_pinned_memory\": {\"enable\": true},"
    "   \"output_pinned_memory\": {\"enable\": true}, \"gather_kernel_buffer_threshold\": 0,"
    "   \"eager_batching\": false},"
    " \"dynamic_batching\": {\"preferred_batch_size\": [1, 2, 4, 8, 16, 32, 64, 128, 192],"
    "   \"max_queue_delay_microseconds\": \"30000\", \"preserve_ordering\": false,"
    "   \"priority_levels\": \"0\", \"default_priority_level\": \"0\", \"priority_queue_policy\": {}},"
    " \"instance_group\": [{\"name\": \"bert_0\", \"kind\": \"KIND_GPU\", \"count\": 1, \"gpus\": [0],"
    "   \"secondary_devices\": [], \"profile\": [], \"passive\": false, \"host_policy\": \"\"}],"
    " \"default_model_filename\": \"model.onnx\", \"cc_model_filenames\": {}, \"metric_tags\": {},"
    " \"parameters\": {\"intra_op_thread_count\": {\"string_value\": \"4\"}},"
    " \"model_warmup\": [], \"response_cache\": {\"enable\": false}}";

static int parse_text(const char *text, struct gj_model_config *cfg, struct gj_error *err)
{
    memset(err, 0, sizeof *err);
    return gj_model_config_load_text(text, strlen(text), NULL, cfg, err);
}

static void triton_json_config(void **state)
{
    (void)state;
    struct gj_model_config cfg;
    struct gj_error err;
    if (parse_text(bert_triton_json, &cfg, &err))
        fail_msg("%s: %s", err.field, err.message);
    assert_int_equal(cfg.max_batch_size, 192);
    assert_int_equal(cfg.no_batch, 0);
    assert_int_equal(cfg.n_inputs, 3);
    assert_string_equal(cfg.inputs[2].name, "token_type_ids");
    assert_int_equal(cfg.inputs[0].elem_type, ONNX_ELEM_INT64);
    assert_int_equal(cfg.inputs[0].dims[0], 512);
    assert_int_equal(cfg.outputs[0].dims[0], 112);
    assert_int_equal(cfg.max_queue_delay_us, 30000);
    assert_int_equal(cfg.n_preferred, 9);
    assert_int_equal(cfg.instance_kind, GJ_INSTANCE_GPU);
    assert_string_equal(json_string_value(json_object_get(json_object_get(cfg.parameters,
                        "intra_op_thread_count"), "string_value")), "4");
    json_t *j = gj_model_config_to_triton_json(&cfg);
    json_t *dims = json_object_get(json_array_get(json_object_get(j, "input"), 0), "dims");
    assert_int_equal(json_integer_value(json_array_get(dims, 0)), 512);
    json_decref(j);
    gj_model_config_free(&cfg);

    /* max_batch_size 0: no batch dimension; scalars; every data type */
    const char *types = "{\"max_batch_size\": 0, \"input\": ["
        "{\"name\": \"b\", \"data_type\": \"TYPE_BOOL\", \"dims\": []},"
        "{\"name\": \"u8\", \"data_type\": \"TYPE_UINT8\", \"dims\": [2]},"
        "{\"name\": \"i16\", \"data_type\": \"TYPE_INT16\", \"dims\": [2]},"
        "{\"name\": \"f16\", \"data_type\": \"TYPE_FP16\", \"dims\": [-1, 2]},"
        "{\"name\": \"bf\", \"data_type\": \"TYPE_BF16\", \"dims\": [1]},"
        "{\"name\": \"f64\", \"data_type\": \"TYPE_FP64\", \"dims\": [1]},"
        "{\"name\": \"u64\", \"data_type\": \"TYPE_UINT64\", \"dims\": [1]},"
        "{\"name\": \"str\", \"data_type\": \"TYPE_STRING\", \"dims\": [3]}],"
        " \"output\": [{\"name\": \"o\", \"data_type\": \"TYPE_INT32\", \"dims\": [1],"
        " \"label_filename\": \"labels.txt\"}]}";
    if (parse_text(types, &cfg, &err))
        fail_msg("%s: %s", err.field, err.message);
    assert_int_equal(cfg.no_batch, 1);
    static const int want[8] = { ONNX_ELEM_BOOL, ONNX_ELEM_UINT8, ONNX_ELEM_INT16, ONNX_ELEM_FLOAT16,
                                 ONNX_ELEM_BFLOAT16, ONNX_ELEM_DOUBLE, ONNX_ELEM_UINT64, ONNX_ELEM_STRING };
    for (int i = 0; i < 8; i++)
        assert_int_equal(cfg.inputs[i].elem_type, want[i]);
    assert_int_equal(cfg.inputs[0].rank, 0);
    assert_int_equal(cfg.inputs[3].dims[0], -1);
    assert_string_equal(cfg.outputs[0].label_filename, "labels.txt");
    gj_model_config_free(&cfg);
}

/* Triton JSON that is wrong, or asks for what is not implemented: refused by field. */
static void triton_json_refusals(void **state)
{
    (void)state;
    static const struct { const char *json, *field, *needle; } cases[] = {
        { "{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP8\", \"dims\": [1]}]}",
          "input[0].data_type", "must be one of TYPE_BOOL" },
        { "{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [0]}]}",
          "input[0].dims[0]", "is 0" },
        { "{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [1]},"
          " {\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [1]}]}", "input[1]", "given twice" },
        { "{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [1], \"optional\": true}]}",
          "input[0].optional", "optional inputs are not supported" },
        { "{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [4],"
          " \"reshape\": {\"shape\": [2, 3]}}]}", "input[0].reshape.shape", "has 6 elements but dims has 4" },
        { "{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [-1],"
          " \"reshape\": {\"shape\": [2, 2]}}]}", "input[0].reshape.shape", "needs fixed sizes" },
        { "{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [1], \"colour\": 1}]}",
          "input[0].colour", "unknown key" },
        { "{\"output\": [{\"name\": \"y\", \"data_type\": \"TYPE_FP32\", \"dims\": [1],"
          " \"label_filename\": \"../etc/passwd\"}]}", "output[0].label_filename", "a file name" },
        { "{\"sequence_batching\": {\"max_sequence_idle_microseconds\": 5}}", "sequence_batching",
          "not supported" },
        { "{\"backend\": \"pytorch\"}", "backend", "onnxruntime" },
        { "{\"platform\": \"tensorrt_plan\"}", "platform", "onnxruntime_onnx" },
        { "{\"input\": {\"name\": \"x\", \"dims\": [1, 2, 2]}, \"output\": []}", "input", "not one of each" },
        { "{\"dynamic_batching\": {\"default_queue_policy\": {\"timeout_action\": \"DELAY\"}}}",
          "dynamic_batching.default_queue_policy.timeout_action", "DELAY is not supported" },
        { "{\"parameters\": {\"k\": \"v\"}}", "parameters.k", "string_value" },
        { "{\"model_transaction_policy\": {\"decoupled\": true}}", "model_transaction_policy", "decoupled" },
        { "{\"max_batch_size\": 4, \"dynamic_batching\": {\"preferred_batch_size\": [8]}}",
          "dynamic_batching.preferred_batch_sizes[0]", "more than max_batch_size 4" },
        { "{\"max_batch_size\": \"4\"}", "max_batch_size", "must be an integer" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gj_model_config cfg;
        struct gj_error err;
        int rc = parse_text(cases[i].json, &cfg, &err);
        if (rc != -1 || strcmp(err.field, cases[i].field) != 0 || !strstr(err.message, cases[i].needle))
            fail_msg("case %zu: %s -> rc %d field '%s' message '%s'", i, cases[i].json, rc, err.field,
                     err.message);
        gj_model_config_free(&cfg);
    }
}

/* A given config is checked against the model at load, each refusal naming the tensor. */
static void config_checked_against_model(void **state)
{
    (void)state;
    expect_load_error("chk", multi_model(), "{\"input\": [{\"name\": \"a\", \"data_type\": \"TYPE_FP32\","
                      " \"dims\": [4]}]}", "the model's input 'k' is missing from the config");
    expect_load_error("chk", multi_model(), "{\"input\": [{\"name\": \"A\", \"data_type\": \"TYPE_FP32\","
                      " \"dims\": [4]}]}", "input 'A' is not an input of the model; its inputs are: a, k, f, h, s");
    expect_load_error("chk", multi_model(), "{\"max_batch_size\": 4, \"input\": [{\"name\": \"k\","
                      " \"data_type\": \"TYPE_INT32\", \"dims\": [3]}]}",
                      "input 'k' is TYPE_INT32 but the model's is TYPE_INT64");
    expect_load_error("chk", multi_model(), "{\"max_batch_size\": 4, \"input\": [{\"name\": \"a\","
                      " \"data_type\": \"TYPE_FP32\", \"dims\": [5]}]}",
                      "input 'a' has dims [5] but the model's is [-1, 4]");
    expect_load_error("chk", nobatch_model(), "{\"input\": [{\"name\": \"m\", \"data_type\": \"TYPE_FP32\","
                      " \"dims\": [2]}, {\"name\": \"k\", \"data_type\": \"TYPE_INT64\", \"dims\": []}],"
                      " \"output\": [{\"name\": \"mk\", \"data_type\": \"TYPE_FP32\", \"dims\": [3, 2]}]}",
                      "input 'm' has dims [2] (no batch dimension: max_batch_size 0) but the model's is [3, 2]");
    expect_load_error("chk", multi_model(), "{\"output\": [{\"name\": \"zz\", \"data_type\": \"TYPE_FP32\","
                      " \"dims\": [4]}]}", "output 'zz' is not an output of the model");
    expect_load_error("chk", multi_model(), "{\"output\": [{\"name\": \"y\", \"data_type\": \"TYPE_FP32\","
                      " \"dims\": [4], \"label_filename\": \"missing.txt\"}]}", "cannot read the label file");
}

/* An image model in Triton's form: labels from its label file (gj_served_model_output_labels),
 * and `infer` jobs' float entry point works on it. */
static void triton_image_model_with_label_file(void **state)
{
    (void)state;
    struct gb b = image_model();
    write_model("img", &b, "{\"max_batch_size\": 2, \"input\": [{\"name\": \"image\", \"data_type\":"
                " \"TYPE_FP32\", \"dims\": [1, 2, 2]}], \"output\": [{\"name\": \"scores\", \"data_type\":"
                " \"TYPE_FP32\", \"dims\": [4], \"label_filename\": \"labels.txt\"}],"
                " \"preprocessing\": {\"window\": {\"source\": \"minmax\"}}}");
    char p[512];
    snprintf(p, sizeof p, "%s/img/labels.txt", g_dir);
    assert_int_equal(gj_write_file(p, "cat\ndog\r\nbird\nfish\n", 19), 0);
    struct gj_error err;
    gj_served_model *m = load("img", &err);
    if (!m)
        fail_msg("%s", err.message);
    const struct gj_model_config *cfg = gj_served_model_config(m);
    assert_int_equal(cfg->image_model, 1);
    assert_int_equal(cfg->n_labels, 4);
    assert_int_equal(cfg->pre.window_source, GJ_WINDOW_MINMAX);
    size_t n = 0;
    const char *const *l = gj_served_model_output_labels(m, 0, &n);
    assert_int_equal(n, 4);
    assert_string_equal(l[1], "dog");
    assert_string_equal(l[3], "fish");
    assert_null(gj_served_model_output_labels(m, 1, &n));
    assert_int_equal(n, 0);
    gj_batcher *bt = gj_batcher_create(m, NULL, &err);
    float in[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, out[8];
    assert_int_equal(gj_batcher_infer(bt, in, 2, out, 0, NULL, &err), GJ_BATCH_OK);
    assert_memory_equal(in, out, sizeof in);
    gj_batcher_destroy(bt);
    gj_served_model_release(m);
    /* labels that do not fit the scores: not an image model, and preprocessing says so */
    snprintf(p, sizeof p, "%s/img/labels.txt", g_dir);
    assert_int_equal(gj_write_file(p, "cat\ndog\n", 8), 0);
    expect_load_error("img", image_model(), "{\"max_batch_size\": 2, \"output\": [{\"name\": \"scores\","
                      " \"data_type\": \"TYPE_FP32\", \"dims\": [4], \"label_filename\": \"labels.txt\"}],"
                      " \"preprocessing\": {}}", "not an image model: its label file labels.txt has 2 labels");
}

/* Triton's quickstart densenet_onnx config (docs/examples/model_repository/densenet_onnx/
 * config.pbtxt in triton-inference-server/server), as JSON: no batch dimension, reshapes on
 * both sides, a label file. Clients send [3, 224, 224] and get [1000] with its labels. */
static const char densenet_config[] =
    "{\"name\": \"densenet_onnx\", \"platform\": \"onnxruntime_onnx\", \"max_batch_size\": 0,"
    " \"input\": [{\"name\": \"data_0\", \"data_type\": \"TYPE_FP32\", \"format\": \"FORMAT_NCHW\","
    "   \"dims\": [3, 224, 224], \"reshape\": {\"shape\": [1, 3, 224, 224]}}],"
    " \"output\": [{\"name\": \"fc6_1\", \"data_type\": \"TYPE_FP32\", \"dims\": [1000],"
    "   \"reshape\": {\"shape\": [1, 1000, 1, 1]}, \"label_filename\": \"densenet_labels.txt\"}]}";

static void triton_quickstart_densenet(void **state)
{
    (void)state;
    struct gb b = densenet_shaped_model();
    write_model("densenet_onnx", &b, densenet_config);
    char p[512], labels[1000 * 12] = "";
    for (int i = 0; i < 1000; i++)
        snprintf(labels + strlen(labels), sizeof labels - strlen(labels), "class%d\n", i);
    snprintf(p, sizeof p, "%s/densenet_onnx/densenet_labels.txt", g_dir);
    assert_int_equal(gj_write_file(p, labels, strlen(labels)), 0);
    struct gj_error err;
    gj_served_model *m = load("densenet_onnx", &err);
    if (!m)
        fail_msg("%s", err.message);
    const struct gj_model_config *cfg = gj_served_model_config(m);
    assert_int_equal(cfg->no_batch, 1);
    assert_int_equal(cfg->inputs[0].reshape_rank, 4);
    size_t n = 0;
    const char *const *l = gj_served_model_output_labels(m, 0, &n);
    assert_int_equal(n, 1000);
    assert_string_equal(l[999], "class999");
    json_t *j = gj_model_config_to_triton_json(cfg);
    json_t *rs = json_object_get(json_object_get(json_array_get(json_object_get(j, "output"), 0),
                                                 "reshape"), "shape");
    assert_int_equal(json_array_size(rs), 4);
    assert_int_equal(json_integer_value(json_array_get(rs, 1)), 1000);
    json_decref(j);
    static float img[3 * 224 * 224];
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 224 * 224; i++)
            img[c * 224 * 224 + i] = (float)(c + 1);   /* channel means 1, 2, 3 */
    gj_batcher *bt = gj_batcher_create(m, NULL, &err);
    assert_non_null(bt);
    struct gj_tensor in = tensor("data_0", ONNX_ELEM_FLOAT, 3, D(3, 224, 224), img);
    struct gj_tensor out = wanted("fc6_1");
    if (gj_batcher_run(bt, &in, 1, &out, 1, 0, NULL, &err) != GJ_BATCH_OK)
        fail_msg("%s", err.message);
    assert_int_equal(out.rank, 1);
    assert_int_equal(out.dims[0], 1000);
    const float *y = out.data;
    for (int o = 0; o < 1000; o += 111)   /* sum over c of (o + c) * (c + 1) = 6o + 8 */
        assert_true(fabsf(y[o] - (float)(6 * o + 8)) <= 1e-3f * (float)(6 * o + 8));
    gj_tensors_free(&out, 1);
    struct gj_tensor model_shape = tensor("data_0", ONNX_ELEM_FLOAT, 4, D(1, 3, 224, 224), img);
    expect_refused(bt, &model_shape, 1, &out, 1, "input 'data_0' has shape [1, 3, 224, 224] but the "
                   "model takes [3, 224, 224]");
    gj_batcher_destroy(bt);
    gj_served_model_release(m);
    expect_load_error("densenet_onnx", densenet_shaped_model(),
                      "{\"max_batch_size\": 0, \"input\": [{\"name\": \"data_0\", \"data_type\": \"TYPE_FP32\","
                      " \"dims\": [3, 224, 224], \"reshape\": {\"shape\": [1, 3, 112, 448]}}]}",
                      "input 'data_0' has reshape [1, 3, 112, 448] but the model's is [1, 3, 224, 224]");
}

/* Triton's idiom for a model input of one value per sample ([N]): dims [1], reshape []. */
static void reshape_to_batch_only(void **state)
{
    (void)state;
    struct gb b = { 0 };
    gb_input(&b, "x", T_FLOAT, 1, D(-1));
    gb_node(&b, "Mul", S("x", "x"), S("y"), 0, NULL);
    struct pb v = pb_vinfo("y", T_FLOAT, 1, D(-1));
    pb_msg(&b.g, 12, &v);
    write_model("scalar", &b, "{\"max_batch_size\": 4,"
                " \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [1], \"reshape\": {\"shape\": []}}],"
                " \"output\": [{\"name\": \"y\", \"data_type\": \"TYPE_FP32\", \"dims\": [1], \"reshape\": {\"shape\": []}}]}");
    struct gj_error err;
    gj_served_model *m = load("scalar", &err);
    if (!m)
        fail_msg("%s", err.message);
    gj_batcher *bt = gj_batcher_create(m, NULL, &err);
    float x[2] = { 3, -4 };
    struct gj_tensor in = tensor("x", ONNX_ELEM_FLOAT, 2, D(2, 1), x), out = wanted("y");
    if (gj_batcher_run(bt, &in, 1, &out, 1, 0, NULL, &err) != GJ_BATCH_OK)
        fail_msg("%s", err.message);
    assert_int_equal(out.rank, 2);
    assert_int_equal(out.dims[0], 2);
    assert_int_equal(out.dims[1], 1);
    assert_true(((float *)out.data)[0] == 9.0f && ((float *)out.data)[1] == 16.0f);
    gj_tensors_free(&out, 1);
    gj_batcher_destroy(bt);
    gj_served_model_release(m);
}

/* ---- models exported by PyTorch (tests/onnx/typed_models.py) --------------------------------- */

struct pt_tensor {
    char name[64];
    int elem, rank;
    int64_t dims[8];
    char *data;        /* the file's bytes */
    size_t bytes;
    double tol;
};

struct pt_manifest {
    char model[1024];
    int batch;         /* -1: none */
    struct pt_tensor in[8], out[8];
    size_t n_in, n_out;
};

static int pt_elem(const char *name)
{
    for (int e = 1; e < 32; e++)
        if (strcmp(onnx_elem_name(e), name) == 0)
            return e;
    return 0;
}

/* One "in|out NAME TYPE DIMS FILE [TOL]" line into t (its file read from dir). */
static void pt_tensor_line(const char *dir, const char *line, struct pt_tensor *t, int is_out)
{
    char type[16], dims[64], file[256], path[600];
    int n = sscanf(line, "%*s %63s %15s %63s %255s %lf", t->name, type, dims, file, &t->tol);
    assert_int_equal(n, is_out ? 5 : 4);
    t->elem = pt_elem(type);
    assert_true(t->elem > 0);
    for (char *p = strcmp(dims, "-") ? dims : NULL; p && *p; t->rank++) {
        char *end;
        t->dims[t->rank] = strtoll(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
    }
    snprintf(path, sizeof path, "%s/%s", dir, file);
    assert_int_equal(gj_read_file(path, 1 << 26, &t->data, &t->bytes), 0);
}

static void pt_load_manifest(const char *dir, const char *name, struct pt_manifest *mf)
{
    char path[600], *text = NULL;
    size_t len = 0;
    memset(mf, 0, sizeof *mf);
    snprintf(path, sizeof path, "%s/%s.manifest", dir, name);
    assert_int_equal(gj_read_file(path, 1 << 16, &text, &len), 0);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "model ", 6))
            snprintf(mf->model, sizeof mf->model, "%s/%s", dir, line + 6);
        else if (!strncmp(line, "batch ", 6))
            mf->batch = strcmp(line + 6, "none") ? atoi(line + 6) : -1;
        else if (!strncmp(line, "in ", 3) && mf->n_in < 8)
            pt_tensor_line(dir, line, &mf->in[mf->n_in++], 0);
        else if (!strncmp(line, "out ", 4) && mf->n_out < 8)
            pt_tensor_line(dir, line, &mf->out[mf->n_out++], 1);
    }
    free(text);
}

static void pt_free(struct pt_manifest *mf)
{
    for (size_t i = 0; i < mf->n_in; i++)
        free(mf->in[i].data);
    for (size_t i = 0; i < mf->n_out; i++)
        free(mf->out[i].data);
}

/* got against PyTorch's want: float types by relative L2 within tol, the others exactly. */
static void pt_compare(const struct pt_tensor *want, const struct gj_tensor *got)
{
    assert_int_equal(got->elem_type, want->elem);
    assert_int_equal(got->rank, want->rank);
    assert_memory_equal(got->dims, want->dims, (size_t)want->rank * sizeof want->dims[0]);
    assert_int_equal(got->bytes, want->bytes);
    int e = want->elem;
    if (e != ONNX_ELEM_FLOAT && e != ONNX_ELEM_FLOAT16 && e != ONNX_ELEM_BFLOAT16 && e != ONNX_ELEM_DOUBLE) {
        assert_memory_equal(got->data, want->data, want->bytes);
        return;
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < want->bytes / onnx_elem_size(e); i++) {
        double a = onnx_elem_get_f64(e, got->data, i), b = onnx_elem_get_f64(e, want->data, i);
        num += (a - b) * (a - b);
        den += b * b;
    }
    double rel = sqrt(num / (den > 0 ? den : 1));
    if (rel > want->tol)
        fail_msg("output '%s': relative L2 %.3g over %.3g", want->name, rel, want->tol);
}

struct pt_req {
    gj_batcher *b;
    struct gj_tensor in[8], out[8];
    size_t n_in, n_out;
    int rc;
    struct gj_error err;
    struct gj_batch_timing t;
};

static void *pt_client(void *arg)
{
    struct pt_req *r = arg;
    r->rc = gj_batcher_run(r->b, r->in, r->n_in, r->out, r->n_out, 0, &r->t, &r->err);
    return NULL;
}

/* Sample k of a batched tensor (all of it without a batch dimension) as a request tensor.
 * A tensor of nothing but the batch ([N]) is [1, 1]: auto-complete gives it Triton's dims [1]
 * with reshape []. */
static struct gj_tensor pt_slice(const struct pt_tensor *t, int batch, int k)
{
    struct gj_tensor g = { .elem_type = t->elem, .rank = t->rank };
    snprintf(g.name, sizeof g.name, "%s", t->name);
    memcpy(g.dims, t->dims, sizeof g.dims);
    g.bytes = batch > 0 ? t->bytes / (size_t)batch : t->bytes;
    g.data = t->data + (size_t)k * g.bytes;
    if (batch > 0)
        g.dims[0] = 1;
    if (batch > 0 && g.rank == 1)
        g.dims[g.rank++] = 1;
    return g;
}

/* A PyTorch export with no config: auto-completed; a batch of 2 sent as two requests of one
 * sample that the batcher runs together, each output against PyTorch's rows. */
static void pt_model(const char *dir, const char *name)
{
    struct pt_manifest mf;
    pt_load_manifest(dir, name, &mf);
    char mdir[512], *onnx = NULL;
    size_t len = 0;
    snprintf(mdir, sizeof mdir, "%s/pt-%s/1", g_dir, name);
    assert_int_equal(gj_mkdir_p(mdir, 0755), 0);
    assert_int_equal(gj_read_file(mf.model, 1 << 28, &onnx, &len), 0);
    snprintf(mdir, sizeof mdir, "%s/pt-%s/1/model.onnx", g_dir, name);
    assert_int_equal(gj_write_file(mdir, onnx, len), 0);
    free(onnx);
    char mname[64];
    snprintf(mname, sizeof mname, "pt-%s", name);
    struct gj_error err;
    gj_served_model *m = load(mname, &err);
    if (!m)
        fail_msg("%s: %s", name, err.message);
    const struct gj_model_config *cfg = gj_served_model_config(m);
    assert_int_equal(cfg->no_batch, mf.batch < 0);
    assert_int_equal(cfg->max_batch_size, mf.batch < 0 ? 1 : 4);   /* Triton's default, 4 */
    assert_int_equal(cfg->n_inputs, mf.n_in);
    for (size_t i = 0; i < cfg->n_inputs; i++)   /* [N]: dims [1], reshape [] as Triton */
        if (mf.batch > 0 && cfg->inputs[i].rank == 1 && cfg->inputs[i].dims[0] == 1)
            assert_true(cfg->inputs[i].has_reshape && cfg->inputs[i].reshape_rank == 0);
    struct gj_batcher_options opt = { .dynamic_batching = 1, .max_queue_delay_us = 2000000,
                                      .n_preferred = 1, .preferred_batch_sizes = { 2 }, .device = -1 };
    gj_batcher *bt = gj_batcher_create(m, &opt, &err);
    assert_non_null(bt);
    int nreq = mf.batch > 0 ? mf.batch : 1;
    struct pt_req r[4];
    pthread_t th[4];
    assert_true(nreq <= 4);
    for (int k = 0; k < nreq; k++) {
        memset(&r[k], 0, sizeof r[k]);
        r[k].b = bt;
        r[k].n_in = mf.n_in;
        r[k].n_out = mf.n_out;
        for (size_t i = 0; i < mf.n_in; i++)
            r[k].in[mf.n_in - 1 - i] = pt_slice(&mf.in[i], mf.batch, k);   /* any order */
        for (size_t i = 0; i < mf.n_out; i++)
            r[k].out[i] = wanted(mf.out[i].name);
        assert_int_equal(pthread_create(&th[k], NULL, pt_client, &r[k]), 0);
    }
    for (int k = 0; k < nreq; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < nreq; k++) {
        if (r[k].rc != GJ_BATCH_OK)
            fail_msg("%s request %d: %s", name, k, r[k].err.message);
        assert_int_equal(r[k].t.batch_size, nreq);
        for (size_t i = 0; i < mf.n_out; i++) {
            struct gj_tensor want = pt_slice(&mf.out[i], mf.batch, k);
            struct pt_tensor w = mf.out[i];
            w.data = want.data;
            w.bytes = want.bytes;
            w.rank = want.rank;
            memcpy(w.dims, want.dims, sizeof w.dims);
            pt_compare(&w, &r[k].out[i]);
        }
        gj_tensors_free(r[k].out, r[k].n_out);
    }
    print_message("    %s: %zu inputs, %zu outputs, %d request(s) in one batch: as PyTorch\n", name,
                  mf.n_in, mf.n_out, nreq);
    gj_batcher_destroy(bt);
    gj_served_model_release(m);
    pt_free(&mf);
}

static void pytorch_exports(void **state)
{
    (void)state;
    const char *src = getenv("GJ_SOURCE_ROOT"), *build = getenv("GJ_BUILD_ROOT");
    assert_non_null(src);
    assert_non_null(build);
    char dir[512], cmd[2048];
    /* the onnx suite's exports (its tests never run beside others: is_parallel false) */
    snprintf(dir, sizeof dir, "%s/tests/onnx/models", build);
    static const char *const names[] = { "multi", "ints", "fp16", "nobatch" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char manifest[600];
        snprintf(manifest, sizeof manifest, "%s/%s.manifest", dir, names[i]);
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/onnx/typed_models.py %s %s --reuse "
                 ">/dev/null", src, dir, names[i]);
        if (access(manifest, R_OK) != 0 && system(cmd) != 0)
            fail_msg("typed_models.py %s failed (Debian's python3-torch and python3-onnx)", names[i]);
        pt_model(dir, names[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(autocomplete_multi),
        cmocka_unit_test(batches_typed_tensors),
        cmocka_unit_test(refuses_bad_requests),
        cmocka_unit_test(no_batch_dimension),
        cmocka_unit_test(open_sizes_batch_by_shape),
        cmocka_unit_test(triton_json_config),
        cmocka_unit_test(triton_json_refusals),
        cmocka_unit_test(config_checked_against_model),
        cmocka_unit_test(triton_image_model_with_label_file),
        cmocka_unit_test(triton_quickstart_densenet),
        cmocka_unit_test(reshape_to_batch_only),
        cmocka_unit_test(pytorch_exports),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
