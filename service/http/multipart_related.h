/*
 * multipart_related.h — a streaming MIME multipart parser (RFC 2046 §5.1) for
 * multipart/related (DICOMweb STOW-RS, PS3.18 §8.6) and multipart/form-data
 * (RFC 7578) bodies.
 *
 * Bytes are fed in chunks of any size (a boundary may be split across chunks);
 * each part's headers are parsed and handed over before its body, and the body
 * is passed on as it arrives, never collected. The preamble and the epilogue
 * are ignored. Input is network-facing: header sizes, header counts, parts and
 * transport padding are bounded; anything malformed stops the parser with a
 * message, never a crash.
 */
#ifndef GJ_MULTIPART_RELATED_H
#define GJ_MULTIPART_RELATED_H

#include <stddef.h>
#include <stdint.h>

/* RFC 2046 allows 70 characters; real clients send more (Orthanc's STOW-RS client:
 * 73), so up to 200 are taken. */
#define GJ_MPR_BOUNDARY_MAX 200
#define GJ_MPR_MAX_HEADERS 32           /* per part */
#define GJ_MPR_HEADER_BYTES 16384       /* all header lines of a part together */
#define GJ_MPR_DEFAULT_MAX_PARTS 10000

/* The headers of one part. Names are as sent; look them up case-insensitively. */
struct gj_mpr_part {
    unsigned index;                     /* 0-based */
    size_t n_headers;
    const char *names[GJ_MPR_MAX_HEADERS];
    const char *values[GJ_MPR_MAX_HEADERS];   /* trimmed, folded lines joined by a space */
};

/* Callbacks return 0 to go on, -1 to stop (gj_mpr_feed then returns -1 and
 * gj_mpr_error() says "stopped by the receiver" unless the callback set a
 * message with gj_mpr_fail()). Any may be NULL. */
struct gj_mpr_callbacks {
    int (*part_begin)(void *ud, const struct gj_mpr_part *part);
    int (*part_data)(void *ud, const char *data, size_t len);
    int (*part_end)(void *ud);
};

struct gj_mpr;

/* boundary: 1..GJ_MPR_BOUNDARY_MAX characters of RFC 2046 bchars (no CR, LF or
 * quote; not ending with a space). NULL when the boundary is not valid or memory
 * is short. */
struct gj_mpr *gj_mpr_new(const char *boundary, const struct gj_mpr_callbacks *cb, void *ud);
void gj_mpr_free(struct gj_mpr *p);
/* Largest number of parts accepted (default GJ_MPR_DEFAULT_MAX_PARTS). */
void gj_mpr_set_max_parts(struct gj_mpr *p, unsigned max_parts);

/* Feeds the next bytes. 0, or -1 on malformed input or a callback's -1; once
 * -1, every later call returns -1. */
int gj_mpr_feed(struct gj_mpr *p, const char *data, size_t len);
/* The body ended: 0 when the closing boundary was seen, else -1 with a message
 * (a part cut short gets no part_end). */
int gj_mpr_finish(struct gj_mpr *p);
/* Why the parser stopped ("" while it has not). */
const char *gj_mpr_error(const struct gj_mpr *p);
/* Lets a callback give the reason it returns -1. */
void gj_mpr_fail(struct gj_mpr *p, const char *message);
/* 1 when the closing boundary was seen. */
int gj_mpr_complete(const struct gj_mpr *p);
unsigned gj_mpr_parts(const struct gj_mpr *p);

/* The boundary parameter of a multipart Content-Type value into out: 0, or -1 with
 * *why saying what is wrong with it (for a 400 naming Content-Type). */
int gj_mpr_boundary(const char *content_type, char out[GJ_MPR_BOUNDARY_MAX + 1], const char **why);

/* A header of a part by name (case-insensitive), NULL when absent. */
const char *gj_mpr_header(const struct gj_mpr_part *part, const char *name);

/* ---- header values (Content-Type, Content-Disposition) ---- */

/* 1 when the media type of a header value (before ';', case-insensitive,
 * surrounding spaces ignored) is type, e.g. "multipart/related". */
int gj_mime_type_is(const char *value, const char *type);
/* A parameter of a header value (name case-insensitive; quoted strings with
 * backslash escapes undone): 1 found (copied into out), 0 absent, -1 malformed
 * or longer than cap - 1. */
int gj_mime_param(const char *value, const char *name, char *out, size_t cap);

#endif
