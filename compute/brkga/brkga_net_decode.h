/*
 * brkga_net_decode.h — the decoder of Table 5-45, written once for the CPU and the
 * GPU (included by brkga_net.c and kernels/brkga/brkga_gpu.cu).
 *
 *   metric[v] = key[v] * distance[v]
 *   demands routed in ascending order of their keys (ties: demand index)
 *   for each demand: routes re-costed with the metrics; the cheapest route (ties:
 *   Yen's order) on which every optical link keeps load <= capacity is taken
 *   fitness = number of distinct optical links carrying load; infeasible = huge
 *
 * Arithmetic is plain IEEE double with no contraction (the CUDA file is built with
 * -fmad=false), so both sides compute the same costs and the same routing.
 */
#ifndef BRKGA_NET_DECODE_H
#define BRKGA_NET_DECODE_H

#include <stdint.h>
#include <string.h>

#include "brkga/brkga_rng.h"   /* BRKGA_HD */

#define BRKGA_NET_INFEASIBLE 1e15

struct brkga_net_view {
    int n_vlinks, n_demands, n_olinks;
    long capacity;
    const double *vl_dist;
    const int *dem_bw, *dem_route, *route_vl_off, *route_vl, *route_ol_off, *route_ol,
        *route_ol_mult;
};

/* Bottom-up merge sort of n 64-bit values; tmp holds n. Result in a. */
BRKGA_HD void brkga_sort_u64(uint64_t *a, uint64_t *tmp, int n)
{
    uint64_t *src = a, *dst = tmp;
    for (int w = 1; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                dst[o++] = src[j] < src[i] ? src[j++] : src[i++];
            while (i < mid)
                dst[o++] = src[i++];
            while (j < hi)
                dst[o++] = src[j++];
        }
        uint64_t *t = src; src = dst; dst = t;
    }
    if (src != a)
        for (int i = 0; i < n; i++)
            a[i] = src[i];
}

/* Scratch layout (bytes): metric double[V] | order u64[D] | tmp u64[D] | load long long[O] */
BRKGA_HD size_t brkga_net_scratch_size(int V, int D, int O)
{
    return (size_t)V * 8 + (size_t)D * 16 + (size_t)O * 8 + 16;
}

/* Returns the fitness; when route_out is not NULL it receives each demand's route
 * (global index, -1 when not routed) and order_out the routing order. */
BRKGA_HD double brkga_net_decode_view(const struct brkga_net_view *m, const float *keys,
                                      unsigned char *scratch, int *route_out, int *order_out,
                                      int *failed_out)
{
    int V = m->n_vlinks, D = m->n_demands, O = m->n_olinks;
    double *metric = (double *)scratch;
    uint64_t *order = (uint64_t *)(scratch + (size_t)V * 8);
    uint64_t *tmp = order + D;
    long long *load = (long long *)(tmp + D);
    for (int v = 0; v < V; v++)
        metric[v] = (double)keys[v] * m->vl_dist[v];
    for (int d = 0; d < D; d++) {
        float k = keys[V + d];
        uint32_t bits;
        memcpy(&bits, &k, 4);   /* keys are >= 0: bit patterns order like the values */
        order[d] = ((uint64_t)bits << 32) | (uint32_t)d;
    }
    brkga_sort_u64(order, tmp, D);
    for (int o = 0; o < O; o++)
        load[o] = 0;
    int used = 0;
    if (failed_out)
        *failed_out = -1;
    for (int q = 0; q < D; q++) {
        int d = (int)(uint32_t)order[q];
        if (order_out)
            order_out[q] = d;
        long long bw = m->dem_bw[d];
        int best = -1;
        double best_cost = 0;
        for (int r = m->dem_route[2 * d]; r < m->dem_route[2 * d + 1]; r++) {
            double cost = 0;
            for (int t = m->route_vl_off[r]; t < m->route_vl_off[r + 1]; t++)
                cost = cost + metric[m->route_vl[t]];
            if (best >= 0 && !(cost < best_cost))
                continue;
            int ok = 1;
            for (int t = m->route_ol_off[r]; t < m->route_ol_off[r + 1]; t++)
                if (load[m->route_ol[t]] + bw * m->route_ol_mult[t] > m->capacity) {
                    ok = 0;
                    break;
                }
            if (ok) {
                best = r;
                best_cost = cost;
            }
        }
        if (route_out)
            route_out[d] = best;
        if (best < 0) {
            if (failed_out)
                *failed_out = d;
            if (route_out)
                for (int z = q + 1; z < D; z++)
                    route_out[(int)(uint32_t)order[z]] = -1;
            return BRKGA_NET_INFEASIBLE;
        }
        for (int t = m->route_ol_off[best]; t < m->route_ol_off[best + 1]; t++) {
            int o = m->route_ol[t];
            if (load[o] == 0)
                used++;
            load[o] += bw * m->route_ol_mult[t];
        }
    }
    return (double)used;
}

#endif
