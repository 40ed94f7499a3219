/*
 * oip_metrics.c — the dynamic batchers' statistics (batcher.h) as Prometheus text, each
 * family as gpujobd_<name> and, with --triton-metrics, again under Triton's own name
 * nv_<name> (the same labels model and version), so that a dashboard made for Triton reads
 * this server unchanged. Off by default: every other series here is gpujobd_'s.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "infer/serving/batcher.h"
#include "service/infer/infer.h"
#include "service/base/metrics.h"

static _Atomic int g_triton_names;

void gj_infer_set_triton_metrics(int on)
{
    atomic_store(&g_triton_names, on);
}

/* One model version's latency histogram (gpujobd_ only: Triton's own names have none). */
static void write_latency(FILE *f, const struct gj_batch_stats *st)
{
    static const char name[] = "gpujobd_inference_request_latency_seconds";
    for (size_t b = 0; b <= GJ_LATENCY_BUCKETS; b++) {
        fprintf(f, "%s_bucket{model=\"", name);
        gj_metrics_put_label(f, st->model);
        fprintf(f, "\",version=\"%" PRId64 "\",le=\"", st->version);
        if (b < GJ_LATENCY_BUCKETS)
            fprintf(f, "%g\"} %" PRIu64 "\n", gj_latency_bounds[b], st->success_le[b]);
        else
            fprintf(f, "+Inf\"} %" PRIu64 "\n", st->success.count);
    }
    fprintf(f, "%s_sum{model=\"", name);
    gj_metrics_put_label(f, st->model);
    fprintf(f, "\",version=\"%" PRId64 "\"} %.6f\n", st->version, (double)st->success.ns / 1e9);
    fprintf(f, "%s_count{model=\"", name);
    gj_metrics_put_label(f, st->model);
    fprintf(f, "\",version=\"%" PRId64 "\"} %" PRIu64 "\n", st->version, st->success.count);
}

void gj_infer_write_metrics(FILE *f)
{
    static const struct {
        const char *name, *help;
        size_t off;
        int gauge;
        uint64_t per;   /* the field's units per metric unit: ns fields are shown in us */
    } m[] = {
        { "inference_request_success", "Inference requests answered successfully.",
          offsetof(struct gj_batch_stats, request_success), 0, 1 },
        { "inference_request_failure", "Inference requests that failed (rejected by a full "
          "queue, timed out in the queue, shut down, or failed in the model).",
          offsetof(struct gj_batch_stats, request_failure), 0, 1 },
        { "inference_count", "Inferences performed (samples; a request may carry several).",
          offsetof(struct gj_batch_stats, inference_count), 0, 1 },
        { "inference_exec_count", "Model executions (batches) run.",
          offsetof(struct gj_batch_stats, exec_count), 0, 1 },
        { "inference_request_duration_us", "Microseconds from enqueue to answer of the requests "
          "answered successfully, summed.", offsetof(struct gj_batch_stats, success.ns), 0, 1000 },
        { "inference_queue_duration_us", "Microseconds requests waited in the batcher's "
          "queue, summed over requests.", offsetof(struct gj_batch_stats, queue_duration_us), 0, 1 },
        { "inference_compute_input_duration_us", "Microseconds gathering the inputs of the batches, "
          "summed over requests (each request counts its batch's).",
          offsetof(struct gj_batch_stats, compute_input.ns), 0, 1000 },
        { "inference_compute_infer_duration_us", "Microseconds of model execution, summed over "
          "requests (each request counts its batch's run).",
          offsetof(struct gj_batch_stats, compute_infer_duration_us), 0, 1 },
        { "inference_compute_output_duration_us", "Microseconds splitting and copying out the outputs "
          "of the batches, summed over requests.", offsetof(struct gj_batch_stats, compute_output.ns), 0, 1000 },
        { "inference_pending_request_count", "Requests waiting in the batcher's queue now.",
          offsetof(struct gj_batch_stats, pending_request_count), 1, 1 },
    };
    struct gj_batch_stats st[256];
    size_t n = gj_batch_stats_snapshot(st, 256);
    if (n > 256)
        n = 256;
    static const char *const prefixes[] = { "gpujobd_", "nv_" };
    size_t n_prefixes = atomic_load(&g_triton_names) ? 2 : 1;
    for (size_t p = 0; p < n_prefixes; p++) {
        for (size_t k = 0; k < sizeof m / sizeof m[0]; k++) {
            fprintf(f, "# HELP %s%s %s\n# TYPE %s%s %s\n", prefixes[p], m[k].name, m[k].help, prefixes[p],
                    m[k].name, m[k].gauge ? "gauge" : "counter");
            for (size_t i = 0; i < n; i++) {
                uint64_t v;
                memcpy(&v, (const char *)&st[i] + m[k].off, sizeof v);
                fprintf(f, "%s%s{model=\"", prefixes[p], m[k].name);
                gj_metrics_put_label(f, st[i].model);
                fprintf(f, "\",version=\"%" PRId64 "\"} %" PRIu64 "\n", st[i].version, v / m[k].per);
            }
        }
    }
    fputs("# HELP gpujobd_inference_request_latency_seconds Enqueue to answer of the requests answered "
          "successfully.\n# TYPE gpujobd_inference_request_latency_seconds histogram\n", f);
    for (size_t i = 0; i < n; i++)
        write_latency(f, &st[i]);
}

