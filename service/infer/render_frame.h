/*
 * render_frame.h — the first frame of a DICOM file as floats, decoded within the server's
 * render budget (render_budget.h), for a module that shows images without reading DICOM
 * itself (the portal's thumbnails): nothing of compute/infer/dicom.h in this header.
 */
#ifndef GJ_INFER_RENDER_FRAME_H
#define GJ_INFER_RENDER_FRAME_H

#include <stdint.h>

#include "service/http/http_server.h"

struct gj_render;

struct gj_render_frame {
    float *pixels;          /* frame 0, rows of columns values first (its first plane) */
    uint32_t columns, rows;
    int has_window;         /* the file's VOI window: center, width (>= 1) */
    double center, width;
    int inverted;           /* MONOCHROME1: high values are dark */
    struct gj_render *render;   /* the file and the budget it holds, until the close */
};

/* Opens and decodes the file at path (file_bytes long); route_bytes: what the caller
 * builds from the frame, counted in the budget with it. 0 with *out (to
 * gj_render_frame_close), or -1 answered (render_budget.h's answers; 422 for pixels that
 * cannot be decoded). */
int gj_render_frame_open(struct gj_req *r, const char *path, uint64_t file_bytes, uint64_t route_bytes,
                         struct gj_render_frame *out);
void gj_render_frame_close(struct gj_render_frame *f);

#endif
