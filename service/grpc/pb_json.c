/*
 * pb_json.c — protobuf-c messages from their JSON form (pb_json.h), walking the messages'
 * descriptors.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/grpc/pb_json.h"

#define MAX_DEPTH 32

void *pb_arena_alloc(struct pb_arena *a, size_t size)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 32;
        void **b = realloc(a->blocks, cap * sizeof *b);
        if (!b)
            return NULL;
        a->blocks = b;
        a->cap = cap;
    }
    void *p = calloc(1, size ? size : 1);
    if (p)
        a->blocks[a->n++] = p;
    return p;
}

char *pb_arena_strdup(struct pb_arena *a, const char *s)
{
    size_t n = strlen(s);
    char *p = pb_arena_alloc(a, n + 1);
    if (p)
        memcpy(p, s, n);
    return p;
}

void pb_arena_free(struct pb_arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->blocks[i]);
    free(a->blocks);
    memset(a, 0, sizeof *a);
}

static int fail(char *msg, size_t cap, const ProtobufCFieldDescriptor *f, const char *what)
{
    snprintf(msg, cap, "field '%s': %s", f->name, what);
    return -1;
}

/* An integer from a JSON number or a decimal string. 0, or -1. */
static int int_value(const json_t *v, int is_signed, int64_t *s, uint64_t *u)
{
    if (json_is_integer(v)) {
        *s = json_integer_value(v);
        *u = (uint64_t)*s;
        return is_signed || *s >= 0 ? 0 : -1;
    }
    if (json_is_real(v)) {   /* a uint64 above INT64_MAX written as a number */
        double d = json_real_value(v);
        if (d < 0 || d >= 18446744073709551616.0 || d != (double)(uint64_t)d)
            return -1;
        *u = (uint64_t)d;
        *s = (int64_t)*u;
        return is_signed ? -1 : 0;
    }
    if (!json_is_string(v))
        return -1;
    const char *t = json_string_value(v);
    char *end = NULL;
    errno = 0;
    if (is_signed)
        *s = strtoll(t, &end, 10), *u = (uint64_t)*s;
    else
        *u = strtoull(t, &end, 10), *s = (int64_t)*u;
    return errno || end == t || *end || (!is_signed && *t == '-') ? -1 : 0;
}

static ProtobufCMessage *message_from(struct pb_arena *a, const ProtobufCMessageDescriptor *d, const json_t *j,
                                      int depth, char *msg, size_t cap);

/* One value of field f written at dst. 0, or -1 with msg. */
static int scalar(struct pb_arena *a, const ProtobufCFieldDescriptor *f, const json_t *v, void *dst, int depth,
                  char *msg, size_t cap)
{
    int64_t s = 0;
    uint64_t u = 0;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
        if (int_value(v, 1, &s, &u) || s < INT32_MIN || s > INT32_MAX)
            return fail(msg, cap, f, "not a 32-bit integer");
        *(int32_t *)dst = (int32_t)s;
        return 0;
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
        if (int_value(v, 0, &s, &u) || u > UINT32_MAX)
            return fail(msg, cap, f, "not an unsigned 32-bit integer");
        *(uint32_t *)dst = (uint32_t)u;
        return 0;
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
        if (int_value(v, 1, &s, &u))
            return fail(msg, cap, f, "not an integer");
        *(int64_t *)dst = s;
        return 0;
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
        if (int_value(v, 0, &s, &u))
            return fail(msg, cap, f, "not an unsigned integer");
        *(uint64_t *)dst = u;
        return 0;
    case PROTOBUF_C_TYPE_FLOAT: case PROTOBUF_C_TYPE_DOUBLE:
        if (!json_is_number(v))
            return fail(msg, cap, f, "not a number");
        if (f->type == PROTOBUF_C_TYPE_FLOAT)
            *(float *)dst = (float)json_number_value(v);
        else
            *(double *)dst = json_number_value(v);
        return 0;
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v))
            return fail(msg, cap, f, "not a boolean");
        *(protobuf_c_boolean *)dst = json_is_true(v);
        return 0;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumValue *ev = json_is_string(v)
            ? protobuf_c_enum_descriptor_get_value_by_name(f->descriptor, json_string_value(v))
            : json_is_integer(v) ? protobuf_c_enum_descriptor_get_value(f->descriptor, (int)json_integer_value(v))
                                 : NULL;
        if (!ev)
            return fail(msg, cap, f, "not one of the enum's values");
        *(int *)dst = ev->value;
        return 0;
    }
    case PROTOBUF_C_TYPE_STRING:
        if (!json_is_string(v))
            return fail(msg, cap, f, "not a string");
        return (*(char **)dst = pb_arena_strdup(a, json_string_value(v))) ? 0 : fail(msg, cap, f, "out of memory");
    case PROTOBUF_C_TYPE_BYTES: {
        if (!json_is_string(v))
            return fail(msg, cap, f, "not a string");
        ProtobufCBinaryData *b = dst;
        b->len = json_string_length(v);
        b->data = pb_arena_alloc(a, b->len);
        if (!b->data)
            return fail(msg, cap, f, "out of memory");
        memcpy(b->data, json_string_value(v), b->len);
        return 0;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        return (*(ProtobufCMessage **)dst = message_from(a, f->descriptor, v, depth + 1, msg, cap)) ? 0 : -1;
    }
    return fail(msg, cap, f, "of a type this server does not convert");
}

static size_t elem_size(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    default:
        return 4;
    }
}

/* A map<string, V> from a JSON object: its entries (messages with key and value). */
static int map_field(struct pb_arena *a, const ProtobufCFieldDescriptor *f, const json_t *v, char *base, int depth,
                     char *msg, size_t cap)
{
    const ProtobufCMessageDescriptor *ed = f->descriptor;
    size_t n = json_object_size(v), i = 0;
    ProtobufCMessage **entries = pb_arena_alloc(a, n * sizeof *entries);
    const char *key;
    json_t *val;
    if (!entries)
        return fail(msg, cap, f, "out of memory");
    json_object_foreach((json_t *)v, key, val) {
        json_t *e = json_pack("{s:s, s:O}", "key", key, "value", val);
        entries[i] = e ? message_from(a, ed, e, depth + 1, msg, cap) : NULL;
        json_decref(e);
        if (!entries[i++])
            return -1;
    }
    *(size_t *)(base + f->quantifier_offset) = n;
    *(void **)(base + f->offset) = entries;
    return 0;
}

static int field(struct pb_arena *a, const ProtobufCFieldDescriptor *f, const json_t *v, char *base, int depth,
                 char *msg, size_t cap)
{
    if (json_is_null(v))
        return 0;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        const ProtobufCMessageDescriptor *ed = f->type == PROTOBUF_C_TYPE_MESSAGE ? f->descriptor : NULL;
        if (ed && json_is_object(v) && ed->n_fields == 2 && strcmp(ed->fields[0].name, "key") == 0)
            return map_field(a, f, v, base, depth, msg, cap);
        if (!json_is_array(v))
            return fail(msg, cap, f, "not an array");
        size_t n = json_array_size(v), es = elem_size(f);
        char *arr = pb_arena_alloc(a, n * es);
        if (!arr)
            return fail(msg, cap, f, "out of memory");
        for (size_t i = 0; i < n; i++)
            if (scalar(a, f, json_array_get(v, i), arr + i * es, depth, msg, cap) != 0)
                return -1;
        *(size_t *)(base + f->quantifier_offset) = n;
        *(void **)(base + f->offset) = arr;
        return 0;
    }
    if (scalar(a, f, v, base + f->offset, depth, msg, cap) != 0)
        return -1;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        *(uint32_t *)(base + f->quantifier_offset) = f->id;
    else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset && f->type != PROTOBUF_C_TYPE_STRING &&
             f->type != PROTOBUF_C_TYPE_MESSAGE)
        *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
    return 0;
}

static ProtobufCMessage *message_from(struct pb_arena *a, const ProtobufCMessageDescriptor *d, const json_t *j,
                                      int depth, char *msg, size_t cap)
{
    if (!json_is_object(j)) {
        snprintf(msg, cap, "%s: not a JSON object", d->short_name);
        return NULL;
    }
    if (depth > MAX_DEPTH) {
        snprintf(msg, cap, "%s: nested too deep", d->short_name);
        return NULL;
    }
    ProtobufCMessage *m = pb_arena_alloc(a, d->sizeof_message);
    if (!m) {
        snprintf(msg, cap, "out of memory");
        return NULL;
    }
    protobuf_c_message_init(d, m);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)j, key, v) {
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, key);
        if (f && field(a, f, v, (char *)m, depth, msg, cap) != 0)
            return NULL;
    }
    return m;
}

ProtobufCMessage *pb_from_json(struct pb_arena *a, const ProtobufCMessageDescriptor *d, const json_t *j,
                               char *msg, size_t cap)
{
    return message_from(a, d, j, 0, msg, cap);
}
