/* service/infer/grpc_infer_decode.c: a ModelInferRequest decoded with its raw_input_contents
 * left where they lie in the message gives what protobuf-c's own unpack gives, the offset the
 * transport aligns on is the first raw entry's, and a malformed message is refused. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "service/infer/grpc_infer_decode.h"

/* A request of two inputs (raw contents of 5 and 3000 bytes), a parameter and an output. */
static uint8_t *packed_request(size_t *len)
{
    static uint8_t small[5] = { 1, 2, 3, 4, 5 };
    static uint8_t big[3000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 7);
    Inference__ModelInferRequest__InferInputTensor in[2], *inp[2] = { &in[0], &in[1] };
    int64_t shape[2] = { 1, 5 };
    for (int i = 0; i < 2; i++) {
        inference__model_infer_request__infer_input_tensor__init(&in[i]);
        in[i].name = i ? "b" : "a";
        in[i].datatype = "UINT8";
        in[i].n_shape = 2;
        in[i].shape = shape;
    }
    Inference__ModelInferRequest__InferRequestedOutputTensor out, *outp = &out;
    inference__model_infer_request__infer_requested_output_tensor__init(&out);
    out.name = "sum";
    Inference__InferParameter value = INFERENCE__INFER_PARAMETER__INIT;
    value.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    value.int64_param = 42;
    Inference__ModelInferRequest__ParametersEntry param = INFERENCE__MODEL_INFER_REQUEST__PARAMETERS_ENTRY__INIT,
                                                  *paramp = &param;
    param.key = "timeout";
    param.value = &value;
    ProtobufCBinaryData raw[2] = { { sizeof small, small }, { sizeof big, big } };
    Inference__ModelInferRequest req = INFERENCE__MODEL_INFER_REQUEST__INIT;
    req.model_name = "multi_io";
    req.model_version = "1";
    req.id = "r-7";
    req.n_inputs = 2;
    req.inputs = inp;
    req.n_outputs = 1;
    req.outputs = &outp;
    req.n_parameters = 1;
    req.parameters = &paramp;
    req.n_raw_input_contents = 2;
    req.raw_input_contents = raw;
    *len = protobuf_c_message_get_packed_size(&req.base);
    uint8_t *msg = malloc(*len);
    assert_non_null(msg);
    assert_int_equal(protobuf_c_message_pack(&req.base, msg), *len);
    return msg;
}

static void same_as_protobuf_c_raw_in_place(void **state)
{
    (void)state;
    size_t len;
    uint8_t *msg = packed_request(&len);
    Inference__ModelInferRequest *want = inference__model_infer_request__unpack(NULL, len, msg);
    Inference__ModelInferRequest *got = grpc_infer_request_unpack(msg, len);
    assert_non_null(want);
    assert_non_null(got);
    assert_string_equal(got->model_name, want->model_name);
    assert_string_equal(got->model_version, want->model_version);
    assert_string_equal(got->id, want->id);
    assert_int_equal(got->n_inputs, 2);
    assert_string_equal(got->inputs[1]->name, "b");
    assert_int_equal(got->n_outputs, 1);
    assert_int_equal(got->n_parameters, 1);
    assert_int_equal(got->parameters[0]->value->int64_param, 42);
    assert_int_equal(got->n_raw_input_contents, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(got->raw_input_contents[i].len, want->raw_input_contents[i].len);
        assert_memory_equal(got->raw_input_contents[i].data, want->raw_input_contents[i].data,
                            want->raw_input_contents[i].len);
        assert_true(got->raw_input_contents[i].data > msg && got->raw_input_contents[i].data < msg + len);
    }
    /* the offset the transport aligns on: the first entry's bytes, when the head reaches it */
    size_t at = (size_t)(got->raw_input_contents[0].data - msg);
    assert_int_equal(grpc_infer_raw_offset(msg, len), at);
    assert_int_equal(grpc_infer_raw_offset(msg, at), at);
    assert_int_equal(grpc_infer_raw_offset(msg, at - 3), 0);
    grpc_infer_request_free(got);
    inference__model_infer_request__free_unpacked(want, NULL);
    free(msg);
}

static void malformed_refused(void **state)
{
    (void)state;
    size_t len;
    uint8_t *msg = packed_request(&len);
    assert_null(grpc_infer_request_unpack(msg, len - 1));     /* cut inside the last raw entry */
    uint8_t varint7[] = { 7 << 3 | 0, 5 };                    /* field 7 not as bytes */
    assert_null(grpc_infer_request_unpack(varint7, sizeof varint7));
    uint8_t group[] = { 1 << 3 | 3 };                         /* a group */
    assert_null(grpc_infer_request_unpack(group, sizeof group));
    uint8_t too_long[] = { 7 << 3 | 2, 0xff, 0xff, 0xff, 0xff, 0x0f, 1 };   /* a length past the end */
    assert_null(grpc_infer_request_unpack(too_long, sizeof too_long));
    assert_int_equal(grpc_infer_raw_offset(too_long, sizeof too_long), 6);   /* a hint only */
    uint8_t bad_name[] = { 1 << 3 | 2, 2, 0xc3, 0x28 };       /* model_name not UTF-8: protobuf-c's check */
    Inference__ModelInferRequest *r = grpc_infer_request_unpack(bad_name, sizeof bad_name);
    Inference__ModelInferRequest *w = inference__model_infer_request__unpack(NULL, sizeof bad_name, bad_name);
    assert_true(!r == !w);
    grpc_infer_request_free(r);
    if (w)
        inference__model_infer_request__free_unpacked(w, NULL);
    Inference__ModelInferRequest *empty = grpc_infer_request_unpack(msg, 0);
    assert_non_null(empty);
    assert_int_equal(empty->n_raw_input_contents, 0);
    grpc_infer_request_free(empty);
    grpc_infer_request_free(NULL);
    free(msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_as_protobuf_c_raw_in_place),
        cmocka_unit_test(malformed_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
