/*
 * onnx_test_util.h — what the cmocka tests of typed tensors share: a model from the graph
 * builder (pbw.h), named tensors, and one run on named tensors with the error kept.
 * Include after <cmocka.h>.
 */
#ifndef ONNX_TEST_UTIL_H
#define ONNX_TEST_UTIL_H

#include <stdio.h>
#include <string.h>

#include "infer/onnx/onnx_model.h"
#include "pbw.h"

/* The model the builder holds (the builder is consumed); NULL with msg. */
static inline onnx_model *tu_load(struct gb *b, char *msg)
{
    struct pb m = gb_finish(b);
    struct gj_error err = { 0 };
    onnx_model *model = onnx_model_load_memory(m.b, m.n, &err);
    free(m.b);
    if (!model && msg)
        snprintf(msg, 512, "%s", err.message);
    return model;
}

/* A named tensor of elem over data (bytes: element count x element size). */
static inline struct onnx_tensor_buf tu_tensor(const char *name, int elem, int rank, const int64_t *dims, const void *data)
{
    struct onnx_tensor_buf t = { .name = name, .elem_type = elem, .rank = rank, .data = (void *)data };
    size_t n = 1;
    for (int i = 0; i < rank; i++) {
        t.dims[i] = dims[i];
        n *= (size_t)dims[i];
    }
    t.bytes = n * onnx_elem_size(elem);
    return t;
}

/* Loads b, creates a session with opt (NULL: batch 1, 2 threads), runs it on the named tensors;
 * 0, or -1 with the message in msg (512 bytes) and the error's status in *status (may be NULL). */
static inline int tu_run(struct gb *b, const struct onnx_session_options *opt, const struct onnx_tensor_buf *in,
                         size_t nin, struct onnx_tensor_buf *out, size_t nout, char *msg, int *status)
{
    struct onnx_session_options def = { .batch = 1, .threads = 2 };
    struct gj_error err = { 0 };
    msg[0] = 0;
    onnx_model *m = tu_load(b, msg);
    if (!m)
        return -1;
    onnx_session *s = onnx_session_create(m, opt ? opt : &def, &err);
    int rc = s ? onnx_session_run_named(s, in, nin, out, nout, &err) : -1;
    if (rc) {
        snprintf(msg, 512, "%s", err.message);
        if (status)
            *status = err.status;
    }
    onnx_session_free(s);
    onnx_model_free(m);
    return rc;
}

/* The run must fail with a message holding needle. */
#define tu_expect_fail(rc, msg, needle) do { \
        assert_int_equal((rc), -1); \
        if (!strstr((msg), (needle))) \
            fail_msg("message '%s' does not mention '%s'", (msg), (needle)); \
    } while (0)

#endif
