#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gj_config.h"
#include "service/devices.h"
#include "service/log.h"

#if GJ_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define MAX_DEVICES 64

static struct gj_device_info devices[MAX_DEVICES];
static int n_devices;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int discover_simulated(const char *spec)
{
    char *end;
    long n = strtol(spec, &end, 10);
    unsigned long long bytes = 16ull << 30;
    if (*end == ':')
        bytes = strtoull(end + 1, &end, 10);
    if (*end || n < 0 || n > MAX_DEVICES || bytes == 0) {
        gj_log_warn("devices", "GPUJOBD_FAKE_GPUS=%s is not N[:BYTES]; ignoring it", spec);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        devices[i].index = i;
        snprintf(devices[i].name, sizeof devices[i].name, "simulated GPU %d", i);
        devices[i].total_bytes = bytes;
        devices[i].simulated = 1;
    }
    gj_log_info("devices", "using %ld simulated GPUs of %llu bytes (GPUJOBD_FAKE_GPUS)", n, bytes);
    return (int)n;
}

static void discover(void)
{
    const char *fake = getenv("GPUJOBD_FAKE_GPUS");
    if (fake && *fake) {
        n_devices = discover_simulated(fake);
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
    if (count > MAX_DEVICES)
        count = MAX_DEVICES;
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
