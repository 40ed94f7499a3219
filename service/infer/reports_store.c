/*
 * reports_store.c — the Structured Reports an `infer` job wrote (result.dcm, ...,
 * compute/infer/serving/infer_report.h) stored as instances of its tenant, so QIDO-RS
 * finds them in their study and WADO-RS returns them (infer.h).
 *
 * Each is its own blob owned by the job (it goes when the job goes), beside the job's
 * output of the same bytes: an instance row owns its blob (ON DELETE CASCADE, 0008),
 * and the outputs are stored after the module's hook runs (module.h). A report is a
 * few kilobytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "service/db/blobstore.h"
#include "service/infer/infer.h"
#include "service/base/log.h"

#define COMPONENT "inference"

/* The report file as a blob of the tenant owned by the job: 0 and blob_id, or -1. */
static int copy_to_blob(PGconn *conn, const struct gj_claim *c, const char *path, char blob_id[GJ_UUID_LEN + 1])
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        gj_log_error(COMPONENT, "job %s: report: %s", c->id, strerror(errno));
        return -1;
    }
    struct gj_blob_writer *w = gj_blob_writer_open(conn, c->tenant_id, "application/dicom", 0);
    int rc = w ? gj_blob_writer_write_fd(w, fd) : -1;
    close(fd);
    if (rc != 0) {
        if (w)
            gj_blob_writer_abort(w);
        return -1;
    }
    return gj_blob_writer_commit(w, c->id, blob_id);
}

/* One report: 1 stored, 0 not an instance to store (logged), -1 database error. */
static int store_report(PGconn *conn, const struct gj_claim *c, const char *output_dir, const char *name)
{
    char path[GJ_PATH_MAX];
    gj_dicom *d = NULL;
    if (!name || !gj_safe_name(name) || gj_path_join(path, sizeof path, output_dir, name) != 0 ||
        gj_dicom_open_file(path, &d, NULL) != 0) {
        gj_log_warn(COMPONENT, "job %s: a report is not a readable DICOM file; not stored as an instance", c->id);
        return 0;
    }
    struct gj_infer_instance in = { 0 };
    gj_infer_instance_read(d, &in);
    gj_dicom_free(d);
    int rc = 0;
    char blob_id[GJ_UUID_LEN + 1];
    if (!in.v[GJ_IA_STUDY_UID] || !in.v[GJ_IA_SOP_UID] || !in.v[GJ_IA_SOP_CLASS])
        gj_log_warn(COMPONENT, "job %s: report %s lacks its UIDs; not stored as an instance", c->id, name);
    else if (copy_to_blob(conn, c, path, blob_id) != 0)
        rc = -1;
    else if ((rc = gj_infer_instance_claim(conn, c->tenant_id, blob_id, &in)) == 1 && gj_infer_delivery_enabled() &&
             gj_infer_delivery_add(conn, c->id, blob_id, name) != 0)
        rc = -1;   /* claimed (new UIDs: 0 is unlikely), and to be sent to the results PACS */
    gj_infer_instance_clear(&in);
    return rc;
}

int gj_infer_store_reports(PGconn *conn, const struct gj_claim *c, const char *output_dir, json_t *result)
{
    size_t i;
    json_t *o;
    int stored = 0;
    json_array_foreach(json_object_get(result, "reports"), i, o) {
        const char *name = json_string_value(json_object_get(o, "output"));
        if (!name)
            continue;   /* a report that was not written (its error is in result.json) */
        int rc = store_report(conn, c, output_dir, name);
        if (rc < 0)
            return -1;
        stored += rc;
    }
    if (stored)
        gj_log_info(COMPONENT, "job %s: %d report(s) stored as DICOM instances", c->id, stored);
    return 0;
}
