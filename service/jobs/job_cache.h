/*
 * job_cache.h — what GET /v1/jobs/{id} answered lately, answered again without asking
 * PostgreSQL (ARCHITECTURE.md: status reads).
 *
 * Why it is correct: every change a reader can see of a job (its row, its inputs, its
 * dependencies, its callback's deliveries; its deletion) sends NOTIFY gpujobd_jobs with the
 * job's id (migrations/0019_job_read_notify.sql), and every replica LISTENs. The notifier
 * calls gj_job_cache_forget with that id before it wakes the long polls, so an entry lives
 * from a read until the next change of its job is known here. A finished job rarely changes
 * again, a running one at each progress report.
 *
 * Races: a read that began before a change and ends after its notification would put back
 * the old answer; the ticket (taken before the read) refuses that put. Notifications may be
 * missed while the LISTEN connection is down: the notifier then calls
 * gj_job_cache_set_live(0), which empties the cache and makes it miss every lookup and keep
 * nothing until the connection is back (set_live(1), after LISTEN). A connection that went
 * silent without the notifier knowing yet is what the TTL bounds: an entry older than
 * ttl_ms counts as absent.
 *
 * Per tenant: an entry keeps the tenant whose read put it in and answers that tenant only
 * (another tenant's lookup misses, and its read of the database answers 404 as before).
 * Bounded: capacity entries (8-way sets, a full set gives up its oldest entry).
 * Thread-safe: one mutex. A NULL cache (--job-cache-ms 0) misses every lookup.
 */
#ifndef GJ_JOB_CACHE_H
#define GJ_JOB_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#define GJ_JOB_CACHE_TTL_MS 5000        /* default of --job-cache-ms */
#define GJ_JOB_CACHE_MAX_TTL_MS 60000
#define GJ_JOB_CACHE_CAPACITY 4096      /* jobs held at most by the server's cache */

struct gj_job_cache;

/* A cache of at most capacity entries (rounded down to a multiple of 8, at least 8), each
 * answered for ttl_ms after it was put. Not live until gj_job_cache_set_live(1). NULL when
 * out of memory. */
struct gj_job_cache *gj_job_cache_new(size_t capacity, uint64_t ttl_ms);
void gj_job_cache_free(struct gj_job_cache *jc);

/* job_id's answer as put for tenant_id: its JSON body as GET /v1/jobs/{id} sends it (compact,
 * newline-terminated, NUL after), a copy the caller frees, *len bytes, with its public state in
 * state; NULL on a miss (absent, another tenant's, older than the TTL, not live). */
char *gj_job_cache_get(struct gj_job_cache *jc, const char *job_id, const char *tenant_id, char state[16],
                       size_t *len);

/* Take before reading job_id from the database; hand to gj_job_cache_put. */
uint64_t gj_job_cache_ticket(struct gj_job_cache *jc, const char *job_id);

/* Keeps job (its "id" is the key), encoded, as tenant_id's answer; left out when job_id was
 * forgotten since ticket was taken, or the cache is not live. */
void gj_job_cache_put(struct gj_job_cache *jc, const char *tenant_id, const json_t *job, const char *state,
                      uint64_t ticket);

/* job_id changed (NULL: any job may have). */
void gj_job_cache_forget(struct gj_job_cache *jc, const char *job_id);

/* 1: notifications arrive (LISTEN is up); 0: they may be missed: emptied, and bypassed. */
void gj_job_cache_set_live(struct gj_job_cache *jc, int live);

/* Entries held now. */
size_t gj_job_cache_size(struct gj_job_cache *jc);

/* Prometheus text: hits, misses, entries. */
void gj_job_cache_write_metrics(struct gj_job_cache *jc, FILE *f);

#endif
