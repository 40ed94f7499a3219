#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/json_schema.h"

#define MAX_DEPTH 64

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
        return json_is_real(v) && json_real_value(v) == floor(json_real_value(v));
    }
    return strcmp(want, type_name(v)) == 0;
}

static void child_path(char *out, size_t n, const char *path, const char *key)
{
    if (path[0])
        snprintf(out, n, "%s.%s", path, key);
    else
        snprintf(out, n, "%s", key);
}

static int check(const json_t *schema, const json_t *v, const char *path, int depth,
                 struct gj_error *err);

static int check_type(const json_t *schema, const json_t *v, const char *path, struct gj_error *err)
{
    const json_t *t = json_object_get(schema, "type");
    if (!t)
        return 0;
    if (json_is_string(t)) {
        if (matches_type(json_string_value(t), v))
            return 0;
        return gj_error_set(err, path, "%s must be %s %s, not %s", path[0] ? path : "params",
                            strchr("aeiou", json_string_value(t)[0]) ? "an" : "a",
                            json_string_value(t), type_name(v));
    }
    size_t i;
    const json_t *e;
    json_array_foreach(t, i, e)
        if (json_is_string(e) && matches_type(json_string_value(e), v))
            return 0;
    return gj_error_set(err, path, "%s has the wrong type (%s)", path[0] ? path : "params",
                        type_name(v));
}

static int check_number(const json_t *schema, const json_t *v, const char *path, struct gj_error *err)
{
    if (!json_is_number(v))
        return 0;
    double x = json_number_value(v);
    const char *p = path[0] ? path : "params";
    const json_t *b;
    if (!isfinite(x))
        return gj_error_set(err, path, "%s must be a finite number", p);
    if ((b = json_object_get(schema, "minimum")) && x < json_number_value(b))
        return gj_error_set(err, path, "%s must be at least %g (got %g)", p, json_number_value(b), x);
    if ((b = json_object_get(schema, "maximum")) && x > json_number_value(b))
        return gj_error_set(err, path, "%s must be at most %g (got %g)", p, json_number_value(b), x);
    if ((b = json_object_get(schema, "exclusiveMinimum")) && x <= json_number_value(b))
        return gj_error_set(err, path, "%s must be greater than %g (got %g)", p, json_number_value(b), x);
    if ((b = json_object_get(schema, "exclusiveMaximum")) && x >= json_number_value(b))
        return gj_error_set(err, path, "%s must be less than %g (got %g)", p, json_number_value(b), x);
    return 0;
}

static int check_string(const json_t *schema, const json_t *v, const char *path, struct gj_error *err)
{
    if (!json_is_string(v))
        return 0;
    size_t len = json_string_length(v);
    const json_t *b;
    const char *p = path[0] ? path : "params";
    if ((b = json_object_get(schema, "minLength")) && (json_int_t)len < json_integer_value(b))
        return gj_error_set(err, path, "%s must have at least %lld characters", p,
                            (long long)json_integer_value(b));
    if ((b = json_object_get(schema, "maxLength")) && (json_int_t)len > json_integer_value(b))
        return gj_error_set(err, path, "%s must have at most %lld characters", p,
                            (long long)json_integer_value(b));
    return 0;
}

static int check_enum(const json_t *schema, const json_t *v, const char *path, struct gj_error *err)
{
    const json_t *c = json_object_get(schema, "const");
    const char *p = path[0] ? path : "params";
    if (c && !json_equal(c, v))
        return gj_error_set(err, path, "%s has an unexpected value", p);
    const json_t *en = json_object_get(schema, "enum");
    if (!en)
        return 0;
    size_t i;
    const json_t *e;
    json_array_foreach(en, i, e)
        if (json_equal(e, v))
            return 0;
    char allowed[256] = "";
    size_t used = 0;
    json_array_foreach(en, i, e) {
        if (!json_is_string(e))
            continue;
        int n = snprintf(allowed + used, sizeof allowed - used, "%s%s", used ? ", " : "",
                         json_string_value(e));
        if (n < 0 || (size_t)n >= sizeof allowed - used)
            break;
        used += (size_t)n;
    }
    if (json_is_string(v))
        return gj_error_set(err, path, "%s: '%s' is not one of: %s", p, json_string_value(v), allowed);
    return gj_error_set(err, path, "%s must be one of: %s", p, allowed);
}

static int check_object(const json_t *schema, const json_t *v, const char *path, int depth,
                        struct gj_error *err)
{
    if (!json_is_object(v))
        return 0;
    char sub[256];
    const json_t *req = json_object_get(schema, "required");
    size_t i;
    const json_t *e;
    json_array_foreach(req, i, e) {
        if (json_is_string(e) && !json_object_get(v, json_string_value(e))) {
            child_path(sub, sizeof sub, path, json_string_value(e));
            return gj_error_set(err, sub, "%s is required", sub);
        }
    }
    const json_t *props = json_object_get(schema, "properties");
    const json_t *extra = json_object_get(schema, "additionalProperties");
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        child_path(sub, sizeof sub, path, key);
        const json_t *ps = props ? json_object_get(props, key) : NULL;
        if (ps) {
            if (check(ps, val, sub, depth + 1, err))
                return -1;
        } else if (json_is_false(extra)) {
            return gj_error_set(err, sub, "%s is not a known field", sub);
        } else if (json_is_object(extra)) {
            if (check(extra, val, sub, depth + 1, err))
                return -1;
        }
    }
    return 0;
}

static int check_array(const json_t *schema, const json_t *v, const char *path, int depth,
                       struct gj_error *err)
{
    if (!json_is_array(v))
        return 0;
    const char *p = path[0] ? path : "params";
    size_t n = json_array_size(v);
    const json_t *b;
    if ((b = json_object_get(schema, "minItems")) && (json_int_t)n < json_integer_value(b))
        return gj_error_set(err, path, "%s must have at least %lld items", p,
                            (long long)json_integer_value(b));
    if ((b = json_object_get(schema, "maxItems")) && (json_int_t)n > json_integer_value(b))
        return gj_error_set(err, path, "%s must have at most %lld items", p,
                            (long long)json_integer_value(b));
    const json_t *items = json_object_get(schema, "items");
    if (!json_is_object(items))
        return 0;
    char sub[256];
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e) {
        snprintf(sub, sizeof sub, "%s[%zu]", p, i);
        if (check(items, e, sub, depth + 1, err))
            return -1;
    }
    return 0;
}

static int check_alternatives(const json_t *schema, const json_t *v, const char *path, int depth,
                              struct gj_error *err)
{
    const char *p = path[0] ? path : "params";
    const json_t *alts = json_object_get(schema, "anyOf");
    int exactly_one = 0;
    if (!alts) {
        alts = json_object_get(schema, "oneOf");
        exactly_one = 1;
    }
    if (!alts)
        return 0;
    size_t i, matched = 0;
    const json_t *e;
    struct gj_error first = { 0 };
    json_array_foreach(alts, i, e) {
        struct gj_error tmp = { 0 };
        if (check(e, v, path, depth + 1, &tmp) == 0)
            matched++;
        else if (!first.message[0])
            first = tmp;
    }
    if (matched == 0) {
        if (json_array_size(alts) == 1 && err)
            return *err = first, -1;
        return gj_error_set(err, path, "%s matches none of the accepted forms (%s)", p, first.message);
    }
    if (exactly_one && matched > 1)
        return gj_error_set(err, path, "%s is ambiguous: it matches several forms", p);
    return 0;
}

static int check(const json_t *schema, const json_t *v, const char *path, int depth,
                 struct gj_error *err)
{
    if (depth > MAX_DEPTH)
        return gj_error_set(err, path, "%s is nested too deeply", path[0] ? path : "params");
    if (!json_is_object(schema))
        return 0;
    if (check_type(schema, v, path, err) || check_enum(schema, v, path, err) ||
        check_number(schema, v, path, err) || check_string(schema, v, path, err) ||
        check_object(schema, v, path, depth, err) || check_array(schema, v, path, depth, err) ||
        check_alternatives(schema, v, path, depth, err))
        return -1;
    return 0;
}

int gj_schema_check(const json_t *schema, const json_t *value, struct gj_error *err)
{
    if (check(schema, value, "", 0, err)) {
        if (err && !err->status)
            err->status = 422;
        return -1;
    }
    return 0;
}
