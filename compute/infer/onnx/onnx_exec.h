/*
 * onnx_exec.h — the executor's state, shared by onnx_session.c (a session's life: creation
 * in phases, runs, teardown) and the files of its phases:
 *   onnx_schedule.c  a topological order of the nodes;
 *   onnx_shape.c     shape inference, one function per operator (family);
 *   onnx_optimize.c  constant folding, dead-code elimination, fusions;
 *   onnx_plan.c      storage classes, lifetimes, the arena plan, buffers, kernel arguments.
 * Values are indexed as in the model (struct onnx_model's values); runtime nodes are the
 * model's nodes in schedule order.
 */
#ifndef ONNX_EXEC_H
#define ONNX_EXEC_H

#include "infer/onnx/onnx_ir.h"

#define ONNX_MAX_TENSOR_BYTES ((int64_t)1 << 32)   /* one intermediate tensor */
#define ONNX_MAX_ELEMS ((int64_t)1 << 31)

/* Where a value lives during a run. */
enum { ST_NONE = 0, ST_CONST, ST_INPUT, ST_ARENA, ST_ALIAS };

struct tinfo {
    struct onnx_tensor t;     /* shape and element type; data: backend pointer once planned */
    int is_const;             /* value known at session creation (host in hdata) */
    void *hdata;              /* host value of a constant */
    int own_hdata;
    int storage;
    int alias_of;             /* ST_ALIAS: the value whose storage this one shares */
    size_t alias_off;         /* ST_ALIAS: at this byte offset (a Concat's slice, onnx_plan_concat.c) */
    size_t offset;            /* ST_ARENA */
    int def, last;            /* schedule steps */
    int n_consumers;
    void *dev;                /* ST_CONST / ST_INPUT: backend buffer owned by the session */
};

struct rnode {
    const struct onnx_node *n;
    int op;
    struct onnx_params p;     /* the node's, completed by shape inference and fusion */
    int n_in, n_out;
    int *in, *out;            /* value indices (in: -1 for absent) */
    int alias;                /* view op: no kernel call */
    int dead;
    int fused_out[1];         /* out[] of a node with a fused ReLU or a folded BatchNormalization */
    int fused_in[3];          /* in[] of a Conv with a folded BatchNormalization */
    int out_fused, in_fused;  /* out / in point to fused_out / fused_in */
    const struct onnx_tensor **ain;
    struct onnx_tensor **aout;
    struct onnx_kargs a;
};

struct onnx_session {
    const onnx_model *m;
    const struct onnx_backend *be;
    struct onnx_backend_ctx *bctx;
    size_t n_values;
    struct tinfo *v;
    struct rnode *r;          /* runtime nodes in schedule order */
    size_t n_r;
    void *arena, *scratch;
    size_t arena_bytes, scratch_bytes, naive_bytes, const_bytes, n_folded, n_run;
    size_t alloc_bytes;       /* everything allocated through be->alloc */
    size_t max_bytes;         /* the options' limit (0: none) */
    size_t fold_bytes;        /* host values computed by constant folding */
    struct onnx_io_desc *in_desc, *out_desc;
    const char *convolutions; /* onnx_session_convolutions (interned) */
    int profile;              /* time per op type (onnx_session_write_profile) */
    double prof_s[ONNX_OP_COUNT];
    long prof_n[ONNX_OP_COUNT];
};

/* onnx_io.c: every graph input's shape for this session (a batch dimension or none, the sizes
 * opt->input_shapes gives), in s->v and s->in_desc. */
int onnx_bind_inputs(struct onnx_session *s, const struct onnx_session_options *opt, struct gj_error *err);
/* onnx_io.c: the values of input i that a run is given, where its type restricts them (BOOL: 0
 * or 1; STRING: bytes behind every non-empty element). */
int onnx_check_input_values(const struct onnx_session *s, size_t i, const void *data, struct gj_error *err);
/* onnx_session.c: one run (inputs and outputs by position); all_outputs = 0: outputs without a
 * buffer are dropped. */
int onnx_session_exec(struct onnx_session *s, const void *const *inputs, void *const *outputs, int all_outputs,
                      struct gj_error *err);

/* onnx_schedule.c: a topological order of m's nodes (Kahn), refusing cycles, values defined
 * twice and values nothing defines. order has m->n_nodes entries. */
int onnx_schedule(const onnx_model *m, int *order, struct gj_error *err);

/* onnx_shape.c: t's element type and shape; -1 when it would be over the limits. */
int onnx_set_shape(struct onnx_tensor *t, int elem, int rank, const int64_t *dims);
/* onnx_shape.c: the types and shapes of rn's outputs from its inputs' (v: the session's values
 * of model m), and the parameters that depend on them (pads, axes, slices...). -1 with err
 * naming the node (and the input whose type it does not take). */
int onnx_infer_shape(const onnx_model *m, struct tinfo *v, struct rnode *rn, struct gj_error *err);

/* onnx_optimize.c: evaluates rn on the host (its inputs are constants); its outputs become
 * constants. */
int onnx_fold(struct onnx_session *s, struct rnode *rn, struct gj_error *err);
/* onnx_optimize.c: drops nodes no output needs (counting consumers), folds BatchNormalization
 * into Conv, fuses ReLU into its producer, then compacts s->r to the live nodes. */
int onnx_optimize(struct onnx_session *s, struct gj_error *err);

/* onnx_plan.c: storage and lifetimes, the arena plan, the memory limit (max_bytes, 0: none),
 * buffers (constants uploaded) and every kernel call's arguments and scratch. */
int onnx_plan(struct onnx_session *s, size_t max_bytes, int batch, struct gj_error *err);
/* onnx_plan_concat.c: Concats whose inputs are written in place, before lifetimes are extended. */
void onnx_plan_concats(struct onnx_session *s);
/* onnx_plan_layout.c: activations kept NHWC between kernels that take it (the backend's
 * takes_nhwc), once every call's arguments are set and before their scratch is asked for. */
void onnx_plan_layouts(struct onnx_session *s);
/* onnx_plan.c: frees the buffers onnx_plan allocated. */
void onnx_plan_free(struct onnx_session *s);
/* onnx_conv_summary.c: a Conv's shape in words ("x 8x64x56x56 w 64x64x3x3 pads 1,1,1,1
 * strides 1,1 dilations 1,1 group 1"), into buf. */
void onnx_conv_shape_text(const struct onnx_kargs *a, char *buf, size_t len);
/* onnx_conv_summary.c: the n lines ("shape: implementation") sorted (in place), without
 * repeats, joined by newlines, as the process's interned copy (equal texts: one pointer;
 * never freed). "" for none; NULL when out of memory. */
const char *onnx_conv_summary(char **lines, size_t n);
/* ": <the backend's last error>" into buf, or "" */
const char *onnx_backend_detail(const struct onnx_session *s, char *buf, size_t len);

#endif
