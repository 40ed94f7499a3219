/*
 * cmd_serve.c — `gpujobd serve`: brings the parts up in dependency order
 * (database, schema, admin key, pool, notifications, placement, HTTP, workers),
 * waits for SIGTERM or SIGINT, and takes them down in reverse: stop claiming,
 * let running jobs finish within the grace period, requeue the rest, exit 0.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "service/auth.h"
#include "service/cli.h"
#include "service/devices.h"
#include "service/http_server.h"
#include "service/inference_store.h"
#include "service/log.h"
#include "service/migrate.h"
#include "service/oip.h"
#include "service/pg_embedded.h"
#include "service/server.h"
#include "service/tls.h"
#include "service/worker_pool.h"

/* Applies migrations and creates the first admin key on one short-lived connection. */
static int prepare_database(struct gj_server *srv)
{
    PGconn *conn = gj_db_connect(srv->database_url);
    if (!conn)
        return -1;
    int rc = -1;
    if (gj_migrate(conn) < 0)
        goto out;
    char key_path[GJ_PATH_MAX];
    if (gj_path_join(key_path, sizeof key_path, srv->cfg.data_dir, "admin.key") != 0) {
        fprintf(stderr, "gpujobd: --data-dir: too long for %s/admin.key\n", srv->cfg.data_dir);
        goto out;
    }
    if (gj_admin_key_bootstrap(conn, key_path))
        goto out;
    rc = 0;
out:
    PQfinish(conn);
    return rc;
}

static void init_placement(struct gj_server *srv)
{
    int n = gj_device_count();
    uint64_t totals[GJ_PLACE_MAX_GPUS];
    if (n > GJ_PLACE_MAX_GPUS)
        n = GJ_PLACE_MAX_GPUS;
    for (int i = 0; i < n; i++) {
        struct gj_device_info info;
        totals[i] = gj_device_info(i, &info) == 0 ? info.total_bytes : 0;
    }
    gj_placement_init(&srv->placement, srv->cfg.placement, n, totals, srv->cfg.workers_per_gpu,
                      srv->cfg.cpu_workers, (uint64_t)time(NULL) ^ (uint64_t)getpid());
    gj_log_info("serve", "%d GPU slot(s) on %d GPU(s), %d CPU slot(s), placement %s",
                n * srv->cfg.workers_per_gpu, n, srv->cfg.cpu_workers,
                gj_placement_name(srv->cfg.placement));
}

/* `--print-routes` lists the route table (the OpenAPI test compares it with the spec). */
static int wants_routes(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--print-routes") == 0)
            return 1;
    return 0;
}

int gj_cmd_serve(int argc, char **argv)
{
    if (wants_routes(argc, argv)) {
        gj_http_print_routes(stdout);
        return 0;
    }

    struct gj_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        fprintf(stderr, "gpujobd: out of memory\n");
        return 1;
    }
    int rc = gj_config_load(&srv->cfg, argc, argv, 0);
    if (rc) {
        free(srv);
        return rc > 0 ? 0 : 2;
    }

    /* Signals go to sigwait() below, never to a worker or HTTP thread. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct gj_pg_embedded *pg = NULL;
    struct gj_http_server *http = NULL;
    char *cert = NULL, *key = NULL;
    int exit_code = 1;

    if (gj_mkdir_p(srv->cfg.data_dir, 0755)) {
        fprintf(stderr, "gpujobd: --data-dir: cannot create %s: %s\n", srv->cfg.data_dir,
                strerror(errno));
        goto out;
    }
    if (gj_mkdir_p(srv->cfg.work_dir, 0700)) {
        fprintf(stderr, "gpujobd: --work-dir: cannot create %s: %s\n", srv->cfg.work_dir,
                strerror(errno));
        goto out;
    }

    if (srv->cfg.database_url[0]) {
        snprintf(srv->database_url, sizeof srv->database_url, "%s", srv->cfg.database_url);
    } else {
        pg = gj_pg_embedded_start(srv->cfg.data_dir, &srv->cfg.pg, srv->database_url, sizeof srv->database_url);
        if (!pg)
            goto out;
    }
    if (prepare_database(srv))
        goto out;
    if (gj_inference_init(srv))   /* models dir (GPUJOBD_MODELS_DIR), demo model, pseudonym secret */
        goto out;

    srv->db = gj_db_pool_open(srv->database_url, srv->cfg.db_pool_size);
    if (!srv->db)
        goto out;
    srv->notifier = gj_notifier_start(srv->database_url);
    if (!srv->notifier)
        goto out;
    init_placement(srv);

    char host[200] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(srv->worker_id, sizeof srv->worker_id, "%s:%d:%ld", host, (int)getpid(),
             (long)time(NULL));

    int serve_api = strcmp(srv->cfg.role, "worker") != 0;
    int run_workers = strcmp(srv->cfg.role, "api") != 0;
    if (serve_api) {
        if (gj_oip_init(srv))   /* Open Inference Protocol v2 routes, batchers */
            goto out;
        if (!srv->cfg.insecure_http &&
            gj_tls_load(srv->cfg.data_dir, srv->cfg.tls_cert, srv->cfg.tls_key, &cert, &key))
            goto out;
        http = gj_http_start(srv, cert, key);
        if (!http)
            goto out;
    }
    if (run_workers) {
        srv->workers = gj_worker_pool_start(srv);
        if (!srv->workers)
            goto out;
    }
    atomic_store(&srv->ready, 1);
    gj_log_info("serve", "gpujobd ready: %s://%s:%d/ (role %s, worker %s)",
                srv->cfg.insecure_http ? "http" : "https", srv->cfg.listen_host,
                srv->cfg.listen_port, srv->cfg.role, srv->worker_id);

    int sig = 0;
    while (sigwait(&sigs, &sig) != 0)
        ;
    gj_log_info("serve", "%s received: no new jobs are claimed; running jobs get %d s to finish",
                sig == SIGTERM ? "SIGTERM" : "SIGINT", srv->cfg.shutdown_grace_seconds);
    atomic_store(&srv->stopping, 1);
    atomic_store(&srv->ready, 0);
    exit_code = 0;

out:
    if (srv->workers)
        gj_worker_pool_stop(srv->workers, srv->cfg.shutdown_grace_seconds);
    if (http)
        gj_http_stop(http);
    if (srv->notifier)
        gj_notifier_stop(srv->notifier);
    if (srv->db)
        gj_db_pool_close(srv->db);
    if (srv->placement.cpu_slots || srv->placement.n_gpus)
        gj_placement_destroy(&srv->placement);
    if (pg)
        gj_pg_embedded_stop(pg);
    free(cert);
    free(key);
    free(srv);
    if (exit_code == 0)
        gj_log_info("serve", "stopped cleanly");
    return exit_code;
}
