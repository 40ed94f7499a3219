/*
 * carmin_routes.h — the CARMIN module's route tables (module.c lists them): platform and
 * pipelines (routes_platform.c), the file space (routes_path.c), executions (routes_exec.c).
 */
#ifndef GJ_CARMIN_ROUTES_H
#define GJ_CARMIN_ROUTES_H

#include "service/http/http_server.h"

extern const struct gj_route_table gj_routes_carmin_platform;
extern const struct gj_route_table gj_routes_carmin_path;
extern const struct gj_route_table gj_routes_carmin_exec;

#endif
