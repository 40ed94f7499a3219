/*
 * tls.c — the server certificate (ARCHITECTURE.md: one binary, its defaults): given PEM files are read, parsed and
 * checked to belong together; without them a self-signed EC P-256 certificate
 * (10 years, SAN localhost / 127.0.0.1 / ::1) is generated once into
 * DATA_DIR/tls/{cert.pem,key.pem}. The SHA-256 fingerprint is logged either way.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/fsutil.h"
#include "service/base/log.h"
#include "service/http/tls.h"

#define PEM_MAX_BYTES (1024 * 1024)

static const char *ssl_reason(void)
{
    static __thread char buf[256];
    unsigned long e = ERR_peek_last_error();
    if (!e)
        return "no details";
    ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return buf;
}

static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

static int read_pem(const char *path, const char *what, char **text)
{
    size_t len;
    if (gj_read_file(path, PEM_MAX_BYTES, text, &len) != 0) {
        gj_log_error("tls", "%s %s: cannot read: %s", what, path,
                     errno == EFBIG ? "larger than 1 MiB" : strerror(errno));
        *text = NULL;
        return -1;
    }
    return 0;
}

/* Writes data to path through a temporary file (mode) and rename(). */
static int write_private(const char *path, const char *data, size_t len, mode_t mode)
{
    char tmp[GJ_PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) {
        gj_log_error("tls", "cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        off += (size_t)w;
    }
    int rc = (off == len && fchmod(fd, mode) == 0 && fsync(fd) == 0) ? 0 : -1;
    if (close(fd) != 0)
        rc = -1;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -1;
    if (rc != 0) {
        gj_log_error("tls", "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
    return rc;
}

static int fingerprint(X509 *cert, char out[96 + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!X509_digest(cert, EVP_sha256(), md, &n) || n != 32)
        return -1;
    static const char hex[] = "0123456789ABCDEF";
    for (unsigned int i = 0; i < n; i++) {
        out[i * 3] = hex[md[i] >> 4];
        out[i * 3 + 1] = hex[md[i] & 15];
        out[i * 3 + 2] = i + 1 < n ? ':' : '\0';
    }
    return 0;
}

static int add_ext(X509 *cert, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext)
        return -1;
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

static char *bio_text(BIO *bio)
{
    char *data = NULL;
    long len = BIO_get_mem_data(bio, &data);
    if (len <= 0)
        return NULL;
    char *out = malloc((size_t)len + 1);
    if (!out)
        return NULL;
    memcpy(out, data, (size_t)len);
    out[len] = '\0';
    return out;
}

/* Generates key and self-signed certificate as PEM text. */
static int generate(char **cert_pem, char **key_pem)
{
    *cert_pem = *key_pem = NULL;
    int rc = -1;
    EVP_PKEY *pkey = EVP_EC_gen("P-256");
    X509 *cert = X509_new();
    BIGNUM *serial = BN_new();
    BIO *cb = BIO_new(BIO_s_mem());
    BIO *kb = BIO_new(BIO_s_mem());
    if (!pkey || !cert || !serial || !cb || !kb)
        goto out;
    X509_NAME *name = X509_get_subject_name(cert);
    ASN1_INTEGER *sn = X509_get_serialNumber(cert);
    if (!X509_set_version(cert, X509_VERSION_3) ||
        !BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) || !BN_to_ASN1_INTEGER(serial, sn) ||
        !X509_gmtime_adj(X509_getm_notBefore(cert), -3600) ||
        !X509_time_adj_ex(X509_getm_notAfter(cert), 3653, 0, NULL) ||
        !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"gpujobd", -1, -1, 0) ||
        !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0) ||
        !X509_set_issuer_name(cert, name) || !X509_set_pubkey(cert, pkey))
        goto out;
    if (add_ext(cert, NID_basic_constraints, "critical,CA:FALSE") != 0 ||
        add_ext(cert, NID_key_usage, "critical,digitalSignature") != 0 ||
        add_ext(cert, NID_ext_key_usage, "serverAuth") != 0 ||
        add_ext(cert, NID_subject_key_identifier, "hash") != 0 ||
        add_ext(cert, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1") != 0)
        goto out;
    if (!X509_sign(cert, pkey, EVP_sha256()))
        goto out;
    if (!PEM_write_bio_X509(cb, cert) || !PEM_write_bio_PrivateKey(kb, pkey, NULL, NULL, 0, NULL, NULL))
        goto out;
    *cert_pem = bio_text(cb);
    *key_pem = bio_text(kb);
    if (!*cert_pem || !*key_pem) {
        free(*cert_pem);
        free(*key_pem);
        *cert_pem = *key_pem = NULL;
        goto out;
    }
    rc = 0;
out:
    if (rc != 0)
        gj_log_error("tls", "cannot generate a self-signed certificate: %s", ssl_reason());
    BIO_free(kb);
    BIO_free(cb);
    BN_free(serial);
    X509_free(cert);
    EVP_PKEY_free(pkey);
    return rc;
}

/* Parses both, checks they match, logs the fingerprint. 0 or -1 (one line naming the file). */
static int check_pair(const char *cert_path, const char *cert_pem, const char *key_path, const char *key_pem,
                      int self_signed)
{
    int rc = -1;
    X509 *cert = NULL;
    EVP_PKEY *key = NULL;
    BIO *b = BIO_new_mem_buf(cert_pem, -1);
    if (!b)
        return -1;
    cert = PEM_read_bio_X509(b, NULL, no_passphrase, NULL);
    BIO_free(b);
    if (!cert) {
        gj_log_error("tls", "certificate %s: not a PEM certificate (%s)", cert_path, ssl_reason());
        goto out;
    }
    b = BIO_new_mem_buf(key_pem, -1);
    if (!b)
        goto out;
    key = PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL);
    BIO_free(b);
    if (!key) {
        gj_log_error("tls", "key %s: not an unencrypted PEM private key (%s)", key_path, ssl_reason());
        goto out;
    }
    if (X509_check_private_key(cert, key) != 1) {
        ERR_clear_error();
        gj_log_error("tls", "key %s does not match certificate %s", key_path, cert_path);
        goto out;
    }
    char fp[97];
    if (fingerprint(cert, fp) != 0) {
        gj_log_error("tls", "certificate %s: cannot compute its fingerprint", cert_path);
        goto out;
    }
    if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0)
        gj_log_warn("tls", "certificate %s has expired", cert_path);
    json_t *fields = json_pack("{s:s, s:s, s:b}", "fingerprint_sha256", fp, "cert", cert_path,
                               "self_signed", self_signed);
    gj_log_fields(GJ_LOG_INFO, "tls", "server certificate", fields);
    rc = 0;
out:
    EVP_PKEY_free(key);
    X509_free(cert);
    return rc;
}

static int load_pair(const char *cert_path, const char *key_path, char **cert_pem, char **key_pem,
                     int self_signed)
{
    char *c = NULL, *k = NULL;
    if (read_pem(cert_path, "certificate", &c) != 0)
        return -1;
    if (read_pem(key_path, "key", &k) != 0) {
        free(c);
        return -1;
    }
    if (check_pair(cert_path, c, key_path, k, self_signed) != 0) {
        free(c);
        OPENSSL_cleanse(k, strlen(k));
        free(k);
        return -1;
    }
    *cert_pem = c;
    *key_pem = k;
    return 0;
}

int gj_tls_load(const char *data_dir, const char *cert_path, const char *key_path,
                char **cert_pem, char **key_pem)
{
    if (!cert_pem || !key_pem)
        return -1;
    *cert_pem = *key_pem = NULL;
    int have_cert = cert_path && *cert_path, have_key = key_path && *key_path;
    if (have_cert || have_key) {
        if (!have_cert || !have_key) {
            gj_log_error("tls", "--tls-cert and --tls-key go together: %s is missing",
                         have_cert ? "--tls-key" : "--tls-cert");
            return -1;
        }
        return load_pair(cert_path, key_path, cert_pem, key_pem, 0);
    }

    if (!data_dir || !*data_dir) {
        gj_log_error("tls", "no data dir for the self-signed certificate");
        return -1;
    }
    char dir[GJ_PATH_MAX], cpath[GJ_PATH_MAX], kpath[GJ_PATH_MAX];
    if (gj_path_join(dir, sizeof dir, data_dir, "tls") != 0 || gj_path_join(cpath, sizeof cpath, dir, "cert.pem") != 0 ||
        gj_path_join(kpath, sizeof kpath, dir, "key.pem") != 0) {
        gj_log_error("tls", "data dir path too long: %s", data_dir);
        return -1;
    }
    int c_exists = access(cpath, F_OK) == 0, k_exists = access(kpath, F_OK) == 0;
    if (c_exists && k_exists)
        return load_pair(cpath, kpath, cert_pem, key_pem, 1);
    if (c_exists || k_exists)
        gj_log_warn("tls", "%s lacks %s: generating a new self-signed certificate", dir,
                    c_exists ? "key.pem" : "cert.pem");

    if (gj_mkdir_p(dir, 0700) != 0) {
        gj_log_error("tls", "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    char *c = NULL, *k = NULL;
    if (generate(&c, &k) != 0)
        return -1;
    /* Key first: a crash in between leaves no certificate, and the pair is regenerated. */
    int rc = write_private(kpath, k, strlen(k), 0600);
    if (rc == 0)
        rc = write_private(cpath, c, strlen(c), 0644);
    free(c);
    OPENSSL_cleanse(k, strlen(k));
    free(k);
    if (rc != 0)
        return -1;
    gj_log_info("tls", "generated a self-signed certificate in %s (valid 10 years)", dir);
    return load_pair(cpath, kpath, cert_pem, key_pem, 1);
}
