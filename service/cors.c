/*
 * cors.c — CORS for the origins of --cors-origin (cors.h; the Fetch standard's CORS
 * protocol).
 */
#include <string.h>
#include <strings.h>

#include "service/cors.h"
#include "service/http_server.h"

#define ALLOW_METHODS "GET, HEAD, POST, PUT, DELETE"
#define ALLOW_HEADERS                                                                                   \
    "Authorization, Content-Type, Content-Digest, Idempotency-Key, If-None-Match, If-Range, "         \
    "Last-Event-ID, Range, X-CSRF-Token"
#define EXPOSE_HEADERS "Content-Range, ETag, Location, Retry-After, X-Request-Id"
#define PREFLIGHT_MAX_AGE "600"

int gj_cors_origin_listed(const char *list, const char *origin)
{
    if (!list || !*list || !origin || !*origin)
        return 0;
    size_t olen = strlen(origin);
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        /* scheme and host compare without case (browsers send them lower-cased) */
        if (n == olen && strncasecmp(p, origin, n) == 0)
            return 1;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

static const char *listed_origin(struct gj_req *r)
{
    const char *origin = gj_req_header(r, "Origin");
    return gj_cors_origin_listed(r->srv->cfg.cors_origins, origin) ? origin : NULL;
}

int gj_cors_preflight(struct gj_req *r)
{
    if (strcmp(r->method, "OPTIONS") != 0 || !gj_req_header(r, "Access-Control-Request-Method"))
        return 0;
    const char *origin = listed_origin(r);
    if (!origin)
        return 0;
    struct MHD_Response *resp = gj_respond_empty(r, 204);
    if (!resp)
        return 1;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", ALLOW_METHODS);
    MHD_add_response_header(resp, "Access-Control-Allow-Headers", ALLOW_HEADERS);
    MHD_add_response_header(resp, "Access-Control-Max-Age", PREFLIGHT_MAX_AGE);
    MHD_add_response_header(resp, "Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
    return 1;
}

void gj_cors_decorate(struct gj_req *r, struct MHD_Response *resp)
{
    if (!resp || !r->srv->cfg.cors_origins[0])
        return;
    /* an answer that differs by Origin says so, for caches */
    if (r->status != 204 || strcmp(r->method, "OPTIONS") != 0)
        MHD_add_response_header(resp, "Vary", "Origin");
    const char *origin = listed_origin(r);
    if (!origin || strcmp(r->method, "OPTIONS") == 0)
        return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
    MHD_add_response_header(resp, "Access-Control-Expose-Headers", EXPOSE_HEADERS);
}
