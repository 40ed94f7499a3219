/*
 * auth.c — API keys (ARCHITECTURE.md: data model; HTTP API conventions). A key is "gjk_" + base64url(32 random bytes);
 * only its SHA-256 is stored. Verification hashes the presented key, selects the
 * row by that hash, and compares the digests with CRYPTO_memcmp.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "service/auth/auth.h"
#include "service/base/base64.h"
#include "service/db/db.h"
#include "service/base/log.h"
#include "service/base/uuid.h"

#define KEY_PREFIX "gjk_"
#define KEY_SHOWN_PREFIX 8   /* "gjk_" + 4 characters, kept to recognise a key in lists */
/* Serialises admin bootstrap between replicas ('gpjb' 'admn'). */
#define BOOTSTRAP_LOCK_KEY "7453171002764141678"

static int sha256(const char *s, size_t n, unsigned char out[32])
{
    unsigned int len = 0;
    return EVP_Digest(s, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32 ? 0 : -1;
}

/* bytea in text output form ("\x0a1b...") into 32 bytes; 0 or -1. */
static int bytea32(const char *text, unsigned char out[32])
{
    if (strncmp(text, "\\x", 2) != 0 || strlen(text) != 2 + 64)
        return -1;
    for (int i = 0; i < 32; i++) {
        unsigned v;
        if (sscanf(text + 2 + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (unsigned char)v;
    }
    return 0;
}

int gj_api_key_generate(char key[GJ_API_KEY_LEN + 1])
{
    unsigned char raw[32];
    if (RAND_bytes(raw, sizeof raw) != 1) {
        gj_log_error("auth", "RAND_bytes failed");
        return -1;
    }
    memcpy(key, KEY_PREFIX, 4);
    long n = gj_base64_encode(raw, sizeof raw, key + 4, GJ_API_KEY_LEN + 1 - 4, GJ_BASE64_URL);
    OPENSSL_cleanse(raw, sizeof raw);
    return n == GJ_API_KEY_LEN - 4 ? 0 : -1;
}

int gj_api_key_well_formed(const char *key)
{
    if (!key || strlen(key) != GJ_API_KEY_LEN || strncmp(key, KEY_PREFIX, 4) != 0)
        return 0;
    for (const char *c = key + 4; *c; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' ||
              *c == '_'))
            return 0;
    return 1;
}

int gj_api_key_register(PGconn *conn, const char *tenant_name, const char *role, const char *label,
                        const char *key, char key_id_out[GJ_UUID_LEN + 1], char tenant_id_out[GJ_UUID_LEN + 1])
{
    if (!tenant_name || strlen(tenant_name) < 1 || strlen(tenant_name) > 200) {
        gj_log_error("auth", "tenant name must be 1 to 200 bytes");
        return -1;
    }
    if (!role || (strcmp(role, "admin") != 0 && strcmp(role, "user") != 0)) {
        gj_log_error("auth", "role must be admin or user");
        return -1;
    }
    if (!gj_api_key_well_formed(key)) {
        gj_log_error("auth", "not an API key (gjk_ and 43 base64url characters)");
        return -1;
    }
    unsigned char digest[32];
    char hex[65], prefix[KEY_SHOWN_PREFIX + 1];
    if (sha256(key, strlen(key), digest) != 0)
        return -1;
    gj_sha256_hex(digest, hex);
    memcpy(prefix, key, KEY_SHOWN_PREFIX);
    prefix[KEY_SHOWN_PREFIX] = '\0';
    const char *p[5] = { tenant_name, hex, prefix, role, label };
    /* One statement: the tenant is found or created (race-free) and the key added. */
    PGresult *res = gj_db_exec(conn,
                               "WITH t AS (INSERT INTO tenants (name) VALUES ($1)"
                               "           ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id)"
                               " INSERT INTO api_keys (tenant_id, key_hash, prefix, role, label)"
                               " SELECT id, decode($2, 'hex'), $3, $4, $5 FROM t"
                               " RETURNING id, tenant_id",
                               5, p, NULL);
    if (!res || PQntuples(res) != 1) {
        PQclear(res);
        gj_log_error("auth", "cannot create an API key for tenant '%s'", tenant_name);
        return -1;
    }
    if (key_id_out)
        snprintf(key_id_out, GJ_UUID_LEN + 1, "%s", PQgetvalue(res, 0, 0));
    if (tenant_id_out)
        snprintf(tenant_id_out, GJ_UUID_LEN + 1, "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    return 0;
}

int gj_api_key_create(PGconn *conn, const char *tenant_name, const char *role, const char *label,
                      char key_out[GJ_API_KEY_LEN + 1], char key_id_out[GJ_UUID_LEN + 1],
                      char tenant_id_out[GJ_UUID_LEN + 1])
{
    char key[GJ_API_KEY_LEN + 1];
    if (gj_api_key_generate(key) != 0)
        return -1;
    int rc = gj_api_key_register(conn, tenant_name, role, label, key, key_id_out, tenant_id_out);
    if (rc == 0)
        memcpy(key_out, key, sizeof key);
    OPENSSL_cleanse(key, sizeof key);
    return rc;
}

int gj_api_key_digest(const char *presented, unsigned char digest[32])
{
    if (!presented || strlen(presented) != GJ_API_KEY_LEN || strncmp(presented, KEY_PREFIX, 4) != 0)
        return 0;
    return sha256(presented, GJ_API_KEY_LEN, digest) == 0 ? 1 : -1;
}

int gj_api_key_verify_digest(PGconn *conn, const unsigned char digest[32], struct gj_principal *p)
{
    char hex[65];
    gj_sha256_hex(digest, hex);
    const char *params[1] = { hex };
    PGresult *res = gj_db_exec(conn,
                               "SELECT k.id, k.tenant_id, t.name, k.role, k.key_hash, k.revoked_at IS NOT NULL"
                               " FROM api_keys k JOIN tenants t ON t.id = k.tenant_id"
                               " WHERE k.key_hash = decode($1, 'hex')",
                               1, params, NULL);
    if (!res)
        return -1;
    int rc = 0;
    unsigned char stored[32];
    if (PQntuples(res) == 1 && bytea32(PQgetvalue(res, 0, 4), stored) == 0 &&
        CRYPTO_memcmp(stored, digest, 32) == 0 && strcmp(PQgetvalue(res, 0, 5), "f") == 0) {
        if (p) {
            memset(p, 0, sizeof *p);
            snprintf(p->key_id, sizeof p->key_id, "%s", PQgetvalue(res, 0, 0));
            snprintf(p->tenant_id, sizeof p->tenant_id, "%s", PQgetvalue(res, 0, 1));
            snprintf(p->tenant_name, sizeof p->tenant_name, "%s", PQgetvalue(res, 0, 2));
            p->is_admin = strcmp(PQgetvalue(res, 0, 3), "admin") == 0;
        }
        rc = 1;
    }
    PQclear(res);
    return rc;
}

int gj_api_key_verify(PGconn *conn, const char *presented, struct gj_principal *p)
{
    unsigned char digest[32];
    int rc = gj_api_key_digest(presented, digest);
    return rc == 1 ? gj_api_key_verify_digest(conn, digest, p) : rc;
}

int gj_tenant_principal(PGconn *conn, const char *name, struct gj_principal *p)
{
    const char *params[1] = { name };
    PGresult *res = gj_db_exec(conn, "SELECT id, name FROM tenants WHERE name = $1", 1, params, NULL);
    if (!res)
        return -1;
    int rc = PQntuples(res) == 1;
    if (rc) {
        memset(p, 0, sizeof *p);
        snprintf(p->tenant_id, sizeof p->tenant_id, "%s", PQgetvalue(res, 0, 0));
        snprintf(p->tenant_name, sizeof p->tenant_name, "%s", PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return rc;
}

int gj_api_key_revoke(PGconn *conn, const char *key_id)
{
    if (!gj_is_uuid(key_id))
        return 0;
    const char *p[1] = { key_id };
    PGresult *res = gj_db_exec(conn,
                               "UPDATE api_keys SET revoked_at = now()"
                               " WHERE id = $1::uuid AND revoked_at IS NULL RETURNING id",
                               1, p, NULL);
    if (!res)
        return -1;
    int rc = PQntuples(res) > 0 ? 1 : 0;
    PQclear(res);
    return rc;
}

int gj_api_keys_revoked(PGconn *conn, const char (*ids)[GJ_UUID_LEN + 1], size_t n, unsigned char *revoked)
{
    if (n == 0)
        return 0;
    char *list = malloc(n * (GJ_UUID_LEN + 1) + 3);
    if (!list)
        return -1;
    size_t len = 0, valid = 0;
    list[len++] = '{';
    for (size_t i = 0; i < n; i++) {
        revoked[i] = !gj_is_uuid(ids[i]);
        if (revoked[i])
            continue;
        if (valid++)
            list[len++] = ',';
        memcpy(list + len, ids[i], GJ_UUID_LEN);
        len += GJ_UUID_LEN;
    }
    list[len++] = '}';
    list[len] = '\0';
    const char *p[1] = { list };
    PGresult *res = gj_db_exec(conn,
                               "SELECT u.id::text FROM unnest($1::uuid[]) AS u(id) WHERE NOT EXISTS"
                               " (SELECT 1 FROM api_keys k WHERE k.id = u.id AND k.revoked_at IS NULL)",
                               1, p, NULL);
    free(list);
    if (!res)
        return -1;
    for (int row = 0; row < PQntuples(res); row++)
        for (size_t i = 0; i < n; i++)
            if (strcasecmp(ids[i], PQgetvalue(res, row, 0)) == 0)
                revoked[i] = 1;
    PQclear(res);
    return 0;
}

static int write_key_file(int fd, const char *key)
{
    char line[GJ_API_KEY_LEN + 2];
    int n = snprintf(line, sizeof line, "%s\n", key);
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = write(fd, line + off, (size_t)n - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            OPENSSL_cleanse(line, sizeof line);
            return -1;
        }
        off += (size_t)w;
    }
    OPENSSL_cleanse(line, sizeof line);
    return fsync(fd);
}

/* Opens the bootstrap's transaction, holding the lock that serialises replicas starting
 * together (one registers the key, the others then see it). 1 when an admin key exists
 * (the transaction rolled back), 0 when none (the transaction open), -1 error. */
static int begin_bootstrap(PGconn *conn)
{
    if (!conn)
        return -1;
    if (PQtransactionStatus(conn) != PQTRANS_IDLE) {
        gj_log_error("auth", "admin bootstrap needs a connection outside a transaction");
        return -1;
    }
    const char *lock[1] = { BOOTSTRAP_LOCK_KEY };
    if (gj_db_begin(conn) != 0)
        return -1;
    if (gj_db_cmd(conn, "SELECT pg_advisory_xact_lock($1::bigint)", 1, lock) != 0) {
        gj_db_rollback(conn);
        return -1;
    }
    PGresult *res = gj_db_exec(conn, "SELECT 1 FROM api_keys WHERE role = 'admin' AND revoked_at IS NULL LIMIT 1",
                               0, NULL, NULL);
    if (!res) {
        gj_db_rollback(conn);
        return -1;
    }
    int exists = PQntuples(res) > 0;
    PQclear(res);
    if (exists)
        gj_db_rollback(conn);
    return exists;
}

int gj_admin_key_adopt(PGconn *conn, const char *key, const char *source)
{
    int exists = begin_bootstrap(conn);
    if (exists < 0)
        return -1;
    if (exists) {
        struct gj_principal p;
        int ok = gj_api_key_verify(conn, key, &p);
        if (ok < 0)
            return -1;
        if (ok == 0 || !p.is_admin)
            gj_log_warn("auth", "the key in %s is not an admin key of this database, which has another: "
                                "requests with it are refused (it was not registered)", source);
        return 0;
    }
    char key_id[GJ_UUID_LEN + 1], tenant_id[GJ_UUID_LEN + 1];
    if (gj_api_key_register(conn, "admin", "admin", "bootstrap", key, key_id, tenant_id) != 0 ||
        gj_db_commit(conn) != 0) {
        gj_db_rollback(conn);
        return -1;
    }
    gj_log_info("auth", "registered the admin API key of %s (key id %s)", source, key_id);
    return 0;
}

int gj_admin_key_bootstrap(PGconn *conn, const char *path)
{
    if (!path || !*path)
        return -1;
    int exists = begin_bootstrap(conn);
    if (exists != 0)
        return exists < 0 ? -1 : 0;

    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == EEXIST)
            gj_log_error("auth", "the database has no admin key but %s exists: remove it to have a new "
                                 "admin key created, or restore the database it belongs to", path);
        else
            gj_log_error("auth", "cannot create %s: %s", path, strerror(errno));
        gj_db_rollback(conn);
        return -1;
    }
    char key[GJ_API_KEY_LEN + 1], key_id[GJ_UUID_LEN + 1], tenant_id[GJ_UUID_LEN + 1];
    int rc = gj_api_key_create(conn, "admin", "admin", "bootstrap", key, key_id, tenant_id);
    if (rc == 0 && write_key_file(fd, key) != 0) {
        gj_log_error("auth", "cannot write %s: %s", path, strerror(errno));
        rc = -1;
    }
    if (close(fd) != 0 && rc == 0) {
        gj_log_error("auth", "cannot write %s: %s", path, strerror(errno));
        rc = -1;
    }
    if (rc == 0 && gj_db_commit(conn) != 0)
        rc = -1;
    if (rc != 0) {
        gj_db_rollback(conn);
        unlink(path);
        OPENSSL_cleanse(key, sizeof key);
        return -1;
    }
    /* The key itself never reaches the log (logs are shipped, kept, read by others):
     * the file, readable by this user only, is where it is. */
    json_t *fields = json_pack("{s:s, s:s}", "key_id", key_id, "file", path);
    gj_log_fields(GJ_LOG_WARN, "auth", "created the admin API key; it is in the file named here "
                                       "(mode 0600), and nowhere else", fields);
    OPENSSL_cleanse(key, sizeof key);
    return 0;
}
