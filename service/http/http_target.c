/*
 * http_target.c — the request target's checks (http_target.h): percent-decoding that
 * keeps a NUL visible, and the refusal of control characters and over-long targets.
 */
#include <string.h>

#include "service/http/http_target.h"

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t gj_http_unescape(void *cls, struct MHD_Connection *connection, char *s)
{
    (void)cls;
    (void)connection;
    char *w = s;
    const char *p = s;
    while (*p) {
        int hi, lo;
        if (p[0] == '%' && (hi = hex_value(p[1])) >= 0 && (lo = hex_value(p[2])) >= 0) {
            int v = hi * 16 + lo;
            *w++ = v == 0 ? '\x7f' : (char)v;   /* a NUL would end the string: keep it visible */
            p += 3;
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

int gj_http_has_control(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f)
            return 1;
    return 0;
}

struct query_scan {
    size_t total;
    int control;
};

static enum MHD_Result scan_argument(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct query_scan *q = cls;
    size_t klen = key ? strlen(key) : 0, vlen = value ? strlen(value) : 0;
    q->total += klen + vlen + 2;
    if (gj_http_has_control(key ? key : "", klen) || gj_http_has_control(value ? value : "", vlen))
        q->control = 1;
    return MHD_YES;
}

int gj_http_check_target(struct MHD_Connection *connection, const char *path, const char **what)
{
    size_t plen = strlen(path);
    *what = "path";
    if (gj_http_has_control(path, plen))
        return 400;
    if (plen > GJ_HTTP_MAX_PATH)
        return 414;
    struct query_scan q = { 0, 0 };
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, scan_argument, &q);
    *what = "query";
    if (q.control)
        return 400;
    if (q.total > GJ_HTTP_MAX_QUERY)
        return 414;
    *what = NULL;
    return 0;
}
