/*
 * onnx_log.c — the ONNX runtime's notes (onnx_log.h): formatted here, handed to the hook the
 * process set, or written to stderr in one write so concurrent sessions never interleave.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "infer/onnx/onnx_log.h"

static _Atomic(onnx_log_fn) log_hook;

void onnx_set_log(onnx_log_fn fn)
{
    atomic_store(&log_hook, fn);
}

void onnx_log(enum onnx_log_level level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    onnx_log_fn fn = atomic_load(&log_hook);
    if (fn) {
        fn(level, msg);
        return;
    }
    char line[1100];
    int n = snprintf(line, sizeof line, "onnx %s: %s\n", level == ONNX_LOG_INFO ? "info" : "debug", msg);
    if (n > (int)sizeof line - 1)
        n = (int)sizeof line - 1;
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;   /* nowhere else to say it */
}
