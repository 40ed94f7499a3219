/*
 * oip_compress.h — the HTTP content codings Triton's HTTP API takes and gives: a request
 * body sent with Content-Encoding gzip or deflate (zlib's format, as tritonclient's
 * request_compression_algorithm writes it) inflated within a bound, and a response body
 * compressed as Accept-Encoding asks (response_compression_algorithm). zlib. Private to
 * service/infer.
 */
#ifndef GJ_OIP_COMPRESS_H
#define GJ_OIP_COMPRESS_H

#include <stddef.h>

enum oip_coding { OIP_IDENTITY = 0, OIP_GZIP, OIP_DEFLATE };

/* The coding a Content-Encoding header names: 0 and *coding set, or -1 for one we do not
 * take (answer 415). NULL / "identity": OIP_IDENTITY. */
int oip_content_coding(const char *content_encoding, enum oip_coding *coding);

/* The response coding Accept-Encoding prefers, among identity, gzip and deflate, by their
 * q weights, as Triton chooses (the first of equal weights; NULL: identity). */
enum oip_coding oip_accept_coding(const char *accept_encoding);

/* Inflates n bytes (gzip, or deflate: zlib's format, or raw deflate as some clients send)
 * into a malloc'd buffer (NUL-terminated past *out_len). 0; 413 when the result would pass
 * limit bytes (inflating stops there: a zip bomb costs limit bytes at most); 400 corrupt or
 * truncated data; 500 out of memory. */
int oip_inflate(const char *in, size_t n, enum oip_coding coding, size_t limit, char **out, size_t *out_len);

/* Compresses n bytes as gzip or deflate (zlib's format): 0 and a malloc'd *out, or -1. */
int oip_deflate(const char *in, size_t n, enum oip_coding coding, char **out, size_t *out_len);

/* "gzip", "deflate" (NULL for identity). */
const char *oip_coding_name(enum oip_coding coding);

#endif
