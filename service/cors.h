/*
 * cors.h — Cross-Origin Resource Sharing, for portals served from an origin of their own that
 * call the API from the browser (--cors-origin; none by default, and then nothing here
 * changes an answer).
 *
 * A listed origin gets, on every answer to a request that names it in Origin:
 * Access-Control-Allow-Origin (that origin, never "*"), Access-Control-Allow-Credentials
 * (its pages may send the session cookie, and then its CSRF token as anyone must),
 * Access-Control-Expose-Headers (Location, X-Request-Id, ETag, ...), and Vary: Origin. A
 * preflight (OPTIONS with Access-Control-Request-Method) from it is answered 204 with the
 * methods and request headers the API reads. Other origins get the answers they got before:
 * without these headers the browser keeps the answer from their scripts.
 */
#ifndef GJ_CORS_H
#define GJ_CORS_H

#include <microhttpd.h>

struct gj_req;

/* 1 when origin (an Origin header value) is one of the comma-separated list. */
int gj_cors_origin_listed(const char *list, const char *origin);

/* A preflight from a listed origin: answered (204), returns 1. Anything else: 0, and the
 * request goes on as any other. */
int gj_cors_preflight(struct gj_req *r);

/* Adds the headers above to resp when the request's Origin is listed. */
void gj_cors_decorate(struct gj_req *r, struct MHD_Response *resp);

#endif
