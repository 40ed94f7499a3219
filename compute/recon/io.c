/*
 * io.c — NRRD (float32, raw, little-endian) writer (the header parser: common/nrrd.h),
 * projection input (raw or NRRD, detected by the magic), PNG preview,
 * PSNR and SSIM.
 */
#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "recon/recon.h"

#define IO_PIECE_FLOATS ((size_t)16 << 20)   /* 64 MiB between looks at poll */

/* n floats to f in pieces; 0, -1, or 1 when poll saw a cancel. */
static int write_floats(FILE *f, const float *data, uint64_t n, struct gj_poll *poll)
{
    for (uint64_t off = 0; off < n; off += IO_PIECE_FLOATS) {
        size_t k = n - off < IO_PIECE_FLOATS ? (size_t)(n - off) : IO_PIECE_FLOATS;
        if (gj_poll_step(poll, 0))
            return 1;
        if (fwrite(data + off, sizeof(float), k, f) != k)   /* x86/arm64: little-endian */
            return -1;
    }
    return 0;
}

/* The floats after what f holds, then f closed and renamed from tmp to path; nothing
 * is left behind on failure or cancel. 0, -1 (errno), or 1 when cancelled. */
static int finish_file(FILE *f, const char *tmp, const char *path, const float *data, uint64_t n,
                       struct gj_poll *poll)
{
    int rc = write_floats(f, data, n, poll);
    if (fclose(f) != 0 && rc == 0)
        rc = -1;
    if (rc || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        errno = e;
        return rc ? rc : -1;
    }
    return 0;
}

/* path's temporary twin (path.tmp, its name into tmp), opened for writing; NULL (errno). */
static FILE *open_tmp(const char *path, char *tmp, size_t n)
{
    if (snprintf(tmp, n, "%s.tmp", path) >= (int)n) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    return fopen(tmp, "wb");
}

int rc_nrrd_write(const char *path, const float *data, int dim, const int64_t *sizes,
                  const double *spacing, const double *origin, int space, struct gj_poll *poll)
{
    char tmp[GJ_PATH_MAX];
    FILE *f = open_tmp(path, tmp, sizeof tmp);
    if (!f)
        return -1;
    uint64_t n = 1;
    fprintf(f, "NRRD0004\n# written by gpujobd recon\ntype: float\ndimension: %d\nsizes:", dim);
    for (int i = 0; i < dim; i++) {
        fprintf(f, " %lld", (long long)sizes[i]);
        n *= (uint64_t)sizes[i];
    }
    fputc('\n', f);
    if (space && dim == 3) {
        fprintf(f, "space: left-posterior-superior\nspace directions: (%.9g,0,0) (0,%.9g,0) (0,0,%.9g)\n",
                spacing[0], spacing[1], spacing[2]);
        fprintf(f, "space origin: (%.9g,%.9g,%.9g)\nspace units: \"mm\" \"mm\" \"mm\"\n", origin[0], origin[1], origin[2]);
        fprintf(f, "kinds: domain domain domain\n");
    } else {
        fprintf(f, "spacings:");
        for (int i = 0; i < dim; i++)
            fprintf(f, " %.9g", spacing[i]);
        fputc('\n', f);
    }
    fprintf(f, "endian: little\nencoding: raw\n\n");
    return finish_file(f, tmp, path, data, n, poll);
}

int rc_raw_write(const char *path, const float *data, uint64_t n, struct gj_poll *poll)
{
    char tmp[GJ_PATH_MAX];
    FILE *f = open_tmp(path, tmp, sizeof tmp);
    if (!f)
        return -1;
    return finish_file(f, tmp, path, data, n, poll);
}

/* Where the floats of a projection file start, and how many it holds. */
static int projection_layout(FILE *f, uint64_t *off, uint64_t *n_floats, struct gj_error *err)
{
    if (fseeko(f, 0, SEEK_END) != 0)
        return gj_error_set(err, "projections", "cannot read projections: %s", strerror(errno));
    uint64_t size = (uint64_t)ftello(f);
    rewind(f);
    char *head = malloc(GJ_NRRD_MAX_HEADER);
    if (!head)
        return gj_error_set(err, "", "out of memory");
    size_t hl = fread(head, 1, GJ_NRRD_MAX_HEADER, f);
    int rc = 0;
    *off = 0;
    if (hl >= 7 && memcmp(head, "NRRD000", 7) == 0) {
        struct gj_nrrd h;
        rc = gj_nrrd_parse(head, hl, size, &h, err);
        if (rc == 0) {
            *off = h.data_offset;
            *n_floats = (size - *off) / 4;
        }
    } else if (size % 4) {
        rc = gj_error_set(err, "projections", "raw projections are %llu bytes, not a whole number of float32 values",
                          (unsigned long long)size);
    } else {
        *n_floats = size / 4;
    }
    free(head);
    return rc;
}

/* count floats from f in pieces, each checked to be finite (first: their index). */
static int read_floats(FILE *f, float *out, uint64_t first, uint64_t count, struct gj_poll *poll,
                       struct gj_error *err)
{
    for (uint64_t off = 0; off < count; off += IO_PIECE_FLOATS) {
        size_t k = count - off < IO_PIECE_FLOATS ? (size_t)(count - off) : IO_PIECE_FLOATS;
        if (gj_poll_step(poll, 0))
            return 1;
        if (fread(out + off, 4, k, f) != k)
            return gj_error_set(err, "projections", "cannot read projections (short read)");
        for (size_t i = 0; i < k; i++)
            if (!isfinite(out[off + i]))
                return gj_error_set(err, "projections", "projections contain a non-finite value (NaN or infinity) at index %llu",
                                    (unsigned long long)(first + off + i));
    }
    return 0;
}

int rc_read_projections(const char *path, float *out, uint64_t total, uint64_t first,
                        uint64_t count, struct gj_poll *poll, struct gj_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return gj_error_set(err, "projections", "cannot open projections: %s", strerror(errno));
    uint64_t off = 0, total_floats = 0;
    int rc = projection_layout(f, &off, &total_floats, err);
    if (rc == 0 && total_floats != total)
        rc = gj_error_set(err, "projections", "projections hold %llu float32 values but the geometry needs %llu "
                          "(batch x views x rows x cols): %s", (unsigned long long)total_floats,
                          (unsigned long long)total, total_floats < total ? "too short" : "too long");
    if (rc == 0 && (first + count > total || fseeko(f, (off_t)(off + first * 4), SEEK_SET) != 0))
        rc = gj_error_set(err, "projections", "cannot read projections (short read)");
    if (rc == 0)
        rc = read_floats(f, out, first, count, poll, err);
    fclose(f);
    return rc;
}

/* One 8-bit image: the central axial slice, and for 3D volumes also the central
 * coronal and sagittal ones side by side. Window: 0.5 and 99.5 percentiles of the data. */
/* The k-th smallest of a[0..n) (a is reordered): what sorting would put at a[k], in
 * linear time. Three-way partitions, so runs of equal values cost nothing. */
static float select_kth(float *a, size_t n, size_t k)
{
    size_t lo = 0, hi = n;   /* k lies in [lo, hi) */
    while (hi - lo > 1) {
        float x = a[lo + (hi - lo) / 2], y = a[lo], z = a[hi - 1];
        float pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        size_t lt = lo, i = lo, gt = hi;   /* [lo,lt) < pivot, [lt,i) == pivot, [gt,hi) > pivot */
        while (i < gt) {
            float v = a[i];
            if (v < pivot) {
                a[i++] = a[lt];
                a[lt++] = v;
            } else if (v > pivot) {
                a[i] = a[--gt];
                a[gt] = v;
            } else {
                i++;
            }
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            return pivot;
    }
    return a[lo];
}

uint64_t rc_preview_bytes(int nx, int ny, int nz)
{
    int three = nz > 1;
    uint64_t W = three ? (uint64_t)nx + nx + ny : (uint64_t)nx, H = three ? (uint64_t)(ny > nz ? ny : nz) : (uint64_t)ny;
    return W * H > (1u << 26) ? 0 : W * H + (uint64_t)nx * ny * 4;
}

int rc_write_preview(const char *path, const float *vol, int nx, int ny, int nz)
{
    int three = nz > 1 && nz != 0;
    int W = three ? nx + nx + ny : nx, H = three ? (ny > nz ? ny : nz) : ny;
    if ((int64_t)W * H > (1 << 26))
        return 0;   /* too large to preview: skip quietly */
    unsigned char *img = calloc((size_t)W * H, 1);
    float *tmp = malloc(sizeof(float) * ((size_t)nx * ny > 1 ? (size_t)nx * ny : 1));
    if (!img || !tmp) {
        free(img);
        free(tmp);
        return -1;
    }
    int zc = nz / 2;
    const float *sl = vol + (int64_t)zc * nx * ny;
    memcpy(tmp, sl, sizeof(float) * (size_t)nx * ny);
    size_t n = (size_t)nx * ny;
    double lo = select_kth(tmp, n, (size_t)((double)nx * ny * 0.005));
    double hi = select_kth(tmp, n, (size_t)((double)nx * ny * 0.995));
    if (!(hi > lo)) {
        lo = select_kth(tmp, n, 0);
        hi = select_kth(tmp, n, n - 1) + 1e-12;
    }
    free(tmp);
#define PIX(v) ((unsigned char)((v) <= lo ? 0 : (v) >= hi ? 255 : (int)(255.0 * ((v) - lo) / (hi - lo) + 0.5)))
    for (int j = 0; j < ny; j++)          /* y up */
        for (int i = 0; i < nx; i++)
            img[(size_t)(H - 1 - j) * W + i] = PIX(sl[(int64_t)j * nx + i]);
    if (three) {
        int yc = ny / 2, xc = nx / 2;
        for (int k = 0; k < nz && k < H; k++) {
            for (int i = 0; i < nx; i++)
                img[(size_t)(H - 1 - k) * W + nx + i] = PIX(vol[(int64_t)k * nx * ny + (int64_t)yc * nx + i]);
            for (int j = 0; j < ny; j++)
                img[(size_t)(H - 1 - k) * W + 2 * nx + j] = PIX(vol[(int64_t)k * nx * ny + (int64_t)j * nx + xc]);
        }
    }
#undef PIX
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(img);
        return -1;
    }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        free(img);
        return -1;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)W, (png_uint_32)H, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int r = 0; r < H; r++)
        png_write_row(png, img + (size_t)r * W);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(img);
    return fclose(f) == 0 ? 0 : -1;
}

double rc_psnr(const float *a, const float *ref, size_t n, double range)
{
    double se = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i];
        se += d * d;
    }
    double mse = se / (double)n;
    return mse > 0 ? 10.0 * log10(range * range / mse) : 999.0;
}

/* SSIM as scikit-image's structural_similarity(gaussian_weights=True, sigma=1.5,
 * use_sample_covariance=False, data_range=range): 11x11 window, mean over the
 * pixels at least 5 from the border. */
double rc_ssim2d(const float *a, const float *ref, int nx, int ny, double range)
{
    const int R = 5;
    double w[11], ws = 0;
    for (int i = -R; i <= R; i++)
        ws += w[i + R] = exp(-(double)(i * i) / (2 * 1.5 * 1.5));
    for (int i = 0; i < 11; i++)
        w[i] /= ws;
    size_t n = (size_t)nx * ny;
    double *buf = calloc(5 * n, sizeof *buf);
    if (!buf)
        return NAN;
    double *tm[5];
    for (int c = 0; c < 5; c++)
        tm[c] = buf + c * n;
    /* separable filter of x, y, xx, yy, xy: rows then columns (interior only) */
    for (int j = 0; j < ny; j++)
        for (int i = R; i < nx - R; i++) {
            double s[5] = { 0 };
            for (int k = -R; k <= R; k++) {
                double x = a[(size_t)j * nx + i + k], y = ref[(size_t)j * nx + i + k], wk = w[k + R];
                s[0] += wk * x;
                s[1] += wk * y;
                s[2] += wk * x * x;
                s[3] += wk * y * y;
                s[4] += wk * x * y;
            }
            for (int c = 0; c < 5; c++)
                tm[c][(size_t)j * nx + i] = s[c];
        }
    double C1 = (0.01 * range) * (0.01 * range), C2 = (0.03 * range) * (0.03 * range), acc = 0;
    size_t cnt = 0;
    for (int j = R; j < ny - R; j++)
        for (int i = R; i < nx - R; i++) {
            double s[5] = { 0 };
            for (int k = -R; k <= R; k++)
                for (int c = 0; c < 5; c++)
                    s[c] += w[k + R] * tm[c][(size_t)(j + k) * nx + i];
            double vx = s[2] - s[0] * s[0], vy = s[3] - s[1] * s[1], cxy = s[4] - s[0] * s[1];
            acc += ((2 * s[0] * s[1] + C1) * (2 * cxy + C2)) /
                   ((s[0] * s[0] + s[1] * s[1] + C1) * (vx + vy + C2));
            cnt++;
        }
    free(buf);
    return cnt ? acc / (double)cnt : NAN;
}
