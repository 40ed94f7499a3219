/*
 * worker_pool.h — the worker threads of one process (ARCHITECTURE.md: a job's life). One thread
 * per slot (GPU slots plus CPU slots). A thread claims only while a slot is
 * free, asks the kind for its estimate, places it (waiting while it fits no GPU
 * now), materializes inputs into a scratch directory, runs the module with a
 * context whose progress/cancel hooks ride on lease heartbeats, and finishes the
 * job with its outputs in one fenced transaction. A separate thread heartbeats
 * leases, rescues expired ones, and refreshes this process's `workers` row.
 */
#ifndef GJ_WORKER_POOL_H
#define GJ_WORKER_POOL_H

#include "service/server.h"

struct gj_worker_pool *gj_worker_pool_start(struct gj_server *srv);
/* Stops claiming; waits up to grace_seconds for running jobs, then asks them to
 * stop and releases their jobs back to the queue (not counted as attempts). Returns
 * 0 stopped and freed, or, within grace_seconds + 1 s whatever a kind does, 1: a
 * job did not stop when asked, its job was given back to the queue from here, and
 * its thread still runs, so the pool (and what it uses: the server's database pool,
 * notifier, placement) must not be freed: the process should exit. */
int gj_worker_pool_stop(struct gj_worker_pool *wp, int grace_seconds);

/* Running jobs of this process, for /metrics. */
int gj_worker_pool_running(struct gj_worker_pool *wp);

#endif
