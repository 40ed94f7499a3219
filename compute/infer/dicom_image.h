/*
 * dicom_image.h — what a frame is, as types only: the transfer syntaxes, the
 * photometric interpretations and the image attributes. Shared by the reader
 * (dicom.h, which includes this) and the frame decoders (dicom_codec.h), which
 * need these and nothing of the dataset.
 */
#ifndef GJ_DICOM_IMAGE_H
#define GJ_DICOM_IMAGE_H

#include <stdint.h>

/* Transfer syntaxes the reader knows. */
enum gj_dicom_ts {
    GJ_TS_UNKNOWN = 0,
    GJ_TS_IMPLICIT_LE,      /* 1.2.840.10008.1.2 */
    GJ_TS_EXPLICIT_LE,      /* 1.2.840.10008.1.2.1 */
    GJ_TS_DEFLATED_LE,      /* 1.2.840.10008.1.2.1.99 */
    GJ_TS_EXPLICIT_BE,      /* 1.2.840.10008.1.2.2 */
    GJ_TS_JPEG_BASELINE,    /* 1.2.840.10008.1.2.4.50 */
    GJ_TS_JPEG_EXTENDED,    /* 1.2.840.10008.1.2.4.51 */
    GJ_TS_JPEG_LOSSLESS,    /* 1.2.840.10008.1.2.4.57 */
    GJ_TS_JPEG_LOSSLESS_SV1,/* 1.2.840.10008.1.2.4.70 */
    GJ_TS_JPEGLS_LOSSLESS,  /* 1.2.840.10008.1.2.4.80 */
    GJ_TS_JPEGLS_NEAR,      /* 1.2.840.10008.1.2.4.81 */
    GJ_TS_J2K_LOSSLESS,     /* 1.2.840.10008.1.2.4.90 */
    GJ_TS_J2K,              /* 1.2.840.10008.1.2.4.91 */
    GJ_TS_RLE,              /* 1.2.840.10008.1.2.5 */
};

enum gj_dicom_photometric {
    GJ_PI_UNKNOWN = 0,
    GJ_PI_MONOCHROME1,
    GJ_PI_MONOCHROME2,
    GJ_PI_RGB,
    GJ_PI_YBR_FULL,
    GJ_PI_YBR_FULL_422,
    GJ_PI_PALETTE_COLOR,    /* recognized, not decoded */
    GJ_PI_OTHER,
};

/* What decoding a frame needs; filled by gj_dicom_image_info(). */
struct gj_dicom_image {
    uint32_t rows, columns, frames;
    uint32_t samples_per_pixel;       /* 1 or 3 */
    uint32_t bits_allocated;          /* 8 or 16 */
    uint32_t bits_stored, high_bit;
    uint32_t pixel_representation;    /* 0 unsigned, 1 two's complement */
    uint32_t planar_configuration;    /* native RGB: 0 interleaved, 1 planar */
    enum gj_dicom_photometric photometric;
    char photometric_name[20];
    double rescale_slope;             /* 1 when absent */
    double rescale_intercept;         /* 0 when absent */
    int encapsulated;                 /* 1: compressed fragments */
};

#endif
