/*
 * client_http.c — HTTPS calls with retries for the job client (client_http.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>

#include "gj_config.h"
#include "service/cli/client_http.h"

#define BODY_MAX (64u << 20)          /* a JSON answer bigger than this is refused */

struct sink {
    struct gj_client_resp *resp;
    FILE *file;                       /* set: the body goes there */
    size_t cap;
};

static size_t on_data(char *data, size_t size, size_t n, void *cls)
{
    struct sink *s = cls;
    size_t len = size * n;
    if (s->file)
        return fwrite(data, 1, len, s->file);
    struct gj_client_resp *r = s->resp;
    if (r->len + len + 1 > s->cap) {
        size_t ncap = s->cap ? s->cap : 4096;
        while (ncap < r->len + len + 1)
            ncap *= 2;
        char *nb = ncap <= BODY_MAX ? realloc(r->body, ncap) : NULL;
        if (!nb)
            return 0;
        r->body = nb;
        s->cap = ncap;
    }
    memcpy(r->body + r->len, data, len);
    r->len += len;
    r->body[r->len] = '\0';
    return len;
}

static struct curl_slist *headers(const struct gj_client *c, const char *json, const char *idem_key)
{
    char auth[600], idem[300];
    struct curl_slist *h = NULL, *n;
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->key);
    if (!(h = curl_slist_append(NULL, auth)))
        return NULL;
    if (json && !(n = curl_slist_append(h, "Content-Type: application/json")))
        goto fail;
    if (json)
        h = n;
    if (idem_key) {
        snprintf(idem, sizeof idem, "Idempotency-Key: %s", idem_key);
        if (!(n = curl_slist_append(h, idem)))
            goto fail;
        h = n;
    }
    return h;
fail:
    curl_slist_free_all(h);
    return NULL;
}

static curl_mime *mime_of(CURL *curl, const struct gj_client_part *parts, size_t n)
{
    curl_mime *m = curl_mime_init(curl);
    for (size_t i = 0; m && i < n; i++) {
        curl_mimepart *p = curl_mime_addpart(m);
        CURLcode rc = p ? curl_mime_name(p, parts[i].name) : CURLE_OUT_OF_MEMORY;
        if (rc == CURLE_OK && parts[i].data)
            rc = curl_mime_data(p, parts[i].data, CURL_ZERO_TERMINATED);
        else if (rc == CURLE_OK)
            rc = curl_mime_filedata(p, parts[i].path);
        if (rc == CURLE_OK && !parts[i].data)
            rc = curl_mime_type(p, "application/octet-stream");
        if (rc != CURLE_OK) {
            curl_mime_free(m);
            return NULL;
        }
    }
    return m;
}

/* Failures that another try cannot cure: a certificate not trusted, a bad URL. */
static int permanent(CURLcode rc)
{
    return rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_URL_MALFORMAT ||
           rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_SSL_CERTPROBLEM;
}

/* One attempt. 1 answered (maybe an error status to retry), 0 no answer, -1 no answer and
 * none will come. */
static int attempt(CURL *curl, const char *to_file, struct gj_client_resp *resp)
{
    char tmp[1200];
    struct sink s = { .resp = resp };
    free(resp->body);
    resp->body = NULL;
    resp->len = 0;
    resp->status = 0;
    if (to_file) {
        snprintf(tmp, sizeof tmp, "%s.part", to_file);
        if (!(s.file = fopen(tmp, "wb"))) {
            snprintf(resp->error, sizeof resp->error, "cannot write %s: %s", tmp, strerror(errno));
            return 1;
        }
    }
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &s);
    CURLcode rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &resp->status);
    if (rc != CURLE_OK)
        snprintf(resp->error, sizeof resp->error, "%s", curl_easy_strerror(rc));
    if (s.file) {
        int ok = fclose(s.file) == 0 && rc == CURLE_OK && resp->status / 100 == 2;
        if (ok && rename(tmp, to_file) != 0) {
            snprintf(resp->error, sizeof resp->error, "cannot rename %s: %s", tmp, strerror(errno));
            ok = 0;
        }
        if (!ok)
            unlink(tmp);
    }
    return rc == CURLE_OK || resp->status != 0 ? 1 : permanent(rc) ? -1 : 0;
}

static int retryable(const struct gj_client_resp *r)
{
    return r->status == 0 || r->status == 502 || r->status == 503 || r->status == 504;
}

int gj_client_call(const struct gj_client *c, const char *method, const char *path, const char *json,
                   const struct gj_client_part *parts, size_t n_parts, const char *idem_key, const char *to_file,
                   struct gj_client_resp *resp)
{
    memset(resp, 0, sizeof *resp);
    char url[2200];
    snprintf(url, sizeof url, "%s%s", c->server, path);
    CURL *curl = curl_easy_init();
    struct curl_slist *h = curl ? headers(c, json, idem_key) : NULL;
    curl_mime *mime = h && parts ? mime_of(curl, parts, n_parts) : NULL;
    if (!curl || !h || (parts && !mime)) {
        snprintf(resp->error, sizeof resp->error, "out of memory");
        curl_mime_free(mime);
        curl_slist_free_all(h);
        curl_easy_cleanup(curl);
        return -1;
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "gpujobd-client/" GJ_VERSION);
    if (c->cacert[0])
        curl_easy_setopt(curl, CURLOPT_CAINFO, c->cacert);
    if (json)
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, json);
    if (mime)
        curl_easy_setopt(curl, CURLOPT_MIMEPOST, mime);
    int answered = 0;
    long delay_ms = 500;
    for (int i = 0; i <= c->retries; i++) {
        answered = attempt(curl, to_file, resp);
        if (answered < 0 || (answered && !retryable(resp)))
            break;
        if (i < c->retries) {
            nanosleep(&(struct timespec){ delay_ms / 1000, (delay_ms % 1000) * 1000000L }, NULL);
            delay_ms = delay_ms < 4000 ? delay_ms * 2 : 8000;
        }
    }
    curl_mime_free(mime);
    curl_slist_free_all(h);
    curl_easy_cleanup(curl);
    return answered > 0 ? 0 : -1;
}

void gj_client_resp_free(struct gj_client_resp *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}
