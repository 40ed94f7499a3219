/*
 * carmin_fs.c — the CARMIN file space's rows (carmin_fs.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "service/carmin/carmin.h"
#include "service/carmin/carmin_fs.h"
#include "service/db/db.h"
#include "service/jobs/job_store.h"

int carmin_path_normalize(const char *in, char out[CARMIN_PATH_MAX])
{
    if (snprintf(out, CARMIN_PATH_MAX, "/%s", in) >= CARMIN_PATH_MAX)
        return -1;
    size_t n = strlen(out);
    if (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';   /* "vip/Home/" is home */
    size_t home = strlen(CARMIN_HOME);
    if (strncmp(out, CARMIN_HOME, home) != 0 || (out[home] && out[home] != '/'))
        return -1;
    char seg[CARMIN_PATH_MAX];
    for (const char *p = out + home; *p == '/'; ) {
        const char *end = strchr(p + 1, '/');
        size_t len = end ? (size_t)(end - p - 1) : strlen(p + 1);
        memcpy(seg, p + 1, len);
        seg[len] = '\0';
        if (!gj_safe_name(seg))
            return -1;
        p += len + 1;
    }
    return 0;
}

void carmin_path_parent(const char *path, char out[CARMIN_PATH_MAX])
{
    snprintf(out, CARMIN_PATH_MAX, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash && slash != out)
        *slash = '\0';
}

int carmin_fs_stat(PGconn *c, const char *tenant, const char *path, struct carmin_entry *e)
{
    memset(e, 0, sizeof *e);
    if (strcmp(path, CARMIN_HOME) == 0) {
        e->is_dir = 1;
        return 1;
    }
    const char *p[2] = { tenant, path };
    PGresult *res = gj_db_exec(c, "SELECT coalesce(blob_id::text, '') FROM carmin_paths"
                                  " WHERE tenant_id = $1::uuid AND path = $2",
                               2, p, NULL);
    if (!res)
        return -1;
    int found = PQntuples(res) > 0;
    if (found) {
        snprintf(e->blob_id, sizeof e->blob_id, "%s", PQgetvalue(res, 0, 0));
        e->is_dir = !e->blob_id[0];
    }
    PQclear(res);
    return found;
}

/* Size of a directory: the sum of the files under it. */
#define DIR_SIZE "(SELECT coalesce(sum(b2.size), 0) FROM carmin_paths c2 JOIN blobs b2 ON b2.id = c2.blob_id" \
                 " WHERE c2.tenant_id = $1::uuid AND left(c2.path, length(%s) + 1) = %s || '/')"

static json_t *path_json(PGresult *res, int i)
{
    int is_dir = PQgetvalue(res, i, 1)[0] == 't';
    json_t *o = json_pack("{s:s, s:I, s:b, s:I}", "platformPath", PQgetvalue(res, i, 0), "lastModificationDate",
                          (json_int_t)strtoll(PQgetvalue(res, i, 2), NULL, 10), "isDirectory", is_dir, "size",
                          (json_int_t)strtoll(PQgetvalue(res, i, 3), NULL, 10));
    if (o && !is_dir)
        json_object_set_new(o, "mimeType", json_string(PQgetvalue(res, i, 4)));
    if (o && !PQgetisnull(res, i, 5))
        json_object_set_new(o, "executionId", json_string(PQgetvalue(res, i, 5)));
    return o;
}

static json_t *describe_home(PGconn *c, const char *tenant)
{
    char sql[600];
    snprintf(sql, sizeof sql, "SELECT $2::text, true, extract(epoch FROM now())::bigint, " DIR_SIZE ", '', NULL",
             "$2::text", "$2::text");
    const char *p[2] = { tenant, CARMIN_HOME };
    PGresult *res = gj_db_exec(c, sql, 2, p, NULL);
    if (!res)
        return NULL;
    json_t *o = PQntuples(res) == 1 ? path_json(res, 0) : NULL;
    PQclear(res);
    return o;
}

json_t *carmin_fs_describe(PGconn *c, const char *tenant, const char *path, enum carmin_select what)
{
    static const char *const where[] = { "p.path", "p.parent", "p.execution_id::text" };
    int list = what != CARMIN_SELF;
    if (!list && strcmp(path, CARMIN_HOME) == 0)
        return describe_home(c, tenant);
    char sql[1000];
    snprintf(sql, sizeof sql,
             "SELECT p.path, p.blob_id IS NULL, extract(epoch FROM p.modified_at)::bigint,"
             " CASE WHEN p.blob_id IS NULL THEN " DIR_SIZE " ELSE b.size END, coalesce(b.content_type, ''),"
             " p.execution_id FROM carmin_paths p LEFT JOIN blobs b ON b.id = p.blob_id"
             " WHERE p.tenant_id = $1::uuid AND %s = $2 ORDER BY p.path",
             "p.path", "p.path", where[what]);
    const char *p[2] = { tenant, path };
    PGresult *res = gj_db_exec(c, sql, 2, p, NULL);
    if (!res)
        return NULL;
    json_t *out = list ? json_array() : json_null();
    for (int i = 0; i < PQntuples(res); i++) {
        if (list)
            json_array_append_new(out, path_json(res, i));
        else
            out = path_json(res, i);
    }
    PQclear(res);
    return out;
}

/* Blobs (a PostgreSQL uuid[] text) that paths no longer hold: those no path holds either,
 * locked (a path made meanwhile waits for the commit), are the job store's to settle: freed,
 * or passed to a job that still takes or keeps them. 0 or -1. */
static int release_blobs(PGconn *c, const char *tenant, const char *ids)
{
    const char *q[2] = { tenant, ids };
    PGresult *res = gj_db_exec(c, "SELECT coalesce(array_agg(f.id), '{}')::text FROM"
                                  " (SELECT b.id FROM blobs b WHERE b.id = ANY ($2::uuid[]) AND b.tenant_id = $1::uuid"
                                  "  AND b.owner_job IS NULL"
                                  "  AND NOT EXISTS (SELECT 1 FROM carmin_paths c WHERE c.blob_id = b.id)"
                                  "  FOR UPDATE OF b) f",
                               2, q, NULL);
    if (!res)
        return -1;
    int rc = gj_job_blobs_settle(c, tenant, PQgetvalue(res, 0, 0));
    PQclear(res);
    return rc;
}

/* A failed statement's outcome: CARMIN_FS_RACE for the parent's foreign key, else -1. */
static int failed(const char sqlstate[6])
{
    return strcmp(sqlstate, "23503") == 0 ? CARMIN_FS_RACE : -1;
}

/* The blob path holds now, its row locked for the rest of the transaction: 1 found (old
 * filled, "" for a directory), 0 no such path, -1 error. Read before the row changes: a
 * RETURNING that reads a CTE locking the row the same statement updates reads nothing. */
static int lock_old(PGconn *c, const char *tenant, const char *path, char old[GJ_UUID_LEN + 1])
{
    const char *p[2] = { tenant, path };
    PGresult *res = gj_db_exec(c, "SELECT coalesce(blob_id::text, '') FROM carmin_paths"
                                  " WHERE tenant_id = $1::uuid AND path = $2 FOR UPDATE",
                               2, p, NULL);
    if (!res)
        return -1;
    int found = PQntuples(res) == 1;
    snprintf(old, GJ_UUID_LEN + 1, "%s", found ? PQgetvalue(res, 0, 0) : "");
    PQclear(res);
    return found;
}

int carmin_fs_create(PGconn *c, const char *tenant, const char *path, const char *blob_id, const char *execution_id)
{
    char parent[CARMIN_PATH_MAX], sqlstate[6] = "";
    carmin_path_parent(path, parent);
    const char *p[5] = { tenant, path, parent, blob_id, execution_id };
    PGresult *res = gj_db_exec(c, "INSERT INTO carmin_paths (tenant_id, path, parent, blob_id, execution_id)"
                                  " VALUES ($1::uuid, $2, $3, $4::uuid, $5::uuid)"
                                  " ON CONFLICT (tenant_id, path) DO NOTHING RETURNING 1",
                               5, p, sqlstate);
    if (!res)
        return failed(sqlstate);
    int made = PQntuples(res) == 1;
    PQclear(res);
    return made;
}

int carmin_fs_put(PGconn *c, const char *tenant, const char *path, const char *blob_id, const char *execution_id)
{
    char old[GJ_UUID_LEN + 1];
    for (int tries = 0; tries < 3; tries++) {   /* made by another between our look and our insert: again */
        int found = lock_old(c, tenant, path, old);
        if (found < 0)
            return -1;
        if (!found) {
            int made = carmin_fs_create(c, tenant, path, blob_id, execution_id);
            if (made != 0)
                return made > 0 ? 0 : made;
            continue;
        }
        const char *p[4] = { tenant, path, blob_id, execution_id };
        if (gj_db_cmd(c, "UPDATE carmin_paths SET blob_id = $3::uuid, execution_id = $4::uuid, modified_at = now()"
                         " WHERE tenant_id = $1::uuid AND path = $2", 4, p) != 0)
            return -1;
        if (!old[0] || (blob_id && strcmp(old, blob_id) == 0))
            return 0;
        char one[GJ_UUID_LEN + 3];
        snprintf(one, sizeof one, "{%s}", old);
        return release_blobs(c, tenant, one);
    }
    return -1;
}

/* name, or its k-th variant: "result.json" -> "result-3.json", "out" -> "out-3". 0, or -1
 * when the variant is not a name. */
static int name_variant(const char *name, int k, char out[CARMIN_PATH_MAX])
{
    if (k == 0)
        return snprintf(out, CARMIN_PATH_MAX, "%s", name) < CARMIN_PATH_MAX && gj_safe_name(out) ? 0 : -1;
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name)
        dot = name + strlen(name);
    int n = snprintf(out, CARMIN_PATH_MAX, "%.*s-%d%s", (int)(dot - name), name, k, dot);
    return n < CARMIN_PATH_MAX && gj_safe_name(out) ? 0 : -1;
}

#define FREE_NAME_TRIES 100

int carmin_fs_create_free(PGconn *c, const char *tenant, const char *dir, const char *name, const char *blob_id,
                          const char *execution_id, char out[CARMIN_PATH_MAX])
{
    for (int k = 0; k < FREE_NAME_TRIES; k++) {
        char variant[CARMIN_PATH_MAX];
        if (name_variant(name, k, variant) != 0 ||
            snprintf(out, CARMIN_PATH_MAX, "%s/%s", dir, variant) >= CARMIN_PATH_MAX)
            return 1;
        int made = carmin_fs_create(c, tenant, out, blob_id, execution_id);
        if (made != 0)
            return made > 0 ? 0 : -1;
    }
    return 1;
}

int carmin_fs_mkdirs(PGconn *c, const char *tenant, const char *path)
{
    char prefix[CARMIN_PATH_MAX];
    size_t home = strlen(CARMIN_HOME), len = strlen(path);
    for (size_t i = home + 1; i <= len; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        snprintf(prefix, sizeof prefix, "%.*s", (int)i, path);
        struct carmin_entry e;
        int rc = carmin_fs_stat(c, tenant, prefix, &e);
        if (rc == 0 && carmin_fs_create(c, tenant, prefix, NULL, NULL) < 0)
            return -1;
        if (rc == 0)   /* made, or made by another meanwhile: look again */
            rc = carmin_fs_stat(c, tenant, prefix, &e);
        if (rc < 0)
            return -1;
        if (rc == 0 || !e.is_dir)
            return 1;
    }
    return 0;
}

/* Deletes the rows of cond ($1 tenant, $2 key), then the blobs they freed. Rows or -1. */
static int delete_where(PGconn *c, const char *tenant, const char *key, const char *cond)
{
    char sql[600];
    snprintf(sql, sizeof sql, "WITH gone AS (DELETE FROM carmin_paths WHERE tenant_id = $1::uuid AND %s"
                              " RETURNING blob_id) SELECT count(*), coalesce(array_agg(blob_id) FILTER"
                              " (WHERE blob_id IS NOT NULL), '{}')::text FROM gone", cond);
    const char *p[2] = { tenant, key };
    char sqlstate[6] = "";
    PGresult *res = gj_db_exec(c, sql, 2, p, sqlstate);
    if (!res)
        return failed(sqlstate);
    int n = (int)strtol(PQgetvalue(res, 0, 0), NULL, 10);
    char *blobs = strdup(PQgetvalue(res, 0, 1));
    PQclear(res);
    if (!blobs)
        return -1;
    int rc = release_blobs(c, tenant, blobs);   /* the rows are gone now */
    free(blobs);
    return rc != 0 ? -1 : n;
}

int carmin_fs_delete(PGconn *c, const char *tenant, const char *path)
{
    int n = delete_where(c, tenant, path, "(path = $2 OR left(path, length($2) + 1) = $2 || '/')");
    return n < 0 ? n : n > 0;
}

int carmin_fs_delete_execution(PGconn *c, const char *tenant, const char *execution_id)
{
    int files = delete_where(c, tenant, execution_id, "execution_id = $2::uuid AND blob_id IS NOT NULL");
    int dirs = files < 0 ? -1
                         : delete_where(c, tenant, execution_id,
                                        "execution_id = $2::uuid AND blob_id IS NULL AND NOT EXISTS (SELECT 1"
                                        " FROM carmin_paths u WHERE u.tenant_id = $1::uuid"
                                        " AND u.parent = carmin_paths.path)");
    return dirs < 0 ? -1 : files + dirs;
}
