/*
 * ro_crate.c — the Process Run Crate of a job (ro_crate.h). One CreateAction per job (and
 * per sub-task), its instrument the kind as a SoftwareApplication that is part of gpujobd
 * (with the build that ran it), object the input Files (sha256, contentSize) and the params
 * as PropertyValues, result the output Files, agent the tenant, the recorded environment
 * as PropertyValues. An input made by another job is that job's action's result too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gj_provenance.h"
#include "service/api/ro_crate.h"
#include "service/jobs/reproduction.h"

struct crate {
    json_t *graph;
    json_t *ids;          /* @id -> true: each entity once */
    json_t *blobs;        /* blob id -> the @id of its File: the same bytes are one file (a slab's
                           * input is its parent's), in the zip once (crate_zip.c skips them alike) */
    int detached;         /* adding the original of a rerun: its files are not in the zip */
};

/* Adds entity (stolen) unless one with its @id is there. 0, or -1. */
static int add(struct crate *c, json_t *entity)
{
    if (!entity)
        return -1;
    const char *id = json_string_value(json_object_get(entity, "@id"));
    if (json_object_get(c->ids, id)) {
        json_decref(entity);
        return 0;
    }
    if (json_object_set_new(c->ids, id, json_true())) {
        json_decref(entity);
        return -1;
    }
    return json_array_append_new(c->graph, entity);
}

static json_t *ref(const char *id)
{
    return json_pack("{s:s}", "@id", id);
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static json_t *file_entity(const char *id, const json_t *f)
{
    return json_pack("{s:s, s:s, s:s?, s:s?, s:I, s:s?}", "@id", id, "@type", "File", "name",
                     str(f, "name"), "sha256", str(f, "sha256"), "contentSize",
                     json_integer_value(json_object_get(f, "size")), "encodingFormat", str(f, "content_type"));
}

static const char *action_status(const char *state)
{
    if (!strcmp(state, "succeeded"))
        return "http://schema.org/CompletedActionStatus";
    if (!strcmp(state, "failed") || !strcmp(state, "canceled"))
        return "http://schema.org/FailedActionStatus";
    if (!strcmp(state, "running"))
        return "http://schema.org/ActiveActionStatus";
    return "http://schema.org/PotentialActionStatus";
}

/* The kind as a SoftwareApplication, part of gpujobd as the environment recorded it. */
static int add_instrument(struct crate *c, const json_t *job, const json_t *env, char *id, size_t cap)
{
    const char *kind = str(job, "kind");
    json_t *gj = json_object_get(env, "gpujobd"), *kv = json_object_get(env, "kind");
    const char *build = gj ? str(gj, "build") : gj_build_describe();
    char app[160];
    snprintf(app, sizeof app, "#gpujobd-%s", build);
    snprintf(id, cap, "#kind-%s-%s", kind, kv ? str(kv, "version") : "unrecorded");
    json_t *gpujobd = json_pack("{s:s, s:s, s:s, s:s, s:s}", "@id", app, "@type", "SoftwareApplication",
                                "name", "gpujobd", "version", build, "softwareVersion",
                                gj ? str(gj, "version") : gj_build_version());
    json_t *k = json_pack("{s:s, s:s, s:s, s:s, s:o}", "@id", id, "@type", "SoftwareApplication", "name", kind,
                          "version", kv ? str(kv, "version") : "unrecorded", "isPartOf", ref(app));
    return add(c, gpujobd) || add(c, k);
}

/* Scalars as they are; objects and arrays as their JSON text. */
static json_t *property_value(const char *id, const char *name, json_t *value)
{
    json_t *v;
    if (json_is_object(value) || json_is_array(value)) {
        char *text = json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS);
        v = text ? json_string(text) : NULL;
        free(text);
    } else {
        v = json_incref(value);
    }
    return json_pack("{s:s, s:s, s:s, s:o?}", "@id", id, "@type", "PropertyValue", "name", name, "value", v);
}

static int add_params(struct crate *c, const json_t *job, json_t *object)
{
    const char *key;
    json_t *v;
    char id[320];
    json_object_foreach(json_object_get(job, "params"), key, v) {
        snprintf(id, sizeof id, "#param-%s-%s", str(job, "id"), key);
        if (add(c, property_value(id, key, v)) || json_array_append_new(object, ref(id)))
            return -1;
    }
    return 0;
}

/* The environment's leaves, one PropertyValue each, named by their dotted path; the model's
 * config and the convolutions (keyed by shapes, which have spaces) are one value each. */
static int add_env(struct crate *c, const char *job_id, const json_t *env, const char *path, json_t *list)
{
    const char *key;
    json_t *v;
    char sub[256], id[400];
    json_object_foreach((json_t *)env, key, v) {
        snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", key);
        if (json_is_object(v) && strcmp(sub, "model.config") != 0 && strcmp(sub, "convolutions") != 0) {
            if (add_env(c, job_id, v, sub, list))
                return -1;
            continue;
        }
        snprintf(id, sizeof id, "#env-%s-%s", job_id, sub);
        if (add(c, property_value(id, sub, v)) || json_array_append_new(list, ref(id)))
            return -1;
    }
    return 0;
}

/* The job that made an input (its record in upstreams): its action, with the file among
 * its results. */
static int add_upstream(struct crate *c, const json_t *upstreams, const json_t *in, const char *file_id)
{
    const char *up = str(in, "job");
    const json_t *rec = json_object_get(upstreams, up);
    char action[96], kind_id[200];
    snprintf(action, sizeof action, "#action-%s", up);
    json_t *a = json_pack("{s:s, s:s, s:s, s:[o]}", "@id", action, "@type", "CreateAction", "name", "", "result",
                          ref(file_id));
    if (!a)
        return -1;
    char name[160];
    snprintf(name, sizeof name, "gpujobd job %s: output %s", up, str(in, "output"));
    json_object_set_new(a, "name", json_string(name));
    if (rec) {
        if (add_instrument(c, rec, gj_provenance_last_environment(rec), kind_id, sizeof kind_id)) {
            json_decref(a);
            return -1;
        }
        json_object_set_new(a, "instrument", ref(kind_id));
        json_object_set_new(a, "actionStatus", ref(action_status(str(rec, "state"))));
        if (str(rec, "finished_at"))
            json_object_set_new(a, "endTime", json_string(str(rec, "finished_at")));
    }
    return add(c, a);
}

/* Inputs as recorded by the last attempt (they outlive a deleted blob), else as now. */
static const json_t *inputs_of(const json_t *job)
{
    json_t *attempts = json_object_get(job, "attempts");
    size_t n = json_array_size(attempts);
    return n ? json_object_get(json_array_get(attempts, n - 1), "inputs") : json_object_get(job, "inputs");
}

static int add_files(struct crate *c, const json_t *job, const char *prefix, int inputs, const json_t *upstreams,
                     json_t *list, json_t *root_parts)
{
    size_t i;
    json_t *f;
    char id[400];
    const json_t *files = inputs ? inputs_of(job) : json_object_get(job, "outputs");
    json_array_foreach((json_t *)files, i, f) {
        const char *blob = str(f, "blob"), *seen = blob ? json_string_value(json_object_get(c->blobs, blob)) : NULL;
        snprintf(id, sizeof id, "%s", seen ? seen : "");
        if (!seen) {
            snprintf(id, sizeof id, "%s%s/%s", prefix, inputs ? "inputs" : "outputs", str(f, "name"));
            if (add(c, file_entity(id, f)) || (blob && json_object_set_new(c->blobs, blob, json_string(id))) ||
                (!c->detached && json_array_append_new(root_parts, ref(id))))
                return -1;
        }
        if (json_array_append_new(list, ref(id)))
            return -1;
        if (inputs && str(f, "job") && add_upstream(c, upstreams, f, id))
            return -1;
    }
    return 0;
}

static int add_agent(struct crate *c, const json_t *job, char *id, size_t cap)
{
    json_t *t = json_object_get(job, "tenant");
    snprintf(id, cap, "#tenant-%s", str(t, "id"));
    return add(c, json_pack("{s:s, s:s, s:s}", "@id", id, "@type", "Organization", "name", str(t, "name")));
}

/* The CreateAction of job (files under prefix), mentioned by the root. */
static int add_action(struct crate *c, const json_t *job, const char *prefix, const json_t *upstreams,
                      json_t *root, char *action, size_t cap)
{
    const char *id = str(job, "id"), *state = str(job, "state");
    const json_t *env = gj_provenance_last_environment(job);
    char kind_id[200], agent[80], name[200];
    snprintf(action, cap, "#action-%s", id);
    snprintf(name, sizeof name, "gpujobd job %s: %s", id, str(job, "kind"));
    json_t *a = json_pack("{s:s, s:s, s:s, s:[], s:[], s:[], s:o}", "@id", action, "@type", "CreateAction",
                          "name", name, "object", "result", "environment", "actionStatus",
                          ref(action_status(state)));
    json_t *parts = json_object_get(root, "hasPart");
    if (!a || add_instrument(c, job, env, kind_id, sizeof kind_id) || add_agent(c, job, agent, sizeof agent) ||
        add_files(c, job, prefix, 1, upstreams, json_object_get(a, "object"), parts) ||
        add_params(c, job, json_object_get(a, "object")) ||
        add_files(c, job, prefix, 0, upstreams, json_object_get(a, "result"), parts) ||
        (env && add_env(c, id, env, "", json_object_get(a, "environment")))) {
        json_decref(a);
        return -1;
    }
    json_object_set_new(a, "instrument", ref(kind_id));
    json_object_set_new(a, "agent", ref(agent));
    if (str(job, "started_at"))
        json_object_set_new(a, "startTime", json_string(str(job, "started_at")));
    if (str(job, "finished_at"))
        json_object_set_new(a, "endTime", json_string(str(job, "finished_at")));
    json_t *err = json_object_get(job, "error");
    if (str(err, "message"))
        json_object_set_new(a, "error", json_string(str(err, "message")));
    if (json_array_append_new(json_object_get(root, "mentions"), ref(action)))
        return json_decref(a), -1;
    return add(c, a);
}

static json_t *metadata_descriptor(void)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "@id", "ro-crate-metadata.json", "@type", "CreativeWork",
                     "conformsTo", "@id", "https://w3id.org/ro/crate/1.1", "about", "@id", "./");
}

/* RO-Crate 1.1 wants a license on the root; the terms of a tenant's data are its own. */
#define LICENSE_ID "#license-of-the-tenant"
static json_t *license(void)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "@id", LICENSE_ID, "@type", "CreativeWork", "name",
                     "The tenant's own terms", "description",
                     "gpujobd does not know under which terms this job's inputs and outputs may be used: "
                     "ask the tenant that ran it.");
}

static json_t *root_dataset(const json_t *record)
{
    char name[200];
    snprintf(name, sizeof name, "gpujobd job %s (%s)", str(record, "id"), str(record, "kind"));
    const char *date = str(record, "finished_at") ? str(record, "finished_at") : str(record, "created_at");
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s}, s:[{s:s}], s:[], s:[]}", "@id", "./", "@type", "Dataset",
                     "name", name, "description",
                     "How this job's result was made: its kind and the gpujobd build that ran it, its "
                     "parameters, its inputs and outputs by digest, and the environment of its run.",
                     "datePublished", date, "license", "@id", LICENSE_ID, "conformsTo", "@id", GJ_PROCESS_RUN_CRATE,
                     "hasPart", "mentions");
}

static json_t *context(void)
{
    return json_pack("[s, {s:s, s:s}]", "https://w3id.org/ro/crate/1.1/context", "sha256",
                     "https://w3id.org/ro/terms/workflow-run#sha256", "environment",
                     "https://w3id.org/ro/terms/workflow-run#environment");
}

/* A rerun: the original's action (its results by digest), and the verdict on the rerun's. */
static int add_original(struct crate *c, const json_t *original, const json_t *reproduction, const char *action,
                        json_t *root)
{
    char orig_action[96], prefix[80];
    snprintf(prefix, sizeof prefix, "original/%s/", str(original, "id"));
    c->detached = 1;
    int rc = add_action(c, original, prefix, NULL, root, orig_action, sizeof orig_action);
    c->detached = 0;
    if (rc)
        return -1;
    size_t i;
    json_t *e;
    json_array_foreach(c->graph, i, e) {
        if (strcmp(str(e, "@id"), action) != 0)
            continue;
        char desc[300];
        snprintf(desc, sizeof desc, "A rerun of job %s; reproduced: %s", str(original, "id"),
                 reproduction ? str(reproduction, "reproduced") : "not known yet");
        return json_object_set_new(e, "isBasedOn", ref(orig_action)) ||
               json_object_set_new(e, "description", json_string(desc));
    }
    return 0;
}

json_t *gj_ro_crate(const json_t *record, const json_t *upstreams, const json_t *original,
                    const json_t *reproduction)
{
    struct crate c = { json_array(), json_object(), json_object(), 0 };
    json_t *root = root_dataset(record), *crate = NULL;
    char action[96], child_action[96], prefix[96];
    int bad = !c.graph || !c.ids || !c.blobs || !root || add(&c, metadata_descriptor()) ||
              add(&c, json_pack("{s:s, s:s, s:s, s:s}", "@id", GJ_PROCESS_RUN_CRATE, "@type", "CreativeWork", "name",
                                "Process Run Crate", "version", "0.5")) ||
              add(&c, license()) ||
              add_action(&c, record, "", upstreams, root, action, sizeof action);
    size_t i;
    json_t *child;
    json_array_foreach(json_object_get(record, "children"), i, child) {
        snprintf(prefix, sizeof prefix, "children/%s/", str(child, "id"));
        if (bad || (bad = add_action(&c, child, prefix, upstreams, root, child_action, sizeof child_action)))
            break;
    }
    if (!bad && original)
        bad = add_original(&c, original, reproduction, action, root);
    if (!bad && json_array_insert_new(c.graph, 0, root) == 0) {
        root = NULL;
        crate = json_pack("{s:o, s:O}", "@context", context(), "@graph", c.graph);
    }
    json_decref(root);
    json_decref(c.graph);
    json_decref(c.ids);
    json_decref(c.blobs);
    return crate;
}
