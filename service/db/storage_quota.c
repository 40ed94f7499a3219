/*
 * storage_quota.c — per-tenant storage quotas (storage_quota.h).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "service/db/db.h"
#include "service/db/storage_quota.h"

static _Atomic uint64_t default_quota;
static _Thread_local struct gj_storage_refusal last_refusal;

void gj_storage_quota_configure(uint64_t quota)
{
    atomic_store(&default_quota, quota);
}

uint64_t gj_storage_quota_default(void)
{
    return atomic_load(&default_quota);
}

/* The quota that applies: the tenant's own column (NULL: the server's). */
static uint64_t applying_quota_at(PGresult *res, int row, int col, int *own)
{
    *own = !PQgetisnull(res, row, col);
    return *own ? strtoull(PQgetvalue(res, row, col), NULL, 10) : atomic_load(&default_quota);
}

static uint64_t applying_quota(PGresult *res, int col, int *own)
{
    return applying_quota_at(res, 0, col, own);
}

/* 1 when f's asked bytes fit beside its used ones (or there is no quota). */
static int fits(const struct gj_storage_refusal *f)
{
    return f->quota == 0 || (f->used <= f->quota && f->asked <= f->quota - f->used);
}

/* The upsert takes the tenant's row lock (kept to the transaction's end) and returns the
 * count as the last committed writer left it: the blob's own insert (its trigger) then
 * adds to a row no one else can change meanwhile. */
static const char reserve_sql[] =
    "WITH s AS (INSERT INTO tenant_storage AS s (tenant_id) VALUES ($1::uuid)"
    "           ON CONFLICT (tenant_id) DO UPDATE SET used_bytes = s.used_bytes RETURNING used_bytes)"
    " SELECT s.used_bytes, t.storage_quota_bytes FROM s JOIN tenants t ON t.id = $1::uuid";

int gj_storage_quota_reserve(PGconn *conn, const char *tenant, uint64_t asked, struct gj_storage_refusal *refusal)
{
    const char *p[1] = { tenant };
    PGresult *res = gj_db_exec(conn, reserve_sql, 1, p, NULL);
    if (!res)
        return -1;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return -1;
    }
    long long used = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    struct gj_storage_refusal f = { .used = used > 0 ? (uint64_t)used : 0, .asked = asked };
    f.quota = applying_quota(res, 1, &f.own);
    PQclear(res);
    if (fits(&f))
        return 0;
    *refusal = f;
    return 1;
}

const struct gj_storage_refusal *gj_storage_last_refusal(void)
{
    return &last_refusal;
}

void gj_storage_set_last_refusal(const struct gj_storage_refusal *refusal)
{
    last_refusal = *refusal;
}

void gj_storage_forget_refusal(void)
{
    memset(&last_refusal, 0, sizeof last_refusal);
}

int gj_storage_refused(void)
{
    return last_refusal.quota != 0;   /* a refusal always has a quota */
}

int gj_storage_usage(PGconn *conn, const char *tenant, uint64_t *used, int64_t *own_quota, uint64_t *quota)
{
    const char *p[1] = { tenant };
    PGresult *res = gj_db_exec(conn,
                               "SELECT coalesce(s.used_bytes, 0), t.storage_quota_bytes FROM tenants t"
                               " LEFT JOIN tenant_storage s ON s.tenant_id = t.id WHERE t.id = $1::uuid",
                               1, p, NULL);
    if (!res)
        return -1;
    if (PQntuples(res) == 0) {
        PQclear(res);
        return 0;
    }
    long long u = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    *used = u > 0 ? (uint64_t)u : 0;
    int own;
    *quota = applying_quota(res, 1, &own);
    *own_quota = own ? (int64_t)*quota : -1;
    PQclear(res);
    return 1;
}

void gj_storage_refusal_text(const struct gj_storage_refusal *f, char *buf, size_t n)
{
    snprintf(buf, n,
             "storage quota exceeded: %s of %" PRIu64 " bytes, %" PRIu64 " bytes in use, %" PRIu64
             " more asked",
             f->own ? "the tenant's storage quota" : "--tenant-storage-quota", f->quota, f->used, f->asked);
}

int gj_storage_write_metrics(PGconn *conn, FILE *f)
{
    PGresult *res = gj_db_exec(conn,
                               "SELECT t.id, coalesce(s.used_bytes, 0), t.storage_quota_bytes FROM tenants t"
                               " LEFT JOIN tenant_storage s ON s.tenant_id = t.id ORDER BY t.id",
                               0, NULL, NULL);
    if (!res)
        return -1;
    fputs("# HELP gpujobd_tenant_storage_bytes Bytes each tenant stores (blobs, outputs, CARMIN files, DICOM "
          "instances).\n# TYPE gpujobd_tenant_storage_bytes gauge\n", f);
    for (int i = 0; i < PQntuples(res); i++)
        fprintf(f, "gpujobd_tenant_storage_bytes{tenant=\"%s\"} %s\n", PQgetvalue(res, i, 0),
                PQgetvalue(res, i, 1));
    fputs("# HELP gpujobd_tenant_storage_quota_bytes Each tenant's storage quota (0: none).\n"
          "# TYPE gpujobd_tenant_storage_quota_bytes gauge\n", f);
    for (int i = 0; i < PQntuples(res); i++) {
        int own;
        fprintf(f, "gpujobd_tenant_storage_quota_bytes{tenant=\"%s\"} %" PRIu64 "\n", PQgetvalue(res, i, 0),
                applying_quota_at(res, i, 2, &own));
    }
    PQclear(res);
    return 0;
}

int gj_storage_would_pass(PGconn *conn, const char *tenant, uint64_t asked, struct gj_storage_refusal *refusal)
{
    struct gj_storage_refusal f = { .asked = asked };
    int64_t own;
    int rc = gj_storage_usage(conn, tenant, &f.used, &own, &f.quota);
    if (rc != 1)
        return rc < 0 ? -1 : 0;
    f.own = own >= 0;
    if (fits(&f))
        return 0;
    *refusal = f;
    return 1;
}
