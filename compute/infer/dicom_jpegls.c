/*
 * dicom_jpegls.c — JPEG-LS lossless and near-lossless frames through CharLS.
 */
#include <stdlib.h>
#include <string.h>
#include <charls/charls.h>

#include "dicom_codec.h"

int gj_dcm_decode_jpegls(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                         struct gj_dcm_raw *raw, struct gj_error *err)
{
    charls_jpegls_decoder *dec = charls_jpegls_decoder_create();
    if (!dec)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "CharLS init failed");
    charls_jpegls_errc ec;
    struct charls_frame_info fi;
    charls_interleave_mode mode = CHARLS_INTERLEAVE_MODE_NONE;
    size_t need = 0;
    int rc = -1;
    ec = charls_jpegls_decoder_set_source_buffer(dec, p, n);
    if (ec == 0)
        ec = charls_jpegls_decoder_read_header(dec);
    if (ec == 0)
        ec = charls_jpegls_decoder_get_frame_info(dec, &fi);
    if (ec == 0)
        ec = charls_jpegls_decoder_get_interleave_mode(dec, &mode);
    if (ec != 0) {
        gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG-LS header: %s", charls_get_error_message(ec));
        goto out;
    }
    if (fi.width != img->columns || fi.height != img->rows ||
        (uint32_t)fi.component_count != img->samples_per_pixel) {
        gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG-LS frame is %u x %u x %d; the dataset says %u x %u x %u",
                   fi.width, fi.height, fi.component_count, img->columns, img->rows, img->samples_per_pixel);
        goto out;
    }
    if (fi.bits_per_sample < 2 || fi.bits_per_sample > 16) {
        gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG-LS frame of %d bits per sample", fi.bits_per_sample);
        goto out;
    }
    int bytes = fi.bits_per_sample > 8 ? 2 : 1;
    ec = charls_jpegls_decoder_get_destination_size(dec, 0, &need);
    size_t expect = (size_t)fi.width * fi.height * (size_t)fi.component_count * (size_t)bytes;
    if (ec != 0 || need != expect) {
        gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG-LS destination size mismatch");
        goto out;
    }
    raw->data = malloc(need);
    if (!raw->data) {
        gj_error_set(err, GJ_DCM_PIXEL_FIELD, "out of memory");
        goto out;
    }
    ec = charls_jpegls_decoder_decode_to_buffer(dec, raw->data, need, 0);
    if (ec != 0) {
        gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG-LS decode: %s", charls_get_error_message(ec));
        goto out;
    }
    /* 8-bit precision in a 16-bit allocated dataset stays 1 byte a sample:
     * raw->bytes tells the converter, which yields the same values. */
    raw->rows = fi.height;
    raw->cols = fi.width;
    raw->spp = (uint32_t)fi.component_count;
    raw->bytes = bytes;
    raw->planar = fi.component_count > 1 && mode == CHARLS_INTERLEAVE_MODE_NONE;
    rc = 0;
out:
    charls_jpegls_decoder_destroy(dec);
    return rc;
}
