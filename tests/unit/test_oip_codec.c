/* service/infer/oip_tensor.c and oip_compress.c: /v2 tensors of every datatype from JSON
 * and from Triton's binary layout and back, the checks that keep allocation to what a
 * request holds, Triton's classification strings, and gzip/deflate with their bounds (a
 * zip bomb stops at the limit). oip_json_data.c: numeric data arrays read from the text
 * give what jansson's give, bit for bit, and the same errors. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>
#include <jansson.h>
#include <zlib.h>

#include "infer/onnx/onnx_elem.h"
#include "service/infer/oip_compress.h"
#include "service/infer/oip_json_data.h"
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


/* ---- JSON data read from the text (oip_json_data) against jansson alone ---------------- */

/* What one way of reading a request made of it: jansson's error, or input 0's result. */
struct outcome {
    char text[700];                  /* "parse LINE:COLUMN:POSITION: error" or "read RC: message" */
    unsigned char *bytes;            /* input 0's values (not BYTES) */
    size_t n;
    int fast;                        /* input 0's values came from the text */
};

/* Reads the request as parse_body and read_input do: with scan, oip_json_data first. */
static void read_request(const char *req, int scan, struct outcome *o)
{
    size_t len = strlen(req);
    char *buf = malloc(len + 1);
    assert_non_null(buf);
    memcpy(buf, req, len + 1);
    struct oip_json_data *pre = NULL;
    memset(o, 0, sizeof *o);
    json_error_t e;
    json_t *j = scan ? oip_json_data_load(buf, len, JSON_REJECT_DUPLICATES, &e, &pre)
                     : json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
    assert_memory_equal(buf, req, len + 1);              /* the text is not changed */
    free(buf);                       /* nothing may point into the text now (ASan) */
    if (!j) {
        snprintf(o->text, sizeof o->text, "parse %d:%d:%d: %s", e.line, e.column, e.position, e.text);
        assert_null(pre);
        return;
    }
    json_t *in = json_array_get(json_object_get(j, "inputs"), 0);
    const struct oip_json_values *v = oip_json_data_for(pre, 0);
    o->fast = v != NULL;
    struct oip_tensor t;
    char msg[512] = "";
    const unsigned char *bin = NULL;
    size_t left = 0;
    int rc = oip_tensor_head(in, &t, msg, sizeof msg);
    if (rc == 0)
        rc = oip_tensor_read(in, v, &bin, &left, &t, msg, sizeof msg);
    snprintf(o->text, sizeof o->text, "read %d: %s", rc, msg);
    if (rc == 0 && t.elem_type != ONNX_ELEM_STRING) {
        o->n = t.bytes;
        o->bytes = malloc(t.bytes + 1);
        memcpy(o->bytes, t.data, t.bytes);
    }
    if (rc)
        assert_null(t.data);
    oip_tensor_free_data(&t);
    oip_json_data_free(pre);
    json_decref(j);
}

/* The request read both ways gives the same; fast: whether the text way must read input 0.
 * Returns the outcome's text (static). */
static const char *same_both_ways(const char *req, int fast)
{
    static char text[700];
    struct outcome a, b;
    read_request(req, 0, &a);
    read_request(req, 1, &b);
    if (strcmp(a.text, b.text) || a.n != b.n || (a.n && memcmp(a.bytes, b.bytes, a.n)) || b.fast != fast)
        fprintf(stderr, "request %s\n jansson:   %s\n from text: %s (fast %d)\n", req, a.text, b.text, b.fast);
    assert_string_equal(a.text, b.text);
    assert_int_equal(a.n, b.n);
    if (a.n)
        assert_memory_equal(a.bytes, b.bytes, a.n);
    assert_int_equal(b.fast, fast);
    snprintf(text, sizeof text, "%s", a.text);
    free(a.bytes);
    free(b.bytes);
    return text;
}

static char *request(const char *dt, const char *shape, const char *data)
{
    static char buf[1 << 16];
    snprintf(buf, sizeof buf, "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"%s\",\"shape\":%s,\"data\":%s}],"
             "\"outputs\":[{\"name\":\"y\"}]}", dt, shape, data);
    return buf;
}

static const char *const every_type[] = { "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
                                          "INT32", "INT64", "FP16", "BF16", "FP32", "FP64" };

static void test_json_data_every_type_and_edge(void **state)
{
    (void)state;
    static const char *const values[] = {
        "0", "-0", "-0.0", "0.0", "1", "-1", "2", "true", "false", "127", "128", "-128", "-129", "255", "256",
        "32767", "32768", "-32769", "65535", "65536", "2147483647", "-2147483649", "4294967295", "4294967296",
        "9007199254740992", "9007199254740993", "9223372036854775807", "-9223372036854775808", "1e308",
        "-1e308", "1.7976931348623157e308", "5e-324", "-5e-324", "2.2250738585072014e-308", "1e-400", "0.1",
        "0.12345678806304932", "-1.2345678806304932e-05", "1.5", "1E2", "1e+2", "1e-2", "0e999999999",
        "65504", "65519.99", "65520", "1.00048828125", "1.0009765625", "1.00146484375", "3.4028234663852886e38",
        "3.4028235677973366e38", "3.4028236e38", "1.00000005960464477539", "1.0000000596046448",
        "0.30000000000000004", "123456789012345678.9", "9007199254740993.0", "1.00390625", "1.005859375",
        "123456789012345678901234567890.5", "4.9406564584124654e-324", "2.4703282292062327e-324",
        "2.4703282292062328e-324",
    };
    char data[64];
    for (size_t t = 0; t < sizeof every_type / sizeof *every_type; t++)
        for (size_t v = 0; v < sizeof values / sizeof *values; v++) {
            snprintf(data, sizeof data, "[%s]", values[v]);
            same_both_ways(request(every_type[t], "[1]", data), 1);
        }
    /* the messages the checks give, through the text */
    assert_string_equal(same_both_ways(request("INT8", "[2]", "[1, 128]"), 1),
                        "read -1: input 'x': value 128 (element 1) is out of range for INT8");
    assert_string_equal(same_both_ways(request("UINT8", "[1]", "[-1]"), 1),
                        "read -1: input 'x': value -1 (element 0) is out of range for UINT8");
    assert_string_equal(same_both_ways(request("INT32", "[2]", "[1, 1.5]"), 1),
                        "read -1: input 'x': element 1 of 'data' is not an integer");
    assert_string_equal(same_both_ways(request("BOOL", "[1]", "[2]"), 1),
                        "read -1: input 'x': element 0 of 'data' is not a boolean (BOOL)");
    assert_string_equal(same_both_ways(request("FP32", "[1]", "[true]"), 1),
                        "read -1: input 'x': element 0 of 'data' is not a number");
}

static unsigned long long rng_state = 0x9e3779b97f4a7c15ULL;

static unsigned long long rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Random finite numbers as clients write them (%.17g of FP32 and FP64, shorter forms) in
 * one array of each float type: bit for bit what jansson's strtod gives. */
static void test_json_data_random_numbers(void **state)
{
    (void)state;
    enum { N = 20000 };
    char *data = malloc((size_t)N * 32 + 16);
    assert_non_null(data);
    static const char *const types[] = { "FP64", "FP32", "FP16", "BF16" };
    for (size_t t = 0; t < 4; t++) {
        size_t p = 0;
        data[p++] = '[';
        for (int i = 0; i < N; i++) {
            double d;
            unsigned long long u = rng();
            if (i % 3 == 0) {
                float f;
                uint32_t u32 = (uint32_t)u;
                memcpy(&f, &u32, 4);
                d = f;
            } else {
                memcpy(&d, &u, 8);
            }
            if (d != d || d - d != 0)
                d = (double)(int64_t)u / 3.0;
            p += (size_t)sprintf(data + p, "%s%.*g", i ? ", " : "", i % 2 ? 17 : (int)(u % 17) + 1, d);
        }
        data[p++] = ']';
        data[p] = '\0';
        char shape[32];
        snprintf(shape, sizeof shape, "[%d]", N);
        static char req[(size_t)N * 32 + 256];
        snprintf(req, sizeof req, "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"%s\",\"shape\":%s,\"data\":%s}]}",
                 types[t], shape, data);
        same_both_ways(req, 1);
    }
    free(data);
}

/* oip_json_number alone: every digit count and exponent, against strtod and strtoll. */
static void test_json_number_against_strtod(void **state)
{
    (void)state;
    for (int i = 0; i < 200000; i++) {
        char num[64];
        int nd = (int)(rng() % 20) + 1, p = 0;
        if (rng() & 1)
            num[p++] = '-';
        int dot = (int)(rng() % (unsigned)(nd + 1));
        for (int k = 0; k < nd; k++) {
            if (k == dot && k)
                num[p++] = '.';
            num[p++] = (char)('0' + (k == 0 ? 1 + rng() % 9 : rng() % 10));
        }
        if (rng() % 3)
            p += sprintf(num + p, "e%d", (int)(rng() % 80) - 40);
        num[p] = '\0';
        uint8_t kind;
        union oip_json_num v;
        size_t taken = oip_json_number(num, (size_t)p + 1, &kind, &v);   /* the NUL ends it */
        errno = 0;
        (void)strtoll(num, NULL, 10);
        if (!strpbrk(num, ".e") && errno == ERANGE) {           /* jansson: too big integer */
            assert_int_equal(taken, 0);
            continue;
        }
        assert_int_equal(taken, (size_t)p);
        if (kind == OIP_JSON_INT) {
            assert_true(v.i == strtoll(num, NULL, 10));
        } else {
            double ref = strtod(num, NULL);
            assert_memory_equal(&v.d, &ref, sizeof ref);
        }
    }
}

/* Decimals at and around the midpoint of two doubles (17 to 19 digits): where rounding
 * twice (to 64 bits, then to 53) could differ from rounding once. */
static void test_json_data_midpoints(void **state)
{
    (void)state;
    for (int i = 0; i < 50000; i++) {
        double d = ldexp((double)(rng() >> 11), -(int)(rng() % 60) - 20);
        long double mid = ((long double)d + (long double)nextafter(d, INFINITY)) / 2;
        char num[64];
        int n = snprintf(num, sizeof num, "%.*Lg", 17 + (int)(rng() % 3), mid);
        char *last = strchr(num, 'e') ? strchr(num, 'e') - 1 : num + n - 1;
        int r = (int)(rng() % 3);
        if (r == 1 && *last < '9')
            (*last)++;
        else if (r == 2 && *last > '0')
            (*last)--;
        uint8_t kind;
        union oip_json_num v;
        assert_int_equal(oip_json_number(num, strlen(num) + 1, &kind, &v), strlen(num));
        double ref = strtod(num, NULL);
        assert_int_equal(kind, OIP_JSON_REAL);
        assert_memory_equal(&v.d, &ref, sizeof ref);
    }
}

static void test_json_data_structure(void **state)
{
    (void)state;
    /* nested arrays, whitespace and newlines inside them */
    same_both_ways(request("FP32", "[2,3]", "[[1, 2.5, -3], [4e0, 5.25, 6]]"), 1);
    same_both_ways(request("INT64", "[1,1,1,2]", "[[[[1, 2]]]]"), 1);
    same_both_ways(request("FP64", "[3]", "[\n  1.5,\n\t2.5\r\n ,3\n]"), 1);
    same_both_ways(request("FP32", "[2,2]", "[[1, 2], [3]]"), 1);                 /* count: 3 */
    same_both_ways(request("FP32", "[0]", "[ ]"), 1);
    same_both_ways(request("FP32", "[0]", "[[], []]"), 1);
    same_both_ways(request("FP32", "[0]", "[]"), 1);
    same_both_ways(request("FP32", "[2]", "[\n1,\n2\n]"), 1);
    same_both_ways(request("FP32", "[1]", "[[[[[[[[[1]]]]]]]]]"), 1);          /* 9 deep */
    assert_string_equal(same_both_ways(request("FP32", "[1]", "[[[[[[[[[[1]]]]]]]]]]"), 0),     /* 10 */
                        "read -1: Unable to parse 'data' of input 'x': shape does not match true shape of "
                        "'data' field (1 elements expected, -1 given)");
    /* what stays jansson's: strings, null, objects inside data */
    same_both_ways(request("BYTES", "[2]", "[\"a\", \"b\"]"), 0);
    same_both_ways(request("FP32", "[2]", "[1, \"2\"]"), 0);
    same_both_ways(request("FP32", "[2]", "[1, null]"), 0);
    same_both_ways(request("FP32", "[2]", "[1, {}]"), 0);
    same_both_ways(request("FP32", "[1]", "1.5"), 0);
    same_both_ways("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"d\\u0061ta\":[1.5]}]}", 0);
    /* data outside an input is not an input's */
    same_both_ways("{\"data\":[1,2,3],\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],"
                   "\"p\":{\"data\":[4,5]},\"data\":[6]}]}", 1);
    /* the second input's array is the second's; jansson has 0 for each */
    const char *req = "{\"inputs\":[{\"name\":\"a\",\"data\":[1,2]},{\"name\":\"b\",\"data\":[3,4,5]}]}";
    struct oip_json_data *pre = NULL;
    json_error_t e;
    json_t *j = oip_json_data_load(req, strlen(req), 0, &e, &pre);
    assert_non_null(j);
    char *dumped = json_dumps(j, JSON_COMPACT);
    assert_string_equal(dumped, "{\"inputs\":[{\"name\":\"a\",\"data\":0},{\"name\":\"b\",\"data\":0}]}");
    free(dumped);
    json_decref(j);
    const struct oip_json_values *v0 = oip_json_data_for(pre, 0), *v1 = oip_json_data_for(pre, 1);
    assert_non_null(v0);
    assert_non_null(v1);
    assert_int_equal(v0->count, 2);
    assert_int_equal(v1->count, 3);
    assert_int_equal(v1->num[2].i, 5);
    oip_json_data_drop(pre, 0);
    assert_null(oip_json_data_for(pre, 0));
    oip_json_data_free(pre);
}

static void test_json_data_errors(void **state)
{
    (void)state;
    /* malformed numbers and brackets: left to jansson, whose error (line, column) is the answer */
    static const char *const bad[] = {
        "[01]", "[1.]", "[.5]", "[1e]", "[1e+]", "[-]", "[+1]", "[NaN]", "[Infinity]", "[-Infinity]", "[1,]",
        "[,1]", "[1 2]", "[[1]", "[1,,2]", "[1e400]", "[-1e400]", "[18446744073709551615]",
        "[9223372036854775808]", "[-9223372036854775809]", "[0x10]", "[1.5e3x]", "[tru]", "[1,\n2,\n3", "[\"a]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *text = same_both_ways(request("FP64", "[3]", bad[i]), 0);
        assert_int_equal(strncmp(text, "parse ", 6), 0);
    }
    /* a bracket too many after a whole array: the error is jansson's */
    assert_string_equal(same_both_ways(request("FP64", "[1]", "[1]]"), 0), "parse 1:64:64: '}' expected near ']'");
    /* a duplicate data key is refused though both arrays were read */
    const char *text = same_both_ways(request("FP32", "[1]", "[1], \"data\": [2]"), 0);
    assert_non_null(strstr(text, "duplicate object key"));
    /* an error after an array read: its line, column and position as sent */
    text = same_both_ways("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[3],\"data\":[1,\n2,\n"
                          "3]}, ]}", 0);
    assert_string_equal(text, "parse 3:6:73: unexpected token near ']'");
    text = same_both_ways("{\"inputs\":[{\"name\":\"x\",\"data\":[1, 2, \"\u00e9\", 3]}, {\"data\":[4, 5]},\n"
                          "{\"name\":\"y\",\"data\":[\"a\" 1]}]}", 0);
    assert_string_equal(text, "parse 2:25:90: ']' expected near '1'");
    /* a NUL after a number, past an array read: jansson drops it and counts on without it
     * (found by fuzz_oip_json_data); the error is still jansson's on the text as sent */
    static const char with_nul[] = "{\"inputs\":[{\"name\":\"x\",\"data\":[1,2]},{\"shape\":[7\0\n8]}]}";
    json_error_t want, got;
    struct oip_json_data *read = NULL;
    assert_null(json_loadb(with_nul, sizeof with_nul - 1, JSON_REJECT_DUPLICATES, &want));
    assert_null(oip_json_data_load(with_nul, sizeof with_nul - 1, JSON_REJECT_DUPLICATES, &got, &read));
    assert_null(read);
    assert_int_equal(got.line, 2);
    assert_int_equal(got.line, want.line);
    assert_int_equal(got.column, want.column);
    assert_int_equal(got.position, want.position);
    assert_string_equal(got.text, want.text);
    /* a text cut inside a data array (a stale Inference-Header-Content-Length): jansson's
     * premature end, nothing kept; then the whole text */
    const char *cut = "{\"inputs\":[{\"name\":\"x\",\"data\":[1.5,2.5]}]}";
    struct oip_json_data *pre = NULL;
    json_error_t e;
    assert_null(oip_json_data_load(cut, 36, JSON_REJECT_DUPLICATES, &e, &pre));
    assert_int_equal(json_error_code(&e), json_error_premature_end_of_input);
    assert_null(pre);
    json_t *j = oip_json_data_load(cut, strlen(cut), JSON_REJECT_DUPLICATES, &e, &pre);
    assert_non_null(j);
    assert_int_equal(oip_json_data_for(pre, 0)->count, 2);
    json_decref(j);
    oip_json_data_free(pre);
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
        cmocka_unit_test(test_json_data_every_type_and_edge),
        cmocka_unit_test(test_json_data_random_numbers),
        cmocka_unit_test(test_json_number_against_strtod),
        cmocka_unit_test(test_json_data_midpoints),
        cmocka_unit_test(test_json_data_structure),
        cmocka_unit_test(test_json_data_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
