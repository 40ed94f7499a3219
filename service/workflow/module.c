/*
 * module.c — the workflow module (workflow.h, module.h): the job log route, the tenant's
 * webhook secret, and the thread that delivers callbacks of settled jobs (in every role: any
 * replica may take a due delivery).
 */
#include <curl/curl.h>

#include "service/base/log.h"
#include "service/module.h"
#include "service/workflow/workflow.h"

#define COMPONENT "workflow"

static struct gj_webhook_deliverer *g_deliverer;

static int workflow_init(struct gj_server *srv)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        gj_log_error(COMPONENT, "libcurl could not start");
        return -1;
    }
    if (!(g_deliverer = gj_webhook_deliverer_start(srv))) {
        gj_log_error(COMPONENT, "the callback delivery thread could not start");
        curl_global_cleanup();
        return -1;
    }
    return 0;
}

static void workflow_shutdown(struct gj_server *srv)
{
    (void)srv;
    gj_webhook_deliverer_stop(g_deliverer);
    g_deliverer = NULL;
    curl_global_cleanup();
}

static const struct gj_route_table *const workflow_routes[] = { &gj_routes_job_log, &gj_routes_webhook_secret,
                                                                NULL };

const struct gj_service_module gj_module_workflow = {
    .name = "workflow",
    .routes = workflow_routes,
    .init = workflow_init,
    .shutdown = workflow_shutdown,
};
