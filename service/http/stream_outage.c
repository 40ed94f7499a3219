/*
 * stream_outage.c — see stream_outage.h.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "service/http/stream_outage.h"

static void append_event(const char *name, json_t *data, char **buf, size_t *len, size_t *cap)
{
    char *d = data ? json_dumps(data, JSON_COMPACT) : NULL;
    json_decref(data);
    if (!d)
        return;
    gj_text_append(buf, len, cap, "event: ", 7);
    gj_text_append(buf, len, cap, name, strlen(name));
    gj_text_append(buf, len, cap, "\ndata: ", 7);
    gj_text_append(buf, len, cap, d, strlen(d));   /* compact JSON has no newlines */
    gj_text_append(buf, len, cap, "\n\n", 2);
    free(d);
}

int gj_stream_outage_check(struct gj_stream_outage *o, struct gj_db_pool *db, char **buf, size_t *len,
                           size_t *cap)
{
    char why[400];
    int up = gj_db_pool_health(db, why, sizeof why);
    if (!up && !o->said_away) {
        char reason[420];
        snprintf(reason, sizeof reason, "database: %s", why);
        append_event("unavailable", json_pack("{s:s}", "reason", reason), buf, len, cap);
        o->said_away = 1;
    } else if (up && o->said_away) {
        append_event("available", json_object(), buf, len, cap);
        o->said_away = 0;
    }
    return up;
}
