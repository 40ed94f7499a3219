/*
 * json_schema.c — JSON Schema draft 2020-12 (json_schema.h lists the keywords).
 * Compiling walks the schema once: every keyword must be known and well formed,
 * patterns are compiled, $refs must name a schema in this document and are resolved.
 * json_schema_check.c then walks values against the result (json_schema_compiled.h).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_schema.h"
#include "common/json_schema_check.h"
#include "common/json_schema_compiled.h"
#include "common/json_schema_regex.h"
#include "common/json_schema_value.h"

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

/* ------------------------------------------------------------------- $refs */

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

/* The schema ref names ("#", "#/a/b", or the root's $id followed by either), or NULL
 * with why. Every step goes through a keyword that holds schemas, so the target is one
 * the compiler checks. */
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
        what[gjs_utf8_trim(what, sizeof what - 1)] = 0;
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
    c->where_len = gjs_append_whole(c->where, sizeof c->where, old, piece, gjs_utf8_trim(piece, n));
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
        struct gjs_regex *grown = realloc(s->regexes, cap * sizeof *grown);
        if (!grown)
            return refuse(c, "out of memory");
        s->regexes = grown;
        s->cap_regexes = cap;
    }
    char why[200], shown[64];
    struct gjs_regex *r = &s->regexes[s->n_regexes];
    if (gj_regex_compile(&r->re, source, why, sizeof why))
        return refuse(c, "the pattern \"%s\" is refused: %s",
                      gjs_clip(source, strlen(source), shown, sizeof shown), why);
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
            if (gjs_same(e, json_array_get(arg, j)))
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
    const json_t *target = resolve_ref(c->s->root, ref, why, sizeof why);
    if (!target)
        return refuse(c, "\"$ref\": \"%s\" %s", gjs_clip(ref, strlen(ref), shown, sizeof shown), why);
    struct gj_schema *s = c->s;
    if (s->n_refs == s->cap_refs) {
        size_t cap = s->cap_refs ? 2 * s->cap_refs : 8;
        struct gjs_ref *grown = realloc(s->refs, cap * sizeof *grown);
        if (!grown)
            return refuse(c, "out of memory");
        s->refs = grown;
        s->cap_refs = cap;
    }
    s->refs[s->n_refs++] = (struct gjs_ref){ .source = ref, .target = target };
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
    if (depth > GJS_MAX_DEPTH)
        return refuse(c, "schemas nest deeper than %d", GJS_MAX_DEPTH);
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
                          "is never silently ignored)", gjs_clip(key, strlen(key), shown, sizeof shown));
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
    gjs_compiled_seal(s);
    return s;
}

int gj_schema_validate(const struct gj_schema *schema, const json_t *value, struct gj_error *err)
{
    if (gjs_check(schema, value, err) == 0)
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
    free(schema->refs);
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
