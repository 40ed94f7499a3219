/*
 * model_cache.c — model files on this host, by content (model_cache.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "infer/serving/model_repo.h"
#include "service/db/blobstore.h"
#include "service/infer/model_cache.h"
#include "service/base/log.h"

#define COMPONENT "models"
#define MAX_VERIFIED 4096

static char g_root[GJ_PATH_MAX];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
/* Digests whose directory this process has checked (or written) and found whole. */
static char (*g_verified)[65];
static size_t g_n_verified;
static unsigned g_seq;

static int is_verified_locked(const char *digest)
{
    for (size_t i = 0; i < g_n_verified; i++)
        if (strcmp(g_verified[i], digest) == 0)
            return 1;
    return 0;
}

static void set_verified(const char *digest, int yes)
{
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_n_verified; i++)
        if (strcmp(g_verified[i], digest) == 0) {
            if (!yes)
                memcpy(g_verified[i], g_verified[--g_n_verified], 65);
            pthread_mutex_unlock(&g_mu);
            return;
        }
    if (yes && g_verified && g_n_verified < MAX_VERIFIED)
        snprintf(g_verified[g_n_verified++], 65, "%s", digest);
    pthread_mutex_unlock(&g_mu);
}

static int is_verified(const char *digest)
{
    pthread_mutex_lock(&g_mu);
    int v = is_verified_locked(digest);
    pthread_mutex_unlock(&g_mu);
    return v;
}

/* Removes the leftovers of a process that died (.tmp-*, .upload-*). */
static void clean_leftovers(void)
{
    DIR *d = opendir(g_root);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, ".tmp-", 5) && strncmp(e->d_name, ".upload-", 8))
            continue;
        char path[GJ_PATH_MAX];
        if (gj_path_join(path, sizeof path, g_root, e->d_name) == 0 && gj_rm_rf(path) == 0)
            gj_log_info(COMPONENT, "model cache: removed the leftover %s", e->d_name);
    }
    if (d)
        closedir(d);
}

int gj_model_cache_open(const char *data_dir)
{
    if (gj_path_join(g_root, sizeof g_root, data_dir, "model-cache") != 0 || strlen(g_root) > GJ_PATH_MAX - 400) {
        gj_log_error(COMPONENT, "--data-dir is too long for the model cache");
        return -1;
    }
    if (gj_mkdir_p(g_root, 0755) != 0) {
        gj_log_error(COMPONENT, "cannot create the model cache %s: %s", g_root, strerror(errno));
        return -1;
    }
    pthread_mutex_lock(&g_mu);
    if (!g_verified)
        g_verified = calloc(MAX_VERIFIED, sizeof *g_verified);
    g_n_verified = 0;
    pthread_mutex_unlock(&g_mu);
    if (!g_verified) {
        gj_log_error(COMPONENT, "out of memory");
        return -1;
    }
    clean_leftovers();
    return 0;
}

const char *gj_model_cache_root(void)
{
    return g_root;
}

/* 1 when dir holds each of v's files with its size and SHA-256, else 0 (why in *why). */
static int files_match(const char *dir, const struct gj_ms_version *v, char *why, size_t why_len)
{
    for (size_t i = 0; i < v->n_files; i++) {
        const struct gj_ms_file *f = &v->files[i];
        char path[GJ_PATH_MAX], hex[65];
        uint64_t size = 0;
        if (gj_path_join(path, sizeof path, dir, f->path) != 0 || gj_file_size(path, &size) != 0) {
            snprintf(why, why_len, "%s is missing", f->path);
            return 0;
        }
        if (size != f->size || gj_model_file_sha256(path, hex) != 0 || strcmp(hex, f->sha256) != 0) {
            snprintf(why, why_len, "%s differs from the store (size or SHA-256)", f->path);
            return 0;
        }
    }
    return 1;
}

static int fsync_path(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* One file of the store into path, from wherever it lives (a large object or an object). */
static int export_file(PGconn *conn, const struct gj_ms_file *f, const char *path)
{
    struct gj_blob_info info;
    memset(&info, 0, sizeof info);
    snprintf(info.id, sizeof info.id, "model");   /* what the log names if the object is gone */
    info.size = f->size;
    info.lo_oid = f->lo_oid;
    snprintf(info.s3_key, sizeof info.s3_key, "%s", f->s3_key);
    return gj_blob_export_blob(conn, &info, path, NULL);
}

/* Fetches v's files into tmp (created here), checks them, syncs them. 0 or -1 with err. */
static int fetch_into(PGconn *conn, const struct gj_ms_version *v, const char *tmp, struct gj_error *err)
{
    if (mkdir(tmp, 0755) != 0)
        return gj_error_set(err, "", "cannot create %s: %s", tmp, strerror(errno));
    for (size_t i = 0; i < v->n_files; i++) {
        char path[GJ_PATH_MAX];
        if (gj_path_join(path, sizeof path, tmp, v->files[i].path) != 0 ||
            export_file(conn, &v->files[i], path) != 0)
            return gj_error_set(err, "", "%s could not be fetched from the model store", v->files[i].path);
        if (fsync_path(path, O_RDONLY) != 0)
            return gj_error_set(err, "", "cannot write %s: %s", path, strerror(errno));
    }
    char why[200];
    if (!files_match(tmp, v, why, sizeof why))
        return gj_error_set(err, "", "the fetched files do not match the model store: %s", why);
    return fsync_path(tmp, O_RDONLY | O_DIRECTORY) == 0 ? 0 : gj_error_set(err, "", "cannot sync %s", tmp);
}

int gj_model_cache_get(PGconn *conn, const struct gj_ms_version *v, char *dir, struct gj_error *err)
{
    if (gj_path_join(dir, GJ_PATH_MAX, g_root, v->digest) != 0)
        return gj_error_set(err, "", "model cache path too long");
    struct stat st;
    if (stat(dir, &st) == 0 && is_verified(v->digest))
        return 0;
    char why[200];
    if (stat(dir, &st) == 0) {
        if (files_match(dir, v, why, sizeof why)) {
            set_verified(v->digest, 1);
            return 0;
        }
        gj_log_warn(COMPONENT, "model cache %s: %s: fetched again", v->digest, why);
        gj_rm_rf(dir);
    }
    char tmp[GJ_PATH_MAX];
    pthread_mutex_lock(&g_mu);
    unsigned seq = ++g_seq;
    pthread_mutex_unlock(&g_mu);
    if (snprintf(tmp, sizeof tmp, "%s/.tmp-%.64s-%ld-%u", g_root, v->digest, (long)getpid(), seq) >=
        (int)sizeof tmp)
        return gj_error_set(err, "", "model cache path too long");
    int rc = fetch_into(conn, v, tmp, err);
    if (rc == 0 && rename(tmp, dir) != 0 && errno != EEXIST && errno != ENOTEMPTY)
        rc = gj_error_set(err, "", "cannot put %s in place: %s", dir, strerror(errno));
    gj_rm_rf(tmp);   /* what is left when it failed, or lost the rename to an equal copy */
    if (rc == 0)
        set_verified(v->digest, 1);
    return rc;
}

int gj_model_cache_stage(const char *tag, char *dir)
{
    char files[GJ_PATH_MAX];
    if (snprintf(dir, GJ_PATH_MAX, "%s/.upload-%s", g_root, tag) >= GJ_PATH_MAX ||
        gj_path_join(files, sizeof files, dir, "files") != 0)
        return -1;
    if (gj_mkdir_p(files, 0755) != 0) {
        gj_log_error(COMPONENT, "cannot stage an upload in %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

int gj_model_cache_check_staged(const char *staged, const char *config, size_t len, const char *name,
                                int64_t version, struct gj_error *err)
{
    char onnx[GJ_PATH_MAX + 32];
    snprintf(onnx, sizeof onnx, "%s/files/model.onnx", staged);
    gj_served_model *m = gj_served_model_load_parts(onnx, config, len, name, version, err);
    if (!m) {
        err->status = 422;
        return -1;
    }
    gj_served_model_release(m);
    return 0;
}

int gj_model_cache_adopt(const char *staged, const char *digest)
{
    char files[GJ_PATH_MAX], dir[GJ_PATH_MAX];
    if (gj_path_join(files, sizeof files, staged, "files") != 0 || gj_path_join(dir, sizeof dir, g_root, digest) != 0)
        return -1;
    int rc = rename(files, dir) == 0 || errno == EEXIST || errno == ENOTEMPTY ? 0 : -1;
    if (rc != 0)
        gj_log_warn(COMPONENT, "model cache: cannot adopt %s: %s (it is fetched instead)", staged, strerror(errno));
    else if (fsync_path(g_root, O_RDONLY | O_DIRECTORY) == 0)
        set_verified(digest, 1);
    gj_rm_rf(staged);
    return rc;
}

static int kept(const struct gj_ms_snapshot *s, const char *digest)
{
    for (size_t i = 0; i < s->n_models; i++)
        for (size_t j = 0; j < s->models[i].n_versions; j++)
            if (strcmp(s->models[i].versions[j].digest, digest) == 0)
                return 1;
    return 0;
}

void gj_model_cache_prune(const struct gj_ms_snapshot *keep)
{
    DIR *d = opendir(g_root);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strlen(e->d_name) != 64 || kept(keep, e->d_name))
            continue;
        char path[GJ_PATH_MAX];
        set_verified(e->d_name, 0);
        if (gj_path_join(path, sizeof path, g_root, e->d_name) == 0 && gj_rm_rf(path) == 0)
            gj_log_info(COMPONENT, "model cache: removed %.12s... (no version has it any more)", e->d_name);
    }
    if (d)
        closedir(d);
}
