/*
 * portal.h — the web portal's service half (module.c): the browser application served from
 * the binary, sign-in, and what its pages need beyond the core API:
 *
 *   routes_assets.c    GET /, /assets/{build}/{name}, /openapi.yaml: embedded files
 *                      (portal/, built into gj_portal_assets.c), gzip, ETags, CSP
 *   routes_session.c   POST, GET, DELETE /v1/session: an API key for a cookie
 *                      (service/auth/session.h)
 *   routes_events.c    GET /v1/events: Server-Sent Events of the tenant's jobs as they change
 *   routes_slices.c    GET /v1/jobs/{id}/outputs/{name}/slices[/{z}]: a volume's slices as PNG
 *   routes_thumbnail.c GET /v1/blobs/{id}/thumbnail: a DICOM image as a small PNG
 *   png_gray.c         PNG in memory, windowing
 */
#ifndef GJ_PORTAL_H
#define GJ_PORTAL_H

#include "service/http/http_server.h"

extern const struct gj_route_table gj_routes_portal_assets;
extern const struct gj_route_table gj_routes_portal_session;
extern const struct gj_route_table gj_routes_portal_events;
extern const struct gj_route_table gj_routes_portal_slices;
extern const struct gj_route_table gj_routes_portal_thumbnail;

/* The headers every page and asset of the portal carries: a Content-Security-Policy that
 * allows scripts, styles, images and connections from this origin only (no inline script
 * or style, no framing), nosniff, no Referer. */
void gj_portal_security_headers(struct MHD_Response *resp);

/* Sends a PNG held in memory (png, taking it) with a strong ETag, private caching for
 * max_age_s seconds. */
void gj_portal_send_png(struct gj_req *r, unsigned char *png, size_t len, const char *etag, int max_age_s);

/* 1 when the request's If-None-Match names etag: a 304 with it is prepared. */
int gj_portal_not_modified(struct gj_req *r, const char *etag, int max_age_s);

#endif
