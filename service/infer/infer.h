/*
 * infer.h — the service half of the inference module (service/infer/), shared by its
 * files; nothing outside service/infer/ includes it (the service reaches the module
 * through gj_module_infer, module.h).
 *
 *   module.c         the module: the model repository the API manages (--models-dir,
 *                    default DATA_DIR/models, seeded with the shipped demo model) handed
 *                    to the `infer` kind (compute/infer/serving/serving_host.h), the
 *                    batchers' metrics, start and stop
 *   pseudonym.c      the pseudonymisation secret and keys
 *   results_store.c  what a succeeded `infer` job records: inference_results rows
 *                    (migrations/0002_inference.sql)
 *   routes_models.c  /v1/models          routes_dicomweb.c  /dicomweb (STOW-RS)
 *   routes_results.c /v1/inference-results
 *   routes_oip.c     /v2 (Open Inference Protocol, Triton's REST dialect)
 *
 * Pseudonymisation: a study is known only by HMAC-SHA256(secret, Study Instance UID)
 * and an image by HMAC-SHA256(secret, SOP Instance UID), as 64 lower-case hex digits.
 * The secret is 32 random bytes made at the first start and kept in server_secrets
 * (every replica reads the same one), unless --pseudonym-secret gives one (32 to 512
 * characters). No patient name, patient id or UID is stored or logged by this module.
 */
#ifndef GJ_SERVICE_INFER_H
#define GJ_SERVICE_INFER_H

#include <stdio.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "infer/serving/model_repo.h"
#include "service/http_server.h"
#include "service/queue.h"
#include "service/server.h"

#define GJ_INFER_DEFAULT_MODEL "chest-xray-demo"

/* ---- the repository (module.c) ---- */

/* The repository the API lists and manages and `infer` jobs use (NULL before init).
 * Model directories are changed (upload, delete) only under gj_infer_repo_lock. */
gj_model_repo *gj_infer_repo(void);
const char *gj_infer_models_dir(void);
void gj_infer_repo_lock(void);
void gj_infer_repo_unlock(void);

/* The devices ("cpu", "gpu:0", ...) on which a model version has a batcher in this
 * process (compute/infer/serving/batcher.h), as a JSON array; NULL on allocation failure. */
json_t *gj_infer_devices_json(const char *name, int64_t version);

/* ---- pseudonyms (pseudonym.c) ---- */

/* Reads --pseudonym-secret, or the secret in server_secrets (made at the first start).
 * 0, or -1 with a log line. */
int gj_infer_pseudonym_init(const struct gj_server *srv);
/* HMAC-SHA256 of text under the server secret, as lower-case hex. 0 or -1. */
int gj_infer_key(const char *text, char hex[65]);

/* ---- results (results_store.c) ---- */

/* The module's on_job_succeeded for `infer` jobs (module.h), inside the transaction that
 * marks the job succeeded: reads output_dir/result.json (and nothing else: the kind
 * writes there all the table needs, the acquisition time included) and inserts one
 * inference_results row per image. With purge_phi (--infer-purge-phi) the job's own DICOM
 * inputs are deleted and result.json keeps keys instead of UIDs. 0 (also when
 * result.json is missing or unusable: logged, the job still succeeds), or -1 on a
 * database error or a result.json that could not be rewritten (the transaction is lost). */
int gj_infer_store_results(PGconn *conn, const struct gj_claim *c, const char *output_dir);
void gj_infer_set_purge_phi(int on);

/* ---- routes ---- */

extern const struct gj_route_table gj_infer_routes_models;
extern const struct gj_route_table gj_infer_routes_dicomweb;
extern const struct gj_route_table gj_infer_routes_results;
extern const struct gj_route_table gj_infer_routes_oip;
/* The batchers' statistics as Prometheus text (routes_oip.c). */
void gj_infer_write_metrics(FILE *f);

#endif
