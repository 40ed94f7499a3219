/*
 * oip_compress.c — gzip and deflate request and response bodies for /v2 (oip_compress.h).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "service/infer/oip_compress.h"

const char *oip_coding_name(enum oip_coding coding)
{
    return coding == OIP_GZIP ? "gzip" : coding == OIP_DEFLATE ? "deflate" : NULL;
}

int oip_content_coding(const char *ce, enum oip_coding *coding)
{
    *coding = OIP_IDENTITY;
    if (!ce)
        return 0;
    while (isspace((unsigned char)*ce))
        ce++;
    size_t n = strlen(ce);
    while (n && isspace((unsigned char)ce[n - 1]))
        n--;
    if ((n == 4 && strncasecmp(ce, "gzip", 4) == 0) || (n == 6 && strncasecmp(ce, "x-gzip", 6) == 0))
        *coding = OIP_GZIP;
    else if (n == 7 && strncasecmp(ce, "deflate", 7) == 0)
        *coding = OIP_DEFLATE;
    else if (!(n == 8 && strncasecmp(ce, "identity", 8) == 0) && n)
        return -1;
    return 0;
}

/* One Accept-Encoding element "type[;q=w]": its coding (-1 other) and weight. */
static int accept_element(const char *s, size_t n, double *weight)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    size_t tl = 0;
    while (tl < n && s[tl] != ';' && !isspace((unsigned char)s[tl]))
        tl++;
    *weight = 1;
    const char *q = memchr(s, ';', n);
    if (q) {
        const char *w = q + 1;
        while (w < s + n && isspace((unsigned char)*w))
            w++;
        if (s + n - w < 2 || strncasecmp(w, "q=", 2) != 0)
            return -1;
        char buf[16];
        size_t wl = (size_t)(s + n - (w + 2)) < sizeof buf - 1 ? (size_t)(s + n - (w + 2)) : sizeof buf - 1;
        memcpy(buf, w + 2, wl);
        buf[wl] = '\0';
        char *end;
        *weight = strtod(buf, &end);
        if (end == buf)
            return -1;
    }
    if (tl == 4 && strncasecmp(s, "gzip", 4) == 0)
        return OIP_GZIP;
    if (tl == 7 && strncasecmp(s, "deflate", 7) == 0)
        return OIP_DEFLATE;
    if (tl == 8 && strncasecmp(s, "identity", 8) == 0)
        return OIP_IDENTITY;
    return -1;
}

enum oip_coding oip_accept_coding(const char *ae)
{
    enum oip_coding best = OIP_IDENTITY;
    double best_w = 0;
    for (const char *p = ae; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        double w;
        int c = accept_element(p, n, &w);
        if (c >= 0 && w > best_w) {
            best = (enum oip_coding)c;
            best_w = w;
        }
        p = comma ? comma + 1 : p + n;
    }
    return best;
}

/* zlib's window bits for the data: gzip; deflate with a zlib header; raw deflate. */
static int window_bits(const unsigned char *in, size_t n, enum oip_coding coding)
{
    if (coding == OIP_GZIP)
        return 16 + MAX_WBITS;
    if (n >= 2 && (in[0] & 0x0f) == Z_DEFLATED && ((unsigned)in[0] << 8 | in[1]) % 31 == 0)
        return MAX_WBITS;
    return -MAX_WBITS;
}

int oip_inflate(const char *in, size_t n, enum oip_coding coding, size_t limit, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, window_bits((const unsigned char *)in, n, coding)) != Z_OK)
        return 500;
    size_t cap = n < (SIZE_MAX - 65536) / 4 ? n * 4 + 65536 : SIZE_MAX / 2;
    if (cap > limit + 1)
        cap = limit + 1;
    char *buf = malloc(cap + 1);
    int rc = buf ? 0 : 500, zr = Z_OK;
    zs.next_in = (Bytef *)(uintptr_t)in;
    while (rc == 0 && zr != Z_STREAM_END) {
        if (zs.total_out == cap) {          /* full: grow, never past limit + 1 */
            size_t nc = cap * 2 > limit + 1 ? limit + 1 : cap * 2;
            char *nb = nc > cap ? realloc(buf, nc + 1) : NULL;
            if (!nb) {
                rc = nc > cap ? 500 : 413;
                break;
            }
            buf = nb;
            cap = nc;
        }
        size_t in_left = n - zs.total_in;
        zs.avail_in = in_left > UINT32_MAX ? UINT32_MAX : (uInt)in_left;
        zs.next_out = (Bytef *)buf + zs.total_out;
        size_t out_left = cap - zs.total_out;
        zs.avail_out = out_left > UINT32_MAX ? UINT32_MAX : (uInt)out_left;
        zr = inflate(&zs, Z_NO_FLUSH);
        if (zs.total_out > limit)
            rc = 413;
        else if (zr == Z_STREAM_END)
            rc = zs.total_in == n ? 0 : 400;   /* trailing bytes after the stream */
        else if (zr == Z_BUF_ERROR && zs.total_in == n && zs.total_out < cap)
            rc = 400;                          /* truncated */
        else if (zr != Z_OK && zr != Z_BUF_ERROR)
            rc = zr == Z_MEM_ERROR ? 500 : 400;
    }
    size_t got = zs.total_out;
    inflateEnd(&zs);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[got] = '\0';
    *out = buf;
    *out_len = got;
    return 0;
}

int oip_deflate(const char *in, size_t n, enum oip_coding coding, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, coding == OIP_GZIP ? 16 + MAX_WBITS : MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    uLong bound = deflateBound(&zs, (uLong)n) + 32;
    char *buf = malloc(bound);
    int zr = Z_STREAM_ERROR;
    if (buf) {
        zs.next_in = (Bytef *)(uintptr_t)in;
        zs.avail_in = (uInt)n;
        zs.next_out = (Bytef *)buf;
        zs.avail_out = (uInt)bound;
        zr = n <= UINT32_MAX && bound <= UINT32_MAX ? deflate(&zs, Z_FINISH) : Z_STREAM_ERROR;
    }
    size_t got = zs.total_out;
    deflateEnd(&zs);
    if (zr != Z_STREAM_END) {
        free(buf);
        return -1;
    }
    *out = buf;
    *out_len = got;
    return 0;
}
