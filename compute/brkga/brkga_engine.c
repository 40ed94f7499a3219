/*
 * brkga_engine.c — the generation loop (stop criteria, statistics, exchange, reset)
 * and the CPU backend (pthreads; every draw from Philox, see brkga_rng.h).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brkga/brkga_engine.h"
#include "brkga/brkga_rng.h"
#include "brkga/brkga_gpu.h"

double brkga_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int brkga_fail(char *msg, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (msg && len)
        vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return -1;
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

int brkga_check_params(const struct brkga_params *prm, char *msg, size_t len)
{
    if (prm->n < 1)
        return brkga_fail(msg, len, "the problem has no genes");
    if (prm->p < 2)
        return brkga_fail(msg, len, "population of %zu individuals: at least 2 are needed", prm->p);
    if (prm->ne < 1)
        return brkga_fail(msg, len, "population of %zu individuals leaves no elite: raise elites or the "
                    "population", prm->p);
    if (prm->ne + prm->nm >= prm->p)
        return brkga_fail(msg, len, "elites (%zu) + mutants (%zu) must be fewer than the population (%zu)",
                    prm->ne, prm->nm, prm->p);
    if (!(prm->rhoe > 0.5 && prm->rhoe <= 1.0))
        return brkga_fail(msg, len, "inheritance_prob %g is outside (0.5, 1]", prm->rhoe);
    if (prm->K < 1)
        return brkga_fail(msg, len, "populations must be at least 1");
    if (prm->K > 1 && prm->exchange_interval > 0 &&
        (size_t)prm->exchange_count * (size_t)(prm->K - 1) > prm->p - prm->ne)
        return brkga_fail(msg, len, "exchange_count x (populations - 1) = %zu exceeds the non-elite "
                    "slots (%zu)", (size_t)prm->exchange_count * (size_t)(prm->K - 1),
                    prm->p - prm->ne);
    if ((uint64_t)prm->p * (uint64_t)prm->K > (1u << 30) || prm->n > (1u << 24))
        return brkga_fail(msg, len, "population or chromosome too large");
    if ((uint64_t)prm->p * (uint64_t)prm->K * (uint64_t)prm->n > (1ull << 29))
        return brkga_fail(msg, len, "%d population(s) of %zu x %zu genes exceed 2^29 keys (4 GiB for two "
                    "generations): lower max_population or populations", prm->K, prm->p, prm->n);
    return 0;
}

/* ------------------------------------------------------------------ */
/* CPU backend                                                         */

struct rank_item { double f; uint32_t idx; };

struct cpu_state {
    struct brkga_params prm;
    struct brkga_decoder dec;
    float *cur, *nxt;
    double *fit, *nfit;
    uint32_t *order;          /* K*p: slot index of rank r */
    struct rank_item *rank;   /* p: cpu_rank's sort buffer */
    unsigned char *scratch;
    int threads;
    uint64_t thresh;
    double t_evolve, t_decode, t_sort;
    /* per-call job description */
    int mode;                 /* 0 generate (init), 1 evolve keys, 2 decode */
    uint32_t gen;
    int word;
    const float *initial;
    size_t n_initial;
    size_t first;             /* first slot of each population the call covers */
    const struct brkga_hooks *hooks;
    struct brkga_backend *be; /* for be->msg */
    int abort_flag;           /* set (atomically) when a cancel is seen mid-generation */
    double last_poll;
};

struct par_arg {
    struct cpu_state *s;
    size_t a, b;              /* job range */
    int tid;
};

static void do_job(struct cpu_state *s, size_t job, int tid)
{
    const struct brkga_params *prm = &s->prm;
    size_t per = prm->p - s->first;
    size_t k = job / per, i = s->first + job % per, n = prm->n;
    uint64_t seed = prm->seed;
    if (s->mode == 0) {
        float *dst = s->cur + ((size_t)k * prm->p + i) * n;
        if (k == 0 && i < s->n_initial) {
            memcpy(dst, s->initial + i * n, n * sizeof *dst);
            return;
        }
        for (size_t j = 0; j < n; j++) {
            struct brkga_u4 u = brkga_philox(seed, (uint32_t)j, (uint32_t)i, s->gen,
                                             (uint32_t)k | (BRKGA_RNG_GENE << 24));
            dst[j] = brkga_key(u.w[s->word]);
        }
    } else if (s->mode == 1) {
        const uint32_t *ord = s->order + (size_t)k * prm->p;
        const float *base = s->cur + (size_t)k * prm->p * n;
        float *dst = s->nxt + ((size_t)k * prm->p + i) * n;
        if (i < prm->ne) {
            memcpy(dst, base + (size_t)ord[i] * n, n * sizeof *dst);
            s->nfit[k * prm->p + i] = s->fit[k * prm->p + ord[i]];
        } else if (i < prm->p - prm->nm) {
            struct brkga_u4 pu = brkga_philox(seed, BRKGA_PARENT_GENE, (uint32_t)i, s->gen,
                                              (uint32_t)k | (BRKGA_RNG_PARENTS << 24));
            uint32_t e = ord[brkga_below(pu.w[0], (uint32_t)prm->ne)];
            uint32_t o = ord[prm->ne + brkga_below(pu.w[1], (uint32_t)(prm->p - prm->ne))];
            const float *pe = base + (size_t)e * n, *po = base + (size_t)o * n;
            for (size_t j = 0; j < n; j++) {
                struct brkga_u4 u = brkga_philox(seed, (uint32_t)j, (uint32_t)i, s->gen,
                                                 (uint32_t)k | (BRKGA_RNG_GENE << 24));
                dst[j] = (uint64_t)u.w[1] < s->thresh ? pe[j] : po[j];
            }
        } else {
            for (size_t j = 0; j < n; j++) {
                struct brkga_u4 u = brkga_philox(seed, (uint32_t)j, (uint32_t)i, s->gen,
                                                 (uint32_t)k | (BRKGA_RNG_GENE << 24));
                dst[j] = brkga_key(u.w[0]);
            }
        }
    } else {
        float *keys = s->cur + ((size_t)k * prm->p + i) * n;
        double f = s->dec.decode(s->dec.ctx, keys, s->scratch + (size_t)tid * s->dec.scratch_bytes);
        if (f != f)
            f = BRKGA_INFEASIBLE;
        s->fit[k * prm->p + i] = f;
    }
}

static void *par_main(void *p)
{
    struct par_arg *a = p;
    struct cpu_state *s = a->s;
    for (size_t j = a->a; j < a->b; j++) {
        if (__atomic_load_n(&s->abort_flag, __ATOMIC_RELAXED))
            break;
        do_job(s, j, a->tid);
        /* the calling thread (tid 0) polls for a cancel about 5 times a second, so a
         * long generation still stops promptly; the hook is only called from here */
        if (a->tid == 0 && s->hooks && s->hooks->cancelled && (j & 7) == 7) {
            double t = brkga_now();
            if (t - s->last_poll > 0.2) {
                s->last_poll = t;
                if (s->hooks->cancelled(s->hooks->ctx))
                    __atomic_store_n(&s->abort_flag, 1, __ATOMIC_RELAXED);
            }
        }
    }
    return NULL;
}

static int par_for(struct cpu_state *s, size_t n_jobs)
{
    int T = s->threads;
    /* tiny batches are not worth a thread start (results do not depend on T) */
    if (n_jobs < 32)
        T = 1;
    if ((size_t)T > n_jobs)
        T = n_jobs ? (int)n_jobs : 1;
    struct par_arg args[256];
    pthread_t th[256];
    int started = 0, rc = 0;
    for (int t = 0; t < T; t++) {
        args[t].s = s;
        args[t].a = n_jobs * (size_t)t / (size_t)T;
        args[t].b = n_jobs * (size_t)(t + 1) / (size_t)T;
        args[t].tid = t;
    }
    for (int t = 1; t < T; t++) {
        if (pthread_create(&th[t], NULL, par_main, &args[t]) != 0) {
            /* run the rest inline: results do not depend on who computes them */
            for (int u = t; u < T; u++) {
                args[u].tid = 0;
            }
            rc = 1;
            break;
        }
        started = t;
    }
    par_main(&args[0]);
    if (rc) {
        for (int u = started + 1; u < T; u++)
            par_main(&args[u]);
    }
    for (int t = 1; t <= started; t++)
        pthread_join(th[t], NULL);
    return __atomic_load_n(&s->abort_flag, __ATOMIC_RELAXED) ? 1 : 0;
}

static int rank_cmp(const void *a, const void *b)
{
    const struct rank_item *x = a, *y = b;
    if (x->f < y->f) return -1;
    if (x->f > y->f) return 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int cpu_rank(struct cpu_state *s)
{
    double t0 = brkga_now();
    size_t p = s->prm.p;
    struct rank_item *it = s->rank;
    for (int k = 0; k < s->prm.K; k++) {
        for (size_t i = 0; i < p; i++) {
            double f = s->fit[(size_t)k * p + i];
            it[i].f = s->prm.maximize ? -f : f;
            it[i].idx = (uint32_t)i;
        }
        qsort(it, p, sizeof *it, rank_cmp);
        for (size_t i = 0; i < p; i++)
            s->order[(size_t)k * p + i] = it[i].idx;
    }
    s->t_sort += brkga_now() - t0;
    return 0;
}

static int cpu_init(void *st, uint32_t gen, int word, const float *initial, size_t n_initial)
{
    struct cpu_state *s = st;
    double t0 = brkga_now();
    s->mode = 0;
    s->gen = gen;
    s->word = word;
    s->initial = initial;
    s->n_initial = n_initial < s->prm.p ? n_initial : s->prm.p;
    s->first = 0;
    if (par_for(s, (size_t)s->prm.K * s->prm.p))
        return 1;
    double t1 = brkga_now();
    s->t_evolve += t1 - t0;
    s->mode = 2;
    if (par_for(s, (size_t)s->prm.K * s->prm.p))
        return 1;
    s->t_decode += brkga_now() - t1;
    return cpu_rank(s);
}

static int cpu_evolve(void *st, uint32_t gen)
{
    struct cpu_state *s = st;
    double t0 = brkga_now();
    s->mode = 1;
    s->gen = gen;
    s->first = 0;
    if (par_for(s, (size_t)s->prm.K * s->prm.p))
        return 1;
    float *tk = s->cur; s->cur = s->nxt; s->nxt = tk;
    double *tf = s->fit; s->fit = s->nfit; s->nfit = tf;
    double t1 = brkga_now();
    s->t_evolve += t1 - t0;
    /* elites keep their fitness: decode only slots ne..p-1 */
    s->mode = 2;
    s->first = s->prm.ne;
    if (par_for(s, (size_t)s->prm.K * (s->prm.p - s->prm.ne)))
        return 1;
    s->t_decode += brkga_now() - t1;
    return cpu_rank(s);
}

static int cpu_exchange(void *st, int M)
{
    struct cpu_state *s = st;
    size_t p = s->prm.p, n = s->prm.n;
    int K = s->prm.K;
    float *bk = malloc((size_t)K * (size_t)M * n * sizeof *bk);
    double *bf = malloc((size_t)K * (size_t)M * sizeof *bf);
    if (!bk || !bf) {
        free(bk);
        free(bf);
        return brkga_fail(s->be->msg, sizeof s->be->msg, "out of memory for the exchange");
    }
    for (int k = 0; k < K; k++)
        for (int m = 0; m < M; m++) {
            uint32_t slot = s->order[(size_t)k * p + (size_t)m];
            memcpy(bk + ((size_t)k * M + m) * n, s->cur + ((size_t)k * p + slot) * n, n * sizeof *bk);
            bf[(size_t)k * M + m] = s->fit[(size_t)k * p + slot];
        }
    for (int k = 0; k < K; k++) {
        size_t dest = p - 1;
        for (int j = 0; j < K; j++) {
            if (j == k)
                continue;
            for (int m = 0; m < M; m++, dest--) {
                uint32_t slot = s->order[(size_t)k * p + dest];
                memcpy(s->cur + ((size_t)k * p + slot) * n, bk + ((size_t)j * M + m) * n,
                       n * sizeof *bk);
                s->fit[(size_t)k * p + slot] = bf[(size_t)j * M + m];
            }
        }
    }
    free(bk);
    free(bf);
    return cpu_rank(s);
}

static int cpu_fitness(void *st, double *out)
{
    struct cpu_state *s = st;
    size_t p = s->prm.p;
    for (size_t i = 0; i < (size_t)s->prm.K * p; i++)
        out[i] = s->fit[(i / p) * p + s->order[i]];
    return 0;
}

static int cpu_keys(void *st, int k, size_t r, float *out)
{
    struct cpu_state *s = st;
    size_t p = s->prm.p;
    memcpy(out, s->cur + ((size_t)k * p + s->order[(size_t)k * p + r]) * s->prm.n,
           s->prm.n * sizeof *out);
    return 0;
}

static void cpu_times(void *st, double *te, double *td, double *ts)
{
    struct cpu_state *s = st;
    *te = s->t_evolve;
    *td = s->t_decode;
    *ts = s->t_sort;
}

static void cpu_destroy(void *st)
{
    struct cpu_state *s = st;
    if (!s)
        return;
    free(s->cur);
    free(s->nxt);
    free(s->fit);
    free(s->nfit);
    free(s->order);
    free(s->rank);
    free(s->scratch);
    free(s);
}

int brkga_cpu_backend(const struct brkga_params *prm, const struct brkga_decoder *dec,
                      const struct brkga_hooks *hooks, struct brkga_backend *be)
{
    struct cpu_state *s = calloc(1, sizeof *s);
    if (!s)
        return brkga_fail(be->msg, sizeof be->msg, "out of memory");
    s->prm = *prm;
    s->dec = *dec;
    /* each thread's scratch starts on its own cache line (and is 8-byte aligned) */
    s->dec.scratch_bytes = (dec->scratch_bytes + 63) & ~(size_t)63;
    s->threads = prm->threads < 1 ? 1 : prm->threads > 256 ? 256 : prm->threads;
    size_t total = (size_t)prm->K * prm->p;
    s->cur = malloc(total * prm->n * sizeof(float));
    s->nxt = malloc(total * prm->n * sizeof(float));
    s->fit = calloc(total, sizeof(double));
    s->nfit = calloc(total, sizeof(double));
    s->order = calloc(total, sizeof(uint32_t));
    s->rank = malloc(prm->p * sizeof *s->rank);
    s->scratch = aligned_alloc(64, (size_t)s->threads * (s->dec.scratch_bytes ? s->dec.scratch_bytes : 64));
    if (!s->cur || !s->nxt || !s->fit || !s->nfit || !s->order || !s->rank || !s->scratch) {
        cpu_destroy(s);
        return brkga_fail(be->msg, sizeof be->msg, "out of memory for %zu x %zu keys", total, prm->n);
    }
    s->thresh = (uint64_t)ldexp(prm->rhoe, 32);
    s->hooks = hooks;
    s->be = be;
    s->last_poll = brkga_now();
    be->st = s;
    be->init = cpu_init;
    be->evolve = cpu_evolve;
    be->exchange = cpu_exchange;
    be->fitness = cpu_fitness;
    be->keys = cpu_keys;
    be->times = cpu_times;
    be->destroy = cpu_destroy;
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

int brkga_solve(const struct brkga_params *prm, const struct brkga_decoder *dec,
                const struct brkga_hooks *hooks, struct brkga_result *res,
                char *msg, size_t msglen)
{
    memset(res, 0, sizeof *res);
    if (brkga_check_params(prm, msg, msglen))
        return -1;
    struct brkga_backend be;
    memset(&be, 0, sizeof be);
    if (prm->device >= 0) {
        if (brkga_gpu_backend(prm, dec, &be))
            return brkga_fail(msg, msglen, "%s", be.msg);
    } else if (brkga_cpu_backend(prm, dec, hooks, &be)) {
        return brkga_fail(msg, msglen, "%s", be.msg);
    }
    size_t total = (size_t)prm->K * prm->p;
    double *fits = malloc(total * sizeof *fits);
    res->best_keys = malloc(prm->n * sizeof(float));
    size_t hist_cap = 0, rows_cap = 0;
    int rc = -1;
    if (!fits || !res->best_keys) {
        brkga_fail(msg, msglen, "out of memory");
        goto out;
    }
    double t_start = brkga_now(), t_update = t_start;
    int r0 = be.init(be.st, 0, 0, prm->initial, prm->n_initial);
    if (r0 == 1) {
        res->stop_reason = BRKGA_STOP_CANCELLED;
        res->elapsed_s = brkga_now() - t_start;
        rc = 0;
        goto out;
    }
    if (r0) {
        brkga_fail(msg, msglen, "initial population: %s", be.msg[0] ? be.msg : "failed");
        goto out;
    }
    res->t_init = brkga_now() - t_start;
    long gen = 0, stall = 0, decodes = (long)total;
    res->best = prm->maximize ? -INFINITY : INFINITY;
    int stop = 0;
    for (;;) {
        /* statistics of this generation */
        if (be.fitness(be.st, fits)) {
            brkga_fail(msg, msglen, "%s", be.msg);
            goto out;
        }
        int bk = 0;
        double gbest = fits[0], sum = 0;
        size_t nfeas = 0;
        for (int k = 0; k < prm->K; k++) {
            double f = fits[(size_t)k * prm->p];
            if (better(prm->maximize, f, gbest)) {
                gbest = f;
                bk = k;
            }
            for (size_t r = 0; r < prm->p; r++) {
                double v = fits[(size_t)k * prm->p + r];
                if (fabs(v) < BRKGA_INFEASIBLE) {
                    sum += v;
                    nfeas++;
                }
            }
        }
        double mean = nfeas ? sum / (double)nfeas : NAN;
        double now = brkga_now();
        if (better(prm->maximize, gbest, res->best)) {
            res->best = gbest;
            if (be.keys(be.st, bk, 0, res->best_keys)) {
                brkga_fail(msg, msglen, "%s", be.msg);
                goto out;
            }
            if (gen > 0) {
                stall = 0;
                t_update = now;
            }
        } else if (gen > 0) {
            stall++;
        }
        if (push_hist(res, &hist_cap, res->best, mean)) {
            brkga_fail(msg, msglen, "out of memory");
            goto out;
        }
        double elapsed = now - t_start, since = now - t_update;
        if (criterion_met(prm, prm->primary, gen, stall, elapsed, since, res->best))
            stop = prm->primary;
        else if (criterion_met(prm, prm->secondary, gen, stall, elapsed, since, res->best))
            stop = prm->secondary;
        else if (prm->hard_time_limit_s > 0 && elapsed >= prm->hard_time_limit_s)
            stop = BRKGA_STOP_HARD_LIMIT;
        else if (hooks && hooks->cancelled && hooks->cancelled(hooks->ctx))
            stop = BRKGA_STOP_CANCELLED;
        int interval = prm->stats_interval > 0 ? prm->stats_interval : 100;
        if (stop || gen % interval == 0) {
            if (res->n_rows == rows_cap) {
                size_t nc = rows_cap ? rows_cap * 2 : 64;
                struct brkga_stat_row *r = realloc(res->rows, nc * sizeof *r);
                if (!r) {
                    brkga_fail(msg, msglen, "out of memory");
                    goto out;
                }
                res->rows = r;
                rows_cap = nc;
            }
            struct brkga_stat_row *row = &res->rows[res->n_rows++];
            row->generation = gen;
            row->stall_generations = stall;
            row->elapsed_s = elapsed;
            row->since_update_s = since;
            row->best = res->best;
            row->mean = mean;
            row->terminate = stop != 0;
            row->t_init = res->t_init;
            be.times(be.st, &row->t_evolve, &row->t_decode, &row->t_sort);
            row->t_exchange = res->t_exchange;
            row->decodes = decodes;
            if (hooks && hooks->progress) {
                char line[160];
                snprintf(line, sizeof line, "generation %ld: best %.6g", gen, res->best);
                double frac = 0;
                if (prm->primary == BRKGA_STOP_GENERATIONS && prm->max_generations > 0)
                    frac = (double)gen / (double)prm->max_generations;
                else if (prm->primary == BRKGA_STOP_TIME && prm->max_time_s > 0)
                    frac = elapsed / prm->max_time_s;
                hooks->progress(hooks->ctx, frac > 1 ? 1 : frac, line);
            }
        }
        if (stop)
            break;
        gen++;
        if (prm->reset_after > 0 && stall > 0 && stall % prm->reset_after == 0) {
            int r = be.init(be.st, (uint32_t)gen, 2, NULL, 0);
            if (r == 1) {
                stop = BRKGA_STOP_CANCELLED;
                gen--;
                break;
            }
            if (r) {
                brkga_fail(msg, msglen, "reset: %s", be.msg);
                goto out;
            }
            res->resets++;
            decodes += (long)total;
            continue;
        }
        int r = be.evolve(be.st, (uint32_t)gen);
        if (r == 1) {   /* cancelled mid-generation: the incumbent is the last complete one */
            stop = BRKGA_STOP_CANCELLED;
            gen--;
            break;
        }
        if (r) {
            brkga_fail(msg, msglen, "generation %ld: %s", gen, be.msg);
            goto out;
        }
        decodes += (long)(prm->K * (prm->p - prm->ne));
        if (prm->K > 1 && prm->exchange_interval > 0 && prm->exchange_count > 0 &&
            gen % prm->exchange_interval == 0) {
            double t0 = brkga_now();
            if (be.exchange(be.st, prm->exchange_count)) {
                brkga_fail(msg, msglen, "exchange: %s", be.msg);
                goto out;
            }
            res->t_exchange += brkga_now() - t0;
            res->exchanges++;
        }
    }
    res->generations = gen;
    res->decodes = decodes;
    res->stop_reason = stop;
    res->elapsed_s = brkga_now() - t_start;
    be.times(be.st, &res->t_evolve, &res->t_decode, &res->t_sort);
    rc = 0;
out:
    free(fits);
    be.destroy(be.st);
    if (rc)
        brkga_result_free(res);
    return rc;
}
