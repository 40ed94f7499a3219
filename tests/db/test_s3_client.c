/*
 * test_s3_client.c — the S3 client against a real S3 server: OpenStack Swift with s3api, started
 * around this program by tests/integration/swift_s3.py (GJ_S3_ENDPOINT, GJ_S3_BUCKET, the AWS_*
 * keys in the environment). Whole objects, ranges, a multipart upload with per-part SHA-256,
 * aborting and listing uploads, a missing object, an unreachable store, presigned URLs and
 * the shared-credentials file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "service/db/s3_client.h"

static struct gj_s3 *s3;
static struct gj_s3_conn *conn;

/* A call that must succeed; the store's complaint is printed when it does not. */
#define S3_OK(call)                                                              \
    do {                                                                         \
        int rc_ = (call);                                                        \
        if (rc_ != GJ_S3_OK)                                                     \
            fprintf(stderr, "%s: %d: %s\n", #call, rc_, gj_s3_conn_error(conn)); \
        assert_int_equal(rc_, GJ_S3_OK);                                         \
    } while (0)

struct collected {
    unsigned char *data;
    size_t len, cap;
};

static int collect(const void *data, size_t len, void *arg)
{
    struct collected *c = arg;
    if (c->len + len > c->cap)
        return 1;
    memcpy(c->data + c->len, data, len);
    c->len += len;
    return 0;
}

static int setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct gj_s3_config cfg = { .endpoint = getenv("GJ_S3_ENDPOINT"), .bucket = getenv("GJ_S3_BUCKET"),
                                .region = getenv("GJ_S3_REGION"), .access_key = getenv("AWS_ACCESS_KEY_ID"),
                                .secret_key = getenv("AWS_SECRET_ACCESS_KEY") };
    char why[256];
    s3 = gj_s3_new(&cfg, why, sizeof why);
    if (!s3) {
        fprintf(stderr, "no S3 store: %s (run under tests/integration/swift_s3.py)\n", why);
        return -1;
    }
    conn = gj_s3_conn_new(s3);
    return conn ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    gj_s3_conn_free(conn);
    gj_s3_free(s3);
    curl_global_cleanup();
    return 0;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 2654435761u + seed) >> 13);
}

struct listed {
    int n;
    uint64_t bytes;
};

static int on_object(const char *key, uint64_t size, void *arg)
{
    struct listed *l = arg;
    (void)key;
    l->n++;
    l->bytes += size;
    return 0;
}

static void test_put_get_range_head_delete(void **state)
{
    (void)state;
    size_t n = 300000;
    unsigned char *data = malloc(n);
    fill(data, n, 1);
    S3_OK(gj_s3_put(conn, "t/one", data, n, NULL, "text/plain"));

    uint64_t size = 0;
    char etag[GJ_S3_ETAG_MAX];
    S3_OK(gj_s3_head(conn, "t/one", &size, etag));
    assert_int_equal(size, n);
    assert_true(etag[0] == '"');

    struct collected got = { malloc(n), 0, n };
    uint64_t total = 0;
    S3_OK(gj_s3_get(conn, "t/one", 0, 0, NULL, collect, &got, &total));
    assert_int_equal(got.len, n);
    assert_int_equal(total, n);
    assert_memory_equal(got.data, data, n);

    got.len = 0;
    S3_OK(gj_s3_get(conn, "t/one", 1000, 777, NULL, collect, &got, &total));
    assert_int_equal(got.len, 777);
    assert_int_equal(total, n);
    assert_memory_equal(got.data, data + 1000, 777);

    /* The object's ETag as a precondition: right passes, wrong is refused. */
    got.len = 0;
    S3_OK(gj_s3_get(conn, "t/one", 0, 10, etag, collect, &got, NULL));
    assert_int_equal(gj_s3_get(conn, "t/one", 0, 10, "\"0123\"", collect, &got, NULL), GJ_S3_PRECONDITION);

    S3_OK(gj_s3_put(conn, "t/two", data, 10, NULL, NULL));
    struct listed l = { 0 };
    S3_OK(gj_s3_list_objects(conn, "t/", on_object, &l));
    assert_int_equal(l.n, 2);
    assert_int_equal(l.bytes, n + 10);
    S3_OK(gj_s3_delete(conn, "t/two"));
    S3_OK(gj_s3_delete(conn, "t/one"));
    assert_int_equal(gj_s3_head(conn, "t/one", &size, NULL), GJ_S3_NOT_FOUND);
    got.len = 0;
    assert_int_equal(gj_s3_get(conn, "t/one", 0, 0, NULL, collect, &got, NULL), GJ_S3_NOT_FOUND);
    S3_OK(gj_s3_delete(conn, "t/one"));   /* absent: still success */
    free(got.data);
    free(data);
}

static void sha256(const void *p, size_t n, unsigned char out[32])
{
    unsigned int len = 0;
    EVP_Digest(p, n, out, &len, EVP_sha256(), NULL);
}

static void test_multipart(void **state)
{
    (void)state;
    size_t part = 5u * 1024 * 1024, n = part + 12345;
    unsigned char *data = malloc(n);
    fill(data, n, 7);
    char id[GJ_S3_UPLOAD_ID_MAX];
    S3_OK(gj_s3_multipart_create(conn, "t/multi", "application/octet-stream", id));
    char (*etags)[GJ_S3_ETAG_MAX] = calloc(2, sizeof *etags);
    unsigned char md[32];
    sha256(data, part, md);
    S3_OK(gj_s3_multipart_part(conn, "t/multi", id, 1, data, part, md, etags[0]));
    /* A payload hash that is not the part's: the store refuses it. */
    char bad[GJ_S3_ETAG_MAX];
    assert_int_not_equal(gj_s3_multipart_part(conn, "t/multi", id, 2, data + part, n - part, md, bad), GJ_S3_OK);
    S3_OK(gj_s3_multipart_part(conn, "t/multi", id, 2, data + part, n - part, NULL, etags[1]));
    assert_int_equal(gj_s3_multipart_complete(conn, "t/multi", id, (const char(*)[GJ_S3_ETAG_MAX])etags, 2),
                     GJ_S3_OK);
    struct collected got = { malloc(n), 0, n };
    S3_OK(gj_s3_get(conn, "t/multi", 0, 0, NULL, collect, &got, NULL));
    assert_int_equal(got.len, n);
    assert_memory_equal(got.data, data, n);
    /* A range across the parts' boundary. */
    got.len = 0;
    S3_OK(gj_s3_get(conn, "t/multi", part - 10, 20, NULL, collect, &got, NULL));
    assert_memory_equal(got.data, data + part - 10, 20);
    S3_OK(gj_s3_delete(conn, "t/multi"));
    free(got.data);
    free(etags);
    free(data);
}

struct seen {
    int n;
    char keys[8][64];
    char ids[8][GJ_S3_UPLOAD_ID_MAX];
    time_t when;
};

static int on_upload(const char *key, const char *upload_id, time_t initiated, void *arg)
{
    struct seen *s = arg;
    if (s->n < 8) {
        snprintf(s->keys[s->n], sizeof s->keys[0], "%s", key);
        snprintf(s->ids[s->n], sizeof s->ids[0], "%s", upload_id);
        s->n++;
    }
    s->when = initiated;
    return 0;
}

static void test_abort_and_list(void **state)
{
    (void)state;
    char a[GJ_S3_UPLOAD_ID_MAX], b[GJ_S3_UPLOAD_ID_MAX], other[GJ_S3_UPLOAD_ID_MAX];
    S3_OK(gj_s3_multipart_create(conn, "stale/a", NULL, a));
    S3_OK(gj_s3_multipart_create(conn, "stale/b", NULL, b));
    S3_OK(gj_s3_multipart_create(conn, "elsewhere/c", NULL, other));
    char etag[GJ_S3_ETAG_MAX];
    S3_OK(gj_s3_multipart_part(conn, "stale/a", a, 1, "xyz", 3, NULL, etag));

    struct seen s = { 0 };
    S3_OK(gj_s3_list_uploads(conn, "stale/", on_upload, &s));
    assert_int_equal(s.n, 2);
    assert_string_equal(s.keys[0], "stale/a");
    assert_string_equal(s.keys[1], "stale/b");
    assert_true(s.when > time(NULL) - 3600 && s.when < time(NULL) + 3600);

    S3_OK(gj_s3_multipart_abort(conn, "stale/a", a));
    S3_OK(gj_s3_multipart_abort(conn, "stale/b", b));
    memset(&s, 0, sizeof s);
    S3_OK(gj_s3_list_uploads(conn, "stale/", on_upload, &s));
    assert_int_equal(s.n, 0);
    memset(&s, 0, sizeof s);
    S3_OK(gj_s3_list_uploads(conn, NULL, on_upload, &s));
    assert_int_equal(s.n, 1);
    assert_string_equal(s.keys[0], "elsewhere/c");
    S3_OK(gj_s3_multipart_abort(conn, "elsewhere/c", other));
}

static size_t into(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct collected *c = userdata;
    size_t n = size * nmemb;
    if (c->len + n <= c->cap) {
        memcpy(c->data + c->len, ptr, n);
        c->len += n;
    }
    return n;
}

static long plain_get(const char *url, struct collected *got)
{
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, into);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, got);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    return status;
}

static void test_presigned_get(void **state)
{
    (void)state;
    const char body[] = "presigned bytes";
    S3_OK(gj_s3_put(conn, "t/pre sign+d", body, sizeof body - 1, NULL, NULL));
    char *url = gj_s3_presign_get(s3, "t/pre sign+d", 300, time(NULL), "attachment; filename=\"x.bin\"");
    assert_non_null(url);
    assert_null(strstr(url, getenv("AWS_SECRET_ACCESS_KEY")));
    unsigned char buf[256];
    struct collected got = { buf, 0, sizeof buf };
    assert_int_equal(plain_get(url, &got), 200);
    assert_int_equal(got.len, sizeof body - 1);
    assert_memory_equal(buf, body, got.len);
    /* Another signature, or an expired URL, is refused. */
    char *sig = strstr(url, "X-Amz-Signature=") + 16;
    *sig = *sig == '0' ? '1' : '0';
    got.len = 0;
    assert_int_equal(plain_get(url, &got), 403);
    free(url);
    url = gj_s3_presign_get(s3, "t/pre sign+d", 60, time(NULL) - 3600, NULL);
    got.len = 0;
    assert_int_equal(plain_get(url, &got), 403);
    free(url);
    assert_null(gj_s3_presign_get(s3, "t/x", 0, time(NULL), NULL));
    S3_OK(gj_s3_delete(conn, "t/pre sign+d"));
}

static void test_unreachable_store(void **state)
{
    (void)state;
    struct gj_s3_config cfg = { .endpoint = "http://127.0.0.1:9", .bucket = "nothing-here", .access_key = "k",
                                .secret_key = "s" };
    char why[256];
    struct gj_s3 *gone = gj_s3_new(&cfg, why, sizeof why);
    assert_non_null(gone);
    struct gj_s3_conn *c = gj_s3_conn_new(gone);
    assert_int_equal(gj_s3_put(c, "k", "x", 1, NULL, NULL), GJ_S3_UNREACHABLE);
    assert_non_null(strstr(gj_s3_conn_error(c), "PUT k"));
    assert_null(strstr(gj_s3_conn_error(c), "s"  "ecret"));
    gj_s3_conn_free(c);
    gj_s3_free(gone);

    /* Wrong credentials: an error, not "unreachable". */
    cfg.endpoint = getenv("GJ_S3_ENDPOINT");
    cfg.bucket = getenv("GJ_S3_BUCKET");
    cfg.secret_key = "wrong";
    cfg.access_key = getenv("AWS_ACCESS_KEY_ID");
    gone = gj_s3_new(&cfg, why, sizeof why);
    c = gj_s3_conn_new(gone);
    assert_int_equal(gj_s3_put(c, "k", "x", 1, NULL, NULL), GJ_S3_ERROR);
    assert_non_null(strstr(gj_s3_conn_error(c), "403"));
    assert_null(strstr(gj_s3_conn_error(c), "wrong"));
    gj_s3_conn_free(c);
    gj_s3_free(gone);
}

static void test_config_checked(void **state)
{
    (void)state;
    char why[256];
    struct gj_s3_config cfg = { .endpoint = "ftp://x", .bucket = "bucket", .access_key = "k", .secret_key = "s" };
    assert_null(gj_s3_new(&cfg, why, sizeof why));
    assert_non_null(strstr(why, "--s3-endpoint"));
    cfg.endpoint = "https://h/path";
    assert_null(gj_s3_new(&cfg, why, sizeof why));
    cfg.endpoint = "https://h:9000";
    cfg.bucket = "No_Such";
    assert_null(gj_s3_new(&cfg, why, sizeof why));
    assert_non_null(strstr(why, "--s3-bucket"));
    cfg.bucket = "bucket";
    cfg.secret_key = "";
    assert_null(gj_s3_new(&cfg, why, sizeof why));
    assert_non_null(strstr(why, "AWS_SECRET_ACCESS_KEY"));
}

static void test_credentials_file(void **state)
{
    (void)state;
    char path[] = "/tmp/gj-s3-cred-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char text[] = "[other]\naws_access_key_id = nope\naws_secret_access_key = nope\n"
                        "[default]\r\naws_access_key_id = acct:user\r\naws_secret_access_key=s3cr=t \r\n";
    assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    char key[128], secret[128], why[256];
    assert_int_equal(gj_s3_read_credentials(path, NULL, key, sizeof key, secret, sizeof secret, why, sizeof why), 0);
    assert_string_equal(key, "acct:user");
    assert_string_equal(secret, "s3cr=t");
    assert_int_equal(gj_s3_read_credentials(path, "missing", key, sizeof key, secret, sizeof secret, why,
                                            sizeof why), -1);
    assert_non_null(strstr(why, "[missing]"));
    assert_null(strstr(why, "s3cr"));
    chmod(path, 0644);   /* readable by others: refused */
    assert_int_equal(gj_s3_read_credentials(path, NULL, key, sizeof key, secret, sizeof secret, why, sizeof why), -1);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_checked),
        cmocka_unit_test(test_credentials_file),
        cmocka_unit_test(test_put_get_range_head_delete),
        cmocka_unit_test(test_multipart),
        cmocka_unit_test(test_abort_and_list),
        cmocka_unit_test(test_presigned_get),
        cmocka_unit_test(test_unreachable_store),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
