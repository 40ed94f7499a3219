/*
 * brkga_tsp.c — TSPLIB parsing and the random-key tour decoder with optional 2-opt.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gj_poll.h"
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

/* What the parser has seen so far. */
struct tsp_parse {
    struct brkga_tsp *t;
    int dim, type;            /* type: 0 EUC_2D, 1 ATT, 2 GEO, -1 not given */
    int in_coords, lineno, have;
    unsigned char *seen;      /* dim: city given */
    struct gj_error *err;
};

static int tsp_fail(struct tsp_parse *tp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int tsp_fail(struct tsp_parse *tp, const char *fmt, ...)
{
    char msg[sizeof tp->err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gj_error_set(tp->err, "tsp", "%s", msg);
}

static int malformed(struct tsp_parse *tp)
{
    return tsp_fail(tp, "tsp: line %d is malformed", tp->lineno);
}

/* "id x y" of NODE_COORD_SECTION. */
static int coord_line(struct tsp_parse *tp, const char *s)
{
    char *end, *e2;
    errno = 0;
    long id = strtol(s, &end, 10);
    if (end == s)
        return malformed(tp);
    double x = strtod(end, &end), y = strtod(end, &e2);
    if (e2 == end || errno || !isfinite(x) || !isfinite(y) || fabs(x) > 1e9 || fabs(y) > 1e9)
        return malformed(tp);
    while (isspace((unsigned char)*e2))
        e2++;
    if (*e2)
        return malformed(tp);
    if (id < 1 || id > tp->dim)
        return tsp_fail(tp, "tsp: line %d: city %ld outside 1..%d", tp->lineno, id, tp->dim);
    if (tp->seen[id - 1])
        return tsp_fail(tp, "tsp: line %d: city %ld given twice", tp->lineno, id);
    tp->seen[id - 1] = 1;
    tp->t->x[id - 1] = x;
    tp->t->y[id - 1] = y;
    tp->have++;
    return 0;
}

static int begin_coords(struct tsp_parse *tp)
{
    if (tp->dim < 2 || tp->type < 0)
        return tsp_fail(tp, "tsp: NODE_COORD_SECTION before DIMENSION and EDGE_WEIGHT_TYPE (EUC_2D, ATT or GEO)");
    tp->t->x = calloc((size_t)tp->dim, sizeof(double));
    tp->t->y = calloc((size_t)tp->dim, sizeof(double));
    tp->seen = calloc((size_t)tp->dim, 1);
    if (!tp->t->x || !tp->t->y || !tp->seen)
        return gj_error_set(tp->err, "tsp", "out of memory");
    tp->in_coords = 1;
    return 0;
}

/* "KEY : value" of the specification part; unknown keys (COMMENT...) are ignored. */
static int header_line(struct tsp_parse *tp, char *s)
{
    char *colon = strchr(s, ':');
    if (!colon)
        return malformed(tp);
    *colon = '\0';
    char *key = s, *val = colon + 1;
    for (char *e = colon - 1; e >= key && isspace((unsigned char)*e); e--)
        *e = '\0';
    while (isspace((unsigned char)*val))
        val++;
    if (!strcmp(key, "NAME")) {
        snprintf(tp->t->name, sizeof tp->t->name, "%.63s", val);
    } else if (!strcmp(key, "TYPE")) {
        if (strcmp(val, "TSP") != 0)
            return tsp_fail(tp, "tsp: TYPE %.40s is not supported (TSP only)", val);
    } else if (!strcmp(key, "DIMENSION")) {
        char *end;
        long d = strtol(val, &end, 10);
        if (*end || d < 3 || d > BRKGA_TSP_MAX_CITIES)
            return tsp_fail(tp, "tsp: DIMENSION %.40s is not an integer in 3..%d", val, BRKGA_TSP_MAX_CITIES);
        tp->dim = (int)d;
    } else if (!strcmp(key, "EDGE_WEIGHT_TYPE")) {
        static const char *const types[] = { "EUC_2D", "ATT", "GEO" };
        tp->type = -1;
        for (int i = 0; i < 3; i++)
            if (!strcmp(val, types[i]))
                tp->type = i;
        if (tp->type < 0)
            return tsp_fail(tp, "tsp: EDGE_WEIGHT_TYPE %.40s is not supported (EUC_2D, ATT or GEO)", val);
    }
    return 0;
}

/* The rounded distances of every pair, as TSPLIB defines them for the type. */
static int distance_matrix(struct tsp_parse *tp)
{
    struct brkga_tsp *t = tp->t;
    int dim = tp->dim;
    t->n = dim;
    t->att = tp->type == 1;
    t->geo = tp->type == 2;
    t->dist = malloc((size_t)dim * (size_t)dim * sizeof(int));
    if (!t->dist)
        return gj_error_set(tp->err, "tsp", "out of memory");
    for (int i = 0; i < dim; i++)
        for (int j = 0; j < dim; j++) {
            double dx = t->x[i] - t->x[j], dy = t->y[i] - t->y[j];
            int d;
            if (t->geo)
                d = i == j ? 0 : geo_dist(t->x[i], t->y[i], t->x[j], t->y[j]);
            else if (t->att)
                d = att_dist(dx, dy);
            else
                d = (int)(sqrt(dx * dx + dy * dy) + 0.5);
            t->dist[(size_t)i * dim + j] = d;
        }
    return 0;
}

static int parse_lines(struct tsp_parse *tp, const char *text, size_t len)
{
    char line[512];
    size_t off = 0;
    int too_long;
    while (off < len) {
        off = next_line(text, len, off, line, sizeof line, &too_long);
        tp->lineno++;
        if (too_long)
            return malformed(tp);
        char *s = line;
        while (isspace((unsigned char)*s))
            s++;
        if (!*s)
            continue;
        if (!strcmp(s, "EOF"))
            break;
        int rc = tp->in_coords ? coord_line(tp, s)
                 : !strncmp(s, "NODE_COORD_SECTION", 18) ? begin_coords(tp) : header_line(tp, s);
        if (rc)
            return -1;
    }
    if (!tp->in_coords)
        return tsp_fail(tp, "tsp: no NODE_COORD_SECTION");
    if (tp->have != tp->dim)
        return tsp_fail(tp, "tsp: %d of %d cities have coordinates (truncated file?)", tp->have, tp->dim);
    return 0;
}

int brkga_tsp_parse(const char *text, size_t len, struct brkga_tsp *t, struct gj_error *err)
{
    memset(t, 0, sizeof *t);
    struct tsp_parse tp = { .t = t, .dim = -1, .type = -1, .err = err };
    int rc = parse_lines(&tp, text, len);
    free(tp.seen);
    if (rc == 0)
        rc = distance_matrix(&tp);
    if (rc)
        brkga_tsp_free(t);
    return rc;
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

/* First-improvement 2-opt until no move improves, or a cancel (each move keeps the tour
 * valid and L its length, so a cut-short tour is still measured right). */
static long two_opt(const struct brkga_tsp *t, int *tour, long L)
{
    int n = t->n;
    const int *D = t->dist;
    int improved = 1;
    while (improved) {
        improved = 0;
        for (int i = 0; i < n - 1 && !gj_poll_step(t->poll, 0); i++) {
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
