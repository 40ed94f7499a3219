/*
 * onnx_check_io — runs a model on the named tensors of a manifest (typed_models.py writes them
 * with PyTorch's outputs) through onnx_session_run_named and compares every output: float types
 * by relative L2 error within the manifest's tolerance, integers and BOOL exactly.
 *
 *   onnx_check_io DIR/NAME.manifest [THREADS]
 *
 * Manifest lines: "model FILE", "batch N|none", "in NAME TYPE DIMS FILE", "out NAME TYPE DIMS
 * FILE TOL" (DIMS: comma-separated, "-" for a scalar; files relative to the manifest's dir).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "infer/onnx/onnx_model.h"

#define MAX_T 16

struct entry {
    char name[64], type[16], dims[64], file[256];
    double tol;
    struct onnx_tensor_buf t;
    char *want;             /* expected output bytes */
    size_t want_len;
};

struct manifest {
    char dir[512], model[256];
    int batch;              /* -1: none */
    struct entry in[MAX_T], out[MAX_T];
    size_t n_in, n_out;
};

static int elem_from_name(const char *name)
{
    for (int e = 1; e < 32; e++)
        if (strcmp(onnx_elem_name(e), name) == 0)
            return e;
    return 0;
}

/* "2,3,16,16" or "-" into t's rank and dims. */
static int parse_dims(const char *s, struct onnx_tensor_buf *t)
{
    t->rank = 0;
    if (strcmp(s, "-") == 0)
        return 0;
    for (const char *p = s; *p && t->rank < ONNX_MAX_RANK; t->rank++) {
        char *end;
        t->dims[t->rank] = strtoll(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

/* The file of e (relative to dir) into buf. */
static int read_data(const struct manifest *mf, const char *file, char **buf, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", mf->dir, file);
    if (gj_read_file(path, (size_t)1 << 30, buf, len)) {
        perror(path);
        return -1;
    }
    return 0;
}

static int parse_line(struct manifest *mf, const char *line)
{
    char kind[8], b[16];
    struct entry e = { 0 };
    if (sscanf(line, "model %255s", mf->model) == 1)
        return 0;
    if (sscanf(line, "batch %15s", b) == 1) {
        mf->batch = strcmp(b, "none") == 0 ? -1 : atoi(b);
        return 0;
    }
    int n = sscanf(line, "%7s %63s %15s %63s %255s %lf", kind, e.name, e.type, e.dims, e.file, &e.tol);
    int is_out = strcmp(kind, "out") == 0;
    if (n < 5 || (is_out && n < 6) || (mf->n_in >= MAX_T || mf->n_out >= MAX_T))
        return fprintf(stderr, "bad manifest line: %s", line), -1;
    e.t.elem_type = elem_from_name(e.type);
    parse_dims(e.dims, &e.t);
    if (is_out)
        mf->out[mf->n_out++] = e;
    else
        mf->in[mf->n_in++] = e;
    return 0;
}

static int load_manifest(const char *path, struct manifest *mf)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    if (!f)
        return perror(path), -1;
    snprintf(mf->dir, sizeof mf->dir, "%s", path);
    char *slash = strrchr(mf->dir, '/');
    if (slash)
        *slash = 0;
    else
        strcpy(mf->dir, ".");
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f))
        rc = parse_line(mf, line);
    fclose(f);
    return rc;
}

/* The data files: inputs into their tensors, expected outputs beside them. */
static int load_data(struct manifest *mf)
{
    for (size_t i = 0; i < mf->n_in; i++) {
        char *buf;
        if (read_data(mf, mf->in[i].file, &buf, &mf->in[i].t.bytes))
            return -1;
        mf->in[i].t.data = buf;
        mf->in[i].t.name = mf->in[i].name;
    }
    for (size_t i = 0; i < mf->n_out; i++) {
        struct entry *e = &mf->out[i];
        if (read_data(mf, e->file, &e->want, &e->want_len))
            return -1;
        e->t.name = e->name;
        e->t.bytes = e->want_len;
        e->t.data = calloc(1, e->want_len + 1);
        if (!e->t.data)
            return -1;
    }
    return 0;
}

/* Output e against what PyTorch computed. */
static int compare(const struct entry *e)
{
    const struct onnx_tensor_buf *t = &e->t;
    size_t es = onnx_elem_size(t->elem_type), n = es ? t->bytes / es : 0;
    int isfloat = e->tol > 0;
    if (t->elem_type != elem_from_name(e->type) || t->bytes != e->want_len)
        return fprintf(stderr, "FAIL %s: %s, %zu bytes; expected %s, %zu\n", e->name, onnx_elem_name(t->elem_type),
                       t->bytes, e->type, e->want_len), 1;
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfloat && onnx_elem_get_i64(t->elem_type, t->data, i) != onnx_elem_get_i64(t->elem_type, e->want, i))
            return fprintf(stderr, "FAIL %s: element %zu is %lld, PyTorch %lld\n", e->name, i,
                           (long long)onnx_elem_get_i64(t->elem_type, t->data, i),
                           (long long)onnx_elem_get_i64(t->elem_type, e->want, i)), 1;
        double got = onnx_elem_get_f64(t->elem_type, t->data, i), want = onnx_elem_get_f64(t->elem_type, e->want, i);
        num += (got - want) * (got - want);
        den += want * want;
    }
    double rel = sqrt(num / (den > 0 ? den : 1e-300));
    printf("%-8s %-8s %zu elements: %s %.3g (tolerance %.3g)\n", e->name, e->type, n,
           isfloat ? "relative L2" : "exact, relative L2", rel, e->tol);
    return isfloat && !(rel <= e->tol) ? (fprintf(stderr, "FAIL %s: relative L2 %.3g over %.3g\n", e->name, rel,
                                                   e->tol), 1) : 0;
}

static int run(struct manifest *mf, int threads)
{
    char path[1024];
    struct gj_error err = { 0 };
    snprintf(path, sizeof path, "%s/%s", mf->dir, mf->model);
    onnx_model *m = onnx_model_load_file(path, 0, &err);
    if (!m)
        return fprintf(stderr, "load: %s\n", err.message), 1;
    struct onnx_session_options o = { .batch = mf->batch < 0 ? 0 : mf->batch, .threads = threads,
                                      .no_batch = mf->batch < 0 };
    onnx_session *s = onnx_session_create(m, &o, &err);
    struct onnx_tensor_buf ins[MAX_T], outs[MAX_T];
    for (size_t i = 0; i < mf->n_in; i++)
        ins[i] = mf->in[i].t;
    for (size_t i = 0; i < mf->n_out; i++)
        outs[i] = mf->out[i].t;
    int rc = !s || onnx_session_run_named(s, ins, mf->n_in, outs, mf->n_out, &err);
    if (rc)
        fprintf(stderr, "%s: %s\n", s ? "run" : "session", err.message);
    for (size_t i = 0; !rc && i < mf->n_out; i++) {
        mf->out[i].t = outs[i];
        rc |= compare(&mf->out[i]);
    }
    onnx_session_free(s);
    onnx_model_free(m);
    return rc;
}

int main(int argc, char **argv)
{
    static struct manifest mf;
    if (argc < 2 || argc > 3)
        return fprintf(stderr, "usage: onnx_check_io NAME.manifest [THREADS]\n"), 2;
    int rc = load_manifest(argv[1], &mf) || load_data(&mf) ? 1 : run(&mf, argc > 2 ? atoi(argv[2]) : 2);
    for (size_t i = 0; i < mf.n_in; i++)
        free(mf.in[i].t.data);
    for (size_t i = 0; i < mf.n_out; i++) {
        free(mf.out[i].t.data);
        free(mf.out[i].want);
    }
    return rc;
}
