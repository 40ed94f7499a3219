/*
 * notify.h — one LISTEN connection per process (ARCHITECTURE.md: a job's life). A thread waits on
 * it and turns notifications into in-process wake-ups:
 *   gpujobd_queue  -> workers waiting for work
 *   gpujobd_jobs   -> long polls and event streams waiting on a job
 *   gpujobd_cancel -> the running job it names is asked to stop
 * Waiters also time out, so a lost connection degrades to polling, never hangs.
 */
#ifndef GJ_NOTIFY_H
#define GJ_NOTIFY_H

#include <stdint.h>

struct gj_notifier;

struct gj_notifier *gj_notifier_start(const char *database_url);
void gj_notifier_stop(struct gj_notifier *n);

/* A counter that increases on every gpujobd_queue notification (and on
 * gj_notifier_kick). Wait until it differs from seen, or timeout_ms passes. */
uint64_t gj_notifier_queue_seq(struct gj_notifier *n);
void gj_notifier_wait_queue(struct gj_notifier *n, uint64_t seen, int timeout_ms);
/* Wakes local queue waiters (a local slot freed, shutdown). */
void gj_notifier_kick(struct gj_notifier *n);

/* Same for job changes (any job): long polls re-read their job on each. */
uint64_t gj_notifier_jobs_seq(struct gj_notifier *n);
void gj_notifier_wait_jobs(struct gj_notifier *n, uint64_t seen, int timeout_ms);

/* Called (on the notifier's thread) with the job id of each gpujobd_jobs notification,
 * and with NULL after every (re)connect: any job may have changed meanwhile. */
void gj_notifier_on_job(struct gj_notifier *n, void (*fn)(const char *job_id, void *arg), void *arg);

/* Called (on the notifier's thread) with the job id of each gpujobd_jobs notification before
 * the on_job waiters are woken, so that what a woken reader reads next is not an answer kept
 * from before the change; and with NULL whenever the LISTEN connection is lost or back, with
 * listening 0 from a loss until LISTEN is in place again (notifications may be missed
 * meanwhile), else 1. Registering calls fn(NULL, listening now). job_cache.h keeps answers
 * on these terms. */
void gj_notifier_on_forget(struct gj_notifier *n, void (*fn)(const char *job_id, int listening, void *arg),
                           void *arg);

/* Called with the job id of each gpujobd_cancel notification. */
void gj_notifier_on_cancel(struct gj_notifier *n, void (*fn)(const char *job_id, void *arg), void *arg);

#endif
