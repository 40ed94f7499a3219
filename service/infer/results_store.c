/*
 * results_store.c — what a succeeded `infer` job records (infer.h): one inference_results
 * row per image of its result.json, keys instead of UIDs, and with --infer-purge-phi its
 * DICOM inputs deleted and its result.json pseudonymised.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "service/db/db.h"
#include "service/jobs/job_store.h"
#include "service/infer/infer.h"
#include "service/base/log.h"

#define COMPONENT "inference"
#define RESULT_MAX_BYTES ((size_t)64 << 20)

/* --infer-purge-phi: once an infer job's results are stored, its own DICOM inputs are
 * deleted and its result.json keeps HMAC keys instead of UIDs. Off by default: what a
 * user uploaded and what a job produced are kept as they are; the results table and the
 * logs are pseudonymous either way. */
static int g_purge_phi;

void gj_infer_set_purge_phi(int on)
{
    g_purge_phi = on;
}

/* ---- results ---- */

/* result.json as the job's output keeps no UID: each study_instance_uid and
 * sop_instance_uid becomes its key (study_key, image_key). 0 or -1. */
static void replace_uid(json_t *o, const char *uid_field, const char *key_field)
{
    json_t *v = json_object_get(o, uid_field);
    if (!v)
        return;
    char key[65];
    if (json_is_string(v) && gj_infer_key(json_string_value(v), key) == 0)
        json_object_set_new(o, key_field, json_string(key));
    else
        json_object_set_new(o, key_field, json_null());
    json_object_del(o, uid_field);
}

/* The reports (result.dcm, ...) hold the patient's identity: with purge_phi they are
 * removed before the outputs are stored (module.h), and result.json says so. */
static void withhold_reports(json_t *root, const char *output_dir)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(root, "reports"), i, o) {
        const char *name = json_string_value(json_object_get(o, "output"));
        char path[GJ_PATH_MAX];
        if (name && gj_safe_name(name) && gj_path_join(path, sizeof path, output_dir, name) == 0)
            unlink(path);
        json_object_del(o, "output");
        json_object_del(o, "series_instance_uid");
        json_object_del(o, "sop_instance_uid");
        json_object_set_new(o, "withheld", json_string("the report holds the patient's identity: not kept "
                                                       "with --infer-purge-phi"));
    }
}

static int pseudonymise_result(json_t *root, const char *path)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(root, "images"), i, o) {
        replace_uid(o, "study_instance_uid", "study_key");
        replace_uid(o, "sop_instance_uid", "image_key");
        json_object_del(o, "acquired_at");   /* a date of the patient's: kept in the table only */
    }
    json_array_foreach(json_object_get(root, "studies"), i, o)
        replace_uid(o, "study_instance_uid", "study_key");
    json_array_foreach(json_object_get(root, "reports"), i, o)
        replace_uid(o, "study_instance_uid", "study_key");
    json_object_set_new(root, "pseudonymised",
                        json_string("UIDs replaced by HMAC-SHA256 keys under the server secret (study_key, image_key)"));
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    if (!text)
        return -1;
    int rc = gj_write_file(path, text, strlen(text));
    free(text);
    return rc;
}

/* The job's own DICOM inputs (uploaded with it: STOW-RS, multipart submit) are
 * deleted once its results are stored: they hold the patient's identity. Blobs
 * uploaded on their own (POST /v1/blobs) stay, as their owner manages them.
 * Only with GPUJOBD_INFER_PURGE_PHI=1. 0 or -1. */
static int purge_inputs(PGconn *conn, const struct gj_claim *c)
{
    long n = gj_job_inputs_release_owned(conn, c->id, "dicom");
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    if (gj_job_blobs_drop_unused(conn, c->id) != 0 ||
        gj_job_note(conn, c->id, "the DICOM inputs were deleted once the results were stored") != 0)
        return -1;
    gj_log_info(COMPONENT, "job %s: %ld DICOM input(s) deleted after inference", c->id, n);
    return 0;
}

static const char insert_sql[] =
    "INSERT INTO inference_results (tenant_id, job_id, study_key, image_key, input_name, model,"
    " model_version, status, reason, scores, top_label, top_score, acquired_at, received_at)"
    " VALUES ($1::uuid, $2::uuid, $3, $4, $5, $6, $7::bigint, $8, $9, $10::jsonb, $11,"
    " $12::double precision, $13::timestamp, $14::timestamptz)"
    " ON CONFLICT (job_id, input_name) DO NOTHING";

static int safe_input_name(const char *s)
{
    return s && gj_safe_name(s) && strlen(s) <= 100;
}

/* "YYYY-MM-DD HH:MM:SS[.f{1,6}]" as the kind writes it (acquired_at.h); anything else is
 * not stored (a cast that fails would lose the whole transaction). */
static int timestamp_text_ok(const char *s)
{
    static const char shape[] = "dddd-dd-dd dd:dd:dd";
    size_t n = s ? strlen(s) : 0;
    if (n < sizeof shape - 1 || n > sizeof shape - 1 + 7)
        return 0;
    for (size_t i = 0; i < sizeof shape - 1; i++)
        if (shape[i] == 'd' ? !isdigit((unsigned char)s[i]) : s[i] != shape[i])
            return 0;
    if (n == sizeof shape - 1)
        return 1;
    if (s[sizeof shape - 1] != '.' || n == sizeof shape)
        return 0;
    for (size_t i = sizeof shape; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

/* One inference_results row for an image of result.json (rows that are not one are
 * skipped), received_at being received ("" when the job has no row: none stored). 1 stored,
 * 0 not (skipped, or already there), -1 database error. */
static int store_image(PGconn *conn, const struct gj_claim *c, const char *received, const char *model,
                       const char *version, json_t *im, int *no_time)
{
    const char *input = json_string_value(json_object_get(im, "input"));
    const char *status = json_string_value(json_object_get(im, "status"));
    if (!safe_input_name(input) || !status ||
        (strcmp(status, "ok") && strcmp(status, "skipped") && strcmp(status, "failed")))
        return 0;
    char study_key[65] = "", image_key[65] = "";
    const char *study = json_string_value(json_object_get(im, "study_instance_uid"));
    const char *sop = json_string_value(json_object_get(im, "sop_instance_uid"));
    if (study && gj_infer_key(study, study_key) != 0)
        study_key[0] = '\0';
    if (sop && gj_infer_key(sop, image_key) != 0)
        image_key[0] = '\0';
    json_t *scores = json_object_get(im, "scores");
    char *scores_text = json_is_object(scores) ? json_dumps(scores, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_t *ts = json_object_get(im, "top_score");
    char top_score[40] = "";
    if (json_is_number(ts))
        snprintf(top_score, sizeof top_score, "%.9g", json_number_value(ts));
    const char *acquired = json_string_value(json_object_get(im, "acquired_at"));
    if (!timestamp_text_ok(acquired)) {
        acquired = NULL;
        (*no_time)++;
    }
    if (!received[0]) {          /* no job row any more: nothing to attach a result to */
        free(scores_text);
        return 0;
    }
    const char *p[14] = { c->tenant_id, c->id, study_key[0] ? study_key : NULL, image_key[0] ? image_key : NULL,
                          input, model, version, status, json_string_value(json_object_get(im, "reason")),
                          scores_text, json_string_value(json_object_get(im, "top_label")),
                          top_score[0] ? top_score : NULL, acquired, received };
    PGresult *res = gj_db_exec(conn, insert_sql, 14, p, NULL);
    free(scores_text);
    if (!res)
        return -1;
    int stored = atoi(PQcmdTuples(res));
    PQclear(res);
    return stored;
}

/* result.json, when it names a model and has images; NULL (logged) otherwise. */
static json_t *read_result(const struct gj_claim *c, const char *path)
{
    char *text = NULL;
    size_t len = 0;
    if (gj_read_file(path, RESULT_MAX_BYTES, &text, &len) != 0) {
        gj_log_warn(COMPONENT, "job %s: no readable result.json; no inference results stored", c->id);
        return NULL;
    }
    json_t *root = json_loadb(text, len, 0, NULL);
    free(text);
    json_t *mver = json_object_get(json_object_get(root, "model"), "version");
    if (!json_is_array(json_object_get(root, "images")) ||
        !json_string_value(json_object_get(json_object_get(root, "model"), "name")) || !json_is_integer(mver) ||
        json_integer_value(mver) < 1) {
        gj_log_warn(COMPONENT, "job %s: result.json has no images or model; no inference results stored", c->id);
        json_decref(root);
        return NULL;
    }
    return root;
}

int gj_infer_store_results(PGconn *conn, const struct gj_claim *c, const char *output_dir)
{
    char path[4200], probe[65];
    if (!output_dir || gj_path_join(path, sizeof path, output_dir, "result.json") != 0)
        return 0;
    if (gj_infer_key("", probe) != 0) {
        gj_log_error(COMPONENT, "job %s: no pseudonymisation secret; no inference results stored", c->id);
        return 0;
    }
    json_t *root = read_result(c, path);
    if (!root)
        return 0;
    char received[64] = "";      /* a result's received_at is its job's created_at */
    if (gj_job_created_at(conn, c->id, received) < 0) {
        json_decref(root);
        return -1;
    }
    json_t *model = json_object_get(root, "model");
    char version[32];
    snprintf(version, sizeof version, "%lld", (long long)json_integer_value(json_object_get(model, "version")));
    size_t i;
    json_t *im;
    int stored = 0, no_time = 0;
    json_array_foreach(json_object_get(root, "images"), i, im) {
        int rc = store_image(conn, c, received, json_string_value(json_object_get(model, "name")), version, im,
                             &no_time);
        if (rc < 0) {
            json_decref(root);
            return -1;
        }
        stored += rc;
    }
    gj_log_info(COMPONENT, "job %s: %d inference result(s) stored (%d without an acquisition time)", c->id, stored,
                no_time);
    /* The reports carry the patient's identity: with purge_phi they are not kept as
     * instances (whose rows would hold it after the inputs are gone). */
    if (!g_purge_phi && gj_infer_store_reports(conn, c, output_dir, root) != 0) {
        json_decref(root);
        return -1;
    }
    if (!g_purge_phi) {
        json_decref(root);
        return 0;
    }
    withhold_reports(root, output_dir);
    int rc = pseudonymise_result(root, path);
    json_decref(root);
    if (rc != 0) {
        gj_log_error(COMPONENT, "job %s: cannot rewrite result.json without its UIDs: %s", c->id, strerror(errno));
        errno = EIO;
        return -1;               /* no commit: the UIDs would be stored otherwise */
    }
    return purge_inputs(conn, c);
}
