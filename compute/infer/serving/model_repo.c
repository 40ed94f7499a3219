/*
 * model_repo.c — the model repository: scan, list, load (with checks), unload.
 * See model_repo.h.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <openssl/evp.h>

#include "common/fsutil.h"
#include "infer/onnx/onnx_model.h"
#include "infer/serving/model_repo.h"

struct gj_served_model {
    int refs;                      /* atomic */
    char name[GJ_MODEL_NAME_MAX];
    int64_t version;
    struct gj_model_config cfg;
    onnx_model *onnx;
    size_t in_idx, out_idx;
    uint64_t file_bytes;
    char digest[65];               /* SHA-256 of model.onnx, hex */
    /* The trial session (batch 1): what a GPU batcher's reservation is estimated from. */
    uint64_t const_bytes, sample_bytes;   /* weights; activations + inputs + outputs */
};

struct repo_version {
    int64_t version;
    enum gj_model_state state;
    char reason[512];
    gj_served_model *loaded;       /* the repository's reference while READY */
    int seen;                      /* scan bookkeeping */
};

struct repo_model {
    char name[GJ_MODEL_NAME_MAX];
    struct repo_version *v;        /* ascending */
    size_t n;
    int seen;
};

struct gj_model_repo {
    char *dir;
    pthread_mutex_t mu;
    struct repo_model *m;          /* sorted by name */
    size_t n;
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

/* ---- a loaded model ---------------------------------------------------------------- */

static const char *dims_text(char *buf, size_t n, int rank, const int64_t *dims)
{
    size_t off = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && off < n; i++) {
        if (dims[i] < 0)
            off += (size_t)snprintf(buf + off, n - off, "%sN", i ? ", " : "");
        else
            off += (size_t)snprintf(buf + off, n - off, "%s%lld", i ? ", " : "",
                                    (long long)dims[i]);
    }
    if (off < n)
        snprintf(buf + off, n - off, "]");
    return buf;
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

/* Checks the config against the model; fills the input/output indices. */
static int check_against_model(gj_served_model *m, struct gj_error *err)
{
    const struct gj_model_config *cfg = &m->cfg;
    onnx_model *om = m->onnx;
    char a[96], b[96];
    size_t ni = onnx_model_num_inputs(om), no = onnx_model_num_outputs(om);
    if (ni != 1) {
        return gj_error_set(err, "model.onnx", "model.onnx has %zu inputs; only models with one "
                            "image input are served", ni);
    }
    const struct onnx_io_desc *in = onnx_model_input(om, 0);
    if (strcmp(in->name, cfg->input_name) != 0)
        return gj_error_set(err, "input.name", "config.json: input.name is '%s' but the model's "
                            "input is named '%.200s'", cfg->input_name, in->name);
    m->in_idx = 0;
    if (in->elem_type != ONNX_ELEM_FLOAT)
        return gj_error_set(err, "input", "the model's input '%s' is not float32 (FP32)",
                            cfg->input_name);
    int64_t want_in[4] = { -1, cfg->input_dims[0], cfg->input_dims[1], cfg->input_dims[2] };
    if (in->rank != 4)
        return gj_error_set(err, "input.dims", "config.json: input.dims %s (with the batch: "
                            "NCHW) but the model's input '%s' has rank %d %s",
                            dims_text(a, sizeof a, 3, cfg->input_dims), cfg->input_name, in->rank,
                            dims_text(b, sizeof b, in->rank, in->dims));
    for (int i = 1; i < 4; i++)
        if (in->dims[i] >= 0 && in->dims[i] != want_in[i])
            return gj_error_set(err, "input.dims", "config.json: input.dims is %s but the "
                                "model's input '%s' is %s", dims_text(a, sizeof a, 3,
                                cfg->input_dims), cfg->input_name,
                                dims_text(b, sizeof b, in->rank, in->dims));
    if (in->dims[0] >= 0 && cfg->max_batch_size > in->dims[0])
        return gj_error_set(err, "max_batch_size", "config.json: max_batch_size is %d but the "
                            "model's batch dimension is fixed at %lld", cfg->max_batch_size,
                            (long long)in->dims[0]);
    if (in->dims[0] > 1)
        return gj_error_set(err, "input", "the model's batch dimension is fixed at %lld; export "
                            "it with a dynamic batch dimension (or 1)", (long long)in->dims[0]);

    size_t oi = no;
    for (size_t i = 0; i < no; i++)
        if (strcmp(onnx_model_output(om, i)->name, cfg->output_name) == 0)
            oi = i;
    if (oi == no) {
        char names[300] = "";
        for (size_t i = 0; i < no && i < 8; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, onnx_model_output(om, i)->name, sizeof names - strlen(names) - 1);
        }
        return gj_error_set(err, "output.name", "config.json: output.name is '%s' but the "
                            "model's outputs are: %s", cfg->output_name, names);
    }
    m->out_idx = oi;
    const struct onnx_io_desc *out = onnx_model_output(om, oi);
    if (out->elem_type != ONNX_ELEM_FLOAT)
        return gj_error_set(err, "output", "the model's output '%s' is not float32 (FP32)",
                            cfg->output_name);
    /* The runtime may leave an output's shape unknown (rank -1) until a session infers it;
     * the trial session below checks it then. */
    if (out->rank >= 0 && (out->rank != 2 || (out->dims[1] >= 0 &&
                                              out->dims[1] != cfg->n_outputs)))
        return gj_error_set(err, "output.dims", "config.json: output.dims is [%lld] (%zu labels) "
                            "but the model's output '%s' is %s", (long long)cfg->n_outputs,
                            cfg->n_labels, cfg->output_name,
                            dims_text(b, sizeof b, out->rank, out->dims));

    /* A trial session: shapes that only show up in shape inference, ops the backend lacks. */
    struct onnx_session_options opt = { .batch = 1, .threads = 1, .backend = NULL };
    struct gj_error serr = { 0 };
    onnx_session *s = onnx_session_create(om, &opt, &serr);
    if (!s)
        return gj_error_set(err, "model.onnx", "model.onnx cannot run: %s", serr.message);
    const struct onnx_io_desc *so = onnx_session_output(s, oi);
    int ok = so->rank == 2 && so->dims[0] == 1 && so->dims[1] == cfg->n_outputs;
    struct onnx_session_stats st;
    onnx_session_get_stats(s, &st);
    m->const_bytes = st.const_bytes;
    m->sample_bytes = st.arena_bytes + onnx_session_input_bytes(s, 0);
    for (size_t i = 0; i < no; i++)
        m->sample_bytes += onnx_session_output_bytes(s, i);
    if (!ok)
        gj_error_set(err, "output.dims", "config.json: output.dims is [%lld] but for a batch of "
                     "1 the model's output '%s' is %s", (long long)cfg->n_outputs,
                     cfg->output_name, dims_text(b, sizeof b, so->rank, so->dims));
    onnx_session_free(s);
    return ok ? 0 : -1;
}

/* SHA-256 of a file, streamed, as hex. 0 or -1 (errno). */
static int file_sha256(const char *path, char hex[65])
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    unsigned char buf[1 << 16];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0)
        ok = EVP_DigestUpdate(ctx, buf, n) == 1;
    ok = ok && !ferror(f);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &len) == 1 && len == 32;
    EVP_MD_CTX_free(ctx);
    fclose(f);
    for (unsigned i = 0; ok && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return ok ? 0 : -1;
}

static void served_free(gj_served_model *m)
{
    if (!m)
        return;
    onnx_model_free(m->onnx);
    gj_model_config_free(&m->cfg);
    free(m);
}

/* A version's config.json: <version>/config.json when there is one, else the model's. 0 or
 * -1 (path too long). */
static int version_config_path(const char *model_dir, int64_t version, char *path, size_t n)
{
    char vdir[4096], vname[32];
    snprintf(vname, sizeof vname, "%lld", (long long)version);
    if (gj_path_join(vdir, sizeof vdir, model_dir, vname) || gj_path_join(path, n, vdir, "config.json"))
        return -1;
    return is_file(path) ? 0 : gj_path_join(path, n, model_dir, "config.json");
}

gj_served_model *gj_served_model_load(const char *model_dir, const char *name, int64_t version,
                                      struct gj_error *err)
{
    char vdir[4096], cfg_path[4096], onnx_path[4096], vname[32];
    snprintf(vname, sizeof vname, "%lld", (long long)version);
    if (gj_path_join(vdir, sizeof vdir, model_dir, vname) ||
        gj_path_join(onnx_path, sizeof onnx_path, vdir, "model.onnx") ||
        version_config_path(model_dir, version, cfg_path, sizeof cfg_path))
        return gj_error_set(err, "", "model path too long"), NULL;
    if (!is_file(onnx_path))
        return gj_error_set(err, "version", "model '%s' has no version %lld (no %lld/model.onnx)",
                            name, (long long)version, (long long)version), NULL;
    if (!is_file(cfg_path))
        return gj_error_set(err, "config.json", "model '%s' has no config.json", name), NULL;

    gj_served_model *m = calloc(1, sizeof *m);
    if (!m)
        return gj_error_set(err, "", "out of memory"), NULL;
    m->refs = 1;
    snprintf(m->name, sizeof m->name, "%s", name);
    m->version = version;
    if (gj_model_config_load(cfg_path, name, &m->cfg, err)) {
        served_free(m);
        return NULL;
    }
    uint64_t bytes = 0;
    gj_file_size(onnx_path, &bytes);
    m->file_bytes = bytes;
    if (file_sha256(onnx_path, m->digest) != 0) {
        gj_error_set(err, "model.onnx", "model.onnx of '%s' version %lld cannot be read: %s", name,
                     (long long)version, strerror(errno));
        served_free(m);
        return NULL;
    }
    struct gj_error oerr = { 0 };
    m->onnx = onnx_model_load_file(onnx_path, 0, &oerr);
    if (!m->onnx) {
        gj_error_set(err, "model.onnx", "model.onnx of '%s' version %lld: %s", name,
                     (long long)version, oerr.message);
        served_free(m);
        return NULL;
    }
    if (check_against_model(m, err)) {
        served_free(m);
        return NULL;
    }
    return m;
}

gj_served_model *gj_served_model_ref(gj_served_model *m)
{
    if (m)
        __atomic_add_fetch(&m->refs, 1, __ATOMIC_RELAXED);
    return m;
}

void gj_served_model_release(gj_served_model *m)
{
    if (m && __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) == 0)
        served_free(m);
}

const struct gj_model_config *gj_served_model_config(const gj_served_model *m) { return &m->cfg; }
const char *gj_served_model_name(const gj_served_model *m) { return m->name; }
int64_t gj_served_model_version(const gj_served_model *m) { return m->version; }
void *gj_served_model_onnx(const gj_served_model *m) { return m->onnx; }
size_t gj_served_model_input_index(const gj_served_model *m) { return m->in_idx; }
size_t gj_served_model_output_index(const gj_served_model *m) { return m->out_idx; }
uint64_t gj_served_model_file_bytes(const gj_served_model *m) { return m->file_bytes; }
const char *gj_served_model_digest(const gj_served_model *m) { return m->digest; }

uint64_t gj_served_model_device_estimate(const gj_served_model *m, int max_batch, int instances)
{
    /* Each instance holds at least one session of the largest batch: its weights and its
     * activations, which grow with the batch. */
    uint64_t one = m->const_bytes + (uint64_t)(max_batch > 0 ? max_batch : 1) * m->sample_bytes;
    return one * (uint64_t)(instances > 0 ? instances : 1);
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

static int cmp_model(const void *a, const void *b)
{
    return strcmp(((const struct repo_model *)a)->name, ((const struct repo_model *)b)->name);
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

static void drop_version(struct repo_version *v)
{
    gj_served_model_release(v->loaded);
    v->loaded = NULL;
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
        char vdir[4096], onnx[4096];
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
    for (size_t i = 0; i < r->n; i++)
        r->m[i].seen = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (!gj_model_name_ok(e->d_name))
            continue;
        char mdir[4096];
        if (gj_path_join(mdir, sizeof mdir, r->dir, e->d_name) || !is_dir(mdir))
            continue;
        struct repo_model *m = find_model(r, e->d_name);
        if (!m) {
            if (r->n >= GJ_MODEL_MAX_MODELS) {
                rc = gj_error_set(err, "", "the repository has more than %d models",
                                  GJ_MODEL_MAX_MODELS);
                break;
            }
            struct repo_model *grown = realloc(r->m, (r->n + 1) * sizeof *grown);
            if (!grown) {
                rc = gj_error_set(err, "", "out of memory");
                break;
            }
            r->m = grown;
            m = &r->m[r->n++];
            memset(m, 0, sizeof *m);
            memcpy(m->name, e->d_name, strlen(e->d_name) + 1);   /* < GJ_MODEL_NAME_MAX */
        }
        m->seen = 1;
        if ((rc = scan_versions(r, m, mdir, err)) != 0)
            break;
    }
    closedir(d);
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (r->m[i].seen || any_loaded(&r->m[i])) {
            r->m[k++] = r->m[i];
        } else {
            for (size_t j = 0; j < r->m[i].n; j++)
                drop_version(&r->m[i].v[j]);
            free(r->m[i].v);
        }
    }
    r->n = k;
    if (r->n > 1)
        qsort(r->m, r->n, sizeof *r->m, cmp_model);
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

void gj_model_repo_free(gj_model_repo *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        for (size_t j = 0; j < r->m[i].n; j++)
            drop_version(&r->m[i].v[j]);
        free(r->m[i].v);
    }
    free(r->m);
    pthread_mutex_destroy(&r->mu);
    free(r->dir);
    free(r);
}

int gj_model_repo_scan(gj_model_repo *r, struct gj_error *err)
{
    pthread_mutex_lock(&r->mu);
    int rc = scan_locked(r, err);
    pthread_mutex_unlock(&r->mu);
    return rc;
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
static int64_t config_default(const gj_model_repo *r, const char *name)
{
    char mdir[4096], path[4096];
    struct gj_model_config cfg;
    struct gj_error err = { 0 };
    if (gj_path_join(mdir, sizeof mdir, r->dir, name) ||
        gj_path_join(path, sizeof path, mdir, "config.json") || !is_file(path))
        return 0;
    int64_t v = gj_model_config_load(path, name, &cfg, &err) == 0 ? cfg.default_version : 0;
    gj_model_config_free(&cfg);
    return v;
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
    int64_t v = requested > 0 ? requested : config_default(r, name);
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

/* Loads version rv of model m (or finds it loaded) into *out. Caller holds r->mu. */
static int load_locked(gj_model_repo *r, struct repo_version *rv, const char *name,
                       gj_served_model **out, struct gj_error *err)
{
    if (rv->loaded) {
        *out = gj_served_model_ref(rv->loaded);
        return 0;
    }
    char mdir[4096];
    if (gj_path_join(mdir, sizeof mdir, r->dir, name))
        return gj_error_set(err, "", "model path too long");
    /* Loading holds the lock: models load once, and a second request for the same
     * version waits for the first instead of loading it twice. */
    gj_served_model *sm = gj_served_model_load(mdir, name, rv->version, err);
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
    int rc = v < 0 ? -1 : load_locked(r, find_version(m, v), name, out, err);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* The version a request names, looking on disk again when it is not known yet (added
 * since the last scan). Caller holds r->mu. */
static struct repo_version *resolve_rescan_locked(gj_model_repo *r, const char *name, int64_t version,
                                                  struct gj_error *err)
{
    struct repo_model *m;
    int64_t v = resolve_locked(r, name, version, &m, err);
    if (v < 0) {
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
    return find_version(m, v);
}

static int not_ready(const char *name, const struct repo_version *rv, struct gj_error *err)
{
    if (rv->state == GJ_MODEL_UNLOADED)
        gj_error_set(err, "model", "model '%s' version %lld is not ready: it was unloaded "
                     "(POST /v1/models/%s/load loads it again)", name, (long long)rv->version, name);
    else if (rv->state == GJ_MODEL_FAILED)
        gj_error_set(err, "model", "model '%s' version %lld is not ready: its last load failed: %s",
                     name, (long long)rv->version, rv->reason);
    else
        gj_error_set(err, "model", "model '%s' version %lld is not ready: it is not loaded (it loads "
                     "on its first inference request, or with POST /v1/models/%s/load)", name,
                     (long long)rv->version, name);
    if (err)
        err->status = 400;
    return -1;
}

int gj_model_repo_acquire(gj_model_repo *r, const char *name, int64_t version,
                          gj_served_model **out, struct gj_error *err)
{
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    struct repo_version *rv = resolve_rescan_locked(r, name, version, err);
    int rc = -1;
    if (rv && rv->state == GJ_MODEL_UNLOADED)
        not_ready(name, rv, err);
    else if (rv)
        rc = load_locked(r, rv, name, out, err);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int gj_model_repo_get_loaded(gj_model_repo *r, const char *name, int64_t version,
                             gj_served_model **out, struct gj_error *err)
{
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    struct repo_version *rv = resolve_rescan_locked(r, name, version, err);
    int rc = -1;
    if (rv && rv->loaded) {
        *out = gj_served_model_ref(rv->loaded);
        rc = 0;
    } else if (rv) {
        not_ready(name, rv, err);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int gj_model_repo_config(gj_model_repo *r, const char *name, int64_t version,
                         struct gj_model_config *cfg, struct gj_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    pthread_mutex_lock(&r->mu);
    struct repo_version *rv = resolve_rescan_locked(r, name, version, err);
    int64_t v = rv ? rv->version : -1;
    pthread_mutex_unlock(&r->mu);
    char mdir[4096], path[4096];
    if (v < 0)
        return -1;
    if (gj_path_join(mdir, sizeof mdir, r->dir, name) || version_config_path(mdir, v, path, sizeof path))
        return gj_error_set(err, "", "model path too long");
    return gj_model_config_load(path, name, cfg, err);
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
