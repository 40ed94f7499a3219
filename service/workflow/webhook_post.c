/*
 * webhook_post.c — one callback call (workflow.h: gj_webhook_post) with libcurl, under the
 * policy of callback_policy.h: the host must be on the allow list now in force, each address it
 * resolves to is checked, and the connection is pinned to the address checked (so a DNS answer
 * that changes between the check and the connection cannot redirect it); no redirect is
 * followed, no proxy is used, and time is bounded. Errors never quote the URL's path or query,
 * which may carry a token.
 */
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <curl/curl.h>

#include "gj_config.h"
#include "service/jobs/callback_policy.h"
#include "service/workflow/workflow.h"

#define RESPONSE_MAX (1u << 20)   /* a receiver's answer is read and dropped, up to this */

static void refuse(struct gj_webhook_outcome *o, int permanent, const char *fmt, const char *a, const char *b)
{
    o->permanent = permanent;
    snprintf(o->error, sizeof o->error, fmt, a, b);
}

/* The first address of t's host that may be called, as text; 0, or -1 with o filled. */
static int pick_address(const struct gj_callback_target *t, int allow_private, char addr[INET6_ADDRSTRLEN],
                        struct gj_webhook_outcome *o)
{
    char port[8];
    snprintf(port, sizeof port, "%d", t->port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
    int rc = getaddrinfo(t->host, port, &hints, &res);
    if (rc != 0) {
        refuse(o, 0, "cannot resolve %s: %s", t->host, gai_strerror(rc));
        return -1;
    }
    const char *why = NULL;
    char first[INET6_ADDRSTRLEN] = "";
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        const void *in = a->ai_family == AF_INET ? (const void *)&((struct sockaddr_in *)(void *)a->ai_addr)->sin_addr
                                                 : (const void *)&((struct sockaddr_in6 *)(void *)a->ai_addr)->sin6_addr;
        if (!inet_ntop(a->ai_family, in, addr, INET6_ADDRSTRLEN))
            continue;
        const char *what = allow_private ? NULL : gj_address_restricted(a->ai_addr);
        if (!what) {
            freeaddrinfo(res);
            return 0;
        }
        if (!why) {
            why = what;
            snprintf(first, sizeof first, "%s", addr);
        }
    }
    freeaddrinfo(res);
    char detail[120];
    snprintf(detail, sizeof detail, "%s is a %s address", first, why ? why : "unusable");
    refuse(o, 1, "refused: %s resolves to no public address (%s; --callback-allow-private allows it)", t->host, detail);
    return -1;
}

static size_t drop_body(char *data, size_t size, size_t n, void *cls)
{
    (void)data;
    size_t *seen = cls;
    *seen += size * n;
    return *seen > RESPONSE_MAX ? 0 : size * n;
}

static int stop_requested(void *cls, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    const atomic_int *stop = cls;
    return stop && atomic_load(stop) ? 1 : 0;
}

/* The request's headers; NULL when out of memory. */
static struct curl_slist *headers_of(const struct gj_webhook_call *call)
{
    char h[3][200];
    snprintf(h[0], sizeof h[0], "webhook-id: %s", call->msg_id);
    snprintf(h[1], sizeof h[1], "webhook-timestamp: %lld", call->timestamp);
    snprintf(h[2], sizeof h[2], "webhook-signature: %s", call->signature);
    struct curl_slist *l = curl_slist_append(NULL, "Content-Type: application/json");
    for (int i = 0; l && i < 3; i++) {
        struct curl_slist *n = curl_slist_append(l, h[i]);
        if (!n)
            curl_slist_free_all(l);
        l = n;
    }
    return l;
}

static void configure(CURL *curl, const struct gj_webhook_call *call, struct curl_slist *hdrs,
                      struct curl_slist *pin, size_t *seen)
{
    curl_easy_setopt(curl, CURLOPT_URL, call->url);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_PROXY, "");
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)(call->timeout_ms < 5000 ? call->timeout_ms : 5000));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)call->timeout_ms);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
    if (call->cacert && call->cacert[0])
        curl_easy_setopt(curl, CURLOPT_CAINFO, call->cacert);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "gpujobd/" GJ_VERSION " (webhook)");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
    if (pin)
        curl_easy_setopt(curl, CURLOPT_RESOLVE, pin);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, call->body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(call->body));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, drop_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, seen);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, stop_requested);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, (void *)call->stop);
}

/* The call itself, to the address checked. */
static void perform(const struct gj_webhook_call *call, const struct gj_callback_target *t, const char *addr,
                    struct gj_webhook_outcome *o)
{
    char pin_text[600];
    snprintf(pin_text, sizeof pin_text, strchr(addr, ':') ? "%s:%d:[%s]" : "%s:%d:%s", t->host, t->port, addr);
    struct curl_slist *pin = t->host_is_ip ? NULL : curl_slist_append(NULL, pin_text);
    struct curl_slist *hdrs = headers_of(call);
    CURL *curl = curl_easy_init();
    size_t seen = 0;
    if (!curl || !hdrs || (!t->host_is_ip && !pin)) {
        refuse(o, 0, "%s%s", "out of memory", "");
    } else {
        configure(curl, call, hdrs, pin, &seen);
        CURLcode rc = curl_easy_perform(curl);
        long status = 0;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        o->status = (int)status;
        if (status >= 200 && status < 300)
            o->delivered = 1;
        else if (status >= 300 && status < 400) {
            o->permanent = 1;
            snprintf(o->error, sizeof o->error, "refused: the receiver answered HTTP %ld, a redirect, which is "
                                                "not followed", status);
        }
        else if (status)
            snprintf(o->error, sizeof o->error, "the receiver answered HTTP %ld", status);
        else
            refuse(o, 0, "%s: %s", t->host, curl_easy_strerror(rc));
    }
    curl_easy_cleanup(curl);
    curl_slist_free_all(hdrs);
    curl_slist_free_all(pin);
}

void gj_webhook_post(const struct gj_webhook_call *call, struct gj_webhook_outcome *o)
{
    memset(o, 0, sizeof *o);
    struct gj_callback_target t;
    struct gj_host_list *allow = malloc(sizeof *allow);
    char why[300];
    if (!allow) {
        refuse(o, 0, "%s%s", "out of memory", "");
        return;
    }
    int ok = gj_callback_url_parse(call->url, &t, why, sizeof why) == 0 &&
             gj_host_list_parse(call->allow, allow, why, sizeof why) == 0;
    if (!ok)
        refuse(o, 1, "refused: %s%s", why, "");
    else if (!gj_host_list_allows(allow, &t))
        refuse(o, 1, "refused: host %s is no longer one this server may call (--callback-allow)%s", t.host, "");
    free(allow);
    char addr[INET6_ADDRSTRLEN];
    if (o->error[0] || pick_address(&t, call->allow_private, addr, o) != 0)
        return;
    perform(call, &t, addr, o);
}
