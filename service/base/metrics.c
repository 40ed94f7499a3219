/*
 * metrics.c — in-process Prometheus metrics: HTTP request counts and
 * durations, job durations. One mutex; series are found by linear search
 * (a few hundred at most: routes x methods x codes, kinds x states).
 * Gauges of other layers (the per-GPU series, jobs/gpu_metrics.c; the modules')
 * are writers added at start.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/gj_kind.h"
#include "gj_config.h"
#include "service/base/metrics.h"


#define LABEL_MAX 96

static const double http_buckets[] = { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
#define N_HTTP_BUCKETS (sizeof http_buckets / sizeof http_buckets[0])
static const double job_buckets[] = { 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21600, 86400 };
#define N_JOB_BUCKETS (sizeof job_buckets / sizeof job_buckets[0])
#define MAX_BUCKETS 16

struct counter {
    char method[16];
    char route[LABEL_MAX];
    int code;
    unsigned long long n;
};

struct histogram {
    char a[LABEL_MAX];       /* route, or kind */
    char b[LABEL_MAX];       /* "", or state */
    unsigned long long buckets[MAX_BUCKETS];
    unsigned long long count;
    double sum;
};

struct series {
    void *items;
    size_t n, cap, size;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct series http_counters = { NULL, 0, 0, sizeof(struct counter) };
static struct series http_hists = { NULL, 0, 0, sizeof(struct histogram) };
static struct series job_hists = { NULL, 0, 0, sizeof(struct histogram) };
static struct series wait_hists = { NULL, 0, 0, sizeof(struct histogram) };
static struct series refusals = { NULL, 0, 0, sizeof(struct histogram) };   /* count by kind, reason */
static struct series received = { NULL, 0, 0, sizeof(struct counter) };   /* bytes by route */

#define MAX_SERIES 4096   /* bound memory whatever the labels */

static void *series_add(struct series *s)
{
    if (s->n >= MAX_SERIES)
        return NULL;
    if (s->n == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 32;
        void *ni = realloc(s->items, ncap * s->size);
        if (!ni)
            return NULL;
        s->items = ni;
        s->cap = ncap;
    }
    void *item = (char *)s->items + s->n * s->size;
    memset(item, 0, s->size);
    s->n++;
    return item;
}

static void copy_label(char *dst, const char *src)
{
    snprintf(dst, LABEL_MAX, "%s", src ? src : "");
}

void gj_metrics_init(void)
{
}

#define MAX_WRITERS 32
static gj_metrics_writer writers[MAX_WRITERS];
static size_t n_writers;

int gj_metrics_add_writer(gj_metrics_writer write)
{
    pthread_mutex_lock(&lock);
    int rc = n_writers < MAX_WRITERS ? 0 : -1;
    if (rc == 0)
        writers[n_writers++] = write;
    pthread_mutex_unlock(&lock);
    return rc;
}

static struct histogram *hist_find(struct series *s, const char *a, const char *b)
{
    struct histogram *h = s->items;
    for (size_t i = 0; i < s->n; i++)
        if (strncmp(h[i].a, a ? a : "", LABEL_MAX - 1) == 0 && strncmp(h[i].b, b ? b : "", LABEL_MAX - 1) == 0)
            return &h[i];
    return NULL;
}

static struct histogram *hist_get(struct series *s, const char *a, const char *b)
{
    struct histogram *found = hist_find(s, a, b);
    if (found)
        return found;
    struct histogram *n = series_add(s);
    if (n) {
        copy_label(n->a, a);
        copy_label(n->b, b);
    }
    return n;
}

static void hist_observe(struct histogram *h, const double *bounds, size_t nb, double v)
{
    if (!h)
        return;
    if (v < 0)
        v = 0;
    for (size_t i = 0; i < nb; i++)
        if (v <= bounds[i])
            h->buckets[i]++;
    h->count++;
    h->sum += v;
}

/* The byte counter of a route's request bodies; NULL past MAX_SERIES. Under lock. */
static struct counter *received_get(const char *route)
{
    struct counter *c = received.items;
    for (size_t i = 0; i < received.n; i++)
        if (strncmp(c[i].route, route, LABEL_MAX - 1) == 0)
            return &c[i];
    struct counter *n = series_add(&received);
    if (n)
        copy_label(n->route, route);
    return n;
}

void gj_metrics_http(const char *method, const char *route, int status, double seconds, uint64_t body_bytes)
{
    pthread_mutex_lock(&lock);
    struct counter *c = http_counters.items, *found = NULL;
    for (size_t i = 0; i < http_counters.n && !found; i++)
        if (c[i].code == status && strcmp(c[i].method, method) == 0 &&
            strncmp(c[i].route, route, LABEL_MAX - 1) == 0)
            found = &c[i];
    if (!found && (found = series_add(&http_counters)) != NULL) {
        snprintf(found->method, sizeof found->method, "%s", method);
        copy_label(found->route, route);
        found->code = status;
    }
    if (found)
        found->n++;
    hist_observe(hist_get(&http_hists, route, ""), http_buckets, N_HTTP_BUCKETS, seconds);
    struct counter *in = body_bytes ? received_get(route) : NULL;
    if (in)
        in->n += body_bytes;
    pthread_mutex_unlock(&lock);
}

void gj_metrics_placement_refused(const char *kind, const char *reason)
{
    pthread_mutex_lock(&lock);
    struct histogram *h = hist_get(&refusals, kind, reason);
    if (h)
        h->count++;
    pthread_mutex_unlock(&lock);
}

void gj_metrics_job_waited(const char *kind, double seconds)
{
    pthread_mutex_lock(&lock);
    hist_observe(hist_get(&wait_hists, kind, NULL), job_buckets, N_JOB_BUCKETS, seconds);
    pthread_mutex_unlock(&lock);
}

void gj_metrics_job_finished(const char *kind, const char *state, double seconds)
{
    pthread_mutex_lock(&lock);
    hist_observe(hist_get(&job_hists, kind, state), job_buckets, N_JOB_BUCKETS, seconds);
    pthread_mutex_unlock(&lock);
}

void gj_metrics_put_label(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fprintf(f, "\\%c", *v);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

static void put_bound(FILE *f, double b)
{
    fprintf(f, "%g", b);
}

static void write_hist(FILE *f, const char *name, const struct histogram *h, const char *la, const char *lb,
                       const double *bounds, size_t nb)
{
    for (size_t i = 0; i <= nb; i++) {
        fprintf(f, "%s_bucket{%s=\"", name, la);
        gj_metrics_put_label(f, h->a);
        if (lb) {
            fprintf(f, "\",%s=\"", lb);
            gj_metrics_put_label(f, h->b);
        }
        fputs("\",le=\"", f);
        if (i < nb)
            put_bound(f, bounds[i]);
        else
            fputs("+Inf", f);
        fprintf(f, "\"} %llu\n", i < nb ? h->buckets[i] : h->count);
    }
    fprintf(f, "%s_sum{%s=\"", name, la);
    gj_metrics_put_label(f, h->a);
    if (lb) {
        fprintf(f, "\",%s=\"", lb);
        gj_metrics_put_label(f, h->b);
    }
    fprintf(f, "\"} %.6f\n", h->sum);
    fprintf(f, "%s_count{%s=\"", name, la);
    gj_metrics_put_label(f, h->a);
    if (lb) {
        fprintf(f, "\",%s=\"", lb);
        gj_metrics_put_label(f, h->b);
    }
    fprintf(f, "\"} %llu\n", h->count);
}

/* Every kind and reason, 0 until it happens: an alert's increase() needs the series before. */
static void write_refusals(FILE *f)
{
    static const char *const reasons[] = { "device_memory", "host_memory" };
    for (size_t k = 0; k < gj_kind_count(); k++) {
        const char *kind = gj_kind_at(k)->name;
        for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++) {
            const struct histogram *h = hist_find(&refusals, kind, reasons[i]);
            fputs("gpujobd_placement_refusals_total{kind=\"", f);
            gj_metrics_put_label(f, kind);
            fprintf(f, "\",reason=\"%s\"} %llu\n", reasons[i], h ? h->count : 0ULL);
        }
    }
}

void gj_metrics_write(FILE *f)
{
    pthread_mutex_lock(&lock);
    fputs("# HELP gpujobd_http_requests_total HTTP requests by method, route template and status code.\n"
          "# TYPE gpujobd_http_requests_total counter\n", f);
    const struct counter *c = http_counters.items;
    for (size_t i = 0; i < http_counters.n; i++) {
        fputs("gpujobd_http_requests_total{method=\"", f);
        gj_metrics_put_label(f, c[i].method);
        fputs("\",route=\"", f);
        gj_metrics_put_label(f, c[i].route);
        fprintf(f, "\",code=\"%d\"} %llu\n", c[i].code, c[i].n);
    }
    fputs("# HELP gpujobd_http_request_duration_seconds Time from request headers to the end of the response.\n"
          "# TYPE gpujobd_http_request_duration_seconds histogram\n", f);
    const struct histogram *h = http_hists.items;
    for (size_t i = 0; i < http_hists.n; i++)
        write_hist(f, "gpujobd_http_request_duration_seconds", &h[i], "route", NULL, http_buckets,
                   N_HTTP_BUCKETS);
    fputs("# HELP gpujobd_job_duration_seconds Run time of finished jobs by kind and final state.\n"
          "# TYPE gpujobd_job_duration_seconds histogram\n", f);
    h = job_hists.items;
    for (size_t i = 0; i < job_hists.n; i++)
        write_hist(f, "gpujobd_job_duration_seconds", &h[i], "kind", "state", job_buckets, N_JOB_BUCKETS);
    fputs("# HELP gpujobd_job_wait_seconds Time jobs waited in the queue, from when they could run to their claim.\n"
          "# TYPE gpujobd_job_wait_seconds histogram\n", f);
    h = wait_hists.items;
    for (size_t i = 0; i < wait_hists.n; i++)
        write_hist(f, "gpujobd_job_wait_seconds", &h[i], "kind", NULL, job_buckets, N_JOB_BUCKETS);
    fputs("# HELP gpujobd_placement_refusals_total Jobs failed because no device or host could ever hold them.\n"
          "# TYPE gpujobd_placement_refusals_total counter\n", f);
    write_refusals(f);
    fputs("# HELP gpujobd_http_received_bytes_total Request body bytes received, by route template.\n"
          "# TYPE gpujobd_http_received_bytes_total counter\n", f);
    c = received.items;
    for (size_t i = 0; i < received.n; i++) {
        fputs("gpujobd_http_received_bytes_total{route=\"", f);
        gj_metrics_put_label(f, c[i].route);
        fprintf(f, "\"} %llu\n", c[i].n);
    }
    size_t nw = n_writers;
    pthread_mutex_unlock(&lock);
    for (size_t i = 0; i < nw; i++)   /* the modules' own (module.h: write_metrics) */
        writers[i](f);
}
