/*
 * test_tls.c — the server certificate: self-signed generated once (key 0600),
 * stable on the next load; given files parsed and checked to match.
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

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/fsutil.h"
#include "service/http/tls.h"

static char root[64];

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/gjtls-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return gj_rm_rf(root);
}

static X509 *parse(const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    assert_non_null(b);
    X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    assert_non_null(x);
    return x;
}

static void fp(const char *pem, unsigned char out[32])
{
    X509 *x = parse(pem);
    unsigned int n;
    assert_int_equal(X509_digest(x, EVP_sha256(), out, &n), 1);
    X509_free(x);
}

static void sub(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", root, name);
}

static void test_self_signed_once(void **state)
{
    (void)state;
    char dir[128], cpath[160], kpath[160];
    sub(dir, sizeof dir, "a");
    snprintf(cpath, sizeof cpath, "%s/tls/cert.pem", dir);
    snprintf(kpath, sizeof kpath, "%s/tls/key.pem", dir);
    char *cert = NULL, *key = NULL;
    assert_int_equal(gj_tls_load(dir, NULL, NULL, &cert, &key), 0);
    assert_non_null(strstr(cert, "BEGIN CERTIFICATE"));
    assert_non_null(strstr(key, "PRIVATE KEY"));
    struct stat st;
    assert_int_equal(stat(kpath, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(stat(cpath, &st), 0);

    /* EC P-256, SAN localhost / 127.0.0.1 / ::1, about ten years. */
    X509 *x = parse(cert);
    EVP_PKEY *pub = X509_get0_pubkey(x);
    assert_non_null(pub);
    assert_int_equal(EVP_PKEY_get_base_id(pub), EVP_PKEY_EC);
    char group[64];
    size_t glen;
    assert_int_equal(EVP_PKEY_get_group_name(pub, group, sizeof group, &glen), 1);
    assert_string_equal(group, "prime256v1");
    assert_int_equal(X509_check_host(x, "localhost", 0, 0, NULL), 1);
    assert_int_equal(X509_check_ip_asc(x, "127.0.0.1", 0), 1);
    assert_int_equal(X509_check_ip_asc(x, "::1", 0), 1);
    assert_int_equal(X509_check_host(x, "example.com", 0, 0, NULL), 0);
    int days, secs;
    assert_int_equal(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(x), X509_get0_notAfter(x)), 1);
    assert_true(days >= 3650 && days <= 3654);
    X509_free(x);

    /* Second load: the same files, the same certificate and fingerprint. */
    unsigned char f1[32], f2[32];
    fp(cert, f1);
    char *cert2 = NULL, *key2 = NULL;
    assert_int_equal(gj_tls_load(dir, "", "", &cert2, &key2), 0);
    fp(cert2, f2);
    assert_memory_equal(f1, f2, 32);
    assert_string_equal(cert, cert2);
    assert_string_equal(key, key2);
    free(cert2);
    free(key2);

    /* The generated pair loads as given files too. */
    assert_int_equal(gj_tls_load(NULL, cpath, kpath, &cert2, &key2), 0);
    assert_string_equal(cert, cert2);
    free(cert2);
    free(key2);

    /* A lost certificate: a new pair is generated. */
    assert_int_equal(unlink(cpath), 0);
    assert_int_equal(gj_tls_load(dir, NULL, NULL, &cert2, &key2), 0);
    fp(cert2, f2);
    assert_memory_not_equal(f1, f2, 32);
    free(cert2);
    free(key2);
    free(cert);
    free(key);
}

static void test_given_files_checked(void **state)
{
    (void)state;
    char a[128], b[128];
    sub(a, sizeof a, "p");
    sub(b, sizeof b, "q");
    char *c = NULL, *k = NULL;
    assert_int_equal(gj_tls_load(a, NULL, NULL, &c, &k), 0);
    free(c);
    free(k);
    assert_int_equal(gj_tls_load(b, NULL, NULL, &c, &k), 0);
    free(c);
    free(k);
    char ca[192], ka[192], kb[192], junk[192], missing[192];
    snprintf(ca, sizeof ca, "%s/tls/cert.pem", a);
    snprintf(ka, sizeof ka, "%s/tls/key.pem", a);
    snprintf(kb, sizeof kb, "%s/tls/key.pem", b);
    snprintf(junk, sizeof junk, "%s/junk.pem", root);
    snprintf(missing, sizeof missing, "%s/missing.pem", root);
    static const char junk_text[] = "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n";
    assert_int_equal(gj_write_file(junk, junk_text, sizeof junk_text - 1), 0);

    assert_int_equal(gj_tls_load(NULL, ca, ka, &c, &k), 0);
    free(c);
    free(k);
    c = k = (char *)1;
    assert_int_equal(gj_tls_load(NULL, ca, kb, &c, &k), -1);   /* mismatched pair */
    assert_null(c);
    assert_null(k);
    assert_int_equal(gj_tls_load(NULL, junk, ka, &c, &k), -1);   /* not a certificate */
    assert_int_equal(gj_tls_load(NULL, ca, junk, &c, &k), -1);   /* not a key */
    assert_int_equal(gj_tls_load(NULL, ca, ca, &c, &k), -1);     /* a certificate as key */
    assert_int_equal(gj_tls_load(NULL, missing, ka, &c, &k), -1);
    assert_int_equal(gj_tls_load(NULL, ca, NULL, &c, &k), -1);   /* one without the other */
    assert_int_equal(gj_tls_load(NULL, NULL, ka, &c, &k), -1);
    assert_null(c);
    assert_null(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_signed_once),
        cmocka_unit_test(test_given_files_checked),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
