/*
 * json_schema.h — checks a JSON value against the subset of JSON Schema the
 * kinds' params schemas use: type, properties, required, additionalProperties,
 * items, enum, const, minimum/maximum (and exclusive), minLength/maxLength,
 * minItems/maxItems, anyOf, oneOf. The first violation is reported with the
 * dotted path of the field ("geometry.detector.cols", "angles_deg[3]").
 */
#ifndef GJ_JSON_SCHEMA_H
#define GJ_JSON_SCHEMA_H

#include <jansson.h>
#include "common/gj_error.h"

/* 0 when value conforms to schema, else -1 with err naming the field. */
int gj_schema_check(const json_t *schema, const json_t *value, struct gj_error *err);

#endif
