/*
 * onnx_cast.c — ONNX's Cast between element types (onnx_convert, onnx_dtype.h): floats to
 * integers truncated (NaN or out of range fails), integers to floats converted once, BOOL as
 * v != 0, STRING parsed as a number of the target's kind.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_dtype.h"

/* A float value as integer type `to`: truncated; NaN or out of range fails. */
static int float_to_int(double v, int to, int64_t *out)
{
    if (to == ONNX_ELEM_UINT64 && v >= 0x1p63 && v < 0x1p64) {
        *out = (int64_t)(uint64_t)v;
        return 0;
    }
    if (!(v >= -0x1p63 && v < 0x1p63))
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* An integer value (int64 bits of type `from`) as float type `to`: converted once, directly
 * (an int64 goes to float without passing through double); halves through float. */
static double int_to_float(int from, int to, int64_t v)
{
    int u = from == ONNX_ELEM_UINT64;
    if (to == ONNX_ELEM_DOUBLE)
        return u ? (double)(uint64_t)v : (double)v;
    return u ? (double)(float)(uint64_t)v : (double)(float)v;
}

/* A STRING element parsed as a number of class cls (whole string, at most 63 bytes). */
static int parse_string(const struct onnx_string *s, int cls, double *f, int64_t *iv)
{
    char buf[64], *end;
    if (!s->data || s->len == 0 || s->len >= sizeof buf || memchr(s->data, 0, s->len))
        return -1;
    memcpy(buf, s->data, s->len);
    buf[s->len] = 0;
    errno = 0;
    if (cls == ONNX_EC_FLOAT || cls == ONNX_EC_BOOL) {
        *f = strtod(buf, &end);
        *iv = *f != 0;
    } else if (cls == ONNX_EC_UNSIGNED) {
        *iv = (int64_t)strtoull(buf, &end, 10);
        if (strchr(buf, '-'))
            return -1;
    } else {
        *iv = strtoll(buf, &end, 10);
    }
    return end == buf || *end || (errno == ERANGE && cls != ONNX_EC_FLOAT) ? -1 : 0;
}

static int convert_strings(int to, const struct onnx_elem_io *ti, void *dst, const struct onnx_string *src,
                           int64_t n)
{
    int cls = onnx_elem_class(to);
    for (int64_t i = 0; i < n; i++) {
        double f = 0;
        int64_t v = 0;
        if (parse_string(&src[i], cls, &f, &v))
            return -1;
        if (cls == ONNX_EC_FLOAT)
            ti->set_f64(dst, i, f);
        else
            ti->set_i64(dst, i, v);
    }
    return 0;
}

/* One element of `from` (io fi, class fc) at i into `to` (io ti, class tc) at i. */
static int convert_one(int to, int tc, const struct onnx_elem_io *ti, void *dst, int from, int fc,
                       const struct onnx_elem_io *fi, const void *src, int64_t i)
{
    int64_t v;
    if (tc == ONNX_EC_BOOL) {
        ti->set_i64(dst, i, fc == ONNX_EC_FLOAT ? fi->get_f64(src, i) != 0 : fi->get_i64(src, i) != 0);
    } else if (tc == ONNX_EC_FLOAT) {
        ti->set_f64(dst, i, fc == ONNX_EC_FLOAT ? fi->get_f64(src, i) : int_to_float(from, to, fi->get_i64(src, i)));
    } else if (fc == ONNX_EC_FLOAT) {
        if (float_to_int(fi->get_f64(src, i), to, &v))
            return -1;
        ti->set_i64(dst, i, v);
    } else {
        ti->set_i64(dst, i, fi->get_i64(src, i));
    }
    return 0;
}

int onnx_convert(int to, void *dst, int from, const void *src, int64_t n)
{
    const struct onnx_elem_io *ti = onnx_elem_io(to), *fi = onnx_elem_io(from);
    if (to == from) {
        if (n > 0)
            memcpy(dst, src, (size_t)n * onnx_elem_size(to));
        return 0;
    }
    if (!ti)
        return -1;
    if (from == ONNX_ELEM_STRING)
        return convert_strings(to, ti, dst, src, n);
    if (!fi)
        return -1;
    int tc = onnx_elem_class(to), fc = onnx_elem_class(from);
    for (int64_t i = 0; i < n; i++)
        if (convert_one(to, tc, ti, dst, from, fc, fi, src, i))
            return -1;
    return 0;
}
