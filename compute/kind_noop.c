/*
 * kind_noop.c — the diagnostic kind: sleeps, writes bytes, or fails on demand.
 * The queue tests and the queue benchmark run it; the chaos tests also make it
 * ignore cancellation for a while (stall_ms), as a kind stuck in a long call would.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fsutil.h"
#include "common/gj_kind.h"

static const char noop_schema[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
    "\"type\":\"object\",\"additionalProperties\":false,"
    "\"properties\":{"
    "\"sleep_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":86400000,"
    "\"description\":\"milliseconds to run, in small steps that honour cancellation\"},"
    "\"stall_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":60000,"
    "\"description\":\"milliseconds to run first without looking at cancellation, as a kind "
    "stuck in a call it cannot leave (tests the service's bound on shutdown)\"},"
    "\"output_bytes\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":4294967296,"
    "\"description\":\"size of the output 'data.bin' (a deterministic byte pattern)\"},"
    "\"fail_with\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":400,"
    "\"description\":\"fail the job with this message\"},"
    "\"fail_transient\":{\"type\":\"boolean\","
    "\"description\":\"with fail_with: fail as a transient error, so the job is retried\"},"
    "\"device_bytes\":{\"type\":\"integer\",\"minimum\":0,"
    "\"description\":\"device memory the estimate asks for (placement tests)\"},"
    "\"host_bytes\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":1099511627776,"
    "\"description\":\"host memory to allocate, touch and hold while it sleeps; the estimate "
    "asks for it (host admission tests)\"},"
    "\"use_gpu\":{\"type\":\"boolean\",\"description\":\"whether the job may run on a GPU (default true)\"},"
    "\"write_result\":{\"type\":\"boolean\","
    "\"description\":\"write result.json (default true); false leaves no output, for queue benchmarks\"}"
    "}}";

static const struct gj_input_spec noop_inputs[] = {
    { "input", 0, 1, "any files; their sizes are reported in result.json" },
};

static json_int_t int_param(const struct gj_job *job, const char *name, json_int_t dflt)
{
    json_t *v = json_object_get(job->params, name);
    return json_is_number(v) ? (json_int_t)json_number_value(v) : dflt;
}

/* Host bytes besides host_bytes: the write buffer, result.json, small change. */
#define NOOP_HOST_OVERHEAD (1u << 20)

static int noop_estimate(const struct gj_job *job, struct gj_needs *needs, struct gj_error *err)
{
    (void)err;
    json_t *gpu = json_object_get(job->params, "use_gpu");
    needs->can_use_gpu = gpu ? json_is_true(gpu) : 1;
    needs->needs_gpu = 0;
    needs->device_bytes = (uint64_t)int_param(job, "device_bytes", 0);
    needs->host_bytes = (uint64_t)int_param(job, "host_bytes", 0) + NOOP_HOST_OVERHEAD;
    return 0;
}

static uint64_t noop_host_floor(const struct gj_job *job)
{
    return (uint64_t)int_param(job, "host_bytes", 0);
}

/* The byte pattern in pieces of 64 KiB; 0, -1 (errno), or 1 when cancelled. */
static int write_pattern(struct gj_ctx *ctx, const char *path, uint64_t bytes)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    unsigned char buf[65536];
    uint64_t off = 0;
    int rc = 0;
    while (off < bytes && rc == 0) {
        size_t n = bytes - off < sizeof buf ? (size_t)(bytes - off) : sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = (unsigned char)((off + i) * 31u + 7u);
        if (fwrite(buf, 1, n, f) != n)
            rc = -1;
        off += n;
        if ((off & ((16u << 20) - 1)) == 0 && gj_cancelled(ctx))   /* every 16 MiB */
            rc = 1;
    }
    if (fclose(f) != 0 && rc == 0)
        rc = -1;
    if (rc)
        remove(path);
    return rc;
}

/* host_bytes allocated and touched (one byte a page), so that they are resident. */
static int hold_memory(const struct gj_job *job, unsigned char **mem, struct gj_error *err)
{
    uint64_t bytes = (uint64_t)int_param(job, "host_bytes", 0);
    *mem = NULL;
    if (!bytes)
        return 0;
    if (bytes > SIZE_MAX || !(*mem = malloc((size_t)bytes)))
        return gj_error_set(err, "host_bytes", "cannot allocate %llu bytes of host memory", (unsigned long long)bytes);
    for (uint64_t i = 0; i < bytes; i += 4096)
        (*mem)[i] = (unsigned char)i;
    return 0;
}

/* sleep_ms in steps of 20 ms that honour cancellation. 0, or 1 when cancelled. */
static int sleep_steps(struct gj_ctx *ctx, json_int_t sleep_ms)
{
    json_int_t done = 0;
    while (done < sleep_ms) {
        if (gj_cancelled(ctx))
            return 1;
        json_int_t step = sleep_ms - done < 20 ? sleep_ms - done : 20;
        struct timespec ts = { (time_t)(step / 1000), (long)(step % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        done += step;
        gj_progress(ctx, (double)done / (double)sleep_ms, NULL);
    }
    return 0;
}

static int write_result(struct gj_ctx *ctx, json_int_t slept, json_int_t bytes, struct gj_error *err)
{
    const struct gj_job *job = ctx->job;
    char path[GJ_PATH_MAX];
    json_t *result = json_pack("{s:s, s:I, s:I, s:i, s:i, s:o}", "kind", "noop", "slept_ms",
                               (json_int_t)slept, "output_bytes", bytes, "device", ctx->device,
                               "stage", ctx->stage, "inputs", json_object());
    for (size_t i = 0; i < job->n_inputs; i++)
        json_object_set_new(json_object_get(result, "inputs"), job->inputs[i].name,
                            json_integer((json_int_t)job->inputs[i].size));
    char *text = json_dumps(result, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(result);
    int rc = text && gj_path_join(path, sizeof path, ctx->output_dir, "result.json") == 0
                     && gj_write_file(path, text, strlen(text)) == 0;
    free(text);
    if (!rc)
        return gj_error_set(err, "", "cannot write result.json: %s", strerror(errno));
    return 0;
}

/* stall_ms: deaf to cancellation on purpose (a diagnostic of the service, not a kind). */
static void stall(const struct gj_job *job)
{
    json_int_t ms = int_param(job, "stall_ms", 0);
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int noop_run(struct gj_ctx *ctx, struct gj_error *err)
{
    const struct gj_job *job = ctx->job;
    json_int_t sleep_ms = int_param(job, "sleep_ms", 0);
    unsigned char *mem;
    stall(job);
    if (hold_memory(job, &mem, err))
        return GJ_RUN_FAILED;
    int slept = sleep_steps(ctx, sleep_ms);
    free(mem);
    if (slept)
        return GJ_RUN_CANCELED;

    json_t *fail = json_object_get(job->params, "fail_with");
    if (json_is_string(fail)) {
        gj_error_set(err, "", "%s", json_string_value(fail));
        err->transient = json_is_true(json_object_get(job->params, "fail_transient"));
        return GJ_RUN_FAILED;
    }

    char path[GJ_PATH_MAX];
    json_int_t bytes = int_param(job, "output_bytes", 0);
    if (bytes > 0) {
        int rc = gj_path_join(path, sizeof path, ctx->output_dir, "data.bin") ? -1
                 : write_pattern(ctx, path, (uint64_t)bytes);
        if (rc > 0)
            return GJ_RUN_CANCELED;
        if (rc)
            return gj_error_set(err, "", "cannot write data.bin: %s", strerror(errno));
    }
    if (json_is_false(json_object_get(job->params, "write_result")))
        return GJ_RUN_OK;
    return write_result(ctx, sleep_ms, bytes, err) ? GJ_RUN_FAILED : GJ_RUN_OK;
}

/* result.json says how long the job slept: it records the run. */
static const char *const noop_run_records[] = { "result.json", NULL };

const struct gj_kind gj_kind_noop = {
    .name = "noop",
    .summary = "Diagnostic job: sleeps, writes a byte pattern, or fails with a given message",
    .params_schema = noop_schema,
    .inputs = noop_inputs,
    .n_inputs = sizeof noop_inputs / sizeof noop_inputs[0],
    .validate = NULL,
    .estimate = noop_estimate,
    .run = noop_run,
    .host_bytes_floor = noop_host_floor,
    .version = "1",
    .reproducible = GJ_REPRO_CPU | GJ_REPRO_GPU,
    .run_record_outputs = noop_run_records,
};
