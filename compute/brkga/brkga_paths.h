/*
 * brkga_paths.h — the graph algorithms of the network pre-computation (brkga_net.c):
 * a graph in CSR form, Dijkstra with terminal and blocked nodes, and Yen's K shortest
 * loopless paths. Internal to the brkga module.
 */
#ifndef BRKGA_PATHS_H
#define BRKGA_PATHS_H

/* A binary min-heap of (distance, node); ties by node index. */
struct heap { double *d; int *v; int n, cap; };

/* Undirected graph in CSR form: the neighbours of u are to[off[u]..off[u+1]), reached
 * over the edges eid[...] of weights w[...]. */
struct csr { int n; int *off, *to, *eid; double *w; };

/* 0, or -1 when out of memory (g is then partly built: csr_free it). */
int csr_build(struct csr *g, int n, int m, const int *ea, const int *eb, const double *ew);
void csr_free(struct csr *g);
void heap_free(struct heap *h);

/* Dijkstra from src; nodes with terminal[u] set (other than src) are reached but not
 * expanded. blocked_node / blocked_edge (may be NULL) are skipped. Fills dist, pred_v
 * and pred_e (the edge into each node). 0, or -1 when out of memory. */
int dijkstra(const struct csr *g, int src, const unsigned char *terminal,
             const unsigned char *blocked_node, const unsigned char *blocked_edge,
             double *dist, int *pred_v, int *pred_e, struct heap *h);

/* A path: len nodes and the len - 1 edges between them. */
struct mpath { int *nodes; int *edges; int len; double cost; long seq; };
void mpath_free(struct mpath *p);

/* Yen's workspace over one graph: blocks, Dijkstra's arrays and edge costs. */
struct yen_ws {
    const struct csr *g;
    const unsigned char *terminal;
    unsigned char *bn, *be;   /* blocked nodes (g->n), blocked edges (edge count) */
    double *dist;
    int *pv, *pe;
    struct heap h;
    const double *ecost;
};

/* 0, or -1 when out of memory (yen_ws_free frees what was taken). */
int yen_ws_init(struct yen_ws *w, const struct csr *g, const unsigned char *terminal,
                const double *ecost, int n_edges);
void yen_ws_free(struct yen_ws *w);

struct gj_poll;

/* Yen's K shortest loopless paths from s to t, ordered by (cost, hops, order found).
 * *A_out (K slots, *nA_out filled; caller frees each and the array). poll (may be NULL)
 * is stepped once a round. 0; -1 when out of memory; 1 when poll saw a cancel (nothing
 * is returned then). */
int yen(struct yen_ws *w, int s, int t, int K, struct gj_poll *poll, struct mpath **A_out, int *nA_out);

#endif
