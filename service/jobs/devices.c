#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gj_config.h"
#include "service/jobs/devices.h"
#include "service/base/log.h"

#if GJ_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static struct gj_device_info devices[GJ_MAX_DEVICES];
static int n_devices;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int discovered;                /* under lock */
static int simulate = -1;             /* under lock: -1 real devices, else how many simulated */
static uint64_t simulated_bytes;

int gj_devices_simulate(int n, uint64_t bytes)
{
    if (n < 0 || n > GJ_MAX_DEVICES || bytes == 0)
        return -1;
    pthread_mutex_lock(&lock);
    int rc = discovered ? -1 : 0;
    if (rc == 0) {
        simulate = n;
        simulated_bytes = bytes;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static void discover_simulated(int n, uint64_t bytes)
{
    for (int i = 0; i < n; i++) {
        devices[i].index = i;
        snprintf(devices[i].name, sizeof devices[i].name, "simulated GPU %d", i);
        devices[i].total_bytes = bytes;
        devices[i].simulated = 1;
    }
    n_devices = n;
    gj_log_info("devices", "using %d simulated GPUs of %llu bytes (GPUJOBD_FAKE_GPUS)", n,
                (unsigned long long)bytes);
}

static void discover(void)
{
    pthread_mutex_lock(&lock);
    discovered = 1;
    int n = simulate;
    uint64_t bytes = simulated_bytes;
    pthread_mutex_unlock(&lock);
    if (n >= 0) {
        discover_simulated(n, bytes);
        return;
    }
#if GJ_HAVE_CUDA
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        /* No driver (error 35) or no device: a CPU-only machine, not a failure. */
        gj_log_info("devices", "no usable GPU (%s); running on the CPU", cudaGetErrorString(rc));
        return;
    }
    if (count > GJ_MAX_DEVICES)
        count = GJ_MAX_DEVICES;
    for (int i = 0; i < count; i++) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess)
            continue;
        struct gj_device_info *d = &devices[n_devices++];
        d->index = i;
        snprintf(d->name, sizeof d->name, "%.*s", (int)sizeof d->name - 1, prop.name);
        d->total_bytes = prop.totalGlobalMem;
    }
    gj_log_info("devices", "%d CUDA device(s) found", n_devices);
#else
    gj_log_info("devices", "built without CUDA; running on the CPU");
#endif
}

int gj_device_count(void)
{
    pthread_once(&once, discover);
    return n_devices;
}

int gj_device_info(int index, struct gj_device_info *info)
{
    pthread_once(&once, discover);
    if (index < 0 || index >= n_devices)
        return -1;
    *info = devices[index];
    return 0;
}
