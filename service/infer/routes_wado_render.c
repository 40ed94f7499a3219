/*
 * routes_wado_render.c — WADO-RS rendered and frame retrieval (PS3.18 §10.4) of an
 * instance the tenant stored by STOW-RS:
 *
 *   GET /dicomweb/studies/{study}/series/{series}/instances/{instance}/rendered
 *       its first frame as image/jpeg (the default) or image/png, 8 bits, grey or RGB,
 *       through the window asked for (window=center,width[,linear|linear-exact|sigmoid],
 *       grey only), else the instance's VOI window, else its full range; MONOCHROME1
 *       inverted; quality=1..100 for JPEG (default 90)
 *   GET /dicomweb/studies/{study}/series/{series}/instances/{instance}/frames/{frames}
 *       the listed frames (1-based, comma separated) as multipart/related;
 *       type="application/octet-stream": native pixel data, little endian, at the
 *       instance's Bits Allocated, colour interleaved, whatever the transfer syntax
 *
 * The instance is exported from its blob to a scratch file, parsed and decoded
 * (compute/infer/dicom.h), and the file removed; both routes decode within --render-memory
 * (render_budget.h: 413 with the figures for an image that needs more). 406 for an Accept it cannot serve,
 * 404 for another tenant's instance or a frame past the last, 400 naming the parameter
 * for a bad quality or window, or any other parameter (viewport is not supported).
 */
#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/infer/infer.h"
#include "service/base/log.h"
#include "service/infer/render_budget.h"

#define COMPONENT "dicomweb"
#define FRAMES_MAX 1000
#define FRAMES_MAX_BYTES ((uint64_t)256 << 20)   /* one answer, built in memory */
#define JPEG_QUALITY 90

/* The tenant's instance named by the path, exported to path (the caller unlinks it);
 * *size its bytes. 0, or -1 with a response prepared. */
static int export_instance(struct gj_req *r, char *path, size_t path_cap, uint64_t *size)
{
    for (int i = 0; i < 3; i++)
        if (!gj_infer_uid_ok(r->params[i])) {
            gj_problem(r, 400, NULL, "the path holds UIDs (digits and dots, at most 64)");
            return -1;
        }
    const char *p[4] = { r->who.tenant_id, r->params[0], r->params[1], r->params[2] };
    PGconn *c = gj_req_db(r);
    PGresult *res = c ? gj_db_exec(c,
                                   "SELECT b.id, b.size FROM dicom_instances d JOIN blobs b ON b.id = d.blob_id"
                                   " WHERE d.tenant_id = $1::uuid AND d.study_uid = $2 AND d.series_uid = $3"
                                   " AND d.sop_uid = $4", 4, p, NULL) : NULL;
    if (!res) {
        gj_respond_unavailable(r);
        return -1;
    }
    if (PQntuples(res) == 0) {
        PQclear(res);
        gj_respond_not_found(r);
        return -1;
    }
    char blob_id[GJ_UUID_LEN + 1];
    snprintf(blob_id, sizeof blob_id, "%s", PQgetvalue(res, 0, 0));
    *size = strtoull(PQgetvalue(res, 0, 1), NULL, 10);
    PQclear(res);
    if (snprintf(path, path_cap, "%s/wado-%s.dcm", r->srv->cfg.work_dir, r->request_id) >= (int)path_cap) {
        gj_problem(r, 500, NULL, "the work directory path is too long");
        return -1;
    }
    if (gj_blob_export_id(c, blob_id, path, NULL) != 0) {
        unlink(path);
        gj_respond_unavailable(r);
        return -1;
    }
    return 0;
}

/* The rendered route's query (PS3.18 8.3.5.1): quality (JPEG, 1 to 100) and
 * window=center,width[,function] (linear, the default; linear-exact; sigmoid: PS3.3
 * C.11.2.1.2), which replaces the instance's own VOI window for grey images. */
enum voi_fn { VOI_LINEAR, VOI_LINEAR_EXACT, VOI_SIGMOID };
struct render_opts {
    int quality;
    int window;                  /* 1 when window= was given */
    double center, width;
    enum voi_fn fn;
    const char *bad_param;       /* the parameter at fault (NULL: none) */
    char bad[200];               /* the 400's message */
};

static int parse_window(struct render_opts *o, const char *v)
{
    char *end;
    o->center = strtod(v, &end);
    if (end == v || *end != ',' || !isfinite(o->center))
        return -1;
    const char *w = end + 1;
    o->width = strtod(w, &end);
    if (end == w || (*end && *end != ',') || !isfinite(o->width))
        return -1;
    const char *fn = *end ? end + 1 : "linear";
    if (strcmp(fn, "linear") == 0)
        o->fn = VOI_LINEAR;
    else if (strcmp(fn, "linear-exact") == 0)
        o->fn = VOI_LINEAR_EXACT;
    else if (strcmp(fn, "sigmoid") == 0)
        o->fn = VOI_SIGMOID;
    else
        return -1;
    o->window = 1;
    return o->fn == VOI_LINEAR ? (o->width >= 1 ? 0 : -1) : (o->width > 0 ? 0 : -1);
}

static enum MHD_Result render_param(void *cls, enum MHD_ValueKind kind, const char *name, const char *value)
{
    (void)kind;
    struct render_opts *o = cls;
    char *end;
    if (!value)
        value = "";
    if (strcmp(name, "quality") == 0) {
        long q = strtol(value, &end, 10);
        if (*value && !*end && q >= 1 && q <= 100) {
            o->quality = (int)q;
            return MHD_YES;
        }
        snprintf(o->bad, sizeof o->bad, "quality is an integer from 1 to 100");
    } else if (strcmp(name, "window") == 0) {
        if (parse_window(o, value) == 0)
            return MHD_YES;
        snprintf(o->bad, sizeof o->bad, "window is center,width[,function]: numbers, function linear (width at"
                 " least 1), linear-exact or sigmoid (width above 0)");
    } else {
        snprintf(o->bad, sizeof o->bad, "'%.60s' is not a supported parameter of rendered (quality, window)", name);
        return MHD_NO;
    }
    o->bad_param = strcmp(name, "quality") == 0 ? "quality" : "window";
    return MHD_NO;
}

/* A modality value through the requested window, 0 to 255 (PS3.3 C.11.2.1.2). */
static double voi_apply(const struct render_opts *o, double x)
{
    double c = o->center, w = o->width;
    if (o->fn == VOI_SIGMOID)
        return 255.0 / (1.0 + exp(-4.0 * (x - c) / w));
    if (o->fn == VOI_LINEAR_EXACT)
        return ((x - c) / w + 0.5) * 255.0;
    if (x <= c - 0.5 - (w - 1) / 2)
        return 0;
    if (x > c - 0.5 + (w - 1) / 2)
        return 255;
    return w > 1 ? ((x - (c - 0.5)) / (w - 1) + 0.5) * 255.0 : 255;
}

/* Frame 0 as 8-bit samples (grey, or RGB interleaved): the requested window, else the
 * instance's VOI window, else the range. */
static unsigned char *render_frame(const gj_dicom *d, const struct gj_dicom_image *img,
                                   const struct render_opts *o, struct gj_error *err)
{
    size_t px = (size_t)img->rows * img->columns, spp = img->samples_per_pixel;
    float *f = malloc(gj_dicom_frame_floats(img) * sizeof *f);
    unsigned char *out = malloc(px * spp);
    if (!f || !out || gj_dicom_decode_frame(d, 0, f, gj_dicom_frame_floats(img), err) != 0) {
        free(f);
        free(out);
        return NULL;
    }
    double lo = 0, hi = 255, center, width;
    if (spp == 1 && gj_dicom_window(d, &center, &width) == 0 && width >= 1) {
        lo = center - width / 2;
        hi = center + width / 2;
    } else if (spp == 1) {
        lo = hi = f[0];
        for (size_t i = 1; i < px; i++)
            lo = f[i] < lo ? f[i] : lo, hi = f[i] > hi ? f[i] : hi;
    }
    double scale = hi > lo ? 255.0 / (hi - lo) : 0;
    int invert = img->photometric == GJ_PI_MONOCHROME1;
    for (size_t i = 0; i < px; i++)
        for (size_t s = 0; s < spp; s++) {
            double v = o->window && spp == 1 ? voi_apply(o, f[i]) : (f[s * px + i] - lo) * scale;
            unsigned char b = (unsigned char)(v <= 0 ? 0 : v >= 255 ? 255 : v + 0.5);
            out[i * spp + s] = invert ? (unsigned char)(255 - b) : b;
        }
    free(f);
    return out;
}

static int encode_png(const unsigned char *pix, const struct gj_dicom_image *img, char **buf, size_t *len)
{
    FILE *f = open_memstream(buf, len);
    if (!f)
        return -1;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        return -1;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, img->columns, img->rows, 8,
                 img->samples_per_pixel == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (uint32_t y = 0; y < img->rows; y++)
        png_write_row(png, (png_const_bytep)(pix + (size_t)y * img->columns * img->samples_per_pixel));
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return fclose(f) == 0 ? 0 : -1;
}

static int encode_jpeg(const unsigned char *pix, const struct gj_dicom_image *img, int quality, char **buf,
                       size_t *len)
{
    tjhandle tj = tjInitCompress();
    unsigned char *jpeg = NULL;
    unsigned long jl = 0;
    int grey = img->samples_per_pixel == 1;
    int rc = tj ? tjCompress2(tj, pix, (int)img->columns, 0, (int)img->rows, grey ? TJPF_GRAY : TJPF_RGB, &jpeg,
                              &jl, grey ? TJSAMP_GRAY : TJSAMP_444, quality, 0) : -1;
    if (tj)
        tjDestroy(tj);
    if (rc == 0 && (*buf = malloc(jl)) != NULL) {
        memcpy(*buf, jpeg, jl);
        *len = jl;
    } else {
        rc = -1;
    }
    tjFree(jpeg);
    return rc;
}

static void respond_bytes(struct gj_req *r, char *data /* taken */, size_t len, const char *type)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(data);
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    resp = gj_respond(r, 200, resp, len);
    if (!resp)
        return;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "private, no-cache");
    gj_http_user_bytes(resp, 0, NULL);   /* frames are the tenant's pixel bytes; images stay inline */
}

/* What rendering builds from the decoded frame: the 8-bit copy, and the encoded answer
 * (libjpeg-turbo's worst-case buffer and our copy of it; a PNG's memstream doubling). */
static uint64_t rendered_bytes(const struct gj_dicom_image *img, const void *arg)
{
    (void)arg;
    return gj_dicom_frame_floats(img) * 3 + (1u << 20);
}

static void wado_rendered(struct gj_req *r)
{
    static const char *const types[] = { "image/jpeg", "image/png", NULL };
    const char *type = gj_dicomweb_negotiate(r, types);
    if (!type) {
        gj_problem(r, 406, "Accept", "rendered instances are image/jpeg or image/png");
        return;
    }
    struct render_opts o = { .quality = JPEG_QUALITY };
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, render_param, &o);
    if (o.bad[0]) {
        gj_problem(r, 400, o.bad_param, "%s", o.bad);
        return;
    }
    char path[1300];
    uint64_t size = 0;
    if (export_instance(r, path, sizeof path, &size) != 0)
        return;
    struct gj_render rd;
    int opened = gj_render_open(r, path, size, rendered_bytes, NULL, &rd);
    unlink(path);
    if (opened != 0)
        return;
    struct gj_error err = { 0 };
    unsigned char *pix = render_frame(rd.d, &rd.img, &o, &err);
    char *buf = NULL;
    size_t len = 0;
    int rc = !pix ? -1 : strcmp(type, "image/png") == 0 ? encode_png(pix, &rd.img, &buf, &len)
                                                        : encode_jpeg(pix, &rd.img, o.quality, &buf, &len);
    free(pix);
    gj_render_close(&rd);
    if (rc != 0) {
        free(buf);
        gj_problem(r, 422, NULL, "the instance could not be rendered%s%s", err.message[0] ? ": " : "", err.message);
        return;
    }
    respond_bytes(r, buf, len, type);
}

/* "1,3,2" into frames (1-based, at most FRAMES_MAX): the count, or -1. */
static int parse_frames(const char *s, uint32_t *frames)
{
    int n = 0;
    while (*s && n < FRAMES_MAX) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || errno || v < 1 || v > 0x7fffffffUL || (*end && (*end != ',' || !end[1])))
            return -1;
        frames[n++] = (uint32_t)v;
        s = *end ? end + 1 : end;
    }
    return *s || n == 0 ? -1 : n;
}

/* One frame's stored values, little endian at Bits Allocated, samples interleaved. */
static int write_frame(FILE *f, const gj_dicom *d, const struct gj_dicom_image *img, uint32_t frame,
                       int32_t *raw, struct gj_error *err)
{
    size_t px = (size_t)img->rows * img->columns, spp = img->samples_per_pixel;
    if (gj_dicom_decode_frame_raw(d, frame, raw, gj_dicom_frame_floats(img), err) != 0)
        return -1;
    for (size_t i = 0; i < px; i++)
        for (size_t s = 0; s < spp; s++) {
            uint32_t v = (uint32_t)raw[s * px + i];
            fputc((int)(v & 0xff), f);
            if (img->bits_allocated == 16)
                fputc((int)((v >> 8) & 0xff), f);
        }
    return 0;
}

/* What a frames answer builds besides the decoded frame (arg: the number of frames asked):
 * the multipart body, in a memstream that may hold twice what it wrote. */
static uint64_t frames_bytes(const struct gj_dicom_image *img, const void *arg)
{
    uint64_t n = (uint64_t)*(const int *)arg;
    return 2 * (gj_dicom_frame_floats(img) * (img->bits_allocated == 16 ? 2 : 1) + 128) * n + (1u << 20);
}

static void wado_frames(struct gj_req *r)
{
    if (!gj_dicomweb_accepts(r, "multipart/related", "application/octet-stream")) {
        gj_problem(r, 406, "Accept", "frames are multipart/related; type=\"application/octet-stream\"");
        return;
    }
    if (MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, NULL, NULL) > 0) {
        gj_problem(r, 400, NULL, "frames take no query parameter");
        return;
    }
    uint32_t frames[FRAMES_MAX];
    int n = parse_frames(r->params[3], frames);
    if (n < 0) {
        gj_problem(r, 400, "frames", "frames is a list of 1 to %d frame numbers from 1, comma separated", FRAMES_MAX);
        return;
    }
    char path[1300];
    uint64_t size = 0;
    if (export_instance(r, path, sizeof path, &size) != 0)
        return;
    struct gj_render rd;
    int opened = gj_render_open(r, path, size, frames_bytes, &n, &rd);
    unlink(path);
    if (opened != 0)
        return;
    const gj_dicom *d = rd.d;
    const struct gj_dicom_image img = rd.img;
    for (int i = 0; i < n; i++)
        if (frames[i] > (img.frames ? img.frames : 1)) {
            gj_render_close(&rd);
            gj_problem(r, 404, "frames", "the instance has %u frame(s)", img.frames ? img.frames : 1);
            return;
        }
    uint64_t frame_bytes = gj_dicom_frame_floats(&img) * (img.bits_allocated == 16 ? 2 : 1);
    if (frame_bytes * (uint64_t)n > FRAMES_MAX_BYTES) {
        gj_render_close(&rd);
        gj_problem(r, 413, "frames", "more than %llu MiB of frames in one request: ask for fewer",
                   (unsigned long long)(FRAMES_MAX_BYTES >> 20));
        return;
    }
    char *body = NULL, boundary[48];
    size_t len = 0;
    struct gj_error err = { 0 };
    snprintf(boundary, sizeof boundary, "gpujobd-%s", r->request_id);
    int32_t *raw = malloc(gj_dicom_frame_floats(&img) * sizeof *raw);
    FILE *f = raw ? open_memstream(&body, &len) : NULL;
    int rc = f ? 0 : -1;
    for (int i = 0; rc == 0 && i < n; i++) {
        fprintf(f, "--%s\r\nContent-Type: application/octet-stream\r\n\r\n", boundary);
        rc = write_frame(f, d, &img, frames[i] - 1, raw, &err);
        fputs("\r\n", f);
    }
    if (f) {
        fprintf(f, "--%s--\r\n", boundary);
        rc |= fclose(f) != 0 ? -1 : 0;
    }
    free(raw);
    gj_render_close(&rd);
    if (rc != 0) {
        free(body);
        gj_problem(r, 422, NULL, "the frames could not be decoded%s%s", err.message[0] ? ": " : "", err.message);
        return;
    }
    char ct[120];
    snprintf(ct, sizeof ct, "multipart/related; type=\"application/octet-stream\"; boundary=%s", boundary);
    respond_bytes(r, body, len, ct);
}

static const struct gj_route render_routes[] = {
    { "GET", "/dicomweb/studies/{study}/series/{series}/instances/{instance}/rendered", GJ_AUTH_USER, GJ_BODY_NONE,
      NULL, NULL, wado_rendered, NULL },
    { "GET", "/dicomweb/studies/{study}/series/{series}/instances/{instance}/frames/{frames}", GJ_AUTH_USER,
      GJ_BODY_NONE, NULL, NULL, wado_frames, NULL },
};
const struct gj_route_table gj_infer_routes_wado_render = { render_routes,
                                                            sizeof render_routes / sizeof render_routes[0] };
