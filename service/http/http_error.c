/*
 * http_error.c — a struct gj_error answered as HTTP: the one conversion at the edge of the
 * routes (http_server.h).
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/gj_error.h"
#include "service/http/http_server.h"

struct MHD_Response *gj_respond_error(struct gj_req *r, const struct gj_error *err)
{
    if (err->status == 503)
        return gj_respond_unavailable(r);
    if (err->status == 404)     /* one answer whether it is another tenant's or none at all */
        return gj_respond_not_found(r);
    return gj_problem(r, err->status ? err->status : 422, err->field, "%s", err->message);
}

struct MHD_Response *gj_respond_lookup_failed(struct gj_req *r, int rc)
{
    return rc < 0 ? gj_respond_unavailable(r) : gj_respond_not_found(r);
}

struct MHD_Response *gj_respond_error_with(struct gj_req *r, const struct gj_error *err, json_t *members)
{
    int status = err->status ? err->status : 422;
    char *text = members && status != 503 && status != 404 ? gj_problem_text(r, status, err->field, err->message)
                                                            : NULL;
    json_t *o = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    text = NULL;
    if (json_is_object(o) && json_object_update(o, members) == 0)
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    json_decref(members);
    if (!text)   /* no members to add, another error shape under this path, or no memory */
        return gj_respond_error(r, err);
    size_t len = strlen(text);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return gj_respond_error(r, err);
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, gj_problem_content_type(r));
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return gj_respond(r, status, resp, len);
}
