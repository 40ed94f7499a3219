/*
 * http_cut.c — answering a request before its body has ended, then closing the
 * connection (gj_req_cut, http_server.h).
 *
 * libmicrohttpd (0.9.75) queues a response only before the body is read or after
 * all of it arrived; a client cut for uploading too slowly must hear why at once,
 * not after the rest of its body. So the answer is written to the connection
 * itself, through its TLS session (or its socket with --insecure-http), from the
 * connection's own thread inside the access handler, after which the handler
 * returns MHD_NO and libmicrohttpd closes the connection.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <gnutls/gnutls.h>

#include "service/http/http_server.h"
#include "service/base/log.h"

#define WRITE_WAIT_MS 1000

static int wait_writable(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    int rc;
    while ((rc = poll(&p, 1, WRITE_WAIT_MS)) < 0 && errno == EINTR)
        ;
    return rc == 1 ? 0 : -1;
}

/* All of buf to the client, or -1 (a client that reads nothing is not waited for long). */
static int write_all(struct MHD_Connection *conn, const char *buf, size_t len)
{
    const union MHD_ConnectionInfo *fdi = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *tls = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (!fdi)
        return -1;
    int fd = fdi->connect_fd;
    gnutls_session_t session = tls ? (gnutls_session_t)tls->tls_session : NULL;
    while (len) {
        ssize_t n = session ? gnutls_record_send(session, buf, len) : send(fd, buf, len, MSG_NOSIGNAL);
        int again = session ? n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED
                            : n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
        if (again) {
            if (wait_writable(fd) != 0)
                return -1;
            continue;
        }
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

void gj_req_cut(struct gj_req *r, int status, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (r->response) {
        MHD_destroy_response(r->response);
        r->response = NULL;
    }
    r->status = status;
    r->cut = 1;
    char *body = gj_problem_text(r, status, NULL, detail);
    char *msg = NULL, hsts[64] = "";
    if (r->hsts && r->hsts[0])
        snprintf(hsts, sizeof hsts, "Strict-Transport-Security: %s\r\n", r->hsts);
    int len = body ? asprintf(&msg,
                              "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
                              "Content-Length: %zu\r\nConnection: close\r\nCache-Control: no-store\r\n"
                              "X-Request-Id: %s\r\n%s\r\n%s",
                              status, status == 408 ? "Request Timeout" : "Error", gj_problem_content_type(r), strlen(body),
                              r->request_id, hsts, body)
                    : -1;
    if (len < 0 || write_all(r->conn, msg, (size_t)len) != 0)
        gj_log_debug("http", "the answer to a cut request could not be written; closing");
    else
        r->bytes = strlen(body);
    free(body);
    if (len >= 0)
        free(msg);
}
