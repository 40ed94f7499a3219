/*
 * models_view.c — what GET /v1/models (and the answers of upload, load and unload) show:
 * every model, its versions, what is desired of each, where each is loaded, and whether
 * every replica has applied the store's last change (infer.h: gj_infer_models_view).
 *
 * Per version: "desired" (available | loaded | unloaded: the store's), "replicas" (one
 * entry per live replica that runs models: its state available | loaded | failed |
 * unloaded, reason, devices; this replica's entry is its state now, the others' are what
 * they last reported), and the summary "state" (loaded when a replica has it loaded, else
 * failed when one failed, else unloaded), "reason" and "devices" (every replica's).
 */
#include <stdio.h>
#include <string.h>

#include "service/infer/infer.h"
#include "service/infer/model_sync.h"

static const char *local_label(const char *repo_state)
{
    if (strcmp(repo_state, "READY") == 0)
        return "loaded";
    if (strcmp(repo_state, "FAILED") == 0)
        return "failed";
    if (strcmp(repo_state, "UNLOADED") == 0)
        return "unloaded";
    return "available";
}

static void add_devices(json_t *into, const json_t *devices)
{
    size_t i, j;
    json_t *d, *have;
    json_array_foreach(devices, i, d) {
        int dup = 0;
        json_array_foreach(into, j, have)
            dup |= json_equal(have, d);
        if (!dup)
            json_array_append(into, d);
    }
}

/* The other replicas' entries for one version (from the store's states). */
static json_t *other_replicas(const json_t *states, const char *name, json_int_t version)
{
    json_t *out = json_array();
    size_t i;
    json_t *s;
    json_array_foreach(states, i, s) {
        const char *rep = json_string_value(json_object_get(s, "replica"));
        const char *model = json_string_value(json_object_get(s, "model"));
        if (!rep || !model || strcmp(rep, gj_model_sync_replica()) == 0 || strcmp(model, name) != 0 ||
            json_integer_value(json_object_get(s, "version")) != version)
            continue;
        json_t *one = json_pack("{s:s, s:O, s:O}", "replica", rep, "state", json_object_get(s, "state"),
                                "devices", json_object_get(s, "devices"));
        json_t *reason = json_object_get(s, "reason");
        if (one && json_is_string(reason))
            json_object_set(one, "reason", reason);
        json_array_append_new(out, one);
    }
    return out;
}

/* Fills a version's desired, replicas and summary from its local entry v. */
static void version_view(json_t *v, const char *name, const json_t *states)
{
    json_int_t ver = json_integer_value(json_object_get(v, "version"));
    const char *st = json_string_value(json_object_get(v, "state"));
    json_t *reps = other_replicas(states, name, ver);
    if (gj_model_sync_serving()) {
        json_t *me = json_pack("{s:s, s:s, s:o}", "replica", gj_model_sync_replica(), "state",
                               local_label(st ? st : ""), "devices", gj_infer_devices_json(name, (int64_t)ver));
        if (me && json_object_get(v, "reason"))
            json_object_set(me, "reason", json_object_get(v, "reason"));
        json_array_insert_new(reps, 0, me);
    }
    const char *summary = "unloaded";
    json_t *reason = NULL, *devices = json_array(), *r;
    size_t i;
    json_array_foreach(reps, i, r) {
        const char *rs = json_string_value(json_object_get(r, "state"));
        add_devices(devices, json_object_get(r, "devices"));
        if (rs && strcmp(rs, "loaded") == 0) {
            summary = "loaded";
        } else if (rs && strcmp(rs, "failed") == 0 && strcmp(summary, "loaded") != 0) {
            summary = "failed";
            reason = reason ? reason : json_object_get(r, "reason");
        }
    }
    json_object_set_new(v, "state", json_string(summary));
    if (strcmp(summary, "failed") == 0 && reason)
        json_object_set(v, "reason", reason);
    else
        json_object_del(v, "reason");
    json_object_set_new(v, "devices", devices);
    enum gj_model_desired d;
    if (gj_model_sync_desired(name, (int64_t)ver, &d))
        json_object_set_new(v, "desired", json_string(gj_model_desired_name(d)));
    json_object_set_new(v, "replicas", reps);
}

/* 1 when every live replica has applied the store's generation. */
static int converged(const json_t *store)
{
    json_int_t g = json_integer_value(json_object_get(store, "generation"));
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(store, "replicas"), i, r)
        if (json_integer_value(json_object_get(r, "generation")) < g)
            return 0;
    return 1;
}

json_t *gj_infer_models_view(PGconn *conn, const char *only)
{
    gj_model_repo *repo = gj_infer_repo();
    json_t *store = conn ? gj_model_store_replicas(conn) : NULL;
    const json_t *states = store ? json_object_get(store, "states") : NULL;
    json_t *all = repo ? gj_model_repo_describe(repo) : NULL, *out = json_array();
    size_t i, j;
    json_t *m, *v;
    json_array_foreach(all, i, m) {
        const char *name = json_string_value(json_object_get(m, "name"));
        if (only && strcmp(name, only) != 0)
            continue;
        json_array_foreach(json_object_get(m, "versions"), j, v)
            version_view(v, name, states);
        json_array_append(out, m);
    }
    json_decref(all);
    if (only) {   /* the one model, or NULL */
        json_t *one = json_incref(json_array_get(out, 0));
        json_decref(out);
        json_decref(store);
        return one;
    }
    json_t *body = json_pack("{s:o, s:s}", "models", out, "default_model", GJ_INFER_DEFAULT_MODEL);
    if (body && store) {
        json_object_set(body, "generation", json_object_get(store, "generation"));
        json_object_set_new(body, "converged", json_boolean(converged(store)));
        json_object_set(body, "replicas", json_object_get(store, "replicas"));
    }
    json_decref(store);
    return body;
}
