/*
 * blob_janitor.h — the object store's maintenance pass (gj_blob_s3_maintain, blob_s3.h) run
 * every interval on a thread of its own, by every replica (each pass is idempotent): objects no
 * blob owns are deleted and multipart uploads left by a killed replica are aborted.
 */
#ifndef GJ_BLOB_JANITOR_H
#define GJ_BLOB_JANITOR_H

struct gj_db_pool;
struct gj_blob_janitor;

/* Started where an object store is configured. NULL when the thread could not start. */
struct gj_blob_janitor *gj_blob_janitor_start(struct gj_db_pool *pool, int interval_s, long upload_grace_s);
void gj_blob_janitor_stop(struct gj_blob_janitor *j);

#endif
