/*
 * model_seeds_poll.c — poll mode (--model-control-mode poll): the seed directory read
 * again every --repository-poll-secs, its new, changed and removed versions reflected in
 * the shared model store. See model_seeds.h for the rules; in short, a poll changes only
 * what the directory put in the store (the store still holds what this process saw in the
 * directory), so models uploaded through the API are never replaced or removed by a poll.
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "infer/serving/model_pbtxt.h"
#include "service/db/db.h"
#include "service/infer/model_seeds.h"
#include "service/base/log.h"

#define COMPONENT "models"
#define SEED_LOCK_KEY "7453171002767639908"   /* as model_seeds.c's: one importer at a time */

struct seen_version {
    char name[GJ_MODEL_NAME_MAX];
    int64_t version;
    uint64_t sig;              /* the files' names, sizes and times: hashed again when it moves */
    char digest[65];           /* of the files, as the store computes it */
    char *config;              /* the version's own config (JSON text), or NULL */
    int present;
    char error[512];           /* why its own config does not read ("" it does): logged once */
};

struct seen_model {
    char name[GJ_MODEL_NAME_MAX];
    char *config;              /* the model's config (JSON text), or NULL */
    int present, changed;
    char error[512];           /* why its config does not read ("" it does): logged once */
};

struct gj_seed_memory {
    struct seen_version *v;
    size_t nv;
    struct seen_model *m;
    size_t nm;
};

gj_seed_memory *gj_seed_memory_new(void)
{
    return calloc(1, sizeof(gj_seed_memory));
}

void gj_seed_memory_free(gj_seed_memory *mem)
{
    if (!mem)
        return;
    for (size_t i = 0; i < mem->nv; i++)
        free(mem->v[i].config);
    for (size_t i = 0; i < mem->nm; i++)
        free(mem->m[i].config);
    free(mem->v);
    free(mem->m);
    free(mem);
}

int gj_seed_memory_changed(const gj_seed_memory *mem, const char *name)
{
    for (size_t i = 0; mem && i < mem->nm; i++)
        if (strcmp(mem->m[i].name, name) == 0)
            return mem->m[i].changed;
    return 0;
}

static int same_text(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static struct seen_version *seen_version(gj_seed_memory *mem, const char *name, int64_t version, int add)
{
    for (size_t i = 0; i < mem->nv; i++)
        if (mem->v[i].version == version && strcmp(mem->v[i].name, name) == 0)
            return &mem->v[i];
    struct seen_version *grown = add ? realloc(mem->v, (mem->nv + 1) * sizeof *grown) : NULL;
    if (!grown)
        return NULL;
    mem->v = grown;
    struct seen_version *sv = &mem->v[mem->nv++];
    memset(sv, 0, sizeof *sv);
    snprintf(sv->name, sizeof sv->name, "%s", name);
    sv->version = version;
    return sv;
}

static struct seen_model *seen_model(gj_seed_memory *mem, const char *name)
{
    for (size_t i = 0; i < mem->nm; i++)
        if (strcmp(mem->m[i].name, name) == 0)
            return &mem->m[i];
    struct seen_model *grown = realloc(mem->m, (mem->nm + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    mem->m = grown;
    struct seen_model *sm = &mem->m[mem->nm++];
    memset(sm, 0, sizeof *sm);
    snprintf(sm->name, sizeof sm->name, "%s", name);
    return sm;
}

static const struct gj_ms_version *store_version(const struct gj_ms_snapshot *snap, const char *name, int64_t v)
{
    const struct gj_ms_model *m = gj_model_store_find(snap, name);
    for (size_t i = 0; m && i < m->n_versions; i++)
        if (m->versions[i].version == v)
            return &m->versions[i];
    return NULL;
}

/* FNV-1a of a file's name, size and modification time; summed over the files (any order). */
static uint64_t file_sig(const char *name, const char *local)
{
    struct stat st;
    uint64_t h = 1469598103934665603ull;
    if (stat(local, &st) != 0)
        return 0;
    char buf[400];
    int n = snprintf(buf, sizeof buf, "%s/%lld/%lld.%ld", name, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
                     st.st_mtim.tv_nsec);
    for (int i = 0; i < n && i < (int)sizeof buf; i++)
        h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
    return h;
}

/* The digest of a version directory's files as the store computes it; "" when unreadable. */
static void files_digest(const struct gj_ms_new_file *files, size_t n, char hex[65])
{
    struct gj_ms_file *desc = calloc(n ? n : 1, sizeof *desc);
    hex[0] = '\0';
    for (size_t i = 0; desc && i < n; i++) {
        snprintf(desc[i].path, sizeof desc[i].path, "%s", files[i].path);
        if (gj_model_file_sha256(files[i].local, desc[i].sha256) != 0) {
            free(desc);
            return;
        }
    }
    if (desc)
        gj_model_store_digest(desc, n, hex);
    free(desc);
}

/* Deletes a version the directory put in the store, so that it can be imported again. */
static int forget_version(PGconn *conn, const char *name, int64_t version)
{
    char v[24];
    snprintf(v, sizeof v, "%" PRId64, version);
    const char *p[2] = { name, v };
    if (gj_model_store_delete_version(conn, name, version) < 0)
        return -1;
    return gj_db_cmd(conn, "DELETE FROM model_seeds WHERE model = $1 AND version = $2", 2, p);
}

/* A version whose own config does not read: said once, kept as it is (a config being
 * edited is not a removal). */
static void keep_version(gj_seed_memory *mem, struct seen_version *seen, const char *name, int64_t version,
                         const char *why)
{
    if (!seen && !(seen = seen_version(mem, name, version, 1)))
        return;
    if (strcmp(seen->error, why) != 0)
        gj_log_warn(COMPONENT, "poll: %s version %" PRId64 ": %s: kept as it is until it is fixed", name, version, why);
    snprintf(seen->error, sizeof seen->error, "%s", why);
    seen->present = 1;
}

/* One version directory: imported when new, replaced when changed. */
static int poll_version(PGconn *conn, const struct gj_ms_snapshot *snap, gj_seed_memory *mem, const char *mdir,
                        const char *name, int64_t version, const char *vdir)
{
    struct gj_ms_new_file files[GJ_MODEL_MAX_FILES];
    char (*names)[GJ_MODEL_FILE_NAME_MAX] = malloc(GJ_MODEL_MAX_FILES * sizeof *names);
    char (*locals)[GJ_PATH_MAX] = malloc(GJ_MODEL_MAX_FILES * sizeof *locals);
    char *vcfg = NULL;
    const char *which;
    struct gj_error err = { 0 };
    int has_onnx = 0, rc = 0;
    size_t n = names && locals ? gj_seed_version_files(mdir, vdir, files, names, locals, &has_onnx) : 0;
    if (!names || !locals || !has_onnx) {
        rc = names && locals ? 0 : -1;   /* not a version (yet) */
        goto out;
    }
    struct seen_version *seen = seen_version(mem, name, version, 0);
    if (gj_model_config_file_read(vdir, GJ_MODEL_CONFIG_MAX_BYTES, &vcfg, &which, &err) != 0) {
        keep_version(mem, seen, name, version, err.message);
        goto out;
    }
    if (seen)
        seen->error[0] = '\0';
    uint64_t sig = 0;
    for (size_t i = 0; i < n; i++)
        sig += file_sig(files[i].path, files[i].local);
    char digest[65];
    if (seen && seen->sig == sig)
        memcpy(digest, seen->digest, sizeof digest);
    else
        files_digest(files, n, digest);
    const struct gj_ms_version *sv = store_version(snap, name, version);
    int changed = seen && (strcmp(seen->digest, digest) != 0 || !same_text(seen->config, vcfg));
    if (sv && changed && strcmp(sv->digest, seen->digest) == 0 && same_text(sv->config, seen->config)) {
        gj_log_info(COMPONENT, "poll: %s version %" PRId64 " changed in %s: replaced", name, version, mdir);
        rc = forget_version(conn, name, version);
        sv = NULL;
        struct seen_model *sm = seen_model(mem, name);
        if (sm)
            sm->changed = 1;
    }
    if (rc == 0 && !sv)
        rc = gj_seed_import_version(conn, mdir, name, version, vdir);
    if (rc == 0 && (seen || (seen = seen_version(mem, name, version, 1)))) {
        seen->sig = sig;
        memcpy(seen->digest, digest, sizeof digest);
        free(seen->config);
        seen->config = vcfg;
        vcfg = NULL;
        seen->present = 1;
    }
out:
    free(names);
    free(locals);
    free(vcfg);
    return rc;
}

/* A model whose config does not read: said once (not at every pass), and its versions
 * kept as they are (a config being edited is not a removal). */
static void keep_model(gj_seed_memory *mem, struct seen_model *sm, const char *why)
{
    if (strcmp(sm->error, why) != 0)
        gj_log_warn(COMPONENT, "poll: %s: %s: its versions are kept as they are until it is fixed", sm->name, why);
    snprintf(sm->error, sizeof sm->error, "%s", why);
    for (size_t i = 0; i < mem->nv; i++)
        if (strcmp(mem->v[i].name, sm->name) == 0)
            mem->v[i].present = 1;
}

/* A model directory's config: the store's replaced when it changed and the store still
 * holds what the directory held. 1 when it does not read (its versions are skipped). */
static int poll_model_config(PGconn *conn, const struct gj_ms_snapshot *snap, gj_seed_memory *mem,
                             const char *mdir, const char *name)
{
    char *cfg = NULL;
    const char *which;
    struct gj_error err = { 0 };
    struct seen_model *sm = seen_model(mem, name);
    if (!sm)
        return -1;
    sm->present = 1;
    if (gj_model_config_file_read(mdir, GJ_MODEL_CONFIG_MAX_BYTES, &cfg, &which, &err) != 0) {
        keep_model(mem, sm, err.message);
        return 1;
    }
    sm->error[0] = '\0';
    const struct gj_ms_model *m = gj_model_store_find(snap, name);
    int rc = 0;
    if (m && cfg && sm->config && !same_text(cfg, sm->config) && same_text(m->config, sm->config)) {
        gj_log_info(COMPONENT, "poll: the config of %s changed in %s: applied", name, mdir);
        rc = gj_model_store_set_model_config(conn, name, cfg);
        sm->changed = 1;
    }
    free(sm->config);
    sm->config = cfg;
    return rc;
}

struct poll_ctx {
    PGconn *conn;
    const struct gj_ms_snapshot *snap;
    gj_seed_memory *mem;
    const char *mdir, *name;
};

static int poll_one(void *ctx, int64_t version, const char *vdir)
{
    const struct poll_ctx *c = ctx;
    return poll_version(c->conn, c->snap, c->mem, c->mdir, c->name, version, vdir);
}

static int poll_model(PGconn *conn, const struct gj_ms_snapshot *snap, gj_seed_memory *mem, const char *seed_dir,
                      const char *name)
{
    char mdir[GJ_PATH_MAX];
    struct stat st;
    if (gj_path_join(mdir, sizeof mdir, seed_dir, name) != 0 || stat(mdir, &st) != 0 || !S_ISDIR(st.st_mode))
        return 0;
    int cfg = poll_model_config(conn, snap, mem, mdir, name);
    if (cfg != 0)
        return cfg < 0 ? -1 : 0;
    struct poll_ctx c = { conn, snap, mem, mdir, name };
    return gj_seed_each_version(mdir, poll_one, &c);
}

/* Versions not seen in this pass: deleted when the store holds what the directory held. */
static int poll_removed(PGconn *conn, const struct gj_ms_snapshot *snap, gj_seed_memory *mem)
{
    size_t k = 0;
    int rc = 0;
    for (size_t i = 0; i < mem->nv; i++) {
        struct seen_version *seen = &mem->v[i];
        const struct gj_ms_version *sv = store_version(snap, seen->name, seen->version);
        if (!seen->present && rc == 0 && sv && strcmp(sv->digest, seen->digest) == 0 &&
            same_text(sv->config, seen->config)) {
            gj_log_info(COMPONENT, "poll: %s version %" PRId64 " left the seed directory: removed", seen->name,
                        seen->version);
            rc = forget_version(conn, seen->name, seen->version);
        }
        if (seen->present || rc != 0)
            mem->v[k++] = *seen;
        else
            free(seen->config);
    }
    mem->nv = k;
    return rc;
}

int gj_model_store_poll_seeds(PGconn *conn, const char *seed_dir, gj_seed_memory *mem)
{
    DIR *d = opendir(seed_dir);
    if (!d) {
        gj_log_warn(COMPONENT, "poll: seed directory %s cannot be read: nothing changed", seed_dir);
        return 0;
    }
    struct gj_ms_snapshot snap;
    const char *key[1] = { SEED_LOCK_KEY };
    int rc = gj_db_cmd(conn, "SELECT pg_advisory_lock($1::bigint)", 1, key);
    if (rc == 0 && (rc = gj_model_store_read(conn, &snap)) == 0) {
        for (size_t i = 0; i < mem->nv; i++)
            mem->v[i].present = 0;
        for (size_t i = 0; i < mem->nm; i++)
            mem->m[i].present = mem->m[i].changed = 0;
        struct dirent *e;
        while (rc == 0 && (e = readdir(d)) != NULL)
            if (gj_model_name_ok(e->d_name))
                rc = poll_model(conn, &snap, mem, seed_dir, e->d_name);
        if (rc == 0)
            rc = poll_removed(conn, &snap, mem);
        gj_model_store_snapshot_free(&snap);
    }
    closedir(d);
    if (gj_db_cmd(conn, "SELECT pg_advisory_unlock($1::bigint)", 1, key) != 0)
        rc = -1;
    return rc;
}
