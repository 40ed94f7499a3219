/*
 * server.h — what one serving process holds, shared by the HTTP routes and the
 * worker pool. Built by cmd_serve.c; everything here outlives every request.
 */
#ifndef GJ_SERVER_H
#define GJ_SERVER_H

#include <stdatomic.h>

#include "service/config.h"
#include "service/db/db.h"
#include "service/base/mem_budget.h"
#include "service/db/notify.h"
#include "service/jobs/placement.h"
#include "service/jobs/queue.h"

struct gj_worker_pool;
struct gj_key_cache;
struct gj_job_cache;

/* A kind whose succeeded jobs a module records (module.h: kinds, on_job_succeeded). */
struct gj_kind_hook {
    const char *kind;
    gj_job_succeeded_fn on_succeeded;
};

struct gj_server {
    struct gj_config cfg;
    char database_url[2048];      /* the effective URL (embedded or given) */
    struct gj_db_pool *db;        /* requests and workers borrow from here */
    struct gj_notifier *notifier;
    struct gj_placement placement;
    struct gj_mem_budget render_memory;   /* --render-memory: DICOM renders (render_budget.h) */
    struct gj_worker_pool *workers;   /* NULL when role is "api" */
    struct gj_key_cache *api_keys;    /* keys verified lately (key_cache.h); NULL: off */
    struct gj_job_cache *job_cache;   /* status answers kept until their job changes (job_cache.h); NULL: off */
    char worker_id[256];              /* host:pid:start — lease owner name */
    const struct gj_kind_hook *kind_hooks;   /* from the modules (cmd_serve.c); may be NULL */
    size_t n_kind_hooks;
    atomic_int stopping;              /* SIGTERM seen: claim nothing new */
    atomic_int ready;                 /* migrations applied and workers running */
};

#endif
