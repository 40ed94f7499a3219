/*
 * gj_kind.h — the compute module interface (ARCHITECTURE.md: the modules).
 *
 * A job kind is a struct of functions. The service, the `gpujobd run` command
 * and the GPU tests all drive a kind through this header alone: a module knows
 * nothing of HTTP or SQL. It receives parameters (a jansson object), input files
 * and a context, and writes output files into ctx->output_dir.
 */
#ifndef GJ_KIND_H
#define GJ_KIND_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/gj_error.h"

struct gj_schema;   /* common/json_schema.h */

/* The device a job runs on: a CUDA device index, or GJ_DEVICE_CPU. */
#define GJ_DEVICE_CPU (-1)

/* What run() returns. */
enum gj_run_result {
    GJ_RUN_OK = 0,            /* outputs written; the job succeeds */
    GJ_RUN_FAILED = -1,       /* err says why; permanent unless err->transient */
    GJ_RUN_WAIT_CHILDREN = 1, /* children were spawned; run again at stage+1 once they finish */
    GJ_RUN_CANCELED = 2,      /* ctx->cancelled() said so and the module stopped */
};

/* One named input of a job: a file the worker materialized (path), or, at
 * validation time before any download, only its name and size (path NULL). At validation
 * time an input may be another job's output not written yet: its size is
 * GJ_INPUT_SIZE_UNKNOWN, and a check of its size waits for the run (which reads the file). */
#define GJ_INPUT_SIZE_UNKNOWN UINT64_MAX
struct gj_input {
    const char *name;
    const char *path;
    uint64_t size;
};

/* Describes one input a kind accepts, for GET /v1/kinds and submit checks. */
struct gj_input_spec {
    const char *name;
    int required;
    int multiple;              /* may repeat (name, name.1, ...): e.g. several DICOM files */
    const char *description;
};

struct gj_job {
    const char *kind;
    json_t *params;            /* the params object (borrowed) */
    const struct gj_input *inputs;
    size_t n_inputs;
};

/* Finds an input by exact name; NULL when absent. */
const struct gj_input *gj_job_input(const struct gj_job *job, const char *name);

/* What a job needs to run: filled by estimate(). */
struct gj_needs {
    int can_use_gpu;           /* 1: the module has a GPU path */
    int needs_gpu;             /* 1: it cannot run on the CPU at all */
    uint64_t device_bytes;     /* device memory to reserve when placed on a GPU */
    /* Host memory the run adds at its peak (resident bytes over the worker's own), an
     * upper bound for any placement and thread count: host admission reserves it.
     * Tests hold each kind's estimate within [measured peak, 3x measured + 64 MiB]. */
    uint64_t host_bytes;
};

/* Result of one finished child, visible to the parent at stage > 0. */
struct gj_child_result {
    const char *id;
    int index;                 /* the order in which the parent spawned it */
    const char *output_dir;    /* the child's outputs, materialized */
};

struct gj_ctx {
    const struct gj_job *job;
    int device;                /* CUDA index or GJ_DEVICE_CPU */
    int cpu_threads;           /* threads the module may use */
    uint64_t device_bytes_limit;  /* device memory reserved for it (0: no limit known) */
    const char *scratch_dir;   /* private temporary space, removed after the run */
    const char *output_dir;    /* every file here becomes an output, named by its file name */
    int stage;                 /* 0 on the first run; n after the n-th wait for children */
    const struct gj_child_result *children;
    size_t n_children;

    /* Hooks supplied by the host (service worker, CLI, test). */
    void *host;
    void (*progress)(struct gj_ctx *ctx, double fraction, const char *message);
    int  (*cancelled)(struct gj_ctx *ctx);
    void (*log)(struct gj_ctx *ctx, const char *message);
    /* Queue a child job; NULL where the host cannot split (the CLI runs them inline). */
    int  (*spawn_child)(struct gj_ctx *ctx, const char *kind, json_t *params,
                        const struct gj_input *inputs, size_t n_inputs, struct gj_error *err);
    /* Adds key: value (stolen) to this attempt's recorded environment (gj_provenance.h):
     * what the run itself chose that changes bits, known only once it ran (the convolution
     * algorithms of the model's shapes). NULL where the host records none (the CLI). */
    int  (*record)(struct gj_ctx *ctx, const char *key, json_t *value);
};

/* Convenience wrappers that tolerate missing hooks. */
void gj_progress(struct gj_ctx *ctx, double fraction, const char *message);
int  gj_cancelled(struct gj_ctx *ctx);
void gj_logf(struct gj_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ctx->record, or drops value where the host has none. 0, or -1. */
int  gj_record_environment(struct gj_ctx *ctx, const char *key, json_t *value);

struct gj_kind {
    const char *name;
    const char *summary;             /* one line for GET /v1/kinds */
    const char *params_schema;       /* JSON Schema (draft 2020-12) of params */
    const struct gj_input_spec *inputs;
    size_t n_inputs;
    /* Checks params and inputs (names, sizes; paths are NULL) before anything is
     * queued. The generic schema check has already passed. 0 or -1 with err. */
    int (*validate)(const struct gj_job *job, struct gj_error *err);
    /* Fills needs. May read the inputs (paths are set). 0 or -1 with err. */
    int (*estimate)(const struct gj_job *job, struct gj_needs *needs, struct gj_error *err);
    /* Runs the job; returns an enum gj_run_result. Long loops check gj_cancelled() and
     * report gj_progress() at least once a second (gj_poll.h does both from parallel
     * loops); a cancelled run returns GJ_RUN_CANCELED promptly. */
    int (*run)(struct gj_ctx *ctx, struct gj_error *err);
    /* Optional, submit time like validate (paths are NULL): a lower bound of host_bytes
     * from params and input sizes alone, what the job needs whatever its inputs hold,
     * so that the service refuses at once a job that can never fit the host. 0: none known. */
    uint64_t (*host_bytes_floor)(const struct gj_job *job);
    /* Provenance (gj_provenance.h). The kind's own version: changed whenever the same
     * params and inputs could give other bits. */
    const char *version;
    /* What a rerun on the same device class promises (GJ_REPRO_*), and the outputs that
     * also record the run itself (timings, fresh UIDs), which a rerun does not compare: names or
     * fnmatch(3) patterns, NULL-terminated. */
    unsigned reproducible;
    const char *const *run_record_outputs;
    /* Optional, at submit after validation: writes into params the choices the kind would
     * otherwise make at run time (a random seed), so the job keeps them and a rerun repeats
     * them. 0, or -1 (out of memory). */
    int (*complete_params)(json_t *params);
    /* Optional, at the start of each attempt: adds to env what else determines the result
     * (library versions, a model's digest, precision). 0, or -1. */
    int (*environment)(const struct gj_job *job, int device, json_t *env);
};

/* gj_kind.reproducible: bit-identical outputs on a rerun on the CPU (of the same
 * architecture), on a GPU of the same model. */
#define GJ_REPRO_CPU 1u
#define GJ_REPRO_GPU 2u

/* The registry (compute/registry.c). */
size_t gj_kind_count(void);
const struct gj_kind *gj_kind_at(size_t i);
const struct gj_kind *gj_kind_find(const char *name);

/* The compiled params schema of kind, compiled at the first call and kept for the process
 * (kind_schema.c). NULL with err (status 500) when the schema does not parse or the
 * validator refuses it. Thread-safe. */
const struct gj_schema *gj_kind_schema(const struct gj_kind *kind, struct gj_error *err);
/* Compiles every registered kind's params schema: start-up calls it, so a schema the
 * validator refuses stops the service before any submit. 0, or -1 with err naming the kind. */
int gj_kind_schemas_compile(struct gj_error *err);

/* Full submit-time validation: schema, inputs against the kind's specs, then
 * the kind's own validate(). */
int gj_kind_validate(const struct gj_kind *kind, const struct gj_job *job, struct gj_error *err);
/* After gj_kind_validate passed: the kind's host_bytes_floor, or 0 when it has none. */
uint64_t gj_kind_host_bytes_floor(const struct gj_kind *kind, const struct gj_job *job);

/* A benchmark program reachable as `gpujobd bench NAME ...`. */
struct gj_bench {
    const char *name;
    const char *summary;
    int (*main)(int argc, char **argv);
};
size_t gj_bench_count(void);
const struct gj_bench *gj_bench_at(size_t i);

#endif
