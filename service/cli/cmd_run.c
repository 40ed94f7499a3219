/*
 * cmd_run.c — `gpujobd run KIND --params FILE [--input NAME=FILE]... --out DIR`:
 * runs one job in this process, with no server and no database. Children a
 * module spawns run inline, one after another, before the parent's next stage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/gj_kind.h"
#include "service/cli/cli.h"
#include "service/config.h"
#include "service/jobs/devices.h"
#include "service/module.h"

#define MAX_INPUTS 256
#define MAX_CHILDREN 4096

struct cli_child {
    const struct gj_kind *kind;
    json_t *params;
    struct gj_input *inputs;
    size_t n_inputs;
};

struct cli_host {
    int quiet;
    struct cli_child *children;
    size_t n_children;
};

static void cli_progress(struct gj_ctx *ctx, double fraction, const char *message)
{
    struct cli_host *h = ctx->host;
    if (!h->quiet && message)
        fprintf(stderr, "[%5.1f%%] %s\n", fraction * 100.0, message);
}

static void cli_log(struct gj_ctx *ctx, const char *message)
{
    struct cli_host *h = ctx->host;
    if (!h->quiet)
        fprintf(stderr, "%s\n", message);
}

static int cli_spawn(struct gj_ctx *ctx, const char *kind, json_t *params,
                     const struct gj_input *inputs, size_t n, struct gj_error *err)
{
    struct cli_host *h = ctx->host;
    const struct gj_kind *k = gj_kind_find(kind);
    if (!k)
        return gj_error_set(err, "", "internal: child kind %s is unknown", kind);
    if (h->n_children >= MAX_CHILDREN)
        return gj_error_set(err, "", "too many child tasks (limit %d)", MAX_CHILDREN);
    struct cli_child *grown = realloc(h->children, (h->n_children + 1) * sizeof *grown);
    if (!grown)
        return gj_error_set(err, "", "out of memory");
    h->children = grown;
    struct cli_child *c = &h->children[h->n_children];
    c->kind = k;
    c->params = json_deep_copy(params);
    c->inputs = calloc(n ? n : 1, sizeof *c->inputs);
    c->n_inputs = n;
    if (!c->params || !c->inputs) {
        json_decref(c->params);
        free(c->inputs);
        return gj_error_set(err, "", "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        c->inputs[i].name = strdup(inputs[i].name);
        c->inputs[i].path = inputs[i].path ? strdup(inputs[i].path) : NULL;
        c->inputs[i].size = inputs[i].size;
    }
    h->n_children++;
    return 0;
}

static void free_children(struct cli_host *h)
{
    for (size_t i = 0; i < h->n_children; i++) {
        json_decref(h->children[i].params);
        for (size_t j = 0; j < h->children[i].n_inputs; j++) {
            free((char *)h->children[i].inputs[j].name);
            free((char *)h->children[i].inputs[j].path);
        }
        free(h->children[i].inputs);
    }
    free(h->children);
    h->children = NULL;
    h->n_children = 0;
}

static int run_one(const struct gj_kind *kind, const struct gj_job *job, int device,
                   const char *out_dir, int depth, int quiet, struct gj_error *err);

/* Runs the children a stage spawned, each into out_dir/child-N, and fills results. */
static int run_children(struct cli_host *h, int device, const char *out_dir, int depth,
                        struct gj_child_result **results, char ***dirs, struct gj_error *err)
{
    *results = calloc(h->n_children ? h->n_children : 1, sizeof **results);
    *dirs = calloc(h->n_children ? h->n_children : 1, sizeof **dirs);
    if (!*results || !*dirs)
        return gj_error_set(err, "", "out of memory");
    for (size_t i = 0; i < h->n_children; i++) {
        char dir[GJ_PATH_MAX];
        if (snprintf(dir, sizeof dir, "%s/.children/%zu", out_dir, i) >= (int)sizeof dir)
            return gj_error_set(err, "", "output directory path too long: %s", out_dir);
        if (gj_mkdir_p(dir, 0755))
            return gj_error_set(err, "", "cannot create %s: %s", dir, strerror(errno));
        (*dirs)[i] = strdup(dir);
        struct cli_child *c = &h->children[i];
        struct gj_job job = { c->kind->name, c->params, c->inputs, c->n_inputs };
        if (gj_kind_validate(c->kind, &job, err))
            return -1;
        if (run_one(c->kind, &job, device, dir, depth + 1, h->quiet, err))
            return -1;
        (*results)[i].id = (*dirs)[i];
        (*results)[i].index = (int)i;
        (*results)[i].output_dir = (*dirs)[i];
    }
    return 0;
}

static int run_one(const struct gj_kind *kind, const struct gj_job *job, int device,
                   const char *out_dir, int depth, int quiet, struct gj_error *err)
{
    if (depth > 4)
        return gj_error_set(err, "", "child tasks nested too deeply");
    char scratch[GJ_PATH_MAX];
    if (gj_make_temp_dir(scratch, sizeof scratch, "gpujobd-run") != 0)
        return gj_error_set(err, "", "cannot create a scratch directory: %s", strerror(errno));

    struct cli_host host = { .quiet = quiet };
    struct gj_ctx ctx = {
        .job = job,
        .device = device,
        .cpu_threads = (int)sysconf(_SC_NPROCESSORS_ONLN),
        .scratch_dir = scratch,
        .output_dir = out_dir,
        .host = &host,
        .progress = cli_progress,
        .log = cli_log,
        .spawn_child = cli_spawn,
    };
    struct gj_child_result *results = NULL;
    char **dirs = NULL;
    size_t n_results = 0;
    int rc = -1;
    for (;;) {
        int r = kind->run(&ctx, err);
        if (r == GJ_RUN_OK) {
            rc = 0;
            break;
        }
        if (r != GJ_RUN_WAIT_CHILDREN) {
            if (r == GJ_RUN_CANCELED)
                gj_error_set(err, "", "canceled");
            break;
        }
        for (size_t i = 0; i < n_results; i++)
            free(dirs[i]);
        free(results);
        free(dirs);
        results = NULL;
        dirs = NULL;
        n_results = host.n_children;
        if (run_children(&host, device, out_dir, depth, &results, &dirs, err))
            break;
        free_children(&host);
        ctx.children = results;
        ctx.n_children = n_results;
        ctx.stage++;
    }
    for (size_t i = 0; i < n_results && dirs; i++)
        free(dirs[i]);
    free(results);
    free(dirs);
    free_children(&host);
    if (!depth) {
        char children[GJ_PATH_MAX];
        if (gj_path_join(children, sizeof children, out_dir, ".children") == 0)
            gj_rm_rf(children);
    }
    gj_rm_rf(scratch);
    return rc;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: gpujobd run KIND --params FILE [--input NAME=FILE]... --out DIR\n"
            "                        [--device cpu|N] [--models-dir DIR] [--quiet]\n");
}

static size_t n_modules(void)
{
    size_t n = 0;
    while (gj_service_modules[n])
        n++;
    return n;
}

/* What the modules' kinds need from the host (module.h's run_open: infer's model
 * repository of --models-dir, default ./models): one entry per module, for close_hosts;
 * NULL when out of memory. */
static void **open_hosts(const char *models_dir)
{
    void **opened = calloc(n_modules() + 1, sizeof *opened);
    for (size_t m = 0; opened && gj_service_modules[m]; m++)
        if (gj_service_modules[m]->run_open)
            opened[m] = gj_service_modules[m]->run_open(models_dir);
    return opened;
}

static void close_hosts(void **opened)
{
    for (size_t m = n_modules(); opened && m-- > 0;)
        if (gj_service_modules[m]->run_close)
            gj_service_modules[m]->run_close(opened[m]);
    free(opened);
}

/* The command line of one run. */
struct run_args {
    const char *params_path, *out_dir, *device_arg;
    const char *models_dir;              /* --models-dir (infer's repository), default ./models */
    const struct gj_kind *kind;
    struct gj_input inputs[MAX_INPUTS];
    size_t n_inputs;
    int quiet;
};

/* --input NAME=FILE: the file must exist (its size goes to validate). 0, or 2. */
static int add_input(struct run_args *a, char *arg)
{
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1] || a->n_inputs == MAX_INPUTS) {
        fprintf(stderr, "gpujobd run: --input wants NAME=FILE (got '%s')\n", arg);
        return 2;
    }
    *eq = '\0';
    struct gj_input *in = &a->inputs[a->n_inputs];
    in->name = arg;
    in->path = eq + 1;
    if (gj_file_size(in->path, &in->size)) {
        fprintf(stderr, "gpujobd run: input %s: %s: %s\n", arg, in->path, strerror(errno));
        return 2;
    }
    a->n_inputs++;
    return 0;
}

/* 0 parsed, else the exit status: 0 after --help, 2 on a usage error. */
static int parse_args(int argc, char **argv, struct run_args *a, int *exit_status)
{
    static const struct option opts[] = {
        { "params", required_argument, NULL, 'p' },
        { "input", required_argument, NULL, 'i' },
        { "out", required_argument, NULL, 'o' },
        { "device", required_argument, NULL, 'd' },
        { "quiet", no_argument, NULL, 'q' },
        { "models-dir", required_argument, NULL, 'm' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    *exit_status = 2;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "p:i:o:d:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'p': a->params_path = optarg; break;
        case 'o': a->out_dir = optarg; break;
        case 'd': a->device_arg = optarg; break;
        case 'q': a->quiet = 1; break;
        case 'm': a->models_dir = optarg; break;
        case 'i':
            if (add_input(a, optarg))
                return -1;
            break;
        default:
            usage();
            *exit_status = c == 'h' ? 0 : 2;
            return -1;
        }
    }
    if (optind >= argc || !a->out_dir) {
        usage();
        return -1;
    }
    a->kind = gj_kind_find(argv[optind]);
    if (!a->kind) {
        fprintf(stderr, "gpujobd run: unknown kind '%s'; known:", argv[optind]);
        for (size_t i = 0; i < gj_kind_count(); i++)
            fprintf(stderr, " %s", gj_kind_at(i)->name);
        fputc('\n', stderr);
        return -1;
    }
    return 0;
}

/* --device N, or GPU 0 when there is one and the kind can use it, else the CPU.
 * 0, or -1 after a message. */
static int pick_device(const struct run_args *a, const struct gj_job *job, int *device)
{
    *device = GJ_DEVICE_CPU;
    if (a->device_arg && strcmp(a->device_arg, "cpu") != 0) {
        char *end;
        long d = strtol(a->device_arg, &end, 10);
        if (*end || d < 0 || d >= gj_device_count()) {
            fprintf(stderr, "gpujobd run: --device %s: no such GPU (%d found)\n", a->device_arg,
                    gj_device_count());
            return -1;
        }
        *device = (int)d;
    } else if (!a->device_arg && gj_device_count() > 0) {
        struct gj_needs needs = { 0 };
        struct gj_error err = { 0 };
        if (a->kind->estimate && a->kind->estimate(job, &needs, &err) == 0 && needs.can_use_gpu)
            *device = 0;
    }
    return 0;
}

/* Validates, places and runs the job; the exit status. */
static int run_job(const struct run_args *a, const struct gj_job *job)
{
    struct gj_error err = { 0 };
    int device;
    if (gj_kind_validate(a->kind, job, &err)) {
        fprintf(stderr, "gpujobd run: invalid job: %s\n", err.message);
        return 2;
    }
    if (pick_device(a, job, &device) != 0)
        return 2;
    if (gj_mkdir_p(a->out_dir, 0755)) {
        fprintf(stderr, "gpujobd run: cannot create %s: %s\n", a->out_dir, strerror(errno));
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (run_one(a->kind, job, device, a->out_dir, 0, a->quiet, &err)) {
        fprintf(stderr, "gpujobd run: %s failed: %s\n", a->kind->name, err.message);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!a->quiet)
        fprintf(stderr, "gpujobd run: %s finished on %s in %.3f s; outputs in %s\n", a->kind->name,
                device == GJ_DEVICE_CPU ? "cpu" : "gpu", (double)(t1.tv_sec - t0.tv_sec) +
                (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, a->out_dir);
    return 0;
}

int gj_cmd_run(int argc, char **argv)
{
    struct run_args a = { 0 };
    struct gj_test_switches test;
    int status;
    if (parse_args(argc, argv, &a, &status) != 0)
        return status;
    if (gj_config_load_test_switches(&test) != 0)   /* GPUJOBD_FAKE_GPUS */
        return 2;
    json_t *params;
    json_error_t jerr;
    if (a.params_path) {
        params = json_load_file(a.params_path, JSON_REJECT_DUPLICATES, &jerr);
        if (!params) {
            fprintf(stderr, "gpujobd run: %s:%d: %s\n", a.params_path, jerr.line, jerr.text);
            return 2;
        }
    } else {
        params = json_object();
    }
    void **opened = open_hosts(a.models_dir ? a.models_dir : "./models");
    if (!opened) {
        fprintf(stderr, "gpujobd run: out of memory\n");
        json_decref(params);
        return 1;
    }
    struct gj_job job = { a.kind->name, params, a.inputs, a.n_inputs };
    status = run_job(&a, &job);
    close_hosts(opened);
    json_decref(params);
    return status;
}
