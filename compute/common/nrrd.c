/*
 * nrrd.c — the bounded NRRD header parser (nrrd.h), moved from compute/recon/io.c so that
 * the portal's slice viewer reads recon's and phantom's volumes without recon's header.
 */
#include <stdlib.h>
#include <string.h>

#include "common/gj_error.h"
#include "common/nrrd.h"

static int starts(const char *line, const char *key, const char **rest)
{
    size_t n = strlen(key);
    if (strncmp(line, key, n) != 0)
        return 0;
    *rest = line + n;
    while (**rest == ' ')
        (*rest)++;
    return 1;
}

/* What the header said so far. */
struct nrrd_fields { int have_type, have_enc, endian_ok; };

/* One "key: value" line of the header. 0, or -1 with err. */
static int nrrd_field(const char *line, struct gj_nrrd *h, struct nrrd_fields *f, struct gj_error *err)
{
    const char *v;
    if (starts(line, "type:", &v)) {
        if (strcmp(v, "float") != 0 && strcmp(v, "float32") != 0)
            return gj_error_set(err, "projections", "NRRD type '%s' is not supported: float (float32) only", v);
        f->have_type = 1;
    } else if (starts(line, "dimension:", &v)) {
        if (h->dim)   /* a second one would leave sizes unset */
            return gj_error_set(err, "projections", "NRRD dimension is given twice");
        char *end;
        long d = strtol(v, &end, 10);
        if (*end || d < 1 || d > 4)
            return gj_error_set(err, "projections", "NRRD dimension must be 1 to 4");
        h->dim = (int)d;
    } else if (starts(line, "sizes:", &v)) {
        if (!h->dim)
            return gj_error_set(err, "projections", "NRRD sizes before dimension");
        for (int i = 0; i < h->dim; i++) {
            char *end;
            long long sz = strtoll(v, &end, 10);
            if (end == v || sz < 1 || sz > (1ll << 31))
                return gj_error_set(err, "projections", "NRRD sizes are invalid");
            h->sizes[i] = sz;
            v = end;
        }
    } else if (starts(line, "encoding:", &v)) {
        if (strcmp(v, "raw") != 0)
            return gj_error_set(err, "projections", "NRRD encoding '%s' is not supported: raw only", v);
        f->have_enc = 1;
    } else if (starts(line, "endian:", &v)) {
        f->endian_ok = strcmp(v, "little") == 0;
    } else if (starts(line, "data file:", &v) || starts(line, "datafile:", &v)) {
        return gj_error_set(err, "projections", "detached NRRD data files are not accepted");
    } else if (starts(line, "spacings:", &v)) {
        for (int i = 0; i < h->dim && i < 4; i++) {
            char *end;
            h->spacing[i] = strtod(v, &end);
            v = end;
        }
    }
    return 0;
}

/* The header's lines up to the blank one; *pos ends after it. */
static int nrrd_lines(const char *buf, size_t len, struct gj_nrrd *h, struct nrrd_fields *f, size_t *pos,
                      struct gj_error *err)
{
    for (int line_no = 0;; line_no++) {
        const char *nl = memchr(buf + *pos, '\n', len - *pos);
        if (!nl)
            return gj_error_set(err, "projections", "NRRD header is truncated or longer than %d bytes", GJ_NRRD_MAX_HEADER);
        size_t ll = (size_t)(nl - (buf + *pos));
        char line[1024];
        if (ll >= sizeof line)
            return gj_error_set(err, "projections", "NRRD header line %d is too long", line_no + 1);
        memcpy(line, buf + *pos, ll);
        line[ll] = '\0';
        if (ll && line[ll - 1] == '\r')
            line[--ll] = '\0';
        *pos = (size_t)(nl - buf) + 1;
        if (ll == 0)
            return 0;
        if (line_no > 0 && line[0] != '#' && nrrd_field(line, h, f, err))
            return -1;
        if (*pos >= len)
            return gj_error_set(err, "projections", "NRRD header has no blank line before the data");
    }
}

int gj_nrrd_parse(const char *buf, size_t len, uint64_t file_size, struct gj_nrrd *h,
                  struct gj_error *err)
{
    memset(h, 0, sizeof *h);
    if (len < 8 || memcmp(buf, "NRRD000", 7) != 0)
        return gj_error_set(err, "projections", "not an NRRD file (no NRRD000x magic)");
    struct nrrd_fields f = { 0, 0, 1 };
    size_t pos = 0;
    if (nrrd_lines(buf, len, h, &f, &pos, err))
        return -1;
    if (!f.have_type || !f.have_enc || !h->dim || !h->sizes[0])
        return gj_error_set(err, "projections", "NRRD header lacks type, dimension, sizes or encoding");
    if (!f.endian_ok)
        return gj_error_set(err, "projections", "big-endian NRRD data is not supported");
    uint64_t n = 4;
    for (int i = 0; i < h->dim; i++) {
        if (n > (1ull << 40) / (uint64_t)h->sizes[i])
            return gj_error_set(err, "projections", "NRRD sizes are too large");
        n *= (uint64_t)h->sizes[i];
    }
    h->data_offset = pos;
    if (file_size != pos + n)
        return gj_error_set(err, "projections", "NRRD data holds %llu bytes but its sizes say %llu",
                            (unsigned long long)(file_size - (file_size > pos ? pos : file_size)),
                            (unsigned long long)n);
    return 0;
}
