/*
 * serving_host.h — what the host hands the inference module: the model repository that
 * `infer` jobs take their models from, and the batchers' settings.
 *
 * compute/ reads no setting of its own (no environment, nothing of the service's
 * configuration): the service (service/infer/module.c, from its flags --models-dir,
 * --infer-max-queue, --infer-queue-timeout-us, --infer-threads), `gpujobd run`
 * (--models-dir) and tests register what they have here at start, as the service does
 * its GPU accounting (gpu_accounting.h). Without a registration `infer` jobs fail with
 * "no model repository" and batchers take the defaults below. Thread-safe.
 *
 * The repository is the host's: the service serves /v2 from the same one, so an `infer`
 * job and a protocol request use the same loaded model (model.onnx parsed once) and,
 * on the same device, the same batcher.
 */
#ifndef GJ_SERVING_HOST_H
#define GJ_SERVING_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "infer/serving/model_repo.h"

struct gj_serving_host {
    /* Borrowed: it must outlive every job run while it is registered. NULL: none. */
    gj_model_repo *repo;
    size_t max_queue;              /* requests waiting per batcher; 0: GJ_BATCH_DEFAULT_MAX_QUEUE */
    int64_t queue_timeout_us;      /* time a request may wait there; 0: GJ_BATCH_DEFAULT_TIMEOUT_US */
    int threads_per_instance;      /* ONNX CPU threads per executor; 0: the CPUs not reserved,
                                    * divided among the instances, 1 to 16 */
    int reserved_cpus;             /* CPUs left to the host's own threads when threads_per_instance
                                    * is 0 (a server's HTTP, TLS and database work) */
};

/* Registers what the host hands in (copied); NULL removes it. */
void gj_serving_host_set(const struct gj_serving_host *h);
/* A copy of the registration (all zero when there is none). */
void gj_serving_host_get(struct gj_serving_host *out);

#endif
