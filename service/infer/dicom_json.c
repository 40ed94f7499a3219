/*
 * dicom_json.c — a whole parsed instance as a DICOM JSON object (PS3.18 F.2), for
 * WADO-RS metadata: every element of the dataset (the file meta group and group
 * lengths left out), sequences nested, each VR in its JSON form: PN as
 * {"Alphabetic", "Ideographic", "Phonetic"}, IS/DS and the binary numbers as
 * numbers, AT as "GGGGEEEE", text split on backslashes where the VR is
 * multi-valued (an empty value is null). Binary values (OB, OW, UN ...) up to
 * GJ_DCM_JSON_MAX_INLINE bytes are InlineBinary; larger ones and Pixel Data are
 * bulk data and left out (PS3.18 F.2.7 allows leaving bulk data out of metadata
 * when no bulk data URI is offered). Text in ISO_IR 100 is converted to UTF-8 (and
 * Specific Character Set given as ISO_IR 192);
 * bytes that are still not UTF-8 become '?'. AvailableTransferSyntaxUID (0008,3002) says
 * the transfer syntax the instance is stored in (its file meta group is not returned).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "service/base/base64.h"
#include "service/infer/infer.h"

#define GJ_DCM_JSON_MAX_INLINE 1024

struct enc {
    const gj_dicom *d;
    size_t i, n;
    int latin1;                  /* Specific Character Set ISO_IR 100 */
};

static int vr_is(const char *vr, const char *list)
{
    for (const char *p = list; *p; p += 3)
        if (p[0] == vr[0] && p[1] == vr[1])
            return 1;
    return 0;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xC0) != 0x80)
            return 0;
    return len;
}

int gj_dicom_latin1(const gj_dicom *d)
{
    char cs[80];
    return gj_dicom_get_string(d, GJ_TAG(0x0008, 0x0005), cs, sizeof cs) == 0 && strcmp(cs, "ISO_IR 100") == 0;
}

char *gj_dicom_text_utf8(int latin1, const char *s, size_t n)
{
    char *u = malloc(n * 2 + 1), *o = u;
    for (size_t k = 0; u && k < n;) {
        unsigned char c = (unsigned char)s[k];
        size_t len = c < 0x80 ? 1 : latin1 ? 0 : utf8_len((const unsigned char *)s + k, n - k);
        if (c < 0x80 || len) {
            memcpy(o, s + k, len);
            o += len;
            k += len;
            continue;
        }
        if (latin1) {
            *o++ = (char)(0xC0 | c >> 6);
            *o++ = (char)(0x80 | (c & 0x3F));
        } else {
            *o++ = '?';
        }
        k++;
    }
    if (u)
        *o = '\0';
    return u;
}

static json_t *text_json(const struct enc *x, const char *s, size_t n)
{
    char *u = gj_dicom_text_utf8(x->latin1, s, n);
    json_t *j = u ? json_string(u) : NULL;
    free(u);
    return j;
}

static json_t *number_json(const char *vr, const char *s, size_t n)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return json_null();
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    if (vr[0] == 'I') {
        long long v = strtoll(buf, &end, 10);
        return *end ? json_null() : json_integer(v);
    }
    double v = strtod(buf, &end);
    return *end || !isfinite(v) ? json_null() : json_real(v);
}

/* A PN value: its component groups (alphabetic=ideographic=phonetic), empty ones left out. */
static json_t *pn_json(const struct enc *x, const char *s, size_t n)
{
    static const char *const groups[] = { "Alphabetic", "Ideographic", "Phonetic" };
    json_t *o = json_object();
    for (int g = 0; g < 3 && n; g++) {
        const char *eq = memchr(s, '=', n);
        size_t len = eq ? (size_t)(eq - s) : n;
        if (len)
            json_object_set_new(o, groups[g], text_json(x, s, len));
        s += len + (eq != NULL);
        n -= len + (eq != NULL);
    }
    return o;
}

/* One value of a text VR, spaces (and a UI's NUL) trimmed: leading too unless the VR
 * keeps them (LT, ST, UT, UR keep leading spaces). */
static json_t *text_value(const struct enc *x, const char *vr, const char *s, size_t n)
{
    int keep_leading = vr_is(vr, "LT ST UT UR ");
    while (!keep_leading && n && *s == ' ')
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\0'))
        n--;
    if (n == 0)
        return json_null();
    if (vr_is(vr, "IS DS "))
        return number_json(vr, s, n);
    if (vr[0] == 'P' && vr[1] == 'N')
        return pn_json(x, s, n);
    return text_json(x, s, n);
}

static json_t *text_values(const struct enc *x, const struct gj_dicom_element *e)
{
    const char *s = (const char *)e->value;
    size_t n = e->length;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\0'))
        n--;
    if (n == 0)
        return NULL;
    json_t *a = json_array();
    int multi = !vr_is(e->vr, "LT ST UT UR ");
    for (;;) {
        const char *bs = multi ? memchr(s, '\\', n) : NULL;
        size_t len = bs ? (size_t)(bs - s) : n;
        json_array_append_new(a, text_value(x, e->vr, s, len));
        if (!bs)
            break;
        s += len + 1;
        n -= len + 1;
    }
    return a;
}

static uint64_t read_uint(const uint8_t *p, unsigned size, int be)
{
    uint64_t v = 0;
    for (unsigned k = 0; k < size; k++)
        v |= (uint64_t)p[be ? size - 1 - k : k] << (8 * k);
    return v;
}

/* US SS UL SL UV SV FL FD as numbers, AT as "GGGGEEEE". */
static json_t *binary_numbers(const struct gj_dicom_element *e)
{
    const char *vr = e->vr;
    unsigned size = vr_is(vr, "US SS ") ? 2 : vr_is(vr, "UV SV FD ") ? 8 : 4;
    if (e->length == 0)
        return NULL;
    json_t *a = json_array();
    for (uint32_t off = 0; off + size <= e->length; off += size) {
        const uint8_t *p = e->value + off;
        if (vr[0] == 'A') {
            char t[9];
            snprintf(t, sizeof t, "%04X%04X", (unsigned)read_uint(p, 2, e->big_endian),
                     (unsigned)read_uint(p + 2, 2, e->big_endian));
            json_array_append_new(a, json_string(t));
            continue;
        }
        uint64_t u = read_uint(p, size, e->big_endian);
        double f;
        if (vr[0] == 'F') {
            if (size == 4) {
                float f32;
                uint32_t u32 = (uint32_t)u;
                memcpy(&f32, &u32, 4);
                f = f32;
            } else {
                memcpy(&f, &u, 8);
            }
            json_array_append_new(a, isfinite(f) ? json_real(f) : json_null());
        } else if (vr[0] == 'S') {
            int64_t s = size == 2 ? (int16_t)u : size == 4 ? (int32_t)u : (int64_t)u;
            json_array_append_new(a, json_integer(s));
        } else {
            json_array_append_new(a, json_integer((json_int_t)u));
        }
    }
    return a;
}

static json_t *inline_binary(const struct gj_dicom_element *e)
{
    size_t n = gj_base64_encoded_len(e->length, GJ_BASE64_STD) + 1;
    char *b = malloc(n);
    if (!b || gj_base64_encode(e->value, e->length, b, n, GJ_BASE64_STD) < 0) {
        free(b);
        return NULL;
    }
    json_t *o = json_pack("{s:s, s:s}", "vr", e->vr, "InlineBinary", b);
    free(b);
    return o;
}

/* The attribute of a value element; NULL when it is bulk data (left out). */
static json_t *value_attr(const struct enc *x, const struct gj_dicom_element *e)
{
    if (e->encapsulated || e->tag == GJ_DCM_PixelData)
        return NULL;
    if (vr_is(e->vr, "OB OD OF OL OV OW UN "))
        return e->length > GJ_DCM_JSON_MAX_INLINE ? NULL
               : e->length ? inline_binary(e) : json_pack("{s:s}", "vr", e->vr);
    if (vr_is(e->vr, "US SS UL SL UV SV FL FD AT "))
        return gj_dcm_attr(e->vr, binary_numbers(e));
    return gj_dcm_attr(e->vr, text_values(x, e));
}

static json_t *encode_dataset(struct enc *x, unsigned depth);

/* The items of the sequence just read (markers at depth): a JSON array. */
static json_t *encode_items(struct enc *x, unsigned depth)
{
    json_t *items = json_array();
    struct gj_dicom_element e;
    while (x->i < x->n) {
        gj_dicom_element_at(x->d, x->i, &e);
        if (e.depth < depth || e.vr[0])
            break;                           /* past the sequence (or not an item: cannot happen) */
        x->i++;
        json_array_append_new(items, encode_dataset(x, depth));
    }
    return items;
}

/* Elements at depth until an item marker at depth or an element above it. */
static json_t *encode_dataset(struct enc *x, unsigned depth)
{
    json_t *o = json_object();
    struct gj_dicom_element e;
    while (x->i < x->n) {
        gj_dicom_element_at(x->d, x->i, &e);
        if (e.depth < depth || (e.depth == depth && !e.vr[0]))
            break;
        x->i++;
        char key[9];
        snprintf(key, sizeof key, "%08X", (unsigned)e.tag);
        json_t *attr;
        if (e.sequence) {
            json_t *items = encode_items(x, depth + 1);
            attr = json_array_size(items) ? gj_dcm_attr("SQ", items) : (json_decref(items), gj_dcm_attr("SQ", NULL));
        } else {
            attr = value_attr(x, &e);
        }
        if (attr && (e.tag >> 16) != 0x0002 && (e.tag & 0xFFFF) != 0)
            json_object_set_new(o, key, attr);
        else
            json_decref(attr);
    }
    return o;
}

json_t *gj_dicom_to_json(const gj_dicom *d)
{
    struct enc x = { .d = d, .n = gj_dicom_element_count(d), .latin1 = gj_dicom_latin1(d) };
    json_t *o = encode_dataset(&x, 0);
    if (o && x.latin1)                     /* its text is now UTF-8, as dcm2json says too */
        json_object_set_new(o, "00080005", gj_dcm_attr("CS", json_string("ISO_IR 192")));
    const char *ts = gj_dicom_ts_uid(d);   /* AvailableTransferSyntaxUID: the one it is stored in */
    if (o && *ts)
        json_object_set_new(o, "00083002", gj_dcm_attr("UI", json_string(ts)));
    return o;
}
