/*
 * grpc_oip.h — what the gRPC method files of the infer module share (grpc_oip.c: health,
 * metadata, infer; grpc_oip_control.c: config, statistics, repository). Private to
 * service/infer.
 */
#ifndef GJ_GRPC_OIP_H
#define GJ_GRPC_OIP_H

#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "infer/serving/model_repo.h"
#include "service/grpc/grpc_server.h"

/* Packs a response message into c->resp (OK), or fails the call. */
void grpc_oip_reply(struct gj_grpc_call *c, const ProtobufCMessage *msg);
/* The repository and version a request names, or NULL with the call failed. */
gj_model_repo *grpc_oip_requested(struct gj_grpc_call *c, const char *name, const char *version, int64_t *v);
/* A failed model lookup as /v2 words it (oip_lookup_failed). */
void grpc_oip_lookup_failed(struct gj_grpc_call *c, const char *name, const struct gj_error *err);

void grpc_oip_model_config(struct gj_grpc_call *c);
void grpc_oip_model_statistics(struct gj_grpc_call *c);
void grpc_oip_repository_index(struct gj_grpc_call *c);
void grpc_oip_repository_load(struct gj_grpc_call *c);
void grpc_oip_repository_unload(struct gj_grpc_call *c);
void grpc_oip_trace_setting(struct gj_grpc_call *c);
void grpc_oip_log_settings(struct gj_grpc_call *c);

#endif
