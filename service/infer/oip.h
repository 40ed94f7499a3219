/*
 * oip.h — what the /v2 (Open Inference Protocol) route files share: the {"error": "..."}
 * answer and the lookup of the model a path names. Private to service/infer.
 */
#ifndef GJ_OIP_H
#define GJ_OIP_H

#include <stdint.h>

#include "infer/serving/model_repo.h"
#include "service/http/http_server.h"

/* Answers {"error": message} with status (429 and 503 with Retry-After: 1). */
void oip_error(struct gj_req *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Sets err to status and the formatted message; returns -1 (for functions both the /v2
 * routes and gRPC call, which answer err each their way). */
int oip_refuse(struct gj_error *err, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A model version as a request names it (a path parameter, a gRPC field): "" or NULL the
 * default (0), else a positive integer of at most 18 digits; -1: anything else. */
int64_t oip_parse_version(const char *s);
/* The server's own error bodies under /v2 (gj_http_error_body): {"error": detail}. */
char *oip_error_body(int status, const char *detail);
/* The repository and the version params[1] asks for (0: the default); on failure answers
 * the request and returns NULL. */
gj_model_repo *oip_requested(struct gj_req *r, int64_t *version);
/* Answers a failed lookup: 404 unknown, 400 not ready (unloaded), 503 a load that failed. */
void oip_lookup_failed(struct gj_req *r, int64_t version, const struct gj_error *err);
/* The requested model version for an inference request: loaded on first use, never when
 * an admin unloaded it (a new reference in *out). On failure answers and returns -1. */
int oip_use_model(struct gj_req *r, gj_served_model **out);

/* A Triton load request's "file:<version>/<name>" parameters (base64) stored as versions
 * of the model in the shared store (made when new, with config), each checked by loading
 * it with config first (oip_load_files.c). 0, or -1 with err: 400 (a bad parameter),
 * 409 (a version exists with other files), 422 (it does not load), 503, 507. */
int oip_store_load_files(PGconn *conn, const char *model, const char *config, json_t *params,
                         const char *request_id, struct gj_error *err);

/* Ready as /v2/health/ready and gRPC's ServerReady answer: started, not stopping, with a
 * repository. */
struct gj_server;
int oip_server_ready(const struct gj_server *srv);

/* The config a model's metadata describes: the loaded version's (its tensors completed from
 * the model file), else the repository's, read without loading it. */
struct oip_md_source {
    gj_served_model *m;                 /* held while cfg points into it */
    struct gj_model_config copy;
    const struct gj_model_config *cfg;
};
/* 0, or -1 with err (404 unknown, 400 unloaded, else not ready). */
int oip_md_source_get(gj_model_repo *repo, const char *name, int64_t version, struct oip_md_source *src,
                      struct gj_error *err);
void oip_md_source_free(struct oip_md_source *src);

/* Triton's statistics of a model (name NULL: every model; version 0: every version):
 * {"model_stats": [...]}, or NULL with err (404 unknown, 500). routes_oip_stats.c. */
json_t *oip_model_stats_json(gj_model_repo *repo, const char *name, int64_t version, struct gj_error *err);

/* Triton's repository index of this replica: [{name, version, state, reason}] (ready_only:
 * the ready ones), or NULL with err (503). routes_oip_repository.c. */
json_t *oip_repository_index(int ready_only, struct gj_error *err);
/* Triton's load and unload of a model (params: the request's parameters object, may be
 * NULL): 0, or -1 with err (status and Triton's wording: "failed to load 'm', ..."). */
int oip_repository_load(PGconn *conn, const char *name, json_t *params, const char *request_id,
                        struct gj_error *err);
int oip_repository_unload(PGconn *conn, const char *name, json_t *params, struct gj_error *err);

/* Triton's trace settings (routes_oip_trace.c): model's (NULL: the global ones) after
 * applying update (a JSON object as POST's body; NULL: only read), or NULL with err. The
 * model must be in the repository (400). */
json_t *oip_trace_setting(const char *model, const json_t *update, struct gj_error *err);
/* Triton's log settings (routes_oip_logging.c) after applying update (NULL: only read), or
 * NULL with err; via names the transport in the log line a change writes. */
json_t *oip_log_settings(const json_t *update, const char *via, struct gj_error *err);

/* Triton's shared-memory extension as a server without it answers (routes_oip_shm.c):
 * status of every region (name NULL or ""): 0, none; of a region: -1, 404 "Unable to
 * find ..."; register: always -1 with Triton's 400. Unregister always succeeds. */
int oip_shm_status(int cuda, const char *name, struct gj_error *err);
int oip_shm_register(int cuda, const char *name, struct gj_error *err);

/* An inference request's parameters as Triton takes them (routes_oip_infer.c): timeout
 * (microseconds in the queue; 0 none), priority and the sequence fields (accepted, no
 * effect), binary_data_output, any other string, integer or boolean (ignored). 0, or -1
 * with err (400). binary_default may be NULL. */
int oip_check_parameters(const json_t *params, int64_t *timeout_us, int *binary_default, struct gj_error *err);

/* POST /v2/models/{name}[/versions/{version}]/infer (routes_oip_infer.c). */
void oip_infer_begin(struct gj_req *r);
int oip_infer_data(struct gj_req *r, const char *data, size_t len);
void oip_infer_handle(struct gj_req *r);
void oip_infer_done(struct gj_req *r, int ok);

#endif
