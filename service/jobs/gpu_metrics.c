/*
 * gpu_metrics.c — Triton's per-GPU series for /metrics, read at scrape time from NVML
 * (loaded with dlopen at the first scrape; absent: the series are left out, logged once)
 * and, for simulated GPUs, from the placement. A metrics writer (base/metrics.h) that
 * cmd_serve.c adds after the modules' own, so the counters below it need no GPU.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "gj_config.h"
#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/jobs/devices.h"
#include "service/jobs/gpu_metrics.h"
#include "service/jobs/placement.h"

#if GJ_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* The few NVML entry points used, declared as nvml.h does (a stable C ABI). */
typedef int nvml_return;
typedef struct nvml_device_st *nvml_device;
struct nvml_memory { unsigned long long total, free, used; };
struct nvml_utilization { unsigned int gpu, memory; };

static struct {
    int ok;
    nvml_return (*init)(void);
    nvml_return (*by_index)(unsigned int, nvml_device *);
    nvml_return (*by_pci)(const char *, nvml_device *);
    nvml_return (*memory)(nvml_device, struct nvml_memory *);
    nvml_return (*utilization)(nvml_device, struct nvml_utilization *);
    nvml_return (*uuid)(nvml_device, char *, unsigned int);
} nvml;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

static void nvml_load(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        gj_log_info("metrics", "NVML is not available (%s): no nv_gpu_* series for the GPUs",
                    dlerror());
        return;
    }
    /* POSIX: a void * from dlsym converts to a function pointer. */
    *(void **)&nvml.init = dlsym(h, "nvmlInit_v2");
    *(void **)&nvml.by_index = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&nvml.by_pci = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&nvml.memory = dlsym(h, "nvmlDeviceGetMemoryInfo");
    *(void **)&nvml.utilization = dlsym(h, "nvmlDeviceGetUtilizationRates");
    *(void **)&nvml.uuid = dlsym(h, "nvmlDeviceGetUUID");
    if (!nvml.init || !nvml.by_index || !nvml.memory || !nvml.utilization || !nvml.uuid ||
        nvml.init() != 0) {
        gj_log_info("metrics", "NVML could not be initialised: no nv_gpu_* series for the GPUs");
        dlclose(h);
        return;
    }
    nvml.ok = 1;   /* the library stays loaded for the process's life */
}

struct gpu_sample {
    double utilization;      /* 0..1 */
    unsigned long long total, used;
    char uuid[96];           /* "" when unknown */
};

/* A physical GPU (CUDA ordinal) through NVML; 0, or -1 when it cannot be read. */
static int nvml_sample(int ordinal, struct gpu_sample *s)
{
    pthread_once(&nvml_once, nvml_load);
    if (!nvml.ok)
        return -1;
    nvml_device dev = NULL;
    int found = 0;
#if GJ_HAVE_CUDA
    /* NVML numbers devices by PCI order, CUDA by speed or CUDA_VISIBLE_DEVICES: match by bus. */
    char bus[64];
    if (nvml.by_pci && cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) == cudaSuccess)
        found = nvml.by_pci(bus, &dev) == 0;
#endif
    if (!found && nvml.by_index((unsigned)ordinal, &dev) != 0)
        return -1;
    struct nvml_memory mem;
    struct nvml_utilization util;
    if (nvml.memory(dev, &mem) != 0)
        return -1;
    s->total = mem.total;
    s->used = mem.used;
    s->utilization = nvml.utilization(dev, &util) == 0 ? util.gpu / 100.0 : 0.0;
    if (nvml.uuid(dev, s->uuid, sizeof s->uuid) != 0)
        s->uuid[0] = '\0';
    return 0;
}

static _Atomic(struct gj_placement *) watched;

void gj_gpu_metrics_watch(struct gj_placement *p)
{
    atomic_store(&watched, p);
}

/* Triton's nv_gpu_utilization, nv_gpu_memory_total_bytes and nv_gpu_memory_used_bytes,
 * per GPU of the placement (label gpu: the CUDA ordinal; gpu_uuid where NVML gives it).
 * Simulated GPUs (GPUJOBD_FAKE_GPUS) report what the worker pool has reserved on them as
 * used, and utilization 0. */
void gj_gpu_metrics_write(FILE *f)
{
    struct gj_placement *p = atomic_load(&watched);
    if (!p)
        return;
    struct gj_placement snap;
    gj_place_snapshot(p, &snap);
    struct gpu_sample s[GJ_PLACE_MAX_GPUS];
    int have[GJ_PLACE_MAX_GPUS], n_have = 0;
    for (int i = 0; i < snap.n_gpus; i++) {
        struct gj_device_info info;
        memset(&s[i], 0, sizeof s[i]);
        have[i] = 0;
        if (gj_device_info(snap.gpus[i].index, &info) == 0 && info.simulated) {
            s[i].total = snap.gpus[i].total_bytes;
            s[i].used = snap.gpus[i].reserved_bytes;
            have[i] = 1;
        } else {
            have[i] = nvml_sample(snap.gpus[i].index, &s[i]) == 0;
        }
        n_have += have[i];
    }
    if (n_have == 0)
        return;
    static const char *const names[3][2] = {
        { "nv_gpu_utilization", "GPU utilization rate (0.0 - 1.0)." },
        { "nv_gpu_memory_total_bytes", "GPU total memory, in bytes." },
        { "nv_gpu_memory_used_bytes", "GPU used memory, in bytes (simulated GPUs: reserved by "
          "jobs and loaded models)." },
    };
    for (int k = 0; k < 3; k++) {
        fprintf(f, "# HELP gpujobd_%s %s\n# TYPE gpujobd_%s gauge\n", names[k][0], names[k][1],
                names[k][0]);
        for (int i = 0; i < snap.n_gpus; i++) {
            if (!have[i])
                continue;
            fprintf(f, "gpujobd_%s{gpu=\"%d\"", names[k][0], snap.gpus[i].index);
            if (s[i].uuid[0]) {
                fputs(",gpu_uuid=\"", f);
                gj_metrics_put_label(f, s[i].uuid);
                fputc('"', f);
            }
            if (k == 0)
                fprintf(f, "} %.4f\n", s[i].utilization);
            else
                fprintf(f, "} %llu\n", k == 1 ? s[i].total : s[i].used);
        }
    }
}
