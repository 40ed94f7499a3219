/*
 * log.h — one JSON object per line on stderr: {"ts","level","component","msg",...}.
 * Lines are written with one write() so threads never interleave them.
 */
#ifndef GJ_LOG_H
#define GJ_LOG_H

#include <jansson.h>

/* GJ_LOG_OFF: a level only for gj_log_set_level (nothing is logged; /v2/logging with
 * log_error false). */
enum gj_log_level { GJ_LOG_DEBUG, GJ_LOG_INFO, GJ_LOG_WARN, GJ_LOG_ERROR, GJ_LOG_OFF };

void gj_log_set_level(enum gj_log_level level);
/* The level set now: lines below it are not written. */
enum gj_log_level gj_log_level(void);
int gj_log_parse_level(const char *name, enum gj_log_level *level);

void gj_logv(enum gj_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Logs msg with extra fields (the object is consumed). */
void gj_log_fields(enum gj_log_level level, const char *component, const char *msg, json_t *fields);

#define gj_log_debug(c, ...) gj_logv(GJ_LOG_DEBUG, c, __VA_ARGS__)
#define gj_log_info(c, ...) gj_logv(GJ_LOG_INFO, c, __VA_ARGS__)
#define gj_log_warn(c, ...) gj_logv(GJ_LOG_WARN, c, __VA_ARGS__)
#define gj_log_error(c, ...) gj_logv(GJ_LOG_ERROR, c, __VA_ARGS__)

#endif
