/*
 * gj_provenance.h — what determines a job's result, gathered where it runs (issue 26):
 * gpujobd's build, the kind's version, the device, the libraries, the precision and the
 * seed. Plain compute: the service stores it per attempt, `gpujobd run` could print it.
 */
#ifndef GJ_PROVENANCE_H
#define GJ_PROVENANCE_H

#include <jansson.h>

#include "common/gj_kind.h"

/* gpujobd's version: the release ("0.1.0"), and the build ("v0.1.0" for a tagged release,
 * else `git describe`'s commit, e.g. "v0.1.0-3-gabc1234-dirty" or "abc1234"). */
const char *gj_build_version(void);
const char *gj_build_describe(void);

/* The environment of one attempt of job on device (GJ_DEVICE_CPU or a CUDA index), as a
 * new JSON object: {"gpujobd", "kind", "device", "libraries", "os", ...what the kind's
 * environment() adds}. NULL when out of memory. */
json_t *gj_run_environment(const struct gj_kind *kind, const struct gj_job *job, int device);

/* The kind as provenance names it: {"name", "version", "bit_identical_on": ["cpu", "gpu"]}
 * (the device classes on which a rerun gives identical bytes). A new object, or NULL. */
json_t *gj_kind_provenance(const struct gj_kind *kind);

/* The device part: {"type":"cpu","model","architecture","logical_cpus"} or the GPU's name,
 * compute capability, driver and CUDA runtime. Fills obj; 0 or -1. */
int gj_device_environment(int device, json_t *obj);


#endif
