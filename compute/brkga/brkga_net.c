/*
 * brkga_net.c — the pre-computation of seed 002 section 4.1.1 / 5.5, in four phases:
 * the MPLS nodes, the optical graph, the virtual links (Dijkstra from every transit
 * node, access links pruned to the cheapest), and the candidate routes (Yen per
 * demand pair), flattened into the model the decoder reads; and the CPU decoder.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gj_poll.h"
#include "brkga/brkga_engine.h"
#include "brkga/brkga_net.h"
#include "brkga/brkga_net_decode.h"
#include "brkga/brkga_paths.h"

#define BRKGA_NET_MAX_TRANSIT 1000
#define BRKGA_NET_MAX_ACCESS 10000
#define BRKGA_NET_MAX_ROUTES 4000000

void brkga_net_free(struct brkga_net *net)
{
    brkga_net_input_free(&net->in);
    free(net->olink_edge);
    if (net->vlinks)
        for (int v = 0; v < net->m.n_vlinks; v++)
            free(net->vlinks[v].path);
    free(net->vlinks);
    if (net->route_nodes)
        for (int r = 0; r < net->m.n_routes; r++)
            free(net->route_nodes[r]);
    free(net->route_nodes);
    free(net->route_nodes_len);
    free(net->dem_unroutable);
    struct brkga_net_model *m = &net->m;
    free(m->vl_dist); free(m->dem_bw); free(m->dem_route); free(m->route_vl_off);
    free(m->route_vl); free(m->route_ol_off); free(m->route_ol); free(m->route_ol_mult);
    memset(net, 0, sizeof *net);
}

struct growable { int *v; size_t n, cap; };

static int grow_push(struct growable *g, int x)
{
    if (g->n == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 256;
        int *nv = realloc(g->v, nc * sizeof *nv);
        if (!nv)
            return -1;
        g->v = nv;
        g->cap = nc;
    }
    g->v[g->n++] = x;
    return 0;
}

/* Moves g's array out (g is left empty); a one-element array when g is empty. */
static int *grow_take(struct growable *g)
{
    if (!g->v && grow_push(g, 0))
        return NULL;
    int *v = g->v;
    memset(g, 0, sizeof *g);
    return v;
}

struct pair_routes { int s, t, first, count; };

/* The pre-computation's working state: what build_free frees. MPLS nodes are numbered
 * access nodes first, then transit nodes (the thesis's order). */
struct build {
    struct brkga_net *net;
    const struct brkga_net_input *in;       /* &net->in */
    int N, A, T, M, K, max_at;
    double max_len;
    int *acc, *tra, *mpls_id, *mpls_node;   /* node of access i / transit i; MPLS index <-> node */
    unsigned char *terminal;                /* MPLS nodes: endpoints only in the optical graph */
    /* phase 2: the optical graph, the edges plus implicit attachments from `location` */
    int *ea, *eb, *olink_of_edge;
    double *ew;
    struct csr g;
    /* phase 3: shortest optical paths from each transit node; the virtual links */
    double *tdist;                          /* [i * N + j]: transit i to MPLS node j */
    int **tpath_e;                          /* [i * M + j]: its edges, length-prefixed */
    int *vla, *vlb;                         /* ends of each virtual link, MPLS indices */
    /* phase 4: the MPLS graph and the candidate routes of each distinct demand pair */
    struct csr mg;
    unsigned char *mterm;
    struct yen_ws w;
    struct pair_routes *pairs;
    int n_pairs, cap_pairs;
    struct growable rvl, rvl_off, rol, rol_off, rmul, rnodes_len;
    int **rnodes;
    size_t rnodes_cap;
    struct gj_poll *poll;
    struct gj_error *err;
};

static void build_free(struct build *b)
{
    free(b->acc); free(b->tra); free(b->mpls_id); free(b->mpls_node); free(b->terminal);
    free(b->ea); free(b->eb); free(b->ew); free(b->olink_of_edge);
    csr_free(&b->g);
    free(b->tdist);
    if (b->tpath_e)
        for (size_t i = 0; i < (size_t)b->T * (size_t)b->M; i++)
            free(b->tpath_e[i]);
    free(b->tpath_e);
    free(b->vla); free(b->vlb);
    csr_free(&b->mg);
    free(b->mterm);
    yen_ws_free(&b->w);
    free(b->pairs);
    free(b->rvl.v); free(b->rvl_off.v); free(b->rol.v); free(b->rol_off.v); free(b->rmul.v);
    for (size_t z = 0; z < b->rnodes_len.n; z++)
        free(b->rnodes[z]);
    free(b->rnodes);
    free(b->rnodes_len.v);
}

static int out_of_memory(struct build *b)
{
    return gj_error_set(b->err, "network", "out of memory during pre-computation");
}

/* ---- phase 1: the MPLS nodes --------------------------------------------------- */

static int classify_nodes(struct build *b)
{
    const struct brkga_net_input *in = b->in;
    struct brkga_net *net = b->net;
    if (in->n_demands == 0)
        return gj_error_set(b->err, "demands", "demands: no demands");
    for (int u = 0; u < b->N; u++) {
        if (in->nodes[u].type == BRKGA_NODE_ACCESS) net->n_access++;
        else if (in->nodes[u].type == BRKGA_NODE_TRANSIT) net->n_transit++;
        else net->n_core++;
    }
    if (net->n_transit == 0)
        return gj_error_set(b->err, "network", "network: there is no transit node");
    if (net->n_core == 0)
        return gj_error_set(b->err, "network", "network: there is no core (WSON) node");
    if (net->n_transit > BRKGA_NET_MAX_TRANSIT || net->n_access > BRKGA_NET_MAX_ACCESS)
        return gj_error_set(b->err, "network", "network: %d transit and %d source nodes; at most %d and %d",
                            net->n_transit, net->n_access, BRKGA_NET_MAX_TRANSIT, BRKGA_NET_MAX_ACCESS);
    b->A = net->n_access;
    b->T = net->n_transit;
    b->M = b->A + b->T;
    b->acc = malloc((size_t)b->A * sizeof(int) + 1);
    b->tra = malloc((size_t)b->T * sizeof(int));
    b->mpls_id = malloc((size_t)b->N * sizeof(int));
    b->mpls_node = malloc((size_t)b->M * sizeof(int));
    b->terminal = calloc((size_t)b->N, 1);
    if (!b->acc || !b->tra || !b->mpls_id || !b->mpls_node || !b->terminal)
        return out_of_memory(b);
    int ia = 0, it = 0;
    for (int u = 0; u < b->N; u++) {
        b->mpls_id[u] = -1;
        if (in->nodes[u].type == BRKGA_NODE_ACCESS) b->acc[ia++] = u;
        else if (in->nodes[u].type == BRKGA_NODE_TRANSIT) b->tra[it++] = u;
        if (in->nodes[u].type != BRKGA_NODE_CORE)
            b->terminal[u] = 1;
    }
    for (int i = 0; i < b->A; i++) { b->mpls_id[b->acc[i]] = i; b->mpls_node[i] = b->acc[i]; }
    for (int i = 0; i < b->T; i++) { b->mpls_id[b->tra[i]] = b->A + i; b->mpls_node[b->A + i] = b->tra[i]; }
    return 0;
}

/* ---- phase 2: the optical graph ------------------------------------------------ */

/* Every source and transit node reaches a core node: by an edge or its location. */
static int check_attached(struct build *b, int n_edges)
{
    const struct brkga_net_input *in = b->in;
    unsigned char *att = calloc((size_t)b->N, 1);
    if (!att)
        return out_of_memory(b);
    for (int e = 0; e < n_edges; e++)
        att[b->ea[e]] = att[b->eb[e]] = 1;
    int bad = -1;
    for (int u = 0; u < b->N && bad < 0; u++)
        if (in->nodes[u].type != BRKGA_NODE_CORE && !att[u])
            bad = u;
    free(att);
    if (bad >= 0)
        return gj_error_set(b->err, "network", "network: %s node '%s' is attached to no core node (give it "
                            "a location or an Edge to a core node)",
                            in->nodes[bad].type == BRKGA_NODE_ACCESS ? "source" : "transit", in->nodes[bad].name);
    return 0;
}

static int optical_graph(struct build *b)
{
    const struct brkga_net_input *in = b->in;
    struct brkga_net *net = b->net;
    int m = (int)in->n_edges, extra = 0;
    for (int u = 0; u < b->N; u++)
        extra += in->nodes[u].loc >= 0;
    b->ea = malloc((size_t)(m + extra + 1) * sizeof(int));
    b->eb = malloc((size_t)(m + extra + 1) * sizeof(int));
    b->ew = malloc((size_t)(m + extra + 1) * sizeof(double));
    b->olink_of_edge = malloc((size_t)(m + extra + 1) * sizeof(int));
    net->olink_edge = malloc((size_t)(m + 1) * sizeof(int));
    if (!b->ea || !b->eb || !b->ew || !b->olink_of_edge || !net->olink_edge)
        return out_of_memory(b);
    int no = 0;
    for (int e = 0; e < m; e++) {
        b->ea[e] = in->edges[e].a;
        b->eb[e] = in->edges[e].b;
        b->ew[e] = in->edges[e].distance;
        int core = in->nodes[b->ea[e]].type == BRKGA_NODE_CORE && in->nodes[b->eb[e]].type == BRKGA_NODE_CORE;
        b->olink_of_edge[e] = core ? no : -1;
        if (core)
            net->olink_edge[no++] = e;
    }
    net->m.n_olinks = no;
    int me = m;
    for (int u = 0; u < b->N; u++) {
        int l = in->nodes[u].loc;
        if (l < 0)
            continue;
        /* an explicit edge to the same core node may exist: the parallel 0-length
         * attachment is harmless (attachments are not optical links) */
        b->ea[me] = u; b->eb[me] = l; b->ew[me] = 0; b->olink_of_edge[me] = -1;
        me++;
    }
    if (check_attached(b, me))
        return -1;
    if (net->m.n_olinks == 0)
        return gj_error_set(b->err, "network", "network: there is no optical link (edge between two core "
                            "nodes)");
    return csr_build(&b->g, b->N, me, b->ea, b->eb, b->ew) ? out_of_memory(b) : 0;
}

/* ---- phase 3: the virtual links ------------------------------------------------ */

/* The optical path from transit i to MPLS node j as its edges, length-prefixed. */
static int *path_edges(const struct build *b, int i, int j, const int *pv, const int *pe)
{
    int v = b->mpls_node[j], len = 0;
    for (int u = v; u != b->tra[i]; u = pv[u])
        len++;
    int *p = malloc((size_t)(len + 1) * sizeof(int));
    if (!p)
        return NULL;
    p[0] = len;
    int k = len;
    for (int u = v; u != b->tra[i]; u = pv[u])
        p[k--] = pe[u];
    return p;
}

/* Dijkstra from every transit node over the optical layer (the complete MPLS network):
 * distances and paths to every other MPLS node within max_len. 0, -1, 1 cancelled. */
static int transit_paths(struct build *b)
{
    int N = b->N, M = b->M, T = b->T, rc = -1;
    double *dist = malloc((size_t)N * sizeof(double));
    int *pv = malloc((size_t)N * sizeof(int)), *pe = malloc((size_t)N * sizeof(int));
    struct heap h = { 0 };
    b->tdist = malloc((size_t)T * (size_t)N * sizeof(double));
    b->tpath_e = calloc((size_t)T * (size_t)M, sizeof(int *));
    if (!dist || !pv || !pe || !b->tdist || !b->tpath_e)
        goto out;
    gj_poll_phase(b->poll, 0.0, 0.01, (uint64_t)T);
    for (int i = 0; i < T; i++) {
        if (dijkstra(&b->g, b->tra[i], b->terminal, NULL, NULL, dist, pv, pe, &h))
            goto out;
        for (int j = 0; j < M; j++) {
            int v = b->mpls_node[j];
            double d = dist[v];
            int far = v == b->tra[i] || !isfinite(d) || (b->max_len > 0 && d > b->max_len);
            b->tdist[(size_t)i * N + j] = far ? INFINITY : d;
            if (!far && !(b->tpath_e[(size_t)i * M + j] = path_edges(b, i, j, pv, pe)))
                goto out;
        }
        if (gj_poll_step(b->poll, 1)) {
            rc = 1;
            break;
        }
    }
    if (rc != 1)
        rc = 0;
out:
    free(dist); free(pv); free(pe);
    heap_free(&h);
    return rc < 0 ? out_of_memory(b) : rc;
}

/* Access links: each access node keeps its max_at nearest transit nodes (ties by transit
 * order), listed in transit order. Then every connected transit pair. */
static int list_virtual_links(struct build *b)
{
    int A = b->A, T = b->T, N = b->N, nv = 0;
    int *cand = malloc((size_t)T * sizeof(int) + 1);
    unsigned char *keep = malloc((size_t)T + 1);
    if (!cand || !keep) {
        free(cand);
        free(keep);
        return -1;
    }
    for (int a = 0; a < A; a++) {
        int nc = 0;
        for (int i = 0; i < T; i++)
            if (isfinite(b->tdist[(size_t)i * N + a]))
                cand[nc++] = i;
        memset(keep, 0, (size_t)T + 1);
        int lim = b->max_at > 0 && b->max_at < nc ? b->max_at : nc;
        /* stable insertion sort by distance (ties: transit order) */
        for (int x = 1; x < nc; x++) {
            int c = cand[x], y = x - 1;
            while (y >= 0 && b->tdist[(size_t)cand[y] * N + a] > b->tdist[(size_t)c * N + a]) {
                cand[y + 1] = cand[y];
                y--;
            }
            cand[y + 1] = c;
        }
        for (int x = 0; x < lim; x++)
            keep[cand[x]] = 1;
        for (int i = 0; i < T; i++)
            if (keep[i]) {
                b->vla[nv] = A + i;
                b->vlb[nv] = a;
                nv++;
            }
    }
    free(cand);
    free(keep);
    for (int j = 1; j < T; j++)
        for (int i = 0; i < j; i++)
            if (isfinite(b->tdist[(size_t)i * N + A + j])) {
                b->vla[nv] = A + i;
                b->vlb[nv] = A + j;
                nv++;
            }
    b->net->m.n_vlinks = nv;
    return 0;
}

/* Virtual link v: its ends, distance and optical path as nodes. */
static int fill_virtual_link(struct build *b, int v)
{
    struct brkga_net *net = b->net;
    int ti = b->vla[v] - b->A, j = b->vlb[v];
    struct brkga_vlink *vl = &net->vlinks[v];
    vl->a = b->tra[ti];
    vl->b = b->mpls_node[j];
    vl->distance = b->tdist[(size_t)ti * b->N + j];
    net->m.vl_dist[v] = vl->distance;
    const int *p = b->tpath_e[(size_t)ti * b->M + j];
    vl->path_len = p[0] + 1;
    vl->path = malloc((size_t)vl->path_len * sizeof(int));
    if (!vl->path)
        return -1;
    int u = b->tra[ti];
    vl->path[0] = u;
    for (int k = 1; k <= p[0]; k++) {
        int e = p[k];
        u = b->ea[e] == u ? b->eb[e] : b->ea[e];
        vl->path[k] = u;
    }
    return 0;
}

static int virtual_links(struct build *b)
{
    struct brkga_net *net = b->net;
    int r = transit_paths(b);
    if (r)
        return r;
    int cap = b->A * b->T + b->T * (b->T - 1) / 2 + 1;
    b->vla = malloc((size_t)cap * sizeof(int));
    b->vlb = malloc((size_t)cap * sizeof(int));
    net->vlinks = calloc((size_t)cap, sizeof *net->vlinks);
    if (!b->vla || !b->vlb || !net->vlinks || list_virtual_links(b))
        return out_of_memory(b);
    int nv = net->m.n_vlinks;
    net->m.vl_dist = malloc((size_t)(nv + 1) * sizeof(double));
    if (!net->m.vl_dist)
        return out_of_memory(b);
    for (int v = 0; v < nv; v++)
        if (fill_virtual_link(b, v))
            return out_of_memory(b);
    if (nv == 0)
        return gj_error_set(b->err, "network", "network: no virtual link could be built (is the optical "
                            "network connected, and max_optical_path_length large enough?)");
    return 0;
}

/* ---- phase 4: the candidate routes --------------------------------------------- */

/* The optical link between core nodes x and y that Dijkstra used: the shortest of the
 * parallel edges (ties: the first). */
static int optical_link(const struct build *b, int x, int y)
{
    const struct brkga_net *net = b->net;
    int ol = -1;
    for (int e = b->g.off[x]; e < b->g.off[x + 1]; e++) {
        int id = b->g.eid[e];
        if (b->g.to[e] != y || b->olink_of_edge[id] < 0)
            continue;
        if (ol < 0 || b->in->edges[id].distance < b->in->edges[net->olink_edge[ol]].distance)
            ol = b->olink_of_edge[id];
    }
    return ol;
}

/* The distinct optical links of route p, with the times it crosses each. */
static int route_optical_links(struct build *b, const struct mpath *p)
{
    const struct brkga_node *nodes = b->in->nodes;
    size_t base = b->rol.n;
    for (int q = 0; q < p->len - 1; q++) {
        const struct brkga_vlink *vl = &b->net->vlinks[p->edges[q]];
        for (int h = 0; h + 1 < vl->path_len; h++) {
            int x = vl->path[h], y = vl->path[h + 1];
            if (nodes[x].type != BRKGA_NODE_CORE || nodes[y].type != BRKGA_NODE_CORE)
                continue;
            int ol = optical_link(b, x, y);
            size_t f;
            for (f = base; f < b->rol.n; f++)
                if (b->rol.v[f] == ol)
                    break;
            if (f < b->rol.n)
                b->rmul.v[f]++;
            else if (grow_push(&b->rol, ol) || grow_push(&b->rmul, 1))
                return -1;
        }
    }
    return grow_push(&b->rol_off, (int)b->rol.n);
}

/* The route's MPLS nodes as node indices. */
static int route_nodes(struct build *b, const struct mpath *p)
{
    if (b->rnodes_len.n == b->rnodes_cap) {
        size_t nc = b->rnodes_cap ? b->rnodes_cap * 2 : 256;
        int **gr = realloc(b->rnodes, nc * sizeof *gr);
        if (!gr)
            return -1;
        b->rnodes = gr;
        b->rnodes_cap = nc;
    }
    int *nn = malloc((size_t)p->len * sizeof(int));
    if (!nn)
        return -1;
    for (int q = 0; q < p->len; q++)
        nn[q] = b->mpls_node[p->nodes[q]];
    b->rnodes[b->rnodes_len.n] = nn;
    if (grow_push(&b->rnodes_len, p->len)) {
        free(nn);
        return -1;
    }
    return 0;
}

static int add_route(struct build *b, const struct mpath *p)
{
    for (int q = 0; q < p->len - 1; q++)
        if (grow_push(&b->rvl, p->edges[q]))
            return -1;
    if (grow_push(&b->rvl_off, (int)b->rvl.n))
        return -1;
    return route_optical_links(b, p) || route_nodes(b, p) ? -1 : 0;
}

/* Yen's routes between MPLS nodes s < t, appended to the model; the pair's index. */
static int add_pair(struct build *b, int s, int t, int *pi)
{
    struct mpath *P = NULL;
    int nP = 0, rc = yen(&b->w, s, t, b->K, b->poll, &P, &nP);
    if (rc)
        return rc < 0 ? out_of_memory(b) : 1;
    if ((long)b->rvl_off.n - 1 + nP > BRKGA_NET_MAX_ROUTES) {
        rc = gj_error_set(b->err, "k_paths", "more than %d candidate routes: lower k_paths",
                          BRKGA_NET_MAX_ROUTES);
    } else if (b->n_pairs == b->cap_pairs) {
        int nc = b->cap_pairs ? b->cap_pairs * 2 : 32;
        struct pair_routes *gp = realloc(b->pairs, (size_t)nc * sizeof *gp);
        if (gp) {
            b->pairs = gp;
            b->cap_pairs = nc;
        } else {
            rc = out_of_memory(b);
        }
    }
    if (rc == 0) {
        *pi = b->n_pairs++;
        b->pairs[*pi] = (struct pair_routes){ s, t, (int)b->rvl_off.n - 1, nP };
        for (int z = 0; z < nP && rc == 0; z++)
            if (add_route(b, &P[z]))
                rc = out_of_memory(b);
    }
    for (int z = 0; z < nP; z++)
        mpath_free(&P[z]);
    free(P);
    return rc;
}

static int routes_setup(struct build *b)
{
    struct brkga_net *net = b->net;
    int nv = net->m.n_vlinks, D = (int)b->in->n_demands;
    if (csr_build(&b->mg, b->M, nv, b->vla, b->vlb, net->m.vl_dist))
        return out_of_memory(b);
    b->mterm = calloc((size_t)b->M, 1);
    if (!b->mterm)
        return out_of_memory(b);
    for (int a = 0; a < b->A; a++)
        b->mterm[a] = 1;
    net->m.n_demands = D;
    net->m.dem_bw = malloc((size_t)D * sizeof(int));
    net->m.dem_route = malloc((size_t)D * 2 * sizeof(int));
    net->dem_unroutable = calloc((size_t)D, sizeof(int));
    if (yen_ws_init(&b->w, &b->mg, b->mterm, net->m.vl_dist, nv) || !net->m.dem_bw || !net->m.dem_route ||
        !net->dem_unroutable || grow_push(&b->rvl_off, 0) || grow_push(&b->rol_off, 0))
        return out_of_memory(b);
    return 0;
}

/* Demand d's routes: those of its pair, found once per distinct pair. */
static int demand_routes(struct build *b, int d)
{
    const struct brkga_net_input *in = b->in;
    struct brkga_net *net = b->net;
    int s = b->mpls_id[in->demands[d].src], t = b->mpls_id[in->demands[d].dst];
    if (s > t) { int x = s; s = t; t = x; }
    net->m.dem_bw[d] = in->demands[d].bw;
    int pi = -1;
    for (int q = 0; q < b->n_pairs; q++)
        if (b->pairs[q].s == s && b->pairs[q].t == t) { pi = q; break; }
    if (pi < 0) {
        int rc = add_pair(b, s, t, &pi);
        if (rc)
            return rc;
    }
    const struct pair_routes *pr = &b->pairs[pi];
    net->m.dem_route[2 * d] = pr->first;
    net->m.dem_route[2 * d + 1] = pr->first + pr->count;
    if (pr->count > net->m.max_routes)
        net->m.max_routes = pr->count;
    if (pr->count == 0) {
        net->dem_unroutable[d] = 1;
        if (!net->n_unroutable++)
            snprintf(net->unroutable_msg, sizeof net->unroutable_msg,
                     "demand %d (%s->%s) has no path in the MPLS network", d,
                     in->nodes[in->demands[d].src].name, in->nodes[in->demands[d].dst].name);
    }
    return 0;
}

/* The routes into the model (and the route node lists into net). */
static int routes_finish(struct build *b)
{
    struct brkga_net *net = b->net;
    net->m.n_routes = (int)b->rvl_off.n - 1;
    net->m.route_vl_off = grow_take(&b->rvl_off);
    net->m.route_ol_off = grow_take(&b->rol_off);
    net->m.route_vl = grow_take(&b->rvl);
    net->m.route_ol = grow_take(&b->rol);
    net->m.route_ol_mult = grow_take(&b->rmul);
    net->route_nodes = b->rnodes;
    net->route_nodes_len = b->rnodes_len.v;
    b->rnodes = NULL;
    memset(&b->rnodes_len, 0, sizeof b->rnodes_len);
    if (!net->m.route_vl || !net->m.route_ol || !net->m.route_ol_mult)
        return out_of_memory(b);
    net->m.capacity = b->in->total_bw;
    return 0;
}

static int candidate_routes(struct build *b)
{
    if (routes_setup(b))
        return -1;
    int D = (int)b->in->n_demands;
    gj_poll_phase(b->poll, 0.01, 0.05, (uint64_t)D);
    for (int d = 0; d < D; d++) {
        int rc = demand_routes(b, d);
        if (rc)
            return rc;
        if (gj_poll_step(b->poll, 1))
            return 1;
    }
    return routes_finish(b);
}

/* ---- the four phases ----------------------------------------------------------- */

int brkga_net_build(struct brkga_net *net, struct brkga_net_input *in, int max_at, int K,
                    double max_len, struct gj_poll *poll, struct gj_error *err)
{
    memset(net, 0, sizeof *net);
    net->in = *in;
    memset(in, 0, sizeof *in);
    struct build b = { .net = net, .in = &net->in, .N = (int)net->in.n_nodes, .K = K < 1 ? 1 : K,
                       .max_at = max_at, .max_len = max_len, .poll = poll, .err = err };
    int rc = classify_nodes(&b);
    if (rc == 0)
        rc = optical_graph(&b);
    if (rc == 0)
        rc = virtual_links(&b);
    if (rc == 0)
        rc = candidate_routes(&b);
    build_free(&b);
    if (rc)
        brkga_net_free(net);
    return rc;
}

/* A heap block of n bytes with glibc's header and 16-byte rounding (32 at least). */
static uint64_t block(uint64_t n)
{
    uint64_t b = (n + 8 + 15) & ~(uint64_t)15;
    return b < 32 ? 32 : b;
}

uint64_t brkga_net_host_bytes(const struct brkga_net *net)
{
    const struct brkga_net_input *in = &net->in;
    const struct brkga_net_model *m = &net->m;
    uint64_t N = in->n_nodes, E = in->n_edges, D = in->n_demands, T = (uint64_t)net->n_transit;
    uint64_t M = (uint64_t)net->n_access + T, V = (uint64_t)m->n_vlinks, R = (uint64_t)m->n_routes;
    uint64_t input = N * sizeof(struct brkga_node) + E * sizeof(struct brkga_edge) + D * sizeof(struct brkga_demand);
    for (uint64_t u = 0; u < N; u++)
        input += block(strlen(in->nodes[u].name) + 1) + (in->nodes[u].location ? block(strlen(in->nodes[u].location) + 1) : 0);
    /* the optical graph: edges, attachments, CSR both ways */
    uint64_t graph = (E + N) * (4 + 4 + 8 + 4) + (N + 1) * 4 + 2 * (E + N) * (4 + 4 + 8);
    /* from every transit node: a distance per node and a path (one block) per MPLS node,
     * as long as the virtual links' paths on average */
    uint64_t hops = 0;
    for (uint64_t v = 0; v < V; v++)
        hops += (uint64_t)net->vlinks[v].path_len;
    uint64_t avg = V ? hops / V + 1 : 1;
    uint64_t paths = T * N * 8 + T * M * (8 + block(4 * (avg + 1)));
    /* the model: routes grown by doubling (two copies while one grows), route node lists */
    uint64_t route_ints = m->route_vl_off ? (uint64_t)m->route_vl_off[R] + (uint64_t)m->route_ol_off[R] * 2 : 0;
    uint64_t model = V * (sizeof(struct brkga_vlink) + 8 + block(4 * avg)) + D * (4 + 8 + 4) +
                     3 * (2 * (R + 1) * 4 + route_ints * 4) + R * (8 + 4 + block(4 * 8));
    uint64_t yen = M * (8 + 4 + 4 + 1) + V * 2 * (4 + 4 + 8) + M * 16;
    return input + graph + paths + model + yen;
}

static void view_of(const struct brkga_net_model *m, struct brkga_net_view *v)
{
    v->n_vlinks = m->n_vlinks;
    v->n_demands = m->n_demands;
    v->n_olinks = m->n_olinks;
    v->capacity = m->capacity;
    v->vl_dist = m->vl_dist;
    v->dem_bw = m->dem_bw;
    v->dem_route = m->dem_route;
    v->route_vl_off = m->route_vl_off;
    v->route_vl = m->route_vl;
    v->route_ol_off = m->route_ol_off;
    v->route_ol = m->route_ol;
    v->route_ol_mult = m->route_ol_mult;
}

size_t brkga_net_scratch_bytes(const struct brkga_net_model *m)
{
    return brkga_net_scratch_size(m->n_vlinks, m->n_demands, m->n_olinks);
}

double brkga_net_decode(const struct brkga_net_model *m, const float *keys, void *scratch,
                        struct brkga_net_trace *trace)
{
    struct brkga_net_view v;
    view_of(m, &v);
    if (!trace)
        return brkga_net_decode_view(&v, keys, scratch, NULL, NULL, NULL);
    double f = brkga_net_decode_view(&v, keys, scratch, trace->route, trace->order,
                                     &trace->failed_demand);
    for (int i = 0; i < m->n_vlinks; i++) {
        trace->metric[i] = (double)keys[i] * m->vl_dist[i];
        trace->vl_load[i] = 0;
    }
    for (int o = 0; o < m->n_olinks; o++)
        trace->ol_load[o] = 0;
    for (int d = 0; d < m->n_demands; d++) {
        int r = trace->route[d];
        if (r < 0)
            continue;
        for (int t = m->route_vl_off[r]; t < m->route_vl_off[r + 1]; t++)
            trace->vl_load[m->route_vl[t]] += m->dem_bw[d];
        for (int t = m->route_ol_off[r]; t < m->route_ol_off[r + 1]; t++)
            trace->ol_load[m->route_ol[t]] += (long)m->dem_bw[d] * m->route_ol_mult[t];
    }
    return f;
}

double brkga_net_decode_cb(void *ctx, float *keys, void *scratch)
{
    return brkga_net_decode(ctx, keys, scratch, NULL);
}
