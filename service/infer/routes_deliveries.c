/*
 * routes_deliveries.c — GET /v1/jobs/{id}/deliveries: where each Structured Report of
 * the tenant's `infer` job stands in its delivery to --results-dicomweb-url (delivery.c):
 * pending (with the attempts so far, the last error and the next try) or delivered.
 * Another tenant's job, or an unknown one, is a 404; a job without reports (or a server
 * without --results-dicomweb-url when it succeeded) has an empty list.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "service/db/db.h"
#include "service/jobs/job_store.h"
#include "service/infer/infer.h"

#define TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

static int uuid_text(const char *s)
{
    if (strlen(s) != 36)
        return 0;
    for (int i = 0; i < 36; i++)
        if (i == 8 || i == 13 || i == 18 || i == 23 ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

static json_t *text_or_null(PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? json_null() : json_string(PQgetvalue(res, row, col));
}

static void deliveries_list(struct gj_req *r)
{
    if (!uuid_text(r->params[0])) {
        gj_problem(r, 404, NULL, "no such job");
        return;
    }
    PGconn *c = gj_req_db(r);
    if (!c) {
        gj_respond_unavailable(r);
        return;
    }
    struct gj_job_status st;
    struct gj_error err;
    if (gj_job_status_read(c, r->who.tenant_id, r->params[0], 0, &st, &err) != 0) {
        if (err.status == 404)
            gj_problem(r, 404, NULL, "no such job");
        else
            gj_respond_error(r, &err);
        return;
    }
    const char *p[1] = { r->params[0] };
    PGresult *res = gj_db_exec(c,
                               "SELECT d.output_name, d.state, d.attempts, d.last_status, d.last_error, "
                               TS("d.next_attempt_at") ", " TS("d.delivered_at")
                               " FROM report_deliveries d WHERE d.job_id = $1::uuid ORDER BY d.id",
                               1, p, NULL);
    if (!res) {
        gj_respond_unavailable(r);
        return;
    }
    json_t *arr = json_array();
    for (int i = 0; i < PQntuples(res); i++) {
        int delivered = strcmp(PQgetvalue(res, i, 1), "delivered") == 0;
        json_array_append_new(arr, json_pack("{s:s, s:s, s:i, s:o, s:o, s:o, s:o}", "output",
                                             PQgetvalue(res, i, 0), "state", PQgetvalue(res, i, 1), "attempts",
                                             atoi(PQgetvalue(res, i, 2)), "last_status",
                                             PQgetisnull(res, i, 3) ? json_null()
                                                                    : json_integer(atoi(PQgetvalue(res, i, 3))),
                                             "last_error", text_or_null(res, i, 4), "next_attempt_at",
                                             delivered ? json_null() : text_or_null(res, i, 5), "delivered_at",
                                             text_or_null(res, i, 6)));
    }
    PQclear(res);
    gj_respond_json(r, 200, json_pack("{s:o}", "deliveries", arr));
}

static const struct gj_route delivery_routes[] = {
    { "GET", "/v1/jobs/{id}/deliveries", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, deliveries_list, NULL },
};
const struct gj_route_table gj_infer_routes_deliveries = { delivery_routes,
                                                           sizeof delivery_routes / sizeof delivery_routes[0] };
