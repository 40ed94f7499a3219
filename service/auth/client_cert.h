/*
 * client_cert.h — a client certificate on the HTTPS listener (libmicrohttpd's GnuTLS
 * session): verified against --tls-client-ca (libmicrohttpd asks the client for one when
 * that trust is set, MHD_OPTION_HTTPS_MEM_TRUST) and named by its subject's CN, the tenant it
 * authenticates as, as on the gRPC port (service/grpc/grpc_server.h).
 */
#ifndef GJ_CLIENT_CERT_H
#define GJ_CLIENT_CERT_H

#include <stddef.h>

struct MHD_Connection;

/* 1: a certificate that verifies, its CN in cn; 0: none presented (or no TLS); -1: one was
 * presented and is refused, why saying why (another issuer, expired, not yet valid, no CN;
 * never the certificate's contents beyond that). */
int gj_client_cert_cn(struct MHD_Connection *conn, char *cn, size_t cap, char *why, size_t why_cap);

#endif
