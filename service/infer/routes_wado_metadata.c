/*
 * routes_wado_metadata.c — WADO-RS metadata (PS3.18 §10.4.1.1.2) of the instances the
 * tenant stored by STOW-RS:
 *
 *   GET /dicomweb/studies/{study}/metadata
 *   GET /dicomweb/studies/{study}/series/{series}/metadata
 *   GET /dicomweb/studies/{study}/series/{series}/instances/{instance}/metadata
 *
 * A JSON array with one DICOM JSON object per instance, in storage order: every
 * attribute of the instance as stored (dicom_json.c), bulk data left out. Each instance
 * is exported from its blob to a scratch file, parsed (compute/infer/dicom.h), encoded
 * and the file removed, one at a time. 406 for an Accept other than
 * application/dicom+json or application/json, 404 for an unknown (or another tenant's)
 * study, series or instance, 413 past METADATA_MAX_INSTANCES, 400 for any parameter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/infer/infer.h"

#define METADATA_MAX_INSTANCES 10000   /* the answer is built in memory (~10 KiB each) */

/* The tenant's instances under the path: (blob id, size) per row. NULL with a response prepared. */
static PGresult *find_instances(struct gj_req *r, PGconn *c)
{
    if (MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, NULL, NULL) > 0) {
        gj_problem(r, 400, NULL, "WADO-RS metadata takes no query parameter");
        return NULL;
    }
    if (!gj_dicomweb_path_uids_ok(r))
        return NULL;
    return gj_dicomweb_find_instances(r, c, METADATA_MAX_INSTANCES,
                                      "ask for the metadata of a series or an instance");
}

/* One stored instance as DICOM JSON; NULL with a response prepared. */
static json_t *instance_json(struct gj_req *r, PGconn *c, const char *blob_id)
{
    char path[1300];
    if (snprintf(path, sizeof path, "%s/wado-meta-%s.dcm", r->srv->cfg.work_dir, r->request_id) >= (int)sizeof path) {
        gj_problem(r, 500, NULL, "the work directory path is too long");
        return NULL;
    }
    if (gj_blob_export_id(c, blob_id, path, NULL) != 0) {
        unlink(path);
        gj_respond_unavailable(r);
        return NULL;
    }
    gj_dicom *d = NULL;
    struct gj_error err = { 0 };
    int rc = gj_dicom_open_file(path, &d, &err);
    unlink(path);
    if (rc != 0) {
        gj_problem(r, 422, NULL, "a stored instance cannot be read: %s", err.message);
        return NULL;
    }
    json_t *o = gj_dicom_to_json(d);
    gj_dicom_free(d);
    if (!o)
        gj_problem(r, 500, NULL, "out of memory");
    return o;
}

static void wado_metadata(struct gj_req *r)
{
    static const char *const types[] = { "application/dicom+json", "application/json", NULL };
    const char *type = gj_dicomweb_negotiate(r, types);
    if (!type) {
        gj_problem(r, 406, "Accept", "WADO-RS metadata answers application/dicom+json (or application/json)");
        return;
    }
    PGconn *c = gj_req_db(r);
    if (!c) {
        gj_respond_unavailable(r);
        return;
    }
    PGresult *res = find_instances(r, c);
    if (!res)
        return;
    json_t *list = json_array();
    for (int i = 0; list && i < PQntuples(res); i++) {
        json_t *o = instance_json(r, c, PQgetvalue(res, i, 0));
        if (!o) {
            json_decref(list);
            list = NULL;
            break;
        }
        json_array_append_new(list, o);
    }
    PQclear(res);
    if (list)
        gj_dicomweb_respond_json(r, list, type);
}

static const struct gj_route metadata_routes[] = {
    { "GET", "/dicomweb/studies/{study}/metadata", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, wado_metadata, NULL },
    { "GET", "/dicomweb/studies/{study}/series/{series}/metadata", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL,
      wado_metadata, NULL },
    { "GET", "/dicomweb/studies/{study}/series/{series}/instances/{instance}/metadata", GJ_AUTH_USER, GJ_BODY_NONE,
      NULL, NULL, wado_metadata, NULL },
};
const struct gj_route_table gj_infer_routes_wado_metadata = {
    metadata_routes, sizeof metadata_routes / sizeof metadata_routes[0]
};
