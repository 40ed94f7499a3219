/*
 * grpc_infer_decode.h — a ModelInferRequest decoded with its raw_input_contents left in the
 * received message, not copied out as protobuf-c's unpack copies every bytes field: a batch
 * of images is megabytes, the rest of the request a few hundred bytes. Private to
 * service/infer (grpc_oip.c).
 */
#ifndef GJ_GRPC_INFER_DECODE_H
#define GJ_GRPC_INFER_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "service/grpc/grpc_service.pb-c.h"

/* The offset of the first raw_input_contents entry's bytes in a message whose first n bytes
 * are head (0 when they do not reach it): the transport aligns the message on it. */
size_t grpc_infer_raw_offset(const uint8_t *head, size_t n);
/* The request of msg (len bytes), raw_input_contents pointing into msg (which must outlive
 * it); NULL when it cannot be decoded. Free it with grpc_infer_request_free. */
Inference__ModelInferRequest *grpc_infer_request_unpack(const uint8_t *msg, size_t len);
void grpc_infer_request_free(Inference__ModelInferRequest *req);

#endif
