/*
 * blobstore.h — blobs as PostgreSQL large objects, written and read in chunks
 * so no payload is ever whole in memory (ARCHITECTURE.md: data model).
 *
 * A writer runs inside a transaction on a connection it borrows for its life:
 * nothing is visible until gj_blob_writer_commit(); abort (or a dropped
 * connection) leaves nothing behind.
 */
#ifndef GJ_BLOBSTORE_H
#define GJ_BLOBSTORE_H

#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "service/base/uuid.h"


struct gj_blob_writer;

/* Starts a blob for tenant on conn. own_txn=1: the writer issues BEGIN and
 * COMMIT/ROLLBACK itself; 0: the caller's transaction is used (job outputs,
 * multipart submits) and commit only inserts the row. */
struct gj_blob_writer *gj_blob_writer_open(PGconn *conn, const char *tenant_id,
                                           const char *content_type, int own_txn);
/* Appends data; -1 on database error. */
int gj_blob_writer_write(struct gj_blob_writer *w, const void *data, size_t len);
/* Appends everything fd has left to read (fd stays open). 0; -1 on database
 * error, as gj_blob_writer_write; or, when read() failed, its errno (> 0). */
int gj_blob_writer_write_fd(struct gj_blob_writer *w, int fd);
uint64_t gj_blob_writer_size(const struct gj_blob_writer *w);
/* The SHA-256 of what was written so far is final after this call: */
void gj_blob_writer_digest(struct gj_blob_writer *w, unsigned char sha256[32]);
/* Inserts the blobs row (owner_job may be NULL) and, with own_txn, commits.
 * id_out receives the new id (37 bytes). Frees w. 0 or -1; or GJ_BLOB_OVER_QUOTA when
 * the tenant's storage quota would be passed (storage_quota.h: the figures in
 * gj_storage_last_refusal()); the blob is discarded then, and without own_txn the
 * caller's transaction holds the tenant's quota lock until it ends. */
#define GJ_BLOB_OVER_QUOTA (-2)
int gj_blob_writer_commit(struct gj_blob_writer *w, const char *owner_job, char id_out[GJ_UUID_LEN + 1]);
/* Ends the writing (everything is in the large object; the writer keeps no buffer) for a
 * commit later: a caller storing many blobs in one transaction commits them all at its end,
 * so the tenant's quota lock (storage_quota.h) is held only from then. 0, or -1 (then abort). */
int gj_blob_writer_close(struct gj_blob_writer *w);
/* Discards everything written (rolls back with own_txn, else unlinks). Frees w. */
void gj_blob_writer_abort(struct gj_blob_writer *w);

struct gj_blob_info {
    char id[GJ_UUID_LEN + 1];
    char tenant_id[GJ_UUID_LEN + 1];
    uint64_t size;
    unsigned char sha256[32];
    char content_type[256];
    unsigned int lo_oid;       /* 0 for a blob in the object store */
    char s3_key[128];          /* "" for a large object */
};

/* Looks up a blob visible to tenant (NULL tenant: any). 1 found, 0 not, -1 error. */
int gj_blob_lookup(PGconn *conn, const char *tenant_id, const char *blob_id, struct gj_blob_info *info);

/* Reads [offset, offset+len) of a blob into buf; must run inside a transaction
 * (large object descriptors live in one). Returns bytes read or -1. */
struct gj_blob_reader;
struct gj_blob_reader *gj_blob_reader_open(PGconn *conn, unsigned int lo_oid);
/* A blob wherever it lives (a large object, or an object of the store: blob_s3.h). NULL when
 * it cannot be read; *missing (may be NULL) = 1 when its object is gone from the store (an
 * answer naming the blob, 410), and gj_blob_store_unreachable() says when the store did not
 * answer (503). */
struct gj_blob_reader *gj_blob_reader_open_blob(PGconn *conn, const struct gj_blob_info *info, int *missing);
/* The same by blob id (any tenant's: the caller has checked). */
struct gj_blob_reader *gj_blob_reader_open_id(PGconn *conn, const char *blob_id, int *missing);
long gj_blob_reader_read(struct gj_blob_reader *r, uint64_t offset, void *buf, size_t len);
void gj_blob_reader_close(struct gj_blob_reader *r);

/* Copies a blob into a file (worker materialization). On an idle connection it
 * runs in a transaction of its own; inside one, in the caller's. 0 or -1. */
int gj_blob_export(PGconn *conn, unsigned int lo_oid, const char *path);
/* The same for a blob wherever it lives; *missing as for gj_blob_reader_open_blob. */
int gj_blob_export_blob(PGconn *conn, const struct gj_blob_info *info, const char *path, int *missing);
/* The same by blob id (any tenant's: the caller has checked). */
int gj_blob_export_id(PGconn *conn, const char *blob_id, const char *path, int *missing);
/* 1 when this thread's last blob call failed because the object store did not answer;
 * clear = 1 forgets it (the answer that said so). */
int gj_blob_store_unreachable(int clear);
/* /readyz: 1 when blobs can be stored (always, on large objects); 0 with why. */
int gj_blob_store_ready(char *why, size_t why_size);

/* A short-lived URL that downloads a blob straight from the object store (a presigned GET,
 * expires_s seconds), or NULL for a large object. malloc'd. */
char *gj_blob_presigned_url(const struct gj_blob_info *info, long expires_s, const char *content_disposition);

/* A file stored for a row other than a blob's (a model's file, model_store.h), where new blobs
 * go: an object of the store (key; recorded as an upload in blob_objects_unowned until the
 * transaction that inserts the row deletes that record, as gj_blob_writer_commit's does), or
 * else a large object made in conn's open transaction (*lo_oid; key ""). 0 or -1 (logged;
 * gj_blob_store_unreachable() says when the store did not answer). */
int gj_blob_import_file(PGconn *conn, const char *path, unsigned int *lo_oid, char key[128]);

/* "sha-256=:BASE64:" style encodings used by Content-Digest and ETag. */
void gj_sha256_hex(const unsigned char sha256[32], char hex[65]);
void gj_sha256_base64(const unsigned char sha256[32], char b64[45]);

#endif
