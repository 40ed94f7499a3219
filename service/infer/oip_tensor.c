/*
 * oip_tensor.c — Open Inference Protocol tensors to and from the ONNX runtime's element
 * layout (see oip_tensor.h).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_elem.h"
#include "service/infer/oip_json_data.h"
#include "service/infer/oip_tensor.h"

#define MAX_NEST (OIP_MAX_RANK + 1)   /* nested `data`: one array a dimension */
_Static_assert(MAX_NEST == OIP_JSON_MAX_NEST, "oip_json_data reads the data arrays oip_tensor counts");

size_t oip_tensor_count(int rank, const int64_t *dims)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return SIZE_MAX;
        if (dims[i] && n > SIZE_MAX / (size_t)dims[i])
            return SIZE_MAX;
        n *= (size_t)dims[i];
    }
    return n;
}

int oip_tensor_head(const json_t *jt, struct oip_tensor *t, char *msg, size_t msglen)
{
    memset(t, 0, sizeof *t);
    const char *name = json_string_value(json_object_get(jt, "name"));
    if (!json_is_object(jt) || !name || !*name || strlen(name) >= sizeof t->name) {
        snprintf(msg, msglen, "each input must be an object with a name (1 to %zu bytes)", sizeof t->name - 1);
        return -1;
    }
    snprintf(t->name, sizeof t->name, "%s", name);
    const char *dt = json_string_value(json_object_get(jt, "datatype"));
    t->elem_type = dt ? onnx_elem_from_triton_name(dt) : 0;
    if (!t->elem_type) {
        snprintf(msg, msglen, "invalid datatype for input '%s'%s%.20s%s", name, dt ? ": " : "", dt ? dt : "",
                 dt ? "" : " (no datatype)");
        return -1;
    }
    const json_t *shape = json_object_get(jt, "shape");
    if (!json_is_array(shape) || json_array_size(shape) > OIP_MAX_RANK) {
        snprintf(msg, msglen, "input '%s': shape must be an array of at most %d sizes", name, OIP_MAX_RANK);
        return -1;
    }
    t->rank = (int)json_array_size(shape);
    for (int i = 0; i < t->rank; i++) {
        const json_t *d = json_array_get(shape, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0) {
            snprintf(msg, msglen, "input '%s': shape must hold sizes (integers >= 0)", name);
            return -1;
        }
        t->dims[i] = (int64_t)json_integer_value(d);
    }
    return 0;
}

/* ---- reading: JSON data -------------------------------------------------------------- */

/* Leaves of nested arrays (a non-array counts one), or -1 past MAX_NEST. */
static long long count_leaves(const json_t *v, int depth)
{
    if (!json_is_array(v))
        return 1;
    if (depth >= MAX_NEST)
        return -1;
    long long n = 0;
    for (size_t i = 0; i < json_array_size(v); i++) {
        long long k = count_leaves(json_array_get(v, i), depth + 1);
        if (k < 0)
            return -1;
        n += k;
    }
    return n;
}

/* 1 when v fits integer type elem. */
static int int_fits(int elem, json_int_t v)
{
    switch (elem) {
    case ONNX_ELEM_INT8: return v >= INT8_MIN && v <= INT8_MAX;
    case ONNX_ELEM_INT16: return v >= INT16_MIN && v <= INT16_MAX;
    case ONNX_ELEM_INT32: return v >= INT32_MIN && v <= INT32_MAX;
    case ONNX_ELEM_UINT8: return v >= 0 && v <= UINT8_MAX;
    case ONNX_ELEM_UINT16: return v >= 0 && v <= UINT16_MAX;
    case ONNX_ELEM_UINT32: return v >= 0 && v <= (json_int_t)UINT32_MAX;
    case ONNX_ELEM_UINT64: return v >= 0;
    default: return 1;   /* INT64 */
    }
}

static int is_float_type(int elem)
{
    return elem == ONNX_ELEM_FLOAT || elem == ONNX_ELEM_DOUBLE || elem == ONNX_ELEM_FLOAT16 ||
           elem == ONNX_ELEM_BFLOAT16;
}

/* One leaf of `data` as jansson holds it, or as oip_json_data read it from the text. */
struct leaf {
    enum { LEAF_INT, LEAF_REAL, LEAF_BOOL, LEAF_STRING, LEAF_OTHER } kind;
    json_int_t i;                    /* LEAF_INT; LEAF_BOOL: 0 / 1 */
    double d;                        /* LEAF_REAL */
    const json_t *s;                 /* LEAF_STRING */
};

static struct leaf json_leaf(const json_t *v)
{
    if (json_is_integer(v))
        return (struct leaf){ .kind = LEAF_INT, .i = json_integer_value(v) };
    if (json_is_real(v))
        return (struct leaf){ .kind = LEAF_REAL, .d = json_real_value(v) };
    if (json_is_boolean(v))
        return (struct leaf){ .kind = LEAF_BOOL, .i = json_is_true(v) };
    return (struct leaf){ .kind = json_is_string(v) ? LEAF_STRING : LEAF_OTHER, .s = v };
}

/* Writes one leaf as element *i of t. 0, or -1 with msg. */
static int put_leaf(struct oip_tensor *t, const struct leaf *v, size_t *i, char *msg, size_t msglen)
{
    int e = t->elem_type;
    if (e == ONNX_ELEM_STRING) {
        if (v->kind != LEAF_STRING)
            goto bad;
        struct onnx_string *s = (struct onnx_string *)t->data + *i;
        s->data = json_string_value(v->s);
        s->len = json_string_length(v->s);
    } else if (e == ONNX_ELEM_BOOL) {
        if (v->kind != LEAF_BOOL && (v->kind != LEAF_INT || (v->i != 0 && v->i != 1)))
            goto bad;
        ((uint8_t *)t->data)[*i] = (uint8_t)v->i;
    } else if (is_float_type(e)) {
        if (v->kind != LEAF_INT && v->kind != LEAF_REAL)
            goto bad;
        onnx_elem_set_f64(e, t->data, *i, v->kind == LEAF_INT ? (double)v->i : v->d);   /* json_number_value */
    } else {
        if (v->kind != LEAF_INT)
            goto bad;
        if (!int_fits(e, v->i)) {
            snprintf(msg, msglen, "input '%s': value %" JSON_INTEGER_FORMAT " (element %zu) is out of range for %s",
                     t->name, v->i, *i, onnx_elem_triton_name(e));
            return -1;
        }
        onnx_elem_set_i64(e, t->data, *i, (int64_t)v->i);
    }
    (*i)++;
    return 0;
bad:
    snprintf(msg, msglen, "input '%s': element %zu of 'data' is not %s", t->name, *i,
             e == ONNX_ELEM_STRING ? "a string (BYTES)" : e == ONNX_ELEM_BOOL ? "a boolean (BOOL)"
             : is_float_type(e) ? "a number" : "an integer");
    return -1;
}

static int put_values(struct oip_tensor *t, const json_t *v, size_t *i, char *msg, size_t msglen)
{
    if (!json_is_array(v)) {
        struct leaf l = json_leaf(v);
        return put_leaf(t, &l, i, msg, msglen);
    }
    for (size_t k = 0; k < json_array_size(v); k++)
        if (put_values(t, json_array_get(v, k), i, msg, msglen))
            return -1;
    return 0;
}

/* The values oip_json_data read from the text, as put_values would put the same JSON. */
static int put_read_values(struct oip_tensor *t, const struct oip_json_values *v, char *msg, size_t msglen)
{
    static const int leaf_kind[] = { [OIP_JSON_INT] = LEAF_INT, [OIP_JSON_REAL] = LEAF_REAL,
                                     [OIP_JSON_FALSE] = LEAF_BOOL, [OIP_JSON_TRUE] = LEAF_BOOL };
    size_t i = 0;
    for (size_t k = 0; k < v->count; k++) {
        int kind = v->kind[k];
        struct leaf l = { .kind = leaf_kind[kind] };
        if (kind == OIP_JSON_REAL)
            l.d = v->num[k].d;
        else
            l.i = kind == OIP_JSON_INT ? (json_int_t)v->num[k].i : kind == OIP_JSON_TRUE;
        if (put_leaf(t, &l, &i, msg, msglen))
            return -1;
    }
    return 0;
}

/* `data` (or the values read from its text: pre) into t, count elements. */
static int read_json_data(const json_t *data, const struct oip_json_values *pre, struct oip_tensor *t,
                          size_t count, char *msg, size_t msglen)
{
    long long leaves = pre ? (long long)pre->count : count_leaves(data, 0);
    if (leaves < 0 || (unsigned long long)leaves != count) {
        snprintf(msg, msglen, "Unable to parse 'data' of input '%s': shape does not match true shape of "
                 "'data' field (%zu elements expected, %lld given)", t->name, count, leaves < 0 ? -1LL : leaves);
        return -1;
    }
    t->bytes = count * onnx_elem_size(t->elem_type);
    t->data = malloc(t->bytes ? t->bytes : 1);
    if (!t->data) {
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    if (pre)
        return put_read_values(t, pre, msg, msglen);
    size_t i = 0;
    return put_values(t, data, &i, msg, msglen);
}

/* ---- reading: binary ----------------------------------------------------------------- */

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* BYTES: count elements of 4-byte length + bytes, exactly size bytes at p. */
static int read_binary_strings(const unsigned char *p, size_t size, struct oip_tensor *t, size_t count,
                               char *msg, size_t msglen)
{
    if (count > size / 4) {
        snprintf(msg, msglen, "input '%s': %zu bytes of binary data cannot hold %zu BYTES elements", t->name,
                 size, count);
        return -1;
    }
    t->bytes = count * sizeof(struct onnx_string);
    t->data = malloc(t->bytes ? t->bytes : 1);
    if (!t->data) {
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    struct onnx_string *s = t->data;
    size_t off = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t len = size - off >= 4 ? le32(p + off) : UINT32_MAX;
        if (len == UINT32_MAX || len > size - off - 4) {
            snprintf(msg, msglen, "input '%s': BYTES element %zu runs past its %zu bytes of binary data", t->name,
                     i, size);
            return -1;
        }
        s[i].data = (const char *)p + off + 4;
        s[i].len = len;
        off += 4 + (size_t)len;
    }
    if (off != size) {
        snprintf(msg, msglen, "input '%s': binary_data_size is %zu but its %zu BYTES elements take %zu", t->name,
                 size, count, off);
        return -1;
    }
    return 0;
}

static int read_binary(const unsigned char *p, size_t size, struct oip_tensor *t, size_t count, char *msg,
                       size_t msglen)
{
    if (t->elem_type == ONNX_ELEM_STRING)
        return read_binary_strings(p, size, t, count, msg, msglen);
    size_t es = onnx_elem_size(t->elem_type);
    if (count > SIZE_MAX / es || count * es != size) {
        snprintf(msg, msglen, "input '%s': binary_data_size is %zu, expected %zu (%zu %s elements)", t->name, size,
                 count > SIZE_MAX / es ? SIZE_MAX : count * es, count, onnx_elem_triton_name(t->elem_type));
        return -1;
    }
    t->bytes = size;
    if (t->elem_type != ONNX_ELEM_BOOL && size && (uintptr_t)p % es == 0) {
        t->data = (void *)p;   /* read in place: a batch of 8 images is 2 MiB not copied */
        t->borrowed = 1;
        return 0;
    }
    t->data = malloc(size ? size : 1);
    if (!t->data) {
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    memcpy(t->data, p, size);
    if (t->elem_type == ONNX_ELEM_BOOL)   /* the runtime takes 0 / 1 */
        for (size_t i = 0; i < size; i++)
            ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
    return 0;
}

/* Triton's rule: exactly one of data, parameters.binary_data_size (and shared memory,
 * which this server has not). */
static int data_source(const json_t *jt, const struct oip_tensor *t, const json_t **data, const json_t **bds,
                       char *msg, size_t msglen)
{
    const json_t *params = json_object_get(jt, "parameters");
    if (params && !json_is_object(params)) {
        snprintf(msg, msglen, "input '%s': parameters must be an object", t->name);
        return -1;
    }
    if (json_object_get(params, "shared_memory_region")) {
        snprintf(msg, msglen, "input '%s': shared memory is not supported by this server: send 'data' or use "
                 "the binary tensor extension", t->name);
        return -1;
    }
    *data = json_object_get(jt, "data");
    *bds = json_object_get(params, "binary_data_size");
    if (!*data == !*bds) {
        snprintf(msg, msglen, "Input must set only one of the following fields: 'data', 'binary_data_size' in "
                 "'parameters', 'shared_memory_region' in 'parameters'. But %s (input '%s')",
                 *data ? "set 'data' 'binary_data_size'" : "no field is set", t->name);
        return -1;
    }
    if (*bds && (!json_is_integer(*bds) || json_integer_value(*bds) < 0)) {
        snprintf(msg, msglen, "Unable to parse 'binary_data_size' of input '%s'", t->name);
        return -1;
    }
    return 0;
}

int oip_tensor_read(const json_t *jt, const struct oip_json_values *pre, const unsigned char **bin,
                    size_t *bin_left, struct oip_tensor *t, char *msg, size_t msglen)
{
    const json_t *data, *bds;
    if (data_source(jt, t, &data, &bds, msg, msglen))
        return -1;
    size_t count = oip_tensor_count(t->rank, t->dims);
    int rc;
    if (bds) {
        uint64_t size = (uint64_t)json_integer_value(bds);
        if (size > *bin_left) {
            snprintf(msg, msglen, "input '%s': binary_data_size is %" PRIu64 " but only %zu bytes of binary data "
                     "are left in the request", t->name, size, *bin_left);
            return -1;
        }
        rc = read_binary(*bin, (size_t)size, t, count, msg, msglen);
        if (rc == 0) {
            *bin += size;
            *bin_left -= (size_t)size;
        }
    } else {
        rc = read_json_data(data, json_is_integer(data) && json_integer_value(data) == 0 ? pre : NULL, t, count,
                            msg, msglen);
    }
    if (rc) {
        oip_tensor_free_data(t);
        t->bytes = 0;
    }
    return rc;
}

void oip_tensor_free_data(struct oip_tensor *t)
{
    if (!t->borrowed)
        free(t->data);
    t->data = NULL;
    t->borrowed = 0;
}

/* ---- writing ------------------------------------------------------------------------- */

static size_t elem_count(const struct oip_tensor *t)
{
    size_t es = onnx_elem_size(t->elem_type);
    return es ? t->bytes / es : 0;
}

static json_t *json_value_at(const struct oip_tensor *t, size_t i, char *msg, size_t msglen)
{
    int e = t->elem_type;
    if (e == ONNX_ELEM_STRING) {
        const struct onnx_string *s = (const struct onnx_string *)t->data + i;
        json_t *v = json_stringn(s->data ? s->data : "", s->len);
        if (!v)
            snprintf(msg, msglen, "output '%s': BYTES element %zu is not UTF-8 text, which JSON cannot carry: "
                     "ask for it with binary_data", t->name, i);
        return v;
    }
    if (e == ONNX_ELEM_BOOL)
        return json_boolean(((const uint8_t *)t->data)[i]);
    if (is_float_type(e)) {
        double d = onnx_elem_get_f64(e, t->data, i);
        if (!isfinite(d)) {
            snprintf(msg, msglen, "output '%s': element %zu is %s, which JSON cannot carry: ask for it with "
                     "binary_data", t->name, i, isnan(d) ? "NaN" : "infinite");
            return NULL;
        }
        return json_real(d);
    }
    int64_t v = onnx_elem_get_i64(e, t->data, i);
    if (e == ONNX_ELEM_UINT64 && v < 0)   /* above INT64_MAX: jansson's integers are signed */
        return json_real((double)(uint64_t)v);
    return json_integer((json_int_t)v);
}

json_t *oip_tensor_json(const struct oip_tensor *t, char *msg, size_t msglen)
{
    json_t *arr = json_array();
    size_t n = elem_count(t);
    for (size_t i = 0; arr && i < n; i++) {
        json_t *v = json_value_at(t, i, msg, msglen);
        if (!v || json_array_append_new(arr, v)) {
            if (!v && !*msg)
                snprintf(msg, msglen, "out of memory");
            json_decref(arr);
            return NULL;
        }
    }
    if (!arr)
        snprintf(msg, msglen, "out of memory");
    return arr;
}

size_t oip_tensor_binary_size(const struct oip_tensor *t)
{
    if (t->elem_type != ONNX_ELEM_STRING)
        return t->bytes;
    size_t n = elem_count(t), size = 0;
    const struct onnx_string *s = t->data;
    for (size_t i = 0; i < n; i++)
        size += 4 + s[i].len;
    return size;
}

void oip_tensor_binary_write(const struct oip_tensor *t, unsigned char *dst)
{
    if (t->elem_type != ONNX_ELEM_STRING) {
        if (t->bytes)
            memcpy(dst, t->data, t->bytes);
        return;
    }
    size_t n = elem_count(t);
    const struct onnx_string *s = t->data;
    for (size_t i = 0; i < n; i++) {
        uint32_t len = (uint32_t)s[i].len;
        unsigned char le[4] = { (unsigned char)len, (unsigned char)(len >> 8), (unsigned char)(len >> 16),
                                (unsigned char)(len >> 24) };
        memcpy(dst, le, 4);
        if (len)
            memcpy(dst + 4, s[i].data, len);
        dst += 4 + (size_t)len;
    }
}

/* ---- classification ------------------------------------------------------------------ */

struct ranked {
    double v;
    size_t idx;
};

static int by_value_desc(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* One "value:index[:label]" string as Triton's std::to_string writes the value. */
static int class_string(const struct oip_tensor *t, size_t at, size_t idx, const char *const *labels,
                        size_t n_labels, char *buf, size_t cap)
{
    int e = t->elem_type, n;
    if (e == ONNX_ELEM_FLOAT || e == ONNX_ELEM_DOUBLE)
        n = snprintf(buf, cap, "%f:%zu", onnx_elem_get_f64(e, t->data, at), idx);
    else if (e == ONNX_ELEM_UINT64)
        n = snprintf(buf, cap, "%" PRIu64 ":%zu", (uint64_t)onnx_elem_get_i64(e, t->data, at), idx);
    else
        n = snprintf(buf, cap, "%" PRId64 ":%zu", onnx_elem_get_i64(e, t->data, at), idx);
    const char *label = idx < n_labels && labels ? labels[idx] : NULL;
    if (label && *label && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, ":%s", label);
    return n;
}

static int classifiable(int e)
{
    return e != ONNX_ELEM_STRING && e != ONNX_ELEM_BOOL && e != ONNX_ELEM_FLOAT16 && e != ONNX_ELEM_BFLOAT16;
}

int oip_classify(const struct oip_tensor *t, int batched, uint64_t k, const char *const *labels,
                 size_t n_labels, struct oip_tensor *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    if (!classifiable(t->elem_type)) {
        snprintf(msg, msglen, "class result not available for output due to unsupported type '%s'",
                 onnx_elem_triton_name(t->elem_type));
        return -1;
    }
    size_t total = elem_count(t);
    size_t samples = batched && t->rank > 0 ? (size_t)t->dims[0] : 1;
    size_t per = samples ? total / samples : 0;
    size_t top = k < per ? (size_t)k : per;
    /* each string at most: a %f double (~320 chars), an index, a label */
    size_t longest_label = 0;
    for (size_t i = 0; labels && i < n_labels; i++)
        if (labels[i] && strlen(labels[i]) > longest_label)
            longest_label = strlen(labels[i]);
    size_t str_cap = 360 + longest_label;
    size_t n = samples * top;
    struct ranked *rank = malloc((per ? per : 1) * sizeof *rank);
    char *block = malloc(n * sizeof(struct onnx_string) + n * str_cap + 1);
    if (!rank || !block) {
        free(rank);
        free(block);
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    struct onnx_string *s = (struct onnx_string *)(void *)block;
    char *text = block + n * sizeof *s;
    for (size_t b = 0; b < samples; b++) {
        for (size_t i = 0; i < per; i++)
            rank[i] = (struct ranked){ onnx_elem_get_f64(t->elem_type, t->data, b * per + i), i };
        qsort(rank, per, sizeof *rank, by_value_desc);
        for (size_t j = 0; j < top; j++) {
            int len = class_string(t, b * per + rank[j].idx, rank[j].idx, labels, n_labels, text, str_cap);
            size_t l = len < 0 ? 0 : (size_t)len >= str_cap ? str_cap - 1 : (size_t)len;
            s[b * top + j] = (struct onnx_string){ text, l };
            text += l;
        }
    }
    free(rank);
    snprintf(out->name, sizeof out->name, "%s", t->name);
    out->elem_type = ONNX_ELEM_STRING;
    out->rank = 0;
    if (batched && t->rank > 0)
        out->dims[out->rank++] = (int64_t)samples;
    out->dims[out->rank++] = (int64_t)top;
    out->data = block;
    out->bytes = n * sizeof *s;
    return 0;
}
