/*
 * carmin_common.c — what every CARMIN route shares (carmin.h): its error body and its
 * authentication, before routing and in the routes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "service/auth/auth.h"
#include "common/gj_error.h"
#include "service/carmin/carmin.h"
#include "service/db/storage_quota.h"

void carmin_error(struct gj_req *r, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gj_respond_json(r, code / 100, json_pack("{s:i, s:s}", "errorCode", code, "errorMessage", msg));
}

/* The server's own errors under /rest/ (gj_http_error_body): CARMIN's shape, the code
 * being the HTTP status and 01, as CARMIN numbers its own. */
char *carmin_error_body(int status, const char *detail)
{
    json_t *o = json_pack("{s:i, s:s}", "errorCode", status * 100 + 1, "errorMessage", detail);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return text;
}

void carmin_unavailable(struct gj_req *r)
{
    carmin_error(r, CARMIN_UNAVAILABLE, "the database is unavailable; try again");
}

void carmin_respond_error(struct gj_req *r, const struct gj_error *err)
{
    if (err->status == 503)
        carmin_unavailable(r);
    else
        carmin_error(r, (err->status ? err->status : 400) * 100 + 1, "%s", err->message);
}

void carmin_over_quota(struct gj_req *r)
{
    char quota[300];
    gj_storage_refusal_text(gj_storage_last_refusal(), quota, sizeof quota);
    carmin_error(r, CARMIN_OVER_QUOTA, "%s; nothing was stored", quota);
}

/* The presented key: the apikey header, else a Bearer token; NULL when neither. */
static const char *presented_key(struct gj_req *r)
{
    const char *k = gj_req_header(r, "apikey");
    if (k)
        return k;
    const char *h = gj_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return NULL;
    for (k = h + 7; *k == ' '; k++)
        ;
    return k;
}

int carmin_authenticate(struct gj_req *r)
{
    if (r->authed)
        return 0;   /* by carmin_gate, before routing: the key counted once */
    const char *key = presented_key(r);
    if (!key || !*key || strlen(key) > 256) {
        carmin_error(r, CARMIN_BAD_KEY, "an API key is required in the apikey header");
        return -1;
    }
    int rc = gj_req_verify_key(r, key);
    if (rc < 0) {
        carmin_unavailable(r);
        return -1;
    }
    if (rc == 0) {
        carmin_error(r, CARMIN_BAD_KEY, "the API key is not valid");
        return -1;
    }
    r->authed = 1;
    if (gj_req_rate_limited(r)) {
        carmin_error(r, CARMIN_RATE_LIMITED, "request rate limit of this key exceeded");
        if (r->response)
            MHD_add_response_header(r->response, "Retry-After", "1");
        return -1;
    }
    return 0;
}

void carmin_begin(struct gj_req *r)
{
    carmin_authenticate(r);
}

/* Before routing, as VIP's server does: a presented key is checked on any path under /rest/
 * (a wrong one is 40101 whether or not the path is a route), and a request without one goes
 * no further than the one route that needs none, GET /rest/platform. */
void carmin_gate(struct gj_req *r)
{
    int public_route = (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0) &&
                       strcmp(r->path, "/rest/platform") == 0;
    if (public_route && !presented_key(r))
        return;
    carmin_authenticate(r);
}
