/*
 * grpc_infer_decode.c — ModelInferRequest with raw_input_contents in place
 * (grpc_infer_decode.h): the message's top-level fields are walked in protobuf's wire form;
 * every field but raw_input_contents (field 7) is copied to a small message protobuf-c
 * unpacks, field 7's entries are recorded where they lie.
 */
#include <stdlib.h>
#include <string.h>

#include "service/infer/grpc_infer_decode.h"

#define RAW_INPUT_CONTENTS 7
#define WIRE_VARINT 0
#define WIRE_64BIT 1
#define WIRE_LEN 2
#define WIRE_32BIT 5

/* A varint at *p (before end) into *v. 0, or -1 when it is cut or too long. */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
    }
    return -1;
}

/* One top-level field at *p: its number and wire type, and where its value lies (for a length-delimited
 * one, its bytes after the length). *p moves past it. 0, or -1 when it is malformed. */
static int next_field(const uint8_t **p, const uint8_t *end, uint64_t *number, unsigned *wire,
                      const uint8_t **value, size_t *value_len)
{
    uint64_t tag, n = 0;
    if (varint(p, end, &tag) != 0)
        return -1;
    const uint8_t *start = *p;
    switch (tag & 7) {
    case WIRE_VARINT:
        if (varint(p, end, &n) != 0)
            return -1;
        n = 0;
        break;
    case WIRE_64BIT: n = 8; break;
    case WIRE_32BIT: n = 4; break;
    case WIRE_LEN:
        if (varint(p, end, &n) != 0)
            return -1;
        start = *p;
        break;
    default: return -1;   /* groups: not in this message */
    }
    if (n > (uint64_t)(end - *p))
        return -1;
    *p += n;
    *number = tag >> 3;
    *wire = (unsigned)(tag & 7);
    *value = start;
    *value_len = (size_t)(*p - start);
    return 0;
}

size_t grpc_infer_raw_offset(const uint8_t *head, size_t n)
{
    const uint8_t *p = head, *end = head + n, *value;
    uint64_t number;
    unsigned wire;
    size_t len;
    while (p < end) {
        const uint8_t *field = p;
        uint64_t tag;
        if (varint(&field, end, &tag) != 0)
            return 0;
        if (tag >> 3 == RAW_INPUT_CONTENTS && (tag & 7) == WIRE_LEN) {
            uint64_t l;
            return varint(&field, end, &l) == 0 ? (size_t)(field - head) : 0;
        }
        if (next_field(&p, end, &number, &wire, &value, &len) != 0)
            return 0;   /* cut by the head's end, or malformed: no hint */
    }
    return 0;
}

Inference__ModelInferRequest *grpc_infer_request_unpack(const uint8_t *msg, size_t len)
{
    const uint8_t *p = msg, *end = msg + len, *value;
    uint64_t number;
    unsigned wire;
    size_t vlen, n_raw = 0, rest = 0;
    while (p < end) {   /* count: the raw entries, the bytes of everything else */
        const uint8_t *field = p;
        if (next_field(&p, end, &number, &wire, &value, &vlen) != 0)
            return NULL;
        if (number == RAW_INPUT_CONTENTS && wire != WIRE_LEN)
            return NULL;   /* as protobuf-c: not bytes */
        if (number == RAW_INPUT_CONTENTS)
            n_raw++;
        else
            rest += (size_t)(p - field);
    }
    uint8_t *stripped = malloc(rest ? rest : 1);
    ProtobufCBinaryData *raw = calloc(n_raw ? n_raw : 1, sizeof *raw);
    Inference__ModelInferRequest *req = NULL;
    if (stripped && raw) {
        uint8_t *q = stripped;
        size_t k = 0;
        for (p = msg; p < end;) {
            const uint8_t *field = p;
            next_field(&p, end, &number, &wire, &value, &vlen);   /* walked once: well formed */
            if (number == RAW_INPUT_CONTENTS) {
                raw[k].data = (uint8_t *)value;
                raw[k++].len = vlen;
            } else {
                memcpy(q, field, (size_t)(p - field));
                q += p - field;
            }
        }
        req = inference__model_infer_request__unpack(NULL, rest, stripped);
    }
    free(stripped);
    if (req) {
        req->raw_input_contents = raw;
        req->n_raw_input_contents = n_raw;
    } else {
        free(raw);
    }
    return req;
}

void grpc_infer_request_free(Inference__ModelInferRequest *req)
{
    if (!req)
        return;
    free(req->raw_input_contents);   /* ours: the entries point into the message */
    req->raw_input_contents = NULL;
    req->n_raw_input_contents = 0;
    inference__model_infer_request__free_unpacked(req, NULL);
}
