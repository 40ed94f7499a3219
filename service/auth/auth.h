/*
 * auth.h — API keys and tenants. A key is "gjk_" + 43 base64url characters of
 * 32 random bytes; it is shown once and stored as its SHA-256. Lookups hash the
 * presented key and compare digests in constant time.
 */
#ifndef GJ_AUTH_H
#define GJ_AUTH_H

#include <libpq-fe.h>
#include "service/db/blobstore.h"

#define GJ_API_KEY_LEN 47   /* "gjk_" + 43 */

struct gj_principal {
    char key_id[GJ_UUID_LEN + 1];
    char tenant_id[GJ_UUID_LEN + 1];
    char tenant_name[201];
    int is_admin;
};

/* Fills key (GJ_API_KEY_LEN + 1 bytes) with a fresh random key. 0 or -1. */
int gj_api_key_generate(char key[GJ_API_KEY_LEN + 1]);

/* Creates the tenant if needed and a key for it; writes the clear key once into
 * key_out. role: "admin" or "user". 0, or -1 with a log line. */
int gj_api_key_create(PGconn *conn, const char *tenant_name, const char *role, const char *label,
                      char key_out[GJ_API_KEY_LEN + 1], char key_id_out[GJ_UUID_LEN + 1],
                      char tenant_id_out[GJ_UUID_LEN + 1]);

/* As gj_api_key_create, for a key given (gj_api_key_well_formed) rather than made. */
int gj_api_key_register(PGconn *conn, const char *tenant_name, const char *role, const char *label,
                        const char *key, char key_id_out[GJ_UUID_LEN + 1], char tenant_id_out[GJ_UUID_LEN + 1]);

/* 1 when key has the form of an API key ("gjk_" + 43 base64url characters), else 0. */
int gj_api_key_well_formed(const char *key);

/* Resolves a presented key. 1 valid (p filled), 0 unknown or revoked, -1 error. */
int gj_api_key_verify(PGconn *conn, const char *presented, struct gj_principal *p);

/* The SHA-256 of a presented key: what is stored, and what key_cache.h is keyed by.
 * 1 done, 0 not of a key's length and prefix (not valid, digest untouched), -1 error. */
int gj_api_key_digest(const char *presented, unsigned char digest[32]);

/* gj_api_key_verify of a key by its digest (gj_api_key_digest). 1, 0 or -1 as it. */
int gj_api_key_verify_digest(PGconn *conn, const unsigned char digest[32], struct gj_principal *p);

/* The tenant named name as a principal with a user key's rights and no key (a client
 * certificate's CN, service/grpc). 1 found (p filled), 0 no such tenant, -1 error. */
int gj_tenant_principal(PGconn *conn, const char *name, struct gj_principal *p);

/* Revokes a key by id. 1 revoked, 0 no such (or already revoked), -1 error. */
int gj_api_key_revoke(PGconn *conn, const char *key_id);

/* Which of n key ids are revoked or gone, in one query (open event streams re-check
 * their keys with it): revoked[i] is set to 1 or 0. 0, or -1 on a database error
 * (revoked untouched). Ids that are not UUIDs count as gone. */
int gj_api_keys_revoked(PGconn *conn, const char (*ids)[GJ_UUID_LEN + 1], size_t n, unsigned char *revoked);

/* At first start: when no admin key exists, creates one in tenant "admin",
 * writes it to path (mode 0600) and logs it once. 0 or -1. */
int gj_admin_key_bootstrap(PGconn *conn, const char *path);

/* At start with --admin-key-file: when no admin key exists, registers key (read from
 * the file named by source) in tenant "admin"; nothing is written or logged but its key
 * id. When one exists and key is not a live admin key, warns (naming source, never the
 * key). 0 or -1. */
int gj_admin_key_adopt(PGconn *conn, const char *key, const char *source);

#endif
