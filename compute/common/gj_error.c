#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/gj_error.h"

int gj_error_set(struct gj_error *err, const char *field, const char *fmt, ...)
{
    if (!err)
        return -1;
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return -1;
}

int gj_error_status(struct gj_error *err, int status, const char *field, const char *fmt, ...)
{
    if (!err)
        return -1;
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    err->status = status;
    err->transient = status == 503;
    return -1;
}

void gj_error_clear(struct gj_error *err)
{
    if (err)
        memset(err, 0, sizeof *err);
}
