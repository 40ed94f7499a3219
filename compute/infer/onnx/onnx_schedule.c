/*
 * onnx_schedule.c — a topological order of a model's nodes (Kahn's algorithm): the order
 * shape inference, folding and runs follow. Refuses a value produced twice (or overwriting
 * an input or initializer), a value nothing defines, and cycles.
 */
#include <stdlib.h>

#include "infer/onnx/onnx_exec.h"

/* Who defines and who reads each value: producer[v] (node or -1), and the consumers of v as
 * cons[cons_start[v] .. cons_start[v + 1]) (only values some node produces). */
struct edges {
    int *producer;
    int *indeg;          /* per node: inputs produced by other nodes */
    int *cons_start, *cons;
};

static void edges_free(struct edges *e)
{
    free(e->producer);
    free(e->indeg);
    free(e->cons_start);
    free(e->cons);
}

static int find_producers(const onnx_model *m, struct edges *e, struct gj_error *err)
{
    for (size_t i = 0; i < m->n_values; i++)
        e->producer[i] = -1;
    for (size_t i = 0; i < m->n_nodes; i++)
        for (int k = 0; k < m->nodes[i].n_out; k++) {
            int v = m->nodes[i].out[k];
            if (v < 0)
                continue;
            if (e->producer[v] >= 0 || m->values[v].init || m->values[v].is_input)
                return gj_error_set(err, "model", "value '%s' is produced twice (or overwrites an input "
                                    "or initializer)", m->values[v].name);
            e->producer[v] = (int)i;
        }
    return 0;
}

/* In-degrees and consumer lists; total: the number of edges. */
static int count_consumers(const onnx_model *m, struct edges *e, size_t *total, struct gj_error *err)
{
    *total = 0;
    for (size_t i = 0; i < m->n_nodes; i++)
        for (int k = 0; k < m->nodes[i].n_in; k++) {
            int v = m->nodes[i].in[k];
            if (v < 0)
                continue;
            if (e->producer[v] < 0 && !m->values[v].init && !m->values[v].is_input)
                return gj_error_set(err, "model", "node '%s' (%s) reads '%s', which nothing defines",
                                    m->nodes[i].name, onnx_op_name(m->nodes[i].op), m->values[v].name);
            if (e->producer[v] >= 0) {
                e->indeg[i]++;
                e->cons_start[v + 1]++;
                (*total)++;
            }
        }
    for (size_t v = 0; v < m->n_values; v++)
        e->cons_start[v + 1] += e->cons_start[v];
    return 0;
}

static int list_consumers(const onnx_model *m, struct edges *e, size_t total)
{
    e->cons = malloc((total + 1) * sizeof(int));
    int *fill = calloc(m->n_values + 1, sizeof(int));
    if (!e->cons || !fill) {
        free(fill);
        return -1;
    }
    for (size_t i = 0; i < m->n_nodes; i++)
        for (int k = 0; k < m->nodes[i].n_in; k++) {
            int v = m->nodes[i].in[k];
            if (v >= 0 && e->producer[v] >= 0)
                e->cons[e->cons_start[v] + fill[v]++] = (int)i;
        }
    free(fill);
    return 0;
}

/* Kahn's algorithm; the number of nodes ordered (fewer than n_nodes: a cycle). */
static size_t kahn(const onnx_model *m, const struct edges *e, int *order)
{
    size_t head = 0, tail = 0;
    for (size_t i = 0; i < m->n_nodes; i++)
        if (e->indeg[i] == 0)
            order[tail++] = (int)i;
    while (head < tail) {
        int i = order[head++];
        for (int k = 0; k < m->nodes[i].n_out; k++) {
            int v = m->nodes[i].out[k];
            if (v < 0)
                continue;
            for (int c = e->cons_start[v]; c < e->cons_start[v + 1]; c++)
                if (--e->indeg[e->cons[c]] == 0)
                    order[tail++] = e->cons[c];
        }
    }
    return tail;
}

int onnx_schedule(const onnx_model *m, int *order, struct gj_error *err)
{
    struct edges e = { 0 };
    size_t total;
    int rc = -1;
    e.producer = malloc((m->n_values + 1) * sizeof(int));
    e.indeg = calloc(m->n_nodes + 1, sizeof(int));
    e.cons_start = calloc(m->n_values + 2, sizeof(int));
    if (!e.producer || !e.indeg || !e.cons_start) {
        gj_error_set(err, "model", "out of memory");
    } else if (!find_producers(m, &e, err) && !count_consumers(m, &e, &total, err)) {
        if (list_consumers(m, &e, total))
            gj_error_set(err, "model", "out of memory");
        else if (kahn(m, &e, order) != m->n_nodes)
            gj_error_set(err, "model", "the graph has a cycle");
        else
            rc = 0;
    }
    edges_free(&e);
    return rc;
}
