/*
 * run_host.c — `gpujobd run` (no server): `infer` takes its models from a repository the
 * host hands in (compute/infer/serving/serving_host.h), here the directory --models-dir
 * names, when it is there (module.h's run_open and run_close).
 */
#include "common/gj_error.h"
#include "infer/serving/batcher.h"
#include "infer/serving/serving_host.h"
#include "service/infer/module_parts.h"

void *gj_infer_run_open(const char *models_dir)
{
    struct gj_error err = { 0 };
    gj_model_repo *repo = gj_model_repo_open(models_dir, &err);
    if (repo) {
        struct gj_serving_host host = { .repo = repo };
        gj_serving_host_set(&host);
    }
    return repo;
}

void gj_infer_run_close(void *repo)
{
    if (!repo)
        return;
    gj_batcher_registry_shutdown();
    gj_serving_host_set(NULL);
    gj_model_repo_free(repo);
}
