/*
 * dicomweb_common.c — what the DICOMweb routes share (STOW, QIDO, WADO): DICOM JSON
 * attributes (PS3.18 Annex F), the base URL their Retrieve URLs start with,
 * Accept negotiation (406 for a media type a route cannot serve), JSON answers, and
 * the instances under a WADO-RS path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "service/db/db.h"
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

/* The value of parameter name in a media range's parameters ([params, end)), quotes
 * dropped, into out; 1 found, 0 not. */
static int range_param(const char *params, const char *end, const char *name, char *out, size_t size)
{
    size_t nl = strlen(name);
    for (const char *p = params; p && p < end; p = memchr(p + 1, ';', (size_t)(end - p - 1))) {
        const char *v = p + 1;
        while (v < end && (*v == ' ' || *v == '\t'))
            v++;
        if ((size_t)(end - v) <= nl || strncasecmp(v, name, nl) != 0 || v[nl] != '=')
            continue;
        v += nl + 1;
        const char *e = v;
        while (e < end && *e != ';')
            e++;
        while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (e - v >= 2 && *v == '"' && e[-1] == '"')
            v++, e--;
        snprintf(out, size, "%.*s", (int)(e - v), v);
        return 1;
    }
    return 0;
}

/* One media range of an Accept header (RFC 9110 §12.5.1) against type: 1 when it
 * covers it (any type, the type's whole family, or the type itself) with q above 0 and,
 * when type_param is given, a "type" parameter that is absent or equal to it. */
static int range_covers(const char *range, size_t len, const char *type, const char *type_param)
{
    while (len && (*range == ' ' || *range == '\t'))
        range++, len--;
    const char *end = range + len, *semi = memchr(range, ';', len);
    size_t tl = semi ? (size_t)(semi - range) : len;
    while (tl && (range[tl - 1] == ' ' || range[tl - 1] == '\t'))
        tl--;
    char v[100];
    if (semi && range_param(semi, end, "q", v, sizeof v) && strtod(v, NULL) == 0.0)
        return 0;     /* q=0: not acceptable */
    if (type_param && semi && range_param(semi, end, "type", v, sizeof v) && strcasecmp(v, type_param) != 0)
        return 0;
    const char *slash = strchr(type, '/');
    if ((tl == 3 && strncmp(range, "*/*", 3) == 0) || (tl == strlen(type) && strncasecmp(range, type, tl) == 0))
        return 1;
    return slash && tl == (size_t)(slash - type) + 2 && strncasecmp(range, type, tl - 1) == 0 && range[tl - 1] == '*';
}

/* Calls range_covers on each range of the Accept header until one covers type. */
static int accept_covers(const char *accept, const char *type, const char *type_param)
{
    for (const char *p = accept; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (range_covers(p, len, type, type_param))
            return 1;
        p += len + (comma != NULL);
    }
    return 0;
}

const char *gj_dicomweb_negotiate(struct gj_req *r, const char *const *types)
{
    const char *accept = gj_req_header(r, MHD_HTTP_HEADER_ACCEPT);
    if (!accept || !*accept)
        return types[0];
    for (size_t i = 0; types[i]; i++)
        if (accept_covers(accept, types[i], NULL))
            return types[i];
    return NULL;
}

int gj_dicomweb_accepts(struct gj_req *r, const char *type, const char *type_param)
{
    const char *accept = gj_req_header(r, MHD_HTTP_HEADER_ACCEPT);
    return !accept || !*accept || accept_covers(accept, type, type_param);
}

struct MHD_Response *gj_dicomweb_respond_json(struct gj_req *r, json_t *list, const char *type)
{
    struct MHD_Response *resp = gj_respond_json(r, 200, list);
    if (!resp || r->status != 200)
        return NULL;
    MHD_del_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return resp;
}

PGresult *gj_dicomweb_instances_under(struct gj_req *r, PGconn *c, int max)
{
    const char *p[5] = { r->who.tenant_id, r->params[0], r->n_params > 1 ? r->params[1] : NULL,
                         r->n_params > 2 ? r->params[2] : NULL, NULL };
    char limit[16];
    snprintf(limit, sizeof limit, "%d", max + 1);
    p[4] = limit;
    return gj_db_exec(c,
                      "SELECT b.id, b.size FROM dicom_instances d JOIN blobs b ON b.id = d.blob_id"
                      " WHERE d.tenant_id = $1::uuid AND d.study_uid = $2"
                      " AND ($3::text IS NULL OR d.series_uid = $3) AND ($4::text IS NULL OR d.sop_uid = $4)"
                      " ORDER BY d.id LIMIT $5::integer",
                      5, p, NULL);
}

int gj_dicomweb_path_uids_ok(struct gj_req *r)
{
    for (int i = 0; i < r->n_params; i++)
        if (!gj_infer_uid_ok(r->params[i])) {
            gj_problem(r, 400, NULL, "the path holds UIDs (digits and dots, at most 64)");
            return 0;
        }
    return 1;
}

PGresult *gj_dicomweb_find_instances(struct gj_req *r, PGconn *c, int max, const char *narrower)
{
    PGresult *res = gj_dicomweb_instances_under(r, c, max);
    if (!res) {
        gj_respond_unavailable(r);
    } else if (PQntuples(res) == 0) {
        PQclear(res);
        res = NULL;
        gj_respond_not_found(r);
    } else if (PQntuples(res) > max) {
        PQclear(res);
        res = NULL;
        gj_problem(r, 413, NULL, "more than %d instances: %s", max, narrower);
    }
    return res;
}
