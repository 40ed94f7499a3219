/*
 * migrate.h — applies migrations/NNNN_*.sql (embedded in the binary) in order,
 * each once, under an advisory lock so replicas starting together agree.
 */
#ifndef GJ_MIGRATE_H
#define GJ_MIGRATE_H

#include <libpq-fe.h>

/* Returns the number applied (0 when up to date) or -1 (logged). */
int gj_migrate(PGconn *conn);
/* 1 when every embedded migration is recorded, 0 when not, -1 on error. */
int gj_migrate_is_current(PGconn *conn);

#endif
