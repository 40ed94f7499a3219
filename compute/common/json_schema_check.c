/*
 * json_schema_check.c — a value against a compiled schema: the first violation,
 * with the dotted path of the field ("geometry.detector.cols", "angles_deg[3]").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_schema_check.h"
#include "common/json_schema_value.h"

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
        k->len = gjs_append_whole(k->path, sizeof k->path, k->len, ".", 1);
    k->len = gjs_append_whole(k->path, sizeof k->path, k->len, key, strlen(key));
    return old;
}

static size_t push_index(struct checker *k, size_t i)
{
    size_t old = k->len;
    char index[32];
    int n = snprintf(index, sizeof index, "[%zu]", i);
    if (!old)
        k->len = gjs_append_whole(k->path, sizeof k->path, 0, "params", 6);
    k->len = gjs_append_whole(k->path, sizeof k->path, k->len, index, (size_t)n);
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
                        gjs_describe_list(t, names, sizeof names), type_name(v));
}

static int check_value(struct checker *k, const json_t *schema, const json_t *v, struct gj_error *err)
{
    const json_t *c = json_object_get(schema, "const");
    char shown[64], allowed[256];
    if (c && !gjs_same(c, v)) {
        char *text = json_dumps(c, JSON_COMPACT | JSON_ENCODE_ANY);
        gj_error_set(err, k->path, "%s must be %s", here(k),
                     gjs_clip(text ? text : "?", text ? strlen(text) : 1, shown, sizeof shown));
        free(text);
        return -1;
    }
    const json_t *en = json_object_get(schema, "enum");
    if (!en)
        return 0;
    size_t i;
    const json_t *e;
    json_array_foreach(en, i, e)
        if (gjs_same(e, v))
            return 0;
    gjs_describe_list(en, allowed, sizeof allowed);
    if (json_is_string(v))
        return gj_error_set(err, k->path, "%s: '%s' is not one of: %s", here(k),
                            gjs_describe_value(v, shown, sizeof shown), allowed);
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
        int cmp = b ? gjs_num_cmp(v, b) : 2;
        if ((cmp < 0 && bounds[i].fails_below) || (cmp == 0 && bounds[i].fails_equal) ||
            (cmp == 1 && bounds[i].fails_above))
            return gj_error_set(err, k->path, "%s must be %s %s (got %s)", here(k),
                                bounds[i].phrase, gjs_format_number(b, limit, sizeof limit),
                                gjs_format_number(v, got, sizeof got));
    }
    const json_t *m = json_object_get(schema, "multipleOf");
    if (m && !gjs_is_multiple(v, m))
        return gj_error_set(err, k->path, "%s must be a multiple of %s (got %s)", here(k),
                            gjs_format_number(m, limit, sizeof limit),
                            gjs_format_number(v, got, sizeof got));
    return 0;
}

/* min<what> and max<what> (Length, Items, Properties) against a size n. */
static int check_size(struct checker *k, const json_t *schema, json_int_t n, const char *what,
                      const char *unit, struct gj_error *err)
{
    char min[32], max[32];
    snprintf(min, sizeof min, "min%s", what);
    snprintf(max, sizeof max, "max%s", what);
    const json_t *lo = json_object_get(schema, min), *hi = json_object_get(schema, max);
    if (lo && n < gjs_count_of(lo))
        return gj_error_set(err, k->path, "%s must have at least %lld %s", here(k),
                            (long long)gjs_count_of(lo), unit);
    if (hi && n > gjs_count_of(hi))
        return gj_error_set(err, k->path, "%s must have at most %lld %s", here(k),
                            (long long)gjs_count_of(hi), unit);
    return 0;
}

static int check_string(struct checker *k, const json_t *schema, const json_t *v, struct gj_error *err)
{
    if (!json_is_string(v))
        return 0;
    json_int_t len = (json_int_t)gjs_utf8_length(json_string_value(v), json_string_length(v));
    if (check_size(k, schema, len, "Length", "characters", err))
        return -1;
    const json_t *p = json_object_get(schema, "pattern");
    if (!p)
        return 0;
    int m = gjs_regex_match(k->s, json_string_value(p), json_string_value(v), json_string_length(v));
    if (m < 0)
        return failed_internally(k, err, "the pattern could not be evaluated");
    char shown[64];
    const char *src = json_string_value(p);
    return m ? 0 : gj_error_set(err, k->path, "%s must match the pattern %s", here(k),
                                gjs_clip(src, strlen(src), shown, sizeof shown));
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
                gjs_clip(key, strlen(key), given, sizeof given);
                push_key(k, json_string_value(e));
                return gj_error_set(err, k->path, "%s is required when %s is given", k->path, given);
            }
        }
    }
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
                                gjs_clip(key, strlen(key), shown, sizeof shown),
                                gjs_clip(inner.message, strlen(inner.message), why, sizeof why));
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
        int m = gjs_regex_match(k->s, pattern, key, strlen(key));
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
    json_int_t n = (json_int_t)json_object_size(v);
    if (check_required(k, schema, v, err) || check_size(k, schema, n, "Properties", "fields", err) ||
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
    size_t dup[2] = { 0, 0 };
    if (check_size(k, schema, n, "Items", "items", err))
        return -1;
    if (n < 2 || !json_is_true(json_object_get(schema, "uniqueItems")))
        return 0;
    int rc = gjs_find_duplicate(v, dup);
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
    json_int_t min = lo ? gjs_count_of(lo) : 1, max = hi ? gjs_count_of(hi) : -1, hits = 0;
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
                        gjs_clip(first->message, strlen(first->message), why, sizeof why));
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
    if (!ref)
        return 0;
    const json_t *target = gjs_ref_target(k->s, json_string_value(ref));
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
    if (depth > GJS_MAX_DEPTH)
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

int gjs_check(const struct gj_schema *s, const json_t *value, struct gj_error *err)
{
    struct checker k = { .s = s };
    return check(&k, s->root, value, 0, err);
}
