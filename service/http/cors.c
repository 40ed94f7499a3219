/*
 * cors.c — CORS for the origins of --cors-origin (cors.h; the Fetch standard's CORS
 * protocol).
 */
#include <string.h>
#include <strings.h>

#include "service/http/cors.h"

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

void gj_cors_preflight_headers(struct MHD_Response *resp, const char *origin)
{
    if (!resp)
        return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", ALLOW_METHODS);
    MHD_add_response_header(resp, "Access-Control-Allow-Headers", ALLOW_HEADERS);
    MHD_add_response_header(resp, "Access-Control-Max-Age", PREFLIGHT_MAX_AGE);
    MHD_add_response_header(resp, "Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
}

void gj_cors_answer_headers(struct MHD_Response *resp, const char *origin, int vary)
{
    if (!resp)
        return;
    /* an answer that differs by Origin says so, for caches */
    if (vary)
        MHD_add_response_header(resp, "Vary", "Origin");
    if (!origin)
        return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
    MHD_add_response_header(resp, "Access-Control-Expose-Headers", EXPOSE_HEADERS);
}
