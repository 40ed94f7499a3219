/*
 * json_schema_internal.h — what the parts of the JSON Schema validator share:
 * the compiled form and $ref resolution (json_schema.c), the walk of a value
 * (json_schema_check.c), and JSON values as JSON Schema sees them
 * (json_schema_value.c). Private to those files.
 */
#ifndef GJ_JSON_SCHEMA_INTERNAL_H
#define GJ_JSON_SCHEMA_INTERNAL_H

#include <regex.h>
#include <stddef.h>
#include <jansson.h>

#include "common/json_schema.h"

#define GJS_MAX_DEPTH 64   /* schemas nested in a schema; schemas applied along one value */

struct gjs_regex {
    const char *source;   /* the pattern's text inside the schema: its identity */
    regex_t re;
};

struct gj_schema {
    json_t *root;
    struct gjs_regex *regexes;   /* sorted by source address once compiled */
    size_t n_regexes, cap_regexes;
};

/* json_schema.c */
/* The schema ref names ("#", "#/a/b", or the root's $id followed by either), or NULL
 * with why. Every step goes through a keyword that holds schemas. */
const json_t *gjs_resolve_ref(const json_t *root, const char *ref, char *why, size_t cap);
/* 1 when the compiled pattern whose text is source matches str, 0 when not, -1 on failure. */
int gjs_regex_match(const struct gj_schema *s, const char *source, const char *str, size_t len);

/* json_schema_check.c: 0, or -1 with err (status left for the caller). */
int gjs_check(const struct gj_schema *s, const json_t *value, struct gj_error *err);

/* json_schema_value.c */
int gjs_num_cmp(const json_t *a, const json_t *b);      /* -1, 0, 1; exact */
int gjs_is_multiple(const json_t *v, const json_t *m);  /* m > 0 */
json_int_t gjs_count_of(const json_t *v);               /* a count keyword's value */
int gjs_same(const json_t *a, const json_t *b);         /* JSON Schema's equality */
/* 1 with dup set when two items of arr are equal, 0 when none are, -1 out of memory. */
int gjs_find_duplicate(const json_t *arr, size_t dup[2]);
size_t gjs_utf8_length(const char *s, size_t n);        /* code points */
size_t gjs_utf8_trim(const char *buf, size_t len);
size_t gjs_append_whole(char *buf, size_t cap, size_t len, const char *text, size_t n);
const char *gjs_clip(const char *s, size_t n, char *buf, size_t cap);
const char *gjs_format_number(const json_t *v, char *buf, size_t cap);
const char *gjs_describe_value(const json_t *v, char *buf, size_t cap);
const char *gjs_describe_list(const json_t *list, char *out, size_t cap);

#endif
