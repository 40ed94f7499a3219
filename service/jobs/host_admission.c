/*
 * host_admission.c — refuses at submit a job no worker's host memory can ever hold.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "service/db/db.h"
#include "service/jobs/host_admission.h"

/* A worker whose heartbeat is older than this is taken for dead (heartbeats come every
 * lease/3 seconds); its offer no longer counts. */
#define LIVE_WORKER "interval '5 minutes'"

int gj_host_memory_advertise(PGconn *conn, const char *worker_id, uint64_t usable)
{
    char bytes[24];
    snprintf(bytes, sizeof bytes, "%" PRIu64, usable);
    const char *params[] = { worker_id, usable ? bytes : NULL };
    return gj_db_cmd(conn, "UPDATE workers SET host_memory_bytes = $2::bigint WHERE id = $1", 2, params);
}

static double mib(uint64_t bytes)
{
    return (double)bytes / 1048576.0;
}

int gj_host_admit(PGconn *conn, const struct gj_kind *kind, const struct gj_job *job, struct gj_error *err)
{
    uint64_t floor_bytes = gj_kind_host_bytes_floor(kind, job);
    if (!floor_bytes)
        return 0;
    PGresult *res = gj_db_exec(conn,
                               "SELECT count(*), count(*) FILTER (WHERE host_memory_bytes IS NULL),"
                               "       coalesce(max(host_memory_bytes), 0)"
                               "  FROM workers WHERE NOT stopping AND heartbeat_at > now() - " LIVE_WORKER,
                               0, NULL, NULL);
    if (!res)
        return -1;
    long long live = atoll(PQgetvalue(res, 0, 0)), uncounted = atoll(PQgetvalue(res, 0, 1));
    uint64_t best = strtoull(PQgetvalue(res, 0, 2), NULL, 10);
    PQclear(res);
    if (live == 0 || uncounted > 0 || floor_bytes <= best)
        return 0;
    gj_error_set(err, "", "this job needs at least %.1f MiB (%" PRIu64 " bytes) of host memory; the largest "
                 "worker gives its jobs %.1f MiB (%" PRIu64 " bytes), so it could never run",
                 mib(floor_bytes), floor_bytes, mib(best), best);
    err->status = 413;   /* too large for this service, whatever the timing: as a body too large */
    return 1;
}
