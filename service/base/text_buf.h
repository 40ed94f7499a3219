/*
 * text_buf.h — a growing text buffer: the pending bytes of a streamed answer (job events,
 * the portal's events, a followed job log), appended by the route and drained by the
 * response's reader.
 */
#ifndef GJ_TEXT_BUF_H
#define GJ_TEXT_BUF_H

#include <stddef.h>

/* Appends n bytes of data to *buf (length *len, capacity *cap), doubling the capacity as
 * needed and keeping a NUL after the text. 0, or -1 out of memory (nothing appended). */
int gj_text_append(char **buf, size_t *len, size_t *cap, const char *data, size_t n);

#endif
