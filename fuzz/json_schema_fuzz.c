/*
 * json_schema_fuzz.c — libFuzzer harness for the JSON Schema validator
 * (compute/common/json_schema*.c). Input: a schema, a NUL byte, a value. The
 * schema is compiled and, when accepted, the value checked; every refusal and
 * violation must come with a message, and message and field must be valid UTF-8
 * (they are quoted into JSON problem responses).
 *
 * Built by fuzz/build.sh; fuzz/smoke.sh runs it in CI from fuzz/corpus/json_schema (seeded
 * with every test of the official suite, tests/conformance/: schema, NUL, data).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must_be_utf8(const char *text)
{
    json_t *s = json_string(text);
    if (!s)
        abort();
    json_decref(s);
}

static void check_error(const struct gj_error *err)
{
    if (!err->message[0])
        abort();
    must_be_utf8(err->message);
    must_be_utf8(err->field);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t schema_len = nul ? (size_t)(nul - data) : size;
    json_t *schema = json_loadb((const char *)data, schema_len, JSON_DECODE_ANY, NULL);
    if (!schema)
        return 0;
    struct gj_error err = { 0 };
    struct gj_schema *s = gj_schema_compile(schema, &err);
    if (!s) {
        check_error(&err);
    } else if (nul) {
        json_t *value = json_loadb((const char *)nul + 1, size - schema_len - 1,
                                   JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        memset(&err, 0, sizeof err);
        if (value && gj_schema_validate(s, value, &err) != 0)
            check_error(&err);
        json_decref(value);
    }
    gj_schema_free(s);
    json_decref(schema);
    return 0;
}
