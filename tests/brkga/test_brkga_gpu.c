/*
 * test_brkga_gpu.c — suite 'gpu': the GPU backend yields the same fitness history
 * (best and mean of every generation, bit for bit) and the same best chromosome as
 * the CPU backend over 200 generations of the network decoder, on the section 6.1
 * instance and on the benchmark's generated instance, with several populations,
 * exchange and reset. Exits 77 (skipped) without a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gj_config.h"
#include "common/fsutil.h"
#include "brkga/brkga_engine.h"
#include "brkga/brkga_gpu.h"
#include "brkga/brkga_kind.h"
#include "brkga/brkga_net.h"


static int build(struct brkga_net *net, const char *nt, size_t nl, const char *dt, size_t dl,
                 int max_at, int k)
{
    struct brkga_net_input in;
    memset(&in, 0, sizeof in);
    struct gj_error ge = { 0 };
    if (brkga_net_parse_network(nt, nl, &in, &ge) ||
        brkga_net_parse_demands(dt, dl, &in, &ge) ||
        brkga_net_build(net, &in, max_at, k, 0, NULL, &ge)) {
        fprintf(stderr, "instance: %s\n", ge.message);
        brkga_net_input_free(&in);
        return -1;
    }
    return 0;
}

static int compare(struct brkga_net *net, size_t p, int K, long generations, const char *what)
{
    struct brkga_decoder dec = { (size_t)(net->m.n_vlinks + net->m.n_demands),
                                 brkga_net_scratch_bytes(&net->m), &net->m, brkga_net_decode_cb, 1 };
    struct brkga_params prm;
    memset(&prm, 0, sizeof prm);
    prm.n = dec.n_genes;
    prm.p = p;
    prm.ne = p * 3 / 10;
    prm.nm = p / 5;
    prm.rhoe = 0.65;
    prm.K = K;
    prm.exchange_interval = 10;
    prm.exchange_count = 2;
    prm.reset_after = 25;
    prm.primary = BRKGA_STOP_GENERATIONS;
    prm.secondary = BRKGA_STOP_NONE;
    prm.max_generations = generations;
    prm.seed = 6271412974226616250ull;
    prm.threads = 2;
    prm.stats_interval = 50;
    struct brkga_result rc, rg;
    struct gj_error ge = { 0 };
    prm.device = -1;
    if (brkga_solve(&prm, &dec, NULL, &rc, &ge)) {
        fprintf(stderr, "%s: cpu: %s\n", what, ge.message);
        return -1;
    }
    prm.device = 0;
    if (brkga_solve(&prm, &dec, NULL, &rg, &ge)) {
        fprintf(stderr, "%s: gpu: %s\n", what, ge.message);
        brkga_result_free(&rc);
        return -1;
    }
    int bad = rc.n_hist != rg.n_hist;
    for (size_t i = 0; !bad && i < rc.n_hist; i++) {
        if (memcmp(&rc.hist_best[i], &rg.hist_best[i], sizeof(double)) ||
            memcmp(&rc.hist_mean[i], &rg.hist_mean[i], sizeof(double))) {
            fprintf(stderr, "%s: generation %zu: cpu best %.17g mean %.17g, gpu best %.17g mean %.17g\n",
                    what, i, rc.hist_best[i], rc.hist_mean[i], rg.hist_best[i], rg.hist_mean[i]);
            bad = 1;
        }
    }
    if (!bad && memcmp(rc.best_keys, rg.best_keys, prm.n * sizeof(float))) {
        fprintf(stderr, "%s: best chromosomes differ\n", what);
        bad = 1;
    }
    printf("%s: %s over %zu generations (best %g; cpu decode %.3f s, gpu decode %.3f s)\n", what,
           bad ? "DIFFERENT" : "identical", rc.n_hist - 1, rc.best, rc.t_decode, rg.t_decode);
    brkga_result_free(&rc);
    brkga_result_free(&rg);
    return bad ? -1 : 0;
}

int main(void)
{
    if (brkga_gpu_device_count() <= 0) {
        printf("no GPU: skipped\n");
        return 77;
    }
    int fails = 0;
    char *nt, *dt;
    size_t nl, dl;
    /* the instance under $GJ_SOURCE_ROOT (the test environment sets it), else the working
     * directory: no path of the build machine is compiled in (the device kit carries this) */
    const char *root = getenv("GJ_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/brkga/data/net14.xml", root ? root : ".");
    if (gj_read_file(path, 1 << 20, &nt, &nl))
        return 1;
    snprintf(path, sizeof path, "%s/tests/brkga/data/dem14.xml", root ? root : ".");
    if (gj_read_file(path, 1 << 20, &dt, &dl))
        return 1;
    struct brkga_net net;
    if (build(&net, nt, nl, dt, dl, 2, 20))
        return 1;
    fails += compare(&net, 40, 3, 200, "section 6.1") != 0;
    brkga_net_free(&net);
    free(nt);
    free(dt);
    /* GJ_TEST_STOP_AT_FAILURE: stop at the first failure (the gpu-emu mutation checks) */
    const char *stop = getenv("GJ_TEST_STOP_AT_FAILURE");
    if (fails && stop && *stop == '1')
        return 1;
    if (brkga_bench_instance(30, 10, 20, 200, 4000, 7, &nt, &dt))
        return 1;
    if (build(&net, nt, strlen(nt), dt, strlen(dt), 3, 20))
        return 1;
    /* GJ_TEST_BRKGA_GENERATIONS: fewer generations of the large instance (the gpu-emu suite,
     * where every thread of the GPU runs on one core; still past exchanges and resets) */
    const char *gens = getenv("GJ_TEST_BRKGA_GENERATIONS");
    long ng = gens && atol(gens) > 0 ? atol(gens) : 200;
    fails += compare(&net, 1024, 2, ng, "generated 30/10/20, 200 demands") != 0;
    brkga_net_free(&net);
    free(nt);
    free(dt);
    return fails ? 1 : 0;
}
