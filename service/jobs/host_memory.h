/*
 * host_memory.h — how much host memory the jobs of this process may hold together:
 * the host's (MemTotal of /proc/meminfo), or less where a cgroup limits the process
 * (cgroup v2: memory.max of its cgroup and of each ancestor; v1: the memory
 * controller's memory.limit_in_bytes), minus a reserve kept for the service itself
 * (--host-memory-reserve). Placement reserves each job's host_bytes estimate against
 * it (placement.h); submit refuses a job whose floor exceeds what any worker offers
 * (host_admission.h).
 */
#ifndef GJ_HOST_MEMORY_H
#define GJ_HOST_MEMORY_H

#include <stdint.h>

struct gj_host_memory {
    uint64_t total;      /* the host's memory, or the cgroup's limit when lower; 0: unknown */
    uint64_t reserve;    /* kept for the service */
    uint64_t usable;     /* total - reserve: what jobs may reserve together (0: not counted) */
};

/* Reads the host (fake_total > 0: takes the host to have that much, the
 * GPUJOBD_FAKE_HOST_MEMORY test switch) and subtracts reserve. */
void gj_host_memory_read(uint64_t fake_total, uint64_t reserve, struct gj_host_memory *out);

/* Parsers of the files read (unit tested). */
/* MemTotal of /proc/meminfo in bytes; 0 when absent. */
uint64_t gj_meminfo_total(const char *meminfo);
/* A cgroup limit file's value ("max" or a number of bytes); UINT64_MAX for none. */
uint64_t gj_cgroup_limit(const char *text);
/* The path of this process's cgroup from /proc/self/cgroup: the v2 line ("0::/p")
 * when v1 is 0, else the v1 memory controller's. 1 found (into out), 0 not. */
int gj_cgroup_path(const char *proc_self_cgroup, int v1, char *out, size_t cap);

#endif
