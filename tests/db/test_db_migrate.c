/*
 * test_db_migrate.c — the connection pool, exec helpers and migrations against a
 * real PostgreSQL (pg_test_util: the embedded cluster code path).
 */
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "service/db/db.h"
#include "service/gj_migrations.h"
#include "common/fsutil.h"
#include "service/db/migrate.h"
#include "service/db/pg_embedded.h"
#include "service/jobs/queue.h"
#include "pg_test_util.h"

static long scalar(PGconn *c, const char *sql)
{
    PGresult *r = gj_db_exec(c, sql, 0, NULL, NULL);
    assert_non_null(r);
    long v = strtol(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return v;
}

static void test_migrate_once(void **state)
{
    (void)state;
    char url[1024];
    assert_int_equal(gj_test_pg_new_db(url, sizeof url), 0);
    PGconn *c = gj_db_connect(url);
    assert_non_null(c);
    assert_int_equal(gj_migrate_is_current(c), 0);
    assert_int_equal(gj_migrate(c), (int)gj_migrations_count);
    assert_int_equal(gj_migrate_is_current(c), 1);
    assert_int_equal(gj_migrate(c), 0);
    assert_int_equal(gj_migrate_is_current(c), 1);
    assert_int_equal(scalar(c, "SELECT count(*) FROM schema_migrations"), (long)gj_migrations_count);
    /* The schema is there and its triggers work. */
    assert_int_equal(gj_db_cmd(c, "INSERT INTO tenants (name) VALUES ('t')", 0, NULL), 0);
    PGresult *t = gj_db_exec(c, "SELECT id FROM tenants", 0, NULL, NULL);
    assert_non_null(t);
    struct gj_submit job = { .tenant_id = PQgetvalue(t, 0, 0), .kind = "noop" };
    struct gj_submitted out;
    assert_int_equal(gj_queue_submit(c, &job, &out), GJ_SUBMIT_OK);
    PQclear(t);
    assert_int_equal(scalar(c, "SELECT count(*) FROM job_events WHERE kind = 'state'"), 1);
    /* A row that is gone is reported as missing again. */
    assert_int_equal(gj_db_cmd(c, "DELETE FROM schema_migrations", 0, NULL), 0);
    assert_int_equal(gj_migrate_is_current(c), 0);
    PQfinish(c);
}

static void exec_all(PGconn *c, const char *const *sql)
{
    for (; *sql; sql++)
        assert_int_equal(gj_db_cmd(c, *sql, 0, NULL), 0);
}

/* Migration 0015 counts what each tenant stored before it (issue 28, storage quotas), and
 * its trigger keeps counting: the schema is taken back to 0014 with blobs in it, then
 * migrated again. */
static void test_storage_counted_from_existing_blobs(void **state)
{
    (void)state;
    char url[1024];
    assert_int_equal(gj_test_pg_new_db(url, sizeof url), 0);
    PGconn *c = gj_db_connect(url);
    assert_non_null(c);
    assert_int_equal(gj_migrate(c), (int)gj_migrations_count);
    static const char *const before_0015[] = {
        "DROP TRIGGER blobs_count_storage ON blobs",
        "DROP FUNCTION gj_tenant_storage_count()",
        "DROP TABLE tenant_storage",
        "ALTER TABLE tenants DROP COLUMN storage_quota_bytes",
        "DELETE FROM schema_migrations WHERE name LIKE '%storage_quota%'",   /* whatever its number */
        "INSERT INTO tenants (name) VALUES ('a'), ('b'), ('c')",
        "INSERT INTO blobs (tenant_id, size, sha256, content_type, lo_oid)"
        " SELECT t.id, s, decode(repeat('00', 32), 'hex'), 'x/y', lo_create(0)"
        " FROM tenants t, (VALUES (100), (250)) v(s) WHERE t.name = 'a'",
        "INSERT INTO blobs (tenant_id, size, sha256, content_type, lo_oid)"
        " SELECT id, 7, decode(repeat('00', 32), 'hex'), 'x/y', lo_create(0) FROM tenants WHERE name = 'b'",
        NULL,
    };
    exec_all(c, before_0015);
    assert_int_equal(gj_migrate(c), 1);
    const char *used = "SELECT coalesce((SELECT s.used_bytes FROM tenant_storage s JOIN tenants t ON t.id = s.tenant_id"
                       " WHERE t.name = 'a'), -1) * 1000000 + coalesce((SELECT s.used_bytes FROM tenant_storage s"
                       " JOIN tenants t ON t.id = s.tenant_id WHERE t.name = 'b'), -1) * 1000"
                       " + coalesce((SELECT s.used_bytes FROM tenant_storage s JOIN tenants t ON t.id = s.tenant_id"
                       " WHERE t.name = 'c'), -1)";
    assert_int_equal(scalar(c, used), 350L * 1000000 + 7 * 1000 + 0);   /* c: a row of 0 */
    static const char *const after[] = {
        "DELETE FROM blobs WHERE size = 100",
        "INSERT INTO blobs (tenant_id, size, sha256, content_type, lo_oid)"
        " SELECT id, 5, decode(repeat('00', 32), 'hex'), 'x/y', lo_create(0) FROM tenants WHERE name = 'c'",
        NULL,
    };
    exec_all(c, after);
    assert_int_equal(scalar(c, used), 250L * 1000000 + 7 * 1000 + 5);
    assert_int_equal(scalar(c, "SELECT count(*) FROM tenants WHERE storage_quota_bytes IS NULL"), 3);
    PQfinish(c);
}

/* Migration 0016 renames the stored states as the API shows them (issue 25): a parent whose
 * sub-tasks run ('waiting' before) becomes 'subtasks', a job waiting for another job's output
 * ('blocked' before) 'waiting'; what the API shows of each is unchanged, the history's
 * internal_state follows, and the conversion itself writes no history. The schema is taken
 * back to before 0016 with jobs in the old states, then migrated again. */
static void test_job_states_renamed(void **state)
{
    (void)state;
    char url[1024];
    assert_int_equal(gj_test_pg_new_db(url, sizeof url), 0);
    PGconn *c = gj_db_connect(url);
    assert_non_null(c);
    assert_int_equal(gj_migrate(c), (int)gj_migrations_count);
    static const char *const before_0016[] = {
        "ALTER TABLE jobs DROP CONSTRAINT jobs_state_check",
        "ALTER TABLE jobs ADD CONSTRAINT jobs_state_check CHECK (state IN ('queued', 'running', 'waiting',"
        " 'blocked', 'succeeded', 'failed', 'canceled'))",
        "DROP INDEX jobs_tenant_waiting",
        "CREATE INDEX jobs_tenant_blocked ON jobs (tenant_id) WHERE state = 'blocked'",
        "ALTER TABLE jobs DROP COLUMN delete_requested",
        "CREATE OR REPLACE FUNCTION gj_public_state(state text, stage integer) RETURNS text"
        " LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN state = 'waiting' THEN 'running'"
        " WHEN state = 'blocked' THEN 'waiting' WHEN state = 'queued' AND stage > 0 THEN 'running'"
        " ELSE state END $$",
        "DELETE FROM schema_migrations WHERE name LIKE '%job_states%'",
        "INSERT INTO tenants (name) VALUES ('a')",
        "INSERT INTO jobs (tenant_id, kind, name, state, children_pending)"
        " SELECT id, 'noop', 'parent', 'waiting', 2 FROM tenants",
        "INSERT INTO jobs (tenant_id, kind, name, state, deps_pending)"
        " SELECT id, 'noop', 'blocked', 'blocked', 1 FROM tenants",
        "INSERT INTO jobs (tenant_id, kind, name) SELECT id, 'noop', 'queued' FROM tenants",
        "INSERT INTO job_events (job_id, kind, detail) SELECT id, 'state',"
        " jsonb_build_object('state', gj_public_state(state, 0), 'internal_state', state)"
        " FROM jobs WHERE state IN ('waiting', 'blocked')",
        NULL,
    };
    exec_all(c, before_0016);
    long events = scalar(c, "SELECT count(*) FROM job_events");
    assert_int_equal(gj_migrate(c), 1);
    const char *shown = "SELECT string_agg(name || ':' || state || ':' || gj_public_state(state, stage), ','"
                        " ORDER BY name) FROM jobs";
    PGresult *r = gj_db_exec(c, shown, 0, NULL, NULL);
    assert_non_null(r);
    assert_string_equal(PQgetvalue(r, 0, 0), "blocked:waiting:waiting,parent:subtasks:running,queued:queued:queued");
    PQclear(r);
    assert_int_equal(scalar(c, "SELECT count(*) FROM job_events"), events);     /* no history written */
    r = gj_db_exec(c, "SELECT string_agg(coalesce(detail->>'internal_state', '-'), ',' ORDER BY detail->>'state')"
                      " FROM job_events WHERE detail ? 'state' AND id IN (SELECT id FROM job_events ORDER BY id DESC"
                      " LIMIT 2)", 0, NULL, NULL);
    assert_non_null(r);
    assert_string_equal(PQgetvalue(r, 0, 0), "subtasks,-");     /* running: the parent; waiting: as shown */
    PQclear(r);
    /* the old names are refused now */
    assert_int_not_equal(gj_db_cmd(c, "UPDATE jobs SET state = 'blocked' WHERE name = 'queued'", 0, NULL), 0);
    PQfinish(c);
}

struct racer {
    const char *url;
    pthread_barrier_t *barrier;
    int result;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    PGconn *c = gj_db_connect(r->url);
    pthread_barrier_wait(r->barrier);
    r->result = c ? gj_migrate(c) : -2;
    PQfinish(c);
    return NULL;
}

static void test_migrate_concurrent(void **state)
{
    (void)state;
    char url[1024];
    assert_int_equal(gj_test_pg_new_db(url, sizeof url), 0);
    enum { N = 4 };
    pthread_t t[N];
    struct racer r[N];
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, N);
    for (int i = 0; i < N; i++) {
        r[i] = (struct racer){ url, &barrier, -3 };
        assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    int total = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        assert_true(r[i].result >= 0);
        total += r[i].result;
    }
    pthread_barrier_destroy(&barrier);
    assert_int_equal(total, (int)gj_migrations_count);
    PGconn *c = gj_db_connect(url);
    assert_non_null(c);
    assert_int_equal(scalar(c, "SELECT count(*) FROM schema_migrations"), (long)gj_migrations_count);
    assert_int_equal(scalar(c, "SELECT count(DISTINCT version) FROM schema_migrations"), (long)gj_migrations_count);
    assert_int_equal(gj_migrate_is_current(c), 1);
    PQfinish(c);
}

static void test_exec_errors(void **state)
{
    (void)state;
    PGconn *c = gj_db_connect(gj_test_pg_url());
    assert_non_null(c);
    char st[6];
    PGresult *r = gj_db_exec(c, "SELECT 1 / $1::integer", 1, (const char *[]){ "0" }, st);
    assert_null(r);
    assert_string_equal(st, "22012");
    r = gj_db_exec(c, "SELECT $1::integer + 1", 1, (const char *[]){ "41" }, st);
    assert_non_null(r);
    assert_string_equal(st, "00000");
    assert_string_equal(PQgetvalue(r, 0, 0), "42");
    PQclear(r);
    /* NULL parameter. */
    r = gj_db_exec(c, "SELECT $1::text IS NULL", 1, (const char *[]){ NULL }, NULL);
    assert_non_null(r);
    assert_string_equal(PQgetvalue(r, 0, 0), "t");
    PQclear(r);
    /* COMMIT of a failed transaction is a failure. */
    assert_int_equal(gj_db_begin(c), 0);
    assert_int_equal(gj_db_cmd(c, "SELECT * FROM no_such_table", 0, NULL), -1);
    assert_int_equal(gj_db_commit(c), -1);
    assert_int_equal(PQtransactionStatus(c), PQTRANS_IDLE);
    assert_int_equal(gj_db_ok(c), 1);
    PQfinish(c);
    assert_null(gj_db_connect("postgresql:///nosuchdb?host=/nonexistent"));
}

struct waiter {
    struct gj_db_pool *pool;
    PGconn *got;
};

static void *wait_for_conn(void *arg)
{
    struct waiter *w = arg;
    w->got = gj_db_acquire(w->pool, -1);
    return NULL;
}

static void test_pool(void **state)
{
    (void)state;
    struct gj_db_pool *pool = gj_db_pool_open(gj_test_pg_url(), 2);
    assert_non_null(pool);
    PGconn *a = gj_db_acquire(pool, 1000);
    PGconn *b = gj_db_acquire(pool, 1000);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_null(gj_db_acquire(pool, 100));   /* exhausted: times out */

    /* Returned inside a transaction: rolled back. */
    assert_int_equal(gj_db_begin(a), 0);
    assert_int_equal(gj_db_cmd(a, "CREATE TEMP TABLE pool_probe (x int)", 0, NULL), 0);
    gj_db_release(pool, a);
    a = gj_db_acquire(pool, 1000);
    assert_non_null(a);
    assert_int_equal(PQtransactionStatus(a), PQTRANS_IDLE);
    assert_int_equal(scalar(a, "SELECT count(*) FROM pg_tables WHERE tablename = 'pool_probe'"), 0);

    /* A connection killed by the server is reset before it is handed out again. */
    PGresult *r = gj_db_exec(a, "SELECT pg_backend_pid()", 0, NULL, NULL);
    assert_non_null(r);
    char pid[32];
    snprintf(pid, sizeof pid, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    gj_db_release(pool, a);
    const char *p[1] = { pid };
    r = gj_db_exec(b, "SELECT pg_terminate_backend($1::integer, 5000)", 1, p, NULL);
    assert_non_null(r);
    PQclear(r);
    usleep(200000);
    a = gj_db_acquire(pool, 1000);
    assert_non_null(a);
    assert_int_equal(gj_db_ok(a), 1);

    /* A waiter is woken by a release from another thread. */
    struct waiter w = { pool, NULL };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_conn, &w), 0);
    usleep(100000);
    gj_db_release(pool, a);
    pthread_join(t, NULL);
    assert_ptr_equal(w.got, a);
    gj_db_release(pool, w.got);
    gj_db_release(pool, b);
    gj_db_pool_close(pool);
}

static long postmaster_pid(const char *dir)
{
    char path[GJ_PATH_MAX];
    snprintf(path, sizeof path, "%s/pg/postmaster.pid", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long pid = -1;
    if (fscanf(f, "%ld", &pid) != 1)
        pid = -1;
    fclose(f);
    return pid;
}

/* The embedded cluster itself: a second owner is refused, and a postmaster killed
 * with SIGKILL (stale postmaster.pid, leftover shared memory) does not prevent
 * the next start. */
static void test_embedded_restart(void **state)
{
    (void)state;
    const char *dir = gj_test_dir();
    struct gj_pg_embedded **pg = gj_test_pg_handle();
    char url[1024], url2[1024];
    snprintf(url, sizeof url, "%s", gj_test_pg_url());
    assert_null(gj_pg_embedded_start(dir, gj_test_pg_options(), url2, sizeof url2));   /* in use: refused */

    long pid = postmaster_pid(dir);
    assert_true(pid > 1);
    assert_int_equal(kill((pid_t)pid, SIGKILL), 0);
    gj_pg_embedded_stop(*pg);   /* reaps the dead child */
    *pg = NULL;
    assert_int_equal(postmaster_pid(dir), pid);   /* the stale file is still there */

    *pg = gj_pg_embedded_start(dir, gj_test_pg_options(), url2, sizeof url2);
    assert_non_null(*pg);
    assert_string_equal(url, url2);
    PGconn *c = gj_db_connect(url2);
    assert_non_null(c);
    assert_int_equal(gj_db_ok(c), 1);
    PQfinish(c);
    gj_pg_embedded_stop(*pg);
    *pg = NULL;
    assert_int_equal(postmaster_pid(dir), -1);   /* clean shutdown removes it */

    /* A stale postmaster.pid whose pid now belongs to another live process. */
    pid_t other = fork();
    assert_true(other >= 0);
    if (other == 0) {
        pause();
        _exit(0);
    }
    char path[GJ_PATH_MAX], text[GJ_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/pg/postmaster.pid", dir);
    int n = snprintf(text, sizeof text, "%d\n%s/pg\n", (int)other, dir);
    assert_int_equal(gj_write_file(path, text, (size_t)n), 0);
    *pg = gj_pg_embedded_start(dir, gj_test_pg_options(), url2, sizeof url2);
    kill(other, SIGKILL);
    waitpid(other, NULL, 0);
    assert_non_null(*pg);
    c = gj_db_connect(url2);
    assert_non_null(c);
    assert_int_equal(gj_db_ok(c), 1);
    PQfinish(c);
}

int main(void)
{
    gj_test_pg_url();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migrate_once),
        cmocka_unit_test(test_storage_counted_from_existing_blobs),
        cmocka_unit_test(test_job_states_renamed),
        cmocka_unit_test(test_migrate_concurrent),
        cmocka_unit_test(test_exec_errors),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_embedded_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
