/*
 * json_schema.c — JSON Schema draft 2020-12 (json_schema.h lists the keywords).
 * Compiling walks the schema once: every keyword must be known and well formed,
 * patterns are compiled, $refs must name a schema in this document. Validating
 * walks a value against it and stops at the first violation.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_schema.h"
#include "common/json_schema_regex.h"

#define MAX_DEPTH 64   /* schemas nested in a schema; schemas applied along one value */
#define DIALECT "https://json-schema.org/draft/2020-12/schema"

/* ------------------------------------------------------------------ keywords */

/* What a keyword's argument is. */
enum arg {
    ARG_ANNOTATION,   /* anything; no effect on validity */
    ARG_ANY,          /* any JSON value (const) */
    ARG_SCHEMA,       /* a schema */
    ARG_SCHEMA_LIST,  /* a non-empty array of schemas */
    ARG_SCHEMA_MAP,   /* an object of schemas */
    ARG_PATTERN_MAP,  /* an object of schemas keyed by patterns */
    ARG_PATTERN,      /* a pattern */
    ARG_COUNT,        /* a non-negative integer */
    ARG_NUMBER,
    ARG_POSITIVE,     /* a number above 0 */
    ARG_TYPE,         /* a type name, or an array of distinct ones */
    ARG_ARRAY,        /* an array (enum) */
    ARG_BOOL,
    ARG_NAMES,        /* an array of strings */
    ARG_NAME_LISTS,   /* an object of arrays of strings */
    ARG_REF,          /* a reference into this document */
    ARG_DIALECT,      /* $schema: draft 2020-12 */
    ARG_ROOT_ID,      /* $id: a string, at the root only */
    ARG_REFUSED,
};

struct keyword {
    const char *name;
    enum arg arg;
    const char *why;   /* ARG_REFUSED: the reason given */
};

static const struct keyword keywords[] = {
    { "$comment", ARG_ANNOTATION, NULL },
    { "$defs", ARG_SCHEMA_MAP, NULL },
    { "$id", ARG_ROOT_ID, NULL },
    { "$ref", ARG_REF, NULL },
    { "$schema", ARG_DIALECT, NULL },
    { "additionalProperties", ARG_SCHEMA, NULL },
    { "allOf", ARG_SCHEMA_LIST, NULL },
    { "anyOf", ARG_SCHEMA_LIST, NULL },
    { "const", ARG_ANY, NULL },
    { "contains", ARG_SCHEMA, NULL },
    { "contentEncoding", ARG_ANNOTATION, NULL },
    { "contentMediaType", ARG_ANNOTATION, NULL },
    { "contentSchema", ARG_ANNOTATION, NULL },
    { "default", ARG_ANNOTATION, NULL },
    { "dependentRequired", ARG_NAME_LISTS, NULL },
    { "dependentSchemas", ARG_SCHEMA_MAP, NULL },
    { "deprecated", ARG_ANNOTATION, NULL },
    { "description", ARG_ANNOTATION, NULL },
    { "else", ARG_SCHEMA, NULL },
    { "enum", ARG_ARRAY, NULL },
    { "examples", ARG_ANNOTATION, NULL },
    { "exclusiveMaximum", ARG_NUMBER, NULL },
    { "exclusiveMinimum", ARG_NUMBER, NULL },
    { "format", ARG_ANNOTATION, NULL },
    { "if", ARG_SCHEMA, NULL },
    { "items", ARG_SCHEMA, NULL },
    { "maxContains", ARG_COUNT, NULL },
    { "maxItems", ARG_COUNT, NULL },
    { "maxLength", ARG_COUNT, NULL },
    { "maxProperties", ARG_COUNT, NULL },
    { "maximum", ARG_NUMBER, NULL },
    { "minContains", ARG_COUNT, NULL },
    { "minItems", ARG_COUNT, NULL },
    { "minLength", ARG_COUNT, NULL },
    { "minProperties", ARG_COUNT, NULL },
    { "minimum", ARG_NUMBER, NULL },
    { "multipleOf", ARG_POSITIVE, NULL },
    { "not", ARG_SCHEMA, NULL },
    { "oneOf", ARG_SCHEMA_LIST, NULL },
    { "pattern", ARG_PATTERN, NULL },
    { "patternProperties", ARG_PATTERN_MAP, NULL },
    { "prefixItems", ARG_SCHEMA_LIST, NULL },
    { "properties", ARG_SCHEMA_MAP, NULL },
    { "propertyNames", ARG_SCHEMA, NULL },
    { "readOnly", ARG_ANNOTATION, NULL },
    { "required", ARG_NAMES, NULL },
    { "then", ARG_SCHEMA, NULL },
    { "title", ARG_ANNOTATION, NULL },
    { "type", ARG_TYPE, NULL },
    { "uniqueItems", ARG_BOOL, NULL },
    { "writeOnly", ARG_ANNOTATION, NULL },

    { "$anchor", ARG_REFUSED, "anchors are not supported; use \"$ref\": \"#/$defs/...\"" },
    { "$dynamicAnchor", ARG_REFUSED, "dynamic references are not supported" },
    { "$dynamicRef", ARG_REFUSED, "dynamic references are not supported" },
    { "$recursiveAnchor", ARG_REFUSED, "draft 2019-09 dynamic references are not supported" },
    { "$recursiveRef", ARG_REFUSED, "draft 2019-09 dynamic references are not supported" },
    { "$vocabulary", ARG_REFUSED, "custom meta-schemas are not supported" },
    { "additionalItems", ARG_REFUSED, "it is a draft 2019-09 name; use prefixItems and items" },
    { "definitions", ARG_REFUSED, "it is a draft-07 name; use $defs" },
    { "dependencies", ARG_REFUSED,
      "it is a draft-07 name; use dependentRequired or dependentSchemas" },
    { "unevaluatedItems", ARG_REFUSED, "it needs annotation collection, which is not implemented" },
    { "unevaluatedProperties", ARG_REFUSED,
      "it needs annotation collection, which is not implemented" },
};

static const struct keyword *find_keyword(const char *name)
{
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
        if (strcmp(keywords[i].name, name) == 0)
            return &keywords[i];
    return NULL;
}

/* ------------------------------------------------------------- small helpers */

/* Length of buf[0, len) without a UTF-8 sequence that truncation left incomplete. */
static size_t utf8_trim(const char *buf, size_t len)
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
static size_t append_whole(char *buf, size_t cap, size_t len, const char *text, size_t n)
{
    size_t room = cap - 1 - len;
    int cut = n > room;
    memcpy(buf + len, text, cut ? room : n);
    len += cut ? room : n;
    if (cut)
        len = utf8_trim(buf, len);
    buf[len] = 0;
    return len;
}

/* s[0, n) for a message: cut at a character boundary with "..." when long. */
static const char *clip(const char *s, size_t n, char *buf, size_t cap)
{
    size_t len = append_whole(buf, cap - 3, 0, s, n);
    if (len < n)
        memcpy(buf + len, "...", 4);
    return buf;
}

static size_t utf8_length(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += ((unsigned char)s[i] & 0xC0) != 0x80;
    return count;
}

static const char *format_number(const json_t *v, char *buf, size_t cap)
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
static const char *describe_value(const json_t *v, char *buf, size_t cap)
{
    if (json_is_string(v))
        return clip(json_string_value(v), json_string_length(v), buf, cap);
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    clip(text ? text : "?", text ? strlen(text) : 1, buf, cap);
    free(text);
    return buf;
}

/* "a, b, 3": the members of an enum, for a message. */
static const char *describe_list(const json_t *list, char *out, size_t cap)
{
    size_t used = 0, i;
    const json_t *e;
    out[0] = 0;
    json_array_foreach(list, i, e) {
        char item[64];
        int n = snprintf(out + used, cap - used, "%s%s", used ? ", " : "",
                         describe_value(e, item, sizeof item));
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
static int num_cmp(const json_t *a, const json_t *b)
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
static int is_multiple(const json_t *v, const json_t *m)
{
    if (json_is_integer(v) && json_is_integer(m))
        return json_integer_value(v) % json_integer_value(m) == 0;
    double q = json_number_value(v) / json_number_value(m);
    if (!isfinite(q))
        return 0;
    return fabs(q - round(q)) <= 4 * DBL_EPSILON * fabs(q);
}

/* A count keyword's value (compile checked: an integer, maybe written 2.0). */
static json_int_t count_of(const json_t *v)
{
    return json_is_integer(v) ? json_integer_value(v) : (json_int_t)json_real_value(v);
}

/* ------------------------------------------------------------------ equality */

/* JSON Schema's equality: 1 equals 1.0; objects ignore key order. */
static int json_same(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return num_cmp(a, b) == 0;
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
            if (!json_same(e, json_array_get(b, i)))
                return 0;
        return 1;
    case JSON_OBJECT:
        if (json_object_size(a) != json_object_size(b))
            return 0;
        json_object_foreach((json_t *)a, key, val) {
            const json_t *other = json_object_get(b, key);
            if (!other || !json_same(val, other))
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
static int find_duplicate(const json_t *arr, size_t dup[2])
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

/* ------------------------------------------------------------ compiled form */

struct compiled_regex {
    const char *source;   /* the pattern's text inside the schema: its identity */
    regex_t re;
};

struct gj_schema {
    json_t *root;
    struct compiled_regex *regexes;   /* sorted by source address once compiled */
    size_t n_regexes, cap_regexes;
};

static int regex_cmp(const void *pa, const void *pb)
{
    uintptr_t a = (uintptr_t)((const struct compiled_regex *)pa)->source;
    uintptr_t b = (uintptr_t)((const struct compiled_regex *)pb)->source;
    return a < b ? -1 : a > b;
}

/* 1 when the pattern whose text is source matches s, 0 when not, -1 on failure. */
static int regex_match(const struct gj_schema *s, const char *source, const char *str, size_t len)
{
    struct compiled_regex key = { .source = source };
    const struct compiled_regex *r = bsearch(&key, s->regexes, s->n_regexes, sizeof key, regex_cmp);
    return r ? gj_regex_search(&r->re, str, len) : -1;
}

/* "#..." within ref, also when ref starts with the root's $id; NULL for other references. */
static const char *local_fragment(const json_t *root, const char *ref)
{
    if (ref[0] == '#')
        return ref + 1;
    const json_t *id = json_object_get(root, "$id");
    const char *ids = json_is_string(id) ? json_string_value(id) : "";
    size_t len = strcspn(ids, "#");
    if (len == 0 || strncmp(ref, ids, len) != 0 || (ref[len] && ref[len] != '#'))
        return NULL;
    return ref + len + (ref[len] == '#');
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The next JSON-pointer token of a URI fragment: percent-decoded, then ~1 and ~0. */
static int next_token(const char **frag, char *token, size_t cap)
{
    const char *p = *frag + 1;   /* past the '/' */
    size_t n = 0;
    for (; *p && *p != '/'; p++) {
        int byte = (unsigned char)*p;
        if (*p == '%') {
            int hi = hex_digit(p[1]), lo = hi < 0 ? -1 : hex_digit(p[2]);
            byte = hi * 16 + lo;
            if (lo < 0 || byte == 0)
                return -1;
            p += 2;
        }
        if (n + 1 >= cap)
            return -1;
        token[n++] = (char)byte;
    }
    token[n] = 0;
    *frag = p;
    size_t w = 0;
    for (size_t r = 0; r < n; r++, w++) {
        if (token[r] == '~' && (token[r + 1] == '0' || token[r + 1] == '1'))
            token[w] = token[++r] == '0' ? '~' : '/';
        else if (token[r] == '~')
            return -1;
        else
            token[w] = token[r];
    }
    token[w] = 0;
    return 0;
}

enum position { POS_SCHEMA, POS_LIST, POS_MAP };

/* One step of a pointer, only through keywords that hold schemas. */
static const json_t *pointer_step(const json_t *node, enum position *pos, const char *token)
{
    if (*pos == POS_LIST) {
        char *end;
        unsigned long i = strtoul(token, &end, 10);
        *pos = POS_SCHEMA;
        if (!token[0] || *end || (token[0] == '0' && token[1]) || token[0] == '-' || token[0] == '+')
            return NULL;
        return json_array_get(node, i);
    }
    if (*pos == POS_MAP) {
        *pos = POS_SCHEMA;
        return json_object_get(node, token);
    }
    const struct keyword *kw = find_keyword(token);
    if (!kw)
        return NULL;
    switch (kw->arg) {
    case ARG_SCHEMA: *pos = POS_SCHEMA; break;
    case ARG_SCHEMA_LIST: *pos = POS_LIST; break;
    case ARG_SCHEMA_MAP: case ARG_PATTERN_MAP: *pos = POS_MAP; break;
    default: return NULL;
    }
    return json_object_get(node, token);
}

/* The schema ref names, or NULL with why. Every step goes through a keyword that holds
 * schemas, so the target is one the compiler has checked. */
static const json_t *resolve_ref(const json_t *root, const char *ref, char *why, size_t cap)
{
    const char *frag = local_fragment(root, ref);
    if (!frag) {
        snprintf(why, cap, "is not supported: only references into this schema (\"#/...\") are");
        return NULL;
    }
    if (*frag && *frag != '/') {
        snprintf(why, cap, "is not supported: anchors are not");
        return NULL;
    }
    const json_t *node = root;
    enum position pos = POS_SCHEMA;
    while (node && *frag) {
        char token[256];
        if (next_token(&frag, token, sizeof token)) {
            snprintf(why, cap, "is not a valid JSON pointer");
            return NULL;
        }
        node = pointer_step(node, &pos, token);
    }
    if (!node || pos != POS_SCHEMA || !(json_is_object(node) || json_is_boolean(node))) {
        snprintf(why, cap, "does not name a schema in this document");
        return NULL;
    }
    return node;
}

/* ------------------------------------------------------------------ compiler */

struct compiler {
    struct gj_schema *s;
    struct gj_error *err;
    char where[128];   /* JSON pointer of what is being compiled: "#/properties/x" */
    size_t where_len;
};

__attribute__((format(printf, 2, 3)))
static int refuse(struct compiler *c, const char *fmt, ...)
{
    char what[360];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof what)
        what[utf8_trim(what, sizeof what - 1)] = 0;
    gj_error_set(c->err, c->where, "schema at %s: %s", c->where, what);
    if (c->err)
        c->err->status = 500;
    return -1;
}

static size_t where_push(struct compiler *c, const char *token)
{
    size_t old = c->where_len;
    char piece[2 * sizeof c->where];
    size_t n = 0;
    piece[n++] = '/';
    for (const char *p = token; *p && n + 2 < sizeof piece; p++) {
        if (*p == '~' || *p == '/') {
            piece[n++] = '~';
            piece[n++] = *p == '~' ? '0' : '1';
        } else {
            piece[n++] = *p;
        }
    }
    c->where_len = append_whole(c->where, sizeof c->where, old, piece, utf8_trim(piece, n));
    return old;
}

static void where_pop(struct compiler *c, size_t old)
{
    c->where_len = old;
    c->where[old] = 0;
}

static int add_regex(struct compiler *c, const char *source)
{
    struct gj_schema *s = c->s;
    if (s->n_regexes == s->cap_regexes) {
        size_t cap = s->cap_regexes ? 2 * s->cap_regexes : 8;
        struct compiled_regex *grown = realloc(s->regexes, cap * sizeof *grown);
        if (!grown)
            return refuse(c, "out of memory");
        s->regexes = grown;
        s->cap_regexes = cap;
    }
    char why[200], shown[64];
    struct compiled_regex *r = &s->regexes[s->n_regexes];
    if (gj_regex_compile(&r->re, source, why, sizeof why))
        return refuse(c, "the pattern \"%s\" is refused: %s",
                      clip(source, strlen(source), shown, sizeof shown), why);
    r->source = source;
    s->n_regexes++;
    return 0;
}

static const char *const type_names[] = {
    "null", "boolean", "object", "array", "number", "string", "integer",
};

static int is_type_name(const json_t *v)
{
    for (size_t i = 0; json_is_string(v) && i < sizeof type_names / sizeof type_names[0]; i++)
        if (strcmp(json_string_value(v), type_names[i]) == 0)
            return 1;
    return 0;
}

static int is_type_argument(const json_t *arg)
{
    if (json_is_string(arg))
        return is_type_name(arg);
    if (!json_is_array(arg) || json_array_size(arg) == 0)
        return 0;
    size_t i, j;
    const json_t *e;
    json_array_foreach(arg, i, e) {
        if (!is_type_name(e))
            return 0;
        for (j = 0; j < i; j++)
            if (json_same(e, json_array_get(arg, j)))
                return 0;
    }
    return 1;
}

static int is_name_list(const json_t *arg)
{
    size_t i;
    const json_t *e;
    if (!json_is_array(arg))
        return 0;
    json_array_foreach(arg, i, e)
        if (!json_is_string(e))
            return 0;
    return 1;
}

static int is_name_lists(const json_t *arg)
{
    const char *key;
    json_t *list;
    if (!json_is_object(arg))
        return 0;
    json_object_foreach((json_t *)arg, key, list)
        if (!is_name_list(list))
            return 0;
    return 1;
}

static int is_count(const json_t *arg)
{
    if (json_is_integer(arg))
        return json_integer_value(arg) >= 0;
    double d = json_is_real(arg) ? json_real_value(arg) : -1;
    return d >= 0 && d <= 0x1p53 && d == trunc(d);
}

/* Checks the argument of a keyword that holds no schema. */
static int check_argument(struct compiler *c, const struct keyword *kw, const json_t *arg)
{
    const char *want = NULL;
    switch (kw->arg) {
    case ARG_COUNT: want = is_count(arg) ? NULL : "a non-negative integer"; break;
    case ARG_NUMBER: want = json_is_number(arg) ? NULL : "a number"; break;
    case ARG_POSITIVE:
        want = json_is_number(arg) && json_number_value(arg) > 0 ? NULL : "a number above 0";
        break;
    case ARG_TYPE:
        want = is_type_argument(arg) ? NULL : "a type name or an array of distinct type names";
        break;
    case ARG_ARRAY: want = json_is_array(arg) ? NULL : "an array"; break;
    case ARG_BOOL: want = json_is_boolean(arg) ? NULL : "true or false"; break;
    case ARG_NAMES: want = is_name_list(arg) ? NULL : "an array of strings"; break;
    case ARG_NAME_LISTS: want = is_name_lists(arg) ? NULL : "an object of arrays of strings"; break;
    case ARG_ROOT_ID: want = json_is_string(arg) ? NULL : "a string"; break;
    case ARG_DIALECT:
        if (!json_is_string(arg) || (strcmp(json_string_value(arg), DIALECT) != 0 &&
                                     strcmp(json_string_value(arg), DIALECT "#") != 0))
            want = "\"" DIALECT "\" (only draft 2020-12 is supported)";
        break;
    default: break;
    }
    return want ? refuse(c, "\"%s\" must be %s", kw->name, want) : 0;
}

static int compile_schema(struct compiler *c, const json_t *schema, int depth);

static int compile_list(struct compiler *c, const json_t *arg, int depth)
{
    size_t i;
    const json_t *e;
    if (!json_is_array(arg) || json_array_size(arg) == 0)
        return refuse(c, "must be a non-empty array of schemas");
    json_array_foreach(arg, i, e) {
        char index[24];
        snprintf(index, sizeof index, "%zu", i);
        size_t old = where_push(c, index);
        int rc = compile_schema(c, e, depth + 1);
        where_pop(c, old);
        if (rc)
            return -1;
    }
    return 0;
}

static int compile_map(struct compiler *c, const json_t *arg, int patterns, int depth)
{
    const char *key;
    json_t *e;
    if (!json_is_object(arg))
        return refuse(c, "must be an object of schemas");
    json_object_foreach((json_t *)arg, key, e) {
        size_t old = where_push(c, key);
        int rc = (patterns && add_regex(c, key)) || compile_schema(c, e, depth + 1);
        where_pop(c, old);
        if (rc)
            return -1;
    }
    return 0;
}

static int compile_ref(struct compiler *c, const json_t *arg)
{
    char why[160], shown[64];
    if (!json_is_string(arg))
        return refuse(c, "\"$ref\" must be a string");
    const char *ref = json_string_value(arg);
    if (!resolve_ref(c->s->root, ref, why, sizeof why))
        return refuse(c, "\"$ref\": \"%s\" %s", clip(ref, strlen(ref), shown, sizeof shown), why);
    return 0;
}

static int compile_keyword(struct compiler *c, const struct keyword *kw, const json_t *arg, int depth)
{
    switch (kw->arg) {
    case ARG_SCHEMA: return compile_schema(c, arg, depth + 1);
    case ARG_SCHEMA_LIST: return compile_list(c, arg, depth);
    case ARG_SCHEMA_MAP: return compile_map(c, arg, 0, depth);
    case ARG_PATTERN_MAP: return compile_map(c, arg, 1, depth);
    case ARG_REF: return compile_ref(c, arg);
    case ARG_PATTERN:
        return json_is_string(arg) ? add_regex(c, json_string_value(arg))
                                   : refuse(c, "\"pattern\" must be a string");
    default: return check_argument(c, kw, arg);
    }
}

static int compile_schema(struct compiler *c, const json_t *schema, int depth)
{
    if (depth > MAX_DEPTH)
        return refuse(c, "schemas nest deeper than %d", MAX_DEPTH);
    if (json_is_boolean(schema))
        return 0;
    if (!json_is_object(schema))
        return refuse(c, "a schema must be an object or a boolean");
    const char *key;
    json_t *arg;
    json_object_foreach((json_t *)schema, key, arg) {
        const struct keyword *kw = find_keyword(key);
        char shown[64];
        if (!kw)
            return refuse(c, "unknown keyword \"%s\" (refused, so that a misspelt constraint "
                          "is never silently ignored)", clip(key, strlen(key), shown, sizeof shown));
        if (kw->arg == ARG_REFUSED)
            return refuse(c, "keyword \"%s\" is not supported: %s", key, kw->why);
        if (kw->arg == ARG_ROOT_ID && schema != c->s->root)
            return refuse(c, "\"$id\" is supported at the root only (an embedded resource would "
                          "change what \"#\" refers to)");
        size_t old = where_push(c, key);
        int rc = compile_keyword(c, kw, arg, depth);
        where_pop(c, old);
        if (rc)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------- checker */

struct checker {
    const struct gj_schema *s;
    char path[128];   /* dotted path of the value being checked; "" at the root */
    size_t len;
};

static const char *here(const struct checker *k)
{
    return k->len ? k->path : "params";
}

static size_t push_key(struct checker *k, const char *key)
{
    size_t old = k->len;
    if (old)
        k->len = append_whole(k->path, sizeof k->path, k->len, ".", 1);
    k->len = append_whole(k->path, sizeof k->path, k->len, key, strlen(key));
    return old;
}

static size_t push_index(struct checker *k, size_t i)
{
    size_t old = k->len;
    char index[32];
    int n = snprintf(index, sizeof index, "[%zu]", i);
    if (!old)
        k->len = append_whole(k->path, sizeof k->path, 0, "params", 6);
    k->len = append_whole(k->path, sizeof k->path, k->len, index, (size_t)n);
    return old;
}

static void pop(struct checker *k, size_t old)
{
    k->len = old;
    k->path[old] = 0;
}

static int failed_internally(struct checker *k, struct gj_error *err, const char *what)
{
    gj_error_set(err, k->path, "%s could not be checked: %s", here(k), what);
    if (err)
        err->status = 500;
    return -1;
}

static int check(struct checker *k, const json_t *schema, const json_t *v, int depth,
                 struct gj_error *err);

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

static int matches_type(const char *want, const json_t *v)
{
    if (strcmp(want, "number") == 0)
        return json_is_number(v);
    if (strcmp(want, "integer") == 0) {
        if (json_is_integer(v))
            return 1;
        /* 3.0 is an integer in JSON Schema's sense. */
        return json_is_real(v) && json_real_value(v) == trunc(json_real_value(v));
    }
    return strcmp(want, type_name(v)) == 0;
}

static int check_type(struct checker *k, const json_t *schema, const json_t *v, struct gj_error *err)
{
    const json_t *t = json_object_get(schema, "type");
    if (!t)
        return 0;
    if (json_is_string(t)) {
        const char *want = json_string_value(t);
        if (matches_type(want, v))
            return 0;
        return gj_error_set(err, k->path, "%s must be %s %s, not %s", here(k),
                            strchr("aeiou", want[0]) ? "an" : "a", want, type_name(v));
    }
    size_t i;
    const json_t *e;
    json_array_foreach(t, i, e)
        if (matches_type(json_string_value(e), v))
            return 0;
    char names[128];
    return gj_error_set(err, k->path, "%s must be one of the types %s, not %s", here(k),
                        describe_list(t, names, sizeof names), type_name(v));
}

static int check_value(struct checker *k, const json_t *schema, const json_t *v, struct gj_error *err)
{
    const json_t *c = json_object_get(schema, "const");
    char shown[64], allowed[256];
    if (c && !json_same(c, v)) {
        char *text = json_dumps(c, JSON_COMPACT | JSON_ENCODE_ANY);
        gj_error_set(err, k->path, "%s must be %s", here(k),
                     clip(text ? text : "?", text ? strlen(text) : 1, shown, sizeof shown));
        free(text);
        return -1;
    }
    const json_t *en = json_object_get(schema, "enum");
    if (!en)
        return 0;
    size_t i;
    const json_t *e;
    json_array_foreach(en, i, e)
        if (json_same(e, v))
            return 0;
    describe_list(en, allowed, sizeof allowed);
    if (json_is_string(v))
        return gj_error_set(err, k->path, "%s: '%s' is not one of: %s", here(k),
                            describe_value(v, shown, sizeof shown), allowed);
    return gj_error_set(err, k->path, "%s must be one of: %s", here(k), allowed);
}

/* The bounds: which comparisons of the value with the bound fail. */
static const struct {
    const char *keyword;
    int fails_below, fails_equal, fails_above;
    const char *phrase;
} bounds[] = {
    { "minimum", 1, 0, 0, "at least" },
    { "maximum", 0, 0, 1, "at most" },
    { "exclusiveMinimum", 1, 1, 0, "greater than" },
    { "exclusiveMaximum", 0, 1, 1, "less than" },
};

static int check_number(struct checker *k, const json_t *schema, const json_t *v, struct gj_error *err)
{
    if (!json_is_number(v))
        return 0;
    char limit[32], got[32];
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
        const json_t *b = json_object_get(schema, bounds[i].keyword);
        int cmp = b ? num_cmp(v, b) : 2;
        if ((cmp < 0 && bounds[i].fails_below) || (cmp == 0 && bounds[i].fails_equal) ||
            (cmp == 1 && bounds[i].fails_above))
            return gj_error_set(err, k->path, "%s must be %s %s (got %s)", here(k), bounds[i].phrase,
                                format_number(b, limit, sizeof limit), format_number(v, got, sizeof got));
    }
    const json_t *m = json_object_get(schema, "multipleOf");
    if (m && !is_multiple(v, m))
        return gj_error_set(err, k->path, "%s must be a multiple of %s (got %s)", here(k),
                            format_number(m, limit, sizeof limit), format_number(v, got, sizeof got));
    return 0;
}

static int check_string(struct checker *k, const json_t *schema, const json_t *v, struct gj_error *err)
{
    if (!json_is_string(v))
        return 0;
    json_int_t len = (json_int_t)utf8_length(json_string_value(v), json_string_length(v));
    const json_t *b;
    if ((b = json_object_get(schema, "minLength")) && len < count_of(b))
        return gj_error_set(err, k->path, "%s must have at least %lld characters", here(k),
                            (long long)count_of(b));
    if ((b = json_object_get(schema, "maxLength")) && len > count_of(b))
        return gj_error_set(err, k->path, "%s must have at most %lld characters", here(k),
                            (long long)count_of(b));
    const json_t *p = json_object_get(schema, "pattern");
    if (!p)
        return 0;
    int m = regex_match(k->s, json_string_value(p), json_string_value(v), json_string_length(v));
    if (m < 0)
        return failed_internally(k, err, "the pattern could not be evaluated");
    char shown[64];
    const char *src = json_string_value(p);
    return m ? 0 : gj_error_set(err, k->path, "%s must match the pattern %s", here(k),
                                clip(src, strlen(src), shown, sizeof shown));
}

static int check_required(struct checker *k, const json_t *schema, const json_t *v, struct gj_error *err)
{
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(schema, "required"), i, e) {
        if (!json_object_get(v, json_string_value(e))) {
            push_key(k, json_string_value(e));
            return gj_error_set(err, k->path, "%s is required", k->path);
        }
    }
    const char *key;
    json_t *names;
    json_object_foreach(json_object_get(schema, "dependentRequired"), key, names) {
        if (!json_object_get(v, key))
            continue;
        json_array_foreach(names, i, e) {
            if (!json_object_get(v, json_string_value(e))) {
                char given[64];
                clip(key, strlen(key), given, sizeof given);
                push_key(k, json_string_value(e));
                return gj_error_set(err, k->path, "%s is required when %s is given", k->path, given);
            }
        }
    }
    return 0;
}

static int check_property_count(struct checker *k, const json_t *schema, const json_t *v,
                                 struct gj_error *err)
{
    json_int_t n = (json_int_t)json_object_size(v);
    const json_t *b;
    if ((b = json_object_get(schema, "minProperties")) && n < count_of(b))
        return gj_error_set(err, k->path, "%s must have at least %lld fields", here(k),
                            (long long)count_of(b));
    if ((b = json_object_get(schema, "maxProperties")) && n > count_of(b))
        return gj_error_set(err, k->path, "%s must have at most %lld fields", here(k),
                            (long long)count_of(b));
    return 0;
}

static int check_property_names(struct checker *k, const json_t *schema, const json_t *v, int depth,
                                struct gj_error *err)
{
    const json_t *names = json_object_get(schema, "propertyNames");
    const char *key;
    json_t *val;
    if (!names)
        return 0;
    json_object_foreach((json_t *)v, key, val) {
        json_t *name = json_string(key);
        if (!name)
            return failed_internally(k, err, "out of memory");
        struct gj_error inner = { 0 };
        size_t old = push_key(k, key);
        int rc = check(k, names, name, depth + 1, &inner);
        json_decref(name);
        if (rc) {
            char shown[64], why[200];
            return gj_error_set(err, k->path, "the field name '%s' is not allowed (%s)",
                                clip(key, strlen(key), shown, sizeof shown),
                                clip(inner.message, strlen(inner.message), why, sizeof why));
        }
        pop(k, old);
    }
    return 0;
}

/* properties, then every matching patternProperties, else additionalProperties. */
static int check_property(struct checker *k, const json_t *schema, const char *key, const json_t *val,
                          int depth, struct gj_error *err)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *extra = json_object_get(schema, "additionalProperties");
    const json_t *own = json_object_get(props, key);
    int matched = own != NULL;
    if (own && check(k, own, val, depth + 1, err))
        return -1;
    const char *pattern;
    json_t *sub;
    json_object_foreach(json_object_get(schema, "patternProperties"), pattern, sub) {
        int m = regex_match(k->s, pattern, key, strlen(key));
        if (m < 0)
            return failed_internally(k, err, "a pattern could not be evaluated");
        matched |= m;
        if (m && check(k, sub, val, depth + 1, err))
            return -1;
    }
    if (matched || !extra)
        return 0;
    if (json_is_false(extra))
        return gj_error_set(err, k->path, "%s is not a known field", k->path);
    return check(k, extra, val, depth + 1, err);
}

static int check_object(struct checker *k, const json_t *schema, const json_t *v, int depth,
                        struct gj_error *err)
{
    if (!json_is_object(v))
        return 0;
    if (check_required(k, schema, v, err) || check_property_count(k, schema, v, err) ||
        check_property_names(k, schema, v, depth, err))
        return -1;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        size_t old = push_key(k, key);
        int rc = check_property(k, schema, key, val, depth, err);
        if (rc)
            return -1;
        pop(k, old);
    }
    return 0;
}

static int check_item_count(struct checker *k, const json_t *schema, const json_t *v,
                            struct gj_error *err)
{
    json_int_t n = (json_int_t)json_array_size(v);
    const json_t *b;
    size_t dup[2] = { 0, 0 };
    if ((b = json_object_get(schema, "minItems")) && n < count_of(b))
        return gj_error_set(err, k->path, "%s must have at least %lld items", here(k),
                            (long long)count_of(b));
    if ((b = json_object_get(schema, "maxItems")) && n > count_of(b))
        return gj_error_set(err, k->path, "%s must have at most %lld items", here(k),
                            (long long)count_of(b));
    if (n < 2 || !json_is_true(json_object_get(schema, "uniqueItems")))
        return 0;
    int rc = find_duplicate(v, dup);
    if (rc < 0)
        return failed_internally(k, err, "out of memory or nested too deeply");
    return rc ? gj_error_set(err, k->path, "%s must not repeat items: [%zu] and [%zu] are equal",
                             here(k), dup[0], dup[1]) : 0;
}

static int check_items(struct checker *k, const json_t *schema, const json_t *v, int depth,
                       struct gj_error *err)
{
    const json_t *prefix = json_object_get(schema, "prefixItems");
    const json_t *items = json_object_get(schema, "items");
    size_t n_prefix = json_array_size(prefix), n = json_array_size(v);
    if (json_is_false(items) && n > n_prefix)
        return gj_error_set(err, k->path, "%s must have at most %zu items", here(k), n_prefix);
    if (!items)
        n = n < n_prefix ? n : n_prefix;
    for (size_t i = 0; i < n; i++) {
        const json_t *sub = i < n_prefix ? json_array_get(prefix, i) : items;
        size_t old = push_index(k, i);
        int rc = check(k, sub, json_array_get(v, i), depth + 1, err);
        if (rc)
            return -1;
        pop(k, old);
    }
    return 0;
}

static int check_contains(struct checker *k, const json_t *schema, const json_t *v, int depth,
                          struct gj_error *err)
{
    const json_t *contains = json_object_get(schema, "contains");
    if (!contains)
        return 0;
    const json_t *lo = json_object_get(schema, "minContains");
    const json_t *hi = json_object_get(schema, "maxContains");
    json_int_t min = lo ? count_of(lo) : 1, max = hi ? count_of(hi) : -1, hits = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e) {
        if (max < 0 && hits >= min)
            break;   /* enough, and no upper bound to watch */
        size_t old = push_index(k, i);
        hits += check(k, contains, e, depth + 1, NULL) == 0;
        pop(k, old);
    }
    if (hits < min)
        return gj_error_set(err, k->path, "%s must contain at least %lld item(s) matching "
                            "\"contains\" (found %lld)", here(k), (long long)min, (long long)hits);
    if (max >= 0 && hits > max)
        return gj_error_set(err, k->path, "%s must contain at most %lld item(s) matching "
                            "\"contains\" (found %lld)", here(k), (long long)max, (long long)hits);
    return 0;
}

static int check_array(struct checker *k, const json_t *schema, const json_t *v, int depth,
                       struct gj_error *err)
{
    if (!json_is_array(v))
        return 0;
    if (check_item_count(k, schema, v, err) || check_items(k, schema, v, depth, err) ||
        check_contains(k, schema, v, depth, err))
        return -1;
    return 0;
}

/* No alternative matched: the only one's error, or the first one's as the reason. */
static int none_matched(struct checker *k, const json_t *alts, const struct gj_error *first,
                        struct gj_error *err)
{
    if (json_array_size(alts) == 1) {
        if (err)
            *err = *first;
        return -1;
    }
    char why[300];
    return gj_error_set(err, k->path, "%s matches none of the accepted forms (%s)", here(k),
                        clip(first->message, strlen(first->message), why, sizeof why));
}

static int check_any_of(struct checker *k, const json_t *schema, const json_t *v, int depth,
                        struct gj_error *err)
{
    const json_t *alts = json_object_get(schema, "anyOf");
    struct gj_error first = { 0 };
    size_t i;
    const json_t *e;
    if (!alts)
        return 0;
    json_array_foreach(alts, i, e)
        if (check(k, e, v, depth + 1, i == 0 ? &first : NULL) == 0)
            return 0;
    return none_matched(k, alts, &first, err);
}

static int check_one_of(struct checker *k, const json_t *schema, const json_t *v, int depth,
                        struct gj_error *err)
{
    const json_t *alts = json_object_get(schema, "oneOf");
    struct gj_error first = { 0 };
    size_t i, matched = 0, which = 0;
    const json_t *e;
    if (!alts)
        return 0;
    json_array_foreach(alts, i, e) {
        if (check(k, e, v, depth + 1, i == 0 ? &first : NULL) != 0)
            continue;
        if (matched++)
            return gj_error_set(err, k->path, "%s is ambiguous: it matches forms %zu and %zu of "
                                "oneOf", here(k), which + 1, i + 1);
        which = i;
    }
    return matched ? 0 : none_matched(k, alts, &first, err);
}

static int check_all_of(struct checker *k, const json_t *schema, const json_t *v, int depth,
                        struct gj_error *err)
{
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(schema, "allOf"), i, e)
        if (check(k, e, v, depth + 1, err))
            return -1;
    return 0;
}

static int check_ref(struct checker *k, const json_t *schema, const json_t *v, int depth,
                     struct gj_error *err)
{
    const json_t *ref = json_object_get(schema, "$ref");
    char why[160];
    if (!ref)
        return 0;
    const json_t *target = resolve_ref(k->s->root, json_string_value(ref), why, sizeof why);
    if (!target)
        return failed_internally(k, err, "a $ref does not resolve");
    return check(k, target, v, depth + 1, err);
}

/* not, if/then/else, dependentSchemas. */
static int check_conditions(struct checker *k, const json_t *schema, const json_t *v, int depth,
                            struct gj_error *err)
{
    const json_t *not = json_object_get(schema, "not");
    if (not && check(k, not, v, depth + 1, NULL) == 0)
        return gj_error_set(err, k->path, "%s must not match the schema under \"not\"", here(k));
    const json_t *cond = json_object_get(schema, "if");
    if (cond) {
        int holds = check(k, cond, v, depth + 1, NULL) == 0;
        const json_t *branch = json_object_get(schema, holds ? "then" : "else");
        if (branch && check(k, branch, v, depth + 1, err))
            return -1;
    }
    const char *key;
    json_t *sub;
    json_object_foreach(json_object_get(schema, "dependentSchemas"), key, sub)
        if (json_object_get(v, key) && check(k, sub, v, depth + 1, err))
            return -1;
    return 0;
}

/* The checks return as soon as one fails, leaving k->path wherever it was: check()
 * puts it back, so alternatives (anyOf, not, ...) start from the same place. */
static int check(struct checker *k, const json_t *schema, const json_t *v, int depth,
                 struct gj_error *err)
{
    if (depth > MAX_DEPTH)
        return gj_error_set(err, k->path, "%s is nested too deeply", here(k));
    if (json_is_true(schema))
        return 0;
    if (json_is_false(schema))
        return gj_error_set(err, k->path, "%s is not allowed", here(k));
    size_t old = k->len;
    int failed =
        check_type(k, schema, v, err) || check_value(k, schema, v, err) ||
        check_number(k, schema, v, err) || check_string(k, schema, v, err) ||
        check_object(k, schema, v, depth, err) || check_array(k, schema, v, depth, err) ||
        check_ref(k, schema, v, depth, err) || check_all_of(k, schema, v, depth, err) ||
        check_any_of(k, schema, v, depth, err) || check_one_of(k, schema, v, depth, err) ||
        check_conditions(k, schema, v, depth, err);
    pop(k, old);
    return failed ? -1 : 0;
}

/* ---------------------------------------------------------------- public API */

struct gj_schema *gj_schema_compile(const json_t *schema, struct gj_error *err)
{
    struct gj_schema *s = calloc(1, sizeof *s);
    if (!s) {
        gj_error_set(err, "", "out of memory");
        if (err)
            err->status = 500;
        return NULL;
    }
    s->root = json_incref((json_t *)schema);
    struct compiler c = { .s = s, .err = err, .where = "#", .where_len = 1 };
    if (!schema || compile_schema(&c, schema, 0)) {
        if (!schema)
            refuse(&c, "no schema");
        gj_schema_free(s);
        return NULL;
    }
    qsort(s->regexes, s->n_regexes, sizeof *s->regexes, regex_cmp);
    return s;
}

int gj_schema_validate(const struct gj_schema *schema, const json_t *value, struct gj_error *err)
{
    struct checker k = { .s = schema };
    if (check(&k, schema->root, value, 0, err) == 0)
        return 0;
    if (err && !err->status)
        err->status = 422;
    return -1;
}

void gj_schema_free(struct gj_schema *schema)
{
    if (!schema)
        return;
    for (size_t i = 0; i < schema->n_regexes; i++)
        regfree(&schema->regexes[i].re);
    free(schema->regexes);
    json_decref(schema->root);
    free(schema);
}

int gj_schema_check(const json_t *schema, const json_t *value, struct gj_error *err)
{
    struct gj_schema *s = gj_schema_compile(schema, err);
    if (!s) {
        if (err)
            err->field[0] = 0;   /* the fault is the schema's, not a field's */
        return -1;
    }
    int rc = gj_schema_validate(s, value, err);
    gj_schema_free(s);
    return rc;
}
