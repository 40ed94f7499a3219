/*
 * stream_outage.h — what an event stream (a job's events, /v1/events) tells its client
 * while this replica is cut off from the database. A stream reads the database; cut off,
 * it has nothing true to say, and it neither waits on the silence (it holds an event-loop
 * thread while it reads) nor ends (a client would reconnect to a replica that cannot
 * answer either). It says so once, sends its keep-alives, and goes on where it was when
 * the database answers again:
 *
 *   event: unavailable   data: {"reason": "database: unreachable for 2.1 s, ..."}
 *   event: available     data: {}
 *
 * Neither carries an id: Last-Event-ID stays the last event read, so a client that
 * prefers to reconnect elsewhere (through a load balancer: this replica's /readyz says
 * 503 meanwhile) resumes there without a gap.
 */
#ifndef GJ_STREAM_OUTAGE_H
#define GJ_STREAM_OUTAGE_H

#include "service/db/db.h"
#include "service/base/text_buf.h"

/* A stream's view of the database: whether it last said the database is away. */
struct gj_stream_outage {
    int said_away;
};

/* Checks the pool's health (no query: the pool knows) and appends to the stream's
 * buffer the event due when that changed since the last call. 1 the database is
 * reachable (read it), 0 it is not (do not). */
int gj_stream_outage_check(struct gj_stream_outage *o, struct gj_db_pool *db, char **buf, size_t *len,
                           size_t *cap);

#endif
