/*
 * test_db_pool.c — the pool's read reserve (issue 11): writers (uploads, submits,
 * workers) leave --db-reserve-for-reads connections free, so that reads still get one
 * when writers hold all the others; a reader may take any free connection. And a silent
 * database (issue 28: a network partition; here its backends stopped with SIGSTOP): a
 * ping gives up at its deadline, and while the pool is down an idle connection that looks
 * fine is not handed out to wait on the silence.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "service/db/db.h"
#include "pg_test_util.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_read_reserve(void **state)
{
    (void)state;
    struct gj_db_pool *pool = gj_db_pool_open(gj_test_pg_url(), 4);
    assert_non_null(pool);
    gj_db_pool_set_read_reserve(pool, 2);
    PGconn *w1 = gj_db_acquire(pool, 100), *w2 = gj_db_acquire(pool, 100);
    assert_non_null(w1);
    assert_non_null(w2);
    /* Two free, both reserved: a writer waits its timeout and gets nothing. */
    double t0 = now_s();
    assert_null(gj_db_acquire_for(pool, 150, GJ_DB_WRITE));
    assert_true(now_s() - t0 >= 0.14);
    PGconn *r1 = gj_db_acquire_for(pool, 100, GJ_DB_READ), *r2 = gj_db_acquire_for(pool, 100, GJ_DB_READ);
    assert_non_null(r1);
    assert_non_null(r2);
    assert_true(gj_db_ok(r2));
    assert_null(gj_db_acquire_for(pool, 50, GJ_DB_READ));   /* all four out */
    /* A reader gives one back: still reserved for reads. */
    gj_db_release(pool, r1);
    assert_null(gj_db_acquire(pool, 50));
    /* A writer gives one back: two free again, and a writer may take one more only
     * when that leaves the reserve: not yet. */
    gj_db_release(pool, w2);
    assert_null(gj_db_acquire(pool, 50));
    gj_db_release(pool, r2);
    PGconn *w3 = gj_db_acquire(pool, 100);   /* three free: one is a writer's */
    assert_non_null(w3);
    gj_db_release(pool, w3);
    gj_db_release(pool, w1);
    gj_db_pool_close(pool);
}

static void test_reserve_is_clamped(void **state)
{
    (void)state;
    struct gj_db_pool *pool = gj_db_pool_open(gj_test_pg_url(), 2);
    assert_non_null(pool);
    gj_db_pool_set_read_reserve(pool, 99);   /* at most size - 1: writers keep one */
    PGconn *w = gj_db_acquire(pool, 100);
    assert_non_null(w);
    assert_null(gj_db_acquire(pool, 50));
    PGconn *r = gj_db_acquire_for(pool, 100, GJ_DB_READ);
    assert_non_null(r);
    gj_db_release(pool, r);
    gj_db_release(pool, w);
    gj_db_pool_set_read_reserve(pool, 0);   /* none: writers take all */
    PGconn *a = gj_db_acquire(pool, 100), *b = gj_db_acquire(pool, 100);
    assert_non_null(a);
    assert_non_null(b);
    gj_db_release(pool, a);
    gj_db_release(pool, b);
    gj_db_pool_close(pool);
}

static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    nanosleep(&ts, NULL);
}

static void test_silent_database(void **state)
{
    (void)state;
    struct gj_db_pool *pool = gj_db_pool_open(gj_test_pg_url(), 2);
    assert_non_null(pool);
    PGconn *c0 = gj_db_acquire(pool, 100), *c1 = gj_db_acquire(pool, 100);
    assert_non_null(c0);
    assert_non_null(c1);
    int pids[2] = { PQbackendPID(c0), PQbackendPID(c1) };
    for (int i = 0; i < 2; i++)
        assert_int_equal(kill(pids[i], SIGSTOP), 0);
    /* the ping gives up at its deadline; the pool is down, saying why */
    double t0 = now_s();
    assert_int_equal(gj_db_ping(c1, 500), 0);
    assert_true(now_s() - t0 < 3.0);
    char why[400];
    assert_int_equal(gj_db_pool_health(pool, why, sizeof why), 0);
    assert_non_null(strstr(why, "no answer within 0.5 s"));
    /* c0 looks fine idle, but leads into the same silence: not handed out, at once within
     * the backoff, and after it one borrower asks it, within the pool's ping deadline */
    gj_db_release(pool, c0);
    t0 = now_s();
    assert_null(gj_db_acquire(pool, 0));
    assert_true(now_s() - t0 < 1.0);
    sleep_s(0.3);
    t0 = now_s();
    assert_null(gj_db_acquire(pool, 0));
    assert_true(now_s() - t0 < 5.0);
    /* the database answers again: the pool comes back */
    for (int i = 0; i < 2; i++)
        assert_int_equal(kill(pids[i], SIGCONT), 0);
    gj_db_release(pool, c1);
    PGconn *c = NULL;
    for (int i = 0; i < 50 && !c; i++) {
        sleep_s(0.1);
        c = gj_db_acquire(pool, 100);
    }
    assert_non_null(c);
    assert_true(gj_db_ok(c));
    assert_int_equal(gj_db_pool_health(pool, NULL, 0), 1);
    gj_db_release(pool, c);
    gj_db_pool_close(pool);
}

/* How many times the server has prepared name on conn's session (0 or 1). */
static int prepared_on(PGconn *conn, const char *name)
{
    const char *p[] = { name };
    PGresult *r = gj_db_exec(conn, "SELECT count(*) FROM pg_prepared_statements WHERE name = $1", 1, p, NULL);
    assert_non_null(r);
    int n = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

static const char add_sql[] = "SELECT $1::int + 1";

static int add_one(PGconn *conn, const char *v)
{
    const char *p[] = { v };
    PGresult *r = gj_db_exec_prepared(conn, "test_add_one", add_sql, 1, p, NULL);
    assert_non_null(r);
    int n = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

/* A statement run by name is prepared once per pool connection, and again on the fresh
 * session after the old one was killed; outside the pool it runs as text. */
static void test_prepared_per_connection(void **state)
{
    (void)state;
    struct gj_db_pool *pool = gj_db_pool_open(gj_test_pg_url(), 1);
    assert_non_null(pool);
    PGconn *c = gj_db_acquire(pool, 100);
    assert_non_null(c);
    assert_int_equal(prepared_on(c, "test_add_one"), 0);
    assert_int_equal(add_one(c, "1"), 2);
    assert_int_equal(add_one(c, "41"), 42);
    assert_int_equal(prepared_on(c, "test_add_one"), 1);
    /* kept across a rolled-back transaction: a session's, not a transaction's */
    assert_int_equal(gj_db_begin(c), 0);
    assert_int_equal(add_one(c, "2"), 3);
    gj_db_rollback(c);
    assert_int_equal(add_one(c, "3"), 4);
    /* the session is killed: the next statement goes on a fresh one, prepared there again */
    PGconn *admin = gj_test_pg_connect(NULL);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", PQbackendPID(c));
    const char *p[] = { pid };
    PGresult *r = gj_db_exec(admin, "SELECT pg_terminate_backend($1::int)", 1, p, NULL);
    assert_non_null(r);
    PQclear(r);
    PQfinish(admin);
    sleep_s(0.2);
    assert_int_equal(add_one(c, "9"), 10);
    assert_int_equal(prepared_on(c, "test_add_one"), 1);
    gj_db_release(pool, c);
    gj_db_pool_close(pool);
    /* outside the pool: as text, nothing left prepared */
    PGconn *plain = gj_test_pg_connect(NULL);
    assert_int_equal(add_one(plain, "5"), 6);
    assert_int_equal(prepared_on(plain, "test_add_one"), 0);
    PQfinish(plain);
}

/* A migration changes what a prepared statement returns (ADD COLUMN under SELECT *): outside a
 * transaction the statement is prepared anew and answers at once; inside one it fails (the
 * transaction is lost anyway) and is prepared anew at its next use. */
static void test_prepared_after_schema_change(void **state)
{
    (void)state;
    PGconn *admin = gj_test_pg_connect(NULL);
    assert_int_equal(gj_db_cmd(admin, "DROP TABLE IF EXISTS prep_t", 0, NULL), 0);
    assert_int_equal(gj_db_cmd(admin, "CREATE TABLE prep_t (a int)", 0, NULL), 0);
    assert_int_equal(gj_db_cmd(admin, "INSERT INTO prep_t VALUES (1)", 0, NULL), 0);
    struct gj_db_pool *pool = gj_db_pool_open(gj_test_pg_url(), 1);
    assert_non_null(pool);
    PGconn *c = gj_db_acquire(pool, 100);
    assert_non_null(c);
    static const char sql[] = "SELECT * FROM prep_t";
    PGresult *r = gj_db_exec_prepared(c, "test_prep_t", sql, 0, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(PQnfields(r), 1);
    PQclear(r);
    assert_int_equal(gj_db_cmd(admin, "ALTER TABLE prep_t ADD COLUMN b int DEFAULT 7", 0, NULL), 0);
    r = gj_db_exec_prepared(c, "test_prep_t", sql, 0, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(PQnfields(r), 2);
    PQclear(r);
    assert_int_equal(gj_db_cmd(admin, "ALTER TABLE prep_t ADD COLUMN c int DEFAULT 8", 0, NULL), 0);
    assert_int_equal(gj_db_begin(c), 0);
    assert_null(gj_db_exec_prepared(c, "test_prep_t", sql, 0, NULL, NULL));
    gj_db_rollback(c);
    r = gj_db_exec_prepared(c, "test_prep_t", sql, 0, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(PQnfields(r), 3);
    PQclear(r);
    assert_int_equal(prepared_on(c, "test_prep_t"), 1);
    gj_db_release(pool, c);
    gj_db_pool_close(pool);
    assert_int_equal(gj_db_cmd(admin, "DROP TABLE prep_t", 0, NULL), 0);
    PQfinish(admin);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_reserve),
        cmocka_unit_test(test_reserve_is_clamped),
        cmocka_unit_test(test_silent_database),
        cmocka_unit_test(test_prepared_per_connection),
        cmocka_unit_test(test_prepared_after_schema_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
