/*
 * job_fields.h — what a workflow sets on a job at submit beyond kind, params and inputs: a
 * name, labels, a callback URL, and inputs that name another job's output; and the
 * GET /v1/jobs filters on name and labels. Checked here, stored by gj_queue_submit; errors
 * as struct gj_error (status, field, message), answered by the route.
 */
#ifndef GJ_JOB_FIELDS_H
#define GJ_JOB_FIELDS_H

#include <stddef.h>
#include <jansson.h>

#include "common/gj_error.h"
#include "service/config.h"

#define GJ_JOB_NAME_MAX 200
#define GJ_LABELS_MAX 32
#define GJ_LABEL_KEY_MAX 63
#define GJ_LABEL_VALUE_MAX 255

/* 1 when key is one of the fields of a submit body this file reads. */
int gj_job_field_known(const char *key);

struct gj_job_fields {
    const char *name;              /* borrowed from the body; NULL: none */
    json_t *labels;                /* borrowed; NULL: none */
    const char *callback_url;      /* borrowed; NULL: none */
};

/* name (1 to 200 characters, no control characters), labels (an object of at most 32
 * keys of letters, digits and ._-/ of at most 63 characters, each a string of at most 255
 * characters without control characters) and callback_url (callback_policy.h, against the
 * server's settings). 0, or -1 with e filled. */
int gj_job_fields_read(json_t *body, const struct gj_config *cfg, struct gj_job_fields *f,
                       struct gj_error *e);

/* A job's name, whichever API sets it (/v1, CARMIN's executions): NULL when fine, else
 * GJ_JOB_NAME_RULE. Characters are code points of UTF-8 the JSON reader checked. */
#define GJ_JOB_NAME_RULE "a name is a string of 1 to 200 characters without control characters"
const char *gj_job_name_problem(const char *name);

/* An input given as {"job": ID, "output": NAME}: 1 (job and output set, borrowed from v),
 * 0 when v is not an object (a blob id, read elsewhere), -1 malformed (e filled, field
 * naming the input). */
int gj_input_ref_parse(const char *input, json_t *v, const char **job, const char **output,
                       struct gj_error *e);

/* One ?label=KEY=VALUE filter of a listing added to filter, an object for jsonb containment
 * (labels @> it). 0, or -1 with e (400, field "label"). */
int gj_label_filter_add(json_t *filter, const char *value, struct gj_error *e);

#endif
