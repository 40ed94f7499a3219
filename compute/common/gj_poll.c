/* Cancellation and progress from inside parallel loops (gj_poll.h). */
#include <string.h>
#include <time.h>

#include "common/gj_poll.h"

double gj_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void gj_poll_init(struct gj_poll *p, void *ctx, int (*cancelled)(void *ctx),
                  void (*progress)(void *ctx, double fraction))
{
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->cancelled = cancelled;
    p->progress = progress;
    p->owner = pthread_self();
    p->hi = 1;
    p->next_s = gj_now() + GJ_POLL_INTERVAL_S;
}

void gj_poll_init_ctx(struct gj_poll *p, struct gj_ctx *ctx, const char *message)
{
    gj_poll_init(p, NULL, NULL, NULL);
    p->job = ctx;
    p->message = message;
}

void gj_poll_phase(struct gj_poll *p, double lo, double hi, uint64_t total)
{
    if (!p)
        return;
    p->lo = lo;
    p->hi = hi;
    p->total = total;
    __atomic_store_n(&p->done, 0, __ATOMIC_RELAXED);
}

static void poll_hooks(struct gj_poll *p)
{
    int cancelled = p->job ? gj_cancelled(p->job) : p->cancelled && p->cancelled(p->ctx);
    if (cancelled)
        __atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED);
    if (!p->total)
        return;
    uint64_t done = __atomic_load_n(&p->done, __ATOMIC_RELAXED);
    double f = p->lo + (p->hi - p->lo) * (done >= p->total ? 1.0 : (double)done / (double)p->total);
    if (p->job)
        gj_progress(p->job, f, p->message);
    else if (p->progress)
        p->progress(p->ctx, f);
}

int gj_poll_step(struct gj_poll *p, uint64_t units)
{
    if (!p)
        return 0;
    if (units)
        __atomic_fetch_add(&p->done, units, __ATOMIC_RELAXED);
    if (pthread_equal(pthread_self(), p->owner)) {
        double t = gj_now();
        if (t >= p->next_s) {
            p->next_s = t + GJ_POLL_INTERVAL_S;
            poll_hooks(p);
        }
    }
    return __atomic_load_n(&p->stop, __ATOMIC_RELAXED);
}

int gj_poll_stopped(const struct gj_poll *p)
{
    return p ? __atomic_load_n(&p->stop, __ATOMIC_RELAXED) : 0;
}
