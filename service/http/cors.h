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

/* 1 when origin (an Origin header value) is one of the comma-separated list. */
int gj_cors_origin_listed(const char *list, const char *origin);

/* The headers of the 204 answer to a preflight (OPTIONS with Access-Control-Request-Method)
 * from origin, a listed one. */
void gj_cors_preflight_headers(struct MHD_Response *resp, const char *origin);

/* The headers of any other answer while --cors-origin is set: Vary: Origin when vary, and,
 * when origin is a listed one (else NULL), those that let its page read the answer. */
void gj_cors_answer_headers(struct MHD_Response *resp, const char *origin, int vary);

#endif
