/*
 * routes_assets.c — the portal's files, embedded at build time (gj_portal_assets.c, made by
 * tools/embed_files.py --assets from portal/ and openapi/openapi.yaml):
 *
 *   GET /                         index.html; Cache-Control: no-cache (revalidated each visit)
 *   GET /assets/{build}/{name}    the other files; {build} is a hash of them all, so a URL's
 *                                 content never changes: cached a year, immutable. A build
 *                                 that is not this binary's (a page from a replica of
 *                                 another version) gets today's file, not cached.
 *   GET /openapi.yaml             the API's contract, the one the binary was built with
 *
 * Each answer has a strong ETag (If-None-Match: 304) and, where the client accepts gzip,
 * the compressed form made at build time (nothing is compressed per request); Vary:
 * Accept-Encoding. Pages and files carry the portal's security headers (portal.h).
 */
#include <string.h>
#include <strings.h>

#include "gj_portal_assets.h"
#include "service/portal/portal.h"

#define IMMUTABLE "public, max-age=31536000, immutable"
#define REVALIDATE "no-cache"

static const struct gj_portal_assets_entry *find_asset(const char *name)
{
    for (size_t i = 0; i < gj_portal_assets_count; i++)
        if (strcmp(gj_portal_assets[i].name, name) == 0)
            return &gj_portal_assets[i];
    return NULL;
}

/* 1 when Accept-Encoding admits gzip: a "gzip" (or "*") coding whose q is not 0. */
static int accepts_gzip(const char *ae)
{
    for (const char *p = ae; p && *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t n = strcspn(p, ",");
        size_t name = strcspn(p, ";, ");
        if ((name == 4 && strncasecmp(p, "gzip", 4) == 0) || (name == 1 && *p == '*')) {
            const char *q = memchr(p, ';', n);
            int zero = 0;
            if (q) {
                q++;
                while (*q == ' ')
                    q++;
                /* q=0, q=0.0, q=0.00, q=0.000 refuse it */
                zero = strncasecmp(q, "q=0", 3) == 0 && strspn(q + 3, ".0") == strcspn(q + 3, ", ");
            }
            return !zero;
        }
        p += n;
    }
    return 0;
}

static void send_asset(struct gj_req *r, const struct gj_portal_assets_entry *a, const char *cache_control)
{
    int gz = a->gzip && accepts_gzip(gj_req_header(r, MHD_HTTP_HEADER_ACCEPT_ENCODING));
    /* a strong ETag names one representation: the gzip form has its own */
    char etag[80];
    size_t elen = strlen(a->etag);
    if (gz && elen >= 2 && elen < sizeof etag - 4)
        snprintf(etag, sizeof etag, "%.*s-gz\"", (int)(elen - 1), a->etag);
    else
        snprintf(etag, sizeof etag, "%s", a->etag);
    const char *inm = gj_req_header(r, MHD_HTTP_HEADER_IF_NONE_MATCH);
    struct MHD_Response *resp;
    if (inm && gj_http_etag_match(inm, etag)) {
        resp = gj_respond_empty(r, 304);
    } else {
        size_t len = gz ? a->gzip_len : a->len;
        resp = MHD_create_response_from_buffer(len, (void *)(gz ? a->gzip : a->data), MHD_RESPMEM_PERSISTENT);
        gj_respond(r, resp ? 200 : 500, resp, len);
        if (resp) {
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->content_type);
            if (gz)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
        }
    }
    if (!resp)
        return;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, cache_control);
    if (a->gzip)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
    gj_portal_security_headers(resp);
}

static void send_named(struct gj_req *r, const char *name, const char *cache_control)
{
    const struct gj_portal_assets_entry *a = find_asset(name);
    if (!a) {
        gj_respond_not_found(r);
        return;
    }
    send_asset(r, a, cache_control);
}

/* GET / */
static void index_page(struct gj_req *r)
{
    send_named(r, "index.html", REVALIDATE);
}

/* GET /assets/{build}/{name} */
static void asset(struct gj_req *r)
{
    if (strcmp(r->params[1], "index.html") == 0) {
        gj_respond_not_found(r);       /* the page is at / only */
        return;
    }
    send_named(r, r->params[1], strcmp(r->params[0], gj_portal_assets_build) == 0 ? IMMUTABLE : REVALIDATE);
}

/* GET /openapi.yaml */
static void openapi(struct gj_req *r)
{
    send_named(r, "openapi.yaml", REVALIDATE);
}

static const struct gj_route routes[] = {
    { "GET", "/", GJ_AUTH_NONE, GJ_BODY_NONE, NULL, NULL, index_page, NULL },
    { "GET", "/assets/{build}/{name}", GJ_AUTH_NONE, GJ_BODY_NONE, NULL, NULL, asset, NULL },
    { "GET", "/openapi.yaml", GJ_AUTH_NONE, GJ_BODY_NONE, NULL, NULL, openapi, NULL },
};
const struct gj_route_table gj_routes_portal_assets = { routes, sizeof routes / sizeof routes[0] };
