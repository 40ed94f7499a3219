/*
 * module.c — the CARMIN module (carmin.h, module.h): routes only; its jobs are the other
 * modules' kinds.
 */
#include "service/carmin/carmin_routes.h"
#include "service/module.h"

static const struct gj_route_table *const carmin_routes[] = { &gj_routes_carmin_platform, &gj_routes_carmin_path,
                                                              &gj_routes_carmin_exec,
                                                              NULL };

const struct gj_service_module gj_module_carmin = {
    .name = "carmin",
    .routes = carmin_routes,
};
