/*
 * model_repo.c — the model repository: what it holds (scanned from a directory, or
 * declared by its host), list, resolve, load (with checks), unload. See model_repo.h.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "infer/serving/model_pbtxt.h"
#include "infer/serving/model_repo.h"

struct repo_version {
    int64_t version;
    enum gj_model_state state;
    char reason[512];
    gj_served_model *loaded;       /* the repository's reference while READY */
    int seen;                      /* scan bookkeeping */
    /* Declared repositories: */
    char *dir;                     /* where model.onnx is; NULL: not on this host */
    char *config;                  /* the version's own config.json text, or NULL */
    char *absent;                  /* dir NULL: why (the host's words) */
};

struct repo_model {
    char name[GJ_MODEL_NAME_MAX];
    struct repo_version *v;        /* ascending */
    size_t n;
    int seen;
    char *config;                  /* declared: the model's config.json text */
    /* The config's default_version, parsed once instead of at every request that names no
     * version; forgotten when the config may have changed (declared anew, a scan, a load,
     * an unload: forget_default). */
    int default_known;
    int64_t default_version;
};

struct gj_model_repo {
    char *dir;                     /* scanned from here; NULL: declared by the host */
    pthread_mutex_t mu;
    struct repo_model *m;          /* sorted by name */
    size_t n;
    int explicit_only;             /* 1: use never loads (gj_model_repo_set_load_on_use) */
};

const char *gj_model_state_name(enum gj_model_state s)
{
    switch (s) {
    case GJ_MODEL_READY: return "READY";
    case GJ_MODEL_FAILED: return "FAILED";
    case GJ_MODEL_UNLOADED: return "UNLOADED";
    case GJ_MODEL_AVAILABLE:
    default: return "AVAILABLE";
    }
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- the repository ---------------------------------------------------------------- */

/* A version directory name: a positive decimal integer without leading zeros. */
static int64_t parse_version(const char *s)
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

static int cmp_version(const void *a, const void *b)
{
    const struct repo_version *x = a, *y = b;
    return x->version < y->version ? -1 : x->version > y->version;
}

static struct repo_model *find_model(gj_model_repo *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->m[i].name, name) == 0)
            return &r->m[i];
    return NULL;
}

static struct repo_version *find_version(struct repo_model *m, int64_t v)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].version == v)
            return &m->v[i];
    return NULL;
}

/* Forgets the model's parsed default version: its config is read again when next needed. */
static void forget_default(struct repo_model *m)
{
    m->default_known = 0;
}

static void drop_version(struct repo_version *v)
{
    gj_served_model_release(v->loaded);
    v->loaded = NULL;
}

/* Drops the loaded model and frees what the version owns. */
static void version_free(struct repo_version *v)
{
    drop_version(v);
    free(v->dir);
    free(v->config);
    free(v->absent);
    v->dir = v->config = v->absent = NULL;
}

static void model_free(struct repo_model *m)
{
    for (size_t j = 0; j < m->n; j++)
        version_free(&m->v[j]);
    free(m->v);
    free(m->config);
    m->v = NULL;
    m->config = NULL;
    m->n = 0;
}

/* A new model named name, in name order; NULL with err. Caller holds r->mu. */
static struct repo_model *add_model(gj_model_repo *r, const char *name, struct gj_error *err)
{
    if (r->n >= GJ_MODEL_MAX_MODELS)
        return gj_error_set(err, "", "the repository has more than %d models",
                            GJ_MODEL_MAX_MODELS), NULL;
    struct repo_model *grown = realloc(r->m, (r->n + 1) * sizeof *grown);
    if (!grown)
        return gj_error_set(err, "", "out of memory"), NULL;
    r->m = grown;
    size_t at = 0;
    while (at < r->n && strcmp(r->m[at].name, name) < 0)
        at++;
    memmove(&r->m[at + 1], &r->m[at], (r->n - at) * sizeof *r->m);
    r->n++;
    struct repo_model *m = &r->m[at];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    return m;
}

static int scan_versions(gj_model_repo *r, struct repo_model *m, const char *mdir,
                         struct gj_error *err)
{
    for (size_t i = 0; i < m->n; i++)
        m->v[i].seen = 0;
    DIR *d = opendir(mdir);
    if (!d)
        return 0;   /* vanished since listed: no versions */
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        int64_t v = parse_version(e->d_name);
        if (v < 1)
            continue;
        char vdir[GJ_PATH_MAX], onnx[GJ_PATH_MAX];
        if (gj_path_join(vdir, sizeof vdir, mdir, e->d_name) ||
            gj_path_join(onnx, sizeof onnx, vdir, "model.onnx") || !is_file(onnx))
            continue;
        struct repo_version *rv = find_version(m, v);
        if (!rv) {
            if (m->n >= GJ_MODEL_MAX_VERSIONS) {
                rc = gj_error_set(err, "", "model '%s' has more than %d versions", m->name,
                                  GJ_MODEL_MAX_VERSIONS);
                break;
            }
            struct repo_version *grown = realloc(m->v, (m->n + 1) * sizeof *grown);
            if (!grown) {
                rc = gj_error_set(err, "", "out of memory");
                break;
            }
            m->v = grown;
            rv = &m->v[m->n++];
            memset(rv, 0, sizeof *rv);
            rv->version = v;
        }
        rv->seen = 1;
    }
    closedir(d);
    /* Versions gone from disk leave unless loaded. */
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (m->v[i].seen || m->v[i].loaded)
            m->v[k++] = m->v[i];
        else
            version_free(&m->v[i]);
    }
    m->n = k;
    if (m->n > 1)
        qsort(m->v, m->n, sizeof *m->v, cmp_version);
    (void)r;
    return rc;
}

static int any_loaded(const struct repo_model *m)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].loaded)
            return 1;
    return 0;
}

static int scan_locked(gj_model_repo *r, struct gj_error *err)
{
    DIR *d = opendir(r->dir);
    if (!d)
        return gj_error_set(err, "models_dir", "cannot open the model repository %s: %s", r->dir,
                            strerror(errno));
    for (size_t i = 0; i < r->n; i++) {
        r->m[i].seen = 0;
        forget_default(&r->m[i]);   /* config.json may have changed on disk */
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (!gj_model_name_ok(e->d_name))
            continue;
        char mdir[GJ_PATH_MAX];
        if (gj_path_join(mdir, sizeof mdir, r->dir, e->d_name) || !is_dir(mdir))
            continue;
        struct repo_model *m = find_model(r, e->d_name);
        if (!m && !(m = add_model(r, e->d_name, err))) {
            rc = -1;
            break;
        }
        m->seen = 1;
        if ((rc = scan_versions(r, m, mdir, err)) != 0)
            break;
    }
    closedir(d);
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (r->m[i].seen || any_loaded(&r->m[i]))
            r->m[k++] = r->m[i];
        else
            model_free(&r->m[i]);
    }
    r->n = k;
    return rc;
}

gj_model_repo *gj_model_repo_open(const char *dir, struct gj_error *err)
{
    if (!is_dir(dir))
        return gj_error_set(err, "models_dir", "the model repository %s is not a directory",
                            dir), NULL;
    gj_model_repo *r = calloc(1, sizeof *r);
    if (!r || !(r->dir = strdup(dir))) {
        free(r);
        return gj_error_set(err, "", "out of memory"), NULL;
    }
    pthread_mutex_init(&r->mu, NULL);
    if (scan_locked(r, err)) {
        gj_model_repo_free(r);
        return NULL;
    }
    return r;
}

gj_model_repo *gj_model_repo_new(void)
{
    gj_model_repo *r = calloc(1, sizeof *r);
    if (r)
        pthread_mutex_init(&r->mu, NULL);
    return r;
}

void gj_model_repo_free(gj_model_repo *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        model_free(&r->m[i]);
    free(r->m);
    pthread_mutex_destroy(&r->mu);
    free(r->dir);
    free(r);
}

int gj_model_repo_scan(gj_model_repo *r, struct gj_error *err)
{
    if (!r->dir)
        return 0;   /* declared: nothing to look at */
    pthread_mutex_lock(&r->mu);
    int rc = scan_locked(r, err);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

void gj_model_repo_set_load_on_use(gj_model_repo *r, int on)
{
    pthread_mutex_lock(&r->mu);
    r->explicit_only = !on;
    pthread_mutex_unlock(&r->mu);
}

const char *gj_model_repo_dir(const gj_model_repo *r)
{
    return r->dir;
}

size_t gj_model_repo_count(gj_model_repo *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

int gj_model_repo_name(gj_model_repo *r, size_t i, char *buf, size_t buflen)
{
    int rc = -1;
    pthread_mutex_lock(&r->mu);
    if (i < r->n) {
        snprintf(buf, buflen, "%s", r->m[i].name);
        rc = 0;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static int unknown_model(gj_model_repo *r, const char *name, struct gj_error *err)
{
    char list[400] = "";
    for (size_t i = 0; i < r->n && i < 10; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, r->m[i].name, sizeof list - strlen(list) - 1);
    }
    if (r->n > 10)
        strncat(list, ", ...", sizeof list - strlen(list) - 1);
    return gj_error_set(err, "model", "unknown model '%s'; the repository has: %s", name,
                        r->n ? list : "no models");
}

int gj_model_repo_versions(gj_model_repo *r, const char *name, struct gj_model_version_info *out,
                           size_t cap, size_t *n, struct gj_error *err)
{
    pthread_mutex_lock(&r->mu);
    struct repo_model *m = gj_model_name_ok(name) ? find_model(r, name) : NULL;
    if (!m) {
        unknown_model(r, name, err);
        pthread_mutex_unlock(&r->mu);
        return -1;
    }
    for (size_t i = 0; i < m->n && i < cap; i++) {
        out[i].version = m->v[i].version;
        out[i].state = m->v[i].state;
        snprintf(out[i].reason, sizeof out[i].reason, "%s", m->v[i].reason);
    }
    *n = m->n;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* The configured default version of a model (0: latest); 0 when the config is unreadable
 * (the load will say what is wrong with it). */
static int64_t config_default_read(const gj_model_repo *r, const struct repo_model *m)
{
    char mdir[GJ_PATH_MAX], *text = NULL;
    const char *which;
    struct gj_model_config cfg;
    struct gj_error err = { 0 };
    int rc;
    if (!r->dir) {
        rc = m->config ? gj_model_config_load_text(m->config, strlen(m->config), m->name, &cfg, &err) : -1;
    } else {
        if (gj_path_join(mdir, sizeof mdir, r->dir, m->name) ||
            gj_model_config_file_read(mdir, GJ_MODEL_CONFIG_MAX_BYTES, &text, &which, &err) || !text)
            return 0;
        rc = gj_model_config_load_text(text, strlen(text), m->name, &cfg, &err);
        free(text);
    }
    int64_t v = rc == 0 ? cfg.default_version : 0;
    gj_model_config_free(&cfg);
    return v;
}

/* config_default_read once per config. Caller holds r->mu. */
static int64_t config_default(const gj_model_repo *r, struct repo_model *m)
{
    if (!m->default_known) {
        m->default_version = config_default_read(r, m);
        m->default_known = 1;
    }
    return m->default_version;
}

static int64_t resolve_locked(gj_model_repo *r, const char *name, int64_t requested,
                              struct repo_model **mout, struct gj_error *err)
{
    struct repo_model *m = gj_model_name_ok(name) ? find_model(r, name) : NULL;
    if (!m)
        return unknown_model(r, name, err);
    *mout = m;
    if (m->n == 0)
        return gj_error_set(err, "model", "model '%s' has no version (no <version>/model.onnx)",
                            name);
    int64_t v = requested > 0 ? requested : config_default(r, m);
    if (v <= 0)
        return m->v[m->n - 1].version;
    if (!find_version(m, v)) {
        char list[200] = "";
        for (size_t i = 0; i < m->n && i < 16; i++) {
            char one[24];
            snprintf(one, sizeof one, "%s%lld", i ? ", " : "", (long long)m->v[i].version);
            strncat(list, one, sizeof list - strlen(list) - 1);
        }
        return gj_error_set(err, "version", "model '%s' has no version %lld%s; versions: %s",
                            name, (long long)v, requested > 0 ? "" : " (its default_version)",
                            list);
    }
    return v;
}

int64_t gj_model_repo_resolve(gj_model_repo *r, const char *name, int64_t requested,
                              struct gj_error *err)
{
    struct repo_model *m;
    pthread_mutex_lock(&r->mu);
    int64_t v = resolve_locked(r, name, requested, &m, err);
    pthread_mutex_unlock(&r->mu);
    return v;
}

/* The effective config.json text of a declared version: its own, else its model's. */
static const char *declared_config(const struct repo_model *m, const struct repo_version *rv)
{
    return rv->config ? rv->config : m->config;
}

/* Loads one version from where the repository has it. NULL with err. */
static gj_served_model *load_version(gj_model_repo *r, const struct repo_model *m,
                                     const struct repo_version *rv, struct gj_error *err)
{
    char mdir[GJ_PATH_MAX], onnx[GJ_PATH_MAX];
    if (r->dir) {
        if (gj_path_join(mdir, sizeof mdir, r->dir, m->name))
            return gj_error_set(err, "", "model path too long"), NULL;
        return gj_served_model_load(mdir, m->name, rv->version, err);
    }
    if (!rv->dir)
        return gj_error_set(err, "model", "model '%s' version %lld is not on this host: %s", m->name,
                            (long long)rv->version, rv->absent ? rv->absent : "its files are not here"), NULL;
    if (gj_path_join(onnx, sizeof onnx, rv->dir, "model.onnx"))
        return gj_error_set(err, "", "model path too long"), NULL;
    const char *cfg = declared_config(m, rv);
    return gj_served_model_load_parts(onnx, cfg, cfg ? strlen(cfg) : 0, m->name, rv->version, err);
}

/* Loads version rv of model m (or finds it loaded) into *out. Caller holds r->mu. */
static int load_locked(gj_model_repo *r, struct repo_model *m, struct repo_version *rv,
                       gj_served_model **out, struct gj_error *err)
{
    if (rv->loaded) {
        *out = gj_served_model_ref(rv->loaded);
        return 0;
    }
    /* Loading holds the lock: models load once, and a second request for the same
     * version waits for the first instead of loading it twice. */
    forget_default(m);   /* a (re)load reads the config anew */
    gj_served_model *sm = load_version(r, m, rv, err);
    if (!sm) {
        rv->state = GJ_MODEL_FAILED;
        snprintf(rv->reason, sizeof rv->reason, "%s", err ? err->message : "load failed");
        return -1;
    }
    rv->loaded = sm;
    rv->state = GJ_MODEL_READY;
    rv->reason[0] = '\0';
    *out = gj_served_model_ref(sm);
    return 0;
}

int gj_model_repo_load(gj_model_repo *r, const char *name, int64_t version,
                       gj_served_model **out, struct gj_error *err)
{
    struct repo_model *m;
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    int64_t v = resolve_locked(r, name, version, &m, err);
    int rc = v < 0 ? -1 : load_locked(r, m, find_version(m, v), out, err);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* The version a request names, looking on disk again when it is not known yet (added
 * since the last scan). Caller holds r->mu. */
static struct repo_version *resolve_rescan_locked(gj_model_repo *r, const char *name, int64_t version,
                                                  struct repo_model **mout, struct gj_error *err)
{
    struct repo_model *m = NULL;
    int64_t v = resolve_locked(r, name, version, &m, err);
    if (v < 0 && r->dir) {
        struct gj_error serr = { 0 };
        if (scan_locked(r, &serr) != 0)
            return NULL;
        v = resolve_locked(r, name, version, &m, err);
    }
    if (v < 0) {
        if (err)
            err->status = 404;
        return NULL;
    }
    *mout = m;
    return find_version(m, v);
}

static int not_ready(const char *name, const struct repo_version *rv, int explicit_only, struct gj_error *err)
{
    if (rv->state == GJ_MODEL_UNLOADED)
        gj_error_set(err, "model", "model '%s' version %lld is not ready: it was unloaded "
                     "(POST /v1/models/%s/load loads it again)", name, (long long)rv->version, name);
    else if (rv->state == GJ_MODEL_FAILED)
        gj_error_set(err, "model", "model '%s' version %lld is not ready: its last load failed: %s",
                     name, (long long)rv->version, rv->reason);
    else if (explicit_only)
        gj_error_set(err, "model", "model '%s' version %lld is not ready: it is not loaded, and models "
                     "load here only when asked (--model-control-mode): POST /v1/models/%s/load", name,
                     (long long)rv->version, name);
    else
        gj_error_set(err, "model", "model '%s' version %lld is not ready: it is not loaded (it loads "
                     "on its first inference request, or with POST /v1/models/%s/load)", name,
                     (long long)rv->version, name);
    if (err)
        err->status = 400;
    return -1;
}

/* A declared version whose files this host does not have: 503, the host's reason. */
static int not_here(const char *name, const struct repo_version *rv, struct gj_error *err)
{
    gj_error_set(err, "model", "model '%s' version %lld is not served here: %s", name,
                 (long long)rv->version, rv->absent ? rv->absent : "its files are not on this host");
    if (err)
        err->status = 503;
    return -1;
}

int gj_model_repo_acquire(gj_model_repo *r, const char *name, int64_t version,
                          gj_served_model **out, struct gj_error *err)
{
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    struct repo_model *m = NULL;
    struct repo_version *rv = resolve_rescan_locked(r, name, version, &m, err);
    int rc = -1;
    if (rv && rv->state == GJ_MODEL_UNLOADED)
        not_ready(name, rv, r->explicit_only, err);
    else if (rv && !r->dir && !rv->dir)
        not_here(name, rv, err);
    else if (rv && r->explicit_only && !rv->loaded)
        not_ready(name, rv, 1, err);
    else if (rv)
        rc = load_locked(r, m, rv, out, err);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int gj_model_repo_get_loaded(gj_model_repo *r, const char *name, int64_t version,
                             gj_served_model **out, struct gj_error *err)
{
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    struct repo_model *m = NULL;
    struct repo_version *rv = resolve_rescan_locked(r, name, version, &m, err);
    int rc = -1;
    if (rv && rv->loaded) {
        *out = gj_served_model_ref(rv->loaded);
        rc = 0;
    } else if (rv && !r->dir && !rv->dir && rv->state != GJ_MODEL_UNLOADED) {
        not_here(name, rv, err);
    } else if (rv) {
        not_ready(name, rv, r->explicit_only, err);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int gj_model_repo_config(gj_model_repo *r, const char *name, int64_t version,
                         struct gj_model_config *cfg, struct gj_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    pthread_mutex_lock(&r->mu);
    struct repo_model *m = NULL;
    struct repo_version *rv = resolve_rescan_locked(r, name, version, &m, err);
    int64_t v = rv ? rv->version : -1;
    if (rv && rv->loaded) {   /* loaded: as completed from the model */
        int rc = gj_model_config_copy(cfg, gj_served_model_config(rv->loaded));
        pthread_mutex_unlock(&r->mu);
        if (rc)
            memset(cfg, 0, sizeof *cfg);
        return rc ? gj_error_set(err, "", "out of memory") : 0;
    }
    if (rv && !r->dir) {   /* declared: the text is here */
        const char *text = declared_config(m, rv);
        int rc = gj_model_config_load_text(text, text ? strlen(text) : 0, name, cfg, err);
        pthread_mutex_unlock(&r->mu);
        return rc;
    }
    pthread_mutex_unlock(&r->mu);
    char mdir[GJ_PATH_MAX], *text = NULL;
    if (v < 0)
        return -1;
    if (gj_path_join(mdir, sizeof mdir, r->dir, name))
        return gj_error_set(err, "", "model path too long");
    if (gj_model_version_config_read(mdir, v, GJ_MODEL_CONFIG_MAX_BYTES, &text, err) != 0)
        return -1;
    int rc = gj_model_config_load_text(text, text ? strlen(text) : 0, name, cfg, err);
    free(text);
    return rc;
}

int gj_model_repo_unload(gj_model_repo *r, const char *name, int64_t version,
                         struct gj_error *err)
{
    struct repo_model *m;
    pthread_mutex_lock(&r->mu);
    int64_t v = resolve_locked(r, name, version, &m, err);
    int rc = -1;
    if (v > 0) {
        struct repo_version *rv = find_version(m, v);
        if (!rv->loaded) {
            gj_error_set(err, "version", "model '%s' version %lld is not loaded", name,
                         (long long)v);
        } else {
            drop_version(rv);
            forget_default(m);
            rv->state = GJ_MODEL_UNLOADED;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int gj_model_repo_fail(gj_model_repo *r, const char *name, int64_t version, const char *reason)
{
    int rc = -1;
    pthread_mutex_lock(&r->mu);
    struct repo_model *m = gj_model_name_ok(name) ? find_model(r, name) : NULL;
    struct repo_version *rv = m ? find_version(m, version) : NULL;
    if (rv) {
        drop_version(rv);
        forget_default(m);
        rv->state = GJ_MODEL_FAILED;
        snprintf(rv->reason, sizeof rv->reason, "%s", reason ? reason : "load failed");
        rc = 0;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

json_t *gj_model_repo_describe(gj_model_repo *r)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; arr && i < r->n; i++) {
        const struct repo_model *m = &r->m[i];
        json_t *vs = json_array();
        for (size_t j = 0; j < m->n; j++) {
            json_t *one = json_pack("{s:I, s:s}", "version", (json_int_t)m->v[j].version,
                                    "state", gj_model_state_name(m->v[j].state));
            if (one && m->v[j].reason[0])
                json_object_set_new(one, "reason", json_string(m->v[j].reason));
            json_array_append_new(vs, one);
        }
        struct gj_error err = { 0 };
        struct repo_model *mm;
        int64_t dv = resolve_locked(r, m->name, 0, &mm, &err);
        json_array_append_new(arr, json_pack("{s:s, s:o, s:o}", "name", m->name,
                                             "default_version",
                                             dv > 0 ? json_integer(dv) : json_null(),
                                             "versions", vs));
    }
    pthread_mutex_unlock(&r->mu);
    return arr;
}

/* ---- a declared repository ------------------------------------------------------------ */

static int same_text(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* strdup that leaves NULL as NULL; *oom set when a copy fails. */
static char *copy_or_null(const char *s, int *oom)
{
    char *c = s ? strdup(s) : NULL;
    if (s && !c)
        *oom = 1;
    return c;
}

static void versions_free(struct repo_version *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        version_free(&v[i]);
    free(v);
}

/* The declared versions as repository entries, ascending, each owning its strings. NULL
 * with err (a bad or repeated version, no memory). */
static struct repo_version *declared_versions(const char *name, const struct gj_model_version_decl *d,
                                              size_t n, struct gj_error *err)
{
    struct repo_version *v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return gj_error_set(err, "", "out of memory"), NULL;
    int oom = 0;
    for (size_t i = 0; i < n; i++) {
        v[i].version = d[i].version;
        v[i].dir = copy_or_null(d[i].dir, &oom);
        v[i].config = copy_or_null(d[i].config, &oom);
        v[i].absent = copy_or_null(d[i].dir ? NULL : d[i].absent, &oom);
    }
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_version);
    for (size_t i = 0; i < n && !oom; i++)
        if (v[i].version < 1 || v[i].version > 999999999 || (i && v[i].version == v[i - 1].version)) {
            gj_error_set(err, "version", "model '%s': version %lld is not a version (1 to "
                         "999999999, once each)", name, (long long)v[i].version);
            versions_free(v, n);
            return NULL;
        }
    if (oom) {
        versions_free(v, n);
        return gj_error_set(err, "", "out of memory"), NULL;
    }
    return v;
}

/* Takes over what an unchanged version had (its loaded model, state and reason) and
 * applies the declared unloaded flag. */
static void carry_state(struct repo_version *nv, struct repo_version *old, int unchanged, int unloaded)
{
    if (old && unchanged) {
        nv->state = old->state;
        memcpy(nv->reason, old->reason, sizeof nv->reason);
        nv->loaded = old->loaded;
        old->loaded = NULL;
    }
    if (unloaded) {
        drop_version(nv);
        nv->state = GJ_MODEL_UNLOADED;
        nv->reason[0] = '\0';
    } else if (nv->state == GJ_MODEL_UNLOADED) {
        nv->state = GJ_MODEL_AVAILABLE;
    }
}

int gj_model_repo_declare(gj_model_repo *r, const char *name, const char *config,
                          const struct gj_model_version_decl *decl, size_t n, struct gj_error *err)
{
    if (r->dir)
        return gj_error_set(err, "", "a repository scanned from a directory is not declared");
    if (!gj_model_name_ok(name))
        return gj_error_set(err, "model", "'%.130s' is not a model name", name);
    if (n > GJ_MODEL_MAX_VERSIONS)
        return gj_error_set(err, "", "model '%s' has more than %d versions", name, GJ_MODEL_MAX_VERSIONS);
    struct repo_version *nv = declared_versions(name, decl, n, err);
    int oom = 0;
    char *mcfg = copy_or_null(config, &oom);
    if (!nv || oom) {
        free(mcfg);
        if (nv)
            versions_free(nv, n);
        return nv ? gj_error_set(err, "", "out of memory") : -1;
    }
    pthread_mutex_lock(&r->mu);
    struct repo_model *m = find_model(r, name);
    if (!m && !(m = add_model(r, name, err))) {
        pthread_mutex_unlock(&r->mu);
        versions_free(nv, n);
        free(mcfg);
        return -1;
    }
    int model_cfg_same = same_text(m->config, mcfg);
    for (size_t i = 0; i < n; i++) {
        struct repo_version *old = find_version(m, nv[i].version);
        int unchanged = old && same_text(old->dir, nv[i].dir) && same_text(old->config, nv[i].config) &&
                        (nv[i].config || model_cfg_same);
        int unloaded = 0;
        for (size_t k = 0; k < n; k++)
            if (decl[k].version == nv[i].version)
                unloaded = decl[k].unloaded;
        carry_state(&nv[i], old, unchanged, unloaded);
    }
    versions_free(m->v, m->n);
    free(m->config);
    m->v = nv;
    m->n = n;
    m->config = mcfg;
    forget_default(m);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int gj_model_repo_remove(gj_model_repo *r, const char *name)
{
    pthread_mutex_lock(&r->mu);
    struct repo_model *m = gj_model_name_ok(name) ? find_model(r, name) : NULL;
    if (m) {
        model_free(m);
        size_t at = (size_t)(m - r->m);
        memmove(m, m + 1, (r->n - at - 1) * sizeof *m);
        r->n--;
    }
    pthread_mutex_unlock(&r->mu);
    return m ? 0 : -1;
}

int gj_model_repo_has(gj_model_repo *r, const char *name)
{
    if (!gj_model_name_ok(name))
        return 0;
    pthread_mutex_lock(&r->mu);
    int found = find_model(r, name) != NULL;
    if (!found && r->dir) {
        struct gj_error err = { 0 };
        found = scan_locked(r, &err) == 0 && find_model(r, name) != NULL;
    }
    pthread_mutex_unlock(&r->mu);
    return found;
}
