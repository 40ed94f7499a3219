/* service/infer/oip_tensor.c and oip_compress.c: /v2 tensors of every datatype from JSON
 * and from Triton's binary layout and back, the checks that keep allocation to what a
 * request holds, Triton's classification strings, and gzip/deflate with their bounds (a
 * zip bomb stops at the limit). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>
#include <zlib.h>

#include "infer/onnx/onnx_elem.h"
#include "service/infer/oip_compress.h"
#include "service/infer/oip_tensor.h"

static json_t *parse(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    assert_non_null(j);
    return j;
}

/* Reads input j (JSON data); 0 or -1, msg filled. */
static int read_json(json_t *j, struct oip_tensor *t, char *msg, size_t n)
{
    const unsigned char *bin = NULL;
    size_t left = 0;
    msg[0] = '\0';
    if (oip_tensor_head(j, t, msg, n))
        return -1;
    return oip_tensor_read(j, NULL, &bin, &left, t, msg, n);
}

static void test_json_every_type(void **state)
{
    (void)state;
    struct oip_tensor t;
    char msg[512];
    json_t *j = parse("{\"name\":\"a\",\"datatype\":\"INT16\",\"shape\":[2,2],\"data\":[[1,-2],[300,-32768]]}");
    assert_int_equal(read_json(j, &t, msg, sizeof msg), 0);
    assert_int_equal(t.elem_type, ONNX_ELEM_INT16);
    assert_int_equal(t.bytes, 8);
    assert_int_equal(((int16_t *)t.data)[3], -32768);
    json_t *back = oip_tensor_json(&t, msg, sizeof msg);
    char *s = json_dumps(back, JSON_COMPACT);
    assert_string_equal(s, "[1,-2,300,-32768]");
    free(s);
    json_decref(back);
    free(t.data);
    json_decref(j);
    /* out of range, wrong kind, wrong count */
    const char *bad[] = {
        "{\"name\":\"a\",\"datatype\":\"UINT8\",\"shape\":[1],\"data\":[256]}",
        "{\"name\":\"a\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[1.5]}",
        "{\"name\":\"a\",\"datatype\":\"BOOL\",\"shape\":[1],\"data\":[2]}",
        "{\"name\":\"a\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[2]}",
        "{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[3],\"data\":[1,2]}",
        "{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[1000000000,1000000000],\"data\":[1,2]}",
        "{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1],\"parameters\":{\"binary_data_size\":4}}",
        "{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[1]}",
        "{\"name\":\"a\",\"datatype\":\"FP8\",\"shape\":[1],\"data\":[1]}",
        "{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[-1],\"data\":[1]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        j = parse(bad[i]);
        assert_int_equal(read_json(j, &t, msg, sizeof msg), -1);
        assert_true(strlen(msg) > 10);
        assert_null(t.data);
        json_decref(j);
    }
    j = parse("{\"name\":\"b\",\"datatype\":\"BOOL\",\"shape\":[3],\"data\":[true,false,1]}");
    assert_int_equal(read_json(j, &t, msg, sizeof msg), 0);
    assert_memory_equal(t.data, "\1\0\1", 3);
    back = oip_tensor_json(&t, msg, sizeof msg);
    s = json_dumps(back, JSON_COMPACT);
    assert_string_equal(s, "[true,false,true]");
    free(s);
    json_decref(back);
    free(t.data);
    json_decref(j);
    j = parse("{\"name\":\"h\",\"datatype\":\"FP16\",\"shape\":[2],\"data\":[0.5,-2]}");
    assert_int_equal(read_json(j, &t, msg, sizeof msg), 0);
    assert_int_equal(((uint16_t *)t.data)[0], 0x3800);
    assert_int_equal(((uint16_t *)t.data)[1], 0xc000);
    free(t.data);
    json_decref(j);
}

static void test_binary_bytes_and_numbers(void **state)
{
    (void)state;
    struct oip_tensor t;
    char msg[512];
    const unsigned char body[] = "\3\0\0\0abc\0\0\0\0\2\0\0\0xy" "\1\0\0\0\2\0\0\0";
    json_t *j = parse("{\"name\":\"s\",\"datatype\":\"BYTES\",\"shape\":[3],\"parameters\":{\"binary_data_size\":17}}");
    const unsigned char *bin = body;
    size_t left = sizeof body - 1;
    assert_int_equal(oip_tensor_head(j, &t, msg, sizeof msg), 0);
    assert_int_equal(oip_tensor_read(j, NULL, &bin, &left, &t, msg, sizeof msg), 0);
    assert_int_equal(left, 8);
    const struct onnx_string *s = t.data;
    assert_int_equal(s[0].len, 3);
    assert_memory_equal(s[0].data, "abc", 3);
    assert_int_equal(s[1].len, 0);
    assert_memory_equal(s[2].data, "xy", 2);
    assert_int_equal(oip_tensor_binary_size(&t), 17);
    unsigned char out[17];
    oip_tensor_binary_write(&t, out);
    assert_memory_equal(out, body, 17);
    json_t *js = oip_tensor_json(&t, msg, sizeof msg);
    char *d = json_dumps(js, JSON_COMPACT);
    assert_string_equal(d, "[\"abc\",\"\",\"xy\"]");
    free(d);
    json_decref(js);
    free(t.data);
    json_decref(j);
    /* the rest: two INT32 */
    j = parse("{\"name\":\"i\",\"datatype\":\"INT32\",\"shape\":[2],\"parameters\":{\"binary_data_size\":8}}");
    assert_int_equal(oip_tensor_head(j, &t, msg, sizeof msg), 0);
    assert_int_equal(oip_tensor_read(j, NULL, &bin, &left, &t, msg, sizeof msg), 0);
    assert_int_equal(((int32_t *)t.data)[1], 2);
    assert_int_equal(left, 0);
    oip_tensor_free_data(&t);
    /* past the end, and a size that is not the shape's */
    assert_int_equal(oip_tensor_read(j, NULL, &bin, &left, &t, msg, sizeof msg), -1);
    json_decref(j);
    j = parse("{\"name\":\"i\",\"datatype\":\"INT32\",\"shape\":[3],\"parameters\":{\"binary_data_size\":8}}");
    bin = body;
    left = 8;
    assert_int_equal(oip_tensor_head(j, &t, msg, sizeof msg), 0);
    assert_int_equal(oip_tensor_read(j, NULL, &bin, &left, &t, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "expected 12"));
    json_decref(j);
    /* a BYTES length running past the data */
    j = parse("{\"name\":\"s\",\"datatype\":\"BYTES\",\"shape\":[1],\"parameters\":{\"binary_data_size\":5}}");
    bin = (const unsigned char *)"\xff\0\0\0a";
    left = 5;
    assert_int_equal(oip_tensor_head(j, &t, msg, sizeof msg), 0);
    assert_int_equal(oip_tensor_read(j, NULL, &bin, &left, &t, msg, sizeof msg), -1);
    json_decref(j);
}

/* Binary values lying aligned for their type are read in place (a 2 MiB batch is not
 * copied); unaligned ones, and BOOL (normalised to 0 / 1), are copied. */
static void test_binary_read_in_place(void **state)
{
    (void)state;
    struct oip_tensor t;
    char msg[512];
    _Alignas(64) unsigned char body[1 + 3 * sizeof(float) + 2];
    float v[3] = { 1.5f, -2.0f, 3.25f };
    json_t *j = parse("{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[3],\"parameters\":{\"binary_data_size\":12}}");
    for (size_t off = 0; off < 2; off++) {
        memcpy(body + off, v, sizeof v);
        const unsigned char *bin = body + off;
        size_t left = sizeof v;
        assert_int_equal(oip_tensor_head(j, &t, msg, sizeof msg), 0);
        assert_int_equal(oip_tensor_read(j, NULL, &bin, &left, &t, msg, sizeof msg), 0);
        assert_int_equal(t.borrowed, off == 0);
        assert_true(off == 0 ? t.data == (void *)body : t.data != (void *)(body + off));
        assert_memory_equal(t.data, v, sizeof v);
        oip_tensor_free_data(&t);
        assert_null(t.data);
    }
    json_decref(j);
    j = parse("{\"name\":\"b\",\"datatype\":\"BOOL\",\"shape\":[2],\"parameters\":{\"binary_data_size\":2}}");
    body[0] = 7;
    body[1] = 0;
    const unsigned char *bin = body;
    size_t left = 2;
    assert_int_equal(oip_tensor_head(j, &t, msg, sizeof msg), 0);
    assert_int_equal(oip_tensor_read(j, NULL, &bin, &left, &t, msg, sizeof msg), 0);
    assert_int_equal(t.borrowed, 0);
    assert_int_equal(((unsigned char *)t.data)[0], 1);
    assert_int_equal(body[0], 7);                 /* the request's bytes are not written */
    oip_tensor_free_data(&t);
    json_decref(j);
}

static void test_json_output_refusals(void **state)
{
    (void)state;
    char msg[256] = "";
    float nan_v[1] = { __builtin_nanf("") };
    struct oip_tensor t = { .name = "o", .elem_type = ONNX_ELEM_FLOAT, .rank = 1, .dims = { 1 }, .data = nan_v,
                            .bytes = 4 };
    assert_null(oip_tensor_json(&t, msg, sizeof msg));
    assert_non_null(strstr(msg, "NaN"));
    struct onnx_string bad = { "\xff\xfe", 2 };
    t = (struct oip_tensor){ .name = "o", .elem_type = ONNX_ELEM_STRING, .rank = 1, .dims = { 1 }, .data = &bad,
                             .bytes = sizeof bad };
    msg[0] = '\0';
    assert_null(oip_tensor_json(&t, msg, sizeof msg));
    assert_non_null(strstr(msg, "UTF-8"));
}

static void test_classification(void **state)
{
    (void)state;
    float v[2][4] = { { 0.1f, 0.7f, -1.0f, 0.7f }, { 3, 2, 1, 0 } };
    struct oip_tensor t = { .name = "logits", .elem_type = ONNX_ELEM_FLOAT, .rank = 2, .dims = { 2, 4 },
                            .data = v, .bytes = sizeof v };
    const char *labels[] = { "no_finding", "nodule", "", "cardiomegaly" };
    struct oip_tensor c;
    char msg[256];
    assert_int_equal(oip_classify(&t, 1, 3, labels, 4, &c, msg, sizeof msg), 0);
    assert_int_equal(c.elem_type, ONNX_ELEM_STRING);
    assert_int_equal(c.rank, 2);
    assert_int_equal(c.dims[0], 2);
    assert_int_equal(c.dims[1], 3);
    const struct onnx_string *s = c.data;
    const char *want[] = { "0.700000:1:nodule", "0.700000:3:cardiomegaly", "0.100000:0:no_finding",
                           "3.000000:0:no_finding", "2.000000:1:nodule", "1.000000:2" };
    for (int i = 0; i < 6; i++) {
        assert_int_equal(s[i].len, strlen(want[i]));
        assert_memory_equal(s[i].data, want[i], s[i].len);
    }
    free(c.data);
    /* no batch dimension, k past the count, integers, no labels */
    int64_t iv[3] = { 5, -7, 9 };
    t = (struct oip_tensor){ .name = "x", .elem_type = ONNX_ELEM_INT64, .rank = 1, .dims = { 3 }, .data = iv,
                             .bytes = sizeof iv };
    assert_int_equal(oip_classify(&t, 0, 10, NULL, 0, &c, msg, sizeof msg), 0);
    assert_int_equal(c.rank, 1);
    assert_int_equal(c.dims[0], 3);
    s = c.data;
    assert_memory_equal(s[0].data, "9:2", 3);
    assert_memory_equal(s[2].data, "-7:1", 4);
    free(c.data);
    t.elem_type = ONNX_ELEM_FLOAT16;
    t.bytes = 6;
    assert_int_equal(oip_classify(&t, 0, 1, NULL, 0, &c, msg, sizeof msg), -1);
    assert_string_equal(msg, "class result not available for output due to unsupported type 'FP16'");
}

static void test_compression(void **state)
{
    (void)state;
    enum oip_coding c;
    assert_int_equal(oip_content_coding("gzip", &c), 0);
    assert_int_equal(c, OIP_GZIP);
    assert_int_equal(oip_content_coding(" Deflate ", &c), 0);
    assert_int_equal(c, OIP_DEFLATE);
    assert_int_equal(oip_content_coding(NULL, &c), 0);
    assert_int_equal(c, OIP_IDENTITY);
    assert_int_equal(oip_content_coding("br", &c), -1);
    assert_int_equal(oip_accept_coding("gzip"), OIP_GZIP);
    assert_int_equal(oip_accept_coding("deflate"), OIP_DEFLATE);
    assert_int_equal(oip_accept_coding("gzip;q=0.5, deflate;q=0.8, br"), OIP_DEFLATE);
    assert_int_equal(oip_accept_coding("br, identity"), OIP_IDENTITY);
    assert_int_equal(oip_accept_coding(NULL), OIP_IDENTITY);
    /* round trips both ways */
    static char text[100000];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (char)('a' + (i * 7) % 13);
    for (int k = 0; k < 2; k++) {
        enum oip_coding cod = k ? OIP_DEFLATE : OIP_GZIP;
        char *z, *back;
        size_t zl, bl;
        assert_int_equal(oip_deflate(text, sizeof text, cod, &z, &zl), 0);
        assert_true(zl < sizeof text / 10);
        assert_int_equal(oip_inflate(z, zl, cod, sizeof text, &back, &bl), 0);
        assert_int_equal(bl, sizeof text);
        assert_memory_equal(back, text, bl);
        free(back);
        assert_int_equal(oip_inflate(z, zl, cod, sizeof text - 1, &back, &bl), 413);   /* one byte over */
        assert_null(back);
        assert_int_equal(oip_inflate(z, zl - 5, cod, sizeof text, &back, &bl), 400);   /* truncated */
        free(z);
    }
    /* raw deflate as some clients send for "deflate" */
    unsigned char raw[256];
    z_stream zs = { 0 };
    assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    zs.next_in = (Bytef *)"hello hello hello";
    zs.avail_in = 17;
    zs.next_out = raw;
    zs.avail_out = sizeof raw;
    assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
    size_t rl = zs.total_out;
    deflateEnd(&zs);
    char *back;
    size_t bl;
    assert_int_equal(oip_inflate((char *)raw, rl, OIP_DEFLATE, 100, &back, &bl), 0);
    assert_int_equal(bl, 17);
    free(back);
    /* a zip bomb: 256 MiB of zeros in ~250 KB; refused after limit bytes */
    size_t big = (size_t)256 << 20, chunk = 1 << 20;
    char *zeros = calloc(1, chunk);
    char *bomb = malloc(big / 500);
    z_stream bz = { 0 };
    assert_int_equal(deflateInit2(&bz, 9, Z_DEFLATED, 31, 9, Z_DEFAULT_STRATEGY), Z_OK);
    bz.next_out = (Bytef *)bomb;
    bz.avail_out = (uInt)(big / 500);
    for (size_t done = 0; done < big; done += chunk) {
        bz.next_in = (Bytef *)zeros;
        bz.avail_in = (uInt)chunk;
        assert_int_equal(deflate(&bz, done + chunk == big ? Z_FINISH : Z_NO_FLUSH), done + chunk == big ? Z_STREAM_END : Z_OK);
    }
    size_t bomb_len = bz.total_out;
    deflateEnd(&bz);
    assert_int_equal(oip_inflate(bomb, bomb_len, OIP_GZIP, 4 << 20, &back, &bl), 413);
    assert_null(back);
    free(bomb);
    free(zeros);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_every_type),
        cmocka_unit_test(test_binary_bytes_and_numbers),
        cmocka_unit_test(test_binary_read_in_place),
        cmocka_unit_test(test_json_output_refusals),
        cmocka_unit_test(test_classification),
        cmocka_unit_test(test_compression),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
