/*
 * ro_crate.h — a job's provenance as a Workflow Run RO-Crate, Process Run Crate profile 0.5
 * (https://w3id.org/ro/wfrun/process/0.5, RO-Crate 1.1): pure JSON, from the records of
 * service/jobs/provenance_store.h. The crate's files are laid out as the zip has them:
 * inputs/NAME, outputs/NAME, and children/CHILD-ID/{inputs,outputs}/NAME for a sub-task's; the
 * same blob is one File, under the first of these paths (a slab reads its parent's input).
 */
#ifndef GJ_RO_CRATE_H
#define GJ_RO_CRATE_H

#include <jansson.h>

#define GJ_PROCESS_RUN_CRATE "https://w3id.org/ro/wfrun/process/0.5"

/* The crate's ro-crate-metadata.json for record (with its children). upstreams: an object
 * of upstream job id -> its record, for inputs that were another job's output (may be NULL);
 * original: the record of the job record reruns (NULL when it is not a rerun or is gone);
 * reproduction: gj_reproduction_compare's answer (NULL: none). A new object; NULL: no memory. */
json_t *gj_ro_crate(const json_t *record, const json_t *upstreams, const json_t *original,
                    const json_t *reproduction);

#endif
