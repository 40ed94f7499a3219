/*
 * pg_embedded.h — the private PostgreSQL of a default start (ARCHITECTURE.md: one binary, its defaults):
 * initdb once into DATA_DIR/pg, postgres listening only on a Unix socket in
 * DATA_DIR/run, stopped on exit. As root, the cluster runs as an unprivileged
 * user (the `postgres` account of Debian's package, or --pg-user).
 */
#ifndef GJ_PG_EMBEDDED_H
#define GJ_PG_EMBEDDED_H

#include <stddef.h>

#include "common/fsutil.h"

/* Filled by service/config.c (--pg-bindir, --pg-user, GPUJOBD_PG_NOSYNC). */
struct gj_pg_options {
    char bindir[GJ_PATH_MAX];   /* initdb and postgres; "" = PATH, then the newest
                                 * /usr/lib/postgresql/N/bin */
    char user[64];              /* as root: the user they run as; "" = postgres */
    int nosync;                 /* tests: initdb --no-sync, postgres with fsync=off */
};

struct gj_pg_embedded;

/* Starts (initialising on first use) and fills url (a libpq URL). opt NULL: the
 * defaults. NULL with a log line. */
struct gj_pg_embedded *gj_pg_embedded_start(const char *data_dir, const struct gj_pg_options *opt,
                                            char *url, size_t url_size);
/* 1 when dir holds executable initdb and postgres (what --pg-bindir must name). */
int gj_pg_bindir_usable(const char *dir);
/* Fast shutdown; waits for the postmaster to exit. */
void gj_pg_embedded_stop(struct gj_pg_embedded *pg);

#endif
