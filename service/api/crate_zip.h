/*
 * crate_zip.h — GET /v1/jobs/{id}/provenance?format=zip: the crate's ro-crate-metadata.json
 * and its files (inputs/, outputs/, children/ID/...; each blob once, at the path the crate gives
 * it) as one zip, streamed from the
 * blobs as the client reads (stored, not compressed: outputs are mostly compressed already).
 */
#ifndef GJ_CRATE_ZIP_H
#define GJ_CRATE_ZIP_H

#include <jansson.h>

struct gj_req;

/* Answers r with the zip of crate (ro_crate.h) and the files of record
 * (gj_provenance_load's, with children). Takes both. */
void gj_crate_zip_respond(struct gj_req *r, json_t *crate, json_t *record);

#endif
