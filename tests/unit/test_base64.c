/* service/base/base64.c: both alphabets, strict decoding, buffer limits, the lengths of
 * the values the service encodes (API keys, SHA-256 digests). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "service/base/base64.h"

static void test_base64(void **state)
{
    (void)state;
    unsigned char out[64];
    char enc[64];
    assert_int_equal(gj_base64_decode("aGVsbG8=", 8, out, sizeof out, GJ_BASE64_STD), 5);
    assert_memory_equal(out, "hello", 5);
    assert_int_equal(gj_base64_decode("aGVsbG8", 7, out, sizeof out, GJ_BASE64_URL), 5);
    assert_int_equal(gj_base64_decode("aGVsbG8=", 8, out, sizeof out, GJ_BASE64_URL), -1);   /* no padding in url */
    assert_int_equal(gj_base64_decode("aGVs*G8=", 8, out, sizeof out, GJ_BASE64_STD), -1);
    assert_int_equal(gj_base64_decode("aGVsbG9=", 8, out, sizeof out, GJ_BASE64_STD), -1);   /* non-canonical */
    assert_int_equal(gj_base64_decode("a", 1, out, sizeof out, GJ_BASE64_STD), -1);
    assert_int_equal(gj_base64_decode("aGVsbG8=", 8, out, 3, GJ_BASE64_STD), -1);            /* too small */
    assert_int_equal(gj_base64_encode((const unsigned char *)"hello", 5, enc, sizeof enc, GJ_BASE64_STD), 8);
    assert_string_equal(enc, "aGVsbG8=");
    assert_int_equal(gj_base64_encode((const unsigned char *)"\xfb\xff", 2, enc, sizeof enc, GJ_BASE64_URL), 3);
    assert_string_equal(enc, "-_8");
    assert_int_equal(gj_base64_encode((const unsigned char *)"hello", 5, enc, 8, GJ_BASE64_STD), -1);
}

/* Each alphabet's two extra characters belong to it alone. */
static void test_alphabets_apart(void **state)
{
    (void)state;
    unsigned char out[8];
    assert_int_equal(gj_base64_decode("-_8", 3, out, sizeof out, GJ_BASE64_URL), 2);
    assert_memory_equal(out, "\xfb\xff", 2);
    assert_int_equal(gj_base64_decode("-_8", 3, out, sizeof out, GJ_BASE64_STD), -1);
    assert_int_equal(gj_base64_decode("+/8=", 4, out, sizeof out, GJ_BASE64_STD), 2);
    assert_memory_equal(out, "\xfb\xff", 2);
    assert_int_equal(gj_base64_decode("+/8", 3, out, sizeof out, GJ_BASE64_URL), -1);
    /* padding: at most two, and only to a multiple of four */
    assert_int_equal(gj_base64_decode("aGk===", 6, out, sizeof out, GJ_BASE64_STD), -1);
    assert_int_equal(gj_base64_decode("aGk==", 5, out, sizeof out, GJ_BASE64_STD), -1);
    assert_int_equal(gj_base64_decode("aGk", 3, out, sizeof out, GJ_BASE64_STD), 2);   /* padding optional */
}

/* Every length 0..40 round-trips in both alphabets, with the lengths encoded_len says,
 * and an output buffer one byte short is refused. */
static void test_round_trip(void **state)
{
    (void)state;
    unsigned char in[40], back[40];
    char enc[64];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 37 + 250);
    for (int a = GJ_BASE64_STD; a <= GJ_BASE64_URL; a++) {
        for (size_t n = 0; n <= sizeof in; n++) {
            size_t want = gj_base64_encoded_len(n, (enum gj_base64_alphabet)a);
            assert_int_equal(gj_base64_encode(in, n, enc, sizeof enc, (enum gj_base64_alphabet)a), (long)want);
            assert_int_equal(strlen(enc), want);
            assert_int_equal(gj_base64_decode(enc, want, back, sizeof back, (enum gj_base64_alphabet)a), (long)n);
            assert_memory_equal(back, in, n);
            assert_int_equal(gj_base64_encode(in, n, enc, want, (enum gj_base64_alphabet)a), -1);
        }
    }
}

/* API keys: 32 random bytes are 43 base64url characters; Content-Digest: a SHA-256
 * is 44 standard characters with one '='. */
static void test_service_lengths(void **state)
{
    (void)state;
    assert_int_equal(gj_base64_encoded_len(32, GJ_BASE64_URL), 43);
    assert_int_equal(gj_base64_encoded_len(32, GJ_BASE64_STD), 44);
    unsigned char zero[32] = { 0 };
    char enc[45];
    assert_int_equal(gj_base64_encode(zero, 32, enc, sizeof enc, GJ_BASE64_STD), 44);
    assert_string_equal(enc, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_alphabets_apart),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_service_lengths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
