/*
 * routes_session.c — signing a browser in and out (service/auth/session.h has the design):
 *
 *   POST   /v1/session   {"key": "gjk_..."}: the key checked, a session made; 201 with the
 *                        cookie (Set-Cookie) and, in the body, the CSRF token and who you are
 *   GET    /v1/session   who the request is signed in as; with the cookie, the CSRF token
 *                        (a reloaded page asks here: it keeps the token in memory only);
 *                        with neither key nor cookie, {"signed_in": false}
 *   DELETE /v1/session   signs out: the session row goes, the cookie is cleared
 *
 * The key travels once, in the body of the POST; it is never logged and the answer does
 * not repeat it.
 */
#include <string.h>

#include <openssl/crypto.h>

#include "service/auth/auth.h"
#include "service/portal/portal.h"
#include "service/auth/session.h"

static json_t *whoami(const struct gj_principal *p)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "tenant", p->tenant_name, "tenant_id", p->tenant_id, "role",
                     p->is_admin ? "admin" : "user", "key_id", p->key_id);
}

/* The key of a sign-in body, or NULL with the answer prepared. */
static const char *body_key(struct gj_req *r)
{
    const char *k;
    json_t *v;
    if (!json_is_object(r->json)) {
        gj_problem(r, 422, "key", "the body must be a JSON object: {\"key\": \"<API key>\"}");
        return NULL;
    }
    json_object_foreach(r->json, k, v) {
        if (strcmp(k, "key") != 0) {
            gj_problem(r, 422, k, "unknown field '%.100s'", k);
            return NULL;
        }
    }
    json_t *key = json_object_get(r->json, "key");
    if (!json_is_string(key) || json_string_length(key) == 0) {
        gj_problem(r, 422, "key", "key is required: an API key (gjk_...)");
        return NULL;
    }
    return json_string_value(key);
}

/* Content-Type must say JSON: a cross-site form cannot send that without a preflight. */
static void sign_in_begin(struct gj_req *r)
{
    const char *ct = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!ct || !gj_http_is_json_type(ct))
        gj_problem(r, 415, "Content-Type", "sign in with a JSON body: Content-Type: application/json");
}

/* The key's copies in the request (its body, its parsed JSON) are wiped once checked. */
static void forget_key(struct gj_req *r, const char *key)
{
    if (key)
        OPENSSL_cleanse((char *)key, strlen(key));
    if (r->body)
        OPENSSL_cleanse(r->body, r->body_len);
}

/* POST /v1/session */
static void sign_in(struct gj_req *r)
{
    const char *key = body_key(r);
    if (!key) {
        forget_key(r, NULL);
        return;
    }
    PGconn *c = gj_req_db(r);
    struct gj_principal p;
    int rc = c ? gj_api_key_verify(c, key, &p) : -1;
    forget_key(r, key);
    if (rc <= 0) {
        if (rc < 0)
            gj_respond_unavailable(r);
        else
            gj_problem(r, 401, "key", "this API key is not valid (unknown or revoked)");
        return;
    }
    const struct gj_config *cfg = &r->srv->cfg;
    char token[GJ_SESSION_TOKEN_LEN + 1], csrf[GJ_SESSION_TOKEN_LEN + 1], expires[40], cookie[200];
    if (gj_session_create(c, p.key_id, cfg->session_idle_minutes, cfg->session_hours, token, csrf, expires) != 0 ||
        gj_session_set_cookie(cookie, sizeof cookie, token, (long)cfg->session_hours * 3600) != 0) {
        OPENSSL_cleanse(token, sizeof token);
        gj_respond_unavailable(r);
        return;
    }
    json_t *body = whoami(&p);
    json_object_set_new(body, "csrf_token", json_string(csrf));
    json_object_set_new(body, "expires_at", json_string(expires));
    json_object_set_new(body, "idle_minutes", json_integer(cfg->session_idle_minutes));
    struct MHD_Response *resp = gj_respond_json(r, 201, body);
    if (resp && r->status == 201)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_SET_COOKIE, cookie);
    OPENSSL_cleanse(token, sizeof token);
    OPENSSL_cleanse(cookie, sizeof cookie);
    OPENSSL_cleanse(csrf, sizeof csrf);
}

/* The session token of a request signed in by its cookie (no Authorization header). */
static int request_token(struct gj_req *r, char *token)
{
    return !gj_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION) &&
           gj_session_cookie_token(gj_req_header(r, MHD_HTTP_HEADER_COOKIE), token);
}

/* GET /v1/session: without a key or a cookie, 200 {"signed_in": false}: the portal's
 * first look is not a failed request in the browser's console. */
static void session_get(struct gj_req *r)
{
    char token[GJ_SESSION_TOKEN_LEN + 1], csrf[GJ_SESSION_TOKEN_LEN + 1];
    if (!r->authed) {
        gj_respond_json(r, 200, json_pack("{s:b}", "signed_in", 0));
        return;
    }
    json_t *body = whoami(&r->who);
    json_object_set_new(body, "signed_in", json_true());
    int by_cookie = request_token(r, token);
    json_object_set_new(body, "signed_in_by", json_string(by_cookie ? "session" : "key"));
    if (by_cookie && gj_session_csrf(token, csrf) == 0)
        json_object_set_new(body, "csrf_token", json_string(csrf));
    OPENSSL_cleanse(token, sizeof token);
    OPENSSL_cleanse(csrf, sizeof csrf);
    gj_respond_json(r, 200, body);
}

/* DELETE /v1/session */
static void sign_out(struct gj_req *r)
{
    char token[GJ_SESSION_TOKEN_LEN + 1], cookie[200];
    if (!request_token(r, token)) {
        gj_problem(r, 404, NULL, "this request is signed with a key, not a session: there is nothing to end");
        return;
    }
    PGconn *c = gj_req_db(r);
    int rc = c ? gj_session_delete(c, token) : -1;
    OPENSSL_cleanse(token, sizeof token);
    if (rc < 0) {
        gj_respond_unavailable(r);
        return;
    }
    struct MHD_Response *resp = gj_respond_empty(r, 204);
    if (resp && gj_session_set_cookie(cookie, sizeof cookie, NULL, 0) == 0)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_SET_COOKIE, cookie);
}

static const struct gj_route routes[] = {
    { "POST", "/v1/session", GJ_AUTH_NONE, GJ_BODY_JSON, sign_in_begin, NULL, sign_in, NULL },
    { "GET", "/v1/session", GJ_AUTH_OPTIONAL, GJ_BODY_NONE, NULL, NULL, session_get, NULL },
    { "DELETE", "/v1/session", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, sign_out, NULL },
};
const struct gj_route_table gj_routes_portal_session = { routes, sizeof routes / sizeof routes[0] };
