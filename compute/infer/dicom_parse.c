/*
 * dicom_parse.c — Part 10 file, file meta group, the four uncompressed
 * encodings (implicit LE, explicit LE/BE, deflated), sequences, items and
 * encapsulated pixel data; tag lookup.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "dicom_codec.h"
#include "dicom_internal.h"

#define UNDEFINED_LEN 0xFFFFFFFFu
#define TAG_ITEM      GJ_TAG(0xFFFE, 0xE000)
#define TAG_ITEM_END  GJ_TAG(0xFFFE, 0xE00D)
#define TAG_SEQ_END   GJ_TAG(0xFFFE, 0xE0DD)

int gj_dcm_tag_error(struct gj_error *err, uint32_t tag, const char *fmt, ...)
{
    char field[16], msg[sizeof err->message];
    snprintf(field, sizeof field, "(%04X,%04X)", tag >> 16, tag & 0xFFFF);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gj_error_set(err, field, "%s", msg);
}

/* ---- transfer syntaxes ---------------------------------------------------- */

static const struct { const char *uid; enum gj_dicom_ts ts; const char *name; } ts_table[] = {
    { "1.2.840.10008.1.2", GJ_TS_IMPLICIT_LE, "Implicit VR Little Endian" },
    { "1.2.840.10008.1.2.1", GJ_TS_EXPLICIT_LE, "Explicit VR Little Endian" },
    { "1.2.840.10008.1.2.1.99", GJ_TS_DEFLATED_LE, "Deflated Explicit VR Little Endian" },
    { "1.2.840.10008.1.2.2", GJ_TS_EXPLICIT_BE, "Explicit VR Big Endian" },
    { "1.2.840.10008.1.2.4.50", GJ_TS_JPEG_BASELINE, "JPEG Baseline (Process 1)" },
    { "1.2.840.10008.1.2.4.51", GJ_TS_JPEG_EXTENDED, "JPEG Extended (Process 2 & 4)" },
    { "1.2.840.10008.1.2.4.57", GJ_TS_JPEG_LOSSLESS, "JPEG Lossless, Non-Hierarchical (Process 14)" },
    { "1.2.840.10008.1.2.4.70", GJ_TS_JPEG_LOSSLESS_SV1, "JPEG Lossless, First-Order Prediction (Process 14 SV1)" },
    { "1.2.840.10008.1.2.4.80", GJ_TS_JPEGLS_LOSSLESS, "JPEG-LS Lossless" },
    { "1.2.840.10008.1.2.4.81", GJ_TS_JPEGLS_NEAR, "JPEG-LS Near-Lossless" },
    { "1.2.840.10008.1.2.4.90", GJ_TS_J2K_LOSSLESS, "JPEG 2000 (Lossless Only)" },
    { "1.2.840.10008.1.2.4.91", GJ_TS_J2K, "JPEG 2000" },
    { "1.2.840.10008.1.2.5", GJ_TS_RLE, "RLE Lossless" },
};

const char *gj_dicom_ts_name(enum gj_dicom_ts ts)
{
    for (size_t i = 0; i < sizeof ts_table / sizeof ts_table[0]; i++)
        if (ts_table[i].ts == ts)
            return ts_table[i].name;
    return "unknown";
}

enum gj_dicom_ts gj_dicom_ts(const gj_dicom *d) { return d->ts; }
const char *gj_dicom_ts_uid(const gj_dicom *d) { return d->ts_uid; }

/* ---- implicit VR: the standard's dictionary (dicom_dict.c) ---------------- */

static uint16_t dict_vr(uint32_t tag)
{
    uint16_t vr = gj_dcm_dict_vr(tag);
    if (vr)
        return vr;
    if ((tag & 0xFFFF) == 0)
        return GJ_VR('U', 'L');  /* group length */
    return 0;
}

static int vr_has_long_length(uint16_t vr)
{
    switch (vr) {
    case GJ_VR('O', 'B'): case GJ_VR('O', 'D'): case GJ_VR('O', 'F'): case GJ_VR('O', 'L'):
    case GJ_VR('O', 'V'): case GJ_VR('O', 'W'): case GJ_VR('S', 'Q'): case GJ_VR('S', 'V'):
    case GJ_VR('U', 'C'): case GJ_VR('U', 'N'): case GJ_VR('U', 'R'): case GJ_VR('U', 'T'):
    case GJ_VR('U', 'V'):
        return 1;
    default:
        return 0;
    }
}

/* ---- byte reading --------------------------------------------------------- */

static uint16_t rd16(const uint8_t *p, int be)
{
    return be ? (uint16_t)(p[0] << 8 | p[1]) : (uint16_t)(p[1] << 8 | p[0]);
}

static uint32_t rd32(const uint8_t *p, int be)
{
    return be ? ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3])
              : ((uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0]);
}

/* ---- the element walker --------------------------------------------------- */

struct walker {
    gj_dicom *d;
    int explicit_vr, be;
    const uint8_t *base;  /* for offsets in messages */
    struct gj_error *err;
    int header_only;      /* stop at the top-level pixel data (gj_dicom_open_limits) */
};

static int add_elem(struct walker *w, uint32_t tag, uint16_t vr, int depth,
                    const uint8_t *val, uint32_t len)
{
    gj_dicom *d = w->d;
    if (d->n_el >= GJ_DICOM_MAX_ELEMENTS)
        return gj_error_set(w->err, "", "more than %u elements", GJ_DICOM_MAX_ELEMENTS);
    if (d->n_el == d->cap_el) {
        size_t cap = d->cap_el ? d->cap_el * 2 : 64;
        struct gj_dcm_elem *n = realloc(d->el, cap * sizeof *n);
        if (!n)
            return gj_error_set(w->err, "", "out of memory");
        d->el = n;
        d->cap_el = cap;
    }
    struct gj_dcm_elem *e = &d->el[d->n_el++];
    e->tag = tag;
    e->vr = vr;
    e->depth = (uint8_t)depth;
    e->be = (uint8_t)w->be;
    e->val = val;
    e->len = len;
    return 0;
}

static int parse_dataset(struct walker *w, const uint8_t **pp, const uint8_t *end, int depth,
                         int until_item_end);

#define OFF(w, p) ((long long)((p) - (w)->base))

/* Encapsulated pixel data: items until the sequence delimiter. Always little
 * endian. Records fragments when record is set (top-level pixel data). */
static int parse_encapsulated(struct walker *w, const uint8_t **pp, const uint8_t *end, int record)
{
    const uint8_t *p = *pp;
    int first = 1;
    const uint8_t *first_frag_item = NULL;
    gj_dicom *d = w->d;
    size_t cap = 0;
    for (;;) {
        if (end - p < 8)
            return gj_error_set(w->err, "", "encapsulated pixel data truncated at offset %lld", OFF(w, p));
        uint32_t tag = (uint32_t)rd16(p, 0) << 16 | rd16(p + 2, 0);
        uint32_t len = rd32(p + 4, 0);
        const uint8_t *item = p;
        p += 8;
        if (tag == TAG_SEQ_END) {
            *pp = p;
            return 0;
        }
        if (tag != TAG_ITEM)
            return gj_error_set(w->err, "", "unexpected tag (%04X,%04X) in encapsulated pixel data at offset %lld",
                              tag >> 16, tag & 0xFFFF, OFF(w, item));
        if (len == UNDEFINED_LEN || len > (uint64_t)(end - p))
            return gj_error_set(w->err, "", "pixel data fragment length %u past the end at offset %lld",
                              len, OFF(w, item));
        if (record) {
            if (first) {
                if (len % 4)
                    return gj_error_set(w->err, "", "basic offset table length %u is not a multiple of 4", len);
                d->bot = len ? p : NULL;
                d->bot_len = len;
            } else {
                if (d->n_frag >= GJ_DICOM_MAX_FRAGMENTS)
                    return gj_error_set(w->err, "", "more than %u pixel data fragments", GJ_DICOM_MAX_FRAGMENTS);
                if (d->n_frag == cap) {
                    cap = cap ? cap * 2 : 16;
                    struct gj_dcm_frag *n = realloc(d->frag, cap * sizeof *n);
                    if (!n)
                        return gj_error_set(w->err, "", "out of memory");
                    d->frag = n;
                }
                if (!first_frag_item)
                    first_frag_item = item;
                d->frag[d->n_frag].p = p;
                d->frag[d->n_frag].len = len;
                d->frag[d->n_frag].item_off = (uint64_t)(item - first_frag_item);
                d->n_frag++;
            }
        }
        first = 0;
        p += len;
    }
}

/* A sequence's items: up to end (defined length) or the sequence delimiter. */
static int parse_sequence(struct walker *w, const uint8_t **pp, const uint8_t *end, int depth,
                          int undefined)
{
    const uint8_t *p = *pp;
    if (depth > GJ_DICOM_MAX_DEPTH)
        return gj_error_set(w->err, "", "sequences nested deeper than %d", GJ_DICOM_MAX_DEPTH);
    for (;;) {
        if (!undefined && p == end)
            break;
        if (end - p < 8)
            return gj_error_set(w->err, "", "sequence truncated at offset %lld", OFF(w, p));
        uint32_t tag = (uint32_t)rd16(p, w->be) << 16 | rd16(p + 2, w->be);
        uint32_t len = rd32(p + 4, w->be);
        const uint8_t *at = p;
        p += 8;
        if (tag == TAG_SEQ_END) {
            if (!undefined)
                return gj_error_set(w->err, "", "sequence delimiter in a defined-length sequence at offset %lld", OFF(w, at));
            break;
        }
        if (tag != TAG_ITEM)
            return gj_error_set(w->err, "", "expected an item, found (%04X,%04X) at offset %lld",
                              tag >> 16, tag & 0xFFFF, OFF(w, at));
        if (add_elem(w, TAG_ITEM, 0, depth, NULL, 0) < 0)   /* marks where the item begins */
            return -1;
        if (len == UNDEFINED_LEN) {
            if (parse_dataset(w, &p, end, depth, 1) < 0)
                return -1;
        } else {
            if (len > (uint64_t)(end - p))
                return gj_error_set(w->err, "", "item length %u past the end at offset %lld", len, OFF(w, at));
            const uint8_t *q = p;
            if (parse_dataset(w, &q, p + len, depth, 0) < 0)
                return -1;
            p += len;
        }
    }
    *pp = p;
    return 0;
}

/* One element's header at p: tag, VR (explicit, or from the dictionary) and length;
 * *hdr its size in bytes. 0, or -1 with err. */
static int read_header(struct walker *w, const uint8_t *p, const uint8_t *end, uint32_t *tag, uint16_t *vr,
                       uint32_t *len, int *hdr)
{
    *tag = (uint32_t)rd16(p, w->be) << 16 | rd16(p + 2, w->be);
    if (!w->explicit_vr || *tag == TAG_ITEM_END || (*tag >> 16) == 0xFFFE) {
        *vr = w->explicit_vr ? 0 : dict_vr(*tag);
        *len = rd32(p + 4, w->be);
        *hdr = 8;
        return 0;
    }
    *vr = GJ_VR(p[4], p[5]);
    if (p[4] < 'A' || p[4] > 'Z' || p[5] < 'A' || p[5] > 'Z')
        return gj_dcm_tag_error(w->err, *tag, "invalid VR at offset %lld (tag (%04X,%04X))", OFF(w, p),
                                *tag >> 16, *tag & 0xFFFF);
    if (vr_has_long_length(*vr)) {
        if (end - p < 12)
            return gj_error_set(w->err, "", "element header truncated at offset %lld", OFF(w, p));
        *len = rd32(p + 8, w->be);
        *hdr = 12;
    } else {
        *len = rd16(p + 6, w->be);
        *hdr = 8;
    }
    return 0;
}

/* An element of undefined length: encapsulated pixel data, or a sequence (UN of
 * undefined length is implicit VR LE inside, PS3.5 6.2.2). */
static int undefined_length(struct walker *w, const uint8_t **pp, const uint8_t *end, uint32_t tag, uint16_t vr,
                            int depth, const uint8_t *at)
{
    if (tag == GJ_DCM_PixelData) {
        int record = depth == 0;
        if (record) {
            if (w->d->has_pixels)
                return gj_dcm_tag_error(w->err, tag, "pixel data twice");
            w->d->has_pixels = 1;
            w->d->encapsulated = 1;
            w->d->pixel_vr = vr;
        }
        if (add_elem(w, tag, vr, depth, NULL, 0) < 0)
            return -1;
        return parse_encapsulated(w, pp, end, record);
    }
    if (vr != GJ_VR('S', 'Q') && vr != GJ_VR('U', 'N') && vr != 0)
        return gj_dcm_tag_error(w->err, tag, "undefined length for (%04X,%04X) %c%c at offset %lld",
                                tag >> 16, tag & 0xFFFF, vr >> 8, vr & 0xFF, OFF(w, at));
    if (add_elem(w, tag, GJ_VR('S', 'Q'), depth, NULL, 0) < 0)
        return -1;
    int save_explicit = w->explicit_vr, save_be = w->be;
    if (vr == GJ_VR('U', 'N')) {
        w->explicit_vr = 0;
        w->be = 0;
    }
    int rc = parse_sequence(w, pp, end, depth + 1, 1);
    w->explicit_vr = save_explicit;
    w->be = save_be;
    return rc;
}

/* An element of defined length len at p: a sequence, or a value (the top-level pixel
 * data's is recorded). */
static int defined_length(struct walker *w, const uint8_t *p, uint32_t tag, uint16_t vr, uint32_t len, int depth)
{
    if (vr == GJ_VR('S', 'Q')) {
        if (add_elem(w, tag, vr, depth, NULL, 0) < 0)
            return -1;
        const uint8_t *q = p;
        return parse_sequence(w, &q, p + len, depth + 1, 0);
    }
    if (add_elem(w, tag, vr, depth, p, len) < 0)
        return -1;
    if (tag == GJ_DCM_PixelData && depth == 0) {
        if (w->d->has_pixels)
            return gj_dcm_tag_error(w->err, tag, "pixel data twice");
        w->d->has_pixels = 1;
        w->d->encapsulated = 0;
        w->d->pixel = p;
        w->d->pixel_len = len;
        w->d->pixel_vr = vr;
        w->d->pixel_be = w->be;
    }
    return 0;
}

/* header_only: the top-level pixel data's header is recorded, its value not read. */
static int pixel_header(struct walker *w, uint16_t vr, uint32_t len, const uint8_t *value)
{
    gj_dicom *d = w->d;
    d->has_pixels = 1;
    d->encapsulated = len == UNDEFINED_LEN;
    d->pixel_len = d->encapsulated ? 0 : len;
    d->pixel_vr = vr;
    d->pixel_be = w->be;
    d->pixel_offset = (uint64_t)(value - w->base);
    return 0;
}

/* Elements until end, or (until_item_end) the item delimiter. */
static int parse_dataset(struct walker *w, const uint8_t **pp, const uint8_t *end, int depth,
                         int until_item_end)
{
    const uint8_t *p = *pp;
    for (;;) {
        if (p == end) {
            if (until_item_end)
                return gj_error_set(w->err, "", "item without delimiter: truncated at offset %lld", OFF(w, p));
            break;
        }
        if (end - p < 8)
            return gj_error_set(w->err, "", "element header truncated at offset %lld", OFF(w, p));
        const uint8_t *at = p;
        uint32_t tag = 0, len = 0;
        uint16_t vr = 0;
        int hdr = 0;
        if (read_header(w, p, end, &tag, &vr, &len, &hdr))
            return -1;
        if (tag == TAG_ITEM_END) {
            if (!until_item_end)
                return gj_error_set(w->err, "", "unexpected item delimiter at offset %lld", OFF(w, at));
            p += 8;
            break;
        }
        if ((tag >> 16) == 0xFFFE)
            return gj_error_set(w->err, "", "unexpected (%04X,%04X) at offset %lld",
                                tag >> 16, tag & 0xFFFF, OFF(w, at));
        p += hdr;
        if (w->header_only && depth == 0 && tag == GJ_DCM_PixelData) {
            *pp = p;
            return pixel_header(w, vr, len, p);
        }
        if (len == UNDEFINED_LEN) {
            if (undefined_length(w, &p, end, tag, vr, depth, at) < 0)
                return -1;
            continue;
        }
        if (len > (uint64_t)(end - p))
            return gj_dcm_tag_error(w->err, tag, "length %u of (%04X,%04X) runs past the end (offset %lld, %lld bytes left)",
                                    len, tag >> 16, tag & 0xFFFF, OFF(w, at), (long long)(end - p));
        if (defined_length(w, p, tag, vr, len, depth) < 0)
            return -1;
        p += len;
    }
    *pp = p;
    return 0;
}

/* ---- deflate -------------------------------------------------------------- */

/* Output of inflate_dataset: grown by doubling up to limit (at most GJ_DICOM_MAX_INFLATED);
 * with cut_ok the output ends there, else that is an error. */
struct inflated { uint8_t *out; size_t len, cap; uint64_t limit; int cut_ok; };

/* Room for more output. 0, 1 at the limit when cut_ok, or -1 with err. */
static int inflated_grow(struct inflated *o, struct gj_error *err)
{
    const uint64_t limit = o->limit;
    if (o->len < o->cap)
        return 0;
    if (o->cap >= limit)
        return o->cut_ok ? 1 : gj_error_set(err, "", "deflated dataset inflates past %llu bytes",
                                            (unsigned long long)limit);
    size_t ncap = o->cap * 2 > limit ? (size_t)limit : o->cap * 2;
    uint8_t *n = realloc(o->out, ncap);
    if (!n)
        return gj_error_set(err, "", "out of memory");
    o->out = n;
    o->cap = ncap;
    return 0;
}

/* Inflates until the stream ends or cannot go on: 0 at its end, 1 when the input ended
 * first, 2 at the limit (cut_ok), or -1 with err. */
static int inflate_all(z_stream *zs, size_t n, struct inflated *o, struct gj_error *err)
{
    int rc = Z_OK;
    size_t in_left = n;
    while (rc != Z_STREAM_END) {
        int grown = inflated_grow(o, err);
        if (grown)
            return grown < 0 ? -1 : 2;
        uInt chunk_in = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
        size_t room = o->cap - o->len;
        uInt chunk_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
        zs->avail_in = chunk_in;
        zs->next_out = o->out + o->len;
        zs->avail_out = chunk_out;
        rc = inflate(zs, Z_NO_FLUSH);
        in_left -= chunk_in - zs->avail_in;
        o->len += chunk_out - zs->avail_out;
        if (rc == Z_BUF_ERROR && zs->avail_out > 0)
            break;   /* no progress possible: input ended before the stream did */
        if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
            return gj_error_set(err, "", "deflated dataset is corrupt (%s)", zs->msg ? zs->msg : "zlib error");
        if (rc == Z_OK && in_left == 0 && zs->avail_out > 0 && zs->avail_in == 0)
            break;   /* input exhausted without stream end */
    }
    return rc == Z_STREAM_END ? 0 : 1;
}

/* window_bits: -15 raw deflate (the standard), 15 a zlib stream (some old
 * writers add the zlib header). */
static int inflate_dataset(gj_dicom *d, const uint8_t *src, size_t n, int window_bits,
                           const struct gj_dicom_open_limits *lim, struct gj_error *err)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, window_bits) != Z_OK)
        return gj_error_set(err, "", "zlib init failed");
    uint64_t limit = lim->max_inflated && lim->max_inflated < GJ_DICOM_MAX_INFLATED ? lim->max_inflated
                                                                                     : GJ_DICOM_MAX_INFLATED;
    limit = limit < 4096 ? 4096 : limit;
    /* the first guess too stays within the limit, which is only checked when the buffer is full */
    struct inflated o = { NULL, 0, n > (limit - 4096) / 4 ? (size_t)limit : n * 4 + 4096, limit,
                          lim->header_only };
    o.out = malloc(o.cap);
    if (!o.out) {
        inflateEnd(&zs);
        return gj_error_set(err, "", "out of memory");
    }
    zs.next_in = (Bytef *)src;
    int rc = inflate_all(&zs, n, &o, err);
    inflateEnd(&zs);
    d->inflated_cut = rc == 2;
    if (rc == 2)
        rc = 0;   /* header_only: what the limit let through is read up to the pixel data */
    if (rc) {
        free(o.out);
        return rc < 0 ? -1 : gj_error_set(err, "", "deflated dataset is truncated");
    }
    d->inflated = o.out;
    d->inflated_len = o.len;
    return 0;
}

/* ---- opening -------------------------------------------------------------- */

void gj_dicom_free(gj_dicom *d)
{
    if (!d)
        return;
    free(d->file);
    free(d->inflated);
    free(d->el);
    free(d->frag);
    free(d->starts);
    free(d);
}

static void trim_copy(char *dst, size_t dstlen, const uint8_t *src, size_t n)
{
    while (n && (src[n - 1] == ' ' || src[n - 1] == 0))
        n--;
    size_t s = 0;
    while (s < n && src[s] == ' ')
        s++;
    size_t k = n - s;
    if (k >= dstlen)
        k = dstlen - 1;
    memcpy(dst, src + s, k);
    dst[k] = 0;
}

/* Where the elements start: after the 128-byte preamble and "DICM", after a bare
 * "DICM", or at once when the file begins with a group 0002 or 0008 element. */
static int skip_preamble(const gj_dicom *d, const uint8_t **p, struct gj_error *err)
{
    const uint8_t *buf = d->file;
    if (d->file_len >= 132 && memcmp(buf + 128, "DICM", 4) == 0)
        *p = buf + 132;
    else if (d->file_len >= 4 && memcmp(buf, "DICM", 4) == 0)
        *p = buf + 4;
    else if (d->file_len >= 8 && (rd16(buf, 0) == 0x0002 || rd16(buf, 0) == 0x0008))
        *p = buf;
    else
        return gj_error_set(err, "", "not a DICOM file (no DICM prefix at offset 128)");
    return 0;
}

/* The file meta group (explicit VR little endian, group 0002): its elements are found
 * one by one, then parsed. *p moves past it. */
static int parse_meta(struct walker *w, const uint8_t **p, const uint8_t *end, struct gj_error *err)
{
    const uint8_t *meta_start = *p, *q = *p;
    while (end - q >= 6 && rd16(q, 0) == 0x0002) {
        uint16_t vr = GJ_VR(q[4], q[5]);
        uint64_t hdr = vr_has_long_length(vr) ? 12 : 8;
        if ((uint64_t)(end - q) < hdr)
            return gj_error_set(err, "", "file meta group truncated");
        uint64_t len = hdr == 12 ? rd32(q + 8, 0) : rd16(q + 6, 0);
        if (len == UNDEFINED_LEN || len > (uint64_t)(end - q) - hdr)
            return gj_error_set(err, "", "file meta element length %llu past the end", (unsigned long long)len);
        q += hdr + len;
    }
    *p = q;
    if (q == meta_start)
        return 0;
    w->explicit_vr = 1;
    w->be = 0;
    return parse_dataset(w, &meta_start, q, 0, 0);
}

/* The transfer syntax: the meta group's, or without one a guess between implicit and
 * explicit VR little endian from the first element. */
static int transfer_syntax(gj_dicom *d, const uint8_t *p, const uint8_t *end, struct gj_error *err)
{
    const struct gj_dcm_elem *tse = gj_dcm_find(d, GJ_DCM_TransferSyntaxUID);
    if (tse && tse->val) {
        trim_copy(d->ts_uid, sizeof d->ts_uid, tse->val, tse->len);
        d->ts = GJ_TS_UNKNOWN;
        for (size_t i = 0; i < sizeof ts_table / sizeof ts_table[0]; i++)
            if (strcmp(ts_table[i].uid, d->ts_uid) == 0)
                d->ts = ts_table[i].ts;
        if (d->ts == GJ_TS_UNKNOWN)
            return gj_dcm_tag_error(err, GJ_DCM_TransferSyntaxUID, "unsupported transfer syntax %s", d->ts_uid);
    } else if (end - p >= 6 && p[4] >= 'A' && p[4] <= 'Z' && p[5] >= 'A' && p[5] <= 'Z') {
        d->ts = GJ_TS_EXPLICIT_LE;
        strcpy(d->ts_uid, "1.2.840.10008.1.2.1");
    } else {
        d->ts = GJ_TS_IMPLICIT_LE;
        strcpy(d->ts_uid, "1.2.840.10008.1.2");
    }
    d->explicit_vr = d->ts != GJ_TS_IMPLICIT_LE;
    d->big_endian = d->ts == GJ_TS_EXPLICIT_BE;
    return 0;
}

/* A deflated dataset, inflated: raw deflate as the standard says, or a zlib stream
 * (CMF 0x78, FCHECK) as some old writers make. */
static int inflate_any(gj_dicom *d, const uint8_t *p, size_t n, const struct gj_dicom_open_limits *lim,
                       struct gj_error *err)
{
    if (inflate_dataset(d, p, n, -15, lim, err) == 0)
        return 0;
    if (!(n >= 2 && p[0] == 0x78 && ((p[0] << 8) | p[1]) % 31 == 0))
        return -1;
    return inflate_dataset(d, p, n, 15, lim, err);
}

/* Fragments that begin a frame, for files without a usable offset table. */
static int index_frame_starts(gj_dicom *d, struct gj_error *err)
{
    if (!d->n_frag)
        return 0;
    d->starts = malloc(d->n_frag * sizeof *d->starts);
    if (!d->starts)
        return gj_error_set(err, "", "out of memory");
    for (size_t i = 0; i < d->n_frag; i++)
        if (gj_dcm_codec_starts_frame(d->ts, d->frag[i].p, d->frag[i].len))
            d->starts[d->n_starts++] = i;
    return 0;
}

/* The dataset from ds to ds_end (after the meta group, or inflated). 0, or -1 with err. */
static int parse_main(gj_dicom *d, struct walker *w, const uint8_t *ds, const uint8_t *ds_end)
{
    w->base = ds;
    w->explicit_vr = d->explicit_vr;
    w->be = d->big_endian;
    /* trailing padding of fewer than 8 bytes of zeros is tolerated */
    if (ds_end - ds < 8 && ds_end > ds) {
        for (const uint8_t *z = ds; z < ds_end; z++)
            if (*z)
                return gj_error_set(w->err, "", "dataset truncated");
        ds_end = ds;
    }
    return parse_dataset(w, &ds, ds_end, 0, 0);
}

#define HEADER_STEP ((uint64_t)256 << 10)

/* header_only, deflated: inflated a little at a time (HEADER_STEP, then 8 times more each
 * time, up to max_inflated) until the pixel data's header is among what was read, so that
 * the attributes of a huge image cost about their own size. 0, or -1 with err. */
static int parse_deflated_header(gj_dicom *d, struct walker *w, const uint8_t *p, size_t n,
                                 const struct gj_dicom_open_limits *lim)
{
    const size_t meta_elements = d->n_el;
    const uint64_t max = lim->max_inflated && lim->max_inflated < GJ_DICOM_MAX_INFLATED ? lim->max_inflated
                                                                                     : GJ_DICOM_MAX_INFLATED;
    for (uint64_t step = HEADER_STEP;; step *= 8) {
        const struct gj_dicom_open_limits sub = { .max_inflated = step < max ? step : max, .header_only = 1 };
        free(d->inflated);   /* the elements read from it go too */
        d->inflated = NULL;
        d->n_el = meta_elements;
        d->has_pixels = 0;
        if (inflate_any(d, p, n, &sub, w->err) < 0)
            return -1;
        int rc = parse_main(d, w, d->inflated, d->inflated + d->inflated_len);
        if (!d->inflated_cut || (rc == 0 && d->has_pixels))
            return rc;
        if (sub.max_inflated == max)
            return gj_error_set(w->err, "", "the attributes before the pixel data inflate past %zu bytes",
                                d->inflated_len);
    }
}

static int parse_file(gj_dicom *d, const struct gj_dicom_open_limits *lim, struct gj_error *err)
{
    const uint8_t *end = d->file + d->file_len, *p = d->file;
    struct walker w = { .d = d, .base = d->file, .err = err };
    if (skip_preamble(d, &p, err) || parse_meta(&w, &p, end, err) || transfer_syntax(d, p, end, err))
        return -1;
    w.header_only = d->header_only = lim->header_only;
    int rc;
    if (d->ts == GJ_TS_DEFLATED_LE && lim->header_only)
        rc = parse_deflated_header(d, &w, p, (size_t)(end - p), lim);
    else if (d->ts == GJ_TS_DEFLATED_LE)
        rc = inflate_any(d, p, (size_t)(end - p), lim, err) < 0
                 ? -1 : parse_main(d, &w, d->inflated, d->inflated + d->inflated_len);
    else
        rc = parse_main(d, &w, p, end);
    return rc < 0 ? -1 : index_frame_starts(d, err);
}

uint64_t gj_dicom_inflated_bytes(const gj_dicom *d)
{
    if (d->ts != GJ_TS_DEFLATED_LE)
        return 0;
    return d->header_only && d->has_pixels ? d->pixel_offset + d->pixel_len : d->inflated_len;
}

static const struct gj_dicom_open_limits no_limits;

int gj_dicom_open_mem(const void *data, size_t len, gj_dicom **out, struct gj_error *err)
{
    return gj_dicom_open_mem_limited(data, len, &no_limits, out, err);
}

int gj_dicom_open_file(const char *path, gj_dicom **out, struct gj_error *err)
{
    return gj_dicom_open_file_limited(path, &no_limits, out, err);
}

int gj_dicom_open_mem_limited(const void *data, size_t len, const struct gj_dicom_open_limits *lim,
                              gj_dicom **out, struct gj_error *err)
{
    *out = NULL;
    if (len > GJ_DICOM_MAX_FILE_BYTES)
        return gj_error_set(err, "", "file larger than %llu bytes", (unsigned long long)GJ_DICOM_MAX_FILE_BYTES);
    gj_dicom *d = calloc(1, sizeof *d);
    if (!d)
        return gj_error_set(err, "", "out of memory");
    d->file = malloc(len ? len : 1);
    if (!d->file) {
        free(d);
        return gj_error_set(err, "", "out of memory");
    }
    if (len)
        memcpy(d->file, data, len);
    d->file_len = len;
    if (parse_file(d, lim ? lim : &no_limits, err) < 0) {
        gj_dicom_free(d);
        return -1;
    }
    *out = d;
    return 0;
}

int gj_dicom_open_file_limited(const char *path, const struct gj_dicom_open_limits *lim, gj_dicom **out,
                               struct gj_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return gj_error_set(err, "", "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return gj_error_set(err, "", "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > GJ_DICOM_MAX_FILE_BYTES) {
        fclose(f);
        return gj_error_set(err, "", "%s: larger than %llu bytes", path,
                          (unsigned long long)GJ_DICOM_MAX_FILE_BYTES);
    }
    gj_dicom *d = calloc(1, sizeof *d);
    size_t n = (size_t)st.st_size;
    if (d)
        d->file = malloc(n ? n : 1);
    if (!d || !d->file) {
        fclose(f);
        gj_dicom_free(d);
        return gj_error_set(err, "", "out of memory");
    }
    size_t got = n ? fread(d->file, 1, n, f) : 0;
    fclose(f);
    if (got != n) {
        gj_dicom_free(d);
        return gj_error_set(err, "", "%s: short read", path);
    }
    d->file_len = n;
    if (parse_file(d, lim ? lim : &no_limits, err) < 0) {
        gj_dicom_free(d);
        return -1;
    }
    *out = d;
    return 0;
}

/* ---- lookup --------------------------------------------------------------- */

const struct gj_dcm_elem *gj_dcm_find(const gj_dicom *d, uint32_t tag)
{
    for (size_t i = 0; i < d->n_el; i++)
        if (d->el[i].depth == 0 && d->el[i].tag == tag)
            return &d->el[i];
    return NULL;
}

/* The VR to interpret an element with: an explicit UN (what some converters
 * write for attributes they do not know) is read as its dictionary VR. */
static uint16_t effective_vr(const struct gj_dcm_elem *e)
{
    if (e->vr == GJ_VR('U', 'N')) {
        uint16_t v = dict_vr(e->tag);
        return v ? v : e->vr;
    }
    return e->vr;
}

int gj_dicom_has(const gj_dicom *d, uint32_t tag)
{
    return gj_dcm_find(d, tag) != NULL;
}

static int is_text_vr(uint16_t vr)
{
    switch (vr) {
    case GJ_VR('A', 'E'): case GJ_VR('A', 'S'): case GJ_VR('C', 'S'): case GJ_VR('D', 'A'):
    case GJ_VR('D', 'S'): case GJ_VR('D', 'T'): case GJ_VR('I', 'S'): case GJ_VR('L', 'O'):
    case GJ_VR('L', 'T'): case GJ_VR('P', 'N'): case GJ_VR('S', 'H'): case GJ_VR('S', 'T'):
    case GJ_VR('T', 'M'): case GJ_VR('U', 'C'): case GJ_VR('U', 'I'): case GJ_VR('U', 'R'):
    case GJ_VR('U', 'T'):
        return 1;
    default:
        return 0;
    }
}

/* Implicit VR elements not in the dictionary have vr 0: treated as text when
 * asked for text. */
int gj_dicom_get_string(const gj_dicom *d, uint32_t tag, char *buf, size_t buflen)
{
    if (!buflen)
        return -1;
    buf[0] = 0;
    const struct gj_dcm_elem *e = gj_dcm_find(d, tag);
    if (!e || !e->val || !(is_text_vr(effective_vr(e)) || e->vr == 0))
        return -1;
    trim_copy(buf, buflen, e->val, e->len);
    /* keep output printable */
    for (char *c = buf; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7F)
            *c = '?';
    return 0;
}

static int binary_size(uint16_t vr)
{
    switch (vr) {
    case GJ_VR('U', 'S'): case GJ_VR('S', 'S'): return 2;
    case GJ_VR('U', 'L'): case GJ_VR('S', 'L'): case GJ_VR('F', 'L'): return 4;
    case GJ_VR('F', 'D'): case GJ_VR('S', 'V'): case GJ_VR('U', 'V'): return 8;
    default: return 0;
    }
}

/* The index-th backslash-separated value as a trimmed string. */
static int text_value(const struct gj_dcm_elem *e, unsigned index, char *buf, size_t buflen)
{
    const uint8_t *p = e->val, *end = e->val + e->len;
    for (unsigned i = 0; i < index; i++) {
        const uint8_t *bs = memchr(p, '\\', (size_t)(end - p));
        if (!bs)
            return -1;
        p = bs + 1;
    }
    const uint8_t *bs = memchr(p, '\\', (size_t)(end - p));
    trim_copy(buf, buflen, p, (size_t)((bs ? bs : end) - p));
    return 0;
}

int gj_dicom_value_count(const gj_dicom *d, uint32_t tag)
{
    const struct gj_dcm_elem *e = gj_dcm_find(d, tag);
    if (!e || !e->val)
        return 0;
    int sz = binary_size(effective_vr(e));
    if (sz)
        return (int)(e->len / (uint32_t)sz);
    if (e->len == 0)
        return 0;
    int n = 1;
    for (uint32_t i = 0; i < e->len; i++)
        n += e->val[i] == '\\';
    return n;
}

int gj_dicom_get_double(const gj_dicom *d, uint32_t tag, unsigned index, double *out)
{
    const struct gj_dcm_elem *e = gj_dcm_find(d, tag);
    if (!e || !e->val)
        return -1;
    uint16_t vr = effective_vr(e);
    int sz = binary_size(vr);
    if (sz) {
        if (((uint64_t)index + 1) * (uint64_t)sz > e->len)
            return -1;
        const uint8_t *p = e->val + (size_t)index * (size_t)sz;
        switch (vr) {
        case GJ_VR('U', 'S'): *out = rd16(p, e->be); return 0;
        case GJ_VR('S', 'S'): *out = (int16_t)rd16(p, e->be); return 0;
        case GJ_VR('U', 'L'): *out = rd32(p, e->be); return 0;
        case GJ_VR('S', 'L'): *out = (int32_t)rd32(p, e->be); return 0;
        case GJ_VR('F', 'L'): {
            uint32_t u = rd32(p, e->be);
            float f;
            memcpy(&f, &u, 4);
            *out = f;
            return 0;
        }
        case GJ_VR('F', 'D'): case GJ_VR('S', 'V'): case GJ_VR('U', 'V'): {
            uint64_t u = e->be ? ((uint64_t)rd32(p, 1) << 32 | rd32(p + 4, 1))
                               : ((uint64_t)rd32(p + 4, 0) << 32 | rd32(p, 0));
            if (vr == GJ_VR('F', 'D')) {
                double x;
                memcpy(&x, &u, 8);
                *out = x;
            } else if (vr == GJ_VR('S', 'V')) {
                *out = (double)(int64_t)u;
            } else {
                *out = (double)u;
            }
            return 0;
        }
        default: return -1;
        }
    }
    if (!(vr == GJ_VR('D', 'S') || vr == GJ_VR('I', 'S') || vr == 0))
        return -1;
    char tmp[64];
    if (text_value(e, index, tmp, sizeof tmp) < 0 || !tmp[0])
        return -1;
    char *endp;
    errno = 0;
    double v = strtod(tmp, &endp);
    if (endp == tmp || *endp || errno == ERANGE || v != v)
        return -1;
    *out = v;
    return 0;
}

int gj_dicom_get_int(const gj_dicom *d, uint32_t tag, unsigned index, long *out)
{
    double v;
    if (gj_dicom_get_double(d, tag, index, &v) < 0)
        return -1;
    if (v < -2147483648.0 || v > 4294967295.0 || v != (double)(long)v)
        return -1;
    *out = (long)v;
    return 0;
}

int gj_dicom_window(const gj_dicom *d, double *center, double *width)
{
    if (gj_dicom_get_double(d, GJ_DCM_WindowCenter, 0, center) < 0 ||
        gj_dicom_get_double(d, GJ_DCM_WindowWidth, 0, width) < 0)
        return -1;
    return 0;
}
