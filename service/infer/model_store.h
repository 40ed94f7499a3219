/*
 * model_store.h — the model repository every replica shares, in PostgreSQL
 * (migrations/0005_model_store.sql):
 *
 *   model_store             one row: generation, moved by every change of the desired state
 *   models                  name, config (config.json text, as given)
 *   model_versions          model, version, config (its own config.json text, or NULL),
 *                           digest (of its files: the cache key), desired ('available' |
 *                           'loaded' | 'unloaded'), requested_at (moves with every load or
 *                           unload asked)
 *   model_files             model, version, path, size, sha256, and where its bytes are: lo_oid
 *                           (a large object) or s3_key (an object of the store, 0021)
 *   model_seeds             the seed versions imported once (a deleted one stays deleted)
 *   model_replicas          replica (host:pid:start), role, serving, generation applied,
 *                           seen_at (its heartbeat)
 *   model_replica_versions  replica, model, version, state ('available' | 'loaded' |
 *                           'failed' | 'unloaded'), reason, devices (["cpu", "gpu:0"...])
 *
 * Every insert, update or delete of models or model_versions moves the generation and
 * sends NOTIFY gpujobd_models with the model's name (trigger gj_models_changed): "the
 * desired state changed". This file is the SQL only; model_cache.h keeps the files on this
 * host, model_sync.h makes this replica converge.
 *
 * Functions take a connection outside any transaction (each runs its own) and log database
 * errors; none keeps a pointer to what it is given.
 */
#ifndef GJ_INFER_MODEL_STORE_H
#define GJ_INFER_MODEL_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "common/gj_error.h"
#include "infer/serving/model_repo.h"

/* A replica not seen for this long is gone: the listing leaves it out. */
#define GJ_MODEL_REPLICA_LIVE_S 30
/* ... and after this long its rows are deleted by the others. */
#define GJ_MODEL_REPLICA_FORGET_S 600
#define GJ_MODEL_MAX_FILES 64            /* files of one version */
#define GJ_MODEL_FILE_NAME_MAX 129       /* a file's path in its version, NUL included */

enum gj_model_desired { GJ_DESIRED_AVAILABLE = 0, GJ_DESIRED_LOADED, GJ_DESIRED_UNLOADED };
/* "available", "loaded", "unloaded". */
const char *gj_model_desired_name(enum gj_model_desired d);

struct gj_ms_file {
    char path[GJ_MODEL_FILE_NAME_MAX];   /* its name in the version: model.onnx, labels.txt */
    uint64_t size;
    char sha256[65];
    unsigned int lo_oid;          /* 0 for an object of the store */
    char s3_key[128];             /* "" for a large object */
};

struct gj_ms_version {
    int64_t version;
    char *config;                 /* its own config.json text, or NULL: the model's */
    char digest[65];
    enum gj_model_desired desired;
    char requested_at[40];        /* text of a timestamptz: compared for equality only */
    struct gj_ms_file *files;
    size_t n_files;
};

struct gj_ms_model {
    char name[GJ_MODEL_NAME_MAX];
    char *config;                 /* config.json text */
    struct gj_ms_version *versions;   /* ascending */
    size_t n_versions;
};

/* The desired state as of one moment. */
struct gj_ms_snapshot {
    int64_t generation;
    struct gj_ms_model *models;   /* by name */
    size_t n_models;
};

/* Reads the whole desired state in one REPEATABLE READ transaction. 0, or -1 (logged;
 * *out is empty). Free with gj_model_store_snapshot_free. */
int gj_model_store_read(PGconn *conn, struct gj_ms_snapshot *out);
void gj_model_store_snapshot_free(struct gj_ms_snapshot *s);
const struct gj_ms_model *gj_model_store_find(const struct gj_ms_snapshot *s, const char *name);

/* A version's digest: the SHA-256 of "path NUL sha256-hex LF" for each file in byte order
 * of path, as 64 hex digits. Files are sorted in place. */
void gj_model_store_digest(struct gj_ms_file *files, size_t n, char hex[65]);

/* 1 when p is a file name a version may hold: 1 to 128 letters, digits, '.', '_' or '-',
 * not starting with '.' or '-' (no directories). */
int gj_model_store_file_name_ok(const char *p);

/* A file of a version to add: its name in the version and where it is on this host. */
struct gj_ms_new_file {
    const char *path;
    const char *local;
};

/* Adds version `version` of model `name` in one transaction: its files stored where new blobs
 * go (gj_blob_import_file: objects of the store, or large objects; sizes and SHA-256 taken here), its digest. model_config non-NULL: the model is
 * new and this is its config.json (it must not exist: 409); NULL: the model exists (404
 * otherwise). version_config: the version's own config.json, or NULL. 0 with
 * digest_out, or -1 with err (status 409 the version or model exists, 404 no such model,
 * 422 a bad file name or too many files, 500 the database or a file, 503 the object store did
 * not answer): nothing stored. */
int gj_model_store_add_version(PGconn *conn, const char *name, int64_t version,
                               const char *model_config, const char *version_config,
                               const struct gj_ms_new_file *files, size_t n, char digest_out[65],
                               struct gj_error *err);
/* The model's config.json text (caller frees). 1 found, 0 no such model, -1 error. */
int gj_model_store_model_config(PGconn *conn, const char *name, char **config);
/* Sets a version's desired state and moves its requested_at (a new request even when the
 * state is the same). *before (may be NULL): the state it had. 1 done, 0 no such version,
 * -1 error. */
int gj_model_store_set_desired(PGconn *conn, const char *name, int64_t version,
                               enum gj_model_desired d, enum gj_model_desired *before);
/* Replaces a model's config.json text (poll mode: the seed directory's changed). 0 or -1. */
int gj_model_store_set_model_config(PGconn *conn, const char *name, const char *config);
/* Deletes a version, its files' large objects with it, and the model with its last version.
 * 1 deleted, 0 no such version, -1 error. */
int gj_model_store_delete_version(PGconn *conn, const char *name, int64_t version);

/* Imports what seed_dir (a repository in the layout of model_repo.h) holds that was never
 * imported: per version, every regular file of <name>/<version>/ but config.json, which
 * becomes the version's own config; <name>/config.json is the model's. Under an advisory
 * lock: replicas starting together import each version once. A version that does not
 * import (a missing config, a bad file) is logged and skipped. 0, or -1 (database). */
int gj_model_store_import_seeds(PGconn *conn, const char *seed_dir);

/* ---- the actual state ---- */

/* Writes this replica's heartbeat and states: states is [{"model", "version", "state",
 * "reason"?, "devices": [...]}] (states of versions deleted meanwhile are skipped); its
 * earlier states go. Replicas gone longer than GJ_MODEL_REPLICA_FORGET_S are deleted. 0 or
 * -1. */
int gj_model_store_report(PGconn *conn, const char *replica, const char *role, int serving,
                          int64_t generation, const json_t *states);
/* A replica that stops: its rows go. 0 or -1. */
int gj_model_store_leave(PGconn *conn, const char *replica);
/* The live replicas (seen within GJ_MODEL_REPLICA_LIVE_S) and what they report:
 * {"generation": G, "replicas": [{"replica", "role", "serving", "generation", "seen_at"}],
 *  "states": [{"replica", "model", "version", "state", "reason", "devices"}]}; NULL on
 * error (logged). */
json_t *gj_model_store_replicas(PGconn *conn);

#endif
