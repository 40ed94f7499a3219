/*
 * routes_slices.c — slices of a volume output (float32 NRRD: recon's volume.nrrd, phantom's
 * truth.nrrd) rendered as PNG on demand, for the portal's slice viewer:
 *
 *   GET /v1/jobs/{id}/outputs/{name}/slices       JSON: sizes, spacing, the number of
 *                                                 z slices, and a display window (0.5 and
 *                                                 99.5 percentiles of the middle slice)
 *   GET /v1/jobs/{id}/outputs/{name}/slices/{z}   z as "12.png" (or "12"): slice z as an
 *                                                 8-bit grey PNG, nx x ny, y up, values
 *                                                 ?lo= black to ?hi= white (default: the
 *                                                 slice's own percentiles)
 *
 * Only the header and the one slice are read from the blob (large object reads at an
 * offset), never the volume. An output is immutable, so a rendering is too: its strong ETag
 * is a hash of the blob's SHA-256, z, lo and hi, and a repeat is a 304.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/gj_error.h"
#include "common/nrrd.h"
#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/jobs/job_store.h"
#include "service/portal/png_gray.h"
#include "service/portal/portal.h"

#define HEADER_MAX 65536
#define SLICE_MAX_PIXELS (4096u * 4096u)
#define CACHE_SECONDS 86400

struct volume {
    struct gj_blob_info info;
    struct gj_blob_reader *reader;
    struct gj_nrrd h;
    int64_t nx, ny, nz;
};

static void volume_close(struct volume *v)
{
    if (v->reader)
        gj_blob_reader_close(v->reader);
    v->reader = NULL;
}

/* The output blob of job {id} named {name} (this tenant's), in a read transaction. 1, or 0
 * answered. */
static int find_output(struct gj_req *r, PGconn *c, struct gj_blob_info *info)
{
    char blob_id[GJ_UUID_LEN + 1] = "";
    struct gj_error err;
    if (gj_job_output_find(c, r->who.tenant_id, r->params[0], r->params[1], blob_id, NULL, 0, &err) != 0 &&
        err.status != 404) {
        gj_respond_unavailable(r);
        return 0;
    }
    int rc = blob_id[0] ? gj_blob_lookup(c, r->who.tenant_id, blob_id, info) : 0;
    if (rc <= 0) {
        gj_respond_lookup_failed(r, rc);
        return 0;
    }
    return 1;
}

/* Opens the output and reads its NRRD header. 1, or 0 answered. */
static int volume_open(struct gj_req *r, struct volume *v)
{
    memset(v, 0, sizeof *v);
    PGconn *c = gj_req_db(r);
    if (!c || gj_db_begin(c) != 0) {
        gj_respond_unavailable(r);
        return 0;
    }
    if (!find_output(r, c, &v->info))
        return 0;
    v->reader = gj_blob_reader_open_blob(c, &v->info, NULL);
    size_t want = v->info.size < HEADER_MAX ? (size_t)v->info.size : HEADER_MAX;
    char *head = malloc(want + 1);
    long got = v->reader && head ? gj_blob_reader_read(v->reader, 0, head, want) : -1;
    if (got != (long)want) {
        free(head);
        gj_problem(r, 500, NULL, "the output could not be read");
        return 0;
    }
    struct gj_error err;
    gj_error_clear(&err);
    int bad = gj_nrrd_parse(head, want, v->info.size, &v->h, &err);
    free(head);
    if (bad || v->h.dim < 2 || v->h.dim > 3) {
        gj_problem(r, 422, NULL, "%s is not a float32 volume of 2 or 3 dimensions: %s", r->params[1],
                   bad ? err.message : "wrong number of dimensions");
        return 0;
    }
    v->nx = v->h.sizes[0];
    v->ny = v->h.sizes[1];
    v->nz = v->h.dim == 3 ? v->h.sizes[2] : 1;
    if ((uint64_t)v->nx * (uint64_t)v->ny > SLICE_MAX_PIXELS) {
        gj_problem(r, 422, NULL, "slices of %lld x %lld pixels are over the %u the viewer renders; download "
                   "the volume", (long long)v->nx, (long long)v->ny, SLICE_MAX_PIXELS);
        return 0;
    }
    return 1;
}

/* Slice z's floats (malloc'd), or NULL answered. */
static float *read_slice(struct gj_req *r, struct volume *v, int64_t z)
{
    size_t n = (size_t)v->nx * (size_t)v->ny;
    float *f = malloc(n * sizeof *f);
    uint64_t off = v->h.data_offset + (uint64_t)z * n * sizeof *f;
    long got = f ? gj_blob_reader_read(v->reader, off, f, n * sizeof *f) : -1;
    if (got != (long)(n * sizeof *f)) {
        free(f);
        gj_problem(r, 500, NULL, "the slice could not be read");
        return NULL;
    }
    return f;
}

/* GET .../slices */
static void slices_info(struct gj_req *r)
{
    struct volume v;
    if (!volume_open(r, &v)) {
        volume_close(&v);
        return;
    }
    float *mid = read_slice(r, &v, v.nz / 2);
    double lo = 0, hi = 1;
    if (mid && gj_window_percentiles(mid, (size_t)(v.nx * v.ny), 0.005, 0.995, &lo, &hi) != 0) {
        lo = 0;
        hi = 1;
    }
    free(mid);
    volume_close(&v);
    if (!mid)
        return;
    json_t *spacing = json_array();
    for (int i = 0; i < v.h.dim; i++)
        json_array_append_new(spacing, json_real(v.h.spacing[i] > 0 ? v.h.spacing[i] : 1.0));
    if (v.h.dim == 2)
        json_array_append_new(spacing, json_real(1.0));
    gj_respond_json(r, 200, json_pack("{s:s, s:[I,I,I], s:o, s:I, s:{s:f, s:f}}", "name", r->params[1], "sizes",
                                      (json_int_t)v.nx, (json_int_t)v.ny, (json_int_t)v.nz, "spacing", spacing,
                                      "slices", (json_int_t)v.nz, "window", "lo", lo, "hi", hi));
}

/* "12.png" or "12" into z; 0 or -1. */
static int parse_z(const char *s, int64_t *z)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno || v < 0 || (*end && strcmp(end, ".png") != 0) || s[0] == '+' || s[0] == '-' ||
        s[0] == ' ')
        return -1;
    *z = v;
    return 0;
}

/* ?name= as a finite number; 1 given, 0 absent, -1 answered. */
static int query_number(struct gj_req *r, const char *name, double *out)
{
    const char *s = gj_req_query(r, name);
    if (!s)
        return 0;
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !isfinite(v)) {
        gj_problem(r, 400, name, "%s is a finite number (the value shown black for lo, white for hi)", name);
        return -1;
    }
    *out = v;
    return 1;
}

static void slice_etag(const struct volume *v, int64_t z, int have_window, double lo, double hi, char etag[40])
{
    char text[256], hex[65];
    unsigned char md[32];
    unsigned int n = 0;
    gj_sha256_hex(v->info.sha256, hex);
    int len = snprintf(text, sizeof text, "slice-v1/%s/%lld/%d/%.17g/%.17g", hex, (long long)z, have_window, lo, hi);
    EVP_Digest(text, (size_t)len, md, &n, EVP_sha256(), NULL);
    gj_sha256_hex(md, hex);
    snprintf(etag, 40, "\"%.32s\"", hex);
}

/* The slice as grey levels, y up (as the preview and image viewers show a volume). */
static unsigned char *window_slice(const float *f, int64_t nx, int64_t ny, double lo, double hi)
{
    unsigned char *px = malloc((size_t)nx * (size_t)ny);
    for (int64_t j = 0; px && j < ny; j++)
        for (int64_t i = 0; i < nx; i++)
            px[(size_t)(ny - 1 - j) * (size_t)nx + (size_t)i] = gj_window_grey(f[j * nx + i], lo, hi);
    return px;
}

/* GET .../slices/{z} */
static void slice_png(struct gj_req *r)
{
    int64_t z;
    double lo = 0, hi = 0;
    if (parse_z(r->params[2], &z) != 0) {
        gj_problem(r, 404, "z", "a slice is named by its index: 0.png, 1.png, ...");
        return;
    }
    int have_lo = query_number(r, "lo", &lo), have_hi = query_number(r, "hi", &hi);
    if (have_lo < 0 || have_hi < 0)
        return;
    if (have_lo != have_hi || (have_lo && !(hi > lo))) {
        gj_problem(r, 400, "hi", "give lo and hi together, with hi above lo");
        return;
    }
    struct volume v;
    char etag[40];
    float *f = NULL;
    if (!volume_open(r, &v))
        goto out;
    if (z >= v.nz) {
        gj_problem(r, 404, "z", "slice %lld is past the last one (%lld)", (long long)z, (long long)v.nz - 1);
        goto out;
    }
    slice_etag(&v, z, have_lo, lo, hi, etag);
    if (gj_portal_not_modified(r, etag, CACHE_SECONDS) || !(f = read_slice(r, &v, z)))
        goto out;
    if (!have_lo && gj_window_percentiles(f, (size_t)(v.nx * v.ny), 0.005, 0.995, &lo, &hi) != 0) {
        lo = 0;
        hi = 1;
    }
    unsigned char *px = window_slice(f, v.nx, v.ny, lo, hi), *png = NULL;
    size_t len = 0;
    if (!px || gj_png_gray8(px, (uint32_t)v.nx, (uint32_t)v.ny, &png, &len) != 0)
        gj_problem(r, 500, NULL, "out of memory");
    else
        gj_portal_send_png(r, png, len, etag, CACHE_SECONDS);
    free(px);
out:
    free(f);
    volume_close(&v);
}

static const struct gj_route routes[] = {
    { "GET", "/v1/jobs/{id}/outputs/{name}/slices", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, slices_info, NULL },
    { "GET", "/v1/jobs/{id}/outputs/{name}/slices/{z}", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, slice_png, NULL },
};
const struct gj_route_table gj_routes_portal_slices = { routes, sizeof routes / sizeof routes[0] };
