/*
 * routes_tenants.c — tenants' storage (storage_quota.h): the admin lists tenants with what
 * they store and sets or clears a tenant's own quota; a tenant reads its own figures.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "service/db/db.h"
#include "service/http/http_server.h"
#include "service/server.h"
#include "service/db/storage_quota.h"
#include "service/base/uuid.h"

/* {used_bytes, quota_bytes (0: none), quota: "tenant" | "--tenant-storage-quota"} */
static json_t *storage_json(uint64_t used, int64_t own_quota, uint64_t quota)
{
    return json_pack("{s:I, s:I, s:s}", "used_bytes", (json_int_t)used, "quota_bytes", (json_int_t)quota, "quota",
                     own_quota >= 0 ? "tenant" : "--tenant-storage-quota");
}

/* Answers a tenant's figures (200), 404 or 503. */
static void respond_storage(struct gj_req *r, PGconn *c, const char *tenant)
{
    uint64_t used, quota;
    int64_t own;
    int rc = gj_storage_usage(c, tenant, &used, &own, &quota);
    if (rc < 0)
        gj_respond_unavailable(r);
    else if (rc == 0)
        gj_respond_not_found(r);
    else
        gj_respond_json(r, 200, json_pack("{s:s, s:o}", "tenant_id", tenant, "storage",
                                          storage_json(used, own, quota)));
}

/* GET /v1/usage: the caller's tenant. */
static void usage(struct gj_req *r)
{
    PGconn *c = gj_req_db(r);
    if (!c) {
        gj_respond_unavailable(r);
        return;
    }
    respond_storage(r, c, r->who.tenant_id);
}

/* GET /v1/tenants (admin): every tenant with its storage. */
static void list_tenants(struct gj_req *r)
{
    PGconn *c = gj_req_db(r);
    PGresult *res = c ? gj_db_exec(c,
        "SELECT t.id, t.name, coalesce(s.used_bytes, 0), t.storage_quota_bytes FROM tenants t"
        " LEFT JOIN tenant_storage s ON s.tenant_id = t.id ORDER BY t.name", 0, NULL, NULL) : NULL;
    if (!res) {
        gj_respond_unavailable(r);
        return;
    }
    uint64_t fallback = gj_storage_quota_default();
    json_t *arr = json_array();
    for (int i = 0; i < PQntuples(res); i++) {
        int64_t own = PQgetisnull(res, i, 3) ? -1 : strtoll(PQgetvalue(res, i, 3), NULL, 10);
        long long used = strtoll(PQgetvalue(res, i, 2), NULL, 10);
        json_array_append_new(arr, json_pack("{s:s, s:s, s:o}", "id", PQgetvalue(res, i, 0), "name",
                                             PQgetvalue(res, i, 1), "storage",
                                             storage_json(used > 0 ? (uint64_t)used : 0, own,
                                                          own >= 0 ? (uint64_t)own : fallback)));
    }
    PQclear(res);
    gj_respond_json(r, 200, json_pack("{s:o, s:I}", "tenants", arr, "default_storage_quota_bytes",
                                      (json_int_t)fallback));
}

/* PUT /v1/tenants/{id}/storage-quota (admin): {"quota_bytes": N} sets the tenant's own quota
 * (0: none), {"quota_bytes": null} gives it back to --tenant-storage-quota. Bytes stored
 * already stay when a quota is lowered below them; the tenant's next blob is refused. */
static void set_quota(struct gj_req *r)
{
    json_t *b = r->json, *q = json_is_object(b) ? json_object_get(b, "quota_bytes") : NULL;
    if (!q || json_object_size(b) != 1 || !(json_is_null(q) || (json_is_integer(q) && json_integer_value(q) >= 0))) {
        gj_problem(r, 422, "quota_bytes", "the body must be {\"quota_bytes\": N} with N bytes (0: no quota), "
                                          "or null for the server's --tenant-storage-quota");
        return;
    }
    if (!gj_is_uuid(r->params[0])) {
        gj_respond_not_found(r);
        return;
    }
    PGconn *c = gj_req_db(r);
    if (!c) {
        gj_respond_unavailable(r);
        return;
    }
    char n[24];
    snprintf(n, sizeof n, "%lld", json_is_null(q) ? 0LL : (long long)json_integer_value(q));
    const char *p[2] = { r->params[0], json_is_null(q) ? NULL : n };
    PGresult *res = gj_db_exec(c, "UPDATE tenants SET storage_quota_bytes = $2::bigint WHERE id = $1::uuid", 2, p,
                               NULL);
    if (!res) {
        gj_respond_unavailable(r);
        return;
    }
    int found = atoi(PQcmdTuples(res)) > 0;
    PQclear(res);
    if (!found) {
        gj_respond_not_found(r);
        return;
    }
    respond_storage(r, c, r->params[0]);
}

static const struct gj_route tenant_routes[] = {
    { "GET", "/v1/usage", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, usage, NULL },
    { "GET", "/v1/tenants", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, list_tenants, NULL },
    { "PUT", "/v1/tenants/{id}/storage-quota", GJ_AUTH_ADMIN, GJ_BODY_JSON, NULL, NULL, set_quota, NULL },
};
const struct gj_route_table gj_routes_tenants = { tenant_routes, sizeof tenant_routes / sizeof tenant_routes[0] };
