/*
 * blob_s3.h — the blob store's S3 half (issue 30): blobs as objects of one bucket, their
 * metadata in the blobs table as for large objects (blobstore.h is the API callers use).
 *
 * An upload streams into a multipart upload: one part is filled while up to three others are
 * sent, each on a connection and thread of its own with its SHA-256. Parts are 8 MiB for the
 * first thousand, then twice as large every thousand more (capped at 5 GiB), so 10000 parts
 * reach 5 TiB while an upload below 8 GiB holds 32 MiB. A blob smaller than one part is one PUT. Before its first byte an upload's key is recorded, on a
 * connection of its own, in blob_objects_unowned (migration 0018), and the commit that inserts
 * the blob removes that row in the same transaction: an upload whose transaction never
 * commits leaves the row, and gj_blob_s3_maintain deletes its object. Deleted blobs' keys
 * land there by trigger, whichever path deleted them.
 */
#ifndef GJ_BLOB_S3_H
#define GJ_BLOB_S3_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <libpq-fe.h>

#include "service/db/s3_client.h"

#define GJ_BLOB_S3_KEY_MAX 128

/* From now on blobs in s3 can be read and, with writes, new blobs go there (s3 is kept, not
 * copied: it outlives every blob call). db_url: the database for the upload records' own
 * connection. 0 or -1. */
int gj_blobstore_use_s3(const struct gj_s3 *s3, const char *db_url, int writes);
/* Back to large objects for new blobs (tests); closes the records' connection. */
void gj_blobstore_use_postgres(void);
/* The store new blobs go to, or NULL for PostgreSQL. */
const struct gj_s3 *gj_blobstore_s3(void);

/* Whether the store answered lately: 1 yes (or no store); 0 with why after a call found it
 * unreachable, until one succeeds. For /readyz and for uploads' 503. */
int gj_blobstore_health(char *why, size_t why_size);
/* 1 when the calling thread's last blob call failed because the store was unreachable (the
 * answer is then 503 with Retry-After, not 500). Each writer or reader opened clears it, as
 * does reading it with clear = 1 (the answer that told the client). */
int gj_blobstore_unreachable(int clear);
/* Asks the store now (/readyz): 1 it answers (or there is none); 0 with why. */
int gj_blobstore_probe(char *why, size_t why_size);

struct gj_blob_s3w;
struct gj_blob_s3w *gj_blob_s3w_open(const char *tenant_id, const char *content_type);
/* The same for a model's file (model_store.h): a key under blobs/models/, whose row is a
 * model_files row rather than a blob's. */
struct gj_blob_s3w *gj_blob_s3w_open_model_file(void);
int gj_blob_s3w_write(struct gj_blob_s3w *w, const void *data, size_t len);
/* Room to read into directly (write_fd): *room bytes at the returned pointer; then
 * gj_blob_s3w_wrote(n) with what was put there. */
unsigned char *gj_blob_s3w_room(struct gj_blob_s3w *w, size_t *room);
int gj_blob_s3w_wrote(struct gj_blob_s3w *w, size_t n);
/* Sends what is left and makes the object (completes the upload). 0 or -1. */
int gj_blob_s3w_finish(struct gj_blob_s3w *w);
const char *gj_blob_s3w_key(const struct gj_blob_s3w *w);
/* Aborts the upload or deletes the object made, then frees w. */
void gj_blob_s3w_abort(struct gj_blob_s3w *w);
void gj_blob_s3w_free(struct gj_blob_s3w *w);

/* Reading [offset, offset+len) through a window of a few MiB (one ranged GET per window). */
struct gj_blob_s3r;
/* NULL when the object is missing (*missing = 1) or the store is unreachable. */
struct gj_blob_s3r *gj_blob_s3r_open(const char *key, uint64_t size, int *missing);
long gj_blob_s3r_read(struct gj_blob_s3r *r, uint64_t offset, void *buf, size_t len);
void gj_blob_s3r_close(struct gj_blob_s3r *r);
/* A presigned GET of key valid expires_s seconds (malloc'd), or NULL. */
char *gj_blob_s3_presign(const char *key, long expires_s, const char *content_disposition);
/* The whole object (size bytes) into the file at fd, from 16 MiB on in four ranges fetched at
 * once. 0, -1; *missing = 1 when the object is gone. */
int gj_blob_s3_export(const char *key, uint64_t size, int fd, int *missing);

/* The maintenance pass: deletes the objects recorded in blob_objects_unowned (deleted blobs
 * at once; uploads that never committed once older than upload_grace_s) and aborts the
 * store's multipart uploads under blobs/ begun more than upload_grace_s ago (a replica
 * killed mid-upload). Counts into *deleted and *aborted. 0, or -1 when the store or the
 * database failed (what was done stays done). */
int gj_blob_s3_maintain(PGconn *conn, long upload_grace_s, int *deleted, int *aborted);

#endif
