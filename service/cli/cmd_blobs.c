/*
 * cmd_blobs.c — `gpujobd blobs migrate --to s3 [--database-url URL] --s3-endpoint ... --s3-bucket ...`:
 * moves the blobs kept as large objects into the S3 store while the service runs (issue 30).
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
    long blobs, failed;
    unsigned long long bytes;
};

/* The large object into an upload; sha256 receives the digest of what was read. NULL on failure. */
static struct gj_blob_s3w *copy_out(PGconn *conn, const char *tenant, unsigned int oid, const char *content_type,
                                    unsigned char *buf, unsigned char sha256[32])
{
    if (gj_db_begin(conn) != 0)
        return NULL;
    struct gj_blob_reader *r = gj_blob_reader_open(conn, oid);
    struct gj_blob_s3w *w = r ? gj_blob_s3w_open(tenant, content_type) : NULL;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = w && md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1;
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
        return NULL;
    }
    return w;
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

/* Points the blob at its object and drops its large object, if the blob is still there. 1 done,
 * 0 the blob is gone (or moved by another run), -1 failure. */
static int switch_over(PGconn *conn, const char *id, const char *oid, const char *key)
{
    if (gj_db_begin(conn) != 0)
        return -1;
    const char *p[3] = { id, oid, key };
    PGresult *res = gj_db_exec(conn,
                               "UPDATE blobs SET s3_key = $3, lo_oid = NULL WHERE id = $1::uuid AND lo_oid = $2::oid"
                               " RETURNING id",
                               3, p, NULL);
    int done = res ? PQntuples(res) : -1;
    PQclear(res);
    if (done == 1 && (gj_db_cmd(conn, "DELETE FROM blob_objects_unowned WHERE s3_key = $1", 1, p + 2) != 0 ||
                      gj_db_cmd(conn, "SELECT lo_unlink($1::oid)", 1, p + 1) != 0))
        done = -1;
    if (done == 1 && gj_db_commit(conn) == 0)
        return 1;
    gj_db_rollback(conn);
    return done == 0 ? 0 : -1;
}

static void migrate_one(PGconn *conn, const struct gj_s3 *s3, PGresult *res, int i, unsigned char *buf,
                        struct moved *m)
{
    const char *id = PQgetvalue(res, i, 0), *oid = PQgetvalue(res, i, 2), *hex = PQgetvalue(res, i, 4);
    unsigned char sha[32], want[32];
    for (int k = 0; k < 32; k++) {
        unsigned v = 0;
        sscanf(hex + 2 * k, "%2x", &v);
        want[k] = (unsigned char)v;
    }
    struct gj_blob_s3w *w = copy_out(conn, PQgetvalue(res, i, 1), (unsigned)strtoul(oid, NULL, 10),
                                     PQgetvalue(res, i, 5), buf, sha);
    if (!w) {
        gj_log_error("blobs", "blob %s: could not be copied to the store; it stays a large object", id);
        m->failed++;
        return;
    }
    if (memcmp(sha, want, 32) != 0 || verify(s3, gj_blob_s3w_key(w), want) != 0) {
        gj_log_error("blobs", "blob %s: the store's copy does not match its SHA-256; it stays a large object", id);
        gj_blob_s3w_abort(w);
        m->failed++;
        return;
    }
    int rc = switch_over(conn, id, oid, gj_blob_s3w_key(w));
    if (rc == 1) {
        m->blobs++;
        m->bytes += strtoull(PQgetvalue(res, i, 3), NULL, 10);
        gj_blob_s3w_free(w);
        return;
    }
    if (rc < 0) {
        gj_log_error("blobs", "blob %s: the database did not take the move; it stays a large object", id);
        m->failed++;
    }
    gj_blob_s3w_abort(w);   /* its row went meanwhile: the object goes too */
}

static int migrate_all(PGconn *conn, const struct gj_s3 *s3, struct moved *m)
{
    unsigned char *buf = malloc(CHUNK);
    if (!buf)
        return -1;
    char last[GJ_UUID_LEN + 1] = "00000000-0000-0000-0000-000000000000";
    for (;;) {
        const char *p[1] = { last };
        PGresult *res = gj_db_exec(conn,
                                   "SELECT id, tenant_id, lo_oid, size, encode(sha256, 'hex'), content_type FROM blobs"
                                   " WHERE lo_oid IS NOT NULL AND id > $1::uuid ORDER BY id LIMIT 100",
                                   1, p, NULL);
        if (!res) {
            free(buf);
            return -1;
        }
        int n = PQntuples(res);
        for (int i = 0; i < n; i++)
            migrate_one(conn, s3, res, i, buf, m);
        if (n > 0)
            snprintf(last, sizeof last, "%s", PQgetvalue(res, n - 1, 0));
        PQclear(res);
        if (n == 0)
            break;
        gj_log_info("blobs", "%ld blobs (%llu bytes) moved so far, %ld failed", m->blobs, m->bytes, m->failed);
    }
    free(buf);
    return 0;
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
        printf("%ld blobs (%llu bytes) moved to %s/%s; %ld left as large objects after a failure\n", m.blobs,
               m.bytes, cfg->s3_endpoint, cfg->s3_bucket, m.failed);
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
