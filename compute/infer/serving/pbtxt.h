/*
 * pbtxt.h — the protobuf text format (what protobuf's TextFormat prints and Triton's
 * config.pbtxt is written in), read into a protobuf-c message by its runtime descriptors.
 * protobuf-c has no text-format reader; this one is small and strict:
 *
 *   - fields by name (`name: "x"`, `dims: [ 3, 224, 224 ]`, `dims: 3 dims: 224`); a message
 *     as `field { ... }`, `field: { ... }` or with < >; a repeated message also as
 *     `field [ { ... }, { ... } ]`; an optional `,` or `;` after each field;
 *   - enums by name (or number), bools as true/false/t/f/1/0, integers in decimal, hex or
 *     octal checked against their type's range, floats with inf/nan;
 *   - strings in "" or '' with C escapes (\n \t \\ \' \" \xHH \ooo ...), adjacent strings
 *     joined; the result must be UTF-8 without NUL;
 *   - map fields as their entries: `parameters { key: "k" value { string_value: "v" } }`;
 *   - `#` comments to the end of a line.
 *
 * Refused, with the line and column: unknown fields (unless the caller lists them to be
 * skipped), a non-repeated field given twice, two members of a oneof, a value of the wrong
 * kind or out of range, extensions ([...] names), Any expansions, nesting deeper than
 * GJ_PBTXT_MAX_DEPTH, bytes fields.
 */
#ifndef GJ_PBTXT_H
#define GJ_PBTXT_H

#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

#include "common/gj_error.h"

#define GJ_PBTXT_MAX_DEPTH 32

struct gj_pbtxt_options {
    const char *source;                 /* named in errors ("config.pbtxt"); NULL: "text" */
    /* Fields the schema does not have that are read and thrown away, as
     * "<message full name>.<field>" ("inference.ModelConfig.optimization"); NULL-ended. */
    const char *const *skip;
    /* Fields refused as unsupported (a clearer error than "unknown"), same form. */
    const char *const *unsupported;
};

/* Parses len bytes of text as a message of type desc. The message (free it with
 * protobuf_c_message_free_unpacked(m, NULL)), or NULL with err: its message says
 * "<source> line L, column C: what is wrong", err->field holds the field's path. */
ProtobufCMessage *gj_pbtxt_parse(const ProtobufCMessageDescriptor *desc, const char *text, size_t len,
                                 const struct gj_pbtxt_options *opt, struct gj_error *err);

#endif
