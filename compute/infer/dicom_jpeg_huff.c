/*
 * dicom_jpeg_huff.c — Huffman tables and bit reader for the own JPEG decoders.
 */
#include <string.h>

#include "dicom_jpeg_huff.h"

int gj_dcm_huff_read(struct gj_dcm_huff *h, const uint8_t *s, size_t sl)
{
    if (sl < 16)
        return -1;
    memset(h, 0, sizeof *h);
    int total = 0;
    for (int l = 1; l <= 16; l++) {
        h->bits[l] = s[l - 1];
        total += s[l - 1];
    }
    if (total > 256 || (size_t)total > sl - 16)
        return -1;
    memcpy(h->vals, s + 16, (size_t)total);
    gj_dcm_huff_build(h);
    h->present = 1;
    return 16 + total;
}

void gj_dcm_huff_build(struct gj_dcm_huff *h)
{
    int code = 0, k = 0;
    memset(h->look_len, 0, sizeof h->look_len);
    for (int l = 1; l <= 16; l++) {
        h->valptr[l] = k;
        h->mincode[l] = code;
        for (int i = 0; i < h->bits[l]; i++, code++, k++) {
            if (l <= 9 && k < 256 && code < (1 << l)) {
                int shift = 9 - l;
                for (int j = 0; j < (1 << shift); j++) {
                    int idx = (code << shift) | j;
                    if (idx < 512 && !h->look_len[idx]) {
                        h->look_len[idx] = (uint8_t)l;
                        h->look_sym[idx] = h->vals[k];
                    }
                }
            }
        }
        h->maxcode[l] = h->bits[l] ? code - 1 : -1;
        code <<= 1;
    }
    h->maxcode[17] = 0x7FFFFFFF;
}

void gj_dcm_fill(struct gj_dcm_bitrd *b)
{
    while (b->nbits <= 24) {
        uint32_t byte = 0;
        if (!b->marker && b->p < b->end) {
            byte = *b->p;
            if (byte == 0xFF) {
                if (b->p + 1 < b->end && b->p[1] == 0x00) {
                    b->p += 2;
                } else {
                    b->marker = 1;
                    byte = 0;
                }
            } else {
                b->p++;
            }
        } else {
            b->marker = 1;
        }
        b->acc |= byte << (24 - b->nbits);
        b->nbits += 8;
    }
}

int gj_dcm_restart(struct gj_dcm_bitrd *b)
{
    b->acc = 0;
    b->nbits = 0;
    b->marker = 0;
    while (b->p + 1 < b->end) {
        if (b->p[0] == 0xFF && b->p[1] >= 0xD0 && b->p[1] <= 0xD7) {
            b->p += 2;
            return 0;
        }
        b->p++;
    }
    return -1;
}
