/*
 * http_conns.c — connection tracking for the header deadline, the open-files limit and
 * the connection gauges (http_conns.h).
 *
 * Each connection gets a track when MHD opens it (NOTIFY_STARTED, its socket context) and
 * loses it when MHD closes it (NOTIFY_CLOSED, which MHD calls before it closes the socket).
 * The sweeper shuts a socket down only under the tracker's lock and only while its track is
 * listed, so it never touches a descriptor that was closed and reused.
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "service/http/http_conns.h"
#include "service/base/log.h"

#define COMPONENT "http"
#define SWEEP_MS 250
/* TCP_INFO's times count the kernel's ticks (1-10 ms): data within this of an answer came
 * before it. */
#define TICK_SLACK_S 0.02
/* Descriptors the rest of the process may hold beside the connections: the database pool,
 * the LISTEN connection, job inputs and outputs, model files, the listening sockets. */
#define FD_RESERVE 1024

struct track {
    struct gj_conns *owner;
    MHD_socket fd;
    double since;                /* opened, its previous answer sent, or (kept alive) found
                                  * idle or its next request found begun */
    int waiting_header;          /* request line and headers not complete yet */
    int cut;
    int kept_alive;              /* answered a request: waiting for the next */
    double answered;             /* when its previous answer was sent */
    struct track *prev, *next;
};

struct gj_conns {
    char listener[16];
    double timeout;
    pthread_mutex_t lock;
    pthread_cond_t wake;         /* CLOCK_MONOTONIC; signalled to stop */
    pthread_t thread;
    int stop;
    struct track *head;
};

static atomic_long open_connections, waiting_headers;
static atomic_ulong header_cuts;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set_waiting(struct track *tr, int waiting)
{
    if (tr->waiting_header == waiting)
        return;
    tr->waiting_header = waiting;
    atomic_fetch_add(&waiting_headers, waiting ? 1 : -1);
}

/* When the kernel last received data on fd (TCP_INFO, to its clock tick), in now_s()'s
 * seconds; -1 where it cannot say (not TCP). */
static int last_data_at(MHD_socket fd, double now, double *at)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_last_data_recv) + sizeof ti.tcpi_last_data_recv)
        return -1;
    *at = now - ti.tcpi_last_data_recv / 1000.0;
    return 0;
}

/* A kept-alive connection past its deadline that has received nothing since its previous
 * answer is idle, not slow: its deadline starts again (MHD's idle timeout bounds it), so a
 * client that pauses between two calls (tritonclient reuses its connection and does not
 * retry a large request on one closed under it) is not cut. One whose next request has
 * begun is given one more header_timeout from when that is seen: a trickling header is cut
 * within twice the bound. 1 when tr is spared. */
static int spare_kept_alive(struct track *tr, double now)
{
    double at;
    if (!tr->kept_alive || last_data_at(tr->fd, now, &at) != 0)
        return 0;
    if (at > tr->answered + TICK_SLACK_S)
        tr->kept_alive = 0;      /* begun: the next deadline is final */
    tr->since = now;
    return 1;
}

/* Under the lock: shuts down the connections past their header deadline. */
static void sweep_locked(struct gj_conns *t)
{
    double now = now_s();
    for (struct track *tr = t->head; tr; tr = tr->next) {
        if (!tr->waiting_header || tr->cut || now - tr->since < t->timeout || spare_kept_alive(tr, now))
            continue;
        tr->cut = 1;
        atomic_fetch_add(&header_cuts, 1);
        if (shutdown(tr->fd, SHUT_RDWR) != 0 && errno != ENOTCONN)
            gj_log_warn(COMPONENT, "header deadline: shutdown: %s", strerror(errno));
        gj_log_debug(COMPONENT, "a %s connection sent no complete request header within %.0f s: closed",
                     t->listener, t->timeout);
    }
}

static void *sweeper_main(void *arg)
{
    struct gj_conns *t = arg;
    pthread_mutex_lock(&t->lock);
    while (!t->stop) {
        sweep_locked(t);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += SWEEP_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        int rc = pthread_cond_timedwait(&t->wake, &t->lock, &ts);
        if (rc && rc != ETIMEDOUT)
            gj_log_error(COMPONENT, "sweeper: pthread_cond_timedwait: %s", strerror(rc));
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

struct gj_conns *gj_conns_start(const char *listener, int header_timeout_seconds)
{
    struct gj_conns *t = calloc(1, sizeof *t);
    if (!t) {
        gj_log_error(COMPONENT, "out of memory");
        return NULL;
    }
    snprintf(t->listener, sizeof t->listener, "%s", listener);
    t->timeout = header_timeout_seconds;
    pthread_condattr_t attr;
    int rc = pthread_mutex_init(&t->lock, NULL);
    int rc2 = pthread_condattr_init(&attr);
    if (rc2 == 0) {
        rc2 = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        if (rc2 == 0)
            rc2 = pthread_cond_init(&t->wake, &attr);
        pthread_condattr_destroy(&attr);
    }
    int rc3 = rc || rc2 ? EINVAL : pthread_create(&t->thread, NULL, sweeper_main, t);
    if (rc || rc2 || rc3) {
        gj_log_error(COMPONENT, "cannot start the header-deadline sweeper: %s", strerror(rc ? rc : rc2 ? rc2 : rc3));
        if (!rc)
            pthread_mutex_destroy(&t->lock);
        if (!rc2)
            pthread_cond_destroy(&t->wake);
        free(t);
        return NULL;
    }
    return t;
}

void gj_conns_stop(struct gj_conns *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->lock);
    t->stop = 1;
    pthread_cond_broadcast(&t->wake);
    pthread_mutex_unlock(&t->lock);
    int rc = pthread_join(t->thread, NULL);
    if (rc)
        gj_log_error(COMPONENT, "sweeper: pthread_join: %s", strerror(rc));
    while (t->head) {            /* none once the daemon has stopped; freed regardless */
        struct track *tr = t->head;
        t->head = tr->next;
        free(tr);
    }
    pthread_cond_destroy(&t->wake);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static void track_open(struct gj_conns *t, struct MHD_Connection *connection, void **socket_context)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct track *tr = info ? calloc(1, sizeof *tr) : NULL;
    *socket_context = tr;
    if (!tr)
        return;                  /* untracked: MHD's idle timeout still applies */
    tr->owner = t;
    tr->fd = info->connect_fd;
    tr->since = now_s();
    pthread_mutex_lock(&t->lock);
    set_waiting(tr, 1);
    tr->next = t->head;
    if (t->head)
        t->head->prev = tr;
    t->head = tr;
    pthread_mutex_unlock(&t->lock);
    atomic_fetch_add(&open_connections, 1);
}

static void track_close(struct track *tr)
{
    struct gj_conns *t = tr->owner;
    pthread_mutex_lock(&t->lock);
    set_waiting(tr, 0);
    if (tr->prev)
        tr->prev->next = tr->next;
    else
        t->head = tr->next;
    if (tr->next)
        tr->next->prev = tr->prev;
    pthread_mutex_unlock(&t->lock);
    atomic_fetch_sub(&open_connections, 1);
    free(tr);
}

void gj_conns_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
                     enum MHD_ConnectionNotificationCode code)
{
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        track_open(cls, connection, socket_context);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        track_close(*socket_context);
        *socket_context = NULL;
    }
}

static struct track *track_of(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

void gj_conns_header_done(struct MHD_Connection *connection)
{
    struct track *tr = track_of(connection);
    if (!tr)
        return;
    pthread_mutex_lock(&tr->owner->lock);
    set_waiting(tr, 0);
    pthread_mutex_unlock(&tr->owner->lock);
}

void gj_conns_request_done(struct MHD_Connection *connection)
{
    struct track *tr = track_of(connection);
    if (!tr)
        return;
    pthread_mutex_lock(&tr->owner->lock);
    tr->since = tr->answered = now_s();
    tr->kept_alive = 1;
    set_waiting(tr, 1);
    pthread_mutex_unlock(&tr->owner->lock);
}

void gj_conns_quickack(struct MHD_Connection *connection)
{
#ifdef TCP_QUICKACK
    struct track *tr = track_of(connection);
    int on = 1;
    /* best effort: a Unix socket or a closed peer refuses it, and nothing depends on it */
    if (tr && setsockopt(tr->fd, IPPROTO_TCP, TCP_QUICKACK, &on, sizeof on) != 0 && errno != ENOPROTOOPT &&
        errno != EOPNOTSUPP && errno != EINVAL && errno != EBADF)
        gj_log_debug(COMPONENT, "TCP_QUICKACK: %s", strerror(errno));
#else
    (void)connection;
#endif
}

int gj_conns_reserve_fds(int connections)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        gj_log_warn(COMPONENT, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
        return connections;
    }
    rlim_t need = (rlim_t)connections + FD_RESERVE;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        rlim_t old = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            gj_log_warn(COMPONENT, "setrlimit(RLIMIT_NOFILE, %llu): %s", (unsigned long long)rl.rlim_cur,
                        strerror(errno));
            rl.rlim_cur = old;
        } else {
            gj_log_info(COMPONENT, "open-files limit raised from %llu to %llu for %d connections",
                        (unsigned long long)old, (unsigned long long)rl.rlim_cur, connections);
        }
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return connections;
    int room = rl.rlim_cur > FD_RESERVE + 16 ? (int)(rl.rlim_cur - FD_RESERVE) : 16;
    gj_log_warn(COMPONENT,
                "the open-files limit (%llu, hard %llu) leaves room for %d connections, not %d: "
                "raise it (ulimit -n, LimitNOFILE=) or lower --max-connections",
                (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, room, connections);
    return room;
}

void gj_conns_write_metrics(FILE *f)
{
    fprintf(f,
            "# HELP gpujobd_http_connections Open HTTP connections (every listener).\n"
            "# TYPE gpujobd_http_connections gauge\ngpujobd_http_connections %ld\n"
            "# HELP gpujobd_http_connections_waiting_header Connections whose request header is not complete.\n"
            "# TYPE gpujobd_http_connections_waiting_header gauge\ngpujobd_http_connections_waiting_header %ld\n"
            "# HELP gpujobd_http_header_timeouts_total Connections closed for not completing a request header "
            "in --header-timeout-seconds.\n"
            "# TYPE gpujobd_http_header_timeouts_total counter\ngpujobd_http_header_timeouts_total %lu\n",
            atomic_load(&open_connections), atomic_load(&waiting_headers), atomic_load(&header_cuts));
}
