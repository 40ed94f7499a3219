/*
 * json_schema_check.h — a value against a compiled schema (json_schema_check.c).
 * Private to the validator's files.
 */
#ifndef GJ_JSON_SCHEMA_CHECK_H
#define GJ_JSON_SCHEMA_CHECK_H

#include <jansson.h>

#include "common/gj_error.h"
#include "common/json_schema_compiled.h"

/* 0, or -1 with err naming the field (status left for the caller). */
int gjs_check(const struct gj_schema *s, const json_t *value, struct gj_error *err);

#endif
