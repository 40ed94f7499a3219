/*
 * model_seeds.c — a replica's seed directory (DATA_DIR/models, --models-dir: the layout of
 * model_repo.h) into the shared model store, each version once (model_store.h:
 * gj_model_store_import_seeds). What the store holds is what is served; the directory is
 * read at start, and again every --repository-poll-secs in poll mode (model_seeds_poll.c).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "infer/serving/model_pbtxt.h"
#include "service/db/db.h"
#include "service/infer/model_seeds.h"
#include "service/infer/model_store.h"
#include "service/base/log.h"

#define COMPONENT "models"
/* Serialises seed imports between replicas ('gpjb' 'seed'). */
#define SEED_LOCK_KEY "7453171002767639908"

int64_t gj_seed_dir_version(const char *s)
{
    if (!s[0] || s[0] == '0' || strlen(s) > 9)
        return -1;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

static int is_kind(const char *path, mode_t kind)
{
    struct stat st;
    return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == kind;
}

/* 1 when (name, version) was imported before or is in the store anyway (then it is
 * recorded as imported); 0 when it is to be imported; -1 on error. */
static int already_there(PGconn *conn, const char *name, int64_t version)
{
    char v[24];
    snprintf(v, sizeof v, "%" PRId64, version);
    const char *p[2] = { name, v };
    PGresult *res = gj_db_exec(conn,
                               "INSERT INTO model_seeds (model, version)"
                               " SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM model_versions WHERE model = $1 AND version = $2)"
                               " ON CONFLICT DO NOTHING",
                               2, p, NULL);
    PQclear(res);
    res = res ? gj_db_exec(conn, "SELECT 1 FROM model_seeds WHERE model = $1 AND version = $2", 2, p, NULL) : NULL;
    if (!res)
        return -1;
    int there = PQntuples(res) > 0;
    PQclear(res);
    return there;
}

/* 1 when names[0..n) has name. */
static int listed(char (*names)[GJ_MODEL_FILE_NAME_MAX], size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

/* Adds dir's regular files but its config files (and those already listed) from n on. */
static size_t add_dir_files(const char *dir, struct gj_ms_new_file *files, char (*names)[GJ_MODEL_FILE_NAME_MAX],
                            char (*locals)[GJ_PATH_MAX], size_t n)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, GJ_MODEL_JSON_NAME) == 0 ||
            strcmp(e->d_name, GJ_MODEL_PBTXT_NAME) == 0 ||
            strlen(e->d_name) >= GJ_MODEL_FILE_NAME_MAX || listed(names, n, e->d_name))
            continue;
        if (n == GJ_MODEL_MAX_FILES || gj_path_join(locals[n], GJ_PATH_MAX, dir, e->d_name) != 0 ||
            !is_kind(locals[n], S_IFREG))
            continue;
        snprintf(names[n], GJ_MODEL_FILE_NAME_MAX, "%s", e->d_name);
        files[n].path = names[n];
        files[n].local = locals[n];
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

size_t gj_seed_version_files(const char *mdir, const char *vdir, struct gj_ms_new_file *files,
                             char (*names)[GJ_MODEL_FILE_NAME_MAX], char (*locals)[GJ_PATH_MAX], int *has_onnx)
{
    size_t n = add_dir_files(vdir, files, names, locals, 0);
    *has_onnx = listed(names, n, "model.onnx");
    /* Triton reads an output's label_filename in the model directory: the files there go
     * with each version, where the loaded model finds them beside model.onnx (a version's
     * own file of the same name wins). */
    return *has_onnx ? add_dir_files(mdir, files, names, locals, n) : n;
}

int gj_seed_import_version(PGconn *conn, const char *mdir, const char *name, int64_t version, const char *vdir)
{
    int there = already_there(conn, name, version);
    if (there != 0)
        return there < 0 ? -1 : 0;
    struct gj_ms_new_file files[GJ_MODEL_MAX_FILES];
    char (*names)[GJ_MODEL_FILE_NAME_MAX] = malloc(GJ_MODEL_MAX_FILES * sizeof *names);
    char (*locals)[GJ_PATH_MAX] = malloc(GJ_MODEL_MAX_FILES * sizeof *locals);
    char *mcfg = NULL, *vcfg = NULL, *stored = NULL;
    const char *which = NULL;
    struct gj_error err = { 0 };
    int rc = 0, has_onnx = 0;
    size_t n = names && locals ? gj_seed_version_files(mdir, vdir, files, names, locals, &has_onnx) : 0;
    if (!names || !locals) {
        rc = -1;
        goto out;
    }
    if (!has_onnx)
        goto out;   /* not a version: as the repository's scan */
    /* The store keeps JSON: a config.pbtxt is converted here (model_pbtxt.h). */
    if (gj_model_config_file_read(mdir, GJ_MODEL_CONFIG_MAX_BYTES, &mcfg, &which, &err) ||
        gj_model_config_file_read(vdir, GJ_MODEL_CONFIG_MAX_BYTES, &vcfg, &which, &err)) {
        gj_log_warn(COMPONENT, "seed %s version %" PRId64 ": %s: not imported", name, version, err.message);
        goto out;
    }
    int exists = gj_model_store_model_config(conn, name, &stored);
    if (exists < 0) {
        rc = -1;
        goto out;
    }
    if (!exists && !mcfg && !(mcfg = strdup("{}"))) {   /* no config: completed from the model at load */
        rc = -1;
        goto out;
    }
    char digest[65];
    if (gj_model_store_add_version(conn, name, version, exists ? NULL : mcfg, vcfg, files, n, digest, &err) != 0) {
        gj_log_warn(COMPONENT, "seed %s version %" PRId64 ": %s: not imported", name, version, err.message);
        rc = err.status >= 500 ? -1 : 0;
        goto out;
    }
    char v[24];
    snprintf(v, sizeof v, "%" PRId64, version);
    const char *p[2] = { name, v };
    rc = gj_db_cmd(conn, "INSERT INTO model_seeds (model, version) VALUES ($1, $2) ON CONFLICT DO NOTHING", 2, p);
    if (rc == 0)
        gj_log_info(COMPONENT, "model store: imported %s version %" PRId64 " from the seed directory", name, version);
out:
    free(names);
    free(locals);
    free(mcfg);
    free(vcfg);
    free(stored);
    return rc;
}

int gj_seed_each_version(const char *mdir, int (*fn)(void *ctx, int64_t version, const char *vdir), void *ctx)
{
    DIR *d = opendir(mdir);
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && d && (e = readdir(d)) != NULL) {
        int64_t v = gj_seed_dir_version(e->d_name);
        char vdir[GJ_PATH_MAX];
        if (v > 0 && gj_path_join(vdir, sizeof vdir, mdir, e->d_name) == 0 && is_kind(vdir, S_IFDIR))
            rc = fn(ctx, v, vdir);
    }
    if (d)
        closedir(d);
    return rc;
}

struct import_ctx {
    PGconn *conn;
    const char *mdir, *name;
};

static int import_one(void *ctx, int64_t version, const char *vdir)
{
    const struct import_ctx *c = ctx;
    return gj_seed_import_version(c->conn, c->mdir, c->name, version, vdir);
}

static int import_model(PGconn *conn, const char *seed_dir, const char *name)
{
    char mdir[GJ_PATH_MAX];
    if (gj_path_join(mdir, sizeof mdir, seed_dir, name) != 0 || !is_kind(mdir, S_IFDIR))
        return 0;
    struct import_ctx c = { conn, mdir, name };
    return gj_seed_each_version(mdir, import_one, &c);
}

int gj_model_store_import_seeds(PGconn *conn, const char *seed_dir)
{
    DIR *d = opendir(seed_dir);
    if (!d) {
        gj_log_warn(COMPONENT, "seed directory %s: %s: nothing imported", seed_dir, strerror(errno));
        return 0;
    }
    const char *key[1] = { SEED_LOCK_KEY };
    int rc = gj_db_cmd(conn, "SELECT pg_advisory_lock($1::bigint)", 1, key);
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL)
        if (gj_model_name_ok(e->d_name))
            rc = import_model(conn, seed_dir, e->d_name);
    closedir(d);
    if (gj_db_cmd(conn, "SELECT pg_advisory_unlock($1::bigint)", 1, key) != 0)
        rc = -1;
    return rc;
}
