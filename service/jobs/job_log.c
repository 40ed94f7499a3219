/*
 * job_log.c — a worker slot's log lines, gathered in memory and written in batches
 * (job_log.h; the table and its bounds: migration 0007).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>

#include "service/db/db.h"
#include "service/jobs/job_log.h"
#include "service/base/log.h"
#include "service/base/uuid.h"

#define COMPONENT "job-log"
#define PENDING_LINES_MAX 1000
#define PENDING_BYTES_MAX (256u << 10)

struct gj_job_log {
    pthread_mutex_t lock;
    char job_id[GJ_UUID_LEN + 1];
    int attempt;
    json_t *pending;           /* [[unix_ms, level, text], ...] */
    size_t pending_bytes;
    long long dropped;         /* lines past the memory bound, not reported yet */
};

static const char *const level_names[] = { "info", "warn", "error" };

struct gj_job_log *gj_job_log_new(void)
{
    struct gj_job_log *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->pending = json_array();
    if (!l->pending || pthread_mutex_init(&l->lock, NULL) != 0) {
        json_decref(l->pending);
        free(l);
        return NULL;
    }
    return l;
}

void gj_job_log_free(struct gj_job_log *l)
{
    if (!l)
        return;
    json_decref(l->pending);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

void gj_job_log_begin(struct gj_job_log *l, const char *job_id, int attempt)
{
    pthread_mutex_lock(&l->lock);
    snprintf(l->job_id, sizeof l->job_id, "%s", job_id);
    l->attempt = attempt;
    json_array_clear(l->pending);
    l->pending_bytes = 0;
    l->dropped = 0;
    pthread_mutex_unlock(&l->lock);
}

/* The length of the UTF-8 sequence at p (n bytes left), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t len = p[0] < 0x80 ? 1 : (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || len > n || (len == 2 && p[0] < 0xc2))
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((len == 3 && p[0] == 0xe0 && p[1] < 0xa0) || (len == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
        (len == 4 && p[0] == 0xf0 && p[1] < 0x90) || (len == 4 && (p[0] > 0xf4 || (p[0] == 0xf4 && p[1] >= 0x90))))
        return 0;                      /* overlong, surrogate, beyond U+10FFFF */
    return len;
}

void gj_job_log_clean(const char *text, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)text;
    size_t n = strlen(text), o = 0;
    while (*p && cap > 0) {
        size_t len = utf8_len(p, n);
        if (o + (len ? len : 1) >= cap)
            break;                     /* cut at a character boundary */
        if (len == 0 || (len == 1 && (*p < 0x20 || *p == 0x7f))) {
            out[o++] = len == 0 ? '?' : ' ';
            len = 1;
        } else {
            memcpy(out + o, p, len);
            o += len;
        }
        p += len;
        n -= len;
    }
    if (cap > 0)
        out[o] = '\0';
}

static long long unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void gj_job_log_add(struct gj_job_log *l, enum gj_job_log_level level, const char *fmt, ...)
{
    char raw[GJ_JOB_LOG_LINE_MAX + 1], line[GJ_JOB_LOG_LINE_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    gj_job_log_clean(raw, line, sizeof line);
    size_t len = strlen(line);
    json_t *entry = json_pack("[I, s, s]", (json_int_t)unix_ms(), level_names[level], line);
    pthread_mutex_lock(&l->lock);
    if (!entry || !l->job_id[0] || json_array_size(l->pending) >= PENDING_LINES_MAX ||
        l->pending_bytes + len > PENDING_BYTES_MAX || json_array_append_new(l->pending, entry) != 0) {
        l->dropped += l->job_id[0] != 0;
        json_decref(entry);
    } else {
        l->pending_bytes += len;
    }
    pthread_mutex_unlock(&l->lock);
}

int gj_job_log_pending(struct gj_job_log *l)
{
    pthread_mutex_lock(&l->lock);
    int n = json_array_size(l->pending) > 0 || l->dropped > 0;
    pthread_mutex_unlock(&l->lock);
    return n;
}

/* 1 taken, 0 nothing to write, -1 out of memory (nothing taken). */
static int take_batch(struct gj_job_log *l, struct gj_job_log_batch *b)
{
    pthread_mutex_lock(&l->lock);
    int rc = 0;
    if (l->job_id[0] && (json_array_size(l->pending) > 0 || l->dropped > 0)) {
        b->entries = json_dumps(l->pending, JSON_COMPACT);
        rc = b->entries ? 1 : -1;
    }
    if (rc == 1) {
        snprintf(b->job_id, sizeof b->job_id, "%s", l->job_id);
        snprintf(b->attempt, sizeof b->attempt, "%d", l->attempt);
        snprintf(b->dropped, sizeof b->dropped, "%lld", l->dropped);
        json_array_clear(l->pending);
        l->pending_bytes = 0;
        l->dropped = 0;
        b->params[0] = b->job_id;
        b->params[1] = b->attempt;
        b->params[2] = b->entries;
        b->params[3] = b->dropped;
    }
    pthread_mutex_unlock(&l->lock);
    return rc;
}

/* A batch that could not be written waits again, before what came since (bounded). */
static void put_back(struct gj_job_log *l, const struct gj_job_log_batch *b)
{
    json_t *again = json_loads(b->entries, 0, NULL);
    pthread_mutex_lock(&l->lock);
    if (strcmp(l->job_id, b->job_id) == 0) {
        l->dropped += strtoll(b->dropped, NULL, 10);
        if (again && json_array_extend(again, l->pending) == 0) {
            while (json_array_size(again) > PENDING_LINES_MAX) {
                json_array_remove(again, json_array_size(again) - 1);
                l->dropped++;
            }
            json_decref(l->pending);
            l->pending = json_incref(again);
            l->pending_bytes = 0;
            for (size_t i = 0; i < json_array_size(again); i++)
                l->pending_bytes += strlen(json_string_value(json_array_get(json_array_get(again, i), 2)));
        }
    }
    pthread_mutex_unlock(&l->lock);
    json_decref(again);
}

int gj_job_log_take(struct gj_job_log *l, struct gj_job_log_batch *b)
{
    memset(b, 0, sizeof *b);
    return take_batch(l, b);
}

void gj_job_log_settle(struct gj_job_log *l, struct gj_job_log_batch *b, int written)
{
    if (!b->entries)
        return;
    if (!written)
        put_back(l, b);
    free(b->entries);
    b->entries = NULL;
}

int gj_job_log_flush(struct gj_job_log *l, PGconn *conn)
{
    struct gj_job_log_batch b = { 0 };
    int rc = take_batch(l, &b);
    if (rc <= 0)
        return rc;
    PGresult *res = gj_db_exec_prepared(conn, GJ_JOB_LOG_APPEND_NAME, GJ_JOB_LOG_APPEND_SQL, 4, b.params, NULL);
    PQclear(res);
    if (!res) {
        gj_log_warn(COMPONENT, "job %s: log lines not written yet (database error); kept for the next try", b.job_id);
        put_back(l, &b);
        rc = -1;
    } else {
        rc = 0;
    }
    free(b.entries);
    return rc;
}
