/*
 * job_store_internal.h — what the files of the job store share (job_store.c, job_reads.c,
 * job_inputs.c); not for callers, who include job_store.h.
 */
#ifndef GJ_JOB_STORE_INTERNAL_H
#define GJ_JOB_STORE_INTERNAL_H

#include <stdio.h>

#include "service/jobs/job_store.h"

#define GJ_JOB_STORE_LOG "jobs"

static inline int gj_job_store_unavailable(struct gj_error *err)
{
    return gj_error_status(err, 503, NULL, "the database is unavailable; try again");
}

/* The same words whether the job is another tenant's or none at all. */
static inline int gj_job_store_not_found(struct gj_error *err, const char *job_id)
{
    (void)job_id;
    return gj_error_status(err, 404, NULL, "no such job");
}

/* The stored names of the states for which pick is 1, as a PostgreSQL text array ("{a,b}"). */
static inline void gj_job_states_array(int (*pick)(enum gj_job_state), char *out, size_t n)
{
    size_t used = (size_t)snprintf(out, n, "{");
    for (int s = 0; s < GJ_JOB_STATE_COUNT; s++)
        if (pick((enum gj_job_state)s) && used < n)
            used += (size_t)snprintf(out + used, n - used, "%s%s", used > 1 ? "," : "",
                                     gj_job_state_name((enum gj_job_state)s));
    if (used < n)
        snprintf(out + used, n - used, "}");
}

#endif
