/*
 * dir_tar.c — GET /rest/path/{dir}?action=content: the directory as a POSIX ustar archive,
 * streamed from the blobs (no copy on disk or in memory), its length known in advance. The
 * archive's root is the directory's own name. At most CARMIN_MAX_ENTRIES entries; a file of 8 GiB
 * or more, or a path ustar cannot name (over 100 characters after a split at a '/' into at
 * most 155 + 100), is refused before anything is sent.
 */
#include <stdlib.h>
#include <string.h>

#include "service/db/blobstore.h"
#include "service/carmin/carmin.h"
#include "service/carmin/carmin_fs.h"
#include "service/db/db.h"

#define BLOCK 512
#define TAR_MAX_SIZE 077777777777ULL   /* 11 octal digits */

struct tar_entry {
    char name[CARMIN_PATH_MAX];   /* <root>/<relative> */
    int is_dir;
    char blob_id[GJ_UUID_LEN + 1];   /* "" for a directory */
    uint64_t size;
    long long mtime;
};

struct tar_stream {
    struct gj_db_pool *pool;
    PGconn *conn;                 /* in the read transaction of the whole archive */
    struct tar_entry *e;
    size_t n, i;
    uint64_t at;                  /* offset inside entry i (header, data, padding) */
    uint64_t total, sent;
    struct gj_blob_reader *rd;
    unsigned char hdr[BLOCK];
};

static uint64_t padded(uint64_t size)
{
    return (size + BLOCK - 1) / BLOCK * BLOCK;
}

/* Splits name into ustar's prefix (<= 155) and name (<= 100) fields: 0, or -1. */
static int split_name(const char *full, unsigned char hdr[BLOCK])
{
    size_t len = strlen(full);
    if (len <= 100) {
        memcpy(hdr, full, len);
        return 0;
    }
    for (size_t cut = len > 101 ? len - 101 : 0; cut < len && cut <= 155; cut++)
        if (full[cut] == '/' && cut > 0 && len - cut - 1 <= 100) {
            memcpy(hdr, full + cut + 1, len - cut - 1);
            memcpy(hdr + 345, full, cut);
            return 0;
        }
    return -1;
}

/* A numeric field: width - 1 octal digits and a NUL (values past them clamped). */
static void put_octal(unsigned char *field, int width, unsigned long long v)
{
    unsigned long long max = (1ULL << (3 * (width - 1))) - 1;
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%0*llo", width - 1, v < max ? v : max);
    memcpy(field, tmp, (size_t)width);
}

static int tar_header(const struct tar_entry *e, unsigned char hdr[BLOCK])
{
    memset(hdr, 0, BLOCK);
    char full[CARMIN_PATH_MAX + 1];
    snprintf(full, sizeof full, "%s%s", e->name, e->is_dir ? "/" : "");
    if (split_name(full, hdr) != 0)
        return -1;
    put_octal(hdr + 100, 8, e->is_dir ? 0755 : 0644);
    put_octal(hdr + 108, 8, 0);
    put_octal(hdr + 116, 8, 0);
    put_octal(hdr + 124, 12, e->is_dir ? 0 : e->size);
    put_octal(hdr + 136, 12, e->mtime > 0 ? (unsigned long long)e->mtime : 0);
    hdr[156] = e->is_dir ? '5' : '0';
    memcpy(hdr + 257, "ustar\0" "00", 8);
    memset(hdr + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < BLOCK; i++)
        sum += hdr[i];
    put_octal(hdr + 148, 7, sum);   /* six digits and a NUL; the space after stays */
    return 0;
}

static uint64_t entry_span(const struct tar_entry *e)
{
    return BLOCK + (e->is_dir ? 0 : padded(e->size));
}

/* Copies from entry i at s->at into buf: bytes written, or -1. */
static long entry_piece(struct tar_stream *s, char *buf, size_t max)
{
    const struct tar_entry *e = &s->e[s->i];
    uint64_t data_end = BLOCK + (e->is_dir ? 0 : e->size), span = entry_span(e);
    size_t k;
    if (s->at < BLOCK) {
        if (s->at == 0 && tar_header(e, s->hdr) != 0)
            return -1;
        k = BLOCK - s->at < max ? (size_t)(BLOCK - s->at) : max;
        memcpy(buf, s->hdr + s->at, k);
    } else if (s->at < data_end) {
        if (!s->rd && !(s->rd = gj_blob_reader_open_id(s->conn, e->blob_id, NULL)))
            return -1;
        k = data_end - s->at < max ? (size_t)(data_end - s->at) : max;
        long got = gj_blob_reader_read(s->rd, s->at - BLOCK, buf, k);
        if (got <= 0)
            return -1;
        k = (size_t)got;
    } else {
        k = span - s->at < max ? (size_t)(span - s->at) : max;
        memset(buf, 0, k);
    }
    s->at += k;
    if (s->at == span) {
        if (s->rd)
            gj_blob_reader_close(s->rd);
        s->rd = NULL;
        s->at = 0;
        s->i++;
    }
    return (long)k;
}

static ssize_t tar_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct tar_stream *s = cls;
    size_t out = 0;
    while (out < max && s->sent + out < s->total) {
        long k;
        if (s->i < s->n) {
            k = entry_piece(s, buf + out, max - out);
        } else {   /* the two zero blocks that end an archive */
            k = (long)(s->total - s->sent - out < max - out ? s->total - s->sent - out : max - out);
            memset(buf + out, 0, (size_t)k);
        }
        if (k < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        out += (size_t)k;
    }
    s->sent += out;
    return out ? (ssize_t)out : MHD_CONTENT_READER_END_OF_STREAM;
}

static void tar_free(void *cls)
{
    struct tar_stream *s = cls;
    if (s->rd)
        gj_blob_reader_close(s->rd);
    if (s->conn) {
        gj_db_rollback(s->conn);
        gj_db_release(s->pool, s->conn);
    }
    free(s->e);
    free(s);
}

/* The entries under path, in the open transaction. 0, or -1 answered. */
static int read_entries(struct gj_req *r, PGconn *c, const char *path, struct tar_stream *s)
{
    const char *p[2] = { r->who.tenant_id, path };
    PGresult *res = gj_db_exec(c, "SELECT substr(p.path, length($2) + 2), p.blob_id IS NULL, coalesce(b.id::text, ''),"
                                  " coalesce(b.size, 0), extract(epoch FROM p.modified_at)::bigint FROM carmin_paths p"
                                  " LEFT JOIN blobs b ON b.id = p.blob_id WHERE p.tenant_id = $1::uuid"
                                  " AND left(p.path, length($2) + 1) = $2 || '/' ORDER BY p.path LIMIT 10001",
                               2, p, NULL);
    if (!res) {
        carmin_unavailable(r);
        return -1;
    }
    int n = PQntuples(res);
    const char *root = strrchr(path, '/') + 1;
    if (n > CARMIN_MAX_ENTRIES || !(s->e = calloc((size_t)n + 1, sizeof *s->e))) {
        PQclear(res);
        carmin_error(r, CARMIN_BAD_REQUEST, "a directory of over %d entries is not sent as one archive", CARMIN_MAX_ENTRIES);
        return -1;
    }
    s->e[0] = (struct tar_entry){ .is_dir = 1 };
    snprintf(s->e[0].name, sizeof s->e[0].name, "%s", root);
    for (int i = 0; i < n; i++) {
        struct tar_entry *e = &s->e[i + 1];
        snprintf(e->name, sizeof e->name, "%s/%s", root, PQgetvalue(res, i, 0));
        e->is_dir = PQgetvalue(res, i, 1)[0] == 't';
        snprintf(e->blob_id, sizeof e->blob_id, "%s", PQgetvalue(res, i, 2));
        e->size = strtoull(PQgetvalue(res, i, 3), NULL, 10);
        e->mtime = strtoll(PQgetvalue(res, i, 4), NULL, 10);
    }
    PQclear(res);
    s->n = (size_t)n + 1;
    s->total = 2 * BLOCK;
    for (size_t i = 0; i < s->n; i++) {
        unsigned char hdr[BLOCK];
        if (s->e[i].size > TAR_MAX_SIZE || tar_header(&s->e[i], hdr) != 0) {
            carmin_error(r, CARMIN_BAD_REQUEST, "%s cannot be put in a tar archive (a path over ustar's limits, or "
                                                "a file of 8 GiB or more): fetch its files one by one", s->e[i].name);
            return -1;
        }
        s->total += entry_span(&s->e[i]);
    }
    return 0;
}

void carmin_send_dir_tar(struct gj_req *r, PGconn *c, const char *path)
{
    struct tar_stream *s = calloc(1, sizeof *s);
    if (!s) {
        carmin_error(r, CARMIN_INTERNAL, "out of memory");
        return;
    }
    s->pool = r->srv->db;
    if (gj_db_begin(c) != 0) {
        free(s);
        carmin_unavailable(r);
        return;
    }
    if (read_entries(r, c, path, s) != 0) {
        free(s->e);
        free(s);
        return;
    }
    s->conn = gj_req_take_db(r);
    struct MHD_Response *resp = MHD_create_response_from_callback(s->total, 64 * 1024, tar_read, s, tar_free);
    if (!resp) {
        tar_free(s);
        carmin_error(r, CARMIN_INTERNAL, "out of memory");
        return;
    }
    char disp[CARMIN_PATH_MAX + 40];
    snprintf(disp, sizeof disp, "attachment; filename=\"%s.tar\"", s->e[0].name);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-tar");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_DISPOSITION, disp);
    gj_http_user_bytes(resp, 0, NULL);   /* attachment above, with the directory's name */
    gj_respond(r, 200, resp, s->total);
}
