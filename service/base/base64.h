/*
 * base64.h — Base64 (RFC 4648 §4) and base64url (§5), the one codec of the service:
 * Content-Digest values, API keys, job list cursors, model listing cursors.
 */
#ifndef GJ_BASE64_H
#define GJ_BASE64_H

#include <stddef.h>

enum gj_base64_alphabet {
    GJ_BASE64_STD = 0,   /* A-Z a-z 0-9 + /, '=' padding (encode writes it, decode allows it) */
    GJ_BASE64_URL = 1,   /* A-Z a-z 0-9 - _, no padding (decode refuses it) */
};

/* Decodes in[0..len) into out (capacity cap). Returns the decoded length, or -1 on a
 * character outside the alphabet, bad padding, non-canonical trailing bits, or when
 * out is too small. */
long gj_base64_decode(const char *in, size_t len, unsigned char *out, size_t cap,
                      enum gj_base64_alphabet alphabet);
/* Encodes in[0..len) into out (capacity cap) and NUL-terminates it. Returns the
 * encoded length (without the NUL), or -1 when out is too small. */
long gj_base64_encode(const unsigned char *in, size_t len, char *out, size_t cap,
                      enum gj_base64_alphabet alphabet);
/* The encoded length of len bytes, without the NUL. */
size_t gj_base64_encoded_len(size_t len, enum gj_base64_alphabet alphabet);

#endif
