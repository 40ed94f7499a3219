/*
 * routes_oip_trace.c — Triton's trace extension on /v2: the trace settings, global and per
 * model, with Triton's shapes and checks:
 *
 *   GET|POST /v2/trace/setting                 admin: the global settings
 *   GET|POST /v2/models/{name}/trace/setting   admin: a model's (a setting it does not set
 *                                              is the global one; POST {} removes them all)
 *
 *   {"trace_level": ["OFF"] | ["TIMESTAMPS", "TENSORS"], "trace_rate": "1000",
 *    "trace_count": "-1", "log_frequency": "0", "trace_file": "", "trace_mode": "triton"}
 *
 * Values are strings (trace_level an array of them), as Triton's; null clears a model's
 * setting. The settings are held in this process's memory and reported. What is traced:
 * nothing is written as a trace here (no trace file exists, and as Triton's trace_file
 * cannot be set over the network); the timings a trace would carry are in
 * /v2/models/stats and /metrics.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/http/http_server.h"
#include "service/infer/infer.h"
#include "service/infer/oip.h"

#define LEVEL_TIMESTAMPS 1
#define LEVEL_TENSORS 2
#define MAX_MODEL_SETTINGS 256

enum { S_LEVEL = 1, S_RATE = 2, S_COUNT = 4, S_FREQUENCY = 8 };

struct trace_setting {
    unsigned set;          /* S_*: the settings a model sets itself (the global sets all) */
    int level;             /* LEVEL_* bits; 0: OFF */
    long long rate;        /* 0..UINT32_MAX */
    long long count;       /* -1..INT32_MAX; -1: no limit */
    long long frequency;   /* 0..UINT32_MAX */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct trace_setting g_global = { S_LEVEL | S_RATE | S_COUNT | S_FREQUENCY, 0, 1000, -1, 0 };
static struct {
    char name[GJ_MODEL_NAME_MAX];
    struct trace_setting s;
} g_models[MAX_MODEL_SETTINGS];
static size_t g_n_models;

/* The model's slot (created when create); NULL when none. Under g_lock. */
static struct trace_setting *model_slot(const char *name, int create)
{
    for (size_t i = 0; i < g_n_models; i++)
        if (strcmp(g_models[i].name, name) == 0)
            return &g_models[i].s;
    if (!create || g_n_models == MAX_MODEL_SETTINGS)
        return NULL;
    snprintf(g_models[g_n_models].name, sizeof g_models[g_n_models].name, "%.127s", name);
    memset(&g_models[g_n_models].s, 0, sizeof g_models[g_n_models].s);
    return &g_models[g_n_models++].s;
}

/* The effective settings of a model (NULL: the global ones). Under g_lock. */
static struct trace_setting effective(const char *model)
{
    struct trace_setting e = g_global;
    const struct trace_setting *m = model ? model_slot(model, 0) : NULL;
    if (m) {
        e.level = m->set & S_LEVEL ? m->level : e.level;
        e.rate = m->set & S_RATE ? m->rate : e.rate;
        e.count = m->set & S_COUNT ? m->count : e.count;
        e.frequency = m->set & S_FREQUENCY ? m->frequency : e.frequency;
    }
    return e;
}

static json_t *setting_json(const struct trace_setting *s)
{
    json_t *level = json_array();
    if (!s->level)
        json_array_append_new(level, json_string("OFF"));
    if (s->level & LEVEL_TIMESTAMPS)
        json_array_append_new(level, json_string("TIMESTAMPS"));
    if (s->level & LEVEL_TENSORS)
        json_array_append_new(level, json_string("TENSORS"));
    char rate[24], count[24], frequency[24];
    snprintf(rate, sizeof rate, "%lld", s->rate);
    snprintf(count, sizeof count, "%lld", s->count);
    snprintf(frequency, sizeof frequency, "%lld", s->frequency);
    return json_pack("{s:o, s:s, s:s, s:s, s:s, s:s}", "trace_level", level, "trace_rate", rate, "trace_count",
                     count, "log_frequency", frequency, "trace_file", "", "trace_mode", "triton");
}

/* trace_level's array into *level. 0, or -1 refused (err). */
static int parse_level(struct gj_error *err, json_t *v, int *level)
{
    if (!json_is_array(v)) {
        oip_refuse(err, 400, "'trace_level' is an array of strings: [\"OFF\"], [\"TIMESTAMPS\"], [\"TENSORS\"]");
        return -1;
    }
    *level = 0;
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        const char *s = json_string_value(e);
        if (s && strcmp(s, "OFF") == 0 && json_array_size(v) == 1)
            continue;
        if (s && strcmp(s, "OFF") == 0) {
            oip_refuse(err, 400, "Expect only one trace level 'OFF' is specified");
            return -1;
        }
        if (s && strcmp(s, "TIMESTAMPS") == 0) {
            *level |= LEVEL_TIMESTAMPS;
        } else if (s && strcmp(s, "TENSORS") == 0) {
            *level |= LEVEL_TENSORS;
        } else {
            oip_refuse(err, 400, "unknown trace level '%s': the levels are OFF, TIMESTAMPS and TENSORS",
                      s ? s : "(not a string)");
            return -1;
        }
    }
    return 0;
}

/* A number setting given as a string (Triton's form) into *out, within [lo, hi]. 0, or
 * -1 refused (err) with Triton's message. */
static int parse_number(struct gj_error *err, const char *key, json_t *v, long long lo, long long hi,
                        long long *out)
{
    const char *s = json_string_value(v);
    if (!s) {
        oip_refuse(err, 400, "'%s' is a string, as Triton's (e.g. \"1000\")", key);
        return -1;
    }
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end) {
        oip_refuse(err, 400, "Unable to parse '%s', got: %s", key, s);
        return -1;
    }
    if (errno == ERANGE || x < lo || x > hi) {
        oip_refuse(err, 400, "Unable to parse '%s', value is out of range [ %lld, %lld ], got: %s", key, lo, hi, s);
        return -1;
    }
    *out = x;
    return 0;
}

/* One setting of a POST into s (null: cleared, for a model). 0, or -1 refused (err). */
static int apply_setting(struct gj_error *err, const char *key, json_t *v, struct trace_setting *s)
{
    static const struct {
        const char *key;
        unsigned bit;
        long long lo, hi;
        size_t off;
    } numbers[] = {
        { "trace_rate", S_RATE, 0, UINT32_MAX, offsetof(struct trace_setting, rate) },
        { "trace_count", S_COUNT, -1, INT32_MAX, offsetof(struct trace_setting, count) },
        { "log_frequency", S_FREQUENCY, 0, UINT32_MAX, offsetof(struct trace_setting, frequency) },
    };
    if (strcmp(key, "trace_file") == 0) {
        oip_refuse(err, 501, "trace file location can not be updated through network protocol");
        return -1;
    }
    if (strcmp(key, "trace_level") == 0) {
        s->set = json_is_null(v) ? s->set & ~(unsigned)S_LEVEL : s->set | S_LEVEL;
        return json_is_null(v) ? 0 : parse_level(err, v, &s->level);
    }
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        if (strcmp(key, numbers[i].key) != 0)
            continue;
        s->set = json_is_null(v) ? s->set & ~numbers[i].bit : s->set | numbers[i].bit;
        return json_is_null(v) ? 0
                               : parse_number(err, key, v, numbers[i].lo, numbers[i].hi,
                                              (long long *)((char *)s + numbers[i].off));
    }
    oip_refuse(err, 400, "unknown trace setting '%s': the settings are trace_level, trace_rate, trace_count, "
              "log_frequency and trace_file", key);
    return -1;
}

/* The POST's settings applied to a copy of *s, stored only when all of them are valid.
 * 0, or -1 refused (err). */
static int update(struct gj_error *err, const json_t *body, struct trace_setting *s, int global)
{
    struct trace_setting next = *s;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v) {
        if (global && json_is_null(v)) {
            oip_refuse(err, 400, "'%s': a global trace setting cannot be cleared (null), only a model's", key);
            return -1;
        }
        if (apply_setting(err, key, v, &next) != 0)
            return -1;
    }
    if (!global && json_object_size(body) == 0)
        next.set = 0;   /* a model's POST without settings removes its own */
    *s = next;
    return 0;
}

json_t *oip_trace_setting(const char *model, const json_t *body, struct gj_error *err)
{
    gj_model_repo *repo = gj_infer_repo();
    if (model && (!repo || !gj_model_name_ok(model) || !gj_model_repo_has(repo, model))) {
        oip_refuse(err, 400, "Request for unknown model : %s", model);
        return NULL;
    }
    pthread_mutex_lock(&g_lock);
    struct trace_setting *s = body ? (model ? model_slot(model, 1) : &g_global) : NULL;
    int rc = 0;
    if (body && !s)
        rc = oip_refuse(err, 503, "trace settings are held for %d models at most", MAX_MODEL_SETTINGS);
    else if (body)
        rc = update(err, body, s, model == NULL);
    struct trace_setting e = effective(model);
    pthread_mutex_unlock(&g_lock);
    return rc == 0 ? setting_json(&e) : NULL;
}

static void trace_setting(struct gj_req *r)
{
    int post = strcmp(r->method, "POST") == 0;
    if (post && !json_is_object(r->json)) {
        oip_error(r, 400, "the trace settings are a JSON object, e.g. {\"trace_rate\": \"100\"}");
        return;
    }
    struct gj_error err = { 0 };
    json_t *o = oip_trace_setting(r->n_params ? r->params[0] : NULL, post ? r->json : NULL, &err);
    if (o)
        gj_respond_json(r, 200, o);
    else
        oip_error(r, err.status, "%s", err.message);
}

static const struct gj_route trace_routes[] = {
    { "GET", "/v2/trace/setting", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, trace_setting, NULL },
    { "POST", "/v2/trace/setting", GJ_AUTH_ADMIN, GJ_BODY_JSON, NULL, NULL, trace_setting, NULL },
    { "GET", "/v2/models/{name}/trace/setting", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, trace_setting, NULL },
    { "POST", "/v2/models/{name}/trace/setting", GJ_AUTH_ADMIN, GJ_BODY_JSON, NULL, NULL, trace_setting, NULL },
};
const struct gj_route_table gj_infer_routes_oip_trace = { trace_routes, sizeof trace_routes / sizeof trace_routes[0] };
