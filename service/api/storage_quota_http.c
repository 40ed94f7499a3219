/*
 * storage_quota_http.c — the storage quota's answers over HTTP (declared in http_server.h):
 * kept apart from storage_quota.c, which the blob store calls, so the data layer does not
 * depend on the HTTP server.
 */
#include <string.h>

#include <jansson.h>

#include "common/gj_error.h"
#include "service/http/http_parse.h"
#include "service/http/http_server.h"
#include "service/db/storage_quota.h"

void gj_respond_over_quota(struct gj_req *r, const struct gj_storage_refusal *f)
{
    char quota[300];
    struct gj_error err;
    gj_storage_refusal_text(f, quota, sizeof quota);
    gj_error_status(&err, 507, "", "%s; nothing was stored", quota);
    json_t *figures = json_pack("{s:s, s:I, s:I, s:I}", "quota", f->own ? "tenant" : "--tenant-storage-quota",
                                "quota_bytes", (json_int_t)f->quota, "used_bytes", (json_int_t)f->used,
                                "requested_bytes", (json_int_t)f->asked);
    gj_respond_error_with(r, &err, figures);
}

int gj_storage_refuse_declared(struct gj_req *r)
{
    const char *cl = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    uint64_t declared;
    if (!cl || gj_http_parse_u64(cl, strlen(cl), &declared) != 0)
        return 0;
    PGconn *c = gj_req_db(r);
    struct gj_storage_refusal f;
    if (!c || gj_storage_would_pass(c, r->who.tenant_id, declared, &f) != 1)
        return 0;   /* the commit's check still holds */
    gj_respond_over_quota(r, &f);
    return 1;
}
