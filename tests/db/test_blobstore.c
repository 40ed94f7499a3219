/*
 * test_blobstore.c — blobs as large objects against a real PostgreSQL: a 20 MiB
 * blob written in odd-sized chunks, ranges read back, SHA-256, abort leaving
 * nothing behind, and the caller's-transaction path (own_txn = 0).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <openssl/evp.h>

#include "common/fsutil.h"
#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/jobs/queue.h"
#include "pg_test_util.h"

#define BIG (20u * 1024 * 1024)

static char url[1024];
static char tenant[GJ_UUID_LEN + 1];
static char other_tenant[GJ_UUID_LEN + 1];
static unsigned char *data;

static long scalar(PGconn *c, const char *sql)
{
    PGresult *r = gj_db_exec(c, sql, 0, NULL, NULL);
    assert_non_null(r);
    long v = strtol(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return v;
}

static void make_tenant(PGconn *c, const char *name, char id[GJ_UUID_LEN + 1])
{
    const char *p[1] = { name };
    PGresult *r = gj_db_exec(c, "INSERT INTO tenants (name) VALUES ($1) RETURNING id", 1, p, NULL);
    assert_non_null(r);
    snprintf(id, GJ_UUID_LEN + 1, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
}

static int setup(void **state)
{
    (void)state;
    if (gj_test_pg_migrated_db(url, sizeof url) != 0)
        return -1;
    PGconn *c = gj_test_pg_connect(url);
    make_tenant(c, "blobs", tenant);
    make_tenant(c, "other", other_tenant);
    PQfinish(c);
    data = malloc(BIG);
    if (!data)
        return -1;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < BIG; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data[i] = (unsigned char)x;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(data);
    return 0;
}

static void sha(const void *p, size_t n, unsigned char out[32])
{
    unsigned int len;
    assert_int_equal(EVP_Digest(p, n, out, &len, EVP_sha256(), NULL), 1);
}

static void write_odd(struct gj_blob_writer *w, size_t total)
{
    static const size_t sizes[] = { 1, 7, 4093, 65537, 3, 1048577, 999, 2097169, 12345, 131071 };
    size_t off = 0;
    for (int i = 0; off < total; i++) {
        size_t n = sizes[i % 10];
        if (n > total - off)
            n = total - off;
        assert_int_equal(gj_blob_writer_write(w, data + off, n), 0);
        off += n;
        assert_int_equal(gj_blob_writer_size(w), off);
    }
}

static void test_big_roundtrip(void **state)
{
    (void)state;
    PGconn *c = gj_test_pg_connect(url);
    struct gj_blob_writer *w = gj_blob_writer_open(c, tenant, "application/x-test", 1);
    assert_non_null(w);
    write_odd(w, BIG);
    unsigned char got[32], want[32];
    gj_blob_writer_digest(w, got);
    sha(data, BIG, want);
    assert_memory_equal(got, want, 32);
    char id[GJ_UUID_LEN + 1];
    assert_int_equal(gj_blob_writer_commit(w, NULL, id), 0);
    assert_int_equal(strlen(id), GJ_UUID_LEN);
    assert_int_equal(PQtransactionStatus(c), PQTRANS_IDLE);

    struct gj_blob_info info;
    assert_int_equal(gj_blob_lookup(c, tenant, id, &info), 1);
    assert_int_equal(info.size, BIG);
    assert_memory_equal(info.sha256, want, 32);
    assert_string_equal(info.content_type, "application/x-test");
    assert_string_equal(info.tenant_id, tenant);
    assert_int_equal(gj_blob_lookup(c, NULL, id, &info), 1);
    assert_int_equal(gj_blob_lookup(c, other_tenant, id, &info), 0);   /* another tenant: not found */
    assert_int_equal(gj_blob_lookup(c, tenant, "not-a-uuid", &info), 0);
    assert_int_equal(gj_blob_lookup(c, tenant, "00000000-0000-0000-0000-000000000000", &info), 0);

    /* Ranges, in and out of order, across chunk boundaries and past the end. */
    assert_int_equal(gj_db_begin(c), 0);
    struct gj_blob_reader *r = gj_blob_reader_open(c, info.lo_oid);
    assert_non_null(r);
    static const uint64_t ranges[][2] = {
        { 0, 100 }, { 1048576 - 3, 10 }, { 5, 3 * 1048576 + 17 }, { BIG - 5, 5 }, { 17, 1 },
        { 12345678, 2 * 1048576 + 1 }, { 12345678 + 2 * 1048576 + 1, 4096 }, { 0, BIG },
    };
    unsigned char *buf = malloc(BIG + 100);
    assert_non_null(buf);
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        long n = gj_blob_reader_read(r, ranges[i][0], buf, (size_t)ranges[i][1]);
        assert_int_equal(n, (long)ranges[i][1]);
        assert_memory_equal(buf, data + ranges[i][0], (size_t)ranges[i][1]);
    }
    assert_int_equal(gj_blob_reader_read(r, BIG - 5, buf, 100), 5);
    assert_memory_equal(buf, data + BIG - 5, 5);
    assert_int_equal(gj_blob_reader_read(r, BIG, buf, 100), 0);
    assert_int_equal(gj_blob_reader_read(r, BIG + 1000, buf, 100), 0);
    gj_blob_reader_close(r);
    assert_int_equal(gj_db_commit(c), 0);

    /* Export (its own transaction) gives the same bytes. */
    char path[GJ_PATH_MAX];
    snprintf(path, sizeof path, "%s/export.bin", gj_test_dir());
    assert_int_equal(gj_blob_export(c, info.lo_oid, path), 0);
    char *file;
    size_t len;
    assert_int_equal(gj_read_file(path, BIG + 1, &file, &len), 0);
    assert_int_equal(len, BIG);
    assert_memory_equal(file, data, BIG);
    free(file);
    unlink(path);
    free(buf);

    /* Deleting the row takes the large object with it (trigger of 0001). */
    long los = scalar(c, "SELECT count(*) FROM pg_largeobject_metadata");
    const char *p[1] = { id };
    assert_int_equal(gj_db_cmd(c, "DELETE FROM blobs WHERE id = $1::uuid", 1, p), 0);
    assert_int_equal(scalar(c, "SELECT count(*) FROM pg_largeobject_metadata"), los - 1);
    PQfinish(c);
}

static void test_empty_blob(void **state)
{
    (void)state;
    PGconn *c = gj_test_pg_connect(url);
    struct gj_blob_writer *w = gj_blob_writer_open(c, tenant, NULL, 1);
    assert_non_null(w);
    char id[GJ_UUID_LEN + 1];
    assert_int_equal(gj_blob_writer_commit(w, NULL, id), 0);
    struct gj_blob_info info;
    assert_int_equal(gj_blob_lookup(c, tenant, id, &info), 1);
    assert_int_equal(info.size, 0);
    char hex[65], b64[45];
    gj_sha256_hex(info.sha256, hex);
    gj_sha256_base64(info.sha256, b64);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_string_equal(b64, "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    assert_string_equal(info.content_type, "application/octet-stream");
    PQfinish(c);
}

static void test_abort_leaves_nothing(void **state)
{
    (void)state;
    PGconn *c = gj_test_pg_connect(url);
    long blobs = scalar(c, "SELECT count(*) FROM blobs");
    long los = scalar(c, "SELECT count(*) FROM pg_largeobject_metadata");

    struct gj_blob_writer *w = gj_blob_writer_open(c, tenant, "x/y", 1);
    assert_non_null(w);
    write_odd(w, 3 * 1048576 + 11);
    gj_blob_writer_abort(w);
    assert_int_equal(PQtransactionStatus(c), PQTRANS_IDLE);
    assert_int_equal(scalar(c, "SELECT count(*) FROM blobs"), blobs);
    assert_int_equal(scalar(c, "SELECT count(*) FROM pg_largeobject_metadata"), los);

    /* own_txn = 0, aborted inside the caller's transaction that then commits. */
    assert_int_equal(gj_db_begin(c), 0);
    w = gj_blob_writer_open(c, tenant, "x/y", 0);
    assert_non_null(w);
    write_odd(w, 2 * 1048576 + 5);
    gj_blob_writer_abort(w);
    assert_int_equal(gj_db_commit(c), 0);
    assert_int_equal(scalar(c, "SELECT count(*) FROM blobs"), blobs);
    assert_int_equal(scalar(c, "SELECT count(*) FROM pg_largeobject_metadata"), los);

    /* A writer that lost its connection midway: commit fails, nothing stays. */
    PGconn *victim = gj_test_pg_connect(url);
    w = gj_blob_writer_open(victim, tenant, "x/y", 1);
    assert_non_null(w);
    write_odd(w, 1048576 + 1);
    PGresult *r = gj_db_exec(victim, "SELECT pg_backend_pid()", 0, NULL, NULL);
    assert_non_null(r);
    const char *p[1] = { PQgetvalue(r, 0, 0) };
    assert_int_equal(gj_db_cmd(c, "SELECT pg_terminate_backend($1::integer, 5000)", 1, p), 0);
    PQclear(r);
    write_odd(w, 0);
    gj_blob_writer_write(w, data, 1048576);   /* fails or not, depending on timing */
    char id[GJ_UUID_LEN + 1];
    assert_int_equal(gj_blob_writer_commit(w, NULL, id), -1);
    PQfinish(victim);
    usleep(200000);
    assert_int_equal(scalar(c, "SELECT count(*) FROM blobs"), blobs);
    assert_int_equal(scalar(c, "SELECT count(*) FROM pg_largeobject_metadata"), los);

    /* Misuse is refused: own_txn inside a transaction, caller's txn without one, a bad tenant. */
    assert_null(gj_blob_writer_open(c, tenant, "x/y", 0));
    assert_int_equal(gj_db_begin(c), 0);
    assert_null(gj_blob_writer_open(c, tenant, "x/y", 1));
    gj_db_rollback(c);
    assert_null(gj_blob_writer_open(c, "nope", "x/y", 1));
    PQfinish(c);
}

static void test_callers_transaction(void **state)
{
    (void)state;
    PGconn *c = gj_test_pg_connect(url);
    long blobs = scalar(c, "SELECT count(*) FROM blobs");
    long los = scalar(c, "SELECT count(*) FROM pg_largeobject_metadata");

    /* Committed by the writer, then rolled back by the caller: nothing stays. */
    assert_int_equal(gj_db_begin(c), 0);
    struct gj_blob_writer *w = gj_blob_writer_open(c, tenant, "a/b", 0);
    assert_non_null(w);
    write_odd(w, 1048576 * 2 + 77);
    char id[GJ_UUID_LEN + 1];
    assert_int_equal(gj_blob_writer_commit(w, NULL, id), 0);
    assert_int_equal(PQtransactionStatus(c), PQTRANS_INTRANS);   /* still the caller's */
    struct gj_blob_info info;
    assert_int_equal(gj_blob_lookup(c, tenant, id, &info), 1);   /* visible inside */
    gj_db_rollback(c);
    assert_int_equal(gj_blob_lookup(c, tenant, id, &info), 0);
    assert_int_equal(scalar(c, "SELECT count(*) FROM blobs"), blobs);
    assert_int_equal(scalar(c, "SELECT count(*) FROM pg_largeobject_metadata"), los);

    /* Two blobs in one caller transaction, with an owner job, committed together. */
    struct gj_submit sub = { .tenant_id = tenant, .kind = "noop" };
    struct gj_submitted made;
    assert_int_equal(gj_queue_submit(c, &sub, &made), GJ_SUBMIT_OK);
    char job[GJ_UUID_LEN + 1];
    snprintf(job, sizeof job, "%s", made.id);
    assert_int_equal(gj_db_begin(c), 0);
    char ids[2][GJ_UUID_LEN + 1];
    for (int i = 0; i < 2; i++) {
        w = gj_blob_writer_open(c, tenant, "a/b", 0);
        assert_non_null(w);
        write_odd(w, 100000 + (size_t)i);
        assert_int_equal(gj_blob_writer_commit(w, job, ids[i]), 0);
    }
    assert_int_equal(gj_db_commit(c), 0);
    assert_int_equal(scalar(c, "SELECT count(*) FROM blobs"), blobs + 2);
    assert_int_equal(scalar(c, "SELECT count(*) FROM pg_largeobject_metadata"), los + 2);
    assert_int_equal(gj_blob_lookup(c, tenant, ids[1], &info), 1);
    assert_int_equal(info.size, 100001);
    unsigned char want[32];
    sha(data, 100001, want);
    assert_memory_equal(info.sha256, want, 32);
    /* Deleting the job takes its blobs and their large objects. */
    assert_int_equal(gj_db_cmd(c, "DELETE FROM jobs WHERE id = $1::uuid", 1, (const char *[]){ job }), 0);
    assert_int_equal(scalar(c, "SELECT count(*) FROM blobs"), blobs);
    assert_int_equal(scalar(c, "SELECT count(*) FROM pg_largeobject_metadata"), los);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_roundtrip),
        cmocka_unit_test(test_empty_blob),
        cmocka_unit_test(test_abort_leaves_nothing),
        cmocka_unit_test(test_callers_transaction),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
