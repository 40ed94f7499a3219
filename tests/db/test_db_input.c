/*
 * test_db_input.c — what a client's values meet in PostgreSQL: every timestamp
 * gj_is_timestamp accepts, PostgreSQL accepts too (a grid of dates, times and zone
 * offsets around the edges: month lengths, leap years, year 1, leap seconds), and every
 * date PostgreSQL accepts, gj_is_timestamp does; a statement the database refuses is
 * logged with its SQLSTATE and caller, never with its text or its parameters.
 */
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
#include "service/http/http_server.h"
#include "pg_test_util.h"

/* 1 when PostgreSQL takes s as a timestamptz. */
static int pg_accepts(PGconn *c, const char *s)
{
    const char *p[1] = { s };
    PGresult *res = PQexecParams(c, "SELECT $1::timestamptz", 1, NULL, p, NULL, NULL, 0);
    int ok = PQresultStatus(res) == PGRES_TUPLES_OK;
    PQclear(res);
    return ok;
}

static void test_timestamps_agree(void **state)
{
    (void)state;
    PGconn *c = gj_test_pg_connect(NULL);
    static const int years[] = { 0, 1, 4, 100, 1900, 2000, 2023, 2024, 2100, 2400, 9999 };
    static const char *const times[] = { "", "T00:00", "T23:59:59Z", "T23:59:60Z", "T23:59:60.5Z", "T24:00:00Z",
                                         " 12:30:00.123456+15:59", "T12:30-16:00", "T12:30+14:60", "T12:30+0530" };
    int accepted = 0, checked = 0;
    for (size_t y = 0; y < sizeof years / sizeof years[0]; y++)
        for (int mon = 0; mon <= 13; mon++)
            for (int day = 0; day <= 32; day++) {
                char date[16];
                snprintf(date, sizeof date, "%04d-%02d-%02d", years[y], mon, day);
                int ours = gj_is_timestamp(date), theirs = pg_accepts(c, date);
                if (ours != theirs)
                    fail_msg("%s: gj_is_timestamp %d, PostgreSQL %d", date, ours, theirs);
                checked++;
                if (day < 28 && day != 1)
                    continue;     /* the times below at each month's edges */
                for (size_t t = 0; t < sizeof times / sizeof times[0]; t++) {
                    char ts[64];
                    snprintf(ts, sizeof ts, "%s%s", date, times[t]);
                    if (gj_is_timestamp(ts)) {
                        accepted++;
                        if (!pg_accepts(c, ts))
                            fail_msg("%s: gj_is_timestamp accepts what PostgreSQL refuses", ts);
                    }
                    checked++;
                }
            }
    assert_true(accepted > 1000 && checked > 5000);
    PQfinish(c);
}

static void test_refused_value_not_logged(void **state)
{
    (void)state;
    PGconn *c = gj_test_pg_connect(NULL);
    char path[] = "/tmp/gj-db-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0 && dup2(fd, STDERR_FILENO) >= 0);
    const char *p[1] = { "2024-02-30" }, *p2[1] = { "secret-value" };
    char sqlstate[6], sqlstate2[6];
    PGresult *res = gj_db_exec(c, "SELECT $1::timestamptz AS distinctive_column_name", 1, p, sqlstate);
    PGresult *res1 = gj_db_exec(c, "SELECT $1::timestamptz AS distinctive_column_name", 1, p2, sqlstate2);
    const char *bad_sql = "SELEC distinctive_syntax_error";
    PGresult *res2 = gj_db_exec(c, bad_sql, 0, NULL, NULL);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    assert_null(res);
    assert_null(res1);
    assert_null(res2);
    assert_string_equal(sqlstate, "22008");
    assert_string_equal(sqlstate2, "22007");
    char log[4096] = "";
    ssize_t n = pread(fd, log, sizeof log - 1, 0);
    close(fd);
    unlink(path);
    assert_true(n > 0);
    log[n] = '\0';
    fprintf(stderr, "%s", log);
    assert_non_null(strstr(log, "22008"));
    assert_non_null(strstr(log, "22007"));
    assert_non_null(strstr(log, "42601"));
    assert_non_null(strstr(log, "test_db_input.c:"));     /* where it was called */
    assert_null(strstr(log, "secret-value"));
    assert_null(strstr(log, "2024-02-30"));
    assert_null(strstr(log, "distinctive"));
    assert_null(strstr(log, "SELECT"));
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timestamps_agree),
        cmocka_unit_test(test_refused_value_not_logged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
