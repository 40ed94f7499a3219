/*
 * reproduction.c — a rerun compared with its original (reproduction.h). The comparison is
 * made when asked, from the records: nothing to keep in step when either changes.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gj_kind.h"
#include "service/jobs/provenance_store.h"
#include "service/jobs/reproduction.h"

json_t *gj_provenance_last_environment(const json_t *record)
{
    json_t *attempts = json_object_get(record, "attempts");
    size_t n = json_array_size(attempts);
    return n ? json_object_get(json_array_get(attempts, n - 1), "environment") : NULL;
}

static int diff_into(const json_t *a, const json_t *b, const char *path, json_t *out);

/* Keys of a and of b (once each) compared under path. */
static int diff_objects(const json_t *a, const json_t *b, const char *path, json_t *out)
{
    const char *key;
    json_t *v;
    char sub[512];
    json_object_foreach((json_t *)a, key, v) {
        snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", key);
        if (diff_into(v, json_object_get(b, key), sub, out))
            return -1;
    }
    json_object_foreach((json_t *)b, key, v) {
        if (json_object_get(a, key))
            continue;
        snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", key);
        if (diff_into(NULL, v, sub, out))
            return -1;
    }
    return 0;
}

static int diff_into(const json_t *a, const json_t *b, const char *path, json_t *out)
{
    if (json_is_object(a) && json_is_object(b))
        return diff_objects(a, b, path, out);
    if (a && b && json_equal((json_t *)a, (json_t *)b))
        return 0;
    json_t *d = json_pack("{s:s, s:O?, s:O?}", "path", path, "original", a, "rerun", b);
    return d ? json_array_append_new(out, d) : -1;
}

json_t *gj_environment_diff(const json_t *original, const json_t *rerun)
{
    json_t *out = json_array();
    if (out && diff_into(original, rerun, "", out)) {
        json_decref(out);
        return NULL;
    }
    return out;
}

static int is_run_record(const struct gj_kind *kind, const char *name)
{
    for (const char *const *r = kind ? kind->run_record_outputs : NULL; r && *r; r++)
        if (fnmatch(*r, name, 0) == 0)
            return 1;
    return 0;
}

static const char *output_digest(const json_t *record, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(record, "outputs"), i, o)
        if (strcmp(json_string_value(json_object_get(o, "name")), name) == 0)
            return json_string_value(json_object_get(o, "sha256"));
    return NULL;
}

/* One output name of either job: compared, or not (a run record). 0, or -1. */
static int compare_output(const struct gj_kind *kind, const char *name, const json_t *orig, const json_t *rerun,
                          json_t *rep)
{
    if (is_run_record(kind, name))
        return json_array_append_new(json_object_get(rep, "not_compared"),
                                     json_pack("{s:s, s:s}", "name", name, "why",
                                               "it records the run itself (times), not only its result"));
    const char *a = output_digest(orig, name), *b = output_digest(rerun, name);
    if (json_array_append_new(json_object_get(rep, "compared"), json_string(name)))
        return -1;
    if (a && b && strcmp(a, b) == 0)
        return 0;
    return json_array_append_new(json_object_get(rep, "differing_outputs"),
                                 json_pack("{s:s, s:s?, s:s?}", "name", name, "original_sha256", a,
                                           "rerun_sha256", b));
}

static int compare_outputs(const struct gj_kind *kind, const json_t *orig, const json_t *rerun, json_t *rep)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(orig, "outputs"), i, o)
        if (compare_output(kind, json_string_value(json_object_get(o, "name")), orig, rerun, rep))
            return -1;
    json_array_foreach(json_object_get(rerun, "outputs"), i, o) {
        const char *name = json_string_value(json_object_get(o, "name"));
        if (!output_digest(orig, name) && compare_output(kind, name, orig, rerun, rep))
            return -1;
    }
    return 0;
}

/* What a kind's promise assumes unchanged: the recorded paths (a prefix ending in '.' covers
 * what is under it) that decide the bits, unlike a worker's name, an OS release or a CPU count. */
static const char *const promise_assumes[] = { "kind.version", "device.type", "device.architecture",
                                               "device.name", "device.compute_capability", "libraries.",
                                               "convolutions.", "precision", "tf32", "model.sha256",
                                               "seed", NULL };

static int breaks_promise(const char *path)
{
    for (const char *const *p = promise_assumes; *p; p++) {
        size_t n = strlen(*p);
        if (strncmp(path, *p, n) == 0 && ((*p)[n - 1] == '.' || path[n] == '\0' || path[n] == '.'))
            return 1;
    }
    return 0;
}

/* Whether the kind promises identical bits on the device class the original ran on, with
 * what decides them (envdiff: the environments' differences) unchanged. */
static int promised(const struct gj_kind *kind, const json_t *env, const json_t *envdiff)
{
    const char *type = json_string_value(json_object_get(json_object_get(env, "device"), "type"));
    if (!kind || !type)
        return 0;
    size_t i;
    json_t *d;
    json_array_foreach(envdiff, i, d)
        if (breaks_promise(json_string_value(json_object_get(d, "path"))))
            return 0;
    return strcmp(type, "cpu") == 0 ? (kind->reproducible & GJ_REPRO_CPU) != 0
                                    : (kind->reproducible & GJ_REPRO_GPU) != 0;
}

static json_t *unknown(json_t *rep, const char *why)
{
    json_object_set_new(rep, "why", json_string(why));
    return json_pack("{s:s, s:o}", "reproduced", "unknown", "reproduction", rep);
}

json_t *gj_reproduction_compare(const json_t *original, const json_t *rerun)
{
    json_t *rep = json_pack("{s:O, s:[], s:[], s:[]}", "original", json_object_get(original, "id"), "compared",
                            "differing_outputs", "not_compared");
    if (!rep)
        return NULL;
    if (strcmp(json_string_value(json_object_get(original, "state")), "succeeded") != 0)
        return unknown(rep, "the original job did not succeed");
    if (strcmp(json_string_value(json_object_get(rerun, "state")), "succeeded") != 0)
        return unknown(rep, "the rerun has not succeeded");
    const struct gj_kind *kind = gj_kind_find(json_string_value(json_object_get(original, "kind")));
    json_t *env_a = gj_provenance_last_environment(original), *env_b = gj_provenance_last_environment(rerun);
    json_t *envdiff = gj_environment_diff(env_a, env_b);
    if (!envdiff || json_object_set_new(rep, "environment_differences", envdiff) ||
        compare_outputs(kind, original, rerun, rep) ||
        json_object_set_new(rep, "promised", json_boolean(promised(kind, env_a, envdiff)))) {
        json_decref(rep);
        return NULL;
    }
    const char *verdict = json_array_size(json_object_get(rep, "differing_outputs")) ? "different" : "identical";
    return json_pack("{s:s, s:o}", "reproduced", verdict, "reproduction", rep);
}

int gj_reproduction_annotate(PGconn *conn, const char *tenant_id, json_t *job)
{
    const char *id = json_string_value(json_object_get(job, "id"));
    char of[37];
    int rc = id ? gj_provenance_rerun_of(conn, id, of) : 0;
    if (rc <= 0)
        return rc;
    json_object_set_new(job, "rerun_of", json_string(of));
    const char *state = json_string_value(json_object_get(job, "state"));
    if (!state || (strcmp(state, "succeeded") && strcmp(state, "failed") && strcmp(state, "canceled")))
        return 0;
    json_t *a = NULL, *b = NULL;
    int ra = gj_provenance_load(conn, tenant_id, of, 0, &a);
    int rb = ra >= 0 ? gj_provenance_load(conn, tenant_id, id, 0, &b) : 0;
    json_t *cmp = NULL;
    if (ra == 0)
        cmp = json_pack("{s:s, s:{s:s, s:s}}", "reproduced", "unknown", "reproduction", "original", of, "why",
                        "the original job was deleted");
    else if (ra > 0 && rb > 0)
        cmp = gj_reproduction_compare(a, b);
    if (cmp)
        json_object_update(job, cmp);
    json_decref(cmp);
    json_decref(a);
    json_decref(b);
    return ra < 0 || rb < 0 ? -1 : 0;
}
