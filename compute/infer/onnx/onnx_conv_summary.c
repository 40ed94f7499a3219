/*
 * onnx_conv_summary.c — how a session computes its convolutions, for provenance records
 * (onnx_session_convolutions): one line per distinct convolution shape and implementation,
 * "x 8x64x56x56 w 64x64x3x3 pads 1,1,1,1 strides 1,1 dilations 1,1 group 1: onednn
 * brgconv:avx512_core", sorted, so that two sessions that compute alike give the same text.
 * Texts are interned for the process (as onnx_cuda.c caches cuDNN's choices): a caller may
 * keep one after its session is freed, and equal texts are one pointer.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_exec.h"

/* "8x64x56x56" into buf at *at (bounded by len). */
static void put_dims(char *buf, size_t len, size_t *at, const struct onnx_tensor *t)
{
    for (int i = 0; i < t->rank && *at < len; i++)
        *at += (size_t)snprintf(buf + *at, len - *at, "%s%lld", i ? "x" : "", (long long)t->dims[i]);
}

void onnx_conv_shape_text(const struct onnx_kargs *a, char *buf, size_t len)
{
    const struct onnx_params *p = a->p;
    size_t at = (size_t)snprintf(buf, len, "x ");
    put_dims(buf, len, &at, a->in[0]);
    if (at < len)
        at += (size_t)snprintf(buf + at, len - at, " w ");
    put_dims(buf, len, &at, a->in[1]);
    if (at < len)
        snprintf(buf + at, len - at, " pads %lld,%lld,%lld,%lld strides %lld,%lld dilations %lld,%lld group %lld",
                 (long long)p->pads[0], (long long)p->pads[1], (long long)p->pads[2], (long long)p->pads[3],
                 (long long)p->strides[0], (long long)p->strides[1], (long long)p->dilations[0],
                 (long long)p->dilations[1], (long long)p->group);
}

struct interned {
    struct interned *next;
    char text[];
};
static struct interned *interned_texts;   /* never freed: few (model x batch x device x precision) */
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;

/* The process's copy of text (made when absent), or NULL when out of memory. */
static const char *intern(const char *text)
{
    const char *found = NULL;
    pthread_mutex_lock(&intern_lock);
    for (struct interned *t = interned_texts; t && !found; t = t->next)
        if (strcmp(t->text, text) == 0)
            found = t->text;
    if (!found) {
        size_t n = strlen(text) + 1;
        struct interned *t = malloc(sizeof *t + n);
        if (t) {
            memcpy(t->text, text, n);
            t->next = interned_texts;
            interned_texts = t;
            found = t->text;
        }
    }
    pthread_mutex_unlock(&intern_lock);
    return found;
}

static int cmp_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

const char *onnx_conv_summary(char **lines, size_t n)
{
    if (n == 0)
        return "";
    qsort(lines, n, sizeof *lines, cmp_lines);
    size_t bytes = 1;
    for (size_t i = 0; i < n; i++)
        bytes += strlen(lines[i]) + 1;
    char *text = malloc(bytes), *at = text;
    if (!text)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (i && strcmp(lines[i], lines[i - 1]) == 0)
            continue;   /* a shape the model convolves more than once */
        size_t k = strlen(lines[i]);
        if (at != text)
            *at++ = '\n';
        memcpy(at, lines[i], k);
        at += k;
    }
    *at = '\0';
    const char *out = intern(text);
    free(text);
    return out;
}
