/*
 * dicom_writer.h — builds small DICOM files byte by byte for the reader's tests:
 * explicit VR little endian, or implicit VR outside the file meta group while
 * implicit_mode is set. Header-only, used by test_dicom_api.c and test_dicom_hostile.c.
 */
#ifndef GJ_TEST_DICOM_WRITER_H
#define GJ_TEST_DICOM_WRITER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct buf {
    uint8_t *p;
    size_t n, cap;
};

static int implicit_mode;

static inline void put(struct buf *b, const void *data, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            abort();
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static inline void u16(struct buf *b, uint16_t v)
{
    uint8_t x[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
    put(b, x, 2);
}

static inline void u32(struct buf *b, uint32_t v)
{
    uint8_t x[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    put(b, x, 4);
}

/* One element; len 0xFFFFFFFF writes an undefined length and no value. */
static inline void el(struct buf *b, uint16_t g, uint16_t e, const char *vr, const void *val, uint32_t len)
{
    u16(b, g);
    u16(b, e);
    if (implicit_mode && g != 0x0002) {
        u32(b, len);
    } else {
        put(b, vr, 2);
        if (!strcmp(vr, "OB") || !strcmp(vr, "OW") || !strcmp(vr, "SQ") || !strcmp(vr, "UN") ||
            !strcmp(vr, "UT")) {
            u16(b, 0);
            u32(b, len);
        } else {
            u16(b, (uint16_t)len);
        }
    }
    if (val && len != 0xFFFFFFFFu)
        put(b, val, len);
}

/* A text element, padded to even length (UI with NUL, others with a space). */
static inline void str(struct buf *b, uint16_t g, uint16_t e, const char *vr, const char *s)
{
    size_t n = strlen(s);
    char tmp[256];
    memcpy(tmp, s, n);
    if (n % 2)
        tmp[n++] = strcmp(vr, "UI") ? ' ' : 0;
    el(b, g, e, vr, tmp, (uint32_t)n);
}

static inline void us(struct buf *b, uint16_t g, uint16_t e, uint16_t v)
{
    uint8_t x[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
    el(b, g, e, "US", x, 2);
}

/* Preamble, "DICM" and the transfer syntax of the file meta group. */
static inline void meta(struct buf *b, const char *ts)
{
    uint8_t zero[128] = { 0 };
    put(b, zero, 128);
    put(b, "DICM", 4);
    str(b, 0x0002, 0x0010, "UI", ts);
}

#endif
