/*
 * multipart_related_fuzz.c — libFuzzer harness for the streaming multipart
 * parser (service/multipart_related.c) and the header-parameter helpers.
 * The first byte picks the chunk size, so boundaries split across chunks are
 * explored too; every callback checks the parser's promises (part_begin and
 * part_end alternate, data only inside a part).
 *
 * Standalone (the parser needs only libc):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. \
 *       fuzz/multipart_related_fuzz.c service/multipart_related.c -o mpr_fuzz && ./mpr_fuzz -max_total_time=30
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "service/multipart_related.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct st {
    int open;
    size_t bytes;
};

static int on_begin(void *ud, const struct gj_mpr_part *part)
{
    struct st *s = ud;
    if (s->open)
        abort();
    s->open = 1;
    char out[80];
    for (size_t i = 0; i < part->n_headers; i++)
        (void)gj_mime_param(part->values[i], "name", out, sizeof out);
    (void)gj_mpr_header(part, "Content-Type");
    return 0;
}

static int on_data(void *ud, const char *d, size_t n)
{
    struct st *s = ud;
    if (!s->open || n == 0 || !d)
        abort();
    s->bytes += n;
    return 0;
}

static int on_end(void *ud)
{
    struct st *s = ud;
    if (!s->open)
        abort();
    s->open = 0;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = 1 + data[0] % 64;
    data++;
    size--;
    static const struct gj_mpr_callbacks cb = { on_begin, on_data, on_end };
    struct st s = { 0 };
    struct gj_mpr *p = gj_mpr_new("b0und", &cb, &s);
    if (!p)
        abort();
    gj_mpr_set_max_parts(p, 64);
    for (size_t i = 0; i < size; i += chunk)
        if (gj_mpr_feed(p, (const char *)data + i, size - i < chunk ? size - i : chunk) != 0)
            break;
    (void)gj_mpr_finish(p);
    gj_mpr_free(p);
    /* the same bytes as a Content-Type header value */
    char *text = malloc(size + 1);
    if (text) {
        memcpy(text, data, size);
        text[size] = '\0';
        char out[100];
        (void)gj_mime_type_is(text, "multipart/related");
        (void)gj_mime_param(text, "boundary", out, sizeof out);
        (void)gj_mime_param(text, "type", out, 8);
        free(text);
    }
    return 0;
}
