/*
 * kind_schema.c — each kind's params schema compiled once and kept for the process, so a
 * submit only validates (gj_kind_validate). Start-up compiles every registered kind's
 * (gj_kind_schemas_compile, registry.c); a kind seen first at a submit is compiled then.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/gj_kind.h"
#include "common/json_schema.h"

/* One compiled schema; the list only grows (a kind is static, its schema lives as long). */
struct compiled {
    const struct gj_kind *kind;
    json_t *doc;               /* the schema's JSON, which the compiled form refers to */
    struct gj_schema *schema;
    struct compiled *next;
};

static struct compiled *compiled_list;
static pthread_mutex_t compiled_lock = PTHREAD_MUTEX_INITIALIZER;

/* A kind whose schema cannot be used: the service's fault, never the submitter's (500). */
static struct compiled *refused(struct compiled *c, const struct gj_kind *kind, const char *why,
                                struct gj_error *err)
{
    if (err) {
        gj_error_set(err, "", "internal: the params schema of kind %s: %s", kind->name, why);
        err->status = 500;
    }
    if (c)
        json_decref(c->doc);
    free(c);
    return NULL;
}

static struct compiled *compile(const struct gj_kind *kind, struct gj_error *err)
{
    struct compiled *c = calloc(1, sizeof *c);
    if (!c)
        return refused(NULL, kind, "out of memory", err);
    c->kind = kind;
    json_error_t jerr;
    c->doc = json_loads(kind->params_schema ? kind->params_schema : "true", 0, &jerr);
    if (!c->doc)
        return refused(c, kind, jerr.text, err);
    struct gj_error why = { 0 };
    c->schema = gj_schema_compile(c->doc, &why);
    if (!c->schema) {
        char at[sizeof why.field + sizeof why.message + 8];
        snprintf(at, sizeof at, "%s: %s", why.field, why.message);
        return refused(c, kind, at, err);
    }
    return c;
}

const struct gj_schema *gj_kind_schema(const struct gj_kind *kind, struct gj_error *err)
{
    pthread_mutex_lock(&compiled_lock);
    struct compiled *c = compiled_list;
    while (c && c->kind != kind)
        c = c->next;
    if (!c) {
        c = compile(kind, err);
        if (c) {
            c->next = compiled_list;
            compiled_list = c;
        }
    }
    pthread_mutex_unlock(&compiled_lock);
    return c ? c->schema : NULL;
}
