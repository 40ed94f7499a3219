/*
 * http_server.c — the HTTPS JSON API on libmicrohttpd (ARCHITECTURE.md: HTTP API conventions): an epoll
 * thread pool, routing by method and path template, API key authentication,
 * bounded JSON bodies, streamed bodies for uploads, application/problem+json
 * errors, one log line and one metrics sample per request. Long polls and event
 * streams park (http_park.c); connections are tracked for the header deadline
 * (http_conns.c); the request target is checked first (http_target.c).
 */
#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "common/fsutil.h"
#include "service/base/base64.h"
#include "service/auth/client_cert.h"
#include "service/db/blobstore.h"
#include "service/http/cors.h"
#include "service/http/http_conns.h"
#include "service/http/http_park.h"
#include "service/http/http_server.h"
#include "service/http/http_target.h"
#include "service/auth/key_cache.h"
#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/auth/session.h"

#define DB_WAIT_MS 5000
/* After a response is prepared mid-body (413 on a chunked upload), the rest of
 * the body is read and dropped so the client sees the answer; past this much
 * the connection is closed instead. */
#define DRAIN_LIMIT (64ull << 20)
/* At stop, how long requests in flight (parked ones woken to answer) get to finish. */
#define STOP_DRAIN_MS 3000
/* After a request that parsed this much JSON, or whose body was at least TRIM_AFTER_BODY,
 * freed memory goes back to the system (malloc_trim): a big JSON body, parsed into many small
 * blocks that fragment the heap, leaves no lasting footprint. Smaller raw bodies (a binary
 * /v2 tensor of a few MiB) go back to the allocator alone, and trimming after each would
 * make the next one fault its pages in again. */
#define TRIM_AFTER_JSON ((uint64_t)1 << 20)
#define TRIM_AFTER_BODY ((uint64_t)16 << 20)

struct gj_http_server {
    struct MHD_Daemon *daemon;
    struct gj_server *srv;
    const struct gj_route_table *const *tables;
    struct gj_conns *conns;
    const char *name;              /* "api", "metrics": for logs */
    char hsts[40];                 /* Strict-Transport-Security on its answers; "" on plain HTTP */
    int owns_park;
    char *cert_pem;
    char *key_pem;
    char *client_ca_pem;           /* --tls-client-ca: client certificates are asked for */
};

static atomic_int http_stopping;
static atomic_int requests_active;
static const struct gj_upload_ops *upload_ops;   /* set once, before the server starts */

void gj_http_set_upload_ops(const struct gj_upload_ops *ops)
{
    upload_ops = ops;
}

/* ---------- route tables ---------- */

void gj_http_print_routes(FILE *f, const struct gj_route_table *const *tables)
{
    for (size_t t = 0; tables[t]; t++)
        for (size_t i = 0; i < tables[t]->n; i++)
            fprintf(f, "%s %s\n", tables[t]->routes[i].method, tables[t]->routes[i].path);
}

/* Printable ASCII copy (others become '?'): paths, methods and details go into
 * JSON, which needs valid UTF-8. */
static void ascii_copy(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src && src[i] && i + 1 < cap; i++)
        dst[i] = ((unsigned char)src[i] >= 0x20 && (unsigned char)src[i] < 0x7f) ? src[i] : '?';
    if (cap)
        dst[i] = '\0';
}

static const char *method_label(const char *m)
{
    static const char *const known[] = { "GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS" };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(m, known[i]) == 0)
            return known[i];
    return "other";
}

/* ---------- request helpers ---------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

PGconn *gj_req_db(struct gj_req *r)
{
    if (!r->db) {
        int reads = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
        r->db = gj_db_acquire_for(r->srv->db, DB_WAIT_MS, reads ? GJ_DB_READ : GJ_DB_WRITE);
    }
    return r->db;
}

PGconn *gj_req_take_db(struct gj_req *r)
{
    PGconn *c = r->db;
    r->db = NULL;
    return c;
}

const char *gj_req_header(struct gj_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *gj_req_query(struct gj_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

unsigned int gj_http_idle_timeout(const struct gj_server *srv)
{
    /* parked requests are suspended, which stops it, and event streams send a
     * keep-alive every 15 s (hence at least 30): one bound for every connection */
    return (unsigned int)srv->cfg.http_idle_seconds;
}

int gj_http_stopping(const struct gj_server *srv)
{
    return atomic_load(&http_stopping) || (srv && atomic_load(&srv->stopping));
}

struct MHD_Response *gj_respond(struct gj_req *r, int status, struct MHD_Response *resp, uint64_t bytes)
{
    if (r->response)
        MHD_destroy_response(r->response);
    r->response = resp;
    r->status = status;
    r->bytes = bytes;
    return resp;
}

static struct MHD_Response *respond_text(struct gj_req *r, int status, const char *ctype, char *text,
                                         size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return gj_respond(r, 500, NULL, 0);
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return gj_respond(r, status, resp, len);
}

struct MHD_Response *gj_respond_json(struct gj_req *r, int status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(body);
    if (!text)
        return gj_problem(r, 500, NULL, "could not encode the response");
    size_t len = strlen(text);
    /* newline-terminated, for curl users */
    char *t2 = realloc(text, len + 2);
    if (t2) {
        text = t2;
        text[len++] = '\n';
        text[len] = '\0';
    }
    return respond_text(r, status, "application/json", text, len);
}

struct MHD_Response *gj_respond_json_text(struct gj_req *r, int status, char *text, size_t len)
{
    return respond_text(r, status, "application/json", text, len);
}

struct MHD_Response *gj_respond_empty(struct gj_req *r, int status)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    return gj_respond(r, status, resp, 0);
}

static const char *status_title(int status)
{
    switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 507: return "Insufficient Storage";
    default: return "Error";
    }
}

static const char *status_type(int status, const char *field)
{
    if (field && *field)
        return "urn:gpujobd:problem:validation";
    switch (status) {
    case 401: return "urn:gpujobd:problem:unauthorized";
    case 403: return "urn:gpujobd:problem:forbidden";
    case 404: return "urn:gpujobd:problem:not-found";
    case 409: return "urn:gpujobd:problem:conflict";
    case 413: return "urn:gpujobd:problem:too-large";
    case 429: return "urn:gpujobd:problem:rate-limited";
    case 503: return "urn:gpujobd:problem:unavailable";
    case 507: return "urn:gpujobd:problem:insufficient-storage";
    default: return "about:blank";
    }
}

#define MAX_ERROR_STYLES 4
static struct {
    const char *prefix;
    gj_error_body_fn fn;
} error_styles[MAX_ERROR_STYLES];
static int n_error_styles;

int gj_http_error_body(const char *prefix, gj_error_body_fn fn)
{
    if (n_error_styles >= MAX_ERROR_STYLES)
        return -1;
    error_styles[n_error_styles].prefix = prefix;
    error_styles[n_error_styles].fn = fn;
    n_error_styles++;
    return 0;
}

static struct {
    const char *prefix;
    gj_prefix_auth_fn fn;
} prefix_auths[MAX_ERROR_STYLES];
static int n_prefix_auths;

int gj_http_prefix_auth(const char *prefix, gj_prefix_auth_fn fn)
{
    if (n_prefix_auths >= MAX_ERROR_STYLES)
        return -1;
    prefix_auths[n_prefix_auths].prefix = prefix;
    prefix_auths[n_prefix_auths].fn = fn;
    n_prefix_auths++;
    return 0;
}

/* The authentication that comes before routing under path's prefix; NULL for none. */
static gj_prefix_auth_fn prefix_auth(const char *path)
{
    for (int i = 0; i < n_prefix_auths; i++)
        if (strncmp(path, prefix_auths[i].prefix, strlen(prefix_auths[i].prefix)) == 0)
            return prefix_auths[i].fn;
    return NULL;
}

/* The error shape of r's path; NULL for problem+json. */
static gj_error_body_fn error_style(const struct gj_req *r)
{
    for (int i = 0; i < n_error_styles; i++)
        if (strncmp(r->path, error_styles[i].prefix, strlen(error_styles[i].prefix)) == 0)
            return error_styles[i].fn;
    return NULL;
}

const char *gj_problem_content_type(const struct gj_req *r)
{
    return error_style(r) ? "application/json" : "application/problem+json";
}

char *gj_problem_text(struct gj_req *r, int status, const char *field, const char *detail_in)
{
    char detail[1024];
    snprintf(detail, sizeof detail, "%s", detail_in);
    json_t *probe = json_string(detail);       /* NULL when not valid UTF-8 (a cut or a client's bytes) */
    if (!probe)
        ascii_copy(detail, sizeof detail, detail);
    json_decref(probe);
    gj_error_body_fn style = error_style(r);
    if (style)
        return style(status, detail);
    char fieldbuf[256];
    if (field) {
        ascii_copy(fieldbuf, sizeof fieldbuf, field);
        field = fieldbuf;
    }
    json_t *o = json_pack("{s:s, s:s, s:i, s:s}", "type", status_type(status, field), "title",
                          status_title(status), "status", status, "detail", detail);
    if (o && field && *field)
        json_object_set_new(o, "field", json_string(field));
    if (o)
        json_object_set_new(o, "request_id", json_string(r->request_id));
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return text;
}

struct MHD_Response *gj_problem(struct gj_req *r, int status, const char *field, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    char *text = gj_problem_text(r, status, field, detail);
    if (!text) {
        static const char fallback[] =
            "{\"type\":\"about:blank\",\"title\":\"Internal Server Error\",\"status\":500}";
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(sizeof fallback - 1, (void *)fallback, MHD_RESPMEM_PERSISTENT);
        if (resp)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/problem+json");
        return gj_respond(r, 500, resp, sizeof fallback - 1);
    }
    return respond_text(r, status, gj_problem_content_type(r), text, strlen(text));
}

struct MHD_Response *gj_respond_unavailable(struct gj_req *r)
{
    if (gj_blob_store_unreachable(1)) {   /* this thread's blob call found the object store silent */
        struct MHD_Response *resp = gj_problem(r, 503, NULL, "the object store is not available; retry shortly");
        if (resp)
            MHD_add_response_header(resp, "Retry-After", "5");
        return resp;
    }
    struct MHD_Response *resp = gj_problem(r, 503, NULL, "the database is not available; retry shortly");
    if (resp)
        MHD_add_response_header(resp, "Retry-After", "1");
    return resp;
}

struct MHD_Response *gj_respond_not_found(struct gj_req *r)
{
    return gj_problem(r, 404, NULL, "no such resource");
}

/* ---------- rate limit (token bucket per key) ---------- */

#define RL_SLOTS 1024
struct rl_slot {
    char key_id[GJ_UUID_LEN + 1];
    double tokens;
    double last;
};
static struct rl_slot rl_slots[RL_SLOTS];
static pthread_mutex_t rl_lock = PTHREAD_MUTEX_INITIALIZER;

static int rate_limited(double rate, const char *key_id)
{
    if (rate <= 0)
        return 0;
    unsigned h = 2166136261u;
    for (const char *p = key_id; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    double burst = rate * 2 < 10 ? 10 : rate * 2;
    double t = now_s();
    pthread_mutex_lock(&rl_lock);
    struct rl_slot *s = &rl_slots[h % RL_SLOTS];
    if (strcmp(s->key_id, key_id) != 0) {
        snprintf(s->key_id, sizeof s->key_id, "%s", key_id);
        s->tokens = burst;
        s->last = t;
    }
    s->tokens += (t - s->last) * rate;
    if (s->tokens > burst)
        s->tokens = burst;
    s->last = t;
    int limited = s->tokens < 1.0;
    if (!limited)
        s->tokens -= 1.0;
    pthread_mutex_unlock(&rl_lock);
    return limited;
}

int gj_req_rate_limited(struct gj_req *r)
{
    return rate_limited(r->srv->cfg.rate_limit_per_key, r->who.key_id);
}

/* ---------- the MHD callbacks ---------- */

static void new_request_id(char out[33])
{
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        static atomic_ulong ctr;
        unsigned long c = atomic_fetch_add(&ctr, 1);
        uint64_t t = (uint64_t)time(NULL);
        memcpy(b, &c, sizeof c < 8 ? sizeof c : 8);
        memcpy(b + 8, &t, 8);
    }
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static const struct gj_route *find_route(const struct gj_route_table *const *tables, struct gj_req *r,
                                         const char *method, const char *path, char *allow, size_t allow_cap)
{
    const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;
    allow[0] = '\0';
    for (size_t t = 0; tables[t]; t++)
        for (size_t i = 0; i < tables[t]->n; i++) {
            const struct gj_route *rt = &tables[t]->routes[i];
            char params[GJ_ROUTE_MAX_PARAMS][GJ_PARAM_MAX];
            int n = 0;
            if (!gj_http_match_path(rt->path, path, params, GJ_ROUTE_MAX_PARAMS, &n))
                continue;
            if (strcmp(rt->method, m) == 0) {
                memcpy(r->params, params, sizeof params);
                r->n_params = n;
                return rt;
            }
            size_t used = strlen(allow);
            snprintf(allow + used, allow_cap - used, "%s%s", used ? ", " : "", rt->method);
        }
    return NULL;
}

/* Path parameters: "{id}" must be a UUID, "{name}" a safe file name. */
static int params_valid(const struct gj_route *rt, struct gj_req *r)
{
    return gj_http_params_valid(rt->path, r->params, r->n_params);
}

/* r->who is known: the route's role, then the key's rate. */
static void authorize(struct gj_req *r)
{
    r->authed = 1;
    if (r->route->auth == GJ_AUTH_ADMIN && !r->who.is_admin) {
        gj_problem(r, 403, NULL, "this operation needs an admin key");
        return;
    }
    if (rate_limited(r->srv->cfg.rate_limit_per_key, r->who.key_id)) {
        struct MHD_Response *resp = gj_problem(r, 429, NULL, "request rate limit of this key exceeded");
        if (resp)
            MHD_add_response_header(resp, "Retry-After", "1");
    }
}

/* A browser's session cookie (session.h), on a request without an Authorization header:
 * -1 none (a key is needed), 0 answered (401, 403, 503), 1 r->who is the session's key. */
static int authenticate_session(struct gj_req *r)
{
    const char *cookie = gj_req_header(r, MHD_HTTP_HEADER_COOKIE);
    char token[GJ_SESSION_TOKEN_LEN + 1];
    int has_cookie = gj_session_cookie_token(cookie, token);   /* no database for a request without */
    explicit_bzero(token, sizeof token);
    if (!has_cookie)
        return -1;
    switch (gj_session_check(gj_req_db(r), cookie, r->method, gj_req_header(r, GJ_CSRF_HEADER),
                             r->srv->cfg.session_idle_minutes, &r->who)) {
    case GJ_SESSION_ABSENT:
        return -1;
    case GJ_SESSION_OK:
        return 1;
    case GJ_SESSION_ENDED: {
        struct MHD_Response *resp = gj_problem(r, 401, NULL, "the session has ended: sign in again");
        char gone[160];   /* the cookie goes too */
        if (resp && gj_session_set_cookie(gone, sizeof gone, NULL, 0) == 0)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_SET_COOKIE, gone);
        return 0;
    }
    case GJ_SESSION_NO_CSRF:
        gj_problem(r, 403, NULL, "a request signed in by the session cookie needs the session's CSRF token in the "
                                 GJ_CSRF_HEADER " header");
        return 0;
    case GJ_SESSION_DB_ERROR:
    default:
        gj_respond_unavailable(r);
        return 0;
    }
}

static PGconn *req_db(void *arg)
{
    return gj_req_db(arg);
}

int gj_req_verify_key(struct gj_req *r, const char *key)
{
    return gj_key_cache_verify(r->srv->api_keys, key, req_db, r, &r->who);
}

/* 1 when the request carries a key (Authorization) or a session cookie. */
static int credentials_presented(struct gj_req *r)
{
    char token[GJ_SESSION_TOKEN_LEN + 1];
    int has_cookie = gj_session_cookie_token(gj_req_header(r, MHD_HTTP_HEADER_COOKIE), token);
    explicit_bzero(token, sizeof token);
    return has_cookie || gj_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION) != NULL;
}

/* A client certificate presented (cert 1: verified, cn its CN; -1: refused, why): the tenant
 * its CN names, with a user key's rights (client_cert.h). */
static void authenticate_cert(struct gj_req *r, int cert, const char *cn, const char *why)
{
    if (cert < 0) {
        gj_log_warn("http", "refused a client certificate: %s", why);
        gj_problem(r, 401, NULL, "the client certificate is refused: %s", why);
        return;
    }
    PGconn *c = gj_req_db(r);
    int rc = c ? gj_tenant_principal(c, cn, &r->who) : -1;
    if (rc < 0) {
        gj_respond_unavailable(r);
    } else if (rc == 0) {
        gj_log_warn("http", "refused a client certificate: its CN '%s' names no tenant", cn);
        gj_problem(r, 401, NULL, "the client certificate's CN names no tenant");
    } else {
        authorize(r);
    }
}

static void authenticate(struct gj_req *r)
{
    char cn[201], why[160];
    int cert = gj_client_cert_cn(r->conn, cn, sizeof cn, why, sizeof why);
    if (cert != 0) {
        authenticate_cert(r, cert, cn, why);
        return;
    }
    const char *h = gj_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *key = NULL;
    int by_session = h ? -1 : authenticate_session(r);
    if (by_session >= 0) {
        if (by_session == 1)
            authorize(r);
        return;
    }
    if (h) {
        while (*h == ' ')
            h++;
        if (strncasecmp(h, "Bearer ", 7) == 0) {
            key = h + 7;
            while (*key == ' ')
                key++;
        }
    }
    if (!key || !*key || strlen(key) > 256) {
        struct MHD_Response *resp = gj_problem(r, 401, NULL, "an API key is required: Authorization: Bearer <key>");
        if (resp)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"gpujobd\"");
        return;
    }
    char k[260];
    size_t n = strlen(key);
    while (n && (key[n - 1] == ' ' || key[n - 1] == '\t'))
        n--;
    memcpy(k, key, n);
    k[n] = '\0';
    int rc = gj_req_verify_key(r, k);
    explicit_bzero(k, sizeof k);
    if (rc < 0) {
        gj_respond_unavailable(r);
        return;
    }
    if (rc == 0) {
        struct MHD_Response *resp = gj_problem(r, 401, NULL, "the API key is not valid");
        if (resp)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                    "Bearer realm=\"gpujobd\", error=\"invalid_token\"");
        return;
    }
    authorize(r);
}

/* Gives the request's pooled connection back (a read-only transaction ends here). */
static void release_db(struct gj_req *r)
{
    if (!r->db)
        return;
    if (PQtransactionStatus(r->db) != PQTRANS_IDLE)
        gj_db_rollback(r->db);
    gj_db_release(r->srv->db, r->db);
    r->db = NULL;
}

/* The request's Origin when --cors-origin lists it, else NULL. */
static const char *cors_origin(struct gj_req *r)
{
    const char *origin = gj_req_header(r, "Origin");
    return gj_cors_origin_listed(r->srv->cfg.cors_origins, origin) ? origin : NULL;
}

static enum MHD_Result queue_prepared(struct gj_req *r)
{
    if (!r->response)
        gj_problem(r, 500, NULL, "internal error");
    if (!r->response)
        return MHD_NO;
    /* The answer is ready: the connection goes back now, not when the answer has been
     * sent. An event thread serves many clients; one that then waits for a pooled
     * connection must not wait on answers queued on its own thread. A response that
     * reads the database took its connection (gj_req_take_db); a route with a done
     * hook may still need it there, so it gives it back itself once it can. */
    if (!(r->route && r->route->done))
        release_db(r);
    MHD_add_response_header(r->response, "X-Request-Id", r->request_id);
    if (r->hsts[0])
        MHD_add_response_header(r->response, "Strict-Transport-Security", r->hsts);
    if (r->srv->cfg.cors_origins[0]) {
        int options = strcmp(r->method, "OPTIONS") == 0;
        gj_cors_answer_headers(r->response, options ? NULL : cors_origin(r), r->status != 204 || !options);
    }
    enum MHD_Result rc = MHD_queue_response(r->conn, (unsigned int)r->status, r->response);
    MHD_destroy_response(r->response);
    r->response = NULL;
    return rc;
}

/* First call for a request: route, authenticate, check declared sizes. */
static void first_call(const struct gj_http_server *h, struct gj_req *r, const char *url, const char *method)
{
    const char *part = NULL;
    int bad = gj_http_check_target(r->conn, url, &part);
    if (bad == 400) {
        gj_problem(r, 400, NULL, "the request %s holds a control character (such as %%00)", part);
        return;
    }
    if (bad) {
        gj_problem(r, 414, NULL, "the request %s is over the limit of %d bytes", part,
                   strcmp(part, "path") == 0 ? GJ_HTTP_MAX_PATH : GJ_HTTP_MAX_QUERY);
        return;
    }
    char allow[128];
    const char *origin;   /* a CORS preflight from a listed origin is answered here (cors.h) */
    if (strcmp(method, "OPTIONS") == 0 && gj_req_header(r, "Access-Control-Request-Method") &&
        (origin = cors_origin(r))) {
        gj_cors_preflight_headers(gj_respond_empty(r, 204), origin);
        return;
    }
    gj_prefix_auth_fn gate = prefix_auth(url);
    if (gate) {
        gate(r);
        if (r->response)
            return;
    }
    const struct gj_route *rt = find_route(h->tables, r, method, url, allow, sizeof allow);
    if (!rt) {
        if (allow[0]) {
            struct MHD_Response *resp = gj_problem(r, 405, NULL, "method %s is not allowed here", method);
            if (resp)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
        } else {
            gj_respond_not_found(r);
        }
        return;
    }
    r->route = rt;
    r->body_mode = rt->body;
    if (!params_valid(rt, r)) {
        gj_respond_not_found(r);
        return;
    }
    if (rt->auth != GJ_AUTH_NONE && !(rt->auth == GJ_AUTH_OPTIONAL && !credentials_presented(r))) {
        authenticate(r);
        if (r->response)
            return;
    }
    if (rt->begin) {
        rt->begin(r);
        if (r->response)
            return;
    }
    if (r->body_mode == GJ_BODY_JSON) {
        const char *ct = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (ct && !gj_http_is_json_type(ct)) {
            gj_problem(r, 415, "Content-Type", "the body must be application/json");
            return;
        }
    }
    if (!r->body_limit)
        r->body_limit = r->body_mode == GJ_BODY_JSON || r->body_mode == GJ_BODY_NONE ? r->srv->cfg.max_json_bytes
                                                                                      : r->srv->cfg.max_body_bytes;
    const char *cl = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    uint64_t declared = 0;
    if (cl && gj_http_parse_u64(cl, strlen(cl), &declared) == 0 && declared > r->body_limit) {
        gj_problem(r, 413, NULL, "the request body (%llu bytes) is over the limit of %llu bytes",
                   (unsigned long long)declared, (unsigned long long)r->body_limit);
        return;
    }
    if (r->body_mode != GJ_BODY_UPLOAD)
        return;
    if (upload_ops)
        upload_ops->start(r);
    else
        gj_problem(r, 503, NULL, "this server takes no uploads");
}

/* 1 when a body follows the header. */
static int body_expected(struct gj_req *r)
{
    const char *te = gj_req_header(r, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    const char *cl = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    uint64_t declared = 0;
    return (te && strcasestr(te, "chunked")) ||
           (cl && gj_http_parse_u64(cl, strlen(cl), &declared) == 0 && declared > 0);
}

/* No pooled connection is held while the client sends its body (authentication
 * borrowed one): the request takes one again when it needs it. */
static void release_db_during_body(struct gj_req *r)
{
    if (r->db && PQtransactionStatus(r->db) == PQTRANS_IDLE && body_expected(r)) {
        gj_db_release(r->srv->db, r->db);
        r->db = NULL;
    }
}

static void body_chunk(struct gj_req *r, const char *data, size_t len)
{
    r->body_bytes += len;
    gj_conns_quickack(r->conn);
    switch (r->body_mode) {
    case GJ_BODY_UPLOAD:
        upload_ops->receive(r, data, len);   /* set: first_call answered without it */
        return;
    case GJ_BODY_STREAM:
        /* the route may answer its limit in its own words first */
        if (r->route->data && r->route->data(r, data, len) < 0 && !r->response)
            gj_problem(r, 500, NULL, "internal error");
        if (!r->response && r->body_bytes > r->body_limit)
            gj_problem(r, 413, NULL, "the request body is over the limit of %llu bytes",
                       (unsigned long long)r->body_limit);
        return;
    case GJ_BODY_JSON:
    case GJ_BODY_NONE: {
        uint64_t cap = r->body_limit;
        if (r->body_bytes > cap) {
            gj_problem(r, 413, NULL, "the JSON body is over the limit of %llu bytes", (unsigned long long)cap);
            return;
        }
        if (r->body_mode == GJ_BODY_NONE)
            return;                           /* a body nobody reads: bounded, then dropped */
        if (r->body_len + len + 1 > r->body_cap) {
            size_t ncap = r->body_cap ? r->body_cap : 4096;
            while (ncap < r->body_len + len + 1)
                ncap *= 2;
            char *nb = realloc(r->body, ncap);
            if (!nb) {
                gj_problem(r, 500, NULL, "out of memory");
                return;
            }
            r->body = nb;
            r->body_cap = ncap;
        }
        memcpy(r->body + r->body_len, data, len);
        r->body_len += len;
        r->body[r->body_len] = '\0';
        return;
    }
    }
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            return 0;
    return 1;
}

static void final_call(struct gj_req *r)
{
    if (r->body_mode == GJ_BODY_JSON && r->body_len && !is_blank(r->body, r->body_len)) {
        json_error_t err;
        r->json_bytes = r->body_len;
        r->json = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &err);
        if (!r->json) {
            gj_problem(r, 400, NULL, "malformed JSON body at line %d, column %d: %s", err.line, err.column,
                       err.text);
            return;
        }
    }
    if (r->body_mode == GJ_BODY_UPLOAD && upload_ops->replay(r) != 0)
        return;
    r->route->handle(r);
}

/* An early answer (401, 404, 415...) to a request whose small body is still on
 * its way waits until that body is read: answering and closing first would make
 * the kernel reset the connection under the unread bytes, and the client would
 * see a broken connection instead of the answer. Bodies over DRAIN_LIMIT are
 * answered at once (clients that send Expect: 100-continue never send them). */
static int drain_before_answer(struct gj_req *r)
{
    const char *expect = gj_req_header(r, MHD_HTTP_HEADER_EXPECT);
    if (expect && strcasestr(expect, "100-continue"))
        return 0;   /* the client waits for our word before it sends the body */
    const char *te = gj_req_header(r, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (te && strcasestr(te, "chunked"))
        return 1;
    const char *cl = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    uint64_t declared = 0;
    if (!cl || gj_http_parse_u64(cl, strlen(cl), &declared) != 0)
        return 0;
    return declared > 0 && declared <= DRAIN_LIMIT;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct gj_http_server *h = cls;
    struct gj_req *r = *con_cls;
    (void)version;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        *con_cls = r;
        r->srv = h->srv;
        r->conn = connection;
        r->t0 = now_s();
        r->hsts = h->hsts;
        atomic_fetch_add(&requests_active, 1);
        gj_conns_header_done(connection);
        ascii_copy(r->method, sizeof r->method, method);
        ascii_copy(r->path, sizeof r->path, url);
        new_request_id(r->request_id);
        first_call(h, r, url, method);
        release_db_during_body(r);
        if (r->response && !drain_before_answer(r))
            return queue_prepared(r);
        return MHD_YES;
    }
    if (r->cut)
        return MHD_NO;
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->response) {
            r->discarded += n;
            return r->discarded > DRAIN_LIMIT ? MHD_NO : MHD_YES;
        }
        body_chunk(r, upload_data, n);
        return r->cut ? MHD_NO : MHD_YES;   /* cut: answered already, the connection closes */
    }
    if (r->parked) {                 /* resumed (http_park.h): the route goes on */
        r->parked = 0;
        r->route->handle(r);
    } else if (!r->response) {
        final_call(r);
    }
    if (r->parked)
        return MHD_YES;
    if (r->gone)                     /* its client closed the connection while it was parked */
        return MHD_NO;
    return queue_prepared(r);
}

/* The request log names the concrete path only where its parameters are our own
 * identifiers (job and blob ids, output and model names). Others, such as a
 * DICOM Study Instance UID, identify a patient's study and are not logged. */
static int path_loggable(const struct gj_route *rt)
{
    if (!rt)
        return 1;
    for (const char *p = strchr(rt->path, '{'); p; p = strchr(p + 1, '{'))
        if (strncmp(p, "{id}", 4) && strncmp(p, "{name}", 6) && strncmp(p, "{version}", 9))
            return 0;
    return 1;
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    gj_conns_request_done(connection);
    struct gj_req *r = con_cls ? *con_cls : NULL;
    if (!r)
        return;
    atomic_fetch_sub(&requests_active, 1);
    int ok = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK;
    if (r->route && r->route->done)
        r->route->done(r, ok);
    if (r->response) {                  /* prepared, never sent (client gone mid-body) */
        MHD_destroy_response(r->response);
        r->response = NULL;
        if (!ok)
            r->status = 499;
    }
    if (!r->status)
        r->status = 499;                /* the client went away before an answer */
    double secs = now_s() - r->t0;
    const char *route = r->route ? r->route->path : "unmatched";
    json_t *f = json_pack("{s:s, s:s, s:i, s:I, s:f, s:s}", "method", r->method, "route", route,
                          "status", r->status, "bytes", (json_int_t)r->bytes, "duration_ms",
                          secs * 1000.0, "request_id", r->request_id);
    if (f && path_loggable(r->route))
        json_object_set_new(f, "path", json_string(r->path));
    if (f && r->authed)
        json_object_set_new(f, "tenant", json_string(r->who.tenant_name));
    if (f && !ok)
        json_object_set_new(f, "aborted", json_true());
    gj_log_fields(GJ_LOG_INFO, "http", "request", f);
    gj_metrics_http(method_label(r->method), route, r->status, secs, r->body_bytes);
    release_db(r);
    if (upload_ops)
        upload_ops->end(r);
    int trim = r->json_bytes >= TRIM_AFTER_JSON ||
               (r->body_bytes >= TRIM_AFTER_BODY && r->body_mode != GJ_BODY_UPLOAD);
    free(r->body);
    json_decref(r->json);
    free(r);
    *con_cls = NULL;
    if (trim)
        malloc_trim(0);
}

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    gj_log_fields(GJ_LOG_DEBUG, "http", msg, NULL);
}

/* The HTTP layer's gauges on /metrics: connections (http_conns.c) and parked requests. */
static void write_http_metrics(FILE *f)
{
    gj_conns_write_metrics(f);
    int parked = 0, joined = 0;
    gj_park_counts(&parked, &joined);
    fprintf(f,
            "# HELP gpujobd_http_streams Long polls and event streams open.\n"
            "# TYPE gpujobd_http_streams gauge\ngpujobd_http_streams %d\n"
            "# HELP gpujobd_http_streams_parked Long polls, event streams and inference requests waiting, holding no thread.\n"
            "# TYPE gpujobd_http_streams_parked gauge\ngpujobd_http_streams_parked %d\n",
            joined, parked);
}

/* What one listener serves on. */
struct listener {
    const char *name;            /* "api", "metrics" */
    const char *host;
    int port;
    int tls;
    unsigned threads, max_connections, per_ip;
};

static struct MHD_Daemon *start_daemon(struct gj_http_server *h, const struct listener *l, struct addrinfo *ai)
{
    /* MHD_USE_ITC: MHD_quiesce_daemon in a thread pool needs it */
    unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (l->tls)
        flags |= MHD_USE_TLS;
    struct MHD_OptionItem opts[] = {
        { MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr },
        { MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)l->threads, NULL },
        { MHD_OPTION_CONNECTION_LIMIT, (intptr_t)l->max_connections, NULL },
        { MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)l->per_ip, NULL },
        { MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)gj_http_idle_timeout(h->srv), NULL },
        { MHD_OPTION_CONNECTION_MEMORY_LIMIT, 256 * 1024, NULL },
        { MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096, NULL },
        { MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, h },
        { MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)gj_conns_notify, h->conns },
        { MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)gj_http_unescape, NULL },
        { MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_logger, h },
        { l->tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, h->cert_pem },
        { MHD_OPTION_HTTPS_MEM_KEY, 0, h->key_pem },
        { h->client_ca_pem ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0, h->client_ca_pem },
        { MHD_OPTION_END, 0, NULL },
    };
    return MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
}

static void free_server(struct gj_http_server *h)
{
    gj_conns_stop(h->conns);
    free(h->cert_pem);
    free(h->key_pem);
    free(h->client_ca_pem);
    free(h);
}

/* Resolves the listener's address and starts its daemon; h has its tables and TLS. 0 or -1 logged. */
static int open_listener(struct gj_http_server *h, const struct listener *l)
{
    struct addrinfo hints = { 0 }, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", l->port);
    const char *host = l->host[0] && strcmp(l->host, "*") != 0 ? l->host : NULL;
    int grc = getaddrinfo(host, port, &hints, &ai);
    if (grc != 0 || !ai) {
        gj_log_error("http", "cannot resolve the %s listen address %s:%d: %s", l->name, l->host, l->port,
                     gai_strerror(grc));
        return -1;
    }
    h->name = l->name;
    /* HTTPS only: a plain-HTTP answer's header is ignored by browsers (RFC 6797), and behind a
     * TLS-terminating ingress (--insecure-http) the ingress owns the policy */
    if (l->tls && h->srv->cfg.hsts_max_age > 0)
        snprintf(h->hsts, sizeof h->hsts, "max-age=%d", h->srv->cfg.hsts_max_age);
    h->conns = gj_conns_start(l->name, h->srv->cfg.header_timeout_seconds);
    h->daemon = h->conns ? start_daemon(h, l, ai) : NULL;
    freeaddrinfo(ai);
    if (!h->daemon) {
        gj_log_error("http", "cannot listen on %s:%d for the %s (in use, or a bad certificate)", l->host, l->port,
                     l->name);
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    json_t *f = json_pack("{s:s, s:s, s:i, s:s, s:i, s:i, s:i, s:i}", "listener", l->name, "host", l->host, "port",
                          info ? (int)info->port : l->port, "scheme", l->tls ? "https" : "http", "threads",
                          (int)l->threads, "max_connections", (int)l->max_connections, "max_connections_per_ip",
                          (int)l->per_ip, "header_timeout_seconds", h->srv->cfg.header_timeout_seconds);
    gj_log_fields(GJ_LOG_INFO, "http", "listening", f);
    return 0;
}

struct gj_http_server *gj_http_start(struct gj_server *srv, const struct gj_route_table *const *tables,
                                     const char *cert_pem, const char *key_pem)
{
    const struct gj_config *cfg = &srv->cfg;
    if (!cfg->insecure_http && (!cert_pem || !key_pem)) {
        gj_log_error("http", "TLS needs a certificate and a key");
        return NULL;
    }
    struct gj_http_server *h = calloc(1, sizeof *h);
    if (!h || (!cfg->insecure_http && (!(h->cert_pem = strdup(cert_pem)) || !(h->key_pem = strdup(key_pem))))) {
        gj_log_error("http", "out of memory");
        if (h)
            free_server(h);
        return NULL;
    }
    h->srv = srv;
    h->tables = tables;
    size_t ca_len;
    if (!cfg->insecure_http && cfg->tls_client_ca[0] &&
        gj_read_file(cfg->tls_client_ca, 1u << 20, &h->client_ca_pem, &ca_len) != 0) {
        gj_log_error("http", "--tls-client-ca: cannot read %s", cfg->tls_client_ca);
        free_server(h);
        return NULL;
    }
    atomic_store(&http_stopping, 0);
    static atomic_int metrics_added;
    if (!atomic_exchange(&metrics_added, 1) && gj_metrics_add_writer(write_http_metrics) != 0)
        gj_log_warn("http", "the HTTP gauges are left out of /metrics (too many writers)");
    struct listener l = { "api", cfg->listen_host, cfg->listen_port, !cfg->insecure_http, (unsigned)cfg->http_threads,
                          (unsigned)gj_conns_reserve_fds(cfg->max_connections), (unsigned)cfg->max_connections_per_ip };
    if (gj_park_start(srv) != 0) {
        free_server(h);
        return NULL;
    }
    h->owns_park = 1;
    if (open_listener(h, &l) != 0) {
        gj_park_stop();
        free_server(h);
        return NULL;
    }
    return h;
}

struct gj_http_server *gj_http_start_metrics(struct gj_server *srv, const struct gj_route_table *const *tables)
{
    const struct gj_config *cfg = &srv->cfg;
    struct gj_http_server *h = calloc(1, sizeof *h);
    if (!h) {
        gj_log_error("http", "out of memory");
        return NULL;
    }
    h->srv = srv;
    h->tables = tables;
    /* a scraper and the kubelet's probes: few connections, one thread */
    struct listener l = { "metrics", cfg->metrics_host, cfg->metrics_port, 0, 1, 64, 16 };
    if (open_listener(h, &l) != 0) {
        free_server(h);
        return NULL;
    }
    return h;
}

void gj_http_stop(struct gj_http_server *h)
{
    if (!h)
        return;
    atomic_store(&http_stopping, 1);
    if (h->owns_park)
        gj_park_close();                             /* parked requests wake and answer */
    MHD_socket fd = MHD_quiesce_daemon(h->daemon);   /* no new connections */
    for (int waited = 0; atomic_load(&requests_active) > 0 && waited < STOP_DRAIN_MS; waited += 20) {
        struct timespec d = { 0, 20 * 1000000L };
        nanosleep(&d, NULL);
    }
    MHD_stop_daemon(h->daemon);                      /* closes what is left */
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
    if (h->owns_park)
        gj_park_stop();
    free_server(h);
}
