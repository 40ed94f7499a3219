/*
 * brkga_engine.h — the biased random-key genetic algorithm of seed 002, chapter 2
 * (elites copied unchanged and never decoded again, mutants, biased crossover of an
 * elite and a non-elite parent), with brkgaAPI's extensions: K independent
 * populations, exchange of the best M every X generations, reset after stalls,
 * initial chromosomes. Stop criteria as the thesis: a primary and a secondary
 * criterion; the run stops when either holds (plus a hard time limit and cancel).
 *
 * Every random draw is Philox keyed by (seed; gene, individual, generation,
 * population), ranking breaks ties by slot index, and decoding is a pure function
 * of a chromosome: the fitness history is the same for any thread count and on
 * the GPU backend.
 */
#ifndef BRKGA_ENGINE_H
#define BRKGA_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/gj_error.h"

enum brkga_stop {
    BRKGA_STOP_NONE = -1,
    BRKGA_STOP_GENERATIONS = 1,       /* max_generations reached */
    BRKGA_STOP_INCUMBENT = 2,         /* max_generations_without_improvement */
    BRKGA_STOP_TIME = 3,              /* max_time_s elapsed */
    BRKGA_STOP_INCUMBENT_TIME = 4,    /* max_time_without_improvement_s */
    BRKGA_STOP_OPTIMAL = 5,           /* target_value reached */
    BRKGA_STOP_HARD_LIMIT = 100,      /* service safety limit (time_limit_s) */
    BRKGA_STOP_CANCELLED = 101,
};
const char *brkga_stop_name(int stop);
int brkga_stop_parse(const char *name);   /* also accepts the thesis's XML names; -2 unknown */

/* Decoder: maps keys to a fitness. It may rewrite keys (local search write-back).
 * scratch is scratch_bytes of private memory (one per thread). Must be pure. */
struct brkga_decoder {
    size_t n_genes;
    size_t scratch_bytes;
    void *ctx;
    double (*decode)(void *ctx, float *keys, void *scratch);
    int gpu_network;          /* 1: ctx is a struct brkga_net_model, which the GPU backend decodes */
};

struct brkga_params {
    int maximize;
    size_t n;                 /* genes */
    size_t p;                 /* individuals per population */
    size_t ne, nm;            /* elites, mutants per population */
    double rhoe;              /* inheritance probability, (0.5, 1] */
    int K;                    /* populations */
    int exchange_interval, exchange_count;
    int reset_after;          /* generations without improvement before a reset; 0 never */
    int primary, secondary;   /* enum brkga_stop */
    long max_generations, max_stall_generations;
    double max_time_s, max_stall_time_s, target;
    double hard_time_limit_s; /* always applied; 0 none */
    uint64_t seed;
    int threads;
    int stats_interval;       /* generations between rows of statistics */
    const float *initial;     /* n_initial chromosomes of n keys, put into population 0 */
    size_t n_initial;
    int device;               /* -1 CPU, else a CUDA device */
};

/* One row of statistics (the thesis's Statistics.csv, with times per phase). */
struct brkga_stat_row {
    long generation, stall_generations;
    double elapsed_s, since_update_s, best, mean;
    int terminate;
    double t_init, t_evolve, t_decode, t_sort, t_exchange;   /* cumulative seconds */
    long decodes;
};

struct brkga_result {
    double best;
    float *best_keys;         /* n keys of the incumbent (caller frees via brkga_result_free) */
    long generations;
    long decodes;
    int stop_reason;
    double elapsed_s;
    int resets, exchanges;
    /* per generation (index 0 = initial population) */
    double *hist_best, *hist_mean;
    size_t n_hist;
    struct brkga_stat_row *rows;
    size_t n_rows;
    double t_init, t_evolve, t_decode, t_sort, t_exchange;
};

struct brkga_hooks {
    void *ctx;
    int (*cancelled)(void *ctx);
    void (*progress)(void *ctx, double fraction, const char *message);
};

/* Sizes the engine takes: genes per chromosome, individuals in all populations, and
 * keys in all populations (two generations of them are held: 4 GiB at the limit). */
#define BRKGA_MAX_GENES (1u << 24)
#define BRKGA_MAX_INDIVIDUALS (1u << 30)
#define BRKGA_MAX_KEYS (1ull << 29)

/* Fitness of an infeasible solution (minimisation); decoders return at least this. */
#define BRKGA_INFEASIBLE 1e15

/* Runs the algorithm. 0 or -1 with err. */
int brkga_solve(const struct brkga_params *prm, const struct brkga_decoder *dec,
                const struct brkga_hooks *hooks, struct brkga_result *res, struct gj_error *err);
void brkga_result_free(struct brkga_result *res);

/* Checks the population arithmetic; 0 or -1 with err, whose field names the param to
 * change (population_size, elites, mutants, inheritance_prob, populations, exchange_count). */
int brkga_check_params(const struct brkga_params *prm, struct gj_error *err);

/* Monotonic seconds. */
double brkga_now(void);

/* ---- backend interface (the CPU one is in brkga_engine.c, the GPU one in
 * brkga_gpu.cu); the generation loop in brkga_solve drives either. ---- */
struct brkga_backend {
    void *st;
    /* Fills all populations with keys of word `word` (0 initial, 2 reset) at gen,
     * places initial chromosomes (when given), decodes and ranks. init and evolve
     * return 0, -1 (error, err set) or 1 (cancelled part-way: state unusable). */
    int (*init)(void *st, uint32_t gen, int word, const float *initial, size_t n_initial);
    /* One generation of every population: elites, crossover, mutants, decode, rank. */
    int (*evolve)(void *st, uint32_t gen);
    /* Best M of each population into the worst slots of the others; re-rank. */
    int (*exchange)(void *st, int M);
    /* Ranked fitness of every population: out[k*p + r] = fitness of rank r. */
    int (*fitness)(void *st, double *out);
    /* Keys of population k, rank r. */
    int (*keys)(void *st, int k, size_t r, float *out);
    void (*times)(void *st, double *t_evolve, double *t_decode, double *t_sort);
    void (*destroy)(void *st);
    struct gj_error err;      /* why the last call failed */
};

int brkga_cpu_backend(const struct brkga_params *prm, const struct brkga_decoder *dec,
                      const struct brkga_hooks *hooks, struct brkga_backend *be);

#ifdef __cplusplus
}
#endif

#endif
