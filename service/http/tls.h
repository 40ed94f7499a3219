/*
 * tls.h — the server certificate: given files, or a self-signed one generated
 * once into DATA_DIR/tls (EC P-256, SAN localhost/127.0.0.1/::1) with its
 * SHA-256 fingerprint logged.
 */
#ifndef GJ_TLS_H
#define GJ_TLS_H

/* Loads (or creates) cert and key PEM text; caller frees both. 0 or -1 (logged). */
int gj_tls_load(const char *data_dir, const char *cert_path, const char *key_path,
                char **cert_pem, char **key_pem);

#endif
