/*
 * png_gray.c — in-memory PNG encoding of grey images, and histogram percentiles (png_gray.h).
 */
#include <math.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "service/portal/png_gray.h"

#define HIST_BINS 4096

struct membuf {
    unsigned char *data;
    size_t len, cap;
    int failed;
};

static void mem_write(png_structp png, png_bytep data, png_size_t n)
{
    struct membuf *m = png_get_io_ptr(png);
    if (m->failed)
        return;
    if (m->len + n > m->cap) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap < m->len + n)
            cap *= 2;
        unsigned char *nd = realloc(m->data, cap);
        if (!nd) {
            m->failed = 1;
            return;
        }
        m->data = nd;
        m->cap = cap;
    }
    memcpy(m->data + m->len, data, n);
    m->len += n;
}

static void mem_flush(png_structp png)
{
    (void)png;
}

int gj_png_gray8(const unsigned char *px, uint32_t w, uint32_t h, unsigned char **out, size_t *len)
{
    /* on the heap: what libpng's callbacks change must survive its longjmp */
    struct membuf *m = calloc(1, sizeof *m);
    if (!m)
        return -1;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(m->data);
        free(m);
        return -1;
    }
    png_set_write_fn(png, m, mem_write, mem_flush);
    /* fast: a slice is rendered on each move of the slider */
    png_set_compression_level(png, 3);
    png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (uint32_t r = 0; r < h; r++)
        png_write_row(png, (png_const_bytep)(px + (size_t)r * w));
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    int ok = !m->failed;
    if (ok) {
        *out = m->data;
        *len = m->len;
    } else {
        free(m->data);
    }
    free(m);
    return ok ? 0 : -1;
}

int gj_window_percentiles(const float *v, size_t n, double q_lo, double q_hi, double *lo, double *hi)
{
    double mn = INFINITY, mx = -INFINITY;
    size_t finite = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) {
            mn = v[i] < mn ? v[i] : mn;
            mx = v[i] > mx ? v[i] : mx;
            finite++;
        }
    if (!finite)
        return -1;
    if (!(mx > mn)) {
        *lo = mn - 0.5;
        *hi = mn + 0.5;
        return 0;
    }
    size_t *hist = calloc(HIST_BINS, sizeof *hist);
    if (!hist) {
        *lo = mn;
        *hi = mx;
        return 0;
    }
    double scale = (HIST_BINS - 1) / (mx - mn);
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            hist[(size_t)(((double)v[i] - mn) * scale)]++;
    size_t want_lo = (size_t)(q_lo * (double)(finite - 1)), want_hi = (size_t)(q_hi * (double)(finite - 1));
    size_t seen = 0;
    int b_lo = -1, b_hi = HIST_BINS - 1;
    for (int b = 0; b < HIST_BINS; b++) {
        seen += hist[b];
        if (b_lo < 0 && seen > want_lo)
            b_lo = b;
        if (seen > want_hi) {
            b_hi = b;
            break;
        }
    }
    free(hist);
    *lo = mn + (double)(b_lo < 0 ? 0 : b_lo) / scale;
    *hi = mn + (double)(b_hi + 1) / scale;
    if (!(*hi > *lo))
        *hi = *lo + (mx - mn) / HIST_BINS;
    return 0;
}
