/*
 * brkga_bench.c — `gpujobd bench brkga [--quick] [--threads N] [--generations G]`:
 * network-decoder decodes/s and generations/s for populations 1024..16384 on a
 * generated instance (30 optical, 10 transit, 20 access nodes, 200 demands, K = 20
 * routes), on the CPU (all cores, and one core for the ratio) and on the GPU when
 * one is present; then TSP decodes/s (52 random cities, with and without 2-opt).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "brkga/brkga_gpu.h"
#include "brkga/brkga_kind.h"
#include "brkga/brkga_rng.h"

static uint32_t rnd(uint64_t seed, uint32_t i, uint32_t j)
{
    return brkga_philox(seed, i, j, 0x6e6574u, 0).w[0];
}

/* Core nodes around a circle with jitter; a ring plus chords keeps it connected. */
static int core_ring(json_t *nodes, json_t *edges, int n_core, uint64_t seed)
{
    double *x = malloc((size_t)n_core * sizeof *x), *y = malloc((size_t)n_core * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return -1;
    }
    char name[32], other[32];
    for (int i = 0; i < n_core; i++) {
        double ang = 2 * M_PI * i / n_core;
        double r = 400 + (double)(rnd(seed, 1, (uint32_t)i) % 200);
        x[i] = 500 + r * cos(ang);
        y[i] = 500 + r * sin(ang);
        snprintf(name, sizeof name, "X%d", i + 1);
        json_array_append_new(nodes, json_pack("{s:s,s:s}", "name", name, "type", "core"));
    }
    for (int i = 0; i < n_core; i++) {
        int j = (i + 1) % n_core;
        snprintf(name, sizeof name, "X%d", i + 1);
        snprintf(other, sizeof other, "X%d", j + 1);
        json_array_append_new(edges, json_pack("{s:s,s:s,s:i}", "a", name, "b", other, "distance",
                                               (int)(hypot(x[i] - x[j], y[i] - y[j]) + 0.5)));
        /* one chord to a node a few steps across */
        int k = (i + 3 + (int)(rnd(seed, 2, (uint32_t)i) % (uint32_t)(n_core / 2))) % n_core;
        if (i % 2 == 0 && k != i && k != j && (k + 1) % n_core != i) {
            snprintf(other, sizeof other, "X%d", k + 1);
            json_array_append_new(edges, json_pack("{s:s,s:s,s:i}", "a", name, "b", other, "distance",
                                                   (int)(hypot(x[i] - x[k], y[i] - y[k]) + 0.5)));
        }
    }
    free(x);
    free(y);
    return 0;
}

/* Transit nodes spread over the core ring, access nodes at random core nodes. */
static void mpls_nodes(json_t *nodes, int n_core, int n_transit, int n_access, uint64_t seed)
{
    char name[32], other[32];
    for (int t = 0; t < n_transit; t++) {
        snprintf(name, sizeof name, "T%d", t + 1);
        snprintf(other, sizeof other, "X%d", (t * n_core) / n_transit + 1);
        json_array_append_new(nodes, json_pack("{s:s,s:s,s:s}", "name", name, "type", "transit",
                                               "location", other));
    }
    for (int a = 0; a < n_access; a++) {
        snprintf(name, sizeof name, "A%d", a + 1);
        snprintf(other, sizeof other, "X%u", rnd(seed, 3, (uint32_t)a) % (uint32_t)n_core + 1);
        json_array_append_new(nodes, json_pack("{s:s,s:s,s:s}", "name", name, "type", "source",
                                               "location", other));
    }
}

/* Demands between two different random access nodes. */
static json_t *demands_json(int n_access, int n_demands, uint64_t seed)
{
    static const char *const bws[] = { "1G", "10G", "40G", "100G" };
    char name[32], other[32];
    json_t *dl = json_array();
    for (int d = 0; d < n_demands; d++) {
        uint32_t s = rnd(seed, 4, (uint32_t)d) % (uint32_t)n_access;
        uint32_t t = (s + 1 + rnd(seed, 5, (uint32_t)d) % (uint32_t)(n_access - 1)) % (uint32_t)n_access;
        snprintf(name, sizeof name, "A%u", s + 1);
        snprintf(other, sizeof other, "A%u", t + 1);
        json_array_append_new(dl, json_pack("{s:s,s:s,s:s}", "source", name, "destination", other,
                                            "bw", bws[rnd(seed, 6, (uint32_t)d) % 4]));
    }
    return json_pack("{s:o}", "demands", dl);
}

/* Builds the generated instance as JSON text (it goes through the same parsers). */
int brkga_bench_instance(int n_core, int n_transit, int n_access, int n_demands, long capacity,
                         uint64_t seed, char **net_json, char **dem_json)
{
    json_t *nodes = json_array(), *edges = json_array();
    *net_json = *dem_json = NULL;
    if (!nodes || !edges || core_ring(nodes, edges, n_core, seed)) {
        json_decref(nodes);
        json_decref(edges);
        return -1;
    }
    mpls_nodes(nodes, n_core, n_transit, n_access, seed);
    json_t *net = json_pack("{s:I,s:o,s:o}", "total_bw_per_link", (json_int_t)capacity, "nodes", nodes,
                            "edges", edges);
    json_t *dem = demands_json(n_access, n_demands, seed);
    if (net && dem) {
        *net_json = json_dumps(net, JSON_COMPACT);
        *dem_json = json_dumps(dem, JSON_COMPACT);
    }
    json_decref(net);
    json_decref(dem);
    if (*net_json && *dem_json)
        return 0;
    free(*net_json);
    free(*dem_json);
    *net_json = *dem_json = NULL;
    return -1;
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* dpc: decodes per CPU-second of the whole process (robust to a loaded machine) */
static int bench_run(const struct brkga_decoder *dec, size_t p, int threads, int device, long gens,
                     double *dps, double *gps, double *best, double *dpc)
{
    struct brkga_params prm;
    memset(&prm, 0, sizeof prm);
    prm.n = dec->n_genes;
    prm.p = p;
    prm.ne = (size_t)(0.3 * (double)p);
    prm.nm = (size_t)(0.2 * (double)p);
    prm.rhoe = 0.65;
    prm.K = 1;
    prm.primary = BRKGA_STOP_GENERATIONS;
    prm.secondary = BRKGA_STOP_NONE;
    prm.max_generations = gens;
    prm.seed = 12345;
    prm.threads = threads;
    prm.stats_interval = 1000000;
    prm.device = device;
    struct brkga_result res;
    struct gj_error err = { 0 };
    double c0 = cpu_seconds();
    if (brkga_solve(&prm, dec, NULL, &res, &err)) {
        fprintf(stderr, "bench brkga: %s\n", err.message);
        return -1;
    }
    double cpu = cpu_seconds() - c0;
    *dpc = (double)res.decodes / (cpu > 0 ? cpu : 1e-9);
    long evolved = res.decodes - (long)p;
    double t_gen = res.elapsed_s - res.t_init;
    /* decodes/s over the whole run: initial population included, decode phase only */
    *dps = (double)res.decodes / (res.t_decode > 0 ? res.t_decode : 1e-9);
    *gps = t_gen > 0 ? (double)gens / t_gen : 0;
    *best = res.best;
    (void)evolved;
    brkga_result_free(&res);
    return 0;
}

struct bench_opts { int quick, threads; long gens; };

static int bench_args(int argc, char **argv, struct bench_opts *o)
{
    static const struct option opts[] = {
        { "quick", no_argument, NULL, 'q' },
        { "threads", required_argument, NULL, 't' },
        { "generations", required_argument, NULL, 'g' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    o->quick = 0;
    o->threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    o->gens = 3;
    optind = 1;
    while ((c = getopt_long(argc, argv, "qt:g:", opts, NULL)) != -1) {
        switch (c) {
        case 'q': o->quick = 1; break;
        case 't': o->threads = atoi(optarg); break;
        case 'g': o->gens = atol(optarg); break;
        default:
            fprintf(stderr, "usage: gpujobd bench brkga [--quick] [--threads N] [--generations G]\n");
            return -1;
        }
    }
    if (o->threads < 1)
        o->threads = 1;
    if (o->gens < 1)
        o->gens = 1;
    return 0;
}

static void print_host(int threads, int ngpu)
{
    struct utsname u;
    uname(&u);
    char cpu[256] = "unknown CPU";
    FILE *ci = fopen("/proc/cpuinfo", "r");
    if (ci) {
        char line[512];
        while (fgets(line, sizeof line, ci))
            if (!strncmp(line, "model name", 10)) {
                char *col = strchr(line, ':');
                if (col) {
                    snprintf(cpu, sizeof cpu, "%s", col + 2);
                    cpu[strcspn(cpu, "\n")] = 0;
                }
                break;
            }
        fclose(ci);
    }
    printf("# gpujobd bench brkga\n# host: %s %s, %s, %ld online cores; threads used: %d; GPUs: %d\n",
           u.sysname, u.machine, cpu, sysconf(_SC_NPROCESSORS_ONLN), threads, ngpu);
}

/* The generated instance through the parsers and the pre-computation. */
static int bench_network(struct brkga_net *net, double *t_pre)
{
    char *nj = NULL, *dj = NULL;
    struct gj_error err = { 0 };
    if (brkga_bench_instance(30, 10, 20, 200, 4000, 7, &nj, &dj)) {
        fprintf(stderr, "bench brkga: cannot generate the instance\n");
        return -1;
    }
    struct brkga_net_input in;
    memset(&in, 0, sizeof in);
    int rc = brkga_net_parse_network(nj, strlen(nj), &in, &err) || brkga_net_parse_demands(dj, strlen(dj), &in, &err);
    free(nj);
    free(dj);
    if (rc) {
        fprintf(stderr, "bench brkga: %s\n", err.message);
        brkga_net_input_free(&in);
        return -1;
    }
    double t0 = brkga_now();
    if (brkga_net_build(net, &in, 3, 20, 0, NULL, &err)) {
        fprintf(stderr, "bench brkga: %s\n", err.message);
        return -1;
    }
    *t_pre = brkga_now() - t0;
    return 0;
}

static void network_points(const struct brkga_decoder *dec, const struct bench_opts *o, int ngpu)
{
    size_t pops[] = { 1024, 2048, 4096, 8192, 16384 };
    size_t npop = o->quick ? 2 : 5;
    double cpu1 = 0, cpuN = 0;
    for (size_t i = 0; i < npop; i++) {
        double dps, gps, best, dpc;
        if (bench_run(dec, pops[i], o->threads, -1, o->gens, &dps, &gps, &best, &dpc) == 0) {
            char dev[32];
            snprintf(dev, sizeof dev, "cpu x%d", o->threads);
            printf("%-8s %-10s %8zu %14.0f %14.0f %14.3f %12g\n", "network", dev, pops[i], dps, dpc, gps, best);
            if (i == 0)
                cpuN = dps;
        }
        if (ngpu > 0 && bench_run(dec, pops[i], o->threads, 0, o->gens, &dps, &gps, &best, &dpc) == 0)
            printf("%-8s %-10s %8zu %14.0f %14s %14.3f %12g\n", "network", "gpu 0", pops[i], dps, "-", gps, best);
    }
    if (o->threads > 1) {
        double dps, gps, best, dpc;
        if (bench_run(dec, 1024, 1, -1, o->gens, &dps, &gps, &best, &dpc) == 0) {
            printf("%-8s %-10s %8d %14.0f %14.0f %14.3f %12g\n", "network", "cpu x1", 1024, dps, dpc, gps, best);
            cpu1 = dps;
            printf("# CPU scaling at p = 1024: %.2fx with %d threads over 1 thread\n",
                   cpu1 > 0 ? cpuN / cpu1 : 0, o->threads);
        }
    }
}

/* TSP: 52 random cities, without and with 2-opt. */
static int tsp_points(const struct bench_opts *o)
{
    struct brkga_tsp tsp;
    struct gj_error err = { 0 };
    char tsptext[4096];
    int off = snprintf(tsptext, sizeof tsptext, "NAME: rand52\nTYPE: TSP\nDIMENSION: 52\n"
                       "EDGE_WEIGHT_TYPE: EUC_2D\nNODE_COORD_SECTION\n");
    for (int i = 0; i < 52; i++)
        off += snprintf(tsptext + off, sizeof tsptext - (size_t)off, "%d %u %u\n", i + 1,
                        rnd(99, 7, (uint32_t)i) % 1000, rnd(99, 8, (uint32_t)i) % 1000);
    snprintf(tsptext + off, sizeof tsptext - (size_t)off, "EOF\n");
    if (brkga_tsp_parse(tsptext, strlen(tsptext), &tsp, &err)) {
        fprintf(stderr, "bench brkga: %s\n", err.message);
        return -1;
    }
    for (int ls = 0; ls < 2; ls++) {
        tsp.local_search = ls;
        struct brkga_decoder td = { 52, brkga_tsp_scratch_bytes(&tsp), &tsp, brkga_tsp_decode_cb, 0 };
        double dps, gps, best, dpc;
        char dev[32];
        snprintf(dev, sizeof dev, "cpu x%d", o->threads);
        if (bench_run(&td, 1024, o->threads, -1, o->gens * 5, &dps, &gps, &best, &dpc) == 0)
            printf("%-8s %-10s %8d %14.0f %14.0f %14.3f %12g\n", ls ? "tsp+2opt" : "tsp", dev, 1024, dps,
                   dpc, gps, best);
    }
    brkga_tsp_free(&tsp);
    return 0;
}

int gj_bench_brkga_main(int argc, char **argv)
{
    struct bench_opts o;
    if (bench_args(argc, argv, &o))
        return 2;
    int ngpu = brkga_gpu_device_count();
    print_host(o.threads, ngpu);
    struct brkga_net net;
    double t_pre;
    if (bench_network(&net, &t_pre))
        return 1;
    struct brkga_decoder dec = { (size_t)(net.m.n_vlinks + net.m.n_demands),
                                 brkga_net_scratch_bytes(&net.m), &net.m, brkga_net_decode_cb, 1 };
    printf("# network instance: 30 optical, 10 transit, 20 access nodes, 200 demands, K = 20: "
           "%d virtual links, %d optical links, %d candidate routes, %zu genes; pre-computation "
           "%.3f s\n", net.m.n_vlinks, net.m.n_olinks, net.m.n_routes, dec.n_genes, t_pre);
    printf("# %ld generations per point (elites 0.3, mutants 0.2); decodes/s = chromosomes decoded / "
           "decode-phase seconds\n", o.gens);
    printf("# decodes/cpu-s = all decodes / process CPU seconds (whole run): per-core throughput,\n"
           "# not distorted by other load on the machine\n");
    printf("%-8s %-10s %8s %14s %14s %14s %12s\n", "decoder", "device", "p", "decodes/s",
           "decodes/cpu-s", "generations/s", "best");
    network_points(&dec, &o, ngpu);
    brkga_net_free(&net);
    return tsp_points(&o) ? 1 : 0;
}
