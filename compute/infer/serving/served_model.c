/*
 * served_model.c — one loaded model version: its config, its ONNX model checked against
 * that config (names, element types, shapes, a trial session), its content digest and
 * its device-memory estimate. Reference-counted. See model_repo.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <openssl/evp.h>

#include "common/fsutil.h"
#include "infer/onnx/onnx_model.h"
#include "infer/serving/model_config_internal.h"
#include "infer/serving/model_pbtxt.h"
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
    char ***out_labels;            /* [config output]: its label file's lines, or NULL */
    size_t *n_out_labels;
    int trial_exact;               /* the trial session's shapes are the model's (no open size
                                    * besides the batch was set to 1 for it) */
};

#define LABEL_FILE_MAX (4u << 20)

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A label file: one label a line (Triton's label_filename), a trailing empty line dropped. */
static int read_labels(const char *path, char ***out, size_t *n, struct gj_error *err)
{
    char *text = NULL;
    size_t len = 0;
    if (gj_read_file(path, LABEL_FILE_MAX, &text, &len) != 0)
        return gj_error_set(err, "label_filename", "cannot read the label file %s: %s", path,
                            strerror(errno));
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    char **l = calloc(lines + 1, sizeof *l);
    size_t k = 0;
    int oom = l == NULL;
    for (char *p = text, *end = text + len; !oom && p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t w = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (w && p[w - 1] == '\r')
            w--;
        oom = !(l[k++] = strndup(p, w));
        p = nl ? nl + 1 : end;
    }
    free(text);
    if (oom) {
        for (size_t i = 0; l && i < k; i++)
            free(l[i]);
        free(l);
        return gj_error_set(err, "", "out of memory");
    }
    *out = l;
    *n = k;
    return 0;
}

/* The label files of the config's outputs: next to model.onnx, else in its parent (the model's
 * directory, where Triton keeps them). */
static int read_label_files(gj_served_model *m, const char *onnx_path, struct gj_error *err)
{
    const struct gj_model_config *cfg = &m->cfg;
    m->out_labels = calloc(cfg->n_output_tensors + 1, sizeof *m->out_labels);
    m->n_out_labels = calloc(cfg->n_output_tensors + 1, sizeof *m->n_out_labels);
    if (!m->out_labels || !m->n_out_labels)
        return gj_error_set(err, "", "out of memory");
    char dir[GJ_PATH_MAX], parent[GJ_PATH_MAX], path[GJ_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", onnx_path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    if (gj_path_join(parent, sizeof parent, dir, ".."))
        return gj_error_set(err, "label_filename", "label file path too long");
    for (size_t i = 0; i < cfg->n_output_tensors; i++) {
        const char *f = cfg->outputs[i].label_filename;
        if (!f[0])
            continue;
        if (gj_path_join(path, sizeof path, dir, f) || (!is_file(path) &&
                                                       gj_path_join(path, sizeof path, parent, f)))
            return gj_error_set(err, "label_filename", "label file path too long");
        if (read_labels(path, &m->out_labels[i], &m->n_out_labels[i], err)) {
            char why[sizeof err->message];
            snprintf(why, sizeof why, "%s", err ? err->message : "");
            return gj_error_set(err, "label_filename", "output '%.100s': %.380s",
                                cfg->outputs[i].name, why);
        }
    }
    return 0;
}

/* Sizes for the symbolic dimensions besides the batch in a trial session: 1 each. */
static struct onnx_io_desc *trial_shapes(const onnx_model *om, int batching, size_t *n)
{
    size_t ni = onnx_model_num_inputs(om);
    struct onnx_io_desc *d = calloc(ni ? ni : 1, sizeof *d);
    *n = 0;
    for (size_t i = 0; d && i < ni; i++) {
        const struct onnx_io_desc *mi = onnx_model_input(om, i);
        struct onnx_io_desc one = *mi;
        int any = 0;
        for (int k = 0; k < mi->rank; k++) {
            int sym = k >= batching && mi->dims[k] < 0;
            one.dims[k] = sym ? 1 : -1;
            any |= sym;
        }
        if (any)
            d[(*n)++] = one;
    }
    return d;
}

/* Outputs whose type or shape the model leaves to shape inference, from the trial session:
 * completed ones get them, given ones are checked. Outputs of a batching model have the
 * batch first. */
static int complete_outputs(gj_served_model *m, onnx_session *s, struct gj_error *err)
{
    struct gj_model_config *cfg = &m->cfg;
    int batching = !cfg->no_batch;
    char b[160], c[160];
    for (size_t i = 0; i < onnx_model_num_outputs(m->onnx); i++) {
        const struct onnx_io_desc *so = onnx_session_output(s, i), *mo = onnx_model_output(m->onnx, i);
        if (batching && (so->rank < 1 || so->dims[0] != 1))
            return gj_error_set(err, "max_batch_size", "the model's output '%s' is %s for a batch "
                                "of 1: its first dimension is not the batch (give max_batch_size 0)",
                                so->name, gj_dims_text(b, sizeof b, so->rank, so->dims, 1));
        for (size_t j = 0; j < cfg->n_output_tensors; j++) {
            struct gj_tensor_config *t = &cfg->outputs[j];
            if (strcmp(t->name, so->name) != 0)
                continue;
            if (t->elem_type && t->elem_type != so->elem_type)
                return gj_error_set(err, "output", "config: output '%s' is %s but the model's is %s",
                                    t->name, gj_cfg_triton_type(t->elem_type),
                                    gj_cfg_triton_type(so->elem_type));
            t->elem_type = so->elem_type;
            if (mo->rank >= 0)
                continue;
            if (t->rank < 0) {   /* completed: the session's sizes when no input size was
                                  * guessed for it, else left open */
                t->rank = so->rank - batching;
                for (int k = 0; k < t->rank; k++)
                    t->dims[k] = m->trial_exact ? so->dims[k + batching] : -1;
                if (batching && t->rank == 0) {   /* Triton: dims [1], reshape [] */
                    t->rank = 1;
                    t->dims[0] = 1;
                    t->has_reshape = 1;
                }
            } else if ((t->has_reshape ? t->reshape_rank : t->rank) != so->rank - batching) {
                return gj_error_set(err, "output", "config: output '%s' has dims %s but the model's "
                                    "is %s", t->name, gj_dims_text(c, sizeof c, t->rank, t->dims, 1),
                                    gj_dims_text(b, sizeof b, so->rank, so->dims, 1));
            }
        }
    }
    return 0;
}

/* The image output of a batch of 1 is [1, N]. */
static int check_image_output(const gj_served_model *m, onnx_session *s, struct gj_error *err)
{
    const struct gj_model_config *cfg = &m->cfg;
    const struct onnx_io_desc *so = onnx_session_output(s, m->out_idx);
    char b[160];
    if (so->rank != 2 || so->dims[0] != 1 || so->dims[1] != cfg->n_outputs)
        return gj_error_set(err, "output.dims", "config.json: output.dims is [%lld] but for a batch "
                            "of 1 the model's output '%s' is %s", (long long)cfg->n_outputs,
                            cfg->output_name, gj_dims_text(b, sizeof b, so->rank, so->dims, 1));
    return 0;
}

/* A trial session (batch 1): shapes that only show up in shape inference, ops the backend
 * lacks; and the sizes a GPU batcher's reservation is estimated from. NULL with err. */
static onnx_session *trial_session(gj_served_model *m, struct gj_error *err)
{
    int batching = !m->cfg.no_batch;
    size_t n_shapes = 0;
    struct onnx_io_desc *shapes = trial_shapes(m->onnx, batching, &n_shapes);
    if (!shapes)
        return gj_error_set(err, "", "out of memory"), NULL;
    m->trial_exact = n_shapes == 0;
    struct onnx_session_options opt = { .batch = batching, .no_batch = !batching, .threads = 1,
                                        .input_shapes = shapes, .n_input_shapes = n_shapes };
    struct gj_error serr = { 0 };
    onnx_session *s = onnx_session_create(m->onnx, &opt, &serr);
    free(shapes);
    if (!s)
        return gj_error_set(err, "model.onnx", "model.onnx cannot run: %s", serr.message), NULL;
    struct onnx_session_stats st;
    onnx_session_get_stats(s, &st);
    m->const_bytes = st.const_bytes;
    m->sample_bytes = st.arena_bytes;
    for (size_t i = 0; i < onnx_model_num_inputs(m->onnx); i++)
        m->sample_bytes += onnx_session_input_bytes(s, i);
    for (size_t i = 0; i < onnx_model_num_outputs(m->onnx); i++)
        m->sample_bytes += onnx_session_output_bytes(s, i);
    return s;
}

/* The image input and output among the model's (image models: `infer` jobs). */
static void image_indices(gj_served_model *m)
{
    for (size_t i = 0; i < onnx_model_num_inputs(m->onnx); i++)
        if (strcmp(onnx_model_input(m->onnx, i)->name, m->cfg.input_name) == 0)
            m->in_idx = i;
    for (size_t i = 0; i < onnx_model_num_outputs(m->onnx); i++)
        if (strcmp(onnx_model_output(m->onnx, i)->name, m->cfg.output_name) == 0)
            m->out_idx = i;
}

/* The config completed from the model and checked against it, its label files read. */
static int check_against_model(gj_served_model *m, const char *onnx_path, struct gj_error *err)
{
    struct gj_model_config *cfg = &m->cfg;
    if (gj_model_config_complete(cfg, m->onnx, err))
        return -1;
    onnx_session *s = trial_session(m, err);
    if (!s)
        return -1;
    int rc = complete_outputs(m, s, err) || read_label_files(m, onnx_path, err) ||
             gj_model_config_settle_image(cfg, m->out_labels, m->n_out_labels, err);
    if (!rc && cfg->image_model) {
        image_indices(m);
        rc = check_image_output(m, s, err);
    }
    onnx_session_free(s);
    return rc ? -1 : 0;
}

/* SHA-256 of a file, streamed, as hex. 0 or -1 (errno). */
int gj_model_file_sha256(const char *path, char hex[65])
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
    for (size_t i = 0; m->out_labels && i < m->cfg.n_output_tensors; i++) {
        for (size_t k = 0; m->out_labels[i] && k < m->n_out_labels[i]; k++)
            free(m->out_labels[i][k]);
        free(m->out_labels[i]);
    }
    free(m->out_labels);
    free(m->n_out_labels);
    gj_model_config_free(&m->cfg);
    free(m);
}

int gj_model_version_config_path(const char *model_dir, int64_t version, char *path, size_t n)
{
    char vdir[GJ_PATH_MAX], vname[32];
    snprintf(vname, sizeof vname, "%lld", (long long)version);
    if (gj_path_join(vdir, sizeof vdir, model_dir, vname) || gj_path_join(path, n, vdir, "config.json"))
        return -1;
    return is_file(path) ? 0 : gj_path_join(path, n, model_dir, "config.json");
}

gj_served_model *gj_served_model_load(const char *model_dir, const char *name, int64_t version,
                                      struct gj_error *err)
{
    char vdir[GJ_PATH_MAX], onnx_path[GJ_PATH_MAX], vname[32];
    snprintf(vname, sizeof vname, "%lld", (long long)version);
    if (gj_path_join(vdir, sizeof vdir, model_dir, vname) ||
        gj_path_join(onnx_path, sizeof onnx_path, vdir, "model.onnx"))
        return gj_error_set(err, "", "model path too long"), NULL;
    if (!is_file(onnx_path))
        return gj_error_set(err, "version", "model '%s' has no version %lld (no %lld/model.onnx)",
                            name, (long long)version, (long long)version), NULL;
    /* config.pbtxt (as JSON) or config.json; none: completed from the model (auto-complete). */
    char *text = NULL;
    if (gj_model_version_config_read(model_dir, version, GJ_MODEL_CONFIG_MAX_BYTES, &text, err) != 0)
        return NULL;
    gj_served_model *m = gj_served_model_load_parts(onnx_path, text, text ? strlen(text) : 0, name, version, err);
    free(text);
    return m;
}

gj_served_model *gj_served_model_load_parts(const char *onnx_path, const char *config,
                                            size_t config_len, const char *name, int64_t version,
                                            struct gj_error *err)
{
    if (!is_file(onnx_path))
        return gj_error_set(err, "model.onnx", "model '%s' version %lld: %s is missing", name,
                            (long long)version, onnx_path), NULL;
    gj_served_model *m = calloc(1, sizeof *m);
    if (!m)
        return gj_error_set(err, "", "out of memory"), NULL;
    m->refs = 1;
    snprintf(m->name, sizeof m->name, "%s", name);
    m->version = version;
    if (gj_model_config_load_text(config, config_len, name, &m->cfg, err)) {
        served_free(m);
        return NULL;
    }
    uint64_t bytes = 0;
    gj_file_size(onnx_path, &bytes);
    m->file_bytes = bytes;
    if (gj_model_file_sha256(onnx_path, m->digest) != 0) {
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
    if (check_against_model(m, onnx_path, err)) {
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

const char *const *gj_served_model_output_labels(const gj_served_model *m, size_t output, size_t *n)
{
    const struct gj_model_config *cfg = &m->cfg;
    *n = 0;
    if (output >= cfg->n_output_tensors)
        return NULL;
    if (cfg->image_model && cfg->n_labels && strcmp(cfg->outputs[output].name, cfg->output_name) == 0) {
        *n = cfg->n_labels;
        return (const char *const *)cfg->labels;
    }
    if (!m->out_labels || !m->out_labels[output])
        return NULL;
    *n = m->n_out_labels[output];
    return (const char *const *)m->out_labels[output];
}
uint64_t gj_served_model_file_bytes(const gj_served_model *m) { return m->file_bytes; }
const char *gj_served_model_digest(const gj_served_model *m) { return m->digest; }

uint64_t gj_served_model_device_estimate(const gj_served_model *m, int max_batch, int instances)
{
    /* Each instance holds at least one session of the largest batch: its weights and its
     * activations, which grow with the batch. */
    uint64_t one = m->const_bytes + (uint64_t)(max_batch > 0 ? max_batch : 1) * m->sample_bytes;
    return one * (uint64_t)(instances > 0 ? instances : 1);
}
