/*
 * render_budget.h — a DICOM instance opened to render its first frame within the host
 * memory all renders may hold together (--render-memory, mem_budget.h): read for its
 * attributes first (a deflated dataset inflated only up to its pixel data), priced
 * (the file, the inflated dataset, the decoded frame, what the route builds from it),
 * the price taken from the server's budget, and only then read whole. So a small file
 * that inflates to a huge image is refused before it costs anything. Used by WADO-RS
 * rendered and frames (service/infer) and the portal's thumbnails.
 */
#ifndef GJ_RENDER_BUDGET_H
#define GJ_RENDER_BUDGET_H

#include <stdint.h>

#include "infer/dicom.h"
#include "service/http/http_server.h"

struct gj_render {
    gj_dicom *d;
    struct gj_dicom_image img;
    uint64_t held;               /* taken from the server's render budget */
    struct gj_mem_budget *budget;
};

/* The bytes a route builds from the decoded frame (its 8-bit copy, the encoded answer);
 * arg is gj_render_open's. */
typedef uint64_t (*gj_render_bytes_fn)(const struct gj_dicom_image *img, const void *arg);

/* Opens the DICOM file at path (file_bytes long) within the budget. 0: opened, *out to
 * gj_render_close. -1: answered: 413 naming the image's size, the bytes it needs and
 * the limit; 503 (Retry-After) while other renders hold the budget; 422 for a file the
 * reader refuses. */
int gj_render_open(struct gj_req *r, const char *path, uint64_t file_bytes, gj_render_bytes_fn route_bytes,
                   const void *arg, struct gj_render *out);
void gj_render_close(struct gj_render *rd);

#endif
