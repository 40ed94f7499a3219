/*
 * routes_oip_shm.c — Triton's shared-memory extensions on /v2, which this server does not
 * have (its clients send tensors in the request body, binary or JSON): the routes answer
 * as a Triton server without the feature does, so that a client learns it from Triton's
 * own error instead of a 404:
 *
 *   GET  /v2/{system,cuda}sharedmemory/status                    [] (no region)
 *   GET  /v2/{system,cuda}sharedmemory/region/{name}/status      404 "Unable to find ..."
 *   POST /v2/{system,cuda}sharedmemory/region/{name}/register    400 "failed to register
 *                                                                ... region: 'name', ..."
 *   POST /v2/{system,cuda}sharedmemory[/region/{name}]/unregister  200: nothing is
 *                                                                registered (as Triton
 *                                                                unregistering an unknown
 *                                                                region)
 *
 * The CUDA message is Triton's own for a server built without GPU support.
 */
#include <string.h>

#include "service/http/http_server.h"
#include "service/infer/infer.h"
#include "service/infer/oip.h"

/* 1 for the cudasharedmemory routes. */
static int is_cuda(const struct gj_req *r)
{
    return strncmp(r->path, "/v2/cudasharedmemory", 20) == 0;
}

int oip_shm_status(int cuda, const char *name, struct gj_error *err)
{
    if (name && *name)
        return oip_refuse(err, 404, "Unable to find %s shared memory region: '%s'", cuda ? "cuda" : "system", name);
    return 0;
}

int oip_shm_register(int cuda, const char *name, struct gj_error *err)
{
    if (cuda)
        return oip_refuse(err, 400, "failed to register CUDA shared memory region: '%s', GPUs not supported", name);
    return oip_refuse(err, 400, "failed to register system shared memory region: '%s', shared memory not supported: "
                      "send the tensors in the request body (binary_data)", name);
}

static void shm_status(struct gj_req *r)
{
    struct gj_error err = { 0 };
    if (oip_shm_status(is_cuda(r), r->n_params ? r->params[0] : NULL, &err) == 0)
        gj_respond_json(r, 200, json_array());
    else
        oip_error(r, err.status, "%s", err.message);
}

static void shm_register(struct gj_req *r)
{
    struct gj_error err = { 0 };
    oip_shm_register(is_cuda(r), r->params[0], &err);
    oip_error(r, err.status, "%s", err.message);
}

static void shm_unregister(struct gj_req *r)
{
    gj_respond_empty(r, 200);
}

#define SHM_ROUTES(prefix)                                                                                        \
    { "GET", prefix "/status", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, shm_status, NULL },                       \
    { "GET", prefix "/region/{name}/status", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, shm_status, NULL },         \
    { "POST", prefix "/region/{name}/register", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, shm_register, NULL },    \
    { "POST", prefix "/region/{name}/unregister", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, shm_unregister, NULL }, \
    { "POST", prefix "/unregister", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, shm_unregister, NULL }

static const struct gj_route shm_routes[] = {
    SHM_ROUTES("/v2/systemsharedmemory"),
    SHM_ROUTES("/v2/cudasharedmemory"),
};
const struct gj_route_table gj_infer_routes_oip_shm = { shm_routes, sizeof shm_routes / sizeof shm_routes[0] };
