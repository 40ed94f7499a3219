/*
 * module.c — the inference module's service half (infer.h, module.h): the model repository
 * the API manages and `infer` jobs use (handed to the kind through serving_host.h), its
 * start-up (the seed directory, with the shipped demo model, imported into the shared model
 * store; the repository declared from the store, kept converged by model_sync.c) and its
 * stop.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "infer/dicom.h"
#include "infer/onnx/onnx_log.h"
#include "infer/serving/batcher.h"
#include "infer/serving/serving_host.h"
#include "service/db/db.h"
#include "service/infer/infer.h"
#include "service/infer/infer_repo.h"
#include "service/infer/model_cache.h"
#include "service/infer/model_store.h"
#include "service/infer/model_sync.h"
#include "service/infer/module_parts.h"
#include "service/infer/oip.h"
#include "service/base/log.h"
#include "service/module.h"

#include "gj_demo_model.h"

#define COMPONENT "inference"

static gj_model_repo *g_repo;
static char g_models_dir[1100];   /* the seed directory */

/* ---- start and stop ---- */

/* Writes the embedded demo model to models_dir/<name> through a hidden
 * temporary directory renamed into place, so a half-written model is never seen
 * (and a replica starting at the same time loses the rename harmlessly). */
static int seed_demo_model(const char *models_dir)
{
    char dst[1300], tmp[1300];
    struct stat st;
    if (gj_demo_model_count == 0)
        return 0;
    if (gj_path_join(dst, sizeof dst, models_dir, GJ_INFER_DEFAULT_MODEL) != 0)
        return -1;
    if (stat(dst, &st) == 0)
        return 0;
    snprintf(tmp, sizeof tmp, "%s/.seed-%ld", models_dir, (long)getpid());
    gj_rm_rf(tmp);
    if (gj_mkdir_p(tmp, 0755) != 0)
        goto fail;
    for (size_t i = 0; i < gj_demo_model_count; i++) {
        char path[1600], dir[1600];
        if (snprintf(path, sizeof path, "%s/%s", tmp, gj_demo_model[i].path) >= (int)sizeof path)
            goto fail;
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = '\0';
            if (gj_mkdir_p(dir, 0755) != 0)
                goto fail;
        }
        if (gj_write_file(path, gj_demo_model[i].data, gj_demo_model[i].len) != 0)
            goto fail;
    }
    if (rename(tmp, dst) != 0) {
        if (errno == EEXIST || errno == ENOTEMPTY) {   /* another replica was first */
            gj_rm_rf(tmp);
            return 0;
        }
        goto fail;
    }
    gj_log_info(COMPONENT, "model repository: seeded %s with the demo model %s", models_dir,
                GJ_INFER_DEFAULT_MODEL);
    return 0;
fail:
    gj_log_error(COMPONENT, "cannot write the demo model into %s: %s", models_dir, strerror(errno));
    gj_rm_rf(tmp);
    return -1;
}

/* Staging left by a process that died mid-upload (.upload-*, .delete-*, .seed-*)
 * goes; model names never start with '.', so nothing else is touched. */
static void clean_staging(const char *models_dir)
{
    DIR *d = opendir(models_dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, ".upload-", 8) && strncmp(e->d_name, ".delete-", 8) && strncmp(e->d_name, ".seed-", 6))
            continue;
        char path[1400];
        if (gj_path_join(path, sizeof path, models_dir, e->d_name) == 0 && gj_rm_rf(path) == 0)
            gj_log_info(COMPONENT, "model repository: removed the leftover %s", e->d_name);
    }
    closedir(d);
}

/* The repository directory: --models-dir, else DATA_DIR/models; created and seeded. Its
 * length is bounded (the model, version and staging paths built under it must fit). */
static int prepare_models_dir(const struct gj_config *cfg)
{
    if (cfg->models_dir[0]) {
        if (strlen(cfg->models_dir) >= sizeof g_models_dir) {
            gj_log_error(COMPONENT, "--models-dir is longer than %zu characters", sizeof g_models_dir - 1);
            return -1;
        }
        memcpy(g_models_dir, cfg->models_dir, strlen(cfg->models_dir) + 1);
    } else if (gj_path_join(g_models_dir, sizeof g_models_dir, cfg->data_dir, "models") != 0) {
        gj_log_error(COMPONENT, "--data-dir is too long for the model repository path");
        return -1;
    }
    if (gj_mkdir_p(g_models_dir, 0755) != 0) {
        gj_log_error(COMPONENT, "cannot create the model repository %s: %s", g_models_dir, strerror(errno));
        return -1;
    }
    clean_staging(g_models_dir);
    return seed_demo_model(g_models_dir);
}

/* The seed directory's versions never imported go into the shared store. */
static int import_seeds(const struct gj_server *srv)
{
    PGconn *conn = gj_db_connect(srv->database_url);
    int rc = conn ? gj_model_store_import_seeds(conn, g_models_dir) : -1;
    PQfinish(conn);
    if (rc != 0)
        gj_log_error(COMPONENT, "cannot import the seed directory %s into the model store", g_models_dir);
    return rc;
}

/* The repository, declared from the shared store and kept converged to it; handed to
 * the `infer` kind first (a load of the first pass already takes the host's settings). */
static int start_repository(struct gj_server *srv)
{
    g_repo = gj_model_repo_new();
    if (!g_repo || gj_model_cache_open(srv->cfg.data_dir) != 0)
        return -1;
    gj_infer_repo_set(g_repo);
    /* Triton's none, explicit and poll: use never loads a model (model_control.c). */
    gj_model_repo_set_load_on_use(g_repo, strcmp(gj_infer_model_control(), "on-use") == 0);
    /* `infer` jobs take their models from this repository, as /v2 does (one load each). */
    struct gj_serving_host host = {
        .repo = g_repo,
        .max_queue = (size_t)srv->cfg.infer_max_queue,
        .queue_timeout_us = srv->cfg.infer_queue_timeout_us,
        .threads_per_instance = srv->cfg.infer_threads,
        /* A server's HTTP threads decrypt and copy every request while the model runs: with
         * every CPU given to the model, the two take turns on the same cores (on 2 CPUs, the
         * demo model at batch 8 over /v2: 1 ONNX thread, HTTP adds 2-6 % to the batcher's
         * own time; 2 threads, 22-41 %; BENCHMARKS.md). */
        .reserved_cpus = strcmp(srv->cfg.role, "worker") != 0 ? 1 : 0,
    };
    gj_serving_host_set(&host);
    struct gj_model_sync_config sc = {
        .database_url = srv->database_url,
        .replica = srv->worker_id,
        .role = srv->cfg.role,
        .serving = strcmp(srv->cfg.role, "api") != 0,
        .devices_json = gj_infer_devices_json,
    };
    return gj_model_sync_start(&sc, g_repo);
}

/* Undoes start_repository and model control's start, in the order nothing is left using
 * what goes next (gj_model_sync_stop does nothing when it was never started). */
static void stop_repository(void)
{
    gj_infer_model_control_stop();    /* no poll changes the store any more */
    gj_model_sync_stop();             /* nothing declares or loads any more */
    gj_batcher_registry_shutdown();   /* queued requests answered, executors joined */
    gj_infer_gpu_accounting_detach();
    gj_serving_host_set(NULL);
    gj_infer_repo_set(NULL);
    gj_model_repo_free(g_repo);
    g_repo = NULL;
}

/* The ONNX runtime's notes (the cuDNN algorithm of each convolution shape) into our log. */
static void onnx_note(enum onnx_log_level level, const char *message)
{
    gj_logv(level == ONNX_LOG_INFO ? GJ_LOG_INFO : GJ_LOG_DEBUG, "onnx", "%s", message);
}

static int infer_init(struct gj_server *srv)
{
    onnx_set_log(onnx_note);
    /* /v2's errors, the server's own included, in the shape Triton's clients decode */
    if (gj_http_error_body("/v2", oip_error_body) != 0)
        return -1;
    if (prepare_models_dir(&srv->cfg) != 0 || gj_infer_pseudonym_init(srv) != 0)
        return -1;
    gj_infer_set_purge_phi(srv->cfg.infer_purge_phi);
    gj_infer_set_triton_metrics(srv->cfg.triton_metrics);
    if (srv->cfg.infer_purge_phi)
        gj_log_info(COMPONENT, "--infer-purge-phi: DICOM inputs of infer jobs are deleted and "
                    "their result.json pseudonymised once results are stored");
    /* Loaded models reserve their GPU memory in the worker pool's accounting: attached
     * before the first pass loads what is to be loaded. */
    gj_infer_gpu_accounting_attach(&srv->placement);
    if (import_seeds(srv) != 0 || gj_infer_model_control_start(srv, g_models_dir) != 0 ||
        start_repository(srv) != 0) {
        stop_repository();
        return -1;
    }
    if (gj_infer_delivery_start(srv) != 0) {
        stop_repository();
        return -1;
    }
    gj_log_info(COMPONENT, "model repository: %zu model(s) in the shared model store (seeds from %s)%s",
                gj_model_repo_count(g_repo), g_models_dir,
                strcmp(srv->cfg.role, "api") ? "; Open Inference Protocol v2 at /v2" : "; this replica runs no models");
    return 0;
}

static void infer_shutdown(struct gj_server *srv)
{
    (void)srv;
    gj_infer_delivery_stop();
    stop_repository();
}

static const struct gj_route_table *const infer_routes[] = {
    &gj_infer_routes_models, &gj_infer_routes_dicomweb, &gj_infer_routes_qido, &gj_infer_routes_wado, &gj_infer_routes_wado_metadata, &gj_infer_routes_wado_render, &gj_infer_routes_results, &gj_infer_routes_deliveries,
    &gj_infer_routes_oip_repository, &gj_infer_routes_oip_stats, &gj_infer_routes_oip_trace,
    &gj_infer_routes_oip_logging, &gj_infer_routes_oip_shm, &gj_infer_routes_oip, NULL,
};

static const char *const infer_kinds[] = { "infer", NULL };

static const struct gj_subcommand infer_subcommands[] = {
    { "dicom", gj_dicom_cli_main, "dicom info FILE [--pixels OUT.f32]" },
    { NULL, NULL, NULL },
};

const struct gj_service_module gj_module_infer = {
    .name = "infer",
    .routes = infer_routes,
    .kinds = infer_kinds,
    .init = infer_init,
    .shutdown = infer_shutdown,
    .write_metrics = gj_infer_write_metrics,
    .on_job_succeeded = gj_infer_store_results,
    .start_listeners = gj_infer_grpc_listen,
    .stop_listeners = gj_infer_grpc_unlisten,
    .subcommands = infer_subcommands,
    .run_open = gj_infer_run_open,
    .run_close = gj_infer_run_close,
};
