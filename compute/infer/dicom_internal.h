/*
 * dicom_internal.h — the parsed dataset, shared by dicom_parse.c (which builds it)
 * and dicom_pixels.c (which reads its pixel data); not for users, nor for the codecs
 * (dicom_codec.h).
 */
#ifndef GJ_DICOM_INTERNAL_H
#define GJ_DICOM_INTERNAL_H

#include <stdint.h>
#include <stddef.h>

#include "common/gj_error.h"
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
    int inflated_cut;     /* header_only: the inflated dataset ends at max_inflated */
    int header_only;      /* opened up to the top-level pixel data (gj_dicom_open_limits) */
    uint64_t pixel_offset;   /* header_only: where its value begins in the dataset */

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

/* err with its field the tag, "(0028,0010)"; returns -1. */
int gj_dcm_tag_error(struct gj_error *err, uint32_t tag, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The VR of a standard attribute (dicom_dict.c, PS3.6), GJ_VR('U','S'); 0 if unknown. */
uint16_t gj_dcm_dict_vr(uint32_t tag);

/* Finds a top-level element; NULL if absent. */
const struct gj_dcm_elem *gj_dcm_find(const gj_dicom *d, uint32_t tag);

#endif
