/*
 * png_gray.h — 8-bit grey images as PNG in memory (libpng), and the windowing that makes
 * them from float values: what the portal's slice and thumbnail routes answer with.
 */
#ifndef GJ_PORTAL_PNG_GRAY_H
#define GJ_PORTAL_PNG_GRAY_H

#include <stddef.h>
#include <stdint.h>

/* Encodes w x h grey pixels (row-major, top row first). 0 with *out (malloc'd, *len bytes),
 * or -1. */
int gj_png_gray8(const unsigned char *px, uint32_t w, uint32_t h, unsigned char **out, size_t *len);

/* The values at fractions q_lo and q_hi (0..1) of n finite floats, from a histogram of
 * 4096 bins between their minimum and maximum (non-finite values are left out). 0, or -1
 * when no value is finite. hi > lo on success. */
int gj_window_percentiles(const float *v, size_t n, double q_lo, double q_hi, double *lo, double *hi);

/* One value to a grey level: lo black, hi white, linear between. */
static inline unsigned char gj_window_grey(float v, double lo, double hi)
{
    if (!(v > lo))
        return 0;
    if (v >= hi)
        return 255;
    return (unsigned char)(255.0 * ((double)v - lo) / (hi - lo) + 0.5);
}

#endif
