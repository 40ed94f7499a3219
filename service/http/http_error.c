/*
 * http_error.c — a struct gj_error answered as HTTP: the one conversion at the edge of the
 * routes (http_server.h).
 */
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
