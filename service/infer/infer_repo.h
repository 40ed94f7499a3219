/*
 * infer_repo.h — the process's model repository: the one the module declares from the
 * shared store at start (module.c) and every route and job reads. Its own unit so that the
 * /v2 routes (oip.h) and model control need it without depending on the module that
 * registers them.
 */
#ifndef GJ_INFER_REPO_H
#define GJ_INFER_REPO_H

#include <stdint.h>
#include <jansson.h>

#include "infer/serving/model_repo.h"

/* The repository (NULL before start and after stop). */
gj_model_repo *gj_infer_repo(void);
/* Set by the module at start (repo) and stop (NULL). */
void gj_infer_repo_set(gj_model_repo *repo);
/* Devices ("cpu", "gpu:0", ...) on which this process has batchers of the version
 * (compute/infer/serving/batcher.h), as a JSON array; NULL on allocation failure. */
json_t *gj_infer_devices_json(const char *name, int64_t version);

#endif
