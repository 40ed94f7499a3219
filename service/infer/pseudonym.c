/*
 * pseudonym.c — the pseudonymisation secret and the keys made with it (infer.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "service/db/db.h"
#include "service/infer/infer.h"
#include "service/base/log.h"

#define COMPONENT "inference"
#define SECRET_NAME "pseudonym_hmac_v1"

static unsigned char g_secret[512];
static size_t g_secret_len;

int gj_infer_key(const char *text, char hex[65])
{
    hex[0] = '\0';
    if (!g_secret_len || !text)
        return -1;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!HMAC(EVP_sha256(), g_secret, (int)g_secret_len, (const unsigned char *)text, strlen(text), md, &n) ||
        n != 32)
        return -1;
    for (unsigned i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return 0;
}

int gj_infer_pseudonym_init(const struct gj_server *srv)
{
    const char *given = srv->cfg.pseudonym_secret;   /* checked by config.c: 32 to 512 */
    if (given[0]) {
        size_t n = strlen(given);
        if (n < 32 || n > sizeof g_secret) {
            gj_log_error(COMPONENT, "--pseudonym-secret must be 32 to %zu characters", sizeof g_secret);
            return -1;
        }
        memcpy(g_secret, given, n);
        g_secret_len = n;
        gj_log_info(COMPONENT, "pseudonymisation secret: from --pseudonym-secret (GPUJOBD_PSEUDONYM_SECRET)");
        return 0;
    }
    unsigned char fresh[32];
    if (RAND_bytes(fresh, sizeof fresh) != 1) {
        gj_log_error(COMPONENT, "cannot generate the pseudonymisation secret (RAND_bytes)");
        return -1;
    }
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", fresh[i]);
    explicit_bzero(fresh, sizeof fresh);
    PGconn *conn = gj_db_connect(srv->database_url);
    if (!conn)
        return -1;
    int rc = -1;
    const char *p[2] = { SECRET_NAME, hex };
    if (gj_db_cmd(conn,
                  "INSERT INTO server_secrets (name, value) VALUES ($1, decode($2, 'hex'))"
                  " ON CONFLICT (name) DO NOTHING",
                  2, p) == 0) {
        PGresult *res = gj_db_exec(conn, "SELECT encode(value, 'hex') FROM server_secrets WHERE name = $1", 1, p,
                                   NULL);
        if (res && PQntuples(res) == 1) {
            const char *v = PQgetvalue(res, 0, 0);
            size_t n = strlen(v) / 2;
            if (n >= 32 && n <= sizeof g_secret) {
                for (size_t i = 0; i < n; i++) {
                    unsigned x;
                    sscanf(v + 2 * i, "%2x", &x);
                    g_secret[i] = (unsigned char)x;
                }
                g_secret_len = n;
                rc = 0;
            }
        }
        if (res) {
            /* the hex text of the secret is not left in freed memory */
            if (PQntuples(res) == 1)
                explicit_bzero(PQgetvalue(res, 0, 0), strlen(PQgetvalue(res, 0, 0)));
            PQclear(res);
        }
    }
    explicit_bzero(hex, sizeof hex);
    PQfinish(conn);
    if (rc)
        gj_log_error(COMPONENT, "cannot read the pseudonymisation secret from the database");
    return rc;
}

