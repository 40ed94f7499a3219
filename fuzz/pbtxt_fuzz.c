/*
 * pbtxt_fuzz.c — libFuzzer harness for config.pbtxt (compute/infer/serving/pbtxt.c and
 * model_pbtxt.c): the input is the text of a Triton config.pbtxt, read into Triton's
 * ModelConfig by protobuf-c's descriptors and mapped to Triton's JSON ModelConfig. A file
 * that converts must give JSON that dumps; a refusal must say why, naming config.pbtxt.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "infer/serving/model_pbtxt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gj_error err = { 0 };
    char *json = gj_model_pbtxt_to_json_text((const char *)data, size, &err);
    if (!json && !strstr(err.message, "config.pbtxt"))
        abort();
    free(json);
    return 0;
}
