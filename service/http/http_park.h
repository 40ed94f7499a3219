/*
 * http_park.h — long polls, event streams and inference requests parked, holding no thread.
 *
 * The HTTP server runs on libmicrohttpd's epoll thread pool: a request that waits must not
 * block its thread. It suspends its connection instead (MHD_suspend_connection) and parks
 * here, until one of these resumes it:
 *   - its job changed (the notifier's gpujobd_jobs payload; every parked request after the
 *     notifier reconnects, since notifications may have been missed);
 *   - its own event came (gj_park_wake: an inference request's batch was answered);
 *   - the time it asked for came (its deadline, the next keep-alive);
 *   - its API key was revoked or deleted: every GJ_PARK_KEY_CHECK_MS the park's thread asks
 *     the database about the keys of every open stream, in one query;
 *   - its client closed the connection: every GJ_PARK_GONE_CHECK_MS the park's thread looks at
 *     the sockets of the parked requests (libmicrohttpd watches a suspended one no more);
 *   - the server is stopping (SIGTERM, or the listener closing).
 * Resumed, the request runs again on a pool thread (the route's handle, or the response's
 * content reader) and decides: answer, end the stream, or park again.
 *
 * One park per process, started with the API listener.
 */
#ifndef GJ_HTTP_PARK_H
#define GJ_HTTP_PARK_H

#include <microhttpd.h>

#include "service/server.h"
#include "service/base/uuid.h"

#define GJ_PARK_KEY_CHECK_MS 2000
#define GJ_PARK_GONE_CHECK_MS 1000

/* A waiting request's place in the park: lives in the route's state, from gj_park_join to
 * gj_park_leave. Its fields belong to http_park.c (under the park's lock). */
struct gj_park_entry {
    struct MHD_Connection *conn;
    char job_id[GJ_UUID_LEN + 1];
    char key_id[GJ_UUID_LEN + 1];
    double wake_at;              /* CLOCK_MONOTONIC seconds */
    int joined, parked, changed, revoked, gone;
    struct gj_park_entry *prev, *next;   /* in the bucket of its job */
};

/* Starts the park's thread (timers, key checks, shutdown) and listens to the notifier's job
 * changes. 0, or -1 logged. */
int gj_park_start(struct gj_server *srv);
/* Wakes every parked request and parks no more (the server is stopping). */
void gj_park_close(void);
/* Ends the thread; every request has left (the HTTP daemon has stopped). */
void gj_park_stop(void);

/* Now, in the seconds of wake_at. */
double gj_park_now(void);

/* Enters a request that will wait on job_id, authenticated by key_id ("" for none). Join
 * before reading the job the first time: a change from then on is not missed. */
void gj_park_join(struct gj_park_entry *e, struct MHD_Connection *conn, const char *job_id, const char *key_id);
/* Leaves; the request is over (never while parked: a suspended connection does not end). */
void gj_park_leave(struct gj_park_entry *e);

/* Clears the "job changed" mark; call it before reading the job. 1 when it was set. */
int gj_park_take_change(struct gj_park_entry *e);
/* Suspends e's connection until one of the events above, or wake_at. Call only from the
 * access handler or the content reader of e's connection, and return from it at once.
 *   0  parked: the handler returns without an answer (r->parked), the reader returns 0;
 *   1  not parked: the job changed since gj_park_take_change; read it again;
 *  -1  not parked: the park is closed, the key is revoked or the client has gone; answer
 *      (or end without an answer when gj_park_gone) now. */
int gj_park_wait(struct gj_park_entry *e, double wake_at);
/* Resumes e now, as a change of its job would (a waiter's own event: the batch an inference
 * request waits for was answered); nothing once e has left. Any thread. */
void gj_park_wake(struct gj_park_entry *e);
/* 1 when e's key was found revoked. */
int gj_park_revoked(struct gj_park_entry *e);
/* 1 when e's client closed its connection while e was parked: end without an answer (a
 * content reader returns MHD_CONTENT_READER_END_WITH_ERROR, a handle sets r->gone), so that
 * libmicrohttpd closes the socket and frees its slot of --max-connections-per-ip. */
int gj_park_gone(struct gj_park_entry *e);

/* Requests parked now, and streams joined (parked or running): for /metrics. */
void gj_park_counts(int *parked, int *joined);

#endif
