/*
 * json_schema_value.h — JSON values as JSON Schema sees them, and how a value is
 * quoted in a message (json_schema_value.c). Private to the validator's files.
 */
#ifndef GJ_JSON_SCHEMA_VALUE_H
#define GJ_JSON_SCHEMA_VALUE_H

#include <stddef.h>
#include <jansson.h>

int gjs_num_cmp(const json_t *a, const json_t *b);      /* -1, 0, 1; exact */
int gjs_is_multiple(const json_t *v, const json_t *m);  /* m > 0 */
json_int_t gjs_count_of(const json_t *v);               /* a count keyword's value */
int gjs_same(const json_t *a, const json_t *b);         /* JSON Schema's equality */
/* 1 with dup set when two items of arr are equal, 0 when none are, -1 out of memory. */
int gjs_find_duplicate(const json_t *arr, size_t dup[2]);
size_t gjs_utf8_length(const char *s, size_t n);        /* code points */
size_t gjs_utf8_trim(const char *buf, size_t len);
size_t gjs_append_whole(char *buf, size_t cap, size_t len, const char *text, size_t n);
const char *gjs_clip(const char *s, size_t n, char *buf, size_t cap);
const char *gjs_format_number(const json_t *v, char *buf, size_t cap);
const char *gjs_describe_value(const json_t *v, char *buf, size_t cap);
const char *gjs_describe_list(const json_t *list, char *out, size_t cap);

#endif
