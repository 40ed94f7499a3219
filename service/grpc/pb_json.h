/*
 * pb_json.h — a protobuf-c message built from its JSON form (proto3's JSON mapping, as
 * Triton's HTTP protocol writes the same messages): the /v2 routes' JSON answers (model
 * config, statistics, repository index, settings) become the gRPC answers, so one function
 * computes each and both transports send it. Fields are matched by their proto name; JSON
 * keys the message has no field for are skipped (this server's extras). Numbers may be JSON
 * numbers or decimal strings (64-bit values), enums their name or number, maps JSON objects.
 * Everything is allocated in an arena freed at once (pb_arena_free) after packing.
 */
#ifndef GJ_PB_JSON_H
#define GJ_PB_JSON_H

#include <stddef.h>

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

struct pb_arena {
    void **blocks;
    size_t n, cap;
};

void *pb_arena_alloc(struct pb_arena *a, size_t size);   /* zeroed; NULL when out of memory */
char *pb_arena_strdup(struct pb_arena *a, const char *s);
void pb_arena_free(struct pb_arena *a);

/* A message of type d from the JSON object j, in arena a. NULL with msg when a value does not
 * fit its field (or out of memory). */
ProtobufCMessage *pb_from_json(struct pb_arena *a, const ProtobufCMessageDescriptor *d, const json_t *j,
                               char *msg, size_t cap);

#endif
