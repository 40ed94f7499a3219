/*
 * db.h — PostgreSQL access: a fixed pool of connections and small helpers
 * around libpq. Every statement is parameterised (PQexecParams); errors are
 * logged here with the SQLSTATE and the caller's file and line, never with the
 * statement's text or its parameters (neither reaches a client either).
 */
#ifndef GJ_DB_H
#define GJ_DB_H

#include <stddef.h>

#include <libpq-fe.h>

struct gj_db_pool;

/* Opens n connections to url (or fewer on failure: returns NULL and logs why). */
struct gj_db_pool *gj_db_pool_open(const char *url, int n);
void gj_db_pool_close(struct gj_db_pool *pool);

/* What a borrower does with a connection. The pool keeps a reserve that only
 * readers may take, so that reads (GET requests, probes) still get a connection
 * while writes (uploads, submits, workers) hold all the others. */
enum gj_db_use { GJ_DB_WRITE = 0, GJ_DB_READ = 1 };

/* Connections only GJ_DB_READ borrowers may take (0 .. size - 1; clamped). */
void gj_db_pool_set_read_reserve(struct gj_db_pool *pool, int n);

/* Borrows a connection, waiting up to timeout_ms (-1 forever). A broken
 * connection is reset before it is handed out. NULL on timeout, and at once
 * while the database is unreachable (gj_db_pool_health says why). gj_db_acquire
 * borrows as a writer. */
PGconn *gj_db_acquire(struct gj_db_pool *pool, int timeout_ms);
PGconn *gj_db_acquire_for(struct gj_db_pool *pool, int timeout_ms, enum gj_db_use use);
/* Returns it; a connection left inside a transaction is rolled back first. */
void gj_db_release(struct gj_db_pool *pool, PGconn *conn);
/* 1 while the database is reachable as far as the pool knows; 0 after a failed
 * reconnect, until one succeeds, with why (may be NULL) filled: for how long, and
 * libpq's reason. */
int gj_db_pool_health(struct gj_db_pool *pool, char *why, size_t n);

/* One new connection outside the pool (LISTEN, migrations). NULL with a log line. */
PGconn *gj_db_connect(const char *url);
/* The password every later connection gives (--database-password-file; it wins over the
 * URL's), or NULL for none. Set once at start, before any thread connects. The string
 * is kept, not copied. */
void gj_db_set_password(const char *password);

/* PQexecParams with text parameters and text results. Returns the result when
 * its status is COMMAND_OK or TUPLES_OK, else logs it (SQLSTATE, where it was
 * called; the server's message only for classes whose messages quote no value:
 * connection, integrity, transaction, resources, operator, system), clears it,
 * and returns NULL. sqlstate (6 bytes, may be NULL) receives the code.
 * On a pool connection outside a transaction, a statement that failed because the
 * connection broke is sent once more on a fresh one. */
#define gj_db_exec(conn, sql, n, params, sqlstate) gj_db_exec_at(GJ_DB_WHERE, conn, sql, n, params, sqlstate)
/* Like gj_db_exec, for a statement run often (a status read, the queue's claim and finish):
 * on a pool connection it is prepared on first use under name, then executed by name, so
 * the server parses and plans it once per connection. name is a static string that stands
 * for this sql alone, process-wide. Elsewhere (a connection outside the pool) it is gj_db_exec. */
#define gj_db_exec_prepared(conn, name, sql, n, params, sqlstate)                                   \
    gj_db_exec_prepared_at(GJ_DB_WHERE, conn, name, sql, n, params, sqlstate)
/* Like gj_db_exec for statements whose result is not needed: 0 or -1. */
#define gj_db_cmd(conn, sql, n, params) gj_db_cmd_at(GJ_DB_WHERE, conn, sql, n, params)
#define GJ_DB_WHERE_STR(x) #x
#define GJ_DB_WHERE_LINE(x) GJ_DB_WHERE_STR(x)
#define GJ_DB_WHERE __FILE__ ":" GJ_DB_WHERE_LINE(__LINE__)
PGresult *gj_db_exec_at(const char *where, PGconn *conn, const char *sql, int n, const char *const *params,
                        char sqlstate[6]);
PGresult *gj_db_exec_prepared_at(const char *where, PGconn *conn, const char *name, const char *sql, int n,
                                 const char *const *params, char sqlstate[6]);
int gj_db_cmd_at(const char *where, PGconn *conn, const char *sql, int n, const char *const *params);
int gj_db_begin(PGconn *conn);
int gj_db_commit(PGconn *conn);
void gj_db_rollback(PGconn *conn);

/* 1 when the connection is usable. */
int gj_db_ok(PGconn *conn);
/* 1 when the database answers a trivial query on conn within timeout_ms. One that does
 * not (a network partition: silence, not an error) is dropped, to be reset when next
 * borrowed, and a pool connection's pool marked down: its other borrowers fail at once
 * rather than wait on the same silence. */
int gj_db_ping(PGconn *conn, int timeout_ms);

#endif
