/*
 * dicom_internal.h — shared between the dicom_*.c files; not for users.
 */
#ifndef GJ_DICOM_INTERNAL_H
#define GJ_DICOM_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>

#include "dicom.h"

#define GJ_VR(a, b) ((uint16_t)(((unsigned)(a) << 8) | (unsigned)(b)))

struct gj_dcm_elem {
    uint32_t tag;
    uint16_t vr;          /* GJ_VR('U','S'); from the dictionary for implicit VR; 0 unknown */
    uint8_t depth;        /* 0: top level */
    uint8_t be;           /* value is big endian */
    const uint8_t *val;   /* NULL for sequences */
    uint32_t len;
};

struct gj_dcm_frag {
    const uint8_t *p;
    uint32_t len;
    uint64_t item_off;    /* offset of its item tag from the first fragment's item tag */
};

struct gj_dicom {
    uint8_t *file;        /* the whole file (owned) */
    size_t file_len;
    uint8_t *inflated;    /* deflated TS: the inflated dataset (owned) */
    size_t inflated_len;

    enum gj_dicom_ts ts;
    char ts_uid[72];
    int explicit_vr, big_endian;

    struct gj_dcm_elem *el;
    size_t n_el, cap_el;

    /* Top-level pixel data. */
    int has_pixels;
    int encapsulated;
    uint16_t pixel_vr;
    int pixel_be;
    const uint8_t *pixel;     /* native */
    uint64_t pixel_len;
    const uint8_t *bot;       /* basic offset table (may be NULL) */
    uint32_t bot_len;
    struct gj_dcm_frag *frag;
    size_t n_frag;
    size_t *starts;           /* fragments that begin a frame (start marker), in order */
    size_t n_starts;
};

/* 1 when the fragment begins with the start marker of the transfer syntax's codec. */
int gj_dcm_frag_starts_frame(const gj_dicom *d, const struct gj_dcm_frag *f);

/* A decoded frame before conversion: samples as unsigned 8- or 16-bit
 * integers (bit patterns), host order. */
struct gj_dcm_raw {
    uint32_t rows, cols, spp;
    int bytes;            /* 1 or 2 bytes per sample in data */
    int planar;           /* 1: spp planes; 0: interleaved */
    int color_done;       /* 1: the codec already returned RGB */
    uint8_t *data;        /* owned, rows*cols*spp*bytes */
};

/* A little-endian uint32 (RLE header, basic offset table). */
static inline uint32_t gj_dcm_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* err helpers */
int gj_dcm_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* codecs: each fills raw (allocates raw->data) from one frame's bytes.
 * 0, or -1 with err. img gives the expected geometry. */
int gj_dcm_decode_rle(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                      struct gj_dcm_raw *raw, char *err, size_t errlen);
int gj_dcm_decode_jpeg(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                       struct gj_dcm_raw *raw, char *err, size_t errlen);
int gj_dcm_decode_jpeg_dct12(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                             struct gj_dcm_raw *raw, char *err, size_t errlen);
int gj_dcm_decode_jpeg_lossless(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                                struct gj_dcm_raw *raw, char *err, size_t errlen);
int gj_dcm_decode_jpegls(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                         struct gj_dcm_raw *raw, char *err, size_t errlen);
int gj_dcm_decode_j2k(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                      struct gj_dcm_raw *raw, char *err, size_t errlen);

/* Finds a top-level element; NULL if absent. */
const struct gj_dcm_elem *gj_dcm_find(const gj_dicom *d, uint32_t tag);

#endif
