/*
 * routes_dicomweb.c — DICOMweb STOW-RS (PS3.18 §10.5) into `infer` jobs:
 *
 *   POST /dicomweb/studies
 *   POST /dicomweb/studies/{study}       every instance must belong to that study
 *   Content-Type: multipart/related; type="application/dicom"; boundary=...
 *   ?model=NAME (default chest-xray-demo) &version=N
 *
 * The body is spooled while it arrives (upload_spool.h); then each part is
 * streamed into a blob (one transaction for the whole request)
 * and, at the same time, into a scratch file that is parsed when the part
 * ends; instances are grouped by Study Instance UID and each study becomes
 * one `infer` job with the instances as its inputs (dicom, dicom.1, ...).
 * The answer is the standard Store Instances Response (application/dicom+json:
 * RetrieveURL, ReferencedSOPSequence, FailedSOPSequence with FailureReason):
 * 200 all stored, 202 some failed, 409 none. The created jobs are given in
 * Link headers (rel="related") and in a private sequence (0009,1010) under
 * private creator "GPUJOBD" (items: (0009,1011) job URL, (0009,1012) job id).
 *
 * A deflated instance is inflated only up to its pixel data (open_part): broken pixel data
 * there is found when the instance is rendered or decoded, not here.
 *
 * Each stored instance is recorded for the tenant with its searchable attributes
 * (instances_store.c, for QIDO/WADO); one the tenant already stored is acknowledged in
 * ReferencedSOPSequence with WarningReason B111H, is not stored again and makes no job,
 * so a study whose new instances arrive later gets one job for the new ones.
 *
 * No UID or patient attribute is logged.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/gj_kind.h"
#include "infer/dicom.h"
#include "service/db/blobstore.h"
#include "service/jobs/queue.h"
#include "service/db/db.h"
#include "service/http/http_server.h"
#include "service/infer/infer.h"
#include "service/base/log.h"
#include "service/http/multipart_related.h"
#include "service/db/storage_quota.h"

#define COMPONENT "dicomweb"
#define STOW_MAX_INSTANCES 10000
#define JOB_MAX_INPUTS 4096
#define STOW_MAX_ATTRIBUTES ((uint64_t)64 << 20)   /* a deflated instance's, inflated */

/* PS3.18 / PS3.7 failure reasons. */
#define FAIL_PROCESSING 0x0110
#define FAIL_DUPLICATE 0x0111
#define FAIL_NO_MATCH 0xA900       /* data set does not match (here: not the study of the URL) */
#define FAIL_CANNOT_UNDERSTAND 0xC000
#define FAIL_OUT_OF_RESOURCES 0xA700
/* An instance the tenant already stored: acknowledged, not stored again, no new job. A
 * code of our own in the warning range (PS3.18 §I.2.1 allows additional codes), after
 * Failure 0111H "Duplicate SOP Instance". */
#define WARN_ALREADY_STORED 0xB111

struct instance {
    char sop_class[68], sop_uid[68], study_uid[68];
    char blob_id[GJ_UUID_LEN + 1];
    uint64_t size;
    int failure;                 /* 0: stored */
    int warning;                 /* stored with a warning (WarningReason), no job */
    struct gj_infer_instance attrs;
};

struct stow {
    struct gj_mpr *mp;
    char model[GJ_MODEL_NAME_MAX];
    int64_t version;
    char study_path[68];
    int in_txn;
    struct gj_blob_writer *w;
    int fd;
    char scratch[1300];
    int cur_failure;             /* the current part is already failed */
    uint64_t cur_bytes;
    struct instance *inst;
    size_t n, cap;
    int status;
    char msg[300];
    int over_quota;              /* status 507 is the tenant's storage quota: */
    struct gj_storage_refusal over;
};

static void stow_fail(struct stow *s, int status, const char *msg)
{
    if (s->status)
        return;
    s->status = status;
    snprintf(s->msg, sizeof s->msg, "%s", msg);
}

static void get_uid(const gj_dicom *d, uint32_t tag, char out[68])
{
    char buf[128];
    out[0] = '\0';
    if (gj_dicom_get_string(d, tag, buf, sizeof buf) == 0 && gj_infer_uid_ok(buf))
        memcpy(out, buf, strlen(buf) + 1);   /* uid_ok: at most 64 characters */
}

static struct instance *new_instance(struct stow *s)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct instance *g = realloc(s->inst, cap * sizeof *g);
        if (!g)
            return NULL;
        s->inst = g;
        s->cap = cap;
    }
    struct instance *in = &s->inst[s->n++];
    memset(in, 0, sizeof *in);
    return in;
}

static void drop_part(struct stow *s)
{
    if (s->w) {
        gj_blob_writer_abort(s->w);
        s->w = NULL;
    }
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    if (s->scratch[0])
        unlink(s->scratch);
}

/* The request's transaction, begun with the first instance: the body is complete by
 * then (it was spooled while it arrived, upload_spool.h). 0, or -1 with s failed. */
static int stow_txn(struct gj_req *r, struct stow *s)
{
    if (s->in_txn)
        return 0;
    PGconn *c = gj_req_db(r);
    if (!c || gj_db_begin(c) != 0) {
        stow_fail(s, 503, "the database is not available; retry shortly");
        return -1;
    }
    s->in_txn = 1;
    return 0;
}

static int part_begin(void *ud, const struct gj_mpr_part *part)
{
    struct gj_req *r = ud;
    struct stow *s = r->state;
    s->cur_failure = 0;
    s->cur_bytes = 0;
    if (s->n >= STOW_MAX_INSTANCES) {
        stow_fail(s, 413, "more than 10000 instances in one request");
        return -1;
    }
    const char *ct = gj_mpr_header(part, "Content-Type");
    if (ct && !gj_mime_type_is(ct, "application/dicom")) {
        s->cur_failure = FAIL_CANNOT_UNDERSTAND;   /* this part fails; the others go on */
        return 0;
    }
    if (stow_txn(r, s) != 0)
        return -1;
    s->w = gj_blob_writer_open(r->db, r->who.tenant_id, "application/dicom", 0);
    if (!s->w) {
        stow_fail(s, 503, "the database is not available; retry shortly");
        return -1;
    }
    s->fd = open(s->scratch, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (s->fd < 0) {
        gj_log_error(COMPONENT, "scratch file: %s", strerror(errno));
        stow_fail(s, 500, "the instance could not be staged");
        return -1;
    }
    return 0;
}

static int part_data(void *ud, const char *data, size_t len)
{
    struct gj_req *r = ud;
    struct stow *s = r->state;
    if (s->cur_failure)
        return 0;
    s->cur_bytes += len;
    if (s->cur_bytes > GJ_DICOM_MAX_FILE_BYTES) {
        s->cur_failure = FAIL_OUT_OF_RESOURCES;
        drop_part(s);
        return 0;
    }
    if (gj_blob_writer_write(s->w, data, len) != 0) {
        stow_fail(s, 503, "the database is not available; retry shortly");
        return -1;
    }
    while (len) {
        ssize_t n = write(s->fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            gj_log_error(COMPONENT, "scratch file: %s", strerror(errno));
            stow_fail(s, 507, "the instance could not be staged (disk full?)");
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A stored part, parsed for its attributes. A deflated one is read up to its pixel data
 * (gj_dicom_open_limits), so that a small file inflating to a huge image costs about its
 * attributes' size here; the others are read whole, as they are no larger than the part. */
static gj_dicom *open_part(const char *path)
{
    const struct gj_dicom_open_limits header = { .max_inflated = STOW_MAX_ATTRIBUTES, .header_only = 1 };
    gj_dicom *d = NULL;
    if (gj_dicom_open_file_limited(path, &header, &d, NULL) != 0)
        return NULL;
    if (gj_dicom_ts(d) == GJ_TS_DEFLATED_LE)
        return d;
    gj_dicom_free(d);
    return gj_dicom_open_file(path, &d, NULL) == 0 ? d : NULL;
}

static int part_end(void *ud)
{
    struct gj_req *r = ud;
    struct stow *s = r->state;
    struct instance *in = new_instance(s);
    if (!in) {
        stow_fail(s, 500, "out of memory");
        return -1;
    }
    if (s->cur_failure) {
        in->failure = s->cur_failure;
        drop_part(s);
        return 0;
    }
    int rc = close(s->fd);
    s->fd = -1;
    gj_dicom *d = rc == 0 ? open_part(s->scratch) : NULL;
    if (!d) {
        in->failure = FAIL_CANNOT_UNDERSTAND;
        drop_part(s);
        return 0;
    }
    get_uid(d, GJ_DCM_SOPClassUID, in->sop_class);
    get_uid(d, GJ_DCM_SOPInstanceUID, in->sop_uid);
    get_uid(d, GJ_DCM_StudyInstanceUID, in->study_uid);
    gj_infer_instance_read(d, &in->attrs);
    gj_dicom_free(d);
    unlink(s->scratch);
    if (!in->sop_uid[0] || !in->study_uid[0] || !in->sop_class[0]) {
        in->failure = FAIL_CANNOT_UNDERSTAND;
    } else if (s->study_path[0] && strcmp(s->study_path, in->study_uid) != 0) {
        in->failure = FAIL_NO_MATCH;
    } else {
        for (size_t i = 0; i + 1 < s->n; i++)
            if (!s->inst[i].failure && strcmp(s->inst[i].sop_uid, in->sop_uid) == 0) {
                in->failure = FAIL_DUPLICATE;
                break;
            }
    }
    if (in->failure) {
        drop_part(s);
        return 0;
    }
    in->size = gj_blob_writer_size(s->w);
    rc = gj_blob_writer_commit(s->w, NULL, in->blob_id);
    s->w = NULL;
    if (rc == GJ_BLOB_OVER_QUOTA) {
        char text[300];
        gj_storage_refusal_text(gj_storage_last_refusal(), text, sizeof text);
        s->over_quota = !s->status;
        s->over = *gj_storage_last_refusal();
        stow_fail(s, 507, text);
        return -1;
    }
    if (rc != 0) {
        stow_fail(s, 503, "the database is not available; retry shortly");
        return -1;
    }
    return 0;
}

static const struct gj_mpr_callbacks stow_cb = { part_begin, part_data, part_end };

static void stow_begin(struct gj_req *r)
{
    struct stow *s = calloc(1, sizeof *s);
    if (!s) {
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    s->fd = -1;
    r->state = s;
    if (r->n_params > 0) {
        if (!gj_infer_uid_ok(r->params[0])) {
            gj_problem(r, 400, "study", "the study in the path is not a UID (digits and dots, at most 64)");
            return;
        }
        memcpy(s->study_path, r->params[0], strlen(r->params[0]) + 1);   /* at most 64 */
    }
    const char *ct = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    char type[100], boundary[GJ_MPR_BOUNDARY_MAX + 1];
    const char *why = NULL;
    int trc = ct ? gj_mime_param(ct, "type", type, sizeof type) : 0;
    if (!ct || !gj_mime_type_is(ct, "multipart/related") || trc < 0 ||
        (trc == 1 && !gj_mime_type_is(type, "application/dicom"))) {
        gj_problem(r, 415, "Content-Type",
                   "STOW-RS takes multipart/related; type=\"application/dicom\" (DICOM Part 10 instances)");
        return;
    }
    if (gj_mpr_boundary(ct, boundary, &why) != 0 || !(s->mp = gj_mpr_new(boundary, &stow_cb, r))) {
        gj_problem(r, 400, "Content-Type", "%s", why ? why : "out of memory");
        return;
    }
    gj_mpr_set_max_parts(s->mp, STOW_MAX_INSTANCES);
    const char *model = gj_req_query(r, "model");
    if (!model)
        model = GJ_INFER_DEFAULT_MODEL;
    if (!gj_model_name_ok(model)) {
        gj_problem(r, 400, "model", "model is a model name (letters, digits, '.', '_', '-')");
        return;
    }
    snprintf(s->model, sizeof s->model, "%s", model);
    const char *ver = gj_req_query(r, "version");
    if (ver) {
        char *end;
        long long v = strtoll(ver, &end, 10);
        if (!*ver || *end || v < 1 || v > 999999999) {
            gj_problem(r, 400, "version", "version is a positive integer");
            return;
        }
        s->version = v;
    }
    if (!gj_infer_repo() || !gj_model_repo_has(gj_infer_repo(), s->model)) {
        gj_problem(r, 404, "model", "unknown model '%s' (GET /v1/models lists them)", s->model);
        return;
    }
    if (snprintf(s->scratch, sizeof s->scratch, "%s/stow-%s.dcm", r->srv->cfg.work_dir, r->request_id) >=
        (int)sizeof s->scratch) {
        s->scratch[0] = '\0';
        gj_problem(r, 500, NULL, "the work directory path is too long");
        return;
    }
}

static void stow_abort(struct gj_req *r, struct stow *s)
{
    drop_part(s);
    if (s->in_txn && r->db)
        gj_db_rollback(r->db);
    s->in_txn = 0;
}

/* The answer to a failed STOW: the quota's figures, or the problem stow_fail recorded. */
static void stow_refused(struct gj_req *r, const struct stow *s)
{
    if (s->over_quota)
        gj_respond_over_quota(r, &s->over);
    else
        gj_problem(r, s->status, NULL, "%s", s->msg);
}

static int stow_data(struct gj_req *r, const char *buf, size_t len)
{
    struct stow *s = r->state;
    if (gj_mpr_feed(s->mp, buf, len) == 0)
        return 0;
    if (!s->status) {
        char m[260];
        snprintf(m, sizeof m, "malformed multipart/related body: %s", gj_mpr_error(s->mp));
        stow_fail(s, 400, m);
    }
    stow_abort(r, s);
    stow_refused(r, s);
    return -1;
}

/* One infer job of k instances (idx into s->inst), its inputs dicom, dicom.1, ... owned
 * by it; appended to jobs ({id, url, instances}). 0, or -1 with a response prepared. */
static int create_job(struct gj_req *r, struct stow *s, json_t *params, const size_t *idx, size_t k,
                      json_t *jobs)
{
    const struct gj_kind *kind = gj_kind_find("infer");
    struct gj_input *ins = calloc(k, sizeof *ins);
    struct gj_submit_input *sub = calloc(k, sizeof *sub);
    char(*names)[32] = calloc(k, sizeof *names);
    int rc = -1;
    if (!ins || !sub || !names) {
        gj_problem(r, 500, NULL, "out of memory");
        goto out;
    }
    for (size_t q = 0; q < k; q++) {
        if (q == 0)
            snprintf(names[q], sizeof names[q], "dicom");
        else
            snprintf(names[q], sizeof names[q], "dicom.%zu", q);
        ins[q] = (struct gj_input){ names[q], NULL, s->inst[idx[q]].size };
        sub[q] = (struct gj_submit_input){ names[q], s->inst[idx[q]].blob_id, 1 };
    }
    struct gj_job job = { kind->name, params, ins, k };
    struct gj_error err;
    gj_error_clear(&err);
    if (gj_kind_validate(kind, &job, &err) != 0) {
        int st = err.status >= 400 && err.status < 500 ? err.status : 422;
        gj_problem(r, st, err.field[0] ? err.field : "model", "%s",
                   err.message[0] ? err.message : "the infer job is not valid");
        goto out;
    }
    struct gj_submit req = { .tenant_id = r->who.tenant_id, .kind = kind->name, .params = params,
                             .max_attempts = r->srv->cfg.default_max_attempts, .inputs = sub,
                             .n_inputs = k, .timeout_seconds = r->srv->cfg.job_timeout_seconds };
    struct gj_submitted done;
    if (gj_queue_submit(r->db, &req, &done) != GJ_SUBMIT_OK) {
        gj_respond_unavailable(r);
        goto out;
    }
    char url[80];
    snprintf(url, sizeof url, "/v1/jobs/%s", done.id);
    json_array_append_new(jobs, json_pack("{s:s, s:s, s:I}", "id", done.id, "url", url, "instances", (json_int_t)k));
    rc = 0;
out:
    free(ins);
    free(sub);
    free(names);
    return rc;
}

/* Records each stored instance for the tenant (instances_store.c). One it had already
 * stored is acknowledged with a warning: its new blob goes and it makes no job. 0, or -1
 * (database error). */
static int claim_instances(struct gj_req *r, struct stow *s)
{
    for (size_t i = 0; i < s->n; i++) {
        struct instance *in = &s->inst[i];
        if (in->failure)
            continue;
        int rc = gj_infer_instance_claim(r->db, r->who.tenant_id, in->blob_id, &in->attrs);
        if (rc < 0)
            return -1;
        if (rc == 0) {
            const char *p[1] = { in->blob_id };
            in->warning = WARN_ALREADY_STORED;
            if (gj_db_cmd(r->db, "DELETE FROM blobs WHERE id = $1::uuid", 1, p) != 0)
                return -1;
        }
    }
    return 0;
}

/* The jobs, one per study (split past JOB_MAX_INPUTS), in the request's transaction.
 * 0, or -1 with a response prepared. */
static int create_jobs(struct gj_req *r, struct stow *s, json_t *jobs)
{
    if (!gj_kind_find("infer")) {
        gj_problem(r, 503, NULL, "this server has no infer kind");
        return -1;
    }
    json_t *params = json_pack("{s:s}", "model", s->model);
    if (params && s->version)
        json_object_set_new(params, "version", json_integer(s->version));
    char *done = calloc(s->n ? s->n : 1, 1);
    size_t *idx = calloc(s->n ? s->n : 1, sizeof *idx);
    int rc = params && done && idx ? 0 : -1;
    if (rc)
        gj_problem(r, 500, NULL, "out of memory");
    for (size_t i = 0; rc == 0 && i < s->n; i++) {
        if (done[i] || s->inst[i].failure || s->inst[i].warning)
            continue;
        /* this study's instances, in arrival order */
        size_t m = 0;
        for (size_t j = i; j < s->n; j++)
            if (!done[j] && !s->inst[j].failure && !s->inst[j].warning && strcmp(s->inst[j].study_uid, s->inst[i].study_uid) == 0) {
                done[j] = 1;
                idx[m++] = j;
            }
        for (size_t first = 0; rc == 0 && first < m; first += JOB_MAX_INPUTS)
            rc = create_job(r, s, params, idx + first, m - first < JOB_MAX_INPUTS ? m - first : JOB_MAX_INPUTS,
                            jobs);
    }
    free(done);
    free(idx);
    json_decref(params);
    return rc;
}

/* The instance's Retrieve URL (WADO-RS) in its ReferencedSOPSequence item. */
static void add_instance_url(struct gj_req *r, const struct instance *in, json_t *item)
{
    const char *series = in->attrs.v[GJ_IA_SERIES_UID];
    char base[300], url[600];
    if (!series || gj_dicomweb_base_url(r, base, sizeof base) != 0)
        return;
    snprintf(url, sizeof url, "%s/studies/%s/series/%s/instances/%s", base, in->study_uid, series, in->sop_uid);
    json_object_set_new(item, "00081190", gj_dcm_attr("UR", json_string(url)));
}

/* The Store Instances Response (PS3.18 §10.5.3): RetrieveURL, FailedSOPSequence,
 * ReferencedSOPSequence, and the jobs in a private sequence. */
static json_t *store_response(struct gj_req *r, const struct stow *s, json_t *jobs)
{
    json_t *body = json_object();
    json_t *refs = json_array(), *failed = json_array();
    const char *study_one = NULL;
    int several = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct instance *in = &s->inst[i];
        json_t *item = json_object();
        if (in->sop_class[0])
            json_object_set_new(item, "00081150", gj_dcm_attr("UI", json_string(in->sop_class)));
        if (in->sop_uid[0])
            json_object_set_new(item, "00081155", gj_dcm_attr("UI", json_string(in->sop_uid)));
        if (in->failure) {
            json_object_set_new(item, "00081197", gj_dcm_attr("US", json_integer(in->failure)));
            json_array_append_new(failed, item);
            continue;
        }
        if (in->warning)
            json_object_set_new(item, "00081196", gj_dcm_attr("US", json_integer(in->warning)));
        add_instance_url(r, in, item);
        json_array_append_new(refs, item);
        if (!study_one)
            study_one = in->study_uid;
        else if (strcmp(study_one, in->study_uid) != 0)
            several = 1;
    }
    const char *study_url = s->study_path[0] ? s->study_path : (!several ? study_one : NULL);
    char base[300];
    if (study_url && gj_dicomweb_base_url(r, base, sizeof base) == 0) {
        char url[400];
        snprintf(url, sizeof url, "%s/studies/%s", base, study_url);
        json_object_set_new(body, "00081190", gj_dcm_attr("UR", json_string(url)));
    }
    json_object_set_new(body, "00081198", gj_dcm_attr("SQ", failed));
    json_object_set_new(body, "00081199", gj_dcm_attr("SQ", refs));
    if (!json_array_size(failed))
        json_object_del(body, "00081198");
    if (!json_array_size(refs))
        json_object_del(body, "00081199");
    json_t *items = json_array();
    size_t i;
    json_t *j;
    json_array_foreach(jobs, i, j) {
        json_array_append_new(items,
                              json_pack("{s:o, s:o}", "00091011",
                                        gj_dcm_attr("UR", json_string(json_string_value(json_object_get(j, "url")))),
                                        "00091012",
                                        gj_dcm_attr("LO", json_string(json_string_value(json_object_get(j, "id"))))));
    }
    if (json_array_size(items)) {
        json_object_set_new(body, "00090010", gj_dcm_attr("LO", json_string("GPUJOBD")));
        json_object_set_new(body, "00091010", gj_dcm_attr("SQ", items));
    } else {
        json_decref(items);
    }
    return body;
}

/* One Link header, its links comma-separated (RFC 8288): the jobs created. */
static void add_job_links(struct MHD_Response *resp, json_t *jobs)
{
    char *links = NULL;
    size_t links_len = 0, i;
    json_t *j;
    FILE *lf = json_array_size(jobs) ? open_memstream(&links, &links_len) : NULL;
    json_array_foreach(jobs, i, j) {
        if (lf)
            fprintf(lf, "%s<%s>; rel=\"related\"; title=\"infer job\"", i ? ", " : "",
                    json_string_value(json_object_get(j, "url")));
    }
    if (lf && fclose(lf) == 0 && links)
        MHD_add_response_header(resp, "Link", links);
    free(links);
}

static void respond_stored(struct gj_req *r, const struct stow *s, size_t stored, size_t warned, json_t *jobs)
{
    json_t *body = store_response(r, s, jobs);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    size_t len = strlen(text);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/dicom+json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    add_job_links(resp, jobs);
    gj_respond(r, stored == s->n && !warned ? 200 : stored == 0 ? 409 : 202, resp, len);
}

static void stow_handle(struct gj_req *r)
{
    struct stow *s = r->state;
    if (!s->status && gj_mpr_finish(s->mp) != 0) {
        char m[260];
        snprintf(m, sizeof m, "malformed multipart/related body: %s", gj_mpr_error(s->mp));
        stow_fail(s, 400, m);
    }
    if (!s->status && s->n == 0)
        stow_fail(s, 400, "the body holds no DICOM instance");
    if (s->status) {
        stow_abort(r, s);
        stow_refused(r, s);
        return;
    }
    size_t stored = 0;
    for (size_t i = 0; i < s->n; i++)
        stored += s->inst[i].failure == 0;
    json_t *jobs = json_array();
    if (stored > 0) {
        if (claim_instances(r, s) != 0 || create_jobs(r, s, jobs) != 0 || gj_db_commit(r->db) != 0) {
            if (!r->response)
                gj_respond_unavailable(r);
            stow_abort(r, s);
            json_decref(jobs);
            return;
        }
    } else {
        gj_db_rollback(r->db);
    }
    s->in_txn = 0;
    size_t warned = 0;
    for (size_t i = 0; i < s->n; i++)
        warned += s->inst[i].warning != 0;
    gj_log_info(COMPONENT, "STOW: %zu instance(s), %zu stored, %zu already stored, %zu job(s), model %s", s->n,
                stored - warned, warned, json_array_size(jobs), s->model);
    respond_stored(r, s, stored, warned, jobs);
    json_decref(jobs);
}

static void stow_done(struct gj_req *r, int ok)
{
    (void)ok;
    struct stow *s = r->state;
    if (!s)
        return;
    if (r->db) {
        stow_abort(r, s);
    } else {
        s->w = NULL;             /* the connection went with its transaction */
        drop_part(s);
    }
    if (s->mp)
        gj_mpr_free(s->mp);
    for (size_t i = 0; i < s->n; i++)
        gj_infer_instance_clear(&s->inst[i].attrs);
    free(s->inst);
    free(s);
    r->state = NULL;
}

static const struct gj_route stow_routes[] = {
    { "POST", "/dicomweb/studies", GJ_AUTH_USER, GJ_BODY_UPLOAD, stow_begin, stow_data, stow_handle, stow_done },
    { "POST", "/dicomweb/studies/{study}", GJ_AUTH_USER, GJ_BODY_UPLOAD, stow_begin, stow_data, stow_handle,
      stow_done },
};
const struct gj_route_table gj_infer_routes_dicomweb = { stow_routes, sizeof stow_routes / sizeof stow_routes[0] };
