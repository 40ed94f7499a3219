/*
 * oip.h — the Open Inference Protocol v2 (KServe v2 / Triton) REST endpoint
 * (service/routes_oip.c): health, server and model metadata, readiness, and infer
 * with JSON tensors and Triton's binary tensor extension, through the dynamic batcher
 * (compute/infer/serving/batcher.h). Models come from the inference module's
 * repository (gj_inference_repo(): DATA_DIR/models, or GPUJOBD_MODELS_DIR).
 *
 * Authentication: the two /v2/health routes answer without a key (probes); every other
 * route needs an API key (Authorization: Bearer, as /v1). Errors are {"error": "..."}
 * (401/403 from the shared authentication stay application/problem+json).
 */
#ifndef GJ_OIP_H
#define GJ_OIP_H

#include <stdio.h>

#include "service/server.h"

/* Registers the routes (idempotent: they are also registered when the program loads,
 * so `serve --print-routes` lists them) and remembers the server; stops the batchers at
 * exit. Call before gj_http_start. 0, or -1 with a log line. */
int gj_oip_init(struct gj_server *srv);

/* Prometheus text of the batchers' statistics, per model and version:
 * gpujobd_inference_request_success, _request_failure, _count, _exec_count,
 * _queue_duration_us, _compute_infer_duration_us (counters) and the gauge
 * gpujobd_inference_pending_request_count. Declared weak so that metrics.c
 * links without this file (test programs): call it only when its address is not NULL. */
void gj_oip_metrics_write(FILE *f) __attribute__((weak));

#endif
