/*
 * grpc_server.h — the gRPC front end (`--grpc-listen`): Triton's GRPCInferenceService over
 * Debian's gRPC C core, TLS with the server's certificate (or plain text with
 * --grpc-insecure), client certificates from --tls-client-ca. The transport only: it reads
 * a call's one request message, authenticates it, hands the bytes to the method's handler
 * (the infer module's, service/infer/grpc_oip.c) and sends what the handler answered with
 * grpc-status and grpc-message. The handlers decode and encode protobuf-c messages.
 *
 * Authentication, before any handler runs: a client certificate verified against
 * --tls-client-ca (the TLS handshake refuses another issuer's or an expired one) is the
 * tenant its subject's CN names, with a user key's rights; a CN that names no tenant is
 * refused UNAUTHENTICATED. Without a certificate, metadata `authorization: Bearer <key>`
 * as on HTTPS. Open methods (ServerLive, ServerReady: probes) need neither; admin ones (as
 * on /v2: statistics, load, unload) an admin key.
 */
#ifndef GJ_GRPC_SERVER_H
#define GJ_GRPC_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "service/auth/auth.h"

struct gj_server;

/* gRPC status codes (grpc/status.h's numbers) the handlers answer. */
enum gj_grpc_code {
    GJ_GRPC_OK = 0,
    GJ_GRPC_CANCELLED = 1,
    GJ_GRPC_INVALID_ARGUMENT = 3,
    GJ_GRPC_DEADLINE_EXCEEDED = 4,
    GJ_GRPC_NOT_FOUND = 5,
    GJ_GRPC_PERMISSION_DENIED = 7,
    GJ_GRPC_RESOURCE_EXHAUSTED = 8,
    GJ_GRPC_FAILED_PRECONDITION = 9,
    GJ_GRPC_UNIMPLEMENTED = 12,
    GJ_GRPC_INTERNAL = 13,
    GJ_GRPC_UNAVAILABLE = 14,
    GJ_GRPC_UNAUTHENTICATED = 16,
};

/* One unary call as a handler sees it. */
struct gj_grpc_call {
    struct gj_server *srv;
    struct gj_principal who;          /* authenticated (empty for an open method) */
    const uint8_t *req;               /* the request message's bytes (the transport's, read-only) */
    size_t req_len;
    int64_t timeout_us;               /* what is left of the client's deadline; 0: none */
    /* 1 once the client cancelled or the deadline passed: a handler that waits asks it
     * (NULL: not known, e.g. a stream's message) */
    int (*cancelled)(void *arg);
    void *cancel_arg;
    /* the answer: */
    uint8_t *resp;                    /* malloc'd message bytes (status OK) */
    size_t resp_len;
    int status;                       /* enum gj_grpc_code */
    char message[768];                /* grpc-message when status is not OK */
};

typedef void (*gj_grpc_handler)(struct gj_grpc_call *c);

/* Who may call a method: anyone (probes), a tenant (a user key or certificate), an admin key. */
enum gj_grpc_access { GJ_GRPC_OPEN, GJ_GRPC_USER, GJ_GRPC_ADMIN };

struct gj_grpc_method {
    const char *name;                 /* "ServerLive": /inference.GRPCInferenceService/<name> */
    enum gj_grpc_access access;
    gj_grpc_handler fn;               /* a stream's: called for each message, its answer the
                                       * stream's next message */
    int streaming;                    /* 1: a bidirectional stream (ModelStreamInfer) */
    /* NULL, or the offset in the request message of the part the handler reads in place (a
     * raw tensor), found in the message's first head_len bytes (0: none there): the transport
     * places the message so that part is 64-byte aligned */
    size_t (*align_at)(const uint8_t *head, size_t head_len);
};

struct gj_grpc_methods {
    const struct gj_grpc_method *list;
    size_t n;
};

/* Fails the call with code and a formatted message. */
void gj_grpc_fail(struct gj_grpc_call *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The gRPC code for an HTTP status the shared internals give (400 INVALID_ARGUMENT, 404
 * NOT_FOUND, 429 RESOURCE_EXHAUSTED, 503 UNAVAILABLE, ...). */
int gj_grpc_code_for_http(int status);

struct gj_grpc_server;
/* Starts the listener on cfg.grpc_host:grpc_port with cert/key PEM (NULL with
 * --grpc-insecure) and cfg.tls_client_ca. NULL (logged) on failure. */
struct gj_grpc_server *gj_grpc_start(struct gj_server *srv, const struct gj_grpc_methods *methods,
                                     const char *cert_pem, const char *key_pem);
/* Stops taking calls, lets those running finish for up to grace_s, cancels the rest,
 * waits for its threads and frees it. */
void gj_grpc_stop(struct gj_grpc_server *g, int grace_s);

#endif
