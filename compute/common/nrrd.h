/*
 * nrrd.h — the header of an NRRD file of float32 raw little-endian attached data, the
 * volumes recon and phantom write (compute/recon/io.c) and the portal shows as slices.
 */
#ifndef GJ_NRRD_H
#define GJ_NRRD_H

#include <stddef.h>
#include <stdint.h>

#include "common/gj_error.h"

#define GJ_NRRD_MAX_HEADER 65536

struct gj_nrrd {
    int dim;
    int64_t sizes[4];
    double spacing[4];
    uint64_t data_offset;     /* bytes of header */
};

/* Parses an NRRD header (at most GJ_NRRD_MAX_HEADER bytes) of a file of file_size bytes;
 * only float32 raw little-endian attached data is accepted. -1 with err otherwise. */
int gj_nrrd_parse(const char *buf, size_t len, uint64_t file_size, struct gj_nrrd *h, struct gj_error *err);

#endif
