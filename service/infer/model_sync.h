/*
 * model_sync.h — this replica converges to the shared model store (model_store.h).
 *
 * A thread LISTENs on gpujobd_models and makes a pass at every notification, every
 * GJ_MODEL_RESYNC_MS anyway (a lost notification, a dropped connection), and when asked
 * (gj_model_sync_now). A pass:
 *   1. reads the desired state (one snapshot of the store);
 *   2. on a serving replica (roles all and worker) fetches each version's files into the
 *      cache (model_cache.h) unless its model's version_policy leaves it out; an api
 *      replica runs no models and fetches nothing: it knows the models, their configs and
 *      states, and answers use with 503 saying where inference runs;
 *   3. declares every model to the repository (gj_model_repo_declare) and removes the ones
 *      gone; a version unloaded, deleted or changed loses its batchers (and their device
 *      memory) here;
 *   4. on a serving replica loads and places each version desired 'loaded' once per
 *      request (its requested_at): a failed load is tried again when it is asked again,
 *      or when this replica starts;
 *   5. reports the state of every version here and the generation it applied
 *      (model_replica_versions, model_replicas: its heartbeat), and prunes the cache.
 */
#ifndef GJ_INFER_MODEL_SYNC_H
#define GJ_INFER_MODEL_SYNC_H

#include <stdint.h>

#include <jansson.h>

#include "infer/serving/model_repo.h"
#include "service/infer/model_store.h"

#define GJ_MODEL_RESYNC_MS 5000

struct gj_model_sync_config {
    const char *database_url;
    const char *replica;          /* host:pid:start */
    const char *role;             /* all | api | worker */
    int serving;                  /* 1: runs models (fetches files, loads, places) */
    /* Where this replica runs a version now (a JSON array of "cpu", "gpu:N"), for its
     * reports: the module's placement knows it (a hook, so that this file does not call
     * up into the module). */
    json_t *(*devices_json)(const char *name, int64_t version);
};

/* Makes the first pass on this thread (so the repository holds the store's models before
 * anything is served), then starts the thread. 0, or -1 (logged). */
int gj_model_sync_start(const struct gj_model_sync_config *cfg, gj_model_repo *repo);
/* Stops the thread and takes this replica's reports out of the store. */
void gj_model_sync_stop(void);

/* Asks for a pass and waits until one that began after the ask has finished, or
 * timeout_ms. 0, or -1 (timed out, or the pass failed: logged). */
int gj_model_sync_now(int timeout_ms);

/* What the last pass read: the desired state of a version (1; 0 when it is not in the
 * store), and the generation. */
int gj_model_sync_desired(const char *name, int64_t version, enum gj_model_desired *d);
int64_t gj_model_sync_generation(void);
/* This replica's id, and whether it runs models. */
const char *gj_model_sync_replica(void);
int gj_model_sync_serving(void);

/* Loads a version here and places it on its device (its batcher made, GPU memory
 * reserved): an explicit load. 0, or -1 with err: status 422 (the model does not load,
 * its state FAILED with the reason), 503 (it cannot be placed: FAILED too; err.transient
 * when it may fit later), 404 (unknown). */
int gj_model_sync_place(const char *name, int64_t version, struct gj_error *err);

#endif
