/* Issue 15's pure parts: the webhook signature against Standard Webhooks' published vector,
 * the secret's text form, a job log line made safe, and the callback policy (allow list,
 * URLs, refused addresses, IPv4-mapped IPv6 included); the label checks' errors. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <setjmp.h>
#include <string.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "service/base/base64.h"
#include "service/jobs/callback_policy.h"
#include "service/jobs/job_fields.h"
#include "service/jobs/job_log.h"
#include "service/workflow/workflow.h"

static void test_sign_vector(void **state)
{
    (void)state;
    /* https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md */
    unsigned char secret[32];
    int n = gj_base64_decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 32, secret, sizeof secret, GJ_BASE64_STD);
    assert_int_equal(n, 24);
    const char *body = "{\"test\": 2432232314}";
    char sig[GJ_WEBHOOK_SIGNATURE_MAX];
    gj_webhook_sign(secret, (size_t)n, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body, strlen(body), sig);
    assert_string_equal(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    gj_webhook_sign(secret, (size_t)n, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265331, body, strlen(body), sig);
    assert_string_not_equal(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    char text[GJ_WEBHOOK_SECRET_TEXT_MAX];
    gj_webhook_secret_text(secret, (size_t)n, text);
    assert_string_equal(text, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
}

static void test_log_clean(void **state)
{
    (void)state;
    char out[16];
    gj_job_log_clean("a\tb\nc\x7f", out, sizeof out);
    assert_string_equal(out, "a b c ");
    gj_job_log_clean("x\xff\xc0\xafy", out, sizeof out);          /* not UTF-8, overlong */
    assert_string_equal(out, "x???y");
    gj_job_log_clean("\xed\xa0\x80", out, sizeof out);             /* a surrogate */
    assert_string_equal(out, "???");
    gj_job_log_clean("abcdefghijkl\xc3\xa9z", out, 14);              /* cut before the 2-byte é */
    assert_string_equal(out, "abcdefghijkl");
    gj_job_log_clean("\xe2\x82\xac ok", out, sizeof out);
    assert_string_equal(out, "\xe2\x82\xac ok");
}

static void test_allow_list_and_urls(void **state)
{
    (void)state;
    struct gj_host_list l;
    struct gj_callback_target t;
    char why[300];
    assert_int_equal(gj_host_list_parse(" hooks.example.org , [::1]:9000,10.0.0.5:443", &l, why, sizeof why), 0);
    assert_int_equal(l.n, 3);
    assert_int_equal(gj_host_list_parse("a.example,bad host", &l, why, sizeof why), -1);
    assert_non_null(strstr(why, "bad host"));
    assert_int_equal(gj_host_list_parse("Hooks.Example.org,[::1]:9000", &l, why, sizeof why), 0);
    assert_int_equal(gj_callback_url_parse("https://hooks.example.org/x?y=1", &t, why, sizeof why), 0);
    assert_true(t.https && t.port == 443 && !t.host_is_ip);
    assert_true(gj_host_list_allows(&l, &t));
    assert_int_equal(gj_callback_url_parse("http://[::1]:9000/", &t, why, sizeof why), 0);
    assert_true(t.host_is_ip && gj_host_list_allows(&l, &t));
    assert_int_equal(gj_callback_url_parse("http://[::1]:9001/", &t, why, sizeof why), 0);
    assert_false(gj_host_list_allows(&l, &t));                       /* the entry names its port */
    assert_int_equal(gj_callback_url_parse("https://user:pw@hooks.example.org/", &t, why, sizeof why), -1);
    assert_int_equal(gj_callback_url_parse("ftp://hooks.example.org/", &t, why, sizeof why), -1);
    assert_int_equal(gj_callback_url_parse("https://hooks.example.org/a#frag", &t, why, sizeof why), -1);
    assert_int_equal(gj_callback_url_parse("https://hooks.example.org/a b", &t, why, sizeof why), -1);
    assert_int_equal(gj_callback_check("https://127.0.0.1/x", "127.0.0.1", 0, &t, why, sizeof why), -1);
    assert_non_null(strstr(why, "loopback"));
    assert_int_equal(gj_callback_check("https://127.0.0.1/x", "127.0.0.1", 1, &t, why, sizeof why), 0);
    assert_int_equal(gj_callback_check("https://other.example/x", "hooks.example.org", 1, &t, why, sizeof why), -1);
}

static const char *restricted(int family, const char *text)
{
    struct sockaddr_storage ss = { 0 };
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        inet_pton(AF_INET, text, &a->sin_addr);
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        inet_pton(AF_INET6, text, &a->sin6_addr);
    }
    return gj_address_restricted((struct sockaddr *)&ss);
}

static void test_addresses(void **state)
{
    (void)state;
    assert_string_equal(restricted(AF_INET, "127.0.0.1"), "loopback");
    assert_string_equal(restricted(AF_INET, "10.1.2.3"), "private");
    assert_string_equal(restricted(AF_INET, "192.168.0.1"), "private");
    assert_string_equal(restricted(AF_INET, "172.16.0.1"), "private");
    assert_string_equal(restricted(AF_INET, "169.254.169.254"), "link-local");     /* cloud metadata */
    assert_string_equal(restricted(AF_INET, "0.0.0.0"), "unspecified");
    assert_null(restricted(AF_INET, "93.184.216.34"));
    assert_string_equal(restricted(AF_INET6, "::1"), "loopback");
    assert_string_equal(restricted(AF_INET6, "fd00::1"), "private");
    assert_string_equal(restricted(AF_INET6, "fe80::1"), "link-local");
    assert_string_equal(restricted(AF_INET6, "::ffff:127.0.0.1"), "loopback");     /* IPv4-mapped */
    assert_null(restricted(AF_INET6, "2606:2800:220:1:248:1893:25c8:1946"));
}

/* Issue 28 #7: an IPv6 form that carries an IPv4 address is judged by that address's rules
 * ([::ffff:0:127.0.0.1], IPv4-translated, passed as public). */
static void test_ipv4_inside_ipv6(void **state)
{
    (void)state;
    assert_string_equal(restricted(AF_INET6, "::ffff:0:127.0.0.1"), "loopback");    /* IPv4-translated */
    assert_string_equal(restricted(AF_INET6, "::ffff:0:10.0.0.1"), "private");
    assert_string_equal(restricted(AF_INET6, "::ffff:0:169.254.169.254"), "link-local");
    assert_string_equal(restricted(AF_INET6, "::ffff:10.0.0.1"), "private");        /* IPv4-mapped */
    assert_string_equal(restricted(AF_INET6, "::ffff:169.254.169.254"), "link-local");
    assert_string_equal(restricted(AF_INET6, "::127.0.0.1"), "loopback");           /* IPv4-compatible */
    assert_string_equal(restricted(AF_INET6, "::192.168.1.1"), "private");
    assert_string_equal(restricted(AF_INET6, "64:ff9b::127.0.0.1"), "loopback");    /* NAT64 */
    assert_string_equal(restricted(AF_INET6, "64:ff9b::a9fe:a9fe"), "link-local");
    assert_string_equal(restricted(AF_INET6, "2002:7f00:1::"), "loopback");          /* 6to4 of 127.0.0.1 */
    assert_string_equal(restricted(AF_INET6, "2002:c0a8:101::1"), "private");        /* 6to4 of 192.168.1.1 */
    /* Teredo: the client's IPv4 address is the last 32 bits inverted (127.0.0.1) */
    assert_string_equal(restricted(AF_INET6, "2001:0:4136:e378:8000:63bf:80ff:fffe"), "loopback");
    assert_string_equal(restricted(AF_INET6, "64:ff9b:1::a00:1"), "private");       /* local-use NAT64 */
    /* a public IPv4 address in any form stays callable, except the deprecated IPv4-compatible */
    assert_null(restricted(AF_INET6, "::ffff:93.184.216.34"));
    assert_null(restricted(AF_INET6, "::ffff:0:93.184.216.34"));
    assert_null(restricted(AF_INET6, "64:ff9b::93.184.216.34"));
    assert_string_equal(restricted(AF_INET6, "::93.184.216.34"), "reserved");
    struct gj_callback_target t;
    char why[256];
    assert_int_equal(gj_callback_check("https://[::ffff:0:127.0.0.1]/x", "[::ffff:0:127.0.0.1]", 0, &t, why, sizeof why),
                     -1);
    assert_non_null(strstr(why, "loopback"));
}

/* Labels in a body (422, field labels.KEY) and as ?label= filters (400, field label): one
 * check, its words and status the caller's struct gj_error carries to the route. */
static void test_label_errors(void **state)
{
    (void)state;
    struct gj_error e = { 0 };
    json_t *filter = json_object();
    assert_int_equal(gj_label_filter_add(filter, "team=a", &e), 0);
    assert_int_equal(gj_label_filter_add(filter, "bad key=a", &e), -1);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.field, "label");
    assert_string_equal(e.message, "a label's key holds letters, digits and . _ - / only");
    for (int i = 1; i < GJ_LABELS_MAX; i++) {
        char kv[32];
        snprintf(kv, sizeof kv, "k%d=v", i);
        assert_int_equal(gj_label_filter_add(filter, kv, &e), 0);
    }
    assert_int_equal(gj_label_filter_add(filter, "one=more", &e), -1);
    assert_string_equal(e.message, "at most 32 label filters");
    json_decref(filter);

    json_t *body = json_pack("{s:{s:s}}", "labels", "ok", "a\001b");
    struct gj_config cfg = { 0 };
    struct gj_job_fields f;
    assert_int_equal(gj_job_fields_read(body, &cfg, &f, &e), -1);
    assert_int_equal(e.status, 422);
    assert_string_equal(e.field, "labels.ok");
    assert_string_equal(e.message, "a label's value is a string of at most 255 characters without control characters");
    json_decref(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sign_vector),
        cmocka_unit_test(test_log_clean),
        cmocka_unit_test(test_allow_list_and_urls),
        cmocka_unit_test(test_addresses),
        cmocka_unit_test(test_ipv4_inside_ipv6),
        cmocka_unit_test(test_label_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
