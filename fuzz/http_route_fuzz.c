/*
 * http_route_fuzz.c — libFuzzer harness for what a hostile client controls in an HTTP
 * request, through the server's own parsers (service/http/http_parse.c) and its decoder
 * (gj_http_unescape in service/http/http_target.c, which the daemon applies to the path and the
 * query, keeping a %00 visible so that a control character is refused before routing):
 *
 *   METHOD SP PATH[?QUERY] LF
 *   Name: value LF ...
 *
 * The path is decoded and matched against every route of openapi/openapi.yaml (the spec
 * the OpenAPI test holds equal to `gpujobd serve --print-routes`; build.sh turns it into
 * http_routes.inc) as the server routes: templates in order, the first one whose method
 * matches wins (HEAD as GET), its path parameters validated; the others give the Allow
 * list. Query values go where the routes send them (cursor, timestamps, numbers), headers
 * likewise (Range, If-None-Match, Content-Digest, Content-Type, Content-Length). Each
 * parser's promises are checked: parameters fit and hold no '/', a range lies inside the
 * size, a decoded cursor encodes back to itself, base64 round-trips.
 *
 * The route lookup itself (find_route) is still static in http_server.c: once the route
 * tables are a plain list (service/module.h), call it here instead of the loop below.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <microhttpd.h>

#include "service/base/base64.h"
#include "service/http/http_parse.h"
#include "service/http/http_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct { const char *method, *path; } routes[] = {
#include "http_routes.inc"
};

/* The route a request reaches; the methods of the other templates its path matches go
 * into allow (the 405 answer's header). */
static int route(const char *method, const char *path, char *allow, size_t cap)
{
    const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;
    allow[0] = '\0';
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        char params[GJ_ROUTE_MAX_PARAMS][GJ_PARAM_MAX];
        int n = -1;
        if (!gj_http_match_path(routes[i].path, path, params, GJ_ROUTE_MAX_PARAMS, &n))
            continue;
        if (n < 0 || n > GJ_ROUTE_MAX_PARAMS)
            abort();
        for (int k = 0; k < n; k++)
            if (!memchr(params[k], '\0', GJ_PARAM_MAX) || strchr(params[k], '/'))
                abort();
        if (strcmp(routes[i].method, m) == 0)
            return gj_http_params_valid(routes[i].path, params, n) ? (int)i : -2;
        size_t used = strlen(allow);
        snprintf(allow + used, cap - used, "%s%s", used ? ", " : "", routes[i].method);
    }
    return -1;
}

static void check_cursor(const char *v)
{
    char ts[40], id[GJ_UUID_LEN + 1], again[160], ts2[40], id2[GJ_UUID_LEN + 1];
    if (gj_cursor_decode(v, ts, id) != 0)
        return;
    if (!gj_is_timestamp(ts) || !gj_is_uuid(id) || gj_cursor_encode(ts, id, again, sizeof again) != 0 ||
        gj_cursor_decode(again, ts2, id2) != 0 || strcmp(ts, ts2) != 0 || strcmp(id, id2) != 0)
        abort();
}

static void check_base64(const char *v, int url)
{
    unsigned char raw[256], raw2[256];
    char text[400];
    long n = gj_base64_decode(v, strlen(v), raw, sizeof raw, url);
    if (n < 0)
        return;
    if (n > (long)sizeof raw || gj_base64_encode(raw, (size_t)n, text, sizeof text, url) < 0 ||
        gj_base64_decode(text, strlen(text), raw2, sizeof raw2, url) != n || memcmp(raw, raw2, (size_t)n) != 0)
        abort();
}

/* s decoded in place as the daemon decodes it; a decoded NUL never ends the string early. */
static size_t decode(char *s)
{
    size_t n = gj_http_unescape(NULL, NULL, s);
    if (n != strlen(s))
        abort();
    return n;
}

/* One query parameter, decoded, where the routes use it. */
static void query_param(char *kv)
{
    char *eq = strchr(kv, '=');
    char *v = eq ? eq + 1 : kv + strlen(kv);
    if (eq)
        *eq = '\0';
    if (gj_http_has_control(kv, decode(kv)) | gj_http_has_control(v, decode(v)))
        return;                          /* the server answers 400 */
    uint64_t u;
    if (strcmp(kv, "cursor") == 0)
        check_cursor(v);
    else if (!strcmp(kv, "created_after") || !strcmp(kv, "created_before") || !strcmp(kv, "from") ||
             !strcmp(kv, "to"))
        (void)gj_is_timestamp(v);
    else if (!strcmp(kv, "limit") || !strcmp(kv, "version") || !strcmp(kv, "wait"))
        (void)gj_http_parse_u64(v, strlen(v), &u);
    check_base64(v, 1);
}

/* One header line, where the routes use it; size: the blob a Range would apply to. */
static void header(const char *name, const char *v, uint64_t size)
{
    uint64_t first, last, u;
    unsigned char sha[32];
    if (strcasecmp(name, "Range") == 0) {
        if (gj_http_parse_range(v, size, &first, &last) == 1 && (first > last || last >= size))
            abort();
    } else if (strcasecmp(name, "If-None-Match") == 0) {
        (void)gj_http_etag_match(v, "\"4f2a\"");
        (void)gj_http_etag_match(v, "W/\"4f2a\"");
    } else if (strcasecmp(name, "Content-Digest") == 0) {
        (void)gj_http_parse_content_digest(v, sha);
    } else if (strcasecmp(name, "Content-Type") == 0) {
        (void)gj_http_is_json_type(v);
    } else if (strcasecmp(name, "Content-Length") == 0) {
        (void)gj_http_parse_u64(v, strlen(v), &u);
    } else {
        check_base64(v, 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    /* blob sizes a Range meets: empty, small, and the largest */
    static const uint64_t sizes[] = { 0, 1, 4096, UINT64_MAX };
    uint64_t blob = sizes[size % 4];
    char *line = text, *next = strchr(line, '\n');
    if (next)
        *next++ = '\0';
    char *sp = strchr(line, ' ');
    if (sp) {
        *sp = '\0';
        char *target = sp + 1, *q = strchr(target, '?');
        if (q)
            *q++ = '\0';
        char allow[128];
        if (!gj_http_has_control(target, decode(target)))   /* else 400, never routed */
            (void)route(line, target, allow, sizeof allow);
        for (char *kv = q ? strtok(q, "&") : NULL; kv; kv = strtok(NULL, "&"))
            query_param(kv);
    }
    for (line = next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        *colon = '\0';
        const char *v = colon + 1;
        while (*v == ' ')
            v++;
        header(line, v, blob);
    }
    free(text);
    return 0;
}
