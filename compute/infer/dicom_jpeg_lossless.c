/*
 * dicom_jpeg_lossless.c — JPEG lossless, process 14 (ITU T.81 Annex H):
 * SOF3, Huffman-coded differences, predictors 1..7, point transform,
 * restart intervals, 2..16-bit precision, 1..4 components with sampling
 * factors 1x1. libjpeg-turbo 2.1 has no lossless mode, hence this decoder.
 */
#include <stdlib.h>
#include <string.h>

#include "dicom_codec.h"
#include "dicom_jpeg_huff.h"

int gj_dcm_decode_jpeg_lossless(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                                struct gj_dcm_raw *raw, struct gj_error *err)
{
    struct gj_dcm_huff ht[4];
    memset(ht, 0, sizeof ht);
    int precision = 0, width = 0, height = 0, ncomp = 0, restart_interval = 0;
    uint8_t comp_id[4] = { 0 }, comp_table[4] = { 0 };
    int have_sof = 0;
    if (n < 4 || p[0] != 0xFF || p[1] != 0xD8)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG lossless frame does not start with SOI");
    size_t i = 2;
    for (;;) {
        while (i < n && p[i] != 0xFF)
            i++;
        while (i < n && p[i] == 0xFF)
            i++;
        if (i >= n)
            return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG lossless frame ends before its scan");
        uint8_t m = p[i++];
        if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7))
            continue;
        if (m == 0xD9)
            return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG lossless frame has no scan");
        if (i + 2 > n)
            return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG marker truncated");
        size_t len = (size_t)p[i] << 8 | p[i + 1];
        if (len < 2 || len > n - i)
            return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG marker segment length %zu past the end", len);
        const uint8_t *s = p + i + 2;
        size_t sl = len - 2;
        i += len;
        if (m == 0xC4) {
            size_t k = 0;
            while (k < sl) {
                if (sl - k < 17)
                    return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "DHT truncated");
                int tc = s[k] >> 4, th = s[k] & 15;
                if (tc != 0 || th > 3)
                    return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "DHT class %d / table %d invalid for lossless", tc, th);
                int used = gj_dcm_huff_read(&ht[th], s + k + 1, sl - k - 1);
                if (used < 0) {  /* the 16 counts are there (checked above): too many symbols */
                    int total = 0;
                    for (int l = 1; l <= 16; l++)
                        total += s[k + l];
                    return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "DHT holds %d symbols", total);
                }
                k += 1 + (size_t)used;
            }
        } else if (m == 0xDD) {
            if (sl < 2)
                return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "DRI truncated");
            restart_interval = s[0] << 8 | s[1];
        } else if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            if (m != 0xC3)
                return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG SOF%d in a lossless frame", m - 0xC0);
            if (sl < 6)
                return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "SOF3 truncated");
            precision = s[0];
            height = s[1] << 8 | s[2];
            width = s[3] << 8 | s[4];
            ncomp = s[5];
            if (precision < 2 || precision > 16 || ncomp < 1 || ncomp > 4 || sl < 6 + 3 * (size_t)ncomp ||
                width == 0 || height == 0)
                return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "SOF3 invalid (P=%d, %dx%d, %d components)", precision, width, height, ncomp);
            for (int c = 0; c < ncomp; c++) {
                comp_id[c] = s[6 + 3 * c];
                if (s[7 + 3 * c] != 0x11)
                    return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG lossless with subsampling is not supported");
            }
            have_sof = 1;
        } else if (m == 0xDA) {
            if (!have_sof)
                return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG scan before SOF3");
            if (sl < 1 || s[0] != ncomp || sl < 1 + 2 * (size_t)ncomp + 3)
                return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "SOS: only single-scan interleaved frames are supported");
            for (int c = 0; c < ncomp; c++) {
                if (s[1 + 2 * c] != comp_id[c])
                    return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "SOS component order differs from SOF");
                comp_table[c] = s[2 + 2 * c] >> 4;
                if (comp_table[c] > 3 || !ht[comp_table[c]].present)
                    return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "SOS refers to a missing Huffman table");
            }
            int ps = s[1 + 2 * ncomp], pt = s[3 + 2 * ncomp] & 15;
            if (ps < 1 || ps > 7 || pt >= precision)
                return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "SOS predictor %d / point transform %d invalid", ps, pt);
            if ((uint32_t)width != img->columns || (uint32_t)height != img->rows ||
                (uint32_t)ncomp != img->samples_per_pixel)
                return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG frame is %d x %d x %d; the dataset says %u x %u x %u",
                                  width, height, ncomp, img->columns, img->rows, img->samples_per_pixel);
            int bytes = precision > 8 ? 2 : 1;
            if (bytes == 1 && img->bits_allocated == 16)
                bytes = 2;
            uint64_t npix = (uint64_t)width * (uint64_t)height;
            raw->data = malloc(npix * (uint64_t)ncomp * (uint64_t)bytes);
            if (!raw->data)
                return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "out of memory");
            raw->rows = (uint32_t)height;
            raw->cols = (uint32_t)width;
            raw->spp = (uint32_t)ncomp;
            raw->bytes = bytes;
            raw->planar = 0;
            /* decode into int rows, then store */
            int32_t *prev = calloc((size_t)width * (size_t)ncomp, sizeof *prev);
            int32_t *cur = calloc((size_t)width * (size_t)ncomp, sizeof *cur);
            if (!prev || !cur) {
                free(prev);
                free(cur);
                return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "out of memory");
            }
            struct gj_dcm_bitrd b = { .p = p + i, .end = p + n };
            uint32_t mask = (1u << precision) - 1;
            int32_t initial = 1 << (precision - pt - 1);
            long mcu_left = restart_interval;
            int first_line = 1;     /* first line of the image or of a restart interval */
            int reset_pending = 1;  /* next sample uses the initial predictor */
            int bad = 0;
            for (int y = 0; y < height && !bad; y++) {
                for (int x = 0; x < width && !bad; x++) {
                    if (restart_interval) {
                        if (mcu_left == 0) {
                            if (gj_dcm_restart(&b) < 0) {
                                bad = 1;
                                break;
                            }
                            mcu_left = restart_interval;
                            reset_pending = 1;
                            first_line = 1;
                        }
                        mcu_left--;
                    }
                    for (int c = 0; c < ncomp; c++) {
                        int32_t pred;
                        int32_t ra = x > 0 ? cur[(x - 1) * ncomp + c] : 0;
                        int32_t rb = prev[x * ncomp + c];
                        int32_t rc = x > 0 ? prev[(x - 1) * ncomp + c] : 0;
                        if (reset_pending)
                            pred = initial;
                        else if (first_line)
                            pred = ra;
                        else if (x == 0)
                            pred = rb;
                        else {
                            switch (ps) {
                            case 1: pred = ra; break;
                            case 2: pred = rb; break;
                            case 3: pred = rc; break;
                            case 4: pred = ra + rb - rc; break;
                            case 5: pred = ra + ((rb - rc) >> 1); break;
                            case 6: pred = rb + ((ra - rc) >> 1); break;
                            default: pred = (ra + rb) >> 1; break;
                            }
                        }
                        int ssss = gj_dcm_huff_decode(&b, &ht[comp_table[c]]);
                        if (ssss < 0 || ssss > 16) {
                            bad = 1;
                            break;
                        }
                        int32_t diff;
                        if (ssss == 0)
                            diff = 0;
                        else if (ssss == 16)
                            diff = 32768;
                        else {
                            diff = gj_dcm_getbits(&b, ssss);
                            if (diff < (1 << (ssss - 1)))
                                diff -= (1 << ssss) - 1;
                        }
                        cur[x * ncomp + c] = (int32_t)((uint32_t)(pred + diff) & 0xFFFF);
                    }
                    reset_pending = 0;
                    if (b.marker && b.p >= b.end && b.nbits < 0)
                        bad = 1;
                }
                /* store row */
                for (int k = 0; k < width * ncomp; k++) {
                    uint32_t v = ((uint32_t)cur[k] << pt) & mask;
                    uint64_t o = (uint64_t)y * (uint64_t)width * (uint64_t)ncomp + (uint64_t)k;
                    if (bytes == 2)
                        ((uint16_t *)raw->data)[o] = (uint16_t)v;
                    else
                        raw->data[o] = (uint8_t)v;
                }
                int32_t *t = prev;
                prev = cur;
                cur = t;
                first_line = 0;
            }
            free(prev);
            free(cur);
            if (bad)
                return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG lossless scan is corrupt");
            return 0;
        }
        /* other markers (APPn, COM, DQT...) skipped */
    }
}
