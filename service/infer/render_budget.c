/*
 * render_budget.c — a DICOM instance opened for rendering within --render-memory
 * (render_budget.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "service/base/mem_budget.h"
#include "service/infer/render_budget.h"
#include "service/server.h"

#define HEADER_INFLATE_MAX ((uint64_t)4 << 20)   /* a deflated dataset's attributes, read to price it */
#define DEFLATE_TAIL ((uint64_t)1 << 20)         /* elements after a deflated dataset's pixel data */

/* "256 KiB", "1793 MiB": rounded up. */
static const char *size_text(uint64_t bytes, char buf[32])
{
    if (bytes < ((uint64_t)1 << 20) && bytes % 1024 == 0)
        snprintf(buf, 32, "%" PRIu64 " KiB", bytes >> 10);
    else if (bytes < ((uint64_t)1 << 20))
        snprintf(buf, 32, "%" PRIu64 " KiB", (bytes >> 10) + 1);
    else
        snprintf(buf, 32, "%" PRIu64 " MiB", (bytes + ((uint64_t)1 << 20) - 1) >> 20);
    return buf;
}

static void respond_busy(struct gj_req *r, uint64_t need)
{
    char a[32], b[32];
    struct MHD_Response *resp = gj_problem(r, 503, NULL,
                                           "other images are being decoded: this one needs %s of the %s of "
                                           "--render-memory; retry shortly",
                                           size_text(need, a), size_text(r->srv->render_memory.total, b));
    if (resp)
        MHD_add_response_header(resp, "Retry-After", "1");
}

/* Reads the attributes up to the pixel data, and prices the whole render. 0 or -1 with err. */
static int price(const char *path, uint64_t file_bytes, uint64_t header_max, gj_render_bytes_fn route_bytes,
                 const void *arg, struct gj_dicom_image *img, uint64_t *inflated, uint64_t *need,
                 struct gj_error *err)
{
    const struct gj_dicom_open_limits lim = { .max_inflated = header_max, .header_only = 1 };
    gj_dicom *d = NULL;
    int rc = gj_dicom_open_file_limited(path, &lim, &d, err);
    if (rc == 0)
        rc = gj_dicom_image_info(d, img, err);
    *inflated = rc == 0 && gj_dicom_inflated_bytes(d) ? gj_dicom_inflated_bytes(d) + DEFLATE_TAIL : 0;
    gj_dicom_free(d);
    if (rc != 0)
        return -1;
    /* compressed frames in several fragments are joined: a copy of at most the file */
    *need = file_bytes * (img->encapsulated ? 2 : 1) + *inflated + gj_dicom_decode_bytes(img) +
            gj_dicom_frame_floats(img) * sizeof(float) + route_bytes(img, arg);
    return 0;
}

int gj_render_open(struct gj_req *r, const char *path, uint64_t file_bytes, gj_render_bytes_fn route_bytes,
                   const void *arg, struct gj_render *out)
{
    memset(out, 0, sizeof *out);
    struct gj_mem_budget *b = &r->srv->render_memory;
    char a[32], c[32];
    if (file_bytes >= b->total) {
        gj_problem(r, 413, NULL, "the file is %s: decoding it here needs more than the %s of --render-memory",
                   size_text(file_bytes, a), size_text(b->total, c));
        return -1;
    }
    uint64_t header_max = b->total - file_bytes < HEADER_INFLATE_MAX ? b->total - file_bytes : HEADER_INFLATE_MAX;
    if (gj_mem_budget_take(b, file_bytes + header_max) != GJ_MEM_TAKEN) {
        respond_busy(r, file_bytes + header_max);
        return -1;
    }
    struct gj_error err = { 0 };
    uint64_t inflated = 0, need = 0;
    int rc = price(path, file_bytes, header_max, route_bytes, arg, &out->img, &inflated, &need, &err);
    gj_mem_budget_give(b, file_bytes + header_max);
    if (rc != 0) {
        gj_problem(r, 422, NULL, "the instance's pixels cannot be read: %s", err.message);
        return -1;
    }
    enum gj_mem_take taken = gj_mem_budget_take(b, need);
    if (taken == GJ_MEM_NEVER) {
        gj_problem(r, 413, NULL, "the image is %u x %u (%u sample%s of %u bits): decoding it here needs %s, over the "
                   "%s of --render-memory", out->img.columns, out->img.rows, out->img.samples_per_pixel,
                   out->img.samples_per_pixel == 1 ? "" : "s", out->img.bits_allocated, size_text(need, a),
                   size_text(b->total, c));
        return -1;
    }
    if (taken == GJ_MEM_BUSY) {
        respond_busy(r, need);
        return -1;
    }
    const struct gj_dicom_open_limits lim = { .max_inflated = inflated };
    if (gj_dicom_open_file_limited(path, &lim, &out->d, &err) != 0) {
        gj_mem_budget_give(b, need);
        gj_problem(r, 422, NULL, "the instance's pixels cannot be read: %s", err.message);
        return -1;
    }
    out->held = need;
    out->budget = b;
    return 0;
}

void gj_render_close(struct gj_render *rd)
{
    gj_dicom_free(rd->d);
    rd->d = NULL;
    if (rd->budget)
        gj_mem_budget_give(rd->budget, rd->held);
    rd->held = 0;
    rd->budget = NULL;
}
