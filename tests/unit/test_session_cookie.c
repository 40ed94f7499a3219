/* service/auth/session.c and service/http/cors.c, the parts without a database: the session token in a
 * Cookie header (only our name, only a well-formed token, the first one), the Set-Cookie
 * value and its flags, the CSRF token (bound to its session, compared in full), which methods
 * need it, and --cors-origin's list (exact origins, no prefix or suffix match). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "service/http/cors.h"
#include "service/auth/session.h"

#define TOK_A "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"   /* 43 characters */
#define TOK_B "abcdefghijklmnopqrstuvwxyz0123456789-_ABCDE"

static void test_cookie_token(void **state)
{
    (void)state;
    char t[GJ_SESSION_TOKEN_LEN + 1];
    assert_int_equal(strlen(TOK_A), GJ_SESSION_TOKEN_LEN);
    assert_int_equal(gj_session_cookie_token("__Host-gj_session=" TOK_A, t), 1);
    assert_string_equal(t, TOK_A);
    assert_int_equal(gj_session_cookie_token("theme=dark; __Host-gj_session=" TOK_B "; lang=en", t), 1);
    assert_string_equal(t, TOK_B);
    /* the first of ours counts, even when a later one is well formed */
    assert_int_equal(gj_session_cookie_token("__Host-gj_session=" TOK_A ";__Host-gj_session=" TOK_B, t), 1);
    assert_string_equal(t, TOK_A);
    assert_int_equal(gj_session_cookie_token("__Host-gj_session=short; __Host-gj_session=" TOK_B, t), 0);
    /* other names, near misses, bad lengths and characters */
    assert_int_equal(gj_session_cookie_token(NULL, t), 0);
    assert_int_equal(gj_session_cookie_token("", t), 0);
    assert_int_equal(gj_session_cookie_token("gj_session=" TOK_A, t), 0);
    assert_int_equal(gj_session_cookie_token("x__Host-gj_session=" TOK_A, t), 0);
    assert_int_equal(gj_session_cookie_token("__Host-gj_sessionx=" TOK_A, t), 0);
    assert_int_equal(gj_session_cookie_token("__Host-gj_session=" TOK_A "A", t), 0);
    assert_int_equal(gj_session_cookie_token("__Host-gj_session=" TOK_A "%00", t), 0);
    assert_int_equal(gj_session_cookie_token("__Host-gj_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA+", t), 0);
    assert_int_equal(gj_session_cookie_token("__Host-gj_session=", t), 0);
}

static void test_check_without_database(void **state)
{
    (void)state;
    struct gj_principal p;
    /* no cookie of ours: a key is asked for, the database is not needed */
    assert_int_equal(gj_session_check(NULL, NULL, "GET", NULL, 30, &p), GJ_SESSION_ABSENT);
    assert_int_equal(gj_session_check(NULL, "theme=dark", "POST", NULL, 30, &p), GJ_SESSION_ABSENT);
    assert_int_equal(gj_session_check(NULL, "__Host-gj_session=short", "GET", NULL, 30, &p), GJ_SESSION_ABSENT);
    /* a cookie and no connection: the database did not answer */
    assert_int_equal(gj_session_check(NULL, "__Host-gj_session=" TOK_A, "GET", NULL, 30, &p), GJ_SESSION_DB_ERROR);
}

static void test_set_cookie(void **state)
{
    (void)state;
    char c[200];
    assert_int_equal(gj_session_set_cookie(c, sizeof c, TOK_A, 43200), 0);
    assert_string_equal(c, "__Host-gj_session=" TOK_A "; Path=/; Max-Age=43200; HttpOnly; Secure; SameSite=Strict");
    assert_int_equal(gj_session_set_cookie(c, sizeof c, NULL, 43200), 0);   /* removal */
    assert_string_equal(c, "__Host-gj_session=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict");
    assert_int_equal(gj_session_set_cookie(c, 40, TOK_A, 60), -1);
}

static void test_csrf(void **state)
{
    (void)state;
    char a[GJ_SESSION_TOKEN_LEN + 1], a2[GJ_SESSION_TOKEN_LEN + 1], b[GJ_SESSION_TOKEN_LEN + 1];
    assert_int_equal(gj_session_csrf(TOK_A, a), 0);
    assert_int_equal(gj_session_csrf(TOK_A, a2), 0);
    assert_int_equal(gj_session_csrf(TOK_B, b), 0);
    assert_string_equal(a, a2);                  /* recomputed from the session, nothing stored */
    assert_string_not_equal(a, b);               /* bound to its session */
    assert_string_not_equal(a, TOK_A);           /* not the cookie itself */
    assert_int_equal(gj_session_csrf_ok(TOK_A, a), 1);
    assert_int_equal(gj_session_csrf_ok(TOK_A, b), 0);
    assert_int_equal(gj_session_csrf_ok(TOK_A, NULL), 0);
    assert_int_equal(gj_session_csrf_ok(TOK_A, ""), 0);
    char cut[GJ_SESSION_TOKEN_LEN + 1];
    memcpy(cut, a, sizeof cut);
    cut[GJ_SESSION_TOKEN_LEN - 1] = '\0';        /* a prefix is not the token */
    assert_int_equal(gj_session_csrf_ok(TOK_A, cut), 0);
    cut[GJ_SESSION_TOKEN_LEN - 1] = a[GJ_SESSION_TOKEN_LEN - 1] == 'x' ? 'y' : 'x';
    assert_int_equal(gj_session_csrf_ok(TOK_A, cut), 0);
}

static void test_safe_methods(void **state)
{
    (void)state;
    assert_true(gj_session_method_is_safe("GET"));
    assert_true(gj_session_method_is_safe("HEAD"));
    assert_true(gj_session_method_is_safe("OPTIONS"));
    for (const char *const *m = (const char *const[]){ "POST", "PUT", "PATCH", "DELETE", "get", "TRACE", NULL }; *m; m++)
        assert_false(gj_session_method_is_safe(*m));
}

static void test_cors_list(void **state)
{
    (void)state;
    const char *list = "https://portal.example.org,http://localhost:5173";
    assert_true(gj_cors_origin_listed(list, "https://portal.example.org"));
    assert_true(gj_cors_origin_listed(list, "HTTPS://Portal.Example.org"));
    assert_true(gj_cors_origin_listed(list, "http://localhost:5173"));
    assert_false(gj_cors_origin_listed(list, "https://portal.example.org.evil.net"));
    assert_false(gj_cors_origin_listed(list, "https://portal.example.or"));
    assert_false(gj_cors_origin_listed(list, "https://evil.portal.example.org"));
    assert_false(gj_cors_origin_listed(list, "http://localhost"));
    assert_false(gj_cors_origin_listed(list, "null"));
    assert_false(gj_cors_origin_listed(list, ""));
    assert_false(gj_cors_origin_listed(list, NULL));
    assert_false(gj_cors_origin_listed("", "https://portal.example.org"));
    assert_false(gj_cors_origin_listed(NULL, "https://portal.example.org"));
    assert_false(gj_cors_origin_listed(list, "https://portal.example.org,http://localhost:5173"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cookie_token), cmocka_unit_test(test_check_without_database),
        cmocka_unit_test(test_set_cookie), cmocka_unit_test(test_csrf),
        cmocka_unit_test(test_safe_methods), cmocka_unit_test(test_cors_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
