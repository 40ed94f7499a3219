/*
 * routes_events.c — GET /v1/events: Server-Sent Events of the tenant's jobs (top-level ones,
 * as GET /v1/jobs lists them) as they change, so that a page keeps a live list on one
 * connection (browsers hold six per host over HTTP/1.1: one stream per job would not do).
 *
 *   event: job          data: the job's state, progress, message, device, times, error
 *   id: <updated_at>    a cursor: Last-Event-ID (which EventSource sends when it
 *                       reconnects) or ?since= resumes after it; without either the stream
 *                       starts now (read the list first, then open the stream)
 *   : keep-alive        every 15 s of quiet
 *
 * A job's updated_at is its writing transaction's start, so a transaction that commits
 * late can show a time before what the stream has passed: each read looks LOOKBACK
 * seconds behind its cursor and leaves out what it already sent (same job, same
 * updated_at). Running jobs' heartbeats move updated_at too: they arrive as events with
 * the same state. Deleted jobs are not reported (the page that deletes one knows).
 * Cut off from the database, it says so and reads nothing until it answers again
 * (stream_outage.h). Every AUTH_RECHECK_S seconds the stream checks that its key (and its
 * session, when it came with the cookie) still holds, and ends when not. Between reads it is parked
 * (http_park.h), holding no event-loop thread: it reads again every POLL_S seconds (it waits
 * on no single job, so no job's notification resumes it), and the park ends it when its key
 * is revoked or the server stops.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/db/db.h"
#include "service/http/http_park.h"
#include "service/jobs/job_store.h"
#include "service/portal/portal.h"
#include "service/auth/session.h"
#include "service/http/stream_outage.h"
#include "service/base/text_buf.h"

#define LOOKBACK "30 seconds"
#define BATCH 200            /* jobs after the cursor per read */
#define STRAGGLERS 500       /* jobs of the look-back per read */
#define SENT_MAX 4096
#define KEEPALIVE_S 15.0
#define AUTH_RECHECK_S 30.0
#define POLL_S 1.0
#define TS(c) "to_char((" c ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

struct sent {                    /* a job and the updated_at it was last sent with */
    char id[GJ_UUID_LEN + 1];
    char at[32];
};

struct stream {
    struct gj_park_entry park;
    struct gj_server *srv;
    char tenant_id[GJ_UUID_LEN + 1];
    char key_id[GJ_UUID_LEN + 1];
    char token[GJ_SESSION_TOKEN_LEN + 1];   /* "" when signed with a key */
    char cursor[32];                        /* updated_at of the newest job sent */
    struct sent *sent;
    size_t n_sent;
    char *buf;
    size_t len, off, cap;
    int done;
    struct gj_stream_outage outage;
    double keepalive_at, auth_at;           /* gj_park_now() seconds */
};

static int append(struct stream *s, const char *text)
{
    return gj_text_append(&s->buf, &s->len, &s->cap, text, strlen(text));
}

static int already_sent(const struct stream *s, const char *id, const char *at)
{
    for (size_t i = 0; i < s->n_sent; i++)
        if (strcmp(s->sent[i].id, id) == 0)
            return strcmp(s->sent[i].at, at) == 0;
    return 0;
}

/* Remembers id at at; entries older than the look-back of cursor go first. */
static void remember(struct stream *s, const char *id, const char *at, const char *horizon)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n_sent; i++)
        if (strcmp(s->sent[i].id, id) != 0 && strcmp(s->sent[i].at, horizon) >= 0)
            s->sent[k++] = s->sent[i];
    s->n_sent = k;
    if (s->n_sent == SENT_MAX)       /* a burst wider than the table: the oldest goes */
        memmove(s->sent, s->sent + 1, --s->n_sent * sizeof *s->sent);
    snprintf(s->sent[s->n_sent].id, sizeof s->sent[0].id, "%s", id);
    snprintf(s->sent[s->n_sent].at, sizeof s->sent[0].at, "%s", at);
    s->n_sent++;
}

enum { C_ID = GJ_JC_ID, C_KIND = GJ_JC_KIND, C_STATE = GJ_JC_STATE, C_PROG = GJ_JC_PROGRESS, C_MSG = GJ_JC_MESSAGE,
       C_DEV = GJ_JC_DEVICE, C_ERR = GJ_JC_ERROR, C_CREATED = GJ_JC_CREATED, C_STARTED = GJ_JC_STARTED,
       C_FINISHED = GJ_JC_FINISHED, C_UPDATED = GJ_JC_UPDATED, C_CANCEL = GJ_JC_CANCEL, C_HORIZON = GJ_JC_HORIZON };

static json_t *text_or_null(PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? json_null() : json_string(PQgetvalue(res, row, col));
}

static json_t *job_json(PGresult *res, int i)
{
    json_t *err = PQgetisnull(res, i, C_ERR) ? NULL : json_loads(PQgetvalue(res, i, C_ERR), 0, NULL);
    return json_pack("{s:o, s:o, s:o, s:f, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "id", text_or_null(res, i, C_ID),
                     "kind", text_or_null(res, i, C_KIND), "state", text_or_null(res, i, C_STATE), "progress",
                     strtod(PQgetvalue(res, i, C_PROG), NULL), "message", text_or_null(res, i, C_MSG), "device",
                     text_or_null(res, i, C_DEV), "error", err ? err : json_null(), "created_at",
                     text_or_null(res, i, C_CREATED), "started_at", text_or_null(res, i, C_STARTED),
                     "finished_at", text_or_null(res, i, C_FINISHED), "updated_at",
                     text_or_null(res, i, C_UPDATED), "cancel_requested",
                     strcmp(PQgetvalue(res, i, C_CANCEL), "t") == 0);
}

/* One event per row not sent yet. */
static void queue_rows(struct stream *s, PGresult *res)
{
    for (int i = 0; i < PQntuples(res); i++) {
        const char *id = PQgetvalue(res, i, C_ID), *at = PQgetvalue(res, i, C_UPDATED);
        if (already_sent(s, id, at))
            continue;
        json_t *job = job_json(res, i);
        char *data = job ? json_dumps(job, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(job);
        if (!data)
            continue;
        if (strcmp(at, s->cursor) > 0)
            snprintf(s->cursor, sizeof s->cursor, "%s", at);
        char head[96];
        snprintf(head, sizeof head, "id: %s\nevent: job\ndata: ", s->cursor);
        append(s, head);
        append(s, data);
        append(s, "\n\n");
        free(data);
        remember(s, id, at, PQgetvalue(res, i, C_HORIZON));
    }
}

/* Reads the jobs changed after the cursor (the oldest BATCH first: a burst comes over a few
 * reads) and the late ones of the look-back before it (the newest STRAGGLERS). 1 events
 * queued, 0 none, -1 the database failed. */
static int fill(struct stream *s)
{
    PGconn *c = gj_db_acquire(s->srv->db, 0);   /* never wait on the pool: it would hold the thread */
    if (!c)
        return -1;
    size_t before = s->len;
    PGresult *res = gj_job_changes_read(c, s->tenant_id, s->cursor, LOOKBACK, BATCH, STRAGGLERS);
    gj_db_release(s->srv->db, c);
    if (!res)
        return -1;
    queue_rows(s, res);
    PQclear(res);
    return s->len > before;
}

/* 1 while the key (and the session) the stream was opened with still hold; 0 not; -1 the
 * database did not answer (the stream goes on). */
static int still_allowed(struct stream *s)
{
    PGconn *c = gj_db_acquire(s->srv->db, 0);
    if (!c)
        return -1;
    struct gj_principal who;
    int ok;
    if (s->token[0]) {
        ok = gj_session_verify(c, s->token, s->srv->cfg.session_idle_minutes, &who);
        ok = ok == 1 ? strcmp(who.key_id, s->key_id) == 0 : ok;
    } else {
        const char *p[1] = { s->key_id };
        PGresult *res = gj_db_exec(c, "SELECT 1 FROM api_keys WHERE id = $1::uuid AND revoked_at IS NULL", 1, p,
                                   NULL);
        ok = res ? PQntuples(res) == 1 : -1;
        PQclear(res);
    }
    gj_db_release(s->srv->db, c);
    return ok;
}

/* libmicrohttpd's content reader: what is queued, else what is new, else a keep-alive when
 * due, else park (return 0: called again once resumed). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct stream *s = cls;
    while (s->off >= s->len) {
        s->off = s->len = 0;
        if (gj_park_gone(&s->park))
            return MHD_CONTENT_READER_END_WITH_ERROR;   /* its client left while it was parked */
        if (s->done || gj_http_stopping(s->srv) || gj_park_revoked(&s->park))
            return MHD_CONTENT_READER_END_OF_STREAM;
        double now = gj_park_now();
        /* cut off from the database: say so, and read nothing until it answers again */
        int up = gj_stream_outage_check(&s->outage, s->srv->db, &s->buf, &s->len, &s->cap);
        if (up && now >= s->auth_at) {
            s->auth_at = now + AUTH_RECHECK_S;
            if (still_allowed(s) == 0)
                return MHD_CONTENT_READER_END_OF_STREAM;
        }
        gj_park_take_change(&s->park);
        if ((up && fill(s) > 0) || s->len > 0)
            break;
        if (now >= s->keepalive_at) {
            append(s, ": keep-alive\n\n");
            break;
        }
        int pr = gj_park_wait(&s->park, now + POLL_S < s->keepalive_at ? now + POLL_S : s->keepalive_at);
        if (pr == 0)
            return 0;
        if (pr < 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
    }
    s->keepalive_at = gj_park_now() + KEEPALIVE_S;
    size_t n = s->len - s->off < max ? s->len - s->off : max;
    memcpy(buf, s->buf + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    struct stream *s = cls;
    gj_park_leave(&s->park);
    explicit_bzero(s->token, sizeof s->token);
    free(s->sent);
    free(s->buf);
    free(s);
}

/* The start: Last-Event-ID, else ?since=, else the database's now. 0, or -1 answered. */
static int start_cursor(struct gj_req *r, struct stream *s)
{
    const char *since = gj_req_header(r, "Last-Event-ID");
    const char *field = "Last-Event-ID";
    if (!since || !*since) {
        since = gj_req_query(r, "since");
        field = "since";
    }
    if (since && !gj_is_timestamp(since)) {
        gj_problem(r, 400, field, "%s is an RFC 3339 timestamp (an event's id)", field);
        return -1;
    }
    PGconn *c = gj_req_db(r);
    const char *p[1] = { since };
    PGresult *res = c ? gj_db_exec(c, "SELECT " TS("coalesce($1::timestamptz, now())"), 1, p, NULL) : NULL;
    if (!res) {
        gj_respond_unavailable(r);
        return -1;
    }
    snprintf(s->cursor, sizeof s->cursor, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    gj_db_release(r->srv->db, gj_req_take_db(r));   /* the stream borrows one per read */
    return 0;
}

/* GET /v1/events */
static void events(struct gj_req *r)
{
    struct stream *s = calloc(1, sizeof *s);
    if (s)
        s->sent = calloc(SENT_MAX, sizeof *s->sent);
    if (!s || !s->sent) {
        if (s)
            stream_free(s);
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    s->srv = r->srv;
    snprintf(s->tenant_id, sizeof s->tenant_id, "%s", r->who.tenant_id);
    snprintf(s->key_id, sizeof s->key_id, "%s", r->who.key_id);
    if (!gj_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION) &&
        !gj_session_cookie_token(gj_req_header(r, MHD_HTTP_HEADER_COOKIE), s->token))
        s->token[0] = '\0';
    if (start_cursor(r, s) != 0) {
        stream_free(s);
        return;
    }
    s->keepalive_at = gj_park_now() + KEEPALIVE_S;
    s->auth_at = gj_park_now() + AUTH_RECHECK_S;
    gj_park_join(&s->park, r->conn, "", r->who.key_id);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 8192, stream_read, s, stream_free);
    if (!resp) {
        stream_free(s);
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    gj_respond(r, 200, resp, 0);
}

static const struct gj_route routes[] = {
    { "GET", "/v1/events", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, events, NULL },
};
const struct gj_route_table gj_routes_portal_events = { routes, sizeof routes / sizeof routes[0] };
