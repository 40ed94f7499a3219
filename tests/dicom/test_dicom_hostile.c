/*
 * test_dicom_hostile.c — hostile input to the DICOM reader: truncation at
 * every offset, huge lengths, absurd dimensions, deep nesting, garbage and
 * random mutations. Every case must return an error (or decode), never crash;
 * run under -Db_sanitize=address,undefined to catch what does not crash.
 *
 * usage: test_dicom_hostile [FILE...]  (each file is also truncated at every
 * offset, or at 4096 evenly spread offsets when larger, and mutated)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/dicom.h"
#include "dicom_writer.h"

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* ---- building files ------------------------------------------------------ */

static void image_attrs(struct buf *b, uint16_t rows, uint16_t cols, uint16_t ba, const char *frames)
{
    str(b, 0x0008, 0x0060, "CS", "OT");
    str(b, 0x0010, 0x0010, "PN", "Hidden^Name");
    us(b, 0x0028, 0x0002, 1);
    str(b, 0x0028, 0x0004, "CS", "MONOCHROME2");
    if (frames)
        str(b, 0x0028, 0x0008, "IS", frames);
    us(b, 0x0028, 0x0010, rows);
    us(b, 0x0028, 0x0011, cols);
    us(b, 0x0028, 0x0100, ba);
    us(b, 0x0028, 0x0101, ba);
    us(b, 0x0028, 0x0102, (uint16_t)(ba - 1));
    us(b, 0x0028, 0x0103, 0);
}

/* A small valid explicit LE file with an 8x6 16-bit image and a nested sequence. */
static struct buf make_native(void)
{
    struct buf b = { 0 };
    meta(&b, "1.2.840.10008.1.2.1");
    /* a sequence of undefined length with one item of undefined length */
    u16(&b, 0x0008); u16(&b, 0x1140); put(&b, "SQ", 2); u16(&b, 0); u32(&b, 0xFFFFFFFFu);
    u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, 0xFFFFFFFFu);
    str(&b, 0x0008, 0x1155, "UI", "1.2.3");
    u16(&b, 0xFFFE); u16(&b, 0xE00D); u32(&b, 0);
    u16(&b, 0xFFFE); u16(&b, 0xE0DD); u32(&b, 0);
    image_attrs(&b, 6, 8, 16, NULL);
    uint16_t px[48];
    for (int i = 0; i < 48; i++)
        px[i] = (uint16_t)(i * 1000);
    uint8_t raw[96];
    for (int i = 0; i < 48; i++) {
        raw[2 * i] = (uint8_t)px[i];
        raw[2 * i + 1] = (uint8_t)(px[i] >> 8);
    }
    el(&b, 0x7FE0, 0x0010, "OW", raw, sizeof raw);
    return b;
}

/* An RLE file, 2 frames of 4x4 8-bit, with an empty offset table. */
static struct buf make_rle(void)
{
    struct buf b = { 0 };
    meta(&b, "1.2.840.10008.1.2.5");
    image_attrs(&b, 4, 4, 8, "2");
    u16(&b, 0x7FE0); u16(&b, 0x0010); put(&b, "OB", 2); u16(&b, 0); u32(&b, 0xFFFFFFFFu);
    u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, 0);
    for (int f = 0; f < 2; f++) {
        uint8_t frag[64 + 18];
        memset(frag, 0, sizeof frag);
        frag[0] = 1;
        frag[4] = 64;
        /* literal run of 16 bytes, then padding */
        frag[64] = 15;
        for (int i = 0; i < 16; i++)
            frag[65 + i] = (uint8_t)(i * 10 + f);
        frag[81] = 0x80;   /* no-op */
        u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, sizeof frag);
        put(&b, frag, sizeof frag);
    }
    u16(&b, 0xFFFE); u16(&b, 0xE0DD); u32(&b, 0);
    return b;
}

/* ---- exercising ------------------------------------------------------------ */

/* Opens and decodes every frame; returns 0 when everything succeeded. */
static int exercise(const uint8_t *p, size_t n)
{
    struct gj_error err = { 0 };
    gj_dicom *d;
    if (gj_dicom_open_mem(p, n, &d, &err) < 0) {
        CHECK(err.message[0] != 0, "error without message");
        return -1;
    }
    int rc = 0;
    char s[64];
    long v;
    double x, y;
    (void)gj_dicom_get_string(d, GJ_DCM_Modality, s, sizeof s);
    (void)gj_dicom_get_int(d, GJ_DCM_Rows, 0, &v);
    (void)gj_dicom_window(d, &x, &y);
    (void)gj_dicom_value_count(d, GJ_DCM_WindowCenter);
    struct gj_dicom_image img;
    if (gj_dicom_image_info(d, &img, &err) < 0) {
        rc = -1;
    } else {
        uint64_t nf = gj_dicom_frame_floats(&img);
        float *out = malloc(nf * sizeof *out);
        if (!out)
            abort();
        uint32_t frames = img.frames < 4 ? img.frames : 4;
        for (uint32_t f = 0; f < frames; f++)
            if (gj_dicom_decode_frame(d, f, out, nf, &err) < 0)
                rc = -1;
        free(out);
    }
    gj_dicom_free(d);
    return rc;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void truncations(const char *what, const uint8_t *p, size_t n, int expect_error)
{
    size_t step = n > 4096 ? n / 4096 : 1;
    size_t errors = 0, tried = 0;
    for (size_t k = 0; k < n; k += step) {
        tried++;
        /* a copy of exactly k bytes, so ASan sees reads past the end */
        uint8_t *c = malloc(k ? k : 1);
        memcpy(c, p, k);
        int rc = exercise(c, k);
        free(c);
        if (rc < 0)
            errors++;
        else if (expect_error)
            CHECK(0, "%s truncated to %zu of %zu bytes decoded without error", what, k, n);
    }
    printf("%s: %zu truncations, %zu errors\n", what, tried, errors);
}

static void mutations(const char *what, const uint8_t *p, size_t n, int count)
{
    uint8_t *c = malloc(n);
    for (int i = 0; i < count; i++) {
        memcpy(c, p, n);
        int flips = 1 + (int)(rnd() % 8);
        for (int k = 0; k < flips; k++) {
            size_t at = rnd() % n;
            switch (rnd() % 4) {
            case 0: c[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
            case 1: c[at] = 0xFF; break;
            case 2: c[at] = 0; break;
            default: c[at] = (uint8_t)rnd(); break;
            }
        }
        (void)exercise(c, n);
    }
    free(c);
    printf("%s: %d mutations\n", what, count);
}

static void set32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(sz > 0 ? (size_t)sz : 1);
    *n = fread(p, 1, (size_t)sz, f);
    fclose(f);
    return p;
}

/* ---- the cases ------------------------------------------------------------ */

/* The base files are valid: they open and decode, and a bad frame or buffer is refused. */
static void base_files(const struct buf *nat, const struct buf *rle)
{
    struct gj_error err = { 0 };
    gj_dicom *d = NULL;
    CHECK(exercise(nat->p, nat->n) == 0, "native base file");
    CHECK(exercise(rle->p, rle->n) == 0, "rle base file");
    CHECK(gj_dicom_open_mem(nat->p, nat->n, &d, &err) == 0, "open: %s", err.message);
    float out[48];
    CHECK(gj_dicom_decode_frame(d, 0, out, 48, &err) == 0, "decode: %s", err.message);
    CHECK(out[47] == 47000.0f, "pixel 47 = %g", out[47]);
    CHECK(gj_dicom_decode_frame(d, 0, out, 10, &err) < 0, "small buffer accepted");
    CHECK(gj_dicom_decode_frame(d, 1, out, 48, &err) < 0, "frame 2 of 1 accepted");
    gj_dicom_free(d);
    CHECK(gj_dicom_open_mem(rle->p, rle->n, &d, &err) == 0, "open rle: %s", err.message);
    float o2[16];
    CHECK(gj_dicom_decode_frame(d, 1, o2, 16, &err) == 0, "decode rle frame 2: %s", err.message);
    CHECK(o2[15] == 151.0f, "rle frame 2 pixel 15 = %g", o2[15]);
    gj_dicom_free(d);
}

/* Huge lengths: every 4-byte and 2-byte window set to 0xFFFFFFF0 / 0xFFFF. */
static void huge_lengths(const struct buf *nat, const struct buf *rle)
{
    for (size_t at = 128; at + 4 <= nat->n; at++) {
        uint8_t *c = malloc(nat->n);
        memcpy(c, nat->p, nat->n);
        set32(c + at, 0xFFFFFFF0u);
        (void)exercise(c, nat->n);
        memcpy(c, nat->p, nat->n);
        c[at] = 0xFF;
        c[at + 1] = 0xFF;
        (void)exercise(c, nat->n);
        free(c);
    }
    for (size_t at = 128; at + 4 <= rle->n; at++) {
        uint8_t *c = malloc(rle->n);
        memcpy(c, rle->p, rle->n);
        set32(c + at, 0x7FFFFFF0u);
        (void)exercise(c, rle->n);
        free(c);
    }
    printf("huge lengths: done\n");
}

/* Absurd rows / columns / frames / bits, native and RLE: always refused. */
static void absurd_dimensions(void)
{
    const struct { uint16_t rows, cols, ba; const char *frames; } cases[] = {
        { 65535, 65535, 16, NULL }, { 0, 8, 16, NULL }, { 6, 0, 16, NULL }, { 16384, 16384, 16, NULL },
        { 6, 8, 16, "2000000000" }, { 6, 8, 16, "-1" }, { 6, 8, 16, "0" }, { 6, 8, 32, NULL },
        { 6, 8, 1, NULL }, { 6, 8, 0, NULL }, { 6, 8, 16, "1e308" }, { 6, 8, 16, "nan" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct buf b = { 0 };
        meta(&b, "1.2.840.10008.1.2.1");
        image_attrs(&b, cases[i].rows, cases[i].cols, cases[i].ba, cases[i].frames);
        uint8_t raw[96] = { 0 };
        el(&b, 0x7FE0, 0x0010, "OW", raw, sizeof raw);
        CHECK(exercise(b.p, b.n) < 0, "absurd case %zu accepted", i);
        free(b.p);
        /* the same claims for an RLE frame of a few bytes */
        b = (struct buf){ 0 };
        meta(&b, "1.2.840.10008.1.2.5");
        image_attrs(&b, cases[i].rows, cases[i].cols, cases[i].ba, cases[i].frames);
        u16(&b, 0x7FE0); u16(&b, 0x0010); put(&b, "OB", 2); u16(&b, 0); u32(&b, 0xFFFFFFFFu);
        u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, 0);
        uint8_t frag[80] = { 2, 0, 0, 0, 64, 0, 0, 0, 66 };
        frag[64] = 0x81; frag[65] = 7; frag[66] = 0x81; frag[67] = 9;
        u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, sizeof frag);
        put(&b, frag, sizeof frag);
        u16(&b, 0xFFFE); u16(&b, 0xE0DD); u32(&b, 0);
        CHECK(exercise(b.p, b.n) < 0, "absurd RLE case %zu accepted", i);
        free(b.p);
    }
    printf("absurd dimensions: done\n");
}

/* Deep nesting: 100000 nested undefined-length sequences / items, then 1000 closed ones. */
static void deep_nesting(void)
{
    struct gj_error err = { 0 };
    gj_dicom *d = NULL;
    struct buf b = { 0 };
    meta(&b, "1.2.840.10008.1.2.1");
    for (int i = 0; i < 100000; i++) {
        u16(&b, 0x0008); u16(&b, 0x1140); put(&b, "SQ", 2); u16(&b, 0); u32(&b, 0xFFFFFFFFu);
        u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, 0xFFFFFFFFu);
    }
    CHECK(gj_dicom_open_mem(b.p, b.n, &d, &err) < 0 && strstr(err.message, "nested"),
          "deep nesting: %s", err.message);
    free(b.p);
    /* also in implicit VR with defined lengths */
    b = (struct buf){ 0 };
    meta(&b, "1.2.840.10008.1.2.1");
    for (int i = 0; i < 1000; i++) {
        u16(&b, 0x0008); u16(&b, 0x1140); put(&b, "SQ", 2); u16(&b, 0); u32(&b, 0xFFFFFFFFu);
        u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, 0xFFFFFFFFu);
    }
    for (int i = 0; i < 1000; i++) {
        u16(&b, 0xFFFE); u16(&b, 0xE00D); u32(&b, 0);
        u16(&b, 0xFFFE); u16(&b, 0xE0DD); u32(&b, 0);
    }
    CHECK(gj_dicom_open_mem(b.p, b.n, &d, &err) < 0, "deep nesting 2 accepted");
    free(b.p);
    printf("deep nesting: done\n");
}

/* Many frames in many fragments without an offset table: finding frame k must not rescan
 * the fragments (quadratic time); every frame is garbage. */
static void many_fragments(void)
{
    struct gj_error err = { 0 };
    gj_dicom *d = NULL;
    struct buf b = { 0 };
    meta(&b, "1.2.840.10008.1.2.4.50");
    image_attrs(&b, 8, 8, 8, "30000");
    u16(&b, 0x7FE0); u16(&b, 0x0010); put(&b, "OB", 2); u16(&b, 0); u32(&b, 0xFFFFFFFFu);
    u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, 0);
    for (int f = 0; f < 30000; f++) {
        uint8_t a[4] = { 0xFF, 0xD8, 0xFF, 0xDB }, z[4] = { 1, 2, 3, 4 };
        u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, 4); put(&b, a, 4);
        u16(&b, 0xFFFE); u16(&b, 0xE000); u32(&b, 4); put(&b, z, 4);
    }
    u16(&b, 0xFFFE); u16(&b, 0xE0DD); u32(&b, 0);
    CHECK(gj_dicom_open_mem(b.p, b.n, &d, &err) == 0, "many fragments: %s", err.message);
    if (d) {
        float out[64];
        int ok = 0;
        for (uint32_t f = 0; f < 30000; f++)
            ok += gj_dicom_decode_frame(d, f, out, 64, &err) == 0;
        CHECK(ok == 0, "garbage JPEG frames decoded");
        gj_dicom_free(d);
    }
    free(b.p);
    printf("30000 frames in 60000 fragments: done\n");
}

/* Garbage: random bytes, with and without the DICM prefix; empty, missing, a directory. */
static void garbage(void)
{
    struct gj_error err = { 0 };
    gj_dicom *d = NULL;
    for (int i = 0; i < 2000; i++) {
        size_t n = rnd() % 2048;
        uint8_t *c = malloc(n + 1);
        for (size_t k = 0; k < n; k++)
            c[k] = (uint8_t)rnd();
        if (i % 2 && n >= 132)
            memcpy(c + 128, "DICM", 4);
        (void)exercise(c, n);
        free(c);
    }
    CHECK(gj_dicom_open_mem("", 0, &d, &err) < 0, "empty accepted");
    CHECK(gj_dicom_open_file("/nonexistent/x.dcm", &d, &err) < 0, "missing file accepted");
    CHECK(gj_dicom_open_file("/", &d, &err) < 0, "directory accepted");
    printf("garbage: done\n");
}

/* A file written by another tool: it decodes, and its truncations and mutations do not crash. */
static void given_file(const char *path)
{
    size_t n = 0;
    uint8_t *p = read_file(path, &n);
    if (!p) {
        CHECK(0, "cannot read %s", path);
        return;
    }
    CHECK(exercise(p, n) == 0, "%s does not decode", path);
    truncations(path, p, n, 0);
    mutations(path, p, n, 500);
    free(p);
}

int main(int argc, char **argv)
{
    struct buf nat = make_native(), rle = make_rle();
    base_files(&nat, &rle);
    /* truncated at every offset: always an error */
    truncations("native", nat.p, nat.n, 1);
    truncations("rle", rle.p, rle.n, 1);
    huge_lengths(&nat, &rle);
    absurd_dimensions();
    deep_nesting();
    many_fragments();
    garbage();
    mutations("native", nat.p, nat.n, 20000);
    mutations("rle", rle.p, rle.n, 20000);
    free(nat.p);
    free(rle.p);
    for (int i = 1; i < argc; i++)
        given_file(argv[i]);

    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("all hostile-input checks passed\n");
    return 0;
}
