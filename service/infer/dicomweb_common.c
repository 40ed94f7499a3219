/*
 * dicomweb_common.c — what the DICOMweb routes share (STOW, QIDO, WADO): DICOM JSON
 * attributes (PS3.18 Annex F), the base URL their Retrieve URLs start with, and
 * Accept negotiation (406 for a media type a route cannot serve).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "service/infer/infer.h"

json_t *gj_dcm_attr(const char *vr, json_t *value)
{
    json_t *o = json_pack("{s:s}", "vr", vr);
    if (o && value)
        json_object_set_new(o, "Value", json_is_array(value) ? value : json_pack("[o]", value));
    else
        json_decref(value);
    return o;
}

/* A Host header fit to put in a URL: letters, digits and . - : [ ]. */
static int host_ok(const char *h)
{
    size_t n = h ? strlen(h) : 0;
    if (n == 0 || n > 255)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr(".-:[]", c)))
            return 0;
    }
    return 1;
}

int gj_dicomweb_base_url(struct gj_req *r, char *buf, size_t size)
{
    const char *host = gj_req_header(r, MHD_HTTP_HEADER_HOST);
    if (!host_ok(host))
        return -1;
    int n = snprintf(buf, size, "%s://%s/dicomweb", r->srv->cfg.insecure_http ? "http" : "https", host);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

/* One media range of an Accept header (RFC 9110 §12.5.1) against type: 1 when it
 * covers it (any type, the type's whole family, or the type itself; parameters other than q=0
 * ignored). */
static int range_covers(const char *range, size_t len, const char *type)
{
    while (len && (*range == ' ' || *range == '\t'))
        range++, len--;
    const char *semi = memchr(range, ';', len);
    size_t tl = semi ? (size_t)(semi - range) : len;
    while (tl && (range[tl - 1] == ' ' || range[tl - 1] == '\t'))
        tl--;
    for (const char *p = semi; p; p = memchr(p + 1, ';', (size_t)(range + len - p - 1))) {
        const char *v = p + 1;
        while (v < range + len && (*v == ' ' || *v == '\t'))
            v++;
        if (range + len - v >= 2 && (v[0] == 'q' || v[0] == 'Q') && v[1] == '=' && strtod(v + 2, NULL) == 0.0)
            return 0;     /* q=0: not acceptable */
    }
    const char *slash = strchr(type, '/');
    if ((tl == 3 && strncmp(range, "*/*", 3) == 0) ||
        (tl == strlen(type) && strncasecmp(range, type, tl) == 0))
        return 1;
    return slash && tl == (size_t)(slash - type) + 2 && strncasecmp(range, type, tl - 1) == 0 && range[tl - 1] == '*';
}

const char *gj_dicomweb_negotiate(struct gj_req *r, const char *const *types)
{
    const char *accept = gj_req_header(r, MHD_HTTP_HEADER_ACCEPT);
    if (!accept || !*accept)
        return types[0];
    for (const char *p = accept; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        for (size_t i = 0; types[i]; i++)
            if (range_covers(p, len, types[i]))
                return types[i];
        p += len + (comma != NULL);
    }
    return NULL;
}
