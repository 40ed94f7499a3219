/*
 * brkga_net.h — the IP/MPLS-over-WSON problem of seed 002 (chapters 4 and 5):
 * input (Network.xml / Demands.xml or their JSON equivalents), pre-computation
 * (Dijkstra on the optical layer for the complete MPLS network, pruning of each
 * access node to its maxVEdgesA_T cheapest transit links, Yen's K shortest loopless
 * paths per demand) and the flattened model the decoder of Table 5-45 reads.
 */
#ifndef BRKGA_NET_H
#define BRKGA_NET_H

#include <stddef.h>
#include <stdint.h>

#include "common/gj_error.h"

struct gj_poll;   /* common/gj_poll.h */

enum brkga_node_type { BRKGA_NODE_ACCESS = 0, BRKGA_NODE_TRANSIT = 1, BRKGA_NODE_CORE = 2 };

struct brkga_node {
    char *name;
    int type;
    char *location;           /* optional: the core node a virtual node resides at */
    int loc;                  /* its index (set by brkga_net_parse_network), -1 none */
};

struct brkga_edge {
    int a, b;                 /* node indices */
    double distance;
};

struct brkga_demand {
    int src, dst;             /* node indices (access nodes) */
    int bw;                   /* Gbps: 1, 10, 40 or 100 */
};

/* The loaded input. */
struct brkga_net_input {
    struct brkga_node *nodes;
    size_t n_nodes;
    struct brkga_edge *edges;
    size_t n_edges;
    long total_bw;
    struct brkga_demand *demands;
    size_t n_demands;
};

/* A virtual (MPLS) link and its optical path. */
struct brkga_vlink {
    int a, b;                 /* node indices: a transit, b access or transit (thesis order) */
    double distance;
    int *path;                /* node indices a, core..., b */
    int path_len;
};

/* The flattened model: what the decoder needs, in plain arrays (copied to the GPU). */
struct brkga_net_model {
    int n_vlinks, n_demands, n_olinks, n_routes, max_routes;
    long capacity;
    double *vl_dist;          /* n_vlinks */
    int *dem_bw;              /* n_demands */
    int *dem_route;           /* 2 n_demands: routes of demand d are [dem_route[2d], dem_route[2d+1]) */
    int *route_vl_off;        /* n_routes + 1 */
    int *route_vl;            /* virtual links of each route, in order from source */
    int *route_ol_off;        /* n_routes + 1 */
    int *route_ol;            /* distinct optical links of each route */
    int *route_ol_mult;       /* times the route crosses that optical link */
};

struct brkga_net {
    struct brkga_net_input in;
    int n_access, n_transit, n_core;
    /* optical links: edges between two core nodes */
    int *olink_edge;          /* n_olinks: edge index */
    struct brkga_vlink *vlinks;
    int **route_nodes;        /* n_routes: MPLS node sequence */
    int *route_nodes_len;
    char unroutable_msg[256];
    int *dem_unroutable;      /* n_demands: 1 when no path exists in the pruned MPLS network */
    int n_unroutable;
    struct brkga_net_model m;
};

/* Parsing (brkga_net_parse.c): format detected from the first byte ('<' XML, '{' JSON).
 * 0, or -1 with err (field "network" or "demands"). */
int brkga_net_parse_network(const char *text, size_t len, struct brkga_net_input *in,
                            struct gj_error *err);
int brkga_net_parse_demands(const char *text, size_t len, struct brkga_net_input *in,
                            struct gj_error *err);
void brkga_net_input_free(struct brkga_net_input *in);

/* Pre-computation. max_at: maxVEdgesA_T; k: numKSPRoutes; max_len: maximum optical
 * path distance of a virtual link (<= 0: unlimited). Takes ownership of in (parsed by
 * the functions above). poll (may be NULL) is stepped as it goes. 0; -1 with err; or
 * 1 when poll saw a cancel. net holds nothing after -1 or 1. */
int brkga_net_build(struct brkga_net *net, struct brkga_net_input *in, int max_at, int k,
                    double max_len, struct gj_poll *poll, struct gj_error *err);
void brkga_net_free(struct brkga_net *net);
/* Host bytes of a built network: what the pre-computation held at its peak (the input,
 * the optical graph, the paths from every transit node), and the model it keeps. */
uint64_t brkga_net_host_bytes(const struct brkga_net *net);

/* Decoder trace: what the best chromosome routed. */
struct brkga_net_trace {
    double *metric;           /* n_vlinks */
    long *vl_load;            /* n_vlinks */
    long *ol_load;            /* n_olinks */
    int *route;               /* n_demands: global route index, -1 unroutable */
    int *order;               /* n_demands: routing order */
    int failed_demand;        /* first demand that found no route, -1 none */
};

size_t brkga_net_scratch_bytes(const struct brkga_net_model *m);
/* CPU decode: fitness = number of optical links used; BRKGA_INFEASIBLE when a demand
 * cannot be routed. trace may be NULL. */
double brkga_net_decode(const struct brkga_net_model *m, const float *keys, void *scratch,
                        struct brkga_net_trace *trace);
double brkga_net_decode_cb(void *ctx, float *keys, void *scratch);

#endif
