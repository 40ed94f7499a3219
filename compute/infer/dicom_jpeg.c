/*
 * dicom_jpeg.c — JPEG baseline / extended (DCT) frames through libjpeg-turbo's
 * TurboJPEG API. Debian's libjpeg-turbo 2.1 is built for 8-bit samples only:
 * 12-bit extended (process 4) frames go to the own decoder in
 * dicom_jpeg_dct.c. A frame that is in fact lossless (SOF3) is handed to the
 * process-14 decoder.
 */
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "dicom_codec.h"

/* The SOF marker of a JPEG stream: 0xC0.. or -1. */
static int sof_marker(const uint8_t *p, size_t n, int *precision)
{
    size_t i = 2;
    while (i + 4 <= n) {
        if (p[i] != 0xFF) {
            i++;
            continue;
        }
        uint8_t m = p[i + 1];
        if (m == 0xFF) {
            i++;
            continue;
        }
        if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
            i += 2;
            continue;
        }
        size_t len = (size_t)p[i + 2] << 8 | p[i + 3];
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            if (i + 4 < n)
                *precision = p[i + 4];
            return m;
        }
        if (m == 0xDA || len < 2)
            return -1;
        i += 2 + len;
    }
    return -1;
}

int gj_dcm_decode_jpeg(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                       struct gj_dcm_raw *raw, struct gj_error *err)
{
    if (n < 4 || p[0] != 0xFF || p[1] != 0xD8)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG frame does not start with SOI");
    int precision = 0;
    int sof = sof_marker(p, n, &precision);
    if (sof == 0xC3)
        return gj_dcm_decode_jpeg_lossless(p, n, img, raw, err);
    if (sof < 0)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG frame has no SOF marker");
    if (precision == 12)
        return gj_dcm_decode_jpeg_dct12(p, n, img, raw, err);
    if (precision != 8)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG %d-bit DCT frames are not supported", precision);
    if (n > 0xFFFFFFFFu)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG frame too large");
    tjhandle tj = tjInitDecompress();
    if (!tj)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "TurboJPEG init failed");
    int w, h, subsamp, cs;
    if (tjDecompressHeader3(tj, p, (unsigned long)n, &w, &h, &subsamp, &cs) < 0) {
        gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG header: %s", tjGetErrorStr2(tj));
        tjDestroy(tj);
        return -1;
    }
    int comps = cs == TJCS_GRAY ? 1 : 3;
    if ((uint32_t)w != img->columns || (uint32_t)h != img->rows || (uint32_t)comps != img->samples_per_pixel) {
        tjDestroy(tj);
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG frame is %d x %d x %d; the dataset says %u x %u x %u",
                          w, h, comps, img->columns, img->rows, img->samples_per_pixel);
    }
    size_t bytes = (size_t)w * (size_t)h * (size_t)comps;
    raw->data = malloc(bytes);
    if (!raw->data) {
        tjDestroy(tj);
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "out of memory");
    }
    int pf = comps == 1 ? TJPF_GRAY : TJPF_RGB;
    if (tjDecompress2(tj, p, (unsigned long)n, raw->data, w, 0, h, pf, TJFLAG_ACCURATEDCT) < 0) {
        /* warnings (e.g. premature end) still produce an image; errors do not */
        if (tjGetErrorCode(tj) == TJERR_FATAL) {
            gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG decode: %s", tjGetErrorStr2(tj));
            tjDestroy(tj);
            return -1;
        }
    }
    tjDestroy(tj);
    raw->rows = (uint32_t)h;
    raw->cols = (uint32_t)w;
    raw->spp = (uint32_t)comps;
    raw->bytes = 1;
    raw->planar = 0;
    raw->color_done = 1;
    return 0;
}
