/*
 * dicom_jpeg_dct.c — JPEG extended sequential DCT with 12-bit samples
 * (ITU T.81 process 4, SOF1, Huffman), for grayscale frames, which
 * Debian's 8-bit-only libjpeg-turbo cannot decode. Restart intervals and
 * any DQT precision are handled; progressive, arithmetic coding and
 * multi-component 12-bit frames are rejected with a message.
 * The IDCT is a separable double-precision one, rounded; DCMTK's IJG
 * integer IDCT can differ from it by one or two units (see the tests).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dicom_codec.h"
#include "dicom_jpeg_huff.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static const uint8_t zigzag[64] = {
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
    12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
    35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
    58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
};

/* [x][u] = C(u)/2 * cos((2x+1)u pi/16); computed per call (no shared state). */
static void init_cos(double cos_table[8][8])
{
    for (int x = 0; x < 8; x++)
        for (int u = 0; u < 8; u++)
            cos_table[x][u] = (u == 0 ? sqrt(0.5) : 1.0) * 0.5 * cos((2 * x + 1) * u * M_PI / 16.0);
}

static void idct(double cos_table[8][8], const int32_t in[64], double out[64])
{
    double tmp[64];
    for (int y = 0; y < 8; y++)           /* rows: over u */
        for (int x = 0; x < 8; x++) {
            double s = 0;
            for (int u = 0; u < 8; u++)
                s += cos_table[x][u] * in[y * 8 + u];
            tmp[y * 8 + x] = s;
        }
    for (int x = 0; x < 8; x++)           /* columns: over v */
        for (int y = 0; y < 8; y++) {
            double s = 0;
            for (int v = 0; v < 8; v++)
                s += cos_table[y][v] * tmp[v * 8 + x];
            out[y * 8 + x] = s;
        }
}

/* Dequantized coefficient, clamped so hostile data cannot overflow. */
static inline int32_t deq(int64_t v, int q)
{
    v *= q;
    return (int32_t)(v < -(1 << 28) ? -(1 << 28) : v > (1 << 28) ? (1 << 28) : v);
}

int gj_dcm_decode_jpeg_dct12(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                             struct gj_dcm_raw *raw, struct gj_error *err)
{
    uint16_t qt[4][64];
    int have_q[4] = { 0 };
    struct gj_dcm_huff *dc = calloc(8, sizeof *dc), *ac = dc ? dc + 4 : NULL;
    if (!dc)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "out of memory");
    int precision = 0, width = 0, height = 0, ncomp = 0, restart_interval = 0, tq = 0;
    int have_sof = 0, rc = -1;
    double cos_table[8][8];
    init_cos(cos_table);
    if (n < 4 || p[0] != 0xFF || p[1] != 0xD8) {
        gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG frame does not start with SOI");
        goto out;
    }
    size_t i = 2;
    for (;;) {
        while (i < n && p[i] != 0xFF)
            i++;
        while (i < n && p[i] == 0xFF)
            i++;
        if (i >= n) {
            gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG frame ends before its scan");
            goto out;
        }
        uint8_t m = p[i++];
        if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7))
            continue;
        if (m == 0xD9) {
            gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG frame has no scan");
            goto out;
        }
        if (i + 2 > n) {
            gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG marker truncated");
            goto out;
        }
        size_t len = (size_t)p[i] << 8 | p[i + 1];
        if (len < 2 || len > n - i) {
            gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG marker segment length %zu past the end", len);
            goto out;
        }
        const uint8_t *s = p + i + 2;
        size_t sl = len - 2;
        i += len;
        if (m == 0xDB) {
            size_t k = 0;
            while (k < sl) {
                int pq = s[k] >> 4, t = s[k] & 15;
                size_t need = pq ? 128 : 64;
                if (pq > 1 || t > 3 || sl - k - 1 < need) {
                    gj_error_set(err, GJ_DCM_PIXEL_FIELD, "DQT invalid");
                    goto out;
                }
                for (int z = 0; z < 64; z++)
                    qt[t][z] = pq ? (uint16_t)(s[k + 1 + 2 * z] << 8 | s[k + 2 + 2 * z]) : s[k + 1 + z];
                have_q[t] = 1;
                k += 1 + need;
            }
        } else if (m == 0xC4) {
            size_t k = 0;
            while (k < sl) {
                int tc = s[k] >> 4, th = s[k] & 15;
                if (tc > 1 || th > 3) {
                    gj_error_set(err, GJ_DCM_PIXEL_FIELD, "DHT class %d / table %d invalid", tc, th);
                    goto out;
                }
                int used = gj_dcm_huff_read(tc ? &ac[th] : &dc[th], s + k + 1, sl - k - 1);
                if (used < 0) {
                    gj_error_set(err, GJ_DCM_PIXEL_FIELD, "DHT truncated");
                    goto out;
                }
                k += 1 + (size_t)used;
            }
        } else if (m == 0xDD) {
            if (sl < 2) {
                gj_error_set(err, GJ_DCM_PIXEL_FIELD, "DRI truncated");
                goto out;
            }
            restart_interval = s[0] << 8 | s[1];
        } else if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            if (m != 0xC0 && m != 0xC1) {
                gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG SOF%d (progressive, lossless or arithmetic) in a DCT frame is not supported", m - 0xC0);
                goto out;
            }
            if (sl < 9) {
                gj_error_set(err, GJ_DCM_PIXEL_FIELD, "SOF truncated");
                goto out;
            }
            precision = s[0];
            height = s[1] << 8 | s[2];
            width = s[3] << 8 | s[4];
            ncomp = s[5];
            if ((precision != 8 && precision != 12) || ncomp != 1 || width == 0 || height == 0) {
                gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG DCT frame with P=%d and %d components is not supported "
                           "(12-bit grayscale only here)", precision, ncomp);
                goto out;
            }
            tq = s[8] & 3;   /* one component: sampling factors do not matter */
            have_sof = 1;
        } else if (m == 0xDA) {
            if (!have_sof) {
                gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG scan before SOF");
                goto out;
            }
            if (sl < 6 || s[0] != 1 || s[4] != 63 || s[3] != 0 || s[5] != 0) {
                gj_error_set(err, GJ_DCM_PIXEL_FIELD, "SOS: only one sequential scan is supported");
                goto out;
            }
            int td = s[2] >> 4, ta = s[2] & 15;
            if (td > 3 || ta > 3 || !dc[td].present || !ac[ta].present || !have_q[tq]) {
                gj_error_set(err, GJ_DCM_PIXEL_FIELD, "SOS refers to a missing table");
                goto out;
            }
            if ((uint32_t)width != img->columns || (uint32_t)height != img->rows || img->samples_per_pixel != 1) {
                gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG frame is %d x %d x 1; the dataset says %u x %u x %u",
                           width, height, img->columns, img->rows, img->samples_per_pixel);
                goto out;
            }
            uint64_t npix = (uint64_t)width * (uint64_t)height;
            raw->data = malloc(npix * 2);
            if (!raw->data) {
                gj_error_set(err, GJ_DCM_PIXEL_FIELD, "out of memory");
                goto out;
            }
            raw->rows = (uint32_t)height;
            raw->cols = (uint32_t)width;
            raw->spp = 1;
            raw->bytes = 2;
            uint16_t *o = (uint16_t *)raw->data;
            int bw = (width + 7) / 8, bh = (height + 7) / 8;
            struct gj_dcm_bitrd b = { .p = p + i, .end = p + n };
            int32_t pred = 0, coef[64];
            double blk[64];
            long mcu = 0;
            int maxv = (1 << precision) - 1, shift = 1 << (precision - 1);
            const uint16_t *q = qt[tq];
            for (int by = 0; by < bh; by++) {
                for (int bx = 0; bx < bw; bx++, mcu++) {
                    if (restart_interval && mcu > 0 && mcu % restart_interval == 0) {
                        if (gj_dcm_restart(&b) < 0) {
                            gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG restart marker missing");
                            goto out;
                        }
                        pred = 0;
                    }
                    memset(coef, 0, sizeof coef);
                    int t = gj_dcm_huff_decode(&b, &dc[td]);
                    if (t < 0 || t > 16) {
                        gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG scan is corrupt");
                        goto out;
                    }
                    pred += gj_dcm_extend(gj_dcm_getbits(&b, t), t);
                    if (pred < -(1 << 20) || pred > (1 << 20))
                        pred = pred < 0 ? -(1 << 20) : (1 << 20);
                    coef[0] = deq(pred, q[0]);
                    for (int k = 1; k < 64;) {
                        int rs = gj_dcm_huff_decode(&b, &ac[ta]);
                        if (rs < 0) {
                            gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG scan is corrupt");
                            goto out;
                        }
                        int r = rs >> 4, sz = rs & 15;
                        if (sz == 0) {
                            if (r != 15)
                                break;
                            k += 16;
                            continue;
                        }
                        k += r;
                        if (k > 63) {
                            gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG scan is corrupt");
                            goto out;
                        }
                        coef[zigzag[k]] = deq(gj_dcm_extend(gj_dcm_getbits(&b, sz), sz), q[k]);
                        k++;
                    }
                    idct(cos_table, coef, blk);
                    for (int y = 0; y < 8; y++) {
                        int py = by * 8 + y;
                        if (py >= height)
                            break;
                        for (int x = 0; x < 8; x++) {
                            int px = bx * 8 + x;
                            if (px >= width)
                                break;
                            long v = lround(blk[y * 8 + x]) + shift;
                            o[(uint64_t)py * (uint64_t)width + (uint64_t)px] =
                                (uint16_t)(v < 0 ? 0 : v > maxv ? maxv : v);
                        }
                    }
                }
            }
            rc = 0;
            goto out;
        }
        /* APPn, COM, ... skipped */
    }
out:
    free(dc);
    return rc;
}
