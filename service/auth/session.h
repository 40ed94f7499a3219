/*
 * session.h — browser sessions: an API key exchanged for a cookie (POST /v1/session, in
 * service/portal/), which the API then accepts as it accepts the key itself.
 *
 * The cookie `__Host-gj_session` carries a token of 32 random bytes (base64url, 43
 * characters); it is HttpOnly (no script reads it), Secure, SameSite=Strict and Path=/. The
 * database keeps only the token's SHA-256, the key it came from and two ends: absolute
 * (--session-hours) and idle (--session-idle-minutes, moved on by each use). A session is
 * refused once its key is revoked, and removed with the key.
 *
 * CSRF: a request authenticated by the cookie that may change something (any method but
 * GET, HEAD and OPTIONS) must carry `X-CSRF-Token`, a synchronizer token bound to the
 * session: HMAC-SHA256 keyed with the session's token over a fixed label, so the server
 * recomputes it from the cookie and stores nothing more. The page learns it from the
 * answer of POST or GET /v1/session, which another site's script cannot read (same-origin
 * policy), and keeps it in memory only. Unlike a double-submit cookie, nothing an attacker
 * can write into the browser's cookies (a sibling subdomain, a plain-HTTP response) can
 * forge it, and it costs no second cookie.
 */
#ifndef GJ_SESSION_H
#define GJ_SESSION_H

#include <libpq-fe.h>

#include "service/auth/auth.h"

#define GJ_SESSION_COOKIE "__Host-gj_session"
#define GJ_SESSION_TOKEN_LEN 43     /* base64url of 32 bytes, unpadded */
#define GJ_CSRF_HEADER "X-CSRF-Token"

/* A new session for key key_id: its token and CSRF token (each GJ_SESSION_TOKEN_LEN + 1
 * bytes), and its absolute end as an RFC 3339 text (40 bytes). Also drops sessions that
 * ended a day ago or more. 0, or -1 logged. */
int gj_session_create(PGconn *c, const char *key_id, int idle_minutes, int hours, char *token, char *csrf,
                      char expires_at[40]);

/* Resolves a token: 1 valid (p filled; the idle end moved on), 0 unknown, ended or its key
 * revoked, -1 database error. */
int gj_session_verify(PGconn *c, const char *token, int idle_minutes, struct gj_principal *p);

/* Ends the session of a token. 1 ended, 0 there was none, -1 database error. */
int gj_session_delete(PGconn *c, const char *token);

/* The session token in a Cookie header value: 1 found (token filled, GJ_SESSION_TOKEN_LEN
 * + 1 bytes), 0 absent or not a well-formed token. */
int gj_session_cookie_token(const char *cookie_header, char *token);

/* The CSRF token of a session token (GJ_SESSION_TOKEN_LEN + 1 bytes). 0 or -1. */
int gj_session_csrf(const char *token, char *csrf);
/* 1 when presented is the CSRF token of the session token (constant-time comparison). */
int gj_session_csrf_ok(const char *token, const char *presented);

/* 1 when a request of this method changes nothing (GET, HEAD, OPTIONS): no CSRF token needed. */
int gj_session_method_is_safe(const char *method);

/* The Set-Cookie value that stores token for max_age_s seconds, or, with token NULL, the
 * one that removes the cookie. 0 or -1 (cap too small). */
int gj_session_set_cookie(char *out, size_t cap, const char *token, long max_age_s);

/* What a request's session cookie comes to (gj_session_check). */
enum gj_session_outcome {
    GJ_SESSION_ABSENT = -1,   /* no well-formed session cookie: the request needs a key */
    GJ_SESSION_OK = 0,        /* p is the session's key */
    GJ_SESSION_ENDED,         /* unknown, expired, idle too long, or its key revoked: 401 */
    GJ_SESSION_NO_CSRF,       /* a state-changing method without the right X-CSRF-Token: 403 */
    GJ_SESSION_DB_ERROR,      /* the database did not answer: 503 */
};

/* For http_server.c's authenticate(), on a request without an Authorization header: the
 * session of cookie_header (a Cookie header value, or NULL) checked in c (NULL: no
 * connection, GJ_SESSION_DB_ERROR), its idle end moved on, and for a method that changes
 * something, csrf (the X-CSRF-Token header value, or NULL) checked against it. */
enum gj_session_outcome gj_session_check(PGconn *c, const char *cookie_header, const char *method, const char *csrf,
                                         int idle_minutes, struct gj_principal *p);

#endif
