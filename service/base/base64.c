/*
 * base64.c — see base64.h. Strict decoding: a value has exactly one accepted
 * spelling, so a digest or a cursor cannot be varied to slip past a comparison.
 */
#include <stdint.h>

#include "service/base/base64.h"

static const char std_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char url_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static int value_of(char c, enum gj_base64_alphabet alphabet)
{
    int url = alphabet == GJ_BASE64_URL;
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == (url ? '-' : '+'))
        return 62;
    if (c == (url ? '_' : '/'))
        return 63;
    return -1;
}

long gj_base64_decode(const char *in, size_t len, unsigned char *out, size_t cap,
                      enum gj_base64_alphabet alphabet)
{
    int url = alphabet == GJ_BASE64_URL;
    size_t pad = 0;
    while (len && in[len - 1] == '=') {
        len--;
        pad++;
    }
    if (pad > 2 || (url && pad) || len % 4 == 1)
        return -1;
    if (pad && (len + pad) % 4 != 0)
        return -1;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = value_of(in[i], alphabet);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap)
                return -1;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0)                        /* non-canonical trailing bits */
        return -1;
    return (long)o;
}

size_t gj_base64_encoded_len(size_t len, enum gj_base64_alphabet alphabet)
{
    if (alphabet == GJ_BASE64_URL)
        return len / 3 * 4 + (len % 3 ? len % 3 + 1 : 0);
    return (len + 2) / 3 * 4;
}

long gj_base64_encode(const unsigned char *in, size_t len, char *out, size_t cap,
                      enum gj_base64_alphabet alphabet)
{
    int url = alphabet == GJ_BASE64_URL;
    const char *alpha = url ? url_alphabet : std_alphabet;
    if (gj_base64_encoded_len(len, alphabet) + 1 > cap)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        size_t n = len - i < 3 ? len - i : 3;
        if (n > 1)
            v |= (uint32_t)in[i + 1] << 8;
        if (n > 2)
            v |= in[i + 2];
        char q[4] = { alpha[(v >> 18) & 63], alpha[(v >> 12) & 63], alpha[(v >> 6) & 63], alpha[v & 63] };
        for (size_t k = 0; k < 4; k++)
            if (k < n + 1)
                out[o++] = q[k];
            else if (!url)
                out[o++] = '=';
    }
    out[o] = '\0';
    return (long)o;
}
