/*
 * grpc_server.c — the gRPC listener (grpc_server.h) on gRPC's C core: one completion queue
 * per worker thread, each thread taking one call at a time from the server (read its
 * request, authenticate, run the method's handler, answer). Calls beyond the threads wait
 * in the core's queue. Bounds: the core's (message size, RESOURCE_EXHAUSTED past
 * --grpc-max-message once it has the message; streams per connection; the TLS handshake's
 * time; idle connections), the time a request message may take to arrive, half the threads
 * for streams, idle streams, calls per tenant.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "common/fsutil.h"
#include "service/auth/client_crl.h"
#include "service/grpc/grpc_server.h"
#include "service/auth/key_cache.h"
#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/server.h"

#define COMPONENT "grpc"
#define SERVICE_PREFIX "/inference.GRPCInferenceService/"
#define MAX_STREAMS_PER_CONNECTION 100
#define CLIENT_CA_MAX_BYTES (1u << 20)
#define DB_WAIT_MS 2000

struct grpc_worker {
    struct gj_grpc_server *g;
    grpc_completion_queue *cq;
    pthread_t thread;
    int started;
    /* a unary call's RECV_CLOSE_ON_SERVER, started before its handler runs so that a client
     * that cancels, or a deadline that passes, is seen while the handler waits (its tag is
     * &close_pending; it completes when the call ends either way) */
    int close_pending;   /* started, not yet completed */
    int cancelled;       /* what it reported */
};

struct gj_grpc_server {
    struct gj_server *srv;
    const struct gj_grpc_methods *methods;
    grpc_server *server;
    grpc_completion_queue *shutdown_cq;
    struct grpc_worker *workers;
    int n_workers;
    int started;
    atomic_int streams;               /* open streams */
    int max_streams;                  /* half the threads, at least one */
    /* calls running per tenant (--grpc-calls-per-tenant): one slot per thread at most in use */
    pthread_mutex_t tenants_lock;
    struct tenant_calls {
        char id[GJ_UUID_LEN + 1];     /* "" free */
        int n;
    } *tenants;
    int max_per_tenant;
};

void gj_grpc_fail(struct gj_grpc_call *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->message, sizeof c->message, fmt, ap);
    va_end(ap);
    c->status = code;
    free(c->resp);
    c->resp = NULL;
    c->resp_len = 0;
}

int gj_grpc_code_for_http(int status)
{
    switch (status) {
    case 400: case 413: case 422: return status == 413 ? GJ_GRPC_RESOURCE_EXHAUSTED : GJ_GRPC_INVALID_ARGUMENT;
    case 401: return GJ_GRPC_UNAUTHENTICATED;
    case 403: return GJ_GRPC_PERMISSION_DENIED;
    case 404: return GJ_GRPC_NOT_FOUND;
    case 409: return GJ_GRPC_FAILED_PRECONDITION;
    case 429: case 507: return GJ_GRPC_RESOURCE_EXHAUSTED;
    case 499: return GJ_GRPC_CANCELLED;
    case 501: return GJ_GRPC_UNIMPLEMENTED;
    case 503: return GJ_GRPC_UNAVAILABLE;
    case 504: return GJ_GRPC_DEADLINE_EXCEEDED;
    default: return GJ_GRPC_INTERNAL;
    }
}

/* The core's own errors (a refused handshake: which certificate check failed) in our log. */
static void core_log(gpr_log_func_args *args)
{
    if (args->severity == GPR_LOG_SEVERITY_ERROR)
        gj_log_warn(COMPONENT, "%s", args->message);
}

/* The HTTP status a gRPC code stands for, for /metrics (gj_metrics_http, method "GRPC"). */
static int http_status_for(int code)
{
    static const int status[] = { 200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503,
                                  500, 401 };
    return code >= 0 && code < (int)(sizeof status / sizeof status[0]) ? status[code] : 500;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Counts a call beside HTTP's requests: method "GRPC", route the method's path. */
static void count_call(const struct gj_grpc_method *m, int code, double t0, uint64_t bytes)
{
    char route[96];
    snprintf(route, sizeof route, SERVICE_PREFIX "%s", m ? m->name : "unknown");
    gj_metrics_http("GRPC", route, http_status_for(code), now_s() - t0, bytes);
}

/* ---- calls per tenant --------------------------------------------------------------------- */

/* Takes one of the tenant's call slots: 1, or 0 when it has max_per_tenant calls running. */
static int tenant_take(struct gj_grpc_server *g, const char *id)
{
    pthread_mutex_lock(&g->tenants_lock);
    struct tenant_calls *free_slot = NULL, *mine = NULL;
    for (int i = 0; i < g->n_workers && !mine; i++) {
        if (strcmp(g->tenants[i].id, id) == 0)
            mine = &g->tenants[i];
        else if (!free_slot && !g->tenants[i].id[0])
            free_slot = &g->tenants[i];
    }
    if (!mine && free_slot) {   /* one free slot at least: each running call holds a thread */
        mine = free_slot;
        snprintf(mine->id, sizeof mine->id, "%s", id);
        mine->n = 0;
    }
    int ok = mine && mine->n < g->max_per_tenant;
    if (ok)
        mine->n++;
    pthread_mutex_unlock(&g->tenants_lock);
    return ok;
}

static void tenant_give(struct gj_grpc_server *g, const char *id)
{
    pthread_mutex_lock(&g->tenants_lock);
    for (int i = 0; i < g->n_workers; i++)
        if (strcmp(g->tenants[i].id, id) == 0 && --g->tenants[i].n == 0)
            g->tenants[i].id[0] = '\0';
    pthread_mutex_unlock(&g->tenants_lock);
}

/* After authentication: the call counts against its tenant's calls (1 counted), or is
 * refused RESOURCE_EXHAUSTED past --grpc-calls-per-tenant. Open calls have no tenant. */
static int tenant_admit(struct gj_grpc_server *g, struct gj_grpc_call *c)
{
    if (c->status != GJ_GRPC_OK || !c->who.tenant_id[0])
        return 0;
    if (tenant_take(g, c->who.tenant_id))
        return 1;
    gj_grpc_fail(c, GJ_GRPC_RESOURCE_EXHAUSTED, "this tenant has %d calls running, the most this server runs "
                 "for one tenant: retry later", g->max_per_tenant);
    return 0;
}

/* ---- one call ----------------------------------------------------------------------------- */

/* Runs a batch of ops on the worker's queue and waits for it, at most idle_s seconds (0:
 * no bound; past it the call is cancelled, DEADLINE_EXCEEDED). 0, -1 (the call is gone), or
 * -2 (cancelled for idleness). */
static int run_ops_within(struct grpc_worker *w, grpc_call *call, const grpc_op *ops, size_t n, int idle_s)
{
    if (grpc_call_start_batch(call, ops, n, w, NULL) != GRPC_CALL_OK)
        return -1;
    gpr_timespec until = idle_s > 0 ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                                   gpr_time_from_seconds(idle_s, GPR_TIMESPAN))
                                    : gpr_inf_future(GPR_CLOCK_MONOTONIC);
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(w->cq, until, NULL);
        if (ev.type == GRPC_OP_COMPLETE && ev.tag == &w->close_pending) {   /* the call's end came first */
            w->close_pending = 0;
            continue;
        }
        if (ev.type == GRPC_QUEUE_TIMEOUT) {
            grpc_call_cancel_with_status(call, GRPC_STATUS_DEADLINE_EXCEEDED,
                                     "the call sent or read nothing for too long", NULL);
            until = gpr_inf_future(GPR_CLOCK_MONOTONIC);
            idle_s = -1;
            continue;   /* the batch ends, cancelled */
        }
        if (idle_s < 0)
            return -2;
        return ev.type == GRPC_OP_COMPLETE && ev.success ? 0 : -1;
    }
}

/* Starts watching for the call's end (RECV_CLOSE_ON_SERVER). 0, or -1. */
static int watch_close(struct grpc_worker *w, grpc_call *call)
{
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &w->cancelled;
    w->cancelled = 0;
    if (grpc_call_start_batch(call, &op, 1, &w->close_pending, NULL) != GRPC_CALL_OK)
        return -1;
    w->close_pending = 1;
    return 0;
}

/* gj_grpc_call.cancelled: 1 once the client cancelled or the deadline passed (polled by a
 * handler that waits, e.g. in the batcher's queue, every 100 ms). */
static int call_cancelled(void *arg)
{
    struct grpc_worker *w = arg;
    while (w->close_pending) {
        grpc_event ev = grpc_completion_queue_next(w->cq, gpr_time_0(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            break;
        if (ev.tag == &w->close_pending)
            w->close_pending = 0;
    }
    return !w->close_pending && w->cancelled;
}

/* Waits for the watch of the call's end to complete (the call is answered or cancelled). */
static void wait_close(struct grpc_worker *w)
{
    while (w->close_pending) {
        grpc_event ev = grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type != GRPC_OP_COMPLETE || ev.tag == &w->close_pending)
            w->close_pending = 0;
    }
}

static int run_ops(struct grpc_worker *w, grpc_call *call, const grpc_op *ops, size_t n)
{
    return run_ops_within(w, call, ops, n, 0);
}

static int slice_is(grpc_slice s, const char *text)
{
    size_t n = strlen(text);
    return GRPC_SLICE_LENGTH(s) == n && memcmp(GRPC_SLICE_START_PTR(s), text, n) == 0;
}

static const struct gj_grpc_method *find_method(const struct gj_grpc_methods *m, grpc_slice path)
{
    size_t plen = strlen(SERVICE_PREFIX), n = GRPC_SLICE_LENGTH(path);
    const char *p = (const char *)GRPC_SLICE_START_PTR(path);
    if (n <= plen || memcmp(p, SERVICE_PREFIX, plen) != 0)
        return NULL;
    for (size_t i = 0; i < m->n; i++)
        if (strlen(m->list[i].name) == n - plen && memcmp(p + plen, m->list[i].name, n - plen) == 0)
            return &m->list[i];
    return NULL;
}

/* A pooled connection taken when a check needs one, given back after authenticate. */
struct lazy_db {
    struct gj_server *srv;
    PGconn *conn;
};

static PGconn *lazy_db_get(void *arg)
{
    struct lazy_db *d = arg;
    if (!d->conn)
        d->conn = gj_db_acquire_for(d->srv->db, DB_WAIT_MS, GJ_DB_READ);
    return d->conn;
}

/* The verified client certificate's CN into cn (""when none was presented). With --tls-crl:
 * -1 when the certificate is revoked (or cannot be checked), why saying so; else 0. */
static int peer_cn(grpc_call *call, char *cn, size_t cap, char *why, size_t why_cap)
{
    cn[0] = '\0';
    grpc_auth_context *ctx = grpc_call_auth_context(call);
    if (!ctx)
        return 0;
    grpc_auth_property_iterator it = grpc_auth_context_find_properties_by_name(ctx, GRPC_X509_CN_PROPERTY_NAME);
    const grpc_auth_property *prop = grpc_auth_property_iterator_next(&it);
    if (prop && prop->value_length < cap) {
        memcpy(cn, prop->value, prop->value_length);
        cn[prop->value_length] = '\0';
    }
    it = grpc_auth_context_find_properties_by_name(ctx, GRPC_X509_PEM_CERT_PROPERTY_NAME);
    prop = grpc_auth_property_iterator_next(&it);
    int refused = (prop || cn[0]) &&   /* a certificate without its PEM cannot be checked */
                  gj_client_crl_refuses_pem(prop ? prop->value : "", prop ? prop->value_length : 0, why, why_cap);
    grpc_auth_context_release(ctx);
    return refused ? -1 : 0;
}

/* The Bearer key of metadata `authorization` into key ("" when none). */
static void bearer_key(const grpc_metadata_array *md, char *key, size_t cap)
{
    key[0] = '\0';
    for (size_t i = 0; i < md->count; i++) {
        if (!slice_is(md->metadata[i].key, "authorization"))
            continue;
        size_t n = GRPC_SLICE_LENGTH(md->metadata[i].value);
        const char *v = (const char *)GRPC_SLICE_START_PTR(md->metadata[i].value);
        if (n > 7 && strncasecmp(v, "Bearer ", 7) == 0 && n - 7 < cap) {
            memcpy(key, v + 7, n - 7);
            key[n - 7] = '\0';
        }
        return;
    }
}

/* Who the call is, before any handler: the certificate's tenant, else the Bearer key. */
static void authenticate(struct gj_grpc_server *g, grpc_call *call, const grpc_metadata_array *md,
                         struct gj_grpc_call *c)
{
    char cn[201], key[260], why[160];
    struct lazy_db db = { g->srv, NULL };
    int rc;
    if (peer_cn(call, cn, sizeof cn, why, sizeof why) != 0) {
        gj_log_warn(COMPONENT, "refused a client certificate: %s", why);
        gj_grpc_fail(c, GJ_GRPC_UNAUTHENTICATED, "the client certificate is refused: %s", why);
        return;
    }
    if (cn[0]) {
        rc = lazy_db_get(&db) ? gj_tenant_principal(db.conn, cn, &c->who) : -1;
        if (rc == 0) {
            gj_log_warn(COMPONENT, "refused a client certificate: its CN '%s' names no tenant", cn);
            gj_grpc_fail(c, GJ_GRPC_UNAUTHENTICATED, "the client certificate's CN names no tenant");
        }
    } else {
        bearer_key(md, key, sizeof key);
        if (!key[0]) {
            gj_grpc_fail(c, GJ_GRPC_UNAUTHENTICATED,
                         "credentials are required: a client certificate, or metadata authorization: Bearer <key>");
            return;
        }
        rc = gj_key_cache_verify(g->srv->api_keys, key, lazy_db_get, &db, &c->who);
        explicit_bzero(key, sizeof key);
        if (rc == 0)
            gj_grpc_fail(c, GJ_GRPC_UNAUTHENTICATED, "the API key is not valid");
    }
    if (rc < 0)
        gj_grpc_fail(c, GJ_GRPC_UNAVAILABLE, "the database is not available");
    if (db.conn)
        gj_db_release(g->srv->db, db.conn);
}

/* What is left of the call's deadline, in microseconds (0: none). */
static int64_t deadline_left_us(gpr_timespec deadline)
{
    gpr_timespec d = gpr_convert_clock_type(deadline, GPR_CLOCK_MONOTONIC);
    if (gpr_time_cmp(d, gpr_inf_future(GPR_CLOCK_MONOTONIC)) == 0)
        return 0;
    gpr_timespec left = gpr_time_sub(d, gpr_now(GPR_CLOCK_MONOTONIC));
    int64_t us = (int64_t)left.tv_sec * 1000000 + left.tv_nsec / 1000;
    return us > 0 ? us : 1;
}

/* The request message's bytes (decompressed) in one malloc'd block: *out the message's start
 * within *block (free *block). Where the method names a part it reads in place (align_at: a
 * large bytes field, e.g. a raw tensor), the message is placed so that part starts on an
 * ALIGN boundary: one copy of the core's slices, none after it. 0, or -1 when none came. */
#define ALIGN 64
static int message_bytes(grpc_byte_buffer *msg, const struct gj_grpc_method *m, uint8_t **block,
                         const uint8_t **out, size_t *len)
{
    grpc_byte_buffer_reader reader;
    if (!msg || !grpc_byte_buffer_reader_init(&reader, msg))
        return -1;
    size_t total = grpc_byte_buffer_length(reader.buffer_out);
    grpc_slice *slice;
    uint8_t *dst = NULL;
    *block = malloc(total + ALIGN);
    for (int first = 1; *block && grpc_byte_buffer_reader_peek(&reader, &slice); first = 0) {
        const uint8_t *p = GRPC_SLICE_START_PTR(*slice);
        size_t n = GRPC_SLICE_LENGTH(*slice);
        if (first) {
            size_t at = m && m->align_at ? m->align_at(p, n) : 0;
            dst = *block + (ALIGN - ((uintptr_t)*block + at) % ALIGN) % ALIGN;
            *out = dst;
        }
        memcpy(dst, p, n);
        dst += n;
    }
    grpc_byte_buffer_reader_destroy(&reader);
    if (!*block)
        return -1;
    if (!dst)   /* an empty message */
        *out = *block;
    *len = total;
    return 0;
}

/* A handler's answer as a message the core sends (it takes resp, freed when sent). */
static grpc_byte_buffer *message_of(uint8_t **resp, size_t len)
{
    grpc_slice body = grpc_slice_new(*resp, len, free);
    *resp = NULL;
    grpc_byte_buffer *out = grpc_raw_byte_buffer_create(&body, 1);
    grpc_slice_unref(body);
    return out;
}

/* Sends c's answer (a message when OK) and its status; initial_sent: a stream's metadata went
 * with its first message. */
static void answer(struct grpc_worker *w, grpc_call *call, struct gj_grpc_call *c, int initial_sent)
{
    grpc_op ops[4];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    grpc_byte_buffer *out = NULL;
    grpc_slice details = grpc_slice_from_copied_string(c->status == GJ_GRPC_OK ? "" : c->message);
    int cancelled = 0;
    if (!initial_sent)
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (c->status == GJ_GRPC_OK && c->resp) {
        out = message_of(&c->resp, c->resp_len);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = out;
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = (grpc_status_code)c->status;
    ops[n++].data.send_status_from_server.status_details = &details;
    if (!w->close_pending) {   /* a unary call watches its end already (watch_close) */
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n++].data.recv_close_on_server.cancelled = &cancelled;
    }
    run_ops(w, call, ops, n);
    if (out)
        grpc_byte_buffer_destroy(out);
    grpc_slice_unref(details);
}

/* One message of a stream through the method's handler; 0 sent, -1 the stream ends (c's
 * status says how; the call is gone when that is OK). */
static int stream_message(struct grpc_worker *w, grpc_call *call, const struct gj_grpc_method *m,
                          const grpc_call_details *details, struct gj_grpc_call *c, int *initial_sent)
{
    int idle = w->g->srv->cfg.grpc_stream_idle_seconds;
    grpc_byte_buffer *msg = NULL;
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_RECV_MESSAGE;
    ops[0].data.recv_message.recv_message = &msg;
    int rc = run_ops_within(w, call, ops, 1, idle);
    if (rc != 0 || !msg) {              /* gone, idle, or the client's half-close: the end */
        if (msg)
            grpc_byte_buffer_destroy(msg);
        c->resp = NULL;
        return rc == 0 ? -1 : (c->status = -1, -1);
    }
    struct gj_grpc_call one = { .srv = c->srv, .who = c->who, .status = GJ_GRPC_OK };
    uint8_t *block = NULL;
    int have = message_bytes(msg, m, &block, &one.req, &one.req_len) == 0;
    grpc_byte_buffer_destroy(msg);
    one.timeout_us = deadline_left_us(details->deadline);
    if (have) {
        m->fn(&one);   /* a stream's handler answers errors in its message */
        free(block);
    } else {
        gj_grpc_fail(&one, GJ_GRPC_INVALID_ARGUMENT, "the stream's message cannot be read");
    }
    if (one.status != GJ_GRPC_OK) {
        gj_grpc_fail(c, one.status, "%s", one.message);
        return -1;
    }
    size_t n = 0;
    memset(ops, 0, sizeof ops);
    if (!*initial_sent)
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    grpc_byte_buffer *out = message_of(&one.resp, one.resp_len);
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = out;
    rc = run_ops_within(w, call, ops, n, idle);   /* a client that never reads: idle too */
    grpc_byte_buffer_destroy(out);
    *initial_sent = 1;
    if (rc != 0)
        c->status = -1;
    return rc == 0 ? 0 : -1;
}

/* A bidirectional stream (ModelStreamInfer): authenticated once, then each request
 * message answered in order until the client half-closes, the stream idles past
 * --grpc-stream-idle-seconds or fails. At most half the threads serve streams at once,
 * so unary calls always have threads. */
static void serve_stream(struct grpc_worker *w, grpc_call *call, const struct gj_grpc_method *m,
                         const grpc_call_details *details, const grpc_metadata_array *md)
{
    double t0 = now_s();
    struct gj_grpc_server *g = w->g;
    struct gj_grpc_call c = { .srv = g->srv, .status = GJ_GRPC_OK };
    int initial_sent = 0;
    if (atomic_fetch_add(&g->streams, 1) >= g->max_streams)
        gj_grpc_fail(&c, GJ_GRPC_RESOURCE_EXHAUSTED, "%d streams are open, this server's most: retry later",
                     g->max_streams);
    else
        authenticate(g, call, md, &c);
    int counted = tenant_admit(g, &c);
    while (c.status == GJ_GRPC_OK && stream_message(w, call, m, details, &c, &initial_sent) == 0)
        ;
    if (c.status != -1)   /* -1: the call is gone (cancelled, or cut for idleness) */
        answer(w, call, &c, initial_sent);
    if (counted)
        tenant_give(g, c.who.tenant_id);
    atomic_fetch_sub(&g->streams, 1);
    count_call(m, c.status == -1 ? GJ_GRPC_CANCELLED : c.status, t0, 0);
}

static void serve_call(struct grpc_worker *w, grpc_call *call, const grpc_call_details *details,
                       const grpc_metadata_array *md)
{
    struct gj_grpc_server *g = w->g;
    const struct gj_grpc_method *m = find_method(g->methods, details->method);
    if (m && m->streaming) {
        serve_stream(w, call, m, details, md);
        return;
    }
    grpc_byte_buffer *msg = NULL;
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &msg;
    /* the request message must arrive within --header-timeout-seconds, as an HTTPS request's
     * head: the core checks a message's size only once it has all of it, so a client that
     * declares more than it sends would hold this thread */
    if (run_ops_within(w, call, &op, 1, g->srv->cfg.header_timeout_seconds) != 0) {   /* too large, late, gone */
        if (msg)
            grpc_byte_buffer_destroy(msg);
        return;
    }
    struct gj_grpc_call c = { .srv = g->srv, .status = GJ_GRPC_OK };
    double t0 = now_s();
    w->cancelled = 0;
    c.timeout_us = deadline_left_us(details->deadline);
    uint8_t *block = NULL;
    int have = message_bytes(msg, m, &block, &c.req, &c.req_len) == 0;
    if (msg)
        grpc_byte_buffer_destroy(msg);
    if (!m)
        gj_grpc_fail(&c, GJ_GRPC_UNIMPLEMENTED, "this server does not serve that method");
    else if (!have)
        gj_grpc_fail(&c, GJ_GRPC_INVALID_ARGUMENT, "the call carries no request message");
    else if (m->access != GJ_GRPC_OPEN)
        authenticate(g, call, md, &c);
    if (c.status == GJ_GRPC_OK && m->access == GJ_GRPC_ADMIN && !c.who.is_admin)
        gj_grpc_fail(&c, GJ_GRPC_PERMISSION_DENIED, "this operation needs an admin key");
    int counted = tenant_admit(g, &c);
    if (c.status == GJ_GRPC_OK) {
        if (watch_close(w, call) == 0) {
            c.cancelled = call_cancelled;
            c.cancel_arg = w;
        }
        m->fn(&c);
    }
    if (!call_cancelled(w))
        answer(w, call, &c, 0);
    wait_close(w);
    if (counted)
        tenant_give(g, c.who.tenant_id);
    count_call(m, c.status, t0, c.req_len);
    free(block);
    free(c.resp);
}

static void *worker_main(void *arg)
{
    struct grpc_worker *w = arg;
    for (;;) {
        grpc_call *call = NULL;
        grpc_call_details details;
        grpc_metadata_array md;
        grpc_call_details_init(&details);
        grpc_metadata_array_init(&md);
        int got = grpc_server_request_call(w->g->server, &call, &details, &md, w->cq, w->cq, w) == GRPC_CALL_OK;
        if (got) {
            grpc_event ev = grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
            got = ev.type == GRPC_OP_COMPLETE && ev.success;   /* 0: the server is shutting down */
        }
        if (got)
            serve_call(w, call, &details, &md);
        if (call)
            grpc_call_unref(call);
        grpc_call_details_destroy(&details);
        grpc_metadata_array_destroy(&md);
        if (!got)
            return NULL;
    }
}

/* ---- the listener ------------------------------------------------------------------------- */

static grpc_server_credentials *credentials(const struct gj_config *cfg, const char *cert, const char *key)
{
    if (cfg->grpc_insecure)
        return grpc_insecure_server_credentials_create();
    char *ca = NULL;
    size_t ca_len = 0;
    if (cfg->tls_client_ca[0] && gj_read_file(cfg->tls_client_ca, CLIENT_CA_MAX_BYTES, &ca, &ca_len) != 0) {
        gj_log_error(COMPONENT, "--tls-client-ca: cannot read %s", cfg->tls_client_ca);
        return NULL;
    }
    grpc_ssl_pem_key_cert_pair pair = { key, cert };
    grpc_server_credentials *creds = grpc_ssl_server_credentials_create_ex(
        ca, &pair, 1, ca ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
        NULL);
    free(ca);
    return creds;
}

static grpc_arg int_arg(const char *key, int value)
{
    grpc_arg a;
    memset(&a, 0, sizeof a);
    a.type = GRPC_ARG_INTEGER;
    a.key = (char *)key;
    a.value.integer = value;
    return a;
}

/* The core's bounds, as the HTTPS listener's: message size, streams per connection, the
 * time to finish the TLS handshake (--header-timeout-seconds) and an idle connection's
 * life (--http-idle-seconds: closed with GOAWAY when it has no call that long).
 * The transport keeps the core's defaults, as Triton's server does (it sets only the message
 * size, keepalive and SO_REUSEPORT): larger HTTP/2 frames (grpc.http2.max_frame_size 1 MiB),
 * a fixed 8 MiB window without BDP pings, and 1 MiB TCP read chunks changed the server's CPU
 * per inference by less than the noise of A/B runs (±5 %) at batch 1 and 8 (issue 23, 2026-11-29);
 * grpc.tsi.max_frame_size does nothing for TLS (OpenSSL's records stay 16 KiB). */
static grpc_server *create_server(const struct gj_config *cfg)
{
    grpc_arg args[] = {
        int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, (int)cfg->grpc_max_message),
        int_arg(GRPC_ARG_MAX_CONCURRENT_STREAMS, MAX_STREAMS_PER_CONNECTION),
        int_arg(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, cfg->header_timeout_seconds * 1000),
        int_arg(GRPC_ARG_MAX_CONNECTION_IDLE_MS, cfg->http_idle_seconds * 1000),
    };
    grpc_channel_args ca = { sizeof args / sizeof args[0], args };
    return grpc_server_create(&ca, NULL);
}

/* Binds the port. 0, or -1 logged. */
static int bind_port(struct gj_grpc_server *g, const char *cert, const char *key)
{
    const struct gj_config *cfg = &g->srv->cfg;
    char addr[300];
    snprintf(addr, sizeof addr, strchr(cfg->grpc_host, ':') ? "[%s]:%d" : "%s:%d", cfg->grpc_host, cfg->grpc_port);
    grpc_server_credentials *creds = credentials(cfg, cert, key);
    if (!creds)
        return -1;
    int port = grpc_server_add_http2_port(g->server, addr, creds);
    grpc_server_credentials_release(creds);
    if (port <= 0) {
        gj_log_error(COMPONENT, "--grpc-listen: cannot listen on %s", addr);
        return -1;
    }
    gj_log_info(COMPONENT, "gRPC (Triton's GRPCInferenceService) on %s://%s (client certificates: %s)",
                cfg->grpc_insecure ? "http" : "https", addr, cfg->tls_client_ca[0] ? cfg->tls_client_ca : "off");
    return 0;
}

/* The core reads each message into buffers it takes from malloc and frees once the message
 * is handed over; at glibc's defaults the threads' arenas give that memory back to the
 * kernel each time, so every 2 MiB message faulted its pages in anew (about 600 faults per
 * batch-8 request, none over HTTP: BENCHMARKS.md). Keeping up to KEEP_BYTES at the top of
 * an arena, and taking allocations up to it from the arenas, stops that; bigger ones are
 * mapped and unmapped as before. Process-wide, set once gRPC serves. */
#define KEEP_BYTES (16 << 20)
static void keep_freed_memory(void)
{
    if (mallopt(M_MMAP_THRESHOLD, KEEP_BYTES) != 1 || mallopt(M_TRIM_THRESHOLD, KEEP_BYTES) != 1)
        gj_log_warn(COMPONENT, "cannot set malloc's thresholds: large messages fault their pages in anew");
}

struct gj_grpc_server *gj_grpc_start(struct gj_server *srv, const struct gj_grpc_methods *methods,
                                     const char *cert_pem, const char *key_pem)
{
    if (!srv->cfg.grpc_insecure && (!cert_pem || !key_pem)) {
        gj_log_error(COMPONENT, "--grpc-listen needs the server's certificate (or --grpc-insecure)");
        return NULL;
    }
    struct gj_grpc_server *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    keep_freed_memory();
    grpc_init();
    gpr_set_log_function(core_log);
    g->srv = srv;
    g->methods = methods;
    g->n_workers = srv->cfg.grpc_threads > 0 ? srv->cfg.grpc_threads : 1;
    g->max_streams = g->n_workers / 2 > 0 ? g->n_workers / 2 : 1;
    g->max_per_tenant = srv->cfg.grpc_calls_per_tenant > 0 ? srv->cfg.grpc_calls_per_tenant
                                                           : g->n_workers - g->n_workers / 4;
    pthread_mutex_init(&g->tenants_lock, NULL);
    g->tenants = calloc((size_t)g->n_workers, sizeof *g->tenants);
    g->workers = calloc((size_t)g->n_workers, sizeof *g->workers);
    g->server = create_server(&srv->cfg);
    g->shutdown_cq = grpc_completion_queue_create_for_next(NULL);
    if (!g->workers || !g->tenants || !g->server)
        goto fail;
    grpc_server_register_completion_queue(g->server, g->shutdown_cq, NULL);
    for (int i = 0; i < g->n_workers; i++) {
        g->workers[i].g = g;
        g->workers[i].cq = grpc_completion_queue_create_for_next(NULL);
        grpc_server_register_completion_queue(g->server, g->workers[i].cq, NULL);
    }
    if (bind_port(g, cert_pem, key_pem) != 0)
        goto fail;
    grpc_server_start(g->server);
    g->started = 1;
    for (int i = 0; i < g->n_workers; i++) {
        if (pthread_create(&g->workers[i].thread, NULL, worker_main, &g->workers[i]) != 0) {
            gj_log_error(COMPONENT, "cannot start a gRPC thread");
            gj_grpc_stop(g, 0);
            return NULL;
        }
        g->workers[i].started = 1;
    }
    return g;
fail:
    gj_grpc_stop(g, 0);
    return NULL;
}

static void drain_and_destroy(grpc_completion_queue *cq)
{
    if (!cq)
        return;
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
}

void gj_grpc_stop(struct gj_grpc_server *g, int grace_s)
{
    if (!g)
        return;
    if (g->started) {
        grpc_server_shutdown_and_notify(g->server, g->shutdown_cq, g);
        gpr_timespec until = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_seconds(grace_s, GPR_TIMESPAN));
        if (grpc_completion_queue_next(g->shutdown_cq, until, NULL).type != GRPC_OP_COMPLETE) {
            grpc_server_cancel_all_calls(g->server);
            grpc_completion_queue_next(g->shutdown_cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        }
    }
    for (int i = 0; g->workers && i < g->n_workers; i++)
        if (g->workers[i].started)
            pthread_join(g->workers[i].thread, NULL);
    if (g->server)
        grpc_server_destroy(g->server);
    for (int i = 0; g->workers && i < g->n_workers; i++)
        drain_and_destroy(g->workers[i].cq);
    drain_and_destroy(g->shutdown_cq);
    free(g->workers);
    free(g->tenants);
    pthread_mutex_destroy(&g->tenants_lock);
    free(g);
    grpc_shutdown();
}
