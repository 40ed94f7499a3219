/*
 * pg_test_util.h — a throwaway PostgreSQL cluster for a test process of suite db.
 *
 * The first call starts one through gj_pg_embedded_start (the product's code path)
 * in a fresh mkdtemp directory; at exit it is stopped and the directory removed.
 * Tests that need an empty schema ask for a database of their own.
 */
#ifndef GJ_PG_TEST_UTIL_H
#define GJ_PG_TEST_UTIL_H

#include <stddef.h>
#include <libpq-fe.h>

struct gj_pg_embedded;
struct gj_pg_options;

/* The options the cluster starts with: the environment's settings read by config.c
 * (GPUJOBD_PG_BINDIR, GPUJOBD_PG_USER), without fsync. */
const struct gj_pg_options *gj_test_pg_options(void);

/* The cluster's URL (database gpujobd); aborts the test process on failure. */
const char *gj_test_pg_url(void);
/* The temporary directory of the cluster (DATA_DIR), also a scratch place for files. */
const char *gj_test_dir(void);
/* Creates a new empty database and writes its URL into url. 0 or -1. */
int gj_test_pg_new_db(char *url, size_t url_size);
/* A connection to url (NULL: gj_test_pg_url()); aborts on failure. */
PGconn *gj_test_pg_connect(const char *url);
/* The running cluster, for tests of the embedded PostgreSQL itself, which may stop
 * it and start it again on gj_test_dir() (it must be running when they return). */
struct gj_pg_embedded **gj_test_pg_handle(void);
/* One value of a job's row, SELECT (expr)::text, as text ("" for NULL), in a static
 * buffer that the next call overwrites; aborts unless exactly one job matches. */
const char *gj_test_job_field(PGconn *conn, const char *job_id, const char *expr);
/* A migrated database of its own (URL in url): gj_test_pg_new_db + gj_migrate. */
int gj_test_pg_migrated_db(char *url, size_t url_size);

#endif
