/*
 * pg_test_util.c — see pg_test_util.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "service/config.h"
#include "service/db/db.h"
#include "service/db/migrate.h"
#include "service/db/pg_embedded.h"
#include "pg_test_util.h"

static struct gj_pg_embedded *pg;
static char dir[GJ_PATH_MAX];   /* kept short all the same: the socket path limit */
static char url_buf[1024];
static int db_counter;
static pid_t owner_pid;

static void cleanup(void)
{
    if (getpid() != owner_pid)
        return;   /* a forked child must not tear the cluster down */
    gj_pg_embedded_stop(pg);
    pg = NULL;
    if (dir[0] && !getenv("GJ_TEST_KEEP_PG"))
        gj_rm_rf(dir);
}

static void start(void)
{
    if (pg)
        return;
    const char *tmp = getenv("TMPDIR");
    /* The socket path must stay short (Unix socket limit), so /tmp unless TMPDIR is short. */
    if (!tmp || strlen(tmp) > 40)
        tmp = "/tmp";
    snprintf(dir, sizeof dir, "%s/gjtest-XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    /* As root the cluster runs as the postgres user: it needs to reach the directory. */
    if (chmod(dir, 0711) != 0) {
        perror("chmod");
        exit(1);
    }
    owner_pid = getpid();
    atexit(cleanup);
    pg = gj_pg_embedded_start(dir, gj_test_pg_options(), url_buf, sizeof url_buf);
    if (!pg) {
        fprintf(stderr, "pg_test_util: cannot start PostgreSQL in %s\n", dir);
        exit(1);
    }
}

const struct gj_pg_options *gj_test_pg_options(void)
{
    static struct gj_pg_options opt;
    static int loaded;
    if (!loaded) {
        /* What `gpujobd migrate` would read (GPUJOBD_PG_BINDIR and GPUJOBD_PG_USER, as
         * tools/device/env.sh exports them), through config.c; then no fsync. */
        struct gj_config cfg;
        char *argv[] = { (char *)"db-test", NULL };
        if (gj_config_load(&cfg, 1, argv, 1) != 0) {
            fprintf(stderr, "pg_test_util: the environment holds a bad setting\n");
            exit(1);
        }
        opt = cfg.pg;
        opt.nosync = 1;
        loaded = 1;
    }
    return &opt;
}

const char *gj_test_pg_url(void)
{
    start();
    return url_buf;
}

struct gj_pg_embedded **gj_test_pg_handle(void)
{
    start();
    return &pg;
}

const char *gj_test_dir(void)
{
    start();
    return dir;
}

PGconn *gj_test_pg_connect(const char *url)
{
    PGconn *c = PQconnectdb(url ? url : gj_test_pg_url());
    if (!c || PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "pg_test_util: connect: %s\n", c ? PQerrorMessage(c) : "out of memory");
        PQfinish(c);
        exit(1);
    }
    return c;
}

int gj_test_pg_new_db(char *url, size_t url_size)
{
    PGconn *c = gj_test_pg_connect(NULL);
    char name[64], sql[128];
    snprintf(name, sizeof name, "t%d_%d", (int)getpid(), ++db_counter);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
    PGresult *r = PQexec(c, sql);
    int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        fprintf(stderr, "pg_test_util: %s", PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    if (!ok)
        return -1;
    /* The cluster URL names database gpujobd: swap the name. */
    const char *base = gj_test_pg_url();
    const char *q = strchr(base, '?');
    int n = snprintf(url, url_size, "postgresql:///%s%s", name, q ? q : "");
    return n > 0 && (size_t)n < url_size ? 0 : -1;
}

int gj_test_pg_migrated_db(char *url, size_t url_size)
{
    if (gj_test_pg_new_db(url, url_size) != 0)
        return -1;
    PGconn *c = gj_test_pg_connect(url);
    int n = gj_migrate(c);
    PQfinish(c);
    return n < 0 ? -1 : 0;
}

const char *gj_test_job_field(PGconn *conn, const char *job_id, const char *expr)
{
    static char buf[2048];
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT (%s)::text FROM jobs WHERE id = $1", expr);
    const char *p[] = { job_id };
    PGresult *r = gj_db_exec(conn, sql, 1, p, NULL);
    if (!r || PQntuples(r) != 1) {
        fprintf(stderr, "gj_test_job_field: %s of job %s: no single row\n", expr, job_id);
        abort();
    }
    snprintf(buf, sizeof buf, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return buf;
}
