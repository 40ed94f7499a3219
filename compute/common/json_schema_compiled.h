/*
 * json_schema_compiled.h — a compiled schema: the schema itself, its patterns
 * compiled, its $refs resolved. json_schema.c builds it; json_schema_check.c
 * only looks things up in it, so the checker never calls back into the compiler.
 * Private to the validator's files.
 */
#ifndef GJ_JSON_SCHEMA_COMPILED_H
#define GJ_JSON_SCHEMA_COMPILED_H

#include <regex.h>
#include <stddef.h>
#include <jansson.h>

#define GJS_MAX_DEPTH 64   /* schemas nested in a schema; schemas applied along one value */

/* Patterns and references are keyed by the address of their text inside the schema:
 * the same string node is the same pattern, whatever its neighbours say. */
struct gjs_regex {
    const char *source;
    regex_t re;
};

struct gjs_ref {
    const char *source;     /* the $ref's value */
    const json_t *target;   /* the schema it names, inside root */
};

struct gj_schema {
    json_t *root;
    struct gjs_regex *regexes;   /* sorted by source once compiled */
    size_t n_regexes, cap_regexes;
    struct gjs_ref *refs;        /* sorted by source once compiled */
    size_t n_refs, cap_refs;
};

/* Sorts the lookup tables; called once, when compiling is done. */
void gjs_compiled_seal(struct gj_schema *s);

/* 1 when the compiled pattern whose text is source matches str, 0 when not, -1 on failure. */
int gjs_regex_match(const struct gj_schema *s, const char *source, const char *str, size_t len);

/* The schema the $ref whose value is source names; NULL for one never compiled. */
const json_t *gjs_ref_target(const struct gj_schema *s, const char *source);

#endif
