/*
 * brkga_paths.c — CSR graphs, Dijkstra and Yen's K shortest loopless paths for the
 * network pre-computation (brkga_paths.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/gj_poll.h"
#include "brkga/brkga_paths.h"

void heap_free(struct heap *h)
{
    free(h->d);
    free(h->v);
    memset(h, 0, sizeof *h);
}

static int heap_less(const struct heap *h, int i, int j)
{
    return h->d[i] < h->d[j] || (h->d[i] == h->d[j] && h->v[i] < h->v[j]);
}

static void heap_swap(struct heap *h, int i, int j)
{
    double td = h->d[i]; h->d[i] = h->d[j]; h->d[j] = td;
    int tv = h->v[i]; h->v[i] = h->v[j]; h->v[j] = tv;
}

static int heap_push(struct heap *h, double d, int v)
{
    if (h->n == h->cap) {
        int nc = h->cap ? h->cap * 2 : 64;
        double *nd = realloc(h->d, (size_t)nc * sizeof *nd);
        if (!nd)
            return -1;
        h->d = nd;
        int *nv = realloc(h->v, (size_t)nc * sizeof *nv);
        if (!nv)
            return -1;
        h->v = nv;
        h->cap = nc;
    }
    int i = h->n++;
    h->d[i] = d;
    h->v[i] = v;
    while (i > 0 && heap_less(h, i, (i - 1) / 2)) {
        heap_swap(h, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    return 0;
}

static void heap_pop(struct heap *h, double *d, int *v)
{
    *d = h->d[0];
    *v = h->v[0];
    h->n--;
    h->d[0] = h->d[h->n];
    h->v[0] = h->v[h->n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && heap_less(h, l, m)) m = l;
        if (r < h->n && heap_less(h, r, m)) m = r;
        if (m == i)
            break;
        heap_swap(h, i, m);
        i = m;
    }
}

void csr_free(struct csr *g)
{
    free(g->off); free(g->to); free(g->eid); free(g->w);
    memset(g, 0, sizeof *g);
}

int csr_build(struct csr *g, int n, int m, const int *ea, const int *eb, const double *ew)
{
    g->n = n;
    g->off = calloc((size_t)n + 1, sizeof(int));
    g->to = malloc((size_t)(2 * m + 1) * sizeof(int));
    g->eid = malloc((size_t)(2 * m + 1) * sizeof(int));
    g->w = malloc((size_t)(2 * m + 1) * sizeof(double));
    if (!g->off || !g->to || !g->eid || !g->w)
        return -1;
    for (int e = 0; e < m; e++) {
        g->off[ea[e] + 1]++;
        g->off[eb[e] + 1]++;
    }
    for (int u = 0; u < n; u++)
        g->off[u + 1] += g->off[u];
    int *fill = malloc((size_t)n * sizeof(int));
    if (!fill)
        return -1;
    memcpy(fill, g->off, (size_t)n * sizeof(int));
    for (int e = 0; e < m; e++) {
        int i = fill[ea[e]]++;
        g->to[i] = eb[e]; g->eid[i] = e; g->w[i] = ew[e];
        i = fill[eb[e]]++;
        g->to[i] = ea[e]; g->eid[i] = e; g->w[i] = ew[e];
    }
    free(fill);
    return 0;
}

int dijkstra(const struct csr *g, int src, const unsigned char *terminal,
             const unsigned char *blocked_node, const unsigned char *blocked_edge,
             double *dist, int *pred_v, int *pred_e, struct heap *h)
{
    for (int u = 0; u < g->n; u++) {
        dist[u] = INFINITY;
        pred_v[u] = -1;
        pred_e[u] = -1;
    }
    h->n = 0;
    dist[src] = 0;
    if (heap_push(h, 0, src))
        return -1;
    while (h->n) {
        double d;
        int u;
        heap_pop(h, &d, &u);
        if (d > dist[u])
            continue;
        if (u != src && terminal && terminal[u])
            continue;
        for (int i = g->off[u]; i < g->off[u + 1]; i++) {
            int v = g->to[i];
            if ((blocked_node && blocked_node[v]) || (blocked_edge && blocked_edge[g->eid[i]]))
                continue;
            double nd = d + g->w[i];
            if (nd < dist[v]) {
                dist[v] = nd;
                pred_v[v] = u;
                pred_e[v] = g->eid[i];
                if (heap_push(h, nd, v))
                    return -1;
            }
        }
    }
    return 0;
}

void mpath_free(struct mpath *p)
{
    free(p->nodes);
    free(p->edges);
    p->nodes = p->edges = NULL;
}

static int mpath_cmp(const struct mpath *a, const struct mpath *b)
{
    if (a->cost != b->cost)
        return a->cost < b->cost ? -1 : 1;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    /* then the order Yen found them in (as the thesis's Table 6-6 lists them) */
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int mpath_same(const struct mpath *a, const struct mpath *b)
{
    if (a->len != b->len)
        return 0;
    for (int i = 0; i < a->len - 1; i++)
        if (a->edges[i] != b->edges[i])
            return 0;
    return 1;
}

/* Shortest path src->dst under the current blocks; found = 0 when none. */
static int yen_sp(struct yen_ws *w, int src, int dst, struct mpath *out, int *found)
{
    *found = 0;
    if (dijkstra(w->g, src, w->terminal, w->bn, w->be, w->dist, w->pv, w->pe, &w->h))
        return -1;
    if (!isfinite(w->dist[dst]))
        return 0;
    int len = 1;
    for (int u = dst; u != src; u = w->pv[u])
        len++;
    out->nodes = malloc((size_t)len * sizeof(int));
    out->edges = malloc((size_t)len * sizeof(int));
    if (!out->nodes || !out->edges)
        return -1;
    out->len = len;
    int i = len - 1;
    for (int u = dst; ; u = w->pv[u]) {
        out->nodes[i] = u;
        if (u == src)
            break;
        out->edges[i - 1] = w->pe[u];
        i--;
    }
    *found = 1;
    return 0;
}

static double mpath_cost(const struct mpath *p, const double *ecost)
{
    double c = 0;
    for (int i = 0; i < p->len - 1; i++)
        c += ecost[p->edges[i]];
    return c;
}

int yen_ws_init(struct yen_ws *w, const struct csr *g, const unsigned char *terminal,
                const double *ecost, int n_edges)
{
    memset(w, 0, sizeof *w);
    w->g = g;
    w->terminal = terminal;
    w->ecost = ecost;
    w->bn = calloc((size_t)g->n + 1, 1);
    w->be = calloc((size_t)n_edges + 1, 1);
    w->dist = malloc((size_t)g->n * sizeof(double));
    w->pv = malloc((size_t)g->n * sizeof(int));
    w->pe = malloc((size_t)g->n * sizeof(int));
    return w->bn && w->be && w->dist && w->pv && w->pe ? 0 : -1;
}

void yen_ws_free(struct yen_ws *w)
{
    free(w->bn);
    free(w->be);
    free(w->dist);
    free(w->pv);
    free(w->pe);
    heap_free(&w->h);
    memset(w, 0, sizeof *w);
}

/* Candidate paths not yet taken (Yen's B). */
struct candidates { struct mpath *v; int n, cap; };

static void clear_blocks(struct yen_ws *w)
{
    memset(w->bn, 0, (size_t)w->g->n);
    memset(w->be, 0, (size_t)w->g->off[w->g->n] / 2 + 1);
}

/* Blocks, for the spur at node i of prev: the next edge of every path found so far
 * that shares prev's first i + 1 nodes, and prev's nodes before the spur. */
static void block_for_spur(struct yen_ws *w, const struct mpath *A, int nA, const struct mpath *prev, int i)
{
    clear_blocks(w);
    for (int a = 0; a < nA; a++) {
        const struct mpath *p = &A[a];
        if (p->len <= i + 1)
            continue;
        int same = 1;
        for (int z = 0; z <= i && same; z++)
            same = p->nodes[z] == prev->nodes[z];
        if (same)
            w->be[p->edges[i]] = 1;
    }
    for (int z = 0; z < i; z++)
        w->bn[prev->nodes[z]] = 1;
}

/* prev's first i nodes followed by the spur path sp, into tot. 0 or -1 (out of memory). */
static int join_spur(const struct mpath *prev, int i, const struct mpath *sp, struct mpath *tot)
{
    tot->len = i + sp->len;
    tot->nodes = malloc((size_t)tot->len * sizeof(int));
    tot->edges = malloc((size_t)tot->len * sizeof(int));
    if (!tot->nodes || !tot->edges)
        return -1;
    for (int z = 0; z < i; z++) {
        tot->nodes[z] = prev->nodes[z];
        tot->edges[z] = prev->edges[z];
    }
    for (int z = 0; z < sp->len; z++)
        tot->nodes[i + z] = sp->nodes[z];
    for (int z = 0; z < sp->len - 1; z++)
        tot->edges[i + z] = sp->edges[z];
    return 0;
}

/* Keeps tot as a candidate unless it is a path found or a candidate already; takes
 * ownership of tot. 0 or -1 (out of memory). */
static int add_candidate(struct candidates *B, const struct mpath *A, int nA, struct mpath *tot)
{
    int dup = 0;
    for (int a = 0; a < nA && !dup; a++)
        dup = mpath_same(&A[a], tot);
    for (int b = 0; b < B->n && !dup; b++)
        dup = mpath_same(&B->v[b], tot);
    if (dup) {
        mpath_free(tot);
        return 0;
    }
    if (B->n == B->cap) {
        int nc = B->cap ? B->cap * 2 : 16;
        struct mpath *g = realloc(B->v, (size_t)nc * sizeof *g);
        if (!g) {
            mpath_free(tot);
            return -1;
        }
        B->v = g;
        B->cap = nc;
    }
    B->v[B->n++] = *tot;
    return 0;
}

/* One round of Yen: a candidate from every spur node of the last path found. */
static int yen_round(struct yen_ws *w, const struct mpath *A, int nA, int t, struct candidates *B, long *seq)
{
    const struct mpath *prev = &A[nA - 1];
    for (int i = 0; i < prev->len - 1; i++) {
        block_for_spur(w, A, nA, prev, i);
        struct mpath sp = { 0 }, tot = { 0 };
        int found;
        if (yen_sp(w, prev->nodes[i], t, &sp, &found)) {
            mpath_free(&sp);
            return -1;
        }
        if (!found)
            continue;
        int rc = join_spur(prev, i, &sp, &tot);
        mpath_free(&sp);
        if (rc) {
            mpath_free(&tot);
            return -1;
        }
        tot.cost = mpath_cost(&tot, w->ecost);
        tot.seq = (*seq)++;
        if (add_candidate(B, A, nA, &tot))
            return -1;
    }
    return 0;
}

/* Moves the best candidate into A[nA]. */
static void take_best(struct mpath *A, int *nA, struct candidates *B)
{
    int best = 0;
    for (int b = 1; b < B->n; b++)
        if (mpath_cmp(&B->v[b], &B->v[best]) < 0)
            best = b;
    A[(*nA)++] = B->v[best];
    B->v[best] = B->v[--B->n];
}

int yen(struct yen_ws *w, int s, int t, int K, struct gj_poll *poll, struct mpath **A_out, int *nA_out)
{
    struct mpath *A = calloc((size_t)K, sizeof *A);
    struct candidates B = { 0 };
    int nA = 0, rc = -1, found;
    long seq = 0;
    if (!A)
        return -1;
    clear_blocks(w);
    if (yen_sp(w, s, t, &A[0], &found))
        goto out;
    if (found) {
        A[0].cost = mpath_cost(&A[0], w->ecost);
        nA = 1;
    }
    while (nA > 0 && nA < K) {
        if (gj_poll_step(poll, 0)) {
            rc = 1;
            goto out;
        }
        if (yen_round(w, A, nA, t, &B, &seq))
            goto out;
        if (B.n == 0)
            break;
        take_best(A, &nA, &B);
    }
    rc = 0;
out:
    for (int b = 0; b < B.n; b++)
        mpath_free(&B.v[b]);
    free(B.v);
    if (rc) {
        for (int a = 0; a < K; a++)   /* calloc'd: a partly built path is freed too */
            mpath_free(&A[a]);
        free(A);
        return rc;
    }
    *A_out = A;
    *nA_out = nA;
    return 0;
}
