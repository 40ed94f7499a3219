/*
 * json_schema.h — JSON Schema draft 2020-12, for the params of job kinds.
 *
 * A schema is compiled once: every keyword is checked, and a schema that uses
 * a keyword this validator does not implement is refused with an error naming
 * the keyword and where it is (so no constraint is ever silently ignored; a
 * misspelt keyword is refused too). A value is then checked against it and the
 * first violation reported with the dotted path of the field
 * ("geometry.detector.cols", "angles_deg[3]").
 *
 * Supported:
 *   type enum const
 *   minimum maximum exclusiveMinimum exclusiveMaximum multipleOf
 *   minLength maxLength (in Unicode code points) pattern
 *   properties patternProperties additionalProperties required
 *   dependentRequired dependentSchemas propertyNames minProperties maxProperties
 *   prefixItems items contains minContains maxContains minItems maxItems uniqueItems
 *   allOf anyOf oneOf not if then else
 *   $ref into this document ("#", "#/json/pointer", or the root's $id plus
 *   either), $defs, $schema (draft 2020-12 only), $id (at the root only)
 *   annotations, no effect on validity: title description default examples
 *   deprecated readOnly writeOnly $comment format contentEncoding
 *   contentMediaType contentSchema ("format" is an annotation, as 2020-12
 *   says by default)
 * Refused:
 *   $anchor $dynamicAnchor $dynamicRef $vocabulary, $id below the root, remote
 *   or relative $ref, unevaluatedProperties unevaluatedItems, the pre-2020
 *   names (definitions dependencies additionalItems $recursiveRef
 *   $recursiveAnchor), and any keyword not listed above.
 * Patterns are ECMA-262 translated to POSIX (json_schema_regex.h says which
 * constructs are refused). Numbers compare exactly (integers beyond 2^53
 * included); multipleOf on non-integers allows a relative error of a few ulps,
 * so that 0.3 is a multiple of 0.1. Schemas nest at most 64 deep, and a value
 * is followed at most 64 schemas deep; uniqueItems sorts (n log n).
 *
 * Tested against the official JSON-Schema-Test-Suite: of the files of supported
 * keywords, 971 tests pass, 19 groups (40 tests) are refused for a listed reason
 * (tests/unit/test_json_schema_suite.c says which and why), none answers wrongly;
 * every group of the refused keywords' files is refused.
 */
#ifndef GJ_JSON_SCHEMA_H
#define GJ_JSON_SCHEMA_H

#include <jansson.h>
#include "common/gj_error.h"

struct gj_schema;

/* Compiles schema (an object or a boolean; a reference is kept, so it must not be
 * changed while compiled). NULL with err (status 500, field the schema's JSON
 * pointer, "#/properties/x") when it is refused. */
struct gj_schema *gj_schema_compile(const json_t *schema, struct gj_error *err);

/* 0 when value conforms, else -1 with err naming the field (status 422). Safe to
 * call from several threads at once on one compiled schema. */
int gj_schema_validate(const struct gj_schema *schema, const json_t *value, struct gj_error *err);

void gj_schema_free(struct gj_schema *schema);

/* Compile, validate, free: -1 with status 500 when the schema is refused. */
int gj_schema_check(const json_t *schema, const json_t *value, struct gj_error *err);

#endif
