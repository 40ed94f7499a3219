/*
 * lease_rescue.h — the rescue of expired leases on a replica without job slots (--role api).
 *
 * A worker's own maintenance gives back the jobs of a worker that died once their lease
 * expired (gj_queue_rescue_expired). Where no worker is left (all killed, or a node lost with
 * its only worker), an api replica does it, so that such a job reads `queued` (counted in the
 * queue depth that scales the workers) instead of `running` on a process that is gone.
 */
#ifndef GJ_LEASE_RESCUE_H
#define GJ_LEASE_RESCUE_H

struct gj_server;
struct gj_lease_rescuer;

/* Starts the thread (one rescue each GJ_LEASE_RESCUE_PERIOD_S); NULL with a log line. */
struct gj_lease_rescuer *gj_lease_rescuer_start(struct gj_server *srv);
/* Stops and frees it; NULL is a no-op. */
void gj_lease_rescuer_stop(struct gj_lease_rescuer *r);

#define GJ_LEASE_RESCUE_PERIOD_S 5

#endif
