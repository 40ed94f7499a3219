/*
 * routes_log.c — GET /v1/jobs/{id}/log: a job's own log (job_log.h) as text/plain, one line
 * each: "<time, UTC> [attempt N] <level>: <text>".
 *
 *   ?after=N    lines after the N-th (lines are numbered from 1; a reader that has N lines
 *               resumes with after=N; the Gpujobd-Log-Seq header of a plain answer is the
 *               number of the last line in it)
 *   ?level=L    info (every line, the default), warn (warnings and errors), error
 *   ?follow=1   stays open and streams lines as the worker writes them (about once a second)
 *               until the job has ended and its last line is sent
 *
 * When the job's log went past its bound (10000 lines, 1 MiB) a last line says how many lines
 * were dropped. A CARMIN facade maps /stdout to this route and /stderr to ?level=warn.
 *
 * Follow mode is built like the events stream (routes_jobs.c): log_fill reads what is new and
 * never waits; between fills the stream is parked (http_park.h), holding no thread, until the
 * job changes (the log append notifies gpujobd_jobs), FOLLOW_POLL_S pass, its key is revoked,
 * its client closes the connection (then it ends at once: it may have nothing to write for
 * hours) or the server stops.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/db/db.h"
#include "service/http/http_park.h"
#include "service/http/http_server.h"
#include "service/jobs/job_store.h"
#include "service/base/text_buf.h"
#include "service/workflow/workflow.h"

#define PAGE_LINES 1000   /* = the LIMIT of read_lines */

struct log_stream {
    struct gj_server *srv;
    char job_id[GJ_UUID_LEN + 1];
    char tenant_id[GJ_UUID_LEN + 1];
    long long after;             /* the last line sent */
    int min_level;               /* 0 info, 1 warn, 2 error */
    char *buf;
    size_t len, off, cap;
    int done;
    struct gj_park_entry park;   /* follow mode only (joined) */
    int joined;
};

#define FOLLOW_POLL_S 5.0   /* a line missed by the notifications still arrives within this (each
                             * wake of each reader reads the database: a dozen readers polling
                             * every second kept half of them awake waiting for a connection on a
                             * loaded 2-core machine) */

static int append(struct log_stream *s, const char *text, size_t n)
{
    return gj_text_append(&s->buf, &s->len, &s->cap, text, n);
}

static int append_line(struct log_stream *s, PGresult *res, int row)
{
    const char *at = PQgetvalue(res, row, 1), *attempt = PQgetvalue(res, row, 2), *level = PQgetvalue(res, row, 3),
               *line = PQgetvalue(res, row, 4);
    char head[96];
    int n = snprintf(head, sizeof head, "%s [attempt %s] %s: ", at, attempt, level);
    if (append(s, head, (size_t)n) != 0 || append(s, line, strlen(line)) != 0 || append(s, "\n", 1) != 0)
        return -1;
    s->after = strtoll(PQgetvalue(res, row, 0), NULL, 10);
    return 0;
}

/* The job's state (public) and how many lines its log dropped: 1, 0 gone, -1 error. */
static int read_job(PGconn *c, struct log_stream *s, char state[16], long long *dropped)
{
    return gj_job_log_head(c, s->tenant_id, s->job_id, state, dropped);
}

/* The next page of lines. Returns the number read, or -1. */
static int read_lines(PGconn *c, struct log_stream *s)
{
    char after[24], level[4];
    snprintf(after, sizeof after, "%lld", s->after);
    snprintf(level, sizeof level, "%d", s->min_level);
    const char *p[3] = { s->job_id, after, level };
    PGresult *res = gj_db_exec(c, "SELECT seq, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
                                  " attempt, level, line FROM job_log WHERE job_id = $1::uuid AND seq > $2::int"
                                  " AND CASE level WHEN 'info' THEN 0 WHEN 'warn' THEN 1 ELSE 2 END >= $3::int"
                                  " ORDER BY seq LIMIT 1000",
                               3, p, NULL);
    if (!res)
        return -1;
    int n = PQntuples(res);
    for (int i = 0; i < n; i++)
        if (append_line(s, res, i) != 0) {
            PQclear(res);
            return -1;
        }
    PQclear(res);
    return n;
}

static int is_final(const char *state)
{
    return !strcmp(state, "succeeded") || !strcmp(state, "failed") || !strcmp(state, "canceled");
}

static int append_dropped(struct log_stream *s, long long dropped)
{
    char note[200];
    int n = snprintf(note, sizeof note, "[gpujobd: %lld more line(s) dropped: a job's log keeps at most 10000 lines "
                                        "and 1 MiB]\n", dropped);
    return append(s, note, (size_t)n);
}

/* Reads what is new (the job first, then its lines: a final state read here has every line
 * below, since the worker writes them before it records the end). 1 something was added,
 * 0 nothing, -1 database trouble. Sets done once the job has ended and all is sent. */
static int log_fill(struct log_stream *s)
{
    PGconn *c = gj_db_acquire(s->srv->db, 2000);
    if (!c)
        return -1;
    char state[16];
    long long dropped = 0;
    size_t before = s->len;
    int rc = read_job(c, s, state, &dropped), n = 0;
    if (rc > 0)
        n = read_lines(c, s);
    gj_db_release(s->srv->db, c);
    if (rc < 0 || n < 0)
        return -1;
    if (rc == 0 || (is_final(state) && n < PAGE_LINES)) {
        if (rc > 0 && dropped > 0 && append_dropped(s, dropped) != 0)
            return -1;
        s->done = 1;               /* ended (or deleted): nothing more will come */
    }
    return s->len > before;
}

static ssize_t log_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct log_stream *s = cls;
    while (s->off >= s->len) {
        s->off = s->len = 0;
        if (gj_park_gone(&s->park))
            return MHD_CONTENT_READER_END_WITH_ERROR;   /* its client left while it was parked */
        if (s->done || gj_http_stopping(s->srv) || gj_park_revoked(&s->park))
            return MHD_CONTENT_READER_END_OF_STREAM;
        gj_park_take_change(&s->park);
        if (log_fill(s) > 0)
            break;
        if (s->done)
            continue;
        int pr = gj_park_wait(&s->park, gj_park_now() + FOLLOW_POLL_S);
        if (pr == 0)
            return 0;                /* parked: resumed here when something happens */
        if (pr < 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = s->len - s->off < max ? s->len - s->off : max;
    memcpy(buf, s->buf + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

static void log_free(void *cls)
{
    struct log_stream *s = cls;
    if (s->joined)
        gj_park_leave(&s->park);
    free(s->buf);
    free(s);
}

/* ?after, ?level, ?follow into s. 0, or -1 answered. */
static int read_query(struct gj_req *r, struct log_stream *s, int *follow)
{
    const char *after = gj_req_query(r, "after"), *level = gj_req_query(r, "level"),
               *fol = gj_req_query(r, "follow");
    char *end = NULL;
    if (after && (!*after || (s->after = strtoll(after, &end, 10)) < 0 || *end || s->after > 1000000)) {
        gj_problem(r, 400, "after", "after is a line number (0 to 1000000)");
        return -1;
    }
    static const char *const levels[] = { "info", "warn", "error" };
    s->min_level = -1;
    for (int i = 0; i < 3; i++)
        if (!level || !strcmp(level, levels[i]))
            s->min_level = level ? i : 0;
    if (s->min_level < 0) {
        gj_problem(r, 400, "level", "level is info, warn or error");
        return -1;
    }
    *follow = fol && (!strcmp(fol, "1") || !strcmp(fol, "true"));
    if (fol && !*follow && strcmp(fol, "0") && strcmp(fol, "false")) {
        gj_problem(r, 400, "follow", "follow is 1 or 0");
        return -1;
    }
    return 0;
}

/* The whole log as it is now (at most 10000 lines and 1 MiB of text). */
static void respond_now(struct gj_req *r, struct log_stream *s)
{
    int rc;
    while ((rc = log_fill(s)) > 0 && !s->done)
        ;
    if (rc < 0) {
        log_free(s);
        gj_respond_unavailable(r);
        return;
    }
    char last[24];
    snprintf(last, sizeof last, "%lld", s->after);
    struct MHD_Response *resp = MHD_create_response_from_buffer(s->len, s->buf, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        log_free(s);
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    s->buf = NULL;
    uint64_t bytes = s->len;
    log_free(s);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    gj_http_user_bytes(resp, 0, NULL);   /* the job wrote it: read inline, never run */
    MHD_add_response_header(resp, "Gpujobd-Log-Seq", last);
    gj_respond(r, 200, resp, bytes);
}

static void respond_follow(struct gj_req *r, struct log_stream *s)
{
    gj_park_join(&s->park, r->conn, s->job_id, r->who.key_id);
    s->joined = 1;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, log_read, s, log_free);
    if (!resp) {
        log_free(s);
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    gj_http_user_bytes(resp, 0, NULL);   /* the job wrote it: read inline, never run */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    gj_respond(r, 200, resp, 0);
}

static void job_log(struct gj_req *r)
{
    struct log_stream *s = calloc(1, sizeof *s);
    int follow = 0;
    if (!s) {
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    s->srv = r->srv;
    snprintf(s->job_id, sizeof s->job_id, "%.36s", r->params[0]);
    snprintf(s->tenant_id, sizeof s->tenant_id, "%s", r->who.tenant_id);
    if (read_query(r, s, &follow) != 0) {
        log_free(s);
        return;
    }
    PGconn *c = gj_req_db(r);
    char state[16];
    long long dropped;
    int rc = c ? read_job(c, s, state, &dropped) : -1;
    if (c)
        gj_db_release(r->srv->db, gj_req_take_db(r));   /* the reads borrow one each */
    if (rc <= 0) {
        log_free(s);
        gj_respond_lookup_failed(r, rc);
        return;
    }
    if (follow)
        respond_follow(r, s);
    else
        respond_now(r, s);
}

static const struct gj_route log_routes[] = {
    { "GET", "/v1/jobs/{id}/log", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, job_log, NULL },
};
const struct gj_route_table gj_routes_job_log = { log_routes, sizeof log_routes / sizeof log_routes[0] };
