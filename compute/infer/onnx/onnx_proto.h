/*
 * onnx_proto.h — the loader's readers of decoded protobuf messages (internal to the loader):
 * tensors and value infos (onnx_proto.c) and node attributes (onnx_attrs.c). Each checks
 * what it reads and refuses, with its name, what the runtime does not implement.
 */
#ifndef ONNX_PROTO_H
#define ONNX_PROTO_H

#include "common/gj_error.h"
#include "infer/onnx/onnx_ir.h"
#include "onnx.pb-c.h"

#define ONNX_MAX_NAME 4096   /* bytes of any name in a model */

/* -1 with err when a name is longer than ONNX_MAX_NAME ("a <what> name is longer ..."). */
int onnx_check_name(const char *s, const char *what, struct gj_error *err);
/* A TensorProto as a host tensor (t->data malloc'ed, of its own element type);
 * `what` names it where the tensor has no name. */
int onnx_tensor_from_proto(const Onnx__TensorProto *tp, struct onnx_tensor *t, const char *what,
                           struct gj_error *err);
/* Frees t->data (t may be NULL). */
void onnx_tensor_free_data(struct onnx_tensor *t);
/* The declared element type and shape of a value (an untyped one is left as it is). */
int onnx_value_info(const Onnx__ValueInfoProto *vi, struct onnx_value *v, struct gj_error *err);

/* The parameters of node np (named nname) of operator op from its attributes, with ONNX's
 * defaults; an attribute the runtime does not implement, or a value it does not, is refused
 * with the node's and the attribute's names. p->value, when set, is owned by the node. */
int onnx_parse_attrs(const Onnx__NodeProto *np, const char *nname, int op, int64_t opset,
                     struct onnx_params *p, struct gj_error *err);

#endif
