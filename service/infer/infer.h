/*
 * infer.h — the service half of the inference module (service/infer/), shared by its
 * files; nothing outside service/infer/ includes it (the service reaches the module
 * through gj_module_infer, module.h).
 *
 *   module.c         the module: the model repository (declared from the shared model
 *                    store) handed to the `infer` kind (compute/infer/serving/
 *                    serving_host.h), its seed directory (--models-dir, default
 *                    DATA_DIR/models, with the shipped demo model), start and stop
 *   model_store.c    the model store every replica shares, in PostgreSQL (model_store.h)
 *   model_seeds.c    the seed directory imported into it, each version once
 *   model_seeds_poll.c  ... and read again in poll mode (model_seeds.h)
 *   model_control.c  --model-control-mode (on-use, none, explicit, poll), --load-model, and the
 *                    explicit load and unload of /v1/models and /v2/repository (model_control.h)
 *   infer_repo.c     the process's model repository (infer_repo.h)
 *   model_cache.c    the model files on this host, by content (model_cache.h)
 *   model_sync.c     this replica converging to the store (model_sync.h)
 *   models_view.c    what /v1/models shows
 *   pseudonym.c      the pseudonymisation secret and keys
 *   dicomweb_common.c DICOM JSON, Retrieve URLs, Accept negotiation
 *   routes_qido.c    QIDO-RS (search)
 *   routes_wado_metadata.c  WADO-RS metadata (every attribute, dicom_json.c)
 *   dicom_json.c     a parsed instance as DICOM JSON (PS3.18 F.2)
 *   routes_wado.c    WADO-RS retrieve (multipart/related application/dicom)
 *   routes_wado_render.c  WADO-RS rendered (JPEG, PNG) and frames
 *   render_budget.c  an instance opened within --render-memory (render_budget.h); its first
 *                    frame for the portal's thumbnails in render_frame.c (render_frame.h)
 *   gpu_accounting.c, grpc_listen.c, run_host.c  what the module brings through module.h
 *                    (module_parts.h): the placement as its batchers' GPU accounting, the
 *                    gRPC listener, the model repository of `gpujobd run`
 *   instances_store.c the instances each tenant stored by STOW-RS, with their searchable
 *                    attributes (migrations/0008_dicom_instances.sql)
 *   results_store.c  what a succeeded `infer` job records: inference_results rows
 *                    (migrations/0002_inference.sql)
 *   reports_store.c  its Structured Reports (result.dcm, ...) stored as the tenant's
 *                    instances
 *   delivery.c       the reports sent by STOW-RS to --results-dicomweb-url, retried
 *                    (migrations/0011_report_deliveries.sql)
 *   routes_deliveries.c  GET /v1/jobs/{id}/deliveries
 *   routes_models.c  /v1/models          routes_dicomweb.c  /dicomweb (STOW-RS)
 *   routes_results.c /v1/inference-results
 *   routes_oip.c     /v2 (Open Inference Protocol, Triton's REST dialect): health, metadata
 *   routes_oip_infer.c  /v2 infer; oip_metrics.c the batchers' statistics as Prometheus text
 *   routes_oip_repository.c  /v2 model config, repository index, load, unload
 *   routes_oip_stats.c  /v2 statistics    routes_oip_trace.c, routes_oip_logging.c  /v2 settings
 *   routes_oip_shm.c    /v2 shared-memory extensions (not supported: Triton's errors)
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

#include "infer/dicom.h"
#include "infer/serving/model_repo.h"
#include "service/http/http_server.h"
#include "service/infer/infer_repo.h"      /* gj_infer_repo */
#include "service/infer/model_control.h"   /* load, unload, the control mode */
#include "service/jobs/queue.h"
#include "service/server.h"

#define GJ_INFER_DEFAULT_MODEL "chest-xray-demo"

/* ---- the repository (module.c) ---- */


/* /v1/models's view (models_view.c): {"models": [...], "default_model", "generation",
 * "converged", "replicas"}, or with `only` that one model's entry (NULL when it is not
 * there). conn: a connection for the replicas' reports (NULL: without them). */
json_t *gj_infer_models_view(PGconn *conn, const char *only);


/* ---- pseudonyms (pseudonym.c) ---- */

/* Reads --pseudonym-secret, or the secret in server_secrets (made at the first start).
 * 0, or -1 with a log line. */
int gj_infer_pseudonym_init(const struct gj_server *srv);
/* HMAC-SHA256 of text under the server secret, as lower-case hex. 0 or -1. */
int gj_infer_key(const char *text, char hex[65]);

/* ---- stored instances (instances_store.c) ---- */

/* The attributes kept for each stored instance (the columns of dicom_instances). */
enum gj_infer_attr {
    GJ_IA_STUDY_UID, GJ_IA_SERIES_UID, GJ_IA_SOP_UID, GJ_IA_SOP_CLASS, GJ_IA_TRANSFER_SYNTAX,
    GJ_IA_PATIENT_ID, GJ_IA_PATIENT_NAME, GJ_IA_PATIENT_BIRTH_DATE, GJ_IA_PATIENT_SEX,
    GJ_IA_ACCESSION, GJ_IA_STUDY_DATE, GJ_IA_STUDY_TIME, GJ_IA_STUDY_ID, GJ_IA_STUDY_DESCRIPTION,
    GJ_IA_REFERRING_PHYSICIAN, GJ_IA_MODALITY, GJ_IA_SERIES_NUMBER, GJ_IA_SERIES_DESCRIPTION,
    GJ_IA_INSTANCE_NUMBER, GJ_IA_ROWS, GJ_IA_COLUMNS, GJ_IA_FRAMES,
    GJ_IA_COUNT
};

/* One instance's attributes as text (NULL: absent, or not valid for its kind: a UID
 * that is not digits and dots, an integer out of range). Owns its strings. */
struct gj_infer_instance {
    char *v[GJ_IA_COUNT];
};

/* 1 when s is a UID: 1 to 64 digits and dots. */
int gj_infer_uid_ok(const char *s);
/* Reads the attributes of d into in (which the caller clears). 0. */
int gj_infer_instance_read(const gj_dicom *d, struct gj_infer_instance *in);
void gj_infer_instance_clear(struct gj_infer_instance *in);
/* The dicom_instances column of an attribute. */
const char *gj_infer_instance_column(enum gj_infer_attr a);
/* Records the instance (in blob_id) as stored for the tenant, inside the caller's
 * transaction: 1 claimed, 0 when the tenant already stored this SOP Instance UID
 * (nothing written), -1 on a database error. */
int gj_infer_instance_claim(PGconn *conn, const char *tenant_id, const char *blob_id,
                            const struct gj_infer_instance *in);

/* ---- DICOMweb (dicomweb_common.c) ---- */

/* A DICOM JSON attribute {"vr": vr, "Value": [...]} (value consumed: an array is the
 * Value, anything else its one element; NULL: no Value). */
json_t *gj_dcm_attr(const char *vr, json_t *value);
/* "https://HOST/dicomweb" from the request's Host header: 0, or -1 (no usable Host). */
int gj_dicomweb_base_url(struct gj_req *r, char *buf, size_t size);
/* The first of types (NULL-terminated, preferred first) the request's Accept header
 * takes (no Accept: types[0]); NULL when it takes none (answer 406). */
const char *gj_dicomweb_negotiate(struct gj_req *r, const char *const *types);
/* 1 when the request's Accept takes type (no Accept: yes) and, for type_param not NULL,
 * no other "type" parameter (multipart/related; type="application/dicom"). */
int gj_dicomweb_accepts(struct gj_req *r, const char *type, const char *type_param);
/* A 200 with list (consumed) as the negotiated JSON type, not cached; NULL on failure. */
struct MHD_Response *gj_dicomweb_respond_json(struct gj_req *r, json_t *list, const char *type);
/* The tenant's instances under the request's path (study [, series [, instance]], UIDs
 * checked by the caller): rows (lo_oid, size) in storage order, at most max + 1 (so the
 * caller sees there were more). NULL on a database error. */
PGresult *gj_dicomweb_instances_under(struct gj_req *r, PGconn *c, int max);
/* 1 when every UID of the request's path is one (digits and dots, at most 64); else 0 with
 * a 400 prepared. */
int gj_dicomweb_path_uids_ok(struct gj_req *r);
/* gj_dicomweb_instances_under with the answers WADO-RS gives: NULL with a response
 * prepared when there is none (404), more than max (413, the message saying what to ask
 * for instead: narrower) or the database failed (503). */
PGresult *gj_dicomweb_find_instances(struct gj_req *r, PGconn *c, int max, const char *narrower);

/* Every attribute of the instance as a DICOM JSON object (dicom_json.c, PS3.18 F.2):
 * file meta group, group lengths and bulk data (Pixel Data, binary values over 1 KiB)
 * left out. NULL when out of memory. */
json_t *gj_dicom_to_json(const gj_dicom *d);
/* 1 when the instance's text is ISO_IR 100 (Latin-1), by its Specific Character Set. */
int gj_dicom_latin1(const gj_dicom *d);
/* n bytes of an instance's text as UTF-8 (malloc'd, NUL-terminated): Latin-1 converted
 * when latin1, else what is not UTF-8 (another character set) as '?'; NULL when out of
 * memory. PostgreSQL and JSON take only UTF-8. */
char *gj_dicom_text_utf8(int latin1, const char *s, size_t n);

/* ---- results (results_store.c) ---- */

/* The module's on_job_succeeded for `infer` jobs (module.h), inside the transaction that
 * marks the job succeeded: reads output_dir/result.json (and nothing else: the kind
 * writes there all the table needs, the acquisition time included) and inserts one
 * inference_results row per image. With purge_phi (--infer-purge-phi) the job's own DICOM
 * inputs are deleted and result.json keeps keys instead of UIDs. 0 (also when
 * result.json is missing or unusable: logged, the job still succeeds), or -1 on a
 * database error or a result.json that could not be rewritten (the transaction is lost). */
int gj_infer_store_results(PGconn *conn, const struct gj_claim *c, const char *output_dir);
/* Inside that transaction: each report of result.json's "reports" stored as an instance
 * of the tenant (a blob the job owns, a dicom_instances row), for QIDO-RS and WADO-RS.
 * 0, or -1 on a database error. */
int gj_infer_store_reports(PGconn *conn, const struct gj_claim *c, const char *output_dir, json_t *result);
void gj_infer_set_purge_phi(int on);

/* ---- delivery of the reports (delivery.c) ---- */

/* Starts the delivery thread when --results-dicomweb-url is set (else nothing). 0 or -1. */
int gj_infer_delivery_start(const struct gj_server *srv);
/* Stops it (an attempt in flight is abandoned and tried again later). */
void gj_infer_delivery_stop(void);
/* 1 when reports are delivered (the thread runs). */
int gj_infer_delivery_enabled(void);
/* Records a pending delivery of the report instance blob_id, the job's output named
 * output_name, inside the caller's transaction. 0 or -1. */
int gj_infer_delivery_add(PGconn *conn, const char *job_id, const char *blob_id, const char *output_name);

/* ---- routes ---- */

extern const struct gj_route_table gj_infer_routes_models;
extern const struct gj_route_table gj_infer_routes_dicomweb;
extern const struct gj_route_table gj_infer_routes_qido;
extern const struct gj_route_table gj_infer_routes_wado;
extern const struct gj_route_table gj_infer_routes_wado_metadata;
extern const struct gj_route_table gj_infer_routes_wado_render;
extern const struct gj_route_table gj_infer_routes_results;
extern const struct gj_route_table gj_infer_routes_deliveries;
extern const struct gj_route_table gj_infer_routes_oip;
/* Triton's extensions on /v2 (routes_oip_*.c): listed before gj_infer_routes_oip, whose
 * /v2/models/{name} would match /v2/models/stats first. */
extern const struct gj_route_table gj_infer_routes_oip_repository;
extern const struct gj_route_table gj_infer_routes_oip_stats;
extern const struct gj_route_table gj_infer_routes_oip_trace;
extern const struct gj_route_table gj_infer_routes_oip_logging;
extern const struct gj_route_table gj_infer_routes_oip_shm;
/* Triton's GRPCInferenceService over the same internals (grpc_oip.c; grpc_server.h). */
struct gj_grpc_methods;
extern const struct gj_grpc_methods gj_infer_grpc_methods;
/* The batchers' statistics as Prometheus text (oip_metrics.c); with on, under Triton's
 * names (nv_inference_*) too (--triton-metrics). */
void gj_infer_write_metrics(FILE *f);
void gj_infer_set_triton_metrics(int on);

#endif
