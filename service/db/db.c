/*
 * db.c — a fixed pool of libpq connections guarded by a mutex and a condition
 * variable, plus the small exec helpers every part of the service uses.
 *
 * Faults: a pool connection found broken (the server restarted or went away) is
 * re-established when it is next borrowed. After a failed attempt the pool is
 * "down": for a backoff (100 ms doubling to 2 s) no borrower tries again, so a
 * database that is gone costs one connect attempt per backoff, not one per
 * request, and borrowers fail at once (the API answers 503, /readyz says why).
 * A statement that fails because its connection broke, sent outside a
 * transaction on a pool connection, is sent once more on a fresh one: nothing of
 * a session is lost with the old connection, since pool users keep no session
 * state between statements (transaction-level locks only).
 *
 * Partitions: a database cut off by the network is silent, not gone: idle
 * connections look fine and a statement sent on one waits. TCP settings bound that
 * wait (gj_db_connect); while the pool is down no idle connection is trusted as it
 * looks (one borrower per backoff asks it within PING_MS, the others fail at once),
 * and gj_db_ping asks within a deadline of its own.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <libpq-events.h>

#include "service/db/db.h"
#include "service/base/log.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
#define PING_MS 2000

/* What a pool connection has prepared (gj_db_exec_prepared): names only, since a name
 * stands for one statement's text. Touched only by the connection's borrower, and by the
 * reset event (on the borrower's thread too), which empties it: a fresh session has none. */
#define MAX_PREPARED 64
struct conn_info {
    struct gj_db_pool *pool;
    const char *prepared[MAX_PREPARED];   /* static strings: the callers' names */
    unsigned char stale[MAX_PREPARED];    /* its plan's result no longer fits: prepare it anew */
    int n_prepared;
};

struct gj_db_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *url;
    int n;
    int read_reserve;          /* free connections a writer must leave */
    PGconn **conns;
    struct conn_info *info;    /* per connection, its libpq instance data */
    unsigned char *busy;
    /* Reconnection, guarded by mu. */
    int down;                  /* the last connect attempt failed */
    double down_since;         /* monotonic seconds */
    double retry_at;           /* no attempt before this */
    int backoff_ms;
    char last_error[256];      /* one line, of the last failed attempt */
};

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* libpq's message on one line of printable ASCII (it spans several, and may be
 * translated), without the trailing newline: fit for a log line or JSON. */
static void one_line(const char *msg, char *out, size_t n)
{
    snprintf(out, n, "%s", msg ? msg : "");
    size_t len = strlen(out);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' '))
        out[--len] = '\0';
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)out[i];
        if (ch == '\n' || ch == '\t')
            out[i] = ' ';
        else if (ch < 0x20 || ch >= 0x7f)
            out[i] = '?';
    }
}

/* Pool connections carry their struct conn_info as libpq instance data (an event
 * procedure is what libpq hangs it on): gj_db_exec finds the pool there to retry on a
 * fresh connection, gj_db_exec_prepared what the session has prepared. A reset session
 * has prepared nothing. */
static int pool_conn_event(PGEventId id, void *evt, void *pass)
{
    (void)pass;
    if (id == PGEVT_CONNRESET) {
        struct conn_info *ci = PQinstanceData(((PGEventConnReset *)evt)->conn, pool_conn_event);
        if (ci)
            ci->n_prepared = 0;
    }
    return 1;
}

static struct conn_info *info_of(const PGconn *conn)
{
    return PQinstanceData(conn, pool_conn_event);
}

static struct gj_db_pool *pool_of(const PGconn *conn)
{
    struct conn_info *ci = info_of(conn);
    return ci ? ci->pool : NULL;
}

static void notice_to_log(void *arg, const char *message)
{
    (void)arg;
    size_t len = strlen(message);
    while (len > 0 && (message[len - 1] == '\n' || message[len - 1] == '\r'))
        len--;
    gj_log_debug("db", "server notice: %.*s", (int)len, message);
}

static const char *db_password;   /* gj_db_set_password */

void gj_db_set_password(const char *password)
{
    db_password = password && *password ? password : NULL;
}

PGconn *gj_db_connect(const char *url)
{
    if (!url || !*url) {
        gj_log_error("db", "no database URL");
        return NULL;
    }
    /* The URL is expanded where dbname stands: the keys before it are defaults the URL
     * may override (a server that does not answer fails a connect in 5 s; a TCP peer
     * that went silent, as across a network partition, is given up within about 6 s
     * of a statement sent and 10 s of an idle connection), those after it fallbacks;
     * a password given comes after the URL, so it wins over one in it. */
    const char *const keys[] = { "connect_timeout", "keepalives_idle", "keepalives_interval",
                                  "keepalives_count", "tcp_user_timeout", "dbname",
                                  "fallback_application_name", db_password ? "password" : NULL, NULL };
    const char *const vals[] = { "5", "5", "2", "3", "5000", url, "gpujobd", db_password, NULL };
    PGconn *conn = PQconnectdbParams(keys, vals, 1);
    if (!conn) {
        gj_log_error("db", "cannot allocate a connection");
        return NULL;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        char msg[512];
        one_line(PQerrorMessage(conn), msg, sizeof msg);
        gj_log_error("db", "cannot connect to the database: %s", msg);
        PQfinish(conn);
        return NULL;
    }
    PQsetNoticeProcessor(conn, notice_to_log, NULL);
    return conn;
}

struct gj_db_pool *gj_db_pool_open(const char *url, int n)
{
    if (n < 1 || n > 1000) {
        gj_log_error("db", "pool size %d out of range 1..1000", n);
        return NULL;
    }
    struct gj_db_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    pool->url = strdup(url ? url : "");
    pool->conns = calloc((size_t)n, sizeof *pool->conns);
    pool->info = calloc((size_t)n, sizeof *pool->info);
    pool->busy = calloc((size_t)n, 1);
    if (!pool->url || !pool->conns || !pool->info || !pool->busy) {
        gj_log_error("db", "out of memory for the connection pool");
        goto fail_alloc;
    }
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        goto fail_alloc;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int crc = pthread_cond_init(&pool->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (crc != 0)
        goto fail_alloc;
    if (pthread_mutex_init(&pool->mu, NULL) != 0) {
        pthread_cond_destroy(&pool->cv);
        goto fail_alloc;
    }
    pool->n = n;
    for (int i = 0; i < n; i++) {
        pool->conns[i] = gj_db_connect(pool->url);
        if (!pool->conns[i]) {
            gj_log_error("db", "opened %d of %d pool connections", i, n);
            gj_db_pool_close(pool);
            return NULL;
        }
        pool->info[i].pool = pool;
        if (!PQregisterEventProc(pool->conns[i], pool_conn_event, "gpujobd pool", NULL) ||
            !PQsetInstanceData(pool->conns[i], pool_conn_event, &pool->info[i])) {
            gj_log_error("db", "cannot mark pool connection %d", i);
            gj_db_pool_close(pool);
            return NULL;
        }
    }
    gj_log_debug("db", "connection pool of %d open", n);
    return pool;

fail_alloc:
    free(pool->busy);
    free(pool->info);
    free(pool->conns);
    free(pool->url);
    free(pool);
    return NULL;
}

void gj_db_pool_close(struct gj_db_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->mu);
    for (int i = 0; i < pool->n; i++)
        if (pool->busy[i])
            gj_log_warn("db", "pool closed while connection %d is borrowed", i);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->n; i++)
        if (pool->conns[i])
            PQfinish(pool->conns[i]);
    pthread_cond_destroy(&pool->cv);
    pthread_mutex_destroy(&pool->mu);
    free(pool->busy);
    free(pool->info);
    free(pool->conns);
    free(pool->url);
    free(pool);
}

/* An idle connection has nothing to read unless the server closed it (it sends
 * an error first) or a notification came in: look without blocking. */
static int idle_conn_looks_ok(PGconn *conn)
{
    if (PQstatus(conn) != CONNECTION_OK)
        return 0;
    int fd = PQsocket(conn);
    if (fd < 0)
        return 0;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int r = poll(&p, 1, 0);
    if (r < 0)
        return errno == EINTR;
    if (r == 0)
        return 1;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
        return 0;
    if (!PQconsumeInput(conn))
        return 0;
    PGnotify *n;
    while ((n = PQnotifies(conn)) != NULL)
        PQfreemem(n);
    return PQstatus(conn) == CONNECTION_OK;
}

/* The database found unreachable (a connect failed, or no answer in time): the first
 * failure is logged, the backoff grows with each next one. Called with mu held. */
static void mark_down_locked(struct gj_db_pool *pool, const char *why)
{
    double now = mono_now();
    if (!pool->down) {
        gj_log_error("db", "database unreachable: %s; reconnecting with backoff", why);
        pool->down = 1;
        pool->down_since = now;
        pool->backoff_ms = BACKOFF_MIN_MS;
    } else {
        pool->backoff_ms = pool->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : pool->backoff_ms * 2;
    }
    pool->retry_at = now + pool->backoff_ms / 1000.0;
    snprintf(pool->last_error, sizeof pool->last_error, "%s", why);
}

static void mark_up_locked(struct gj_db_pool *pool)
{
    if (pool->down)
        gj_log_info("db", "database connection restored after %.1f s", mono_now() - pool->down_since);
    pool->down = 0;
}

/* While the pool is down one borrower per backoff tries the database, the others fail at
 * once. 1 the pool is up; 0 it is down and this borrower makes the attempt; -1 down,
 * within the backoff. */
static int attempt_gate(struct gj_db_pool *pool)
{
    pthread_mutex_lock(&pool->mu);
    double now = mono_now();
    int gate = !pool->down ? 1 : now < pool->retry_at ? -1 : 0;
    if (gate == 0)
        pool->retry_at = now + pool->backoff_ms / 1000.0;
    pthread_mutex_unlock(&pool->mu);
    return gate;
}

/* Re-establishes a broken pool connection, unless the pool is down and its backoff
 * has not passed (then at once -1: the database is unreachable). The first failure
 * and the recovery are logged, the attempts between them not. 0 or -1. */
static int reconnect(struct gj_db_pool *pool, PGconn *conn)
{
    if (attempt_gate(pool) < 0)
        return -1;
    PQreset(conn);
    int ok = PQstatus(conn) == CONNECTION_OK;
    char msg[256] = "";
    if (!ok)
        one_line(PQerrorMessage(conn), msg, sizeof msg);
    pthread_mutex_lock(&pool->mu);
    if (ok)
        mark_up_locked(pool);
    else
        mark_down_locked(pool, msg);
    pthread_mutex_unlock(&pool->mu);
    if (ok)
        PQsetNoticeProcessor(conn, notice_to_log, NULL);
    return ok ? 0 : -1;
}

/* Waits until conn has a result to hand (1), or until the deadline or a broken
 * connection (0). */
static int wait_result(PGconn *conn, double deadline)
{
    while (PQisBusy(conn)) {
        int left_ms = (int)((deadline - mono_now()) * 1000.0);
        if (left_ms <= 0)
            return 0;
        struct pollfd p = { .fd = PQsocket(conn), .events = POLLIN };
        if (poll(&p, 1, left_ms) < 0 && errno != EINTR)
            return 0;
        if (!PQconsumeInput(conn))
            return 0;
    }
    return 1;
}

/* SELECT 1 answered on conn within ms: 1, else 0 with why. A connection that did not
 * answer is broken on purpose (its socket shut, what was pending dropped): it is never
 * used again as it is, and the next borrower resets it. */
static int ping_within(PGconn *conn, int ms, char *why, size_t n)
{
    double deadline = mono_now() + ms / 1000.0;
    if (PQstatus(conn) != CONNECTION_OK || !PQsendQuery(conn, "SELECT 1")) {
        one_line(PQerrorMessage(conn), why, n);
        return 0;
    }
    int ok = 0, in_time = 1;
    for (;;) {
        if (!wait_result(conn, deadline)) {
            in_time = PQstatus(conn) != CONNECTION_OK;   /* broken, not silent */
            break;
        }
        PGresult *res = PQgetResult(conn);
        if (!res)
            return ok;
        ok = PQresultStatus(res) == PGRES_TUPLES_OK;
        if (!ok)
            one_line(PQresultErrorMessage(res), why, n);
        PQclear(res);
    }
    if (in_time)
        one_line(PQerrorMessage(conn), why, n);
    else
        snprintf(why, n, "no answer within %.1f s", ms / 1000.0);
    int fd = PQsocket(conn);
    if (fd >= 0)
        shutdown(fd, SHUT_RDWR);
    PQconsumeInput(conn);   /* libpq sees the end: the connection is bad, not busy */
    PGresult *res;
    while ((res = PQgetResult(conn)) != NULL)
        PQclear(res);
    return 0;
}

/* An idle connection that looks fine may still lead into a silence. While the pool is
 * down it is not trusted as it looks: one borrower per backoff asks it (an answer: the
 * database is back), the others fail at once. 1 trusted, 0 not. */
static int trusted(struct gj_db_pool *pool, PGconn *conn)
{
    int gate = attempt_gate(pool);
    if (gate != 0)
        return gate > 0;
    char why[256] = "";
    int ok = ping_within(conn, PING_MS, why, sizeof why);
    pthread_mutex_lock(&pool->mu);
    if (ok)
        mark_up_locked(pool);
    else
        mark_down_locked(pool, why);
    pthread_mutex_unlock(&pool->mu);
    return ok;
}

int gj_db_ping(PGconn *conn, int timeout_ms)
{
    if (!conn)
        return 0;
    char why[256] = "";
    if (ping_within(conn, timeout_ms, why, sizeof why))
        return 1;
    struct gj_db_pool *pool = pool_of(conn);
    if (pool) {
        pthread_mutex_lock(&pool->mu);
        mark_down_locked(pool, why);
        pthread_mutex_unlock(&pool->mu);
    }
    return 0;
}

int gj_db_pool_health(struct gj_db_pool *pool, char *why, size_t n)
{
    if (!pool)
        return 0;
    pthread_mutex_lock(&pool->mu);
    int up = !pool->down;
    if (!up && why && n)
        snprintf(why, n, "unreachable for %.1f s, reconnecting: %s", mono_now() - pool->down_since,
                 pool->last_error);
    pthread_mutex_unlock(&pool->mu);
    return up;
}

void gj_db_pool_set_read_reserve(struct gj_db_pool *pool, int n)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->mu);
    pool->read_reserve = n < 0 ? 0 : n >= pool->n ? pool->n - 1 : n;
    pthread_mutex_unlock(&pool->mu);
}

/* A free slot this borrower may take, or -1: a writer leaves read_reserve free ones. */
static int free_slot_locked(struct gj_db_pool *pool, enum gj_db_use use)
{
    int slot = -1, free_n = 0;
    for (int i = 0; i < pool->n; i++)
        if (!pool->busy[i]) {
            free_n++;
            if (slot < 0)
                slot = i;
        }
    return use == GJ_DB_READ || free_n > pool->read_reserve ? slot : -1;
}

PGconn *gj_db_acquire(struct gj_db_pool *pool, int timeout_ms)
{
    return gj_db_acquire_for(pool, timeout_ms, GJ_DB_WRITE);
}

PGconn *gj_db_acquire_for(struct gj_db_pool *pool, int timeout_ms, enum gj_db_use use)
{
    if (!pool)
        return NULL;
    struct timespec deadline;
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += timeout_ms / 1000;
        deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&pool->mu);
    int slot = -1;
    for (;;) {
        slot = free_slot_locked(pool, use);
        if (slot >= 0)
            break;
        int rc = timeout_ms >= 0 ? pthread_cond_timedwait(&pool->cv, &pool->mu, &deadline)
                                 : pthread_cond_wait(&pool->cv, &pool->mu);
        if (rc == ETIMEDOUT) {
            pthread_mutex_unlock(&pool->mu);
            return NULL;
        }
    }
    pool->busy[slot] = 1;
    pthread_mutex_unlock(&pool->mu);

    PGconn *conn = pool->conns[slot];
    int usable = idle_conn_looks_ok(conn) ? trusted(pool, conn) : reconnect(pool, conn) == 0;
    if (!usable) {
        pthread_mutex_lock(&pool->mu);
        pool->busy[slot] = 0;
        pthread_cond_broadcast(&pool->cv);
        pthread_mutex_unlock(&pool->mu);
        return NULL;
    }
    return conn;
}

void gj_db_release(struct gj_db_pool *pool, PGconn *conn)
{
    if (!pool || !conn)
        return;
    int slot = -1;
    for (int i = 0; i < pool->n; i++)
        if (pool->conns[i] == conn) {
            slot = i;
            break;
        }
    if (slot < 0) {
        gj_log_error("db", "release of a connection that is not from this pool");
        return;
    }
    PGTransactionStatusType ts = PQtransactionStatus(conn);
    if (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR) {
        gj_log_warn("db", "connection returned inside a transaction; rolling back");
        gj_db_rollback(conn);
    } else if (ts == PQTRANS_ACTIVE) {
        /* A command still running: the connection cannot be reused as is. */
        gj_log_warn("db", "connection returned with a command in progress; resetting it");
        PQreset(conn);
    }
    pthread_mutex_lock(&pool->mu);
    pool->busy[slot] = 0;
    pthread_cond_broadcast(&pool->cv);   /* a waiting reader may take what a writer may not */
    pthread_mutex_unlock(&pool->mu);
}

static enum gj_log_level level_for_sqlstate(const char *st)
{
    /* Data exceptions (a client's value the database refused), integrity violations,
     * serialization failures, lock timeouts and cancels are outcomes callers handle;
     * the rest are errors of the service or the server. */
    if (st && (strncmp(st, "22", 2) == 0 || strncmp(st, "23", 2) == 0 || strncmp(st, "40", 2) == 0 || strcmp(st, "55P03") == 0 ||
               strcmp(st, "57014") == 0))
        return GJ_LOG_WARN;
    return GJ_LOG_ERROR;
}

/* Classes whose primary messages name no value of a statement or its parameters (data
 * exceptions (22) quote the input, syntax errors (42) the statement, raised errors (P0)
 * anything): their message is logged; other classes log their SQLSTATE only. */
static int message_is_safe(const char *st)
{
    static const char *const classes[] = { "08", "23", "40", "53", "55", "57", "58", "XX" };
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (strncmp(st, classes[i], 2) == 0)
            return 1;
    return 0;
}

/* The caller's file without the build's relative prefix ("../service/x.c:12" -> "service/x.c:12"). */
static const char *short_where(const char *where)
{
    while (strncmp(where, "../", 3) == 0)
        where += 3;
    return where;
}

static void log_failure(PGconn *conn, PGresult *res, const char *where, const char *st)
{
    char text[512] = "";
    if (message_is_safe(st)) {
        const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
        if (!msg || !*msg)
            msg = PQerrorMessage(conn);
        snprintf(text, sizeof text, ": %s", msg && *msg ? msg : "unknown error");
        size_t len = strlen(text);
        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
            text[--len] = '\0';
    }
    char line[640];
    snprintf(line, sizeof line, "query failed (SQLSTATE %s)%s", st, text);
    json_t *fields = json_pack("{s:s, s:s}", "sqlstate", st, "at", short_where(where));
    gj_log_fields(level_for_sqlstate(st), "db", line, fields);
}

static void drop_prepared(PGconn *conn, const char *name)
{
    char *id = PQescapeIdentifier(conn, name, strlen(name));
    char sql[200];
    if (id && snprintf(sql, sizeof sql, "DEALLOCATE %s", id) < (int)sizeof sql) {
        PGresult *res = PQexec(conn, sql);
        if (PQresultStatus(res) != PGRES_COMMAND_OK)
            gj_log_warn("db", "DEALLOCATE of a stale prepared statement failed");
        PQclear(res);
    }
    PQfreemem(id);
}

/* A statement whose plan no longer fits the schema (a migration changed what it returns:
 * 0A000 "cached plan must not change result type") or that the session lost (26000) is
 * prepared anew at its next use. 1 when res says so. */
static int mark_stale(PGconn *conn, const char *name, const PGresult *res)
{
    const char *code = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    struct conn_info *ci = name ? info_of(conn) : NULL;
    if (!ci || !code || (strcmp(code, "0A000") != 0 && strcmp(code, "26000") != 0))
        return 0;
    for (int i = 0; i < ci->n_prepared; i++)
        if (strcmp(ci->prepared[i], name) == 0)
            ci->stale[i] = 1;
    return 1;
}

/* Sends the statement once: by name where conn is a pool connection (prepared on its first
 * use there), else as text. A failed prepare is returned as the statement's failure. */
static PGresult *send_once(PGconn *conn, const char *name, const char *sql, int n, const char *const *params)
{
    struct conn_info *ci = name ? info_of(conn) : NULL;
    if (!ci)
        return PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
    int known = 0;
    for (int i = 0; i < ci->n_prepared && !known; i++) {
        if (strcmp(ci->prepared[i], name) != 0)
            continue;
        known = !ci->stale[i];
        if (!known) {   /* the session still has it: drop it before preparing it again */
            drop_prepared(conn, name);
            ci->prepared[i] = ci->prepared[--ci->n_prepared];
            ci->stale[i] = ci->stale[ci->n_prepared];
        }
        break;
    }
    if (!known) {
        if (ci->n_prepared == MAX_PREPARED)   /* more names than any caller has: run it as text */
            return PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
        PGresult *res = PQprepare(conn, name, sql, n, NULL);
        if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
            return res;
        PQclear(res);
        ci->stale[ci->n_prepared] = 0;
        ci->prepared[ci->n_prepared++] = name;   /* a session's, not a transaction's: kept on rollback */
    }
    return PQexecPrepared(conn, name, n, params, NULL, NULL, 0);
}

PGresult *gj_db_exec_at(const char *where, PGconn *conn, const char *sql, int n, const char *const *params,
                        char sqlstate[6])
{
    return gj_db_exec_prepared_at(where, conn, NULL, sql, n, params, sqlstate);
}

PGresult *gj_db_exec_prepared_at(const char *where, PGconn *conn, const char *name, const char *sql, int n,
                                 const char *const *params, char sqlstate[6])
{
    if (sqlstate)
        memcpy(sqlstate, "00000", 6);
    if (!conn) {
        if (sqlstate)
            memcpy(sqlstate, "08003", 6);
        gj_log_error("db", "query on no connection (at %s)", short_where(where));
        return NULL;
    }
    int idle = PQtransactionStatus(conn) == PQTRANS_IDLE;
    PGresult *res = send_once(conn, name, sql, n, params);
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    struct gj_db_pool *pool;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && idle && PQstatus(conn) == CONNECTION_BAD &&
        (pool = pool_of(conn)) != NULL && reconnect(pool, conn) == 0) {
        /* The connection broke (the server restarted) outside a transaction: once more. */
        gj_log_info("db", "connection lost; the statement is sent again on a fresh one");
        PQclear(res);
        res = send_once(conn, name, sql, n, params);
        st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    }
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && mark_stale(conn, name, res) && idle) {
        PQclear(res);   /* outside a transaction nothing was lost: once more, prepared anew */
        res = send_once(conn, name, sql, n, params);
        st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    }
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return res;
    const char *code = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    char buf[6] = "";
    if (code) {
        snprintf(buf, sizeof buf, "%s", code);
    } else if (PQstatus(conn) != CONNECTION_OK) {
        memcpy(buf, "08006", 6);   /* connection_failure */
    } else {
        memcpy(buf, "XX000", 6);
    }
    if (sqlstate)
        memcpy(sqlstate, buf, 6);
    log_failure(conn, res, where, buf);
    PQclear(res);
    return NULL;
}

int gj_db_cmd_at(const char *where, PGconn *conn, const char *sql, int n, const char *const *params)
{
    PGresult *res = gj_db_exec_at(where, conn, sql, n, params, NULL);
    if (!res)
        return -1;
    PQclear(res);
    return 0;
}

int gj_db_begin(PGconn *conn)
{
    return gj_db_cmd(conn, "BEGIN", 0, NULL);
}

int gj_db_commit(PGconn *conn)
{
    PGresult *res = gj_db_exec(conn, "COMMIT", 0, NULL, NULL);
    if (!res)
        return -1;
    /* COMMIT of a failed transaction "succeeds" as a ROLLBACK. */
    int ok = strcmp(PQcmdStatus(res), "COMMIT") == 0;
    PQclear(res);
    if (!ok) {
        gj_log_warn("db", "commit of a failed transaction rolled back");
        return -1;
    }
    return 0;
}

void gj_db_rollback(PGconn *conn)
{
    if (!conn)
        return;
    PGTransactionStatusType ts = PQtransactionStatus(conn);
    if (ts != PQTRANS_INTRANS && ts != PQTRANS_INERROR)
        return;
    PGresult *res = PQexec(conn, "ROLLBACK");
    if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
        gj_log_error("db", "rollback failed: %s", PQerrorMessage(conn));
    PQclear(res);
}

int gj_db_ok(PGconn *conn)
{
    if (!conn || PQstatus(conn) != CONNECTION_OK)
        return 0;
    PGresult *res = PQexecParams(conn, "SELECT 1", 0, NULL, NULL, NULL, NULL, 0);
    int ok = res && PQresultStatus(res) == PGRES_TUPLES_OK;
    PQclear(res);
    return ok;
}
