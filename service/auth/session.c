/*
 * session.c — browser sessions (session.h): the token, its cookie, its CSRF token, its
 * rows in `sessions` (migrations/0006_sessions.sql), and the request authentication that
 * http_server.c asks for when a request has no Authorization header.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "service/base/base64.h"
#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/base/log.h"
#include "service/auth/session.h"

#define CSRF_LABEL "gpujobd csrf v1"

static int token_hash_hex(const char *token, char hex[65])
{
    unsigned char md[32];
    unsigned int n = 0;
    if (EVP_Digest(token, strlen(token), md, &n, EVP_sha256(), NULL) != 1 || n != 32)
        return -1;
    gj_sha256_hex(md, hex);
    return 0;
}

static int is_token(const char *s, size_t n)
{
    if (n != GJ_SESSION_TOKEN_LEN)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
              ch == '_'))
            return 0;
    }
    return 1;
}

int gj_session_csrf(const char *token, char *csrf)
{
    unsigned char mac[32];
    unsigned int n = 0;
    if (!HMAC(EVP_sha256(), token, (int)strlen(token), (const unsigned char *)CSRF_LABEL, sizeof CSRF_LABEL - 1,
              mac, &n) || n != 32)
        return -1;
    long len = gj_base64_encode(mac, sizeof mac, csrf, GJ_SESSION_TOKEN_LEN + 1, GJ_BASE64_URL);
    OPENSSL_cleanse(mac, sizeof mac);
    return len == GJ_SESSION_TOKEN_LEN ? 0 : -1;
}

int gj_session_csrf_ok(const char *token, const char *presented)
{
    char want[GJ_SESSION_TOKEN_LEN + 1];
    if (!presented || strlen(presented) != GJ_SESSION_TOKEN_LEN || gj_session_csrf(token, want) != 0)
        return 0;
    int ok = CRYPTO_memcmp(want, presented, GJ_SESSION_TOKEN_LEN) == 0;
    OPENSSL_cleanse(want, sizeof want);
    return ok;
}

int gj_session_method_is_safe(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 || strcmp(method, "OPTIONS") == 0;
}

int gj_session_cookie_token(const char *h, char *token)
{
    static const char name[] = GJ_SESSION_COOKIE "=";
    const size_t nlen = sizeof name - 1;
    /* cookie-string: name=value pairs separated by "; " (RFC 6265 §4.2.1); the first
     * pair of our name counts: a __Host- cookie cannot be set by another host. */
    for (const char *p = h; p && *p;) {
        while (*p == ' ' || *p == '\t' || *p == ';')
            p++;
        size_t n = strcspn(p, ";");
        if (n > nlen && strncmp(p, name, nlen) == 0) {
            const char *v = p + nlen;
            size_t vlen = n - nlen;
            while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
                vlen--;
            if (!is_token(v, vlen))
                return 0;
            memcpy(token, v, vlen);
            token[vlen] = '\0';
            return 1;
        }
        p += n;
    }
    return 0;
}

int gj_session_set_cookie(char *out, size_t cap, const char *token, long max_age_s)
{
    int n = snprintf(out, cap, "%s=%s; Path=/; Max-Age=%ld; HttpOnly; Secure; SameSite=Strict", GJ_SESSION_COOKIE,
                     token ? token : "", token ? max_age_s : 0L);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int gj_session_create(PGconn *c, const char *key_id, int idle_minutes, int hours, char *token, char *csrf,
                      char expires_at[40])
{
    unsigned char raw[32];
    char hex[65], idle[16], hrs[16];
    if (RAND_bytes(raw, sizeof raw) != 1) {
        gj_log_error("session", "RAND_bytes failed");
        return -1;
    }
    long n = gj_base64_encode(raw, sizeof raw, token, GJ_SESSION_TOKEN_LEN + 1, GJ_BASE64_URL);
    OPENSSL_cleanse(raw, sizeof raw);
    if (n != GJ_SESSION_TOKEN_LEN || token_hash_hex(token, hex) != 0 || gj_session_csrf(token, csrf) != 0)
        return -1;
    snprintf(idle, sizeof idle, "%d", idle_minutes);
    snprintf(hrs, sizeof hrs, "%d", hours);
    /* housekeeping: sessions long ended go (a day later, so a late request still gets
     * "your session ended" rather than a different answer) */
    if (gj_db_cmd(c, "DELETE FROM sessions WHERE expires_at < now() - interval '1 day'"
                     " OR idle_expires_at < now() - interval '1 day'", 0, NULL) != 0)
        return -1;
    const char *p[4] = { hex, key_id, hrs, idle };
    PGresult *res = gj_db_exec(c,
                               "INSERT INTO sessions (token_hash, key_id, expires_at, idle_expires_at)"
                               " SELECT decode($1, 'hex'), $2::uuid, now() + make_interval(hours => $3::int),"
                               "        least(now() + make_interval(hours => $3::int), now() + make_interval(mins => $4::int))"
                               " RETURNING to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')",
                               4, p, NULL);
    if (!res)
        return -1;
    snprintf(expires_at, 40, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return 0;
}

int gj_session_verify(PGconn *c, const char *token, int idle_minutes, struct gj_principal *p)
{
    char hex[65], idle[16];
    if (!is_token(token, strlen(token)) || token_hash_hex(token, hex) != 0)
        return 0;
    snprintf(idle, sizeof idle, "%d", idle_minutes);
    const char *params[2] = { hex, idle };
    PGresult *res = gj_db_exec(c,
                               "WITH s AS (UPDATE sessions"
                               "   SET idle_expires_at = least(expires_at, now() + make_interval(mins => $2::int))"
                               " WHERE token_hash = decode($1, 'hex') AND expires_at > now() AND idle_expires_at > now()"
                               " RETURNING key_id)"
                               " SELECT k.id, k.tenant_id, t.name, k.role FROM s"
                               " JOIN api_keys k ON k.id = s.key_id JOIN tenants t ON t.id = k.tenant_id"
                               " WHERE k.revoked_at IS NULL",
                               2, params, NULL);
    if (!res)
        return -1;
    int ok = PQntuples(res) == 1;
    if (ok && p) {
        memset(p, 0, sizeof *p);
        snprintf(p->key_id, sizeof p->key_id, "%s", PQgetvalue(res, 0, 0));
        snprintf(p->tenant_id, sizeof p->tenant_id, "%s", PQgetvalue(res, 0, 1));
        snprintf(p->tenant_name, sizeof p->tenant_name, "%s", PQgetvalue(res, 0, 2));
        p->is_admin = strcmp(PQgetvalue(res, 0, 3), "admin") == 0;
    }
    PQclear(res);
    return ok;
}

int gj_session_delete(PGconn *c, const char *token)
{
    char hex[65];
    if (!is_token(token, strlen(token)) || token_hash_hex(token, hex) != 0)
        return 0;
    const char *p[1] = { hex };
    PGresult *res = gj_db_exec(c, "DELETE FROM sessions WHERE token_hash = decode($1, 'hex') RETURNING 1", 1, p, NULL);
    if (!res)
        return -1;
    int n = PQntuples(res);
    PQclear(res);
    return n > 0;
}

enum gj_session_outcome gj_session_check(PGconn *c, const char *cookie_header, const char *method, const char *csrf,
                                         int idle_minutes, struct gj_principal *p)
{
    char token[GJ_SESSION_TOKEN_LEN + 1];
    if (!gj_session_cookie_token(cookie_header, token))
        return GJ_SESSION_ABSENT;
    enum gj_session_outcome out;
    int found = c ? gj_session_verify(c, token, idle_minutes, p) : -1;
    if (found < 0)
        out = GJ_SESSION_DB_ERROR;
    else if (found == 0)
        out = GJ_SESSION_ENDED;
    else if (!gj_session_method_is_safe(method) && !gj_session_csrf_ok(token, csrf))
        out = GJ_SESSION_NO_CSRF;
    else
        out = GJ_SESSION_OK;
    OPENSSL_cleanse(token, sizeof token);
    return out;
}
