/*
 * dicom_codec.c — which decoder a transfer syntax's frames go to, and how a frame
 * of each begins (dicom_codec.h).
 */
#include <string.h>

#include "dicom_codec.h"

int gj_dcm_codec_starts_frame(enum gj_dicom_ts ts, const uint8_t *p, uint32_t len)
{
    if (len < 2)
        return 0;
    switch (ts) {
    case GJ_TS_J2K: case GJ_TS_J2K_LOSSLESS:
        return (p[0] == 0xFF && p[1] == 0x4F) || (len >= 12 && !memcmp(p, "\0\0\0\x0cjP  ", 8));
    case GJ_TS_RLE:
        return 1;
    default:
        return p[0] == 0xFF && p[1] == 0xD8;
    }
}

int gj_dcm_codec_exists(enum gj_dicom_ts ts)
{
    switch (ts) {
    case GJ_TS_RLE: case GJ_TS_JPEG_BASELINE: case GJ_TS_JPEG_EXTENDED: case GJ_TS_JPEG_LOSSLESS:
    case GJ_TS_JPEG_LOSSLESS_SV1: case GJ_TS_JPEGLS_LOSSLESS: case GJ_TS_JPEGLS_NEAR: case GJ_TS_J2K:
    case GJ_TS_J2K_LOSSLESS:
        return 1;
    default:
        return 0;
    }
}

int gj_dcm_codec_decode(enum gj_dicom_ts ts, const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                        struct gj_dcm_raw *raw, struct gj_error *err)
{
    switch (ts) {
    case GJ_TS_RLE:
        return gj_dcm_decode_rle(p, n, img, raw, err);
    case GJ_TS_JPEG_BASELINE:
    case GJ_TS_JPEG_EXTENDED:
        return gj_dcm_decode_jpeg(p, n, img, raw, err);
    case GJ_TS_JPEG_LOSSLESS:
    case GJ_TS_JPEG_LOSSLESS_SV1:
        return gj_dcm_decode_jpeg_lossless(p, n, img, raw, err);
    case GJ_TS_JPEGLS_LOSSLESS:
    case GJ_TS_JPEGLS_NEAR:
        return gj_dcm_decode_jpegls(p, n, img, raw, err);
    case GJ_TS_J2K:
    case GJ_TS_J2K_LOSSLESS:
        return gj_dcm_decode_j2k(p, n, img, raw, err);
    default:
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "no decoder for the transfer syntax of this pixel data");
    }
}
