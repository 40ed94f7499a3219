/* Pure parts of the HTTP server: path matching, Range, Content-Digest,
 * ETag matching, job list cursors, timestamps (base64, UUIDs: test_base64.c, test_uuid.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "service/base/base64.h"
#include "service/http/http_server.h"
#include "service/http/http_target.h"

static void test_match_path(void **state)
{
    (void)state;
    char p[GJ_ROUTE_MAX_PARAMS][GJ_PARAM_MAX];
    int n = -1;
    assert_true(gj_http_match_path("/v1/jobs", "/v1/jobs", p, GJ_ROUTE_MAX_PARAMS, &n));
    assert_int_equal(n, 0);
    assert_false(gj_http_match_path("/v1/jobs", "/v1/jobs/", p, GJ_ROUTE_MAX_PARAMS, &n));
    assert_false(gj_http_match_path("/v1/jobs", "/v1/job", p, GJ_ROUTE_MAX_PARAMS, &n));
    assert_true(gj_http_match_path("/v1/jobs/{id}", "/v1/jobs/ABC", p, GJ_ROUTE_MAX_PARAMS, &n));
    assert_int_equal(n, 1);
    assert_string_equal(p[0], "abc");     /* ids are lower-cased */
    assert_false(gj_http_match_path("/v1/jobs/{id}", "/v1/jobs/", p, GJ_ROUTE_MAX_PARAMS, &n));
    assert_false(gj_http_match_path("/v1/jobs/{id}", "/v1/jobs/a/b", p, GJ_ROUTE_MAX_PARAMS, &n));
    assert_true(gj_http_match_path("/v1/jobs/{id}/outputs/{name}", "/v1/jobs/x/outputs/Data.bin", p,
                                   GJ_ROUTE_MAX_PARAMS, &n));
    assert_int_equal(n, 2);
    assert_string_equal(p[1], "Data.bin");  /* names keep their case */
    /* a decoded %2F makes another segment: no match */
    assert_false(gj_http_match_path("/v1/jobs/{id}/outputs/{name}", "/v1/jobs/x/outputs/../y", p,
                                    GJ_ROUTE_MAX_PARAMS, &n));
    assert_true(gj_http_match_path("/v1/jobs/{id}/outputs/{name}", "/v1/jobs/x/outputs/..", p,
                                   GJ_ROUTE_MAX_PARAMS, &n));
    assert_string_equal(p[1], "..");        /* matched here, refused by gj_safe_name in the router */
    assert_true(gj_http_match_path("/v1/jobs/{id}/cancel", "/v1/jobs/x/cancel", p, GJ_ROUTE_MAX_PARAMS, &n));
    assert_false(gj_http_match_path("/v1/jobs/{id}/cancel", "/v1/jobs/x/cancelx", p, GJ_ROUTE_MAX_PARAMS, &n));
    char longseg[400];
    memset(longseg, 'a', sizeof longseg);
    memcpy(longseg, "/v1/jobs/", 9);
    longseg[sizeof longseg - 1] = '\0';
    assert_false(gj_http_match_path("/v1/jobs/{id}", longseg, p, GJ_ROUTE_MAX_PARAMS, &n));
    /* a last {completePath} takes the rest, slashes included (CARMIN); nowhere else */
    assert_true(gj_http_match_path("/rest/path/{completePath}", "/rest/path/vip/Home/a/b", p, GJ_ROUTE_MAX_PARAMS,
                                   &n));
    assert_int_equal(n, 1);
    assert_string_equal(p[0], "vip/Home/a/b");
    assert_false(gj_http_match_path("/rest/path/{completePath}/x", "/rest/path/a/b/x", p, GJ_ROUTE_MAX_PARAMS, &n));
    assert_false(gj_http_match_path("/rest/{other}", "/rest/a/b", p, GJ_ROUTE_MAX_PARAMS, &n));
}

static void test_range(void **state)
{
    (void)state;
    uint64_t a = 0, b = 0;
    assert_int_equal(gj_http_parse_range("bytes=0-9", 100, &a, &b), 1);
    assert_int_equal(a, 0);
    assert_int_equal(b, 9);
    assert_int_equal(gj_http_parse_range("bytes=10-", 100, &a, &b), 1);
    assert_int_equal(a, 10);
    assert_int_equal(b, 99);
    assert_int_equal(gj_http_parse_range("bytes=-10", 100, &a, &b), 1);
    assert_int_equal(a, 90);
    assert_int_equal(b, 99);
    assert_int_equal(gj_http_parse_range("bytes=-1000", 100, &a, &b), 1);
    assert_int_equal(a, 0);
    assert_int_equal(b, 99);
    assert_int_equal(gj_http_parse_range("bytes=50-1000", 100, &a, &b), 1);
    assert_int_equal(b, 99);
    assert_int_equal(gj_http_parse_range("bytes=99-99", 100, &a, &b), 1);
    assert_int_equal(a, 99);
    /* unsatisfiable */
    assert_int_equal(gj_http_parse_range("bytes=100-", 100, &a, &b), -1);
    assert_int_equal(gj_http_parse_range("bytes=200-300", 100, &a, &b), -1);
    assert_int_equal(gj_http_parse_range("bytes=-0", 100, &a, &b), -1);
    assert_int_equal(gj_http_parse_range("bytes=0-", 0, &a, &b), -1);
    /* ignored: serve everything */
    assert_int_equal(gj_http_parse_range(NULL, 100, &a, &b), 0);
    assert_int_equal(gj_http_parse_range("items=0-1", 100, &a, &b), 0);
    assert_int_equal(gj_http_parse_range("bytes=5-1", 100, &a, &b), 0);
    assert_int_equal(gj_http_parse_range("bytes=0-1,5-6", 100, &a, &b), 0);
    assert_int_equal(gj_http_parse_range("bytes=x-1", 100, &a, &b), 0);
    assert_int_equal(gj_http_parse_range("bytes=1", 100, &a, &b), 0);
    assert_int_equal(gj_http_parse_range("bytes=-", 100, &a, &b), 0);
    assert_int_equal(gj_http_parse_range("bytes=99999999999999999999-", 100, &a, &b), 0);
}

static void test_content_digest(void **state)
{
    (void)state;
    unsigned char d[32];
    /* sha-256 of "hello world" */
    static const unsigned char want[32] = {
        0xb9, 0x4d, 0x27, 0xb9, 0x93, 0x4d, 0x3e, 0x08, 0xa5, 0x2e, 0x52, 0xd7, 0xda, 0x7d, 0xab, 0xfa,
        0xc4, 0x84, 0xef, 0xe3, 0x7a, 0x53, 0x80, 0xee, 0x90, 0x88, 0xf7, 0xac, 0xe2, 0xef, 0xcd, 0xe9 };
    assert_int_equal(gj_http_parse_content_digest("sha-256=:uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=:", d), 1);
    assert_memory_equal(d, want, 32);
    assert_int_equal(gj_http_parse_content_digest(
                         "sha-512=:YQ==:, sha-256=:uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=:", d), 1);
    assert_int_equal(gj_http_parse_content_digest("sha-512=:YQ==:", d), 0);
    assert_int_equal(gj_http_parse_content_digest("sha-256=uU0nuZNN", d), -1);
    assert_int_equal(gj_http_parse_content_digest("sha-256=:YQ==:", d), -1);        /* wrong length */
    assert_int_equal(gj_http_parse_content_digest("sha-256=:not base64!:", d), -1);
    assert_int_equal(gj_http_parse_content_digest("", d), -1);
    assert_int_equal(gj_http_parse_content_digest("sha-256=:uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=:,", d), -1);
    assert_int_equal(gj_http_parse_content_digest("SHA-256=:uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=:", d), -1);
}

static void test_etag(void **state)
{
    (void)state;
    assert_true(gj_http_etag_match("\"abc\"", "\"abc\""));
    assert_true(gj_http_etag_match("W/\"abc\"", "\"abc\""));
    assert_true(gj_http_etag_match("\"x\", \"abc\"", "\"abc\""));
    assert_true(gj_http_etag_match("*", "\"abc\""));
    assert_false(gj_http_etag_match("\"abcd\"", "\"abc\""));
    assert_false(gj_http_etag_match("abc", "\"abc\""));
    assert_false(gj_http_etag_match("", "\"abc\""));
}

static void test_cursor(void **state)
{
    (void)state;
    char enc[160], ts[40], id[GJ_UUID_LEN + 1];
    assert_int_equal(gj_cursor_encode("2026-11-22T10:36:56.223094Z", "0f8fad5b-d9cb-469f-a165-70867728950e", enc,
                                      sizeof enc), 0);
    assert_null(strchr(enc, '='));
    assert_null(strchr(enc, '+'));
    assert_null(strchr(enc, '/'));
    assert_int_equal(gj_cursor_decode(enc, ts, id), 0);
    assert_string_equal(ts, "2026-11-22T10:36:56.223094Z");
    assert_string_equal(id, "0f8fad5b-d9cb-469f-a165-70867728950e");
    assert_int_equal(gj_cursor_decode("", ts, id), -1);
    assert_int_equal(gj_cursor_decode("!!!", ts, id), -1);
    /* well-formed base64url of something else */
    char bad[160];
    assert_true(gj_base64_encode((const unsigned char *)"2026-11-22,x", 12, bad, sizeof bad, GJ_BASE64_URL) > 0);
    assert_int_equal(gj_cursor_decode(bad, ts, id), -1);
    assert_true(gj_base64_encode((const unsigned char *)"2026-11-22T10:36:56.223094Z,'; DROP TABLE jobs",
                                 46, bad, sizeof bad, GJ_BASE64_URL) > 0);
    assert_int_equal(gj_cursor_decode(bad, ts, id), -1);
}

static void test_timestamp(void **state)
{
    (void)state;
    assert_true(gj_is_timestamp("2026-11-22"));
    assert_true(gj_is_timestamp("2026-11-22T10:36:56Z"));
    assert_true(gj_is_timestamp("2026-11-22T10:36:56.123456Z"));
    assert_true(gj_is_timestamp("2026-11-22T10:36:56+02:00"));
    assert_true(gj_is_timestamp("2026-11-22 10:36"));
    assert_false(gj_is_timestamp("2026-13-22"));
    assert_false(gj_is_timestamp("2026-11-22T25:00:00Z"));
    assert_false(gj_is_timestamp("yesterday"));
    assert_false(gj_is_timestamp("2026-11-22T10:36:56.1234567Z"));
    assert_false(gj_is_timestamp("2026-11-22T10:36:56Zjunk"));
    assert_false(gj_is_timestamp(""));
    /* values PostgreSQL refuses (22008, "date/time field value out of range") */
    assert_false(gj_is_timestamp("2024-02-30"));
    assert_false(gj_is_timestamp("2023-02-29"));
    assert_false(gj_is_timestamp("1900-02-29"));
    assert_false(gj_is_timestamp("2100-02-29T00:00:00Z"));
    assert_false(gj_is_timestamp("2024-04-31"));
    assert_false(gj_is_timestamp("0000-01-01"));
    assert_false(gj_is_timestamp("2024-01-01T23:59:60.5Z"));
    assert_false(gj_is_timestamp("2024-01-01T10:00+16:00"));
    assert_false(gj_is_timestamp("2024-01-01T10:00+14:60"));
    assert_true(gj_is_timestamp("2024-02-29"));
    assert_true(gj_is_timestamp("2000-02-29"));
    assert_true(gj_is_timestamp("0001-01-01"));
    assert_true(gj_is_timestamp("9999-12-31T23:59:59Z"));
    assert_true(gj_is_timestamp("2024-06-30T23:59:60Z"));
    assert_true(gj_is_timestamp("2024-01-01T10:00-15:59"));
    assert_true(gj_is_timestamp("2024-01-01T10:00+1430"));
}

static void test_target_unescape(void **state)
{
    (void)state;
    char a[] = "/healthz%00/../x", b[] = "/a%2Fb%41%zz%4", c[] = "%01%7f%7F%20";
    assert_int_equal(gj_http_unescape(NULL, NULL, a), 14);
    assert_memory_equal(a, "/healthz\x7f/../x", 15);          /* the NUL stays visible */
    assert_true(gj_http_has_control(a, strlen(a)));
    assert_int_equal(gj_http_unescape(NULL, NULL, b), 10);
    assert_string_equal(b, "/a/bA%zz%4");                     /* malformed escapes stay */
    assert_false(gj_http_has_control(b, strlen(b)));
    assert_int_equal(gj_http_unescape(NULL, NULL, c), 4);
    assert_memory_equal(c, "\x01\x7f\x7f ", 5);
    assert_true(gj_http_has_control("\t", 1));
    assert_true(gj_http_has_control("a\x1f", 2));
    assert_false(gj_http_has_control("/v1/jobs?x=\xc3\xa9~", 14));   /* UTF-8 is not control */
}

static void test_json_type(void **state)
{
    (void)state;
    assert_true(gj_http_is_json_type("application/json"));
    assert_true(gj_http_is_json_type("application/json; charset=utf-8"));
    assert_true(gj_http_is_json_type("Application/JSON"));
    assert_true(gj_http_is_json_type("application/merge-patch+json"));
    assert_false(gj_http_is_json_type("text/plain"));
    assert_false(gj_http_is_json_type("application/jsonx"));
    assert_false(gj_http_is_json_type("application/x-www-form-urlencoded"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_path),   cmocka_unit_test(test_range),
        cmocka_unit_test(test_content_digest), cmocka_unit_test(test_etag),
        cmocka_unit_test(test_cursor),       cmocka_unit_test(test_timestamp),
        cmocka_unit_test(test_target_unescape),    cmocka_unit_test(test_json_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
