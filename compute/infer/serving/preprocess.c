/*
 * preprocess.c — DICOM frame to model input tensor (see preprocess.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/serving/preprocess.h"

double gj_voi_linear(double x, double c, double w)
{
    /* PS3.3 C.11.2.1.2.1 with ymin = 0, ymax = 1. */
    if (x <= c - 0.5 - (w - 1.0) / 2.0)
        return 0.0;
    if (x > c - 0.5 + (w - 1.0) / 2.0)
        return 1.0;
    return (x - (c - 0.5)) / (w - 1.0) + 0.5;
}

double gj_voi_linear_exact(double x, double c, double w)
{
    /* PS3.3 C.11.2.1.3.2. */
    if (x <= c - w / 2.0)
        return 0.0;
    if (x > c + w / 2.0)
        return 1.0;
    return (x - c) / w + 0.5;
}

double gj_voi_sigmoid(double x, double c, double w)
{
    /* PS3.3 C.11.2.1.3.1. */
    return 1.0 / (1.0 + exp(-4.0 * (x - c) / w));
}

/* ---- resize ------------------------------------------------------------------------ */

/* Area weights along one axis: for output k, input pixels first[k] .. first[k]+count[k]-1
 * with weights w[off[k] + j]. */
struct area_axis {
    int *first, *count, *off;
    float *w;
};

static void area_axis_free(struct area_axis *a)
{
    free(a->first);
    free(a->count);
    free(a->off);
    free(a->w);
}

static int area_axis_make(struct area_axis *a, int in, int out)
{
    double scale = (double)in / (double)out;
    /* Each output pixel touches at most ceil(scale) + 1 inputs. */
    size_t per = (size_t)ceil(scale) + 2;
    a->first = malloc((size_t)out * sizeof *a->first);
    a->count = malloc((size_t)out * sizeof *a->count);
    a->off = malloc((size_t)out * sizeof *a->off);
    a->w = malloc((size_t)out * per * sizeof *a->w);
    if (!a->first || !a->count || !a->off || !a->w) {
        area_axis_free(a);
        return -1;
    }
    int off = 0;
    for (int k = 0; k < out; k++) {
        double lo = k * scale, hi = (k + 1) * scale;
        if (hi > in)
            hi = in;
        int i0 = (int)floor(lo);
        int i1 = (int)ceil(hi);
        if (i1 > in)
            i1 = in;
        if (i1 <= i0)
            i1 = i0 + 1;
        a->first[k] = i0;
        a->off[k] = off;
        int n = 0;
        for (int i = i0; i < i1; i++) {
            double l = lo > i ? lo : i, h = hi < i + 1 ? hi : i + 1;
            double wt = (h - l) / (hi - lo);
            a->w[off + n++] = (float)(wt > 0 ? wt : 0);
        }
        a->count[k] = n;
        off += n;
    }
    return 0;
}

size_t gj_resize_scratch_floats(int sh, int sw, int dh, int dw, enum gj_resize_method m)
{
    if (sh == dh && sw == dw)   /* gj_resize_plane copies: no scratch */
        return 0;
    if (m == GJ_RESIZE_AREA)
        return (size_t)sh * (size_t)dw;
    return 0;
}

static void resize_nearest(const float *src, int sh, int sw, float *dst, int dh, int dw)
{
    double sy = (double)sh / dh, sx = (double)sw / dw;
    for (int y = 0; y < dh; y++) {
        int iy = (int)floor((y + 0.5) * sy);
        if (iy > sh - 1)
            iy = sh - 1;
        const float *row = src + (size_t)iy * sw;
        for (int x = 0; x < dw; x++) {
            int ix = (int)floor((x + 0.5) * sx);
            if (ix > sw - 1)
                ix = sw - 1;
            dst[(size_t)y * dw + x] = row[ix];
        }
    }
}

static void lin_index(int k, double scale, int in, int *i0, int *i1, float *lambda)
{
    double s = (k + 0.5) * scale - 0.5;
    if (s < 0)
        s = 0;
    int a = (int)s;
    if (a > in - 1)
        a = in - 1;
    *i0 = a;
    *i1 = a < in - 1 ? a + 1 : a;
    *lambda = (float)(s - a);
}

static void resize_bilinear(const float *src, int sh, int sw, float *dst, int dh, int dw)
{
    double sy = (double)sh / dh, sx = (double)sw / dw;
    for (int y = 0; y < dh; y++) {
        int y0, y1;
        float ly;
        lin_index(y, sy, sh, &y0, &y1, &ly);
        const float *r0 = src + (size_t)y0 * sw, *r1 = src + (size_t)y1 * sw;
        for (int x = 0; x < dw; x++) {
            int x0, x1;
            float lx;
            lin_index(x, sx, sw, &x0, &x1, &lx);
            float top = r0[x0] * (1.0f - lx) + r0[x1] * lx;
            float bot = r1[x0] * (1.0f - lx) + r1[x1] * lx;
            dst[(size_t)y * dw + x] = top * (1.0f - ly) + bot * ly;
        }
    }
}

/* Separable box filter: rows first into tmp (sh x dw), then columns. */
static int resize_area(const float *src, int sh, int sw, float *dst, int dh, int dw, float *tmp)
{
    struct area_axis ax = { 0 }, ay = { 0 };
    if (area_axis_make(&ax, sw, dw) || area_axis_make(&ay, sh, dh)) {
        area_axis_free(&ax);
        area_axis_free(&ay);
        return -1;
    }
    for (int y = 0; y < sh; y++) {
        const float *row = src + (size_t)y * sw;
        float *t = tmp + (size_t)y * dw;
        for (int x = 0; x < dw; x++) {
            double s = 0;
            const float *w = ax.w + ax.off[x];
            for (int j = 0; j < ax.count[x]; j++)
                s += (double)w[j] * row[ax.first[x] + j];
            t[x] = (float)s;
        }
    }
    for (int y = 0; y < dh; y++) {
        float *out = dst + (size_t)y * dw;
        const float *w = ay.w + ay.off[y];
        for (int x = 0; x < dw; x++) {
            double s = 0;
            for (int j = 0; j < ay.count[y]; j++)
                s += (double)w[j] * tmp[(size_t)(ay.first[y] + j) * dw + x];
            out[x] = (float)s;
        }
    }
    area_axis_free(&ax);
    area_axis_free(&ay);
    return 0;
}

void gj_resize_plane(const float *src, int sh, int sw, float *dst, int dh, int dw,
                     enum gj_resize_method m, float *scratch)
{
    if (sh == dh && sw == dw) {
        memcpy(dst, src, (size_t)sh * (size_t)sw * sizeof *dst);
        return;
    }
    switch (m) {
    case GJ_RESIZE_NEAREST:
        resize_nearest(src, sh, sw, dst, dh, dw);
        break;
    case GJ_RESIZE_AREA:
        if (resize_area(src, sh, sw, dst, dh, dw, scratch) == 0)
            break;
        /* allocation failed: fall through to bilinear rather than leave dst unset */
        /* fallthrough */
    case GJ_RESIZE_BILINEAR:
    default:
        resize_bilinear(src, sh, sw, dst, dh, dw);
        break;
    }
}

/* ---- the pipeline ------------------------------------------------------------------ */

static const char *const function_names[] = { "LINEAR", "LINEAR_EXACT", "SIGMOID" };

int gj_preprocess_frame(const struct gj_preprocess_config *pc, const struct gj_frame_info *info,
                        float *frame, float *out, struct gj_preprocess_applied *applied,
                        char *err, size_t errlen)
{
    size_t n = (size_t)info->rows * info->columns;
    if (!n || pc->height < 1 || pc->width_px < 1) {
        snprintf(err, errlen, "empty image (%u x %u)", info->rows, info->columns);
        return -1;
    }
    /* Which window. */
    const char *source;
    int minmax = 0;
    double c, w;
    enum gj_voi_function fn;
    if (pc->window_source == GJ_WINDOW_FILE && info->has_voi) {
        source = "file";
        c = info->voi_center;
        w = info->voi_width;
        fn = info->voi_function;
    } else if (pc->window_source != GJ_WINDOW_MINMAX && pc->has_fixed_window) {
        source = "fixed";
        c = pc->center;
        w = pc->width;
        fn = pc->function;
    } else {
        source = "minmax";
        minmax = 1;
        float lo = frame[0], hi = frame[0];
        for (size_t i = 1; i < n; i++) {
            if (frame[i] < lo)
                lo = frame[i];
            if (frame[i] > hi)
                hi = frame[i];
        }
        /* LINEAR_EXACT over [lo, hi]: lo -> 0, hi -> 1. */
        fn = GJ_VOI_LINEAR_EXACT;
        w = (double)hi - (double)lo;
        c = ((double)lo + (double)hi) / 2.0;
    }
    int invert = pc->invert_monochrome1 && info->monochrome1;
    /* Windowed, then inverted for MONOCHROME1 (y = 1 - y), in one pass over the frame. */
    if (minmax && !(w > 0)) {
        float y = invert ? 1.0f : 0.0f;
        for (size_t i = 0; i < n; i++)
            frame[i] = y;
    } else {
        for (size_t i = 0; i < n; i++) {
            double x = frame[i], y;
            switch (fn) {
            case GJ_VOI_LINEAR_EXACT: y = gj_voi_linear_exact(x, c, w); break;
            case GJ_VOI_SIGMOID: y = gj_voi_sigmoid(x, c, w); break;
            case GJ_VOI_LINEAR:
            default: y = gj_voi_linear(x, c, w); break;
            }
            float fy = (float)y;
            frame[i] = invert ? 1.0f - fy : fy;
        }
    }
    if (applied) {
        applied->window_source = source;
        applied->center = c;
        applied->width = w;
        applied->function = function_names[fn];
        applied->inverted = invert;
    }

    size_t plane = (size_t)pc->height * (size_t)pc->width_px;
    size_t ns = gj_resize_scratch_floats((int)info->rows, (int)info->columns, pc->height,
                                         pc->width_px, pc->resize);
    float *scratch = NULL;
    if (ns && !(scratch = malloc(ns * sizeof *scratch))) {
        snprintf(err, errlen, "out of memory resizing a %u x %u image", info->rows,
                 info->columns);
        return -1;
    }
    gj_resize_plane(frame, (int)info->rows, (int)info->columns, out, pc->height, pc->width_px,
                    pc->resize, scratch);
    free(scratch);
    for (int ch = pc->channels - 1; ch >= 0; ch--) {
        float *dstp = out + (size_t)ch * plane;
        float m = pc->mean[ch], s = pc->std[ch];
        for (size_t i = 0; i < plane; i++)
            dstp[i] = (out[i] - m) / s;   /* ch 0 last: out[i] is still the gray value */
    }
    return 0;
}
