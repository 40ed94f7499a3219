/*
 * registry.c — every job kind and benchmark the binary knows.
 * A module adds its kind here with one line; nothing else lists kinds.
 */
#include <string.h>

#include "common/gj_kind.h"

extern const struct gj_kind gj_kind_noop;

static const struct gj_kind *const kinds[] = {
    &gj_kind_noop,
};

static const struct gj_bench benches[] = {
    { NULL, NULL, NULL },   /* keeps the array non-empty; never listed */
};

size_t gj_kind_count(void)
{
    return sizeof kinds / sizeof kinds[0];
}

const struct gj_kind *gj_kind_at(size_t i)
{
    return i < gj_kind_count() ? kinds[i] : NULL;
}

const struct gj_kind *gj_kind_find(const char *name)
{
    for (size_t i = 0; i < gj_kind_count(); i++)
        if (strcmp(kinds[i]->name, name) == 0)
            return kinds[i];
    return NULL;
}

size_t gj_bench_count(void)
{
    return sizeof benches / sizeof benches[0] - 1;
}

const struct gj_bench *gj_bench_at(size_t i)
{
    return i < gj_bench_count() ? &benches[i + 1] : NULL;
}
