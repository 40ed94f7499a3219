/*
 * job_fields.c — name, labels, callback URL and inputs from other jobs, as a submit gives
 * them; the label filters of a job listing (job_fields.h).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "service/base/uuid.h"
#include "service/jobs/callback_policy.h"
#include "service/jobs/job_fields.h"

int gj_job_field_known(const char *key)
{
    return strcmp(key, "name") == 0 || strcmp(key, "labels") == 0 || strcmp(key, "callback_url") == 0;
}

/* Characters, in code points of valid UTF-8 (jansson checked it), none a control character. */
static size_t text_length(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            return (size_t)-1;
        n += (*p & 0xc0) != 0x80;
    }
    return n;
}

const char *gj_job_name_problem(const char *name)
{
    size_t len = name ? text_length(name) : (size_t)-1;
    return len == 0 || len > GJ_JOB_NAME_MAX ? GJ_JOB_NAME_RULE : NULL;
}

/* A label's key and value (job_fields.h): 0, or -1 with e filled (status, field). */
static int check_label(const char *key, const char *value, int status, const char *field, struct gj_error *e)
{
    size_t klen = strlen(key);
    if (klen == 0 || klen > GJ_LABEL_KEY_MAX)
        return gj_error_status(e, status, field, "a label's key is 1 to 63 characters");
    for (size_t i = 0; i < klen; i++)
        if (!isalnum((unsigned char)key[i]) && !strchr("._-/", key[i]))
            return gj_error_status(e, status, field, "a label's key holds letters, digits and . _ - / only");
    size_t vlen = text_length(value);
    if (vlen == (size_t)-1 || vlen > GJ_LABEL_VALUE_MAX)
        return gj_error_status(e, status, field,
                               "a label's value is a string of at most 255 characters without control characters");
    return 0;
}

static int read_labels(json_t *labels, struct gj_error *e)
{
    if (!json_is_object(labels))
        return gj_error_status(e, 422, "labels", "labels is an object of label to string value");
    if (json_object_size(labels) > GJ_LABELS_MAX)
        return gj_error_status(e, 422, "labels", "at most %d labels", GJ_LABELS_MAX);
    const char *k;
    json_t *v;
    json_object_foreach(labels, k, v) {
        char field[100];
        snprintf(field, sizeof field, "labels.%.60s", k);
        if (!json_is_string(v))
            return gj_error_status(e, 422, field, "a label's value is a string");
        if (check_label(k, json_string_value(v), 422, field, e) != 0)
            return -1;
    }
    return 0;
}

int gj_job_fields_read(json_t *body, const struct gj_config *cfg, struct gj_job_fields *f,
                       struct gj_error *e)
{
    memset(f, 0, sizeof *f);
    json_t *name = json_object_get(body, "name"), *labels = json_object_get(body, "labels"),
           *cb = json_object_get(body, "callback_url");
    if (name && !json_is_null(name)) {
        const char *why = gj_job_name_problem(json_string_value(name));
        if (why)
            return gj_error_status(e, 422, "name", "%s", why);
        f->name = json_string_value(name);
    }
    if (labels && !json_is_null(labels)) {
        if (read_labels(labels, e) != 0)
            return -1;
        f->labels = labels;
    }
    if (cb && !json_is_null(cb)) {
        struct gj_callback_target t;
        char why[300];
        if (!json_is_string(cb))
            return gj_error_status(e, 422, "callback_url", "callback_url is an https:// or http:// URL");
        if (gj_callback_check(json_string_value(cb), cfg->callback_allow, cfg->callback_allow_private, &t, why,
                              sizeof why) != 0)
            return gj_error_status(e, 422, "callback_url", "%s", why);
        f->callback_url = json_string_value(cb);
    }
    return 0;
}

int gj_input_ref_parse(const char *input, json_t *v, const char **job, const char **output,
                       struct gj_error *e)
{
    if (!json_is_object(v))
        return 0;
    char field[160];
    snprintf(field, sizeof field, "inputs.%.100s", input);
    json_t *j = json_object_get(v, "job"), *o = json_object_get(v, "output");
    if (json_object_size(v) != 2 || !json_is_string(j) || !json_is_string(o))
        return gj_error_status(e, 422, field, "an input from another job is {\"job\": ID, \"output\": NAME}");
    if (!gj_is_uuid(json_string_value(j)))
        return gj_error_status(e, 422, field, "job is the id of a job of yours");
    if (!gj_safe_name(json_string_value(o)) || strlen(json_string_value(o)) > 255)
        return gj_error_status(e, 422, field, "output is the plain name of an output file");
    *job = json_string_value(j);
    *output = json_string_value(o);
    return 1;
}

int gj_label_filter_add(json_t *filter, const char *value, struct gj_error *e)
{
    const char *eq = value ? strchr(value, '=') : NULL;
    char k[GJ_LABEL_KEY_MAX + 2];
    if (!eq || (size_t)(eq - value) > GJ_LABEL_KEY_MAX)
        return gj_error_status(e, 400, "label", "label is KEY=VALUE, a key of 1 to 63 characters");
    snprintf(k, sizeof k, "%.*s", (int)(eq - value), value);
    if (check_label(k, eq + 1, 400, "label", e) != 0)
        return -1;
    if (json_object_size(filter) >= GJ_LABELS_MAX)
        return gj_error_status(e, 400, "label", "at most 32 label filters");
    json_t *v = json_string(eq + 1);
    if (!v)
        return gj_error_status(e, 400, "label", "a label filter is UTF-8 text");
    json_object_set_new(filter, k, v);
    return 0;
}
