/*
 * test_auth.c — API keys against a real PostgreSQL: create, verify, wrong and
 * malformed keys, revoke, the admin bootstrap (file 0600, written once), and the admin
 * key given by --admin-key-file (registered once, on an empty database only).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/fsutil.h"
#include "service/auth/auth.h"
#include "service/db/db.h"
#include "pg_test_util.h"

static long scalar(PGconn *c, const char *sql)
{
    PGresult *r = gj_db_exec(c, sql, 0, NULL, NULL);
    assert_non_null(r);
    long v = strtol(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return v;
}

static PGconn *fresh(void)
{
    char url[1024];
    assert_int_equal(gj_test_pg_migrated_db(url, sizeof url), 0);
    return gj_test_pg_connect(url);
}

static void test_generate(void **state)
{
    (void)state;
    char a[GJ_API_KEY_LEN + 1], b[GJ_API_KEY_LEN + 1];
    assert_int_equal(gj_api_key_generate(a), 0);
    assert_int_equal(gj_api_key_generate(b), 0);
    assert_int_equal(strlen(a), GJ_API_KEY_LEN);
    assert_int_equal(strncmp(a, "gjk_", 4), 0);
    assert_string_not_equal(a, b);
    for (int i = 4; i < GJ_API_KEY_LEN; i++)
        assert_non_null(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", a[i]));
}

static void test_create_verify_revoke(void **state)
{
    (void)state;
    PGconn *c = fresh();
    char key[GJ_API_KEY_LEN + 1], id[GJ_UUID_LEN + 1], tenant[GJ_UUID_LEN + 1];
    assert_int_equal(gj_api_key_create(c, "acme", "user", "ci", key, id, tenant), 0);
    struct gj_principal p;
    assert_int_equal(gj_api_key_verify(c, key, &p), 1);
    assert_string_equal(p.key_id, id);
    assert_string_equal(p.tenant_id, tenant);
    assert_string_equal(p.tenant_name, "acme");
    assert_int_equal(p.is_admin, 0);

    /* Only the hash is stored; the prefix is a short recognisable head. */
    PGresult *r = gj_db_exec(c, "SELECT encode(key_hash, 'hex'), prefix FROM api_keys", 0, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(PQntuples(r), 1);
    assert_null(strstr(PQgetvalue(r, 0, 0), key + 4));
    assert_int_equal(strncmp(PQgetvalue(r, 0, 1), key, strlen(PQgetvalue(r, 0, 1))), 0);
    assert_true(strlen(PQgetvalue(r, 0, 1)) < 12);
    PQclear(r);

    /* Second key of the same tenant: same tenant id. */
    char key2[GJ_API_KEY_LEN + 1], id2[GJ_UUID_LEN + 1], tenant2[GJ_UUID_LEN + 1];
    assert_int_equal(gj_api_key_create(c, "acme", "admin", NULL, key2, id2, tenant2), 0);
    assert_string_equal(tenant2, tenant);
    assert_int_equal(gj_api_key_verify(c, key2, &p), 1);
    assert_int_equal(p.is_admin, 1);

    /* Wrong, malformed, empty keys. */
    char wrong[GJ_API_KEY_LEN + 1];
    memcpy(wrong, key, sizeof wrong);
    wrong[10] = wrong[10] == 'A' ? 'B' : 'A';
    assert_int_equal(gj_api_key_verify(c, wrong, &p), 0);
    assert_int_equal(gj_api_key_verify(c, "", &p), 0);
    assert_int_equal(gj_api_key_verify(c, "gjk_short", &p), 0);
    assert_int_equal(gj_api_key_verify(c, key + 1, &p), 0);
    char longer[GJ_API_KEY_LEN + 2];
    snprintf(longer, sizeof longer, "%sx", key);
    assert_int_equal(gj_api_key_verify(c, longer, &p), 0);

    /* Bad role or tenant name. */
    char k[GJ_API_KEY_LEN + 1], i[GJ_UUID_LEN + 1], t[GJ_UUID_LEN + 1];
    assert_int_equal(gj_api_key_create(c, "acme", "root", NULL, k, i, t), -1);
    assert_int_equal(gj_api_key_create(c, "", "user", NULL, k, i, t), -1);

    /* Revoke. */
    assert_int_equal(gj_api_key_revoke(c, id), 1);
    assert_int_equal(gj_api_key_verify(c, key, &p), 0);
    assert_int_equal(gj_api_key_revoke(c, id), 0);
    assert_int_equal(gj_api_key_revoke(c, "00000000-0000-0000-0000-000000000000"), 0);
    assert_int_equal(gj_api_key_revoke(c, "not a uuid"), 0);
    assert_int_equal(gj_api_key_verify(c, key2, &p), 1);   /* the other key still works */
    PQfinish(c);
}

static void test_admin_bootstrap(void **state)
{
    (void)state;
    PGconn *c = fresh();
    char path[GJ_PATH_MAX];
    snprintf(path, sizeof path, "%s/admin-%d.key", gj_test_dir(), (int)getpid());
    unlink(path);
    assert_int_equal(gj_admin_key_bootstrap(c, path), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char *text;
    size_t len;
    assert_int_equal(gj_read_file(path, 4096, &text, &len), 0);
    assert_int_equal(len, GJ_API_KEY_LEN + 1);
    assert_int_equal(text[GJ_API_KEY_LEN], '\n');
    text[GJ_API_KEY_LEN] = '\0';
    struct gj_principal p;
    assert_int_equal(gj_api_key_verify(c, text, &p), 1);
    assert_int_equal(p.is_admin, 1);
    assert_string_equal(p.tenant_name, "admin");

    /* Second start: an admin key exists, nothing changes. */
    assert_int_equal(gj_admin_key_bootstrap(c, path), 0);
    char *again;
    assert_int_equal(gj_read_file(path, 4096, &again, &len), 0);
    assert_int_equal(strncmp(again, text, GJ_API_KEY_LEN), 0);
    free(again);
    assert_int_equal(scalar(c, "SELECT count(*) FROM api_keys WHERE role = 'admin'"), 1);
    /* ... even when the file is gone: the key is in the database. */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(gj_admin_key_bootstrap(c, path), 0);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(scalar(c, "SELECT count(*) FROM api_keys WHERE role = 'admin'"), 1);
    free(text);
    PQfinish(c);

    /* A new database while an old admin.key file is present: refused, file untouched. */
    c = fresh();
    assert_int_equal(gj_write_file(path, "old\n", 4), 0);
    assert_int_equal(gj_admin_key_bootstrap(c, path), -1);
    assert_int_equal(gj_read_file(path, 4096, &text, &len), 0);
    assert_string_equal(text, "old\n");
    free(text);
    assert_int_equal(scalar(c, "SELECT count(*) FROM api_keys"), 0);
    assert_int_equal(PQtransactionStatus(c), PQTRANS_IDLE);
    unlink(path);
    PQfinish(c);
}

static void test_admin_key_adopted(void **state)
{
    (void)state;
    PGconn *c = fresh();
    const char *given = "gjk_GivenByASecretVolume0123456789-_abcdefghijk";
    struct gj_principal p;
    assert_int_equal(gj_api_key_well_formed(given), 1);
    assert_int_equal(gj_api_key_well_formed("gjk_short"), 0);
    assert_int_equal(gj_api_key_well_formed("gjk_GivenByASecretVolume0123456789+/abcdefghijk"), 0);
    /* an empty database: the given key becomes the admin key, nothing else is made */
    assert_int_equal(gj_admin_key_adopt(c, given, "/run/secrets/admin.key"), 0);
    assert_int_equal(gj_api_key_verify(c, given, &p), 1);
    assert_int_equal(p.is_admin, 1);
    assert_string_equal(p.tenant_name, "admin");
    /* every later replica: no second key */
    assert_int_equal(gj_admin_key_adopt(c, given, "/run/secrets/admin.key"), 0);
    assert_int_equal(scalar(c, "SELECT count(*) FROM api_keys"), 1);
    /* another key while one exists: not registered (a warning, not a failure) */
    const char *other = "gjk_AnotherKeyThatIsNotRegistered0123456789abcd";
    assert_int_equal(gj_admin_key_adopt(c, other, "/tmp/other.key"), 0);
    assert_int_equal(gj_api_key_verify(c, other, &p), 0);
    assert_int_equal(scalar(c, "SELECT count(*) FROM api_keys"), 1);
    /* ... nor a user key of this database in the admin's place */
    char user[GJ_API_KEY_LEN + 1], id[GJ_UUID_LEN + 1], tenant[GJ_UUID_LEN + 1];
    assert_int_equal(gj_api_key_create(c, "acme", "user", NULL, user, id, tenant), 0);
    assert_int_equal(gj_admin_key_adopt(c, user, "/tmp/user.key"), 0);
    assert_int_equal(scalar(c, "SELECT count(*) FROM api_keys WHERE role = 'admin'"), 1);
    assert_int_equal(PQtransactionStatus(c), PQTRANS_IDLE);
    PQfinish(c);
}

/* Open streams re-check their keys in one query: revoked and unknown keys are reported. */
static void test_keys_revoked(void **state)
{
    (void)state;
    PGconn *c = fresh();
    char key[GJ_API_KEY_LEN + 1], tenant[GJ_UUID_LEN + 1];
    char ids[4][GJ_UUID_LEN + 1];
    assert_int_equal(gj_api_key_create(c, "acme", "user", NULL, key, ids[0], tenant), 0);
    assert_int_equal(gj_api_key_create(c, "acme", "user", NULL, key, ids[1], tenant), 0);
    snprintf(ids[2], sizeof ids[2], "%s", "00000000-0000-4000-8000-000000000000");   /* no such key */
    snprintf(ids[3], sizeof ids[3], "%s", "not-a-uuid");
    unsigned char revoked[4] = { 9, 9, 9, 9 };
    assert_int_equal(gj_api_keys_revoked(c, (const char(*)[GJ_UUID_LEN + 1])ids, 4, revoked), 0);
    assert_int_equal(revoked[0], 0);
    assert_int_equal(revoked[1], 0);
    assert_int_equal(revoked[2], 1);
    assert_int_equal(revoked[3], 1);
    assert_int_equal(gj_api_key_revoke(c, ids[1]), 1);
    assert_int_equal(gj_api_keys_revoked(c, (const char(*)[GJ_UUID_LEN + 1])ids, 2, revoked), 0);
    assert_int_equal(revoked[0], 0);
    assert_int_equal(revoked[1], 1);
    PQfinish(c);
}

/* A client certificate's CN is a tenant with a user key's rights and no key; a name that
 * is no tenant is 0, never an error. */
static void test_tenant_principal(void **state)
{
    (void)state;
    PGconn *c = fresh();
    char key[GJ_API_KEY_LEN + 1], id[GJ_UUID_LEN + 1], tenant[GJ_UUID_LEN + 1];
    assert_int_equal(gj_api_key_create(c, "hospital", "admin", "ci", key, id, tenant), 0);
    struct gj_principal p;
    memset(&p, 0x5a, sizeof p);
    assert_int_equal(gj_tenant_principal(c, "hospital", &p), 1);
    assert_string_equal(p.tenant_id, tenant);
    assert_string_equal(p.tenant_name, "hospital");
    assert_string_equal(p.key_id, "");
    assert_int_equal(p.is_admin, 0);   /* even in a tenant with an admin key */
    assert_int_equal(gj_tenant_principal(c, "no-such-tenant", &p), 0);
    assert_int_equal(gj_tenant_principal(c, "hospital' OR '1'='1", &p), 0);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generate),
        cmocka_unit_test(test_create_verify_revoke),
        cmocka_unit_test(test_keys_revoked),
        cmocka_unit_test(test_tenant_principal),
        cmocka_unit_test(test_admin_bootstrap),
        cmocka_unit_test(test_admin_key_adopted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
