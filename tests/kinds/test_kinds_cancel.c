/*
 * test_kinds_cancel.c — issue 11: every long loop checks cancellation. Each job here
 * would run for many seconds (a minute or more) on two threads; the context's cancel flag
 * turns on 200 ms after the start, and the run must return GJ_RUN_CANCELED within 2 s of
 * that, having reported progress on the way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brkga/brkga_kind.h"
#include "kind_harness.h"

#define CANCEL_AT_S 0.2
#define WITHIN_S 2.0
#define THREADS 2

static void expect_prompt_cancel(struct harness *h, const char *what)
{
    const struct gj_kind *kind = gj_kind_find(h->job.kind);
    assert_non_null(kind);
    struct gj_error err;
    double seconds;
    h->cancel_after_s = CANCEL_AT_S;
    int rc = harness_run(h, kind, THREADS, &seconds, &err);
    printf("%s: result %d after %.2f s (cancel seen at %.2f s), %d progress reports\n", what, rc, seconds,
           h->first_cancel_seen_s, h->progress_calls);
    if (rc != GJ_RUN_CANCELED)
        fail_msg("%s: run() returned %d (%s), not GJ_RUN_CANCELED", what, rc, err.message);
    if (seconds - CANCEL_AT_S > WITHIN_S)
        fail_msg("%s: returned %.2f s after the cancel", what, seconds - CANCEL_AT_S);
    assert_true(h->first_cancel_seen_s >= CANCEL_AT_S);
    harness_end(h);
}

/* The case of the issue: a 4096^2 phantom with its ground truth supersampled 16 x 16. */
static void test_phantom_4096_supersampled(void **state)
{
    (void)state;
    struct harness h;
    harness_begin(&h, "phantom", "{\"geometry\":{\"type\":\"parallel2d\",\"angles_deg\":{\"count\":720},"
                  "\"detector\":{\"cols\":4096}},\"volume\":{\"nx\":4096,\"ny\":4096},\"supersample\":16}");
    expect_prompt_cancel(&h, "phantom 4096^2 x 16^2");
}

/* A 3D phantom: 256^3 voxels, each averaged over 16^3 sub-samples. */
static void test_phantom_3d_supersampled(void **state)
{
    (void)state;
    struct harness h;
    harness_begin(&h, "phantom", "{\"geometry\":{\"type\":\"cone3d\",\"angles_deg\":{\"count\":36},"
                  "\"detector\":{\"cols\":64,\"rows\":64,\"spacing_u\":2},\"source_origin_mm\":500,"
                  "\"source_detector_mm\":1000},\"volume\":{\"nx\":256,\"ny\":256,\"nz\":256,\"voxel_mm\":0.5},"
                  "\"supersample\":16}");
    expect_prompt_cancel(&h, "phantom 256^3 x 16^3");
}

/* FBP of 4096 views of 4096 columns onto 4096^2: about 7e10 updates. */
static void test_fbp_large(void **state)
{
    (void)state;
    struct harness h;
    harness_begin(&h, "recon", "{\"geometry\":{\"type\":\"parallel2d\",\"angles_deg\":{\"count\":4096},"
                  "\"detector\":{\"cols\":4096}},\"volume\":{\"nx\":4096,\"ny\":4096}}");
    harness_input(&h, "projections", NULL, 4096ull * 4096 * 4);
    expect_prompt_cancel(&h, "fbp 4096 x 4096 -> 4096^2");
}

static void test_sart(void **state)
{
    (void)state;
    struct harness h;
    harness_begin(&h, "recon", "{\"geometry\":{\"type\":\"parallel2d\",\"angles_deg\":{\"count\":360},"
                  "\"detector\":{\"cols\":512}},\"volume\":{\"nx\":512,\"ny\":512},\"algorithm\":\"sart\","
                  "\"iterations\":1000}");
    harness_input(&h, "projections", NULL, 360ull * 512 * 4);
    expect_prompt_cancel(&h, "sart 360 x 512 -> 512^2, 1000 iterations");
}

/* SIRT of a cone volume: every sub-iteration projects and backprojects all views. */
static void test_sirt_cone(void **state)
{
    (void)state;
    struct harness h;
    harness_begin(&h, "recon", "{\"geometry\":{\"type\":\"cone3d\",\"angles_deg\":{\"count\":180,\"step\":2},"
                  "\"detector\":{\"cols\":192,\"rows\":160,\"spacing_u\":1.5},\"source_origin_mm\":400,"
                  "\"source_detector_mm\":800},\"volume\":{\"nx\":160,\"ny\":160,\"nz\":128,\"voxel_mm\":1},"
                  "\"algorithm\":\"sirt\",\"iterations\":200}");
    harness_input(&h, "projections", NULL, 180ull * 192 * 160 * 4);
    expect_prompt_cancel(&h, "sirt cone 180 x 192 x 160 -> 160^2 x 128");
}

/* FDK of 360 views of 256^2 onto 384^3: about 2e10 updates. */
static void test_fdk(void **state)
{
    (void)state;
    struct harness h;
    harness_begin(&h, "recon", "{\"geometry\":{\"type\":\"cone3d\",\"angles_deg\":{\"count\":360,\"step\":1},"
                  "\"detector\":{\"cols\":256,\"rows\":256,\"spacing_u\":1.6},\"source_origin_mm\":600,"
                  "\"source_detector_mm\":1200},\"volume\":{\"nx\":384,\"ny\":384,\"nz\":384,\"voxel_mm\":0.5}}");
    harness_input(&h, "projections", NULL, 360ull * 256 * 256 * 4);
    expect_prompt_cancel(&h, "fdk 360 x 256^2 -> 384^3");
}


/* The GA: 2000 chromosomes of 1500 cities, each decoded with 2-opt. */
static void test_brkga_tsp(void **state)
{
    (void)state;
    struct harness h;
    harness_begin(&h, "brkga", "{\"decoder\":\"tsp\",\"local_search\":\"2opt\",\"population_size\":2000,"
                  "\"max_generations\":1000000,\"seed\":1}");
    char *t = harness_tsp_text(1500, 12345);
    harness_input(&h, "tsp", t, strlen(t));
    free(t);
    expect_prompt_cancel(&h, "brkga tsp 1500 cities, 2-opt");
}


/* The network pre-computation: Yen's 1000 shortest paths for each of many demand pairs. */
static void test_brkga_precomputation(void **state)
{
    (void)state;
    struct harness h;
    harness_begin(&h, "brkga", "{\"k_paths\":1000,\"max_access_transit_links\":8,\"seed\":1}");
    char *nj, *dj;
    assert_int_equal(brkga_bench_instance(60, 40, 200, 3000, 4000, 5, &nj, &dj), 0);
    harness_input(&h, "network", nj, strlen(nj));
    harness_input(&h, "demands", dj, strlen(dj));
    free(nj);
    free(dj);
    expect_prompt_cancel(&h, "brkga network pre-computation, k_paths 1000");
}

static void test_noop(void **state)
{
    (void)state;
    struct harness h;
    harness_begin(&h, "noop", "{\"sleep_ms\":600000}");
    expect_prompt_cancel(&h, "noop sleep 600 s");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_phantom_4096_supersampled),
        cmocka_unit_test(test_phantom_3d_supersampled),
        cmocka_unit_test(test_fbp_large),
        cmocka_unit_test(test_sart),
        cmocka_unit_test(test_sirt_cone),
        cmocka_unit_test(test_fdk),
        cmocka_unit_test(test_brkga_tsp),
        cmocka_unit_test(test_brkga_precomputation),
        cmocka_unit_test(test_noop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
