/*
 * routes_models.c — the model repository over HTTP. The repository is the one every
 * replica shares (model_store.h, in PostgreSQL): a change through any replica reaches all
 * of them within seconds (model_sync.h), and each answer below comes once this replica
 * has applied it.
 *
 *   GET    /v1/models                                every model, its versions, what is
 *                                                    desired of each, where each is loaded
 *                                                    (models_view.c), and whether every
 *                                                    replica has applied the last change
 *   PUT    /v1/models/{name}/versions/{version}      admin: multipart/form-data with parts
 *          "model" (model.onnx) and "config" (config.json, or Triton's config.pbtxt when
 *          the part's filename ends in .pbtxt, stored as the JSON it converts to; required
 *          for a new model)
 *   POST   /v1/models/{name}/load[?version=N]        admin: loaded by every replica that runs
 *                                                    models, and kept loaded
 *   POST   /v1/models/{name}/unload[?version=N]      admin: served by none until loaded again
 *   DELETE /v1/models/{name}/versions/{version}      admin
 *
 * An upload is spooled while it arrives (upload_spool.h), then written into a staging
 * directory of the model cache, checked by loading
 * it (config against the model, a trial session), and stored only when it loads: a bad
 * model or config is refused with the reason (422) and leaves nothing behind. Versions
 * are immutable: a version that exists is refused (409); delete it first.
 *
 * On a replica that runs models, loading also places the model: its batcher is created on
 * the device its instance_group asks for (a GPU's memory reserved in this replica's
 * accounting), so a model that cannot run here is refused at load (503) with the reason.
 * Unloading and deleting stop the version's batchers on every replica, which frees that
 * memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "infer/serving/model_pbtxt.h"
#include "service/http/http_server.h"
#include "service/infer/infer.h"
#include "service/infer/model_control.h"
#include "service/infer/model_cache.h"
#include "service/infer/model_store.h"
#include "service/infer/model_sync.h"
#include "service/base/log.h"
#include "service/http/multipart_related.h"

#define COMPONENT "models"

static gj_model_repo *repo_or_503(struct gj_req *r)
{
    gj_model_repo *repo = gj_infer_repo();
    if (!repo)
        gj_problem(r, 503, NULL, "the model repository is not available");
    return repo;
}

static void respond_model(struct gj_req *r, int status, const char *name)
{
    json_t *m = gj_infer_models_view(gj_req_db(r), name);
    if (!m)
        gj_problem(r, 404, NULL, "model '%s' is gone", name);
    else
        gj_respond_json(r, status, m);
}

/* GET /v1/models */
static void models_list(struct gj_req *r)
{
    if (!repo_or_503(r))
        return;
    PGconn *conn = gj_req_db(r);
    if (!conn) {
        gj_respond_unavailable(r);
        return;
    }
    json_t *body = gj_infer_models_view(conn, NULL);
    if (!body)
        gj_problem(r, 500, NULL, "out of memory");
    else
        gj_respond_json(r, 200, body);
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

/* The model and connection of a /v1 load or unload (?version= in *v); answers and
 * returns NULL when there are none. */
static PGconn *v1_target(struct gj_req *r, int64_t *v)
{
    if (!repo_or_503(r) || query_version(r, v))
        return NULL;
    if (!gj_model_name_ok(r->params[0])) {
        gj_respond_not_found(r);
        return NULL;
    }
    PGconn *conn = gj_req_db(r);
    if (!conn)
        gj_respond_unavailable(r);
    return conn;
}

/* A failed /v1 load or unload, answered as problem+json. */
static void v1_failed(struct gj_req *r, const struct gj_error *err)
{
    const char *name = r->params[0];
    if (err->status == 404) {
        gj_respond_not_found(r);
    } else if (err->status == 503 && !err->field[0]) {
        gj_respond_unavailable(r);
    } else if (err->status == 503) {
        struct MHD_Response *resp = gj_problem(r, 503, err->field, "model '%s' cannot be placed on a device: %s",
                                               name, err->message);
        if (resp && err->transient)
            MHD_add_response_header(resp, "Retry-After", "5");
    } else if (err->status == 422) {
        gj_problem(r, 422, "model", "model '%s' cannot be loaded: %s", name, err->message);
    } else {
        gj_problem(r, err->status, err->field, "%s", err->message);
    }
}

/* POST /v1/models/{name}/load and /unload: act is gj_infer_model_load or _unload. */
static void load_or_unload(struct gj_req *r,
                           int (*act)(PGconn *, const char *, int64_t, int64_t *, struct gj_error *))
{
    int64_t v = 0;
    PGconn *conn = v1_target(r, &v);
    struct gj_error err = { 0 };
    if (!conn)
        return;
    if (act(conn, r->params[0], v, &v, &err) != 0)
        v1_failed(r, &err);
    else
        respond_model(r, 200, r->params[0]);
}

static void model_load(struct gj_req *r)
{
    load_or_unload(r, gj_infer_model_load);
}

static void model_unload(struct gj_req *r)
{
    load_or_unload(r, gj_infer_model_unload);
}

/* DELETE /v1/models/{name}/versions/{version} */
static void version_delete(struct gj_req *r)
{
    const char *name = r->params[0];
    int64_t v;
    if (!repo_or_503(r))
        return;
    if (!gj_model_name_ok(name) || parse_version(r->params[1], &v) != 0) {
        gj_respond_not_found(r);
        return;
    }
    PGconn *conn = gj_req_db(r);
    if (!conn) {
        gj_respond_unavailable(r);
        return;
    }
    int found = gj_model_store_delete_version(conn, name, v);
    if (found <= 0) {
        if (found == 0)
            gj_respond_not_found(r);
        else
            gj_problem(r, 500, NULL, "the version could not be deleted");
        return;
    }
    gj_infer_model_apply();
    gj_log_info(COMPONENT, "model %s version %" PRId64 " deleted", name, v);
    gj_respond_empty(r, 204);
}

/* ---------- PUT /v1/models/{name}/versions/{version} ---------- */

enum part_kind { PART_NONE, PART_MODEL, PART_CONFIG };

struct upload {
    struct gj_req *r;
    struct gj_mpr *mp;
    char name[GJ_MODEL_NAME_MAX];
    int64_t version;
    char stage[GJ_PATH_MAX];     /* model cache/.upload-<request id>: config.json, files/ */
    int fd;
    enum part_kind cur;
    int have_model, have_config;
    int config_pbtxt;            /* the config part is a config.pbtxt (its filename says so) */
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

/* The staging directory (gj_model_cache_stage), made with the first part: the body is
 * complete by then (it was spooled while it arrived), so a slow client leaves no
 * directory behind even if the server dies meanwhile. 0, or -1 with u failed. */
static int stage_create(struct upload *u)
{
    if (u->stage[0])
        return 0;
    if (gj_model_cache_stage(u->r->request_id, u->stage) != 0) {
        u->stage[0] = '\0';
        up_fail(u, 500, NULL, "the upload could not be staged");
        return -1;
    }
    return 0;
}

static int part_begin(void *ud, const struct gj_mpr_part *part)
{
    struct upload *u = ud;
    if (stage_create(u) != 0)
        return -1;
    const char *disp = gj_mpr_header(part, "Content-Disposition");
    char pname[64];
    if (!disp || !gj_mime_type_is(disp, "form-data") || gj_mime_param(disp, "name", pname, sizeof pname) != 1) {
        up_fail(u, 400, NULL, "each part needs Content-Disposition: form-data; name=\"model\" or \"config\"");
        return -1;
    }
    char path[GJ_PATH_MAX + 32];
    if (strcmp(pname, "model") == 0) {
        if (u->have_model) {
            up_fail(u, 422, "model", "the model part is given twice");
            return -1;
        }
        u->have_model = 1;
        u->cur = PART_MODEL;
        snprintf(path, sizeof path, "%s/files/model.onnx", u->stage);
    } else if (strcmp(pname, "config") == 0) {
        if (u->have_config) {
            up_fail(u, 422, "config", "the config part is given twice");
            return -1;
        }
        u->have_config = 1;
        u->cur = PART_CONFIG;
        char fname[256];
        size_t fl = gj_mime_param(disp, "filename", fname, sizeof fname) == 1 ? strlen(fname) : 0;
        u->config_pbtxt = fl >= 6 && strcmp(fname + fl - 6, ".pbtxt") == 0;
        snprintf(path, sizeof path, "%s/config.json", u->stage);
    } else {
        up_fail(u, 422, pname, "unknown part: the parts are \"model\" (model.onnx) and \"config\" (config.json, or config.pbtxt by its filename)");
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
    const char *why = NULL;
    if (!ct || !gj_mime_type_is(ct, "multipart/form-data")) {
        gj_problem(r, 415, "Content-Type",
                   "upload a model as multipart/form-data with parts \"model\" (model.onnx) and \"config\" (config.json)");
        return;
    }
    if (gj_mpr_boundary(ct, boundary, &why) != 0 || !(u->mp = gj_mpr_new(boundary, &up_cb, u))) {
        gj_problem(r, 400, "Content-Type", "%s", why ? why : "out of memory");
        return;
    }
    gj_mpr_set_max_parts(u->mp, 4);
    if (gj_infer_model_known(gj_infer_repo(), u->name, u->version))
        gj_problem(r, 409, "version", "model '%s' version %lld exists; versions are immutable (DELETE it first)",
                   u->name, (long long)u->version);
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
    if (gj_mpr_feed(u->mp, buf, len) == 0)
        return 0;
    if (!u->status)
        up_fail(u, 400, NULL, gj_mpr_error(u->mp));
    /* The staging directory goes before the answer is prepared: the client may look at
     * the repository as soon as it reads the answer, before upload_done runs (after the
     * response is sent). */
    stage_drop(u);
    gj_problem(r, u->status, u->field, "%s", u->msg);
    return -1;
}

/* A config part sent as config.pbtxt (Triton's text format): stored as the JSON it
 * converts to (model_pbtxt.h), refused with the line and column when it does not. */
static int upload_pbtxt(struct upload *u, char **text, size_t *len)
{
    struct gj_error err = { 0 };
    char *json = gj_model_pbtxt_to_json_text(*text, *len, &err);
    free(*text);
    *text = json;
    if (!json) {
        up_fail(u, 422, "config", err.message);
        return -1;
    }
    *len = strlen(json);
    return 0;
}

/* The config an upload is checked with and stored as: its own config part, else (an
 * existing model) the model's. 0, or -1 with the failure in u. *is_new: the model is new. */
static int upload_config(struct upload *u, PGconn *conn, char **text, size_t *len, int *is_new)
{
    char *stored = NULL;
    int found = gj_model_store_model_config(conn, u->name, &stored);
    *text = NULL;
    *is_new = found == 0;
    if (found < 0) {
        up_fail(u, 503, NULL, "the database is not available");
        return -1;
    }
    if (!u->have_config && !found) {
        up_fail(u, 422, "config", "a new model needs a \"config\" part (config.json)");
        return -1;
    }
    if (!u->have_config) {
        *text = stored;
        *len = strlen(stored);
        return 0;
    }
    free(stored);
    char path[GJ_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/config.json", u->stage);
    if (gj_read_file(path, GJ_MODEL_CONFIG_MAX_BYTES, text, len) != 0) {
        up_fail(u, 500, NULL, "the upload could not be staged");
        return -1;
    }
    return u->config_pbtxt ? upload_pbtxt(u, text, len) : 0;
}

/* Loads the staged model with its config: refused (422) with the reason when it does not. */
static int upload_check(struct upload *u, const char *config, size_t len)
{
    struct gj_error err = { 0 };
    if (gj_model_cache_check_staged(u->stage, config, len, u->name, u->version, &err) == 0)
        return 0;
    char msg[700];
    snprintf(msg, sizeof msg, "the model was refused: %s", err.message[0] ? err.message : "it does not load");
    up_fail(u, 422, err.field[0] ? err.field : "model", msg);
    return -1;
}

/* Stores the checked upload (model_store.h) and adopts its files into the cache. */
static int upload_store(struct upload *u, PGconn *conn, const char *config, int is_new)
{
    char onnx[GJ_PATH_MAX + 32], digest[65];
    snprintf(onnx, sizeof onnx, "%s/files/model.onnx", u->stage);
    const struct gj_ms_new_file file = { "model.onnx", onnx };
    struct gj_error err = { 0 };
    if (gj_model_store_add_version(conn, u->name, u->version, is_new ? config : NULL,
                                   is_new || !u->have_config ? NULL : config, &file, 1, digest, &err) != 0) {
        up_fail(u, err.status ? err.status : 500, err.field, err.message);
        return -1;
    }
    gj_model_cache_adopt(u->stage, digest);   /* its files are fetched instead when this fails */
    u->stage[0] = '\0';
    return 0;
}

static void upload_handle(struct gj_req *r)
{
    struct upload *u = r->state;
    if (!u->status && gj_mpr_finish(u->mp) != 0)
        up_fail(u, 400, NULL, gj_mpr_error(u->mp));
    if (!u->status && !u->have_model)
        up_fail(u, 422, "model", "the \"model\" part (model.onnx) is missing");
    PGconn *conn = u->status ? NULL : gj_req_db(r);
    if (!u->status && !conn)
        up_fail(u, 503, NULL, "the database is not available");
    char *config = NULL;
    size_t len = 0;
    int is_new = 0;
    if (!u->status && upload_config(u, conn, &config, &len, &is_new) == 0 && upload_check(u, config, len) == 0)
        upload_store(u, conn, config, is_new);
    free(config);
    if (u->status) {
        stage_drop(u);
        struct MHD_Response *resp = gj_problem(r, u->status, u->field, "%s", u->msg);
        if (resp && u->status == 503)
            MHD_add_response_header(resp, "Retry-After", "1");
        return;
    }
    gj_infer_model_apply();
    gj_log_info(COMPONENT, "model %s version %" PRId64 " uploaded", u->name, u->version);
    json_t *m = gj_infer_models_view(conn, u->name);
    struct MHD_Response *resp = gj_respond_json(r, 201, m ? m : json_pack("{s:s}", "name", u->name));
    if (resp && r->status == 201) {
        char loc[300];
        snprintf(loc, sizeof loc, "/v1/models/%s/versions/%" PRId64, u->name, u->version);
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
    { "PUT", "/v1/models/{name}/versions/{version}", GJ_AUTH_ADMIN, GJ_BODY_UPLOAD, upload_begin, upload_data,
      upload_handle, upload_done },
    { "DELETE", "/v1/models/{name}/versions/{version}", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, version_delete,
      NULL },
    { "POST", "/v1/models/{name}/load", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, model_load, NULL },
    { "POST", "/v1/models/{name}/unload", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, model_unload, NULL },
};
const struct gj_route_table gj_infer_routes_models = { model_routes, sizeof model_routes / sizeof model_routes[0] };
