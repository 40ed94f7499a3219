/*
 * mem_budget.h — bytes of host memory that requests of the service share (the DICOM
 * renders' --render-memory): a request takes what it will hold before it allocates it
 * and gives it back when done. Never blocks: a request that does not fit now is told
 * so (and answers 503), one that could never fit is told that (and answers 413).
 */
#ifndef GJ_MEM_BUDGET_H
#define GJ_MEM_BUDGET_H

#include <pthread.h>
#include <stdint.h>

struct gj_mem_budget {
    pthread_mutex_t lock;
    uint64_t total;
    uint64_t held;
};

/* A static initializer (then set total before use), or gj_mem_budget_init. */
#define GJ_MEM_BUDGET_INIT { PTHREAD_MUTEX_INITIALIZER, 0, 0 }
void gj_mem_budget_init(struct gj_mem_budget *b, uint64_t total);

enum gj_mem_take { GJ_MEM_TAKEN, GJ_MEM_BUSY, GJ_MEM_NEVER };
/* Takes bytes when that many are free now. NEVER: more than total. */
enum gj_mem_take gj_mem_budget_take(struct gj_mem_budget *b, uint64_t bytes);
void gj_mem_budget_give(struct gj_mem_budget *b, uint64_t bytes);
uint64_t gj_mem_budget_held(struct gj_mem_budget *b);

#endif
