/*
 * brkga_kind.c — the `brkga` job kind: submit-time checks, the problem (network or
 * TSP) loaded from the inputs, the estimate and the run. Parameters are read in
 * brkga_params.c, outputs written in brkga_output.c; README.md has the formats.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gj_config.h"
#include "common/fsutil.h"
#include "common/gj_kind.h"
#include "common/gj_poll.h"
#include "common/gj_seed.h"
#include "brkga/brkga_engine.h"
#include "brkga/brkga_gpu.h"
#include "brkga/brkga_kind.h"
#include "brkga/brkga_net.h"
#include "brkga/brkga_tsp.h"

#define BK_MAX_INPUT (64u << 20)

static const char brkga_schema[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
    "\"type\":\"object\",\"additionalProperties\":false,"
    "\"properties\":{"
    "\"decoder\":{\"enum\":[\"network\",\"tsp\"],\"description\":\"network (IP/MPLS over WSON, inputs "
    "network + demands) or tsp (input tsp); default network\"},"
    "\"sense\":{\"enum\":[\"minimize\",\"maximize\"]},"
    "\"population_factor\":{\"type\":\"number\",\"description\":\"a: p = a * genes (thesis Individuals)\"},"
    "\"max_population\":{\"type\":\"integer\",\"description\":\"cap of p (thesis MaxIndividuals)\"},"
    "\"population_size\":{\"type\":\"integer\",\"description\":\"fixed p (overrides factor and cap)\"},"
    "\"elites\":{\"type\":\"number\",\"description\":\"fraction of p kept as elites\"},"
    "\"mutants\":{\"type\":\"number\",\"description\":\"fraction of p replaced by mutants\"},"
    "\"inheritance_prob\":{\"type\":\"number\",\"description\":\"probability a gene comes from the elite parent, (0.5, 1]\"},"
    "\"primary_stop\":{\"type\":\"string\",\"description\":\"generations, generations_without_improvement, time, time_without_improvement, target, none\"},"
    "\"secondary_stop\":{\"type\":\"string\"},"
    "\"max_generations\":{\"type\":\"integer\",\"minimum\":0},"
    "\"max_generations_without_improvement\":{\"type\":\"integer\",\"minimum\":1},"
    "\"max_time_s\":{\"type\":\"number\",\"minimum\":0},"
    "\"max_time_without_improvement_s\":{\"type\":\"number\",\"minimum\":0},"
    "\"target_value\":{\"type\":\"number\"},"
    "\"seed\":{\"type\":\"integer\",\"minimum\":0},"
    "\"populations\":{\"type\":\"integer\"},"
    "\"exchange_interval\":{\"type\":\"integer\",\"minimum\":0},"
    "\"exchange_count\":{\"type\":\"integer\",\"minimum\":0},"
    "\"reset_after\":{\"type\":\"integer\",\"minimum\":0},"
    "\"initial_chromosomes\":{\"type\":\"array\",\"maxItems\":100000,\"items\":{\"type\":\"array\","
    "\"items\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}}},"
    "\"max_access_transit_links\":{\"type\":\"integer\",\"description\":\"maxVEdgesA_T\"},"
    "\"k_paths\":{\"type\":\"integer\",\"description\":\"numKSPRoutes\"},"
    "\"max_optical_path_length\":{\"type\":\"number\",\"description\":\"maxOPathLength; 0 unlimited\"},"
    "\"local_search\":{\"enum\":[\"none\",\"2opt\"]},"
    "\"known_optimum\":{\"type\":\"number\",\"description\":\"tsp: reported gap is measured against it\"},"
    "\"stats_interval\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000000},"
    "\"time_limit_s\":{\"type\":\"number\",\"minimum\":0.001,\"maximum\":86400},"
    "\"threads\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":256}"
    "}}";

static const struct gj_input_spec brkga_inputs[] = {
    { "network", 0, 0, "Network.xml (thesis format) or network JSON: nodes, edges, total_bw_per_link" },
    { "demands", 0, 0, "Demands.xml (thesis format) or demands JSON" },
    { "params", 0, 0, "optional Params.xml (thesis format); JSON params override its values" },
    { "tsp", 0, 0, "TSPLIB file (EUC_2D or ATT) for decoder tsp" },
};

/* ------------------------------------------------------------------ */

static int load_input(const struct gj_job *job, const char *name, char **data, size_t *len,
                      struct gj_error *err)
{
    const struct gj_input *in = gj_job_input(job, name);
    if (!in || !in->path)
        return gj_error_set(err, name, "input '%s' is missing", name);
    if (gj_read_file(in->path, BK_MAX_INPUT, data, len))
        return gj_error_set(err, name, "cannot read input '%s': %s (at most %u MiB)", name,
                            strerror(errno), BK_MAX_INPUT >> 20);
    return 0;
}

/* The effective parameters: Params.xml (when given) overlaid by the job's JSON. */
static json_t *effective_params(const struct gj_job *job, struct gj_error *err)
{
    const struct gj_input *px = gj_job_input(job, "params");
    json_t *base;
    if (px && px->path) {
        char *text;
        size_t len;
        if (load_input(job, "params", &text, &len, err))
            return NULL;
        base = brkga_params_xml(text, len, err);
        free(text);
        if (!base)
            return NULL;
    } else {
        base = json_object();
    }
    if (!base || (json_is_object(job->params) && json_object_update(base, job->params))) {
        json_decref(base);
        gj_error_set(err, "", "out of memory");
        return NULL;
    }
    return base;
}

/* Individuals per population for a problem of n genes. */
static size_t population_for(const struct brkga_cfg *c, size_t n)
{
    if (c->pop_size)
        return (size_t)c->pop_size;
    double p = floor(c->pop_factor * (double)n);
    return p > (double)c->max_pop ? (size_t)c->max_pop : (size_t)p;
}

/* Genes of the smallest problem the GA runs on: 3 cities, or one demand (a routable
 * demand has a virtual link at each end). */
#define BRKGA_MIN_GENES 3

/* The population arithmetic that holds whatever the inputs are. The engine's key count
 * grows with the genes, so a job whose smallest possible problem already exceeds it can
 * never run. Params.xml (a file, not read at submit) may set the population, unless
 * population_size does. */
static int check_population_at_submit(const struct gj_job *job, const struct brkga_cfg *c,
                                      struct gj_error *err)
{
    if (!c->pop_size && gj_job_input(job, "params"))
        return 0;
    struct brkga_params prm;
    size_t n_min = BRKGA_MIN_GENES;
    if (c->pop_size) {
        /* p is fixed: every check is exact, save the key count's lower bound */
        struct gj_error e = { 0 };
        if (brkga_params_fill(c, n_min, &prm, &e) == 0)
            return 0;
        return gj_error_set(err, e.field, "%s", e.message);
    }
    uint64_t keys = (uint64_t)population_for(c, n_min) * (uint64_t)c->K * n_min;
    if (keys <= BRKGA_MAX_KEYS)
        return 0;
    return gj_error_set(err, c->K > 1 ? "populations" : "max_population", "%d population(s) of at least "
                        "%zu individuals exceed 2^29 keys for any problem: lower max_population or "
                        "populations", c->K, population_for(c, n_min));
}

static int brkga_validate(const struct gj_job *job, struct gj_error *err)
{
    struct brkga_cfg c;
    if (brkga_cfg_read(job->params, &c, err))
        return -1;
    const char *need[2] = { NULL, NULL };
    if (c.tsp)
        need[0] = "tsp";
    else {
        need[0] = "network";
        need[1] = "demands";
    }
    for (int i = 0; i < 2; i++)
        if (need[i] && !gj_job_input(job, need[i]))
            return gj_error_set(err, need[i], "decoder %s needs the input '%s'",
                                c.tsp ? "tsp" : "network", need[i]);
    for (size_t i = 0; i < job->n_inputs; i++)
        if (job->inputs[i].size > BK_MAX_INPUT && job->inputs[i].size != GJ_INPUT_SIZE_UNKNOWN)
            return gj_error_set(err, job->inputs[i].name, "input '%s' is %llu bytes; at most %u MiB",
                                job->inputs[i].name, (unsigned long long)job->inputs[i].size,
                                BK_MAX_INPUT >> 20);
    if (c.K > 1 && c.xint > 0 && c.xcount == 0)
        return gj_error_set(err, "exchange_count", "exchange_interval is set but exchange_count is 0");
    return check_population_at_submit(job, &c, err);
}

/* Every input is read whole, and the smallest problem the params allow holds two
 * generations of keys. */
static uint64_t brkga_host_floor(const struct gj_job *job)
{
    struct brkga_cfg c;
    struct gj_error ignored = { 0 };
    if (brkga_cfg_read(job->params, &c, &ignored))
        return 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < job->n_inputs; i++)
        if (job->inputs[i].size != GJ_INPUT_SIZE_UNKNOWN)
            bytes += job->inputs[i].size;
    if (c.pop_size || !gj_job_input(job, "params"))
        bytes += 2 * (uint64_t)population_for(&c, BRKGA_MIN_GENES) * (uint64_t)c.K * BRKGA_MIN_GENES * 4;
    return bytes;
}

static int load_tsp(const struct gj_job *job, const struct brkga_cfg *c, struct brkga_problem *pb,
                    struct gj_error *err)
{
    char *text;
    size_t len;
    if (load_input(job, "tsp", &text, &len, err))
        return -1;
    int rc = brkga_tsp_parse(text, len, &pb->tsp, err);
    free(text);
    if (rc)
        return -1;
    pb->tsp.local_search = c->local_search;
    pb->dec.n_genes = (size_t)pb->tsp.n;
    pb->dec.scratch_bytes = brkga_tsp_scratch_bytes(&pb->tsp);
    pb->dec.ctx = &pb->tsp;
    pb->dec.decode = brkga_tsp_decode_cb;
    return 0;
}

/* Network and demands parsed, then the pre-computation. 0, -1, or 1 when cancelled. */
static int load_network(const struct gj_job *job, const struct brkga_cfg *c, struct brkga_problem *pb,
                        struct gj_poll *poll, struct gj_error *err)
{
    char *nt = NULL, *dt = NULL;
    size_t nl = 0, dl = 0;
    struct brkga_net_input in;
    memset(&in, 0, sizeof in);
    if (load_input(job, "network", &nt, &nl, err))
        return -1;
    if (load_input(job, "demands", &dt, &dl, err)) {
        free(nt);
        return -1;
    }
    int rc = brkga_net_parse_network(nt, nl, &in, err);
    if (rc == 0)
        rc = brkga_net_parse_demands(dt, dl, &in, err);
    free(nt);
    free(dt);
    if (rc) {
        brkga_net_input_free(&in);
        return -1;
    }
    rc = brkga_net_build(&pb->net, &in, c->max_at, c->kpaths, c->max_olen, poll, err);
    if (rc)
        return rc;
    pb->have_net = 1;
    pb->dec.n_genes = (size_t)(pb->net.m.n_vlinks + pb->net.m.n_demands);
    pb->dec.scratch_bytes = brkga_net_scratch_bytes(&pb->net.m);
    pb->dec.ctx = &pb->net.m;
    pb->dec.decode = brkga_net_decode_cb;
    pb->dec.gpu_network = 1;
    return 0;
}

int brkga_problem_load(const struct gj_job *job, const struct brkga_cfg *c, struct brkga_problem *pb,
                       struct gj_poll *poll, struct gj_error *err)
{
    memset(pb, 0, sizeof *pb);
    pb->tsp_mode = c->tsp;
    return c->tsp ? load_tsp(job, c, pb, err) : load_network(job, c, pb, poll, err);
}

void brkga_problem_free(struct brkga_problem *pb)
{
    if (pb->have_net)
        brkga_net_free(&pb->net);
    if (pb->tsp_mode)
        brkga_tsp_free(&pb->tsp);
    memset(pb, 0, sizeof *pb);
}

/* Fills the engine parameters from cfg and the problem size. */
int brkga_params_fill(const struct brkga_cfg *c, size_t n, struct brkga_params *prm,
                      struct gj_error *err)
{
    memset(prm, 0, sizeof *prm);
    prm->maximize = c->maximize;
    prm->n = n;
    prm->p = population_for(c, n);
    prm->ne = (size_t)floor(c->elites * (double)prm->p);
    prm->nm = (size_t)floor(c->mutants * (double)prm->p);
    prm->rhoe = c->rhoe;
    prm->K = c->K;
    prm->exchange_interval = c->xint;
    prm->exchange_count = c->xcount;
    prm->reset_after = c->reset_after;
    prm->primary = c->primary;
    prm->secondary = c->secondary;
    prm->max_generations = c->max_gens;
    prm->max_stall_generations = c->max_stall_gens;
    prm->max_time_s = c->max_time;
    prm->max_stall_time_s = c->max_stall_time;
    prm->target = c->target;
    prm->hard_time_limit_s = c->time_limit;
    prm->seed = c->seed;
    prm->stats_interval = c->stats_interval;
    prm->device = -1;
    prm->threads = 1;
    struct gj_error e = { 0 };
    if (brkga_check_params(prm, &e) == 0)
        return 0;
    /* without population_size, p comes from population_factor within max_population */
    const char *field = e.field;
    if (!strcmp(field, "population_size") && !c->pop_size)
        field = prm->p < 2 ? "population_factor" : "max_population";
    return gj_error_set(err, field, "with %zu genes and p = %zu: %s", n, prm->p, e.message);
}

/* Host bytes of the run: the inputs as read, the problem (the network's pre-computation
 * at its peak, or the TSP's distance matrix) and the engine's two generations. */
static uint64_t host_bytes(const struct gj_job *job, const struct brkga_problem *pb,
                           const struct brkga_params *prm, int threads)
{
    uint64_t inputs = 0;
    for (size_t i = 0; i < job->n_inputs; i++)
        inputs += job->inputs[i].size;
    uint64_t problem = pb->have_net ? brkga_net_host_bytes(&pb->net) : (uint64_t)pb->tsp.n * pb->tsp.n * 4;
    uint64_t total = (uint64_t)prm->K * prm->p;
    uint64_t engine = total * (2 * prm->n * 4 + 2 * 8 + 4) + prm->p * 16 + prm->n * 4 +
                      (uint64_t)(pb->dec.scratch_bytes + 64) * (uint64_t)threads;
    return 2 * inputs + problem + engine + (16u << 20);
}

static int brkga_estimate(const struct gj_job *job, struct gj_needs *needs, struct gj_error *err)
{
    json_t *p = effective_params(job, err);
    if (!p)
        return -1;
    struct brkga_cfg c;
    struct brkga_problem pb;
    struct brkga_params prm;
    int rc = -1;
    if (brkga_cfg_read(p, &c, err) || brkga_problem_load(job, &c, &pb, NULL, err))
        goto out;
    if (brkga_params_fill(&c, pb.dec.n_genes, &prm, err) == 0) {
        uint64_t total = (uint64_t)prm.K * prm.p;
        needs->can_use_gpu = !c.tsp && GJ_HAVE_CUDA;
        needs->needs_gpu = 0;
        needs->device_bytes = needs->can_use_gpu
            ? total * (2 * prm.n * 4 + 32 + pb.dec.scratch_bytes) + (64u << 20) : 0;
        needs->host_bytes = host_bytes(job, &pb, &prm, c.threads ? c.threads : 256);
        rc = 0;
    }
    brkga_problem_free(&pb);
out:
    json_decref(p);
    return rc;
}

/* ------------------------------------------------------------------ */

/* The engine's hooks: the job's cancel, and its progress after the pre-computation. */
static int hk_cancelled(void *h)
{
    return gj_cancelled(h);
}

static void hk_progress(void *h, double f, const char *m)
{
    gj_progress(h, 0.05 + 0.95 * f, m);
}

static uint64_t fresh_seed(void)
{
    uint64_t s = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd >= 0) {
        if (read(fd, &s, sizeof s) != (ssize_t)sizeof s)
            s = 0;
        close(fd);
    }
    if (!s) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec;
    }
    return s & 0x7FFFFFFFFFFFFFFFull;
}

/* initial_chromosomes on the engine's 24-bit grid, in [0, 1); *out NULL when none. */
static int initial_keys(const struct brkga_cfg *c, struct brkga_params *prm, float **out,
                        struct gj_error *err)
{
    *out = NULL;
    if (!c->initial)
        return 0;
    size_t m = json_array_size(c->initial);
    float *initial = malloc((m ? m : 1) * prm->n * sizeof *initial);
    if (!initial)
        return gj_error_set(err, "", "out of memory");
    for (size_t i = 0; i < m; i++) {
        json_t *row = json_array_get(c->initial, i);
        if (json_array_size(row) != prm->n) {
            free(initial);
            return gj_error_set(err, "initial_chromosomes", "initial_chromosomes[%zu] has %zu keys; this "
                                "problem has %zu genes", i, json_array_size(row), prm->n);
        }
        for (size_t j = 0; j < prm->n; j++) {
            double k = json_number_value(json_array_get(row, j));
            float q = (float)(floor(k * 16777216.0) / 16777216.0);
            initial[i * prm->n + j] = q >= 1.0f ? 16777215.0f / 16777216.0f : q;
        }
    }
    prm->initial = initial;
    prm->n_initial = m;
    *out = initial;
    return 0;
}

/* The GA on the job's device; a failing GPU path falls back to the CPU. */
static int solve_on_device(struct gj_ctx *ctx, struct brkga_params *prm, const struct brkga_problem *pb,
                           struct brkga_result *res, struct gj_error *err)
{
    struct brkga_hooks hooks = { ctx, hk_cancelled, hk_progress };
    if (ctx->device >= 0 && pb->dec.gpu_network)
        prm->device = ctx->device;
    gj_logf(ctx, "brkga: %zu genes, %d population(s) of %zu (%zu elites, %zu mutants), seed %" PRIu64
            ", %s, %d thread(s)", prm->n, prm->K, prm->p, prm->ne, prm->nm, prm->seed,
            prm->device >= 0 ? "gpu" : "cpu", prm->threads);
    if (brkga_solve(prm, &pb->dec, &hooks, res, err) == 0)
        return 0;
    if (prm->device < 0)
        return -1;
    gj_logf(ctx, "brkga: GPU path failed (%s); running on the CPU", err->message);
    gj_error_clear(err);
    prm->device = -1;
    return brkga_solve(prm, &pb->dec, &hooks, res, err);
}

static int brkga_run(struct gj_ctx *ctx, struct gj_error *err)
{
    json_t *p = effective_params(ctx->job, err);
    if (!p)
        return GJ_RUN_FAILED;
    struct brkga_cfg c;
    struct brkga_problem pb;
    struct brkga_params prm;
    struct brkga_result res;
    struct gj_poll poll;
    memset(&res, 0, sizeof res);
    memset(&pb, 0, sizeof pb);
    float *initial = NULL;
    int rc = GJ_RUN_FAILED, loaded = -1;
    gj_poll_init_ctx(&poll, ctx, "pre-computation");
    if (brkga_cfg_read(p, &c, err) || (loaded = brkga_problem_load(ctx->job, &c, &pb, &poll, err)) ||
        brkga_params_fill(&c, pb.dec.n_genes, &prm, err))
        goto out;
    if (!c.have_seed)
        c.seed = fresh_seed();
    prm.seed = c.seed;
    prm.threads = ctx->cpu_threads > 0 ? ctx->cpu_threads : 1;
    if (c.threads && c.threads < prm.threads)
        prm.threads = c.threads;
    if (initial_keys(&c, &prm, &initial, err))
        goto out;
    if (pb.have_net && pb.net.n_unroutable) {
        gj_logf(ctx, "brkga: %s; no chromosome can be feasible", pb.net.unroutable_msg);
        if (brkga_write_outputs(ctx->output_dir, &c, &prm, &pb, NULL, "unroutable", err) == 0)
            rc = GJ_RUN_OK;
        goto out;
    }
    if (pb.tsp_mode)
        pb.tsp.poll = &poll;   /* a long 2-opt sees a cancel too */
    if (solve_on_device(ctx, &prm, &pb, &res, err))
        goto out;
    if (res.stop_reason == BRKGA_STOP_CANCELLED)
        rc = GJ_RUN_CANCELED;
    else if (brkga_write_outputs(ctx->output_dir, &c, &prm, &pb, &res, NULL, err) == 0)
        rc = GJ_RUN_OK;
out:
    if (loaded == 1)
        rc = GJ_RUN_CANCELED;
    brkga_result_free(&res);
    brkga_problem_free(&pb);
    free(initial);
    json_decref(p);
    return rc;
}

/* result.json and statistics.csv hold the run's times. */
static const char *const brkga_run_records[] = { "result.json", "statistics.csv", NULL };

/* The seed is chosen at submit when none is given, so the job's params keep it. */
static int brkga_complete_params(json_t *params)
{
    if (json_object_get(params, "seed"))
        return 0;
    return json_object_set_new(params, "seed", json_integer(gj_fresh_seed()));
}

static int brkga_environment(const struct gj_job *job, int device, json_t *env)
{
    (void)device;
    json_t *seed = json_object_get(job->params, "seed");
    return seed && json_object_set(env, "seed", seed) ? -1 : 0;
}

const struct gj_kind gj_kind_brkga = {
    .name = "brkga",
    .summary = "Biased random-key GA: IP/MPLS-over-WSON network design (thesis decoder) or TSP",
    .params_schema = brkga_schema,
    .inputs = brkga_inputs,
    .n_inputs = sizeof brkga_inputs / sizeof brkga_inputs[0],
    .validate = brkga_validate,
    .estimate = brkga_estimate,
    .run = brkga_run,
    .host_bytes_floor = brkga_host_floor,
    .version = "1",
    .reproducible = GJ_REPRO_CPU | GJ_REPRO_GPU,
    .run_record_outputs = brkga_run_records,
    .complete_params = brkga_complete_params,
    .environment = brkga_environment,
};
