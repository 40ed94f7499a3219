/*
 * json_schema_value.c — what a JSON value is to JSON Schema: numbers compared
 * exactly, 1 equal to 1.0, duplicates found in n log n, lengths in code points;
 * and how a value is quoted in a message (cut at a character boundary).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_schema_value.h"

/* --------------------------------------------------------------- messages */

/* Length of buf[0, len) without a UTF-8 sequence that truncation left incomplete. */
size_t gjs_utf8_trim(const char *buf, size_t len)
{
    size_t i = len, cont = 0;
    while (i > 0 && cont < 4 && ((unsigned char)buf[i - 1] & 0xC0) == 0x80) {
        i--;
        cont++;
    }
    if (i == 0)
        return len;
    unsigned char lead = (unsigned char)buf[i - 1];
    size_t need = lead < 0xC0 ? cont : (lead & 0xE0) == 0xC0 ? 1 : (lead & 0xF0) == 0xE0 ? 2 : 3;
    return cont == need ? len : i - 1;
}

/* Appends text[0, n) to buf (holding len bytes, cap in all), whole characters only. */
size_t gjs_append_whole(char *buf, size_t cap, size_t len, const char *text, size_t n)
{
    size_t room = cap - 1 - len;
    int cut = n > room;
    memcpy(buf + len, text, cut ? room : n);
    len += cut ? room : n;
    if (cut)
        len = gjs_utf8_trim(buf, len);
    buf[len] = 0;
    return len;
}

/* s[0, n) for a message: cut at a character boundary with "..." when long. */
const char *gjs_clip(const char *s, size_t n, char *buf, size_t cap)
{
    size_t len = gjs_append_whole(buf, cap - 3, 0, s, n);
    if (len < n)
        memcpy(buf + len, "...", 4);
    return buf;
}

size_t gjs_utf8_length(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += ((unsigned char)s[i] & 0xC0) != 0x80;
    return count;
}

const char *gjs_format_number(const json_t *v, char *buf, size_t cap)
{
    if (json_is_integer(v)) {
        snprintf(buf, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return buf;
    }
    double d = json_real_value(v);
    snprintf(buf, cap, "%.15g", d);
    if (strtod(buf, NULL) != d)
        snprintf(buf, cap, "%.17g", d);
    return buf;
}

/* A value for a message: strings bare, anything else as compact JSON. */
const char *gjs_describe_value(const json_t *v, char *buf, size_t cap)
{
    if (json_is_string(v))
        return gjs_clip(json_string_value(v), json_string_length(v), buf, cap);
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    gjs_clip(text ? text : "?", text ? strlen(text) : 1, buf, cap);
    free(text);
    return buf;
}

/* "a, b, 3": the members of an enum, for a message. */
const char *gjs_describe_list(const json_t *list, char *out, size_t cap)
{
    size_t used = 0, i;
    const json_t *e;
    out[0] = 0;
    json_array_foreach(list, i, e) {
        char item[64];
        int n = snprintf(out + used, cap - used, "%s%s", used ? ", " : "",
                         gjs_describe_value(e, item, sizeof item));
        if (n < 0 || (size_t)n >= cap - used) {
            out[used] = 0;
            if (cap - used > 5)
                memcpy(out + used, ", ...", 6);
            break;
        }
        used += (size_t)n;
    }
    return out;
}

/* ------------------------------------------------------------------- numbers */

static int int_real_cmp(json_int_t i, double d)
{
    if (d >= 0x1p63)
        return -1;
    if (d < -0x1p63)
        return 1;
    double whole = trunc(d);
    json_int_t w = (json_int_t)whole;
    if (i != w)
        return i < w ? -1 : 1;
    double frac = d - whole;
    return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

/* -1, 0 or 1 as a is below, equal to or above b: exact, integers beyond 2^53 included. */
int gjs_num_cmp(const json_t *a, const json_t *b)
{
    if (json_is_integer(a) && json_is_integer(b)) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        return x < y ? -1 : x > y;
    }
    if (json_is_real(a) && json_is_real(b)) {
        double x = json_real_value(a), y = json_real_value(b);
        return x < y ? -1 : x > y;
    }
    if (json_is_integer(a))
        return int_real_cmp(json_integer_value(a), json_real_value(b));
    return -int_real_cmp(json_integer_value(b), json_real_value(a));
}

/* m > 0 (compile checks it). Non-integers allow a few ulps, so 0.3 is a multiple of 0.1. */
int gjs_is_multiple(const json_t *v, const json_t *m)
{
    if (json_is_integer(v) && json_is_integer(m))
        return json_integer_value(v) % json_integer_value(m) == 0;
    double q = json_number_value(v) / json_number_value(m);
    if (!isfinite(q))
        return 0;
    return fabs(q - round(q)) <= 4 * DBL_EPSILON * fabs(q);
}

/* A count keyword's value (compile checked: an integer, maybe written 2.0). */
json_int_t gjs_count_of(const json_t *v)
{
    return json_is_integer(v) ? json_integer_value(v) : (json_int_t)json_real_value(v);
}

/* ------------------------------------------------------------------ equality */

/* JSON Schema's equality: 1 equals 1.0; objects ignore key order. */
int gjs_same(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return gjs_num_cmp(a, b) == 0;
    if (json_typeof(a) != json_typeof(b))
        return 0;
    size_t i;
    const json_t *e;
    const char *key;
    json_t *val;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b))
            return 0;
        json_array_foreach(a, i, e)
            if (!gjs_same(e, json_array_get(b, i)))
                return 0;
        return 1;
    case JSON_OBJECT:
        if (json_object_size(a) != json_object_size(b))
            return 0;
        json_object_foreach((json_t *)a, key, val) {
            const json_t *other = json_object_get(b, key);
            if (!other || !gjs_same(val, other))
                return 0;
        }
        return 1;
    default:
        return 1;
    }
}

/* --------------------------------------------------------------- uniqueItems */

static int write_canonical(FILE *out, const json_t *v, int depth);

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int write_canonical_object(FILE *out, const json_t *v, int depth)
{
    size_t n = json_object_size(v), i = 0;
    const char **keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys)
        return -1;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
        keys[i++] = key;
    qsort(keys, n, sizeof *keys, key_cmp);
    int rc = 0;
    fputc('{', out);
    for (i = 0; rc == 0 && i < n; i++) {
        fprintf(out, "s%zu:%s", strlen(keys[i]), keys[i]);
        rc = write_canonical(out, json_object_get(v, keys[i]), depth + 1);
    }
    fputc('}', out);
    free(keys);
    return rc;
}

/* One text per value such that equal texts mean JSON Schema's equality: numbers
 * in one form (1.0 as 1), object keys sorted, strings length-prefixed. */
static int write_canonical(FILE *out, const json_t *v, int depth)
{
    size_t i;
    const json_t *e;
    double d;
    if (depth > 2048)   /* jansson's own parsing limit */
        return -1;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return write_canonical_object(out, v, depth);
    case JSON_ARRAY:
        fputc('[', out);
        json_array_foreach(v, i, e)
            if (write_canonical(out, e, depth + 1))
                return -1;
        fputc(']', out);
        return 0;
    case JSON_STRING:
        fprintf(out, "s%zu:", json_string_length(v));
        fwrite(json_string_value(v), 1, json_string_length(v), out);
        return 0;
    case JSON_INTEGER:
        fprintf(out, "n%" JSON_INTEGER_FORMAT ";", json_integer_value(v));
        return 0;
    case JSON_REAL:
        d = json_real_value(v);
        if (d == trunc(d) && d >= -0x1p63 && d < 0x1p63)
            fprintf(out, "n%" JSON_INTEGER_FORMAT ";", (json_int_t)d);
        else
            fprintf(out, "n%.17g;", d);
        return 0;
    default:
        fputc(json_is_true(v) ? 't' : json_is_false(v) ? 'f' : 'z', out);
        return 0;
    }
}

struct canon {
    const char *text;
    size_t len;
    size_t index;
};

static int canon_cmp(const void *pa, const void *pb)
{
    const struct canon *a = pa, *b = pb;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    int c = memcmp(a->text, b->text, a->len);
    if (c)
        return c;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* Sorts the items' canonical texts: n log n whatever the items. 1 with dup set when
 * two items are equal, 0 when none are, -1 when out of memory or too deep. */
int gjs_find_duplicate(const json_t *arr, size_t dup[2])
{
    size_t n = json_array_size(arr), buf_len = 0;
    char *buf = NULL;
    struct canon *c = calloc(n, sizeof *c);
    FILE *out = c ? open_memstream(&buf, &buf_len) : NULL;
    int rc = out ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        long at = ftell(out);
        c[i].index = (size_t)at;   /* the start offset, until buf is final */
        rc = at < 0 ? -1 : write_canonical(out, json_array_get(arr, i), 0);
    }
    if (out && fclose(out) != 0)
        rc = -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t end = i + 1 < n ? c[i + 1].index : buf_len;
        c[i].text = buf + c[i].index;
        c[i].len = end - c[i].index;
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        c[i].index = i;
    if (rc == 0)
        qsort(c, n, sizeof *c, canon_cmp);
    for (size_t i = 1; rc == 0 && i < n; i++) {
        if (c[i - 1].len == c[i].len && memcmp(c[i - 1].text, c[i].text, c[i].len) == 0) {
            dup[0] = c[i - 1].index;
            dup[1] = c[i].index;
            rc = 1;
        }
    }
    free(c);
    free(buf);
    return rc;
}
