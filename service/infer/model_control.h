/*
 * model_control.h — which models are loaded, as Triton's model control: the mode
 * (--model-control-mode, --load-model) applied at start and, in poll mode, the seed
 * directory read again; and the explicit load and unload that /v1/models and
 * /v2/repository ask for, recorded as desired states in the shared store (model_store.h)
 * that every replica converges to (model_sync.h).
 */
#ifndef GJ_MODEL_CONTROL_H
#define GJ_MODEL_CONTROL_H

#include <stdint.h>
#include <libpq-fe.h>

#include "common/gj_error.h"
#include "infer/serving/model_repo.h"

struct gj_server;

/* --model-control-mode: "on-use" (the default), "none", "explicit" or "poll", as Triton's
 * (model_control.c says what each does here). Routes refuse load and unload as Triton does. */
const char *gj_infer_model_control(void);
/* Applies the mode at start, after the seed import and before the repository's first
 * pass: the loads it asks for recorded in the store; in poll mode the polling thread
 * started. 0, or -1 (logged). */
int gj_infer_model_control_start(const struct gj_server *srv, const char *seed_dir);
/* Stops polling. */
void gj_infer_model_control_stop(void);

/* ---- explicit load and unload ---- */

/* Loads a version (version 0: the model's default) on every replica that runs models and
 * keeps it loaded; on this one it is placed before the answer. *v_out: the version. 0, or
 * -1 with err: status 404 (no such model or version), 409 (outside its version_policy),
 * 422 (it does not load: err.message says why), 503 (the database, with err.field ""; or
 * it cannot be placed on a device, err.transient when it may fit later). */
int gj_infer_model_load(PGconn *conn, const char *name, int64_t version, int64_t *v_out, struct gj_error *err);
/* Unloads a version everywhere (its batchers and their memory freed). 0, or -1 with err:
 * 404, 409 (unloaded already), 503 (the database). */
int gj_infer_model_unload(PGconn *conn, const char *name, int64_t version, int64_t *v_out,
                          struct gj_error *err);

/* 1 when the repository has the model and, for v > 0, that version. */
int gj_infer_model_known(gj_model_repo *repo, const char *name, int64_t v);
/* Waits (a bounded time) until this replica has applied what it just changed in the
 * store, so an answer reflects it; a warning is logged when it could not. */
void gj_infer_model_apply(void);

#endif
