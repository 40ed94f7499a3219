/*
 * model_config_fields.c — the readers of config fields (model_config_internal.h): each
 * error names the field and says what it must be.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/serving/model_config_internal.h"

#define CFG "config.json"
#define FAIL CFG_FAIL
#define get_str gj_cfg_get_str

int gj_cfg_check_keys(const json_t *obj, const char *path, const char *const *allowed,
                      struct gj_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        int ok = 0;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (!ok) {
            char p[128];
            snprintf(p, sizeof p, "%s%s%.60s", path, path[0] ? "." : "", key);
            FAIL(p, CFG ": unknown key '%.60s' in %s", key, path[0] ? path : "the top level");
        }
    }
    return 0;
}

/* A JSON integer in [lo, hi] (a number with no fraction is accepted too); strings64: a
 * string of one too (Triton's JSON writes 64-bit integers as strings). */
static int get_int_of(const json_t *v, const char *path, int64_t lo, int64_t hi, int64_t *out,
                      int strings64, struct gj_error *err)
{
    double d;
    char *end = NULL;
    const char *sv = json_is_string(v) ? json_string_value(v) : NULL;
    if (json_is_integer(v))
        d = (double)json_integer_value(v);
    else if (json_is_real(v))
        d = json_real_value(v);
    else if (strings64 && sv && sv[0] && strlen(sv) < 20 && (d = (double)strtoll(sv, &end, 10), *end == '\0'))
        ;   /* Triton's JSON: an int64 as a string */
    else
        FAIL(path, CFG ": %s must be an integer", path);
    if (d != floor(d) || d < (double)lo || d > (double)hi)
        FAIL(path, CFG ": %s must be an integer from %lld to %lld", path, (long long)lo,
             (long long)hi);
    *out = (int64_t)d;
    return 0;
}

int gj_cfg_get_bool(const json_t *v, const char *path, int *out, struct gj_error *err)
{
    if (!json_is_boolean(v))
        FAIL(path, CFG ": %s must be true or false", path);
    *out = json_is_true(v);
    return 0;
}

int gj_cfg_get_int(const json_t *v, const char *path, int64_t lo, int64_t hi, int64_t *out,
                   struct gj_error *err)
{
    return get_int_of(v, path, lo, hi, out, 0, err);
}

int gj_cfg_get_int64(const json_t *v, const char *path, int64_t lo, int64_t hi, int64_t *out,
                     struct gj_error *err)
{
    return get_int_of(v, path, lo, hi, out, 1, err);
}

int gj_cfg_get_str(const json_t *v, const char *path, char *buf, size_t buflen,
                   struct gj_error *err)
{
    if (!json_is_string(v) || json_string_length(v) == 0)
        FAIL(path, CFG ": %s must be a non-empty string", path);
    if (json_string_length(v) >= buflen)
        FAIL(path, CFG ": %s is longer than %zu bytes", path, buflen - 1);
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v))
        FAIL(path, CFG ": %s contains a NUL character", path);
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20)
            FAIL(path, CFG ": %s contains a control character", path);
    memcpy(buf, s, json_string_length(v) + 1);
    return 0;
}

