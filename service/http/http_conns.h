/*
 * http_conns.h — what the HTTP listeners keep about their connections beyond
 * libmicrohttpd's own limits (total, per client address, idle timeout):
 *
 *   - the header deadline: a connection whose request line and headers are not complete
 *     header_timeout seconds after it opened, or after its next request began, is shut
 *     down. MHD's idle timeout restarts with every byte, so a client trickling one byte a
 *     minute would otherwise hold its connection for ever. A kept-alive connection that
 *     has received nothing since its previous answer is idle, not slow: MHD's idle timeout
 *     governs it (the kernel's time of the last data received tells, TCP_INFO), and once its next
 *     request is seen to have begun it has header_timeout more. A sweeper thread shuts the
 *     socket down (shutdown(2)); MHD then sees the end of the stream and closes the
 *     connection itself, TLS or not (a TLS handshake never finished is cut the same).
 *   - the open-files limit, raised at start to what the connections need;
 *   - the connection gauges of /metrics.
 */
#ifndef GJ_HTTP_CONNS_H
#define GJ_HTTP_CONNS_H

#include <stdio.h>

#include <microhttpd.h>

struct gj_conns;

/* Starts the sweeper of one listener. NULL logged. */
struct gj_conns *gj_conns_start(const char *listener, int header_timeout_seconds);
/* After the listener's daemon stopped (every connection closed). */
void gj_conns_stop(struct gj_conns *t);

/* MHD_OPTION_NOTIFY_CONNECTION, with the struct gj_conns as its closure. */
void gj_conns_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
                     enum MHD_ConnectionNotificationCode code);
/* The request's headers are complete (the access handler's first call): no deadline. */
void gj_conns_header_done(struct MHD_Connection *connection);
/* Its answer is sent (or the request ended): the next request's deadline starts now. */
void gj_conns_request_done(struct MHD_Connection *connection);
/* A body chunk arrived: what arrives next is acknowledged at once, not after the kernel's
 * delayed-ACK timer (up to 40 ms). A client whose socket runs Nagle's algorithm (Python's
 * http clients, tritonclient's) holds a body's last partial segment until what it sent
 * before is acknowledged, so without this one request in four waits the timer out. Linux's
 * TCP_QUICKACK lasts until the stack decides otherwise, hence once per chunk. */
void gj_conns_quickack(struct MHD_Connection *connection);

/* Raises RLIMIT_NOFILE's soft limit to what `connections` connections need besides the rest
 * of the process, as far as the hard limit allows; logs what it did. Returns how many
 * connections the limit leaves room for (connections, or fewer: logged as a warning). */
int gj_conns_reserve_fds(int connections);

/* Prometheus text: open connections, those waiting on their headers, deadline cuts. */
void gj_conns_write_metrics(FILE *f);

#endif
