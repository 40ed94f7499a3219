/*
 * routes_thumbnail.c — GET /v1/blobs/{id}/thumbnail: the first frame of a DICOM blob (an
 * `infer` job's input) as a grey PNG of at most 256 pixels on its long side, for the
 * portal's table of results.
 *
 * It shows the tenant its own upload, nothing more: no attribute of the file is in the
 * answer, the URL names our blob id only, and nothing of the file is logged. Windowing as a
 * viewer would: the file's VOI window when it has one, else the 0.5 and 99.5 percentiles;
 * MONOCHROME1 is inverted; colour images show their first plane (luminance is not needed
 * for a thumbnail of a radiograph). Decoded within --render-memory (render_budget.h:
 * 413 with the figures for an image that needs more). With --infer-purge-phi a finished job's inputs are
 * gone: 404, and the page shows none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/infer/render_frame.h"
#include "service/portal/png_gray.h"
#include "service/portal/portal.h"

#define BLOB_MAX (64u << 20)
#define THUMB_SIDE 256
#define CACHE_SECONDS 86400

static void thumb_etag(const struct gj_blob_info *info, char etag[48])
{
    char hex[65];
    gj_sha256_hex(info->sha256, hex);
    snprintf(etag, 48, "\"thumb-%.32s\"", hex);
}

/* The blob exported to path (the caller unlinks it). 0, or -1 answered (a 304 included). */
static int export_blob(struct gj_req *r, struct gj_blob_info *info, char *path, size_t path_cap)
{
    PGconn *c = gj_req_db(r);
    if (!c || gj_db_begin(c) != 0) {
        gj_respond_unavailable(r);
        return -1;
    }
    int rc = gj_blob_lookup(c, r->who.tenant_id, r->params[0], info);
    if (rc <= 0) {
        gj_respond_lookup_failed(r, rc);
        return -1;
    }
    char etag[48];
    thumb_etag(info, etag);
    if (gj_portal_not_modified(r, etag, CACHE_SECONDS))
        return -1;
    if (info->size > BLOB_MAX) {
        gj_problem(r, 422, NULL, "the file is over the %u MiB a thumbnail is made from", BLOB_MAX >> 20);
        return -1;
    }
    if (snprintf(path, path_cap, "%s/thumb-%s.dcm", r->srv->cfg.work_dir, r->request_id) >= (int)path_cap) {
        gj_problem(r, 500, NULL, "the work directory path is too long");
        return -1;
    }
    if (gj_blob_export_blob(c, info, path, NULL) != 0) {
        unlink(path);
        gj_problem(r, 500, NULL, "the file could not be read");
        return -1;
    }
    return 0;
}

/* The thumbnail and its PNG, besides the decoded frame (render_budget.h). */
#define THUMB_BYTES (1u << 20)

/* Frame 0's first plane, windowed and box-filtered down to at most THUMB_SIDE pixels a side. */
static unsigned char *render(const struct gj_render_frame *fr, uint32_t *tw, uint32_t *th)
{
    const float *f = fr->pixels;
    uint32_t w = fr->columns, h = fr->rows, side = w > h ? w : h;
    uint32_t step = side > THUMB_SIDE ? (side + THUMB_SIDE - 1) / THUMB_SIDE : 1;
    double lo, hi;
    if (fr->has_window) {
        lo = fr->center - fr->width / 2;
        hi = fr->center + fr->width / 2;
    } else if (gj_window_percentiles(f, (size_t)w * h, 0.005, 0.995, &lo, &hi) != 0) {
        lo = 0;
        hi = 1;
    }
    *tw = (w + step - 1) / step;
    *th = (h + step - 1) / step;
    unsigned char *px = malloc((size_t)*tw * *th);
    for (uint32_t y = 0; px && y < *th; y++)
        for (uint32_t x = 0; x < *tw; x++) {
            double sum = 0;
            uint32_t n = 0;
            for (uint32_t j = y * step; j < (y + 1) * step && j < h; j++)
                for (uint32_t i = x * step; i < (x + 1) * step && i < w; i++, n++)
                    sum += f[(size_t)j * w + i];
            unsigned char g = gj_window_grey((float)(sum / n), lo, hi);
            px[(size_t)y * *tw + x] = fr->inverted ? (unsigned char)(255 - g) : g;
        }
    return px;
}

/* GET /v1/blobs/{id}/thumbnail */
static void thumbnail(struct gj_req *r)
{
    struct gj_blob_info info;
    char path[1300];
    if (export_blob(r, &info, path, sizeof path) != 0)
        return;
    struct gj_render_frame fr;
    int opened = gj_render_frame_open(r, path, info.size, THUMB_BYTES, &fr);
    unlink(path);
    if (opened != 0)
        return;
    unsigned char *png = NULL;
    size_t len = 0;
    uint32_t tw = 0, th = 0;
    unsigned char *px = render(&fr, &tw, &th);
    if (!px || gj_png_gray8(px, tw, th, &png, &len) != 0) {
        gj_problem(r, 500, NULL, "out of memory");
        goto out;
    }
    char etag[48];
    thumb_etag(&info, etag);
    gj_portal_send_png(r, png, len, etag, CACHE_SECONDS);
out:
    free(px);
    gj_render_frame_close(&fr);
}

static const struct gj_route routes[] = {
    { "GET", "/v1/blobs/{id}/thumbnail", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, thumbnail, NULL },
};
const struct gj_route_table gj_routes_portal_thumbnail = { routes, sizeof routes / sizeof routes[0] };
