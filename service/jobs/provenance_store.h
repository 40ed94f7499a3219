/*
 * provenance_store.h — what determined each attempt's result, and reruns (migration 0017,
 * issue 26): written at the start of each attempt by the worker, read by the provenance
 * crate (api/routes_provenance.c) and the rerun's comparison (reproduction.h). The worker
 * gathers an attempt's record when it starts and sends it with its next statement
 * (attempt_record.h).
 */
#ifndef GJ_PROVENANCE_STORE_H
#define GJ_PROVENANCE_STORE_H

#include <jansson.h>
#include <libpq-fe.h>

struct gj_claim;

/* Records an attempt of a claimed job before its kind runs (migration 0022): job, attempt,
 * stage, worker, environment (gj_run_environment's JSON text) and when it was gathered, with
 * the job's inputs by digest as they are now. Recorded again (replaced) when the same attempt
 * and stage start once more; nothing for a job deleted meanwhile. */
#define GJ_ATTEMPT_RECORD_CALL(JOB, ATTEMPT, STAGE, WORKER, ENV, AT)                                    \
    "gj_attempt_record(" JOB "::uuid, " ATTEMPT "::integer, " STAGE "::integer, " WORKER ", " ENV "::jsonb, " \
    AT "::timestamptz)"
#define GJ_ATTEMPT_RECORD_SQL "SELECT " GJ_ATTEMPT_RECORD_CALL("$1", "$2", "$3", "$4", "$5", "$6")
#define GJ_ATTEMPT_RECORD_NAME "gj_attempt_record"
#define GJ_ATTEMPT_RECORD_PARAMS 6

/* Adds chosen's keys to the environment recorded for attempt c->attempts (stage c->stage),
 * once the kind ran: what it chose at run time (gj_ctx.record). 0, or -1. */
int gj_provenance_record_chosen(PGconn *conn, const struct gj_claim *c, const json_t *chosen);

/* A job of tenant_id as its provenance needs it (a new JSON object in *out):
 *   id, kind, params, state (the public one), priority, max_attempts, timeout_seconds, name,
 *   labels, error, device, created_at, started_at, finished_at, parent_id, rerun_of,
 *   tenant {id, name},
 *   attempts [{attempt, stage, recorded_at, worker, environment, inputs}],
 *   inputs   [{name, blob, sha256, size, content_type, job?, output?}]  (as the job has them now),
 *   outputs  [{name, blob, sha256, size, content_type}],
 *   children [the same, for each sub-task, in spawn order]   (with_children only).
 * 1 found, 0 no such job of the tenant's, -1 database error. */
int gj_provenance_load(PGconn *conn, const char *tenant_id, const char *job_id, int with_children,
                       json_t **out);

/* The job a rerun repeats: 1 with rerun_of (37 bytes) filled, 0 not a rerun, -1 error. */
int gj_provenance_rerun_of(PGconn *conn, const char *job_id, char rerun_of[37]);
/* Records that job_id reruns rerun_of (in the caller's transaction). 0, or -1. */
int gj_provenance_link_rerun(PGconn *conn, const char *job_id, const char *rerun_of);

#endif
