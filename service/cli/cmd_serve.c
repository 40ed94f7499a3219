/*
 * cmd_serve.c — `gpujobd serve`: brings the parts up in dependency order
 * (database, schema, admin key, pool, notifications, placement, the modules, HTTP,
 * workers), waits for SIGTERM or SIGINT, and takes them down in reverse: stop claiming,
 * let running jobs finish within the grace period, requeue the rest, exit 0.
 *
 * It holds the list of the service's modules (module.h) and is the only reader of it.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/fsutil.h"
#include "common/gj_kind.h"
#include "service/auth/auth.h"
#include "service/cli/cli.h"
#include "service/jobs/devices.h"
#include "service/jobs/gpu_metrics.h"
#include "service/jobs/host_memory.h"
#include "service/http/http_server.h"
#include "service/auth/key_cache.h"
#include "service/jobs/job_cache.h"
#include "service/jobs/lease_rescue.h"
#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/db/blob_janitor.h"
#include "service/db/blob_s3.h"
#include "service/db/migrate.h"
#include "service/module.h"
#include "service/db/pg_embedded.h"
#include "service/server.h"
#include "service/db/storage_quota.h"
#include "service/http/tls.h"
#include "service/auth/client_crl.h"
#include "service/http/upload_spool.h"
#include "service/jobs/worker_pool.h"

static const struct gj_service_module *const *const modules = gj_service_modules;
static size_t n_modules(void)
{
    size_t n = 0;
    while (modules[n])
        n++;
    return n;
}
#define N_MODULES n_modules()

#define MAX_ROUTE_TABLES 64
#define MAX_KIND_HOOKS 64

/* What cmd_serve hands out from the module list; static: the server outlives nothing. */
static const struct gj_route_table *route_tables[MAX_ROUTE_TABLES + 1];
static struct gj_kind_hook kind_hooks[MAX_KIND_HOOKS];

/* Every module's route tables, in module order, NULL-terminated. 0 or -1. */
static int collect_routes(void)
{
    size_t n = 0;
    for (size_t m = 0; m < N_MODULES; m++)
        for (size_t t = 0; modules[m]->routes && modules[m]->routes[t]; t++) {
            if (n == MAX_ROUTE_TABLES) {
                fprintf(stderr, "gpujobd: more than %d route tables\n", MAX_ROUTE_TABLES);
                return -1;
            }
            route_tables[n++] = modules[m]->routes[t];
        }
    route_tables[n] = NULL;
    return 0;
}

/* The success hooks of the modules' kinds, and their metrics writers. 0, or -1 logged. */
static int wire_modules(struct gj_server *srv)
{
    size_t n = 0;
    for (size_t m = 0; m < N_MODULES; m++) {
        const struct gj_service_module *mod = modules[m];
        if (mod->write_metrics && gj_metrics_add_writer(mod->write_metrics) != 0) {
            gj_log_error("serve", "module %s: too many metrics writers", mod->name);
            return -1;
        }
        for (size_t k = 0; mod->kinds && mod->kinds[k]; k++) {
            const char *kind = mod->kinds[k];
            if (!gj_kind_find(kind)) {
                gj_log_error("serve", "module %s brings kind %s, which compute/registry.c lacks", mod->name, kind);
                return -1;
            }
            for (size_t i = 0; i < n; i++)
                if (strcmp(kind_hooks[i].kind, kind) == 0) {
                    gj_log_error("serve", "kind %s is claimed by two modules", kind);
                    return -1;
                }
            if (n == MAX_KIND_HOOKS) {
                gj_log_error("serve", "more than %d module kinds", MAX_KIND_HOOKS);
                return -1;
            }
            kind_hooks[n++] = (struct gj_kind_hook){ kind, mod->on_job_succeeded };
        }
    }
    srv->kind_hooks = kind_hooks;
    srv->n_kind_hooks = n;
    return 0;
}

/* Starts the modules in list order; *started counts those to shut down. 0 or -1. */
static int init_modules(struct gj_server *srv, size_t *started)
{
    for (*started = 0; *started < N_MODULES; (*started)++) {
        const struct gj_service_module *mod = modules[*started];
        if (mod->init && mod->init(srv) != 0) {
            gj_log_error("serve", "module %s did not start", mod->name);
            return -1;
        }
    }
    return 0;
}

static void shutdown_modules(struct gj_server *srv, size_t started)
{
    while (started > 0) {
        const struct gj_service_module *mod = modules[--started];
        if (mod->shutdown)
            mod->shutdown(srv);
    }
}

/* The modules' own listeners (the gRPC front end), after the HTTP server, with its TLS
 * certificate and key; *started counts those to stop. 0 or -1. */
static int start_listeners(struct gj_server *srv, const char *cert, const char *key, size_t *started)
{
    for (*started = 0; *started < N_MODULES; (*started)++) {
        const struct gj_service_module *mod = modules[*started];
        if (mod->start_listeners && mod->start_listeners(srv, cert, key) != 0) {
            gj_log_error("serve", "module %s: its listeners did not start", mod->name);
            return -1;
        }
    }
    return 0;
}

static void stop_listeners(struct gj_server *srv, size_t started)
{
    while (started > 0) {
        const struct gj_service_module *mod = modules[--started];
        if (mod->stop_listeners)
            mod->stop_listeners(srv);
    }
}

/* Applies migrations and creates the first admin key on one short-lived connection. */
static int prepare_database(struct gj_server *srv)
{
    PGconn *conn = gj_db_connect(srv->database_url);
    if (!conn)
        return -1;
    int rc = -1;
    if (gj_migrate(conn) < 0)
        goto out;
    if (srv->cfg.admin_key[0]) {   /* --admin-key-file: that key, never one made here */
        rc = gj_admin_key_adopt(conn, srv->cfg.admin_key, srv->cfg.admin_key_file);
        goto out;
    }
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
    struct gj_host_memory host;
    gj_host_memory_read(srv->cfg.test.fake_host_memory, srv->cfg.host_memory_reserve, &host);
    gj_placement_set_host(&srv->placement, host.usable);
    gj_gpu_metrics_watch(&srv->placement);
    if (host.usable)
        gj_log_info("serve", "host memory for jobs: %llu MiB (%llu MiB%s, less %llu MiB kept for the service)",
                    (unsigned long long)(host.usable >> 20), (unsigned long long)(host.total >> 20),
                    srv->cfg.test.fake_host_memory ? " as GPUJOBD_FAKE_HOST_MEMORY says" : "",
                    (unsigned long long)(host.reserve >> 20));
}

/* `--print-routes` lists the route table (the OpenAPI test compares it with the spec). */
static int wants_routes(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--print-routes") == 0)
            return 1;
    return 0;
}

/* What a running server holds beyond struct gj_server, to take down in reverse. */
struct serve_run {
    struct gj_server *srv;
    struct gj_pg_embedded *pg;
    struct gj_http_server *http;
    struct gj_http_server *metrics_http;   /* --metrics-listen, any role */
    struct gj_lease_rescuer *rescuer;   /* --role api: no worker pool rescues here */
    struct gj_s3 *s3;                      /* --blob-store s3 */
    struct gj_blob_janitor *blob_janitor;
    size_t modules_started;
    size_t listeners_started;   /* modules whose start_listeners ran */
    char *cert, *key;
};

/* Directories, the database (embedded or given), migrations and the admin key. */
static int start_storage(struct serve_run *run)
{
    struct gj_server *srv = run->srv;
    if (gj_mkdir_p(srv->cfg.data_dir, 0755)) {
        fprintf(stderr, "gpujobd: --data-dir: cannot create %s: %s\n", srv->cfg.data_dir, strerror(errno));
        return -1;
    }
    if (gj_mkdir_p(srv->cfg.work_dir, 0700)) {
        fprintf(stderr, "gpujobd: --work-dir: cannot create %s: %s\n", srv->cfg.work_dir, strerror(errno));
        return -1;
    }
    if (srv->cfg.database_url[0]) {
        snprintf(srv->database_url, sizeof srv->database_url, "%s", srv->cfg.database_url);
        gj_db_set_password(srv->cfg.database_password);
    } else {
        run->pg = gj_pg_embedded_start(srv->cfg.data_dir, &srv->cfg.pg, srv->database_url,
                                       sizeof srv->database_url);
        if (!run->pg)
            return -1;
    }
    return prepare_database(srv);
}

/* --blob-store s3: new blobs go to the store, and its maintenance pass runs here. */
static int start_blob_store(struct serve_run *run)
{
    const struct gj_config *cfg = &run->srv->cfg;
    if (!cfg->s3_endpoint[0])
        return 0;   /* with --blob-store postgres and a store given, its blobs are still read */
    struct gj_s3_config s3 = { .endpoint = cfg->s3_endpoint, .bucket = cfg->s3_bucket, .region = cfg->s3_region,
                               .virtual_host = strcmp(cfg->s3_addressing, "virtual") == 0,
                               .access_key = cfg->s3_access_key, .secret_key = cfg->s3_secret_key,
                               .ca_file = cfg->s3_ca_file };
    char why[300] = "cannot initialise libcurl";
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(run->s3 = gj_s3_new(&s3, why, sizeof why)) ||
        gj_blobstore_use_s3(run->s3, run->srv->database_url, strcmp(cfg->blob_store, "s3") == 0) != 0) {
        fprintf(stderr, "gpujobd: --blob-store s3: %s\n", run->s3 ? "out of memory" : why);
        return -1;
    }
    int every = cfg->s3_stale_upload_seconds / 2 < 60 ? cfg->s3_stale_upload_seconds / 2 : 60;
    run->blob_janitor = gj_blob_janitor_start(run->srv->db, every, cfg->s3_stale_upload_seconds);
    if (!run->blob_janitor)
        return -1;
    gj_log_info("serve", "blobs %s %s, bucket %s", strcmp(cfg->blob_store, "s3") == 0 ? "go to" : "are also read from",
                cfg->s3_endpoint, cfg->s3_bucket);
    return 0;
}

/* The notifier's forgets, into the job cache (job_cache.h). */
static void forget_job(const char *job_id, int listening, void *arg)
{
    struct gj_job_cache *jc = arg;
    if (job_id)
        gj_job_cache_forget(jc, job_id);
    else
        gj_job_cache_set_live(jc, listening);
}

/* Status answers kept from one read to the job's next change (--job-cache-ms 0: none). */
static int start_job_cache(struct gj_server *srv)
{
    if (srv->cfg.job_cache_ms <= 0)
        return 0;
    if (!(srv->job_cache = gj_job_cache_new(GJ_JOB_CACHE_CAPACITY, (uint64_t)srv->cfg.job_cache_ms))) {
        gj_log_error("serve", "out of memory for the job cache");
        return -1;
    }
    gj_notifier_on_forget(srv->notifier, forget_job, srv->job_cache);
    return 0;
}

/* Pool, notifications, placement, the modules, then HTTP and the workers (by role). */
static int start_serving(struct serve_run *run)
{
    struct gj_server *srv = run->srv;
    srv->db = gj_db_pool_open(srv->database_url, srv->cfg.db_pool_size);
    if (!srv->db)
        return -1;
    gj_db_pool_set_read_reserve(srv->db, srv->cfg.db_reserve_for_reads);
    if (start_blob_store(run) != 0)
        return -1;
    srv->notifier = gj_notifier_start(srv->database_url);
    if (!srv->notifier)
        return -1;
    init_placement(srv);
    gj_mem_budget_init(&srv->render_memory, srv->cfg.render_memory);
    gj_storage_quota_configure(srv->cfg.tenant_storage_quota);
    char host[200] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(srv->worker_id, sizeof srv->worker_id, "%s:%d:%ld", host, (int)getpid(), (long)time(NULL));

    /* The per-GPU series after the modules' own, as /metrics has always listed them. */
    if (wire_modules(srv) != 0 || gj_metrics_add_writer(gj_gpu_metrics_write) != 0 ||
        init_modules(srv, &run->modules_started) != 0)
        return -1;
    if (strcmp(srv->cfg.role, "worker") != 0) {
        if (!srv->cfg.insecure_http &&
            gj_tls_load(srv->cfg.data_dir, srv->cfg.tls_cert, srv->cfg.tls_key, &run->cert, &run->key))
            return -1;
        gj_http_set_upload_ops(&gj_upload_spool_ops);
        if (srv->cfg.api_key_cache_ms > 0 &&
            !(srv->api_keys = gj_key_cache_new(GJ_KEY_CACHE_CAPACITY, (uint64_t)srv->cfg.api_key_cache_ms)))
            return -1;
        if (start_job_cache(srv) != 0)
            return -1;
        if (gj_client_crl_load(srv->cfg.tls_crl, srv->cfg.tls_client_ca) != 0)
            return -1;
        run->http = gj_http_start(srv, route_tables, run->cert, run->key);
        if (!run->http)
            return -1;
        if (start_listeners(srv, run->cert, run->key, &run->listeners_started) != 0)
            return -1;
    }
    static const struct gj_route_table *const probe_tables[] = { &gj_routes_probes, NULL };
    if (srv->cfg.metrics_host[0] && !(run->metrics_http = gj_http_start_metrics(srv, probe_tables)))
        return -1;
    if (strcmp(srv->cfg.role, "api") != 0) {
        srv->workers = gj_worker_pool_start(srv);
        if (!srv->workers)
            return -1;
    } else if (!(run->rescuer = gj_lease_rescuer_start(srv))) {
        return -1;
    }
    return 0;
}

/* Takes down what start_storage and start_serving brought up, in reverse. */
static void stop_all(struct serve_run *run)
{
    struct gj_server *srv = run->srv;
    int stuck = srv->workers && gj_worker_pool_stop(srv->workers, srv->cfg.shutdown_grace_seconds) != 0;
    gj_lease_rescuer_stop(run->rescuer);
    stop_listeners(srv, run->listeners_started);
    if (run->http)
        gj_http_stop(run->http);
    if (run->metrics_http)
        gj_http_stop(run->metrics_http);
    gj_client_crl_free();
    if (stuck) {
        /* A job's thread did not stop when asked (its job is back in the queue): it may
         * still use everything below, so nothing is freed; shutdown keeps its bound. */
        if (run->pg)
            gj_pg_embedded_stop(run->pg);
        gj_log_warn("serve", "stopped with a job's thread still running");
        fflush(NULL);
        _exit(0);
    }
    shutdown_modules(srv, run->modules_started);
    gj_blob_janitor_stop(run->blob_janitor);
    if (run->s3) {
        gj_blobstore_use_postgres();
        gj_s3_free(run->s3);
        curl_global_cleanup();
    }
    if (srv->notifier)
        gj_notifier_stop(srv->notifier);
    gj_job_cache_free(srv->job_cache);
    srv->job_cache = NULL;
    if (srv->db)
        gj_db_pool_close(srv->db);
    gj_gpu_metrics_watch(NULL);
    if (srv->placement.cpu_slots || srv->placement.n_gpus)
        gj_placement_destroy(&srv->placement);
    if (run->pg)
        gj_pg_embedded_stop(run->pg);
    gj_key_cache_free(srv->api_keys);
    srv->api_keys = NULL;
    free(run->cert);
    free(run->key);
}

/* Threads that libraries start from their constructors, before main (OpenBLAS's pool), do not
 * block SIGTERM: the kernel may hand it to one of them (as it does when the main thread has
 * another signal pending, right after a SIGCONT), whose default action ended the process with
 * no shutdown at all. There a handler passes it on to the thread that waits for it. */
static pthread_t signal_waiter;

static void forward_signal(int sig)
{
    pthread_kill(signal_waiter, sig);   /* async-signal-safe; blocked there, so sigwait gets it */
}

static void forward_to_this_thread(const sigset_t *sigs)
{
    signal_waiter = pthread_self();
    struct sigaction sa = { .sa_handler = forward_signal };
    sigfillset(&sa.sa_mask);
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(sigs, sig) == 1 && sigaction(sig, &sa, NULL) != 0)
            gj_log_warn("serve", "sigaction(%d): %s", sig, strerror(errno));
}

/* Ready until SIGTERM or SIGINT (blocked in every thread, taken here). */
static void serve_until_signal(struct gj_server *srv, const sigset_t *sigs)
{
    atomic_store(&srv->ready, 1);
    gj_log_info("serve", "gpujobd ready: %s://%s:%d/ (role %s, worker %s)",
                srv->cfg.insecure_http ? "http" : "https", srv->cfg.listen_host, srv->cfg.listen_port,
                srv->cfg.role, srv->worker_id);
    int sig = 0;
    while (sigwait(sigs, &sig) != 0)
        ;
    gj_log_info("serve", "%s received: no new jobs are claimed; running jobs get %d s to finish",
                sig == SIGTERM ? "SIGTERM" : "SIGINT", srv->cfg.shutdown_grace_seconds);
    atomic_store(&srv->stopping, 1);
    atomic_store(&srv->ready, 0);
}

int gj_cmd_serve(int argc, char **argv)
{
    if (collect_routes() != 0)
        return 1;
    if (wants_routes(argc, argv)) {
        gj_http_print_routes(stdout, route_tables);
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
    struct gj_error err = { 0 };
    if (gj_kind_schemas_compile(&err) != 0) {   /* once, here: a submit only validates */
        fprintf(stderr, "gpujobd: %s\n", err.message);
        free(srv);
        return 1;
    }
    /* Signals go to sigwait(), never to a worker or HTTP thread. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    forward_to_this_thread(&sigs);
    signal(SIGPIPE, SIG_IGN);

    struct serve_run run = { .srv = srv };
    int exit_code = 1;
    if (start_storage(&run) == 0 && start_serving(&run) == 0) {
        serve_until_signal(srv, &sigs);
        exit_code = 0;
    }
    stop_all(&run);
    free(srv);
    if (exit_code == 0)
        gj_log_info("serve", "stopped cleanly");
    return exit_code;
}
