/*
 * gj_seed.c — a fresh random seed for a kind that draws random numbers (gj_seed.h).
 */
#include <stdint.h>
#include <sys/random.h>
#include <time.h>

#include "common/gj_seed.h"

json_int_t gj_fresh_seed(void)
{
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec;
    }
    return (json_int_t)(s & ((1ull << 53) - 1));
}
