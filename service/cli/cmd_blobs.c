/*
 * cmd_blobs.c — `gpujobd blobs migrate --to s3 [--database-url URL] --s3-endpoint ... --s3-bucket ...`:
 * moves the blobs kept as large objects, then the model repository's files, into the S3 store while
 * the service runs (issue 30).
 *
 * One blob at a time: its large object is read (in a transaction of its own) into an upload
 * (blob_s3.h: the key recorded as unowned first), the object is read back from the store and
 * its SHA-256 compared with the blob's, and only then one transaction points the row at the
 * key, forgets the record and unlinks the large object. Stopped at any point it leaves every
 * blob readable, and an object no row took is deleted by the maintenance pass; run again, it
 * goes on with the blobs still in large objects. A blob deleted meanwhile is skipped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <libpq-fe.h>
#include <openssl/evp.h>

#include "service/base/log.h"
#include "service/cli/cli.h"
#include "service/config.h"
#include "service/db/blob_s3.h"
#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/db/pg_embedded.h"

#define CHUNK (1024 * 1024)

struct moved {
    long blobs, model_files, failed;
    unsigned long long bytes;
};

/* The large object into the upload w (aborted on failure); sha256 receives the digest of what
 * was read. 0 or -1. */
static int copy_out(PGconn *conn, unsigned int oid, struct gj_blob_s3w *w, unsigned char *buf,
                    unsigned char sha256[32])
{
    if (!w)
        return -1;
    if (gj_db_begin(conn) != 0) {
        gj_blob_s3w_abort(w);
        return -1;
    }
    struct gj_blob_reader *r = gj_blob_reader_open(conn, oid);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = r && md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1;
    for (uint64_t off = 0; ok;) {
        long n = gj_blob_reader_read(r, off, buf, CHUNK);
        if (n <= 0) {
            ok = n == 0;
            break;
        }
        ok = EVP_DigestUpdate(md, buf, (size_t)n) == 1 && gj_blob_s3w_write(w, buf, (size_t)n) == 0;
        off += (uint64_t)n;
    }
    unsigned int len = 0;
    ok = ok && EVP_DigestFinal_ex(md, sha256, &len) == 1 && gj_blob_s3w_finish(w) == 0;
    EVP_MD_CTX_free(md);
    gj_blob_reader_close(r);
    gj_db_rollback(conn);   /* a read: nothing to keep */
    if (!ok) {
        gj_blob_s3w_abort(w);
        return -1;
    }
    return 0;
}

static int hash_sink(const void *data, size_t len, void *arg)
{
    return EVP_DigestUpdate(arg, data, len) == 1 ? 0 : 1;
}

/* The object as the store now has it, hashed. 0 when its SHA-256 is want. */
static int verify(const struct gj_s3 *s3, const char *key, const unsigned char want[32])
{
    struct gj_s3_conn *c = gj_s3_conn_new(s3);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char got[32];
    unsigned int len = 0;
    int ok = c && md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
             gj_s3_get(c, key, 0, 0, NULL, hash_sink, md, NULL) == GJ_S3_OK &&
             EVP_DigestFinal_ex(md, got, &len) == 1 && memcmp(got, want, 32) == 0;
    EVP_MD_CTX_free(md);
    gj_s3_conn_free(c);
    return ok ? 0 : -1;
}

/* Points the row at its object (update: an UPDATE ... RETURNING of the row still on large object
 * oid; p[n-1] is the key) and drops the large object, if the row is still there. 1 done, 0 the
 * row is gone (or moved by another run), -1 failure. */
static int switch_over(PGconn *conn, const char *update, int n, const char *const *p, const char *oid)
{
    if (gj_db_begin(conn) != 0)
        return -1;
    PGresult *res = gj_db_exec(conn, update, n, p, NULL);
    int done = res ? PQntuples(res) : -1;
    PQclear(res);
    const char *o[1] = { oid };
    if (done == 1 && (gj_db_cmd(conn, "DELETE FROM blob_objects_unowned WHERE s3_key = $1", 1, p + n - 1) != 0 ||
                      gj_db_cmd(conn, "SELECT lo_unlink($1::oid)", 1, o) != 0))
        done = -1;
    if (done == 1 && gj_db_commit(conn) == 0)
        return 1;
    gj_db_rollback(conn);
    return done == 0 ? 0 : -1;
}

/* One large object (oid, its SHA-256 in hex) into the upload w, checked, and its row pointed at
 * the object (switch_over's update; p[n-1] is set to the key here). 1 moved, 0 its row went
 * meanwhile (the object goes too), -1 failed: it stays a large object (logged, naming what). */
static int move_one(PGconn *conn, const struct gj_s3 *s3, struct gj_blob_s3w *w, const char *oid, const char *hex,
                    unsigned char *buf, const char *what, const char *update, int n, const char **p)
{
    unsigned char sha[32], want[32];
    for (int k = 0; k < 32; k++) {
        unsigned v = 0;
        sscanf(hex + 2 * k, "%2x", &v);
        want[k] = (unsigned char)v;
    }
    if (copy_out(conn, (unsigned)strtoul(oid, NULL, 10), w, buf, sha) != 0) {
        gj_log_error("blobs", "%s: could not be copied to the store; it stays a large object", what);
        return -1;
    }
    p[n - 1] = gj_blob_s3w_key(w);
    if (memcmp(sha, want, 32) != 0 || verify(s3, p[n - 1], want) != 0) {
        gj_log_error("blobs", "%s: the store's copy does not match its SHA-256; it stays a large object", what);
        gj_blob_s3w_abort(w);
        return -1;
    }
    int rc = switch_over(conn, update, n, p, oid);
    if (rc == 1) {
        gj_blob_s3w_free(w);
        return 1;
    }
    if (rc < 0)
        gj_log_error("blobs", "%s: the database did not take the move; it stays a large object", what);
    gj_blob_s3w_abort(w);   /* its row went meanwhile, or the move failed: the object goes */
    return rc;
}

static void migrate_one(PGconn *conn, const struct gj_s3 *s3, PGresult *res, int i, unsigned char *buf,
                        struct moved *m)
{
    const char *id = PQgetvalue(res, i, 0), *oid = PQgetvalue(res, i, 2);
    char what[64];
    snprintf(what, sizeof what, "blob %s", id);
    const char *p[3] = { id, oid, NULL };
    int rc = move_one(conn, s3, gj_blob_s3w_open(PQgetvalue(res, i, 1), PQgetvalue(res, i, 5)), oid,
                      PQgetvalue(res, i, 4), buf, what,
                      "UPDATE blobs SET s3_key = $3, lo_oid = NULL WHERE id = $1::uuid AND lo_oid = $2::oid"
                      " RETURNING id", 3, p);
    if (rc == 1) {
        m->blobs++;
        m->bytes += strtoull(PQgetvalue(res, i, 3), NULL, 10);
    } else if (rc < 0) {
        m->failed++;
    }
}

static int migrate_blobs(PGconn *conn, const struct gj_s3 *s3, unsigned char *buf, struct moved *m)
{
    char last[GJ_UUID_LEN + 1] = "00000000-0000-0000-0000-000000000000";
    for (;;) {
        const char *p[1] = { last };
        PGresult *res = gj_db_exec(conn,
                                   "SELECT id, tenant_id, lo_oid, size, encode(sha256, 'hex'), content_type FROM blobs"
                                   " WHERE lo_oid IS NOT NULL AND id > $1::uuid ORDER BY id LIMIT 100",
                                   1, p, NULL);
        if (!res)
            return -1;
        int n = PQntuples(res);
        for (int i = 0; i < n; i++)
            migrate_one(conn, s3, res, i, buf, m);
        if (n > 0)
            snprintf(last, sizeof last, "%s", PQgetvalue(res, n - 1, 0));
        PQclear(res);
        if (n == 0)
            return 0;
        gj_log_info("blobs", "%ld blobs (%llu bytes) moved so far, %ld failed", m->blobs, m->bytes, m->failed);
    }
}

/* The model repository's files still in large objects (model_store.h), as the blobs. */
static int migrate_model_files(PGconn *conn, const struct gj_s3 *s3, unsigned char *buf, struct moved *m)
{
    PGresult *res = gj_db_exec(conn,
                               "SELECT model, version, path, lo_oid, size, encode(sha256, 'hex') FROM model_files"
                               " WHERE lo_oid IS NOT NULL ORDER BY model, version, path",
                               0, NULL, NULL);
    if (!res)
        return -1;
    for (int i = 0; i < PQntuples(res); i++) {
        const char *oid = PQgetvalue(res, i, 3);
        char what[400];
        snprintf(what, sizeof what, "model %s version %s file %s", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
                 PQgetvalue(res, i, 2));
        const char *p[5] = { PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), PQgetvalue(res, i, 2), oid, NULL };
        int rc = move_one(conn, s3, gj_blob_s3w_open_model_file(), oid, PQgetvalue(res, i, 5), buf, what,
                          "UPDATE model_files SET s3_key = $5, lo_oid = NULL WHERE model = $1"
                          " AND version = $2::integer AND path = $3 AND lo_oid = $4::oid RETURNING 1", 5, p);
        if (rc == 1) {
            m->model_files++;
            m->bytes += strtoull(PQgetvalue(res, i, 4), NULL, 10);
        } else if (rc < 0) {
            m->failed++;
        }
    }
    PQclear(res);
    return 0;
}

static int migrate_all(PGconn *conn, const struct gj_s3 *s3, struct moved *m)
{
    unsigned char *buf = malloc(CHUNK);
    if (!buf)
        return -1;
    int rc = migrate_blobs(conn, s3, buf, m);
    if (rc == 0)
        rc = migrate_model_files(conn, s3, buf, m);
    free(buf);
    return rc;
}

static int usage(void)
{
    fprintf(stderr, "usage: gpujobd blobs migrate --to s3 [--database-url URL | --data-dir DIR] --s3-endpoint URL "
                    "--s3-bucket NAME [--s3-region R] [--s3-addressing path|virtual] [--s3-credentials-file F] "
                    "[--s3-ca-file F]\n");
    return 2;
}

int gj_cmd_blobs(int argc, char **argv)
{
    if (argc < 4 || strcmp(argv[1], "migrate") != 0 || strcmp(argv[2], "--to") != 0 || strcmp(argv[3], "s3") != 0)
        return usage();
    /* The serve flags, read as serve reads them, with --blob-store s3 implied. */
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args)
        return 1;
    int n = 0;
    args[n++] = "blobs migrate";
    args[n++] = "--blob-store=s3";
    for (int i = 4; i < argc; i++)
        args[n++] = argv[i];
    struct gj_config *cfg = calloc(1, sizeof *cfg);
    int rc = cfg ? gj_config_load(cfg, n, args, 0) : -1;
    free(args);
    if (rc != 0) {
        free(cfg);
        return rc > 0 ? 0 : 2;
    }
    struct gj_s3_config sc = { .endpoint = cfg->s3_endpoint, .bucket = cfg->s3_bucket, .region = cfg->s3_region,
                               .virtual_host = strcmp(cfg->s3_addressing, "virtual") == 0,
                               .access_key = cfg->s3_access_key, .secret_key = cfg->s3_secret_key,
                               .ca_file = cfg->s3_ca_file };
    char why[300] = "cannot initialise libcurl", url[sizeof cfg->database_url];
    struct gj_pg_embedded *pg = NULL;
    struct gj_s3 *s3 = NULL;
    PGconn *conn = NULL;
    int status = 1;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(s3 = gj_s3_new(&sc, why, sizeof why))) {
        fprintf(stderr, "gpujobd: blobs migrate: %s\n", why);
        goto out;
    }
    if (cfg->database_url[0]) {
        snprintf(url, sizeof url, "%s", cfg->database_url);
        gj_db_set_password(cfg->database_password);
    } else if (!(pg = gj_pg_embedded_start(cfg->data_dir, &cfg->pg, url, sizeof url))) {
        goto out;
    }
    if (!(conn = gj_db_connect(url)) || gj_blobstore_use_s3(s3, url, 1) != 0)
        goto out;
    struct moved m = { 0 };
    if (migrate_all(conn, s3, &m) == 0) {
        printf("%ld blobs and %ld model files (%llu bytes) moved to %s/%s; %ld left as large objects after a "
               "failure\n", m.blobs, m.model_files, m.bytes, cfg->s3_endpoint, cfg->s3_bucket, m.failed);
        status = m.failed ? 1 : 0;
    }
out:
    gj_blobstore_use_postgres();
    if (conn)
        PQfinish(conn);
    gj_pg_embedded_stop(pg);
    gj_s3_free(s3);
    curl_global_cleanup();
    free(cfg);
    return status;
}
