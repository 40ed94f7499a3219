/*
 * callback_policy.c — the allow list of callback hosts, callback URLs, and the addresses a
 * callback may never reach unless the admin allows private addresses (callback_policy.h).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "service/jobs/callback_policy.h"

static int fail(char *why, size_t n, const char *fmt, const char *arg)
{
    snprintf(why, n, fmt, arg);
    return -1;
}

/* A DNS name: labels of letters, digits and '-', not starting or ending with '-'. */
static int is_hostname(const char *s)
{
    size_t len = strlen(s), label = 0;
    if (len == 0 || len > 253)
        return 0;
    for (size_t i = 0; i <= len; i++) {
        char c = s[i];
        if (c == '.' || c == '\0') {
            if (label == 0 || label > 63 || s[i - 1] == '-')
                return 0;
            label = 0;
            continue;
        }
        if (!isalnum((unsigned char)c) && c != '-')
            return 0;
        if (label == 0 && c == '-')
            return 0;
        label++;
    }
    return 1;
}

static int is_ip(const char *s)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* "65535" -> 65535; -1 when not a port. */
static int parse_port(const char *s, size_t len)
{
    if (len == 0 || len > 5)
        return -1;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v >= 1 && v <= 65535 ? v : -1;
}

/* "host", "host:port", "[v6]", "[v6]:port" in s[0..len) into host (lower case) and port
 * (0 when absent). 0 or -1. */
static int split_host_port(const char *s, size_t len, char host[256], int *port)
{
    const char *h = s, *rest;
    size_t hlen;
    if (len && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close)
            return -1;
        h = s + 1;
        hlen = (size_t)(close - h);
        rest = close + 1;
    } else {
        const char *colon = memchr(s, ':', len);
        hlen = colon ? (size_t)(colon - s) : len;
        rest = s + hlen;
    }
    size_t rlen = len - (size_t)(rest - s);
    if (hlen == 0 || hlen >= 256)
        return -1;
    for (size_t i = 0; i < hlen; i++)
        host[i] = (char)tolower((unsigned char)h[i]);
    host[hlen] = '\0';
    *port = 0;
    if (rlen > 0 && (rest[0] != ':' || (*port = parse_port(rest + 1, rlen - 1)) < 0))
        return -1;
    if (s[0] == '[' ? inet_pton(AF_INET6, host, (unsigned char[16]){ 0 }) != 1 : !is_hostname(host) && !is_ip(host))
        return -1;
    return 0;
}

int gj_host_list_parse(const char *text, struct gj_host_list *out, char *why, size_t n)
{
    memset(out, 0, sizeof *out);
    const char *p = text ? text : "";
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        size_t len = strcspn(p, ",");
        while (len && p[len - 1] == ' ')
            len--;
        char entry[300];
        snprintf(entry, sizeof entry, "%.*s", (int)(len < 299 ? len : 299), p);
        if (out->n == GJ_CALLBACK_HOSTS_MAX)
            return fail(why, n, "more than 64 hosts (at '%s')", entry);
        struct gj_host_entry *e = &out->entries[out->n];
        if (split_host_port(p, len, e->host, &e->port) != 0)
            return fail(why, n, "'%s' is not HOST or HOST:PORT", entry);
        out->n++;
        p += strcspn(p, ",");
    }
    return 0;
}

int gj_host_list_allows(const struct gj_host_list *l, const struct gj_callback_target *t)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->entries[i].host, t->host) == 0 && (l->entries[i].port == 0 || l->entries[i].port == t->port))
            return 1;
    return 0;
}

int gj_callback_url_parse(const char *url, struct gj_callback_target *t, char *why, size_t n)
{
    memset(t, 0, sizeof *t);
    size_t len = strlen(url);
    if (len == 0 || len > GJ_CALLBACK_URL_MAX)
        return fail(why, n, "%s", "a callback URL is 1 to 2048 characters");
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)url[i] <= 0x20 || (unsigned char)url[i] >= 0x7f)
            return fail(why, n, "%s", "a callback URL has no spaces, control or non-ASCII characters "
                                      "(percent-encode them)");
    const char *rest;
    if (strncasecmp(url, "https://", 8) == 0) {
        t->https = 1;
        rest = url + 8;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        rest = url + 7;
    } else {
        return fail(why, n, "%s", "a callback URL starts with https:// or http://");
    }
    size_t alen = strcspn(rest, "/?#");
    if (strchr(rest, '#'))
        return fail(why, n, "%s", "a callback URL has no fragment (#...)");
    if (memchr(rest, '@', alen))
        return fail(why, n, "%s", "a callback URL carries no user name or password (user@host)");
    if (split_host_port(rest, alen, t->host, &t->port) != 0)
        return fail(why, n, "%s", "the callback URL's host is not a host name, an IPv4 or a [IPv6] address, "
                                  "with an optional :PORT");
    if (t->port == 0)
        t->port = t->https ? 443 : 80;
    t->host_is_ip = is_ip(t->host);
    return 0;
}

/* IPv4 address a (host order) within prefix p/bits. */
static int in4(uint32_t a, uint32_t p, int bits)
{
    uint32_t mask = bits ? ~0u << (32 - bits) : 0;
    return (a & mask) == (p & mask);
}

static const char *restricted_v4(uint32_t a)
{
    if (in4(a, 0x7f000000, 8))
        return "loopback";
    if (in4(a, 0x0a000000, 8) || in4(a, 0xac100000, 12) || in4(a, 0xc0a80000, 16))
        return "private";
    if (in4(a, 0xa9fe0000, 16))
        return "link-local";
    if (in4(a, 0x64400000, 10))
        return "shared (carrier-grade NAT)";
    if (in4(a, 0x00000000, 8))
        return "unspecified";
    if (in4(a, 0xe0000000, 4))
        return "multicast";
    if (in4(a, 0xf0000000, 4) || in4(a, 0xc0000000, 24) || in4(a, 0xc0000200, 24) || in4(a, 0xc6336400, 24) ||
        in4(a, 0xcb007100, 24) || in4(a, 0xc6120000, 15))
        return "reserved";
    return NULL;
}

static uint32_t v4_at(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* The IPv6 forms that carry an IPv4 address reach, or may be translated to, that address:
 * judged by its rules. Sets *v4 and returns 1 for such a form. */
static int embedded_v4(const unsigned char *b, uint32_t *v4)
{
    static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    static const unsigned char translated[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0 };   /* RFC 2765 */
    static const unsigned char nat64[12] = { 0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };     /* RFC 6052 */
    if (memcmp(b, mapped, 12) == 0 || memcmp(b, translated, 12) == 0 || memcmp(b, nat64, 12) == 0) {
        *v4 = v4_at(b + 12);
        return 1;
    }
    if (b[0] == 0x20 && b[1] == 0x02) {                               /* 6to4, 2002:V4::/48 */
        *v4 = v4_at(b + 2);
        return 1;
    }
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) {     /* Teredo: the client, inverted */
        *v4 = ~v4_at(b + 12);
        return 1;
    }
    return 0;
}

static const char *restricted_v6(const unsigned char *b)
{
    static const unsigned char zero[16] = { 0 };
    uint32_t v4;
    if (embedded_v4(b, &v4))
        return restricted_v4(v4);
    if (memcmp(b, zero, 15) == 0)
        return b[15] == 1 ? "loopback" : "unspecified";
    if (memcmp(b, zero, 12) == 0) {                /* IPv4-compatible (deprecated): never called */
        const char *what = restricted_v4(v4_at(b + 12));
        return what ? what : "reserved";
    }
    if (b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 && b[5] == 1)
        return "private";                          /* local-use NAT64, 64:ff9b:1::/48 (RFC 8215) */
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
        return "link-local";
    if ((b[0] & 0xfe) == 0xfc || (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0))
        return "private";                          /* unique-local, site-local */
    if (b[0] == 0xff)
        return "multicast";
    if ((b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) ||
        (b[0] == 0x01 && b[1] == 0x00 && memcmp(b + 2, zero, 6) == 0))
        return "reserved";                         /* documentation, discard */
    return NULL;
}

const char *gj_address_restricted(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return restricted_v4(ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr));
    if (sa->sa_family == AF_INET6)
        return restricted_v6(((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr);
    return "not an internet";
}

/* The address literal host as a sockaddr; 0, or -1 when it is not one. */
static int literal_address(const char *host, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        return 0;
    }
    return -1;
}

int gj_callback_check(const char *url, const char *allow_text, int allow_private,
                      struct gj_callback_target *t, char *why, size_t n)
{
    struct gj_host_list *allow = malloc(sizeof *allow);
    if (!allow)
        return fail(why, n, "%s", "out of memory");
    int rc = gj_callback_url_parse(url, t, why, n);
    if (rc == 0 && gj_host_list_parse(allow_text, allow, why, n) != 0)
        rc = -1;
    if (rc == 0 && allow->n == 0)
        rc = fail(why, n, "%s", "this server calls no callback URL (its admin allows hosts with --callback-allow)");
    else if (rc == 0 && !gj_host_list_allows(allow, t))
        rc = fail(why, n, "host %s is not one this server may call (--callback-allow)", t->host);
    free(allow);
    struct sockaddr_storage ss;
    const char *what;
    if (rc == 0 && !allow_private && literal_address(t->host, &ss) == 0 &&
        (what = gj_address_restricted((const struct sockaddr *)&ss)) != NULL) {
        snprintf(why, n, "%s is a %s address; this server calls only public addresses "
                         "(its admin may allow others with --callback-allow-private)", t->host, what);
        rc = -1;
    }
    return rc;
}
