/*
 * notify.c — one LISTEN connection per process (ARCHITECTURE.md: a job's life). A thread poll()s
 * its socket (and a pipe that wakes it for shutdown), drains notifications with
 * PQconsumeInput/PQnotifies, and turns them into counter bumps with condvar
 * broadcasts. A dropped connection is reopened with backoff; after every
 * (re)connect both counters are bumped, since notifications may have been missed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "service/db/db.h"
#include "service/base/log.h"
#include "service/db/notify.h"

#define COMPONENT "notify"
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

struct gj_notifier {
    char *url;
    pthread_t thread;
    int wake[2];                 /* self-pipe: stop */

    pthread_mutex_t lock;
    pthread_cond_t changed;      /* CLOCK_MONOTONIC */
    uint64_t queue_seq;
    uint64_t jobs_seq;
    int stop;

    pthread_mutex_t cb_lock;     /* held while a callback runs */
    void (*on_cancel)(const char *job_id, void *arg);
    void *on_cancel_arg;
    void (*on_job)(const char *job_id, void *arg);
    void *on_job_arg;
    void (*on_forget)(const char *job_id, int listening, void *arg);
    void *on_forget_arg;
    int listening;               /* under cb_lock: LISTEN in place */
};

static void deadline_after(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void bump(struct gj_notifier *n, int queue, int jobs)
{
    pthread_mutex_lock(&n->lock);
    if (queue)
        n->queue_seq++;
    if (jobs)
        n->jobs_seq++;
    pthread_cond_broadcast(&n->changed);
    pthread_mutex_unlock(&n->lock);
}

static int stopping(struct gj_notifier *n)
{
    pthread_mutex_lock(&n->lock);
    int s = n->stop;
    pthread_mutex_unlock(&n->lock);
    return s;
}

/* Sleeps ms or until stop; returns 1 when stopping. */
static int sleep_unless_stopped(struct gj_notifier *n, int ms)
{
    struct timespec ts;
    deadline_after(&ts, ms);
    pthread_mutex_lock(&n->lock);
    while (!n->stop) {
        int rc = pthread_cond_timedwait(&n->changed, &n->lock, &ts);
        if (rc == ETIMEDOUT)
            break;
        if (rc) {
            gj_log_error(COMPONENT, "pthread_cond_timedwait: %s", strerror(rc));
            break;
        }
    }
    int s = n->stop;
    pthread_mutex_unlock(&n->lock);
    return s;
}

static PGconn *connect_and_listen(struct gj_notifier *n)
{
    PGconn *conn = gj_db_connect(n->url);
    if (!conn)
        return NULL;
    static const char *const channels[] = { "LISTEN gpujobd_queue", "LISTEN gpujobd_jobs",
                                            "LISTEN gpujobd_cancel" };
    for (size_t i = 0; i < sizeof channels / sizeof channels[0]; i++) {
        if (gj_db_cmd(conn, channels[i], 0, NULL) != 0) {
            PQfinish(conn);
            return NULL;
        }
    }
    if (PQsetnonblocking(conn, 1) != 0) {
        gj_log_warn(COMPONENT, "PQsetnonblocking failed: %s", PQerrorMessage(conn));
    }
    return conn;
}

/* The LISTEN connection lost or back: whatever was kept may have missed a change. */
static void set_listening(struct gj_notifier *n, int listening)
{
    pthread_mutex_lock(&n->cb_lock);
    n->listening = listening;
    if (n->on_forget)
        n->on_forget(NULL, listening, n->on_forget_arg);
    pthread_mutex_unlock(&n->cb_lock);
}

/* job_id NULL: any job (after a reconnect). */
static void job_changed(struct gj_notifier *n, const char *job_id)
{
    pthread_mutex_lock(&n->cb_lock);
    if (n->on_forget && job_id)
        n->on_forget(job_id, n->listening, n->on_forget_arg);
    if (n->on_job)
        n->on_job(job_id, n->on_job_arg);
    pthread_mutex_unlock(&n->cb_lock);
}

static void dispatch(struct gj_notifier *n, PGnotify *note)
{
    if (strcmp(note->relname, "gpujobd_queue") == 0) {
        bump(n, 1, 0);
    } else if (strcmp(note->relname, "gpujobd_jobs") == 0) {
        job_changed(n, note->extra);
        bump(n, 0, 1);
    } else if (strcmp(note->relname, "gpujobd_cancel") == 0) {
        pthread_mutex_lock(&n->cb_lock);
        if (n->on_cancel)
            n->on_cancel(note->extra, n->on_cancel_arg);
        pthread_mutex_unlock(&n->cb_lock);
        bump(n, 0, 1);
    }
}

static void drain_wake_pipe(struct gj_notifier *n)
{
    char buf[64];
    while (read(n->wake[0], buf, sizeof buf) > 0)
        ;
}

static void *notifier_main(void *arg)
{
    struct gj_notifier *n = arg;
    int backoff = BACKOFF_MIN_MS;
    int logged_down = 0;
    while (!stopping(n)) {
        PGconn *conn = connect_and_listen(n);
        if (!conn) {
            if (!logged_down)
                gj_log_warn(COMPONENT, "LISTEN connection unavailable; polling until it is back");
            logged_down = 1;
            if (sleep_unless_stopped(n, backoff))
                break;
            backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
            continue;
        }
        if (logged_down)
            gj_log_info(COMPONENT, "LISTEN connection restored");
        logged_down = 0;
        backoff = BACKOFF_MIN_MS;
        set_listening(n, 1);
        bump(n, 1, 1);   /* whatever happened while we were not listening */
        job_changed(n, NULL);
        PGnotify *early;   /* read along with LISTEN's answers: the socket will not say so */
        while ((early = PQnotifies(conn)) != NULL) {
            dispatch(n, early);
            PQfreemem(early);
        }

        while (!stopping(n)) {
            struct pollfd fds[2] = {
                { .fd = PQsocket(conn), .events = POLLIN },
                { .fd = n->wake[0], .events = POLLIN },
            };
            if (fds[0].fd < 0)
                break;
            int rc = poll(fds, 2, 1000);
            if (rc < 0) {
                if (errno == EINTR)
                    continue;
                gj_log_error(COMPONENT, "poll: %s", strerror(errno));
                break;
            }
            if (fds[1].revents)
                drain_wake_pipe(n);
            if (rc == 0 || !(fds[0].revents & (POLLIN | POLLERR | POLLHUP)))
                continue;
            if (!PQconsumeInput(conn)) {
                gj_log_warn(COMPONENT, "LISTEN connection lost: %s", PQerrorMessage(conn));
                break;
            }
            PGnotify *note;
            while ((note = PQnotifies(conn)) != NULL) {
                dispatch(n, note);
                PQfreemem(note);
            }
            if (PQstatus(conn) != CONNECTION_OK) {
                gj_log_warn(COMPONENT, "LISTEN connection lost");
                break;
            }
        }
        set_listening(n, 0);
        PQfinish(conn);
        if (!stopping(n)) {
            logged_down = 1;
            gj_log_warn(COMPONENT, "reconnecting the LISTEN connection");
        }
        if (sleep_unless_stopped(n, BACKOFF_MIN_MS))
            break;
    }
    return NULL;
}

/* Once the locks and the wake pipe exist and the thread has ended (or never started). */
static void notifier_free(struct gj_notifier *n)
{
    pthread_cond_destroy(&n->changed);
    pthread_mutex_destroy(&n->cb_lock);
    pthread_mutex_destroy(&n->lock);
    close(n->wake[0]);
    close(n->wake[1]);
    free(n->url);
    free(n);
}

struct gj_notifier *gj_notifier_start(const char *database_url)
{
    struct gj_notifier *n = calloc(1, sizeof *n);
    if (!n) {
        gj_log_error(COMPONENT, "out of memory");
        return NULL;
    }
    n->wake[0] = n->wake[1] = -1;
    n->url = strdup(database_url ? database_url : "");
    if (!n->url) {
        gj_log_error(COMPONENT, "out of memory");
        free(n);
        return NULL;
    }
    if (pipe2(n->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        gj_log_error(COMPONENT, "pipe2: %s", strerror(errno));
        free(n->url);
        free(n);
        return NULL;
    }
    int rc = pthread_mutex_init(&n->lock, NULL);
    int rc2 = pthread_mutex_init(&n->cb_lock, NULL);
    pthread_condattr_t attr;
    int rc3 = pthread_condattr_init(&attr);
    if (rc3 == 0) {
        rc3 = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        if (rc3 == 0)
            rc3 = pthread_cond_init(&n->changed, &attr);
        pthread_condattr_destroy(&attr);
    }
    if (rc || rc2 || rc3) {
        gj_log_error(COMPONENT, "cannot initialise locks");
        if (!rc)
            pthread_mutex_destroy(&n->lock);
        if (!rc2)
            pthread_mutex_destroy(&n->cb_lock);
        if (!rc3)
            pthread_cond_destroy(&n->changed);
        close(n->wake[0]);
        close(n->wake[1]);
        free(n->url);
        free(n);
        return NULL;
    }
    rc = pthread_create(&n->thread, NULL, notifier_main, n);
    if (rc) {
        gj_log_error(COMPONENT, "pthread_create: %s", strerror(rc));
        notifier_free(n);
        return NULL;
    }
    return n;
}

void gj_notifier_stop(struct gj_notifier *n)
{
    if (!n)
        return;
    pthread_mutex_lock(&n->lock);
    n->stop = 1;
    pthread_cond_broadcast(&n->changed);
    pthread_mutex_unlock(&n->lock);
    char b = 1;
    if (write(n->wake[1], &b, 1) < 0 && errno != EAGAIN)
        gj_log_warn(COMPONENT, "wake pipe: %s", strerror(errno));
    int rc = pthread_join(n->thread, NULL);
    if (rc)
        gj_log_error(COMPONENT, "pthread_join: %s", strerror(rc));
    notifier_free(n);
}

uint64_t gj_notifier_queue_seq(struct gj_notifier *n)
{
    if (!n)
        return 0;
    pthread_mutex_lock(&n->lock);
    uint64_t s = n->queue_seq;
    pthread_mutex_unlock(&n->lock);
    return s;
}

uint64_t gj_notifier_jobs_seq(struct gj_notifier *n)
{
    if (!n)
        return 0;
    pthread_mutex_lock(&n->lock);
    uint64_t s = n->jobs_seq;
    pthread_mutex_unlock(&n->lock);
    return s;
}

static void wait_seq(struct gj_notifier *n, const uint64_t *seq, uint64_t seen, int timeout_ms)
{
    if (timeout_ms < 0)
        timeout_ms = 0;
    struct timespec ts;
    deadline_after(&ts, timeout_ms);
    pthread_mutex_lock(&n->lock);
    while (*seq == seen && !n->stop) {
        int rc = pthread_cond_timedwait(&n->changed, &n->lock, &ts);
        if (rc == ETIMEDOUT)
            break;
        if (rc) {
            gj_log_error(COMPONENT, "pthread_cond_timedwait: %s", strerror(rc));
            break;
        }
    }
    pthread_mutex_unlock(&n->lock);
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void gj_notifier_wait_queue(struct gj_notifier *n, uint64_t seen, int timeout_ms)
{
    if (!n) {
        sleep_ms(timeout_ms > 0 ? timeout_ms : 0);
        return;
    }
    wait_seq(n, &n->queue_seq, seen, timeout_ms);
}

void gj_notifier_wait_jobs(struct gj_notifier *n, uint64_t seen, int timeout_ms)
{
    if (!n) {
        sleep_ms(timeout_ms > 0 ? timeout_ms : 0);
        return;
    }
    wait_seq(n, &n->jobs_seq, seen, timeout_ms);
}

void gj_notifier_kick(struct gj_notifier *n)
{
    if (n)
        bump(n, 1, 0);
}

void gj_notifier_on_job(struct gj_notifier *n, void (*fn)(const char *job_id, void *arg), void *arg)
{
    if (!n)
        return;
    pthread_mutex_lock(&n->cb_lock);
    n->on_job = fn;
    n->on_job_arg = arg;
    pthread_mutex_unlock(&n->cb_lock);
}

void gj_notifier_on_forget(struct gj_notifier *n, void (*fn)(const char *job_id, int listening, void *arg),
                           void *arg)
{
    if (!n)
        return;
    pthread_mutex_lock(&n->cb_lock);
    n->on_forget = fn;
    n->on_forget_arg = arg;
    if (fn)
        fn(NULL, n->listening, arg);
    pthread_mutex_unlock(&n->cb_lock);
}

void gj_notifier_on_cancel(struct gj_notifier *n, void (*fn)(const char *job_id, void *arg), void *arg)
{
    if (!n)
        return;
    pthread_mutex_lock(&n->cb_lock);
    n->on_cancel = fn;
    n->on_cancel_arg = arg;
    pthread_mutex_unlock(&n->cb_lock);
}
