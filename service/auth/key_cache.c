/*
 * key_cache.c — recently verified API keys (key_cache.h). A digest is already uniformly
 * spread: its first 8 bytes pick the set, and the 8 ways of that set are searched.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>

#include "service/auth/auth.h"
#include "service/auth/key_cache.h"

#define WAYS 8

struct entry {
    unsigned char digest[32];
    struct gj_principal who;
    uint64_t checked_ms;
    int used;
};

struct gj_key_cache {
    pthread_mutex_t lock;
    struct entry *entries;   /* n_sets * WAYS */
    size_t n_sets;
    uint64_t ttl_ms;
    uint64_t generation;     /* bumped by every drop */
    unsigned long long hits, misses;
};

struct gj_key_cache *gj_key_cache_new(size_t capacity, uint64_t ttl_ms)
{
    struct gj_key_cache *kc = calloc(1, sizeof *kc);
    if (!kc)
        return NULL;
    kc->n_sets = capacity / WAYS ? capacity / WAYS : 1;
    kc->entries = calloc(kc->n_sets * WAYS, sizeof *kc->entries);
    if (!kc->entries || pthread_mutex_init(&kc->lock, NULL) != 0) {
        free(kc->entries);
        free(kc);
        return NULL;
    }
    kc->ttl_ms = ttl_ms;
    return kc;
}

void gj_key_cache_free(struct gj_key_cache *kc)
{
    if (!kc)
        return;
    pthread_mutex_destroy(&kc->lock);
    OPENSSL_cleanse(kc->entries, kc->n_sets * WAYS * sizeof *kc->entries);
    free(kc->entries);
    free(kc);
}

uint64_t gj_key_cache_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static struct entry *set_of(struct gj_key_cache *kc, const unsigned char digest[32])
{
    uint64_t h;
    memcpy(&h, digest, sizeof h);
    return &kc->entries[(h % kc->n_sets) * WAYS];
}

/* digest's entry in set, or NULL. */
static struct entry *find(struct entry *set, const unsigned char digest[32])
{
    for (int i = 0; i < WAYS; i++)
        if (set[i].used && CRYPTO_memcmp(set[i].digest, digest, 32) == 0)
            return &set[i];
    return NULL;
}

int gj_key_cache_get(struct gj_key_cache *kc, const unsigned char digest[32], uint64_t now_ms,
                     struct gj_principal *p)
{
    if (!kc)
        return 0;
    pthread_mutex_lock(&kc->lock);
    struct entry *e = find(set_of(kc, digest), digest);
    /* a check begun after now_ms (another thread's) is as fresh as can be */
    int hit = e && (now_ms <= e->checked_ms || now_ms - e->checked_ms < kc->ttl_ms);
    if (hit)
        *p = e->who;
    else if (e)
        e->used = 0;   /* expired: the database is asked again */
    if (hit)
        kc->hits++;
    else
        kc->misses++;
    pthread_mutex_unlock(&kc->lock);
    return hit;
}

uint64_t gj_key_cache_generation(struct gj_key_cache *kc)
{
    if (!kc)
        return 0;
    pthread_mutex_lock(&kc->lock);
    uint64_t g = kc->generation;
    pthread_mutex_unlock(&kc->lock);
    return g;
}

/* Where a new entry goes in set: digest's own, a free way, else the one checked longest ago. */
static struct entry *slot_for(struct entry *set, const unsigned char digest[32])
{
    struct entry *e = find(set, digest);
    if (e)
        return e;
    struct entry *oldest = &set[0];
    for (int i = 0; i < WAYS; i++) {
        if (!set[i].used)
            return &set[i];
        if (set[i].checked_ms < oldest->checked_ms)
            oldest = &set[i];
    }
    return oldest;
}

void gj_key_cache_put(struct gj_key_cache *kc, const unsigned char digest[32], const struct gj_principal *p,
                      uint64_t generation, uint64_t checked_ms)
{
    if (!kc)
        return;
    pthread_mutex_lock(&kc->lock);
    if (generation == kc->generation) {
        struct entry *e = slot_for(set_of(kc, digest), digest);
        memcpy(e->digest, digest, 32);
        e->who = *p;
        e->checked_ms = checked_ms;
        e->used = 1;
    }
    pthread_mutex_unlock(&kc->lock);
}

void gj_key_cache_drop_key(struct gj_key_cache *kc, const char *key_id)
{
    if (!kc || !key_id)
        return;
    pthread_mutex_lock(&kc->lock);
    kc->generation++;
    for (size_t i = 0; i < kc->n_sets * WAYS; i++)
        if (kc->entries[i].used && strcasecmp(kc->entries[i].who.key_id, key_id) == 0)
            kc->entries[i].used = 0;
    pthread_mutex_unlock(&kc->lock);
}

size_t gj_key_cache_size(struct gj_key_cache *kc)
{
    if (!kc)
        return 0;
    size_t n = 0;
    pthread_mutex_lock(&kc->lock);
    for (size_t i = 0; i < kc->n_sets * WAYS; i++)
        n += kc->entries[i].used != 0;
    pthread_mutex_unlock(&kc->lock);
    return n;
}

void gj_key_cache_write_metrics(struct gj_key_cache *kc, FILE *f)
{
    if (!kc)
        return;
    size_t entries = gj_key_cache_size(kc);
    pthread_mutex_lock(&kc->lock);
    unsigned long long hits = kc->hits, misses = kc->misses;
    pthread_mutex_unlock(&kc->lock);
    fprintf(f,
            "# HELP gpujobd_api_key_cache_hits_total API keys answered from the in-process cache, without the "
            "database.\n# TYPE gpujobd_api_key_cache_hits_total counter\ngpujobd_api_key_cache_hits_total %llu\n"
            "# HELP gpujobd_api_key_cache_misses_total API keys (of a key's form) the cache could not answer: "
            "asked of the database.\n# TYPE gpujobd_api_key_cache_misses_total counter\n"
            "gpujobd_api_key_cache_misses_total %llu\n"
            "# HELP gpujobd_api_key_cache_entries Verified API keys held in the cache.\n"
            "# TYPE gpujobd_api_key_cache_entries gauge\ngpujobd_api_key_cache_entries %zu\n",
            hits, misses, entries);
}

int gj_key_cache_verify(struct gj_key_cache *kc, const char *key, PGconn *(*db)(void *arg), void *arg,
                        struct gj_principal *p)
{
    unsigned char digest[32];
    int rc = gj_api_key_digest(key, digest);
    if (rc <= 0)
        return rc;
    uint64_t now = gj_key_cache_now_ms();   /* before the query: an entry's age bounds the revocation delay */
    if (gj_key_cache_get(kc, digest, now, p))
        return 1;
    uint64_t generation = gj_key_cache_generation(kc);
    PGconn *c = db(arg);
    rc = c ? gj_api_key_verify_digest(c, digest, p) : -1;
    if (rc == 1)
        gj_key_cache_put(kc, digest, p, generation, now);
    return rc;
}
