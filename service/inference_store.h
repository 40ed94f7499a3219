/*
 * inference_store.h — the service side of the inference module: the model
 * repository the API manages (DATA_DIR/models, seeded with the shipped demo
 * model), the pseudonymisation secret, and the inference_results table that
 * succeeded `infer` jobs fill (migrations/0002_inference.sql).
 *
 * Pseudonymisation: a study is known only by HMAC-SHA256(secret, Study
 * Instance UID) and an image by HMAC-SHA256(secret, SOP Instance UID), as 64
 * lower-case hex digits. The secret is 32 random bytes made at the first start
 * and kept in server_secrets (every replica reads the same one), unless
 * GPUJOBD_PSEUDONYM_SECRET gives one (at least 32 characters). No patient
 * name, patient id or UID is stored or logged by this module.
 */
#ifndef GJ_INFERENCE_STORE_H
#define GJ_INFERENCE_STORE_H

#include <stddef.h>
#include <libpq-fe.h>

#include "infer/serving/model_repo.h"
#include "service/queue.h"
#include "service/server.h"

#define GJ_INFER_DEFAULT_MODEL "chest-xray-demo"

/* At start-up, after the database is prepared and before any thread starts:
 * sets GPUJOBD_MODELS_DIR to DATA_DIR/models (unless already set), creates it
 * and seeds it with the demo model when absent, loads the pseudonymisation
 * secret, and opens the repository. 0, or -1 with a log line. */
int gj_inference_init(struct gj_server *srv);

/* The repository the API lists and manages (NULL before init). Model
 * directories are changed (upload, delete) only under gj_inference_repo_lock. */
gj_model_repo *gj_inference_repo(void);
const char *gj_inference_models_dir(void);
void gj_inference_repo_lock(void);
void gj_inference_repo_unlock(void);

/* The devices ("cpu", "gpu:0", ...) on which a model version has a batcher in this
 * process (compute/infer/serving/batcher.h), as a JSON array; NULL on allocation failure. */
json_t *gj_inference_devices_json(const char *name, int64_t version);

/* HMAC-SHA256 of text under the server secret, as lower-case hex. 0 or -1. */
int gj_inference_key(const char *text, char hex[65]);

/* Called by gj_queue_finish_success for a job of kind "infer", inside the
 * transaction that marks it succeeded (so the results and the state commit
 * together): reads output_dir/result.json and inserts one inference_results
 * row per image. The acquisition time is read from the job's input files when
 * they are still at output_dir/../inputs/NAME (the worker's layout), else it
 * is NULL. 0 (also when result.json is missing or unusable: logged, the job
 * still succeeds), or -1 on a database error (the transaction is lost). */
int gj_inference_on_job_succeeded(PGconn *conn, const struct gj_claim *c, const char *output_dir);

/* DICOM DA/TM/DT values to "YYYY-MM-DD HH:MM:SS[.ffffff]" (no zone): from dt
 * (DT) when given, else date (DA) and time (TM, may be NULL: midnight). 0, or
 * -1 when they are not valid. */
int gj_dicom_datetime_text(const char *dt, const char *date, const char *time, char out[32]);

/* Route tables (listed in http_server.c's route_tables[]). */
#include "service/http_server.h"
extern const struct gj_route gj_routes_models[];
extern const size_t gj_routes_models_count;
extern const struct gj_route gj_routes_dicomweb[];
extern const size_t gj_routes_dicomweb_count;
extern const struct gj_route gj_routes_inference[];
extern const size_t gj_routes_inference_count;

#endif
