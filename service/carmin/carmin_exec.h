/*
 * carmin_exec.h — CARMIN executions (jobs with a carmin_executions row, migration 0009).
 */
#ifndef GJ_CARMIN_EXEC_H
#define GJ_CARMIN_EXEC_H

#include <jansson.h>
#include <libpq-fe.h>

#include "service/http/http_server.h"
#include "service/jobs/queue.h"   /* GJ_JOB_TIMEOUT_MAX */

/* POST /rest/executions (exec_submit.c). */
void carmin_exec_create(struct gj_req *r);

/* The CARMIN Execution object of the tenant's execution id; with its results placed first
 * when it has succeeded (exec_results.c). A JSON null when there is no such execution,
 * NULL on a database error. */
json_t *carmin_exec_read(PGconn *c, const char *tenant, const char *id);

/* Places a succeeded execution's outputs under its resultsLocation, once: the job's output
 * blobs become files of the space (the space owns them from then on, so deleting the job
 * keeps them). Opens and commits its own transaction. 0 (placed now, before, or nothing to
 * place yet), -1 database error. */
int carmin_exec_place_results(PGconn *c, const char *tenant, const char *id);

/* An execution's timeout as POST and PUT take it (the job's timeout_seconds): whole seconds,
 * 0 (none) to GJ_JOB_TIMEOUT_MAX; CARMIN_TIMEOUT_RULE says so to a client (exec_submit.c). */
int carmin_exec_timeout_ok(const json_t *v);
#define CARMIN_TIMEOUT_STR_(x) #x
#define CARMIN_TIMEOUT_STR(x) CARMIN_TIMEOUT_STR_(x)
#define CARMIN_TIMEOUT_RULE "timeout is a whole number of seconds from 0 (none) to " CARMIN_TIMEOUT_STR(GJ_JOB_TIMEOUT_MAX)

/* CARMIN's status for a job's public state. */
const char *carmin_exec_status(const char *public_state);

#endif
