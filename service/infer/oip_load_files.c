/*
 * oip_load_files.c — the model files a Triton load request carries: parameters
 * "file:<version>/<name>" whose values are the files' bytes in base64, as tritonclient's
 * load_model(config=..., files=...) sends them. Each version they name is staged in the
 * model cache, checked by loading it with the request's config, and stored in the shared
 * model store (model_store.h) as a version of the model (the model made when it is new),
 * so that every replica serves it. Versions are immutable here: a version that exists with
 * the same files is kept as it is, one with other files is refused (409). Nothing is
 * stored unless every version checks; a store that fails midway takes back what it stored.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "service/base/base64.h"
#include "service/infer/infer.h"
#include "service/infer/model_cache.h"
#include "service/infer/model_store.h"
#include "service/infer/oip.h"

#define MAX_VERSIONS 8   /* versions one load request may carry */

struct staged {
    int64_t version;
    char stage[GJ_PATH_MAX];               /* "" when not staged */
    char names[GJ_MODEL_MAX_FILES][GJ_MODEL_FILE_NAME_MAX];
    size_t n;
    char digest[65];
    int exists;                            /* 1: stored already with these files */
};

static int with_status(struct gj_error *err, int status)
{
    err->status = status;
    return -1;
}

/* Sets err (field "parameters") with its HTTP status; -1. */
#define REFUSE(err, code, ...) (gj_error_set((err), "parameters", __VA_ARGS__), with_status((err), (code)))

/* "file:<version>/<name>" into version and name. 0, or -1 with err 400. */
static int parse_key(const char *key, int64_t *version, const char **name, struct gj_error *err)
{
    const char *p = key + 5, *slash = strchr(p, '/');
    int64_t v = 0;
    for (const char *q = p; slash && q < slash; q++)
        v = *q >= '0' && *q <= '9' && v < 100000000 ? v * 10 + (*q - '0') : -1;
    if (!slash || slash == p || *p == '0' || v <= 0)
        return REFUSE(err, 400, "'%s': a model file is given as \"file:<version>/<name>\" (version a positive "
                      "integer)", key);
    if (!gj_model_store_file_name_ok(slash + 1))
        return REFUSE(err, 400, "'%s': the file name is letters, digits, '.', '_' or '-', not starting with "
                      "'.' or '-' (no directories)", key);
    *version = v;
    *name = slash + 1;
    return 0;
}

/* The staged version of `version` (added when new). NULL with err 400 when too many. */
static struct staged *version_slot(struct staged *vs, size_t *n, int64_t version, const char *request_id,
                                   struct gj_error *err)
{
    for (size_t i = 0; i < *n; i++)
        if (vs[i].version == version)
            return &vs[i];
    if (*n == MAX_VERSIONS) {
        REFUSE(err, 400, "a load request carries the files of %d versions at most", MAX_VERSIONS);
        return NULL;
    }
    struct staged *s = &vs[(*n)++];
    s->version = version;
    char tag[64];
    snprintf(tag, sizeof tag, "%.32s-%" PRId64, request_id, version);
    if (gj_model_cache_stage(tag, s->stage) != 0) {
        s->stage[0] = '\0';
        REFUSE(err, 500, "the model files could not be staged");
        return NULL;
    }
    return s;
}

/* Decodes one file into its version's staging directory. 0, or -1 with err. */
static int stage_file(struct staged *s, const char *name, json_t *value, struct gj_error *err)
{
    const char *b64 = json_string_value(value);
    if (!b64)
        return REFUSE(err, 400, "'file:%" PRId64 "/%s' is the file's bytes in base64 (a string)", s->version, name);
    if (s->n == GJ_MODEL_MAX_FILES)
        return REFUSE(err, 400, "a version has %d files at most", GJ_MODEL_MAX_FILES);
    size_t len = json_string_length(value);
    unsigned char *data = malloc(len / 4 * 3 + 3);
    long n = data ? gj_base64_decode(b64, len, data, len / 4 * 3 + 3, GJ_BASE64_STD) : -1;
    char path[GJ_PATH_MAX + GJ_MODEL_FILE_NAME_MAX + 8];
    snprintf(path, sizeof path, "%s/files/%s", s->stage, name);
    int rc = 0;
    if (n < 0)
        rc = REFUSE(err, 400, "'file:%" PRId64 "/%s' is not valid base64", s->version, name);
    else if (gj_write_file(path, data, (size_t)n) != 0)
        rc = REFUSE(err, 507, "'%s' could not be staged (disk full?)", name);
    free(data);
    if (rc == 0)
        snprintf(s->names[s->n++], GJ_MODEL_FILE_NAME_MAX, "%s", name);
    return rc;
}

/* The version's files as the store takes them (locals: n paths of GJ_PATH_MAX * 2). */
static void new_files(const struct staged *s, struct gj_ms_new_file *files, char (*locals)[GJ_PATH_MAX * 2])
{
    for (size_t i = 0; i < s->n; i++) {
        snprintf(locals[i], sizeof locals[i], "%s/files/%s", s->stage, s->names[i]);
        files[i] = (struct gj_ms_new_file){ s->names[i], locals[i] };
    }
}

/* Checks a staged version: it has a model.onnx that loads with the config; its digest. */
static int check_version(const char *model, const char *config, struct staged *s, struct gj_error *err)
{
    int has_onnx = 0;
    for (size_t i = 0; i < s->n; i++)
        has_onnx |= strcmp(s->names[i], "model.onnx") == 0;
    if (!has_onnx)
        return REFUSE(err, 400, "version %" PRId64 " has no 'file:%" PRId64 "/model.onnx'", s->version, s->version);
    if (gj_model_cache_check_staged(s->stage, config, strlen(config), model, s->version, err) != 0)
        return -1;
    struct gj_ms_file desc[GJ_MODEL_MAX_FILES];
    for (size_t i = 0; i < s->n; i++) {
        char local[GJ_PATH_MAX * 2];
        snprintf(local, sizeof local, "%s/files/%s", s->stage, s->names[i]);
        memset(&desc[i], 0, sizeof desc[i]);
        snprintf(desc[i].path, sizeof desc[i].path, "%s", s->names[i]);
        if (gj_model_file_sha256(local, desc[i].sha256) != 0)
            return REFUSE(err, 500, "'%s' could not be read back", s->names[i]);
    }
    gj_model_store_digest(desc, s->n, s->digest);
    return 0;
}

/* Marks the versions stored already with the same files; refuses one with other files. */
static int compare_stored(PGconn *conn, const char *model, struct staged *vs, size_t n, int *model_new,
                          struct gj_error *err)
{
    struct gj_ms_snapshot snap;
    if (gj_model_store_read(conn, &snap) != 0)
        return REFUSE(err, 503, "the database is not available; retry shortly");
    const struct gj_ms_model *m = gj_model_store_find(&snap, model);
    int rc = 0;
    *model_new = m == NULL;
    for (size_t i = 0; m && i < n && rc == 0; i++)
        for (size_t k = 0; k < m->n_versions; k++) {
            if (m->versions[k].version != vs[i].version)
                continue;
            vs[i].exists = strcmp(m->versions[k].digest, vs[i].digest) == 0;
            if (!vs[i].exists)
                rc = REFUSE(err, 409, "version %" PRId64 " exists with other files: versions are immutable (delete "
                            "it with DELETE /v1/models/%s/versions/%" PRId64 " first)", vs[i].version, model,
                            vs[i].version);
        }
    gj_model_store_snapshot_free(&snap);
    return rc;
}

/* Stores the new versions; takes them back when one fails. */
static int store_versions(PGconn *conn, const char *model, const char *config, struct staged *vs, size_t n,
                          int model_new, struct gj_error *err)
{
    struct gj_ms_new_file files[GJ_MODEL_MAX_FILES];
    char (*locals)[GJ_PATH_MAX * 2] = malloc(GJ_MODEL_MAX_FILES * sizeof *locals);
    size_t stored = 0;
    int rc = locals ? 0 : REFUSE(err, 500, "out of memory");
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (vs[i].exists)
            continue;
        new_files(&vs[i], files, locals);
        char digest[65];
        rc = gj_model_store_add_version(conn, model, vs[i].version, model_new ? config : NULL, NULL, files,
                                        vs[i].n, digest, err);
        if (rc == 0) {
            model_new = 0;
            stored = i + 1;
            gj_model_cache_adopt(vs[i].stage, digest);   /* fetched from the store instead if this fails */
            vs[i].stage[0] = '\0';
        }
    }
    for (size_t i = 0; rc != 0 && i < stored; i++)
        if (!vs[i].exists)
            gj_model_store_delete_version(conn, model, vs[i].version);
    free(locals);
    return rc;
}

int oip_store_load_files(PGconn *conn, const char *model, const char *config, json_t *params,
                         const char *request_id, struct gj_error *err)
{
    struct staged *vs = calloc(MAX_VERSIONS, sizeof *vs);
    size_t n = 0;
    int rc = vs ? 0 : REFUSE(err, 500, "out of memory");
    const char *key;
    json_t *value;
    json_object_foreach(params, key, value) {
        int64_t version;
        const char *name;
        struct staged *s;
        if (rc != 0 || strncmp(key, "file:", 5) != 0)
            continue;
        if (parse_key(key, &version, &name, err) != 0 ||
            !(s = version_slot(vs, &n, version, request_id, err)) || stage_file(s, name, value, err) != 0)
            rc = -1;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = check_version(model, config, &vs[i], err);
    int model_new = 0;
    if (rc == 0)
        rc = compare_stored(conn, model, vs, n, &model_new, err);
    if (rc == 0)
        rc = store_versions(conn, model, config, vs, n, model_new, err);
    for (size_t i = 0; i < n; i++)
        if (vs[i].stage[0])
            gj_rm_rf(vs[i].stage);
    free(vs);
    return rc;
}
