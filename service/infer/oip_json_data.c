/*
 * oip_json_data.c — an inference request's numeric data arrays read straight from its JSON
 * text (see oip_json_data.h).
 *
 * The scan is a strict JSON reader (strings with their escapes, numbers by RFC 8259's
 * grammar, the three literals, nesting at most SCAN_MAX_DEPTH) that follows the document
 * only as far as it is sure of it: wherever it stops, jansson reads the text as it was sent,
 * so the errors a client gets are jansson's. An array counts as read only once all of it
 * is, as jansson would read it. jansson then reads the text through a callback that gives it
 * each read array as `0 ` (so it lexes no byte of it: lexing 10 MB of blanks costs it as
 * much as the numbers did); where that fails, jansson reads the text as sent again, so the
 * error a client gets is jansson's own.
 *
 * Numbers: jansson reads an integer literal with strtoll (refusing one that overflows) and
 * any other with strtod (refusing an overflow to infinity). Here a real of at most 19
 * significant digits (taken 8 at a time) and a small exponent is computed exactly (Clinger's
 * fast path in double arithmetic, or in x87 80-bit arithmetic with the one case where
 * rounding twice could differ sent to strtod); every other one goes to strtod itself. The
 * server never calls setlocale: strtod reads the "C" locale's '.', as jansson's (which swaps
 * in the locale's decimal point) does there.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/infer/oip_json_data.h"

#define SCAN_MAX_DEPTH 64            /* deeper: left to jansson (which allows 2048) */
#define MAX_SIG_DIGITS 19            /* < 10^19 fits uint64_t */

struct oip_json_data {
    struct entry {
        size_t input;
        size_t from, to;             /* the array's text: [from, to) */
        int live;                    /* read, not yet dropped (an empty array has no num) */
        struct oip_json_values v;
    } *e;
    size_t n, cap;
};

/* ---- numbers --------------------------------------------------------------------------- */

/* A number's parts: value = (-1)^neg * mant * 10^exp10 unless truncated (more than
 * MAX_SIG_DIGITS significant digits). */
struct num_parts {
    uint64_t mant;
    int sig, truncated, neg, is_int;
    long exp10;
};

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* The 8 bytes at s as a number when all are digits (SWAR, as simdjson and fast_float do:
 * one multiply-add a pair of digits, then pairs of pairs). 1, or 0: not 8 digits. */
static int eight_digits(const char *s, uint64_t *out)
{
    uint64_t v;
    memcpy(&v, s, sizeof v);
    if (((v & 0xF0F0F0F0F0F0F0F0) | (((v + 0x0606060606060606) & 0xF0F0F0F0F0F0F0F0) >> 4)) != 0x3333333333333333)
        return 0;
    v -= 0x3030303030303030;
    v = v * 10 + (v >> 8);
    v = ((v & 0x000000FF000000FF) * (100 + (1000000ULL << 32)) +
         ((v >> 16) & 0x000000FF000000FF) * (1 + (10000ULL << 32))) >> 32;
    *out = (uint32_t)v;
    return 1;
}
#else
static int eight_digits(const char *s, uint64_t *out)
{
    (void)s, (void)out;
    return 0;
}
#endif

/* Digits at s[p]: the first MAX_SIG_DIGITS significant ones into d->mant, a fraction's
 * leading zeros and its digits kept into d->exp10 (value = mant * 10^exp10), those past
 * MAX_SIG_DIGITS marked truncated. The byte after them. */
static size_t take_digits(const char *s, size_t len, size_t p, struct num_parts *d, int fraction)
{
    if (d->sig == 0)                             /* "0.000123": zeros before the first digit */
        for (; p < len && s[p] == '0'; p++)
            d->exp10 -= fraction;
    size_t first = p;
    uint64_t mant = d->mant, eight;
    int sig = d->sig;
    for (; sig + 8 <= MAX_SIG_DIGITS && len - p >= 8 && eight_digits(s + p, &eight); p += 8, sig += 8)
        mant = mant * 100000000 + eight;
    for (; p < len && is_digit(s[p]) && sig < MAX_SIG_DIGITS; p++, sig++)
        mant = mant * 10 + (uint64_t)(s[p] - '0');
    d->exp10 -= fraction * (long)(p - first);
    d->mant = mant;
    d->sig = sig;
    size_t rest = p;
    for (; p < len && is_digit(s[p]); p++)
        ;
    if (p > rest) {
        d->truncated = 1;
        d->exp10 += fraction ? 0 : (long)(p - rest);
    }
    return p;
}

/* The exponent part at s[p] ('e' or 'E'). The byte after it, or 0 when malformed. */
static size_t take_exponent(const char *s, size_t len, size_t p, struct num_parts *d)
{
    int neg = 0;
    long e = 0;
    p++;
    if (p < len && (s[p] == '+' || s[p] == '-'))
        neg = s[p++] == '-';
    size_t first = p;
    for (; p < len && is_digit(s[p]); p++)
        if (e < 100000000)                       /* far past any double's range */
            e = e * 10 + (s[p] - '0');
    if (p == first)
        return 0;
    d->exp10 += neg ? -e : e;
    return p;
}

/* The grammar -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? and the parts. Bytes taken, 0. */
static size_t number_parts(const char *s, size_t len, struct num_parts *d)
{
    size_t p = 0;
    memset(d, 0, sizeof *d);
    d->is_int = 1;
    if (p < len && s[p] == '-')
        d->neg = 1, p++;
    if (p >= len || !is_digit(s[p]))
        return 0;
    p = s[p] == '0' ? p + 1 : take_digits(s, len, p, d, 0);
    if (p < len && s[p] == '.') {
        d->is_int = 0;
        size_t q = take_digits(s, len, p + 1, d, 1);
        if (q == p + 1)
            return 0;
        p = q;
    }
    if (p < len && (s[p] == 'e' || s[p] == 'E')) {
        d->is_int = 0;
        p = take_exponent(s, len, p, d);
    }
    return p;
}

#if FLT_EVAL_METHOD == 0
/* Powers of ten exact in a double (5^22 < 2^53). */
static const double pow10_d[] = { 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
                                  1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };
#endif

#if FLT_EVAL_METHOD == 0 && defined(__x86_64__) && LDBL_MANT_DIG == 64
#define HAVE_X87_PATH 1
/* Powers of ten exact in the x87 format's 64-bit significand (5^27 < 2^64). */
static const long double pow10_ld[] = { 1e0L, 1e1L, 1e2L, 1e3L, 1e4L, 1e5L, 1e6L, 1e7L, 1e8L, 1e9L,
                                        1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L,
                                        1e19L, 1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L };

/* mant * 10^e rounded once to 64 bits (q), then to 53: the same as rounding the exact value
 * to 53 bits unless q lies exactly halfway between two doubles (a double's midpoint is on
 * the 64-bit grid, and q is within half a 64-bit unit of the exact value, so no midpoint
 * lies between them unless q is one). That case goes to strtod. 1, or 0: ask strtod. */
static int x87_real(uint64_t mant, long e, double *out)
{
    long double q = (long double)mant;
    q = e < 0 ? q / pow10_ld[-e] : q * pow10_ld[e];
    uint64_t sig;
    memcpy(&sig, &q, sizeof sig);                /* the x87 format: significand first */
    if ((sig & 0x7ff) == 0x400)
        return 0;
    *out = (double)q;
    return 1;
}
#endif

/* The exact double of d without strtod, when that is quick. 1, or 0: ask strtod. */
static int fast_real(const struct num_parts *d, double *out)
{
#if FLT_EVAL_METHOD == 0
    double v;
    if (d->truncated)
        return 0;
    if (d->mant == 0) {
        v = 0.0;
    } else if (d->mant <= (uint64_t)1 << 53 && d->exp10 >= -22 && d->exp10 <= 22) {
        v = d->exp10 < 0 ? (double)d->mant / pow10_d[-d->exp10] : (double)d->mant * pow10_d[d->exp10];
#ifdef HAVE_X87_PATH
    } else if (d->exp10 >= -27 && d->exp10 <= 27) {
        if (!x87_real(d->mant, d->exp10, &v))
            return 0;
#endif
    } else {
        return 0;
    }
    *out = d->neg ? -v : v;
    return 1;
#else
    (void)d, (void)out;
    return 0;
#endif
}

/* An integer literal as strtoll reads it; -1 when it overflows (jansson refuses it). */
static int int_value(const struct num_parts *d, int64_t *out)
{
    if (d->truncated || d->mant > (uint64_t)INT64_MAX + d->neg)
        return -1;
    *out = d->neg ? (int64_t)(0 - d->mant) : (int64_t)d->mant;
    return 0;
}

size_t oip_json_number(const char *s, size_t len, uint8_t *kind, union oip_json_num *num)
{
    struct num_parts d;
    size_t taken = number_parts(s, len, &d);
    if (!taken)
        return 0;
    if (d.is_int) {
        *kind = OIP_JSON_INT;
        return int_value(&d, &num->i) == 0 ? taken : 0;
    }
    *kind = OIP_JSON_REAL;
    if (fast_real(&d, &num->d))
        return taken;
    if (taken >= len)                            /* strtod would read past the text */
        return 0;
    char *end;
    double v = strtod(s, &end);
    if (end != s + taken || isinf(v))
        return 0;
    num->d = v;
    return taken;
}

/* ---- the values of one data array ------------------------------------------------------ */

static void values_free(struct oip_json_values *v)
{
    free(v->num);
    free(v->kind);
    memset(v, 0, sizeof *v);
}

/* Room for one more value. 0, or -1 out of memory. */
static int values_grow(struct oip_json_values *v, size_t *cap)
{
    if (v->count < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 1024;
    union oip_json_num *num = realloc(v->num, nc * sizeof *num);
    if (num)
        v->num = num;
    uint8_t *kind = num ? realloc(v->kind, nc) : NULL;
    if (!kind)
        return -1;
    v->kind = kind;
    *cap = nc;
    return 0;
}

/* ---- the scan -------------------------------------------------------------------------- */

/* What a value is to the request: the root object, its inputs array, an input, or other. */
enum role { ROLE_OTHER, ROLE_ROOT, ROLE_INPUTS, ROLE_INPUT };

struct scan {
    const char *t;
    size_t len, pos;
    struct oip_json_data **out;
};

static void skip_ws(struct scan *s)
{
    while (s->pos < s->len) {
        char c = s->t[s->pos];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
            return;
        s->pos++;
    }
}

static int is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* The string at pos (its '"'); pos past it, *raw and *raw_len its text between the quotes,
 * escapes as written. 0, or -1: malformed (no control characters, known escapes only). */
static int scan_string(struct scan *s, const char **raw, size_t *raw_len)
{
    size_t p = s->pos + 1;
    while (p < s->len) {
        unsigned char c = (unsigned char)s->t[p];
        if (c == '"') {
            *raw = s->t + s->pos + 1;
            *raw_len = p - s->pos - 1;
            s->pos = p + 1;
            return 0;
        }
        if (c < 0x20)
            return -1;
        if (c != '\\') {
            p++;
            continue;
        }
        char e = p + 1 < s->len ? s->t[p + 1] : '\0';
        if (e == 'u') {
            for (size_t k = 2; k < 6; k++)
                if (p + k >= s->len || !is_hex(s->t[p + k]))
                    return -1;
            p += 6;
        } else if (e && memchr("\"\\/bfnrt", e, 8)) {
            p += 2;
        } else {
            return -1;
        }
    }
    return -1;
}

static int scan_literal(struct scan *s)
{
    static const char *const lit[] = { "true", "false", "null" };
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(lit[i]);
        if (s->len - s->pos >= n && memcmp(s->t + s->pos, lit[i], n) == 0) {
            s->pos += n;
            return 0;
        }
    }
    return -1;
}

/* A number, true or false at pos as one more leaf of v (room made). 0, or -1. */
static int read_leaf(struct scan *s, struct oip_json_values *v)
{
    const char *p = s->t + s->pos;
    size_t left = s->len - s->pos, taken = 0;
    if (*p == '-' || is_digit(*p))
        taken = oip_json_number(p, left, &v->kind[v->count], &v->num[v->count]);
    else if (left >= 4 && memcmp(p, "true", 4) == 0)
        taken = 4, v->kind[v->count] = OIP_JSON_TRUE;
    else if (left >= 5 && memcmp(p, "false", 5) == 0)
        taken = 5, v->kind[v->count] = OIP_JSON_FALSE;
    if (!taken)
        return -1;
    v->count++;
    s->pos += taken;
    return 0;
}

/* The data array at pos: its leaves, nested at most OIP_JSON_MAX_NEST deep, into v; pos
 * past it. 0, or -1: not an array of numbers and booleans only (pos anywhere). */
static int read_numbers(struct scan *s, struct oip_json_values *v)
{
    size_t cap = 0;
    int level = 0, want_value = 1, may_close = 0;
    for (;;) {
        skip_ws(s);
        if (s->pos >= s->len)
            return -1;
        char c = s->t[s->pos];
        if (want_value && c == '[') {
            if (++level > OIP_JSON_MAX_NEST)
                return -1;
            s->pos++;
            may_close = 1;
        } else if (c == ']' && (!want_value || may_close)) {
            s->pos++;
            want_value = may_close = 0;
            if (--level == 0)
                return 0;
        } else if (!want_value) {
            if (c != ',')
                return -1;
            s->pos++;
            want_value = 1;
        } else {
            if (values_grow(v, &cap) || read_leaf(s, v))
                return -1;
            want_value = may_close = 0;
        }
    }
}

static int data_add(struct oip_json_data **dp, size_t input, size_t from, size_t to, struct oip_json_values *v)
{
    struct oip_json_data *d = *dp ? *dp : calloc(1, sizeof *d);
    if (!d)
        return -1;
    *dp = d;
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 4;
        struct entry *e = realloc(d->e, nc * sizeof *e);
        if (!e)
            return -1;
        d->e = e;
        d->cap = nc;
    }
    d->e[d->n++] = (struct entry){ input, from, to, 1, *v };
    return 0;
}

/* Input `input`'s data array at pos, read. 0, or -1: left to jansson (pos too). */
static int data_array(struct scan *s, size_t input)
{
    size_t from = s->pos;
    struct oip_json_values v = { 0 };
    if (read_numbers(s, &v) == 0 && data_add(s->out, input, from, s->pos, &v) == 0)
        return 0;
    values_free(&v);
    s->pos = from;
    return -1;
}

static int scan_value(struct scan *s, int depth, enum role role, size_t index);

/* One member's value: an input's data array read, or the value scanned. */
static int scan_member(struct scan *s, int depth, enum role role, size_t index, const char *key, size_t klen)
{
    skip_ws(s);
    if (role == ROLE_INPUT && klen == 4 && memcmp(key, "data", 4) == 0 && s->pos < s->len &&
        s->t[s->pos] == '[' && data_array(s, index) == 0)
        return 0;
    enum role child = role == ROLE_ROOT && klen == 6 && memcmp(key, "inputs", 6) == 0 ? ROLE_INPUTS : ROLE_OTHER;
    return scan_value(s, depth, child, 0);
}

/* The object at pos (its '{'), as role (ROLE_ROOT, ROLE_INPUT or ROLE_OTHER). */
static int scan_object(struct scan *s, int depth, enum role role, size_t index)
{
    s->pos++;
    skip_ws(s);
    if (s->pos < s->len && s->t[s->pos] == '}') {
        s->pos++;
        return 0;
    }
    for (;;) {
        const char *key;
        size_t klen;
        skip_ws(s);
        if (s->pos >= s->len || s->t[s->pos] != '"' || scan_string(s, &key, &klen))
            return -1;
        skip_ws(s);
        if (s->pos >= s->len || s->t[s->pos] != ':')
            return -1;
        s->pos++;
        if (scan_member(s, depth, role, index, key, klen))
            return -1;
        skip_ws(s);
        char c = s->pos < s->len ? s->t[s->pos++] : '\0';
        if (c == '}')
            return 0;
        if (c != ',')
            return -1;
    }
}

/* The array at pos (its '['); the elements of the inputs array are inputs. */
static int scan_array(struct scan *s, int depth, enum role role)
{
    s->pos++;
    skip_ws(s);
    if (s->pos < s->len && s->t[s->pos] == ']') {
        s->pos++;
        return 0;
    }
    for (size_t k = 0;; k++) {
        if (scan_value(s, depth, role == ROLE_INPUTS ? ROLE_INPUT : ROLE_OTHER, k))
            return -1;
        skip_ws(s);
        char c = s->pos < s->len ? s->t[s->pos++] : '\0';
        if (c == ']')
            return 0;
        if (c != ',')
            return -1;
    }
}

/* The value at pos (after whitespace); pos past it. 0, or -1: the scan stops. */
static int scan_value(struct scan *s, int depth, enum role role, size_t index)
{
    skip_ws(s);
    if (s->pos >= s->len || depth >= SCAN_MAX_DEPTH)
        return -1;
    char c = s->t[s->pos];
    const char *raw;
    size_t n;
    struct num_parts d;
    if (c == '{')
        return scan_object(s, depth + 1, role == ROLE_ROOT || role == ROLE_INPUT ? role : ROLE_OTHER, index);
    if (c == '[')
        return scan_array(s, depth + 1, role);
    if (c == '"')
        return scan_string(s, &raw, &n);
    if (c == '-' || is_digit(c)) {
        n = number_parts(s->t + s->pos, s->len - s->pos, &d);
        s->pos += n;
        return n ? 0 : -1;
    }
    return scan_literal(s);
}

/* ---- jansson around the arrays read ---------------------------------------------------- */

#define FED_ARRAY "0 "               /* what jansson reads of an array read: a value, then a
                                      * blank, so nothing after it joins the number */
#define FED_LEN (sizeof FED_ARRAY - 1)

struct feed {
    const char *t;
    size_t len, pos, next;           /* next: the next array read */
    const struct oip_json_data *d;
};

/* jansson's json_load_callback: the text, each array read given as FED_ARRAY. */
static size_t feed_text(void *buffer, size_t buflen, void *arg)
{
    struct feed *f = arg;
    char *out = buffer;
    size_t n = 0;
    while (n < buflen && f->pos < f->len) {
        const struct entry *e = f->next < f->d->n ? &f->d->e[f->next] : NULL;
        if (e && f->pos == e->from) {
            if (buflen - n < FED_LEN)
                break;
            memcpy(out + n, FED_ARRAY, FED_LEN);
            n += FED_LEN;
            f->pos = e->to;
            f->next++;
            continue;
        }
        size_t stop = e ? e->from : f->len, k = stop - f->pos < buflen - n ? stop - f->pos : buflen - n;
        memcpy(out + n, f->t + f->pos, k);
        n += k;
        f->pos += k;
    }
    return n;
}

json_t *oip_json_data_load(const char *text, size_t len, size_t flags, json_error_t *err,
                           struct oip_json_data **data)
{
    oip_json_data_free(*data);
    *data = NULL;
    struct scan s = { text, len, 0, data };
    (void)scan_value(&s, 0, ROLE_ROOT, 0);
    if (!*data)
        return json_loadb(text, len, flags, err);
    struct feed f = { text, len, 0, 0, *data };
    json_t *j = json_load_callback(feed_text, &f, flags, err);
    if (j)
        return j;
    /* An error's line, column and position are not a function of the bytes alone (jansson
     * drops a NUL it had to put back after a number, and counts on without it), so the text
     * as sent is read again for jansson's own: at most twice the cost of one plain parse. */
    oip_json_data_free(*data);
    *data = NULL;
    return json_loadb(text, len, flags, err);
}

/* ---- the arrays read ------------------------------------------------------------------- */

const struct oip_json_values *oip_json_data_for(const struct oip_json_data *d, size_t input)
{
    for (size_t i = 0; d && i < d->n; i++)
        if (d->e[i].input == input && d->e[i].live)
            return &d->e[i].v;
    return NULL;
}

void oip_json_data_drop(struct oip_json_data *d, size_t input)
{
    for (size_t i = 0; d && i < d->n; i++)
        if (d->e[i].input == input) {
            values_free(&d->e[i].v);
            d->e[i].live = 0;
        }
}

void oip_json_data_free(struct oip_json_data *d)
{
    for (size_t i = 0; d && i < d->n; i++)
        values_free(&d->e[i].v);
    free(d ? d->e : NULL);
    free(d);
}
