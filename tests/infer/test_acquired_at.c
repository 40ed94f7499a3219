/*
 * test_acquired_at.c — DICOM DA/TM/DT values (from files, so hostile) to the acquisition
 * timestamp the infer kind writes into result.json for inference_results
 * (compute/infer/serving/acquired_at.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "infer/serving/acquired_at.h"

static void ok(const char *dt, const char *da, const char *tm, const char *want)
{
    char out[32];
    if (gj_dicom_datetime_text(dt, da, tm, out) != 0)
        fail_msg("'%s' '%s' '%s' refused, want '%s'", dt ? dt : "-", da ? da : "-", tm ? tm : "-", want);
    assert_string_equal(out, want);
}

static void bad(const char *dt, const char *da, const char *tm)
{
    char out[32];
    if (gj_dicom_datetime_text(dt, da, tm, out) == 0)
        fail_msg("'%s' '%s' '%s' accepted as '%s'", dt ? dt : "-", da ? da : "-", tm ? tm : "-", out);
}

static void test_date_time(void **st)
{
    (void)st;
    ok(NULL, "20240301", "101530.25", "2024-03-01 10:15:30.25");
    ok(NULL, "20240301", "101530", "2024-03-01 10:15:30");
    ok(NULL, "20240301", "1015", "2024-03-01 10:15:00");
    ok(NULL, "20240301", "10", "2024-03-01 10:00:00");
    ok(NULL, "20240301", "10:15:30", "2024-03-01 10:15:30");
    ok(NULL, "20240301", NULL, "2024-03-01 00:00:00");
    ok(NULL, "20240301", "", "2024-03-01 00:00:00");
    ok(NULL, "2024.03.01", "235960", "2024-03-01 23:59:59");      /* leap second */
    ok(NULL, "20240229", "000000.123456", "2024-02-29 00:00:00.123456");
    bad(NULL, "20230229", "1000");                                 /* not a leap year */
    bad(NULL, "20241301", "1000");
    bad(NULL, "20240132", "1000");
    bad(NULL, "2024031", "1000");
    bad(NULL, "2024-03-01", "1000");
    bad(NULL, "2024030x", "1000");
    bad(NULL, "20240301", "101");
    bad(NULL, "20240301", "2500");
    bad(NULL, "20240301", "1260");
    bad(NULL, "20240301", "1015.5");                               /* a fraction needs seconds */
    bad(NULL, "20240301", "101530.1234567");
    bad(NULL, "20240301", "101530.");
    bad(NULL, "20240301", "10153a");
    bad(NULL, "20240301", "101530.25'; DROP TABLE x;--");
    bad(NULL, NULL, "1000");
    bad(NULL, "", "1000");
}

static void test_datetime_dt(void **st)
{
    (void)st;
    ok("20220115093000.5+0100", NULL, NULL, "2022-01-15 09:30:00.5");
    ok("20220115093000-0500", NULL, NULL, "2022-01-15 09:30:00");
    ok("202201150930", NULL, NULL, "2022-01-15 09:30:00");
    ok("20220115", NULL, NULL, "2022-01-15 00:00:00");
    bad("2022", NULL, NULL);                  /* year only: not a point in time we keep */
    bad("20221315", NULL, NULL);
    bad("20220115093", NULL, NULL);
    bad("20220115093000.5+0100xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", NULL, NULL) ;
    char longv[200];
    for (int i = 0; i < 199; i++)
        longv[i] = '1';
    longv[199] = '\0';
    bad(longv, NULL, NULL);
    bad(NULL, "20240301", longv);
    /* DT wins over date/time; an empty DT falls back to them */
    ok("20220115", "20240301", "1000", "2022-01-15 00:00:00");
    ok("", "20240301", "1000", "2024-03-01 10:00:00");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_date_time),
        cmocka_unit_test(test_datetime_dt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
