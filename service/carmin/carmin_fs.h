/*
 * carmin_fs.h — the tenant's CARMIN file space in PostgreSQL (migration 0009): paths under
 * /vip/Home, directories and files (a file is a blob of the tenant). Home always exists.
 * Every function takes the tenant: nothing here reaches another tenant's paths.
 */
#ifndef GJ_CARMIN_FS_H
#define GJ_CARMIN_FS_H

#include <stdatomic.h>
#include <stdint.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "service/base/uuid.h"

#define CARMIN_PATH_MAX 512
/* The most paths under a directory that travel as one archive: sent as a tar (dir_tar.c), or
 * received as a zip (upload_archive.c: entries, and the paths they make), so that a directory
 * made from an archive can always be fetched back as one. */
#define CARMIN_MAX_ENTRIES 10000

/* "vip/Home/a/b" (a URL's rest) into "/vip/Home/a/b": 0, or -1 when it is not under
 * /vip/Home or a segment is empty, "." , ".." or not a safe name (fsutil.h). */
int carmin_path_normalize(const char *in, char out[CARMIN_PATH_MAX]);
/* The parent of a normalized path other than home. */
void carmin_path_parent(const char *path, char out[CARMIN_PATH_MAX]);

struct carmin_entry {
    int is_dir;
    char blob_id[GJ_UUID_LEN + 1];     /* "" for a directory */
};

/* 1 found (e filled), 0 not, -1 database error. Home is a directory. */
int carmin_fs_stat(PGconn *c, const char *tenant, const char *path, struct carmin_entry *e);

/* What carmin_fs_describe describes: the path itself, its children, or the files an execution
 * placed (key: an execution id). */
enum carmin_select { CARMIN_SELF, CARMIN_CHILDREN, CARMIN_OF_EXECUTION };

/* CARMIN Path objects (an array but for CARMIN_SELF). NULL on a database error; for
 * CARMIN_SELF, a JSON null when the path does not exist. */
json_t *carmin_fs_describe(PGconn *c, const char *tenant, const char *key, enum carmin_select what);

/* What the functions below return when a path's parent went meanwhile, or a directory got a
 * new path under it while it was being deleted (migration 0013's foreign key on the parent,
 * SQLSTATE 23503): the transaction is aborted; the caller answers 409 or tries again. */
#define CARMIN_FS_RACE (-2)

/* Inserts or replaces path (its parent a directory, checked by the caller in the same
 * transaction) as a directory (blob_id NULL) or a file; a replaced file's blob goes when
 * nothing else holds it. execution_id may be NULL. 0, -1 or CARMIN_FS_RACE. For the user's
 * own writes only: an execution's results go through carmin_fs_create, which never replaces. */
int carmin_fs_put(PGconn *c, const char *tenant, const char *path, const char *blob_id, const char *execution_id);
/* Inserts path only when nothing is there (its parent a directory, or CARMIN_FS_RACE).
 * 1 made, 0 something was there (left as it was), -1 error. */
int carmin_fs_create(PGconn *c, const char *tenant, const char *path, const char *blob_id, const char *execution_id);
/* dir/name made by carmin_fs_create, or when that is taken the first free of name-1 ...
 * name-99 (the number before an extension: result-1.json), out its path. 0 made, 1 no free
 * name, -1 error. */
int carmin_fs_create_free(PGconn *c, const char *tenant, const char *dir, const char *name, const char *blob_id,
                          const char *execution_id, char out[CARMIN_PATH_MAX]);
/* path and its missing parents made as directories of the user (mkdir -p; nothing replaced).
 * 0 path is a directory, 1 path or one of its parents is a file, -1 error. */
int carmin_fs_mkdirs(PGconn *c, const char *tenant, const char *path);

/* Deletes path and everything under it, with the blobs nothing else holds. 1 deleted,
 * 0 no such path, -1 error, CARMIN_FS_RACE (a path was made under it meanwhile). */
int carmin_fs_delete(PGconn *c, const char *tenant, const char *path);
/* The same for what an execution placed: its files, then its directories left empty (one
 * the user has put files in stays). The number deleted, or -1. */
int carmin_fs_delete_execution(PGconn *c, const char *tenant, const char *execution_id);

struct gj_req;
/* Answers a directory as a ustar archive, streamed (dir_tar.c); c is the request's idle
 * connection, which the response takes over. */
void carmin_send_dir_tar(struct gj_req *r, PGconn *c, const char *path);

/* A CARMIN UploadData body (application/carmin+json) into its bytes (malloc'd), its md5
 * checked when given; *archive is 1 for type Archive (the bytes are a zip), 0 for File. 0, or
 * -1 with why (a sentence for the client). */
int carmin_upload_json_decode(const char *body, size_t len, unsigned char **out, size_t *n, int *archive,
                              const char **why);

/* UploadData of type Archive (upload_archive.c): the zip's entries become files and
 * directories under dir, a directory the caller has just made in its open transaction on c;
 * the files come to at most limit bytes in all, counted as they inflate; it stops once *cancel
 * is set. 0, or a CARMIN error code with why (a sentence for the client), and the caller rolls
 * the transaction back. Runs on archive_pool.h's threads. */
int carmin_archive_extract(PGconn *c, const char *tenant, const char *dir, const void *zip, size_t n,
                           uint64_t limit, const atomic_int *cancel, char why[256]);
struct gj_config;
/* The bounds of every extraction, from the server's settings (module init): the files at most
 * --archive-max-ratio times the zip's bytes and --archive-max-bytes, and no more than the disk
 * of DATA_DIR has free above --upload-disk-reserve (CARMIN_NO_SPACE). */
void carmin_archive_configure(const struct gj_config *cfg);

#endif
