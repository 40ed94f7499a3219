/*
 * archive_pool.c — the threads that extract CARMIN archives (archive_pool.h).
 *
 * A FIFO of tasks under one lock. A task's end is marked, and its park woken, under that
 * lock: once carmin_archive_finished (or _abandon) sees it done, nothing here touches it
 * again, and its request may leave the park and free it.
 */
#include <pthread.h>

#include "service/carmin/archive_pool.h"
#include "service/base/log.h"

enum { QUEUED = 1, RUNNING, DONE, DROPPED };

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    struct carmin_archive_task *head, *tail;
    int queued, started, stopping;
    pthread_t threads[ARCHIVE_THREADS];
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER };

static struct carmin_archive_task *take_first(void)
{
    struct carmin_archive_task *t = pool.head;
    pool.head = t->next;
    if (!pool.head)
        pool.tail = NULL;
    t->next = NULL;
    pool.queued--;
    return t;
}

static void *extractor(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (!pool.head && !pool.stopping)
            pthread_cond_wait(&pool.work, &pool.lock);
        if (!pool.head)
            break;
        struct carmin_archive_task *t = take_first();
        t->state = RUNNING;
        pthread_mutex_unlock(&pool.lock);
        t->run(t);
        pthread_mutex_lock(&pool.lock);
        t->state = DONE;
        gj_park_wake(t->park);
        pthread_cond_broadcast(&pool.done);
    }
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

/* Under the lock: the threads running, started once. 0, or -1 logged. */
static int start_threads(void)
{
    for (; pool.started < ARCHIVE_THREADS; pool.started++) {
        int rc = pthread_create(&pool.threads[pool.started], NULL, extractor, NULL);
        if (rc != 0) {
            gj_log_error("carmin", "cannot start an archive thread: error %d", rc);
            return pool.started > 0 ? 0 : -1;
        }
    }
    return 0;
}

int carmin_archive_submit(struct carmin_archive_task *t)
{
    pthread_mutex_lock(&pool.lock);
    int ok = !pool.stopping && pool.queued < ARCHIVE_QUEUE && start_threads() == 0;
    if (ok) {
        atomic_store(&t->cancel, 0);
        t->state = QUEUED;
        t->next = NULL;
        if (pool.tail)
            pool.tail->next = t;
        else
            pool.head = t;
        pool.tail = t;
        pool.queued++;
        pthread_cond_signal(&pool.work);
    }
    pthread_mutex_unlock(&pool.lock);
    return ok ? 0 : -1;
}

int carmin_archive_finished(struct carmin_archive_task *t)
{
    pthread_mutex_lock(&pool.lock);
    int done = t->state == DONE || t->state == DROPPED;
    pthread_mutex_unlock(&pool.lock);
    return done;
}

/* Under the lock: t out of the queue. */
static void unqueue(struct carmin_archive_task *t)
{
    struct carmin_archive_task **p = &pool.head, *prev = NULL;
    while (*p && *p != t) {
        prev = *p;
        p = &(*p)->next;
    }
    if (!*p)
        return;
    *p = t->next;
    if (pool.tail == t)
        pool.tail = prev;
    t->next = NULL;
    pool.queued--;
}

void carmin_archive_abandon(struct carmin_archive_task *t)
{
    pthread_mutex_lock(&pool.lock);
    if (t->state == QUEUED) {
        unqueue(t);
        t->state = DROPPED;
    }
    atomic_store(&t->cancel, 1);
    while (t->state == RUNNING)
        pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
}

void carmin_archive_pool_stop(void)
{
    pthread_mutex_lock(&pool.lock);
    pool.stopping = 1;
    pthread_cond_broadcast(&pool.work);
    int n = pool.started;
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < n; i++)
        pthread_join(pool.threads[i], NULL);
    pthread_mutex_lock(&pool.lock);
    pool.started = 0;
    pool.stopping = 0;   /* a server started again in the same process (tests) */
    pthread_mutex_unlock(&pool.lock);
}
