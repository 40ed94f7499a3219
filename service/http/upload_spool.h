/*
 * upload_spool.h — request bodies that are uploads (routes with GJ_BODY_UPLOAD:
 * blobs, multipart submits, model versions, STOW-RS).
 *
 * While the client sends, the body goes to an unnamed file under DATA_DIR/spool
 * and nothing else happens: no database connection is held, so a slow client
 * costs a thread, a file and an upload slot, never a pooled connection. Once the
 * body is complete it is handed to the route's data callback in 1 MiB pieces
 * (the route takes its connection then, for the short write), then to handle.
 * The file has no name (O_TMPFILE): a client that goes away, an error, even a
 * crash, leaves nothing behind.
 *
 * Admission and limits, the same for every upload route:
 *   - one of --max-uploads slots (503 past it) and one of the tenant's
 *     --max-uploads-per-tenant (429 past it), both with Retry-After;
 *   - the body limit (413 before reading when the declared length is over it);
 *   - the spool's filesystem keeps --upload-disk-reserve free (507);
 *   - the client keeps --upload-min-bytes-per-second over each
 *     --upload-rate-window-seconds (408, answered at once and the connection
 *     closed: gj_req_cut), and never goes silent that long (the connection is
 *     closed: libmicrohttpd's idle timeout, set to the window for the upload).
 */
#ifndef GJ_UPLOAD_SPOOL_H
#define GJ_UPLOAD_SPOOL_H

#include <stddef.h>

struct gj_req;
struct gj_upload_ops;

/* The state of one spooled body (owned by the request). */
struct gj_upload;

/* Upload admission for a request whose body is large (uploads; big /v2 bodies):
 * one of cfg.max_uploads slots and one of its tenant's cfg.max_uploads_per_tenant.
 * 0 (held until the request ends), GJ_UPLOAD_SERVER_BUSY or GJ_UPLOAD_TENANT_BUSY. */
#define GJ_UPLOAD_SERVER_BUSY (-1)
#define GJ_UPLOAD_TENANT_BUSY (-2)
int gj_req_upload_slot(struct gj_req *r);
/* The problem+json answer to a refused slot: 503 or 429, with Retry-After. */
void gj_respond_upload_busy(struct gj_req *r, int rc);
/* Gives the slots back (the request's end; idempotent). */
void gj_req_upload_slot_release(struct gj_req *r);

/* The server's way into the spool (http_server.h: gj_http_set_upload_ops): start (slots,
 * disk check, spool file, stall limit; 0, or -1 with a response prepared), receive (a
 * piece from the client, spooled; on a limit a response is prepared, 413 or 507, or given
 * at once, 408: gj_req_cut), replay (the body is complete: the route's data callback gets
 * it in pieces; 0, or -1 with a response prepared), end (the request ended: the spool
 * file goes, the slots come back). */
extern const struct gj_upload_ops gj_upload_spool_ops;

/* Pieces of the spool handed to the route at a time. */
#define GJ_UPLOAD_REPLAY_CHUNK ((size_t)1 << 20)

#endif
