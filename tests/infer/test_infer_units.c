/*
 * Unit tests of compute/infer/serving: VOI windows, resize, the preprocessing pipeline
 * (hand-computed values), config.json parsing and errors, the filter, and the model
 * repository (scan, versions, load/unload, states, default version) on the demo model.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/fsutil.h"
#include "common/gj_kind.h"
#include "infer/serving/model_repo.h"
#include "infer/serving/preprocess.h"

extern const struct gj_kind gj_kind_infer;

#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-6)
#include <math.h>

/* ---- VOI ------------------------------------------------------------------------ */

static void voi_linear_values(void **state)
{
    (void)state;
    /* c = 128, w = 256 maps 0..255 onto 0..1 exactly (PS3.3 C.11.2.1.2.1). */
    NEAR(gj_voi_linear(0, 128, 256), 0.0);
    NEAR(gj_voi_linear(-10, 128, 256), 0.0);
    NEAR(gj_voi_linear(255, 128, 256), 1.0);
    NEAR(gj_voi_linear(300, 128, 256), 1.0);
    NEAR(gj_voi_linear(127.5, 128, 256), 0.5);
    NEAR(gj_voi_linear(64, 128, 256), 0.5 - 63.5 / 255.0);       /* 0.250980 */
    /* c = 40, w = 400: bounds -160 and 239. */
    NEAR(gj_voi_linear(-160, 40, 400), 0.0);
    NEAR(gj_voi_linear(-159, 40, 400), -198.5 / 399.0 + 0.5);    /* 0.002506 */
    NEAR(gj_voi_linear(239, 40, 400), 1.0);
    NEAR(gj_voi_linear(240, 40, 400), 1.0);
    /* w = 1: a threshold at c - 0.5, no division. */
    NEAR(gj_voi_linear(9.5, 10, 1), 0.0);
    NEAR(gj_voi_linear(9.6, 10, 1), 1.0);
}

static void voi_exact_and_sigmoid(void **state)
{
    (void)state;
    NEAR(gj_voi_linear_exact(75, 100, 50), 0.0);
    NEAR(gj_voi_linear_exact(100, 100, 50), 0.5);
    NEAR(gj_voi_linear_exact(110, 100, 50), 0.7);
    NEAR(gj_voi_linear_exact(126, 100, 50), 1.0);
    NEAR(gj_voi_sigmoid(0, 0, 4), 0.5);
    NEAR(gj_voi_sigmoid(1, 0, 4), 0.7310585786);
}

/* ---- resize --------------------------------------------------------------------- */

static void resize_nearest_and_area(void **state)
{
    (void)state;
    float src[16], dst[4];
    for (int i = 0; i < 16; i++)
        src[i] = (float)i;
    /* nearest, 4 -> 2: source indices floor((d + 0.5) * 2) = 1, 3 */
    gj_resize_plane(src, 4, 4, dst, 2, 2, GJ_RESIZE_NEAREST, NULL);
    NEAR(dst[0], 5); NEAR(dst[1], 7); NEAR(dst[2], 13); NEAR(dst[3], 15);
    /* area, 4 -> 2: means of 2x2 blocks */
    float scratch[8];
    assert_true(gj_resize_scratch_floats(4, 4, 2, 2, GJ_RESIZE_AREA) <= 8);
    gj_resize_plane(src, 4, 4, dst, 2, 2, GJ_RESIZE_AREA, scratch);
    NEAR(dst[0], 2.5); NEAR(dst[1], 4.5); NEAR(dst[2], 10.5); NEAR(dst[3], 12.5);
    /* area, 3 -> 2 along a row: footprints [0, 1.5) and [1.5, 3) */
    float row[3] = { 0, 3, 6 }, out2[2], s2[2];
    gj_resize_plane(row, 1, 3, out2, 1, 2, GJ_RESIZE_AREA, s2);
    NEAR(out2[0], (0 + 0.5 * 3) / 1.5);    /* 1 */
    NEAR(out2[1], (0.5 * 3 + 6) / 1.5);    /* 5 */
    /* area, 2 -> 3 (upsampling): footprints [0, 2/3), [2/3, 4/3), [4/3, 2) */
    float two[2] = { 0, 6 }, out3[3], s3[3];
    gj_resize_plane(two, 1, 2, out3, 1, 3, GJ_RESIZE_AREA, s3);
    NEAR(out3[0], 0); NEAR(out3[1], 3); NEAR(out3[2], 6);
}

static void resize_bilinear(void **state)
{
    (void)state;
    /* 2 -> 4: src = (d + 0.5) / 2 - 0.5 = -0.25 (-> 0), 0.25, 0.75, 1.25 (last repeats) */
    float in[2] = { 0, 4 }, out[4];
    gj_resize_plane(in, 1, 2, out, 1, 4, GJ_RESIZE_BILINEAR, NULL);
    NEAR(out[0], 0); NEAR(out[1], 1); NEAR(out[2], 3); NEAR(out[3], 4);
    /* 4 -> 2: src = 0.5, 2.5 */
    float in4[4] = { 0, 1, 2, 3 }, out2[2];
    gj_resize_plane(in4, 1, 4, out2, 1, 2, GJ_RESIZE_BILINEAR, NULL);
    NEAR(out2[0], 0.5); NEAR(out2[1], 2.5);
    /* 2-D, 2x2 -> 3x3: centre = mean of the four */
    float q[4] = { 0, 10, 20, 30 }, o9[9];
    gj_resize_plane(q, 2, 2, o9, 3, 3, GJ_RESIZE_BILINEAR, NULL);
    NEAR(o9[4], 15);
    /* src for d=0: (0.5 * 2/3) - 0.5 < 0 -> 0; d=2: 2.5*2/3-0.5 = 1.1667 -> clamped to 1 */
    NEAR(o9[0], 0); NEAR(o9[8], 30);
}

/* ---- the pipeline ----------------------------------------------------------------- */

static void pipeline_mono1_three_channels(void **state)
{
    (void)state;
    struct gj_preprocess_config pc = {
        .window_source = GJ_WINDOW_FILE, .has_fixed_window = 1, .center = 128, .width = 256,
        .function = GJ_VOI_LINEAR, .invert_monochrome1 = 1, .resize = GJ_RESIZE_AREA,
        .height = 1, .width_px = 1, .channels = 3,
        .mean = { 0.5f, 0.4f, 0.3f }, .std = { 0.25f, 0.5f, 1.0f },
    };
    struct gj_frame_info fi = { .rows = 2, .columns = 2, .monochrome1 = 1 };
    float frame[4] = { 0, 255, 64, 127.5f }, out[3];
    struct gj_preprocess_applied ap;
    char msg[100];
    assert_int_equal(gj_preprocess_frame(&pc, &fi, frame, out, &ap, msg, sizeof msg), 0);
    /* windowed 0, 1, 0.25098, 0.5; inverted 1, 0, 0.74902, 0.5; mean 0.5622549 */
    double m = (1.0 + 0.0 + (0.5 + 63.5 / 255.0) + 0.5) / 4.0;
    NEAR(out[0], (m - 0.5) / 0.25);    /* 0.2490196 */
    NEAR(out[1], (m - 0.4) / 0.5);     /* 0.3245098 */
    NEAR(out[2], (m - 0.3) / 1.0);     /* 0.2622549 */
    assert_string_equal(ap.window_source, "fixed");   /* no VOI in the "file": fallback */
    assert_true(ap.inverted);
}

static void pipeline_file_voi_and_minmax(void **state)
{
    (void)state;
    struct gj_preprocess_config pc = {
        .window_source = GJ_WINDOW_FILE, .invert_monochrome1 = 1, .resize = GJ_RESIZE_NEAREST,
        .height = 2, .width_px = 2, .channels = 1, .mean = { 0 }, .std = { 1, 1, 1 },
    };
    /* The file's window (LINEAR_EXACT 25 / 30) wins. */
    struct gj_frame_info fi = { .rows = 2, .columns = 2, .has_voi = 1, .voi_center = 25,
                                .voi_width = 30, .voi_function = GJ_VOI_LINEAR_EXACT };
    float f1[4] = { 10, 20, 30, 40 }, out[4];
    char msg[100];
    struct gj_preprocess_applied ap;
    assert_int_equal(gj_preprocess_frame(&pc, &fi, f1, out, &ap, msg, sizeof msg), 0);
    NEAR(out[0], 0); NEAR(out[1], 1.0 / 3); NEAR(out[2], 2.0 / 3); NEAR(out[3], 1);
    assert_string_equal(ap.window_source, "file");
    assert_string_equal(ap.function, "LINEAR_EXACT");
    /* No VOI, no fixed window: the frame's min-max, same values here. */
    fi.has_voi = 0;
    float f2[4] = { 10, 20, 30, 40 };
    assert_int_equal(gj_preprocess_frame(&pc, &fi, f2, out, &ap, msg, sizeof msg), 0);
    NEAR(out[0], 0); NEAR(out[1], 1.0 / 3); NEAR(out[2], 2.0 / 3); NEAR(out[3], 1);
    assert_string_equal(ap.window_source, "minmax");
    /* A flat image: zeros, no division by zero. */
    float f3[4] = { 7, 7, 7, 7 };
    assert_int_equal(gj_preprocess_frame(&pc, &fi, f3, out, &ap, msg, sizeof msg), 0);
    NEAR(out[0], 0); NEAR(out[3], 0);
}

/* ---- config.json ------------------------------------------------------------------ */

static const char base_cfg[] =
    "{\"input\":{\"name\":\"image\",\"dims\":[1,64,48]},"
    " \"output\":{\"name\":\"logits\",\"dims\":[3]},"
    " \"labels\":[\"a\",\"b\",\"c\"]%s}";

static int parse(const char *extra, struct gj_model_config *cfg, struct gj_error *err)
{
    char text[2048];
    snprintf(text, sizeof text, base_cfg, extra);
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);
    assert_non_null(j);
    memset(err, 0, sizeof *err);
    int rc = gj_model_config_parse(j, "m", cfg, err);
    json_decref(j);
    return rc;
}

static void config_defaults(void **state)
{
    (void)state;
    struct gj_model_config cfg;
    struct gj_error err;
    assert_int_equal(parse("", &cfg, &err), 0);
    assert_string_equal(cfg.name, "m");
    assert_int_equal(cfg.n_labels, 3);
    assert_int_equal(cfg.max_batch_size, 1);
    assert_int_equal(cfg.activation, GJ_ACT_NONE);
    assert_int_equal(cfg.pre.channels, 1);
    assert_int_equal(cfg.pre.height, 64);
    assert_int_equal(cfg.pre.width_px, 48);
    assert_int_equal(cfg.pre.resize, GJ_RESIZE_BILINEAR);
    assert_int_equal(cfg.pre.window_source, GJ_WINDOW_FILE);
    assert_int_equal(cfg.pre.invert_monochrome1, 1);
    assert_int_equal(cfg.default_version, 0);
    json_t *j = gj_model_config_to_json(&cfg);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "output_activation")), "none");
    json_decref(j);
    gj_model_config_free(&cfg);

    assert_int_equal(parse(",\"max_batch_size\":8,\"output_activation\":\"softmax\","
                           "\"dynamic_batching\":{\"max_queue_delay_us\":100,"
                           "\"preferred_batch_sizes\":[2,8]},\"default_version\":3,"
                           "\"preprocessing\":{\"mean\":0.5,\"std\":[0.25],"
                           "\"window\":{\"source\":\"fixed\",\"center\":40,\"width\":400}}",
                           &cfg, &err), 0);
    assert_int_equal(cfg.max_batch_size, 8);
    assert_int_equal(cfg.activation, GJ_ACT_SOFTMAX);
    assert_int_equal(cfg.n_preferred, 2);
    assert_int_equal(cfg.max_queue_delay_us, 100);
    assert_int_equal(cfg.default_version, 3);
    NEAR(cfg.pre.std[0], 0.25);
    NEAR(cfg.pre.mean[0], 0.5);
    assert_int_equal(cfg.pre.window_source, GJ_WINDOW_FIXED);
    gj_model_config_free(&cfg);
}

static void expect_error(const char *json_text, const char *field, const char *needle)
{
    json_t *j = json_loads(json_text, 0, NULL);
    assert_non_null(j);
    struct gj_model_config cfg;
    struct gj_error err = { 0 };
    int rc = gj_model_config_parse(j, "m", &cfg, &err);
    json_decref(j);
    gj_model_config_free(&cfg);
    if (rc != -1 || strcmp(err.field, field) != 0 || !strstr(err.message, needle))
        fail_msg("config %s: rc %d field '%s' message '%s' (wanted %s / %s)", json_text, rc,
                 err.field, err.message, field, needle);
}

static void expect_extra_error(const char *extra, const char *field, const char *needle)
{
    char text[2048];
    snprintf(text, sizeof text, base_cfg, extra);
    expect_error(text, field, needle);
}

/* version_policy: Triton's three forms, and which versions each serves. */
static void config_version_policy(void **state)
{
    (void)state;
    struct gj_model_config cfg;
    struct gj_error err;
    const int64_t all[] = { 1, 2, 5, 9 };
    assert_int_equal(parse("", &cfg, &err), 0);
    assert_int_equal(cfg.version_policy, GJ_VERSIONS_ALL);
    for (size_t i = 0; i < 4; i++)
        assert_true(gj_model_policy_serves(&cfg, all, 4, all[i]));
    gj_model_config_free(&cfg);
    assert_int_equal(parse(",\"version_policy\":{\"latest\":{\"num_versions\":2}}", &cfg, &err), 0);
    assert_int_equal(cfg.version_policy, GJ_VERSIONS_LATEST);
    assert_false(gj_model_policy_serves(&cfg, all, 4, 2));
    assert_true(gj_model_policy_serves(&cfg, all, 4, 5));
    assert_true(gj_model_policy_serves(&cfg, all, 4, 9));
    json_t *j = gj_model_config_to_json(&cfg);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(j, "version_policy"),
                                                                        "latest"), "num_versions")), 2);
    json_decref(j);
    gj_model_config_free(&cfg);
    assert_int_equal(parse(",\"version_policy\":{\"specific\":{\"versions\":[1,5]}}", &cfg, &err), 0);
    assert_true(gj_model_policy_serves(&cfg, all, 4, 1));
    assert_false(gj_model_policy_serves(&cfg, all, 4, 2));
    assert_true(gj_model_policy_serves(&cfg, all, 4, 5));
    gj_model_config_free(&cfg);
    expect_extra_error(",\"version_policy\":{\"newest\":{}}", "version_policy.newest", "unknown key");
    expect_extra_error(",\"version_policy\":{\"all\":{},\"latest\":{\"num_versions\":1}}",
                       "version_policy", "must be one of");
    expect_extra_error(",\"version_policy\":{\"latest\":{\"num_versions\":0}}",
                       "version_policy.latest.num_versions", "from 1");
    expect_extra_error(",\"version_policy\":{\"specific\":{\"versions\":[]}}",
                       "version_policy.specific", "1 to 64 version numbers");
    expect_extra_error(",\"version_policy\":{\"all\":{\"x\":1}}", "version_policy.all", "no settings");
}

static void config_errors(void **state)
{
    (void)state;
    expect_error("{\"input\":{\"name\":\"image\",\"dims\":[1,64,48]},"
                 "\"output\":{\"name\":\"logits\",\"dims\":[3]}}", "labels", "labels is missing");
    expect_error("[]", "", "JSON object");
    expect_error("{\"output\":{\"name\":\"o\",\"dims\":[3]},\"labels\":[\"a\",\"b\",\"c\"]}",
                 "input", "input is required");
    expect_error("{\"input\":{\"name\":\"i\",\"dims\":[1,64]},\"output\":{\"name\":\"o\","
                 "\"dims\":[3]},\"labels\":[\"a\",\"b\",\"c\"]}", "input.dims", "3 integers");
    expect_error("{\"input\":{\"name\":\"i\",\"dims\":[2,64,64]},\"output\":{\"name\":\"o\","
                 "\"dims\":[3]},\"labels\":[\"a\",\"b\",\"c\"]}", "input.dims[0]", "1 or 3");
    expect_error("{\"input\":{\"name\":\"i\",\"dims\":[1,64,64],\"datatype\":\"FP16\"},"
                 "\"output\":{\"name\":\"o\",\"dims\":[3]},\"labels\":[\"a\",\"b\",\"c\"]}",
                 "input", "FP32");
    expect_error("{\"input\":{\"name\":\"i\",\"dims\":[1,64,64]},\"output\":{\"name\":\"o\","
                 "\"dims\":[3]},\"labels\":[\"a\",\"b\"]}", "labels", "labels has 2 names");
    expect_error("{\"name\":\"other\",\"input\":{\"name\":\"i\",\"dims\":[1,64,64]},"
                 "\"output\":{\"name\":\"o\",\"dims\":[2]},\"labels\":[\"a\",\"b\"]}", "name",
                 "directory is 'm'");
    expect_extra_error(",\"labelz\":1", "labelz", "unknown key 'labelz'");
    expect_extra_error(",\"max_batch_size\":2000", "max_batch_size", "from 0 to 1024");
    expect_extra_error(",\"max_batch_size\":1.5", "max_batch_size", "integer");
    expect_extra_error(",\"max_batch_size\":4,\"dynamic_batching\":{\"preferred_batch_sizes\":[8]}",
                       "dynamic_batching.preferred_batch_sizes[0]", "more than max_batch_size 4");
    expect_extra_error(",\"output_activation\":\"relu\"", "output_activation", "sigmoid");
    expect_extra_error(",\"preprocessing\":{\"std\":0}", "preprocessing.std", "greater than 0");
    expect_extra_error(",\"preprocessing\":{\"mean\":[1,2]}", "preprocessing.mean", "1 or 1");
    expect_extra_error(",\"preprocessing\":{\"channels\":3}", "preprocessing.channels",
                       "input has 1 channels");
    expect_extra_error(",\"preprocessing\":{\"window\":{\"center\":3}}",
                       "preprocessing.window.width", "both center and width");
    expect_extra_error(",\"preprocessing\":{\"window\":{\"center\":3,\"width\":0.5}}",
                       "preprocessing.window.width", ">= 1 for LINEAR");
    expect_extra_error(",\"preprocessing\":{\"window\":{\"source\":\"voi\"}}",
                       "preprocessing.window.source", "file, fixed, minmax");
    expect_extra_error(",\"preprocessing\":{\"resize\":{\"height\":65}}",
                       "preprocessing.resize.height", "input height");
    expect_extra_error(",\"filter\":{\"modalities\":\"CR\"}", "filter.modalities",
                       "array of strings");
    expect_extra_error(",\"filter\":{\"bodyparts\":[]}", "filter.bodyparts", "unknown key");
    expect_error("{\"input\":{\"name\":\"i\",\"dims\":[1,64,64]},\"output\":{\"name\":\"o\","
                 "\"dims\":[2]},\"labels\":[\"a\",\"a\"]}", "labels[1]", "given twice");
}

/* Every field of the demo config replaced by hostile values: refused with a message or
 * accepted, never a crash (the sanitizer build runs this too). */
static size_t hostile_runs;

static void try_config(json_t *root)
{
    struct gj_model_config cfg;
    struct gj_error err = { 0 };
    int rc = gj_model_config_parse(root, "chest-xray-demo", &cfg, &err);
    assert_true(rc == 0 || (rc == -1 && err.message[0]));
    if (rc == 0) {
        json_t *j = gj_model_config_to_json(&cfg);
        assert_non_null(j);
        json_decref(j);
    }
    gj_model_config_free(&cfg);
    hostile_runs++;
}

static void mutate_all(json_t *root, json_t *node)
{
    char big[5000];
    memset(big, 'A', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    json_t *values[] = { json_null(), json_true(), json_integer(-1), json_integer(0),
                         json_integer(INT64_MAX), json_real(1e308), json_real(-0.5),
                         json_string(""), json_string(big), json_string("bilinear"),
                         json_array(), json_object(), json_pack("[i,i,i]", 3, 8192, 8192),
                         json_pack("[s,s]", "CR", "") };
    size_t nv = sizeof values / sizeof values[0];
    if (json_is_object(node)) {
        /* The keys first: deleting and re-adding a key moves it to the end. */
        const char *key;
        json_t *v;
        json_t *keys = json_array();
        json_object_foreach(node, key, v)
            json_array_append_new(keys, json_string(key));
        for (size_t ki = 0; ki < json_array_size(keys); ki++) {
            const char *k = json_string_value(json_array_get(keys, ki));
            json_t *saved = json_incref(json_object_get(node, k));
            for (size_t i = 0; i < nv; i++) {
                json_object_set(node, k, values[i]);
                try_config(root);
            }
            json_object_del(node, k);
            try_config(root);
            json_object_set_new(node, k, saved);
            mutate_all(root, saved);
        }
        json_decref(keys);
    } else if (json_is_array(node)) {
        for (size_t i = 0; i < json_array_size(node); i++) {
            json_t *saved = json_incref(json_array_get(node, i));
            for (size_t j = 0; j < nv; j++) {
                json_array_set(node, i, values[j]);
                try_config(root);
            }
            json_array_set_new(node, i, saved);
            mutate_all(root, saved);
        }
    }
    for (size_t i = 0; i < nv; i++)
        json_decref(values[i]);
}

static void config_hostile(void **state)
{
    (void)state;
    const char *root = getenv("GJ_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/models/chest-xray-demo/config.json", root ? root : ".");
    char *text;
    size_t len;
    assert_int_equal(gj_read_file(path, 1 << 20, &text, &len), 0);
    json_t *j = json_loadb(text, len, 0, NULL);
    assert_non_null(j);
    try_config(j);
    mutate_all(j, j);
    json_decref(j);
    /* Every truncation that still parses as JSON. */
    for (size_t cut = 0; cut < len; cut++) {
        json_t *t = json_loadb(text, cut, 0, NULL);
        if (t) {
            try_config(t);
            json_decref(t);
        }
    }
    free(text);
    assert_true(hostile_runs > 500);
}

static void filter_reasons(void **state)
{
    (void)state;
    struct gj_model_filter f = { 0 };
    char reason[256];
    assert_int_equal(gj_model_filter_check(&f, NULL, NULL, NULL, reason, sizeof reason), 1);
    strcpy(f.modalities[0], "CR");
    strcpy(f.modalities[1], "DX");
    f.n_modalities = 2;
    strcpy(f.body_parts[0], "CHEST");
    f.n_body_parts = 1;
    strcpy(f.view_positions[0], "PA");
    strcpy(f.view_positions[1], "AP");
    f.n_view_positions = 2;
    assert_int_equal(gj_model_filter_check(&f, "dx", "CHEST", "PA", reason, sizeof reason), 1);
    assert_int_equal(gj_model_filter_check(&f, "MR", "CHEST", "PA", reason, sizeof reason), 0);
    assert_string_equal(reason, "modality MR not in [CR, DX]");
    assert_int_equal(gj_model_filter_check(&f, "CR", NULL, "PA", reason, sizeof reason), 0);
    assert_string_equal(reason, "body part missing; the model accepts [CHEST]");
    assert_int_equal(gj_model_filter_check(&f, "CR", "CHEST", "LL", reason, sizeof reason), 0);
    assert_string_equal(reason, "view position LL not in [PA, AP]");
    assert_int_equal(gj_model_filter_check(&f, "CR", "Doe^J", "PA", reason, sizeof reason), 0);
    assert_string_equal(reason, "body part (not a code string) not in [CHEST]");
    f.allow_missing = 1;
    assert_int_equal(gj_model_filter_check(&f, "CR", NULL, NULL, reason, sizeof reason), 1);
}

/* ---- the repository on the demo model --------------------------------------------- */

static char demo_onnx[4096];
static char demo_cfg[4096];

static void put(const char *dir, const char *name, const char *text)
{
    char p[4096];
    assert_int_equal(gj_path_join(p, sizeof p, dir, name), 0);
    assert_int_equal(gj_write_file(p, text, strlen(text)), 0);
}

static void link_model(const char *vdir)
{
    char p[4096];
    assert_int_equal(gj_mkdir_p(vdir, 0755), 0);
    snprintf(p, sizeof p, "%s/model.onnx", vdir);
    assert_int_equal(symlink(demo_onnx, p), 0);
}

/* A repository in dir: good (versions 1 and 3, and names that are no version), pinned
 * (default_version 1), broken (no labels), empty (no version), .hidden (ignored). */
static void make_repository(const char *dir)
{
    char *cfg_text;
    size_t len;
    assert_int_equal(gj_read_file(demo_cfg, 1 << 20, &cfg_text, &len), 0);
    json_t *cj = json_loads(cfg_text, 0, NULL);
    free(cfg_text);
    assert_non_null(cj);
    json_object_del(cj, "name");

    char p[4096];
    /* good: versions 1 and 3 (plus ignored "abc", "0", "01"); default latest */
    snprintf(p, sizeof p, "%s/good/1", dir); link_model(p);
    snprintf(p, sizeof p, "%s/good/3", dir); link_model(p);
    snprintf(p, sizeof p, "%s/good/abc", dir); link_model(p);
    snprintf(p, sizeof p, "%s/good/0", dir); link_model(p);
    snprintf(p, sizeof p, "%s/good/01", dir); link_model(p);
    char *text = json_dumps(cj, 0);
    snprintf(p, sizeof p, "%s/good", dir);
    put(p, "config.json", text);
    /* pinned: default_version 1 */
    json_object_set_new(cj, "default_version", json_integer(1));
    free(text);
    text = json_dumps(cj, 0);
    snprintf(p, sizeof p, "%s/pinned/1", dir); link_model(p);
    snprintf(p, sizeof p, "%s/pinned/2", dir); link_model(p);
    snprintf(p, sizeof p, "%s/pinned", dir);
    put(p, "config.json", text);
    free(text);
    /* broken: no labels */
    json_object_del(cj, "labels");
    json_object_del(cj, "default_version");
    text = json_dumps(cj, 0);
    snprintf(p, sizeof p, "%s/broken/1", dir); link_model(p);
    snprintf(p, sizeof p, "%s/broken", dir);
    put(p, "config.json", text);
    free(text);
    json_decref(cj);
    /* empty: no version; .hidden: ignored */
    snprintf(p, sizeof p, "%s/empty", dir); assert_int_equal(gj_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/.hidden/1", dir); link_model(p);
}

/* Its models in name order, their versions, and which version a request resolves to. */
static void repository_lists(gj_model_repo *r)
{
    struct gj_error err = { 0 };
    assert_int_equal(gj_model_repo_count(r), 4);
    char name[128];
    assert_int_equal(gj_model_repo_name(r, 0, name, sizeof name), 0);
    assert_string_equal(name, "broken");
    assert_int_equal(gj_model_repo_name(r, 3, name, sizeof name), 0);
    assert_string_equal(name, "pinned");
    assert_int_equal(gj_model_repo_name(r, 4, name, sizeof name), -1);

    struct gj_model_version_info vi[8];
    size_t n = 0;
    assert_int_equal(gj_model_repo_versions(r, "good", vi, 8, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(vi[0].version, 1);
    assert_int_equal(vi[1].version, 3);
    assert_int_equal(vi[1].state, GJ_MODEL_AVAILABLE);
    assert_int_equal(gj_model_repo_versions(r, "nope", vi, 8, &n, &err), -1);
    assert_non_null(strstr(err.message, "unknown model 'nope'"));

    assert_int_equal(gj_model_repo_resolve(r, "good", 0, &err), 3);
    assert_int_equal(gj_model_repo_resolve(r, "good", 1, &err), 1);
    assert_int_equal(gj_model_repo_resolve(r, "good", 2, &err), -1);
    assert_non_null(strstr(err.message, "no version 2"));
    assert_int_equal(gj_model_repo_resolve(r, "pinned", 0, &err), 1);
    assert_int_equal(gj_model_repo_resolve(r, "empty", 0, &err), -1);
    assert_non_null(strstr(err.message, "has no version"));
}

/* Loaded once and shared; a broken model fails with its reason; readiness never loads. */
static gj_served_model *repository_loads(gj_model_repo *r)
{
    struct gj_error err = { 0 };
    struct gj_model_version_info vi[8];
    size_t n = 0;
    gj_served_model *m = NULL, *m2 = NULL;
    assert_int_equal(gj_model_repo_load(r, "good", 0, &m, &err), 0);
    assert_int_equal(gj_served_model_version(m), 3);
    assert_int_equal(gj_served_model_config(m)->n_labels, 4);
    assert_non_null(gj_served_model_onnx(m));
    assert_int_equal(gj_model_repo_load(r, "good", 3, &m2, &err), 0);
    assert_ptr_equal(m, m2);                       /* loaded once */
    gj_served_model_release(m2);
    assert_int_equal(gj_model_repo_versions(r, "good", vi, 8, &n, &err), 0);
    assert_int_equal(vi[1].state, GJ_MODEL_READY);
    assert_int_equal(vi[0].state, GJ_MODEL_AVAILABLE);

    assert_int_equal(gj_model_repo_load(r, "broken", 0, &m2, &err), -1);
    assert_null(m2);
    assert_non_null(strstr(err.message, "labels is missing"));
    assert_int_equal(gj_model_repo_versions(r, "broken", vi, 8, &n, &err), 0);
    assert_int_equal(vi[0].state, GJ_MODEL_FAILED);
    assert_non_null(strstr(vi[0].reason, "labels is missing"));

    json_t *d = gj_model_repo_describe(r);
    assert_int_equal(json_array_size(d), 4);
    json_t *good = json_array_get(d, 2);
    assert_string_equal(json_string_value(json_object_get(good, "name")), "good");
    assert_int_equal(json_integer_value(json_object_get(good, "default_version")), 3);
    json_t *v3 = json_array_get(json_object_get(good, "versions"), 1);
    assert_string_equal(json_string_value(json_object_get(v3, "state")), "READY");
    json_decref(d);

    /* Readiness never loads; use loads an available version. */
    assert_int_equal(gj_model_repo_get_loaded(r, "good", 1, &m2, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.message, "is not ready: it is not loaded"));
    assert_int_equal(gj_model_repo_versions(r, "good", vi, 8, &n, &err), 0);
    assert_int_equal(vi[0].state, GJ_MODEL_AVAILABLE);
    struct gj_model_config cfg;
    assert_int_equal(gj_model_repo_config(r, "good", 1, &cfg, &err), 0);   /* no load */
    assert_int_equal(cfg.n_labels, 4);
    gj_model_config_free(&cfg);
    assert_int_equal(gj_model_repo_versions(r, "good", vi, 8, &n, &err), 0);
    assert_int_equal(vi[0].state, GJ_MODEL_AVAILABLE);
    assert_int_equal(gj_model_repo_get_loaded(r, "good", 3, &m2, &err), 0);
    assert_ptr_equal(m, m2);
    gj_served_model_release(m2);

    return m;
}

/* An unload holds until an explicit load; the job's reference m stays usable. */
static void repository_unloads(gj_model_repo *r, gj_served_model *m)
{
    struct gj_error err = { 0 };
    struct gj_model_version_info vi[8];
    size_t n = 0;
    gj_served_model *m2 = NULL;
    /* Unload: it stays unloaded (UNLOADED) until an explicit load; the job's reference
     * stays usable. */
    assert_int_equal(gj_model_repo_unload(r, "good", 3, &err), 0);
    assert_int_equal(gj_model_repo_unload(r, "good", 3, &err), -1);
    assert_non_null(strstr(err.message, "not loaded"));
    assert_int_equal(gj_model_repo_versions(r, "good", vi, 8, &n, &err), 0);
    assert_int_equal(vi[1].state, GJ_MODEL_UNLOADED);
    err.status = 0;
    assert_int_equal(gj_model_repo_acquire(r, "good", 3, &m2, &err), -1);
    assert_null(m2);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.message, "not ready: it was unloaded"));
    assert_int_equal(gj_model_repo_get_loaded(r, "good", 3, &m2, &err), -1);
    assert_non_null(strstr(err.message, "not ready: it was unloaded"));
    assert_int_equal(gj_model_repo_load(r, "good", 3, &m2, &err), 0);        /* explicit */
    gj_served_model *m3 = NULL;
    assert_int_equal(gj_model_repo_acquire(r, "good", 3, &m3, &err), 0);
    assert_ptr_equal(m3, m2);
    assert_ptr_not_equal(m3, m);                   /* a new load; m stays usable */
    gj_served_model_release(m3);
    gj_served_model_release(m2);
    assert_int_equal(gj_model_repo_unload(r, "good", 3, &err), 0);
    /* An unknown model or version is looked for on disk again: 404 when it is not there. */
    err.status = 0;
    assert_int_equal(gj_model_repo_acquire(r, "nope", 0, &m2, &err), -1);
    assert_int_equal(err.status, 404);
}

/* A rescan sees a version gone and a model come. */
static void repository_rescans(gj_model_repo *r, const char *dir)
{
    struct gj_error err = { 0 };
    struct gj_model_version_info vi[8];
    size_t n = 0, len;
    char p[4096];
    /* Rescan after version 1 of good goes and a model appears. */
    snprintf(p, sizeof p, "%s/good/1", dir);
    assert_int_equal(gj_rm_rf(p), 0);
    snprintf(p, sizeof p, "%s/late/5", dir); link_model(p);
    snprintf(p, sizeof p, "%s/late", dir);
    char *good_cfg;
    char gp[4096];
    snprintf(gp, sizeof gp, "%s/good/config.json", dir);
    assert_int_equal(gj_read_file(gp, 1 << 20, &good_cfg, &len), 0);
    put(p, "config.json", good_cfg);
    free(good_cfg);
    assert_int_equal(gj_model_repo_scan(r, &err), 0);
    assert_int_equal(gj_model_repo_count(r), 5);
    assert_int_equal(gj_model_repo_versions(r, "good", vi, 8, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(gj_model_repo_resolve(r, "late", 0, &err), 5);
}

static void repository(void **state)
{
    (void)state;
    const char *root = getenv("GJ_SOURCE_ROOT");
    if (!root)
        root = ".";
    snprintf(demo_onnx, sizeof demo_onnx, "%s/models/chest-xray-demo/1/model.onnx", root);
    snprintf(demo_cfg, sizeof demo_cfg, "%s/models/chest-xray-demo/config.json", root);
    char dir[] = "/tmp/gj-repo-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    make_repository(dir);

    struct gj_error err = { 0 };
    gj_model_repo *r = gj_model_repo_open(dir, &err);
    assert_non_null(r);
    repository_lists(r);
    gj_served_model *m = repository_loads(r);
    repository_unloads(r, m);
    repository_rescans(r, dir);
    gj_model_repo_free(r);
    assert_string_equal(gj_served_model_name(m), "good");   /* still alive */
    gj_served_model_release(m);

    /* A repository that is not there. */
    assert_null(gj_model_repo_open("/nonexistent/models", &err));
    assert_non_null(strstr(err.message, "not a directory"));
    gj_rm_rf(dir);
}

static void kind_validate(void **state)
{
    (void)state;
    const struct gj_kind *k = &gj_kind_infer;
    struct gj_input in[2] = { { "dicom", NULL, 100 }, { "dicom.1", NULL, 100 } };
    struct gj_error err = { 0 };
    json_t *p = json_pack("{s:s}", "model", "chest-xray-demo");
    struct gj_job job = { "infer", p, in, 2 };
    assert_int_equal(gj_kind_validate(k, &job, &err), 0);
    /* The repository is the host's: a job cannot name a directory of its own. */
    json_object_set_new(p, "models_dir", json_string("/nonexistent"));
    assert_int_equal(gj_kind_validate(k, &job, &err), -1);
    assert_string_equal(err.field, "models_dir");
    json_object_del(p, "models_dir");
    json_object_set_new(p, "model", json_string("../x"));
    assert_int_equal(gj_kind_validate(k, &job, &err), -1);
    assert_string_equal(err.field, "model");
    json_object_set_new(p, "model", json_string("ok"));
    json_object_set_new(p, "bogus", json_true());
    assert_int_equal(gj_kind_validate(k, &job, &err), -1);
    json_object_del(p, "bogus");
    struct gj_input bad[1] = { { "image", NULL, 100 } };
    struct gj_job job2 = { "infer", p, bad, 1 };
    assert_int_equal(gj_kind_validate(k, &job2, &err), -1);
    struct gj_job job3 = { "infer", p, NULL, 0 };
    assert_int_equal(gj_kind_validate(k, &job3, &err), -1);
    assert_non_null(strstr(err.message, "dicom"));
    json_decref(p);
}

/* ---- a declared repository (the service's, fed from the model store) ------------------ */

static void declared_repository(void **state)
{
    (void)state;
    const char *root = getenv("GJ_SOURCE_ROOT");
    if (!root)
        root = ".";
    char vdir[4096], cfgp[4096];
    snprintf(vdir, sizeof vdir, "%s/models/chest-xray-demo/1", root);
    snprintf(cfgp, sizeof cfgp, "%s/models/chest-xray-demo/config.json", root);
    char *text;
    size_t len;
    assert_int_equal(gj_read_file(cfgp, 1 << 20, &text, &len), 0);
    json_t *cj = json_loads(text, 0, NULL);
    free(text);
    json_object_del(cj, "name");
    char *cfg = json_dumps(cj, 0);
    json_object_set_new(cj, "default_version", json_integer(2));
    char *cfg_pinned = json_dumps(cj, 0);
    json_decref(cj);

    struct gj_error err = { 0 };
    gj_model_repo *r = gj_model_repo_new();
    assert_non_null(r);
    assert_null(gj_model_repo_dir(r));
    assert_int_equal(gj_model_repo_scan(r, &err), 0);              /* nothing to scan */
    struct gj_model_version_decl d[2] = {
        { .version = 2, .dir = vdir },
        { .version = 1, .dir = NULL, .absent = "this replica runs no models (--role api)" },
    };
    assert_int_equal(gj_model_repo_declare(r, "m", cfg, d, 2, &err), 0);
    assert_int_equal(gj_model_repo_count(r), 1);
    assert_true(gj_model_repo_has(r, "m"));
    assert_false(gj_model_repo_has(r, "nope"));
    assert_int_equal(gj_model_repo_resolve(r, "m", 0, &err), 2);   /* latest, sorted */

    /* Version 1's files are not here: metadata answers, use is refused with the reason. */
    struct gj_model_config mc;
    assert_int_equal(gj_model_repo_config(r, "m", 1, &mc, &err), 0);
    assert_int_equal(mc.n_labels, 4);
    gj_model_config_free(&mc);
    gj_served_model *a = NULL, *b = NULL;
    err.status = 0;
    assert_int_equal(gj_model_repo_acquire(r, "m", 1, &a, &err), -1);
    assert_int_equal(err.status, 503);
    assert_non_null(strstr(err.message, "--role api"));
    assert_int_equal(gj_model_repo_acquire(r, "m", 2, &a, &err), 0);
    assert_int_equal(gj_served_model_version(a), 2);

    /* Declared again unchanged: the loaded model stays. */
    assert_int_equal(gj_model_repo_declare(r, "m", cfg, d, 2, &err), 0);
    assert_int_equal(gj_model_repo_get_loaded(r, "m", 2, &b, &err), 0);
    assert_ptr_equal(a, b);
    gj_served_model_release(b);

    /* Unloaded by the host: dropped, use refused (400), the job's reference still works. */
    d[0].unloaded = 1;
    assert_int_equal(gj_model_repo_declare(r, "m", cfg, d, 2, &err), 0);
    err.status = 0;
    assert_int_equal(gj_model_repo_acquire(r, "m", 2, &b, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.message, "it was unloaded"));
    assert_string_equal(gj_served_model_name(a), "m");
    d[0].unloaded = 0;
    assert_int_equal(gj_model_repo_declare(r, "m", cfg, d, 2, &err), 0);
    assert_int_equal(gj_model_repo_acquire(r, "m", 2, &b, &err), 0);
    assert_ptr_not_equal(a, b);                    /* loaded again */
    gj_served_model_release(b);

    /* A changed model config: the version starts over (its default comes from the text). */
    assert_int_equal(gj_model_repo_declare(r, "m", cfg_pinned, d, 1, &err), 0);
    struct gj_model_version_info vi[4];
    size_t n = 0;
    assert_int_equal(gj_model_repo_versions(r, "m", vi, 4, &n, &err), 0);
    assert_int_equal(n, 1);                        /* version 1 no longer declared */
    assert_int_equal(vi[0].state, GJ_MODEL_AVAILABLE);
    assert_int_equal(gj_model_repo_resolve(r, "m", 0, &err), 2);

    /* A config the model does not match fails at load, with the reason. */
    assert_int_equal(gj_model_repo_declare(r, "bad", "{\"input\": 1}", d, 1, &err), 0);
    assert_int_equal(gj_model_repo_load(r, "bad", 0, &b, &err), -1);
    assert_int_equal(gj_model_repo_versions(r, "bad", vi, 4, &n, &err), 0);
    assert_int_equal(vi[0].state, GJ_MODEL_FAILED);

    /* Refusals change nothing. */
    struct gj_model_version_decl twice[2] = { { .version = 3, .dir = vdir }, { .version = 3, .dir = vdir } };
    assert_int_equal(gj_model_repo_declare(r, "m", cfg, twice, 2, &err), -1);
    assert_non_null(strstr(err.message, "version 3"));
    assert_int_equal(gj_model_repo_declare(r, ".x", cfg, d, 1, &err), -1);
    assert_int_equal(gj_model_repo_resolve(r, "m", 0, &err), 2);

    assert_int_equal(gj_model_repo_remove(r, "bad"), 0);
    assert_int_equal(gj_model_repo_remove(r, "bad"), -1);
    assert_int_equal(gj_model_repo_count(r), 1);
    gj_model_repo *scanned = gj_model_repo_open(root, &err);   /* any directory */
    assert_non_null(scanned);
    assert_int_equal(gj_model_repo_declare(scanned, "m", cfg, d, 1, &err), -1);
    gj_model_repo_free(scanned);
    gj_model_repo_free(r);
    gj_served_model_release(a);
    free(cfg);
    free(cfg_pinned);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(voi_linear_values),
        cmocka_unit_test(voi_exact_and_sigmoid),
        cmocka_unit_test(resize_nearest_and_area),
        cmocka_unit_test(resize_bilinear),
        cmocka_unit_test(pipeline_mono1_three_channels),
        cmocka_unit_test(pipeline_file_voi_and_minmax),
        cmocka_unit_test(config_defaults),
        cmocka_unit_test(config_errors),
        cmocka_unit_test(config_version_policy),
        cmocka_unit_test(config_hostile),
        cmocka_unit_test(filter_reasons),
        cmocka_unit_test(repository),
        cmocka_unit_test(declared_repository),
        cmocka_unit_test(kind_validate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
