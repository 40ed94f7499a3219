/*
 * mem_budget.c — bytes of host memory requests share (mem_budget.h).
 */
#include "service/base/mem_budget.h"

void gj_mem_budget_init(struct gj_mem_budget *b, uint64_t total)
{
    pthread_mutex_init(&b->lock, NULL);
    b->total = total;
    b->held = 0;
}

enum gj_mem_take gj_mem_budget_take(struct gj_mem_budget *b, uint64_t bytes)
{
    if (bytes > b->total)
        return GJ_MEM_NEVER;
    pthread_mutex_lock(&b->lock);
    int fits = bytes <= b->total - b->held;
    if (fits)
        b->held += bytes;
    pthread_mutex_unlock(&b->lock);
    return fits ? GJ_MEM_TAKEN : GJ_MEM_BUSY;
}

void gj_mem_budget_give(struct gj_mem_budget *b, uint64_t bytes)
{
    pthread_mutex_lock(&b->lock);
    b->held = bytes < b->held ? b->held - bytes : 0;
    pthread_mutex_unlock(&b->lock);
}

uint64_t gj_mem_budget_held(struct gj_mem_budget *b)
{
    pthread_mutex_lock(&b->lock);
    uint64_t held = b->held;
    pthread_mutex_unlock(&b->lock);
    return held;
}
