/*
 * http_parse.h — the HTTP API's pure parsers (http_parse.c): unit tested in
 * tests/unit/test_http_parsing.c, fuzzed by fuzz/http_route_fuzz.c.
 * gj_is_uuid (8-4-4-4-12 hex) is in service/base/uuid.h.
 */
#ifndef GJ_HTTP_PARSE_H
#define GJ_HTTP_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "service/base/uuid.h"

#define GJ_ROUTE_MAX_PARAMS 4   /* WADO-RS frames: study, series, instance, frame list */
#define GJ_PARAM_MAX 256

/* 1 when a Content-Type is application/json or application/...+json. */
int gj_http_is_json_type(const char *content_type);
/* Matches path against a template; fills params (lower-cased for "{id}"). 1 match, 0 not.
 * A parameter matches one path segment; a last one named {completePath} matches the rest of
 * the path, slashes included (CARMIN's /rest/path/{completePath}). */
int gj_http_match_path(const char *tmpl, const char *path, char params[][GJ_PARAM_MAX], int max_params,
                       int *n_params);
/* The matched path parameters of a template: "{id}" must be a UUID, "{name}" pass
 * gj_safe_name(); anything else answers 404 before a handler runs. 1 valid, 0 not. */
int gj_http_params_valid(const char *tmpl, char params[][GJ_PARAM_MAX], int n_params);
/* A decimal of 1 to 19 digits and nothing else (Content-Length, Range bounds): 0, or -1. */
int gj_http_parse_u64(const char *s, size_t len, uint64_t *out);
/* Range header against a size: 1 one satisfiable range [*first, *last]; 0 no
 * usable Range (absent, malformed, several ranges: serve everything); -1 unsatisfiable (416). */
int gj_http_parse_range(const char *hdr, uint64_t size, uint64_t *first, uint64_t *last);
/* Content-Digest (RFC 9530): 1 with the sha-256 member decoded; 0 no sha-256
 * member (other algorithms only); -1 malformed. */
int gj_http_parse_content_digest(const char *hdr, unsigned char sha256[32]);
/* If-None-Match against an ETag (weak comparison, "*" matches). */
int gj_http_etag_match(const char *if_none_match, const char *etag);
/* Job list cursors: base64url of "<created_at>,<id>" with created_at as
 * "YYYY-MM-DDTHH:MM:SS.ffffffZ". 0 or -1. */
int gj_cursor_encode(const char *created_at, const char *id, char *out, size_t cap);
int gj_cursor_decode(const char *cursor, char created_at[40], char id[GJ_UUID_LEN + 1]);
/* 1 when s is an RFC 3339 timestamp PostgreSQL will accept (date, optional time, zone). */
int gj_is_timestamp(const char *s);

#endif
