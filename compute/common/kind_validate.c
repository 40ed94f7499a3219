/* Submit-time validation shared by every kind: schema (compiled once, kind_schema.c), inputs,
 * then the kind's own check. */
#include <stdlib.h>
#include <string.h>

#include "common/gj_kind.h"
#include "common/json_schema.h"

/* "dicom.3" belongs to the spec "dicom" when that spec allows several files. */
static const struct gj_input_spec *spec_for(const struct gj_kind *kind, const char *name)
{
    for (size_t i = 0; i < kind->n_inputs; i++) {
        const struct gj_input_spec *s = &kind->inputs[i];
        size_t n = strlen(s->name);
        if (strcmp(name, s->name) == 0)
            return s;
        if (s->multiple && strncmp(name, s->name, n) == 0 && name[n] == '.' && name[n + 1])
            return s;
    }
    return NULL;
}

int gj_kind_validate(const struct gj_kind *kind, const struct gj_job *job, struct gj_error *err)
{
    const struct gj_schema *schema = gj_kind_schema(kind, err);
    if (!schema || gj_schema_validate(schema, job->params, err))
        return -1;

    for (size_t i = 0; i < job->n_inputs; i++) {
        const char *name = job->inputs[i].name;
        if (!spec_for(kind, name)) {
            gj_error_set(err, "inputs", "input '%s' is not accepted by kind %s", name, kind->name);
            err->status = 422;
            return -1;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(job->inputs[j].name, name) == 0) {
                gj_error_set(err, "inputs", "input '%s' is given twice", name);
                err->status = 422;
                return -1;
            }
    }
    for (size_t i = 0; i < kind->n_inputs; i++) {
        const struct gj_input_spec *s = &kind->inputs[i];
        if (!s->required)
            continue;
        int found = 0;
        for (size_t j = 0; j < job->n_inputs && !found; j++)
            found = spec_for(kind, job->inputs[j].name) == s;
        if (!found) {
            gj_error_set(err, "inputs", "input '%s' is required by kind %s", s->name, kind->name);
            err->status = 422;
            return -1;
        }
    }
    if (kind->validate && kind->validate(job, err)) {
        if (!err->status)
            err->status = 422;
        return -1;
    }
    return 0;
}

uint64_t gj_kind_host_bytes_floor(const struct gj_kind *kind, const struct gj_job *job)
{
    return kind->host_bytes_floor ? kind->host_bytes_floor(job) : 0;
}
