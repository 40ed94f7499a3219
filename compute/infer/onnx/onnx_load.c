/*
 * onnx_load.c — ONNX protobuf -> struct onnx_model, with every length bounded.
 *
 * The protobuf is decoded by protobuf-c (code generated from onnx.proto at build time)
 * through an allocator with a budget, so a hostile file cannot make the decoder allocate
 * much more than the file's size. Everything the runtime does not implement (an operator,
 * an attribute, an attribute value, a data type, external data, subgraphs) is refused
 * here with its name. This file builds the graph (the name table, then initializers, inputs,
 * nodes, outputs); onnx_proto.c reads tensors and value infos, onnx_ops.c knows the
 * operators' names and arity, onnx_attrs.c reads node attributes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "infer/onnx/onnx_proto.h"

/* Caps on what a model may declare. */
#define MAX_NODES 100000
#define MAX_VALUES 400000

/* ---- a protobuf-c allocator with a budget ------------------------------------------ */

struct budget {
    size_t used, cap;
};

static void *budget_alloc(void *ad, size_t n)
{
    struct budget *b = ad;
    if (n > b->cap - b->used || n > SIZE_MAX - 16)
        return NULL;
    size_t *p = malloc(n + 16);
    if (!p)
        return NULL;
    b->used += n;
    p[0] = n;
    return (char *)p + 16;
}

static void budget_free(void *ad, void *ptr)
{
    struct budget *b = ad;
    if (!ptr)
        return;
    size_t *p = (size_t *)((char *)ptr - 16);
    b->used -= p[0];
    free(p);
}

/* ---- name table ---------------------------------------------------------------------- */

struct names {
    size_t cap;       /* power of two */
    int *slot;        /* value index or -1 */
    struct onnx_model *m;
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot holding `name`, or the empty slot where it would go (linear probing). */
static size_t names_slot(const struct names *t, const char *name)
{
    size_t i = hash_str(name) & (t->cap - 1);
    while (t->slot[i] >= 0 && strcmp(t->m->values[t->slot[i]].name, name) != 0)
        i = (i + 1) & (t->cap - 1);
    return i;
}

static int names_find(const struct names *t, const char *name)
{
    return t->slot[names_slot(t, name)];
}

static int names_add(struct names *t, const char *name, int *created, struct gj_error *err)
{
    size_t i = names_slot(t, name);
    if (t->slot[i] >= 0) {
        *created = 0;
        return t->slot[i];
    }
    struct onnx_model *m = t->m;
    if (m->n_values >= MAX_VALUES)
        return gj_error_set(err, "model", "the graph names more than %d values", MAX_VALUES);
    struct onnx_value *v = &m->values[m->n_values];
    memset(v, 0, sizeof *v);
    v->name = strdup(name);
    if (!v->name)
        return gj_error_set(err, "model", "out of memory");
    v->rank = -1;
    t->slot[i] = (int)m->n_values;
    *created = 1;
    return (int)m->n_values++;
}

/* ---- tensors --------------------------------------------------------------------------- */

/* ---- the model ------------------------------------------------------------------------------- */

void onnx_model_free(onnx_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_nodes; i++) {
        free(m->nodes[i].name);
        free(m->nodes[i].in);
        free(m->nodes[i].out);
        onnx_tensor_free_data(&m->nodes[i].p.value);
    }
    for (size_t i = 0; i < m->n_values; i++) {
        free(m->values[i].name);
        if (m->values[i].init) {
            onnx_tensor_free_data(m->values[i].init);
            free(m->values[i].init);
        }
    }
    free(m->nodes);
    free(m->values);
    free(m->inputs);
    free(m->outputs);
    free(m->in_desc);
    free(m->out_desc);
    free(m);
}

/* A value's declared type and shape as the caller sees it. */
static void io_desc(const struct onnx_value *v, struct onnx_io_desc *d)
{
    d->name = v->name;
    d->elem_type = v->elem;
    d->rank = v->rank;
    for (int i = 0; i < v->rank && i < ONNX_MAX_RANK; i++)
        d->dims[i] = v->dims[i];
}

/* What the phases of building one model share. */
struct loader {
    const Onnx__GraphProto *g;
    onnx_model *m;
    struct names nt;
    struct gj_error *err;
};

/* The opset of the default domain (1 when the model imports none), or -1. */
static int64_t default_opset(const Onnx__ModelProto *mp)
{
    int64_t opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const char *d = mp->opset_import[i]->domain;
        if (!d || !d[0] || strcmp(d, "ai.onnx") == 0)
            opset = mp->opset_import[i]->has_version ? mp->opset_import[i]->version : -1;
    }
    if (opset < 0 && mp->n_opset_import == 0)
        opset = 1;
    return opset;
}

/* The model's versions and the graph's counts, before anything is allocated. */
static int check_header(const Onnx__ModelProto *mp, int64_t opset, struct gj_error *err)
{
    const Onnx__GraphProto *g = mp->graph;
    if (!g)
        return gj_error_set(err, "model", "the file holds no graph (is it an ONNX model?)");
    if (mp->has_ir_version && (mp->ir_version < 3 || mp->ir_version > 10))
        return gj_error_set(err, "model", "ONNX IR version %lld is not supported (3 to 10)",
                            (long long)mp->ir_version);
    if (opset < 11 || opset > 20)
        return gj_error_set(err, "model", "the model uses ONNX opset %lld; supported: 11 to 20 "
                            "(re-export with opset_version=17)", (long long)opset);
    if (g->n_sparse_initializer)
        return gj_error_set(err, "model", "sparse initializers are not supported");
    if (g->n_node > MAX_NODES)
        return gj_error_set(err, "model", "the graph has %zu nodes (at most %d)", g->n_node, MAX_NODES);
    /* (older exporters list every initializer as a graph input too: those are not counted) */
    if (g->n_input > MAX_VALUES || g->n_output > ONNX_MAX_IO || g->n_output == 0)
        return gj_error_set(err, "model", "the graph has %zu outputs (1 to %d)", g->n_output, ONNX_MAX_IO);
    if (g->n_initializer > MAX_VALUES)
        return gj_error_set(err, "model", "too many initializers");
    return 0;
}

/* The model's arrays and the name table, sized for every value the graph can name. */
static int alloc_model(struct loader *l)
{
    const Onnx__GraphProto *g = l->g;
    onnx_model *m = l->m;
    size_t max_values = g->n_initializer + g->n_input;
    for (size_t i = 0; i < g->n_node; i++) {
        if (g->node[i]->n_output > 16 || g->node[i]->n_input > 4096)
            return gj_error_set(l->err, "model", "node %zu has too many inputs or outputs", i);
        max_values += g->node[i]->n_output + g->node[i]->n_input;
    }
    if (max_values > MAX_VALUES)
        return gj_error_set(l->err, "model", "the graph names too many values");
    m->values = calloc(max_values + 1, sizeof *m->values);
    m->nodes = calloc(g->n_node + 1, sizeof *m->nodes);
    m->inputs = calloc(g->n_input + 1, sizeof(int));
    m->outputs = calloc(g->n_output + 1, sizeof(int));
    m->in_desc = calloc(g->n_input + 1, sizeof *m->in_desc);
    m->out_desc = calloc(g->n_output + 1, sizeof *m->out_desc);
    l->nt = (struct names){ .cap = 16, .m = m };
    while (l->nt.cap < 2 * (max_values + 1))
        l->nt.cap *= 2;
    l->nt.slot = malloc(l->nt.cap * sizeof *l->nt.slot);
    if (!m->values || !m->nodes || !m->inputs || !m->outputs || !m->in_desc || !m->out_desc || !l->nt.slot)
        return gj_error_set(l->err, "model", "out of memory");
    memset(l->nt.slot, 0xff, l->nt.cap * sizeof *l->nt.slot);
    return 0;
}

static int add_initializer(struct loader *l, size_t i)
{
    const Onnx__TensorProto *tp = l->g->initializer[i];
    struct gj_error *err = l->err;
    int created;
    if (!tp->name || !tp->name[0] || onnx_check_name(tp->name, "tensor", err)) {
        if (!err || !err->message[0])
            gj_error_set(err, "model", "initializer %zu has no name", i);
        return -1;
    }
    int vi = names_add(&l->nt, tp->name, &created, err);
    if (vi < 0)
        return -1;
    if (!created)
        return gj_error_set(err, "model", "initializer '%s' is defined twice", tp->name);
    struct onnx_value *v = &l->m->values[vi];
    v->init = calloc(1, sizeof *v->init);
    if (!v->init)
        return gj_error_set(err, "model", "out of memory");
    if (onnx_tensor_from_proto(tp, v->init, tp->name, err))
        return -1;
    v->elem = v->init->elem;
    v->rank = v->init->rank;
    memcpy(v->dims, v->init->dims, sizeof v->dims);
    return 0;
}

/* Graph input i (one with an initializer is a constant with a default: not an input here). */
static int add_input(struct loader *l, size_t i)
{
    const Onnx__ValueInfoProto *vi = l->g->input[i];
    onnx_model *m = l->m;
    struct gj_error *err = l->err;
    int created;
    if (!vi->name || !vi->name[0] || onnx_check_name(vi->name, "input", err))
        return gj_error_set(err, "model", "graph input %zu has no valid name", i);
    int v = names_add(&l->nt, vi->name, &created, err);
    if (v < 0)
        return -1;
    struct onnx_value *val = &m->values[v];
    if (val->init)
        return 0;
    if (!created)
        return gj_error_set(err, "model", "graph input '%s' is listed twice", vi->name);
    if (onnx_value_info(vi, val, err))
        return -1;
    if (m->n_inputs >= ONNX_MAX_IO)
        return gj_error_set(err, "model", "the graph has more than %d inputs", ONNX_MAX_IO);
    if (val->rank < 0 || val->elem == 0)
        return gj_error_set(err, "model", "graph input '%s' has no tensor type or shape", val->name);
    val->is_input = 1;
    m->inputs[m->n_inputs] = v;
    io_desc(val, &m->in_desc[m->n_inputs]);
    m->n_inputs++;
    return 0;
}

/* The operator of node np (named nname), or -1 with err. */
static int node_op(const Onnx__NodeProto *np, const char *nname, struct gj_error *err)
{
    const char *opn = np->op_type ? np->op_type : "";
    if (np->domain && np->domain[0] && strcmp(np->domain, "ai.onnx") != 0)
        return gj_error_set(err, "model", "node '%s': operator '%s' of domain '%.64s' is not supported",
                            nname, opn, np->domain);
    int op = onnx_op_find(opn);
    if (op < 0)
        return gj_error_set(err, "model", "node '%s': operator '%.128s' is not supported", nname, opn);
    return op;
}

/* How many outputs of np the runtime keeps: at most omax (trailing empty ones may follow). */
static int node_outputs(const Onnx__NodeProto *np, const struct onnx_node *n, int omax, struct gj_error *err)
{
    if (np->n_output < 1 || (int)np->n_output > omax) {
        size_t used = 0;
        for (size_t k = 0; k < np->n_output; k++)
            if (np->output[k][0])
                used = k + 1;
        if (used < 1 || (int)used > omax)
            return gj_error_set(err, "model", "node '%s' (%s): %zu outputs (this runtime computes %d)",
                                n->name, onnx_op_name(n->op), np->n_output, omax);
    }
    return (int)(np->n_output < (size_t)omax ? np->n_output : (size_t)omax);
}

/* The value indices of n names (-1 for an empty, optional one) into idx. */
static int link_values(struct loader *l, char *const *names, int n, int *idx)
{
    int created;
    for (int k = 0; k < n; k++) {
        if (!names[k][0]) {
            idx[k] = -1;
            continue;
        }
        if (onnx_check_name(names[k], "value", l->err))
            return -1;
        idx[k] = names_add(&l->nt, names[k], &created, l->err);
        if (idx[k] < 0)
            return -1;
    }
    return 0;
}

/* Node n's inputs and outputs, checked against its operator's arity. */
static int node_io(struct loader *l, const Onnx__NodeProto *np, struct onnx_node *n)
{
    int imin, imax, omax;
    const char *opn = onnx_op_name(n->op);
    onnx_op_arity(n->op, l->m->opset, &imin, &imax, &omax);
    if ((int)np->n_input < imin || (int)np->n_input > imax)
        return gj_error_set(l->err, "model", "node '%s' (%s): %zu inputs (expected %d to %d)", n->name, opn,
                            np->n_input, imin, imax);
    int n_out = node_outputs(np, n, omax, l->err);
    if (n_out < 0)
        return -1;
    n->n_in = (int)np->n_input;
    n->n_out = n_out;
    n->in = malloc((n->n_in + 1) * sizeof(int));
    n->out = malloc((n->n_out + 1) * sizeof(int));
    if (!n->in || !n->out)
        return gj_error_set(l->err, "model", "out of memory");
    if (link_values(l, np->input, n->n_in, n->in))
        return -1;
    for (int k = 0; k < imin; k++)   /* the kernels read every required input */
        if (n->in[k] < 0)
            return gj_error_set(l->err, "model", "node '%s' (%s): its required input %d is empty", n->name, opn,
                                k + 1);
    if (link_values(l, np->output, n->n_out, n->out))
        return -1;
    if (n->out[0] < 0)
        return gj_error_set(l->err, "model", "node '%s' (%s): its first output is empty", n->name, opn);
    return 0;
}

static int add_node(struct loader *l, size_t i)
{
    const Onnx__NodeProto *np = l->g->node[i];
    onnx_model *m = l->m;
    struct onnx_node *n = &m->nodes[m->n_nodes];
    char autoname[32];
    snprintf(autoname, sizeof autoname, "#%zu", i);
    const char *nname = np->name && np->name[0] ? np->name : autoname;
    if (onnx_check_name(nname, "node", l->err))
        return -1;
    n->name = strdup(nname);
    if (!n->name)
        return gj_error_set(l->err, "model", "out of memory");
    m->n_nodes++;
    n->op = node_op(np, nname, l->err);
    if (n->op < 0 || node_io(l, np, n))
        return -1;
    return onnx_parse_attrs(np, nname, n->op, m->opset, &n->p, l->err);
}

static int add_output(struct loader *l, size_t i)
{
    const Onnx__ValueInfoProto *vi = l->g->output[i];
    onnx_model *m = l->m;
    int v = vi->name ? names_find(&l->nt, vi->name) : -1;
    if (v < 0)
        return gj_error_set(l->err, "model", "graph output '%s' is not computed by the graph",
                            vi->name ? vi->name : "");
    if (!m->values[v].init && !m->values[v].is_input) {
        struct onnx_value tmp = m->values[v];
        if (onnx_value_info(vi, &tmp, l->err))
            return -1;
        m->values[v].elem = tmp.elem;   /* declared; checked against inference */
    }
    m->values[v].is_output = 1;
    m->outputs[m->n_outputs] = v;
    io_desc(&m->values[v], &m->out_desc[m->n_outputs]);
    m->n_outputs++;
    return 0;
}

/* The graph's values and nodes, in the order they may refer to each other. */
static int add_graph(struct loader *l)
{
    const Onnx__GraphProto *g = l->g;
    for (size_t i = 0; i < g->n_initializer; i++)
        if (add_initializer(l, i))
            return -1;
    for (size_t i = 0; i < g->n_input; i++)
        if (add_input(l, i))
            return -1;
    if (l->m->n_inputs == 0)
        return gj_error_set(l->err, "model", "the graph has no inputs");
    for (size_t i = 0; i < g->n_node; i++)
        if (add_node(l, i))
            return -1;
    for (size_t i = 0; i < g->n_output; i++)
        if (add_output(l, i))
            return -1;
    return 0;
}

static onnx_model *build(const Onnx__ModelProto *mp, struct gj_error *err)
{
    int64_t opset = default_opset(mp);
    if (check_header(mp, opset, err))
        return NULL;
    struct loader l = { .g = mp->graph, .err = err };
    l.m = calloc(1, sizeof *l.m);
    if (!l.m)
        return gj_error_set(err, "model", "out of memory"), NULL;
    l.m->opset = opset;
    int rc = alloc_model(&l) || add_graph(&l) ? -1 : 0;
    free(l.nt.slot);
    if (rc) {
        onnx_model_free(l.m);
        return NULL;
    }
    return l.m;
}

onnx_model *onnx_model_load_memory(const void *data, size_t len, struct gj_error *err)
{
    if (!data || len == 0)
        return gj_error_set(err, "model", "the model is empty"), NULL;
    if (len > ONNX_MODEL_HARD_MAX_BYTES)
        return gj_error_set(err, "model", "the model is %zu bytes; at most %zu", len,
                            (size_t)ONNX_MODEL_HARD_MAX_BYTES), NULL;
    struct budget b = { 0, 4 * len + ((size_t)64 << 20) };
    ProtobufCAllocator al = { budget_alloc, budget_free, &b };
    Onnx__ModelProto *mp = onnx__model_proto__unpack(&al, len, data);
    if (!mp) {
        if (b.used > b.cap / 2)
            return gj_error_set(err, "model", "the model is too complex to decode within its memory "
                                "budget"), NULL;
        return gj_error_set(err, "model", "the file is not a valid ONNX protobuf (truncated or "
                            "corrupt)"), NULL;
    }
    onnx_model *m = build(mp, err);
    onnx__model_proto__free_unpacked(mp, &al);
    return m;
}

onnx_model *onnx_model_load_file(const char *path, size_t max_bytes, struct gj_error *err)
{
    if (max_bytes == 0)
        max_bytes = ONNX_MODEL_DEFAULT_MAX_BYTES;
    if (max_bytes > ONNX_MODEL_HARD_MAX_BYTES)
        max_bytes = ONNX_MODEL_HARD_MAX_BYTES;
    char *data;
    size_t len;
    if (gj_read_file(path, max_bytes, &data, &len) != 0) {
        if (errno == EFBIG)
            return gj_error_set(err, "model", "the model file is larger than %zu bytes", max_bytes), NULL;
        return gj_error_set(err, "model", "cannot read the model file: %s", strerror(errno)), NULL;
    }
    onnx_model *m = onnx_model_load_memory(data, len, err);
    free(data);
    return m;
}

size_t onnx_model_num_inputs(const onnx_model *m) { return m->n_inputs; }
size_t onnx_model_num_outputs(const onnx_model *m) { return m->n_outputs; }
size_t onnx_model_num_nodes(const onnx_model *m) { return m->n_nodes; }
int64_t onnx_model_opset(const onnx_model *m) { return m->opset; }

const struct onnx_io_desc *onnx_model_input(const onnx_model *m, size_t i)
{
    return i < m->n_inputs ? &m->in_desc[i] : NULL;
}

const struct onnx_io_desc *onnx_model_output(const onnx_model *m, size_t i)
{
    return i < m->n_outputs ? &m->out_desc[i] : NULL;
}
