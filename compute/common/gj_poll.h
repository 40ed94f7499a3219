/*
 * gj_poll.h — cancellation and progress from inside long, parallel loops.
 *
 * A kind's hooks (gj_cancelled, gj_progress) are called only from the thread that
 * runs the job (the owner). Work split over OpenMP or pthreads shares one struct
 * gj_poll: every worker calls gj_poll_step() between pieces of work of at most a
 * few tens of milliseconds; the owner's calls ask the hooks every GJ_POLL_INTERVAL_S
 * at most, and once a cancel is seen every worker's gj_poll_step() returns 1, so the
 * loop drains within one piece. (OpenMP runs a region's thread 0 on the thread that
 * entered it, so the owner takes its share of the work and polls as it goes.)
 */
#ifndef GJ_POLL_H
#define GJ_POLL_H

#include <pthread.h>
#include <stdint.h>

#include "common/gj_kind.h"

#define GJ_POLL_INTERVAL_S 0.1

struct gj_poll {
    struct gj_ctx *job;                       /* set: its hooks are used, with message */
    const char *message;
    void *ctx;
    int (*cancelled)(void *ctx);              /* may be NULL */
    void (*progress)(void *ctx, double f);    /* may be NULL */
    pthread_t owner;
    double next_s;                            /* monotonic time of the owner's next look */
    double lo, hi;                            /* progress range the current phase maps onto */
    uint64_t total, done;                     /* units of the current phase (done: atomic) */
    int stop;                                 /* atomic: a cancel was seen */
};

/* Sets p up on the owner thread. Either hook may be NULL. */
void gj_poll_init(struct gj_poll *p, void *ctx, int (*cancelled)(void *ctx),
                  void (*progress)(void *ctx, double fraction));
/* The same for a job context: its gj_cancelled and gj_progress (with message). */
void gj_poll_init_ctx(struct gj_poll *p, struct gj_ctx *ctx, const char *message);
/* Starts a phase of `total` units, reported as progress in [lo, hi]. Owner only;
 * p may be NULL. */
void gj_poll_phase(struct gj_poll *p, double lo, double hi, uint64_t total);
/* Any thread: counts `units` done; on the owner, asks the hooks when it is time.
 * 1 once a cancel was seen (then skip the rest of the work), else 0. p may be NULL. */
int gj_poll_step(struct gj_poll *p, uint64_t units);
/* 1 once a cancel was seen; never calls a hook. p may be NULL. */
int gj_poll_stopped(const struct gj_poll *p);

/* Monotonic seconds. */
double gj_now(void);

#endif
