/*
 * gpu_accounting.c — the worker pool's placement (service/jobs/placement.h) as the GPU
 * accounting of the inference batchers (compute/infer/serving/gpu_accounting.h): compute/
 * may not call service/, and the placement knows no module, so the module joins them.
 */
#include <pthread.h>

#include "infer/serving/gpu_accounting.h"
#include "service/infer/module_parts.h"
#include "service/jobs/placement.h"

static struct gj_placement *attached;
static pthread_mutex_t attach_mu = PTHREAD_MUTEX_INITIALIZER;

static int acct_count(void *ctx)
{
    return gj_place_gpu_count(ctx);
}

static int acct_load(void *ctx, int gpu, struct gj_gpu_load *out)
{
    struct gj_place_gpu_load l;
    if (gj_place_gpu_load(ctx, gpu, &l) != 0)
        return -1;
    *out = (struct gj_gpu_load){ l.running, l.total_bytes, l.reserved_bytes };
    return 0;
}

static int acct_reserve(void *ctx, int gpu, uint64_t bytes)
{
    return gj_place_reserve_memory(ctx, gpu, bytes);
}

static void acct_release(void *ctx, int gpu, uint64_t bytes)
{
    gj_place_release_memory(ctx, gpu, bytes);
}

void gj_infer_gpu_accounting_attach(struct gj_placement *p)
{
    pthread_mutex_lock(&attach_mu);
    if (attached != p) {
        struct gj_gpu_accounting a = { p, acct_count, acct_load, acct_reserve, acct_release };
        gj_gpu_accounting_set(&a);
        attached = p;
    }
    pthread_mutex_unlock(&attach_mu);
}

void gj_infer_gpu_accounting_detach(void)
{
    pthread_mutex_lock(&attach_mu);
    if (attached) {
        gj_gpu_accounting_set(NULL);
        attached = NULL;
    }
    pthread_mutex_unlock(&attach_mu);
}
