/*
 * grpc_listen.c — the inference module's listener beside the HTTP server (module.h's
 * start_listeners): Triton's GRPCInferenceService (grpc_oip.c) on the gRPC front end
 * (service/grpc/grpc_server.h) at --grpc-listen.
 */
#include <stdlib.h>

#include "service/grpc/grpc_server.h"
#include "service/http/tls.h"
#include "service/infer/infer.h"
#include "service/infer/module_parts.h"
#include "service/server.h"

static struct gj_grpc_server *g_grpc;
static char *g_cert, *g_key;   /* loaded here when the HTTP server has none (--insecure-http) */

int gj_infer_grpc_listen(struct gj_server *srv, const char *cert, const char *key)
{
    if (!srv->cfg.grpc_host[0])
        return 0;
    if (srv->cfg.insecure_http && !srv->cfg.grpc_insecure) {
        if (gj_tls_load(srv->cfg.data_dir, srv->cfg.tls_cert, srv->cfg.tls_key, &g_cert, &g_key))
            return -1;
        cert = g_cert;
        key = g_key;
    }
    g_grpc = gj_grpc_start(srv, &gj_infer_grpc_methods, cert, key);
    if (!g_grpc) {
        gj_infer_grpc_unlisten(srv);   /* the certificate loaded here */
        return -1;
    }
    return 0;
}

void gj_infer_grpc_unlisten(struct gj_server *srv)
{
    if (g_grpc)
        gj_grpc_stop(g_grpc, srv->cfg.shutdown_grace_seconds);
    g_grpc = NULL;
    free(g_cert);
    free(g_key);
    g_cert = g_key = NULL;
}
