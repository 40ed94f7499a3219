/*
 * brkga_tsp.h — the engine-validation decoder: a TSPLIB instance (EUC_2D or ATT,
 * NODE_COORD_SECTION), keys sorted ascending (ties: city index) into a tour,
 * optional 2-opt local search whose tour is written back into the keys.
 */
#ifndef BRKGA_TSP_H
#define BRKGA_TSP_H

#include <stddef.h>

#include "common/gj_error.h"

struct gj_poll;   /* common/gj_poll.h */

#define BRKGA_TSP_MAX_CITIES 5000

enum brkga_tsp_ls { BRKGA_TSP_LS_NONE = 0, BRKGA_TSP_LS_2OPT = 1 };

struct brkga_tsp {
    char name[64];
    int n;
    int att;                  /* 1: ATT (pseudo-Euclidean) */
    int geo;                  /* 1: GEO (TSPLIB geographical); neither: EUC_2D */
    double *x, *y;
    int *dist;                /* n x n rounded distances */
    int local_search;
    struct gj_poll *poll;     /* may be NULL: a cancel cuts 2-opt short (the tour stays valid) */
};

/* 0, or -1 with err (field "tsp"). */
int brkga_tsp_parse(const char *text, size_t len, struct brkga_tsp *t, struct gj_error *err);
void brkga_tsp_free(struct brkga_tsp *t);
size_t brkga_tsp_scratch_bytes(const struct brkga_tsp *t);
/* Tour (0-based cities) of keys, without local search; returns its length. */
long brkga_tsp_tour(const struct brkga_tsp *t, const float *keys, int *tour, void *scratch);
long brkga_tsp_length(const struct brkga_tsp *t, const int *tour);
/* Decoder callback (ctx = struct brkga_tsp). */
double brkga_tsp_decode_cb(void *ctx, float *keys, void *scratch);

#endif
