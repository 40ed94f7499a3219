/*
 * gpu_accounting.c — the registered GPU memory accounting (see gpu_accounting.h).
 * One mutex, held across the callbacks so that a removal waits for calls in flight.
 */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "infer/serving/gpu_accounting.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct gj_gpu_accounting acct;
static int present;
static uint64_t generation;   /* bumped by every set */

void gj_gpu_accounting_set(const struct gj_gpu_accounting *a)
{
    pthread_mutex_lock(&mu);
    present = a != NULL;
    if (a)
        acct = *a;
    else
        memset(&acct, 0, sizeof acct);
    generation++;
    pthread_mutex_unlock(&mu);
}

int gj_gpu_acct_count(void)
{
    pthread_mutex_lock(&mu);
    int n = present && acct.count ? acct.count(acct.ctx) : -1;
    pthread_mutex_unlock(&mu);
    return n;
}

int gj_gpu_acct_load(int gpu, struct gj_gpu_load *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&mu);
    int rc = present && acct.load ? acct.load(acct.ctx, gpu, out) : -1;
    pthread_mutex_unlock(&mu);
    return rc;
}

int gj_gpu_acct_reserve(int gpu, uint64_t bytes, uint64_t *gen, struct gj_gpu_load *now)
{
    pthread_mutex_lock(&mu);
    *gen = generation;
    int rc = 0;
    if (present && acct.reserve && acct.reserve(acct.ctx, gpu, bytes) != 0) {
        rc = -1;
        if (now && (!acct.load || acct.load(acct.ctx, gpu, now) != 0))
            memset(now, 0, sizeof *now);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

void gj_gpu_acct_release(int gpu, uint64_t bytes, uint64_t gen)
{
    pthread_mutex_lock(&mu);
    if (present && gen == generation && acct.release && bytes)
        acct.release(acct.ctx, gpu, bytes);
    pthread_mutex_unlock(&mu);
}
