/* The in-process worker of the kind tests (kind_harness.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/gj_poll.h"
#include "kind_harness.h"

double harness_now(void)
{
    return gj_now();
}

static int h_cancelled(struct gj_ctx *ctx)
{
    struct harness *h = ctx->host;
    if (h->cancel_after_s < 0 || harness_now() - h->t_start < h->cancel_after_s)
        return 0;
    if (h->first_cancel_seen_s < 0)
        h->first_cancel_seen_s = harness_now() - h->t_start;
    return 1;
}

static void h_progress(struct gj_ctx *ctx, double fraction, const char *message)
{
    struct harness *h = ctx->host;
    (void)message;
    h->progress_calls++;
    h->last_fraction = fraction;
}

void harness_begin(struct harness *h, const char *kind, const char *params)
{
    memset(h, 0, sizeof *h);
    strcpy(h->dir, "/tmp/gj-kinds-XXXXXX");
    if (!mkdtemp(h->dir))
        fail_msg("mkdtemp failed");
    snprintf(h->out, sizeof h->out, "%s/out", h->dir);
    snprintf(h->scratch, sizeof h->scratch, "%s/scratch", h->dir);
    assert_int_equal(gj_mkdir_p(h->out, 0700), 0);
    assert_int_equal(gj_mkdir_p(h->scratch, 0700), 0);
    json_error_t e;
    h->params = json_loads(params, 0, &e);
    if (!h->params)
        fail_msg("bad test params %s: %s", params, e.text);
    h->job.kind = kind;
    h->job.params = h->params;
    h->cancel_after_s = -1;
    h->first_cancel_seen_s = -1;
}

void harness_input(struct harness *h, const char *name, const void *data, uint64_t bytes)
{
    assert_true(h->n_inputs < 4);
    char *path = h->input_paths[h->n_inputs], tmp[sizeof h->input_paths[0]];
    snprintf(tmp, sizeof tmp, "%s/in-%zu", h->dir, h->n_inputs);
    memcpy(path, tmp, sizeof tmp);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    if (data)
        assert_int_equal(write(fd, data, (size_t)bytes), (ssize_t)bytes);
    else
        assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
    close(fd);
    h->inputs[h->n_inputs] = (struct gj_input){ name, path, bytes };
    h->n_inputs++;
}

int harness_run(struct harness *h, const struct gj_kind *kind, int threads, double *seconds,
                struct gj_error *err)
{
    gj_error_clear(err);
    h->job.inputs = h->inputs;
    h->job.n_inputs = h->n_inputs;
    /* validate sees names and sizes only, as at submit */
    struct gj_input at_submit[4];
    struct gj_job sub = h->job;
    for (size_t i = 0; i < h->n_inputs; i++)
        at_submit[i] = (struct gj_input){ h->inputs[i].name, NULL, h->inputs[i].size };
    sub.inputs = at_submit;
    if (gj_kind_validate(kind, &sub, err))
        fail_msg("validate: %s: %s", err->field, err->message);
    h->ctx = (struct gj_ctx){ .job = &h->job, .device = GJ_DEVICE_CPU, .cpu_threads = threads,
                              .scratch_dir = h->scratch, .output_dir = h->out, .host = h,
                              .progress = h_progress, .cancelled = h_cancelled };
    h->t_start = harness_now();
    int rc = kind->run(&h->ctx, err);
    *seconds = harness_now() - h->t_start;
    return rc;
}

void harness_end(struct harness *h)
{
    json_decref(h->params);
    gj_rm_rf(h->dir);
}

char *harness_tsp_text(int n, uint32_t seed)
{
    size_t cap = (size_t)n * 40 + 200, off = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    off += (size_t)snprintf(t, cap, "NAME: rand%d\nTYPE: TSP\nDIMENSION: %d\nEDGE_WEIGHT_TYPE: EUC_2D\n"
                            "NODE_COORD_SECTION\n", n, n);
    uint32_t s = seed;
    for (int i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        unsigned x = s >> 12;
        s = s * 1664525u + 1013904223u;
        off += (size_t)snprintf(t + off, cap - off, "%d %u %u\n", i + 1, x % 100000, (s >> 12) % 100000);
    }
    snprintf(t + off, cap - off, "EOF\n");
    return t;
}
