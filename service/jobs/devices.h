/*
 * devices.h — GPU discovery. With CUDA: the runtime's devices as the container
 * sees them; without a driver (cudaGetDeviceCount fails) that is zero GPUs,
 * logged once. Tests of placement and /v1/gpus on machines without a GPU ask
 * for simulated devices instead (GPUJOBD_FAKE_GPUS, read by config.c); jobs
 * still run on the CPU path.
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

#define GJ_MAX_DEVICES 64

/* Simulates n GPUs (0..GJ_MAX_DEVICES) of bytes each instead of asking CUDA. Call
 * before the first gj_device_count() or gj_device_info(); 0, or -1 when the devices
 * were already discovered or n is out of range. */
int gj_devices_simulate(int n, uint64_t bytes);

int gj_device_count(void);
/* 0, or -1 when index is out of range. */
int gj_device_info(int index, struct gj_device_info *info);

#endif
