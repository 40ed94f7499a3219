/*
 * module.c — the CARMIN module (carmin.h, module.h): routes only; its jobs are the other
 * modules' kinds.
 */
#include "service/carmin/archive_pool.h"
#include "service/carmin/carmin.h"
#include "service/carmin/carmin_fs.h"
#include "service/carmin/carmin_routes.h"
#include "service/module.h"

static const struct gj_route_table *const carmin_routes[] = { &gj_routes_carmin_platform, &gj_routes_carmin_path,
                                                              &gj_routes_carmin_exec,
                                                              NULL };

/* The server's own errors under /rest/ (no route, a limit, the database away) in CARMIN's
 * shape too: a VIP client decodes every error the same way. */
static int carmin_init(struct gj_server *srv)
{
    carmin_archive_configure(&srv->cfg);
    return gj_http_error_body("/rest/", carmin_error_body) == 0 && gj_http_prefix_auth("/rest/", carmin_gate) == 0
               ? 0
               : -1;
}

/* After the HTTP server has stopped: every archive upload has left the pool. */
static void carmin_shutdown(struct gj_server *srv)
{
    (void)srv;
    carmin_archive_pool_stop();
}

const struct gj_service_module gj_module_carmin = {
    .name = "carmin",
    .routes = carmin_routes,
    .init = carmin_init,
    .shutdown = carmin_shutdown,
};
