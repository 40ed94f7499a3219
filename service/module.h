/*
 * module.h — one part of the service: its routes, its start and stop, its metrics, what it
 * records when a job of one of its kinds succeeds, and what else it brings to the binary
 * (listeners, subcommands, what `gpujobd run` needs from the host).
 *
 * gj_service_modules lists them (gj_modules.c, generated from service_module_names in
 * service/meson.build). cmd_serve.c hands the routes to the HTTP server (and to `serve
 * --print-routes`), the metrics writers to /metrics, the success hooks to the worker pool,
 * and calls init, start_listeners and their stops; main.c adds the subcommands; cmd_run.c
 * calls run_open and run_close. None of them names a module: a module reaches the rest of
 * the service only through the struct gj_server it is given and the layers' headers, and
 * the layers reach a module only through this struct (tools/layers.py checks both ways).
 *
 * A job kind with routes of its own:
 *   1. the kind: compute/<module>/ (struct gj_kind, compute/common/gj_kind.h), one line
 *      in compute/registry.c (so `gpujobd run` has it too);
 *   2. its service half in service/<module>/: route files (struct gj_route,
 *      http_server.h), each exporting a struct gj_route_table, and one
 *      `const struct gj_service_module gj_module_<module>` that fills the fields below it
 *      needs (every field but name may be NULL); a meson.build appending its files to
 *      service_module_sources and its name to service_module_names, with a `# may
 *      include:` line (tools/layers.py), included from service/meson.build;
 *   3. each route in openapi/openapi.yaml (tests/integration/test_api_openapi.py compares
 *      the spec with `gpujobd serve --print-routes`).
 * Settings are flags of service/config.c (with their GPUJOBD_* twins), read from
 * srv->cfg in init; compute code gets what it needs through its own interfaces (as
 * compute/infer/serving/serving_host.h), never from the service's config.
 */
#ifndef GJ_MODULE_H
#define GJ_MODULE_H

#include <stdio.h>

#include "service/http/http_server.h"
#include "service/jobs/queue.h"
#include "service/server.h"

/* A subcommand of the binary: `gpujobd NAME ARGS...` calls main with argv from NAME on;
 * usage is its line in `gpujobd --help`. */
struct gj_subcommand {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *usage;
};

struct gj_service_module {
    const char *name;                              /* "core", "infer": for logs */

    /* Its route tables, NULL-terminated. A request goes to the first route that matches,
     * in module order, then table order. */
    const struct gj_route_table *const *routes;

    /* Names of the kinds (compute/registry.c) whose succeeded jobs on_job_succeeded
     * sees, NULL-terminated. Start-up stops when one is not a known kind, or when two
     * modules claim the same kind. */
    const char *const *kinds;

    /* At start, in list order, in every role (api, worker, all): after the database is
     * migrated and the pool, notifier and placement are up, before any HTTP or worker
     * thread runs. 0, or -1 with a log line saying why (start-up stops there; the
     * modules already started are shut down). */
    int (*init)(struct gj_server *srv);

    /* At stop, in reverse list order, after the HTTP server and the workers have
     * stopped (nothing calls the module any more); only for modules whose init
     * returned 0. */
    void (*shutdown)(struct gj_server *srv);

    /* Appends Prometheus text exposition to a /metrics answer: metric names start with
     * gpujobd_, each with its # HELP and # TYPE lines. May run on any HTTP thread. */
    void (*write_metrics)(FILE *f);

    /* A job of one of its kinds succeeded. Runs inside the transaction that marks it
     * succeeded and stores its outputs (so what it writes commits with them, or not at
     * all); output_dir holds the files the job wrote, before they are stored, and may be
     * rewritten (a file it removes is not stored). 0, or -1 (logged): the transaction is
     * rolled back and the job retried. */
    gj_job_succeeded_fn on_job_succeeded;

    /* Listeners of its own beside the HTTP server, in the api and all roles: started in
     * list order after the HTTP server, given its TLS certificate and key (PEM; NULL
     * with --insecure-http); 0, or -1 logged (start-up stops). Stopped in reverse order
     * after the workers and before the HTTP server, for modules whose start returned 0. */
    int (*start_listeners)(struct gj_server *srv, const char *cert, const char *key);
    void (*stop_listeners)(struct gj_server *srv);

    /* Its subcommands of gpujobd, ended by one whose name is NULL. */
    const struct gj_subcommand *subcommands;

    /* `gpujobd run` (no server, no database): what its kinds need from the host, set up
     * before the job runs (models_dir: --models-dir, default ./models) and taken down
     * after. run_open's result (NULL: nothing set up) goes to run_close. */
    void *(*run_open)(const char *models_dir);
    void (*run_close)(void *opened);
};

/* The binary's modules, in route order, NULL-terminated (gj_modules.c). */
extern const struct gj_service_module *const gj_service_modules[];

#endif
