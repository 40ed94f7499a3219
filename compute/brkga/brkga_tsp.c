/*
 * brkga_tsp.c — TSPLIB parsing and the random-key tour decoder with optional 2-opt.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brkga/brkga_engine.h"       /* brkga_fail */
#include "brkga/brkga_net_decode.h"   /* brkga_sort_u64 */
#include "brkga/brkga_tsp.h"

void brkga_tsp_free(struct brkga_tsp *t)
{
    free(t->x);
    free(t->y);
    free(t->dist);
    memset(t, 0, sizeof *t);
}

static int att_dist(double dx, double dy)
{
    double r = sqrt((dx * dx + dy * dy) / 10.0);
    int ti = (int)r;   /* TSPLIB: nint then +1 when below; the reference code truncates */
    return ti < r ? ti + 1 : ti;
}

/* TSPLIB GEO: coordinates are DDD.MM (degrees, minutes); the reference code truncates
 * the degrees and uses PI = 3.141592 and an Earth radius of 6378.388 km. */
static double geo_rad(double x)
{
    int deg = (int)x;
    double min = x - deg;
    return 3.141592 * (deg + 5.0 * min / 3.0) / 180.0;
}

static int geo_dist(double xi, double yi, double xj, double yj)
{
    double lai = geo_rad(xi), loi = geo_rad(yi), laj = geo_rad(xj), loj = geo_rad(yj);
    double q1 = cos(loi - loj), q2 = cos(lai - laj), q3 = cos(lai + laj);
    double a = 0.5 * ((1.0 + q1) * q2 - (1.0 - q1) * q3);
    if (a > 1.0)
        a = 1.0;
    if (a < -1.0)
        a = -1.0;
    return (int)(6378.388 * acos(a) + 1.0);
}

/* Reads one line into buf (bounded); returns the next offset. */
static size_t next_line(const char *text, size_t len, size_t off, char *buf, size_t bufsz, int *too_long)
{
    size_t i = 0;
    *too_long = 0;
    while (off < len && text[off] != '\n') {
        if (i + 1 < bufsz)
            buf[i++] = text[off];
        else
            *too_long = 1;
        off++;
    }
    if (off < len)
        off++;
    while (i > 0 && (buf[i - 1] == '\r' || isspace((unsigned char)buf[i - 1])))
        i--;
    buf[i] = '\0';
    return off;
}

int brkga_tsp_parse(const char *text, size_t len, struct brkga_tsp *t, char *msg, size_t msglen)
{
    memset(t, 0, sizeof *t);
    char line[512];
    size_t off = 0;
    int dim = -1, type = -1, in_coords = 0, lineno = 0, have = 0, too_long;
    unsigned char *seen = NULL;
    while (off < len) {
        off = next_line(text, len, off, line, sizeof line, &too_long);
        lineno++;
        if (too_long)
            goto bad_line;
        char *s = line;
        while (isspace((unsigned char)*s))
            s++;
        if (!*s)
            continue;
        if (!strcmp(s, "EOF"))
            break;
        if (in_coords) {
            char *end;
            errno = 0;
            long id = strtol(s, &end, 10);
            if (end == s)
                goto bad_line;
            double x = strtod(end, &end), y;
            char *e2;
            y = strtod(end, &e2);
            if (e2 == end || errno || !isfinite(x) || !isfinite(y) || fabs(x) > 1e9 || fabs(y) > 1e9)
                goto bad_line;
            while (isspace((unsigned char)*e2))
                e2++;
            if (*e2)
                goto bad_line;
            if (id < 1 || id > dim) {
                brkga_fail(msg, msglen, "tsp: line %d: city %ld outside 1..%d", lineno, id, dim);
                goto err;
            }
            if (seen[id - 1]) {
                brkga_fail(msg, msglen, "tsp: line %d: city %ld given twice", lineno, id);
                goto err;
            }
            seen[id - 1] = 1;
            t->x[id - 1] = x;
            t->y[id - 1] = y;
            have++;
            continue;
        }
        if (!strncmp(s, "NODE_COORD_SECTION", 18)) {
            if (dim < 2 || type < 0) {
                brkga_fail(msg, msglen, "tsp: NODE_COORD_SECTION before DIMENSION and EDGE_WEIGHT_TYPE "
                     "(EUC_2D, ATT or GEO)");
                goto err;
            }
            t->x = calloc((size_t)dim, sizeof(double));
            t->y = calloc((size_t)dim, sizeof(double));
            seen = calloc((size_t)dim, 1);
            if (!t->x || !t->y || !seen) {
                brkga_fail(msg, msglen, "out of memory");
                goto err;
            }
            in_coords = 1;
            continue;
        }
        char *colon = strchr(s, ':');
        if (!colon)
            goto bad_line;
        *colon = '\0';
        char *key = s, *val = colon + 1;
        for (char *e = colon - 1; e >= key && isspace((unsigned char)*e); e--)
            *e = '\0';
        while (isspace((unsigned char)*val))
            val++;
        if (!strcmp(key, "NAME")) {
            snprintf(t->name, sizeof t->name, "%.63s", val);
        } else if (!strcmp(key, "TYPE")) {
            if (strcmp(val, "TSP") != 0) {
                brkga_fail(msg, msglen, "tsp: TYPE %.40s is not supported (TSP only)", val);
                goto err;
            }
        } else if (!strcmp(key, "DIMENSION")) {
            char *end;
            long d = strtol(val, &end, 10);
            if (*end || d < 3 || d > BRKGA_TSP_MAX_CITIES) {
                brkga_fail(msg, msglen, "tsp: DIMENSION %.40s is not an integer in 3..%d", val,
                     BRKGA_TSP_MAX_CITIES);
                goto err;
            }
            dim = (int)d;
        } else if (!strcmp(key, "EDGE_WEIGHT_TYPE")) {
            if (!strcmp(val, "EUC_2D"))
                type = 0;
            else if (!strcmp(val, "ATT"))
                type = 1;
            else if (!strcmp(val, "GEO"))
                type = 2;
            else {
                brkga_fail(msg, msglen, "tsp: EDGE_WEIGHT_TYPE %.40s is not supported (EUC_2D, ATT or GEO)", val);
                goto err;
            }
        }
        /* COMMENT and other keys are ignored */
        continue;
bad_line:
        brkga_fail(msg, msglen, "tsp: line %d is malformed", lineno);
        goto err;
    }
    if (!in_coords) {
        brkga_fail(msg, msglen, "tsp: no NODE_COORD_SECTION");
        goto err;
    }
    if (have != dim) {
        brkga_fail(msg, msglen, "tsp: %d of %d cities have coordinates (truncated file?)", have, dim);
        goto err;
    }
    free(seen);
    seen = NULL;
    t->n = dim;
    t->att = type == 1;
    t->geo = type == 2;
    t->dist = malloc((size_t)dim * (size_t)dim * sizeof(int));
    if (!t->dist) {
        brkga_fail(msg, msglen, "out of memory");
        goto err;
    }
    for (int i = 0; i < dim; i++)
        for (int j = 0; j < dim; j++) {
            double dx = t->x[i] - t->x[j], dy = t->y[i] - t->y[j];
            int d;
            if (type == 2)
                d = i == j ? 0 : geo_dist(t->x[i], t->y[i], t->x[j], t->y[j]);
            else if (type == 1)
                d = att_dist(dx, dy);
            else
                d = (int)(sqrt(dx * dx + dy * dy) + 0.5);
            t->dist[(size_t)i * dim + j] = d;
        }
    return 0;
err:
    free(seen);
    brkga_tsp_free(t);
    return -1;
}

size_t brkga_tsp_scratch_bytes(const struct brkga_tsp *t)
{
    return (size_t)t->n * (16 + 4 + 4 + 4) + 64;
}

long brkga_tsp_length(const struct brkga_tsp *t, const int *tour)
{
    long L = 0;
    for (int i = 0; i < t->n; i++)
        L += t->dist[(size_t)tour[i] * t->n + tour[(i + 1) % t->n]];
    return L;
}

long brkga_tsp_tour(const struct brkga_tsp *t, const float *keys, int *tour, void *scratch)
{
    uint64_t *a = scratch, *tmp = a + t->n;
    for (int i = 0; i < t->n; i++) {
        uint32_t bits;
        memcpy(&bits, &keys[i], 4);
        a[i] = ((uint64_t)bits << 32) | (uint32_t)i;
    }
    brkga_sort_u64(a, tmp, t->n);
    for (int i = 0; i < t->n; i++)
        tour[i] = (int)(uint32_t)a[i];
    return brkga_tsp_length(t, tour);
}

/* First-improvement 2-opt until no move improves. */
static long two_opt(const struct brkga_tsp *t, int *tour, long L)
{
    int n = t->n;
    const int *D = t->dist;
    int improved = 1;
    while (improved) {
        improved = 0;
        for (int i = 0; i < n - 1; i++) {
            int a = tour[i], b = tour[i + 1];
            for (int j = i + 2; j < n; j++) {
                if (i == 0 && j == n - 1)
                    continue;
                int c = tour[j], d = tour[(j + 1) % n];
                int delta = D[(size_t)a * n + c] + D[(size_t)b * n + d] - D[(size_t)a * n + b] -
                            D[(size_t)c * n + d];
                if (delta < 0) {
                    for (int l = i + 1, r = j; l < r; l++, r--) {
                        int x = tour[l]; tour[l] = tour[r]; tour[r] = x;
                    }
                    L += delta;
                    improved = 1;
                    b = tour[i + 1];
                }
            }
        }
    }
    return L;
}

double brkga_tsp_decode_cb(void *ctx, float *keys, void *scratch)
{
    const struct brkga_tsp *t = ctx;
    int n = t->n;
    uint64_t *sorted = scratch;
    int *tour = (int *)((uint64_t *)scratch + 2 * (size_t)n);
    long L = brkga_tsp_tour(t, keys, tour, scratch);
    if (t->local_search == BRKGA_TSP_LS_NONE)
        return (double)L;
    L = two_opt(t, tour, L);
    /* write back: the same key values, reassigned in tour order (strictly
     * increasing, so the keys decode to this very tour) */
    float prev = -1.0f;
    for (int p = 0; p < n; p++) {
        uint32_t bits = (uint32_t)(sorted[p] >> 32);
        float k;
        memcpy(&k, &bits, 4);
        if (!(k > prev))
            k = nextafterf(prev, 2.0f);
        keys[tour[p]] = k;
        prev = k;
    }
    return (double)L;
}
