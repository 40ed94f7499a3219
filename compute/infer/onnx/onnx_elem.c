/*
 * onnx_elem.c — element values for every type of onnx_elem.h: IEEE half and bfloat16 from
 * and to float (round to nearest, ties to even, in integer arithmetic so the result does not
 * depend on the FPU's mode), and typed get/set through a table of functions per type
 * (onnx_elem_io, onnx_dtype.h). Cast is onnx_cast.c's.
 */
#include <string.h>

#include "infer/onnx/onnx_dtype.h"

/* ---- half and bfloat16 ------------------------------------------------------------------ */

static uint32_t f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

static float f32_from_bits(uint32_t x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* A half subnormal (or zero) from |f| in [2^-25, 2^-14): units of 2^-24, rounded. */
static uint16_t half_subnormal(uint32_t ax)
{
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    int shift = 126 - (int)e;   /* 14..24: f = m * 2^(e-150) = (m >> shift) * 2^-24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)q;
}

uint16_t onnx_float_to_half(float f)
{
    uint32_t x = f32_bits(f), ax = x & 0x7fffffffu;
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    if (ax > 0x7f800000u)                       /* NaN: quiet, keeping the payload's top bits */
        return sign | 0x7e00u | (uint16_t)((ax >> 13) & 0x1ffu);
    if (ax >= 0x477ff000u)                      /* 65520 and above round to infinity */
        return sign | 0x7c00u;
    if (ax >= 0x38800000u) {                    /* normal: rebias (127 -> 15), round 13 bits */
        uint32_t r = ax - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return sign | (uint16_t)(r >> 13);
    }
    if (ax < 0x33000000u)                       /* below 2^-25: zero */
        return sign;
    return sign | half_subnormal(ax);
}

float onnx_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return f32_from_bits(sign | 0x7f800000u | (m << 13));
    if (e)
        return f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
    if (!m)
        return f32_from_bits(sign);
    uint32_t sh = 0;   /* subnormal: normalise */
    while (!(m & 0x400u)) {
        m <<= 1;
        sh++;
    }
    return f32_from_bits(sign | ((113 - sh) << 23) | ((m & 0x3ffu) << 13));
}

uint16_t onnx_float_to_bfloat16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)        /* NaN: quiet */
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float onnx_bfloat16_to_float(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

/* ---- typed access ------------------------------------------------------------------------- */

/* Truncated toward zero; NaN 0; saturated at the int64 range. */
static int64_t f64_to_i64(double v)
{
    if (v != v)
        return 0;
    if (v >= 0x1p63)
        return INT64_MAX;
    if (v <= -0x1p63)
        return INT64_MIN;
    return (int64_t)v;
}

/* Integer types: get as the value; set from an int64 wrapped to the width (gcc converts to a
 * narrower signed type modulo 2^N), from a double truncated. */
#define INT_IO(T, N) \
    static double N##_gf(const void *p, int64_t i) { return (double)((const T *)p)[i]; } \
    static int64_t N##_gi(const void *p, int64_t i) { return (int64_t)((const T *)p)[i]; } \
    static void N##_si(void *p, int64_t i, int64_t v) { ((T *)p)[i] = (T)v; } \
    static void N##_sf(void *p, int64_t i, double v) { N##_si(p, i, f64_to_i64(v)); }

INT_IO(int8_t, i8)
INT_IO(int16_t, i16)
INT_IO(int32_t, i32)
INT_IO(int64_t, i64)
INT_IO(uint8_t, u8)
INT_IO(uint16_t, u16)
INT_IO(uint32_t, u32)

static double u64_gf(const void *p, int64_t i) { return (double)((const uint64_t *)p)[i]; }
static int64_t u64_gi(const void *p, int64_t i) { return (int64_t)((const uint64_t *)p)[i]; }
static void u64_si(void *p, int64_t i, int64_t v) { ((uint64_t *)p)[i] = (uint64_t)v; }
static void u64_sf(void *p, int64_t i, double v)
{
    ((uint64_t *)p)[i] = v >= 0x1p63 ? (v < 0x1p64 ? (uint64_t)v : UINT64_MAX) : (uint64_t)f64_to_i64(v);
}

static double b_gf(const void *p, int64_t i) { return ((const uint8_t *)p)[i] != 0; }
static int64_t b_gi(const void *p, int64_t i) { return ((const uint8_t *)p)[i] != 0; }
static void b_si(void *p, int64_t i, int64_t v) { ((uint8_t *)p)[i] = v != 0; }
static void b_sf(void *p, int64_t i, double v) { ((uint8_t *)p)[i] = v != 0; }

static double f32_gf(const void *p, int64_t i) { return ((const float *)p)[i]; }
static int64_t f32_gi(const void *p, int64_t i) { return f64_to_i64(((const float *)p)[i]); }
static void f32_sf(void *p, int64_t i, double v) { ((float *)p)[i] = (float)v; }
static void f32_si(void *p, int64_t i, int64_t v) { ((float *)p)[i] = (float)v; }

static double f64_gf(const void *p, int64_t i) { return ((const double *)p)[i]; }
static int64_t f64_gi(const void *p, int64_t i) { return f64_to_i64(((const double *)p)[i]); }
static void f64_sf(void *p, int64_t i, double v) { ((double *)p)[i] = v; }
static void f64_si(void *p, int64_t i, int64_t v) { ((double *)p)[i] = (double)v; }

static double h_gf(const void *p, int64_t i) { return onnx_half_to_float(((const uint16_t *)p)[i]); }
static int64_t h_gi(const void *p, int64_t i) { return f64_to_i64(h_gf(p, i)); }
static void h_sf(void *p, int64_t i, double v) { ((uint16_t *)p)[i] = onnx_float_to_half((float)v); }
static void h_si(void *p, int64_t i, int64_t v) { ((uint16_t *)p)[i] = onnx_float_to_half((float)v); }

static double bf_gf(const void *p, int64_t i) { return onnx_bfloat16_to_float(((const uint16_t *)p)[i]); }
static int64_t bf_gi(const void *p, int64_t i) { return f64_to_i64(bf_gf(p, i)); }
static void bf_sf(void *p, int64_t i, double v) { ((uint16_t *)p)[i] = onnx_float_to_bfloat16((float)v); }
static void bf_si(void *p, int64_t i, int64_t v) { ((uint16_t *)p)[i] = onnx_float_to_bfloat16((float)v); }

#define IO(N) { N##_gf, N##_gi, N##_sf, N##_si }
static const struct onnx_elem_io ios[] = {
    [ONNX_ELEM_FLOAT] = IO(f32), [ONNX_ELEM_UINT8] = IO(u8), [ONNX_ELEM_INT8] = IO(i8),
    [ONNX_ELEM_UINT16] = IO(u16), [ONNX_ELEM_INT16] = IO(i16), [ONNX_ELEM_INT32] = IO(i32),
    [ONNX_ELEM_INT64] = IO(i64), [ONNX_ELEM_BOOL] = IO(b), [ONNX_ELEM_FLOAT16] = IO(h),
    [ONNX_ELEM_DOUBLE] = IO(f64), [ONNX_ELEM_UINT32] = IO(u32), [ONNX_ELEM_UINT64] = IO(u64),
    [ONNX_ELEM_BFLOAT16] = IO(bf),
};

const struct onnx_elem_io *onnx_elem_io(int elem)
{
    if (elem < 0 || elem >= (int)(sizeof ios / sizeof ios[0]) || !ios[elem].get_f64)
        return NULL;
    return &ios[elem];
}

double onnx_elem_get_f64(int elem, const void *data, size_t i)
{
    const struct onnx_elem_io *io = onnx_elem_io(elem);
    return io ? io->get_f64(data, (int64_t)i) : 0;
}

int64_t onnx_elem_get_i64(int elem, const void *data, size_t i)
{
    const struct onnx_elem_io *io = onnx_elem_io(elem);
    return io ? io->get_i64(data, (int64_t)i) : 0;
}

void onnx_elem_set_f64(int elem, void *data, size_t i, double v)
{
    const struct onnx_elem_io *io = onnx_elem_io(elem);
    if (io)
        io->set_f64(data, (int64_t)i, v);
}

void onnx_elem_set_i64(int elem, void *data, size_t i, int64_t v)
{
    const struct onnx_elem_io *io = onnx_elem_io(elem);
    if (io)
        io->set_i64(data, (int64_t)i, v);
}
