/*
 * core.c — the core API as a module (module.h): jobs, blobs, kinds, API keys, health,
 * readiness and metrics. Its metrics and its state live in metrics.c and the queue; it
 * brings routes only.
 */
#include "service/module.h"
#include "service/api/routes_provenance.h"

static const struct gj_route_table *const core_routes[] = {
    &gj_routes_misc, &gj_routes_blobs, &gj_routes_jobs, &gj_routes_tenants, &gj_routes_provenance, NULL,
};

const struct gj_service_module gj_module_core = {
    .name = "core",
    .routes = core_routes,
};
