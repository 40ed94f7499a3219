/*
 * http_server.h — the HTTPS JSON API on libmicrohttpd (ARCHITECTURE.md: HTTP API conventions).
 */
#ifndef GJ_HTTP_SERVER_H
#define GJ_HTTP_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <microhttpd.h>

#include "service/auth/auth.h"
#include "service/http/http_parse.h"
#include "service/server.h"

struct gj_http_server;

struct gj_route_table;

/* Starts the API listener on cfg.listen_host:port (TLS unless cfg.insecure_http) with the
 * route tables (NULL-terminated; they outlive the server): a request goes to the first
 * route that matches, in table order. libmicrohttpd's epoll thread pool (cfg.http_threads)
 * serves every connection; long polls and event streams park (http_park.h) instead of
 * holding a thread. NULL with a log line. */
struct gj_http_server *gj_http_start(struct gj_server *srv, const struct gj_route_table *const *tables,
                                     const char *cert_pem, const char *key_pem);
/* Starts the metrics listener on cfg.metrics_host:port: plain HTTP, these tables only
 * (/metrics, /healthz, /readyz without a key). NULL with a log line. */
struct gj_http_server *gj_http_start_metrics(struct gj_server *srv, const struct gj_route_table *const *tables);
/* Stops accepting; parked requests are woken to answer; in-flight requests finish or are cut
 * after a short wait. */
void gj_http_stop(struct gj_http_server *h);

struct gj_req;
/* How GJ_BODY_UPLOAD bodies are received: upload_spool.h supplies the table and
 * serve sets it before gj_http_start. The server calls through it only, since the
 * spool answers through the request API below. Without one, uploads get 503. */
struct gj_upload_ops {
    int (*start)(struct gj_req *r);      /* the body is about to arrive: 0, or -1 answered */
    void (*receive)(struct gj_req *r, const char *data, size_t len);
    int (*replay)(struct gj_req *r);     /* complete: into the route's data callback; 0 or -1 */
    void (*end)(struct gj_req *r);       /* every request's end */
};
void gj_http_set_upload_ops(const struct gj_upload_ops *ops);

/* Prints the routes of the tables, one "METHOD /path/{param}" line each
 * (`gpujobd serve --print-routes`; the OpenAPI test compares it with the spec). */
void gj_http_print_routes(FILE *f, const struct gj_route_table *const *tables);

/* ------------------------------------------------------------------------
 * Shared by http_server.c and the route files (routes_*.c); nothing else
 * needs what follows.
 * ------------------------------------------------------------------------ */

/* OPTIONAL: as USER when the request carries a key or a session cookie, else the handler
 * runs unauthenticated (r->authed 0): a probe that answers "not signed in" with a 200. */
enum gj_auth_need { GJ_AUTH_NONE, GJ_AUTH_USER, GJ_AUTH_ADMIN, GJ_AUTH_OPTIONAL };
/* NONE: a body is read (bounded) and dropped. JSON: collected and parsed. STREAM:
 * handed to the route's data callback as it arrives. UPLOAD: spooled while it
 * arrives, under the upload limits, and handed to the data callback once complete
 * (upload_spool.h). */
enum gj_body_mode { GJ_BODY_NONE, GJ_BODY_JSON, GJ_BODY_STREAM, GJ_BODY_UPLOAD };

struct gj_req;

/* One route. Path parameters named "id" must be UUIDs and "name" must pass
 * gj_safe_name(); anything else answers 404 before a handler runs. */
struct gj_route {
    const char *method;
    const char *path;              /* template, e.g. "/v1/jobs/{id}/outputs/{name}" */
    enum gj_auth_need auth;
    enum gj_body_mode body;        /* JSON: collected (max_json_bytes) and parsed into r->json */
    /* Headers read, caller authenticated, body not yet read. May prepare a
     * response (answered at once, body discarded), set r->body_mode or declare
     * r->body_limit (default: cfg.max_json_bytes for JSON and NONE, else
     * cfg.max_body_bytes). NULL ok. */
    void (*begin)(struct gj_req *r);
    /* GJ_BODY_STREAM and GJ_BODY_UPLOAD: one chunk. 0 go on; -1 a response was
     * prepared (the rest of the body is discarded and the response sent at its
     * end). An upload's chunks come once its body is complete, before handle. */
    int (*data)(struct gj_req *r, const char *buf, size_t len);
    /* The body is complete (and parsed, for JSON): prepare the response. */
    void (*handle)(struct gj_req *r);
    /* The request ended; ok = 0 when the client went away or the response was
     * cut. Frees r->state. NULL ok. */
    void (*done)(struct gj_req *r, int ok);
};

/* A route file's routes (each route file exports one; a module lists its tables). */
struct gj_route_table {
    const struct gj_route *routes;
    size_t n;
};

struct gj_req {
    struct gj_server *srv;
    struct MHD_Connection *conn;
    const struct gj_route *route;
    char method[16];
    char path[512];
    char request_id[33];
    char params[GJ_ROUTE_MAX_PARAMS][GJ_PARAM_MAX];
    int n_params;
    struct gj_principal who;       /* valid when authed */
    int authed;
    PGconn *db;                    /* borrowed for the request (gj_req_db), released at its end */
    enum gj_body_mode body_mode;
    char *body;                    /* JSON body text */
    size_t body_len, body_cap;
    json_t *json;                  /* parsed JSON body, NULL when the body was empty */
    uint64_t body_bytes;           /* received so far */
    uint64_t json_bytes;           /* of them, parsed as JSON (by the server or the route) */
    uint64_t body_limit;           /* what the route takes: 413 past it */
    struct gj_upload *upload;      /* GJ_BODY_UPLOAD: the spool (upload_spool.h) */
    int cut;                       /* answered mid-body and closed (gj_req_cut) */
    uint64_t discarded;            /* dropped after a response was prepared */
    struct MHD_Response *response; /* prepared response */
    int status;
    uint64_t bytes;                /* announced response body size */
    int upload_slot;               /* holds upload slots (upload_spool.h) */
    double t0;
    void *state;                   /* the route's own */
    int parked;                    /* handle parked the request (http_park.h): no answer yet;
                                    * handle runs again once it is resumed */
    int gone;                      /* its client closed the connection while it was parked
                                    * (gj_park_gone): no answer, the connection is closed */
    const char *hsts;              /* Strict-Transport-Security of its listener; "" for none */
};

/* Borrows a pool connection for the rest of the request (5 s wait); NULL when
 * none comes (answer with gj_respond_unavailable). GET and HEAD requests borrow
 * as readers (they may take the pool's read reserve, db.h). While a body
 * arrives the request holds none: one borrowed before it is given back. */
PGconn *gj_req_db(struct gj_req *r);
/* Hands the request's connection to someone else (a streamed response). */
PGconn *gj_req_take_db(struct gj_req *r);
const char *gj_req_header(struct gj_req *r, const char *name);
/* 1 when r->who's key is over --rate-limit-per-key (a request that counts): for routes
 * that authenticate themselves (CARMIN's), as the server does for the others. */
int gj_req_rate_limited(struct gj_req *r);
/* Resolves a presented API key into r->who: from the server's key cache (key_cache.h)
 * when it verified the key lately, else from the database (gj_req_db: borrowed only
 * then). 1 valid, 0 not, -1 the database cannot answer (gj_respond_unavailable). */
int gj_req_verify_key(struct gj_req *r, const char *key);
const char *gj_req_query(struct gj_req *r, const char *name);
/* The idle timeout of a connection (seconds). */
unsigned int gj_http_idle_timeout(const struct gj_server *srv);

/* Responses. Each replaces a prepared one; the returned response may receive
 * further headers (NULL on allocation failure). */
struct MHD_Response *gj_respond(struct gj_req *r, int status, struct MHD_Response *resp, uint64_t bytes);
struct MHD_Response *gj_respond_json(struct gj_req *r, int status, json_t *body /* consumed */);
/* A JSON body already encoded as gj_respond_json encodes it (text: malloc'd, consumed). */
struct MHD_Response *gj_respond_json_text(struct gj_req *r, int status, char *text, size_t len);
struct MHD_Response *gj_respond_empty(struct gj_req *r, int status);
/* application/problem+json (RFC 9457): type, title, status, detail, and
 * "field" when field is not NULL or "". */
struct MHD_Response *gj_problem(struct gj_req *r, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The JSON text of such a problem (malloc'd; NULL when out of memory). */
char *gj_problem_text(struct gj_req *r, int status, const char *field, const char *detail);
/* The Content-Type of r's error bodies: problem+json, or application/json under a prefix
 * with its own error shape (gj_http_error_body). */
const char *gj_problem_content_type(const struct gj_req *r);
/* Errors in another shape under a path prefix: a module whose standard fixes its error
 * bodies (CARMIN's {errorCode, errorMessage} under /rest/) has the server's own errors
 * there (unknown route, method, limits, unavailability) rendered by fn, which returns
 * malloc'd JSON text or NULL. Called before the server starts (module init); 0 or -1. */
typedef char *(*gj_error_body_fn)(int status, const char *detail);
int gj_http_error_body(const char *prefix, gj_error_body_fn fn);
/* Requests under a path prefix authenticated before they are routed, by fn (a module
 * whose standard refuses a wrong key on any path, known or not: CARMIN's under /rest/).
 * fn answers to stop the request (r->response), else lets it go on to its route. Called
 * before the server starts (module init); 0 or -1. */
typedef void (*gj_prefix_auth_fn)(struct gj_req *r);
int gj_http_prefix_auth(const char *prefix, gj_prefix_auth_fn fn);
/* Answers now, before the body has ended, with a problem, and closes the connection:
 * for a client that must not be waited for (a too-slow upload). libmicrohttpd queues
 * a response only before a body or after it, so this one is written to the
 * connection itself (through its TLS session); any prepared response is dropped.
 * Sets r->status and r->cut (http_cut.c). */
void gj_req_cut(struct gj_req *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
struct MHD_Response *gj_respond_unavailable(struct gj_req *r);
struct MHD_Response *gj_respond_not_found(struct gj_req *r);
/* The service's errors (common/gj_error.h) at the edge: a problem with err's status (0: 422),
 * field and message; 503 as gj_respond_unavailable, 404 as gj_respond_not_found (the same
 * answer for another tenant's and for none) (http_error.c). */
struct gj_error;
struct MHD_Response *gj_respond_error(struct gj_req *r, const struct gj_error *err);
/* The same problem with members (a JSON object, taken; NULL: none) beside its own, for figures
 * a client acts on (a quota's bytes); without them where the path answers errors in another
 * shape (http_error_body). */
/* A lookup that found nothing (rc 0: 404, as gj_respond_not_found) or could not look (rc < 0:
 * 503, as gj_respond_unavailable). */
struct MHD_Response *gj_respond_lookup_failed(struct gj_req *r, int rc);
struct MHD_Response *gj_respond_error_with(struct gj_req *r, const struct gj_error *err, json_t *members);
/* 1 when the server is shutting down (long polls and event streams end). */
int gj_http_stopping(const struct gj_server *srv);

/* A response whose body is bytes a tenant sent or a job wrote (blobs, outputs, CARMIN files,
 * DICOM instances, logs): never active content on the API's origin, which is the portal's.
 * nosniff, a CSP that sandboxes it and lets it load nothing, and with attachment
 * Content-Disposition: attachment (with filename when it is a plain quoted string). An <img>
 * or a fetch() still reads it; a browser tab never runs it. */
#define GJ_USER_BYTES_CSP "sandbox; default-src 'none'; frame-ancestors 'none'"
void gj_http_user_bytes(struct MHD_Response *resp, int attachment, const char *filename);

/* Streams a blob (range, ETag, If-None-Match) as the response, as user bytes (above). conn is the
 * request's connection inside a transaction where info was looked up; the
 * response takes it over. */
void gj_http_send_blob(struct gj_req *r, const struct gj_blob_info *info, const char *content_type,
                       const char *filename);

/* A storage quota's refusals as answers (storage_quota_http.c; storage_quota.h counts). 507
 * problem+json with the figures (used_bytes, requested_bytes, quota_bytes, quota): */
struct gj_storage_refusal;
void gj_respond_over_quota(struct gj_req *r, const struct gj_storage_refusal *f);
/* Before a body arrives: 1 and answered 507 when its Content-Length alone would pass the
 * quota (the client need not send it); else 0, and the commit checks as ever. */
int gj_storage_refuse_declared(struct gj_req *r);

/* The route tables of the core API (the core module, service/api/core.c). */
extern const struct gj_route_table gj_routes_blobs;
extern const struct gj_route_table gj_routes_jobs;
extern const struct gj_route_table gj_routes_misc;
extern const struct gj_route_table gj_routes_tenants;
/* /metrics, /healthz and /readyz without a key: the metrics listener's only routes. */
extern const struct gj_route_table gj_routes_probes;

#endif
