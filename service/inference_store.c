/*
 * inference_store.c — model repository set-up, the pseudonymisation secret,
 * and turning a succeeded `infer` job's result.json into inference_results
 * rows (see inference_store.h).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "common/fsutil.h"
#include "infer/dicom.h"
#include "infer/serving/batcher.h"
#include "service/db.h"
#include "service/inference_store.h"
#include "service/log.h"

#include "gj_demo_model.h"

#define COMPONENT "inference"
#define SECRET_NAME "pseudonym_hmac_v1"
#define RESULT_MAX_BYTES ((size_t)64 << 20)
#define INPUT_MAX_BYTES ((uint64_t)512 << 20)   /* inputs re-read for their acquisition time */

static unsigned char g_secret[512];
static size_t g_secret_len;
static gj_model_repo *g_repo;
static char g_models_dir[1100];
static pthread_mutex_t g_repo_mu = PTHREAD_MUTEX_INITIALIZER;
/* GPUJOBD_INFER_PURGE_PHI=1: once an infer job's results are stored, its own
 * DICOM inputs are deleted and its result.json keeps HMAC keys instead of UIDs.
 * Off by default: what a user uploaded and what a job produced are kept as
 * they are; the results table and the logs are pseudonymous either way. */
static int g_purge_phi;

gj_model_repo *gj_inference_repo(void)
{
    return g_repo;
}

const char *gj_inference_models_dir(void)
{
    return g_models_dir;
}

void gj_inference_repo_lock(void)
{
    pthread_mutex_lock(&g_repo_mu);
}

void gj_inference_repo_unlock(void)
{
    pthread_mutex_unlock(&g_repo_mu);
}

json_t *gj_inference_devices_json(const char *name, int64_t version)
{
    int d[GJ_MODEL_MAX_GPUS + 1];
    size_t n = gj_batcher_registry_devices(name, version, d, GJ_MODEL_MAX_GPUS + 1);
    json_t *a = json_array();
    for (size_t i = 0; a && i < n && i < GJ_MODEL_MAX_GPUS + 1; i++) {
        char dev[24];
        if (d[i] >= 0)
            snprintf(dev, sizeof dev, "gpu:%d", d[i]);
        else
            snprintf(dev, sizeof dev, "cpu");
        json_array_append_new(a, json_string(dev));
    }
    return a;
}

int gj_inference_key(const char *text, char hex[65])
{
    hex[0] = '\0';
    if (!g_secret_len || !text)
        return -1;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!HMAC(EVP_sha256(), g_secret, (int)g_secret_len, (const unsigned char *)text, strlen(text), md, &n) ||
        n != 32)
        return -1;
    for (unsigned i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return 0;
}

/* ---- start-up ---- */

/* The inference routes join the HTTP route table when the program loads, so
 * `serve --print-routes` (run before any start-up step) lists them too. */
__attribute__((constructor)) static void register_routes(void)
{
    if (gj_http_add_routes(gj_routes_models, gj_routes_models_count) != 0 ||
        gj_http_add_routes(gj_routes_dicomweb, gj_routes_dicomweb_count) != 0 ||
        gj_http_add_routes(gj_routes_inference, gj_routes_inference_count) != 0)
        fprintf(stderr, "gpujobd: the inference routes could not be registered\n");
}

/* Writes the embedded demo model to models_dir/<name> through a hidden
 * temporary directory renamed into place, so a half-written model is never seen
 * (and a replica starting at the same time loses the rename harmlessly). */
static int seed_demo_model(const char *models_dir)
{
    char dst[1300], tmp[1300];
    struct stat st;
    if (gj_demo_model_count == 0)
        return 0;
    if (gj_path_join(dst, sizeof dst, models_dir, GJ_INFER_DEFAULT_MODEL) != 0)
        return -1;
    if (stat(dst, &st) == 0)
        return 0;
    snprintf(tmp, sizeof tmp, "%s/.seed-%ld", models_dir, (long)getpid());
    gj_rm_rf(tmp);
    if (gj_mkdir_p(tmp, 0755) != 0)
        goto fail;
    for (size_t i = 0; i < gj_demo_model_count; i++) {
        char path[1600], dir[1600];
        if (snprintf(path, sizeof path, "%s/%s", tmp, gj_demo_model[i].path) >= (int)sizeof path)
            goto fail;
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = '\0';
            if (gj_mkdir_p(dir, 0755) != 0)
                goto fail;
        }
        if (gj_write_file(path, gj_demo_model[i].data, gj_demo_model[i].len) != 0)
            goto fail;
    }
    if (rename(tmp, dst) != 0) {
        if (errno == EEXIST || errno == ENOTEMPTY) {   /* another replica was first */
            gj_rm_rf(tmp);
            return 0;
        }
        goto fail;
    }
    gj_log_info(COMPONENT, "model repository: seeded %s with the demo model %s", models_dir,
                GJ_INFER_DEFAULT_MODEL);
    return 0;
fail:
    gj_log_error(COMPONENT, "cannot write the demo model into %s: %s", models_dir, strerror(errno));
    gj_rm_rf(tmp);
    return -1;
}

/* Staging left by a process that died mid-upload (.upload-*, .delete-*, .seed-*)
 * goes; model names never start with '.', so nothing else is touched. */
static void clean_staging(const char *models_dir)
{
    DIR *d = opendir(models_dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, ".upload-", 8) && strncmp(e->d_name, ".delete-", 8) && strncmp(e->d_name, ".seed-", 6))
            continue;
        char path[1400];
        if (gj_path_join(path, sizeof path, models_dir, e->d_name) == 0 && gj_rm_rf(path) == 0)
            gj_log_info(COMPONENT, "model repository: removed the leftover %s", e->d_name);
    }
    closedir(d);
}

static int load_secret(struct gj_server *srv)
{
    const char *env = getenv("GPUJOBD_PSEUDONYM_SECRET");
    if (env && env[0]) {
        size_t n = strlen(env);
        if (n < 32 || n > sizeof g_secret) {
            gj_log_error(COMPONENT, "GPUJOBD_PSEUDONYM_SECRET must be 32 to %zu characters", sizeof g_secret);
            return -1;
        }
        memcpy(g_secret, env, n);
        g_secret_len = n;
        gj_log_info(COMPONENT, "pseudonymisation secret: from GPUJOBD_PSEUDONYM_SECRET");
        return 0;
    }
    unsigned char fresh[32];
    if (RAND_bytes(fresh, sizeof fresh) != 1) {
        gj_log_error(COMPONENT, "cannot generate the pseudonymisation secret (RAND_bytes)");
        return -1;
    }
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", fresh[i]);
    explicit_bzero(fresh, sizeof fresh);
    PGconn *conn = gj_db_connect(srv->database_url);
    if (!conn)
        return -1;
    int rc = -1;
    const char *p[2] = { SECRET_NAME, hex };
    if (gj_db_cmd(conn,
                  "INSERT INTO server_secrets (name, value) VALUES ($1, decode($2, 'hex'))"
                  " ON CONFLICT (name) DO NOTHING",
                  2, p) == 0) {
        PGresult *res = gj_db_exec(conn, "SELECT encode(value, 'hex') FROM server_secrets WHERE name = $1", 1, p,
                                   NULL);
        if (res && PQntuples(res) == 1) {
            const char *v = PQgetvalue(res, 0, 0);
            size_t n = strlen(v) / 2;
            if (n >= 32 && n <= sizeof g_secret) {
                for (size_t i = 0; i < n; i++) {
                    unsigned x;
                    sscanf(v + 2 * i, "%2x", &x);
                    g_secret[i] = (unsigned char)x;
                }
                g_secret_len = n;
                rc = 0;
            }
        }
        if (res) {
            /* the hex text of the secret is not left in freed memory */
            if (PQntuples(res) == 1)
                explicit_bzero(PQgetvalue(res, 0, 0), strlen(PQgetvalue(res, 0, 0)));
            PQclear(res);
        }
    }
    explicit_bzero(hex, sizeof hex);
    PQfinish(conn);
    if (rc)
        gj_log_error(COMPONENT, "cannot read the pseudonymisation secret from the database");
    return rc;
}

int gj_inference_init(struct gj_server *srv)
{
    const char *env = getenv("GPUJOBD_MODELS_DIR");
    if (env && env[0]) {
        snprintf(g_models_dir, sizeof g_models_dir, "%s", env);
    } else {
        if (gj_path_join(g_models_dir, sizeof g_models_dir, srv->cfg.data_dir, "models") != 0) {
            gj_log_error(COMPONENT, "--data-dir is too long for the model repository path");
            return -1;
        }
        if (setenv("GPUJOBD_MODELS_DIR", g_models_dir, 1) != 0)
            return -1;
    }
    if (gj_mkdir_p(g_models_dir, 0755) != 0) {
        gj_log_error(COMPONENT, "cannot create the model repository %s: %s", g_models_dir, strerror(errno));
        return -1;
    }
    clean_staging(g_models_dir);
    if (seed_demo_model(g_models_dir) != 0)
        return -1;
    if (load_secret(srv) != 0)
        return -1;
    const char *purge = getenv("GPUJOBD_INFER_PURGE_PHI");
    g_purge_phi = purge && strcmp(purge, "1") == 0;
    if (g_purge_phi)
        gj_log_info(COMPONENT, "GPUJOBD_INFER_PURGE_PHI=1: DICOM inputs of infer jobs are deleted and "
                    "their result.json pseudonymised once results are stored");
    struct gj_error err = { 0 };
    g_repo = gj_model_repo_open(g_models_dir, &err);
    if (!g_repo) {
        gj_log_error(COMPONENT, "model repository %s: %s", g_models_dir, err.message);
        return -1;
    }
    gj_log_info(COMPONENT, "model repository %s: %zu model(s)", g_models_dir, gj_model_repo_count(g_repo));
    return 0;
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
    if (json_is_string(v) && gj_inference_key(json_string_value(v), key) == 0)
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

int gj_inference_on_job_succeeded(PGconn *conn, const struct gj_claim *c, const char *output_dir)
{
    if (!output_dir || strcmp(c->kind, "infer") != 0)
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
    if (!g_secret_len) {
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
        if (study && gj_inference_key(study, study_key) != 0)
            study_key[0] = '\0';
        if (sop && gj_inference_key(sop, image_key) != 0)
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
