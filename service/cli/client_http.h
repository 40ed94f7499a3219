/*
 * client_http.h — the HTTPS calls of `gpujobd submit|status|wait|fetch|cancel` (cmd_client.c):
 * libcurl, the API key as a bearer token, the server's certificate checked against --cacert
 * (or the system's CAs), and retries with backoff when the server cannot be reached or answers
 * 502/503/504 (a restart, a failover), so a workflow manager's step survives a short outage.
 */
#ifndef GJ_CLIENT_HTTP_H
#define GJ_CLIENT_HTTP_H

#include <stddef.h>

struct gj_client {
    char server[1024];        /* https://host:port, no trailing slash */
    char key[512];
    char cacert[1024];        /* "" = the system's CAs */
    int retries;              /* extra tries after a failed one (backoff 0.5 s doubling, at most 8 s) */
};

/* A part of a multipart/form-data body: data (text) or the contents of path. */
struct gj_client_part {
    const char *name;
    const char *data;         /* NULL: path */
    const char *path;
};

struct gj_client_resp {
    long status;              /* the last answer's HTTP status; 0 when none came */
    char *body;               /* NUL-terminated (may be NULL when empty); the caller frees */
    size_t len;
    char error[1400];         /* why no answer came */
};

/* One call (a JSON body when json is set, multipart when parts are; idem_key sends
 * Idempotency-Key). When to_file is set a 2xx body goes there (written to a temporary name
 * and renamed), else into resp->body. 0 an answer came (any status), -1 none after the
 * retries (resp->error says why). */
int gj_client_call(const struct gj_client *c, const char *method, const char *path, const char *json,
                   const struct gj_client_part *parts, size_t n_parts, const char *idem_key, const char *to_file,
                   struct gj_client_resp *resp);

void gj_client_resp_free(struct gj_client_resp *r);

#endif
