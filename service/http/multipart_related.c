/*
 * multipart_related.c — streaming MIME multipart parser (see multipart_related.h).
 *
 * The delimiter is CRLF "--" boundary. Since CR occurs in it only at its first
 * position, a partial match that fails can be handed on as data whole and
 * matching restarts at the failing byte: no backtracking, and at most
 * delimiter-length bytes are ever held back between chunks. The first
 * delimiter may open the body without a CRLF: the parser starts as if a CRLF
 * had just been seen.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "service/http/multipart_related.h"

#define MAX_PADDING 256      /* transport padding after a boundary */

enum state { S_PREAMBLE, S_AFTER_DELIM, S_DASH, S_EXPECT_LF, S_HEADERS, S_BODY, S_EPILOGUE, S_ERROR };

struct gj_mpr {
    struct gj_mpr_callbacks cb;
    void *ud;
    char delim[4 + GJ_MPR_BOUNDARY_MAX + 1];
    size_t dlen;
    size_t held;                 /* bytes of delim matched so far */
    enum state st;
    unsigned parts, max_parts;
    int in_part;                 /* part_begin called, part_end not yet */
    size_t padding;
    char hraw[GJ_MPR_HEADER_BYTES + 2];
    size_t hlen, line_start;
    char hout[GJ_MPR_HEADER_BYTES + 2];
    struct gj_mpr_part part;
    char err[200];
};

static int bchar(unsigned char c)
{
    return isalnum(c) || strchr("'()+_,-./:=? ", c) != NULL;
}

static int boundary_chars_ok(const char *boundary, size_t n)
{
    if (n < 1 || boundary[n - 1] == ' ')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!bchar((unsigned char)boundary[i]))
            return 0;
    return 1;
}

int gj_mpr_boundary(const char *content_type, char out[GJ_MPR_BOUNDARY_MAX + 1], const char **why)
{
    char buf[1024];
    int rc = content_type ? gj_mime_param(content_type, "boundary", buf, sizeof buf) : 0;
    size_t n = rc == 1 ? strlen(buf) : 0;
    if (rc == 0)
        *why = "the multipart Content-Type needs a boundary parameter";
    else if (rc < 0 || n > GJ_MPR_BOUNDARY_MAX)
        *why = "the multipart boundary is longer than 200 characters, or its parameter is malformed";
    else if (!boundary_chars_ok(buf, n))
        *why = "the multipart boundary holds characters RFC 2046 does not allow, or ends with a space";
    else {
        memcpy(out, buf, n + 1);
        return 0;
    }
    return -1;
}

struct gj_mpr *gj_mpr_new(const char *boundary, const struct gj_mpr_callbacks *cb, void *ud)
{
    if (!boundary)
        return NULL;
    size_t n = strlen(boundary);
    if (n > GJ_MPR_BOUNDARY_MAX || !boundary_chars_ok(boundary, n))
        return NULL;
    struct gj_mpr *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (cb)
        p->cb = *cb;
    p->ud = ud;
    p->dlen = (size_t)snprintf(p->delim, sizeof p->delim, "\r\n--%s", boundary);
    p->held = 2;                 /* a virtual CRLF before the body */
    p->st = S_PREAMBLE;
    p->max_parts = GJ_MPR_DEFAULT_MAX_PARTS;
    return p;
}

void gj_mpr_free(struct gj_mpr *p)
{
    free(p);
}

void gj_mpr_set_max_parts(struct gj_mpr *p, unsigned max_parts)
{
    p->max_parts = max_parts;
}

const char *gj_mpr_error(const struct gj_mpr *p)
{
    return p->err;
}

int gj_mpr_complete(const struct gj_mpr *p)
{
    return p->st == S_EPILOGUE;
}

unsigned gj_mpr_parts(const struct gj_mpr *p)
{
    return p->parts;
}

static int fail(struct gj_mpr *p, const char *msg)
{
    if (p->st != S_ERROR) {
        p->st = S_ERROR;
        if (!p->err[0])
            snprintf(p->err, sizeof p->err, "%s", msg);
    }
    return -1;
}

void gj_mpr_fail(struct gj_mpr *p, const char *message)
{
    if (!p->err[0])
        snprintf(p->err, sizeof p->err, "%s", message ? message : "stopped by the receiver");
}

const char *gj_mpr_header(const struct gj_mpr_part *part, const char *name)
{
    for (size_t i = 0; i < part->n_headers; i++)
        if (strcasecmp(part->names[i], name) == 0)
            return part->values[i];
    return NULL;
}

static int tchar(unsigned char c)
{
    return c > 0x20 && c < 0x7f && !strchr("()<>@,;:\\\"/[]?={}", c);
}

/* Parses the collected header lines (hraw[0..line_start)) into part. */
static int parse_headers(struct gj_mpr *p)
{
    struct gj_mpr_part *pt = &p->part;
    memset(pt, 0, sizeof *pt);
    pt->index = p->parts;
    size_t o = 0;            /* write position in hout */
    size_t i = 0, end = p->line_start;
    while (i < end) {
        size_t ls = i;
        while (i < end && p->hraw[i] != '\n')
            i++;
        size_t le = i;           /* exclusive, at '\n' */
        i++;                     /* past '\n' */
        if (le > ls && p->hraw[le - 1] == '\r')
            le--;
        for (size_t k = ls; k < le; k++) {
            unsigned char c = (unsigned char)p->hraw[k];
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return fail(p, "a part header holds a control character");
        }
        if (p->hraw[ls] == ' ' || p->hraw[ls] == '\t') {     /* folded continuation */
            if (pt->n_headers == 0)
                return fail(p, "a part's headers begin with a continuation line");
            size_t a = ls, b = le;
            while (a < b && (p->hraw[a] == ' ' || p->hraw[a] == '\t'))
                a++;
            while (b > a && (p->hraw[b - 1] == ' ' || p->hraw[b - 1] == '\t'))
                b--;
            if (a == b)
                continue;
            /* the previous value ends at o - 1 (its NUL) */
            o--;
            if (pt->values[pt->n_headers - 1][0])
                p->hout[o++] = ' ';
            memcpy(p->hout + o, p->hraw + a, b - a);
            o += b - a;
            p->hout[o++] = '\0';
            continue;
        }
        size_t colon = ls;
        while (colon < le && p->hraw[colon] != ':')
            colon++;
        if (colon == le || colon == ls)
            return fail(p, "malformed part header (no 'Name: value')");
        for (size_t k = ls; k < colon; k++)
            if (!tchar((unsigned char)p->hraw[k]))
                return fail(p, "malformed part header name");
        if (pt->n_headers >= GJ_MPR_MAX_HEADERS)
            return fail(p, "too many headers in one part");
        pt->names[pt->n_headers] = p->hout + o;
        memcpy(p->hout + o, p->hraw + ls, colon - ls);
        o += colon - ls;
        p->hout[o++] = '\0';
        size_t a = colon + 1, b = le;
        while (a < b && (p->hraw[a] == ' ' || p->hraw[a] == '\t'))
            a++;
        while (b > a && (p->hraw[b - 1] == ' ' || p->hraw[b - 1] == '\t'))
            b--;
        pt->values[pt->n_headers] = p->hout + o;
        memcpy(p->hout + o, p->hraw + a, b - a);
        o += b - a;
        p->hout[o++] = '\0';
        pt->n_headers++;
    }
    return 0;
}

static int emit(struct gj_mpr *p, const char *data, size_t len)
{
    if (p->st != S_BODY || len == 0 || !p->cb.part_data)
        return 0;
    if (p->cb.part_data(p->ud, data, len) != 0)
        return fail(p, "stopped by the receiver");
    return 0;
}

/* Preamble or body: scans for the delimiter. Returns bytes consumed, or -1. */
static long scan(struct gj_mpr *p, const char *data, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (p->held == 0) {
            const char *cr = memchr(data + i, '\r', len - i);
            size_t run = cr ? (size_t)(cr - (data + i)) : len - i;
            if (run && emit(p, data + i, run))
                return -1;
            i += run;
            if (!cr)
                break;
            p->held = 1;
            i++;
            continue;
        }
        if (data[i] == p->delim[p->held]) {
            p->held++;
            i++;
            if (p->held == p->dlen) {
                p->held = 0;
                if (p->st == S_BODY) {
                    p->in_part = 0;
                    if (p->cb.part_end && p->cb.part_end(p->ud) != 0)
                        return fail(p, "stopped by the receiver");
                }
                p->st = S_AFTER_DELIM;
                p->padding = 0;
                return (long)i;
            }
            continue;
        }
        /* mismatch: what was held is data; the current byte is looked at again */
        size_t h = p->held;
        p->held = 0;
        if (emit(p, p->delim, h))
            return -1;
    }
    return (long)i;
}

static int start_part(struct gj_mpr *p)
{
    if (p->parts >= p->max_parts)
        return fail(p, "too many parts");
    p->hlen = 0;
    p->line_start = 0;
    p->st = S_HEADERS;
    return 0;
}

int gj_mpr_feed(struct gj_mpr *p, const char *data, size_t len)
{
    size_t i = 0;
    while (i < len) {
        switch (p->st) {
        case S_ERROR:
            return -1;
        case S_EPILOGUE:
            return 0;
        case S_PREAMBLE:
        case S_BODY: {
            long n = scan(p, data + i, len - i);
            if (n < 0)
                return -1;
            i += (size_t)n;
            break;
        }
        case S_AFTER_DELIM: {
            char c = data[i++];
            if (c == '-' && p->padding == 0)
                p->st = S_DASH;
            else if (c == ' ' || c == '\t') {
                if (++p->padding > MAX_PADDING)
                    return fail(p, "too much padding after a boundary");
            } else if (c == '\r')
                p->st = S_EXPECT_LF;
            else if (c == '\n') {
                if (start_part(p))
                    return -1;
            } else
                return fail(p, "a boundary is followed by something other than a line end or '--'");
            break;
        }
        case S_DASH:
            if (data[i++] != '-')
                return fail(p, "a boundary is followed by something other than a line end or '--'");
            p->st = S_EPILOGUE;
            return 0;
        case S_EXPECT_LF:
            if (data[i++] != '\n')
                return fail(p, "a boundary line does not end with CRLF");
            if (start_part(p))
                return -1;
            break;
        case S_HEADERS: {
            char c = data[i++];
            if (p->hlen >= GJ_MPR_HEADER_BYTES)
                return fail(p, "the headers of a part are too long");
            p->hraw[p->hlen++] = c;
            if (c != '\n')
                break;
            size_t line = p->hlen - p->line_start;      /* with its '\n' */
            if (line == 1 || (line == 2 && p->hraw[p->line_start] == '\r')) {
                if (parse_headers(p))
                    return -1;
                p->parts++;
                p->in_part = 1;
                p->st = S_BODY;
                p->held = 0;
                if (p->cb.part_begin && p->cb.part_begin(p->ud, &p->part) != 0)
                    return fail(p, "stopped by the receiver");
            } else {
                p->line_start = p->hlen;
            }
            break;
        }
        }
    }
    return p->st == S_ERROR ? -1 : 0;
}

int gj_mpr_finish(struct gj_mpr *p)
{
    switch (p->st) {
    case S_EPILOGUE:
        return 0;
    case S_ERROR:
        return -1;
    case S_PREAMBLE:
        return fail(p, p->parts ? "the body ends before the closing boundary" : "no boundary found in the body");
    default:
        return fail(p, "the body ends before the closing boundary");
    }
}

/* ---- header values ---- */

int gj_mime_type_is(const char *value, const char *type)
{
    if (!value || !type)
        return 0;
    while (*value == ' ' || *value == '\t')
        value++;
    size_t n = strcspn(value, "; \t");
    size_t t = strlen(type);
    if (n != t || strncasecmp(value, type, t) != 0)
        return 0;
    const char *r = value + n;
    while (*r == ' ' || *r == '\t')
        r++;
    return *r == '\0' || *r == ';';
}

int gj_mime_param(const char *value, const char *name, char *out, size_t cap)
{
    if (!value || !name || !out || cap == 0)
        return -1;
    const char *s = strchr(value, ';');
    size_t nlen = strlen(name);
    while (s && *s) {
        while (*s == ';' || *s == ' ' || *s == '\t')
            s++;
        if (!*s)
            break;
        const char *ns = s;
        while (*s && *s != '=' && *s != ';' && *s != ' ' && *s != '\t')
            s++;
        size_t kl = (size_t)(s - ns);
        while (*s == ' ' || *s == '\t')
            s++;
        if (kl == 0)
            return -1;
        int match = kl == nlen && strncasecmp(ns, name, nlen) == 0;
        if (*s != '=') {                       /* a parameter without value */
            if (*s && *s != ';')
                return -1;
            if (match)
                return -1;
            continue;
        }
        s++;
        while (*s == ' ' || *s == '\t')
            s++;
        size_t o = 0;
        int too_long = 0;
        if (*s == '"') {
            s++;
            for (;;) {
                char c = *s;
                if (!c)
                    return -1;                 /* unterminated quoted string */
                if (c == '"') {
                    s++;
                    break;
                }
                if (c == '\\') {
                    s++;
                    c = *s;
                    if (!c)
                        return -1;
                }
                if (match) {
                    if (o + 1 >= cap)
                        too_long = 1;
                    else
                        out[o++] = c;
                }
                s++;
            }
            while (*s == ' ' || *s == '\t')
                s++;
            if (*s && *s != ';')
                return -1;
        } else {
            const char *vs = s;
            while (*s && *s != ';' && *s != ' ' && *s != '\t')
                s++;
            size_t vl = (size_t)(s - vs);
            while (*s == ' ' || *s == '\t')
                s++;
            if (*s && *s != ';')
                return -1;
            if (match) {
                if (vl + 1 > cap)
                    too_long = 1;
                else {
                    memcpy(out, vs, vl);
                    o = vl;
                }
            }
        }
        if (match) {
            if (too_long)
                return -1;
            out[o] = '\0';
            return 1;
        }
    }
    return 0;
}
