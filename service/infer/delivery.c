/*
 * delivery.c — each Structured Report of a succeeded `infer` job sent by STOW-RS to
 * --results-dicomweb-url (infer.h), retried until the PACS takes it.
 *
 * The success transaction records a pending delivery beside the report's instance
 * (migrations/0011_report_deliveries.sql), so a report whose job succeeded is never
 * forgotten, across restarts and replicas. One thread per replica claims the due rows
 * one at a time (SKIP LOCKED, next_attempt_at moved past an attempt's time limit, so a
 * replica that dies mid-attempt leaves the row to be tried again), reads the report from
 * its blob and POSTs it as multipart/related; type="application/dicom" to URL/studies
 * with libcurl: any 2xx delivers it; anything else (refused connection, 5xx, 4xx) leaves
 * it pending for the next try, the delay doubling from --results-dicomweb-retry-ms up to
 * 5 minutes. The job's events say when a report was delivered, and when an attempt
 * failed (the 1st, 2nd, 4th, 8th, ... failure: a PACS down for a day does not fill the
 * job's history). Nothing of the report, and not the auth header, is logged.
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/jobs/job_store.h"
#include "service/infer/infer.h"
#include "service/base/log.h"

#define COMPONENT "delivery"
#define DELIVERY_MAX_BYTES ((uint64_t)64 << 20)   /* a report is a few kilobytes */
#define ATTEMPT_SECONDS 120                        /* curl's limit; the claim outlasts it */
#define MAX_BACKOFF_MS 300000

static struct {
    struct gj_db_pool *db;
    char url[1100];            /* URL/studies */
    const char *auth;          /* header line, or NULL */
    const char *ca;            /* CA file, or NULL */
    int retry_ms;
    pthread_t thread;
    int running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int stop;
} g = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

int gj_infer_delivery_enabled(void)
{
    return g.running;
}

int gj_infer_delivery_add(PGconn *conn, const char *job_id, const char *blob_id, const char *output_name)
{
    const char *p[3] = { job_id, blob_id, output_name };
    return gj_db_cmd(conn, "INSERT INTO report_deliveries (job_id, blob_id, output_name) VALUES ($1::uuid, $2::uuid, $3)",
                     3, p);
}

/* ---- one attempt --------------------------------------------------------------------- */

struct claimed {
    char id[24], job_id[GJ_UUID_LEN + 1], blob_id[GJ_UUID_LEN + 1], output[256];
    int attempts;
};

/* The next due delivery, claimed: 1, 0 (none due), -1 (database error). */
static int claim(PGconn *conn, struct claimed *c)
{
    char lease[16];
    snprintf(lease, sizeof lease, "%d", ATTEMPT_SECONDS + 30);
    const char *p[1] = { lease };
    PGresult *res = gj_db_exec(conn,
                               "UPDATE report_deliveries d SET attempts = d.attempts + 1,"
                               " next_attempt_at = now() + $1::integer * interval '1 second'"
                               " WHERE d.id = (SELECT id FROM report_deliveries WHERE state = 'pending'"
                               "  AND next_attempt_at <= now() ORDER BY next_attempt_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
                               " RETURNING d.id, d.job_id, d.blob_id, d.output_name, d.attempts",
                               1, p, NULL);
    if (!res)
        return -1;
    int n = PQntuples(res);
    if (n == 1) {
        snprintf(c->id, sizeof c->id, "%s", PQgetvalue(res, 0, 0));
        snprintf(c->job_id, sizeof c->job_id, "%s", PQgetvalue(res, 0, 1));
        snprintf(c->blob_id, sizeof c->blob_id, "%s", PQgetvalue(res, 0, 2));
        snprintf(c->output, sizeof c->output, "%s", PQgetvalue(res, 0, 3));
        c->attempts = atoi(PQgetvalue(res, 0, 4));
    }
    PQclear(res);
    return n == 1;
}

/* The report's bytes (caller frees *data): 0, or -1 with why. */
static int read_report(PGconn *conn, const char *blob_id, uint8_t **data, size_t *len, char *why, size_t wn)
{
    struct gj_blob_info info;
    if (gj_blob_lookup(conn, NULL, blob_id, &info) != 1 || info.size > DELIVERY_MAX_BYTES) {
        snprintf(why, wn, "the report's blob is missing or too large");
        return -1;
    }
    *data = malloc(info.size ? info.size : 1);
    if (!*data || gj_db_begin(conn) != 0) {
        free(*data);
        snprintf(why, wn, "out of memory or no database");
        return -1;
    }
    struct gj_blob_reader *r = gj_blob_reader_open_blob(conn, &info, NULL);
    long got = r ? gj_blob_reader_read(r, 0, *data, info.size) : -1;
    if (r)
        gj_blob_reader_close(r);
    gj_db_rollback(conn);   /* read only */
    if (got != (long)info.size) {
        free(*data);
        snprintf(why, wn, "the report's blob could not be read");
        return -1;
    }
    *len = info.size;
    return 0;
}

/* An attempt in flight gives up when the server stops. */
static int stop_requested(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)ud;
    (void)a;
    (void)b;
    (void)c;
    (void)d;
    return atomic_load(&g.stop);
}

static size_t discard(char *ptr, size_t size, size_t n, void *ud)
{
    (void)ptr;
    (void)ud;
    return size * n;
}

/* POSTs the report; the HTTP status, or 0 with why (transport error). */
static long stow(const uint8_t *report, size_t len, char *why, size_t wn)
{
    uint8_t rnd[12];
    char boundary[40] = "gpujobd-";
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        snprintf(why, wn, "no random numbers");
        return 0;
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(boundary + 8 + 2 * i, 3, "%02x", rnd[i]);
    char head[128], tail[64], ctype[160];
    int hn = snprintf(head, sizeof head, "--%s\r\nContent-Type: application/dicom\r\n\r\n", boundary);
    int tn = snprintf(tail, sizeof tail, "\r\n--%s--\r\n", boundary);
    snprintf(ctype, sizeof ctype, "Content-Type: multipart/related; type=\"application/dicom\"; boundary=%s", boundary);
    size_t total = (size_t)hn + len + (size_t)tn;
    char *body = malloc(total);
    CURL *curl = curl_easy_init();
    if (!body || !curl) {
        free(body);
        if (curl)
            curl_easy_cleanup(curl);
        snprintf(why, wn, "out of memory");
        return 0;
    }
    memcpy(body, head, (size_t)hn);
    memcpy(body + hn, report, len);
    memcpy(body + hn + len, tail, (size_t)tn);
    struct curl_slist *hdrs = curl_slist_append(NULL, ctype);
    hdrs = curl_slist_append(hdrs, "Accept: application/dicom+json");
    if (g.auth)
        hdrs = curl_slist_append(hdrs, g.auth);
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(curl, CURLOPT_URL, g.url);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)total);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, (long)ATTEMPT_SECONDS);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, stop_requested);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    if (g.ca)
        curl_easy_setopt(curl, CURLOPT_CAINFO, g.ca);
    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    else
        snprintf(why, wn, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(curl);
    free(body);
    return status;
}

/* Records the attempt's outcome, and an event on the job when it says something new. */
static void record(PGconn *conn, const struct claimed *c, long status, const char *why)
{
    char st[16], backoff[24], attempts[16];
    snprintf(st, sizeof st, "%ld", status);
    snprintf(attempts, sizeof attempts, "%d", c->attempts);
    double ms = (double)g.retry_ms;
    for (int i = 1; i < c->attempts && ms < MAX_BACKOFF_MS; i++)
        ms *= 2;
    snprintf(backoff, sizeof backoff, "%.0f", ms < MAX_BACKOFF_MS ? ms : MAX_BACKOFF_MS);
    int ok = status >= 200 && status < 300;
    int rc;
    if (ok) {
        const char *p[2] = { c->id, st };
        rc = gj_db_cmd(conn, "UPDATE report_deliveries SET state = 'delivered', delivered_at = now(),"
                             " last_status = $2::integer, last_error = NULL WHERE id = $1::bigint", 2, p);
    } else {
        const char *p[4] = { c->id, status ? st : NULL, why, backoff };
        rc = gj_db_cmd(conn, "UPDATE report_deliveries SET last_status = $2::integer, last_error = $3,"
                             " next_attempt_at = now() + $4::double precision * interval '1 millisecond'"
                             " WHERE id = $1::bigint", 4, p);
    }
    char msg[600];
    if (ok)
        snprintf(msg, sizeof msg, "report %s delivered to the results PACS (HTTP %ld, attempt %d)", c->output, status,
                 c->attempts);
    else
        snprintf(msg, sizeof msg, "report %s not delivered yet (attempt %d: %s); next try in %s ms", c->output,
                 c->attempts, why, backoff);
    int tell = ok || (c->attempts & (c->attempts - 1)) == 0;
    if (rc == 0 && tell)
        rc = gj_job_note(conn, c->job_id, msg);
    if (ok)
        gj_log_info(COMPONENT, "job %s: report %s delivered (HTTP %ld, attempt %d)", c->job_id, c->output, status,
                    c->attempts);
    else
        gj_log_warn(COMPONENT, "job %s: report %s not delivered (attempt %d: %s)", c->job_id, c->output, c->attempts,
                    why);
    if (rc != 0)
        gj_log_error(COMPONENT, "job %s: the delivery's outcome was not recorded; it will be tried again", c->job_id);
}

/* One due delivery attempted: 1, 0 when none is due, -1 on a database error. */
static int deliver_one(void)
{
    PGconn *conn = gj_db_acquire(g.db, 5000);
    if (!conn)
        return -1;
    struct claimed c;
    int got = claim(conn, &c);
    if (got != 1) {
        gj_db_release(g.db, conn);
        return got;
    }
    uint8_t *data = NULL;
    size_t len = 0;
    char why[CURL_ERROR_SIZE + 64] = "";
    long status = 0;
    if (read_report(conn, c.blob_id, &data, &len, why, sizeof why) == 0) {
        gj_db_release(g.db, conn);   /* not held through the HTTP exchange */
        status = stow(data, len, why, sizeof why);
        free(data);
        conn = gj_db_acquire(g.db, 30000);
        if (!conn)
            return -1;   /* the claim runs out; tried again then */
    }
    if (status && (status < 200 || status >= 300))
        snprintf(why, sizeof why, "HTTP %ld", status);
    record(conn, &c, status, why);
    gj_db_release(g.db, conn);
    return 1;
}

/* ---- the thread ---------------------------------------------------------------------- */

static void *delivery_main(void *arg)
{
    (void)arg;
    long idle_ms = g.retry_ms < 1000 ? g.retry_ms : 1000;
    pthread_mutex_lock(&g.mu);
    while (!g.stop) {
        pthread_mutex_unlock(&g.mu);
        int rc = deliver_one();
        pthread_mutex_lock(&g.mu);
        if (rc == 1)
            continue;   /* more may be due */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long long ns = until.tv_nsec + (rc < 0 ? 5000 : idle_ms) * 1000000LL;
        until.tv_sec += (time_t)(ns / 1000000000LL);
        until.tv_nsec = (long)(ns % 1000000000LL);
        if (!g.stop)
            pthread_cond_timedwait(&g.cv, &g.mu, &until);
    }
    pthread_mutex_unlock(&g.mu);
    return NULL;
}

int gj_infer_delivery_start(const struct gj_server *srv)
{
    const struct gj_config *cfg = &srv->cfg;
    if (!cfg->results_dicomweb_url[0])
        return 0;
    size_t n = strlen(cfg->results_dicomweb_url);
    while (n > 0 && cfg->results_dicomweb_url[n - 1] == '/')
        n--;
    if (snprintf(g.url, sizeof g.url, "%.*s/studies", (int)n, cfg->results_dicomweb_url) >= (int)sizeof g.url) {
        gj_log_error(COMPONENT, "--results-dicomweb-url: too long");
        return -1;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        gj_log_error(COMPONENT, "libcurl could not be initialised");
        return -1;
    }
    g.db = srv->db;
    g.auth = cfg->results_dicomweb_auth[0] ? cfg->results_dicomweb_auth : NULL;
    g.ca = cfg->results_dicomweb_ca[0] ? cfg->results_dicomweb_ca : NULL;
    g.retry_ms = cfg->results_dicomweb_retry_ms;
    g.stop = 0;
    int rc = pthread_create(&g.thread, NULL, delivery_main, NULL);
    if (rc != 0) {
        gj_log_error(COMPONENT, "pthread_create: %s", strerror(rc));
        curl_global_cleanup();
        return -1;
    }
    g.running = 1;
    gj_log_info(COMPONENT, "Structured Reports are delivered by STOW-RS to --results-dicomweb-url%s",
                g.auth ? " (with the header of --results-dicomweb-auth-file)" : "");
    return 0;
}

void gj_infer_delivery_stop(void)
{
    if (!g.running)
        return;
    pthread_mutex_lock(&g.mu);
    g.stop = 1;
    pthread_cond_signal(&g.cv);
    pthread_mutex_unlock(&g.mu);
    pthread_join(g.thread, NULL);   /* an attempt in flight is abandoned (tried again later) */
    g.running = 0;
    curl_global_cleanup();
}
