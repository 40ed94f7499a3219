/*
 * model_cache.h — the model files on this host: DATA_DIR/model-cache/<digest>/, one
 * directory per version content (model_store.h's digest) holding that version's files.
 * A directory is fetched from the store's large objects into a temporary name and renamed
 * into place once every file's size and SHA-256 match the store; one already there is
 * checked the same way the first time this process uses it (a mismatch is fetched again).
 * Uploads are staged here too (.upload-*): a stored upload is adopted by a rename.
 * Thread-safe.
 */
#ifndef GJ_INFER_MODEL_CACHE_H
#define GJ_INFER_MODEL_CACHE_H

#include <libpq-fe.h>

#include "common/fsutil.h"
#include "common/gj_error.h"
#include "service/infer/model_store.h"

/* Creates DATA_DIR/model-cache and removes what a process that died left (.tmp-*,
 * .upload-*). 0, or -1 (logged). */
int gj_model_cache_open(const char *data_dir);
const char *gj_model_cache_root(void);

/* The directory holding version v's files here (dir: GJ_PATH_MAX bytes), fetching them
 * over conn (idle) when missing or not matching. 0, or -1 with err. */
int gj_model_cache_get(PGconn *conn, const struct gj_ms_version *v, char *dir, struct gj_error *err);

/* A new staging directory for an upload: root/.upload-<tag> (tag: a request id), with
 * files/ inside for the version's files. 0, or -1 (logged). */
int gj_model_cache_stage(const char *tag, char *dir);
/* Loads the staged version (staged/files/model.onnx) with its config text, the check an
 * upload passes before it is stored. 0, or -1 with err (status 422) saying why it does
 * not load. */
int gj_model_cache_check_staged(const char *staged, const char *config, size_t len, const char *name,
                                int64_t version, struct gj_error *err);
/* Moves staged/files into place as the version of this digest (its files were read to
 * make the digest: they are not checked again), then removes staged. 0 or -1. */
int gj_model_cache_adopt(const char *staged, const char *digest);

/* Removes the cached versions no version of the snapshot has. */
void gj_model_cache_prune(const struct gj_ms_snapshot *keep);

#endif
