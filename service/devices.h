/*
 * devices.h — GPU discovery. With CUDA: the runtime's devices as the container
 * sees them; without a driver (cudaGetDeviceCount fails) that is zero GPUs,
 * logged once. GPUJOBD_FAKE_GPUS="N:BYTES" simulates N devices for tests of
 * placement and /v1/gpus on machines without one (jobs still run on the CPU path).
 */
#ifndef GJ_DEVICES_H
#define GJ_DEVICES_H

#include <stdint.h>

struct gj_device_info {
    int index;
    char name[128];
    uint64_t total_bytes;
    int simulated;
};

int gj_device_count(void);
/* 0, or -1 when index is out of range. */
int gj_device_info(int index, struct gj_device_info *info);

#endif
