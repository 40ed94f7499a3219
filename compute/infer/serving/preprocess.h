/*
 * preprocess.h — from a decoded DICOM frame (float32 modality values) to the model's
 * input tensor, as config.json's "preprocessing" says:
 *
 *   window (the file's VOI window, a fixed one, or the frame's min-max; DICOM PS3.3
 *   C.11.2.1.2 LINEAR, C.11.2.1.3.2 LINEAR_EXACT or SIGMOID, output range [0, 1])
 *   -> MONOCHROME1 inversion (y = 1 - y)
 *   -> resize to the model's H x W (bilinear / area / nearest, below)
 *   -> (y - mean[c]) / std[c]
 *   -> channels: 1, or the gray plane replicated to 3; written C x H x W (one NCHW item).
 *
 * Resize methods, with scale = in / out along each axis and pixel centres at i + 0.5:
 *   bilinear  src = (dst + 0.5) * scale - 0.5, clamped below at 0; linear between
 *             floor(src) and the next pixel (the last one repeats): PyTorch's
 *             interpolate(mode="bilinear", align_corners=False, antialias=False).
 *   area      each output pixel is the mean of the input over its footprint
 *             [dst * scale, (dst + 1) * scale), partial pixels weighted by their overlap
 *             (a box filter; equals adaptive average pooling when in is a multiple of out).
 *   nearest   src = floor((dst + 0.5) * scale), clamped to in - 1 (PyTorch "nearest-exact").
 */
#ifndef GJ_PREPROCESS_H
#define GJ_PREPROCESS_H

#include <stddef.h>
#include <stdint.h>

#include "infer/serving/model_repo.h"

/* What the preprocessing needs to know about one frame. */
struct gj_frame_info {
    uint32_t rows, columns;
    int monochrome1;                /* photometric interpretation MONOCHROME1 */
    int has_voi;                    /* the file gives a usable VOI window */
    double voi_center, voi_width;
    enum gj_voi_function voi_function;
};

/* What was applied, for the result. */
struct gj_preprocess_applied {
    const char *window_source;      /* "file", "fixed" or "minmax" */
    double center, width;           /* the window used (minmax: the frame's range) */
    const char *function;           /* "LINEAR", "LINEAR_EXACT", "SIGMOID" */
    int inverted;                   /* MONOCHROME1 inversion applied */
};

/* The VOI functions, output in [0, 1]. LINEAR needs width >= 1, the others width > 0. */
double gj_voi_linear(double x, double center, double width);
double gj_voi_linear_exact(double x, double center, double width);
double gj_voi_sigmoid(double x, double center, double width);

/* Resizes one plane (row-major) from sh x sw to dh x dw. scratch: at least
 * gj_resize_scratch_floats(sh, sw, dh, dw) floats (NULL when that is 0). */
size_t gj_resize_scratch_floats(int sh, int sw, int dh, int dw, enum gj_resize_method m);
void gj_resize_plane(const float *src, int sh, int sw, float *dst, int dh, int dw,
                     enum gj_resize_method m, float *scratch);

/* Preprocesses one frame. frame holds rows*columns modality values and is overwritten
 * (windowed in place). out must hold channels*height*width floats. applied may be NULL.
 * 0, or -1 with a message (allocation failure). */
int gj_preprocess_frame(const struct gj_preprocess_config *pc, const struct gj_frame_info *info,
                        float *frame, float *out, struct gj_preprocess_applied *applied,
                        char *err, size_t errlen);

#endif
