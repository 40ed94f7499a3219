/*
 * test_kinds_host_bytes.c — issue 11's host-memory admission rests on each kind's
 * estimate of host_bytes (gj_kind.h): an upper bound of the resident memory a run adds,
 * not absurdly above it. Each case runs in a child process whose peak resident size is
 * reset first (/proc/self/clear_refs), and compares the peak getrusage reports with
 * the estimate: estimate >= peak and estimate <= 3 x peak + 64 MiB; and the floor known at
 * submit (host_bytes_floor) <= peak.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brkga/brkga_kind.h"
#include "kind_harness.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#define THREADS 2
#define SLACK (64ull << 20)

static uint64_t max_rss_bytes(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (uint64_t)r.ru_maxrss * 1024;
}

/* Resets the peak resident size to the current one (Linux 4.0 and later). */
static int reset_peak(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    int ok = fd >= 0 && write(fd, "5", 1) == 1;
    if (fd >= 0)
        close(fd);
    return ok ? 0 : -1;
}

/* Runs the job in a child; the bytes its peak resident size grew by, or fails the test. */
static uint64_t measured_peak(struct harness *h, const struct gj_kind *kind)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        uint64_t out[2] = { 0, 0 };
        struct gj_error err = { 0 };
        h->job.inputs = h->inputs;
        h->job.n_inputs = h->n_inputs;
        h->ctx = (struct gj_ctx){ .job = &h->job, .device = GJ_DEVICE_CPU, .cpu_threads = THREADS,
                                  .scratch_dir = h->scratch, .output_dir = h->out };
        if (reset_peak() == 0) {
            uint64_t base = max_rss_bytes();
            int rc = kind->run(&h->ctx, &err);
            out[0] = rc == GJ_RUN_OK ? 1 : 0;
            out[1] = max_rss_bytes() - base;
            if (rc != GJ_RUN_OK)
                fprintf(stderr, "run: %s\n", err.message);
        }
        ssize_t w = write(fds[1], out, sizeof out);
        _exit(w == (ssize_t)sizeof out ? 0 : 1);
    }
    close(fds[1]);
    uint64_t got[2] = { 0, 0 };
    ssize_t n = read(fds[0], got, sizeof got);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    if (n != (ssize_t)sizeof got || !got[0])
        fail_msg("the run in the child failed (or /proc/self/clear_refs is missing)");
    return got[1];
}

static void check_estimate(struct harness *h, const char *what)
{
    const struct gj_kind *kind = gj_kind_find(h->job.kind);
    assert_non_null(kind);
    struct gj_error err = { 0 };
    struct gj_needs needs = { 0 };
    h->job.inputs = h->inputs;
    h->job.n_inputs = h->n_inputs;
    if (kind->estimate(&h->job, &needs, &err))
        fail_msg("%s: estimate: %s", what, err.message);
    double t0 = harness_now();
    uint64_t peak = measured_peak(h, kind), floor_bytes = gj_kind_host_bytes_floor(kind, &h->job);
    printf("%-44s estimate %8.1f MiB  measured peak %8.1f MiB  floor %8.1f MiB  (%.1f s)\n", what,
           needs.host_bytes / 1048576.0, peak / 1048576.0, floor_bytes / 1048576.0, harness_now() - t0);
    if (needs.host_bytes < peak)
        fail_msg("%s: the estimate (%llu) is below the measured peak (%llu)", what,
                 (unsigned long long)needs.host_bytes, (unsigned long long)peak);
    if (needs.host_bytes > 3 * peak + SLACK)
        fail_msg("%s: the estimate (%llu) is over 3 x the measured peak (%llu) + 64 MiB", what,
                 (unsigned long long)needs.host_bytes, (unsigned long long)peak);
    if (floor_bytes > peak)
        fail_msg("%s: the floor (%llu) is above the measured peak: it is no lower bound", what,
                 (unsigned long long)floor_bytes);
    harness_end(h);
}

static void test_phantom(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "{\"geometry\":{\"type\":\"parallel2d\",\"angles_deg\":{\"count\":360},\"detector\":{\"cols\":1024}},"
        "\"volume\":{\"nx\":1024,\"ny\":1024}}",
        "{\"geometry\":{\"type\":\"parallel2d\",\"angles_deg\":{\"count\":180},\"detector\":{\"cols\":2048}},"
        "\"volume\":{\"nx\":2048,\"ny\":2048,\"nz\":4},\"batch\":4,\"supersample\":1}",
        "{\"geometry\":{\"type\":\"cone3d\",\"angles_deg\":{\"count\":90,\"step\":4},\"detector\":{\"cols\":256,"
        "\"rows\":192},\"source_origin_mm\":600,\"source_detector_mm\":1200},\"volume\":{\"nx\":192,\"ny\":192,"
        "\"nz\":192,\"voxel_mm\":0.5},\"supersample\":1}",
        "{\"geometry\":{\"type\":\"cone3d\",\"angles_deg\":{\"count\":256,\"step\":1.4},\"detector\":{\"cols\":256,"
        "\"rows\":256},\"source_origin_mm\":600,\"source_detector_mm\":1200},\"volume\":{\"nx\":64,\"ny\":64,"
        "\"nz\":64},\"truth\":false}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct harness h;
        char what[64];
        snprintf(what, sizeof what, "phantom case %zu", i);
        harness_begin(&h, "phantom", cases[i]);
        check_estimate(&h, what);
    }
}

#define PAR(views, cols) "\"geometry\":{\"type\":\"parallel2d\",\"angles_deg\":{\"count\":" #views "},\"detector\":{\"cols\":" #cols "}}"
#define FAN "\"geometry\":{\"type\":\"fan2d\",\"angles_deg\":{\"count\":360,\"step\":1},\"detector\":{\"cols\":768," \
    "\"spacing_u\":1.2},\"source_origin_mm\":600,\"source_detector_mm\":1000},\"volume\":{\"nx\":512,\"ny\":512,\"voxel_mm\":0.5}"
#define CONE(views, c, r, n) "\"geometry\":{\"type\":\"cone3d\",\"angles_deg\":{\"count\":" #views ",\"step\":1}," \
    "\"detector\":{\"cols\":" #c ",\"rows\":" #r ",\"spacing_u\":1.6},\"source_origin_mm\":600,\"source_detector_mm\":1200}," \
    "\"volume\":{\"nx\":" #n ",\"ny\":" #n ",\"nz\":" #n ",\"voxel_mm\":0.5}"

static void recon_case(const char *what, const char *params, uint64_t proj_bytes)
{
    struct harness h;
    harness_begin(&h, "recon", params);
    harness_input(&h, "projections", NULL, proj_bytes);
    check_estimate(&h, what);
}

static void test_recon(void **state)
{
    (void)state;
    recon_case("recon fbp parallel 720 x 1024 -> 1024^2", "{" PAR(720, 1024) "}", 720ull * 1024 * 4);
    recon_case("recon fbp parallel batch 8, 360 x 512", "{" PAR(360, 512) ",\"batch\":8}", 8ull * 360 * 512 * 4);
    recon_case("recon fbp fan 360 x 768 -> 512^2", "{" FAN "}", 360ull * 768 * 4);
    recon_case("recon sart batch 4, 180 x 256", "{" PAR(180, 256) ",\"batch\":4,\"algorithm\":\"sart\","
               "\"iterations\":1}", 4ull * 180 * 256 * 4);
    recon_case("recon sirt fan 360 x 768 -> 512^2", "{" FAN ",\"algorithm\":\"sirt\",\"iterations\":1}", 360ull * 768 * 4);
    recon_case("recon fdk 90 x 160^2 -> 192^3", "{" CONE(90, 160, 160, 192) "}", 90ull * 160 * 160 * 4);
    recon_case("recon fdk 40 x 256^2 -> 256^3", "{" CONE(40, 256, 256, 256) "}", 40ull * 256 * 256 * 4);
    recon_case("recon sirt cone 45 x 80^2 -> 80^3", "{" CONE(45, 80, 80, 80) ",\"algorithm\":\"sirt\","
               "\"iterations\":1}", 45ull * 80 * 80 * 4);
}



static void test_brkga(void **state)
{
    (void)state;
    static const struct { int cities; const char *params; } tsp[] = {
        { 500, "{\"decoder\":\"tsp\",\"population_size\":2048,\"max_generations\":2,\"seed\":1}" },
        { 1500, "{\"decoder\":\"tsp\",\"population_size\":2048,\"populations\":2,\"max_generations\":1,\"seed\":1}" },
    };
    for (size_t i = 0; i < sizeof tsp / sizeof tsp[0]; i++) {
        struct harness h;
        char what[64];
        snprintf(what, sizeof what, "brkga tsp %d cities", tsp[i].cities);
        harness_begin(&h, "brkga", tsp[i].params);
        char *t = harness_tsp_text(tsp[i].cities, 777);
        harness_input(&h, "tsp", t, strlen(t));
        free(t);
        check_estimate(&h, what);
    }
    static const struct { int core, transit, access, demands, k; } net[] = {
        { 30, 10, 20, 200, 20 },
        { 40, 30, 100, 1500, 20 },
    };
    for (size_t i = 0; i < sizeof net / sizeof net[0]; i++) {
        struct harness h;
        char what[64], params[160];
        snprintf(what, sizeof what, "brkga network %d demands, k %d", net[i].demands, net[i].k);
        snprintf(params, sizeof params, "{\"k_paths\":%d,\"max_generations\":2,\"max_population\":2048,\"seed\":1}",
                 net[i].k);
        harness_begin(&h, "brkga", params);
        char *nj, *dj;
        assert_int_equal(brkga_bench_instance(net[i].core, net[i].transit, net[i].access, net[i].demands, 4000, 5,
                                              &nj, &dj), 0);
        harness_input(&h, "network", nj, strlen(nj));
        harness_input(&h, "demands", dj, strlen(dj));
        free(nj);
        free(dj);
        check_estimate(&h, what);
    }
}

static void test_noop(void **state)
{
    (void)state;
    struct harness h;
    harness_begin(&h, "noop", "{\"host_bytes\":134217728,\"output_bytes\":1000000}");
    check_estimate(&h, "noop host_bytes 128 MiB");
}

int main(void)
{
#ifdef UNDER_ASAN
    printf("skipped: AddressSanitizer's shadow memory and quarantine make resident sizes meaningless\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_phantom),
        cmocka_unit_test(test_recon),
        cmocka_unit_test(test_brkga),
        cmocka_unit_test(test_noop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
