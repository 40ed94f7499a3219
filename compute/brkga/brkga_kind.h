/* brkga_kind.h — internals of the brkga kind shared by the kind, the outputs and the bench. */
#ifndef BRKGA_KIND_H
#define BRKGA_KIND_H

#include <jansson.h>

#include "common/gj_kind.h"
#include "common/gj_poll.h"
#include "brkga/brkga_engine.h"
#include "brkga/brkga_net.h"
#include "brkga/brkga_tsp.h"

struct brkga_cfg {
    int tsp, maximize;
    double pop_factor;
    long max_pop, pop_size;
    double elites, mutants, rhoe;
    int primary, secondary;
    long max_gens, max_stall_gens;
    double max_time, max_stall_time, target;
    int have_target;
    uint64_t seed;
    int have_seed;
    int K, xint, xcount, reset_after;
    int max_at, kpaths;
    double max_olen;
    int local_search;
    double known_opt;
    int have_known_opt;
    int stats_interval;
    double time_limit;
    int threads;
    json_t *initial;          /* borrowed */
};

struct brkga_problem {
    int tsp_mode, have_net;
    struct brkga_net net;
    struct brkga_tsp tsp;
    struct brkga_decoder dec;
};

/* brkga_params.c: the job's JSON params; Params.xml as the same JSON names (NULL with
 * err, field "params"). */
int brkga_cfg_read(json_t *params, struct brkga_cfg *c, struct gj_error *err);
json_t *brkga_params_xml(const char *text, size_t len, struct gj_error *err);
/* Reads the inputs and builds the problem; poll (may be NULL) sees the pre-computation.
 * 0, -1 with err, or 1 when poll saw a cancel. */
int brkga_problem_load(const struct gj_job *job, const struct brkga_cfg *c, struct brkga_problem *pb,
                       struct gj_poll *poll, struct gj_error *err);
void brkga_problem_free(struct brkga_problem *pb);
int brkga_params_fill(const struct brkga_cfg *c, size_t n, struct brkga_params *prm,
                      struct gj_error *err);

/* Writes result.json, results.xml (network), statistics.csv and convergence.svg.
 * res NULL: no run happened (note says why, e.g. "unroutable"). */
int brkga_write_outputs(const char *dir, const struct brkga_cfg *c, const struct brkga_params *prm,
                        struct brkga_problem *pb, const struct brkga_result *res, const char *note,
                        struct gj_error *err);

int gj_bench_brkga_main(int argc, char **argv);
/* The benchmark's generated network instance as JSON text (network, demands; caller
 * frees both): n_core optical nodes on a ring with chords, transit and access nodes
 * located at them, n_demands random demands. 0 or -1. */
int brkga_bench_instance(int n_core, int n_transit, int n_access, int n_demands, long capacity,
                         uint64_t seed, char **net_json, char **dem_json);

#endif
