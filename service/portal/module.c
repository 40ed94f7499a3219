/*
 * module.c — the web portal as a module of the service (module.h; portal.h lists its parts).
 * It brings routes only: no kinds, no state of its own beyond the `sessions` table.
 */
#include "service/module.h"
#include "service/portal/portal.h"

static const struct gj_route_table *const portal_routes[] = {
    &gj_routes_portal_assets, &gj_routes_portal_session, &gj_routes_portal_events,
    &gj_routes_portal_slices, &gj_routes_portal_thumbnail, NULL,
};

const struct gj_service_module gj_module_portal = {
    .name = "portal",
    .routes = portal_routes,
};
