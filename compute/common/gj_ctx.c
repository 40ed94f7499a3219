/* Hook wrappers of struct gj_ctx: a host may leave any hook NULL. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/gj_kind.h"

const struct gj_input *gj_job_input(const struct gj_job *job, const char *name)
{
    for (size_t i = 0; i < job->n_inputs; i++)
        if (strcmp(job->inputs[i].name, name) == 0)
            return &job->inputs[i];
    return NULL;
}

void gj_progress(struct gj_ctx *ctx, double fraction, const char *message)
{
    if (fraction < 0)
        fraction = 0;
    if (fraction > 1)
        fraction = 1;
    if (ctx && ctx->progress)
        ctx->progress(ctx, fraction, message);
}

int gj_cancelled(struct gj_ctx *ctx)
{
    return ctx && ctx->cancelled ? ctx->cancelled(ctx) : 0;
}

int gj_record_environment(struct gj_ctx *ctx, const char *key, json_t *value)
{
    if (ctx && ctx->record)
        return ctx->record(ctx, key, value);
    json_decref(value);
    return 0;
}

void gj_logf(struct gj_ctx *ctx, const char *fmt, ...)
{
    if (!ctx || !ctx->log)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    ctx->log(ctx, line);
}
