/*
 * job_cache.c — status reads answered from memory (job_cache.h). A job id's FNV-1a hash
 * picks its set; each set counts the forgets of its jobs, and that count is the ticket a
 * read takes before it asks the database.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "service/jobs/job_cache.h"

#define WAYS 8

struct entry {
    char id[40];
    char tenant[40];
    char state[16];
    char *job;               /* the answer's body, as gj_respond_json writes it; NULL: free */
    size_t len;
    uint64_t put_ms;
};

struct gj_job_cache {
    pthread_mutex_t lock;
    struct entry *entries;   /* n_sets * WAYS; job NULL: free */
    uint64_t *forgets;       /* per set */
    size_t n_sets;
    uint64_t ttl_ms;
    int live;
    unsigned long long hits, misses;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct gj_job_cache *gj_job_cache_new(size_t capacity, uint64_t ttl_ms)
{
    struct gj_job_cache *jc = calloc(1, sizeof *jc);
    if (!jc)
        return NULL;
    jc->n_sets = capacity / WAYS ? capacity / WAYS : 1;
    jc->entries = calloc(jc->n_sets * WAYS, sizeof *jc->entries);
    jc->forgets = calloc(jc->n_sets, sizeof *jc->forgets);
    if (!jc->entries || !jc->forgets || pthread_mutex_init(&jc->lock, NULL) != 0) {
        free(jc->forgets);
        free(jc->entries);
        free(jc);
        return NULL;
    }
    jc->ttl_ms = ttl_ms;
    return jc;
}

static void drop(struct entry *e)
{
    free(e->job);
    e->job = NULL;
}

void gj_job_cache_free(struct gj_job_cache *jc)
{
    if (!jc)
        return;
    for (size_t i = 0; i < jc->n_sets * WAYS; i++)
        drop(&jc->entries[i]);
    pthread_mutex_destroy(&jc->lock);
    free(jc->forgets);
    free(jc->entries);
    free(jc);
}

static size_t set_index(const struct gj_job_cache *jc, const char *id)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ (uint64_t)tolower(*p)) * 1099511628211ULL;   /* a UUID in either case */
    return (size_t)(h % jc->n_sets);
}

/* id's entry in its set, or NULL. */
static struct entry *find(struct gj_job_cache *jc, size_t set, const char *id)
{
    struct entry *ways = &jc->entries[set * WAYS];
    for (int i = 0; i < WAYS; i++)
        if (ways[i].job && strcasecmp(ways[i].id, id) == 0)
            return &ways[i];
    return NULL;
}

char *gj_job_cache_get(struct gj_job_cache *jc, const char *job_id, const char *tenant_id, char state[16],
                       size_t *len)
{
    if (!jc || !job_id || !tenant_id || strlen(job_id) >= sizeof ((struct entry *)0)->id)
        return NULL;
    char *copy = NULL;
    uint64_t now = now_ms();
    pthread_mutex_lock(&jc->lock);
    struct entry *e = jc->live ? find(jc, set_index(jc, job_id), job_id) : NULL;
    /* one put after now was read (another thread's) is as fresh as can be */
    if (e && now > e->put_ms && now - e->put_ms >= jc->ttl_ms) {
        drop(e);   /* expired: the database is asked again */
        e = NULL;
    }
    if (e && strcmp(e->tenant, tenant_id) == 0 && (copy = malloc(e->len + 1)) != NULL) {
        memcpy(copy, e->job, e->len + 1);
        *len = e->len;
        memcpy(state, e->state, 16);
        jc->hits++;
    } else {
        jc->misses++;
    }
    pthread_mutex_unlock(&jc->lock);
    return copy;
}

uint64_t gj_job_cache_ticket(struct gj_job_cache *jc, const char *job_id)
{
    if (!jc || !job_id)
        return 0;
    pthread_mutex_lock(&jc->lock);
    uint64_t t = jc->forgets[set_index(jc, job_id)];
    pthread_mutex_unlock(&jc->lock);
    return t;
}

/* Where id goes in set: its own entry, a free way, else the one put longest ago. */
static struct entry *slot_for(struct gj_job_cache *jc, size_t set, const char *id)
{
    struct entry *e = find(jc, set, id);
    if (e)
        return e;
    struct entry *ways = &jc->entries[set * WAYS], *oldest = &ways[0];
    for (int i = 0; i < WAYS; i++) {
        if (!ways[i].job)
            return &ways[i];
        if (ways[i].put_ms < oldest->put_ms)
            oldest = &ways[i];
    }
    return oldest;
}

void gj_job_cache_put(struct gj_job_cache *jc, const char *tenant_id, const json_t *job, const char *state,
                      uint64_t ticket)
{
    const char *id = json_string_value(json_object_get(job, "id"));
    if (!jc || !tenant_id || !id || !state || strlen(id) >= sizeof ((struct entry *)0)->id ||
        strlen(tenant_id) >= sizeof ((struct entry *)0)->tenant || strlen(state) >= 16)
        return;
    /* outside the lock, and once: a hit answers these bytes (http_server.c: gj_respond_json's form) */
    char *copy = json_dumps(job, JSON_COMPACT | JSON_PRESERVE_ORDER);
    size_t len = copy ? strlen(copy) : 0;
    char *nl = copy ? realloc(copy, len + 2) : NULL;
    if (!nl) {
        free(copy);
        return;
    }
    copy = nl;
    copy[len++] = '\n';
    copy[len] = '\0';
    uint64_t now = now_ms();
    pthread_mutex_lock(&jc->lock);
    size_t set = set_index(jc, id);
    if (jc->live && jc->forgets[set] == ticket) {
        struct entry *e = slot_for(jc, set, id);
        drop(e);
        snprintf(e->id, sizeof e->id, "%s", id);
        snprintf(e->tenant, sizeof e->tenant, "%s", tenant_id);
        snprintf(e->state, sizeof e->state, "%s", state);
        e->job = copy;
        e->len = len;
        e->put_ms = now;
        copy = NULL;
    }
    pthread_mutex_unlock(&jc->lock);
    free(copy);
}

/* Called with the lock held. */
static void forget_all_locked(struct gj_job_cache *jc)
{
    for (size_t s = 0; s < jc->n_sets; s++)
        jc->forgets[s]++;
    for (size_t i = 0; i < jc->n_sets * WAYS; i++)
        drop(&jc->entries[i]);
}

void gj_job_cache_forget(struct gj_job_cache *jc, const char *job_id)
{
    if (!jc)
        return;
    pthread_mutex_lock(&jc->lock);
    if (!job_id) {
        forget_all_locked(jc);
    } else {
        size_t set = set_index(jc, job_id);
        jc->forgets[set]++;
        struct entry *e = find(jc, set, job_id);
        if (e)
            drop(e);
    }
    pthread_mutex_unlock(&jc->lock);
}

void gj_job_cache_set_live(struct gj_job_cache *jc, int live)
{
    if (!jc)
        return;
    pthread_mutex_lock(&jc->lock);
    forget_all_locked(jc);   /* either way: what was kept may have missed a change */
    jc->live = live != 0;
    pthread_mutex_unlock(&jc->lock);
}

size_t gj_job_cache_size(struct gj_job_cache *jc)
{
    if (!jc)
        return 0;
    size_t n = 0;
    pthread_mutex_lock(&jc->lock);
    for (size_t i = 0; i < jc->n_sets * WAYS; i++)
        n += jc->entries[i].job != NULL;
    pthread_mutex_unlock(&jc->lock);
    return n;
}

void gj_job_cache_write_metrics(struct gj_job_cache *jc, FILE *f)
{
    if (!jc)
        return;
    size_t entries = gj_job_cache_size(jc);
    pthread_mutex_lock(&jc->lock);
    unsigned long long hits = jc->hits, misses = jc->misses;
    pthread_mutex_unlock(&jc->lock);
    fprintf(f,
            "# HELP gpujobd_job_cache_hits_total Job status reads answered from this replica's memory, without "
            "the database.\n# TYPE gpujobd_job_cache_hits_total counter\ngpujobd_job_cache_hits_total %llu\n"
            "# HELP gpujobd_job_cache_misses_total Job status reads the cache could not answer: asked of the "
            "database.\n# TYPE gpujobd_job_cache_misses_total counter\ngpujobd_job_cache_misses_total %llu\n"
            "# HELP gpujobd_job_cache_entries Job status answers held in the cache.\n"
            "# TYPE gpujobd_job_cache_entries gauge\ngpujobd_job_cache_entries %zu\n",
            hits, misses, entries);
}
