/*
 * test_db_pool.c — the pool's read reserve (issue 11): writers (uploads, submits,
 * workers) leave --db-reserve-for-reads connections free, so that reads still get one
 * when writers hold all the others; a reader may take any free connection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "service/db.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_reserve),
        cmocka_unit_test(test_reserve_is_clamped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
