/*
 * host_memory.c — the host memory jobs may use: MemTotal, lowered by the cgroup
 * limits of this process (v2 and v1), minus the service's reserve.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "service/jobs/host_memory.h"
#include "service/base/log.h"

#define FILE_MAX (16 * 1024)

/* A /proc or /sys file into buf (NUL-terminated; their sizes are not known ahead). 0 or -1. */
static int read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < cap) {
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    return got ? 0 : -1;
}

uint64_t gj_meminfo_total(const char *meminfo)
{
    const char *p = meminfo ? strstr(meminfo, "MemTotal:") : NULL;
    if (!p)
        return 0;
    char *end;
    unsigned long long kb = strtoull(p + 9, &end, 10);
    while (*end == ' ')
        end++;
    return strncmp(end, "kB", 2) == 0 && kb < (ULLONG_MAX >> 10) ? (uint64_t)kb << 10 : 0;
}

uint64_t gj_cgroup_limit(const char *text)
{
    if (!text || strncmp(text, "max", 3) == 0)
        return UINT64_MAX;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    return end != text && (*end == '\n' || *end == '\0') && v > 0 ? (uint64_t)v : UINT64_MAX;
}

int gj_cgroup_path(const char *cg, int v1, char *out, size_t cap)
{
    for (const char *line = cg; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        if (c2) {
            size_t ctl_len = (size_t)(c2 - c1 - 1);
            int match = 0;
            if (!v1) {
                match = c1 - line == 1 && line[0] == '0' && ctl_len == 0;
            } else {
                for (const char *t = c1 + 1; t < c2 && !match;) {   /* "cpu,memory" */
                    const char *comma = memchr(t, ',', (size_t)(c2 - t));
                    size_t n = comma ? (size_t)(comma - t) : (size_t)(c2 - t);
                    match = n == 6 && strncmp(t, "memory", 6) == 0;
                    t += n + 1;
                }
            }
            size_t plen = len - (size_t)(c2 + 1 - line);
            if (match && plen < cap) {
                memcpy(out, c2 + 1, plen);
                out[plen] = '\0';
                return 1;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}

static uint64_t read_limit_file(const char *path)
{
    char text[64];
    return read_small(path, text, sizeof text) == 0 ? gj_cgroup_limit(text) : UINT64_MAX;
}

/* The lowest memory limit of the cgroup at rel (under root) and its ancestors. */
static uint64_t cgroup_min_limit(const char *root, const char *rel, const char *file)
{
    char path[GJ_PATH_MAX];
    char dir[GJ_PATH_MAX];
    uint64_t best = UINT64_MAX;
    snprintf(dir, sizeof dir, "%s", rel);
    for (;;) {
        if (snprintf(path, sizeof path, "%s%s/%s", root, strcmp(dir, "/") == 0 ? "" : dir, file) <
            (int)sizeof path) {
            uint64_t v = read_limit_file(path);
            if (v < best)
                best = v;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
            break;
        *slash = '\0';
    }
    if (strcmp(rel, "/") != 0 && snprintf(path, sizeof path, "%s/%s", root, file) < (int)sizeof path) {
        uint64_t v = read_limit_file(path);   /* the root (a container's own view) */
        if (v < best)
            best = v;
    }
    return best;
}

static uint64_t cgroup_limit_of_self(void)
{
    char *cg = malloc(FILE_MAX);
    if (!cg || read_small("/proc/self/cgroup", cg, FILE_MAX) != 0) {
        free(cg);
        return UINT64_MAX;
    }
    char rel[GJ_PATH_MAX];
    uint64_t best = UINT64_MAX;
    if (gj_cgroup_path(cg, 0, rel, sizeof rel))
        best = cgroup_min_limit("/sys/fs/cgroup", rel, "memory.max");
    if (gj_cgroup_path(cg, 1, rel, sizeof rel)) {
        uint64_t v1 = cgroup_min_limit("/sys/fs/cgroup/memory", rel, "memory.limit_in_bytes");
        if (v1 < best)
            best = v1;
    }
    free(cg);
    return best;
}

void gj_host_memory_read(uint64_t fake_total, uint64_t reserve, struct gj_host_memory *out)
{
    memset(out, 0, sizeof *out);
    out->reserve = reserve;
    if (fake_total) {
        out->total = fake_total;
    } else {
        char *mi = malloc(FILE_MAX);
        if (mi && read_small("/proc/meminfo", mi, FILE_MAX) == 0)
            out->total = gj_meminfo_total(mi);
        free(mi);
        uint64_t cg = cgroup_limit_of_self();
        if (cg < out->total)
            out->total = cg;
    }
    if (!out->total) {
        gj_log_warn("host", "the host's memory is unknown: jobs are placed without host admission");
        return;
    }
    out->usable = out->total > reserve ? out->total - reserve : 1;   /* 1: nothing fits, yet counted */
}
