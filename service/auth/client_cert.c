/*
 * client_cert.c — the HTTPS listener's client certificate (client_cert.h), checked with
 * GnuTLS against the trust libmicrohttpd was given.
 */
#include <stdio.h>
#include <string.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>

#include "service/auth/client_cert.h"
#include "service/auth/client_crl.h"

/* What a failed verification's status means, in a sentence for the log and the answer. */
static const char *verify_problem(unsigned status)
{
    if (status & GNUTLS_CERT_EXPIRED)
        return "it has expired";
    if (status & GNUTLS_CERT_NOT_ACTIVATED)
        return "it is not valid yet";
    if (status & (GNUTLS_CERT_SIGNER_NOT_FOUND | GNUTLS_CERT_SIGNER_NOT_CA))
        return "it is not issued by a CA of --tls-client-ca";
    if (status & GNUTLS_CERT_REVOKED)
        return "it is revoked";
    if (status & GNUTLS_CERT_PURPOSE_MISMATCH)
        return "it is not for client authentication";
    return "it does not verify";
}

int gj_client_cert_cn(struct MHD_Connection *conn, char *cn, size_t cap, char *why, size_t why_cap)
{
    cn[0] = why[0] = '\0';
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    gnutls_session_t session = ci ? (gnutls_session_t)ci->tls_session : NULL;
    unsigned n = 0;
    const gnutls_datum_t *chain = session ? gnutls_certificate_get_peers(session, &n) : NULL;
    if (!chain || n == 0)
        return 0;
    unsigned status = 0;
    gnutls_typed_vdata_st purpose = { GNUTLS_DT_KEY_PURPOSE_OID, (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0 };
    if (gnutls_certificate_verify_peers(session, &purpose, 1, &status) < 0 || status != 0) {
        snprintf(why, why_cap, "%s", verify_problem(status));
        return -1;
    }
    if (gj_client_crl_refuses_der(chain[0].data, chain[0].size, why, why_cap))
        return -1;
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) < 0) {
        snprintf(why, why_cap, "out of memory");
        return -1;
    }
    size_t len = cap;
    int rc = gnutls_x509_crt_import(crt, &chain[0], GNUTLS_X509_FMT_DER) >= 0 &&
             gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn, &len) >= 0 && cn[0]
                 ? 1
                 : -1;
    gnutls_x509_crt_deinit(crt);
    if (rc < 0) {
        cn[0] = '\0';
        snprintf(why, why_cap, "its subject has no common name (CN) naming a tenant");
    }
    return rc;
}
