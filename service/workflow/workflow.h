/*
 * workflow.h — the workflow module's service half (module.h; issue 15): the job log route,
 * callbacks of settled jobs (webhooks) and the tenant's signing secret. What it adds to jobs
 * themselves (names, labels, callback URLs, inputs from other jobs) is core: queue.h,
 * job_fields.h, callback_policy.h, job_log.h, migration 0007.
 */
#ifndef GJ_WORKFLOW_H
#define GJ_WORKFLOW_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "service/http/http_server.h"
#include "service/server.h"

/* Route tables (routes_log.c, webhook_secret.c). */
extern const struct gj_route_table gj_routes_job_log;
extern const struct gj_route_table gj_routes_webhook_secret;

/* ---- signing (webhook_sign.c; Standard Webhooks, https://www.standardwebhooks.com) ----
 * A call carries the headers webhook-id (the delivery, the same on every retry),
 * webhook-timestamp (Unix seconds of this attempt) and webhook-signature ("v1,"
 * base64(HMAC-SHA256(secret, id "." timestamp "." body))). The receiver recomputes it with
 * its tenant's secret (GET /v1/webhook-secret: "whsec_" base64(secret)), compares in
 * constant time, refuses a timestamp more than 5 minutes from its clock (replay), and may
 * drop an id it has seen (a retry of a call it took). */
#define GJ_WEBHOOK_SECRET_BYTES 32
#define GJ_WEBHOOK_SIGNATURE_MAX 64   /* "v1," and 44 characters of base64, with the NUL */
#define GJ_WEBHOOK_SECRET_TEXT_MAX 64 /* "whsec_" and 44 characters of base64, with the NUL */

void gj_webhook_sign(const unsigned char *secret, size_t secret_len, const char *msg_id, long long timestamp,
                     const char *body, size_t body_len, char out[GJ_WEBHOOK_SIGNATURE_MAX]);
void gj_webhook_secret_text(const unsigned char *secret, size_t secret_len, char out[GJ_WEBHOOK_SECRET_TEXT_MAX]);

/* ---- the tenant's secret (webhook_secret.c) ----
 * Made at first use (a call to deliver, or GET /v1/webhook-secret) and kept in
 * webhook_secrets; every replica reads the same one. 1 with the secret, -1 error. */
int gj_webhook_secret_get(PGconn *conn, const char *tenant_id, unsigned char secret[GJ_WEBHOOK_SECRET_BYTES]);

/* ---- one call (webhook_post.c) ---- */
struct gj_webhook_call {
    const char *url;
    const char *body;
    const char *msg_id;
    long long timestamp;
    const char *signature;
    const char *allow;            /* the --callback-allow text now in force */
    int allow_private;
    const char *cacert;           /* PEM bundle https receivers are verified with; NULL/"": the system's */
    int timeout_ms;
    const atomic_int *stop;       /* set: give up at once */
};

struct gj_webhook_outcome {
    int status;                   /* the HTTP status, 0 when none came */
    int delivered;                /* a 2xx answer */
    int permanent;                /* retrying cannot help (refused by policy, a redirect) */
    char error[768];              /* why not delivered; never holds the URL's path or query */
};

/* Posts the body (application/json) with the signature headers: the host must still be on the
 * allow list, its addresses are resolved and checked (callback_policy.h) and the connection is
 * pinned to the address checked; redirects are not followed. Fills o; never fails otherwise. */
void gj_webhook_post(const struct gj_webhook_call *call, struct gj_webhook_outcome *o);

/* ---- the delivery threads, one tenant at a time each (webhook_delivery.c) ---- */
struct gj_webhook_deliverer;
struct gj_webhook_deliverer *gj_webhook_deliverer_start(struct gj_server *srv);
void gj_webhook_deliverer_stop(struct gj_webhook_deliverer *d);

#endif
