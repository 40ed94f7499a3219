/*
 * grpc_oip.c — Triton's GRPCInferenceService methods (service/grpc/grpc_service.proto) over
 * the same internals as /v2 over HTTP (routes_oip*.c): the module's repository, the model
 * lookups of oip.h, the tensors of oip_tensor.h (an input's raw_input_contents is read as
 * Triton's binary tensor extension reads its bytes, typed contents as its JSON `data`), the
 * classification extension, and the model's shared dynamic batcher (its statistics and
 * metrics are /v2's). The transport is service/grpc/grpc_server.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gj_config.h"
#include "infer/onnx/onnx_elem.h"
#include "infer/serving/batcher.h"
#include "infer/serving/model_repo.h"
#include "service/grpc/grpc_server.h"
#include "service/grpc/grpc_service.pb-c.h"
#include "service/infer/grpc_infer_decode.h"
#include "service/infer/grpc_oip.h"
#include "service/infer/infer.h"
#include "service/infer/oip.h"
#include "service/infer/oip_model_io.h"
#include "service/infer/oip_tensor.h"

#define MAX_TENSORS 64

void grpc_oip_reply(struct gj_grpc_call *c, const ProtobufCMessage *msg)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    c->resp = malloc(n ? n : 1);
    if (!c->resp) {
        gj_grpc_fail(c, GJ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    c->resp_len = protobuf_c_message_pack(msg, c->resp);
    c->status = GJ_GRPC_OK;
}

gj_model_repo *grpc_oip_requested(struct gj_grpc_call *c, const char *name, const char *version, int64_t *v)
{
    *v = oip_parse_version(version);
    gj_model_repo *repo = gj_infer_repo();
    if (*v < 0)
        gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "version '%s' is not valid: versions are positive integers", version);
    else if (!repo)
        gj_grpc_fail(c, GJ_GRPC_UNAVAILABLE, "the model repository is not available");
    else if (!name || !gj_model_name_ok(name))
        gj_grpc_fail(c, GJ_GRPC_NOT_FOUND, "unknown model '%s'", name ? name : "");
    else
        return repo;
    return NULL;
}

void grpc_oip_lookup_failed(struct gj_grpc_call *c, const char *name, const struct gj_error *err)
{
    if (err->status == 404 || err->status == 400)
        gj_grpc_fail(c, gj_grpc_code_for_http(err->status), "%s", err->message);
    else
        gj_grpc_fail(c, GJ_GRPC_UNAVAILABLE, "model '%s' is not ready: %s", name, err->message);
}

/* ---- health and metadata ------------------------------------------------------------------- */

static void server_live(struct gj_grpc_call *c)
{
    Inference__ServerLiveResponse resp = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
    resp.live = 1;
    grpc_oip_reply(c, &resp.base);
}

static void server_ready(struct gj_grpc_call *c)
{
    Inference__ServerReadyResponse resp = INFERENCE__SERVER_READY_RESPONSE__INIT;
    resp.ready = oip_server_ready(c->srv) != 0;
    grpc_oip_reply(c, &resp.base);
}

static void server_metadata(struct gj_grpc_call *c)
{
    /* /v2's list: what is served over both transports */
    static char *extensions[] = { "binary_tensor_data", "classification", "parameters", "model_repository",
                                  "model_repository(unload_dependents)", "model_configuration", "statistics",
                                  "trace", "logging" };
    Inference__ServerMetadataResponse resp = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
    resp.name = "gpujobd";
    resp.version = GJ_VERSION;
    resp.n_extensions = sizeof extensions / sizeof extensions[0];
    resp.extensions = extensions;
    grpc_oip_reply(c, &resp.base);
}

/* Ready as GET /v2/models/{name}/ready: loaded and placed on a device (never loads it). */
static void model_ready(struct gj_grpc_call *c)
{
    Inference__ModelReadyRequest *req = inference__model_ready_request__unpack(NULL, c->req_len, c->req);
    if (!req) {
        gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "the ModelReadyRequest cannot be decoded");
        return;
    }
    int64_t version;
    gj_model_repo *repo = grpc_oip_requested(c, req->name, req->version, &version);
    Inference__ModelReadyResponse resp = INFERENCE__MODEL_READY_RESPONSE__INIT;
    gj_served_model *m = NULL;
    struct gj_error err = { 0 };
    if (repo && gj_model_repo_get_loaded(repo, req->name, version, &m, &err) == 0) {
        json_t *devices = gj_infer_devices_json(gj_served_model_name(m), gj_served_model_version(m));
        resp.ready = json_array_size(devices) > 0;
        json_decref(devices);
        gj_served_model_release(m);
    }
    if (repo)   /* unknown, unloaded, failed: not ready, as Triton answers */
        grpc_oip_reply(c, &resp.base);
    inference__model_ready_request__free_unpacked(req, NULL);
}

/* Triton's TensorMetadata list of a model's tensors (-1 first when it batches). */
static Inference__ModelMetadataResponse__TensorMetadata **tensor_metadata(const struct gj_tensor_config *t, size_t n,
                                                                          int batched)
{
    Inference__ModelMetadataResponse__TensorMetadata **list = calloc(n ? n : 1, sizeof *list);
    for (size_t i = 0; list && i < n; i++) {
        Inference__ModelMetadataResponse__TensorMetadata *tm = calloc(1, sizeof *tm);
        int64_t *shape = calloc((size_t)t[i].rank + 1, sizeof *shape);
        if (!tm || !shape) {
            free(tm);
            free(shape);
            for (size_t k = 0; k < i; k++) {
                free(list[k]->shape);
                free(list[k]);
            }
            free(list);
            return NULL;
        }
        inference__model_metadata_response__tensor_metadata__init(tm);
        tm->name = (char *)t[i].name;
        tm->datatype = (char *)onnx_elem_triton_name(t[i].elem_type);
        size_t k = 0;
        if (batched)
            shape[k++] = -1;
        for (int d = 0; d < t[i].rank; d++)
            shape[k++] = t[i].dims[d];
        tm->n_shape = k;
        tm->shape = shape;
        list[i] = tm;
    }
    return list;
}

static void tensor_metadata_free(Inference__ModelMetadataResponse__TensorMetadata **list, size_t n)
{
    for (size_t i = 0; list && i < n; i++) {
        free(list[i]->shape);
        free(list[i]);
    }
    free(list);
}

/* The versions the metadata lists: the one asked for, else every version of the model. */
static size_t version_names(gj_model_repo *repo, const char *name, const char *asked, char (*out)[24], size_t cap)
{
    if (asked && *asked) {
        snprintf(out[0], sizeof out[0], "%s", asked);
        return 1;
    }
    struct gj_model_version_info vi[64];
    size_t nv = 0;
    struct gj_error err = { 0 };
    if (gj_model_repo_versions(repo, name, vi, 64, &nv, &err) != 0)
        return 0;
    size_t n = 0;
    for (; n < nv && n < 64 && n < cap; n++)
        snprintf(out[n], sizeof out[n], "%" PRId64, vi[n].version);
    return n;
}

static void model_metadata(struct gj_grpc_call *c)
{
    Inference__ModelMetadataRequest *req = inference__model_metadata_request__unpack(NULL, c->req_len, c->req);
    if (!req) {
        gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "the ModelMetadataRequest cannot be decoded");
        return;
    }
    int64_t version;
    gj_model_repo *repo = grpc_oip_requested(c, req->name, req->version, &version);
    struct oip_md_source src;
    struct gj_error err = { 0 };
    struct oip_model_io io;
    if (!repo) {
        inference__model_metadata_request__free_unpacked(req, NULL);
        return;
    }
    if (oip_md_source_get(repo, req->name, version, &src, &err) != 0) {
        grpc_oip_lookup_failed(c, req->name, &err);
        inference__model_metadata_request__free_unpacked(req, NULL);
        return;
    }
    if (oip_model_io(src.cfg, &io) != 0) {
        gj_grpc_fail(c, GJ_GRPC_UNAVAILABLE, "model '%s' is not ready: its inputs and outputs come from its model "
                     "file when it loads", req->name);
    } else {
        char names[64][24];
        char *vptr[64];
        size_t nv = version_names(repo, req->name, req->version, names, 64);
        for (size_t i = 0; i < nv; i++)
            vptr[i] = names[i];
        Inference__ModelMetadataResponse resp = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
        resp.name = req->name;
        resp.n_versions = nv;
        resp.versions = vptr;
        resp.platform = "onnxruntime_onnx";
        resp.inputs = tensor_metadata(io.inputs, io.n_inputs, io.batched);
        resp.outputs = tensor_metadata(io.outputs, io.n_outputs, io.batched);
        if (resp.inputs && resp.outputs) {
            resp.n_inputs = io.n_inputs;
            resp.n_outputs = io.n_outputs;
            grpc_oip_reply(c, &resp.base);
        } else {
            gj_grpc_fail(c, GJ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
        }
        tensor_metadata_free(resp.inputs, resp.inputs ? io.n_inputs : 0);
        tensor_metadata_free(resp.outputs, resp.outputs ? io.n_outputs : 0);
    }
    oip_md_source_free(&src);
    inference__model_metadata_request__free_unpacked(req, NULL);
}

/* ---- infer ---------------------------------------------------------------------------------- */

/* One ModelInfer call's state. */
struct grpc_infer {
    Inference__ModelInferRequest *req;
    gj_served_model *m;
    struct oip_model_io io;
    struct oip_tensor in[MAX_TENSORS];
    json_t *heads[MAX_TENSORS];          /* what in[i] was read from (BYTES point into it) */
    unsigned char *typed_bytes[MAX_TENSORS];   /* typed BYTES contents in binary form */
    size_t n_in;
    struct gj_tensor gin[MAX_TENSORS], gout[MAX_TENSORS];
    size_t out_index[MAX_TENSORS];       /* the model output of gout[i] */
    uint64_t classes[MAX_TENSORS];       /* 0: raw, else the classification's k */
    size_t n_out;
    char msg[768];
};

/* Typed contents as the JSON `data` oip_tensor_read takes: the one field that has values. */
static json_t *typed_json(const Inference__InferTensorContents *tc)
{
    json_t *a = json_array();
    if (!tc || !a)
        return a;
    for (size_t i = 0; i < tc->n_bool_contents; i++)
        json_array_append_new(a, json_boolean(tc->bool_contents[i]));
    for (size_t i = 0; i < tc->n_int_contents; i++)
        json_array_append_new(a, json_integer(tc->int_contents[i]));
    for (size_t i = 0; i < tc->n_int64_contents; i++)
        json_array_append_new(a, json_integer(tc->int64_contents[i]));
    for (size_t i = 0; i < tc->n_uint_contents; i++)
        json_array_append_new(a, json_integer(tc->uint_contents[i]));
    for (size_t i = 0; i < tc->n_uint64_contents; i++)   /* above INT64_MAX: not representable */
        json_array_append_new(a, tc->uint64_contents[i] > INT64_MAX ? json_real((double)tc->uint64_contents[i])
                                                                     : json_integer((json_int_t)tc->uint64_contents[i]));
    for (size_t i = 0; i < tc->n_fp32_contents; i++)
        json_array_append_new(a, json_real(tc->fp32_contents[i]));
    for (size_t i = 0; i < tc->n_fp64_contents; i++)
        json_array_append_new(a, json_real(tc->fp64_contents[i]));
    return a;
}

/* Typed BYTES contents in Triton's binary form (4-byte little-endian length, bytes). */
static unsigned char *typed_bytes(const Inference__InferTensorContents *tc, size_t *len)
{
    size_t n = 0;
    for (size_t i = 0; i < tc->n_bytes_contents; i++)
        n += 4 + tc->bytes_contents[i].len;
    unsigned char *out = malloc(n ? n : 1), *p = out;
    for (size_t i = 0; out && i < tc->n_bytes_contents; i++) {
        uint32_t l = (uint32_t)tc->bytes_contents[i].len;
        memcpy(p, &l, 4);
        memcpy(p + 4, tc->bytes_contents[i].data, l);
        p += 4 + l;
    }
    *len = n;
    return out;
}

/* Input i of the request decoded as /v2 decodes a tensor. 0, or -1 with g->msg. */
static int read_input(struct grpc_infer *g, size_t i)
{
    const Inference__ModelInferRequest__InferInputTensor *it = g->req->inputs[i];
    json_t *shape = json_array();
    for (size_t k = 0; shape && k < it->n_shape; k++)
        json_array_append_new(shape, json_integer(it->shape[k]));
    json_t *jt = json_pack("{s:s, s:s, s:o}", "name", it->name ? it->name : "", "datatype",
                           it->datatype ? it->datatype : "", "shape", shape);
    g->heads[i] = jt;
    if (!jt) {
        snprintf(g->msg, sizeof g->msg, "out of memory");
        return -1;
    }
    const unsigned char *bin = NULL;
    size_t left = 0, bytes = 0;
    if (g->req->n_raw_input_contents) {
        bin = g->req->raw_input_contents[i].data;
        bytes = left = g->req->raw_input_contents[i].len;
    } else if (it->contents && it->contents->n_bytes_contents) {
        bin = g->typed_bytes[i] = typed_bytes(it->contents, &bytes);
        left = bytes;
    } else {
        json_object_set_new(jt, "data", typed_json(it->contents));
    }
    if (bin)
        json_object_set_new(jt, "parameters", json_pack("{s:I}", "binary_data_size", (json_int_t)bytes));
    if (oip_tensor_head(jt, &g->in[i], g->msg, sizeof g->msg) != 0 ||
        oip_tensor_read(jt, NULL, &bin, &left, &g->in[i], g->msg, sizeof g->msg) != 0)
        return -1;
    struct gj_tensor *t = &g->gin[i];
    memcpy(t->name, g->in[i].name, sizeof t->name);   /* both 256 bytes, NUL-terminated */
    t->elem_type = g->in[i].elem_type;
    t->rank = g->in[i].rank;
    memcpy(t->dims, g->in[i].dims, sizeof t->dims);
    t->data = g->in[i].data;
    t->bytes = g->in[i].bytes;
    return 0;
}

/* The outputs asked for (each by name, with its classification), else every output. */
static int read_outputs(struct grpc_infer *g)
{
    size_t n = g->req->n_outputs ? g->req->n_outputs : g->io.n_outputs;
    if (n > MAX_TENSORS) {
        snprintf(g->msg, sizeof g->msg, "at most %d outputs may be requested", MAX_TENSORS);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        size_t idx = i;
        if (g->req->n_outputs) {
            const Inference__ModelInferRequest__InferRequestedOutputTensor *ro = g->req->outputs[i];
            for (idx = 0; idx < g->io.n_outputs; idx++)
                if (ro->name && strcmp(ro->name, g->io.outputs[idx].name) == 0)
                    break;
            if (idx == g->io.n_outputs) {
                snprintf(g->msg, sizeof g->msg, "unexpected inference output '%s' for model '%s'",
                         ro->name ? ro->name : "", g->req->model_name);
                return -1;
            }
            for (size_t k = 0; k < ro->n_parameters; k++) {
                const Inference__InferParameter *p = ro->parameters[k]->value;
                if (strcmp(ro->parameters[k]->key, "classification") != 0 || !p)
                    continue;
                if (p->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM ||
                    p->int64_param < 1) {
                    snprintf(g->msg, sizeof g->msg, "Unable to set 'classification' of output '%s': it must be "
                             "a positive integer", ro->name);
                    return -1;
                }
                g->classes[i] = (uint64_t)p->int64_param;
            }
        }
        g->out_index[i] = idx;
        snprintf(g->gout[i].name, sizeof g->gout[i].name, "%s", g->io.outputs[idx].name);
    }
    g->n_out = n;
    return 0;
}

/* Output i as it is sent: the batcher's tensor, or its classification (owned). */
static int sent_output(struct grpc_infer *g, size_t i, struct oip_tensor *t, int *owned)
{
    const struct gj_tensor *o = &g->gout[i];
    struct oip_tensor v = { .elem_type = o->elem_type, .rank = o->rank, .data = o->data, .bytes = o->bytes };
    snprintf(v.name, sizeof v.name, "%s", o->name);
    memcpy(v.dims, o->dims, sizeof v.dims);
    *owned = 0;
    if (!g->classes[i]) {
        *t = v;
        return 0;
    }
    size_t n_labels;
    const char *const *labels = gj_served_model_output_labels(g->m, g->out_index[i], &n_labels);
    if (oip_classify(&v, g->io.batched, g->classes[i], labels, n_labels, t, g->msg, sizeof g->msg))
        return -1;
    *owned = 1;
    return 0;
}

/* The response: every output's name, datatype and shape, its bytes in raw_output_contents. */
static void infer_reply(struct gj_grpc_call *c, struct grpc_infer *g)
{
    Inference__ModelInferResponse resp = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    Inference__ModelInferResponse__InferOutputTensor ots[MAX_TENSORS], *otp[MAX_TENSORS];
    ProtobufCBinaryData raw[MAX_TENSORS];
    struct oip_tensor sent[MAX_TENSORS];
    int owned[MAX_TENSORS] = { 0 };
    char version[24];
    size_t n = 0;
    snprintf(version, sizeof version, "%" PRId64, gj_served_model_version(g->m));
    for (; c->status == GJ_GRPC_OK && n < g->n_out; n++) {
        if (sent_output(g, n, &sent[n], &owned[n]) != 0) {
            gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "%s", g->msg);
            break;
        }
        inference__model_infer_response__infer_output_tensor__init(&ots[n]);
        ots[n].name = sent[n].name;
        ots[n].datatype = (char *)onnx_elem_triton_name(sent[n].elem_type);
        ots[n].n_shape = (size_t)sent[n].rank;
        ots[n].shape = sent[n].dims;
        otp[n] = &ots[n];
        raw[n].len = oip_tensor_binary_size(&sent[n]);
        raw[n].data = malloc(raw[n].len ? raw[n].len : 1);
        if (!raw[n].data) {
            gj_grpc_fail(c, GJ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
            continue;
        }
        oip_tensor_binary_write(&sent[n], raw[n].data);
    }
    if (c->status == GJ_GRPC_OK) {
        resp.model_name = g->req->model_name;
        resp.model_version = version;
        resp.id = g->req->id;
        resp.n_outputs = resp.n_raw_output_contents = n;
        resp.outputs = otp;
        resp.raw_output_contents = raw;
        grpc_oip_reply(c, &resp.base);
    }
    for (size_t i = 0; i < n; i++) {
        free(raw[i].data);
        if (owned[i])
            oip_tensor_free_data(&sent[i]);
    }
}

static void infer_free(struct grpc_infer *g)
{
    for (size_t i = 0; i < g->n_in; i++) {
        oip_tensor_free_data(&g->in[i]);
        json_decref(g->heads[i]);
        free(g->typed_bytes[i]);
    }
    gj_tensors_free(g->gout, g->n_out);
    gj_served_model_release(g->m);
    grpc_infer_request_free(g->req);
    free(g);
}

/* The request's parameters as /v2's JSON takes them (a double: not a type Triton's
 * parameters have over HTTP, refused there as here). */
static json_t *request_params_json(const Inference__ModelInferRequest *req)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < req->n_parameters; i++) {
        const Inference__InferParameter *p = req->parameters[i]->value;
        json_t *v;
        switch (p ? p->parameter_choice_case : 0) {
        case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM: v = json_boolean(p->bool_param); break;
        case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM: v = json_integer(p->int64_param); break;
        case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM: v = json_string(p->string_param); break;
        case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM:
            v = p->uint64_param <= INT64_MAX ? json_integer((json_int_t)p->uint64_param) : json_real(0.5);
            break;
        default: v = json_real(0.5); break;   /* double or unset: an invalid type */
        }
        json_object_set_new(o, req->parameters[i]->key, v);
    }
    return o;
}

/* The call's time in the queue: the request's timeout parameter, within its deadline. 0, or
 * -1 with the call failed. */
static int request_timeout(struct gj_grpc_call *c, const Inference__ModelInferRequest *req, int64_t *timeout_us)
{
    json_t *params = request_params_json(req);
    struct gj_error err = { 0 };
    int64_t asked = 0;
    int rc = params ? oip_check_parameters(params, &asked, NULL, &err) : oip_refuse(&err, 500, "out of memory");
    json_decref(params);
    if (rc != 0) {
        gj_grpc_fail(c, gj_grpc_code_for_http(err.status), "%s", err.message);
        return -1;
    }
    *timeout_us = asked && (!c->timeout_us || asked < c->timeout_us) ? asked : c->timeout_us;
    return 0;
}

/* What a stream's error answer names of the request that failed (owned strings). */
struct infer_names {
    char *id, *model, *version;
};

static void infer_names_take(struct infer_names *names, const Inference__ModelInferRequest *req)
{
    if (!names || !req)
        return;
    names->id = strdup(req->id ? req->id : "");
    names->model = strdup(req->model_name ? req->model_name : "");
    names->version = strdup(req->model_version ? req->model_version : "");
}

static void infer_names_free(struct infer_names *names)
{
    free(names->id);
    free(names->model);
    free(names->version);
}

/* Decodes, checks and runs a ModelInfer request through the model's batcher; names (NULL:
 * not wanted) takes the request's id and model, for a stream's error answer. */
static void run_infer(struct gj_grpc_call *c, struct infer_names *names)
{
    struct grpc_infer *g = calloc(1, sizeof *g);
    if (!g) {
        gj_grpc_fail(c, GJ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    g->req = grpc_infer_request_unpack(c->req, c->req_len);   /* raw tensors in place */
    infer_names_take(names, g->req);
    int64_t version;
    struct gj_error err = { 0 };
    gj_model_repo *repo = NULL;
    if (!g->req) {
        gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "the ModelInferRequest cannot be decoded");
    } else if ((repo = grpc_oip_requested(c, g->req->model_name, g->req->model_version, &version)) != NULL &&
               gj_model_repo_acquire(repo, g->req->model_name, version, &g->m, &err) != 0) {
        grpc_oip_lookup_failed(c, g->req->model_name, &err);
    }
    if (!g->m) {
        infer_free(g);
        return;
    }
    const Inference__ModelInferRequest *req = g->req;
    if (oip_model_io(gj_served_model_config(g->m), &g->io) != 0) {
        gj_grpc_fail(c, GJ_GRPC_INTERNAL, "model '%s' names no inputs or outputs", req->model_name);
    } else if (req->n_inputs > MAX_TENSORS) {
        gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "at most %d inputs", MAX_TENSORS);
    } else if (req->n_raw_input_contents && req->n_raw_input_contents != req->n_inputs) {
        gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "raw_input_contents has %zu entries for %zu inputs: give one "
                     "for every input, or none", req->n_raw_input_contents, req->n_inputs);
    } else {
        for (; g->n_in < req->n_inputs; g->n_in++)
            if (read_input(g, g->n_in) != 0) {
                g->n_in++;
                gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "%s", g->msg);
                break;
            }
        if (c->status == GJ_GRPC_OK && read_outputs(g) != 0)
            gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "%s", g->msg);
    }
    int64_t timeout_us = 0;
    if (c->status == GJ_GRPC_OK)
        request_timeout(c, req, &timeout_us);
    if (c->status == GJ_GRPC_OK) {
        gj_batcher *b = gj_batcher_acquire(g->m, &err);
        size_t n_out = g->n_out;
        g->n_out = 0;   /* nothing to free until the batcher filled them */
        int rc = !b ? -1
                 : c->cancelled ? gj_batcher_run_cancellable(b, g->gin, g->n_in, g->gout, n_out, timeout_us, NULL,
                                                             &err, c->cancelled, c->cancel_arg)
                                : gj_batcher_run(b, g->gin, g->n_in, g->gout, n_out, timeout_us, NULL, &err);
        if (!b)
            gj_grpc_fail(c, GJ_GRPC_UNAVAILABLE, "model '%s' is not ready: %s", req->model_name, err.message);
        else if (rc != GJ_BATCH_OK)
            gj_grpc_fail(c, rc == GJ_BATCH_ETIMEDOUT && timeout_us == c->timeout_us && c->timeout_us
                                ? GJ_GRPC_DEADLINE_EXCEEDED : gj_grpc_code_for_http(err.status),
                         "%s", err.message);
        else
            g->n_out = n_out;
        if (b)
            gj_batcher_release(b);
        if (rc == GJ_BATCH_OK)
            infer_reply(c, g);
    }
    infer_free(g);
}

static void model_infer(struct gj_grpc_call *c)
{
    run_infer(c, NULL);
}

/* ---- ModelStreamInfer --------------------------------------------------------------------- */

/* A message of one length-delimited field (protobuf's wire form: tag, varint length, bytes). */
static uint8_t *one_field(unsigned field, const void *data, size_t len, size_t *out_len)
{
    uint8_t *out = malloc(len + 11);
    if (!out)
        return NULL;
    size_t n = 0;
    out[n++] = (uint8_t)(field << 3 | 2);
    uint64_t v = len;
    do {
        out[n] = v & 0x7f;
        v >>= 7;
        out[n++] |= v ? 0x80 : 0;
    } while (v);
    memcpy(out + n, data, len);
    *out_len = n + len;
    return out;
}

/* A failed stream request's answer, as Triton's: error_message, and infer_response naming the
 * request (its id, model and version) so that the client matches the error to its request;
 * the message names the id too, as tritonclient's stream callback sees only the message. */
static void stream_error(struct gj_grpc_call *c, const struct infer_names *names)
{
    char message[sizeof c->message + 240];
    if (names->id && names->id[0])
        snprintf(message, sizeof message, "[request id: %.200s%s] %s", names->id, strlen(names->id) > 200 ? "..." : "",
                 c->message);
    else
        snprintf(message, sizeof message, "%s", c->message);
    Inference__ModelInferResponse named = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    named.id = names->id ? names->id : "";
    named.model_name = names->model ? names->model : "";
    named.model_version = names->version ? names->version : "";
    Inference__ModelStreamInferResponse resp = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
    resp.error_message = message;
    resp.infer_response = &named;
    grpc_oip_reply(c, &resp.base);
}

/* One request of the stream, answered as ModelStreamInferResponse: infer_response (field 2)
 * with ModelInfer's answer, or the error (stream_error); the stream goes on either way, as
 * Triton's. */
static void stream_infer(struct gj_grpc_call *c)
{
    struct infer_names names = { 0 };
    run_infer(c, &names);
    if (c->status == GJ_GRPC_OK) {
        size_t len = 0;
        uint8_t *wrapped = one_field(2, c->resp, c->resp_len, &len);
        free(c->resp);
        c->resp = wrapped;
        c->resp_len = len;
        if (!wrapped)
            gj_grpc_fail(c, GJ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    } else {
        stream_error(c, &names);
    }
    infer_names_free(&names);
}

/* ---- shared memory: not served ------------------------------------------------------------------------------ */

/* The shared-memory RPCs as /v2's routes answer them (oip_shm_*): every request of them
 * carries the region's name as field 1, which SystemSharedMemoryStatusRequest decodes; every
 * answer that succeeds is an empty message (no regions). */
static void shm_call(struct gj_grpc_call *c, int cuda, int reg)   /* reg: 1 register, 0 status, -1 unregister */
{
    Inference__SystemSharedMemoryStatusRequest *req =
        inference__system_shared_memory_status_request__unpack(NULL, c->req_len, c->req);
    if (!req) {
        gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "the request cannot be decoded");
        return;
    }
    struct gj_error err = { 0 };
    int rc = reg > 0 ? oip_shm_register(cuda, req->name, &err) : reg == 0 ? oip_shm_status(cuda, req->name, &err) : 0;
    if (rc == 0) {
        c->resp = malloc(1);
        c->resp_len = 0;
        c->status = c->resp ? GJ_GRPC_OK : GJ_GRPC_RESOURCE_EXHAUSTED;
    } else {
        gj_grpc_fail(c, gj_grpc_code_for_http(err.status), "%s", err.message);
    }
    inference__system_shared_memory_status_request__free_unpacked(req, NULL);
}

static void system_shm_status(struct gj_grpc_call *c) { shm_call(c, 0, 0); }
static void system_shm_register(struct gj_grpc_call *c) { shm_call(c, 0, 1); }
static void system_shm_unregister(struct gj_grpc_call *c) { shm_call(c, 0, -1); }
static void cuda_shm_status(struct gj_grpc_call *c) { shm_call(c, 1, 0); }
static void cuda_shm_register(struct gj_grpc_call *c) { shm_call(c, 1, 1); }
static void cuda_shm_unregister(struct gj_grpc_call *c) { shm_call(c, 1, -1); }

static const struct gj_grpc_method methods[] = {
    { "ServerLive", GJ_GRPC_OPEN, server_live, 0, NULL },
    { "ServerReady", GJ_GRPC_OPEN, server_ready, 0, NULL },
    { "ServerMetadata", GJ_GRPC_USER, server_metadata, 0, NULL },
    { "ModelReady", GJ_GRPC_USER, model_ready, 0, NULL },
    { "ModelMetadata", GJ_GRPC_USER, model_metadata, 0, NULL },
    { "ModelInfer", GJ_GRPC_USER, model_infer, 0, grpc_infer_raw_offset },
    { "ModelStreamInfer", GJ_GRPC_USER, stream_infer, 1, grpc_infer_raw_offset },
    { "ModelConfig", GJ_GRPC_USER, grpc_oip_model_config, 0, NULL },
    { "ModelStatistics", GJ_GRPC_ADMIN, grpc_oip_model_statistics, 0, NULL },
    { "RepositoryIndex", GJ_GRPC_USER, grpc_oip_repository_index, 0, NULL },
    { "RepositoryModelLoad", GJ_GRPC_ADMIN, grpc_oip_repository_load, 0, NULL },
    { "RepositoryModelUnload", GJ_GRPC_ADMIN, grpc_oip_repository_unload, 0, NULL },
    { "TraceSetting", GJ_GRPC_ADMIN, grpc_oip_trace_setting, 0, NULL },
    { "LogSettings", GJ_GRPC_ADMIN, grpc_oip_log_settings, 0, NULL },
    { "SystemSharedMemoryStatus", GJ_GRPC_USER, system_shm_status, 0, NULL },
    { "SystemSharedMemoryRegister", GJ_GRPC_USER, system_shm_register, 0, NULL },
    { "SystemSharedMemoryUnregister", GJ_GRPC_USER, system_shm_unregister, 0, NULL },
    { "CudaSharedMemoryStatus", GJ_GRPC_USER, cuda_shm_status, 0, NULL },
    { "CudaSharedMemoryRegister", GJ_GRPC_USER, cuda_shm_register, 0, NULL },
    { "CudaSharedMemoryUnregister", GJ_GRPC_USER, cuda_shm_unregister, 0, NULL },
};
const struct gj_grpc_methods gj_infer_grpc_methods = { methods, sizeof methods / sizeof methods[0] };
