/*
 * oip_json_data_fuzz.c — libFuzzer harness for the reader of /v2 inference requests' numeric
 * data arrays (service/infer/oip_json_data.c), against jansson. Input: a request's JSON text
 * (any bytes), parsed as the route does (JSON_REJECT_DUPLICATES) by json_loadb and by
 * oip_json_data_load. Must hold:
 *   - the text is not changed;
 *   - both fail or neither, with the same line, column, position and message;
 *   - when they parse, each array read was the data of that element of `inputs`, its leaves
 *     (nested arrays flattened) the same kinds and values, bit for bit, as jansson's, and
 *     the document is jansson's with each such data 0.
 *
 * Built by fuzz/build.sh; fuzz/smoke.sh runs it in CI from fuzz/corpus/oip_json_data (seeded
 * by fuzz/seeds.py: requests as tritonclient writes them, and edge numbers).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "service/infer/oip_json_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Compares jansson's leaves of v (depth first) with the values read, from *k on. */
static void same_leaves(const json_t *v, const struct oip_json_values *r, size_t *k)
{
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            same_leaves(json_array_get(v, i), r, k);
        return;
    }
    if (*k >= r->count)
        abort();
    uint8_t kind = r->kind[*k];
    union oip_json_num n = r->num[*k];
    (*k)++;
    if (json_is_integer(v) && kind == OIP_JSON_INT && n.i == (int64_t)json_integer_value(v))
        return;
    double d = json_is_real(v) ? json_real_value(v) : 0;
    if (json_is_real(v) && kind == OIP_JSON_REAL && memcmp(&d, &n.d, sizeof d) == 0)
        return;
    if ((json_is_true(v) && kind == OIP_JSON_TRUE) || (json_is_false(v) && kind == OIP_JSON_FALSE))
        return;
    abort();
}

/* Each array read against jansson's, which is then set to 0 in sent. */
static void check_inputs(json_t *sent, const struct oip_json_data *pre)
{
    json_t *in = json_object_get(sent, "inputs");
    size_t n = json_array_size(in);
    for (size_t i = 0; i < n + 2; i++) {
        const struct oip_json_values *r = oip_json_data_for(pre, i);
        if (!r)
            continue;
        json_t *input = json_array_get(in, i);
        const json_t *d = json_object_get(input, "data");
        if (i >= n || !json_is_array(d))
            abort();
        size_t k = 0;
        same_leaves(d, r, &k);
        if (k != r->count)
            abort();
        json_object_set_new(input, "data", json_integer(0));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    json_error_t e1, e2;
    struct oip_json_data *pre = NULL;
    json_t *sent = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &e1);
    json_t *read = oip_json_data_load(text, size, JSON_REJECT_DUPLICATES, &e2, &pre);
    if (memcmp(text, data, size) != 0 || !sent != !read || (!read && pre))
        abort();
    if (!sent && (e1.line != e2.line || e1.column != e2.column || e1.position != e2.position ||
                  strcmp(e1.text, e2.text) != 0))
        abort();
    if (sent) {
        check_inputs(sent, pre);
        if (!json_equal(sent, read))
            abort();
    }
    json_decref(sent);
    json_decref(read);
    oip_json_data_free(pre);
    free(text);
    return 0;
}
