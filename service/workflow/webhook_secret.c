/*
 * webhook_secret.c — the secret a tenant's callbacks are signed with (workflow.h): made at first
 * use, shown to the tenant by GET /v1/webhook-secret, replaced by POST /v1/webhook-secret (calls
 * made from then on, retries included, are signed with the new one).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/base/log.h"
#include "service/workflow/workflow.h"

#define COMPONENT "webhook"

static int random_hex(char hex[2 * GJ_WEBHOOK_SECRET_BYTES + 1])
{
    unsigned char b[GJ_WEBHOOK_SECRET_BYTES];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        gj_log_error(COMPONENT, "getrandom failed");
        return -1;
    }
    for (size_t i = 0; i < sizeof b; i++)
        snprintf(hex + 2 * i, 3, "%02x", b[i]);
    return 0;
}

static int unhex(const char *hex, unsigned char *out, size_t n)
{
    if (strlen(hex) != 2 * n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (unsigned char)v;
    }
    return 0;
}

/* insert = 0: the tenant's secret, made when it has none; 1: a new one in its place. */
static int secret_upsert(PGconn *conn, const char *tenant_id, int replace, unsigned char secret[GJ_WEBHOOK_SECRET_BYTES],
                         char created_at[40])
{
    char hex[2 * GJ_WEBHOOK_SECRET_BYTES + 1];
    if (random_hex(hex) != 0)
        return -1;
    const char *p[3] = { tenant_id, hex, replace ? "t" : "f" };
    for (int attempt = 0; attempt < 2; attempt++) {   /* a concurrent first use: read its row */
        PGresult *r = gj_db_exec(conn,
            "WITH up AS (INSERT INTO webhook_secrets (tenant_id, secret) VALUES ($1::uuid, decode($2, 'hex'))"
            "   ON CONFLICT (tenant_id) DO UPDATE SET secret = EXCLUDED.secret, created_at = now()"
            "   WHERE $3::boolean RETURNING secret, created_at)"
            " SELECT encode(secret, 'hex'), to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
            "   FROM up"
            " UNION ALL SELECT encode(secret, 'hex'), to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
            "   FROM webhook_secrets WHERE tenant_id = $1::uuid AND NOT EXISTS (SELECT 1 FROM up) LIMIT 1",
            3, p, NULL);
        if (!r)
            return -1;
        int found = PQntuples(r) == 1;
        int rc = found && unhex(PQgetvalue(r, 0, 0), secret, GJ_WEBHOOK_SECRET_BYTES) == 0 ? 1 : found ? -1 : 0;
        if (rc == 1 && created_at)
            snprintf(created_at, 40, "%s", PQgetvalue(r, 0, 1));
        PQclear(r);
        if (rc != 0)
            return rc;
    }
    return -1;
}

int gj_webhook_secret_get(PGconn *conn, const char *tenant_id, unsigned char secret[GJ_WEBHOOK_SECRET_BYTES])
{
    return secret_upsert(conn, tenant_id, 0, secret, NULL);
}

static void secret_route(struct gj_req *r)
{
    PGconn *c = gj_req_db(r);
    unsigned char secret[GJ_WEBHOOK_SECRET_BYTES];
    char created[40], text[GJ_WEBHOOK_SECRET_TEXT_MAX];
    if (!c || secret_upsert(c, r->who.tenant_id, r->method[0] == 'P', secret, created) != 1) {
        gj_respond_unavailable(r);
        return;
    }
    gj_webhook_secret_text(secret, sizeof secret, text);
    gj_respond_json(r, 200, json_pack("{s:s, s:s, s:s}", "secret", text, "created_at", created, "scheme",
                                      "Standard Webhooks v1: webhook-signature is \"v1,\" base64(HMAC-SHA256("
                                      "secret, webhook-id \".\" webhook-timestamp \".\" body))"));
}

static const struct gj_route secret_routes[] = {
    { "GET", "/v1/webhook-secret", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, secret_route, NULL },
    { "POST", "/v1/webhook-secret", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, secret_route, NULL },
};
const struct gj_route_table gj_routes_webhook_secret = { secret_routes,
                                                         sizeof secret_routes / sizeof secret_routes[0] };
