/*
 * crate_zip.c — the crate as a zip, streamed (crate_zip.h). Every entry is stored (method 0)
 * with a data descriptor (flag bit 3): its CRC-32 is computed as its bytes go out, so no
 * file is read twice and none is held in memory. The blobs are read from large objects in
 * the request's transaction, which the response takes over. Files of 4 GiB or more would
 * need ZIP64: such a crate is refused with the advice to fetch its outputs one by one.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/api/crate_zip.h"
#include "service/base/log.h"
#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/http/http_server.h"

#define MAX_ENTRIES 4096
#define ZIP_LIMIT 0xFFFFFFFFull

struct entry {
    char *name;
    unsigned int lo_oid;     /* 0: the bytes are `data` */
    const char *data;
    uint64_t size;
    uint32_t crc;
    uint64_t offset;         /* of its local header */
};

enum phase { P_HEADER, P_DATA, P_DESCRIPTOR, P_CENTRAL, P_END, P_DONE };

struct zip_stream {
    json_t *blobs;           /* blob ids added: the same bytes once, as the crate has them (ro_crate.c) */
    struct gj_db_pool *pool;
    PGconn *conn;
    char *metadata;          /* ro-crate-metadata.json */
    struct entry *e;
    size_t n, cur;
    enum phase phase;
    struct gj_blob_reader *reader;
    uint64_t done;           /* of the current entry's data */
    uint64_t written;        /* bytes of the zip so far */
    uint64_t central_at;
    unsigned char pend[512];
    size_t pend_len, pend_off;
};

static uint32_t crc_table[256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t crc_update(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    crc = ~crc;
    while (len--)
        crc = crc_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

static void put16(unsigned char **p, unsigned v)
{
    (*p)[0] = (unsigned char)v;
    (*p)[1] = (unsigned char)(v >> 8);
    *p += 2;
}

static void put32(unsigned char **p, uint32_t v)
{
    put16(p, v & 0xFFFF);
    put16(p, v >> 16);
}

/* Local header (30 bytes + name), with the sizes and CRC left to the descriptor. */
static void local_header(struct zip_stream *s, const struct entry *e)
{
    unsigned char *p = s->pend;
    size_t nl = strlen(e->name);
    put32(&p, 0x04034b50);
    put16(&p, 20);           /* version needed: 2.0 */
    put16(&p, 0x0808);       /* bit 3: data descriptor; bit 11: UTF-8 names */
    put16(&p, 0);            /* stored */
    put16(&p, 0);            /* time */
    put16(&p, 0x21);         /* date: 1980-01-01 */
    put32(&p, 0);
    put32(&p, 0);
    put32(&p, 0);
    put16(&p, (unsigned)nl);
    put16(&p, 0);
    memcpy(p, e->name, nl);
    s->pend_len = 30 + nl;
    s->pend_off = 0;
}

static void descriptor(struct zip_stream *s, const struct entry *e)
{
    unsigned char *p = s->pend;
    put32(&p, 0x08074b50);
    put32(&p, e->crc);
    put32(&p, (uint32_t)e->size);
    put32(&p, (uint32_t)e->size);
    s->pend_len = 16;
    s->pend_off = 0;
}

static void central(struct zip_stream *s, const struct entry *e)
{
    unsigned char *p = s->pend;
    size_t nl = strlen(e->name);
    put32(&p, 0x02014b50);
    put16(&p, 0x031e);       /* made by: Unix, 3.0 */
    put16(&p, 20);
    put16(&p, 0x0808);
    put16(&p, 0);
    put16(&p, 0);
    put16(&p, 0x21);
    put32(&p, e->crc);
    put32(&p, (uint32_t)e->size);
    put32(&p, (uint32_t)e->size);
    put16(&p, (unsigned)nl);
    put16(&p, 0);
    put16(&p, 0);
    put16(&p, 0);
    put16(&p, 0);
    put32(&p, 0100644u << 16);   /* external attributes: a regular file, rw-r--r-- */
    put32(&p, (uint32_t)e->offset);
    memcpy(p, e->name, nl);
    s->pend_len = 46 + nl;
    s->pend_off = 0;
}

static void end_record(struct zip_stream *s)
{
    unsigned char *p = s->pend;
    put32(&p, 0x06054b50);
    put16(&p, 0);
    put16(&p, 0);
    put16(&p, (unsigned)s->n);
    put16(&p, (unsigned)s->n);
    put32(&p, (uint32_t)(s->written - s->central_at));
    put32(&p, (uint32_t)s->central_at);
    put16(&p, 0);
    s->pend_len = 22;
    s->pend_off = 0;
}

/* Queues the next piece of the zip's structure. 0, or -1 when a blob cannot be read. */
static int advance(struct zip_stream *s)
{
    switch (s->phase) {
    case P_HEADER:
        if (s->cur == s->n) {
            s->central_at = s->written;
            s->cur = 0;
            s->phase = s->n ? P_CENTRAL : P_END;
            return advance(s);
        }
        s->e[s->cur].offset = s->written;
        local_header(s, &s->e[s->cur]);
        s->done = 0;
        s->phase = P_DATA;
        if (s->e[s->cur].lo_oid && !(s->reader = gj_blob_reader_open(s->conn, s->e[s->cur].lo_oid)))
            return -1;
        return 0;
    case P_DATA:
        if (s->reader) {
            gj_blob_reader_close(s->reader);
            s->reader = NULL;
        }
        descriptor(s, &s->e[s->cur]);
        s->phase = P_DESCRIPTOR;
        return 0;
    case P_DESCRIPTOR:
        s->cur++;
        s->phase = P_HEADER;
        return advance(s);
    case P_CENTRAL:
        if (s->cur == s->n) {
            s->phase = P_END;
            return advance(s);
        }
        central(s, &s->e[s->cur++]);
        return 0;
    case P_END:
        end_record(s);
        s->phase = P_DONE;
        return 0;
    case P_DONE:
        return 0;
    }
    return -1;
}

/* Copies data of the current entry into buf: bytes, 0 at its end, -1 on error. */
static long entry_data(struct zip_stream *s, char *buf, size_t max)
{
    struct entry *e = &s->e[s->cur];
    if (s->done >= e->size)
        return 0;
    size_t n = e->size - s->done < max ? (size_t)(e->size - s->done) : max;
    long got = n;
    if (e->lo_oid)
        got = gj_blob_reader_read(s->reader, s->done, buf, n);
    else
        memcpy(buf, e->data + s->done, n);
    if (got <= 0)
        return -1;
    e->crc = crc_update(e->crc, buf, (size_t)got);
    s->done += (uint64_t)got;
    return got;
}

static ssize_t zip_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct zip_stream *s = cls;
    (void)pos;
    for (;;) {
        if (s->pend_off < s->pend_len) {
            size_t n = s->pend_len - s->pend_off < max ? s->pend_len - s->pend_off : max;
            memcpy(buf, s->pend + s->pend_off, n);
            s->pend_off += n;
            s->written += n;
            return (ssize_t)n;
        }
        if (s->phase == P_DATA) {
            long got = entry_data(s, buf, max);
            if (got < 0) {
                gj_log_warn("provenance", "zip: entry %s could not be read", s->e[s->cur].name);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            if (got > 0) {
                s->written += (uint64_t)got;
                return got;
            }
        }
        if (s->phase == P_DONE)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (advance(s) != 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

static void zip_free(void *cls)
{
    struct zip_stream *s = cls;
    if (s->reader)
        gj_blob_reader_close(s->reader);
    if (s->conn) {
        gj_db_rollback(s->conn);
        gj_db_release(s->pool, s->conn);
    }
    for (size_t i = 0; i < s->n; i++)
        free(s->e[i].name);
    free(s->e);
    free(s->metadata);
    json_decref(s->blobs);
    free(s);
}

/* Adds the files of one list (the attempt's inputs or the outputs) under dir. Blobs gone
 * since are left out: the crate still describes them by digest. 0, -1 error, 1 too big. */
static int add_files(struct zip_stream *s, PGconn *c, const char *tenant, const json_t *files, const char *dir)
{
    size_t i;
    json_t *f;
    json_array_foreach((json_t *)files, i, f) {
        const char *blob = json_string_value(json_object_get(f, "blob"));
        struct gj_blob_info info;
        if (!blob || json_object_get(s->blobs, blob))
            continue;
        if (json_object_set_new(s->blobs, blob, json_true()))
            return -1;
        int rc = gj_blob_lookup(c, tenant, blob, &info);
        if (rc < 0)
            return -1;
        if (rc == 0)
            continue;
        if (info.size >= ZIP_LIMIT)
            return 1;
        if (s->n == MAX_ENTRIES)
            return 1;
        struct entry *e = &s->e[s->n];
        if (asprintf(&e->name, "%s%s", dir, json_string_value(json_object_get(f, "name"))) < 0)
            return -1;
        e->lo_oid = info.lo_oid;
        e->size = info.size;
        s->n++;
    }
    return 0;
}

static const json_t *inputs_of(const json_t *job)
{
    json_t *attempts = json_object_get(job, "attempts");
    size_t n = json_array_size(attempts);
    return n ? json_object_get(json_array_get(attempts, n - 1), "inputs") : json_object_get(job, "inputs");
}

static int add_job(struct zip_stream *s, PGconn *c, const char *tenant, const json_t *job, const char *prefix)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%sinputs/", prefix);
    int rc = add_files(s, c, tenant, inputs_of(job), dir);
    snprintf(dir, sizeof dir, "%soutputs/", prefix);
    return rc ? rc : add_files(s, c, tenant, json_object_get(job, "outputs"), dir);
}

static int fill(struct zip_stream *s, PGconn *c, const char *tenant, const json_t *record)
{
    struct entry *e = &s->e[s->n++];
    if (!(e->name = strdup("ro-crate-metadata.json")))
        return -1;
    e->data = s->metadata;
    e->size = strlen(s->metadata);
    int rc = add_job(s, c, tenant, record, "");
    size_t i;
    json_t *child;
    char prefix[96];
    json_array_foreach(json_object_get(record, "children"), i, child) {
        if (rc)
            break;
        snprintf(prefix, sizeof prefix, "children/%s/", json_string_value(json_object_get(child, "id")));
        rc = add_job(s, c, tenant, child, prefix);
    }
    return rc;
}

static void zip_fail(struct gj_req *r, struct zip_stream *s, int rc)
{
    if (rc > 0)
        gj_problem(r, 413, NULL, "the crate's files are too many (over %d) or one is 4 GiB or more: fetch the "
                   "crate's metadata (format=json) and the outputs one by one", MAX_ENTRIES - 1);
    else
        gj_respond_unavailable(r);
    s->conn = NULL;   /* the request's: given back with it */
    zip_free(s);
}

void gj_crate_zip_respond(struct gj_req *r, json_t *crate, json_t *record)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, crc_init);
    struct zip_stream *s = calloc(1, sizeof *s);
    char disp[128];
    snprintf(disp, sizeof disp, "attachment; filename=\"job-%s-crate.zip\"", json_string_value(json_object_get(record, "id")));
    if (s) {
        s->metadata = json_dumps(crate, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        s->e = calloc(MAX_ENTRIES, sizeof *s->e);
        s->blobs = json_object();
    }
    json_decref(crate);
    if (!s || !s->metadata || !s->e || !s->blobs) {
        json_decref(record);
        if (s)
            zip_fail(r, s, -1);
        else
            gj_respond_unavailable(r);
        return;
    }
    PGconn *c = r->db;
    int rc = gj_db_begin(c) == 0 ? fill(s, c, r->who.tenant_id, record) : -1;
    json_decref(record);
    if (rc != 0) {
        gj_db_rollback(c);
        zip_fail(r, s, rc);
        return;
    }
    s->pool = r->srv->db;
    s->conn = gj_req_take_db(r);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, zip_read, s, zip_free);
    if (!resp) {
        zip_free(s);
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    gj_respond(r, 200, resp, 0);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/zip");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "private, no-cache");
    gj_http_user_bytes(resp, 0, NULL);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_DISPOSITION, disp);
}
