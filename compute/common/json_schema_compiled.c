/*
 * json_schema_compiled.c — lookups in a compiled schema (json_schema_compiled.h).
 */
#include <stdint.h>
#include <stdlib.h>

#include "common/json_schema_compiled.h"
#include "common/json_schema_regex.h"

/* Both tables start with the source pointer, so one comparison orders them. */
static int source_cmp(const void *pa, const void *pb)
{
    uintptr_t a = (uintptr_t)*(const char *const *)pa;
    uintptr_t b = (uintptr_t)*(const char *const *)pb;
    return a < b ? -1 : a > b;
}

void gjs_compiled_seal(struct gj_schema *s)
{
    if (s->n_regexes)
        qsort(s->regexes, s->n_regexes, sizeof *s->regexes, source_cmp);
    if (s->n_refs)
        qsort(s->refs, s->n_refs, sizeof *s->refs, source_cmp);
}

int gjs_regex_match(const struct gj_schema *s, const char *source, const char *str, size_t len)
{
    struct gjs_regex key = { .source = source };
    if (!s->n_regexes)
        return -1;
    const struct gjs_regex *r = bsearch(&key, s->regexes, s->n_regexes, sizeof key, source_cmp);
    return r ? gj_regex_search(&r->re, str, len) : -1;
}

const json_t *gjs_ref_target(const struct gj_schema *s, const char *source)
{
    struct gjs_ref key = { .source = source };
    if (!s->n_refs)
        return NULL;
    const struct gjs_ref *r = bsearch(&key, s->refs, s->n_refs, sizeof key, source_cmp);
    return r ? r->target : NULL;
}
