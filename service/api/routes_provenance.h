/*
 * routes_provenance.h — GET /v1/jobs/{id}/provenance and POST /v1/jobs/{id}/rerun (issue 26),
 * a route table of the core module (core.c).
 */
#ifndef GJ_ROUTES_PROVENANCE_H
#define GJ_ROUTES_PROVENANCE_H

#include "service/http/http_server.h"

extern const struct gj_route_table gj_routes_provenance;

#endif
