/*
 * job_json.h — a job's JSON as GET /v1/jobs/{id} answers it (routes_jobs.c), for other
 * routes that answer with a job (a rerun's, routes_provenance.c).
 */
#ifndef GJ_JOB_JSON_H
#define GJ_JOB_JSON_H

#include <jansson.h>
#include <libpq-fe.h>

struct gj_req;

/* 1 found (*job: a new object), 0 not a job of tenant's, -1 database error. */
int gj_api_job_json(PGconn *c, const char *tenant, const char *id, json_t **job);
/* Answers job (consumed) with status, and its Location after a POST. */
void gj_api_respond_job(struct gj_req *r, int status, json_t *job);
/* A request with an Idempotency-Key: 1 answered (200 with the job the key made, or 409 when
 * it was made by another request, hash being the hex SHA-256 of this one), 0 the key is
 * new, -1 database error (nothing answered). */
int gj_api_idempotent_replay(struct gj_req *r, PGconn *c, const char *key, const char *hash);

#endif
