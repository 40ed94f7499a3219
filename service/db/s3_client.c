/*
 * s3_client.c — S3 over libcurl with SigV4 (s3_client.h says which parts of the signing are
 * ours). One curl handle per gj_s3_conn, reused across calls so the connection stays open.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "service/base/log.h"
#include "service/base/secret_file.h"
#include "service/db/s3_client.h"

#define COMPONENT "s3"
#define XML_MAX (4u * 1024 * 1024)   /* the most of an answer's body we keep (listings, errors) */

struct gj_s3 {
    char *scheme_host;   /* http://host:port */
    char *host;          /* host:port */
    char *scheme;
    char *bucket;
    char *region;
    char *access_key;
    char *secret_key;
    char *ca_file;
    int virtual_host;
    long timeout_s;
};

struct gj_s3_conn {
    const struct gj_s3 *s3;
    CURL *curl;
    char error[512];
};

/* An answer's body (up to XML_MAX), or a GET's bytes passed on. */
struct body {
    char *data;
    size_t len, cap;
    gj_s3_sink_fn sink;
    void *arg;
    long status;
    int sink_failed;
    CURL *curl;
};

/* The request body of a PUT or POST. */
struct upload {
    const unsigned char *data;
    size_t len, off;
};

static void wipe_free(char *s)
{
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

void gj_s3_free(struct gj_s3 *s3)
{
    if (!s3)
        return;
    free(s3->scheme_host);
    free(s3->host);
    free(s3->scheme);
    free(s3->bucket);
    free(s3->region);
    wipe_free(s3->access_key);
    wipe_free(s3->secret_key);
    free(s3->ca_file);
    free(s3);
}

static int bucket_name_ok(const char *b)
{
    size_t n = strlen(b);
    if (n < 3 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)b[i]) || isdigit((unsigned char)b[i]) || b[i] == '-' || b[i] == '.'))
            return 0;
    return 1;
}

struct gj_s3 *gj_s3_new(const struct gj_s3_config *cfg, char *why, size_t why_size)
{
    snprintf(why, why_size, "out of memory");
    if (!cfg->endpoint || !*cfg->endpoint) {
        snprintf(why, why_size, "no S3 endpoint (--s3-endpoint URL)");
        return NULL;
    }
    const char *rest = NULL;
    if (strncmp(cfg->endpoint, "http://", 7) == 0)
        rest = cfg->endpoint + 7;
    else if (strncmp(cfg->endpoint, "https://", 8) == 0)
        rest = cfg->endpoint + 8;
    size_t host_len = rest ? strcspn(rest, "/?#") : 0;
    if (!rest || host_len == 0 || (rest[host_len] && strcmp(rest + host_len, "/") != 0) || strchr(rest, '@')) {
        snprintf(why, why_size, "--s3-endpoint must be http(s)://host[:port] with no path or user");
        return NULL;
    }
    if (!cfg->bucket || !bucket_name_ok(cfg->bucket)) {
        snprintf(why, why_size, "--s3-bucket must be 3 to 63 lower-case letters, digits, '-' or '.'");
        return NULL;
    }
    if (!cfg->access_key || !*cfg->access_key || !cfg->secret_key || !*cfg->secret_key) {
        snprintf(why, why_size, "no S3 credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                                "or --s3-credentials-file)");
        return NULL;
    }
    const char *region = cfg->region && *cfg->region ? cfg->region : "us-east-1";
    for (const char *p = region; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '-')) {
            snprintf(why, why_size, "--s3-region must be letters, digits and '-'");
            return NULL;
        }
    struct gj_s3 *s3 = calloc(1, sizeof *s3);
    if (!s3)
        return NULL;
    s3->scheme = strndup(cfg->endpoint, (size_t)(rest - cfg->endpoint));
    s3->host = strndup(rest, host_len);
    s3->scheme_host = strndup(cfg->endpoint, (size_t)(rest - cfg->endpoint) + host_len);
    s3->bucket = strdup(cfg->bucket);
    s3->region = strdup(region);
    s3->access_key = strdup(cfg->access_key);
    s3->secret_key = strdup(cfg->secret_key);
    s3->ca_file = cfg->ca_file && *cfg->ca_file ? strdup(cfg->ca_file) : NULL;
    s3->virtual_host = cfg->virtual_host;
    s3->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : 60;
    if (!s3->scheme || !s3->host || !s3->scheme_host || !s3->bucket || !s3->region || !s3->access_key ||
        !s3->secret_key || (cfg->ca_file && *cfg->ca_file && !s3->ca_file)) {
        gj_s3_free(s3);
        return NULL;
    }
    why[0] = '\0';
    return s3;
}

const char *gj_s3_bucket(const struct gj_s3 *s3)
{
    return s3->bucket;
}

struct gj_s3_conn *gj_s3_conn_new(const struct gj_s3 *s3)
{
    struct gj_s3_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->s3 = s3;
    c->curl = curl_easy_init();
    if (!c->curl) {
        free(c);
        return NULL;
    }
    return c;
}

void gj_s3_conn_free(struct gj_s3_conn *c)
{
    if (!c)
        return;
    curl_easy_cleanup(c->curl);
    free(c);
}

const char *gj_s3_conn_error(const struct gj_s3_conn *c)
{
    return c->error;
}

/* AWS's URI encoding: unreserved characters kept, '/' kept where slash_ok. */
static int uri_encode(const char *s, int slash_ok, char *out, size_t out_size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || (slash_ok && *p == '/')) {
            if (o + 1 >= out_size)
                return -1;
            out[o++] = (char)*p;
        } else {
            if (o + 3 >= out_size)
                return -1;
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
    return 0;
}

/* The canonical path of key: /bucket/key (path style) or /key. */
static int object_path(const struct gj_s3 *s3, const char *key, char *out, size_t out_size)
{
    char enc[2048];
    if (!key || uri_encode(key, 1, enc, sizeof enc) != 0)
        return -1;
    int n = s3->virtual_host ? snprintf(out, out_size, "/%s", enc)
                             : snprintf(out, out_size, "/%s/%s", s3->bucket, enc);
    return n > 0 && (size_t)n < out_size ? 0 : -1;
}

static int host_for(const struct gj_s3 *s3, char *out, size_t out_size)
{
    int n = s3->virtual_host ? snprintf(out, out_size, "%s.%s", s3->bucket, s3->host)
                             : snprintf(out, out_size, "%s", s3->host);
    return n > 0 && (size_t)n < out_size ? 0 : -1;
}

/* url = scheme://host + path + ("?" + canonical query). */
static int make_url(const struct gj_s3 *s3, const char *key, const char *query, char *out, size_t out_size)
{
    char path[2200], host[512];
    if (host_for(s3, host, sizeof host) != 0)
        return -1;
    if (key) {
        if (object_path(s3, key, path, sizeof path) != 0)
            return -1;
    } else {
        int n = s3->virtual_host ? snprintf(path, sizeof path, "/") : snprintf(path, sizeof path, "/%s", s3->bucket);
        if (n < 0 || (size_t)n >= sizeof path)
            return -1;
    }
    int n = snprintf(out, out_size, "%s%s%s%s%s", s3->scheme, host, path, query && *query ? "?" : "",
                     query ? query : "");
    return n > 0 && (size_t)n < out_size ? 0 : -1;
}

static void sha256_hex(const void *data, size_t len, char hex[65])
{
    unsigned char md[32];
    unsigned int n = 0;
    EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static void bytes_hex(const unsigned char *b, size_t n, char *hex)
{
    for (size_t i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", b[i]);
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct body *b = userdata;
    size_t n = size * nmemb;
    if (b->status == 0)
        curl_easy_getinfo(b->curl, CURLINFO_RESPONSE_CODE, &b->status);
    if (b->sink && b->status >= 200 && b->status < 300) {
        if (b->sink(ptr, n, b->arg) != 0) {
            b->sink_failed = 1;
            return 0;   /* stops the transfer */
        }
        return n;
    }
    size_t keep = b->len + n <= XML_MAX ? n : XML_MAX - b->len;
    if (keep > 0) {
        if (b->len + keep + 1 > b->cap) {
            size_t cap = b->cap ? b->cap : 4096;
            while (cap < b->len + keep + 1)
                cap *= 2;
            char *d = realloc(b->data, cap);
            if (!d)
                return 0;
            b->data = d;
            b->cap = cap;
        }
        memcpy(b->data + b->len, ptr, keep);
        b->len += keep;
        b->data[b->len] = '\0';
    }
    return n;
}

static size_t on_read(char *buffer, size_t size, size_t nitems, void *userdata)
{
    struct upload *u = userdata;
    size_t room = size * nitems, left = u->len - u->off;
    size_t n = left < room ? left : room;
    memcpy(buffer, u->data + u->off, n);
    u->off += n;
    return n;
}

static int on_seek(void *userdata, curl_off_t offset, int origin)
{
    struct upload *u = userdata;
    if (origin != SEEK_SET || offset < 0 || (size_t)offset > u->len)
        return CURL_SEEKFUNC_CANTSEEK;
    u->off = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

/* The text between <tag> and </tag> in xml from *from on (NULL: not there); *from moves past it. */
static char *xml_value(const char *xml, const char *tag, const char **from)
{
    if (!xml)
        return NULL;
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = strstr(from && *from ? *from : xml, open);
    if (!a)
        return NULL;
    a += strlen(open);
    const char *z = strstr(a, close);
    if (!z)
        return NULL;
    if (from)
        *from = z + strlen(close);
    char *v = strndup(a, (size_t)(z - a));
    if (!v)
        return NULL;
    /* The five entities XML may use in text. */
    static const struct { const char *ent; char c; } ents[] = {
        { "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' } };
    char *w = v;
    for (const char *r = v; *r;) {
        int done = 0;
        for (size_t i = 0; i < sizeof ents / sizeof ents[0]; i++) {
            size_t l = strlen(ents[i].ent);
            if (strncmp(r, ents[i].ent, l) == 0) {
                *w++ = ents[i].c;
                r += l;
                done = 1;
                break;
            }
        }
        if (!done)
            *w++ = *r++;
    }
    *w = '\0';
    return v;
}

static void set_error_from(struct gj_s3_conn *c, const char *what, long status, const char *xml)
{
    char *code = xml_value(xml, "Code", NULL);
    char *msg = xml_value(xml, "Message", NULL);
    snprintf(c->error, sizeof c->error, "%s: HTTP %ld%s%s%s%s", what, status, code ? " " : "", code ? code : "",
             msg ? ": " : "", msg ? msg : "");
    free(code);
    free(msg);
}

struct request {
    const char *method;
    const char *key;           /* NULL: the bucket */
    const char *query;         /* canonical already */
    const void *body;
    size_t body_len;
    const char *payload_hash;  /* hex; NULL: computed from body */
    const char *content_type;
    const char *range;         /* "bytes=a-b" */
    const char *if_match;
    struct body *answer;
    char *etag_out;            /* GJ_S3_ETAG_MAX: the answer's ETag */
    uint64_t *length_out;      /* the answer's Content-Length (HEAD) */
};

struct header_seen {
    char *etag;
    uint64_t *length;
    uint64_t *total;           /* Content-Range's total */
};

static size_t on_header(char *buffer, size_t size, size_t nitems, void *userdata)
{
    struct header_seen *h = userdata;
    size_t n = size * nitems;
    char line[512];
    size_t l = n < sizeof line - 1 ? n : sizeof line - 1;
    memcpy(line, buffer, l);
    line[l] = '\0';
    line[strcspn(line, "\r\n")] = '\0';
    if (h->etag && strncasecmp(line, "ETag:", 5) == 0) {
        const char *v = line + 5;
        while (*v == ' ')
            v++;
        snprintf(h->etag, GJ_S3_ETAG_MAX, "%.*s", GJ_S3_ETAG_MAX - 1, v);
    } else if (h->length && strncasecmp(line, "Content-Length:", 15) == 0) {
        *h->length = strtoull(line + 15, NULL, 10);
    } else if (h->total && strncasecmp(line, "Content-Range:", 14) == 0) {
        const char *slash = strrchr(line, '/');
        if (slash && slash[1] != '*')
            *h->total = strtoull(slash + 1, NULL, 10);
    }
    return n;
}

/* One signed request. Returns the HTTP status (> 0) or a GJ_S3_* failure (no answer). */
static long perform(struct gj_s3_conn *c, const struct request *rq, uint64_t *total)
{
    const struct gj_s3 *s3 = c->s3;
    char url[4096], hash[65], sigv4[128];
    if (make_url(s3, rq->key, rq->query, url, sizeof url) != 0) {
        snprintf(c->error, sizeof c->error, "%s: the key is too long", rq->method);
        return GJ_S3_ERROR;
    }
    if (rq->payload_hash)
        snprintf(hash, sizeof hash, "%s", rq->payload_hash);
    else
        sha256_hex(rq->body ? rq->body : "", rq->body ? rq->body_len : 0, hash);
    snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", s3->region);

    CURL *h = c->curl;
    curl_easy_reset(h);
    struct curl_slist *hdrs = NULL, *tmp;
    char line[600];
    int ok = 1;
#define ADD_HEADER(...)                                   \
    do {                                                  \
        snprintf(line, sizeof line, __VA_ARGS__);         \
        if (!(tmp = curl_slist_append(hdrs, line)))       \
            ok = 0;                                       \
        else                                              \
            hdrs = tmp;                                   \
    } while (0)
    ADD_HEADER("x-amz-content-sha256: %s", hash);
    /* No "Expect:" here to save the 100-continue round trip: curl 7.88 signs the empty header
     * it then does not send (SignatureDoesNotMatch, measured against Swift). */
    if (rq->content_type)
        ADD_HEADER("Content-Type: %s", rq->content_type);
    else if (strcmp(rq->method, "POST") == 0)
        ADD_HEADER("Content-Type: application/octet-stream");   /* curl signs its default otherwise */
    if (rq->range)
        ADD_HEADER("Range: %s", rq->range);
    if (rq->if_match)
        ADD_HEADER("If-Match: %s", rq->if_match);
#undef ADD_HEADER
    if (!ok) {
        curl_slist_free_all(hdrs);
        snprintf(c->error, sizeof c->error, "out of memory");
        return GJ_S3_ERROR;
    }
    struct upload up = { rq->body, rq->body_len, 0 };
    struct body scratch = { 0 };
    struct body *answer = rq->answer ? rq->answer : &scratch;
    answer->curl = h;
    answer->status = 0;
    struct header_seen seen = { rq->etag_out, rq->length_out, total };
    if (rq->etag_out)
        rq->etag_out[0] = '\0';

    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4);
    curl_easy_setopt(h, CURLOPT_USERNAME, s3->access_key);
    curl_easy_setopt(h, CURLOPT_PASSWORD, s3->secret_key);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, s3->timeout_s);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (s3->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, s3->ca_file);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, answer);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &seen);
    if (strcmp(rq->method, "PUT") == 0) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, &up);
        curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(h, CURLOPT_SEEKDATA, &up);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->body_len);
    } else if (strcmp(rq->method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body ? (const char *)rq->body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(rq->body ? rq->body_len : 0));
    } else if (strcmp(rq->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(rq->method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
    }
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    /* The handle keeps pointers to the key and secret only until the next reset; the
     * signature it made is not kept anywhere of ours. */
    if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && answer->sink_failed)) {
        snprintf(c->error, sizeof c->error, "%s %s: %s", rq->method, rq->key ? rq->key : s3->bucket,
                 curl_easy_strerror(rc));
        free(scratch.data);
        return rc == CURLE_OUT_OF_MEMORY ? GJ_S3_ERROR : GJ_S3_UNREACHABLE;
    }
    if (answer->sink_failed) {
        snprintf(c->error, sizeof c->error, "%s %s: the reader stopped", rq->method, rq->key ? rq->key : "");
        free(scratch.data);
        return GJ_S3_ERROR;
    }
    if (status >= 300) {
        char what[300];
        snprintf(what, sizeof what, "%s %s", rq->method, rq->key ? rq->key : s3->bucket);
        set_error_from(c, what, status, answer->data);
    } else {
        c->error[0] = '\0';
    }
    free(scratch.data);
    return status;
}

/* An HTTP status as a GJ_S3_* result. */
static int result_of(long status)
{
    if (status < 0)
        return (int)status;
    if (status >= 200 && status < 300)
        return GJ_S3_OK;
    if (status == 404)
        return GJ_S3_NOT_FOUND;
    if (status == 412)
        return GJ_S3_PRECONDITION;
    if (status >= 500 || status == 429)
        return GJ_S3_UNREACHABLE;
    return GJ_S3_ERROR;
}

int gj_s3_put(struct gj_s3_conn *c, const char *key, const void *data, size_t len, const unsigned char *sha256,
              const char *content_type)
{
    char hex[65];
    if (sha256)
        bytes_hex(sha256, 32, hex);
    struct request rq = { .method = "PUT", .key = key, .body = data, .body_len = len,
                          .payload_hash = sha256 ? hex : NULL,
                          .content_type = content_type ? content_type : "application/octet-stream" };
    return result_of(perform(c, &rq, NULL));
}

int gj_s3_multipart_create(struct gj_s3_conn *c, const char *key, const char *content_type,
                           char upload_id[GJ_S3_UPLOAD_ID_MAX])
{
    struct body answer = { 0 };
    struct request rq = { .method = "POST", .key = key, .query = "uploads=",
                          .content_type = content_type ? content_type : "application/octet-stream",
                          .answer = &answer };
    int rc = result_of(perform(c, &rq, NULL));
    if (rc == GJ_S3_OK) {
        char *id = xml_value(answer.data, "UploadId", NULL);
        if (!id || !*id || strlen(id) >= GJ_S3_UPLOAD_ID_MAX) {
            snprintf(c->error, sizeof c->error, "POST %s?uploads: no UploadId in the answer", key);
            rc = GJ_S3_ERROR;
        } else {
            snprintf(upload_id, GJ_S3_UPLOAD_ID_MAX, "%s", id);
        }
        free(id);
    }
    free(answer.data);
    return rc;
}

static int upload_query(const char *upload_id, int part, char *out, size_t out_size)
{
    char enc[GJ_S3_UPLOAD_ID_MAX * 3];
    if (uri_encode(upload_id, 0, enc, sizeof enc) != 0)
        return -1;
    /* Canonical: the parameters sorted by name. */
    int n = part > 0 ? snprintf(out, out_size, "partNumber=%d&uploadId=%s", part, enc)
                     : snprintf(out, out_size, "uploadId=%s", enc);
    return n > 0 && (size_t)n < out_size ? 0 : -1;
}

int gj_s3_multipart_part(struct gj_s3_conn *c, const char *key, const char *upload_id, int n, const void *data,
                         size_t len, const unsigned char *sha256, char etag[GJ_S3_ETAG_MAX])
{
    char query[GJ_S3_UPLOAD_ID_MAX * 3 + 64], hex[65];
    if (n < 1 || n > 10000 || upload_query(upload_id, n, query, sizeof query) != 0) {
        snprintf(c->error, sizeof c->error, "part %d of %s: bad part number or upload id", n, key);
        return GJ_S3_ERROR;
    }
    if (sha256)
        bytes_hex(sha256, 32, hex);
    struct request rq = { .method = "PUT", .key = key, .query = query, .body = data, .body_len = len,
                          .payload_hash = sha256 ? hex : NULL, .etag_out = etag };
    int rc = result_of(perform(c, &rq, NULL));
    if (rc == GJ_S3_OK && !etag[0]) {
        snprintf(c->error, sizeof c->error, "part %d of %s: no ETag in the answer", n, key);
        return GJ_S3_ERROR;
    }
    return rc;
}

int gj_s3_multipart_complete(struct gj_s3_conn *c, const char *key, const char *upload_id,
                             const char (*etags)[GJ_S3_ETAG_MAX], int nparts)
{
    char query[GJ_S3_UPLOAD_ID_MAX * 3 + 64];
    if (nparts < 1 || upload_query(upload_id, 0, query, sizeof query) != 0)
        return GJ_S3_ERROR;
    size_t cap = 128 + (size_t)nparts * (GJ_S3_ETAG_MAX + 80);
    char *xml = malloc(cap);
    if (!xml)
        return GJ_S3_ERROR;
    size_t len = (size_t)snprintf(xml, cap, "<CompleteMultipartUpload>");
    for (int i = 0; i < nparts; i++) {
        /* ETags are quoted hex: nothing in them needs escaping in XML text except '&', '<'. */
        if (strpbrk(etags[i], "&<>")) {
            free(xml);
            return GJ_S3_ERROR;
        }
        len += (size_t)snprintf(xml + len, cap - len, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>",
                                i + 1, etags[i]);
    }
    len += (size_t)snprintf(xml + len, cap - len, "</CompleteMultipartUpload>");
    struct body answer = { 0 };
    struct request rq = { .method = "POST", .key = key, .query = query, .body = xml, .body_len = len,
                          .content_type = "application/xml", .answer = &answer };
    int rc = result_of(perform(c, &rq, NULL));
    /* S3 may answer 200 with an <Error> in the body once the parts are assembled. */
    if (rc == GJ_S3_OK && answer.data && strstr(answer.data, "<Error>")) {
        set_error_from(c, "complete", 200, answer.data);
        rc = GJ_S3_ERROR;
    }
    free(answer.data);
    free(xml);
    return rc;
}

int gj_s3_multipart_abort(struct gj_s3_conn *c, const char *key, const char *upload_id)
{
    char query[GJ_S3_UPLOAD_ID_MAX * 3 + 64];
    if (upload_query(upload_id, 0, query, sizeof query) != 0)
        return GJ_S3_ERROR;
    struct request rq = { .method = "DELETE", .key = key, .query = query };
    int rc = result_of(perform(c, &rq, NULL));
    return rc == GJ_S3_NOT_FOUND ? GJ_S3_OK : rc;   /* already gone */
}

/* "2026-11-29T04:11:21.000Z" as a time_t (UTC). */
static time_t parse_iso8601(const char *s)
{
    struct tm tm = { 0 };
    if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                     &tm.tm_sec) != 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return timegm(&tm);
}

int gj_s3_list_uploads(struct gj_s3_conn *c, const char *prefix, gj_s3_upload_fn fn, void *arg)
{
    char *key_marker = NULL, *id_marker = NULL;
    int rc = GJ_S3_OK, stop = 0;
    while (rc == GJ_S3_OK && !stop) {
        char query[4096], p_enc[1024] = "", k_enc[2048] = "", i_enc[GJ_S3_UPLOAD_ID_MAX * 3] = "";
        if ((prefix && uri_encode(prefix, 0, p_enc, sizeof p_enc) != 0) ||
            (key_marker && uri_encode(key_marker, 0, k_enc, sizeof k_enc) != 0) ||
            (id_marker && uri_encode(id_marker, 0, i_enc, sizeof i_enc) != 0)) {
            rc = GJ_S3_ERROR;
            break;
        }
        /* Sorted by name: key-marker, prefix, upload-id-marker, uploads. */
        int n = snprintf(query, sizeof query, "%s%s%s%s%s%s%s%s%s", key_marker ? "key-marker=" : "",
                         key_marker ? k_enc : "", key_marker ? "&" : "", prefix ? "prefix=" : "",
                         prefix ? p_enc : "", prefix ? "&" : "", id_marker ? "upload-id-marker=" : "",
                         id_marker ? i_enc : "", id_marker ? "&uploads=" : "uploads=");
        if (n < 0 || (size_t)n >= sizeof query) {
            rc = GJ_S3_ERROR;
            break;
        }
        struct body answer = { 0 };
        struct request rq = { .method = "GET", .query = query, .answer = &answer };
        rc = result_of(perform(c, &rq, NULL));
        if (rc == GJ_S3_OK) {
            const char *at = answer.data;
            char *upload;
            while (!stop && (upload = xml_value(answer.data, "Upload", &at))) {
                char *k = xml_value(upload, "Key", NULL), *id = xml_value(upload, "UploadId", NULL);
                char *when = xml_value(upload, "Initiated", NULL);
                if (k && id)
                    stop = fn(k, id, parse_iso8601(when), arg) != 0;
                free(k);
                free(id);
                free(when);
                free(upload);
            }
            char *truncated = xml_value(answer.data, "IsTruncated", NULL);
            int more = truncated && strcmp(truncated, "true") == 0;
            free(truncated);
            free(key_marker);
            free(id_marker);
            key_marker = more ? xml_value(answer.data, "NextKeyMarker", NULL) : NULL;
            id_marker = more ? xml_value(answer.data, "NextUploadIdMarker", NULL) : NULL;
            if (!key_marker || !*key_marker)
                stop = 1;
        }
        free(answer.data);
    }
    free(key_marker);
    free(id_marker);
    return rc;
}

int gj_s3_list_objects(struct gj_s3_conn *c, const char *prefix, gj_s3_object_fn fn, void *arg)
{
    char *token = NULL;
    int rc = GJ_S3_OK, stop = 0;
    while (rc == GJ_S3_OK && !stop) {
        char query[4096], p_enc[1024] = "", t_enc[2048] = "";
        if ((prefix && uri_encode(prefix, 0, p_enc, sizeof p_enc) != 0) ||
            (token && uri_encode(token, 0, t_enc, sizeof t_enc) != 0)) {
            rc = GJ_S3_ERROR;
            break;
        }
        /* Sorted by name: continuation-token, list-type, prefix. */
        int n = snprintf(query, sizeof query, "%s%s%slist-type=2%s%s", token ? "continuation-token=" : "",
                         token ? t_enc : "", token ? "&" : "", prefix ? "&prefix=" : "", prefix ? p_enc : "");
        if (n < 0 || (size_t)n >= sizeof query) {
            rc = GJ_S3_ERROR;
            break;
        }
        struct body answer = { 0 };
        struct request rq = { .method = "GET", .query = query, .answer = &answer };
        rc = result_of(perform(c, &rq, NULL));
        if (rc == GJ_S3_OK) {
            const char *at = answer.data;
            char *item;
            while (!stop && (item = xml_value(answer.data, "Contents", &at))) {
                char *k = xml_value(item, "Key", NULL), *size = xml_value(item, "Size", NULL);
                if (k)
                    stop = fn(k, size ? strtoull(size, NULL, 10) : 0, arg) != 0;
                free(k);
                free(size);
                free(item);
            }
            char *truncated = xml_value(answer.data, "IsTruncated", NULL);
            int more = truncated && strcmp(truncated, "true") == 0;
            free(truncated);
            free(token);
            token = more ? xml_value(answer.data, "NextContinuationToken", NULL) : NULL;
            if (!token || !*token)
                stop = 1;
        }
        free(answer.data);
    }
    free(token);
    return rc;
}

int gj_s3_get(struct gj_s3_conn *c, const char *key, uint64_t offset, uint64_t len, const char *if_match,
              gj_s3_sink_fn sink, void *arg, uint64_t *total)
{
    char range[64];
    int ranged = offset > 0 || len > 0;
    if (len > 0)
        snprintf(range, sizeof range, "bytes=%llu-%llu", (unsigned long long)offset,
                 (unsigned long long)(offset + len - 1));
    else
        snprintf(range, sizeof range, "bytes=%llu-", (unsigned long long)offset);
    struct body answer = { .sink = sink, .arg = arg };
    struct request rq = { .method = "GET", .key = key, .range = ranged ? range : NULL, .if_match = if_match,
                          .answer = &answer };
    uint64_t length = 0, whole = 0;
    rq.length_out = &length;
    long status = perform(c, &rq, &whole);
    free(answer.data);
    if (total)
        *total = whole ? whole : (status == 200 ? length : 0);
    if (status == 416)   /* a range past the end: nothing to read */
        return GJ_S3_OK;
    return result_of(status);
}

int gj_s3_head(struct gj_s3_conn *c, const char *key, uint64_t *size, char etag[GJ_S3_ETAG_MAX])
{
    char tag[GJ_S3_ETAG_MAX];
    uint64_t length = 0;
    struct request rq = { .method = "HEAD", .key = key, .etag_out = etag ? etag : tag, .length_out = &length };
    int rc = result_of(perform(c, &rq, NULL));
    if (rc == GJ_S3_NOT_FOUND)
        snprintf(c->error, sizeof c->error, "HEAD %s: no such object", key);
    if (size)
        *size = length;
    return rc;
}

int gj_s3_delete(struct gj_s3_conn *c, const char *key)
{
    struct request rq = { .method = "DELETE", .key = key };
    int rc = result_of(perform(c, &rq, NULL));
    return rc == GJ_S3_NOT_FOUND ? GJ_S3_OK : rc;
}

static int hmac(const void *key, size_t key_len, const char *msg, unsigned char out[32])
{
    unsigned int n = 0;
    return HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, strlen(msg), out, &n) && n == 32
               ? 0 : -1;
}

char *gj_s3_presign_get(const struct gj_s3 *s3, const char *key, long expires_s, time_t now,
                        const char *response_content_disposition)
{
    if (expires_s < 1 || expires_s > 604800)
        return NULL;
    struct tm tm;
    if (!gmtime_r(&now, &tm))
        return NULL;
    char date[9], stamp[17];
    strftime(date, sizeof date, "%Y%m%d", &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    char scope[128], cred[512], cred_enc[1024], path[2200], host[512], disp_enc[1024] = "";
    snprintf(scope, sizeof scope, "%s/%s/s3/aws4_request", date, s3->region);
    snprintf(cred, sizeof cred, "%s/%s", s3->access_key, scope);
    if (uri_encode(cred, 0, cred_enc, sizeof cred_enc) != 0 || object_path(s3, key, path, sizeof path) != 0 ||
        host_for(s3, host, sizeof host) != 0 ||
        (response_content_disposition &&
         uri_encode(response_content_disposition, 0, disp_enc, sizeof disp_enc) != 0))
        return NULL;
    /* The query, canonical: sorted by name. */
    char query[3072];
    int n = snprintf(query, sizeof query,
                     "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%s&X-Amz-Date=%s&X-Amz-Expires=%ld"
                     "&X-Amz-SignedHeaders=host%s%s",
                     cred_enc, stamp, expires_s, response_content_disposition ? "&response-content-disposition=" : "",
                     disp_enc);
    if (n < 0 || (size_t)n >= sizeof query)
        return NULL;
    size_t creq_cap = strlen(path) + strlen(query) + strlen(host) + 128;
    char *creq = malloc(creq_cap);
    if (!creq)
        return NULL;
    snprintf(creq, creq_cap, "GET\n%s\n%s\nhost:%s\n\nhost\nUNSIGNED-PAYLOAD", path, query, host);
    char creq_hash[65];
    sha256_hex(creq, strlen(creq), creq_hash);
    free(creq);
    char to_sign[512];
    snprintf(to_sign, sizeof to_sign, "AWS4-HMAC-SHA256\n%s\n%s\n%s", stamp, scope, creq_hash);
    size_t klen = strlen(s3->secret_key) + 5;
    char *k = malloc(klen);
    if (!k)
        return NULL;
    snprintf(k, klen, "AWS4%s", s3->secret_key);
    unsigned char k_date[32], k_region[32], k_service[32], k_signing[32], sig[32];
    int bad = hmac(k, strlen(k), date, k_date) || hmac(k_date, 32, s3->region, k_region) ||
              hmac(k_region, 32, "s3", k_service) || hmac(k_service, 32, "aws4_request", k_signing) ||
              hmac(k_signing, 32, to_sign, sig);
    OPENSSL_cleanse(k, klen);
    free(k);
    OPENSSL_cleanse(k_signing, sizeof k_signing);
    if (bad)
        return NULL;
    char sig_hex[65];
    bytes_hex(sig, 32, sig_hex);
    size_t cap = strlen(s3->scheme) + strlen(host) + strlen(path) + strlen(query) + 100;
    char *url = malloc(cap);
    if (url)
        snprintf(url, cap, "%s%s%s?%s&X-Amz-Signature=%s", s3->scheme, host, path, query, sig_hex);
    return url;
}

/* One "name = value" line of a credentials file, trimmed. 1 when it is name. */
static int ini_value(char *line, const char *name, char **value)
{
    char *eq = strchr(line, '=');
    if (!eq)
        return 0;
    char *end = eq;
    while (end > line && isspace((unsigned char)end[-1]))
        end--;
    char *start = line;
    while (isspace((unsigned char)*start))
        start++;
    if ((size_t)(end - start) != strlen(name) || strncmp(start, name, strlen(name)) != 0)
        return 0;
    char *v = eq + 1;
    while (isspace((unsigned char)*v))
        v++;
    size_t l = strlen(v);
    while (l > 0 && isspace((unsigned char)v[l - 1]))
        v[--l] = '\0';
    *value = v;
    return 1;
}

int gj_s3_read_credentials(const char *path, const char *profile, char *key, size_t key_size, char *secret,
                           size_t secret_size, char *why, size_t why_size)
{
    if (gj_secret_file_check(path, why, why_size) != 0)
        return -1;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, why_size, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    char section[128];
    snprintf(section, sizeof section, "[%s]", profile ? profile : "default");
    char line[1024];
    int in = 0, got_key = 0, got_secret = 0;
    while (fgets(line, sizeof line, f)) {
        char *s = line;
        while (isspace((unsigned char)*s))
            s++;
        s[strcspn(s, "\r\n")] = '\0';
        if (*s == '[') {
            size_t l = strlen(s);
            while (l > 0 && isspace((unsigned char)s[l - 1]))
                s[--l] = '\0';
            in = strcmp(s, section) == 0;
            continue;
        }
        char *v;
        if (!in || *s == '#' || *s == ';')
            continue;
        if (ini_value(s, "aws_access_key_id", &v) && strlen(v) < key_size) {
            snprintf(key, key_size, "%s", v);
            got_key = *v != '\0';
        } else if (ini_value(s, "aws_secret_access_key", &v) && strlen(v) < secret_size) {
            snprintf(secret, secret_size, "%s", v);
            got_secret = *v != '\0';
        }
    }
    OPENSSL_cleanse(line, sizeof line);
    fclose(f);
    if (!got_key || !got_secret) {
        snprintf(why, why_size, "%s: no aws_access_key_id and aws_secret_access_key under %s", path, section);
        OPENSSL_cleanse(key, key_size);
        OPENSSL_cleanse(secret, secret_size);
        return -1;
    }
    return 0;
}
