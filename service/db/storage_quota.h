/*
 * storage_quota.h — per-tenant storage quotas (issue 28). A tenant's bytes are its blobs'
 * sizes, counted by trigger into tenant_storage (migrations/0015); every blob is checked as
 * it is committed (blobstore.c), under the tenant's tenant_storage row lock, so two uploads
 * of one tenant cannot both pass. The quota: the tenant's own (tenants.storage_quota_bytes),
 * else --tenant-storage-quota; 0 is none.
 */
#ifndef GJ_STORAGE_QUOTA_H
#define GJ_STORAGE_QUOTA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <libpq-fe.h>

/* Why a blob was refused: the figures a 507 names. */
struct gj_storage_refusal {
    uint64_t used;    /* bytes the tenant stores now */
    uint64_t asked;   /* bytes the refused blob would add */
    uint64_t quota;
    int own;          /* 1: the tenant's own quota; 0: --tenant-storage-quota */
};

/* The server's default (--tenant-storage-quota); set once before serving. */
void gj_storage_quota_configure(uint64_t default_quota);
uint64_t gj_storage_quota_default(void);

/* Inside the transaction that is about to insert a blob of asked bytes for tenant: locks
 * the tenant's count until that transaction ends and checks. 0 within the quota, 1 over
 * (refusal filled), -1 database error. */
int gj_storage_quota_reserve(PGconn *conn, const char *tenant, uint64_t asked, struct gj_storage_refusal *refusal);

/* An unlocked look before work that the commit's check would refuse anyway (a body's
 * Content-Length, a job's outputs): 1 and refusal filled when asked more would pass the
 * quota now; 0 not (or no such tenant); -1 database error. */
int gj_storage_would_pass(PGconn *conn, const char *tenant, uint64_t asked, struct gj_storage_refusal *refusal);

/* The last refusal of gj_blob_writer_commit on this thread (GJ_BLOB_OVER_QUOTA).
 * gj_storage_refused: 1 when there was one since gj_storage_forget_refusal (for callers
 * whose callees only say -1). */
const struct gj_storage_refusal *gj_storage_last_refusal(void);
void gj_storage_set_last_refusal(const struct gj_storage_refusal *refusal);
void gj_storage_forget_refusal(void);
int gj_storage_refused(void);

/* A tenant's figures: used bytes, its own quota (-1: none set) and the one that applies. 1, 0
 * no such tenant, -1 database error. */
int gj_storage_usage(PGconn *conn, const char *tenant, uint64_t *used, int64_t *own_quota, uint64_t *quota);

/* "storage quota exceeded: --tenant-storage-quota of Q bytes, U bytes in use, A more asked" */
void gj_storage_refusal_text(const struct gj_storage_refusal *f, char *buf, size_t n);

/* gpujobd_tenant_storage_bytes and gpujobd_tenant_storage_quota_bytes (0: none) by tenant
 * id (not name: the metrics listener answers without a key). 0 or -1. */
int gj_storage_write_metrics(PGconn *conn, FILE *f);

#endif
