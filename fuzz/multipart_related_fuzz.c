/*
 * multipart_related_fuzz.c — libFuzzer harness for the streaming multipart parser
 * (service/http/multipart_related.c) and the header-parameter helpers, used the way the
 * STOW-RS and model-upload routes use them.
 *
 * Input: one byte choosing the chunk size (so boundaries split across chunks are
 * explored too), the request's Content-Type value up to the first '\n', then the body.
 * The boundary is the Content-Type's parameter, as the routes take it (a value the
 * parser refuses ends the input: the route answers 400). Every callback checks the
 * parser's promises: part_begin and part_end alternate, data only inside a part, and
 * every stop comes with a message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "service/http/multipart_related.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct st {
    int open;
    size_t bytes;
};

static int on_begin(void *ud, const struct gj_mpr_part *part)
{
    struct st *s = ud;
    if (s->open || part->n_headers > GJ_MPR_MAX_HEADERS)
        abort();
    s->open = 1;
    char out[80];
    for (size_t i = 0; i < part->n_headers; i++)
        (void)gj_mime_param(part->values[i], "name", out, sizeof out);
    const char *disp = gj_mpr_header(part, "Content-Disposition");
    if (disp)
        (void)gj_mime_type_is(disp, "form-data");
    const char *ct = gj_mpr_header(part, "Content-Type");
    if (ct)
        (void)gj_mime_type_is(ct, "application/dicom");
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

/* The body through a parser for `boundary`, in chunks of `chunk` bytes. */
static void parse_body(const char *boundary, const uint8_t *body, size_t len, size_t chunk)
{
    static const struct gj_mpr_callbacks cb = { on_begin, on_data, on_end };
    struct st s = { 0 };
    struct gj_mpr *p = gj_mpr_new(boundary, &cb, &s);
    if (!p)
        return;
    gj_mpr_set_max_parts(p, 64);
    int rc = 0;
    for (size_t i = 0; i < len && rc == 0; i += chunk)
        rc = gj_mpr_feed(p, (const char *)body + i, len - i < chunk ? len - i : chunk);
    if (rc == 0)
        rc = gj_mpr_finish(p);
    if (rc != 0 && !gj_mpr_error(p)[0])
        abort();
    if (rc == 0 && (!gj_mpr_complete(p) || s.open))
        abort();
    gj_mpr_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = 1 + data[0] % 64;
    data++;
    size--;
    const uint8_t *nl = memchr(data, '\n', size);
    size_t ct_len = nl ? (size_t)(nl - data) : size;
    char *ct = malloc(ct_len + 1);
    if (!ct)
        abort();
    memcpy(ct, data, ct_len);
    ct[ct_len] = '\0';
    char type[100], boundary[256];
    (void)gj_mime_type_is(ct, "multipart/related");
    (void)gj_mime_param(ct, "type", type, sizeof type);
    if (gj_mime_param(ct, "boundary", boundary, sizeof boundary) == 1 && nl)
        parse_body(boundary, nl + 1, size - ct_len - 1, chunk);
    free(ct);
    return 0;
}
