/*
 * Unit tests of config.pbtxt: the protobuf text-format reader (compute/infer/serving/pbtxt.c)
 * on Triton's ModelConfig, and its mapping to Triton's JSON ModelConfig (model_pbtxt.c).
 * Real Triton files (tests/infer/pbtxt/README.md says where each comes from), every form
 * the text format allows, and bad inputs whose errors must name the line and column;
 * a scanned repository (gpujobd run --models-dir) with config.pbtxt and with no config;
 * and a repository where use does not load (the model control modes but on-use).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "common/fsutil.h"
#include "infer/serving/model_pbtxt.h"
#include "infer/serving/model_repo.h"
#include "infer/serving/pbtxt.h"
#include "infer/serving/triton_model_config.pb-c.h"

static json_t *from_file(const char *name)
{
    const char *src = getenv("GJ_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/infer/pbtxt/%s", src ? src : ".", name);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(gj_read_file(path, 1 << 20, &text, &len), 0);
    struct gj_error err = { 0 };
    json_t *j = gj_model_pbtxt_to_json(text, len, &err);
    if (!j)
        fail_msg("%s: %s", name, err.message);
    free(text);
    return j;
}

/* The JSON of text, compared with want (JSON text). */
static void converts_to(const char *text, const char *want)
{
    struct gj_error err = { 0 };
    json_t *got = gj_model_pbtxt_to_json(text, strlen(text), &err);
    if (!got)
        fail_msg("'%s': %s", text, err.message);
    json_error_t jerr;
    json_t *w = json_loads(want, 0, &jerr);
    assert_non_null(w);
    if (!json_equal(got, w)) {
        char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
        fail_msg("'%s' gave %s, not %s", text, g, want);
    }
    json_decref(got);
    json_decref(w);
}

/* text must be refused with a message containing each of the NULL-ended fragments. */
static void refused(const char *text, ...)
{
    struct gj_error err = { 0 };
    json_t *got = gj_model_pbtxt_to_json(text, strlen(text), &err);
    if (got)
        fail_msg("'%s' was accepted", text);
    va_list ap;
    va_start(ap, text);
    for (const char *frag = va_arg(ap, const char *); frag; frag = va_arg(ap, const char *))
        if (!strstr(err.message, frag))
            fail_msg("'%s': error '%s' lacks '%s'", text, err.message, frag);
    va_end(ap);
}

static void densenet_onnx(void **state)
{
    (void)state;
    json_t *j = from_file("densenet_onnx.pbtxt");
    json_error_t e;
    json_t *want = json_loads(
        "{\"name\": \"densenet_onnx\", \"platform\": \"onnxruntime_onnx\", \"max_batch_size\": 1,"
        " \"input\": [{\"name\": \"data_0\", \"data_type\": \"TYPE_FP32\", \"dims\": [3, 224, 224]}],"
        " \"output\": [{\"name\": \"fc6_1\", \"data_type\": \"TYPE_FP32\", \"dims\": [1000],"
        "   \"reshape\": {\"shape\": [1000, 1, 1]}, \"label_filename\": \"densenet_labels.txt\"}],"
        " \"version_policy\": {\"latest\": {\"num_versions\": 1}}}", 0, &e);
    assert_true(json_equal(j, want));
    json_decref(j);
    json_decref(want);
}

static void simple_two_inputs(void **state)
{
    (void)state;
    json_t *j = from_file("simple.pbtxt");
    assert_int_equal(json_integer_value(json_object_get(j, "max_batch_size")), 8);
    json_t *in = json_object_get(j, "input"), *out = json_object_get(j, "output");
    assert_int_equal(json_array_size(in), 2);
    assert_int_equal(json_array_size(out), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(in, 1), "name")), "INPUT1");
    assert_string_equal(json_string_value(json_object_get(json_array_get(out, 1), "data_type")), "TYPE_INT32");
    json_decref(j);
}

static void every_form(void **state)
{
    (void)state;
    json_t *j = from_file("full.pbtxt");
    json_error_t e;
    json_t *want = json_loads(
        "{\"name\": \"resnet\", \"platform\": \"onnxruntime_onnx\", \"backend\": \"onnxruntime\","
        " \"max_batch_size\": 16,"
        " \"input\": [{\"name\": \"in0\", \"data_type\": \"TYPE_FP16\", \"dims\": [-1, 3, 224], \"optional\": true},"
        "             {\"name\": \"mask\", \"data_type\": \"TYPE_BOOL\", \"dims\": []}],"
        " \"output\": [{\"name\": \"probs\", \"data_type\": \"TYPE_FP32\", \"dims\": [1000],"
        "              \"label_filename\": \"labels.txt\"}],"
        " \"dynamic_batching\": {\"preferred_batch_size\": [4, 8], \"max_queue_delay_microseconds\": 100,"
        "   \"default_queue_policy\": {\"timeout_action\": \"DELAY\", \"default_timeout_microseconds\": 5000,"
        "   \"allow_timeout_override\": false, \"max_queue_size\": 32}},"
        " \"instance_group\": [{\"kind\": \"KIND_GPU\", \"count\": 2, \"gpus\": [0, 1]},"
        "                      {\"kind\": \"KIND_CPU\", \"count\": 1}],"
        " \"version_policy\": {\"specific\": {\"versions\": [1, 3]}},"
        " \"parameters\": {\"EXECUTION_ENV_PATH\": {\"string_value\": \"caf\\u00e9 \\\"q\\\"\\t\"},"
        "                  \"b\": {\"string_value\": \"\"}}}", 0, &e);
    assert_non_null(want);
    if (!json_equal(j, want))
        fail_msg("got %s", json_dumps(j, JSON_SORT_KEYS));
    json_decref(j);
    json_decref(want);
}

static void small_forms(void **state)
{
    (void)state;
    const char *lp1 = "\"version_policy\": {\"latest\": {\"num_versions\": 1}}";
    char want[512];
    snprintf(want, sizeof want, "{\"max_batch_size\": 0, %s}", lp1);
    converts_to("", want);
    converts_to("# only a comment\n\n", want);
    snprintf(want, sizeof want, "{\"max_batch_size\": -0, %s}", lp1);
    converts_to("max_batch_size: -0", want);
    converts_to("version_policy: { all { } }", "{\"max_batch_size\": 0, \"version_policy\": {\"all\": {}}}");
    converts_to("version_policy < latest < num_versions: 2 > >",
                "{\"max_batch_size\": 0, \"version_policy\": {\"latest\": {\"num_versions\": 2}}}");
    snprintf(want, sizeof want, "{\"name\": \"a'b\\\\c\\n\", \"max_batch_size\": 0, %s}", lp1);
    converts_to("name: 'a\\'b' \"\\\\c\\012\"", want);
    snprintf(want, sizeof want, "{\"max_batch_size\": 2147483647, %s}", lp1);
    converts_to("max_batch_size: 2147483647", want);
    snprintf(want, sizeof want, "{\"max_batch_size\": 8, \"dynamic_batching\": {\"preferred_batch_size\": [],"
             " \"max_queue_delay_microseconds\": 0}, %s}", lp1);
    converts_to("max_batch_size: 010 dynamic_batching { }", want);
    snprintf(want, sizeof want, "{\"max_batch_size\": 0, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_INT64\","
             " \"dims\": [-9223372036854775808, 9223372036854775807]}], %s}", lp1);
    converts_to("input [{name: \"x\" data_type: TYPE_INT64 dims: [-9223372036854775808, 0x7fffffffffffffff]}]", want);
}

static void errors_name_line_and_column(void **state)
{
    (void)state;
    refused("name: \"x\"\n  inptu [ ]", "config.pbtxt line 2, column 3", "ModelConfig has no field 'inptu'", NULL);
    refused("name: \"a\"\nname: \"b\"", "line 2, column 1", "'name' is given more than once", NULL);
    refused("input { data_type: TYPE_FP33 }", "line 1, column 20", "'TYPE_FP33' is not a DataType", "TYPE_FP32", NULL);
    refused("max_batch_size: 2147483648", "line 1, column 17", "out of range", NULL);
    refused("max_batch_size: 1.5", "'1.5' is not an integer", NULL);
    refused("max_batch_size: \"8\"", "an integer expected, found a string", NULL);
    refused("max_batch_size 8", "line 1, column 1", "':' expected after 'max_batch_size'", NULL);
    refused("max_batch_size: -1", "max_batch_size must be 0", NULL);
    refused("input { name: \"x\"", "'}' expected before the end of the text", NULL);
    refused("input { name: \"x\" >", "line 1, column 19", "'}' expected", NULL);
    refused("name: \"abc", "line 1, column 7", "a string is not closed", NULL);
    refused("name: \"a\\qb\"", "a bad escape", NULL);
    refused("name: \"a\\000b\"", "UTF-8 text without NUL", NULL);
    refused("name: \"\xff\"", "UTF-8", NULL);
    refused("name: [\"a\"]", "takes one value, not a list", NULL);
    refused("version_policy { all {} latest {} }", "line 1, column 25", "'all' and 'latest' are alternatives", NULL);
    refused("version_policy { latest { num_versions: -1 } }", "no negative number", NULL);
    refused("sequence_batching { }", "'sequence_batching' is not supported", NULL);
    refused("ensemble_scheduling { step [ ] }", "not supported", NULL);
    refused("[ext.field]: 1", "extensions", NULL);
    refused("name: @", "line 1, column 7", "unexpected character '@'", NULL);
    refused("input [ { name: \"a\" } { name: \"b\" } ]", "',' expected", NULL);
    refused("input { name: \"x\" dims: [ 1, ] }", "an integer expected", NULL);
    refused("input { }", "input 0 has no name", NULL);
    refused("default_model_filename: \"model.plan\"", "read from model.onnx", NULL);
    converts_to("default_model_filename: \"model.onnx\"",
                "{\"max_batch_size\": 0, \"version_policy\": {\"latest\": {\"num_versions\": 1}}}");
    refused("instance_group [ { kind: KIND_GPU gpus: [ 0 ] count: 1 passive: maybe } ]", "true or false expected", NULL);
    refused("optimization { graph { level: } }", "a value expected", NULL);
    /* Nesting past the limit, in a skipped section and in the schema's own. */
    char deep[512] = "optimization ";
    for (int i = 0; i < 40; i++)
        strcat(deep, "{ a ");
    refused(deep, "nested more than", NULL);
    /* A NUL inside the text. */
    struct gj_error err = { 0 };
    assert_null(gj_model_pbtxt_to_json("name: \"a\"\0", 10, &err));
    assert_non_null(strstr(err.message, "NUL"));
}

/* The reader on its own with another protobuf-c message (the dynamic batching one): a
 * message not at the top, and the error path field. */
static void reader_path(void **state)
{
    (void)state;
    struct gj_error err = { 0 };
    const char *t = "default_queue_policy {\n  max_queue_size: 99999999999\n}";
    ProtobufCMessage *m = gj_pbtxt_parse(&inference__model_dynamic_batching__descriptor, t, strlen(t), NULL, &err);
    assert_null(m);
    assert_string_equal(err.field, "default_queue_policy.max_queue_size");
    assert_non_null(strstr(err.message, "text line 2, column 19"));
    t = "preferred_batch_size: 1 preferred_batch_size: [2, 3]; max_queue_delay_microseconds: 18446744073709551615";
    m = gj_pbtxt_parse(&inference__model_dynamic_batching__descriptor, t, strlen(t), NULL, &err);
    assert_non_null(m);
    const Inference__ModelDynamicBatching *db = (const Inference__ModelDynamicBatching *)m;
    assert_int_equal(db->n_preferred_batch_size, 3);
    assert_int_equal(db->preferred_batch_size[2], 3);
    assert_true(db->max_queue_delay_microseconds == UINT64_MAX);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* config.pbtxt wins over config.json in one directory; config.json alone still reads. */
static void config_file_choice(void **state)
{
    (void)state;
    char dir[] = "/tmp/gj-pbtxt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char pb[256], js[256];
    snprintf(pb, sizeof pb, "%s/config.pbtxt", dir);
    snprintf(js, sizeof js, "%s/config.json", dir);
    char *text = (char *)1;
    const char *which = NULL;
    struct gj_error err = { 0 };
    assert_int_equal(gj_model_config_file_read(dir, 1 << 20, &text, &which, &err), 0);
    assert_null(text);
    assert_int_equal(gj_write_file(js, "{\"name\": \"j\"}", 13), 0);
    assert_int_equal(gj_model_config_file_read(dir, 1 << 20, &text, &which, &err), 0);
    assert_string_equal(which, "config.json");
    assert_string_equal(text, "{\"name\": \"j\"}");
    free(text);
    assert_int_equal(gj_write_file(pb, "name: \"p\"", 9), 0);
    assert_int_equal(gj_model_config_file_read(dir, 1 << 20, &text, &which, &err), 0);
    assert_string_equal(which, "config.pbtxt");
    assert_non_null(strstr(text, "\"name\":\"p\""));
    free(text);
    assert_int_equal(gj_write_file(pb, "name: p", 7), 0);
    assert_int_equal(gj_model_config_file_read(dir, 1 << 20, &text, &which, &err), -1);
    assert_null(text);
    assert_non_null(strstr(err.message, "config.pbtxt line 1, column 7"));
    /* A version's own config (either kind) before the model's. */
    char vdir[256], vpb[300];
    snprintf(vdir, sizeof vdir, "%s/3", dir);
    snprintf(vpb, sizeof vpb, "%s/config.pbtxt", vdir);
    assert_int_equal(mkdir(vdir, 0755), 0);
    assert_int_equal(gj_write_file(pb, "name: \"p\"", 9), 0);
    assert_int_equal(gj_model_version_config_read(dir, 3, 1 << 20, &text, &err), 0);
    assert_non_null(strstr(text, "\"name\":\"p\""));
    free(text);
    assert_int_equal(gj_write_file(vpb, "name: \"v\"", 9), 0);
    assert_int_equal(gj_model_version_config_read(dir, 3, 1 << 20, &text, &err), 0);
    assert_non_null(strstr(text, "\"name\":\"v\""));
    free(text);
    unlink(vpb);
    rmdir(vdir);
    unlink(pb);
    unlink(js);
    rmdir(dir);
}

/* Every prefix of a real file, and the file with each byte replaced by a few others:
 * each parses or is refused with a message naming the file (and the line and column
 * where the text is at fault), and nothing leaks or reads out of bounds (ASan). */
static void truncated_and_mutated(void **state)
{
    (void)state;
    const char *src = getenv("GJ_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/infer/pbtxt/full.pbtxt", src ? src : ".");
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(gj_read_file(path, 1 << 20, &text, &len), 0);
    static const char subst[] = { '{', '}', '"', '\\', '-', 'x', '[', '\n', ':', '\0' };
    for (size_t i = 0; i <= len; i++) {
        for (size_t k = 0; k <= sizeof subst; k++) {
            char *copy = malloc(len + 1);
            memcpy(copy, text, len + 1);
            size_t n = k == sizeof subst ? i : len;   /* the prefix, or one byte changed */
            if (k < sizeof subst && i < len)
                copy[i] = subst[k];
            struct gj_error err = { 0 };
            json_t *j = gj_model_pbtxt_to_json(copy, n, &err);
            if (!j && !strstr(err.message, "config.pbtxt"))
                fail_msg("byte %zu: an error that does not name config.pbtxt: %s", i, err.message);
            json_decref(j);
            free(copy);
        }
    }
    free(text);
}

/* Model control modes other than on-use: use never loads; an explicit load does. */
static void use_does_not_load(void **state)
{
    (void)state;
    const char *src = getenv("GJ_SOURCE_ROOT");
    char vdir[1024], cfg_path[1100];
    snprintf(vdir, sizeof vdir, "%s/models/chest-xray-demo/1", src ? src : ".");
    snprintf(cfg_path, sizeof cfg_path, "%s/models/chest-xray-demo/config.json", src ? src : ".");
    char *cfg = NULL;
    size_t len = 0;
    assert_int_equal(gj_read_file(cfg_path, 1 << 20, &cfg, &len), 0);
    gj_model_repo *repo = gj_model_repo_new();
    struct gj_error err = { 0 };
    const struct gj_model_version_decl v = { .version = 1, .dir = vdir };
    assert_int_equal(gj_model_repo_declare(repo, "chest-xray-demo", cfg, &v, 1, &err), 0);
    gj_model_repo_set_load_on_use(repo, 0);
    gj_served_model *m = NULL;
    assert_int_equal(gj_model_repo_acquire(repo, "chest-xray-demo", 0, &m, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.message, "--model-control-mode"));
    assert_int_equal(gj_model_repo_load(repo, "chest-xray-demo", 0, &m, &err), 0);
    gj_served_model_release(m);
    assert_int_equal(gj_model_repo_acquire(repo, "chest-xray-demo", 0, &m, &err), 0);
    gj_served_model_release(m);
    gj_model_repo_set_load_on_use(repo, 1);
    gj_model_repo_free(repo);
    free(cfg);
}

/* A scanned repository (gpujobd run --models-dir) with Triton's files: the demo model
 * under config.pbtxt loads, and so does one with no config (completed from the model). */
static void scanned_repository(void **state)
{
    (void)state;
    const char *src = getenv("GJ_SOURCE_ROOT");
    char onnx[1024], root[] = "/tmp/gj-pbtxt-repo-XXXXXX", path[1200];
    snprintf(onnx, sizeof onnx, "%s/models/chest-xray-demo/1/model.onnx", src ? src : ".");
    assert_non_null(mkdtemp(root));
    char *model = NULL;
    size_t len = 0;
    assert_int_equal(gj_read_file(onnx, 64u << 20, &model, &len), 0);
    static const char *const names[] = { "tri", "bare" };
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s/1", root, names[i]);
        assert_int_equal(gj_mkdir_p(path, 0755), 0);
        snprintf(path, sizeof path, "%s/%s/1/model.onnx", root, names[i]);
        assert_int_equal(gj_write_file(path, model, len), 0);
    }
    free(model);
    static const char pbtxt[] =
        "name: \"tri\" platform: \"onnxruntime_onnx\" max_batch_size: 8\n"
        "input [ { name: \"image\" data_type: TYPE_FP32 dims: [ 1, 256, 256 ] } ]\n"
        "output [ { name: \"logits\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n";
    snprintf(path, sizeof path, "%s/tri/config.pbtxt", root);
    assert_int_equal(gj_write_file(path, pbtxt, sizeof pbtxt - 1), 0);
    struct gj_error err = { 0 };
    gj_model_repo *repo = gj_model_repo_open(root, &err);
    assert_non_null(repo);
    for (int i = 0; i < 2; i++) {
        gj_served_model *m = NULL;
        if (gj_model_repo_load(repo, names[i], 0, &m, &err) != 0)
            fail_msg("%s: %s", names[i], err.message);
        /* tri: its config.pbtxt; bare: Triton's auto-complete of a batchable model, 4. */
        assert_int_equal(gj_served_model_config(m)->max_batch_size, i == 0 ? 8 : 4);
        gj_served_model_release(m);
    }
    gj_model_repo_free(repo);
    gj_rm_rf(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(densenet_onnx),
        cmocka_unit_test(simple_two_inputs),
        cmocka_unit_test(every_form),
        cmocka_unit_test(small_forms),
        cmocka_unit_test(errors_name_line_and_column),
        cmocka_unit_test(reader_path),
        cmocka_unit_test(config_file_choice),
        cmocka_unit_test(truncated_and_mutated),
        cmocka_unit_test(use_does_not_load),
        cmocka_unit_test(scanned_repository),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
