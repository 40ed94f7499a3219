/*
 * callback_policy.h — which callback URLs the service may call (issue 15, webhooks).
 *
 * The admin lists the hosts (`--callback-allow host[:port],...`); nothing else is ever
 * called. A host entry without a port allows any port. Even an allowed host is called only
 * at public addresses: loopback, private, link-local, unique-local, multicast, CGNAT and
 * unspecified addresses are refused (no SSRF into the service's own network) unless the
 * admin says `--callback-allow-private`; an IPv6 form carrying an IPv4 address (mapped,
 * translated, compatible, NAT64, 6to4, Teredo) is judged by that IPv4 address. Names are resolved once per delivery and the
 * connection is pinned to the address that was checked (webhook_post.c), so a DNS answer
 * that changes between the check and the call cannot redirect it. Pure code, unit tested
 * (tests/unit/test_workflow_units.c).
 */
#ifndef GJ_CALLBACK_POLICY_H
#define GJ_CALLBACK_POLICY_H

#include <stddef.h>
#include <sys/socket.h>

#define GJ_CALLBACK_HOSTS_MAX 64
#define GJ_CALLBACK_URL_MAX 2048

struct gj_host_entry {
    char host[256];            /* lower case; an IPv6 address without its brackets */
    int port;                  /* 0: any */
};

struct gj_host_list {
    struct gj_host_entry entries[GJ_CALLBACK_HOSTS_MAX];
    int n;
};

/* "host[:port],..." (spaces around entries allowed; "" is an empty list). 0, or -1 with
 * why (a sentence naming the bad entry). */
int gj_host_list_parse(const char *text, struct gj_host_list *out, char *why, size_t n);

/* A callback URL, split. */
struct gj_callback_target {
    int https;                 /* 0: http */
    char host[256];            /* lower case; IPv6 without brackets */
    int port;                  /* explicit or the scheme's default */
    int host_is_ip;            /* an address literal */
};

/* http:// or https://, a host (name, IPv4, [IPv6]), an optional port, an optional path and
 * query; no user information, no fragment, no control characters or spaces, at most
 * GJ_CALLBACK_URL_MAX bytes. 0, or -1 with why. */
int gj_callback_url_parse(const char *url, struct gj_callback_target *t, char *why, size_t n);

/* Whether the allow list names the target's host (and port, when the entry has one). */
int gj_host_list_allows(const struct gj_host_list *l, const struct gj_callback_target *t);

/* NULL when the address may be called, else what it is ("loopback", "private", ...). */
const char *gj_address_restricted(const struct sockaddr *sa);

/* The submit-time check of a callback URL against the admin's settings: parses it, checks
 * the allow list and, for an address literal, the address. 0, or -1 with why. */
int gj_callback_check(const char *url, const char *allow_text, int allow_private,
                      struct gj_callback_target *t, char *why, size_t n);

#endif
