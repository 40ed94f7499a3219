/*
 * http_target.h — the request target (path and query) as the router sees it.
 *
 * libmicrohttpd percent-decodes the path and each query key and value in place into C
 * strings, so "%00" would end a path early ("/healthz%00/../x" would route as /healthz).
 * gj_http_unescape decodes like MHD_http_unescape but turns a decoded NUL into DEL (0x7f);
 * the router then refuses every control character (below 0x20, and 0x7f) with 400, and
 * over-long targets with 414, before anything routes on them.
 */
#ifndef GJ_HTTP_TARGET_H
#define GJ_HTTP_TARGET_H

#include <stddef.h>

#include <microhttpd.h>

/* Longest decoded path, and longest decoded query (keys and values together), served. */
#define GJ_HTTP_MAX_PATH 1024
#define GJ_HTTP_MAX_QUERY 8192

/* MHD_OPTION_UNESCAPE_CALLBACK: decodes s in place ("%41" -> "A", "%00" -> "\x7f"; a '%'
 * not followed by two hex digits stays as it is); returns the new length. */
size_t gj_http_unescape(void *cls, struct MHD_Connection *connection, char *s);

/* 1 when s (len bytes) holds a control character: below 0x20, or DEL. */
int gj_http_has_control(const char *s, size_t len);

/* The request target's verdict: 0 fine; 400 a control character in the path or query; 414
 * too long. what names the part ("path", "query") when not 0. */
int gj_http_check_target(struct MHD_Connection *connection, const char *path, const char **what);

#endif
