/*
 * serving_host.c — the registration of serving_host.h.
 */
#include <pthread.h>
#include <string.h>

#include "infer/serving/serving_host.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct gj_serving_host host;

void gj_serving_host_set(const struct gj_serving_host *h)
{
    pthread_mutex_lock(&mu);
    if (h)
        host = *h;
    else
        memset(&host, 0, sizeof host);
    pthread_mutex_unlock(&mu);
}

void gj_serving_host_get(struct gj_serving_host *out)
{
    pthread_mutex_lock(&mu);
    *out = host;
    pthread_mutex_unlock(&mu);
}
