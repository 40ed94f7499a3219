/*
 * portal_http.c — how the portal's own answers go out (portal.h): the security headers of
 * its pages, rendered PNGs and their 304s.
 */
#include <stdio.h>
#include <stdlib.h>

#include "service/portal/portal.h"

/* No inline script or style (the pages load theirs from /assets), images from here and from
 * blob: URLs the page makes, fetch/XHR/EventSource to this origin only, no plugins, no
 * <base>, forms post here, no framing by anyone (clickjacking). */
#define CSP                                                                                             \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "                  \
    "connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; "    \
    "frame-ancestors 'none'"

void gj_portal_security_headers(struct MHD_Response *resp)
{
    if (!resp)
        return;
    MHD_add_response_header(resp, "Content-Security-Policy", CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "Cross-Origin-Opener-Policy", "same-origin");
    MHD_add_response_header(resp, "Cross-Origin-Resource-Policy", "same-origin");
}

static void cache_headers(struct MHD_Response *resp, const char *etag, int max_age_s)
{
    char cc[64];
    snprintf(cc, sizeof cc, "private, max-age=%d", max_age_s);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, cc);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
}

int gj_portal_not_modified(struct gj_req *r, const char *etag, int max_age_s)
{
    const char *inm = gj_req_header(r, MHD_HTTP_HEADER_IF_NONE_MATCH);
    if (!inm || !gj_http_etag_match(inm, etag))
        return 0;
    struct MHD_Response *resp = gj_respond_empty(r, 304);
    if (resp)
        cache_headers(resp, etag, max_age_s);
    return 1;
}

void gj_portal_send_png(struct gj_req *r, unsigned char *png, size_t len, const char *etag, int max_age_s)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, png, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(png);
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "image/png");
    cache_headers(resp, etag, max_age_s);
    gj_respond(r, 200, resp, len);
}
