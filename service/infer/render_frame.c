/*
 * render_frame.c — the first frame of a DICOM file, decoded within the render budget
 * (render_frame.h).
 */
#include <stdlib.h>
#include <string.h>

#include "service/infer/render_budget.h"
#include "service/infer/render_frame.h"

static uint64_t caller_bytes(const struct gj_dicom_image *img, const void *arg)
{
    (void)img;
    return *(const uint64_t *)arg;
}

int gj_render_frame_open(struct gj_req *r, const char *path, uint64_t file_bytes, uint64_t route_bytes,
                         struct gj_render_frame *out)
{
    memset(out, 0, sizeof *out);
    struct gj_render *rd = malloc(sizeof *rd);
    if (!rd) {
        gj_problem(r, 500, NULL, "out of memory");
        return -1;
    }
    if (gj_render_open(r, path, file_bytes, caller_bytes, &route_bytes, rd) != 0) {
        free(rd);
        return -1;
    }
    out->render = rd;
    struct gj_error err;
    gj_error_clear(&err);
    uint64_t n = gj_dicom_frame_floats(&rd->img);
    out->pixels = malloc(n * sizeof *out->pixels);
    if (!out->pixels || gj_dicom_decode_frame(rd->d, 0, out->pixels, n, &err) != 0) {
        gj_problem(r, 422, NULL, "the image could not be decoded: %s", out->pixels ? err.message : "out of memory");
        gj_render_frame_close(out);
        return -1;
    }
    out->columns = rd->img.columns;
    out->rows = rd->img.rows;
    out->has_window = gj_dicom_window(rd->d, &out->center, &out->width) == 0 && out->width >= 1;
    out->inverted = rd->img.photometric == GJ_PI_MONOCHROME1;
    return 0;
}

void gj_render_frame_close(struct gj_render_frame *f)
{
    free(f->pixels);
    f->pixels = NULL;
    if (f->render) {
        gj_render_close(f->render);
        free(f->render);
    }
    f->render = NULL;
}
