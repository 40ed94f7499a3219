/*
 * text_buf.c — a growing text buffer (text_buf.h).
 */
#include <stdlib.h>
#include <string.h>

#include "service/base/text_buf.h"

int gj_text_append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t ncap = *cap ? *cap : 4096;
        while (ncap < *len + n + 1)
            ncap *= 2;
        char *nb = realloc(*buf, ncap);
        if (!nb)
            return -1;
        *buf = nb;
        *cap = ncap;
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}
