/*
 * model_store.c — the shared model repository's SQL (model_store.h): read the desired state,
 * add and delete versions, set what is desired, and the replicas' reports.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/fsutil.h"
#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/infer/model_store.h"
#include "service/base/log.h"

#define COMPONENT "models"

const char *gj_model_desired_name(enum gj_model_desired d)
{
    switch (d) {
    case GJ_DESIRED_LOADED: return "loaded";
    case GJ_DESIRED_UNLOADED: return "unloaded";
    case GJ_DESIRED_AVAILABLE:
    default: return "available";
    }
}

static enum gj_model_desired desired_from(const char *s)
{
    if (strcmp(s, "loaded") == 0)
        return GJ_DESIRED_LOADED;
    if (strcmp(s, "unloaded") == 0)
        return GJ_DESIRED_UNLOADED;
    return GJ_DESIRED_AVAILABLE;
}

/* Sets err with an HTTP status; returns -1. */
static int refuse(struct gj_error *err, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int refuse(struct gj_error *err, int status, const char *field, const char *fmt, ...)
{
    char msg[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gj_error_set(err, field, "%s", msg);
    err->status = status;
    return -1;
}

/* ---- reading the desired state ---- */

void gj_model_store_snapshot_free(struct gj_ms_snapshot *s)
{
    for (size_t i = 0; s && i < s->n_models; i++) {
        struct gj_ms_model *m = &s->models[i];
        for (size_t j = 0; j < m->n_versions; j++) {
            free(m->versions[j].config);
            free(m->versions[j].files);
        }
        free(m->versions);
        free(m->config);
    }
    if (s) {
        free(s->models);
        memset(s, 0, sizeof *s);
    }
}

const struct gj_ms_model *gj_model_store_find(const struct gj_ms_snapshot *s, const char *name)
{
    size_t lo = 0, hi = s->n_models;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(s->models[mid].name, name);
        if (c == 0)
            return &s->models[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static char *dup_value(PGresult *res, int row, int col, int *oom)
{
    if (PQgetisnull(res, row, col))
        return NULL;
    char *s = strdup(PQgetvalue(res, row, col));
    if (!s)
        *oom = 1;
    return s;
}

static int read_models(PGconn *conn, struct gj_ms_snapshot *s)
{
    PGresult *res = gj_db_exec(conn, "SELECT name, config FROM models ORDER BY name COLLATE \"C\"", 0, NULL, NULL);
    if (!res)
        return -1;
    int n = PQntuples(res), oom = 0;
    s->models = calloc(n ? (size_t)n : 1, sizeof *s->models);
    oom = !s->models;
    for (int i = 0; !oom && i < n; i++) {
        snprintf(s->models[i].name, sizeof s->models[i].name, "%s", PQgetvalue(res, i, 0));
        s->models[i].config = dup_value(res, i, 1, &oom);
        s->n_models++;
    }
    PQclear(res);
    return oom ? -1 : 0;
}

/* The versions per model: rows ordered as the models, then by version. */
static int read_versions(PGconn *conn, struct gj_ms_snapshot *s)
{
    PGresult *res = gj_db_exec(conn,
                               "SELECT model, version, config, digest, desired, requested_at::text"
                               " FROM model_versions ORDER BY model COLLATE \"C\", version",
                               0, NULL, NULL);
    if (!res)
        return -1;
    int oom = 0;
    for (int i = 0; i < PQntuples(res) && !oom; i++) {
        struct gj_ms_model *m = (struct gj_ms_model *)gj_model_store_find(s, PQgetvalue(res, i, 0));
        if (!m)
            continue;   /* cannot be: a version's model exists in the same snapshot */
        struct gj_ms_version *grown = realloc(m->versions, (m->n_versions + 1) * sizeof *grown);
        if (!grown) {
            oom = 1;
            break;
        }
        m->versions = grown;
        struct gj_ms_version *v = &m->versions[m->n_versions++];
        memset(v, 0, sizeof *v);
        v->version = strtoll(PQgetvalue(res, i, 1), NULL, 10);
        v->config = dup_value(res, i, 2, &oom);
        snprintf(v->digest, sizeof v->digest, "%s", PQgetvalue(res, i, 3));
        v->desired = desired_from(PQgetvalue(res, i, 4));
        snprintf(v->requested_at, sizeof v->requested_at, "%s", PQgetvalue(res, i, 5));
    }
    PQclear(res);
    return oom ? -1 : 0;
}

static struct gj_ms_version *find_version(const struct gj_ms_snapshot *s, const char *name, int64_t version)
{
    const struct gj_ms_model *m = gj_model_store_find(s, name);
    for (size_t j = 0; m && j < m->n_versions; j++)
        if (m->versions[j].version == version)
            return &m->versions[j];
    return NULL;
}

static int read_files(PGconn *conn, struct gj_ms_snapshot *s)
{
    PGresult *res = gj_db_exec(conn,
                               "SELECT model, version, path, size, encode(sha256, 'hex'), coalesce(lo_oid, 0), coalesce(s3_key, '')"
                               " FROM model_files ORDER BY model COLLATE \"C\", version, path COLLATE \"C\"",
                               0, NULL, NULL);
    if (!res)
        return -1;
    int rc = 0;
    for (int i = 0; i < PQntuples(res) && rc == 0; i++) {
        struct gj_ms_version *v = find_version(s, PQgetvalue(res, i, 0), strtoll(PQgetvalue(res, i, 1), NULL, 10));
        if (!v)
            continue;
        struct gj_ms_file *grown = realloc(v->files, (v->n_files + 1) * sizeof *grown);
        if (!grown) {
            rc = -1;
            break;
        }
        v->files = grown;
        struct gj_ms_file *f = &v->files[v->n_files++];
        memset(f, 0, sizeof *f);
        snprintf(f->path, sizeof f->path, "%s", PQgetvalue(res, i, 2));
        f->size = strtoull(PQgetvalue(res, i, 3), NULL, 10);
        snprintf(f->sha256, sizeof f->sha256, "%s", PQgetvalue(res, i, 4));
        f->lo_oid = (unsigned int)strtoul(PQgetvalue(res, i, 5), NULL, 10);
        snprintf(f->s3_key, sizeof f->s3_key, "%s", PQgetvalue(res, i, 6));
    }
    PQclear(res);
    return rc;
}

int gj_model_store_read(PGconn *conn, struct gj_ms_snapshot *out)
{
    memset(out, 0, sizeof *out);
    if (gj_db_cmd(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL) != 0)
        return -1;
    PGresult *res = gj_db_exec(conn, "SELECT generation FROM model_store", 0, NULL, NULL);
    int rc = res && PQntuples(res) == 1 ? 0 : -1;
    if (rc == 0)
        out->generation = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    if (rc == 0)
        rc = read_models(conn, out);
    if (rc == 0)
        rc = read_versions(conn, out);
    if (rc == 0)
        rc = read_files(conn, out);
    if (rc == 0)
        rc = gj_db_commit(conn);
    if (rc != 0) {
        gj_db_rollback(conn);
        gj_model_store_snapshot_free(out);
        gj_log_error(COMPONENT, "cannot read the model store");
    }
    return rc;
}

/* ---- the digest of a version ---- */

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const struct gj_ms_file *)a)->path, ((const struct gj_ms_file *)b)->path);
}

void gj_model_store_digest(struct gj_ms_file *files, size_t n, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (n > 1)
        qsort(files, n, sizeof *files, cmp_file);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    for (size_t i = 0; ok && i < n; i++)
        ok = EVP_DigestUpdate(ctx, files[i].path, strlen(files[i].path) + 1) == 1 &&
             EVP_DigestUpdate(ctx, files[i].sha256, 64) == 1 && EVP_DigestUpdate(ctx, "\n", 1) == 1;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &len) == 1 && len == 32;
    EVP_MD_CTX_free(ctx);
    hex[0] = '\0';
    for (unsigned i = 0; ok && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* ---- changing the desired state ---- */

/* A file name in a version: what model_files.path allows. */
int gj_model_store_file_name_ok(const char *p)
{
    size_t n = strlen(p);
    if (n < 1 || n >= GJ_MODEL_FILE_NAME_MAX || p[0] == '.' || p[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* Stores the files where new blobs go and describes them; inside the caller's transaction (a
 * large object goes with its rollback; an object stays recorded as an upload, which the
 * maintenance pass deletes). */
static int import_files(PGconn *conn, const struct gj_ms_new_file *files, size_t n, struct gj_ms_file *out,
                        struct gj_error *err)
{
    for (size_t i = 0; i < n; i++) {
        struct gj_ms_file *f = &out[i];
        snprintf(f->path, sizeof f->path, "%s", files[i].path);
        if (gj_file_size(files[i].local, &f->size) != 0 || gj_model_file_sha256(files[i].local, f->sha256) != 0) {
            gj_log_error(COMPONENT, "cannot read %s: %s", files[i].local, strerror(errno));
            return refuse(err, 500, "", "the model's file %s could not be read", files[i].path);
        }
        if (gj_blob_import_file(conn, files[i].local, &f->lo_oid, f->s3_key) != 0)
            return gj_blob_store_unreachable(1)
                       ? refuse(err, 503, "", "the object store is not available: try again later")
                       : refuse(err, 500, "", "the model could not be stored");
    }
    return 0;
}

/* Inserts the model (when new), the version and its file rows; inside the transaction. */
static int insert_rows(PGconn *conn, const char *name, int64_t version, const char *model_config,
                       const char *version_config, const struct gj_ms_file *files, size_t n,
                       const char *digest, struct gj_error *err)
{
    char v[24], sqlstate[6] = "";
    snprintf(v, sizeof v, "%" PRId64, version);
    const char *mp[2] = { name, model_config };
    PGresult *res = gj_db_exec(conn, model_config ? "INSERT INTO models (name, config) VALUES ($1, $2)"
                                                    " ON CONFLICT (name) DO NOTHING RETURNING name"
                                                  : "SELECT name FROM models WHERE name = $1 FOR SHARE",
                               model_config ? 2 : 1, mp, NULL);
    int found = res ? PQntuples(res) : -1;
    PQclear(res);
    if (found < 0)
        return refuse(err, 500, "", "the model could not be stored");
    if (found == 0 && model_config)
        return refuse(err, 409, "name", "model '%s' was created meanwhile: upload again (its config.json "
                      "is then the version's own)", name);
    if (found == 0)
        return refuse(err, 404, "name", "model '%s' does not exist (any more)", name);
    const char *vp[4] = { name, v, version_config, digest };
    res = gj_db_exec(conn, "INSERT INTO model_versions (model, version, config, digest) VALUES ($1, $2, $3, $4)",
                     4, vp, sqlstate);
    PQclear(res);
    if (!res && strcmp(sqlstate, "23505") == 0)
        return refuse(err, 409, "version", "model '%s' version %s exists; versions are immutable (DELETE it "
                      "first)", name, v);
    if (!res)
        return refuse(err, 500, "version", "model '%s' version %s could not be stored", name, v);
    for (size_t i = 0; i < n; i++) {
        char size[24], oid[16];
        snprintf(size, sizeof size, "%" PRIu64, files[i].size);
        snprintf(oid, sizeof oid, "%u", files[i].lo_oid);
        const char *key = files[i].s3_key[0] ? files[i].s3_key : NULL;
        const char *fp[7] = { name, v, files[i].path, size, files[i].sha256, key ? NULL : oid, key };
        /* The object's record of an upload goes with the row that owns it (as a blob's does). */
        if (gj_db_cmd(conn, "WITH owned AS (DELETE FROM blob_objects_unowned WHERE s3_key = $7 AND uploading)"
                            " INSERT INTO model_files (model, version, path, size, sha256, lo_oid, s3_key)"
                            " VALUES ($1, $2, $3, $4, decode($5, 'hex'), $6::oid, $7)", 7, fp) != 0)
            return refuse(err, 500, "", "the model could not be stored");
    }
    return 0;
}

int gj_model_store_add_version(PGconn *conn, const char *name, int64_t version,
                               const char *model_config, const char *version_config,
                               const struct gj_ms_new_file *files, size_t n, char digest_out[65],
                               struct gj_error *err)
{
    if (n < 1 || n > GJ_MODEL_MAX_FILES)
        return refuse(err, 422, "files", "a version has 1 to %d files", GJ_MODEL_MAX_FILES);
    for (size_t i = 0; i < n; i++)
        if (!gj_model_store_file_name_ok(files[i].path))
            return refuse(err, 422, "files", "'%.140s' is not a model file name (letters, digits, '.', '_', "
                          "'-', not starting with '.' or '-')", files[i].path);
    struct gj_ms_file *desc = calloc(n, sizeof *desc);
    if (!desc)
        return refuse(err, 500, "", "out of memory");
    int rc = gj_db_begin(conn) == 0 ? 0 : refuse(err, 503, "", "the database is not available");
    if (rc == 0)
        rc = import_files(conn, files, n, desc, err);
    if (rc == 0) {
        gj_model_store_digest(desc, n, digest_out);
        rc = insert_rows(conn, name, version, model_config, version_config, desc, n, digest_out, err);
    }
    if (rc == 0 && gj_db_commit(conn) != 0)
        rc = refuse(err, 500, "", "the model could not be stored");
    if (rc != 0)
        gj_db_rollback(conn);   /* the large objects go with the transaction; objects are recorded */
    free(desc);
    return rc;
}

int gj_model_store_model_config(PGconn *conn, const char *name, char **config)
{
    const char *p[1] = { name };
    *config = NULL;
    PGresult *res = gj_db_exec(conn, "SELECT config FROM models WHERE name = $1", 1, p, NULL);
    if (!res)
        return -1;
    int found = PQntuples(res) == 1;
    if (found && !(*config = strdup(PQgetvalue(res, 0, 0))))
        found = -1;
    PQclear(res);
    return found;
}

int gj_model_store_set_desired(PGconn *conn, const char *name, int64_t version,
                               enum gj_model_desired d, enum gj_model_desired *before)
{
    char v[24];
    snprintf(v, sizeof v, "%" PRId64, version);
    const char *p[3] = { name, v, gj_model_desired_name(d) };
    PGresult *res = gj_db_exec(conn,
                               "UPDATE model_versions n SET desired = $3, requested_at = clock_timestamp()"
                               " FROM model_versions o WHERE n.model = $1 AND n.version = $2"
                               " AND o.model = n.model AND o.version = n.version RETURNING o.desired",
                               3, p, NULL);
    if (!res)
        return -1;
    int found = PQntuples(res) == 1;
    if (found && before)
        *before = desired_from(PQgetvalue(res, 0, 0));
    PQclear(res);
    return found;
}

int gj_model_store_set_model_config(PGconn *conn, const char *name, const char *config)
{
    const char *p[2] = { name, config };
    return gj_db_cmd(conn, "UPDATE models SET config = $2 WHERE name = $1 AND config IS DISTINCT FROM $2", 2, p);
}

int gj_model_store_delete_version(PGconn *conn, const char *name, int64_t version)
{
    char v[24];
    snprintf(v, sizeof v, "%" PRId64, version);
    const char *p[2] = { name, v };
    if (gj_db_begin(conn) != 0)
        return -1;
    PGresult *res = gj_db_exec(conn, "DELETE FROM model_versions WHERE model = $1 AND version = $2 RETURNING 1",
                               2, p, NULL);
    int found = res ? PQntuples(res) : -1;
    PQclear(res);
    if (found == 1 && gj_db_cmd(conn, "DELETE FROM models m WHERE name = $1 AND NOT EXISTS"
                                      " (SELECT 1 FROM model_versions WHERE model = m.name)", 1, p) != 0)
        found = -1;
    if (found < 0 || gj_db_commit(conn) != 0) {
        gj_db_rollback(conn);
        return -1;
    }
    return found;
}

/* ---- the actual state ---- */

int gj_model_store_report(PGconn *conn, const char *replica, const char *role, int serving,
                          int64_t generation, const json_t *states)
{
    char gen[24], forget[16];
    snprintf(gen, sizeof gen, "%" PRId64, generation);
    snprintf(forget, sizeof forget, "%d", GJ_MODEL_REPLICA_FORGET_S);
    char *text = json_dumps(states, JSON_COMPACT);
    if (!text)
        return -1;
    const char *p[4] = { replica, role, serving ? "true" : "false", gen };
    const char *sp[2] = { replica, text };
    const char *fp[1] = { forget };
    int rc = gj_db_begin(conn);
    if (rc == 0)
        rc = gj_db_cmd(conn, "INSERT INTO model_replicas (replica, role, serving, generation) VALUES ($1, $2, $3, $4)"
                             " ON CONFLICT (replica) DO UPDATE SET generation = EXCLUDED.generation, seen_at = now()",
                       4, p);
    if (rc == 0)
        rc = gj_db_cmd(conn, "DELETE FROM model_replica_versions WHERE replica = $1", 1, p);
    if (rc == 0)
        rc = gj_db_cmd(conn,
                       "INSERT INTO model_replica_versions (replica, model, version, state, reason, devices)"
                       " SELECT $1, s.model, s.version, s.state, s.reason, coalesce(s.devices, '[]')"
                       " FROM jsonb_to_recordset($2::jsonb) AS s(model text, version integer, state text,"
                       "                                       reason text, devices jsonb)"
                       " JOIN model_versions v ON v.model = s.model AND v.version = s.version",
                       2, sp);
    if (rc == 0)
        rc = gj_db_cmd(conn, "DELETE FROM model_replicas WHERE seen_at < now() - make_interval(secs => $1)", 1, fp);
    if (rc == 0)
        rc = gj_db_commit(conn);
    if (rc != 0)
        gj_db_rollback(conn);
    free(text);
    return rc;
}

int gj_model_store_leave(PGconn *conn, const char *replica)
{
    const char *p[1] = { replica };
    return gj_db_cmd(conn, "DELETE FROM model_replicas WHERE replica = $1", 1, p);
}

json_t *gj_model_store_replicas(PGconn *conn)
{
    char live[16];
    snprintf(live, sizeof live, "%d", GJ_MODEL_REPLICA_LIVE_S);
    const char *p[1] = { live };
    PGresult *res = gj_db_exec(conn,
        "SELECT json_build_object("
        " 'generation', (SELECT generation FROM model_store),"
        " 'replicas', coalesce((SELECT json_agg(json_build_object('replica', replica, 'role', role,"
        "     'serving', serving, 'generation', generation, 'seen_at', seen_at) ORDER BY replica)"
        "   FROM model_replicas WHERE seen_at >= now() - make_interval(secs => $1)), '[]'),"
        " 'states', coalesce((SELECT json_agg(json_build_object('replica', s.replica, 'model', s.model,"
        "     'version', s.version, 'state', s.state, 'reason', s.reason, 'devices', s.devices)"
        "     ORDER BY s.model, s.version, s.replica)"
        "   FROM model_replica_versions s JOIN model_replicas r USING (replica)"
        "   WHERE r.seen_at >= now() - make_interval(secs => $1)), '[]'))",
        1, p, NULL);
    if (!res)
        return NULL;
    json_t *j = PQntuples(res) == 1 ? json_loads(PQgetvalue(res, 0, 0), 0, NULL) : NULL;
    PQclear(res);
    return j;
}
