/*
 * http_parse.c — the HTTP API's parsers of what a client sends (path templates, Range,
 * Content-Digest, If-None-Match, job list cursors, timestamps): pure functions,
 * no libmicrohttpd or database, so the unit tests and fuzz/http_route_fuzz.c call them
 * as the server does.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/fsutil.h"
#include "service/base/base64.h"
#include "service/http/http_parse.h"
#include "service/base/uuid.h"

int gj_http_is_json_type(const char *ct)
{
    while (*ct == ' ')
        ct++;
    size_t n = strcspn(ct, "; \t");
    if (n == 16 && strncasecmp(ct, "application/json", 16) == 0)
        return 1;
    return n > 17 && strncasecmp(ct, "application/", 12) == 0 && strncasecmp(ct + n - 5, "+json", 5) == 0;
}

int gj_http_match_path(const char *tmpl, const char *path, char params[][GJ_PARAM_MAX], int max_params,
                       int *n_params)
{
    int n = 0;
    const char *t = tmpl, *p = path;
    while (*t && *p) {
        if (*t == '{') {
            const char *close = strchr(t, '}');
            if (!close)
                return 0;
            /* a last {completePath} takes the rest, slashes included (CARMIN's /rest/path/...) */
            int rest = close[1] == '\0' && close - t == 13 && strncmp(t, "{completePath}", 14) == 0;
            const char *seg_end = rest ? NULL : strchr(p, '/');
            size_t len = seg_end ? (size_t)(seg_end - p) : strlen(p);
            if (len == 0 || len >= GJ_PARAM_MAX || n >= max_params)
                return 0;
            memcpy(params[n], p, len);
            params[n][len] = '\0';
            if (close - t == 3 && strncmp(t, "{id}", 4) == 0)
                for (size_t i = 0; i < len; i++)
                    params[n][i] = (char)tolower((unsigned char)params[n][i]);
            n++;
            t = close + 1;
            p += len;
            continue;
        }
        if (*t != *p)
            return 0;
        t++;
        p++;
    }
    if (*t || *p)
        return 0;
    if (n_params)
        *n_params = n;
    return 1;
}

int gj_http_params_valid(const char *tmpl, char params[][GJ_PARAM_MAX], int n_params)
{
    int k = 0;
    for (const char *t = strchr(tmpl, '{'); t && k < n_params; t = strchr(t + 1, '{'), k++) {
        if (strncmp(t, "{id}", 4) == 0 && !gj_is_uuid(params[k]))
            return 0;
        if (strncmp(t, "{name}", 6) == 0 && !gj_safe_name(params[k]))
            return 0;
    }
    return 1;
}

int gj_http_parse_u64(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > 19)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

int gj_http_parse_range(const char *hdr, uint64_t size, uint64_t *first, uint64_t *last)
{
    if (!hdr)
        return 0;
    while (*hdr == ' ' || *hdr == '\t')
        hdr++;
    if (strncasecmp(hdr, "bytes=", 6) != 0)
        return 0;
    const char *s = hdr + 6;
    while (*s == ' ')
        s++;
    size_t len = strlen(s);
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    if (memchr(s, ',', len))
        return 0;                        /* several ranges: serve the whole representation */
    const char *dash = memchr(s, '-', len);
    if (!dash)
        return 0;
    size_t a_len = (size_t)(dash - s), b_len = len - a_len - 1;
    uint64_t a, b;
    if (a_len == 0) {                    /* suffix: the last n bytes */
        if (gj_http_parse_u64(dash + 1, b_len, &b))
            return 0;
        if (b == 0 || size == 0)
            return -1;
        *first = b >= size ? 0 : size - b;
        *last = size - 1;
        return 1;
    }
    if (gj_http_parse_u64(s, a_len, &a))
        return 0;
    if (b_len == 0) {
        b = UINT64_MAX;
    } else {
        if (gj_http_parse_u64(dash + 1, b_len, &b))
            return 0;
        if (b < a)
            return 0;                    /* invalid syntax: ignore the header */
    }
    if (a >= size)
        return -1;
    *first = a;
    *last = b >= size ? size - 1 : b;
    return 1;
}

int gj_http_parse_content_digest(const char *hdr, unsigned char sha256[32])
{
    /* Dictionary of byte sequences: alg=:BASE64:, separated by commas;
     * parameters (;...) after a member are allowed and ignored. */
    const char *s = hdr;
    int found = 0;
    if (!s)
        return -1;
    for (;;) {
        while (*s == ' ' || *s == '\t')
            s++;
        const char *key = s;
        while (*s && (islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '-' || *s == '_' ||
                      *s == '.' || *s == '*'))
            s++;
        size_t klen = (size_t)(s - key);
        if (klen == 0 || *s != '=')
            return -1;
        s++;
        if (*s != ':')
            return -1;
        const char *v = ++s;
        while (*s && *s != ':')
            s++;
        if (*s != ':')
            return -1;
        size_t vlen = (size_t)(s - v);
        s++;
        while (*s == ';') {                  /* parameters */
            s++;
            while (*s && *s != ',' && *s != ';')
                s++;
        }
        if (klen == 7 && strncmp(key, "sha-256", 7) == 0) {
            unsigned char buf[48];
            if (gj_base64_decode(v, vlen, buf, sizeof buf, GJ_BASE64_STD) != 32)
                return -1;
            memcpy(sha256, buf, 32);
            found = 1;
        } else {
            unsigned char buf[128];
            if (gj_base64_decode(v, vlen, buf, sizeof buf, GJ_BASE64_STD) < 0)
                return -1;
        }
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\0')
            break;
        if (*s != ',')
            return -1;
        s++;
    }
    return found;
}

int gj_http_etag_match(const char *inm, const char *etag)
{
    if (!inm || !etag)
        return 0;
    const char *e = etag;
    if (strncmp(e, "W/", 2) == 0)
        e += 2;
    size_t elen = strlen(e);
    const char *s = inm;
    while (*s) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        if (!*s)
            break;
        const char *tok = s;
        while (*s && *s != ',')
            s++;
        const char *end = s;
        while (end > tok && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if (end - tok == 1 && *tok == '*')
            return 1;
        if (end - tok >= 2 && strncmp(tok, "W/", 2) == 0)
            tok += 2;
        if ((size_t)(end - tok) == elen && memcmp(tok, e, elen) == 0)
            return 1;
    }
    return 0;
}

static int digits(const char *s, int n)
{
    for (int i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

static int two(const char *s)
{
    return (s[0] - '0') * 10 + (s[1] - '0');
}

/* The date part's values as PostgreSQL takes them: no year 0, no 30 February. */
static int date_exists(int year, int mon, int day)
{
    static const int days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return year >= 1 && mon >= 1 && mon <= 12 && day >= 1 && day <= days[mon - 1] + (mon == 2 && leap);
}

int gj_is_timestamp(const char *s)
{
    /* YYYY-MM-DD[(T| )HH:MM[:SS[.f{1,6}]][Z|(+|-)HH[:]MM]], with values PostgreSQL accepts:
     * a date that exists, 23:59:60 (a leap second) without a fraction, zone offsets up to
     * 15:59 */
    if (!s || strlen(s) > 40 || !digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' ||
        !digits(s + 8, 2))
        return 0;
    if (!date_exists(two(s) * 100 + two(s + 2), two(s + 5), two(s + 8)))
        return 0;
    s += 10;
    if (!*s)
        return 1;
    if (*s != 'T' && *s != 't' && *s != ' ')
        return 0;
    s++;
    if (!digits(s, 2) || s[2] != ':' || !digits(s + 3, 2))
        return 0;
    if ((s[0] - '0') * 10 + (s[1] - '0') > 23 || (s[3] - '0') * 10 + (s[4] - '0') > 59)
        return 0;
    s += 5;
    if (*s == ':') {
        if (!digits(s + 1, 2) || two(s + 1) > 60)
            return 0;
        int leap_second = two(s + 1) == 60;
        s += 3;
        if (*s == '.') {
            if (leap_second)
                return 0;
            s++;
            int n = 0;
            while (isdigit((unsigned char)*s) && n < 7) {
                s++;
                n++;
            }
            if (n < 1 || n > 6)
                return 0;
        }
    }
    if (!*s)
        return 1;
    if ((*s == 'Z' || *s == 'z') && !s[1])
        return 1;
    if (*s == '+' || *s == '-') {
        s++;
        if (!digits(s, 2) || two(s) > 15)
            return 0;
        s += 2;
        if (*s == ':')
            s++;
        if (!digits(s, 2) || two(s) > 59)
            return 0;
        return s[2] == '\0';
    }
    return 0;
}

int gj_cursor_encode(const char *created_at, const char *id, char *out, size_t cap)
{
    char raw[96];
    int n = snprintf(raw, sizeof raw, "%s,%s", created_at, id);
    if (n < 0 || (size_t)n >= sizeof raw)
        return -1;
    return gj_base64_encode((const unsigned char *)raw, (size_t)n, out, cap, GJ_BASE64_URL) < 0 ? -1 : 0;
}

int gj_cursor_decode(const char *cursor, char created_at[40], char id[GJ_UUID_LEN + 1])
{
    unsigned char raw[96];
    size_t len = cursor ? strlen(cursor) : 0;
    if (len == 0 || len > 128)
        return -1;
    long n = gj_base64_decode(cursor, len, raw, sizeof raw - 1, GJ_BASE64_URL);
    if (n <= 0)
        return -1;
    raw[n] = '\0';
    char *comma = strchr((char *)raw, ',');
    if (!comma || (size_t)n != strlen((char *)raw))
        return -1;
    *comma = '\0';
    const char *ts = (const char *)raw;
    /* exactly what the server writes: YYYY-MM-DDTHH:MM:SS.ffffffZ */
    if (strlen(ts) != 27 || !gj_is_timestamp(ts) || ts[10] != 'T' || ts[19] != '.' || ts[26] != 'Z')
        return -1;
    if (!gj_is_uuid(comma + 1))
        return -1;
    memcpy(created_at, ts, 28);
    memcpy(id, comma + 1, GJ_UUID_LEN + 1);
    for (int i = 0; i < GJ_UUID_LEN; i++)
        id[i] = (char)tolower((unsigned char)id[i]);
    return 0;
}
