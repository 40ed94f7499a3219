/*
 * brkga_cpu.c — the CPU backend of the engine: populations in host memory, every
 * draw from Philox (brkga_rng.h), decoding split over pthreads. The history does not
 * depend on the thread count: each slot's keys and fitness are a pure function of
 * (seed, generation, population, slot).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gj_poll.h"
#include "brkga/brkga_engine.h"
#include "brkga/brkga_rng.h"

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
    struct gj_poll poll;      /* the hooks' cancel, asked from the calling thread only */
    struct brkga_backend *be; /* for be->err */
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
    /* a long generation still stops promptly: the calling thread asks for a cancel
     * as it goes, and every thread stops at the next chromosome once one is seen */
    for (size_t j = a->a; j < a->b; j++) {
        if (gj_poll_step(&s->poll, 0))
            break;
        do_job(s, j, a->tid);
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
    return gj_poll_stopped(&s->poll);
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
        return gj_error_set(&s->be->err, "", "out of memory for the exchange");
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
        return gj_error_set(&be->err, "", "out of memory");
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
        return gj_error_set(&be->err, "", "out of memory for %zu x %zu keys", total, prm->n);
    }
    s->thresh = (uint64_t)ldexp(prm->rhoe, 32);
    gj_poll_init(&s->poll, hooks ? hooks->ctx : NULL, hooks ? hooks->cancelled : NULL, NULL);
    s->be = be;
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
