/*
 * pg_embedded.h — the private PostgreSQL of a default start (DESIGN §2):
 * initdb once into DATA_DIR/pg, postgres listening only on a Unix socket in
 * DATA_DIR/run, stopped on exit. As root, the cluster runs as an unprivileged
 * user (the `postgres` account of Debian's package, or GPUJOBD_PG_USER).
 */
#ifndef GJ_PG_EMBEDDED_H
#define GJ_PG_EMBEDDED_H

#include <stddef.h>

struct gj_pg_embedded;

/* Starts (initialising on first use) and fills url (a libpq URL). NULL with a log line. */
struct gj_pg_embedded *gj_pg_embedded_start(const char *data_dir, char *url, size_t url_size);
/* Fast shutdown; waits for the postmaster to exit. */
void gj_pg_embedded_stop(struct gj_pg_embedded *pg);

#endif
