/*
 * client_crl.c — --tls-crl (client_crl.h) on GnuTLS, which the HTTPS listener's TLS is
 * already: the CRLs' signatures checked against --tls-client-ca when read, a certificate
 * looked up in them by issuer and serial (gnutls_x509_crt_check_revocation).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "common/fsutil.h"
#include "service/auth/client_crl.h"
#include "service/base/log.h"

#define COMPONENT "tls"
#define CRL_MAX_BYTES (64u << 20)
#define CA_MAX_BYTES (1u << 20)

static gnutls_x509_crl_t *crls;
static unsigned n_crls;

void gj_client_crl_free(void)
{
    for (unsigned i = 0; i < n_crls; i++)
        gnutls_x509_crl_deinit(crls[i]);
    gnutls_free(crls);
    crls = NULL;
    n_crls = 0;
}

/* Reads a PEM file into a datum (free data). 0, or -1 logged. */
static int read_pem(const char *flag, const char *path, size_t max, gnutls_datum_t *out)
{
    char *data = NULL;
    size_t len = 0;
    if (gj_read_file(path, max, &data, &len) != 0) {
        gj_log_error(COMPONENT, "%s: cannot read %s", flag, path);
        return -1;
    }
    out->data = (unsigned char *)data;
    out->size = (unsigned)len;
    return 0;
}

/* Each CRL signed by one of the CAs: 0, or -1 logged naming the CRL's issuer. */
static int verify_all(const gnutls_x509_crt_t *cas, unsigned n_cas, const char *crl_path)
{
    for (unsigned i = 0; i < n_crls; i++) {
        unsigned status = 0;
        if (gnutls_x509_crl_verify(crls[i], cas, n_cas, 0, &status) < 0 || status != 0) {
            gnutls_datum_t dn = { NULL, 0 };
            gnutls_x509_crl_get_issuer_dn3(crls[i], &dn, 0);
            gj_log_error(COMPONENT, "--tls-crl: %s: the CRL of '%s' is not signed by a CA of --tls-client-ca",
                         crl_path, dn.data ? (const char *)dn.data : "?");
            gnutls_free(dn.data);
            return -1;
        }
        time_t next = gnutls_x509_crl_get_next_update(crls[i]);
        if (next != (time_t)-1 && next < time(NULL))
            gj_log_warn(COMPONENT, "--tls-crl: %s: CRL %u is past its next update: its issuer has a newer one",
                        crl_path, i + 1);
    }
    return 0;
}

int gj_client_crl_load(const char *crl_path, const char *ca_path)
{
    if (!crl_path || !crl_path[0])
        return 0;
    gnutls_datum_t crl_pem = { NULL, 0 }, ca_pem = { NULL, 0 };
    gnutls_x509_crt_t *cas = NULL;
    unsigned n_cas = 0;
    int rc = -1;
    if (read_pem("--tls-crl", crl_path, CRL_MAX_BYTES, &crl_pem) != 0 ||
        read_pem("--tls-client-ca", ca_path, CA_MAX_BYTES, &ca_pem) != 0)
        goto out;
    if (gnutls_x509_crl_list_import2(&crls, &n_crls, &crl_pem, GNUTLS_X509_FMT_PEM, 0) < 0 || n_crls == 0) {
        crls = NULL;
        n_crls = 0;
        gj_log_error(COMPONENT, "--tls-crl: %s holds no PEM CRL (-----BEGIN X509 CRL-----)", crl_path);
        goto out;
    }
    if (gnutls_x509_crt_list_import2(&cas, &n_cas, &ca_pem, GNUTLS_X509_FMT_PEM, 0) < 0) {
        cas = NULL;
        n_cas = 0;
        gj_log_error(COMPONENT, "--tls-client-ca: %s holds no PEM certificate", ca_path);
        goto out;
    }
    rc = verify_all(cas, n_cas, crl_path);
    if (rc == 0)
        gj_log_info(COMPONENT, "client certificates are checked against %u CRL%s of %s", n_crls,
                    n_crls == 1 ? "" : "s", crl_path);
out:
    for (unsigned i = 0; i < n_cas; i++)
        gnutls_x509_crt_deinit(cas[i]);
    gnutls_free(cas);
    free(crl_pem.data);
    free(ca_pem.data);
    if (rc != 0)
        gj_client_crl_free();
    return rc;
}

static int refuses(const gnutls_datum_t *cert, gnutls_x509_crt_fmt_t fmt, char *why, size_t cap)
{
    if (n_crls == 0)
        return 0;
    gnutls_x509_crt_t crt;
    int rc = -1;
    if (gnutls_x509_crt_init(&crt) < 0) {
        snprintf(why, cap, "out of memory");
        return 1;
    }
    if (gnutls_x509_crt_import(crt, cert, fmt) >= 0)
        rc = gnutls_x509_crt_check_revocation(crt, crls, n_crls);
    char serial[2 * 20 + 1] = "";   /* RFC 5280: at most 20 octets */
    unsigned char sn[20];
    size_t sn_len = sizeof sn;
    if (rc == 1 && gnutls_x509_crt_get_serial(crt, sn, &sn_len) >= 0)
        for (size_t i = 0; i < sn_len; i++)
            snprintf(serial + 2 * i, 3, "%02x", sn[i]);
    gnutls_x509_crt_deinit(crt);
    if (rc == 1)
        snprintf(why, cap, "it is revoked (serial %s is on --tls-crl)", serial);
    else if (rc < 0)
        snprintf(why, cap, "it cannot be checked against --tls-crl");
    return rc != 0;
}

int gj_client_crl_refuses_der(const unsigned char *der, size_t len, char *why, size_t cap)
{
    gnutls_datum_t d = { (unsigned char *)der, (unsigned)len };
    return refuses(&d, GNUTLS_X509_FMT_DER, why, cap);
}

int gj_client_crl_refuses_pem(const char *pem, size_t len, char *why, size_t cap)
{
    gnutls_datum_t d = { (unsigned char *)pem, (unsigned)len };
    return refuses(&d, GNUTLS_X509_FMT_PEM, why, cap);
}
