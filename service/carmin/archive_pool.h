/*
 * archive_pool.h — CARMIN archives extracted off the HTTP threads.
 *
 * An Archive upload's request hands its extraction (upload_archive.c, then its commit) to
 * one of ARCHIVE_THREADS threads here and parks (http_park.h), holding no HTTP thread; the
 * task's end wakes it. At most ARCHIVE_THREADS extractions run at once and ARCHIVE_QUEUE
 * more wait their turn (each holds its request's database connection); one more is refused
 * (503 with Retry-After), so archives never take the threads or the connections other
 * requests need.
 */
#ifndef GJ_CARMIN_ARCHIVE_POOL_H
#define GJ_CARMIN_ARCHIVE_POOL_H

#include <stdatomic.h>

#include "service/http/http_park.h"

#define ARCHIVE_THREADS 2
#define ARCHIVE_QUEUE 4

/* One extraction: lives in the request's state from carmin_archive_submit until
 * carmin_archive_finished says 1 or carmin_archive_abandon returns. */
struct carmin_archive_task {
    void (*run)(struct carmin_archive_task *t);   /* on a pool thread; stops soon once cancel is set */
    struct gj_park_entry *park;                   /* woken when run has returned */
    atomic_int cancel;                            /* the server is stopping: run rolls back */
    int state;                                    /* the pool's (under its lock) */
    struct carmin_archive_task *next;             /* in the queue */
};

/* Queues t (its run and park set); the pool's threads start with the first. 0, or -1 when
 * ARCHIVE_QUEUE tasks wait already (or a thread could not start): t is not taken. */
int carmin_archive_submit(struct carmin_archive_task *t);
/* 1 once t's run has returned and its park woken: the pool has let go of t. */
int carmin_archive_finished(struct carmin_archive_task *t);
/* Cancels t and returns when the pool has let go of it: its run stopped, ended before the
 * cancel, or never started. */
void carmin_archive_abandon(struct carmin_archive_task *t);
/* Ends the threads (module shutdown: no request is left). */
void carmin_archive_pool_stop(void);

#endif
