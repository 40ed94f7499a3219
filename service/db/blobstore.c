/*
 * blobstore.c — blobs as PostgreSQL large objects (ARCHITECTURE.md: data model). Writes are
 * gathered into a 1 MiB buffer and sent with lowrite; reads go through
 * lo_lseek64 + loread in chunks of at most 1 MiB; the SHA-256 is computed as
 * the bytes pass. Nothing is ever whole in memory. With an object store configured
 * (blob_s3.h) new blobs go there instead and their row holds the key; blobs of both
 * kinds are read.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq/libpq-fs.h>
#include <openssl/evp.h>

#include "service/base/base64.h"
#include "service/db/blob_s3.h"
#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/base/log.h"
#include "service/db/storage_quota.h"
#include "service/base/uuid.h"

#define CHUNK (1024 * 1024)

struct gj_blob_writer {
    PGconn *conn;
    int own_txn;
    int failed;
    int finalized;
    Oid oid;
    int fd;
    uint64_t size;
    EVP_MD_CTX *md;
    unsigned char digest[32];
    char tenant_id[GJ_UUID_LEN + 1];
    char *content_type;
    size_t buffered;
    unsigned char *buf;
    struct gj_blob_s3w *s3;   /* an object store's upload instead of a large object */
};

struct gj_blob_reader {
    PGconn *conn;
    int fd;
    int64_t pos;   /* -1 unknown */
    struct gj_blob_s3r *s3;
};

static int in_txn(PGconn *conn)
{
    return PQtransactionStatus(conn) == PQTRANS_INTRANS;
}

static void lo_error(PGconn *conn, const char *what)
{
    char msg[300];
    snprintf(msg, sizeof msg, "%s", PQerrorMessage(conn));
    size_t len = strlen(msg);
    while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
        msg[--len] = '\0';
    for (size_t i = 0; i < len; i++)
        if (msg[i] == '\n' || msg[i] == '\t')
            msg[i] = ' ';
    gj_log_error("blob", "%s failed: %s", what, msg);
}

static void writer_free(struct gj_blob_writer *w)
{
    gj_blob_s3w_abort(w->s3);   /* NULL once committed */
    EVP_MD_CTX_free(w->md);
    free(w->buf);
    free(w->content_type);
    free(w);
}

struct gj_blob_writer *gj_blob_writer_open(PGconn *conn, const char *tenant_id, const char *content_type,
                                           int own_txn)
{
    if (!conn || !gj_is_uuid(tenant_id)) {
        gj_log_error("blob", "writer needs a connection and a tenant id");
        return NULL;
    }
    if (own_txn ? PQtransactionStatus(conn) != PQTRANS_IDLE : !in_txn(conn)) {
        gj_log_error("blob", own_txn ? "writer with its own transaction opened inside a transaction"
                                     : "writer without its own transaction needs the caller's open transaction");
        return NULL;
    }
    struct gj_blob_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->conn = conn;
    w->own_txn = own_txn;
    w->fd = -1;
    snprintf(w->tenant_id, sizeof w->tenant_id, "%s", tenant_id);
    w->content_type = strdup(content_type && *content_type ? content_type : "application/octet-stream");
    int to_s3 = gj_blobstore_s3() != NULL;
    w->buf = to_s3 ? NULL : malloc(CHUNK);   /* the object store's upload buffers its part */
    w->md = EVP_MD_CTX_new();
    if (!w->content_type || (!to_s3 && !w->buf) || !w->md || EVP_DigestInit_ex(w->md, EVP_sha256(), NULL) != 1) {
        gj_log_error("blob", "out of memory for a blob writer");
        writer_free(w);
        return NULL;
    }
    if (own_txn && gj_db_begin(conn) != 0) {
        writer_free(w);
        return NULL;
    }
    if (to_s3) {
        w->s3 = gj_blob_s3w_open(tenant_id, w->content_type);
        if (!w->s3)
            goto fail;
        return w;
    }
    w->oid = lo_creat(conn, INV_READ | INV_WRITE);
    if (w->oid == InvalidOid) {
        lo_error(conn, "lo_creat");
        goto fail;
    }
    w->fd = lo_open(conn, w->oid, INV_WRITE);
    if (w->fd < 0) {
        lo_error(conn, "lo_open");
        goto fail;
    }
    return w;
fail:
    if (own_txn)
        gj_db_rollback(conn);
    /* Without own_txn the caller's transaction is aborted now; its rollback
     * removes the large object. */
    writer_free(w);
    return NULL;
}

static int flush(struct gj_blob_writer *w)
{
    if (w->s3)
        return 0;   /* nothing buffered here */
    size_t off = 0;
    while (off < w->buffered) {
        int n = lo_write(w->conn, w->fd, (const char *)w->buf + off, w->buffered - off);
        if (n <= 0) {
            lo_error(w->conn, "lo_write");
            w->failed = 1;
            return -1;
        }
        off += (size_t)n;
    }
    w->buffered = 0;
    return 0;
}

int gj_blob_writer_write(struct gj_blob_writer *w, const void *data, size_t len)
{
    if (!w || w->failed)
        return -1;
    if (w->finalized) {
        gj_log_error("blob", "write after the digest was taken");
        w->failed = 1;
        return -1;
    }
    if (len == 0)
        return 0;
    if (EVP_DigestUpdate(w->md, data, len) != 1) {
        w->failed = 1;
        return -1;
    }
    if (w->s3) {
        w->size += len;
        if (gj_blob_s3w_write(w->s3, data, len) != 0)
            w->failed = 1;
        return w->failed ? -1 : 0;
    }
    const unsigned char *p = data;
    while (len > 0) {
        size_t room = CHUNK - w->buffered;
        size_t n = len < room ? len : room;
        memcpy(w->buf + w->buffered, p, n);
        w->buffered += n;
        w->size += n;
        p += n;
        len -= n;
        if (w->buffered == CHUNK && flush(w) != 0)
            return -1;
    }
    return 0;
}

int gj_blob_writer_write_fd(struct gj_blob_writer *w, int fd)
{
    if (!w || w->failed)
        return -1;
    if (w->finalized) {
        gj_log_error("blob", "write after the digest was taken");
        w->failed = 1;
        return -1;
    }
    /* Straight into the writer's buffer (or the upload's part): no second buffer, no copy. */
    for (;;) {
        if (w->s3) {
            size_t room;
            unsigned char *at = gj_blob_s3w_room(w->s3, &room);
            ssize_t got = read(fd, at, room);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                return got < 0 ? (errno ? errno : EIO) : 0;
            if (EVP_DigestUpdate(w->md, at, (size_t)got) != 1 || gj_blob_s3w_wrote(w->s3, (size_t)got) != 0) {
                w->failed = 1;
                return -1;
            }
            w->size += (uint64_t)got;
            continue;
        }
        ssize_t got = read(fd, w->buf + w->buffered, CHUNK - w->buffered);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return errno ? errno : EIO;
        if (got == 0)
            return 0;
        if (EVP_DigestUpdate(w->md, w->buf + w->buffered, (size_t)got) != 1) {
            w->failed = 1;
            return -1;
        }
        w->buffered += (size_t)got;
        w->size += (uint64_t)got;
        if (w->buffered == CHUNK && flush(w) != 0)
            return -1;
    }
}

uint64_t gj_blob_writer_size(const struct gj_blob_writer *w)
{
    return w ? w->size : 0;
}

void gj_blob_writer_digest(struct gj_blob_writer *w, unsigned char sha256[32])
{
    if (!w->finalized) {
        unsigned int n = 0;
        if (EVP_DigestFinal_ex(w->md, w->digest, &n) != 1 || n != 32) {
            w->failed = 1;
            memset(w->digest, 0, sizeof w->digest);
        }
        w->finalized = 1;
    }
    memcpy(sha256, w->digest, 32);
}

int gj_blob_writer_close(struct gj_blob_writer *w)
{
    if (!w || w->failed)
        return -1;
    unsigned char sha[32];
    gj_blob_writer_digest(w, sha);
    if (w->failed || flush(w) != 0)
        return -1;
    if (w->s3 && gj_blob_s3w_finish(w->s3) != 0) {
        w->failed = 1;
        return -1;
    }
    if (w->fd >= 0 && lo_close(w->conn, w->fd) != 0) {
        lo_error(w->conn, "lo_close");
        w->failed = 1;
        return -1;
    }
    w->fd = -1;
    free(w->buf);   /* what stays until the commit is small */
    w->buf = NULL;
    return 0;
}

int gj_blob_writer_commit(struct gj_blob_writer *w, const char *owner_job, char id_out[GJ_UUID_LEN + 1])
{
    if (!w)
        return -1;
    if (id_out)
        id_out[0] = '\0';
    unsigned char sha[32];
    gj_blob_writer_digest(w, sha);
    if (owner_job && !gj_is_uuid(owner_job)) {
        gj_log_error("blob", "owner job id is not a uuid");
        w->failed = 1;
    }
    if (w->failed || flush(w) != 0 || (w->s3 && gj_blob_s3w_finish(w->s3) != 0)) {
        gj_blob_writer_abort(w);
        return -1;
    }
    if (w->fd >= 0 && lo_close(w->conn, w->fd) != 0) {   /* -1: closed by gj_blob_writer_close */
        lo_error(w->conn, "lo_close");
        w->fd = -1;
        gj_blob_writer_abort(w);
        return -1;
    }
    w->fd = -1;
    struct gj_storage_refusal over;
    int quota = gj_storage_quota_reserve(w->conn, w->tenant_id, w->size, &over);
    if (quota != 0) {
        if (quota > 0)
            gj_storage_set_last_refusal(&over);
        gj_blob_writer_abort(w);   /* nothing of it stays */
        return quota > 0 ? GJ_BLOB_OVER_QUOTA : -1;
    }
    char hex[65], size[24], oid[16];
    gj_sha256_hex(sha, hex);
    snprintf(size, sizeof size, "%llu", (unsigned long long)w->size);
    snprintf(oid, sizeof oid, "%u", (unsigned)w->oid);
    const char *key = w->s3 ? gj_blob_s3w_key(w->s3) : NULL;
    const char *p[7] = { w->tenant_id, size, hex, w->content_type, key ? NULL : oid, owner_job, key };
    /* The object's record of an upload in progress goes in the transaction that makes its blob. */
    PGresult *res = gj_db_exec(w->conn,
                               "WITH owned AS (DELETE FROM blob_objects_unowned WHERE s3_key = $7 AND uploading)"
                               " INSERT INTO blobs (tenant_id, size, sha256, content_type, lo_oid, owner_job, s3_key)"
                               " VALUES ($1::uuid, $2::bigint, decode($3, 'hex'), $4, $5::oid, $6::uuid, $7)"
                               " RETURNING id",
                               7, p, NULL);
    if (!res) {
        gj_blob_writer_abort(w);
        return -1;
    }
    char id[GJ_UUID_LEN + 1];
    snprintf(id, sizeof id, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    if (w->own_txn && gj_db_commit(w->conn) != 0) {
        gj_db_rollback(w->conn);
        writer_free(w);
        return -1;
    }
    /* The blob owns its object now (without own_txn: once the caller commits; a rollback
     * leaves the upload's record, and the maintenance pass deletes the object). */
    gj_blob_s3w_free(w->s3);
    w->s3 = NULL;
    if (id_out)
        memcpy(id_out, id, sizeof id);
    writer_free(w);
    return 0;
}

void gj_blob_writer_abort(struct gj_blob_writer *w)
{
    if (!w)
        return;
    if (w->s3) {
        /* writer_free aborts the upload or deletes the object */
        if (w->own_txn)
            gj_db_rollback(w->conn);
    } else if (w->own_txn) {
        gj_db_rollback(w->conn);   /* takes the large object with it */
    } else if (in_txn(w->conn)) {
        if (w->fd >= 0 && lo_close(w->conn, w->fd) != 0)
            lo_error(w->conn, "lo_close");
        if (in_txn(w->conn) && lo_unlink(w->conn, w->oid) != 1)
            lo_error(w->conn, "lo_unlink");
    }
    /* else: the caller's transaction failed and its rollback removes the object. */
    writer_free(w);
}

int gj_blob_lookup(PGconn *conn, const char *tenant_id, const char *blob_id, struct gj_blob_info *info)
{
    if (!gj_is_uuid(blob_id) || (tenant_id && !gj_is_uuid(tenant_id)))
        return 0;   /* not an id: nothing has it */
    const char *p[2] = { blob_id, tenant_id };
    PGresult *res = gj_db_exec(conn,
                               "SELECT id, tenant_id, size, encode(sha256, 'hex'), content_type,"
                               " coalesce(lo_oid, 0), coalesce(s3_key, '')"
                               " FROM blobs WHERE id = $1::uuid AND ($2::uuid IS NULL OR tenant_id = $2::uuid)",
                               2, p, NULL);
    if (!res)
        return -1;
    if (PQntuples(res) == 0) {
        PQclear(res);
        return 0;
    }
    memset(info, 0, sizeof *info);
    snprintf(info->id, sizeof info->id, "%s", PQgetvalue(res, 0, 0));
    snprintf(info->tenant_id, sizeof info->tenant_id, "%s", PQgetvalue(res, 0, 1));
    info->size = strtoull(PQgetvalue(res, 0, 2), NULL, 10);
    const char *hex = PQgetvalue(res, 0, 3);
    for (int i = 0; i < 32 && hex[2 * i] && hex[2 * i + 1]; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            break;
        info->sha256[i] = (unsigned char)v;
    }
    snprintf(info->content_type, sizeof info->content_type, "%s", PQgetvalue(res, 0, 4));
    info->lo_oid = (unsigned)strtoul(PQgetvalue(res, 0, 5), NULL, 10);
    snprintf(info->s3_key, sizeof info->s3_key, "%s", PQgetvalue(res, 0, 6));
    PQclear(res);
    return 1;
}

struct gj_blob_reader *gj_blob_reader_open(PGconn *conn, unsigned int lo_oid)
{
    if (!conn || !in_txn(conn)) {
        gj_log_error("blob", "a blob reader needs an open transaction");
        return NULL;
    }
    struct gj_blob_reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->conn = conn;
    r->pos = 0;
    r->fd = lo_open(conn, (Oid)lo_oid, INV_READ);
    if (r->fd < 0) {
        lo_error(conn, "lo_open");
        free(r);
        return NULL;
    }
    return r;
}

struct gj_blob_reader *gj_blob_reader_open_blob(PGconn *conn, const struct gj_blob_info *info, int *missing)
{
    if (missing)
        *missing = 0;
    if (!info->s3_key[0])
        return gj_blob_reader_open(conn, info->lo_oid);
    struct gj_blob_reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    int gone = 0;
    r->conn = conn;
    r->fd = -1;
    r->s3 = gj_blob_s3r_open(info->s3_key, info->size, &gone);
    if (!r->s3) {
        if (gone)
            gj_log_error("blob", "blob %s: its object %s is missing from the store", info->id, info->s3_key);
        if (missing)
            *missing = gone;
        free(r);
        return NULL;
    }
    return r;
}

struct gj_blob_reader *gj_blob_reader_open_id(PGconn *conn, const char *blob_id, int *missing)
{
    struct gj_blob_info info;
    if (missing)
        *missing = 0;
    int found = gj_blob_lookup(conn, NULL, blob_id, &info);
    if (found == 0)
        gj_log_error("blob", "blob %s does not exist", blob_id);
    return found == 1 ? gj_blob_reader_open_blob(conn, &info, missing) : NULL;
}

int gj_blob_store_unreachable(int clear)
{
    return gj_blobstore_unreachable(clear);
}

int gj_blob_store_ready(char *why, size_t why_size)
{
    return gj_blobstore_probe(why, why_size);
}

long gj_blob_reader_read(struct gj_blob_reader *r, uint64_t offset, void *buf, size_t len)
{
    if (r && r->s3)
        return gj_blob_s3r_read(r->s3, offset, buf, len);
    if (!r || offset > (uint64_t)INT64_MAX)
        return -1;
    if (len > (size_t)LONG_MAX)
        len = (size_t)LONG_MAX;
    if (r->pos != (int64_t)offset) {
        if (lo_lseek64(r->conn, r->fd, (pg_int64)offset, SEEK_SET) < 0) {
            lo_error(r->conn, "lo_lseek64");
            r->pos = -1;
            return -1;
        }
        r->pos = (int64_t)offset;
    }
    size_t got = 0;
    while (got < len) {
        size_t want = len - got < CHUNK ? len - got : CHUNK;
        int n = lo_read(r->conn, r->fd, (char *)buf + got, want);
        if (n < 0) {
            lo_error(r->conn, "lo_read");
            r->pos = -1;
            return -1;
        }
        if (n == 0)
            break;
        got += (size_t)n;
        r->pos += n;
    }
    return (long)got;
}

void gj_blob_reader_close(struct gj_blob_reader *r)
{
    if (!r)
        return;
    if (r->s3) {
        gj_blob_s3r_close(r->s3);
        free(r);
        return;
    }
    if (in_txn(r->conn) && lo_close(r->conn, r->fd) != 0)
        lo_error(r->conn, "lo_close");
    free(r);
}

int gj_blob_export(PGconn *conn, unsigned int lo_oid, const char *path)
{
    if (!conn || !path)
        return -1;
    int own = PQtransactionStatus(conn) == PQTRANS_IDLE;
    if (!own && !in_txn(conn)) {
        gj_log_error("blob", "export on a connection in a failed transaction");
        return -1;
    }
    if (own && gj_db_begin(conn) != 0)
        return -1;
    int rc = -1;
    char *buf = NULL;
    int fd = -1, created = 0;
    struct gj_blob_reader *r = gj_blob_reader_open(conn, lo_oid);
    if (!r)
        goto out;
    buf = malloc(CHUNK);
    if (!buf)
        goto out;
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        gj_log_error("blob", "cannot create %s: %s", path, strerror(errno));
        goto out;
    }
    created = 1;
    uint64_t off = 0;
    for (;;) {
        long n = gj_blob_reader_read(r, off, buf, CHUNK);
        if (n < 0)
            goto out;
        if (n == 0)
            break;
        size_t done = 0;
        while (done < (size_t)n) {
            ssize_t w = write(fd, buf + done, (size_t)n - done);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                gj_log_error("blob", "cannot write %s: %s", path, strerror(errno));
                goto out;
            }
            done += (size_t)w;
        }
        off += (uint64_t)n;
    }
    if (close(fd) != 0) {
        fd = -1;
        gj_log_error("blob", "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    fd = -1;
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    if (rc != 0 && created)
        unlink(path);
    free(buf);
    gj_blob_reader_close(r);
    if (own) {
        if (rc == 0) {
            if (gj_db_commit(conn) != 0) {
                gj_db_rollback(conn);
                if (created)
                    unlink(path);
                rc = -1;
            }
        } else {
            gj_db_rollback(conn);
        }
    }
    return rc;
}

int gj_blob_export_blob(PGconn *conn, const struct gj_blob_info *info, const char *path, int *missing)
{
    if (missing)
        *missing = 0;
    if (!info->s3_key[0])
        return gj_blob_export(conn, info->lo_oid, path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        gj_log_error("blob", "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    int gone = 0;
    int rc = gj_blob_s3_export(info->s3_key, info->size, fd, &gone);
    if (close(fd) != 0 && rc == 0) {
        gj_log_error("blob", "cannot write %s: %s", path, strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        if (gone)
            gj_log_error("blob", "blob %s: its object %s is missing from the store", info->id, info->s3_key);
        unlink(path);
    }
    if (missing)
        *missing = gone;
    return rc;
}

/* The file's bytes into a new object of the store. */
static int import_to_store(const char *path, char key[128])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        gj_log_error("blob", "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    struct gj_blob_s3w *w = gj_blob_s3w_open_model_file();
    int rc = w ? 0 : -1;
    while (rc == 0) {
        size_t room;
        unsigned char *at = gj_blob_s3w_room(w, &room);
        ssize_t got = read(fd, at, room);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            gj_log_error("blob", "cannot read %s: %s", path, strerror(errno));
        if (got <= 0) {
            rc = got < 0 ? -1 : gj_blob_s3w_finish(w);
            break;
        }
        rc = gj_blob_s3w_wrote(w, (size_t)got);
    }
    close(fd);
    if (rc != 0) {
        gj_blob_s3w_abort(w);
        return -1;
    }
    snprintf(key, 128, "%s", gj_blob_s3w_key(w));
    gj_blob_s3w_free(w);   /* its record goes with the caller's row */
    return 0;
}

int gj_blob_import_file(PGconn *conn, const char *path, unsigned int *lo_oid, char key[128])
{
    *lo_oid = 0;
    key[0] = '\0';
    if (gj_blobstore_s3())
        return import_to_store(path, key);
    if (!in_txn(conn)) {
        gj_log_error("blob", "importing a file as a large object needs an open transaction");
        return -1;
    }
    Oid oid = lo_import(conn, path);
    if (oid == InvalidOid) {
        lo_error(conn, "lo_import");
        return -1;
    }
    *lo_oid = oid;
    return 0;
}

char *gj_blob_presigned_url(const struct gj_blob_info *info, long expires_s, const char *content_disposition)
{
    return info->s3_key[0] ? gj_blob_s3_presign(info->s3_key, expires_s, content_disposition) : NULL;
}

int gj_blob_export_id(PGconn *conn, const char *blob_id, const char *path, int *missing)
{
    struct gj_blob_info info;
    if (missing)
        *missing = 0;
    int found = gj_blob_lookup(conn, NULL, blob_id, &info);
    if (found == 0)
        gj_log_error("blob", "blob %s does not exist", blob_id);
    return found == 1 ? gj_blob_export_blob(conn, &info, path, missing) : -1;
}

void gj_sha256_hex(const unsigned char sha256[32], char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[sha256[i] >> 4];
        hex[2 * i + 1] = digits[sha256[i] & 15];
    }
    hex[64] = '\0';
}

void gj_sha256_base64(const unsigned char sha256[32], char b64[45])
{
    gj_base64_encode(sha256, 32, b64, 45, GJ_BASE64_STD);   /* 44 characters: always fits */
}
