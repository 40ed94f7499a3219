/*
 * gj_provenance.c — the environment of one attempt (gj_provenance.h): gpujobd's build,
 * the kind, the device and the libraries every kind shares. A kind adds its own
 * (FFTW, OpenBLAS, a model's digest, the seed) through its environment() hook.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "gj_config.h"
#include "common/gj_provenance.h"

#if GJ_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cufft.h>
#endif

/* The first "model name" line of /proc/cpuinfo (x86), or "Model"/"CPU part" elsewhere. */
static void read_cpu_model(char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0 && strncmp(line, "Model", 5) != 0)
            continue;
        char *v = strchr(line, ':');
        if (!v)
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        v[strcspn(v, "\n")] = '\0';
        snprintf(out, cap, "%s", v);
        break;
    }
    fclose(f);
}

/* Read once: every attempt of every job records them, and they do not change under a process
 * (sysconf reads /sys each time: 7 % of the worker's CPU per noop job). */
static char cpu_model_text[256];
static long logical_cpus;

static void cpu_model_once(void)
{
    read_cpu_model(cpu_model_text, sizeof cpu_model_text);
    logical_cpus = sysconf(_SC_NPROCESSORS_ONLN);
}

static int cpu_environment(json_t *obj)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    const char *model = cpu_model_text;
    struct utsname u;
    pthread_once(&once, cpu_model_once);
    long n = logical_cpus;
    return json_object_set_new(obj, "type", json_string("cpu")) ||
           json_object_set_new(obj, "model", json_string(model)) ||
           json_object_set_new(obj, "architecture", json_string(uname(&u) == 0 ? u.machine : "unknown")) ||
           json_object_set_new(obj, "logical_cpus", json_integer(n > 0 ? n : 0)) ? -1 : 0;
}

#if GJ_HAVE_CUDA
static json_t *version_text(int v)   /* CUDA's 12080 -> "12.8" */
{
    char s[32];
    snprintf(s, sizeof s, "%d.%d", v / 1000, (v % 1000) / 10);
    return json_string(s);
}

static int gpu_environment(int device, json_t *obj)
{
    struct cudaDeviceProp prop;
    int driver = 0, runtime = 0, cublas_major = 0, cublas_minor = 0, cublas_patch = 0, cufft = 0;
    char cc[16], cublas[32];
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        json_object_set_new(obj, "name", json_string("unknown (the CUDA runtime does not know this device)"));
        return 0;
    }
    snprintf(cc, sizeof cc, "%d.%d", prop.major, prop.minor);
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    cublasGetProperty(MAJOR_VERSION, &cublas_major);
    cublasGetProperty(MINOR_VERSION, &cublas_minor);
    cublasGetProperty(PATCH_LEVEL, &cublas_patch);
    cufftGetVersion(&cufft);
    snprintf(cublas, sizeof cublas, "%d.%d.%d", cublas_major, cublas_minor, cublas_patch);
    json_t *libs = json_pack("{s:s, s:i}", "cublas", cublas, "cufft", cufft);
    return json_object_set_new(obj, "name", json_string(prop.name)) ||
           json_object_set_new(obj, "compute_capability", json_string(cc)) ||
           json_object_set_new(obj, "total_bytes", json_integer((json_int_t)prop.totalGlobalMem)) ||
           json_object_set_new(obj, "driver", version_text(driver)) ||
           json_object_set_new(obj, "cuda_runtime", version_text(runtime)) ||
           json_object_set_new(obj, "cuda_libraries", libs) ? -1 : 0;
}
#endif

int gj_device_environment(int device, json_t *obj)
{
    if (device == GJ_DEVICE_CPU)
        return cpu_environment(obj);
    if (json_object_set_new(obj, "type", json_string("gpu")) ||
        json_object_set_new(obj, "index", json_integer(device)))
        return -1;
#if GJ_HAVE_CUDA
    return gpu_environment(device, obj);
#else
    return json_object_set_new(obj, "name", json_string("unknown (built without CUDA)"));
#endif
}

json_t *gj_kind_provenance(const struct gj_kind *kind)
{
    json_t *promise = json_array();
    if (promise && (kind->reproducible & GJ_REPRO_CPU))
        json_array_append_new(promise, json_string("cpu"));
    if (promise && (kind->reproducible & GJ_REPRO_GPU))
        json_array_append_new(promise, json_string("gpu"));
    return json_pack("{s:s, s:s, s:o*}", "name", kind->name, "version", kind->version ? kind->version : "unversioned",
                     "bit_identical_on", promise);
}

static json_t *os_json(void)
{
    struct utsname u;
    if (uname(&u) != 0)
        return json_object();
    return json_pack("{s:s, s:s}", "name", u.sysname, "release", u.release);
}

json_t *gj_run_environment(const struct gj_kind *kind, const struct gj_job *job, int device)
{
    json_t *env = json_object(), *dev = json_object();
    if (!env || !dev || gj_device_environment(device, dev) != 0) {
        json_decref(env);
        json_decref(dev);
        return NULL;
    }
    json_t *build = json_pack("{s:s, s:s}", "version", gj_build_version(), "build", gj_build_describe());
    json_t *libs = json_pack("{s:s}", "jansson", JANSSON_VERSION);
    if (json_object_set_new(env, "gpujobd", build) || json_object_set_new(env, "kind", gj_kind_provenance(kind)) ||
        json_object_set_new(env, "device", dev) || json_object_set_new(env, "libraries", libs) ||
        json_object_set_new(env, "os", os_json()) ||
        (kind->environment && kind->environment(job, device, env) != 0)) {
        json_decref(env);
        return NULL;
    }
    return env;
}
