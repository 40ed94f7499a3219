/*
 * migrate.c — applies the migrations embedded at build time (tools/embed_files.py,
 * gj_migrations.h generated from migrations/NNNN_*.sql).
 *
 * Each migration runs in its own transaction that first takes a transaction-level
 * advisory lock: replicas starting together queue on the lock, and each one, once
 * it holds it, sees what the others committed and skips what is recorded in
 * schema_migrations. The migration text itself is a trusted multi-statement
 * script compiled into the binary, so it runs through PQexec (PQexecParams takes
 * one statement); everything else is parameterised.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/db/db.h"
#include "service/base/log.h"
#include "service/db/migrate.h"
#include "gj_migrations.h"

/* 'gpjb' 'migr' as a 64-bit advisory lock key, shared by every replica. */
#define MIGRATE_LOCK_KEY "7453171002766469490"

static const char create_table_sql[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version integer PRIMARY KEY,"
    " name text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now())";

static int lock_and_prepare(PGconn *conn)
{
    const char *key[1] = { MIGRATE_LOCK_KEY };
    if (gj_db_begin(conn) != 0)
        return -1;
    if (gj_db_cmd(conn, "SELECT pg_advisory_xact_lock($1::bigint)", 1, key) != 0 ||
        gj_db_cmd(conn, create_table_sql, 0, NULL) != 0) {
        gj_db_rollback(conn);
        return -1;
    }
    return 0;
}

/* 1 recorded, 0 not, -1 error; inside the locked transaction. */
static int is_recorded(PGconn *conn, int version)
{
    char v[16];
    snprintf(v, sizeof v, "%d", version);
    const char *p[1] = { v };
    PGresult *res = gj_db_exec(conn, "SELECT 1 FROM schema_migrations WHERE version = $1::integer", 1, p, NULL);
    if (!res)
        return -1;
    int found = PQntuples(res) > 0;
    PQclear(res);
    return found;
}

static int run_script(PGconn *conn, const struct gj_migrations_entry *m)
{
    PGresult *res = PQexec(conn, m->text);
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        PQclear(res);
        return 0;
    }
    const char *code = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    const char *pos = res ? PQresultErrorField(res, PG_DIAG_STATEMENT_POSITION) : NULL;
    const char *ctx = res ? PQresultErrorField(res, PG_DIAG_CONTEXT) : NULL;
    json_t *fields = json_pack("{s:i, s:s, s:s}", "version", m->version, "name", m->name,
                               "sqlstate", code ? code : "");
    if (fields && pos) {
        /* Turn the character position into a line number of the file. */
        long p = strtol(pos, NULL, 10);
        int line = 1;
        for (long i = 0; i + 1 < p && m->text[i]; i++)
            if (m->text[i] == '\n')
                line++;
        json_object_set_new(fields, "line", json_integer(line));
    }
    if (fields && ctx)
        json_object_set_new(fields, "context", json_string(ctx));
    char line[600];
    snprintf(line, sizeof line, "migration %s failed: %s", m->name,
             msg ? msg : PQerrorMessage(conn));
    gj_log_fields(GJ_LOG_ERROR, "migrate", line, fields);
    PQclear(res);
    return -1;
}

int gj_migrate(PGconn *conn)
{
    if (!conn || PQstatus(conn) != CONNECTION_OK) {
        gj_log_error("migrate", "no database connection");
        return -1;
    }
    if (PQtransactionStatus(conn) != PQTRANS_IDLE) {
        gj_log_error("migrate", "connection is inside a transaction");
        return -1;
    }
    int applied = 0;
    int last_version = 0;
    for (size_t i = 0; i < gj_migrations_count; i++) {
        const struct gj_migrations_entry *m = &gj_migrations[i];
        if (lock_and_prepare(conn) != 0)
            return -1;
        int rec = is_recorded(conn, m->version);
        if (rec < 0) {
            gj_db_rollback(conn);
            return -1;
        }
        if (rec) {
            gj_db_rollback(conn);   /* nothing written: just releases the lock */
            last_version = m->version;
            continue;
        }
        gj_log_info("migrate", "applying migration %s", m->name);
        char v[16];
        snprintf(v, sizeof v, "%d", m->version);
        const char *p[2] = { v, m->name };
        if (run_script(conn, m) != 0 ||
            gj_db_cmd(conn, "INSERT INTO schema_migrations (version, name, applied_at)"
                            " VALUES ($1::integer, $2, now())", 2, p) != 0 ||
            gj_db_commit(conn) != 0) {
            gj_db_rollback(conn);
            return -1;
        }
        applied++;
        last_version = m->version;
    }

    /* A database migrated by a newer binary still works with older code only if
     * the newer migrations were additive; say so rather than refuse. */
    char lv[16];
    snprintf(lv, sizeof lv, "%d", last_version);
    const char *p[1] = { lv };
    PGresult *res = gj_db_exec(conn, "SELECT count(*) FROM schema_migrations WHERE version > $1::integer", 1, p, NULL);
    if (!res)
        return -1;
    long newer = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    if (newer > 0)
        gj_log_warn("migrate", "the database has %ld migration(s) newer than this binary knows", newer);
    if (applied > 0)
        gj_log_info("migrate", "applied %d migration(s); schema at version %d", applied, last_version);
    else
        gj_log_debug("migrate", "schema up to date at version %d", last_version);
    return applied;
}

int gj_migrate_is_current(PGconn *conn)
{
    if (!conn)
        return -1;
    PGresult *res = gj_db_exec(conn, "SELECT to_regclass('schema_migrations') IS NOT NULL", 0, NULL, NULL);
    if (!res)
        return -1;
    int exists = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (!exists)
        return 0;
    /* '{1,2,3}' of every embedded version. */
    size_t cap = 3 + gj_migrations_count * 12;
    char *arr = malloc(cap);
    if (!arr)
        return -1;
    size_t off = (size_t)snprintf(arr, cap, "{");
    for (size_t i = 0; i < gj_migrations_count; i++)
        off += (size_t)snprintf(arr + off, cap - off, "%s%d", i ? "," : "", gj_migrations[i].version);
    snprintf(arr + off, cap - off, "}");
    const char *p[1] = { arr };
    res = gj_db_exec(conn, "SELECT count(*) FROM schema_migrations WHERE version = ANY($1::integer[])", 1, p, NULL);
    free(arr);
    if (!res)
        return -1;
    long have = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return have == (long)gj_migrations_count ? 1 : 0;
}
