/*
 * nrrd_fuzz.c — libFuzzer harness for the recon module's projection input
 * (compute/recon/io.c): the input is a whole projection file, NRRD or raw, read the
 * way the recon kind reads it (rc_read_projections on a path: here a memfd, so no
 * disk is touched), and its header parsed the way the slab assembly parses a child's
 * volume (gj_nrrd_parse on at most 64 KiB). The geometry's float count is what the
 * file claims (so the data path runs), then one more (the size check); the range read
 * is chosen by the last byte.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "recon/recon.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd = -1;
static char path[64];

/* The input as the file at `path`. */
static int put_file(const uint8_t *data, size_t size)
{
    if (memfd < 0) {
        memfd = memfd_create("nrrd_fuzz", 0);
        if (memfd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    }
    if (ftruncate(memfd, 0) != 0 || (size && pwrite(memfd, data, size, 0) != (ssize_t)size))
        abort();
    return 0;
}

/* Floats the file holds by its own account (header or size); 0 when it is refused. */
static uint64_t claimed_floats(const uint8_t *data, size_t size)
{
    struct gj_error err = { 0 };
    if (size >= 7 && memcmp(data, "NRRD000", 7) == 0) {
        struct gj_nrrd h;
        if (gj_nrrd_parse((const char *)data, size < 65536 ? size : 65536, size, &h, &err) != 0) {
            if (!err.message[0])
                abort();   /* every refusal says why */
            return 0;
        }
        if (h.data_offset > size)
            abort();
        return (size - h.data_offset) / 4;
    }
    return size / 4;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    put_file(data, size);
    uint64_t total = claimed_floats(data, size);
    for (uint64_t t = total ? total : 1; t <= total + 1; t++) {
        uint64_t first = size ? t * (data[size - 1] % 4) / 4 : 0, count = t - first;
        float *out = malloc((size_t)count * sizeof *out + 1);
        if (!out)
            abort();
        struct gj_error err = { 0 };
        int rc = rc_read_projections(path, out, t, first, count, NULL, &err);
        if (rc != 0 && !err.message[0])
            abort();
        if (rc == 0 && t != total)
            abort();   /* a file accepted with the wrong number of floats */
        free(out);
    }
    return 0;
}
