/*
 * test_host_memory.c — what host admission takes the host to offer: MemTotal of
 * /proc/meminfo, the cgroup v2/v1 limit lines and paths, the reserve.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "service/jobs/host_memory.h"

static void test_meminfo(void **state)
{
    (void)state;
    assert_int_equal(gj_meminfo_total("MemTotal:       24551356 kB\nMemFree:  1 kB\n"), 24551356ull << 10);
    assert_int_equal(gj_meminfo_total("MemFree: 1 kB\nMemTotal: 2048 kB\n"), 2048ull << 10);
    assert_int_equal(gj_meminfo_total("MemFree: 1 kB\n"), 0);
    assert_int_equal(gj_meminfo_total("MemTotal: 12\n"), 0);    /* no unit: not trusted */
    assert_int_equal(gj_meminfo_total(NULL), 0);
}

static void test_cgroup_limit(void **state)
{
    (void)state;
    assert_true(gj_cgroup_limit("max\n") == UINT64_MAX);
    assert_int_equal(gj_cgroup_limit("4294967296\n"), 4294967296ull);
    assert_int_equal(gj_cgroup_limit("1073741824"), 1073741824ull);
    assert_true(gj_cgroup_limit("0\n") == UINT64_MAX);
    assert_true(gj_cgroup_limit("12abc\n") == UINT64_MAX);
    assert_true(gj_cgroup_limit("") == UINT64_MAX);
}

static void test_cgroup_path(void **state)
{
    (void)state;
    char out[256];
    const char *v2 = "0::/system.slice/gpujobd.service\n";
    assert_int_equal(gj_cgroup_path(v2, 0, out, sizeof out), 1);
    assert_string_equal(out, "/system.slice/gpujobd.service");
    assert_int_equal(gj_cgroup_path(v2, 1, out, sizeof out), 0);

    const char *v1 = "12:pids:/docker/abc\n9:cpu,memory:/docker/abc\n0::/\n";
    assert_int_equal(gj_cgroup_path(v1, 1, out, sizeof out), 1);
    assert_string_equal(out, "/docker/abc");
    assert_int_equal(gj_cgroup_path(v1, 0, out, sizeof out), 1);
    assert_string_equal(out, "/");
    assert_int_equal(gj_cgroup_path("3:memoryx:/a\n", 1, out, sizeof out), 0);
    assert_int_equal(gj_cgroup_path("0::/a/very/long/path\n", 0, out, 8), 0);   /* too long for out */
}

static void test_read_with_reserve(void **state)
{
    (void)state;
    struct gj_host_memory m;
    gj_host_memory_read(1ull << 30, 512ull << 20, &m);
    assert_int_equal(m.total, 1ull << 30);
    assert_int_equal(m.usable, 512ull << 20);
    gj_host_memory_read(256ull << 20, 512ull << 20, &m);
    assert_int_equal(m.usable, 1);   /* counted, and nothing fits */
    gj_host_memory_read(0, 0, &m);     /* the real host: something, within MemTotal */
    assert_true(m.total > 0);
    assert_int_equal(m.usable, m.total);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meminfo),
        cmocka_unit_test(test_cgroup_limit),
        cmocka_unit_test(test_cgroup_path),
        cmocka_unit_test(test_read_with_reserve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
