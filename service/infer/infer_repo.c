/*
 * infer_repo.c — the process's model repository (infer_repo.h).
 */
#include <stdatomic.h>
#include <stdio.h>

#include "infer/serving/batcher.h"
#include "service/infer/infer_repo.h"

static _Atomic(gj_model_repo *) g_repo;

gj_model_repo *gj_infer_repo(void)
{
    return atomic_load(&g_repo);
}

void gj_infer_repo_set(gj_model_repo *repo)
{
    atomic_store(&g_repo, repo);
}

json_t *gj_infer_devices_json(const char *name, int64_t version)
{
    int d[GJ_MODEL_MAX_GPUS + 1];
    size_t n = gj_batcher_registry_devices(name, version, d, GJ_MODEL_MAX_GPUS + 1);
    json_t *a = json_array();
    for (size_t i = 0; a && i < n && i < GJ_MODEL_MAX_GPUS + 1; i++) {
        char dev[24];
        if (d[i] >= 0)
            snprintf(dev, sizeof dev, "gpu:%d", d[i]);
        else
            snprintf(dev, sizeof dev, "cpu");
        json_array_append_new(a, json_string(dev));
    }
    return a;
}
