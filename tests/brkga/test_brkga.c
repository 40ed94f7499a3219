/*
 * test_brkga.c — unit and scientific tests of the brkga module (suite 'brkga'):
 * Philox known answers, the thesis's pre-computation tables (seed 002, Tables 6-4 to
 * 6-6), the section 6.1 and chapter 5 instances reaching 4 and 3 optical links,
 * reproducibility for any thread count, exchange/reset, TSP with 2-opt reaching the
 * optima of berlin52 and eil51, and bad input.
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

#include "common/fsutil.h"
#include "common/gj_kind.h"
#include "brkga/brkga_engine.h"
#include "brkga/brkga_kind.h"
#include "brkga/brkga_net.h"
#include "brkga/brkga_rng.h"
#include "brkga/brkga_tsp.h"

extern const struct gj_kind gj_kind_brkga;

/* tests/brkga/data/NAME under $GJ_SOURCE_ROOT (the test environment sets it), else under the
 * working directory: no path of the build machine is compiled in. */
static char *data_path(const char *name)
{
    static char buf[8][1024];
    static int k;
    char *b = buf[k++ % 8];
    const char *root = getenv("GJ_SOURCE_ROOT");
    snprintf(b, 1024, "%s/tests/brkga/data/%s", root ? root : ".", name);
    return b;
}

static char *slurp(const char *name, size_t *len)
{
    char *d;
    size_t l;
    assert_int_equal(gj_read_file(data_path(name), 1 << 26, &d, &l), 0);
    if (len)
        *len = l;
    return d;
}

static void load_net(struct brkga_net *net, const char *nf, const char *df, int max_at, int k)
{
    struct brkga_net_input in;
    memset(&in, 0, sizeof in);
    struct gj_error ge = { 0 };
    size_t nl, dl;
    char *nt = slurp(nf, &nl), *dt = slurp(df, &dl);
    int rc = brkga_net_parse_network(nt, nl, &in, &ge);
    if (rc)
        fail_msg("%s", ge.message);
    rc = brkga_net_parse_demands(dt, dl, &in, &ge);
    if (rc)
        fail_msg("%s", ge.message);
    free(nt);
    free(dt);
    rc = brkga_net_build(net, &in, max_at, k, 0, NULL, &ge);
    if (rc)
        fail_msg("%s", ge.message);
}

/* ---- Philox known answers (Random123 kat_vectors, philox4x32_10) ---- */
static void test_philox_kat(void **state)
{
    (void)state;
    struct brkga_u4 a = brkga_philox(0, 0, 0, 0, 0);
    assert_int_equal(a.w[0], 0x6627e8d5u);
    assert_int_equal(a.w[1], 0xe169c58du);
    assert_int_equal(a.w[2], 0xbc57ac4cu);
    assert_int_equal(a.w[3], 0x9b00dbd8u);
    struct brkga_u4 b = brkga_philox(0xffffffffffffffffull, 0xffffffffu, 0xffffffffu, 0xffffffffu,
                                     0xffffffffu);
    assert_int_equal(b.w[0], 0x408f276du);
    assert_int_equal(b.w[1], 0x41c83b0eu);
    assert_int_equal(b.w[2], 0xa20bc7c6u);
    assert_int_equal(b.w[3], 0x6d5451fdu);
    struct brkga_u4 c = brkga_philox(((uint64_t)0x299f31d0u << 32) | 0xa4093822u, 0x243f6a88u,
                                     0x85a308d3u, 0x13198a2eu, 0x03707344u);
    assert_int_equal(c.w[0], 0xd16cfe09u);
    assert_int_equal(c.w[1], 0x94fdccebu);
    assert_int_equal(c.w[2], 0x5001e420u);
    assert_int_equal(c.w[3], 0x24126ea1u);
    assert_true(brkga_key(0xffffffffu) < 1.0f);
    assert_true(brkga_key(0) == 0.0f);
    assert_int_equal(brkga_below(0xffffffffu, 7), 6);
}

/* ---- pre-computation against Tables 6-4 .. 6-6 ---- */
static int vlink_find(const struct brkga_net *net, const char *a, const char *b)
{
    for (int v = 0; v < net->m.n_vlinks; v++) {
        const char *x = net->in.nodes[net->vlinks[v].a].name, *y = net->in.nodes[net->vlinks[v].b].name;
        if ((!strcmp(x, a) && !strcmp(y, b)) || (!strcmp(x, b) && !strcmp(y, a)))
            return v;
    }
    return -1;
}

static void test_precompute_14(void **state)
{
    (void)state;
    struct brkga_net net;
    load_net(&net, "net14.xml", "dem14.xml", 2, 20);
    /* 6 transit-transit + 3 access x 2 transit links */
    assert_int_equal(net.m.n_vlinks, 12);
    assert_int_equal(net.m.n_demands, 8);
    assert_int_equal(net.m.n_olinks, 10);
    /* Table 6-5: A1 keeps T3 (5) and T4 (2); A2 keeps T3 (15), T4 (12); A3 keeps T3 (15), T4 (18) */
    static const struct { const char *a, *b; double d; int hops; } kept[] = {
        { "T3", "A1", 5, 4 }, { "T4", "A1", 2, 3 }, { "T3", "A2", 15, 5 }, { "T4", "A2", 12, 4 },
        { "T3", "A3", 15, 3 }, { "T4", "A3", 18, 4 }, { "T1", "T2", 35, 4 }, { "T1", "T3", 20, 5 },
        { "T2", "T3", 25, 5 }, { "T1", "T4", 17, 4 }, { "T2", "T4", 22, 4 }, { "T3", "T4", 3, 3 },
    };
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        int v = vlink_find(&net, kept[i].a, kept[i].b);
        assert_int_equal(v, (int)i);   /* the thesis's mplsEdgeID order */
        assert_true(net.vlinks[v].distance == kept[i].d);
        assert_int_equal(net.vlinks[v].path_len - 1, kept[i].hops);
    }
    assert_int_equal(vlink_find(&net, "T1", "A1"), -1);
    assert_int_equal(vlink_find(&net, "T2", "A3"), -1);
    /* T1->T3 goes X1-X2-X7-X5 (20), not X1-X2-X5 (23) */
    int v = vlink_find(&net, "T1", "T3");
    const char *want[] = { "T1", "X1", "X2", "X7", "X5", "T3" };
    assert_int_equal(net.vlinks[v].path_len, 6);
    for (int i = 0; i < 6; i++)
        assert_string_equal(net.in.nodes[net.vlinks[v].path[i]].name, want[i]);
    /* Table 6-6: 12 routes per demand; demand 0 (A1->A2) costs */
    static const double c0[] = { 14, 20, 20, 20, 54, 54, 64, 64, 94, 94, 94, 94 };
    static const double c1[] = { 20, 20, 20, 26, 54, 60, 64, 70, 94, 94, 100, 100 };
    for (int d = 0; d < 8; d++)
        assert_int_equal(net.m.dem_route[2 * d + 1] - net.m.dem_route[2 * d], 12);
    for (int d = 0; d < 2; d++) {
        const double *c = d ? c1 : c0;
        for (int r = 0; r < 12; r++) {
            int g = net.m.dem_route[2 * d] + r;
            double cost = 0;
            for (int t = net.m.route_vl_off[g]; t < net.m.route_vl_off[g + 1]; t++)
                cost += net.m.vl_dist[net.m.route_vl[t]];
            assert_true(cost == c[r]);
        }
    }
    /* route 1 of demand 0 is A1-T3-A2 (3 nodes) and route 2 A1-T4-T3-A2 */
    int g = net.m.dem_route[0] + 1;
    assert_int_equal(net.route_nodes_len[g], 3);
    assert_string_equal(net.in.nodes[net.route_nodes[g][1]].name, "T3");
    g = net.m.dem_route[0] + 2;
    assert_int_equal(net.route_nodes_len[g], 4);
    assert_string_equal(net.in.nodes[net.route_nodes[g][1]].name, "T4");
    brkga_net_free(&net);
}

/* The routing of the thesis's answer (Results of section 6.1) decodes to 4. */
static void test_decoder_thesis_answer(void **state)
{
    (void)state;
    struct brkga_net net;
    load_net(&net, "net14.xml", "dem14.xml", 2, 20);
    /* weights: make T4-T3, T4-A1, T3-A2, T3-A3 cheap, everything else dear */
    float keys[20];
    for (int v = 0; v < 12; v++)
        keys[v] = 0.99f;
    keys[vlink_find(&net, "T3", "T4")] = 0.01f;
    keys[vlink_find(&net, "T4", "A1")] = 0.01f;
    keys[vlink_find(&net, "T3", "A2")] = 0.01f;
    keys[vlink_find(&net, "T3", "A3")] = 0.01f;
    for (int d = 0; d < 8; d++)
        keys[12 + d] = (float)d / 8.0f;
    void *scratch = malloc(brkga_net_scratch_bytes(&net.m));
    assert_non_null(scratch);
    double f = brkga_net_decode(&net.m, keys, scratch, NULL);
    assert_true(f == 4.0);
    /* everything dear except the T1 detours: still feasible, more links */
    for (int v = 0; v < 12; v++)
        keys[v] = 0.5f;
    f = brkga_net_decode(&net.m, keys, scratch, NULL);
    assert_true(f >= 4.0 && f < BRKGA_INFEASIBLE);
    free(scratch);
    brkga_net_free(&net);
}

/* ---- the engine ---- */
static void base_params(struct brkga_params *prm, size_t n, size_t p)
{
    memset(prm, 0, sizeof *prm);
    prm->n = n;
    prm->p = p;
    prm->ne = (size_t)(0.3 * (double)p);
    prm->nm = (size_t)(0.2 * (double)p);
    prm->rhoe = 0.65;
    prm->K = 1;
    prm->primary = BRKGA_STOP_GENERATIONS;
    prm->secondary = BRKGA_STOP_NONE;
    prm->max_generations = 200;
    prm->seed = 6271412974226616250ull;
    prm->threads = 1;
    prm->stats_interval = 50;
    prm->device = -1;
    prm->hard_time_limit_s = 120;
}

static void solve_net(const char *nf, const char *df, int max_at, int k, struct brkga_params *prm,
                      struct brkga_result *res)
{
    struct brkga_net net;
    load_net(&net, nf, df, max_at, k);
    struct brkga_decoder dec = { (size_t)(net.m.n_vlinks + net.m.n_demands),
                                 brkga_net_scratch_bytes(&net.m), &net.m, brkga_net_decode_cb, 1 };
    prm->n = dec.n_genes;
    struct gj_error ge = { 0 };
    int rc = brkga_solve(prm, &dec, NULL, res, &ge);
    if (rc)
        fail_msg("%s", ge.message);
    brkga_net_free(&net);
}

static void test_section61_reaches_4(void **state)
{
    (void)state;
    struct brkga_params prm;
    struct brkga_result res;
    base_params(&prm, 20, 20);   /* Table 6-1: Individuals 1.0 x 20 genes */
    prm.max_generations = 1000;
    prm.secondary = BRKGA_STOP_OPTIMAL;
    prm.target = 4;              /* the thesis's answer: stop once reached */
    solve_net("net14.xml", "dem14.xml", 2, 20, &prm, &res);
    assert_true(res.best == 4.0);
    assert_int_equal(res.stop_reason, BRKGA_STOP_OPTIMAL);
    brkga_result_free(&res);
}

static void test_chapter5_reaches_3(void **state)
{
    (void)state;
    struct brkga_params prm;
    struct brkga_result res;
    /* Table 5-8 lists 9 virtual links: two per access node (T3 and T1 for A1, T3 and T2
     * for A2, T3 and T1 for A3) and the 3 transit-transit links, i.e. maxVEdgesA_T = 2 */
    struct brkga_net net;
    load_net(&net, "net12.xml", "dem12.xml", 2, 100);
    assert_int_equal(net.m.n_vlinks, 9);
    static const char *const vl[][2] = { { "T1", "A1" }, { "T1", "A3" }, { "T1", "T2" },
        { "T1", "T3" }, { "T2", "A2" }, { "T2", "T3" }, { "T3", "A1" }, { "T3", "A2" }, { "T3", "A3" } };
    for (int i = 0; i < 9; i++)
        assert_true(vlink_find(&net, vl[i][0], vl[i][1]) >= 0);
    assert_true(net.vlinks[vlink_find(&net, "T3", "A2")].distance == 15);
    brkga_net_free(&net);
    for (int max_at = 2; max_at <= 4; max_at += 2) {
        base_params(&prm, 0, 0);
        prm.p = 56;   /* Individuals 4.0 x 14 genes */
        prm.ne = 16;
        prm.nm = 11;
        prm.max_generations = 300;
        solve_net("net12.xml", "dem12.xml", max_at, 100, &prm, &res);
        assert_int_equal(prm.n, max_at == 2 ? 14 : 17);
        /* the chapter-5 listing prints 4, but its own routing uses 3 links: X5-X2, X2-X4, X5-X6 */
        assert_true(res.best == 3.0);
        brkga_result_free(&res);
    }
}

static void history_equal(const struct brkga_result *a, const struct brkga_result *b, size_t n)
{
    assert_int_equal(a->n_hist, b->n_hist);
    for (size_t i = 0; i < a->n_hist; i++) {
        assert_memory_equal(&a->hist_best[i], &b->hist_best[i], sizeof(double));
        assert_memory_equal(&a->hist_mean[i], &b->hist_mean[i], sizeof(double));
    }
    assert_memory_equal(a->best_keys, b->best_keys, n * sizeof(float));
}

static void test_reproducible_threads(void **state)
{
    (void)state;
    struct brkga_params prm;
    struct brkga_result r1, r3;
    base_params(&prm, 0, 64);
    prm.K = 3;
    prm.exchange_interval = 7;
    prm.exchange_count = 2;
    prm.reset_after = 15;
    prm.max_generations = 120;
    prm.threads = 1;
    solve_net("net14.xml", "dem14.xml", 3, 20, &prm, &r1);
    prm.threads = 3;
    solve_net("net14.xml", "dem14.xml", 3, 20, &prm, &r3);
    history_equal(&r1, &r3, prm.n);
    assert_true(r1.exchanges > 0);
    assert_true(r1.resets > 0);
    /* a different seed gives a different history */
    struct brkga_result r2;
    prm.seed = 1;
    solve_net("net14.xml", "dem14.xml", 3, 20, &prm, &r2);
    int differ = 0;
    for (size_t i = 0; i < r1.n_hist && i < r2.n_hist && !differ; i++)
        differ = r1.hist_mean[i] != r2.hist_mean[i];
    assert_true(differ);
    brkga_result_free(&r1);
    brkga_result_free(&r2);
    brkga_result_free(&r3);
}

/* A toy decoder for sense and stop-criteria checks: sum of keys. */
static double sum_decode(void *ctx, float *keys, void *scratch)
{
    (void)scratch;
    size_t n = *(size_t *)ctx;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += keys[i];
    return s;
}

static void test_engine_sense_and_stops(void **state)
{
    (void)state;
    size_t n = 10;
    struct brkga_decoder dec = { n, 0, &n, sum_decode, 0 };
    struct brkga_params prm;
    struct brkga_result res;
    struct gj_error ge = { 0 };
    base_params(&prm, n, 50);
    prm.max_generations = 60;
    assert_int_equal(brkga_solve(&prm, &dec, NULL, &res, &ge), 0);
    double minbest = res.best;
    assert_true(minbest < 2.0);
    assert_int_equal(res.generations, 60);
    assert_int_equal(res.n_hist, 61);
    /* best is monotone (elites are kept and not re-decoded) */
    for (size_t i = 1; i < res.n_hist; i++)
        assert_true(res.hist_best[i] <= res.hist_best[i - 1]);
    /* decodes: p initially, then p - ne per generation */
    assert_int_equal(res.decodes, 50 + 60 * (50 - 15));
    brkga_result_free(&res);
    prm.maximize = 1;
    assert_int_equal(brkga_solve(&prm, &dec, NULL, &res, &ge), 0);
    assert_true(res.best > 8.0);
    brkga_result_free(&res);
    /* stall criterion as primary, generations as secondary: either stops */
    prm.maximize = 0;
    prm.primary = BRKGA_STOP_INCUMBENT;
    prm.max_stall_generations = 5;
    prm.secondary = BRKGA_STOP_GENERATIONS;
    prm.max_generations = 100000;
    assert_int_equal(brkga_solve(&prm, &dec, NULL, &res, &ge), 0);
    assert_int_equal(res.stop_reason, BRKGA_STOP_INCUMBENT);
    brkga_result_free(&res);
    prm.primary = BRKGA_STOP_GENERATIONS;
    prm.max_generations = 10;
    prm.secondary = BRKGA_STOP_OPTIMAL;
    prm.target = 100;   /* already met by the initial population */
    assert_int_equal(brkga_solve(&prm, &dec, NULL, &res, &ge), 0);
    assert_int_equal(res.stop_reason, BRKGA_STOP_OPTIMAL);
    assert_int_equal(res.generations, 0);
    brkga_result_free(&res);
    /* initial chromosomes go into population 0 */
    float init[10] = { 0 };
    prm.target = -1;
    prm.secondary = BRKGA_STOP_NONE;
    prm.initial = init;
    prm.n_initial = 1;
    prm.max_generations = 0;
    assert_int_equal(brkga_solve(&prm, &dec, NULL, &res, &ge), 0);
    assert_true(res.best == 0.0);
    brkga_result_free(&res);
    /* bad arithmetic */
    prm.ne = 30;
    prm.nm = 20;
    assert_int_equal(brkga_solve(&prm, &dec, NULL, &res, &ge), -1);
    assert_non_null(strstr(ge.message, "elites"));
}

static int cancel_after(void *ctx)
{
    int *calls = ctx;
    return ++*calls > 5;
}

static void test_engine_cancel(void **state)
{
    (void)state;
    size_t n = 10;
    int calls = 0;
    struct brkga_decoder dec = { n, 0, &n, sum_decode, 0 };
    struct brkga_hooks hooks = { &calls, cancel_after, NULL };
    struct brkga_params prm;
    struct brkga_result res;
    struct gj_error ge = { 0 };
    base_params(&prm, n, 30);
    prm.max_generations = 1000000;
    prm.stats_interval = 2;
    assert_int_equal(brkga_solve(&prm, &dec, &hooks, &res, &ge), 0);
    assert_int_equal(res.stop_reason, BRKGA_STOP_CANCELLED);
    assert_int_equal(res.generations, 5);
    /* statistics rows every 2 generations plus the final one */
    assert_int_equal(res.n_rows, 4);
    assert_true(res.rows[res.n_rows - 1].terminate);
    brkga_result_free(&res);
}

static double slow_decode(void *ctx, float *keys, void *scratch)
{
    (void)scratch;
    usleep(1000);
    return sum_decode(ctx, keys, NULL);
}

static int always(void *ctx)
{
    (void)ctx;
    return 1;
}

static void test_engine_cancel_mid_generation(void **state)
{
    (void)state;
    /* 3000 decodes of 1 ms: several seconds, unless the cancel is seen inside the batch */
    size_t n = 4;
    struct brkga_decoder dec = { n, 0, &n, slow_decode, 0 };
    struct brkga_hooks hooks = { NULL, always, NULL };
    struct brkga_params prm;
    struct brkga_result res;
    struct gj_error ge = { 0 };
    base_params(&prm, n, 3000);
    prm.threads = 2;
    double t0 = brkga_now();
    assert_int_equal(brkga_solve(&prm, &dec, &hooks, &res, &ge), 0);
    double dt = brkga_now() - t0;
    assert_int_equal(res.stop_reason, BRKGA_STOP_CANCELLED);
    assert_true(dt < 1.0);
    brkga_result_free(&res);
}

/* ---- TSP ---- */
static void tsp_solve(const char *file, int ls, size_t p, long gens, uint64_t seed, int threads,
                      struct brkga_result *res, double target)
{
    struct brkga_tsp t;
    struct gj_error ge = { 0 };
    size_t len;
    char *text = slurp(file, &len);
    assert_int_equal(brkga_tsp_parse(text, len, &t, &ge), 0);
    free(text);
    t.local_search = ls;
    struct brkga_decoder dec = { (size_t)t.n, brkga_tsp_scratch_bytes(&t), &t, brkga_tsp_decode_cb, 0 };
    struct brkga_params prm;
    base_params(&prm, (size_t)t.n, p);
    prm.ne = p / 5;
    prm.nm = p / 10;
    prm.rhoe = 0.7;
    prm.max_generations = gens;
    prm.seed = seed;
    prm.threads = threads;
    if (target > 0) {
        prm.secondary = BRKGA_STOP_OPTIMAL;
        prm.target = target;
    }
    int rc = brkga_solve(&prm, &dec, NULL, res, &ge);
    if (rc)
        fail_msg("%s", ge.message);
    brkga_tsp_free(&t);
}

static void test_tsp_optima_2opt(void **state)
{
    (void)state;
    struct brkga_result res;
    /* budget: population 200, at most 300 generations, stop at the optimum */
    tsp_solve("berlin52.tsp", 1, 200, 300, 1, (int)sysconf(_SC_NPROCESSORS_ONLN), &res, 7542);
    printf("# berlin52 + 2-opt: %g after %ld generations\n", res.best, res.generations);
    assert_true(res.best == 7542);
    brkga_result_free(&res);
    tsp_solve("eil51.tsp", 1, 200, 300, 1, (int)sysconf(_SC_NPROCESSORS_ONLN), &res, 426);
    printf("# eil51 + 2-opt: %g after %ld generations\n", res.best, res.generations);
    assert_true(res.best == 426);
    brkga_result_free(&res);
    tsp_solve("att48.tsp", 1, 200, 300, 1, (int)sysconf(_SC_NPROCESSORS_ONLN), &res, 10628);
    printf("# att48 + 2-opt: %g after %ld generations\n", res.best, res.generations);
    assert_true(res.best == 10628);
    brkga_result_free(&res);
}

/* Exact optimum by Held-Karp dynamic programming (n <= 16). */
static long held_karp(const struct brkga_tsp *t)
{
    int n = t->n, N = 1 << (n - 1);
    long *dp = malloc((size_t)N * (size_t)n * sizeof *dp);
    assert_non_null(dp);
    for (long i = 0; i < (long)N * n; i++)
        dp[i] = 1L << 40;
    for (int j = 1; j < n; j++)
        dp[(size_t)(1 << (j - 1)) * n + j] = t->dist[j];
    for (int S = 1; S < N; S++)
        for (int j = 1; j < n; j++) {
            if (!(S & (1 << (j - 1))))
                continue;
            long v = dp[(size_t)S * n + j];
            for (int k = 1; k < n; k++) {
                if (S & (1 << (k - 1)))
                    continue;
                size_t T = (size_t)(S | (1 << (k - 1))) * n + k;
                long w = v + t->dist[(size_t)j * n + k];
                if (w < dp[T])
                    dp[T] = w;
            }
        }
    long best = 1L << 40;
    for (int j = 1; j < n; j++) {
        long v = dp[(size_t)(N - 1) * n + j] + t->dist[(size_t)j * n];
        if (v < best)
            best = v;
    }
    free(dp);
    return best;
}

static void test_tsp_small_exact(void **state)
{
    (void)state;
    /* GEO instances: the dynamic programme over our distances gives the published optima,
     * and the GA reaches them, with 2-opt and without local search */
    struct { const char *f; long opt; } cases[] = { { "burma14.tsp", 3323 }, { "ulysses16.tsp", 6859 } };
    for (int c = 0; c < 2; c++) {
        struct brkga_tsp t;
        struct gj_error ge = { 0 };
        size_t len;
        char *text = slurp(cases[c].f, &len);
        assert_int_equal(brkga_tsp_parse(text, len, &t, &ge), 0);
        free(text);
        assert_true(t.geo);
        long opt = held_karp(&t);
        assert_int_equal(opt, cases[c].opt);
        brkga_tsp_free(&t);
        struct brkga_result res;
        tsp_solve(cases[c].f, 1, 100, 200, 5, 2, &res, (double)opt);
        printf("# %s + 2-opt: %g after %ld generations (optimum %ld)\n", cases[c].f, res.best,
               res.generations, opt);
        assert_true(res.best == (double)opt);
        brkga_result_free(&res);
        tsp_solve(cases[c].f, 0, 400, 1500, 5, 2, &res, (double)opt);
        printf("# %s without local search: %g after %ld generations (optimum %ld, gap %.2f%%)\n",
               cases[c].f, res.best, res.generations, opt, 100.0 * (res.best - (double)opt) / (double)opt);
        assert_true(res.best >= (double)opt);
        brkga_result_free(&res);
    }
}

static void test_tsp_reproducible_threads(void **state)
{
    (void)state;
    /* 2-opt rewrites the keys it decodes: still the same history for 1 and 3 threads */
    struct brkga_result a, b;
    tsp_solve("eil51.tsp", 1, 60, 25, 99, 1, &a, 0);
    tsp_solve("eil51.tsp", 1, 60, 25, 99, 3, &b, 0);
    history_equal(&a, &b, 51);
    brkga_result_free(&a);
    brkga_result_free(&b);
}

static void test_tsp_plain_gap_reported(void **state)
{
    (void)state;
    struct brkga_result res;
    tsp_solve("att48.tsp", 0, 480, 300, 1, (int)sysconf(_SC_NPROCESSORS_ONLN), &res, 0);
    printf("# att48 without local search: %g (optimum 10628, gap %.1f%%)\n", res.best,
           100.0 * (res.best - 10628) / 10628);
    assert_true(res.best >= 10628);   /* the gap is reported, not asserted */
    brkga_result_free(&res);
}

static void test_tsp_distances(void **state)
{
    (void)state;
    /* the optimal tours of TSPLIB measure the published optima with our distances */
    static const int berlin[] = { 1, 49, 32, 45, 19, 41, 8, 9, 10, 43, 33, 51, 11, 52, 14, 13, 47, 26,
        27, 28, 12, 25, 4, 6, 15, 5, 24, 48, 38, 37, 40, 39, 36, 35, 34, 44, 46, 16, 29, 50, 20, 23,
        30, 2, 7, 42, 21, 17, 3, 18, 31, 22 };
    static const int att[] = { 1, 8, 38, 31, 44, 18, 7, 28, 6, 37, 19, 27, 17, 43, 30, 36, 46, 33,
        20, 47, 21, 32, 39, 48, 5, 42, 24, 10, 45, 35, 4, 26, 2, 29, 34, 41, 16, 22, 3, 23, 14, 25,
        13, 11, 12, 15, 40, 9 };
    struct { const char *f; const int *t; int n; long opt; } cases[] = {
        { "berlin52.tsp", berlin, 52, 7542 }, { "att48.tsp", att, 48, 10628 },
    };
    for (int c = 0; c < 2; c++) {
        struct brkga_tsp t;
        struct gj_error ge = { 0 };
        size_t len;
        char *text = slurp(cases[c].f, &len);
        assert_int_equal(brkga_tsp_parse(text, len, &t, &ge), 0);
        free(text);
        int tour[64];
        for (int i = 0; i < cases[c].n; i++)
            tour[i] = cases[c].t[i] - 1;
        assert_int_equal(brkga_tsp_length(&t, tour), cases[c].opt);
        brkga_tsp_free(&t);
    }
}

/* ---- bad input ---- */
static void expect_net_error(const char *net, const char *dem, const char *needle)
{
    struct brkga_net_input in;
    memset(&in, 0, sizeof in);
    struct gj_error ge = { 0 };
    int rc = brkga_net_parse_network(net, strlen(net), &in, &ge);
    if (rc == 0 && dem)
        rc = brkga_net_parse_demands(dem, strlen(dem), &in, &ge);
    if (rc == 0) {
        struct brkga_net n;
        rc = brkga_net_build(&n, &in, 2, 5, 0, NULL, &ge);
        if (rc == 0)
            brkga_net_free(&n);
    }
    brkga_net_input_free(&in);
    if (rc == 0 || !strstr(ge.message, needle))
        fail_msg("expected an error with '%s', got rc %d '%s'", needle, rc, ge.message);
}

#define NET_HEAD "<Network totalBWPerLink=\"100\"><Node type=\"source\" name=\"A1\" location=\"X1\"/>" \
    "<Node type=\"source\" name=\"A2\" location=\"X2\"/><Node type=\"transit\" name=\"T1\" location=\"X1\"/>" \
    "<Node type=\"core\" name=\"X1\"/><Node type=\"core\" name=\"X2\"/>"
#define DEM_OK "<Traffic><Demand source=\"A1\" destination=\"A2\" bw=\"10G\"/></Traffic>"

static void test_bad_input(void **state)
{
    (void)state;
    expect_net_error("<Network totalBWPerLink=\"100\"><Node", NULL, "malformed XML");
    expect_net_error("", NULL, "empty");
    expect_net_error("hello", NULL, "neither XML nor JSON");
    expect_net_error("<Net/>", NULL, "expected <Network>");
    expect_net_error("<Network><Node type=\"core\" name=\"X1\"/></Network>", NULL, "totalBWPerLink");
    expect_net_error(NET_HEAD "<Edge A=\"X1\" B=\"X9\" distance=\"3\"/></Network>", NULL, "'X9'");
    expect_net_error(NET_HEAD "<Edge A=\"X1\" B=\"X2\" distance=\"-3\"/></Network>", NULL, "negative distance");
    expect_net_error(NET_HEAD "<Edge A=\"X1\" B=\"X2\" distance=\"abc\"/></Network>", NULL, "not a number");
    expect_net_error(NET_HEAD "<Node type=\"core\" name=\"X1\"/></Network>", NULL, "declared twice");
    expect_net_error(NET_HEAD "<Node type=\"router\" name=\"R\"/></Network>", NULL, "type 'router'");
    expect_net_error(NET_HEAD "<Edge A=\"A1\" B=\"T1\" distance=\"1\"/></Network>", NULL, "two MPLS nodes");
    expect_net_error("<!DOCTYPE x [<!ENTITY a \"aaaa\">]><Network totalBWPerLink=\"1\">&a;</Network>",
                     NULL, "entity");
    const char *net_ok = NET_HEAD "<Edge A=\"X1\" B=\"X2\" distance=\"3\"/></Network>";
    expect_net_error(net_ok, "<Traffic><Demand source=\"A1\" destination=\"A2\" bw=\"25G\"/></Traffic>",
                     "not one of 1G, 10G, 40G, 100G");
    expect_net_error(net_ok, "<Traffic><Demand source=\"A1\" destination=\"A7\" bw=\"1G\"/></Traffic>",
                     "'A7' is not in the network");
    expect_net_error(net_ok, "<Traffic><Demand source=\"A1\" destination=\"T1\" bw=\"1G\"/></Traffic>",
                     "not a source");
    expect_net_error(net_ok, "<Traffic></Traffic>", "no demands");
    expect_net_error(net_ok, "<Traffic><Demand source=\"A1\" destination=\"A2\" bw=\"1G\">", "malformed XML");
    expect_net_error("{\"total_bw_per_link\": 10, \"nodes\": [}", NULL, "malformed JSON");
    expect_net_error("{\"total_bw_per_link\": -1, \"nodes\": [], \"edges\": []}", NULL, "total_bw_per_link");
    expect_net_error("{\"total_bw_per_link\": 10, \"nodes\": [{\"name\":\"X1\",\"type\":\"core\"}],"
                     "\"edges\": [{\"a\":\"X1\",\"b\":\"Q\",\"distance\":1}]}", NULL, "'Q'");
    expect_net_error(NET_HEAD "<Node type=\"source\" name=\"A3\"/></Network>", DEM_OK, "attached to no core");
    /* a valid network still works */
    struct brkga_net_input in;
    memset(&in, 0, sizeof in);
    struct gj_error ge = { 0 };
    assert_int_equal(brkga_net_parse_network(net_ok, strlen(net_ok), &in, &ge), 0);
    assert_int_equal(brkga_net_parse_demands(DEM_OK, strlen(DEM_OK), &in, &ge), 0);
    struct brkga_net n;
    assert_int_equal(brkga_net_build(&n, &in, 2, 5, 0, NULL, &ge), 0);
    brkga_net_free(&n);
}

static void test_tsp_bad_input(void **state)
{
    (void)state;
    const char *bad[] = {
        "NAME: x\nTYPE: TSP\nDIMENSION: 3\nEDGE_WEIGHT_TYPE: EXPLICIT\nNODE_COORD_SECTION\n",
        "NAME: x\nTYPE: TSP\nDIMENSION: 3\nEDGE_WEIGHT_TYPE: EUC_2D\nNODE_COORD_SECTION\n1 0 0\n2 1 1\nEOF\n",
        "NAME: x\nTYPE: TSP\nDIMENSION: 3\nEDGE_WEIGHT_TYPE: EUC_2D\nNODE_COORD_SECTION\n1 0 0\n9 1 1\n3 2 2\n",
        "NAME: x\nTYPE: TSP\nDIMENSION: -4\n",
        "NAME: x\nTYPE: TSP\nDIMENSION: 3\nEDGE_WEIGHT_TYPE: EUC_2D\nNODE_COORD_SECTION\n1 0 zero\n",
        "NAME: x\nTYPE: ATSP\n",
    };
    const char *needle[] = { "EXPLICIT", "truncated", "outside", "DIMENSION", "malformed", "ATSP" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct brkga_tsp t;
        struct gj_error ge = { 0 };
        assert_int_equal(brkga_tsp_parse(bad[i], strlen(bad[i]), &t, &ge), -1);
        if (!strstr(ge.message, needle[i]))
            fail_msg("case %zu: '%s' lacks '%s'", i, ge.message, needle[i]);
    }
}

static void expect_validate(const char *params, const char *needle)
{
    json_error_t je;
    json_t *p = json_loads(params, 0, &je);
    assert_non_null(p);
    struct gj_input inputs[] = { { "network", NULL, 100 }, { "demands", NULL, 100 } };
    struct gj_job job = { "brkga", p, inputs, 2 };
    struct gj_error err;
    memset(&err, 0, sizeof err);
    int rc = gj_kind_brkga.validate(&job, &err);
    json_decref(p);
    if (!needle) {
        if (rc)
            fail_msg("unexpected error %s: %s", err.field, err.message);
        return;
    }
    if (rc == 0 || (!strstr(err.message, needle) && !strstr(err.field, needle)))
        fail_msg("expected '%s', got rc %d '%s' '%s'", needle, rc, err.field, err.message);
}

static void test_validate(void **state)
{
    (void)state;
    expect_validate("{}", NULL);
    expect_validate("{\"elites\":0.6,\"mutants\":0.5}", "leave no room");
    expect_validate("{\"inheritance_prob\":0.5}", "(0.5, 1]");
    expect_validate("{\"inheritance_prob\":1.2}", "(0.5, 1]");
    expect_validate("{\"inheritance_prob\":1.0}", NULL);
    expect_validate("{\"elites\":0}", "elites");
    expect_validate("{\"primary_stop\":\"forever\"}", "primary_stop");
    expect_validate("{\"primary_stop\":\"none\",\"secondary_stop\":\"none\"}", "no stop criterion");
    expect_validate("{\"decoder\":\"tsp\"}", "needs the input 'tsp'");
    expect_validate("{\"sense\":\"maximize\"}", "minimises");
    expect_validate("{\"populations\":0}", "populations");
    expect_validate("{\"initial_chromosomes\":[[0.5, 2]]}", "initial_chromosomes");
    expect_validate("{\"k_paths\":0}", "k_paths");
    expect_validate("{\"max_optical_path_length\":-1}", "max_optical_path_length");
}

/* validate's error names this field (the 422 of issue 11). */
static void expect_field(const char *params, const char *field)
{
    json_error_t je;
    json_t *p = json_loads(params, 0, &je);
    assert_non_null(p);
    struct gj_input inputs[] = { { "network", NULL, 100 }, { "demands", NULL, 100 } };
    struct gj_job job = { "brkga", p, inputs, 2 };
    struct gj_error err;
    memset(&err, 0, sizeof err);
    int rc = gj_kind_validate(&gj_kind_brkga, &job, &err);
    json_decref(p);
    if (rc == 0 || strcmp(err.field, field) != 0 || err.status != 422)
        fail_msg("%s: expected a 422 on '%s', got rc %d, %d on '%s': %s", params, field, rc, err.status,
                 err.field, err.message);
}

/* Issue 11: population x populations is refused at submit, naming the field to change;
 * at run time the same limit names population_size or max_population. */
static void test_population_at_submit(void **state)
{
    (void)state;
    /* 2^22 x 64 individuals exceed 2^29 keys with any problem (3 genes at least) */
    expect_field("{\"population_size\":4194304,\"populations\":64}", "populations");
    expect_field("{\"population_factor\":1000000,\"max_population\":4194304,\"populations\":64}", "populations");
    /* a fixed population: elites and exchanges are exact at submit */
    expect_field("{\"population_size\":2,\"elites\":0.3}", "elites");
    expect_field("{\"population_size\":10,\"populations\":4,\"exchange_interval\":5,\"exchange_count\":3}",
                 "exchange_count");
    expect_validate("{\"population_size\":4194304,\"populations\":32}", NULL);   /* fits 3 genes */
    expect_validate("{\"population_size\":4194304,\"populations\":64,\"elites\":0.1}", "populations");
    /* unknown until the problem is known: p from population_factor at 3 genes would be 1 */
    expect_validate("{\"population_factor\":0.5,\"populations\":64}", NULL);

    struct brkga_cfg c;
    struct brkga_params prm;
    struct gj_error err;
    json_t *p = json_loads("{\"population_size\":4194304}", 0, NULL);
    assert_int_equal(brkga_cfg_read(p, &c, &err), 0);
    assert_int_equal(brkga_params_fill(&c, 5000, &prm, &err), -1);
    assert_string_equal(err.field, "population_size");
    json_decref(p);
    p = json_loads("{\"max_population\":4194304,\"population_factor\":1000}", 0, NULL);
    assert_int_equal(brkga_cfg_read(p, &c, &err), 0);
    assert_int_equal(brkga_params_fill(&c, 5000, &prm, &err), -1);
    assert_string_equal(err.field, "max_population");
    assert_int_equal(brkga_params_fill(&c, 0, &prm, &err), -1);
    json_decref(p);
    p = json_loads("{\"population_factor\":0.1}", 0, NULL);
    assert_int_equal(brkga_cfg_read(p, &c, &err), 0);
    assert_int_equal(brkga_params_fill(&c, 10, &prm, &err), -1);
    assert_string_equal(err.field, "population_factor");
    json_decref(p);
}

/* ---- the kind, end to end, as `gpujobd run` drives it ---- */
static int run_kind(const char *params, struct gj_input *inputs, size_t n, const char *out,
                    struct gj_error *err)
{
    json_error_t je;
    json_t *p = json_loads(params, 0, &je);
    assert_non_null(p);
    struct gj_job job = { "brkga", p, inputs, n };
    memset(err, 0, sizeof *err);
    int rc = gj_kind_brkga.validate(&job, err);
    struct gj_needs needs;
    memset(&needs, 0, sizeof needs);
    if (rc == 0)
        rc = gj_kind_brkga.estimate(&job, &needs, err);
    if (rc == 0) {
        gj_mkdir_p(out, 0755);
        struct gj_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.job = &job;
        ctx.device = GJ_DEVICE_CPU;
        ctx.cpu_threads = 2;
        ctx.output_dir = out;
        ctx.scratch_dir = out;
        rc = gj_kind_brkga.run(&ctx, err);
    }
    json_decref(p);
    return rc;
}

static void set_input(struct gj_input *in, const char *name, const char *file)
{
    in->name = name;
    in->path = data_path(file);
    gj_file_size(in->path, &in->size);
}

static void test_kind_params_xml(void **state)
{
    (void)state;
    char dir[] = "/tmp/brkga-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct gj_input in[3];
    set_input(&in[0], "network", "net14.xml");
    set_input(&in[1], "demands", "dem14.xml");
    set_input(&in[2], "params", "params14.xml");
    struct gj_error err;
    /* Table 6-1 as given (1000 generations, seed 6271412974226616250) with a target of 4 */
    int rc = run_kind("{\"secondary_stop\":\"target\",\"target_value\":4}", in, 3, dir, &err);
    if (rc)
        fail_msg("%s", err.message);
    char path[512], *text;
    size_t len;
    snprintf(path, sizeof path, "%s/result.json", dir);
    assert_int_equal(gj_read_file(path, 1 << 24, &text, &len), 0);
    json_t *r = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(r);
    assert_int_equal(json_integer_value(json_object_get(r, "best_fitness")), 4);
    assert_true(json_is_true(json_object_get(r, "feasible")));
    assert_int_equal(json_integer_value(json_object_get(r, "master_seed")), 6271412974226616250LL);
    assert_int_equal(json_integer_value(json_object_get(r, "population_size")), 20);
    assert_int_equal(json_array_size(json_object_get(r, "virtual_links")), 12);
    json_decref(r);
    const char *files[] = { "results.xml", "statistics.csv", "convergence.svg" };
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        uint64_t sz = 0;
        assert_int_equal(gj_file_size(path, &sz), 0);
        assert_true(sz > 100);
    }
    /* bad Params.xml: deep check at estimate/run */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad_params.xml", dir);
    const char *x = "<Params sense=\"minimize\"><Etnia><InheritanceProb>0.3</InheritanceProb></Etnia></Params>";
    gj_write_file(bad, x, strlen(x));
    in[2].path = bad;
    rc = run_kind("{}", in, 3, dir, &err);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err.message, "inheritance_prob"));
    x = "<Params><Etnia><Elites>0.3</Elites>";
    gj_write_file(bad, x, strlen(x));
    rc = run_kind("{}", in, 3, dir, &err);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err.message, "malformed XML"));
    gj_rm_rf(dir);
}

static void test_kind_unroutable(void **state)
{
    (void)state;
    char dir[] = "/tmp/brkga-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    /* two optical islands: A2 cannot reach any transit node */
    const char *net = "<Network totalBWPerLink=\"100\">"
        "<Node type=\"source\" name=\"A1\" location=\"X1\"/><Node type=\"source\" name=\"A2\" location=\"X3\"/>"
        "<Node type=\"transit\" name=\"T1\" location=\"X2\"/>"
        "<Node type=\"core\" name=\"X1\"/><Node type=\"core\" name=\"X2\"/><Node type=\"core\" name=\"X3\"/>"
        "<Node type=\"core\" name=\"X4\"/>"
        "<Edge A=\"X1\" B=\"X2\" distance=\"1\"/><Edge A=\"X3\" B=\"X4\" distance=\"1\"/></Network>";
    char np[600], dp[600];
    snprintf(np, sizeof np, "%s/n.xml", dir);
    snprintf(dp, sizeof dp, "%s/d.xml", dir);
    gj_write_file(np, net, strlen(net));
    gj_write_file(dp, DEM_OK, strlen(DEM_OK));
    struct gj_input in[2] = { { "network", np, strlen(net) }, { "demands", dp, strlen(DEM_OK) } };
    char out[600];
    snprintf(out, sizeof out, "%s/out", dir);
    struct gj_error err;
    int rc = run_kind("{\"seed\":3}", in, 2, out, &err);
    if (rc)
        fail_msg("%s", err.message);
    char path[700], *text;
    size_t len;
    snprintf(path, sizeof path, "%s/result.json", out);
    assert_int_equal(gj_read_file(path, 1 << 24, &text, &len), 0);
    json_t *r = json_loads(text, 0, NULL);
    free(text);
    assert_true(json_is_false(json_object_get(r, "feasible")));
    assert_int_equal(json_array_size(json_object_get(r, "unroutable_demands")), 1);
    assert_non_null(strstr(json_string_value(json_object_get(r, "message")), "no path"));
    json_decref(r);
    /* capacity too small for a 100G demand: infeasible result, said so */
    const char *dem = "<Traffic><Demand source=\"A1\" destination=\"A2\" bw=\"100G\"/></Traffic>";
    const char *net2 = "<Network totalBWPerLink=\"40\">"
        "<Node type=\"source\" name=\"A1\" location=\"X1\"/><Node type=\"source\" name=\"A2\" location=\"X3\"/>"
        "<Node type=\"transit\" name=\"T1\" location=\"X2\"/>"
        "<Node type=\"core\" name=\"X1\"/><Node type=\"core\" name=\"X2\"/><Node type=\"core\" name=\"X3\"/>"
        "<Edge A=\"X1\" B=\"X2\" distance=\"1\"/><Edge A=\"X3\" B=\"X2\" distance=\"1\"/></Network>";
    gj_write_file(np, net2, strlen(net2));
    gj_write_file(dp, dem, strlen(dem));
    in[0].size = strlen(net2);
    in[1].size = strlen(dem);
    rc = run_kind("{\"seed\":3,\"max_generations\":5}", in, 2, out, &err);
    if (rc)
        fail_msg("%s", err.message);
    assert_int_equal(gj_read_file(path, 1 << 24, &text, &len), 0);
    r = json_loads(text, 0, NULL);
    free(text);
    assert_true(json_is_false(json_object_get(r, "feasible")));
    assert_true(json_is_null(json_object_get(r, "best_fitness")));
    json_decref(r);
    gj_rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_kat),
        cmocka_unit_test(test_precompute_14),
        cmocka_unit_test(test_decoder_thesis_answer),
        cmocka_unit_test(test_engine_sense_and_stops),
        cmocka_unit_test(test_engine_cancel),
        cmocka_unit_test(test_engine_cancel_mid_generation),
        cmocka_unit_test(test_section61_reaches_4),
        cmocka_unit_test(test_chapter5_reaches_3),
        cmocka_unit_test(test_reproducible_threads),
        cmocka_unit_test(test_tsp_distances),
        cmocka_unit_test(test_tsp_optima_2opt),
        cmocka_unit_test(test_tsp_plain_gap_reported),
        cmocka_unit_test(test_tsp_reproducible_threads),
        cmocka_unit_test(test_tsp_small_exact),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_tsp_bad_input),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_population_at_submit),
        cmocka_unit_test(test_kind_params_xml),
        cmocka_unit_test(test_kind_unroutable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
