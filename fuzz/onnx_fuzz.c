/*
 * onnx_fuzz.c — libFuzzer harness for the ONNX runtime (compute/infer/onnx): the input
 * is a model file. It is loaded from memory; when it loads, a CPU session is created
 * for batch 1 under a small memory limit (so a run stays short: every tensor, weight
 * and scratch buffer together within FUZZ_ONNX_MAX_BYTES) and run once on inputs of
 * zeros. Every refusal must say why.
 */
#include <stdint.h>
#include <stdlib.h>

#include "infer/onnx/onnx_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ONNX_MAX_BYTES ((size_t)1 << 20)

static void must_say_why(const struct gj_error *err)
{
    if (!err->message[0])
        abort();
}

/* One run on zeros: 0, or -1 (refused, with a message). */
static int run_once(onnx_session *s, const onnx_model *m)
{
    size_t ni = onnx_model_num_inputs(m), no = onnx_model_num_outputs(m);
    void **in = calloc(ni + 1, sizeof *in), **out = calloc(no + 1, sizeof *out);
    int rc = -1;
    if (!in || !out)
        abort();
    for (size_t i = 0; i < ni; i++)
        if (!(in[i] = calloc(1, onnx_session_input_bytes(s, i) + 1)))
            abort();
    for (size_t i = 0; i < no; i++)
        if (!(out[i] = calloc(1, onnx_session_output_bytes(s, i) + 1)))
            abort();
    struct gj_error err = { 0 };
    rc = onnx_session_run(s, (const void *const *)in, (void *const *)out, &err);
    if (rc != 0)
        must_say_why(&err);
    for (size_t i = 0; i < ni; i++)
        free(in[i]);
    for (size_t i = 0; i < no; i++)
        free(out[i]);
    free(in);
    free(out);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gj_error err = { 0 };
    onnx_model *m = onnx_model_load_memory(data, size, &err);
    if (!m) {
        must_say_why(&err);
        return 0;
    }
    struct onnx_session_options opt = { .batch = 1, .threads = 1, .max_bytes = FUZZ_ONNX_MAX_BYTES };
    onnx_session *s = onnx_session_create(m, &opt, &err);
    if (!s)
        must_say_why(&err);
    else
        (void)run_once(s, m);
    onnx_session_free(s);
    onnx_model_free(m);
    return 0;
}
