/*
 * storage_quota_http.c — the storage quota's answers over HTTP (declared in http_server.h):
 * kept apart from storage_quota.c, which the blob store calls, so the data layer does not
 * depend on the HTTP server.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "service/http/http_parse.h"
#include "service/http/http_server.h"
#include "service/db/storage_quota.h"

void gj_respond_over_quota(struct gj_req *r, const struct gj_storage_refusal *f)
{
    char quota[300], detail[330];
    gj_storage_refusal_text(f, quota, sizeof quota);
    snprintf(detail, sizeof detail, "%s; nothing was stored", quota);
    char *text = gj_problem_text(r, 507, NULL, detail);
    json_t *o = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (!json_is_object(o)) {   /* another error shape under this path: as it renders */
        json_decref(o);
        gj_problem(r, 507, NULL, "%s", detail);
        return;
    }
    json_object_set_new(o, "quota", json_string(f->own ? "tenant" : "--tenant-storage-quota"));
    json_object_set_new(o, "quota_bytes", json_integer((json_int_t)f->quota));
    json_object_set_new(o, "used_bytes", json_integer((json_int_t)f->used));
    json_object_set_new(o, "requested_bytes", json_integer((json_int_t)f->asked));
    text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!text) {
        gj_problem(r, 507, NULL, "%s", detail);
        return;
    }
    size_t len = strlen(text);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        gj_problem(r, 507, NULL, "%s", detail);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, gj_problem_content_type(r));
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    gj_respond(r, 507, resp, len);
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
