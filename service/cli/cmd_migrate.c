/*
 * cmd_migrate.c — `gpujobd migrate [--database-url URL] [--data-dir DIR]`: applies
 * the embedded migrations and exits 0. Without a URL it uses (and starts, then
 * stops) the embedded PostgreSQL under the data dir, as `serve` would.
 */
#include <stdio.h>

#include <libpq-fe.h>

#include "service/cli/cli.h"
#include "service/config.h"
#include "service/db/db.h"
#include "service/base/log.h"
#include "service/db/migrate.h"
#include "service/db/pg_embedded.h"

int gj_cmd_migrate(int argc, char **argv)
{
    struct gj_config cfg;
    int rc = gj_config_load(&cfg, argc, argv, 1);
    if (rc < 0)
        return 2;
    if (rc == 1)
        return 0;

    struct gj_pg_embedded *pg = NULL;
    char url[sizeof cfg.database_url];   /* a libpq URL: given, or the embedded one */
    if (cfg.database_url[0]) {
        snprintf(url, sizeof url, "%s", cfg.database_url);
        gj_db_set_password(cfg.database_password);
    } else {
        pg = gj_pg_embedded_start(cfg.data_dir, &cfg.pg, url, sizeof url);
        if (!pg)
            return 1;
    }
    int status = 1;
    PGconn *conn = gj_db_connect(url);
    if (conn) {
        int n = gj_migrate(conn);
        if (n >= 0 && gj_migrate_is_current(conn) == 1) {
            gj_log_info("migrate", "schema is current (%d migration(s) applied now)", n);
            status = 0;
        }
        PQfinish(conn);
    }
    gj_pg_embedded_stop(pg);
    return status;
}
