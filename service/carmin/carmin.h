/*
 * carmin.h — the CARMIN 0.3.1 facade at /rest/ (the API VIP and other science gateways
 * speak; spec: /work/shared/conformance/carmin/carmin.yaml): platform and pipelines (one
 * per job kind), a per-tenant file space under /vip/Home backed by blobs (migration 0009),
 * executions.
 *
 * Its routes authenticate themselves (GJ_AUTH_NONE; carmin_gate before routing, as VIP's
 * server does, so a wrong key is 40101 on any path): CARMIN clients send the key in an
 * `apikey` header (Authorization: Bearer works too), and every error, a refused key
 * included, is CARMIN's {errorCode, errorMessage} rather than problem+json.
 */
#ifndef GJ_CARMIN_H
#define GJ_CARMIN_H

#include "service/http/http_server.h"

#define CARMIN_HOME "/vip/Home"

/* CARMIN error codes: the HTTP status times 100, plus a number within it. */
enum carmin_error_code {
    CARMIN_BAD_REQUEST = 40001,
    CARMIN_BAD_KEY = 40101,
    CARMIN_NOT_FOUND = 40401,
    CARMIN_CONFLICT = 40901,
    CARMIN_TOO_LARGE = 41301,
    CARMIN_RATE_LIMITED = 42901,
    CARMIN_UNAVAILABLE = 50301,
    CARMIN_INTERNAL = 50001,
    CARMIN_NO_SPACE = 50701,
    CARMIN_OVER_QUOTA = 50702,   /* the tenant's storage quota (storage_quota.h) */
};

/* Answers {errorCode, errorMessage}; the HTTP status is code / 100. */
void carmin_error(struct gj_req *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void carmin_unavailable(struct gj_req *r);
/* The service's error (common/gj_error.h) as CARMIN answers it: the code is the HTTP
 * status and 01 (404 -> 40401), 503 as carmin_unavailable. */
struct gj_error;
void carmin_respond_error(struct gj_req *r, const struct gj_error *err);
/* 50702 with the figures of gj_storage_last_refusal() (storage_quota.h). */
void carmin_over_quota(struct gj_req *r);
/* The server's own error bodies under /rest/ (gj_http_error_body): {errorCode: status*100+1, errorMessage}. */
char *carmin_error_body(int status, const char *detail);

/* The begin hook of every route that needs a key: r->who from the `apikey` header or
 * Authorization: Bearer, else 40101 answered. 0 authenticated, -1 answered. */
int carmin_authenticate(struct gj_req *r);
void carmin_begin(struct gj_req *r);
/* Authentication before routing under /rest/ (gj_http_prefix_auth, module.c). */
void carmin_gate(struct gj_req *r);

#endif
