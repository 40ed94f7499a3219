/*
 * routes_models.c — the model repository over HTTP (DATA_DIR/models, see
 * compute/infer/serving/model_repo.h):
 *
 *   GET    /v1/models                                every model, its versions, their state and
 *                                                    the devices they are loaded on
 *   PUT    /v1/models/{name}/versions/{version}      admin: multipart/form-data with parts
 *          "model" (model.onnx) and "config" (config.json; required for a new model)
 *   POST   /v1/models/{name}/load[?version=N]        admin
 *   POST   /v1/models/{name}/unload[?version=N]      admin
 *   DELETE /v1/models/{name}/versions/{version}      admin
 *
 * An upload is streamed into a hidden staging directory of the repository,
 * checked by loading it (config against the model, a trial session), and
 * renamed into place only when it loads: a bad model or config is refused
 * with the reason (422) and leaves nothing behind. Versions are immutable: a
 * version that exists is refused (409); delete it first.
 *
 * Loading also places the model: its batcher is created on the device its
 * instance_group asks for (a GPU's memory reserved), so a model that cannot run
 * here is refused at load (503) with the reason. Unloading and deleting stop the
 * version's batchers, which frees that memory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "infer/serving/batcher.h"
#include "service/http_server.h"
#include "service/infer/infer.h"
#include "service/log.h"
#include "service/multipart_related.h"

#define COMPONENT "models"

static const char *state_label(const char *repo_state)
{
    if (strcmp(repo_state, "READY") == 0)
        return "loaded";
    if (strcmp(repo_state, "FAILED") == 0)
        return "failed";
    return "unloaded";
}

/* The repository's description with states as loaded / unloaded / failed, and the
 * devices each version has a batcher on. */
static json_t *describe(gj_model_repo *repo)
{
    json_t *arr = gj_model_repo_describe(repo);
    size_t i, j;
    json_t *m, *v;
    json_array_foreach(arr, i, m) {
        const char *name = json_string_value(json_object_get(m, "name"));
        json_array_foreach(json_object_get(m, "versions"), j, v) {
            const char *s = json_string_value(json_object_get(v, "state"));
            if (s)
                json_object_set_new(v, "state", json_string(state_label(s)));
            json_int_t ver = json_integer_value(json_object_get(v, "version"));
            json_object_set_new(v, "devices", gj_infer_devices_json(name, (int64_t)ver));
        }
    }
    return arr;
}

static json_t *describe_one(gj_model_repo *repo, const char *name)
{
    json_t *arr = describe(repo);
    size_t i;
    json_t *m;
    json_array_foreach(arr, i, m) {
        if (strcmp(json_string_value(json_object_get(m, "name")), name) == 0) {
            json_incref(m);
            json_decref(arr);
            return m;
        }
    }
    json_decref(arr);
    return NULL;
}

static gj_model_repo *repo_or_503(struct gj_req *r)
{
    gj_model_repo *repo = gj_infer_repo();
    if (!repo)
        gj_problem(r, 503, NULL, "the model repository is not available");
    return repo;
}

static void rescan(gj_model_repo *repo)
{
    struct gj_error err = { 0 };
    if (gj_model_repo_scan(repo, &err) != 0)
        gj_log_warn(COMPONENT, "model repository scan: %s", err.message);
}

/* GET /v1/models */
static void models_list(struct gj_req *r)
{
    gj_model_repo *repo = repo_or_503(r);
    if (!repo)
        return;
    rescan(repo);
    json_t *arr = describe(repo);
    if (!arr) {
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    gj_respond_json(r, 200, json_pack("{s:o, s:s}", "models", arr, "default_model", GJ_INFER_DEFAULT_MODEL));
}

static int parse_version(const char *s, int64_t *v)
{
    if (!s || !*s || strlen(s) > 9)
        return -1;
    int64_t x = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        x = x * 10 + (*p - '0');
    }
    if (x < 1 || s[0] == '0')
        return -1;
    *v = x;
    return 0;
}

/* ?version= of load / unload: 0 when absent (the default version). */
static int query_version(struct gj_req *r, int64_t *v)
{
    const char *q = gj_req_query(r, "version");
    *v = 0;
    if (!q)
        return 0;
    if (parse_version(q, v) != 0) {
        gj_problem(r, 400, "version", "version is a positive integer");
        return -1;
    }
    return 0;
}

/* 1 when the model is in the repository and, for v > 0, has that version. */
static int model_known(gj_model_repo *repo, const char *name, int64_t v)
{
    size_t n = 0;
    struct gj_error err = { 0 };
    struct gj_model_version_info *vs = calloc(GJ_MODEL_MAX_VERSIONS, sizeof *vs);
    int found = vs && gj_model_repo_versions(repo, name, vs, GJ_MODEL_MAX_VERSIONS, &n, &err) == 0;
    if (found && v > 0) {
        found = 0;
        for (size_t i = 0; i < n && i < GJ_MODEL_MAX_VERSIONS; i++)
            found |= vs[i].version == v;
    }
    free(vs);
    return found;
}

/* POST /v1/models/{name}/load */
static void model_load(struct gj_req *r)
{
    const char *name = r->params[0];
    int64_t v;
    gj_model_repo *repo = repo_or_503(r);
    if (!repo || query_version(r, &v))
        return;
    if (!gj_model_name_ok(name)) {
        gj_respond_not_found(r);
        return;
    }
    rescan(repo);
    if (!model_known(repo, name, v)) {
        gj_respond_not_found(r);
        return;
    }
    gj_served_model *sm = NULL;
    struct gj_error err = { 0 };
    if (gj_model_repo_load(repo, name, v, &sm, &err) != 0) {
        gj_problem(r, 422, "model", "model '%s' cannot be loaded: %s", name, err.message);
        return;
    }
    /* Placed on its device now (GPU memory reserved), as Triton loads instances. */
    gj_batcher *b = gj_batcher_acquire(sm, &err);
    if (!b) {
        gj_model_repo_fail(repo, name, gj_served_model_version(sm), err.message);
        gj_served_model_release(sm);
        struct MHD_Response *resp = gj_problem(r, 503, err.field[0] ? err.field : "model",
                                               "model '%s' cannot be placed on a device: %s",
                                               name, err.message);
        if (resp && err.transient)
            MHD_add_response_header(resp, "Retry-After", "5");
        return;
    }
    int device = gj_batcher_device(b);
    gj_batcher_release(b);   /* the registry keeps it until unload */
    gj_served_model_release(sm);
    if (device >= 0)
        gj_log_info(COMPONENT, "model %s loaded on GPU %d", name, device);
    else
        gj_log_info(COMPONENT, "model %s loaded on the CPU", name);
    gj_respond_json(r, 200, describe_one(repo, name));
}

/* POST /v1/models/{name}/unload */
static void model_unload(struct gj_req *r)
{
    const char *name = r->params[0];
    int64_t v;
    gj_model_repo *repo = repo_or_503(r);
    if (!repo || query_version(r, &v))
        return;
    if (!gj_model_name_ok(name)) {
        gj_respond_not_found(r);
        return;
    }
    rescan(repo);
    if (!model_known(repo, name, v)) {
        gj_respond_not_found(r);
        return;
    }
    struct gj_error err = { 0 };
    int64_t resolved = gj_model_repo_resolve(repo, name, v, &err);
    if (gj_model_repo_unload(repo, name, v, &err) != 0) {
        gj_problem(r, 409, "version", "%s", err.message[0] ? err.message : "the model is not loaded");
        return;
    }
    if (resolved > 0)
        gj_batcher_registry_drop(name, resolved);   /* its device memory goes with it */
    gj_log_info(COMPONENT, "model %s unloaded", name);
    gj_respond_json(r, 200, describe_one(repo, name));
}

/* DELETE /v1/models/{name}/versions/{version} */
static void version_delete(struct gj_req *r)
{
    const char *name = r->params[0];
    int64_t v;
    gj_model_repo *repo = repo_or_503(r);
    if (!repo)
        return;
    if (!gj_model_name_ok(name) || parse_version(r->params[1], &v) != 0) {
        gj_respond_not_found(r);
        return;
    }
    char mdir[1300], vdir[1400], trash[1400];
    snprintf(mdir, sizeof mdir, "%s/%s", gj_infer_models_dir(), name);
    snprintf(vdir, sizeof vdir, "%s/%lld", mdir, (long long)v);
    snprintf(trash, sizeof trash, "%s/.delete-%s", gj_infer_models_dir(), r->request_id);
    gj_infer_repo_lock();
    struct stat st;
    if (stat(vdir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        gj_infer_repo_unlock();
        gj_respond_not_found(r);
        return;
    }
    struct gj_error err = { 0 };
    gj_model_repo_unload(repo, name, v, &err);   /* not loaded: fine */
    gj_batcher_registry_drop(name, v);
    /* the version goes at once (rename), its files after */
    int rc = rename(vdir, trash);
    int left = 0;
    if (rc == 0) {
        DIR *d = opendir(mdir);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            char *end;
            long x = strtol(e->d_name, &end, 10);
            if (x > 0 && !*end)
                left++;
        }
        if (d)
            closedir(d);
    }
    gj_infer_repo_unlock();
    if (rc != 0) {
        gj_log_error(COMPONENT, "delete %s version %lld: %s", name, (long long)v, strerror(errno));
        gj_problem(r, 500, NULL, "the version could not be deleted");
        return;
    }
    gj_rm_rf(trash);
    if (left == 0) {   /* the last version: the model goes with it */
        char mtrash[1400];
        snprintf(mtrash, sizeof mtrash, "%s/.delete-%s-m", gj_infer_models_dir(), r->request_id);
        gj_infer_repo_lock();
        if (rename(mdir, mtrash) == 0) {
            gj_infer_repo_unlock();
            gj_rm_rf(mtrash);
        } else {
            gj_infer_repo_unlock();
        }
    }
    rescan(repo);
    gj_log_info(COMPONENT, "model %s version %lld deleted", name, (long long)v);
    gj_respond_empty(r, 204);
}

/* ---------- PUT /v1/models/{name}/versions/{version} ---------- */

enum part_kind { PART_NONE, PART_MODEL, PART_CONFIG };

struct upload {
    struct gj_req *r;
    struct gj_mpr *mp;
    char name[GJ_MODEL_NAME_MAX];
    int64_t version;
    char stage[1400];            /* models_dir/.upload-<request id> */
    char vdir[1500];             /* stage/<version> */
    int fd;
    enum part_kind cur;
    int have_model, have_config;
    uint64_t bytes;
    int status;
    char field[160];
    char msg[800];
};

static void up_fail(struct upload *u, int status, const char *field, const char *msg)
{
    if (u->status)
        return;
    u->status = status;
    snprintf(u->field, sizeof u->field, "%s", field ? field : "");
    snprintf(u->msg, sizeof u->msg, "%s", msg);
}

static int part_begin(void *ud, const struct gj_mpr_part *part)
{
    struct upload *u = ud;
    const char *disp = gj_mpr_header(part, "Content-Disposition");
    char pname[64];
    if (!disp || !gj_mime_type_is(disp, "form-data") || gj_mime_param(disp, "name", pname, sizeof pname) != 1) {
        up_fail(u, 400, NULL, "each part needs Content-Disposition: form-data; name=\"model\" or \"config\"");
        return -1;
    }
    char path[1700];
    if (strcmp(pname, "model") == 0) {
        if (u->have_model) {
            up_fail(u, 422, "model", "the model part is given twice");
            return -1;
        }
        u->have_model = 1;
        u->cur = PART_MODEL;
        snprintf(path, sizeof path, "%s/model.onnx", u->vdir);
    } else if (strcmp(pname, "config") == 0) {
        if (u->have_config) {
            up_fail(u, 422, "config", "the config part is given twice");
            return -1;
        }
        u->have_config = 1;
        u->cur = PART_CONFIG;
        snprintf(path, sizeof path, "%s/config.json", u->vdir);
    } else {
        up_fail(u, 422, pname, "unknown part: the parts are \"model\" (model.onnx) and \"config\" (config.json)");
        return -1;
    }
    u->bytes = 0;
    u->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (u->fd < 0) {
        gj_log_error(COMPONENT, "upload: %s: %s", path, strerror(errno));
        up_fail(u, 500, NULL, "the upload could not be staged");
        return -1;
    }
    return 0;
}

static int part_data(void *ud, const char *data, size_t len)
{
    struct upload *u = ud;
    u->bytes += len;
    if (u->cur == PART_CONFIG && u->bytes > GJ_MODEL_CONFIG_MAX_BYTES) {
        up_fail(u, 413, "config", "config.json is over 1 MiB");
        return -1;
    }
    while (len) {
        ssize_t w = write(u->fd, data, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            gj_log_error(COMPONENT, "upload: write: %s", strerror(errno));
            up_fail(u, 507, NULL, "the upload could not be stored (disk full?)");
            return -1;
        }
        data += w;
        len -= (size_t)w;
    }
    return 0;
}

static int part_end(void *ud)
{
    struct upload *u = ud;
    int rc = close(u->fd);
    u->fd = -1;
    if (rc != 0) {
        up_fail(u, 507, NULL, "the upload could not be stored");
        return -1;
    }
    u->cur = PART_NONE;
    return 0;
}

static const struct gj_mpr_callbacks up_cb = { part_begin, part_data, part_end };

static void upload_begin(struct gj_req *r)
{
    struct upload *u = calloc(1, sizeof *u);
    if (!u) {
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    u->fd = -1;
    u->r = r;
    r->state = u;
    if (!gj_infer_repo()) {
        gj_problem(r, 503, NULL, "the model repository is not available");
        return;
    }
    if (!gj_model_name_ok(r->params[0])) {
        gj_problem(r, 422, "name", "a model name is 1 to 127 letters, digits, '.', '_' or '-', not starting with '.'");
        return;
    }
    snprintf(u->name, sizeof u->name, "%.127s", r->params[0]);
    if (parse_version(r->params[1], &u->version) != 0) {
        gj_problem(r, 422, "version", "a version is a positive integer (no leading zero)");
        return;
    }
    const char *ct = gj_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    char boundary[GJ_MPR_BOUNDARY_MAX + 1];
    if (!ct || !gj_mime_type_is(ct, "multipart/form-data")) {
        gj_problem(r, 415, "Content-Type",
                   "upload a model as multipart/form-data with parts \"model\" (model.onnx) and \"config\" (config.json)");
        return;
    }
    if (gj_mime_param(ct, "boundary", boundary, sizeof boundary) != 1 ||
        !(u->mp = gj_mpr_new(boundary, &up_cb, u))) {
        gj_problem(r, 400, "Content-Type", "multipart/form-data needs a valid boundary");
        return;
    }
    gj_mpr_set_max_parts(u->mp, 4);
    char vdir[1400];
    struct stat st;
    snprintf(vdir, sizeof vdir, "%s/%s/%lld", gj_infer_models_dir(), u->name, (long long)u->version);
    if (stat(vdir, &st) == 0) {
        gj_problem(r, 409, "version", "model '%s' version %lld exists; versions are immutable (DELETE it first)",
                   u->name, (long long)u->version);
        return;
    }
    if (gj_req_upload_slot(r) != 0) {
        struct MHD_Response *resp = gj_problem(r, 503, NULL, "too many uploads in progress; retry shortly");
        if (resp)
            MHD_add_response_header(resp, "Retry-After", "1");
        return;
    }
    snprintf(u->stage, sizeof u->stage, "%s/.upload-%s", gj_infer_models_dir(), r->request_id);
    snprintf(u->vdir, sizeof u->vdir, "%s/%lld", u->stage, (long long)u->version);
    if (gj_mkdir_p(u->vdir, 0755) != 0) {
        gj_log_error(COMPONENT, "upload: %s: %s", u->vdir, strerror(errno));
        u->stage[0] = '\0';
        gj_problem(r, 500, NULL, "the upload could not be staged");
        return;
    }
    r->body_mode = GJ_BODY_STREAM;
}

static void stage_drop(struct upload *u)
{
    if (u->fd >= 0) {
        close(u->fd);
        u->fd = -1;
    }
    if (u->stage[0]) {
        gj_rm_rf(u->stage);
        u->stage[0] = '\0';
    }
}

static int upload_data(struct gj_req *r, const char *buf, size_t len)
{
    struct upload *u = r->state;
    if (r->body_bytes > r->srv->cfg.max_body_bytes) {
        up_fail(u, 413, NULL, "the upload is over the size limit");
    } else if (gj_mpr_feed(u->mp, buf, len) == 0) {
        return 0;
    }
    if (!u->status)
        up_fail(u, 400, NULL, gj_mpr_error(u->mp));
    /* The staging directory goes before the answer is prepared: the client may look at
     * the repository as soon as it reads the answer, before upload_done runs (after the
     * response is sent). */
    stage_drop(u);
    gj_problem(r, u->status, u->field, "%s", u->msg);
    return -1;
}

static void upload_handle(struct gj_req *r)
{
    struct upload *u = r->state;
    if (!u->status && gj_mpr_finish(u->mp) != 0)
        up_fail(u, 400, NULL, gj_mpr_error(u->mp));
    if (!u->status && !u->have_model)
        up_fail(u, 422, "model", "the \"model\" part (model.onnx) is missing");
    char mdir[1300], cfg_dst[1500], path[1600];
    snprintf(mdir, sizeof mdir, "%s/%s", gj_infer_models_dir(), u->name);
    struct stat st;
    int new_model = stat(mdir, &st) != 0;
    if (!u->status && new_model && !u->have_config)
        up_fail(u, 422, "config", "a new model needs a \"config\" part (config.json)");
    if (u->status) {
        stage_drop(u);
        gj_problem(r, u->status, u->field, "%s", u->msg);
        return;
    }
    /* Layout to check: a new model's config is the model's; an existing model's
     * uploaded config is this version's own, else the model's is borrowed. */
    if (new_model) {
        snprintf(path, sizeof path, "%s/config.json", u->vdir);
        snprintf(cfg_dst, sizeof cfg_dst, "%s/config.json", u->stage);
        if (rename(path, cfg_dst) != 0)
            up_fail(u, 500, NULL, "the upload could not be staged");
    } else if (!u->have_config) {
        char *text = NULL;
        size_t len = 0;
        snprintf(path, sizeof path, "%s/config.json", mdir);
        snprintf(cfg_dst, sizeof cfg_dst, "%s/config.json", u->stage);
        if (gj_read_file(path, GJ_MODEL_CONFIG_MAX_BYTES, &text, &len) != 0 || gj_write_file(cfg_dst, text, len) != 0)
            up_fail(u, 422, "config", "the model has no config.json of its own: upload a \"config\" part");
        free(text);
    }
    struct gj_error err = { 0 };
    gj_served_model *sm = u->status ? NULL : gj_served_model_load(u->stage, u->name, u->version, &err);
    if (!u->status && !sm) {
        char msg[700];
        snprintf(msg, sizeof msg, "the model was refused: %s", err.message[0] ? err.message : "it does not load");
        up_fail(u, 422, err.field[0] ? err.field : "model", msg);
    }
    if (sm)
        gj_served_model_release(sm);
    if (u->status) {
        stage_drop(u);
        gj_problem(r, u->status, u->field, "%s", u->msg);
        return;
    }
    /* into place, atomically: the whole model, or the one version */
    char vdst[1500];
    snprintf(vdst, sizeof vdst, "%s/%lld", mdir, (long long)u->version);
    gj_infer_repo_lock();
    int rc;
    if (new_model) {
        rc = rename(u->stage, mdir);
        if (rc == 0)
            u->stage[0] = '\0';
    } else {
        rc = stat(vdst, &st) == 0 ? (errno = EEXIST, -1) : rename(u->vdir, vdst);
    }
    int e = errno;
    gj_infer_repo_unlock();
    if (rc != 0) {
        stage_drop(u);
        if (e == EEXIST || e == ENOTEMPTY)
            gj_problem(r, 409, "version", "model '%s' version %lld was created meanwhile", u->name,
                       (long long)u->version);
        else
            gj_problem(r, 500, NULL, "the model could not be put in place");
        return;
    }
    stage_drop(u);
    gj_model_repo *repo = gj_infer_repo();
    rescan(repo);
    gj_log_info(COMPONENT, "model %s version %lld uploaded", u->name, (long long)u->version);
    struct MHD_Response *resp = gj_respond_json(r, 201, describe_one(repo, u->name));
    if (resp && r->status == 201) {
        char loc[300];
        snprintf(loc, sizeof loc, "/v1/models/%s/versions/%lld", u->name, (long long)u->version);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, loc);
    }
}

static void upload_done(struct gj_req *r, int ok)
{
    (void)ok;
    struct upload *u = r->state;
    if (!u)
        return;
    stage_drop(u);
    if (u->mp)
        gj_mpr_free(u->mp);
    free(u);
    r->state = NULL;
}

static const struct gj_route model_routes[] = {
    { "GET", "/v1/models", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, models_list, NULL },
    { "PUT", "/v1/models/{name}/versions/{version}", GJ_AUTH_ADMIN, GJ_BODY_STREAM, upload_begin, upload_data,
      upload_handle, upload_done },
    { "DELETE", "/v1/models/{name}/versions/{version}", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, version_delete,
      NULL },
    { "POST", "/v1/models/{name}/load", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, model_load, NULL },
    { "POST", "/v1/models/{name}/unload", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, model_unload, NULL },
};
const struct gj_route_table gj_infer_routes_models = { model_routes, sizeof model_routes / sizeof model_routes[0] };
