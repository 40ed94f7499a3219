/*
 * dicom_j2k.c — JPEG 2000 frames (codestream or JP2) through OpenJPEG.
 * The header's size is checked against the dataset before anything is
 * decoded, so a hostile codestream cannot make OpenJPEG allocate more than
 * the dataset's (already bounded) frame.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openjpeg.h>

#include "dicom_codec.h"

struct memsrc {
    const uint8_t *p;
    size_t n, pos;
};

static OPJ_SIZE_T mem_read(void *buf, OPJ_SIZE_T size, void *user)
{
    struct memsrc *m = user;
    if (m->pos >= m->n)
        return (OPJ_SIZE_T)-1;
    size_t k = m->n - m->pos < size ? m->n - m->pos : size;
    memcpy(buf, m->p + m->pos, k);
    m->pos += k;
    return k;
}

static OPJ_OFF_T mem_skip(OPJ_OFF_T off, void *user)
{
    struct memsrc *m = user;
    if (off < 0) {
        if ((size_t)(-off) > m->pos)
            return -1;
        m->pos -= (size_t)(-off);
        return off;
    }
    size_t k = m->n - m->pos < (size_t)off ? m->n - m->pos : (size_t)off;
    m->pos += k;
    return (OPJ_OFF_T)k;
}

static OPJ_BOOL mem_seek(OPJ_OFF_T off, void *user)
{
    struct memsrc *m = user;
    if (off < 0 || (uint64_t)off > m->n)
        return OPJ_FALSE;
    m->pos = (size_t)off;
    return OPJ_TRUE;
}

struct msgbuf {
    char text[160];
};

static void on_error(const char *msg, void *user)
{
    struct msgbuf *b = user;
    if (!b->text[0]) {
        snprintf(b->text, sizeof b->text, "%s", msg);
        size_t l = strlen(b->text);
        while (l && (b->text[l - 1] == '\n'))
            b->text[--l] = 0;
    }
}

static void on_quiet(const char *msg, void *user)
{
    (void)msg;
    (void)user;
}

/* A decompressor reading from src, its messages into mb. NULL when OpenJPEG fails. */
static opj_codec_t *make_codec(OPJ_CODEC_FORMAT fmt, struct msgbuf *mb)
{
    opj_codec_t *codec = opj_create_decompress(fmt);
    if (!codec)
        return NULL;
    opj_set_error_handler(codec, on_error, mb);
    opj_set_warning_handler(codec, on_quiet, NULL);
    opj_set_info_handler(codec, on_quiet, NULL);
    opj_dparameters_t prm;
    opj_set_default_decoder_parameters(&prm);
    if (!opj_setup_decoder(codec, &prm)) {
        opj_destroy_codec(codec);
        return NULL;
    }
    opj_decoder_set_strict_mode(codec, OPJ_TRUE);
    return codec;
}

static void use_source(opj_stream_t *st, struct memsrc *src)
{
    opj_stream_set_user_data(st, src, NULL);
    opj_stream_set_user_data_length(st, src->n);
    opj_stream_set_read_function(st, mem_read);
    opj_stream_set_skip_function(st, mem_skip);
    opj_stream_set_seek_function(st, mem_seek);
}

/* The decoded components into raw, as planes of their bit patterns. */
static int copy_components(const opj_image_t *im, const struct gj_dicom_image *img, struct gj_dcm_raw *raw,
                           struct gj_error *err)
{
    uint32_t w = im->x1 - im->x0, h = im->y1 - im->y0, nc = im->numcomps;
    uint64_t npix = (uint64_t)w * h;
    int bytes = img->bits_allocated > 8 ? 2 : 1;
    for (uint32_t c = 0; c < nc; c++) {
        const opj_image_comp_t *cp = &im->comps[c];
        if (!cp->data || cp->w != w || cp->h != h || cp->dx != 1 || cp->dy != 1 || cp->prec > 16)
            return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG 2000 component %u is subsampled or of unsupported precision", c);
        if (cp->prec > 8)
            bytes = 2;
    }
    raw->data = malloc(npix * nc * (uint64_t)bytes);
    if (!raw->data)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "out of memory");
    for (uint32_t c = 0; c < nc; c++) {
        const OPJ_INT32 *s = im->comps[c].data;
        /* signed components come back sign-extended: keep the bit pattern */
        for (uint64_t i = 0; i < npix; i++) {
            uint32_t v = (uint32_t)s[i];
            if (bytes == 2)
                ((uint16_t *)raw->data)[c * npix + i] = (uint16_t)v;
            else
                raw->data[c * npix + i] = (uint8_t)v;
        }
    }
    raw->rows = h;
    raw->cols = w;
    raw->spp = nc;
    raw->bytes = bytes;
    raw->planar = 1;
    /* With the multiple-component transform OpenJPEG returns RGB and the
     * dataset says YBR_RCT / YBR_ICT (read as RGB); a dataset that says
     * YBR_FULL holds YCbCr components, converted by the caller. */
    raw->color_done = 0;
    return 0;
}

/* The header is read first: its size must be the dataset's before anything is decoded. */
static int decode_checked(opj_codec_t *codec, opj_stream_t *st, opj_image_t **im, const struct msgbuf *mb,
                          const struct gj_dicom_image *img, struct gj_error *err)
{
    if (!opj_read_header(st, codec, im) || !*im)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG 2000 header: %s", mb->text[0] ? mb->text : "invalid");
    const opj_image_t *h = *im;
    uint32_t w = h->x1 - h->x0, ht = h->y1 - h->y0;
    if (h->x1 < h->x0 || h->y1 < h->y0 || w != img->columns || ht != img->rows ||
        h->numcomps != img->samples_per_pixel)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG 2000 frame is %u x %u x %u; the dataset says %u x %u x %u",
                            w, ht, h->numcomps, img->columns, img->rows, img->samples_per_pixel);
    if (!opj_decode(codec, st, *im) || !opj_end_decompress(codec, st))
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG 2000 decode: %s", mb->text[0] ? mb->text : "failed");
    return 0;
}

int gj_dcm_decode_j2k(const uint8_t *p, size_t n, const struct gj_dicom_image *img,
                      struct gj_dcm_raw *raw, struct gj_error *err)
{
    if (n < 12)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG 2000 frame too short");
    OPJ_CODEC_FORMAT fmt = (p[0] == 0xFF && p[1] == 0x4F) ? OPJ_CODEC_J2K : OPJ_CODEC_JP2;
    if (fmt == OPJ_CODEC_JP2 && memcmp(p, "\0\0\0\x0cjP  ", 8) != 0)
        return gj_error_set(err, GJ_DCM_PIXEL_FIELD, "JPEG 2000 frame has neither a codestream nor a JP2 signature");
    struct memsrc src = { .p = p, .n = n };
    struct msgbuf mb = { { 0 } };
    opj_codec_t *codec = make_codec(fmt, &mb);
    opj_stream_t *st = opj_stream_create(1 << 16, OPJ_TRUE);
    opj_image_t *im = NULL;
    int rc = -1;
    if (!codec || !st)
        gj_error_set(err, GJ_DCM_PIXEL_FIELD, "OpenJPEG init failed");
    else {
        use_source(st, &src);
        rc = decode_checked(codec, st, &im, &mb, img, err) ? -1 : copy_components(im, img, raw, err);
    }
    if (im)
        opj_image_destroy(im);
    if (st)
        opj_stream_destroy(st);
    if (codec)
        opj_destroy_codec(codec);
    return rc;
}
