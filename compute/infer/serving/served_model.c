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
    char vdir[GJ_PATH_MAX], cfg_path[GJ_PATH_MAX], onnx_path[GJ_PATH_MAX], vname[32];
    snprintf(vname, sizeof vname, "%lld", (long long)version);
    if (gj_path_join(vdir, sizeof vdir, model_dir, vname) ||
        gj_path_join(onnx_path, sizeof onnx_path, vdir, "model.onnx") ||
        gj_model_version_config_path(model_dir, version, cfg_path, sizeof cfg_path))
        return gj_error_set(err, "", "model path too long"), NULL;
    if (!is_file(onnx_path))
        return gj_error_set(err, "version", "model '%s' has no version %lld (no %lld/model.onnx)",
                            name, (long long)version, (long long)version), NULL;
    if (!is_file(cfg_path))
        return gj_error_set(err, "config.json", "model '%s' has no config.json", name), NULL;
    char *text = NULL;
    size_t len = 0;
    if (gj_read_file(cfg_path, GJ_MODEL_CONFIG_MAX_BYTES, &text, &len) != 0) {
        int e = errno;
        if (e == EFBIG || e == E2BIG || e == EOVERFLOW)
            return gj_error_set(err, "config.json", "config.json is larger than %u bytes",
                                GJ_MODEL_CONFIG_MAX_BYTES), NULL;
        return gj_error_set(err, "config.json", "cannot read config.json: %s", strerror(e)), NULL;
    }
    gj_served_model *m = gj_served_model_load_parts(onnx_path, text, len, name, version, err);
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
