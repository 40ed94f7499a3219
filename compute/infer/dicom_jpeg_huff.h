/*
 * dicom_jpeg_huff.h — Huffman tables and the entropy-coded-segment bit reader
 * shared by the own JPEG decoders (lossless process 14, 12-bit DCT).
 * Past the end of the data or at a marker the reader yields zero bits, so a
 * truncated scan decodes to garbage within its bounds, never out of them.
 */
#ifndef GJ_DICOM_JPEG_HUFF_H
#define GJ_DICOM_JPEG_HUFF_H

#include <stdint.h>

struct gj_dcm_huff {
    int present;
    uint8_t bits[17];      /* bits[l]: number of codes of length l */
    uint8_t vals[256];
    int32_t mincode[17], maxcode[18], valptr[17];
    /* 9-bit lookahead: length (0: longer code) and symbol */
    uint8_t look_len[512], look_sym[512];
};

struct gj_dcm_bitrd {
    const uint8_t *p, *end;
    uint32_t acc;
    int nbits;
    int marker;            /* a marker (or the end) was hit: only zero bits follow */
};

/* Reads a DHT table body (bits[1..16] then symbols) at s, sl bytes left.
 * Returns bytes consumed or -1. */
int gj_dcm_huff_read(struct gj_dcm_huff *h, const uint8_t *s, size_t sl);
void gj_dcm_huff_build(struct gj_dcm_huff *h);
void gj_dcm_fill(struct gj_dcm_bitrd *b);
/* Skips to after the next RSTn marker and resets the reader. 0 or -1. */
int gj_dcm_restart(struct gj_dcm_bitrd *b);

static inline int gj_dcm_getbits(struct gj_dcm_bitrd *b, int n)
{
    if (n == 0)
        return 0;
    if (b->nbits < n)
        gj_dcm_fill(b);
    int v = (int)(b->acc >> (32 - n));
    b->acc <<= n;
    b->nbits -= n;
    return v;
}

/* The next symbol, or -1 for an invalid code. */
static inline int gj_dcm_huff_decode(struct gj_dcm_bitrd *b, const struct gj_dcm_huff *h)
{
    if (b->nbits < 16)
        gj_dcm_fill(b);
    unsigned look = b->acc >> 23;
    int l = h->look_len[look];
    if (l) {
        b->acc <<= l;
        b->nbits -= l;
        return h->look_sym[look];
    }
    int code = (int)(b->acc >> 23);
    b->acc <<= 9;
    b->nbits -= 9;
    for (l = 10; l <= 16; l++) {
        code = (code << 1) | gj_dcm_getbits(b, 1);
        if (h->maxcode[l] >= 0 && code <= h->maxcode[l] && code >= h->mincode[l]) {
            int idx = h->valptr[l] + code - h->mincode[l];
            return idx < 256 ? h->vals[idx] : -1;
        }
    }
    return -1;
}

/* F.2.2.1 EXTEND */
static inline int gj_dcm_extend(int v, int s)
{
    return s == 0 ? 0 : (v < (1 << (s - 1)) ? v - (1 << s) + 1 : v);
}

#endif
