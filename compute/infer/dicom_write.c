/*
 * dicom_write.c — the DICOM Part 10 writer of dicom_write.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/fsutil.h"
#include "infer/dicom.h"
#include "infer/dicom_write.h"

#define TS_EXPLICIT_LE "1.2.840.10008.1.2.1"
/* gpujobd's implementation class: a 2.25 UID made once for it. */
#define IMPLEMENTATION_CLASS_UID "2.25.319472290515066190410359264303534258069"
#define IMPLEMENTATION_VERSION "GPUJOBD_1"
#define UNDEFINED_LENGTH 0xFFFFFFFFu

static void broken(struct gj_dcm_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void broken(struct gj_dcm_out *o, const char *fmt, ...)
{
    if (o->error[0])
        return;   /* the first broken rule is the one worth reporting */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->error, sizeof o->error, fmt, ap);
    va_end(ap);
}

void gj_dcm_out_init(struct gj_dcm_out *o)
{
    memset(o, 0, sizeof *o);
}

void gj_dcm_out_free(struct gj_dcm_out *o)
{
    free(o->p);
    memset(o, 0, sizeof *o);
}

static void put(struct gj_dcm_out *o, const void *data, size_t n)
{
    if (o->error[0])
        return;
    if (o->n + n > o->cap) {
        size_t cap = (o->n + n) * 2 + 256;
        uint8_t *p = realloc(o->p, cap);
        if (!p) {
            broken(o, "out of memory");
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, data, n);
    o->n += n;
}

static void put_u16(struct gj_dcm_out *o, uint16_t v)
{
    uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
    put(o, b, 2);
}

static void put_u32(struct gj_dcm_out *o, uint32_t v)
{
    uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    put(o, b, 4);
}

static void put_tag(struct gj_dcm_out *o, uint32_t tag)
{
    put_u16(o, (uint16_t)(tag >> 16));
    put_u16(o, (uint16_t)tag);
}

/* Tags ascend within a dataset; elements go in datasets, not between items. */
static int check_order(struct gj_dcm_out *o, uint32_t tag)
{
    if (o->in_seq) {
        broken(o, "(%04X,%04X) written inside a sequence but outside an item", tag >> 16, tag & 0xFFFF);
        return -1;
    }
    uint32_t *last = &o->last_tag[o->depth];
    if (*last && tag <= *last) {
        broken(o, "(%04X,%04X) written after (%04X,%04X): tags must ascend", tag >> 16, tag & 0xFFFF,
               *last >> 16, *last & 0xFFFF);
        return -1;
    }
    *last = tag;
    return 0;
}

/* The 32-bit-length VRs of explicit VR (PS3.5 7.1.2). */
static int long_form(const char *vr)
{
    static const char *const vrs[] = { "OB", "OD", "OF", "OL", "OV", "OW", "SQ", "SV", "UC", "UN", "UR",
                                       "UT", "UV" };
    for (size_t i = 0; i < sizeof vrs / sizeof vrs[0]; i++)
        if (strcmp(vr, vrs[i]) == 0)
            return 1;
    return 0;
}

static void put_header(struct gj_dcm_out *o, uint32_t tag, const char *vr, uint32_t len)
{
    put_tag(o, tag);
    put(o, vr, 2);
    if (long_form(vr)) {
        put_u16(o, 0);
        put_u32(o, len);
    } else {
        put_u16(o, (uint16_t)len);
    }
}

/* Maximum value length per text VR (PS3.5 table 6.2-1); 0: not a text VR this writer takes. */
static size_t text_max(const char *vr)
{
    static const struct { const char *vr; size_t max; } m[] = {
        { "AE", 16 }, { "AS", 4 }, { "CS", 64 }, { "DA", 8 }, { "DS", 16 }, { "DT", 26 },
        { "IS", 12 }, { "LO", 64 }, { "LT", 10240 }, { "PN", 324 }, { "SH", 16 }, { "ST", 1024 },
        { "TM", 14 }, { "UC", 65534 }, { "UI", 64 }, { "UT", 65534 },
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (strcmp(vr, m[i].vr) == 0)
            return m[i].max;
    return 0;
}

/* A backslash separates values: only CS (a Specific Character Set of several) may have
 * several here, each of at most 16 characters. */
static int cs_values_ok(const char *vr, const char *value)
{
    if (strcmp(vr, "CS") != 0)
        return 0;
    for (const char *p = value;;) {
        const char *q = strchr(p, '\\');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len > 16)
            return 0;
        if (!q)
            return 1;
        p = q + 1;
    }
}

void gj_dcm_str(struct gj_dcm_out *o, uint32_t tag, const char *vr, const char *value)
{
    size_t max = text_max(vr), n = strlen(value);
    if (max == 0) {
        broken(o, "(%04X,%04X): VR %.2s is not a text VR", tag >> 16, tag & 0xFFFF, vr);
        return;
    }
    int values_ok = strcmp(vr, "CS") == 0 ? cs_values_ok(vr, value) : strchr(value, '\\') == NULL;
    if (n > max || !values_ok) {
        broken(o, "(%04X,%04X): value of %zu characters does not fit VR %s (at most %zu, one value)", tag >> 16,
               tag & 0xFFFF, n, vr, max);
        return;
    }
    if (check_order(o, tag) != 0)
        return;
    put_header(o, tag, vr, (uint32_t)(n + n % 2));
    put(o, value, n);
    if (n % 2)
        put(o, strcmp(vr, "UI") == 0 ? "\0" : " ", 1);
}

void gj_dcm_us(struct gj_dcm_out *o, uint32_t tag, uint16_t value)
{
    if (check_order(o, tag) != 0)
        return;
    put_header(o, tag, "US", 2);
    put_u16(o, value);
}

void gj_dcm_empty(struct gj_dcm_out *o, uint32_t tag, const char *vr)
{
    if (strlen(vr) != 2 || strcmp(vr, "SQ") == 0) {
        broken(o, "(%04X,%04X): not an empty element's VR", tag >> 16, tag & 0xFFFF);
        return;
    }
    if (check_order(o, tag) != 0)
        return;
    put_header(o, tag, vr, 0);
}

void gj_dcm_seq_begin(struct gj_dcm_out *o, uint32_t tag)
{
    if (check_order(o, tag) != 0)
        return;
    if (o->depth + 2 >= (int)(sizeof o->last_tag / sizeof o->last_tag[0])) {
        broken(o, "(%04X,%04X): sequences nested deeper than %d", tag >> 16, tag & 0xFFFF,
               GJ_DCM_WRITE_MAX_DEPTH);
        return;
    }
    put_header(o, tag, "SQ", UNDEFINED_LENGTH);
    o->in_seq = 1;
}

void gj_dcm_item_begin(struct gj_dcm_out *o)
{
    if (!o->in_seq) {
        broken(o, "an item begun outside a sequence");
        return;
    }
    put_tag(o, GJ_TAG(0xFFFE, 0xE000));
    put_u32(o, UNDEFINED_LENGTH);
    o->in_seq = 0;
    o->depth++;
    o->last_tag[o->depth] = 0;
}

void gj_dcm_item_end(struct gj_dcm_out *o)
{
    if (o->in_seq || o->depth == 0) {
        broken(o, "an item ended that was not begun");
        return;
    }
    put_tag(o, GJ_TAG(0xFFFE, 0xE00D));
    put_u32(o, 0);
    o->depth--;
    o->in_seq = 1;
}

void gj_dcm_seq_end(struct gj_dcm_out *o)
{
    if (!o->in_seq) {
        broken(o, "a sequence ended inside an item, or not begun");
        return;
    }
    put_tag(o, GJ_TAG(0xFFFE, 0xE0DD));
    put_u32(o, 0);
    o->in_seq = 0;
}

void gj_dcm_seq_empty(struct gj_dcm_out *o, uint32_t tag)
{
    if (check_order(o, tag) != 0)
        return;
    put_header(o, tag, "SQ", 0);
}

int gj_dcm_out_finish(struct gj_dcm_out *o, struct gj_error *err)
{
    if (!o->error[0] && (o->depth != 0 || o->in_seq))
        broken(o, "a sequence or item was left open");
    if (o->error[0])
        return gj_error_set(err, "", "cannot write the DICOM document: %s", o->error);
    return 0;
}

/* The file meta group (PS3.10 7.1), its group length first. */
static void file_meta(struct gj_dcm_out *m, const char *sop_class, const char *sop_instance)
{
    struct gj_dcm_out body;
    gj_dcm_out_init(&body);
    static const uint8_t version[2] = { 0, 1 };
    body.last_tag[0] = GJ_TAG(0x0002, 0x0000);
    check_order(&body, GJ_TAG(0x0002, 0x0001));
    put_header(&body, GJ_TAG(0x0002, 0x0001), "OB", 2);
    put(&body, version, 2);
    gj_dcm_str(&body, GJ_TAG(0x0002, 0x0002), "UI", sop_class);
    gj_dcm_str(&body, GJ_TAG(0x0002, 0x0003), "UI", sop_instance);
    gj_dcm_str(&body, GJ_TAG(0x0002, 0x0010), "UI", TS_EXPLICIT_LE);
    gj_dcm_str(&body, GJ_TAG(0x0002, 0x0012), "UI", IMPLEMENTATION_CLASS_UID);
    gj_dcm_str(&body, GJ_TAG(0x0002, 0x0013), "SH", IMPLEMENTATION_VERSION);
    if (body.error[0]) {
        broken(m, "%s", body.error);
        gj_dcm_out_free(&body);
        return;
    }
    static const uint8_t preamble[128];
    put(m, preamble, sizeof preamble);
    put(m, "DICM", 4);
    put_header(m, GJ_TAG(0x0002, 0x0000), "UL", 4);
    put_u32(m, (uint32_t)body.n);
    put(m, body.p, body.n);
    gj_dcm_out_free(&body);
}

int gj_dcm_write_file(const struct gj_dcm_out *o, const char *sop_class, const char *sop_instance,
                      const char *path, struct gj_error *err)
{
    if (o->error[0] || o->depth || o->in_seq)
        return gj_error_set(err, "", "cannot write an unfinished DICOM document");
    struct gj_dcm_out f;
    gj_dcm_out_init(&f);
    file_meta(&f, sop_class, sop_instance);
    put(&f, o->p, o->n);
    if (f.error[0]) {
        gj_error_set(err, "", "cannot write the DICOM file meta group: %s", f.error);
        gj_dcm_out_free(&f);
        return -1;
    }
    int rc = gj_write_file(path, f.p, f.n);
    int saved = errno;
    gj_dcm_out_free(&f);
    if (rc != 0)
        return gj_error_set(err, "", "cannot write %s: %s", path, strerror(saved));
    return 0;
}

int gj_dcm_new_uid(char out[65])
{
    uint8_t b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
        return -1;
    b[6] = (uint8_t)((b[6] & 0x0F) | 0x40);   /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3F) | 0x80);   /* RFC 4122 variant */
    /* The 128-bit number in decimal: repeated division of the big-endian bytes by 10. */
    char digits[40];
    int nd = 0, nonzero = 1;
    while (nonzero) {
        unsigned rem = 0;
        nonzero = 0;
        for (int i = 0; i < 16; i++) {
            unsigned cur = rem * 256 + b[i];
            b[i] = (uint8_t)(cur / 10);
            rem = cur % 10;
            nonzero |= b[i];
        }
        digits[nd++] = (char)('0' + rem);
    }
    memcpy(out, "2.25.", 5);
    for (int i = 0; i < nd; i++)
        out[5 + i] = digits[nd - 1 - i];
    out[5 + nd] = '\0';
    return 0;
}
