/*
 * test_dicom_api.c — the reader's public API on small files built here:
 * tag lookup (strings, ints, multi-values, window/VOI), nested elements not
 * shadowing top-level ones, stored vs modality values, signed masking, RGB
 * planes and YBR_FULL conversion, implicit VR without preamble, UN-encoded
 * attributes, deflated datasets with and without a zlib header, and priced before they
 * are inflated (header-only opens, max_inflated); every element in
 * file order with sequence items marked; the implicit VR dictionary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zlib.h>

#include "infer/dicom.h"
#include "dicom_writer.h"

static void image(struct buf *b, const char *pi, uint16_t spp, uint16_t rows, uint16_t cols, uint16_t ba,
                  uint16_t bs, uint16_t pr)
{
    us(b, 0x0028, 0x0002, spp);
    str(b, 0x0028, 0x0004, "CS", pi);
    if (spp == 3)
        us(b, 0x0028, 0x0006, 0);
    us(b, 0x0028, 0x0010, rows);
    us(b, 0x0028, 0x0011, cols);
    us(b, 0x0028, 0x0100, ba);
    us(b, 0x0028, 0x0101, bs);
    us(b, 0x0028, 0x0102, (uint16_t)(bs - 1));
    us(b, 0x0028, 0x0103, pr);
}

static gj_dicom *open_buf(struct buf *b)
{
    struct gj_error err = { 0 };
    gj_dicom *d = NULL;
    if (gj_dicom_open_mem(b->p, b->n, &d, &err) < 0)
        fail_msg("open: %s", err.message);
    return d;
}

static void test_lookup(void **state)
{
    (void)state;
    struct buf b = { 0 };
    meta(&b, "1.2.840.10008.1.2.1");
    str(&b, 0x0008, 0x0060, "CS", " CT ");
    /* a sequence whose item holds Rows = 999: must not shadow the top-level Rows */
    u16(&b, 0x0008); u16(&b, 0x1140); put(&b, "SQ", 2); u16(&b, 0); u32(&b, 0xFFFFFFFFu);
    u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, 0xFFFFFFFFu);
    us(&b, 0x0028, 0x0010, 999);
    u16(&b, 0xFFFE); u16(&b, 0xE00D); u32(&b, 0);
    u16(&b, 0xFFFE); u16(&b, 0xE0DD); u32(&b, 0);
    str(&b, 0x0010, 0x0010, "PN", "Doe^Jane");
    str(&b, 0x0018, 0x5101, "CS", "AP");
    image(&b, "MONOCHROME2", 1, 2, 3, 16, 12, 0);
    str(&b, 0x0028, 0x0008, "IS", "1 ");
    str(&b, 0x0028, 0x1050, "DS", "40\\-60.5");
    str(&b, 0x0028, 0x1051, "DS", "400\\1500");
    str(&b, 0x0028, 0x1052, "DS", "-1024");
    str(&b, 0x0028, 0x1053, "DS", "2.5");
    str(&b, 0x0028, 0x1056, "CS", "SIGMOID");
    uint16_t px[6] = { 0, 1, 2, 4095, 0xF000 | 7, 100 };  /* 0xF007: bits above 12 are not the value */
    el(&b, 0x7FE0, 0x0010, "OW", px, sizeof px);
    gj_dicom *d = open_buf(&b);

    char s[64];
    long v;
    double c, w;
    assert_int_equal(gj_dicom_ts(d), GJ_TS_EXPLICIT_LE);
    assert_string_equal(gj_dicom_ts_uid(d), "1.2.840.10008.1.2.1");
    assert_int_equal(gj_dicom_get_string(d, GJ_DCM_Modality, s, sizeof s), 0);
    assert_string_equal(s, "CT");
    assert_int_equal(gj_dicom_get_string(d, GJ_DCM_ViewPosition, s, 2), 0);
    assert_string_equal(s, "A");  /* truncated to the buffer */
    assert_int_equal(gj_dicom_get_string(d, GJ_DCM_BodyPartExamined, s, sizeof s), -1);
    assert_int_equal(gj_dicom_get_int(d, GJ_DCM_Rows, 0, &v), 0);
    assert_int_equal(v, 2);
    assert_int_equal(gj_dicom_get_int(d, GJ_DCM_NumberOfFrames, 0, &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(gj_dicom_value_count(d, GJ_DCM_WindowCenter), 2);
    assert_int_equal(gj_dicom_get_double(d, GJ_DCM_WindowCenter, 1, &c), 0);
    assert_true(c == -60.5);
    assert_int_equal(gj_dicom_get_double(d, GJ_DCM_WindowCenter, 2, &c), -1);
    assert_int_equal(gj_dicom_get_int(d, GJ_DCM_WindowCenter, 1, &v), -1);  /* not an integer */
    assert_int_equal(gj_dicom_window(d, &c, &w), 0);
    assert_true(c == 40 && w == 400);
    assert_int_equal(gj_dicom_get_string(d, GJ_DCM_VOILUTFunction, s, sizeof s), 0);
    assert_string_equal(s, "SIGMOID");
    assert_int_equal(gj_dicom_has(d, GJ_TAG(0x0008, 0x1155)), 0);

    struct gj_dicom_image img;
    struct gj_error err = { 0 };
    assert_int_equal(gj_dicom_image_info(d, &img, &err), 0);
    assert_int_equal(img.rows, 2);
    assert_int_equal(img.columns, 3);
    assert_true(img.rescale_slope == 2.5 && img.rescale_intercept == -1024);
    int32_t raw[6];
    float f[6];
    assert_int_equal(gj_dicom_decode_frame_raw(d, 0, raw, 6, &err), 0);
    assert_int_equal(raw[3], 4095);
    assert_int_equal(raw[4], 7);
    assert_int_equal(gj_dicom_decode_frame(d, 0, f, 6, &err), 0);
    assert_true(f[0] == -1024.0f && f[5] == 100 * 2.5f - 1024);
    gj_dicom_free(d);
    free(b.p);
}

static void test_signed_and_mono1(void **state)
{
    (void)state;
    struct buf b = { 0 };
    meta(&b, "1.2.840.10008.1.2.1");
    image(&b, "MONOCHROME1", 1, 1, 4, 16, 12, 1);
    uint16_t px[4] = { 0x0800, 0x0FFF, 0x07FF, 0xF001 };  /* -2048, -1, 2047, 1 (garbage on top) */
    el(&b, 0x7FE0, 0x0010, "OW", px, sizeof px);
    gj_dicom *d = open_buf(&b);
    float f[4];
    struct gj_error err = { 0 };
    struct gj_dicom_image img;
    assert_int_equal(gj_dicom_image_info(d, &img, &err), 0);
    assert_int_equal(img.photometric, GJ_PI_MONOCHROME1);
    assert_int_equal(gj_dicom_decode_frame(d, 0, f, 4, &err), 0);
    assert_true(f[0] == -2048 && f[1] == -1 && f[2] == 2047 && f[3] == 1);
    gj_dicom_free(d);
    free(b.p);
}

static void test_rgb_and_ybr(void **state)
{
    (void)state;
    for (int ybr = 0; ybr < 2; ybr++) {
        struct buf b = { 0 };
        meta(&b, "1.2.840.10008.1.2.1");
        image(&b, ybr ? "YBR_FULL" : "RGB", 3, 1, 2, 8, 8, 0);
        /* pixel 0: (10,20,30); pixel 1: (200,100,50) — or YCbCr (128,128,128) and (76,85,255) */
        uint8_t rgb[6] = { 10, 20, 30, 200, 100, 50 }, ycc[6] = { 128, 128, 128, 76, 85, 255 };
        el(&b, 0x7FE0, 0x0010, "OB", ybr ? ycc : rgb, 6);
        gj_dicom *d = open_buf(&b);
        float f[6];
        struct gj_error err = { 0 };
        assert_int_equal(gj_dicom_decode_frame(d, 0, f, 6, &err), 0);
        if (!ybr) {
            /* planes: R R G G B B */
            assert_true(f[0] == 10 && f[1] == 200 && f[2] == 20 && f[3] == 100 && f[4] == 30 && f[5] == 50);
        } else {
            assert_true(f[0] == 128 && f[2] == 128 && f[4] == 128);
            /* (76,85,255): R = 76 + 1.402*127 = 254.05 -> 254; G = 0.1 -> 0; B = -0.2 -> 0 */
            assert_true(f[1] == 254 && f[3] == 0 && f[5] == 0);
        }
        gj_dicom_free(d);
        free(b.p);
    }
}

static void test_implicit_no_preamble(void **state)
{
    (void)state;
    struct buf b = { 0 };
    implicit_mode = 1;
    str(&b, 0x0008, 0x0060, "CS", "MR");
    image(&b, "MONOCHROME2", 1, 1, 2, 8, 8, 0);
    uint8_t px[2] = { 3, 250 };
    el(&b, 0x7FE0, 0x0010, "OB", px, 2);
    implicit_mode = 0;
    gj_dicom *d = open_buf(&b);
    assert_int_equal(gj_dicom_ts(d), GJ_TS_IMPLICIT_LE);
    char s[16];
    assert_int_equal(gj_dicom_get_string(d, GJ_DCM_Modality, s, sizeof s), 0);
    assert_string_equal(s, "MR");
    float f[2];
    struct gj_error err = { 0 };
    assert_int_equal(gj_dicom_decode_frame(d, 0, f, 2, &err), 0);
    assert_true(f[0] == 3 && f[1] == 250);
    gj_dicom_free(d);
    free(b.p);
}

static void test_un_vr(void **state)
{
    (void)state;
    struct buf b = { 0 };
    meta(&b, "1.2.840.10008.1.2.1");
    image(&b, "MONOCHROME2", 1, 1, 1, 8, 8, 0);
    el(&b, 0x0028, 0x1053, "UN", "3 ", 2);   /* RescaleSlope "3" written as UN */
    uint8_t px[1] = { 7 };
    el(&b, 0x7FE0, 0x0010, "OB", px, 1);
    gj_dicom *d = open_buf(&b);
    double v;
    assert_int_equal(gj_dicom_get_double(d, GJ_DCM_RescaleSlope, 0, &v), 0);
    assert_true(v == 3);
    float f[1];
    struct gj_error err = { 0 };
    assert_int_equal(gj_dicom_decode_frame(d, 0, f, 1, &err), 0);
    assert_true(f[0] == 21);
    gj_dicom_free(d);
    free(b.p);
}

/* Deflated explicit VR LE: raw deflate (standard) and with a zlib header. */
static void test_deflated(void **state)
{
    (void)state;
    struct buf ds = { 0 };
    str(&ds, 0x0008, 0x0060, "CS", "DX");
    image(&ds, "MONOCHROME2", 1, 2, 2, 16, 16, 0);
    uint16_t px[4] = { 1, 2, 300, 65535 };
    el(&ds, 0x7FE0, 0x0010, "OW", px, sizeof px);
    for (int zlib_header = 0; zlib_header < 2; zlib_header++) {
        uint8_t out[4096];
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        assert_int_equal(deflateInit2(&zs, 9, Z_DEFLATED, zlib_header ? 15 : -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
        zs.next_in = ds.p;
        zs.avail_in = (uInt)ds.n;
        zs.next_out = out;
        zs.avail_out = sizeof out;
        assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
        size_t n = sizeof out - zs.avail_out;
        deflateEnd(&zs);
        struct buf b = { 0 };
        meta(&b, "1.2.840.10008.1.2.1.99");
        put(&b, out, n);
        gj_dicom *d = open_buf(&b);
        assert_int_equal(gj_dicom_ts(d), GJ_TS_DEFLATED_LE);
        float f[4];
        struct gj_error err = { 0 };
        assert_int_equal(gj_dicom_decode_frame(d, 0, f, 4, &err), 0);
        assert_true(f[0] == 1 && f[2] == 300 && f[3] == 65535);
        gj_dicom_free(d);
        /* truncated deflate stream: an error */
        b.n -= n / 2;
        struct gj_error e2 = { 0 };
        gj_dicom *d2 = NULL;
        assert_int_equal(gj_dicom_open_mem(b.p, b.n, &d2, &e2), -1);
        free(b.p);
    }
    free(ds.p);
}

/* ds deflated (raw) after a deflated TS's meta group, into b. */
static void deflated_file(struct buf *b, const struct buf *ds)
{
    uLong cap = compressBound((uLong)ds->n);
    uint8_t *out = malloc(cap);
    assert_non_null(out);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    assert_int_equal(deflateInit2(&zs, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    zs.next_in = ds->p;
    zs.avail_in = (uInt)ds->n;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
    meta(b, "1.2.840.10008.1.2.1.99");
    put(b, out, cap - zs.avail_out);
    deflateEnd(&zs);
    free(out);
}

/* A deflated image priced before it is inflated (gj_dicom_open_limits): header_only
 * reads the attributes within a small max_inflated and knows the whole dataset's size;
 * the whole open within exactly that size succeeds, one byte less fails; decoding a
 * header-only dataset is refused; attributes past the header limit are an error. */
static void test_deflated_priced(void **state)
{
    (void)state;
    struct buf ds = { 0 };
    str(&ds, 0x0008, 0x0060, "CS", "OT");
    image(&ds, "MONOCHROME2", 1, 2048, 2048, 16, 16, 0);
    size_t header = ds.n + 12;   /* the pixel data's own header included */
    uint32_t pixel_bytes = 2048u * 2048u * 2u;
    uint8_t *zeros = calloc(pixel_bytes, 1);
    assert_non_null(zeros);
    el(&ds, 0x7FE0, 0x0010, "OW", zeros, pixel_bytes);
    struct buf b = { 0 };
    deflated_file(&b, &ds);
    assert_true(b.n < 64 * 1024);

    struct gj_error err = { 0 };
    gj_dicom *d = NULL;
    struct gj_dicom_open_limits lim = { .max_inflated = 64 * 1024, .header_only = 1 };
    assert_int_equal(gj_dicom_open_mem_limited(b.p, b.n, &lim, &d, &err), 0);
    struct gj_dicom_image img;
    assert_int_equal(gj_dicom_image_info(d, &img, &err), 0);
    assert_int_equal(img.rows, 2048);
    assert_int_equal(img.columns, 2048);
    assert_int_equal(gj_dicom_inflated_bytes(d), header + pixel_bytes);
    assert_int_equal(gj_dicom_decode_bytes(&img), pixel_bytes);
    float one;
    assert_int_equal(gj_dicom_decode_frame(d, 0, &one, 1, &err), -1);
    uint64_t inflated = gj_dicom_inflated_bytes(d);
    gj_dicom_free(d);

    lim = (struct gj_dicom_open_limits){ .max_inflated = inflated };
    assert_int_equal(gj_dicom_open_mem_limited(b.p, b.n, &lim, &d, &err), 0);
    assert_int_equal(gj_dicom_inflated_bytes(d), inflated);
    gj_dicom_free(d);
    lim.max_inflated = inflated - 1;
    assert_int_equal(gj_dicom_open_mem_limited(b.p, b.n, &lim, &d, &err), -1);
    assert_non_null(strstr(err.message, "inflates past"));
    free(b.p);

    /* 64 KiB of attributes before the pixel data, and a header limit of 8 KiB */
    struct buf big = { 0 };
    el(&big, 0x0009, 0x1010, "OB", zeros, 64 * 1024);
    put(&big, ds.p, ds.n);
    struct buf b2 = { 0 };
    deflated_file(&b2, &big);
    lim = (struct gj_dicom_open_limits){ .max_inflated = 8 * 1024, .header_only = 1 };
    assert_int_equal(gj_dicom_open_mem_limited(b2.p, b2.n, &lim, &d, &err), -1);
    assert_non_null(strstr(err.message, "before the pixel data inflate past"));
    free(b2.p);
    free(big.p);
    free(ds.p);
    free(zeros);
}

/* Every element in file order: a sequence is followed by its items' markers (an empty
 * item too), their elements one level deeper, then the top level again. */
static void test_elements(void **state)
{
    (void)state;
    struct buf b = { 0 };
    meta(&b, "1.2.840.10008.1.2.1");
    u16(&b, 0x0008); u16(&b, 0x1140); put(&b, "SQ", 2); u16(&b, 0); u32(&b, 0xFFFFFFFFu);
    u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, 0xFFFFFFFFu);          /* item 1: one element */
    str(&b, 0x0008, 0x1150, "UI", "1.2.3");
    u16(&b, 0xFFFE); u16(&b, 0xE00D); u32(&b, 0);
    u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, 0);                    /* item 2: empty */
    u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, 20);                   /* item 3: defined length */
    us(&b, 0x0028, 0x0010, 7);
    str(&b, 0x0008, 0x0060, "CS", "CT");
    u16(&b, 0xFFFE); u16(&b, 0xE0DD); u32(&b, 0);
    str(&b, 0x0010, 0x0020, "LO", "ID");
    gj_dicom *d = open_buf(&b);
    static const struct { uint32_t tag; const char *vr; unsigned depth; } want[] = {
        { GJ_TAG(0x0008, 0x1140), "SQ", 0 }, { GJ_TAG(0xFFFE, 0xE000), "", 1 }, { GJ_TAG(0x0008, 0x1150), "UI", 1 },
        { GJ_TAG(0xFFFE, 0xE000), "", 1 }, { GJ_TAG(0xFFFE, 0xE000), "", 1 }, { GJ_TAG(0x0028, 0x0010), "US", 1 },
        { GJ_TAG(0x0008, 0x0060), "CS", 1 }, { GJ_TAG(0x0010, 0x0020), "LO", 0 },
    };
    size_t n = gj_dicom_element_count(d), first = 0;
    struct gj_dicom_element e;
    while (first < n && (gj_dicom_element_at(d, first, &e), e.tag >> 16 == 0x0002))
        first++;                                                      /* the file meta group */
    assert_int_equal(n - first, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n - first; i++) {
        gj_dicom_element_at(d, first + i, &e);
        assert_int_equal(e.tag, want[i].tag);
        assert_string_equal(e.vr, want[i].vr);
        assert_int_equal(e.depth, want[i].depth);
        assert_int_equal(e.sequence, i == 0);
    }
    gj_dicom_element_at(d, first + 5, &e);
    assert_true(e.length == 2 && e.value[0] == 7 && e.value[1] == 0 && !e.big_endian);
    gj_dicom_free(d);
    free(b.p);
}

/* Implicit VR: the standard's dictionary gives the VRs, so a defined-length sequence is
 * read as one (its item's elements nested), not as an opaque value. */
static void test_implicit_dictionary(void **state)
{
    (void)state;
    struct buf b = { 0 };
    implicit_mode = 1;
    str(&b, 0x0008, 0x0020, "DA", "20240101");
    u16(&b, 0x0008); u16(&b, 0x1140); u32(&b, 8 + 8 + 6);            /* SQ, defined length */
    u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, 8 + 6);
    str(&b, 0x0008, 0x1150, "UI", "1.2.3");
    str(&b, 0x0018, 0x1310, "US", "");
    implicit_mode = 0;
    gj_dicom *d = open_buf(&b);
    struct gj_dicom_element e;
    assert_int_equal(gj_dicom_element_count(d), 5);
    gj_dicom_element_at(d, 0, &e);
    assert_string_equal(e.vr, "DA");
    gj_dicom_element_at(d, 1, &e);
    assert_true(e.sequence && e.depth == 0);
    gj_dicom_element_at(d, 3, &e);
    assert_true(e.tag == GJ_TAG(0x0008, 0x1150) && strcmp(e.vr, "UI") == 0 && e.depth == 1);
    gj_dicom_element_at(d, 4, &e);
    assert_true(strcmp(e.vr, "US") == 0 && e.depth == 0);
    gj_dicom_free(d);
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_signed_and_mono1),
        cmocka_unit_test(test_rgb_and_ybr),
        cmocka_unit_test(test_implicit_no_preamble),
        cmocka_unit_test(test_un_vr),
        cmocka_unit_test(test_deflated),
        cmocka_unit_test(test_deflated_priced),
        cmocka_unit_test(test_elements),
        cmocka_unit_test(test_implicit_dictionary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
