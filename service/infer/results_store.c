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

#include "common/fsutil.h"
#include "infer/dicom.h"
#include "service/db.h"
#include "service/infer/infer.h"
#include "service/log.h"

#define COMPONENT "inference"
#define RESULT_MAX_BYTES ((size_t)64 << 20)
#define INPUT_MAX_BYTES ((uint64_t)512 << 20)   /* inputs re-read for their acquisition time */

/* --infer-purge-phi: once an infer job's results are stored, its own DICOM inputs are
 * deleted and its result.json keeps HMAC keys instead of UIDs. Off by default: what a
 * user uploaded and what a job produced are kept as they are; the results table and the
 * logs are pseudonymous either way. */
static int g_purge_phi;

void gj_infer_set_purge_phi(int on)
{
    g_purge_phi = on;
}

/* ---- DICOM dates ---- */

static int digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

/* "YYYYMMDD" (also the old "YYYY.MM.DD") to y, m, d. */
static int parse_da(const char *s, int *y, int *m, int *d)
{
    char b[9];
    size_t n = strlen(s);
    if (n == 10 && s[4] == '.' && s[7] == '.') {
        memcpy(b, s, 4);
        memcpy(b + 4, s + 5, 2);
        memcpy(b + 6, s + 8, 2);
    } else if (n == 8) {
        memcpy(b, s, 8);
    } else {
        return -1;
    }
    b[8] = '\0';
    if (!digits(b, 8))
        return -1;
    *y = (b[0] - '0') * 1000 + (b[1] - '0') * 100 + (b[2] - '0') * 10 + (b[3] - '0');
    *m = (b[4] - '0') * 10 + (b[5] - '0');
    *d = (b[6] - '0') * 10 + (b[7] - '0');
    static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    if (*y < 1 || *m < 1 || *m > 12 || *d < 1 || *d > mdays[*m - 1])
        return -1;
    if (*m == 2 && *d == 29 && !((*y % 4 == 0 && *y % 100 != 0) || *y % 400 == 0))
        return -1;
    return 0;
}

/* "HH[MM[SS[.F{1,6}]]]" (also "HH:MM:SS"); frac gets the fraction digits ("" if none). */
static int parse_tm(const char *s, int *hh, int *mm, int *ss, char frac[8])
{
    char b[32];
    size_t o = 0;
    for (const char *p = s; *p && o < sizeof b - 1; p++)
        if (*p != ':')
            b[o++] = *p;
    b[o] = '\0';
    if (strlen(s) >= sizeof b)
        return -1;
    *hh = *mm = *ss = 0;
    frac[0] = '\0';
    size_t n = strcspn(b, ".");
    if (n < 2 || n > 6 || n % 2 || !digits(b, n))
        return -1;
    *hh = (b[0] - '0') * 10 + (b[1] - '0');
    if (n >= 4)
        *mm = (b[2] - '0') * 10 + (b[3] - '0');
    if (n >= 6)
        *ss = (b[4] - '0') * 10 + (b[5] - '0');
    if (b[n] == '.') {
        size_t f = strlen(b + n + 1);
        if (n != 6 || f < 1 || f > 6 || !digits(b + n + 1, f))
            return -1;
        memcpy(frac, b + n + 1, f + 1);
    }
    if (*hh > 23 || *mm > 59 || *ss > 60)
        return -1;
    if (*ss == 60)
        *ss = 59;               /* a leap second: PostgreSQL refuses :60 */
    return 0;
}

static void fmt_ts(char out[32], int y, int m, int d, int hh, int mm, int ss, const char *frac)
{
    if (frac[0])
        snprintf(out, 32, "%04d-%02d-%02d %02d:%02d:%02d.%s", y, m, d, hh, mm, ss, frac);
    else
        snprintf(out, 32, "%04d-%02d-%02d %02d:%02d:%02d", y, m, d, hh, mm, ss);
}

int gj_dicom_datetime_text(const char *dt, const char *date, const char *time, char out[32])
{
    int y, m, d, hh = 0, mm = 0, ss = 0;
    char frac[8] = "";
    out[0] = '\0';
    if (dt && dt[0]) {
        /* YYYYMMDDHHMMSS.FFFFFF&ZZXX, every part after the year optional; the
         * offset is dropped (the column holds the local time as the device wrote it). */
        char b[40];
        size_t n = strcspn(dt, "+-");
        if (n >= sizeof b || n < 8)
            return -1;
        if (dt[n] && (strlen(dt + n + 1) != 4 || !digits(dt + n + 1, 4)))
            return -1;           /* the offset is &ZZXX */
        memcpy(b, dt, n);
        b[n] = '\0';
        char da[9];
        memcpy(da, b, 8);
        da[8] = '\0';
        if (parse_da(da, &y, &m, &d))
            return -1;
        if (b[8] && parse_tm(b + 8, &hh, &mm, &ss, frac))
            return -1;
        fmt_ts(out, y, m, d, hh, mm, ss, frac);
        return 0;
    }
    if (!date || parse_da(date, &y, &m, &d))
        return -1;
    if (time && time[0] && parse_tm(time, &hh, &mm, &ss, frac))
        return -1;
    fmt_ts(out, y, m, d, hh, mm, ss, frac);
    return 0;
}

/* Acquisition time of an input file: AcquisitionDateTime, else
 * AcquisitionDate/Time, else ContentDate/Time. 0 with out filled, or -1. */
static int acquisition_time(const char *path, char out[32])
{
    uint64_t size = 0;
    if (gj_file_size(path, &size) != 0 || size > INPUT_MAX_BYTES)
        return -1;
    gj_dicom *d = NULL;
    if (gj_dicom_open_file(path, &d, NULL) != 0)
        return -1;
    char dt[64], da[32], tm[40];
    int rc = -1;
    if (gj_dicom_get_string(d, GJ_TAG(0x0008, 0x002A), dt, sizeof dt) == 0 && dt[0])
        rc = gj_dicom_datetime_text(dt, NULL, NULL, out);
    if (rc != 0 && gj_dicom_get_string(d, GJ_TAG(0x0008, 0x0022), da, sizeof da) == 0 && da[0]) {
        if (gj_dicom_get_string(d, GJ_TAG(0x0008, 0x0032), tm, sizeof tm) != 0)
            tm[0] = '\0';
        rc = gj_dicom_datetime_text(NULL, da, tm, out);
    }
    if (rc != 0 && gj_dicom_get_string(d, GJ_TAG(0x0008, 0x0023), da, sizeof da) == 0 && da[0]) {
        if (gj_dicom_get_string(d, GJ_TAG(0x0008, 0x0033), tm, sizeof tm) != 0)
            tm[0] = '\0';
        rc = gj_dicom_datetime_text(NULL, da, tm, out);
    }
    gj_dicom_free(d);
    return rc;
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

static int pseudonymise_result(json_t *root, const char *path)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(root, "images"), i, o) {
        replace_uid(o, "study_instance_uid", "study_key");
        replace_uid(o, "sop_instance_uid", "image_key");
    }
    json_array_foreach(json_object_get(root, "studies"), i, o)
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
    const char *p[1] = { c->id };
    PGresult *res = gj_db_exec(conn,
                               "WITH gone AS (DELETE FROM job_inputs i USING blobs b"
                               "  WHERE i.job_id = $1::uuid AND b.id = i.blob_id AND b.owner_job = $1::uuid"
                               "  AND (i.name = 'dicom' OR i.name LIKE 'dicom.%') RETURNING i.blob_id)"
                               " SELECT count(*) FROM gone",
                               1, p, NULL);
    if (!res)
        return -1;
    long n = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    if (n == 0)
        return 0;
    if (gj_db_cmd(conn,
                  "DELETE FROM blobs b WHERE b.owner_job = $1::uuid"
                  " AND NOT EXISTS (SELECT 1 FROM job_inputs i WHERE i.blob_id = b.id)"
                  " AND NOT EXISTS (SELECT 1 FROM job_outputs o WHERE o.blob_id = b.id)",
                  1, p) != 0 ||
        gj_db_cmd(conn,
                  "INSERT INTO job_events (job_id, kind, detail) VALUES ($1::uuid, 'message',"
                  " jsonb_build_object('message', 'the DICOM inputs were deleted once the results were stored'))",
                  1, p) != 0)
        return -1;
    gj_log_info(COMPONENT, "job %s: %ld DICOM input(s) deleted after inference", c->id, n);
    return 0;
}

static const char insert_sql[] =
    "INSERT INTO inference_results (tenant_id, job_id, study_key, image_key, input_name, model,"
    " model_version, status, reason, scores, top_label, top_score, acquired_at, received_at)"
    " SELECT $1::uuid, $2::uuid, $3, $4, $5, $6, $7::bigint, $8, $9, $10::jsonb, $11,"
    " $12::double precision, $13::timestamp, j.created_at FROM jobs j WHERE j.id = $2::uuid"
    " ON CONFLICT (job_id, input_name) DO NOTHING";

static int safe_input_name(const char *s)
{
    return s && gj_safe_name(s) && strlen(s) <= 100;
}

int gj_infer_store_results(PGconn *conn, const struct gj_claim *c, const char *output_dir)
{
    if (!output_dir)
        return 0;
    char path[4200], inputs_dir[4200];
    if (gj_path_join(path, sizeof path, output_dir, "result.json") != 0)
        return 0;
    snprintf(inputs_dir, sizeof inputs_dir, "%s", output_dir);
    char *slash = strrchr(inputs_dir, '/');
    if (slash && strlen(inputs_dir) + 8 < sizeof inputs_dir)
        strcpy(slash + 1, "inputs");
    else
        inputs_dir[0] = '\0';

    char *text = NULL;
    size_t len = 0;
    if (gj_read_file(path, RESULT_MAX_BYTES, &text, &len) != 0) {
        gj_log_warn(COMPONENT, "job %s: no readable result.json; no inference results stored", c->id);
        return 0;
    }
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    free(text);
    json_t *images = json_object_get(root, "images");
    json_t *model = json_object_get(root, "model");
    const char *mname = json_string_value(json_object_get(model, "name"));
    json_t *mver = json_object_get(model, "version");
    if (!json_is_array(images) || !mname || !json_is_integer(mver) || json_integer_value(mver) < 1) {
        gj_log_warn(COMPONENT, "job %s: result.json has no images or model; no inference results stored", c->id);
        json_decref(root);
        return 0;
    }
    char probe[65];
    if (gj_infer_key("", probe) != 0) {
        gj_log_error(COMPONENT, "job %s: no pseudonymisation secret; no inference results stored", c->id);
        json_decref(root);
        return 0;
    }
    char version[32];
    snprintf(version, sizeof version, "%lld", (long long)json_integer_value(mver));
    size_t i;
    json_t *im;
    int stored = 0, no_time = 0;
    json_array_foreach(images, i, im) {
        const char *input = json_string_value(json_object_get(im, "input"));
        const char *status = json_string_value(json_object_get(im, "status"));
        if (!safe_input_name(input) || !status ||
            (strcmp(status, "ok") && strcmp(status, "skipped") && strcmp(status, "failed")))
            continue;
        char study_key[65] = "", image_key[65] = "";
        const char *study = json_string_value(json_object_get(im, "study_instance_uid"));
        const char *sop = json_string_value(json_object_get(im, "sop_instance_uid"));
        if (study && gj_infer_key(study, study_key) != 0)
            study_key[0] = '\0';
        if (sop && gj_infer_key(sop, image_key) != 0)
            image_key[0] = '\0';
        json_t *scores = json_object_get(im, "scores");
        char *scores_text = json_is_object(scores) ? json_dumps(scores, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
        const char *top = json_string_value(json_object_get(im, "top_label"));
        json_t *ts = json_object_get(im, "top_score");
        char top_score[40] = "";
        if (json_is_number(ts))
            snprintf(top_score, sizeof top_score, "%.9g", json_number_value(ts));
        const char *reason = json_string_value(json_object_get(im, "reason"));
        char acquired[32] = "";
        char ipath[4400];
        if (inputs_dir[0] && gj_path_join(ipath, sizeof ipath, inputs_dir, input) == 0 &&
            acquisition_time(ipath, acquired) != 0)
            acquired[0] = '\0';
        if (!acquired[0])
            no_time++;
        const char *p[13] = { c->tenant_id, c->id, study_key[0] ? study_key : NULL,
                              image_key[0] ? image_key : NULL, input, mname, version, status, reason,
                              scores_text, top, top_score[0] ? top_score : NULL, acquired[0] ? acquired : NULL };
        PGresult *res = gj_db_exec(conn, insert_sql, 13, p, NULL);
        free(scores_text);
        if (!res) {
            json_decref(root);
            return -1;
        }
        stored += atoi(PQcmdTuples(res));
        PQclear(res);
    }
    gj_log_info(COMPONENT, "job %s: %d inference result(s) stored (%d without an acquisition time)", c->id, stored,
                no_time);
    if (!g_purge_phi) {
        json_decref(root);
        return 0;
    }
    int rc = pseudonymise_result(root, path);
    json_decref(root);
    if (rc != 0) {
        gj_log_error(COMPONENT, "job %s: cannot rewrite result.json without its UIDs: %s", c->id, strerror(errno));
        errno = EIO;
        return -1;               /* no commit: the UIDs would be stored otherwise */
    }
    return purge_inputs(conn, c);
}

