/*
 * reproduction.h — whether a rerun reproduced its original (issue 26): every output's
 * digest compared, save those the kind says record the run itself (times), and what else
 * differed in the recorded environments (device, libraries, precision, builds).
 */
#ifndef GJ_REPRODUCTION_H
#define GJ_REPRODUCTION_H

#include <jansson.h>
#include <libpq-fe.h>

/* Compares two records of gj_provenance_load (the original and its rerun):
 *   {"reproduced": "identical" | "different" | "unknown",
 *    "reproduction": {"original", "compared": [names], "differing_outputs": [{name,
 *      original_sha256, rerun_sha256}], "not_compared": [{name, why}], "promised": bool,
 *      "environment_differences": [{path, original, rerun}], "why"? }}
 * "unknown" while either has not succeeded (why says which). A new object; NULL: no memory. */
json_t *gj_reproduction_compare(const json_t *original, const json_t *rerun);

/* The differences between two recorded environments: [{path, original, rerun}] with dotted
 * paths ("libraries.fftw"), leaves compared as JSON values. A new array; NULL: no memory. */
json_t *gj_environment_diff(const json_t *original, const json_t *rerun);

/* The last recorded environment of a gj_provenance_load record (borrowed), or NULL. */
json_t *gj_provenance_last_environment(const json_t *record);

/* Adds to job (GET /v1/jobs/{id}'s JSON) "rerun_of" when it is a rerun, and the comparison
 * above once it has finished. 0, or -1 on a database error. */
int gj_reproduction_annotate(PGconn *conn, const char *tenant_id, json_t *job);

#endif
