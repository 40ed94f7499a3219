/*
 * host_admission.h — host memory at submit: each worker records in its workers row
 * what its jobs may hold together (host_memory.h); a submit whose kind's floor
 * (gj_kind_host_bytes_floor) exceeds what every live worker offers is refused at
 * once, since it could only wait forever or fail. A job that fits some worker but
 * not now waits in placement (placement.h), as it does for GPU memory.
 */
#ifndef GJ_HOST_ADMISSION_H
#define GJ_HOST_ADMISSION_H

#include <stdint.h>
#include <libpq-fe.h>

#include "common/gj_kind.h"

/* Records usable (0: this worker does not count host memory) on worker_id's row. 0 or -1. */
int gj_host_memory_advertise(PGconn *conn, const char *worker_id, uint64_t usable);

/* 0 admitted (the kind has no floor, no live worker is known, one does not count host
 * memory, or the largest offer is enough); 1 refused with err (413, field "params",
 * the figures); -1 database error (logged). */
int gj_host_admit(PGconn *conn, const struct gj_kind *kind, const struct gj_job *job, struct gj_error *err);

#endif
