/* service/auth/key_cache.c, without a database: a key verified less than the TTL ago is answered
 * (and one verified longer ago is not), another key (even one sharing its set) never hits,
 * the table holds no more than its capacity and gives up its oldest entry, a revoked key's
 * entry goes at once and a check begun before the revocation does not put it back; the
 * digests of auth.c (gj_api_key_digest) and the counters on /metrics. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "service/auth/auth.h"
#include "service/auth/key_cache.h"

#define KEY_A "gjk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define KEY_B "gjk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB"
#define ID_A "0b7f2c6e-1d3a-4e5f-9a8b-7c6d5e4f3a2b"
#define ID_B "5c4d3e2f-1a0b-4c9d-8e7f-6a5b4c3d2e1f"

static struct gj_principal principal(const char *key_id, const char *tenant, int admin)
{
    struct gj_principal p;
    memset(&p, 0, sizeof p);
    snprintf(p.key_id, sizeof p.key_id, "%s", key_id);
    snprintf(p.tenant_id, sizeof p.tenant_id, "%s", "9e8d7c6b-5a49-4382-a1b0-c9d8e7f6a5b4");
    snprintf(p.tenant_name, sizeof p.tenant_name, "%s", tenant);
    p.is_admin = admin;
    return p;
}

static void digest_of(const char *key, unsigned char d[32])
{
    assert_int_equal(gj_api_key_digest(key, d), 1);
}

/* A digest made of n (distinct for distinct n, spread over every byte). */
static void digest_n(uint64_t n, unsigned char d[32])
{
    uint64_t x = n * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < 32; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        d[i] = (unsigned char)(x >> 24);
    }
    memcpy(d + 24, &n, sizeof n);
}

/* hits and misses as /metrics shows them */
static void counts(struct gj_key_cache *kc, unsigned long long *hits, unsigned long long *misses, size_t *entries)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    gj_key_cache_write_metrics(kc, f);
    assert_int_equal(fclose(f), 0);
    const char *h = strstr(text, "\ngpujobd_api_key_cache_hits_total ");
    const char *m = strstr(text, "\ngpujobd_api_key_cache_misses_total ");
    const char *e = strstr(text, "\ngpujobd_api_key_cache_entries ");
    assert_non_null(h);
    assert_non_null(m);
    assert_non_null(e);
    assert_int_equal(sscanf(h, " gpujobd_api_key_cache_hits_total %llu", hits), 1);
    assert_int_equal(sscanf(m, " gpujobd_api_key_cache_misses_total %llu", misses), 1);
    assert_int_equal(sscanf(e, " gpujobd_api_key_cache_entries %zu", entries), 1);
    free(text);
}

static void test_digest(void **state)
{
    (void)state;
    unsigned char a[32], a2[32], b[32], untouched[32];
    digest_of(KEY_A, a);
    digest_of(KEY_A, a2);
    digest_of(KEY_B, b);
    assert_memory_equal(a, a2, 32);
    assert_memory_not_equal(a, b, 32);
    memset(untouched, 0x5a, sizeof untouched);
    unsigned char d[32];
    memcpy(d, untouched, 32);
    assert_int_equal(gj_api_key_digest(NULL, d), 0);
    assert_int_equal(gj_api_key_digest("", d), 0);
    assert_int_equal(gj_api_key_digest("gjk_short", d), 0);
    assert_int_equal(gj_api_key_digest("xjk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", d), 0);
    assert_int_equal(gj_api_key_digest(KEY_A "A", d), 0);
    assert_memory_equal(d, untouched, 32);
}

static void test_hit_within_ttl_then_expiry(void **state)
{
    (void)state;
    struct gj_key_cache *kc = gj_key_cache_new(1024, 1000);
    assert_non_null(kc);
    unsigned char a[32];
    digest_of(KEY_A, a);
    struct gj_principal in = principal(ID_A, "imaging", 1), out;
    assert_int_equal(gj_key_cache_get(kc, a, 5000, &out), 0);   /* nothing yet */
    gj_key_cache_put(kc, a, &in, gj_key_cache_generation(kc), 5000);
    memset(&out, 0, sizeof out);
    assert_int_equal(gj_key_cache_get(kc, a, 5000, &out), 1);
    assert_memory_equal(&out, &in, sizeof in);
    assert_int_equal(gj_key_cache_get(kc, a, 5999, &out), 1);
    assert_int_equal(gj_key_cache_get(kc, a, 4000, &out), 1);   /* a lookup that began before the check */
    unsigned long long hits, misses;
    size_t entries;
    counts(kc, &hits, &misses, &entries);
    assert_true(hits == 3 && misses == 1 && entries == 1);
    assert_int_equal(gj_key_cache_get(kc, a, 6000, &out), 0);   /* the TTL is over: ask the database */
    assert_int_equal(gj_key_cache_size(kc), 0);                  /* and the entry is gone */
    assert_int_equal(gj_key_cache_get(kc, a, 5500, &out), 0);
    /* the database said yes again: answered for another TTL from that check */
    gj_key_cache_put(kc, a, &in, gj_key_cache_generation(kc), 6000);
    assert_int_equal(gj_key_cache_get(kc, a, 6999, &out), 1);
    assert_int_equal(gj_key_cache_get(kc, a, 7000, &out), 0);
    counts(kc, &hits, &misses, &entries);
    assert_true(hits == 4 && misses == 4 && entries == 0);
    gj_key_cache_free(kc);
}

static void test_wrong_key_never_hits(void **state)
{
    (void)state;
    struct gj_key_cache *kc = gj_key_cache_new(8, 60000);   /* one set: every digest shares it */
    unsigned char a[32], b[32], near[32];
    digest_of(KEY_A, a);
    digest_of(KEY_B, b);
    struct gj_principal in = principal(ID_A, "imaging", 1), out;
    memset(&out, 0, sizeof out);
    gj_key_cache_put(kc, a, &in, gj_key_cache_generation(kc), 100);
    assert_int_equal(gj_key_cache_get(kc, b, 100, &out), 0);
    for (int i = 0; i < 32; i++) {   /* one bit off anywhere */
        memcpy(near, a, 32);
        near[i] ^= 0x01;
        assert_int_equal(gj_key_cache_get(kc, near, 100, &out), 0);
    }
    assert_int_equal(out.key_id[0], '\0');   /* nothing of A's handed out */
    assert_int_equal(gj_key_cache_get(kc, a, 100, &out), 1);
    gj_key_cache_free(kc);
}

static void test_bounded_with_oldest_evicted(void **state)
{
    (void)state;
    struct gj_key_cache *kc = gj_key_cache_new(64, 1u << 30);
    struct gj_principal in = principal(ID_A, "t", 0), out;
    unsigned char d[32];
    for (uint64_t n = 0; n < 20000; n++) {
        digest_n(n, d);
        gj_key_cache_put(kc, d, &in, gj_key_cache_generation(kc), 1000 + n);
        assert_true(gj_key_cache_size(kc) <= 64);
    }
    assert_int_equal(gj_key_cache_size(kc), 64);
    assert_int_equal(gj_key_cache_get(kc, d, 30000, &out), 1);   /* the last one is there */
    gj_key_cache_free(kc);

    /* one set of 8: the ninth key takes the place of the one checked longest ago */
    kc = gj_key_cache_new(8, 1u << 30);
    for (uint64_t n = 0; n < 8; n++) {
        digest_n(n, d);
        gj_key_cache_put(kc, d, &in, gj_key_cache_generation(kc), 200 - n);   /* n = 7 is the oldest */
    }
    digest_n(100, d);
    gj_key_cache_put(kc, d, &in, gj_key_cache_generation(kc), 300);
    assert_int_equal(gj_key_cache_size(kc), 8);
    for (uint64_t n = 0; n < 8; n++) {
        digest_n(n, d);
        assert_int_equal(gj_key_cache_get(kc, d, 400, &out), n != 7);
    }
    /* a key put again keeps one entry */
    digest_n(100, d);
    gj_key_cache_put(kc, d, &in, gj_key_cache_generation(kc), 500);
    assert_int_equal(gj_key_cache_size(kc), 8);
    gj_key_cache_free(kc);

    kc = gj_key_cache_new(3, 1000);   /* under 8: one set of 8 */
    for (uint64_t n = 0; n < 20; n++) {
        digest_n(n, d);
        gj_key_cache_put(kc, d, &in, gj_key_cache_generation(kc), 10);
    }
    assert_int_equal(gj_key_cache_size(kc), 8);
    gj_key_cache_free(kc);
}

static void test_drop_key(void **state)
{
    (void)state;
    struct gj_key_cache *kc = gj_key_cache_new(1024, 60000);
    unsigned char a[32], b[32];
    digest_of(KEY_A, a);
    digest_of(KEY_B, b);
    struct gj_principal pa = principal(ID_A, "a", 0), pb = principal(ID_B, "b", 0), out;
    gj_key_cache_put(kc, a, &pa, gj_key_cache_generation(kc), 10);
    gj_key_cache_put(kc, b, &pb, gj_key_cache_generation(kc), 10);
    gj_key_cache_drop_key(kc, ID_A);
    assert_int_equal(gj_key_cache_get(kc, a, 11, &out), 0);
    assert_int_equal(gj_key_cache_get(kc, b, 11, &out), 1);   /* the other key stays */
    assert_string_equal(out.key_id, ID_B);
    /* an id as a client may write it (upper case) is the same key */
    gj_key_cache_put(kc, a, &pa, gj_key_cache_generation(kc), 12);
    gj_key_cache_drop_key(kc, "0B7F2C6E-1D3A-4E5F-9A8B-7C6D5E4F3A2B");
    assert_int_equal(gj_key_cache_get(kc, a, 13, &out), 0);
    gj_key_cache_drop_key(kc, "not a key id");
    gj_key_cache_drop_key(kc, NULL);
    assert_int_equal(gj_key_cache_get(kc, b, 13, &out), 1);
    gj_key_cache_free(kc);
}

/* A check that read the database before a revocation and answers after it must not put the key back. */
static void test_check_older_than_drop_is_not_put(void **state)
{
    (void)state;
    struct gj_key_cache *kc = gj_key_cache_new(1024, 60000);
    unsigned char a[32];
    digest_of(KEY_A, a);
    struct gj_principal pa = principal(ID_A, "a", 0), out;
    uint64_t before = gj_key_cache_generation(kc);
    gj_key_cache_drop_key(kc, ID_A);          /* revoked meanwhile */
    gj_key_cache_put(kc, a, &pa, before, 10);
    assert_int_equal(gj_key_cache_get(kc, a, 11, &out), 0);
    assert_int_equal(gj_key_cache_size(kc), 0);
    gj_key_cache_put(kc, a, &pa, gj_key_cache_generation(kc), 12);   /* a check begun after it */
    assert_int_equal(gj_key_cache_get(kc, a, 13, &out), 1);
    gj_key_cache_free(kc);
}

static void test_off(void **state)
{
    (void)state;
    unsigned char a[32];
    digest_of(KEY_A, a);
    struct gj_principal pa = principal(ID_A, "a", 0), out;
    gj_key_cache_put(NULL, a, &pa, gj_key_cache_generation(NULL), 10);
    assert_int_equal(gj_key_cache_get(NULL, a, 10, &out), 0);
    gj_key_cache_drop_key(NULL, ID_A);
    assert_int_equal(gj_key_cache_size(NULL), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    gj_key_cache_write_metrics(NULL, f);
    fclose(f);
    assert_int_equal(len, 0);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digest),
        cmocka_unit_test(test_hit_within_ttl_then_expiry),
        cmocka_unit_test(test_wrong_key_never_hits),
        cmocka_unit_test(test_bounded_with_oldest_evicted),
        cmocka_unit_test(test_drop_key),
        cmocka_unit_test(test_check_older_than_drop_is_not_put),
        cmocka_unit_test(test_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
