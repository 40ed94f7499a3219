/*
 * dicom_rle.c — RLE Lossless (PS3.5 Annex G): a 64-byte header of up to 15
 * segment offsets, each segment one byte plane (most significant first) of
 * one sample, PackBits-coded.
 */
#include <stdlib.h>
#include <string.h>

#include "dicom_codec.h"

/* Decodes one PackBits segment into exactly n bytes at out, stride apart. */
static int unpack(const uint8_t *p, size_t len, uint8_t *out, size_t n, size_t stride)
{
    size_t i = 0, o = 0;
    while (o < n && i < len) {
        int8_t c = (int8_t)p[i++];
        if (c >= 0) {
            size_t k = (size_t)c + 1;
            if (k > len - i || k > n - o)
                return -1;
            for (size_t j = 0; j < k; j++)
                out[(o + j) * stride] = p[i + j];
            i += k;
            o += k;
        } else if (c != -128) {
            size_t k = (size_t)(1 - c);
            if (i >= len || k > n - o)
                return -1;
            uint8_t v = p[i++];
            for (size_t j = 0; j < k; j++)
                out[(o + j) * stride] = v;
            o += k;
        }
    }
    return o == n ? 0 : -1;
}

int gj_dcm_decode_rle(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                      struct gj_dcm_raw *raw, struct gj_error *err)
{
    if (n < 64)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "RLE frame shorter than its 64-byte header");
    uint32_t nseg = gj_dcm_le32(p);
    uint32_t bytes = img->bits_allocated / 8, spp = img->samples_per_pixel;
    if (nseg != bytes * spp)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "RLE frame has %u segments; %u expected", nseg, bytes * spp);
    uint64_t npix = (uint64_t)img->rows * img->columns;
    raw->rows = img->rows;
    raw->cols = img->columns;
    raw->spp = spp;
    raw->bytes = (int)bytes;
    raw->planar = 1;
    raw->data = malloc(npix * spp * bytes);
    if (!raw->data)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "out of memory");
    /* where the most significant byte of a host uint16_t lies */
    const uint16_t one = 1;
    const int host_le = *(const uint8_t *)&one == 1;
    for (uint32_t s = 0; s < nseg; s++) {
        uint32_t off = gj_dcm_le32(p + 4 + 4 * s);
        uint32_t stop = s + 1 < nseg ? gj_dcm_le32(p + 8 + 4 * s) : (uint32_t)n;
        if (off < 64 || off > n || stop > n || stop < off)
            return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "RLE segment %u offsets %u..%u outside the frame of %zu bytes", s + 1, off, stop, n);
        uint32_t sample = s / bytes, byte = s % bytes;   /* byte 0: most significant */
        uint8_t *plane = raw->data + (uint64_t)sample * npix * bytes;
        uint8_t *dst = bytes == 2 ? plane + ((byte == 0) == host_le ? 1 : 0) : plane;
        if (unpack(p + off, stop - off, dst, npix, bytes) < 0)
            return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "RLE segment %u is corrupt or too short", s + 1);
    }
    return 0;
}
