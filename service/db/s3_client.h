/*
 * s3_client.h — the few S3 calls the blob store makes (issue 30), over libcurl with AWS
 * Signature V4 (CURLOPT_AWS_SIGV4). libcurl 7.88 signs but leaves three things to us, each
 * measured against Swift's s3api and radosgw: the payload's SHA-256 goes in
 * x-amz-content-sha256 (computed here, or given by the caller who has it); query strings are
 * written in canonical form (sorted, "uploads="); a POST carries an explicit Content-Type.
 * The key and secret go in CURLOPT_USERNAME / CURLOPT_PASSWORD (Swift's keys hold a colon).
 * No message ever holds the secret, the access key or a signature.
 */
#ifndef GJ_S3_CLIENT_H
#define GJ_S3_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* What a call ends with. UNREACHABLE: no answer (connect, TLS, time-out, a 5xx): try later. */
enum {
    GJ_S3_OK = 0,
    GJ_S3_ERROR = -1,
    GJ_S3_NOT_FOUND = -2,
    GJ_S3_UNREACHABLE = -3,
    GJ_S3_PRECONDITION = -4,   /* If-Match / If-None-Match refused (412) */
};

struct gj_s3_config {
    const char *endpoint;      /* http(s)://host[:port], no path */
    const char *bucket;
    const char *region;        /* NULL: us-east-1 */
    int virtual_host;          /* 1: bucket.host/key; 0: host/bucket/key (path style) */
    const char *access_key;
    const char *secret_key;
    const char *ca_file;       /* NULL: the system's CAs */
    long timeout_s;            /* a call with no byte moving this long fails; 0: 60 */
};

struct gj_s3;                  /* the store: a copy of the configuration */
struct gj_s3_conn;             /* one caller's connection (a curl handle, reused); one thread */

/* Copies cfg (checked: endpoint http(s), bucket, keys). NULL with why. */
struct gj_s3 *gj_s3_new(const struct gj_s3_config *cfg, char *why, size_t why_size);
void gj_s3_free(struct gj_s3 *s3);
const char *gj_s3_bucket(const struct gj_s3 *s3);

struct gj_s3_conn *gj_s3_conn_new(const struct gj_s3 *s3);
void gj_s3_conn_free(struct gj_s3_conn *c);
/* The last call's failure, one line for a log (the store's error code and message). */
const char *gj_s3_conn_error(const struct gj_s3_conn *c);

/* PUT of a whole object (up to 5 GiB). sha256 NULL: computed here. */
int gj_s3_put(struct gj_s3_conn *c, const char *key, const void *data, size_t len,
              const unsigned char *sha256, const char *content_type);

/* Multipart upload: upload_id receives the store's id (up to 256 bytes). */
#define GJ_S3_UPLOAD_ID_MAX 256
#define GJ_S3_ETAG_MAX 80
int gj_s3_multipart_create(struct gj_s3_conn *c, const char *key, const char *content_type,
                           char upload_id[GJ_S3_UPLOAD_ID_MAX]);
/* Part n (1..10000) of data with its SHA-256 (NULL: computed here); etag receives the part's ETag. */
int gj_s3_multipart_part(struct gj_s3_conn *c, const char *key, const char *upload_id, int n,
                         const void *data, size_t len, const unsigned char *sha256,
                         char etag[GJ_S3_ETAG_MAX]);
/* Completes parts 1..nparts whose ETags are etags[0..nparts-1]. */
int gj_s3_multipart_complete(struct gj_s3_conn *c, const char *key, const char *upload_id,
                             const char (*etags)[GJ_S3_ETAG_MAX], int nparts);
int gj_s3_multipart_abort(struct gj_s3_conn *c, const char *key, const char *upload_id);
/* Calls fn for each multipart upload under prefix (key, upload id, when it began); fn returning
 * non-zero stops the listing. GJ_S3_OK or a failure. */
typedef int (*gj_s3_upload_fn)(const char *key, const char *upload_id, time_t initiated, void *arg);
int gj_s3_list_uploads(struct gj_s3_conn *c, const char *prefix, gj_s3_upload_fn fn, void *arg);

/* Calls fn for each object under prefix (key, size); fn returning non-zero stops. */
typedef int (*gj_s3_object_fn)(const char *key, uint64_t size, void *arg);
int gj_s3_list_objects(struct gj_s3_conn *c, const char *prefix, gj_s3_object_fn fn, void *arg);

/* GET of [offset, offset+len) (len 0: to the end), each piece of the body passed to sink (which
 * returns 0, or non-zero to stop: GJ_S3_ERROR then). if_match: NULL, or an ETag the object must
 * have. *total (may be NULL) receives the object's size when the store says it. */
typedef int (*gj_s3_sink_fn)(const void *data, size_t len, void *arg);
int gj_s3_get(struct gj_s3_conn *c, const char *key, uint64_t offset, uint64_t len, const char *if_match,
              gj_s3_sink_fn sink, void *arg, uint64_t *total);
/* HEAD: size and ETag (etag may be NULL). */
int gj_s3_head(struct gj_s3_conn *c, const char *key, uint64_t *size, char etag[GJ_S3_ETAG_MAX]);
/* DELETE (an absent key is success, as S3 answers). */
int gj_s3_delete(struct gj_s3_conn *c, const char *key);

/* A presigned GET URL (query-string SigV4) valid expires_s seconds from now (1..604800);
 * response_content_disposition may be NULL. A malloc'd string, or NULL. */
char *gj_s3_presign_get(const struct gj_s3 *s3, const char *key, long expires_s, time_t now,
                        const char *response_content_disposition);

/* The AWS shared-credentials file's [profile] (NULL: "default") aws_access_key_id and
 * aws_secret_access_key, into key and secret. 0, or -1 with why (never the contents). */
int gj_s3_read_credentials(const char *path, const char *profile, char *key, size_t key_size,
                           char *secret, size_t secret_size, char *why, size_t why_size);

#endif
