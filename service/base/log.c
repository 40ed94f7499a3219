#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "service/base/log.h"

/* Atomic: /v2/logging changes it while other threads log. */
static _Atomic int min_level = GJ_LOG_INFO;
static const char *const level_names[] = { "debug", "info", "warn", "error" };

void gj_log_set_level(enum gj_log_level level)
{
    atomic_store(&min_level, (int)level);
}

enum gj_log_level gj_log_level(void)
{
    return (enum gj_log_level)atomic_load(&min_level);
}

int gj_log_parse_level(const char *name, enum gj_log_level *level)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, level_names[i]) == 0) {
            *level = (enum gj_log_level)i;
            return 0;
        }
    return -1;
}

void gj_log_fields(enum gj_log_level level, const char *component, const char *msg, json_t *fields)
{
    if ((int)level < atomic_load(&min_level)) {
        json_decref(fields);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char stamp[64];
    snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(ts.tv_nsec / 1000000));
    json_t *line = json_pack("{s:s, s:s, s:s, s:s}", "ts", stamp, "level", level_names[level],
                             "component", component, "msg", msg ? msg : "");
    if (!line) {
        json_decref(fields);
        return;
    }
    if (fields)
        json_object_update(line, fields);
    json_decref(fields);
    char *text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(line);
    if (!text)
        return;
    size_t n = strlen(text);
    text[n] = '\n';   /* the terminating NUL becomes the newline: one write() per line */
    ssize_t w = write(STDERR_FILENO, text, n + 1);
    (void)w;
    free(text);
}

void gj_logv(enum gj_log_level level, const char *component, const char *fmt, ...)
{
    if ((int)level < atomic_load(&min_level))
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gj_log_fields(level, component, msg, NULL);
}
