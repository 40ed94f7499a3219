/*
 * dicom_codec.h — the frame decoders (RLE, JPEG baseline / extended / lossless,
 * JPEG-LS, JPEG 2000): one frame's compressed bytes in, its samples out. They know
 * the image attributes (dicom_image.h) and nothing of the dataset: dicom_parse.c asks
 * where frames start, dicom_pixels.c hands them frames; nothing here calls back.
 */
#ifndef GJ_DICOM_CODEC_H
#define GJ_DICOM_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "common/gj_error.h"
#include "dicom_image.h"

/* err's field for a problem with the pixel data. */
#define GJ_DCM_PIXEL_FIELD "(7FE0,0010)"

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

/* 1 when the fragment (len bytes at p) begins with the start marker of the transfer
 * syntax's codec: where a frame starts when there is no offset table. */
int gj_dcm_codec_starts_frame(enum gj_dicom_ts ts, const uint8_t *p, uint32_t len);

/* 1 when transfer syntax ts has a decoder (its pixel data is compressed). */
int gj_dcm_codec_exists(enum gj_dicom_ts ts);

/* Decodes one frame of transfer syntax ts into raw (raw->data allocated). img gives the
 * expected geometry. 0, or -1 with err (raw->data then NULL). */
int gj_dcm_codec_decode(enum gj_dicom_ts ts, const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                        struct gj_dcm_raw *raw, struct gj_error *err);

/* The decoders themselves, each filling raw from one frame: 0, or -1 with err. */
int gj_dcm_decode_rle(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                      struct gj_dcm_raw *raw, struct gj_error *err);
int gj_dcm_decode_jpeg(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                       struct gj_dcm_raw *raw, struct gj_error *err);
int gj_dcm_decode_jpeg_dct12(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                             struct gj_dcm_raw *raw, struct gj_error *err);
int gj_dcm_decode_jpeg_lossless(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                                struct gj_dcm_raw *raw, struct gj_error *err);
int gj_dcm_decode_jpegls(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                         struct gj_dcm_raw *raw, struct gj_error *err);
int gj_dcm_decode_j2k(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                      struct gj_dcm_raw *raw, struct gj_error *err);

#endif
