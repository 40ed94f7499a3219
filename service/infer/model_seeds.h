/*
 * model_seeds.h — the seed directory (--models-dir) and the shared model store, inside
 * service/infer: what model_seeds.c (the import at start) and model_seeds_poll.c (poll
 * mode's passes) share. The import itself is gj_model_store_import_seeds (model_store.h).
 */
#ifndef GJ_INFER_MODEL_SEEDS_H
#define GJ_INFER_MODEL_SEEDS_H

#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "common/fsutil.h"
#include "service/infer/model_store.h"

/* A version directory name: a positive decimal integer without leading zeros; else -1. */
int64_t gj_seed_dir_version(const char *s);
/* The files of one version directory (every regular file but its config file) and, when it
 * is a version (*has_onnx: model.onnx is one of them), the model directory's own files
 * (label files; not its config), up to GJ_MODEL_MAX_FILES; paths and names point into
 * names/locals (caller's storage). */
size_t gj_seed_version_files(const char *mdir, const char *vdir, struct gj_ms_new_file *files,
                             char (*names)[GJ_MODEL_FILE_NAME_MAX], char (*locals)[GJ_PATH_MAX], int *has_onnx);
/* Calls fn for each version directory of a model directory (names as
 * gj_seed_dir_version's), until one returns non-zero: what it returned, or 0. */
int gj_seed_each_version(const char *mdir, int (*fn)(void *ctx, int64_t version, const char *vdir), void *ctx);
/* Imports one version directory unless it was imported before (model_seeds); logs what it
 * skips. 0, or -1 on a database error. */
int gj_seed_import_version(PGconn *conn, const char *mdir, const char *name, int64_t version, const char *vdir);

/* ---- poll mode (model_seeds_poll.c) ---- */

/* What one process remembers of the seed directory between passes: each version's
 * files (a cheap signature and their digest) and each model's config as last read. */
typedef struct gj_seed_memory gj_seed_memory;
gj_seed_memory *gj_seed_memory_new(void);
void gj_seed_memory_free(gj_seed_memory *m);

/* One poll pass over seed_dir, under the seed lock, as Triton's poll mode:
 *   - a version new in the directory is imported (one deleted through the API stays
 *     deleted while it stays in the directory);
 *   - a version whose files or own config changed since the last pass is replaced, and a
 *     model whose config changed gets the new one, when the store still holds what the
 *     directory held (a version uploaded through the API with other content is never
 *     replaced);
 *   - a version gone from the directory is deleted from the store when the store holds
 *     what the directory held; uploaded versions are never removed by a poll.
 * The models changed are remembered (gj_seed_memory_changed) so that their versions are
 * asked to load again. 0, or -1 (database). */
int gj_model_store_poll_seeds(PGconn *conn, const char *seed_dir, gj_seed_memory *mem);
/* 1 when the last pass replaced a version of the model or its config. */
int gj_seed_memory_changed(const gj_seed_memory *m, const char *name);

#endif
