/*
 * key_cache.h — API keys found valid a moment ago, answered without asking PostgreSQL.
 *
 * An entry is keyed by the SHA-256 of the key (auth.h: gj_api_key_digest, what the
 * database stores), never the key, and holds its principal and when it was checked. Only
 * keys the database found valid are put in: wrong keys are never cached, so a stream of
 * them fills nothing and always goes to the database. An entry older than the TTL counts
 * as absent. The table is set-associative (8 ways): a full set gives up its oldest entry,
 * so it never holds more than its capacity.
 *
 * Revocation: a key revoked through this process is dropped at once (gj_key_cache_drop_key
 * after the UPDATE commits); a check that began before the drop does not put it back (the
 * generation). Another replica answers from its own entry until that expires: a key revoked
 * elsewhere is refused here at most the TTL after the revocation (counted from the start
 * of the check that put the entry in). The default TTL, GJ_KEY_CACHE_TTL_MS, is half the
 * period at which open event streams re-check their keys (http_park.h,
 * GJ_PARK_KEY_CHECK_MS): the delay the service already accepts, and at hundreds of requests
 * per second a key costs one query a second instead of one a request.
 *
 * Thread-safe: one mutex. A NULL cache (--api-key-cache-ms 0) misses every lookup and
 * holds nothing.
 */
#ifndef GJ_KEY_CACHE_H
#define GJ_KEY_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define GJ_KEY_CACHE_TTL_MS 1000     /* default of --api-key-cache-ms */
#define GJ_KEY_CACHE_MAX_TTL_MS 10000
#define GJ_KEY_CACHE_CAPACITY 1024   /* keys held at most by the server's cache */

struct gj_principal;
struct gj_key_cache;

/* A cache of at most capacity entries (rounded down to a multiple of 8, at least 8), each
 * answered for ttl_ms after its check. NULL when out of memory. */
struct gj_key_cache *gj_key_cache_new(size_t capacity, uint64_t ttl_ms);
void gj_key_cache_free(struct gj_key_cache *kc);

/* CLOCK_MONOTONIC in milliseconds: the now_ms and checked_ms the callers pass. */
uint64_t gj_key_cache_now_ms(void);

/* 1 with *p filled when digest's entry was checked less than the TTL before now_ms (a hit),
 * else 0 (a miss: ask the database). */
int gj_key_cache_get(struct gj_key_cache *kc, const unsigned char digest[32], uint64_t now_ms,
                     struct gj_principal *p);

/* The generation to hand to gj_key_cache_put: read it before asking the database. */
uint64_t gj_key_cache_generation(struct gj_key_cache *kc);

/* Records that the database found digest's key valid as p, by a check begun at checked_ms;
 * left out when a key was dropped since generation was read. */
void gj_key_cache_put(struct gj_key_cache *kc, const unsigned char digest[32], const struct gj_principal *p,
                      uint64_t generation, uint64_t checked_ms);

/* Drops the entries of key_id (revoked or deleted). */
void gj_key_cache_drop_key(struct gj_key_cache *kc, const char *key_id);

/* Entries held (expired ones included until replaced or looked up). */
size_t gj_key_cache_size(struct gj_key_cache *kc);

/* Appends gpujobd_api_key_cache_{hits_total,misses_total,entries} in Prometheus text
 * format; nothing for a NULL cache. */
void gj_key_cache_write_metrics(struct gj_key_cache *kc, FILE *f);

/* A presented key checked as every front end checks it: the cache, else the database
 * (db(arg) gives a connection, or NULL when none can be had), a valid key put in. 1 valid
 * (p filled), 0 not, -1 no database. */
struct pg_conn;
int gj_key_cache_verify(struct gj_key_cache *kc, const char *key, struct pg_conn *(*db)(void *arg), void *arg,
                        struct gj_principal *p);

#endif
