/*
 * dicom_pixels.c — image attributes, frame location (native and
 * encapsulated), dispatch to codecs, and conversion to float32 modality
 * values.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dicom_codec.h"
#include "dicom_internal.h"

/* The value, dflt when absent or empty, -2 (invalid everywhere used) when
 * present but not an integer. */
static long get_us(const gj_dicom *d, uint32_t tag, long dflt)
{
    long v;
    if (gj_dicom_get_int(d, tag, 0, &v) == 0)
        return v;
    return gj_dicom_value_count(d, tag) > 0 ? -2 : dflt;
}

/* The sizes and sample format of (0028,xxxx), each checked: 0 or -1 with err naming the tag. */
static int sample_format(const gj_dicom *d, struct gj_dicom_image *img, struct gj_error *err)
{
    long rows = get_us(d, GJ_DCM_Rows, -1), cols = get_us(d, GJ_DCM_Columns, -1);
    long spp = get_us(d, GJ_DCM_SamplesPerPixel, 1);
    long ba = get_us(d, GJ_DCM_BitsAllocated, -1);
    long bs = get_us(d, GJ_DCM_BitsStored, ba);
    long hb = get_us(d, GJ_DCM_HighBit, bs - 1);
    long pr = get_us(d, GJ_DCM_PixelRepresentation, 0);
    long pc = get_us(d, GJ_DCM_PlanarConfiguration, 0);
    long frames = get_us(d, GJ_DCM_NumberOfFrames, 1);
    if (rows <= 0 || cols <= 0 || rows > GJ_DICOM_MAX_DIM || cols > GJ_DICOM_MAX_DIM)
        return gj_dcm_tag_error(err, rows <= 0 || rows > GJ_DICOM_MAX_DIM ? GJ_DCM_Rows : GJ_DCM_Columns,
                                "rows/columns missing or out of range (%ld x %ld)", rows, cols);
    if ((uint64_t)rows * (uint64_t)cols > GJ_DICOM_MAX_FRAME_PIXELS ||
        (uint64_t)rows * (uint64_t)cols * (uint64_t)(spp > 0 ? spp : 1) * (uint64_t)(ba > 8 ? 2 : 1) > GJ_DICOM_MAX_FRAME_BYTES)
        return gj_dcm_tag_error(err, GJ_DCM_Rows, "frame of %ld x %ld pixels is too large", rows, cols);
    if (spp != 1 && spp != 3)
        return gj_dcm_tag_error(err, GJ_DCM_SamplesPerPixel, "samples per pixel %ld not supported (1 or 3)", spp);
    if (ba != 8 && ba != 16)
        return gj_dcm_tag_error(err, GJ_DCM_BitsAllocated, "bits allocated %ld not supported (8 or 16)", ba);
    if (bs < 1 || bs > ba || hb < bs - 1 || hb >= ba)
        return gj_dcm_tag_error(err, GJ_DCM_BitsStored, "bits stored %ld / high bit %ld inconsistent with bits allocated %ld",
                                bs, hb, ba);
    if (pc != 0 && pc != 1)
        return gj_dcm_tag_error(err, GJ_DCM_PlanarConfiguration, "planar configuration %ld invalid", pc);
    if (pr != 0 && pr != 1)
        return gj_dcm_tag_error(err, GJ_DCM_PixelRepresentation, "pixel representation %ld invalid", pr);
    if (frames <= 0 || frames > GJ_DICOM_MAX_FRAMES)
        return gj_dcm_tag_error(err, GJ_DCM_NumberOfFrames, "number of frames %ld out of range", frames);
    img->rows = (uint32_t)rows;
    img->columns = (uint32_t)cols;
    img->samples_per_pixel = (uint32_t)spp;
    img->bits_allocated = (uint32_t)ba;
    img->bits_stored = (uint32_t)bs;
    img->high_bit = (uint32_t)hb;
    img->pixel_representation = (uint32_t)pr;
    img->planar_configuration = (uint32_t)pc;
    img->frames = (uint32_t)frames;
    return 0;
}

/* (0028,0004), and whether it fits the samples per pixel. */
static int photometric(const gj_dicom *d, struct gj_dicom_image *img, struct gj_error *err)
{
    uint32_t spp = img->samples_per_pixel;
    gj_dicom_get_string(d, GJ_DCM_PhotometricInterp, img->photometric_name, sizeof img->photometric_name);
    const char *pi = img->photometric_name;
    if (!strcmp(pi, "MONOCHROME1")) img->photometric = GJ_PI_MONOCHROME1;
    else if (!strcmp(pi, "MONOCHROME2")) img->photometric = GJ_PI_MONOCHROME2;
    else if (!strcmp(pi, "RGB") || !strcmp(pi, "YBR_RCT") || !strcmp(pi, "YBR_ICT"))
        img->photometric = GJ_PI_RGB;  /* RCT/ICT: the J2K codec returns RGB */
    else if (!strcmp(pi, "YBR_FULL")) img->photometric = GJ_PI_YBR_FULL;
    else if (!strcmp(pi, "YBR_FULL_422")) img->photometric = GJ_PI_YBR_FULL_422;
    else if (!strcmp(pi, "PALETTE COLOR")) img->photometric = GJ_PI_PALETTE_COLOR;
    else if (!pi[0]) img->photometric = spp == 1 ? GJ_PI_MONOCHROME2 : GJ_PI_RGB;
    else img->photometric = GJ_PI_OTHER;
    if (!pi[0])
        strcpy(img->photometric_name, spp == 1 ? "MONOCHROME2" : "RGB");
    int mono = img->photometric == GJ_PI_MONOCHROME1 || img->photometric == GJ_PI_MONOCHROME2;
    int color = img->photometric == GJ_PI_RGB || img->photometric == GJ_PI_YBR_FULL ||
                img->photometric == GJ_PI_YBR_FULL_422;
    if ((mono && spp != 1) || (!mono && color && spp != 3))
        return gj_dcm_tag_error(err, GJ_DCM_PhotometricInterp, "%s with %u samples per pixel", pi, spp);
    return 0;
}

/* The pixel data holds the frames (native), or has fragments (encapsulated). */
static int pixel_data_size(const gj_dicom *d, const struct gj_dicom_image *img, struct gj_error *err)
{
    if (d->encapsulated)
        return d->n_frag || d->header_only ? 0 : gj_dcm_tag_error(err, GJ_DCM_PixelData, "encapsulated pixel data without fragments");
    uint64_t frame_bytes = (uint64_t)img->rows * img->columns * img->samples_per_pixel * (img->bits_allocated / 8);
    if (frame_bytes * (uint64_t)img->frames > d->pixel_len)
        return gj_dcm_tag_error(err, GJ_DCM_PixelData, "pixel data holds %llu bytes; %u frame(s) of %u x %u x %u x %u "
                                "bits need %llu", (unsigned long long)d->pixel_len, img->frames, img->rows,
                                img->columns, img->samples_per_pixel, img->bits_allocated,
                                (unsigned long long)(frame_bytes * (uint64_t)img->frames));
    return 0;
}

int gj_dicom_image_info(const gj_dicom *d, struct gj_dicom_image *img, struct gj_error *err)
{
    memset(img, 0, sizeof *img);
    if (!d->has_pixels)
        return gj_dcm_tag_error(err, GJ_DCM_PixelData, "no pixel data (7FE0,0010)");
    if (sample_format(d, img, err) || photometric(d, img, err))
        return -1;
    img->encapsulated = d->encapsulated;
    img->rescale_slope = 1.0;
    img->rescale_intercept = 0.0;
    double v;
    if (gj_dicom_get_double(d, GJ_DCM_RescaleSlope, 0, &v) == 0 && isfinite(v) && v != 0)
        img->rescale_slope = v;
    if (gj_dicom_get_double(d, GJ_DCM_RescaleIntercept, 0, &v) == 0 && isfinite(v))
        img->rescale_intercept = v;
    return pixel_data_size(d, img, err);
}

uint64_t gj_dicom_frame_floats(const struct gj_dicom_image *img)
{
    return (uint64_t)img->rows * img->columns * img->samples_per_pixel;
}

uint64_t gj_dicom_decode_bytes(const struct gj_dicom_image *img)
{
    uint64_t stored = gj_dicom_frame_floats(img) * (img->bits_allocated / 8);
    /* compressed: the codec's planes of int32 (OpenJPEG's), its output and its tables */
    return img->encapsulated ? gj_dicom_frame_floats(img) * 4 + stored + (1u << 20) : stored;
}

/* ---- locating a compressed frame ------------------------------------------ */

/* The first fragment from index lo on whose item lies at off or after (fragments are
 * in increasing item_off): binary search. */
static size_t first_fragment_at(const gj_dicom *d, size_t lo, uint64_t off)
{
    size_t hi = d->n_frag;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->frag[mid].item_off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* First fragment and count of fragments of frame `frame`. */
static int frame_fragments(const gj_dicom *d, const struct gj_dicom_image *img, uint32_t frame,
                           size_t *first, size_t *count, struct gj_error *err)
{
    uint32_t nbot = d->bot_len / 4;
    if (img->frames == 1) {
        *first = 0;
        *count = d->n_frag;
        return 0;
    }
    if (nbot == img->frames) {
        /* The basic offset table, when it points at fragments; a table that
         * does not is ignored and the frames are found as below. */
        const uint8_t *b = d->bot + (size_t)frame * 4;
        uint64_t start = gj_dcm_le32(b), stop = UINT64_MAX;
        if (frame + 1 < nbot)
            stop = gj_dcm_le32(b + 4);
        size_t i = first_fragment_at(d, 0, start);
        if (i < d->n_frag && d->frag[i].item_off == start && stop > start) {
            *first = i;
            *count = first_fragment_at(d, i, stop) - i;
            return 0;
        }
    }
    if (d->n_frag == img->frames) {
        *first = frame;
        *count = 1;
        return 0;
    }
    /* No usable offset table: frames begin at fragments with a start marker
     * (indexed once at open time). */
    if (frame < d->n_starts) {
        *first = d->starts[frame];
        *count = (frame + 1 < d->n_starts ? d->starts[frame + 1] : d->n_frag) - *first;
        return 0;
    }
    return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "frame %u not found among %zu fragments", frame + 1, d->n_frag);
}

/* ---- conversion ----------------------------------------------------------- */

static int native_raw(const gj_dicom *d, const struct gj_dicom_image *img, uint32_t frame,
                      struct gj_dcm_raw *raw, struct gj_error *err)
{
    uint64_t n = (uint64_t)img->rows * img->columns * img->samples_per_pixel;
    int bytes = (int)img->bits_allocated / 8;
    uint64_t fb = n * (uint64_t)bytes;
    const uint8_t *src = d->pixel + fb * frame;
    raw->rows = img->rows;
    raw->cols = img->columns;
    raw->spp = img->samples_per_pixel;
    raw->bytes = bytes;
    raw->planar = img->samples_per_pixel == 3 && img->planar_configuration == 1;
    raw->data = malloc(fb ? fb : 1);
    if (!raw->data)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "out of memory for a frame of %llu bytes", (unsigned long long)fb);
    if (bytes == 2) {
        uint16_t *o = (uint16_t *)raw->data;
        if (d->pixel_be) {
            for (uint64_t i = 0; i < n; i++)
                o[i] = (uint16_t)(src[2 * i] << 8 | src[2 * i + 1]);
        } else {
            for (uint64_t i = 0; i < n; i++)
                o[i] = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
        }
    } else if (d->pixel_be && d->pixel_vr == GJ_VR('O', 'W')) {
        /* 8-bit samples in big-endian OW words: bytes swapped in pairs */
        uint64_t base = fb * frame;
        const uint8_t *all = d->pixel;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t k = base + i;
            uint64_t s = k ^ 1;
            raw->data[i] = s < d->pixel_len ? all[s] : 0;
        }
    } else {
        memcpy(raw->data, src, fb);
    }
    return 0;
}

/* The frame's bytes: its one fragment, or its fragments joined into *joined (owned). */
static int join_fragments(const gj_dicom *d, size_t first, size_t count, size_t total, const uint8_t **p,
                          size_t *n, uint8_t **joined, struct gj_error *err)
{
    if (count == 1) {
        *p = d->frag[first].p;
        *n = d->frag[first].len;
        return 0;
    }
    *joined = malloc(total ? total : 1);
    if (!*joined)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "out of memory");
    size_t o = 0;
    for (size_t i = first; i < first + count; i++) {
        memcpy(*joined + o, d->frag[i].p, d->frag[i].len);
        o += d->frag[i].len;
    }
    *p = *joined;
    *n = total;
    return 0;
}

static int frame_raw(const gj_dicom *d, const struct gj_dicom_image *img, uint32_t frame,
                     struct gj_dcm_raw *raw, struct gj_error *err)
{
    memset(raw, 0, sizeof *raw);
    if (frame >= img->frames)
        return gj_error_set(err, "", "frame %u out of range (%u frames)", frame + 1, img->frames);
    if (!d->encapsulated)
        return native_raw(d, img, frame, raw, err);

    size_t first = 0, count = 0;
    if (frame_fragments(d, img, frame, &first, &count, err) < 0)
        return -1;
    if (count == 0)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "frame %u has no fragments", frame + 1);
    size_t total = 0;
    for (size_t i = first; i < first + count; i++)
        total += d->frag[i].len;   /* bounded by the file size */
    uint64_t frame_bytes = (uint64_t)img->rows * img->columns * img->samples_per_pixel * (img->bits_allocated / 8);
    uint64_t ratio = d->ts == GJ_TS_RLE ? 64 : GJ_DICOM_MAX_EXPANSION;
    if (frame_bytes > (uint64_t)total * ratio + (1u << 20))
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "frame %u: %zu compressed bytes cannot hold a %u x %u x %u frame",
                          frame + 1, total, img->columns, img->rows, img->samples_per_pixel);
    const uint8_t *p = NULL;
    size_t n = 0;
    uint8_t *joined = NULL;
    if (join_fragments(d, first, count, total, &p, &n, &joined, err))
        return -1;
    int rc = gj_dcm_codec_exists(d->ts) ? gj_dcm_codec_decode(d->ts, p, n, img, raw, err)
             : gj_dcm_tag_error(err, GJ_DCM_PixelData, "encapsulated pixel data in transfer syntax %s", d->ts_uid);
    free(joined);
    if (rc < 0) {
        free(raw->data);
        raw->data = NULL;
        return -1;
    }
    if (raw->rows != img->rows || raw->cols != img->columns || raw->spp != img->samples_per_pixel) {
        free(raw->data);
        raw->data = NULL;
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "compressed frame is %u x %u x %u; the dataset says %u x %u x %u",
                          raw->rows, raw->cols, raw->spp, img->rows, img->columns, img->samples_per_pixel);
    }
    return 0;
}

static inline uint32_t raw_at(const struct gj_dcm_raw *raw, uint64_t pixel, uint32_t sample, uint64_t npix)
{
    uint64_t k = raw->planar ? (uint64_t)sample * npix + pixel : pixel * raw->spp + sample;
    return raw->bytes == 2 ? ((const uint16_t *)raw->data)[k] : raw->data[k];
}

/* How to get a stored value out of a sample: computed once per frame, not per sample. */
struct stored_fmt {
    uint32_t shift, mask;
    uint32_t sign;        /* the sign bit; 0 when unsigned */
};

static struct stored_fmt stored_fmt(const struct gj_dicom_image *img)
{
    struct stored_fmt f;
    f.shift = img->high_bit + 1 - img->bits_stored;
    f.mask = img->bits_stored >= 32 ? 0xFFFFFFFFu : ((1u << img->bits_stored) - 1);
    f.sign = img->pixel_representation ? 1u << (img->bits_stored - 1) : 0;
    return f;
}

static inline int32_t stored_value(uint32_t v, struct stored_fmt f)
{
    v = (v >> f.shift) & f.mask;
    if (v & f.sign)   /* bits_stored <= 16 (image_info): mask + 1 does not wrap */
        return (int32_t)v - (int32_t)(f.mask + 1);
    return (int32_t)v;
}

static double clampd(double x, double lo, double hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* Stored values; color converted to RGB planes. */
static int decode_common(const gj_dicom *d, uint32_t frame, int32_t *ivals, float *fvals,
                         uint64_t capacity, struct gj_error *err)
{
    struct gj_dicom_image img;
    if (d->header_only)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "the dataset was opened without its pixel data");
    if (gj_dicom_image_info(d, &img, err) < 0)
        return -1;
    uint64_t need = gj_dicom_frame_floats(&img);
    if (capacity < need)
        return gj_error_set(err, "", "output holds %llu values; the frame needs %llu",
                          (unsigned long long)capacity, (unsigned long long)need);
    int mono = img.samples_per_pixel == 1;
    if (!mono && img.photometric != GJ_PI_RGB && img.photometric != GJ_PI_YBR_FULL &&
        !(img.photometric == GJ_PI_YBR_FULL_422 && img.encapsulated))
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "photometric interpretation %s not supported", img.photometric_name);
    if (mono && img.photometric != GJ_PI_MONOCHROME1 && img.photometric != GJ_PI_MONOCHROME2)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "photometric interpretation %s not supported", img.photometric_name);
    struct gj_dcm_raw raw;
    if (frame_raw(d, &img, frame, &raw, err) < 0)
        return -1;
    uint64_t npix = (uint64_t)img.rows * img.columns;
    const struct stored_fmt sf = stored_fmt(&img);
    if (mono) {
        for (uint64_t i = 0; i < npix; i++) {
            int32_t s = stored_value(raw_at(&raw, i, 0, npix), sf);
            if (ivals)
                ivals[i] = s;
            else
                fvals[i] = (float)(s * img.rescale_slope + img.rescale_intercept);
        }
    } else {
        int ybr = img.photometric == GJ_PI_YBR_FULL && !raw.color_done;
        double maxv = (double)((1u << img.bits_stored) - 1), half = (double)(1u << (img.bits_stored - 1));
        for (uint64_t i = 0; i < npix; i++) {
            int32_t c0 = stored_value(raw_at(&raw, i, 0, npix), sf);
            int32_t c1 = stored_value(raw_at(&raw, i, 1, npix), sf);
            int32_t c2 = stored_value(raw_at(&raw, i, 2, npix), sf);
            if (ybr) {
                double y = c0, cb = c1 - half, cr = c2 - half;
                c0 = (int32_t)lround(clampd(y + 1.402 * cr, 0, maxv));
                c1 = (int32_t)lround(clampd(y - 0.344136 * cb - 0.714136 * cr, 0, maxv));
                c2 = (int32_t)lround(clampd(y + 1.772 * cb, 0, maxv));
            }
            if (ivals) {
                ivals[i] = c0;
                ivals[npix + i] = c1;
                ivals[2 * npix + i] = c2;
            } else {
                fvals[i] = (float)c0;
                fvals[npix + i] = (float)c1;
                fvals[2 * npix + i] = (float)c2;
            }
        }
    }
    free(raw.data);
    return 0;
}

int gj_dicom_decode_frame(const gj_dicom *d, uint32_t frame, float *out, uint64_t capacity,
                          struct gj_error *err)
{
    return decode_common(d, frame, NULL, out, capacity, err);
}

int gj_dicom_decode_frame_raw(const gj_dicom *d, uint32_t frame, int32_t *out, uint64_t capacity,
                              struct gj_error *err)
{
    return decode_common(d, frame, out, NULL, capacity, err);
}
