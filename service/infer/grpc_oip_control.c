/*
 * grpc_oip_control.c — Triton's ModelConfig, ModelStatistics, RepositoryIndex,
 * RepositoryModelLoad and RepositoryModelUnload over gRPC: each asks the function its /v2
 * route asks (gj_model_config_to_triton_json, oip_model_stats_json, oip_repository_index,
 * oip_repository_load / _unload) and sends that JSON as the protobuf message it is the JSON
 * form of (service/grpc/pb_json.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "service/base/base64.h"
#include "service/db/db.h"
#include "service/grpc/grpc_service.pb-c.h"
#include "service/grpc/pb_json.h"
#include "service/infer/grpc_oip.h"
#include "service/infer/infer.h"
#include "service/infer/oip.h"
#include "service/server.h"

#define DB_WAIT_MS 5000

/* Answers j (consumed) as a message of type d. */
static void reply_json(struct gj_grpc_call *c, const ProtobufCMessageDescriptor *d, json_t *j)
{
    struct pb_arena arena = { 0 };
    char msg[256];
    ProtobufCMessage *m = j ? pb_from_json(&arena, d, j, msg, sizeof msg) : NULL;
    if (m)
        grpc_oip_reply(c, m);
    else
        gj_grpc_fail(c, GJ_GRPC_INTERNAL, "%s", j ? msg : "out of memory");
    pb_arena_free(&arena);
    json_decref(j);
}

static void fail_with(struct gj_grpc_call *c, const struct gj_error *err)
{
    gj_grpc_fail(c, gj_grpc_code_for_http(err->status), "%s", err->message);
}

void grpc_oip_model_config(struct gj_grpc_call *c)
{
    Inference__ModelConfigRequest *req = inference__model_config_request__unpack(NULL, c->req_len, c->req);
    int64_t version;
    gj_model_repo *repo = req ? grpc_oip_requested(c, req->name, req->version, &version) : NULL;
    if (!req)
        gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "the ModelConfigRequest cannot be decoded");
    if (repo) {
        struct gj_model_config cfg;
        struct gj_error err = { 0 };
        if (gj_model_repo_config(repo, req->name, version, &cfg, &err) != 0) {
            grpc_oip_lookup_failed(c, req->name, &err);
        } else {
            json_t *config = gj_model_config_to_triton_json(&cfg);
            reply_json(c, &inference__model_config_response__descriptor,
                       config ? json_pack("{s:o}", "config", config) : NULL);
        }
        gj_model_config_free(&cfg);
    }
    if (req)
        inference__model_config_request__free_unpacked(req, NULL);
}

void grpc_oip_model_statistics(struct gj_grpc_call *c)
{
    Inference__ModelStatisticsRequest *req = inference__model_statistics_request__unpack(NULL, c->req_len, c->req);
    if (!req) {
        gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "the ModelStatisticsRequest cannot be decoded");
        return;
    }
    int64_t version = 0;
    int all = !req->name[0];   /* Triton: no name, every model */
    gj_model_repo *repo = all ? gj_infer_repo() : grpc_oip_requested(c, req->name, req->version, &version);
    if (all && !repo)
        gj_grpc_fail(c, GJ_GRPC_UNAVAILABLE, "the model repository is not available");
    if (repo) {
        struct gj_error err = { 0 };
        json_t *o = oip_model_stats_json(repo, all ? NULL : req->name, version, &err);
        if (o)
            reply_json(c, &inference__model_statistics_response__descriptor, o);
        else
            fail_with(c, &err);
    }
    inference__model_statistics_request__free_unpacked(req, NULL);
}

void grpc_oip_repository_index(struct gj_grpc_call *c)
{
    Inference__RepositoryIndexRequest *req = inference__repository_index_request__unpack(NULL, c->req_len, c->req);
    if (!req) {
        gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "the RepositoryIndexRequest cannot be decoded");
        return;
    }
    struct gj_error err = { 0 };
    json_t *a = oip_repository_index(req->ready, &err);
    if (a)
        reply_json(c, &inference__repository_index_response__descriptor, json_pack("{s:o}", "models", a));
    else
        fail_with(c, &err);
    inference__repository_index_request__free_unpacked(req, NULL);
}

/* A load's parameters as /v2 takes them: bytes (a file:) as base64, the others as they are. */
static json_t *load_params_json(const Inference__RepositoryModelLoadRequest *req)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < req->n_parameters; i++) {
        const Inference__ModelRepositoryParameter *p = req->parameters[i]->value;
        json_t *v = NULL;
        switch (p ? p->parameter_choice_case : 0) {
        case INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM:
            v = json_boolean(p->bool_param);
            break;
        case INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_INT64_PARAM:
            v = json_integer(p->int64_param);
            break;
        case INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_STRING_PARAM:
            v = json_string(p->string_param);
            break;
        case INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BYTES_PARAM: {
            size_t n = gj_base64_encoded_len(p->bytes_param.len, GJ_BASE64_STD) + 1;
            char *text = malloc(n);
            if (text && gj_base64_encode(p->bytes_param.data, p->bytes_param.len, text, n, GJ_BASE64_STD) >= 0)
                v = json_string(text);
            free(text);
            break;
        }
        default:
            v = json_null();
        }
        if (!v || json_object_set_new(o, req->parameters[i]->key, v) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* Load or unload, with a pooled connection held for the change. */
static void repository_change(struct gj_grpc_call *c, int load)
{
    Inference__RepositoryModelLoadRequest *req =
        inference__repository_model_load_request__unpack(NULL, c->req_len, c->req);   /* unload: same fields */
    if (!req) {
        gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "the request cannot be decoded");
        return;
    }
    json_t *params = load_params_json(req);
    PGconn *conn = params ? gj_db_acquire(c->srv->db, DB_WAIT_MS) : NULL;
    struct gj_error err = { 0 };
    char request_id[40];
    snprintf(request_id, sizeof request_id, "grpc");
    int rc = !params ? (gj_error_set(&err, "", "out of memory"), err.status = 500, -1)
             : load ? oip_repository_load(conn, req->model_name, params, request_id, &err)
                    : oip_repository_unload(conn, req->model_name, params, &err);
    if (conn)
        gj_db_release(c->srv->db, conn);
    if (rc == 0) {
        Inference__RepositoryModelLoadResponse resp = INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
        grpc_oip_reply(c, &resp.base);   /* empty, as RepositoryModelUnloadResponse */
    } else {
        fail_with(c, &err);
    }
    json_decref(params);
    inference__repository_model_load_request__free_unpacked(req, NULL);
}

void grpc_oip_repository_load(struct gj_grpc_call *c)
{
    repository_change(c, 1);
}

void grpc_oip_repository_unload(struct gj_grpc_call *c)
{
    repository_change(c, 0);
}

/* ---- trace and log settings ------------------------------------------------------------------ */

/* A trace setting's SettingValue as /v2's JSON: trace_level an array, the others a string
 * (no value: null, which clears a model's setting, as Triton's empty value). */
static json_t *trace_value_json(const char *key, const Inference__TraceSettingRequest__SettingValue *v)
{
    if (!v || v->n_value == 0)
        return json_null();
    if (strcmp(key, "trace_level") != 0)
        return json_string(v->value[0]);
    json_t *a = json_array();
    for (size_t i = 0; a && i < v->n_value; i++)
        json_array_append_new(a, json_string(v->value[i]));
    return a;
}

/* /v2's settings object as the SettingValue map's JSON form ({key: {"value": [...]}}),
 * numbers and booleans written as the strings Triton's gRPC answer carries. */
static json_t *trace_settings_map(json_t *o)
{
    json_t *m = json_object();
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        json_t *values = json_array();
        if (json_is_array(v))
            json_array_extend(values, v);
        else if (json_is_string(v))
            json_array_append(values, v);
        json_object_set_new(m, key, json_pack("{s:o}", "value", values));
    }
    json_decref(o);
    return json_pack("{s:o}", "settings", m);
}

void grpc_oip_trace_setting(struct gj_grpc_call *c)
{
    Inference__TraceSettingRequest *req = inference__trace_setting_request__unpack(NULL, c->req_len, c->req);
    if (!req) {
        gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "the TraceSettingRequest cannot be decoded");
        return;
    }
    json_t *update = req->n_settings ? json_object() : NULL;   /* none: read them */
    for (size_t i = 0; update && i < req->n_settings; i++)
        json_object_set_new(update, req->settings[i]->key,
                            trace_value_json(req->settings[i]->key, req->settings[i]->value));
    struct gj_error err = { 0 };
    json_t *o = oip_trace_setting(req->model_name[0] ? req->model_name : NULL, update, &err);
    if (o)
        reply_json(c, &inference__trace_setting_response__descriptor, trace_settings_map(o));
    else
        fail_with(c, &err);
    json_decref(update);
    inference__trace_setting_request__free_unpacked(req, NULL);
}

static json_t *log_value_json(const Inference__LogSettingsRequest__SettingValue *v)
{
    switch (v ? v->parameter_choice_case : 0) {
    case INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_BOOL_PARAM:
        return json_boolean(v->bool_param);
    case INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_UINT32_PARAM:
        return json_integer(v->uint32_param);
    case INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM:
        return json_string(v->string_param);
    default:
        return json_null();
    }
}

/* /v2's log settings as LogSettingsResponse's JSON form (each value in its oneof member). */
static json_t *log_settings_map(json_t *o)
{
    json_t *m = json_object();
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        const char *member = json_is_boolean(v) ? "bool_param" : json_is_integer(v) ? "uint32_param" : "string_param";
        json_object_set_new(m, key, json_pack("{s:O}", member, v));
    }
    json_decref(o);
    return json_pack("{s:o}", "settings", m);
}

void grpc_oip_log_settings(struct gj_grpc_call *c)
{
    Inference__LogSettingsRequest *req = inference__log_settings_request__unpack(NULL, c->req_len, c->req);
    if (!req) {
        gj_grpc_fail(c, GJ_GRPC_INVALID_ARGUMENT, "the LogSettingsRequest cannot be decoded");
        return;
    }
    json_t *update = req->n_settings ? json_object() : NULL;
    for (size_t i = 0; update && i < req->n_settings; i++)
        json_object_set_new(update, req->settings[i]->key, log_value_json(req->settings[i]->value));
    struct gj_error err = { 0 };
    json_t *o = oip_log_settings(update, "gRPC LogSettings", &err);
    if (o)
        reply_json(c, &inference__log_settings_response__descriptor, log_settings_map(o));
    else
        fail_with(c, &err);
    json_decref(update);
    inference__log_settings_request__free_unpacked(req, NULL);
}
