/*
 * brkga_engine.c — the generation loop of the engine: stop criteria, statistics,
 * reset and exchange, over a backend (brkga_cpu.c, or kernels/brkga on a GPU).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gj_poll.h"
#include "brkga/brkga_engine.h"
#include "brkga/brkga_gpu.h"

double brkga_now(void)
{
    return gj_now();
}

static const struct { int id; const char *name, *xml; } stop_names[] = {
    { BRKGA_STOP_NONE, "none", "None" },
    { BRKGA_STOP_GENERATIONS, "generations", "Generations" },
    { BRKGA_STOP_INCUMBENT, "generations_without_improvement", "NonUpdatedIncumbent" },
    { BRKGA_STOP_TIME, "time", "Time" },
    { BRKGA_STOP_INCUMBENT_TIME, "time_without_improvement", "NonUpdatedTime" },
    { BRKGA_STOP_OPTIMAL, "target", "Optimal" },
    { BRKGA_STOP_HARD_LIMIT, "time_limit", "TimeLimit" },
    { BRKGA_STOP_CANCELLED, "cancelled", "Cancelled" },
};

const char *brkga_stop_name(int stop)
{
    for (size_t i = 0; i < sizeof stop_names / sizeof stop_names[0]; i++)
        if (stop_names[i].id == stop)
            return stop_names[i].name;
    return "unknown";
}

int brkga_stop_parse(const char *name)
{
    for (size_t i = 0; i < sizeof stop_names / sizeof stop_names[0]; i++)
        if (stop_names[i].id < 100 && (strcmp(name, stop_names[i].name) == 0 ||
                                       strcmp(name, stop_names[i].xml) == 0))
            return stop_names[i].id;
    /* other spellings of the thesis's enumeration */
    if (!strcmp(name, "Incumbent") || !strcmp(name, "NonUpdatedIncumbentGenerations"))
        return BRKGA_STOP_INCUMBENT;
    if (!strcmp(name, "IncumbentTime") || !strcmp(name, "NonUpdatedIncumbentTime") ||
        !strcmp(name, "TimeNonUpdated"))
        return BRKGA_STOP_INCUMBENT_TIME;
    return -2;
}

/* The population arithmetic, with the param to change named in err->field. */
int brkga_check_params(const struct brkga_params *prm, struct gj_error *err)
{
    if (prm->n < 1)
        return gj_error_set(err, "", "the problem has no genes");
    if (prm->p < 2)
        return gj_error_set(err, "population_size", "population of %zu individuals: at least 2 are "
                            "needed", prm->p);
    if (prm->ne < 1)
        return gj_error_set(err, "elites", "population of %zu individuals leaves no elite: raise "
                            "elites or the population", prm->p);
    if (prm->ne + prm->nm >= prm->p)
        return gj_error_set(err, "mutants", "elites (%zu) + mutants (%zu) must be fewer than the "
                            "population (%zu)", prm->ne, prm->nm, prm->p);
    if (!(prm->rhoe > 0.5 && prm->rhoe <= 1.0))
        return gj_error_set(err, "inheritance_prob", "inheritance_prob %g is outside (0.5, 1]", prm->rhoe);
    if (prm->K < 1)
        return gj_error_set(err, "populations", "populations must be at least 1");
    if (prm->K > 1 && prm->exchange_interval > 0 &&
        (size_t)prm->exchange_count * (size_t)(prm->K - 1) > prm->p - prm->ne)
        return gj_error_set(err, "exchange_count", "exchange_count x (populations - 1) = %zu exceeds "
                            "the non-elite slots (%zu)", (size_t)prm->exchange_count * (size_t)(prm->K - 1),
                            prm->p - prm->ne);
    const char *size_field = prm->K > 1 ? "populations" : "population_size";
    if (prm->n > BRKGA_MAX_GENES)
        return gj_error_set(err, "", "%zu genes: at most %u", prm->n, BRKGA_MAX_GENES);
    if ((uint64_t)prm->p * (uint64_t)prm->K > BRKGA_MAX_INDIVIDUALS)
        return gj_error_set(err, size_field, "%d population(s) of %zu: at most %u individuals in all",
                            prm->K, prm->p, BRKGA_MAX_INDIVIDUALS);
    if ((uint64_t)prm->p * (uint64_t)prm->K * (uint64_t)prm->n > BRKGA_MAX_KEYS)
        return gj_error_set(err, size_field, "%d population(s) of %zu x %zu genes exceed 2^29 keys "
                            "(4 GiB for two generations): lower max_population or populations",
                            prm->K, prm->p, prm->n);
    return 0;
}

/* ------------------------------------------------------------------ */
/* The generation loop                                                 */

void brkga_result_free(struct brkga_result *res)
{
    free(res->best_keys);
    free(res->hist_best);
    free(res->hist_mean);
    free(res->rows);
    memset(res, 0, sizeof *res);
}

static int better(int maximize, double a, double b)
{
    return maximize ? a > b : a < b;
}

static int criterion_met(const struct brkga_params *prm, int c, long gens, long stall,
                         double elapsed, double since, double best)
{
    switch (c) {
    case BRKGA_STOP_GENERATIONS: return gens >= prm->max_generations;
    case BRKGA_STOP_INCUMBENT: return stall >= prm->max_stall_generations;
    case BRKGA_STOP_TIME: return elapsed >= prm->max_time_s;
    case BRKGA_STOP_INCUMBENT_TIME: return since >= prm->max_stall_time_s;
    case BRKGA_STOP_OPTIMAL:
        return prm->maximize ? best >= prm->target : best <= prm->target;
    default: return 0;
    }
}

static int push_hist(struct brkga_result *res, size_t *cap, double best, double mean)
{
    if (res->n_hist == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        double *b = realloc(res->hist_best, nc * sizeof *b);
        if (!b)
            return -1;
        res->hist_best = b;
        double *m = realloc(res->hist_mean, nc * sizeof *m);
        if (!m)
            return -1;
        res->hist_mean = m;
        *cap = nc;
    }
    res->hist_best[res->n_hist] = best;
    res->hist_mean[res->n_hist] = mean;
    res->n_hist++;
    return 0;
}

/* One run of brkga_solve: the backend, the result being built and the counters. */
struct solve {
    const struct brkga_params *prm;
    const struct brkga_hooks *hooks;
    struct brkga_backend be;
    struct brkga_result *res;
    double *fits;             /* K * p ranked fitnesses of the current generation */
    size_t hist_cap, rows_cap;
    double t_start, t_update, t_progress;
    double now;               /* when this generation was observed */
    long gen, stall, decodes;
    int stop;
};

/* The incumbent and the mean of the feasible fitnesses of this generation. */
static int observe_generation(struct solve *s, double *mean, struct gj_error *err)
{
    const struct brkga_params *prm = s->prm;
    if (s->be.fitness(s->be.st, s->fits))
        return gj_error_set(err, "", "%s", s->be.err.message);
    int bk = 0;
    double gbest = s->fits[0], sum = 0;
    size_t nfeas = 0;
    for (int k = 0; k < prm->K; k++) {
        double f = s->fits[(size_t)k * prm->p];
        if (better(prm->maximize, f, gbest)) {
            gbest = f;
            bk = k;
        }
        for (size_t r = 0; r < prm->p; r++) {
            double v = s->fits[(size_t)k * prm->p + r];
            if (fabs(v) < BRKGA_INFEASIBLE) {
                sum += v;
                nfeas++;
            }
        }
    }
    *mean = nfeas ? sum / (double)nfeas : NAN;
    s->now = brkga_now();
    if (better(prm->maximize, gbest, s->res->best)) {
        s->res->best = gbest;
        if (s->be.keys(s->be.st, bk, 0, s->res->best_keys))
            return gj_error_set(err, "", "%s", s->be.err.message);
        if (s->gen > 0) {
            s->stall = 0;
            s->t_update = s->now;
        }
    } else if (s->gen > 0) {
        s->stall++;
    }
    if (push_hist(s->res, &s->hist_cap, s->res->best, *mean))
        return gj_error_set(err, "", "out of memory");
    return 0;
}

/* The criterion that stops the run after this generation, or 0. */
static int stop_reason(const struct solve *s, double elapsed, double since)
{
    const struct brkga_params *prm = s->prm;
    if (criterion_met(prm, prm->primary, s->gen, s->stall, elapsed, since, s->res->best))
        return prm->primary;
    if (criterion_met(prm, prm->secondary, s->gen, s->stall, elapsed, since, s->res->best))
        return prm->secondary;
    if (prm->hard_time_limit_s > 0 && elapsed >= prm->hard_time_limit_s)
        return BRKGA_STOP_HARD_LIMIT;
    if (s->hooks && s->hooks->cancelled && s->hooks->cancelled(s->hooks->ctx))
        return BRKGA_STOP_CANCELLED;
    return 0;
}

static void report_progress(struct solve *s, double elapsed)
{
    const struct brkga_params *prm = s->prm;
    if (!s->hooks || !s->hooks->progress)
        return;
    char line[160];
    snprintf(line, sizeof line, "generation %ld: best %.6g", s->gen, s->res->best);
    double frac = 0;
    if (prm->primary == BRKGA_STOP_GENERATIONS && prm->max_generations > 0)
        frac = (double)s->gen / (double)prm->max_generations;
    else if (prm->primary == BRKGA_STOP_TIME && prm->max_time_s > 0)
        frac = elapsed / prm->max_time_s;
    s->hooks->progress(s->hooks->ctx, frac > 1 ? 1 : frac, line);
    s->t_progress = brkga_now();
}

/* A row of statistics every stats_interval generations and at the end; progress
 * with each row, and at least once a second in between. */
static int record_generation(struct solve *s, double mean, double elapsed, double since,
                             struct gj_error *err)
{
    const struct brkga_params *prm = s->prm;
    struct brkga_result *res = s->res;
    int interval = prm->stats_interval > 0 ? prm->stats_interval : 100;
    if (!s->stop && s->gen % interval != 0) {
        if (brkga_now() - s->t_progress >= 1.0)
            report_progress(s, elapsed);
        return 0;
    }
    if (res->n_rows == s->rows_cap) {
        size_t nc = s->rows_cap ? s->rows_cap * 2 : 64;
        struct brkga_stat_row *r = realloc(res->rows, nc * sizeof *r);
        if (!r)
            return gj_error_set(err, "", "out of memory");
        res->rows = r;
        s->rows_cap = nc;
    }
    struct brkga_stat_row *row = &res->rows[res->n_rows++];
    row->generation = s->gen;
    row->stall_generations = s->stall;
    row->elapsed_s = elapsed;
    row->since_update_s = since;
    row->best = res->best;
    row->mean = mean;
    row->terminate = s->stop != 0;
    row->t_init = res->t_init;
    s->be.times(s->be.st, &row->t_evolve, &row->t_decode, &row->t_sort);
    row->t_exchange = res->t_exchange;
    row->decodes = s->decodes;
    report_progress(s, elapsed);
    return 0;
}

/* The next generation: a reset after a stall, or evolution and (when due) an exchange.
 * 0, 1 when cancelled part-way (the incumbent is the last complete generation), -1. */
static int next_generation(struct solve *s, struct gj_error *err)
{
    const struct brkga_params *prm = s->prm;
    size_t total = (size_t)prm->K * prm->p;
    s->gen++;
    if (prm->reset_after > 0 && s->stall > 0 && s->stall % prm->reset_after == 0) {
        int r = s->be.init(s->be.st, (uint32_t)s->gen, 2, NULL, 0);
        if (r == 1)
            return 1;
        if (r)
            return gj_error_set(err, "", "reset: %s", s->be.err.message);
        s->res->resets++;
        s->decodes += (long)total;
        return 0;
    }
    int r = s->be.evolve(s->be.st, (uint32_t)s->gen);
    if (r == 1)
        return 1;
    if (r)
        return gj_error_set(err, "", "generation %ld: %s", s->gen, s->be.err.message);
    s->decodes += (long)(prm->K * (prm->p - prm->ne));
    if (prm->K > 1 && prm->exchange_interval > 0 && prm->exchange_count > 0 &&
        s->gen % prm->exchange_interval == 0) {
        double t0 = brkga_now();
        if (s->be.exchange(s->be.st, prm->exchange_count))
            return gj_error_set(err, "", "exchange: %s", s->be.err.message);
        s->res->t_exchange += brkga_now() - t0;
        s->res->exchanges++;
    }
    return 0;
}

/* Generations until a stop criterion holds. 0 or -1 with err. */
static int run_generations(struct solve *s, struct gj_error *err)
{
    for (;;) {
        double mean = NAN;
        if (observe_generation(s, &mean, err))
            return -1;
        double elapsed = s->now - s->t_start, since = s->now - s->t_update;
        s->stop = stop_reason(s, elapsed, since);
        if (record_generation(s, mean, elapsed, since, err))
            return -1;
        if (s->stop)
            return 0;
        int r = next_generation(s, err);
        if (r < 0)
            return -1;
        if (r == 1) {
            s->stop = BRKGA_STOP_CANCELLED;
            s->gen--;
            return 0;
        }
    }
}

static int open_backend(const struct brkga_params *prm, const struct brkga_decoder *dec,
                        const struct brkga_hooks *hooks, struct brkga_backend *be,
                        struct gj_error *err)
{
    memset(be, 0, sizeof *be);
    int rc = prm->device >= 0 ? brkga_gpu_backend(prm, dec, be) : brkga_cpu_backend(prm, dec, hooks, be);
    return rc ? gj_error_set(err, "", "%s", be->err.message) : 0;
}

int brkga_solve(const struct brkga_params *prm, const struct brkga_decoder *dec,
                const struct brkga_hooks *hooks, struct brkga_result *res, struct gj_error *err)
{
    memset(res, 0, sizeof *res);
    struct solve s = { .prm = prm, .hooks = hooks, .res = res };
    if (brkga_check_params(prm, err) || open_backend(prm, dec, hooks, &s.be, err))
        return -1;
    size_t total = (size_t)prm->K * prm->p;
    s.fits = malloc(total * sizeof *s.fits);
    res->best_keys = malloc(prm->n * sizeof(float));
    int rc = -1;
    if (!s.fits || !res->best_keys) {
        gj_error_set(err, "", "out of memory");
        goto out;
    }
    s.t_start = s.t_update = s.t_progress = brkga_now();
    int r0 = s.be.init(s.be.st, 0, 0, prm->initial, prm->n_initial);
    if (r0 == 1) {
        res->stop_reason = BRKGA_STOP_CANCELLED;
        res->elapsed_s = brkga_now() - s.t_start;
        rc = 0;
        goto out;
    }
    if (r0) {
        gj_error_set(err, "", "initial population: %s", s.be.err.message[0] ? s.be.err.message : "failed");
        goto out;
    }
    res->t_init = brkga_now() - s.t_start;
    s.decodes = (long)total;
    res->best = prm->maximize ? -INFINITY : INFINITY;
    if (run_generations(&s, err))
        goto out;
    res->generations = s.gen;
    res->decodes = s.decodes;
    res->stop_reason = s.stop;
    res->elapsed_s = brkga_now() - s.t_start;
    s.be.times(s.be.st, &res->t_evolve, &res->t_decode, &res->t_sort);
    rc = 0;
out:
    free(s.fits);
    s.be.destroy(s.be.st);
    if (rc)
        brkga_result_free(res);
    return rc;
}
