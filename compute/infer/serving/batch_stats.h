/*
 * batch_stats.h — the batcher's statistics per model name and version (private to
 * batcher.c; the public view is in batcher.h). Nodes live for the process, so statistics
 * survive a batcher being replaced when its model is reloaded.
 */
#ifndef GJ_BATCH_STATS_H
#define GJ_BATCH_STATS_H

#include <stddef.h>
#include <stdint.h>

struct gj_stats_node;

/* The node of a model/version, created when absent; NULL when out of memory (statistics
 * are then not kept: every function below takes NULL). */
struct gj_stats_node *gj_stats_node_for(const char *model, int64_t version);
/* A request that failed before or without running: enqueue to answer took waited_ns. */
void gj_stats_fail(struct gj_stats_node *n, int64_t waited_ns);
/* Requests waiting in the queue: +1 or -1. */
void gj_stats_pending(struct gj_stats_node *n, int delta);

/* One request of a batch that ran (or failed to). */
struct gj_stats_req {
    int ok;
    size_t samples;
    int64_t queue_ns, total_ns;   /* enqueue to the start of the batch / to its answer */
};
/* A batch of batch_size samples: ran (the model ran), its phases' durations, and its
 * requests. */
void gj_stats_batch(struct gj_stats_node *n, int ran, size_t batch_size, int64_t input_ns,
                    int64_t infer_ns, int64_t output_ns, const struct gj_stats_req *reqs, size_t k);

#endif
