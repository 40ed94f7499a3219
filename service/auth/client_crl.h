/*
 * client_crl.h — certificate revocation lists (--tls-crl, PEM) for the client certificates
 * of --tls-client-ca, checked on both listeners: the gRPC port (grpc_server.c) and HTTPS
 * (service/client_cert.c). Read once at start, each CRL verified against --tls-client-ca's
 * CAs; read-only afterwards, so the checks need no lock.
 */
#ifndef GJ_CLIENT_CRL_H
#define GJ_CLIENT_CRL_H

#include <stddef.h>

/* Reads the CRLs of crl_path ("": none, nothing to do), each signed by a CA of ca_path. 0, or
 * -1 with the reason logged (unreadable, not a PEM CRL, not signed by a trusted CA). */
int gj_client_crl_load(const char *crl_path, const char *ca_path);
/* Frees what gj_client_crl_load read. */
void gj_client_crl_free(void);
/* 1 when the certificate (DER) is refused: a CRL lists it, or it cannot be read; why (cap
 * bytes) says which, naming its serial number, nothing more of it. 0 when no CRL lists it or
 * none is loaded. */
int gj_client_crl_refuses_der(const unsigned char *der, size_t len, char *why, size_t cap);
/* The same for a PEM certificate (what gRPC's auth context gives). */
int gj_client_crl_refuses_pem(const char *pem, size_t len, char *why, size_t cap);

#endif
