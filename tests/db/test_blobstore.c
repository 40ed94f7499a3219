/*
 * test_blobstore.c — blobs as large objects against a real PostgreSQL: a 20 MiB
 * blob written in odd-sized chunks, ranges read back, SHA-256, abort leaving
 * nothing behind, and the caller's-transaction path (own_txn = 0). Run twice: on large
 * objects, and under tests/integration/swift_s3.py (GJ_S3_ENDPOINT set) on a real S3 store,
 * where "what is stored" counts the bucket's objects and uploads after a maintenance pass.
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
#include "service/db/blob_s3.h"
#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/jobs/queue.h"
#include "pg_test_util.h"

#define BIG (20u * 1024 * 1024)

static char url[1024];
static char tenant[GJ_UUID_LEN + 1];
static char other_tenant[GJ_UUID_LEN + 1];
static unsigned char *data;
static struct gj_s3 *s3;   /* NULL: large objects */

static int count_object(const char *key, uint64_t size, void *arg)
{
    (void)key, (void)size;
    ++*(long *)arg;
    return 0;
}

static int count_upload(const char *key, const char *upload_id, time_t initiated, void *arg)
{
    (void)key, (void)upload_id, (void)initiated;
    ++*(long *)arg;
    return 0;
}

/* What the blobs' bytes occupy: large objects, or the store's objects and uploads once the
 * maintenance pass has deleted what no blob owns. */
static long scalar(PGconn *c, const char *sql);

static long stored(PGconn *c)
{
    if (!s3)
        return scalar(c, "SELECT count(*) FROM pg_largeobject_metadata");
    int deleted, aborted;
    assert_int_equal(gj_blob_s3_maintain(c, 0, &deleted, &aborted), 0);
    struct gj_s3_conn *sc = gj_s3_conn_new(s3);
    long n = 0;
    assert_int_equal(gj_s3_list_objects(sc, "blobs/", count_object, &n), GJ_S3_OK);
    assert_int_equal(gj_s3_list_uploads(sc, "blobs/", count_upload, &n), GJ_S3_OK);
    gj_s3_conn_free(sc);
    return n;
}

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
    if (getenv("GJ_S3_ENDPOINT")) {
        struct gj_s3_config cfg = { .endpoint = getenv("GJ_S3_ENDPOINT"), .bucket = getenv("GJ_S3_BUCKET"),
                                    .access_key = getenv("AWS_ACCESS_KEY_ID"),
                                    .secret_key = getenv("AWS_SECRET_ACCESS_KEY") };
        char why[256];
        s3 = gj_s3_new(&cfg, why, sizeof why);
        if (!s3 || gj_blobstore_use_s3(s3, url, 1) != 0)
            return -1;
    }
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
    gj_blobstore_use_postgres();
    gj_s3_free(s3);
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
    struct gj_blob_reader *r = gj_blob_reader_open_blob(c, &info, NULL);
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
    assert_int_equal(gj_blob_export_blob(c, &info, path, NULL), 0);
    char *file;
    size_t len;
    assert_int_equal(gj_read_file(path, BIG + 1, &file, &len), 0);
    assert_int_equal(len, BIG);
    assert_memory_equal(file, data, BIG);
    free(file);
    unlink(path);
    free(buf);

    /* Deleting the row takes the large object with it (trigger of 0001), or its object (0018). */
    long los = stored(c);
    const char *p[1] = { id };
    assert_int_equal(gj_db_cmd(c, "DELETE FROM blobs WHERE id = $1::uuid", 1, p), 0);
    assert_int_equal(stored(c), los - 1);
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
    long los = stored(c);

    struct gj_blob_writer *w = gj_blob_writer_open(c, tenant, "x/y", 1);
    assert_non_null(w);
    write_odd(w, 3 * 1048576 + 11);
    gj_blob_writer_abort(w);
    assert_int_equal(PQtransactionStatus(c), PQTRANS_IDLE);
    assert_int_equal(scalar(c, "SELECT count(*) FROM blobs"), blobs);
    assert_int_equal(stored(c), los);

    /* own_txn = 0, aborted inside the caller's transaction that then commits. */
    assert_int_equal(gj_db_begin(c), 0);
    w = gj_blob_writer_open(c, tenant, "x/y", 0);
    assert_non_null(w);
    write_odd(w, 2 * 1048576 + 5);
    gj_blob_writer_abort(w);
    assert_int_equal(gj_db_commit(c), 0);
    assert_int_equal(scalar(c, "SELECT count(*) FROM blobs"), blobs);
    assert_int_equal(stored(c), los);

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
    assert_int_equal(stored(c), los);

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
    long los = stored(c);

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
    assert_int_equal(stored(c), los);

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
    assert_int_equal(stored(c), los + 2);
    assert_int_equal(gj_blob_lookup(c, tenant, ids[1], &info), 1);
    assert_int_equal(info.size, 100001);
    unsigned char want[32];
    sha(data, 100001, want);
    assert_memory_equal(info.sha256, want, 32);
    /* Deleting the job takes its blobs and their large objects. */
    assert_int_equal(gj_db_cmd(c, "DELETE FROM jobs WHERE id = $1::uuid", 1, (const char *[]){ job }), 0);
    assert_int_equal(scalar(c, "SELECT count(*) FROM blobs"), blobs);
    assert_int_equal(stored(c), los);
    PQfinish(c);
}

/* S3 only: an object deleted behind the service's back, and a killed replica's upload. */
static void test_store_faults(void **state)
{
    (void)state;
    if (!s3)
        skip();
    PGconn *c = gj_test_pg_connect(url);
    struct gj_blob_writer *w = gj_blob_writer_open(c, tenant, NULL, 1);
    assert_non_null(w);
    write_odd(w, 17u * 1024 * 1024 + 3);   /* three parts; exported in four ranges */
    char id[GJ_UUID_LEN + 1];
    assert_int_equal(gj_blob_writer_commit(w, NULL, id), 0);
    struct gj_blob_info info;
    assert_int_equal(gj_blob_lookup(c, tenant, id, &info), 1);
    assert_int_equal(info.lo_oid, 0);
    assert_true(strncmp(info.s3_key, "blobs/", 6) == 0);
    assert_int_equal(scalar(c, "SELECT count(*) FROM blob_objects_unowned"), 0);

    struct gj_s3_conn *sc = gj_s3_conn_new(s3);
    assert_int_equal(gj_s3_delete(sc, info.s3_key), GJ_S3_OK);
    int missing = 0;
    assert_null(gj_blob_reader_open_blob(c, &info, &missing));
    assert_int_equal(missing, 1);
    char path[GJ_PATH_MAX];
    snprintf(path, sizeof path, "%s/gone.bin", gj_test_dir());
    missing = 0;
    assert_int_equal(gj_blob_export_blob(c, &info, path, &missing), -1);
    assert_int_equal(missing, 1);
    assert_int_equal(access(path, F_OK), -1);   /* no half file */
    const char *p[1] = { id };
    assert_int_equal(gj_db_cmd(c, "DELETE FROM blobs WHERE id = $1::uuid", 1, p), 0);

    /* A blob the caller's transaction cannot take (an owner job that does not exist): the commit
     * fails inside it, holding the upload's record locked, and the abort must not wait for it. */
    long before = stored(c);
    assert_int_equal(gj_db_begin(c), 0);
    w = gj_blob_writer_open(c, tenant, NULL, 0);
    assert_non_null(w);
    write_odd(w, 100);
    assert_int_equal(gj_blob_writer_commit(w, "00000000-0000-0000-0000-00000000abcd", id), -1);
    gj_db_rollback(c);
    assert_int_equal(stored(c), before);

    /* A replica killed mid-upload: its parts stay in the store until the maintenance pass. */
    char upload[GJ_S3_UPLOAD_ID_MAX], etag[GJ_S3_ETAG_MAX];
    assert_int_equal(gj_s3_multipart_create(sc, "blobs/killed/upload", NULL, upload), GJ_S3_OK);
    assert_int_equal(gj_s3_multipart_part(sc, "blobs/killed/upload", upload, 1, data, 1000, NULL, etag), GJ_S3_OK);
    int deleted, aborted;
    assert_int_equal(gj_blob_s3_maintain(c, 3600, &deleted, &aborted), 0);
    assert_int_equal(aborted, 0);   /* younger than the grace: may still be going */
    sleep(3);   /* the store rounds an upload's start up to the second */
    assert_int_equal(gj_blob_s3_maintain(c, 1, &deleted, &aborted), 0);
    assert_int_equal(aborted, 1);
    long uploads = 0;
    assert_int_equal(gj_s3_list_uploads(sc, "blobs/", count_upload, &uploads), GJ_S3_OK);
    assert_int_equal(uploads, 0);
    gj_s3_conn_free(sc);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_roundtrip),
        cmocka_unit_test(test_empty_blob),
        cmocka_unit_test(test_abort_leaves_nothing),
        cmocka_unit_test(test_callers_transaction),
        cmocka_unit_test(test_store_faults),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
