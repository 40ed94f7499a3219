/*
 * routes_results.c — GET /v1/inference-results: the tenant's inference
 * results (one row per image of a succeeded `infer` job) for validation
 * against radiologists' reads, as JSON or CSV (Accept: text/csv or
 * ?format=csv), filtered by model, version, processed time and study key,
 * paged with an opaque cursor. Rows carry pseudonymous keys only (see
 * infer.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "service/base/base64.h"
#include "service/db/db.h"
#include "service/http/http_server.h"
#include "service/infer/infer.h"
#include "service/base/log.h"

#define RESULTS_DEFAULT 100
#define RESULTS_MAX 10000

enum {
    C_ID, C_JOB, C_STUDY, C_IMAGE, C_INPUT, C_MODEL, C_VERSION, C_STATUS, C_REASON, C_SCORES, C_TOP, C_TOP_SCORE,
    C_ACQUIRED, C_RECEIVED, C_PROCESSED, C_N
};

static const char select_sql[] =
    "SELECT r.id, r.job_id, r.study_key, r.image_key, r.input_name, r.model, r.model_version, r.status,"
    " r.reason, r.scores::text, r.top_label, r.top_score,"
    " to_char(r.acquired_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.US'),"
    " to_char(r.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),"
    " to_char(r.processed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
    " FROM inference_results r WHERE r.tenant_id = $1::uuid"
    " AND ($2::text IS NULL OR r.model = $2)"
    " AND ($3::bigint IS NULL OR r.model_version = $3::bigint)"
    " AND ($4::timestamptz IS NULL OR r.processed_at >= $4::timestamptz)"
    " AND ($5::timestamptz IS NULL OR r.processed_at < $5::timestamptz)"
    " AND ($6::bigint IS NULL OR r.id > $6::bigint)"
    " AND ($7::text IS NULL OR r.study_key = $7)"
    " ORDER BY r.id LIMIT $8::int";

static json_t *text_or_null(PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? json_null() : json_string(PQgetvalue(res, row, col));
}

static json_t *row_json(PGresult *res, int i)
{
    json_t *scores = NULL;
    if (!PQgetisnull(res, i, C_SCORES))
        scores = json_loads(PQgetvalue(res, i, C_SCORES), 0, NULL);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(strtoll(PQgetvalue(res, i, C_ID), NULL, 10)));
    json_object_set_new(o, "job_id", text_or_null(res, i, C_JOB));
    json_object_set_new(o, "study_key", text_or_null(res, i, C_STUDY));
    json_object_set_new(o, "image_key", text_or_null(res, i, C_IMAGE));
    json_object_set_new(o, "input", text_or_null(res, i, C_INPUT));
    json_object_set_new(o, "model", text_or_null(res, i, C_MODEL));
    json_object_set_new(o, "model_version", json_integer(strtoll(PQgetvalue(res, i, C_VERSION), NULL, 10)));
    json_object_set_new(o, "status", text_or_null(res, i, C_STATUS));
    json_object_set_new(o, "reason", text_or_null(res, i, C_REASON));
    json_object_set_new(o, "scores", scores ? scores : json_null());
    json_object_set_new(o, "top_label", text_or_null(res, i, C_TOP));
    json_object_set_new(o, "top_score",
                        PQgetisnull(res, i, C_TOP_SCORE) ? json_null() : json_real(strtod(PQgetvalue(res, i, C_TOP_SCORE), NULL)));
    json_object_set_new(o, "acquired_at", text_or_null(res, i, C_ACQUIRED));
    json_object_set_new(o, "received_at", text_or_null(res, i, C_RECEIVED));
    json_object_set_new(o, "processed_at", text_or_null(res, i, C_PROCESSED));
    return o;
}

/* RFC 4180 field; text that a spreadsheet would take for a formula gets a leading quote. */
static void csv_text(FILE *f, const char *s, int is_text)
{
    if (!s)
        return;
    int quote = strpbrk(s, ",\"\r\n") != NULL;
    int formula = is_text && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t');
    if (quote || formula)
        fputc('"', f);
    if (formula)
        fputc('\'', f);
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            fputc('"', f);
        fputc(*p, f);
    }
    if (quote || formula)
        fputc('"', f);
}

static void csv_header(FILE *f, json_t *labels)
{
    fputs("id,job_id,study_key,image_key,input,model,model_version,status,reason,top_label,top_score,"
          "acquired_at,received_at,processed_at", f);
    for (size_t l = 0; l < json_array_size(labels); l++) {
        char col[200];
        snprintf(col, sizeof col, "score_%s", json_string_value(json_array_get(labels, l)));
        fputc(',', f);
        csv_text(f, col, 1);
    }
    fputs("\r\n", f);
}

static void csv_row(FILE *f, PGresult *res, int i, json_t *labels, json_t *scores)
{
    static const int cols[] = { C_ID, C_JOB, C_STUDY, C_IMAGE, C_INPUT, C_MODEL, C_VERSION, C_STATUS, C_REASON,
                                C_TOP, C_TOP_SCORE, C_ACQUIRED, C_RECEIVED, C_PROCESSED };
    for (size_t k = 0; k < sizeof cols / sizeof cols[0]; k++) {
        if (k)
            fputc(',', f);
        int col = cols[k];
        if (!PQgetisnull(res, i, col))
            csv_text(f, PQgetvalue(res, i, col), col == C_INPUT || col == C_MODEL || col == C_REASON ||
                                                     col == C_TOP || col == C_STATUS);
    }
    for (size_t l = 0; l < json_array_size(labels); l++) {
        fputc(',', f);
        json_t *v = json_object_get(scores, json_string_value(json_array_get(labels, l)));
        if (json_is_number(v))
            fprintf(f, "%.9g", json_number_value(v));
    }
    fputs("\r\n", f);
}

static int wants_csv(struct gj_req *r, int *bad)
{
    const char *fmt = gj_req_query(r, "format");
    *bad = 0;
    if (fmt) {
        if (strcmp(fmt, "csv") == 0)
            return 1;
        if (strcmp(fmt, "json") == 0)
            return 0;
        *bad = 1;
        return 0;
    }
    const char *acc = gj_req_header(r, MHD_HTTP_HEADER_ACCEPT);
    if (!acc)
        return 0;
    /* text/csv listed before any JSON type (q-values are not weighed) */
    const char *csv = strcasestr(acc, "text/csv");
    const char *json = strcasestr(acc, "json");
    return csv && (!json || csv < json);
}

/* The query's filters, checked. */
struct results_query {
    const char *model, *version, *from, *to, *study;
    long limit;
    char after[32];                  /* the cursor's last id, "" for the first page */
    int csv;
};

/* An ir1:<id> cursor (base64url) to the id after which the page starts. 0 or -1. */
static int parse_cursor(const char *cursor, char after[32])
{
    unsigned char raw[48];
    size_t len = strlen(cursor);
    long n = len > 0 && len <= 60 ? gj_base64_decode(cursor, len, raw, sizeof raw - 1, GJ_BASE64_URL) : -1;
    char *end = NULL;
    long long id = -1;
    if (n > 4) {
        raw[n] = '\0';
        if (memcmp(raw, "ir1:", 4) == 0 && strlen((char *)raw) == (size_t)n)
            id = strtoll((char *)raw + 4, &end, 10);
    }
    if (id < 0 || !end || *end)
        return -1;
    snprintf(after, 32, "%lld", id);
    return 0;
}

/* A decimal integer in [lo, hi]. 0 or -1. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = (long)v;
    return 0;
}

static int study_key_ok(const char *s)
{
    int ok = strlen(s) == 64;
    for (size_t i = 0; ok && i < 64; i++)
        ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    return ok;
}

/* The query parameters: model, version, from, to, study_key, limit, cursor, format. 0, or
 * -1 answered (400 naming the parameter). */
static int parse_query(struct gj_req *r, struct results_query *q)
{
    q->model = gj_req_query(r, "model");
    q->version = gj_req_query(r, "version");
    q->from = gj_req_query(r, "from");
    q->to = gj_req_query(r, "to");
    q->study = gj_req_query(r, "study_key");
    const char *limit_s = gj_req_query(r, "limit"), *cursor = gj_req_query(r, "cursor");
    int bad_fmt = 0;
    q->csv = wants_csv(r, &bad_fmt);
    q->limit = RESULTS_DEFAULT;
    long version;
    if (bad_fmt)
        gj_problem(r, 400, "format", "format is csv or json");
    else if (q->model && !gj_model_name_ok(q->model))
        gj_problem(r, 400, "model", "model is a model name (letters, digits, '.', '_', '-')");
    else if (q->version && parse_long(q->version, 1, 999999999, &version) != 0)
        gj_problem(r, 400, "version", "version is a positive integer");
    else if (q->from && !gj_is_timestamp(q->from))
        gj_problem(r, 400, "from", "from is an RFC 3339 timestamp");
    else if (q->to && !gj_is_timestamp(q->to))
        gj_problem(r, 400, "to", "to is an RFC 3339 timestamp");
    else if (q->study && !study_key_ok(q->study))
        gj_problem(r, 400, "study_key", "study_key is 64 lower-case hex digits");
    else if (limit_s && parse_long(limit_s, 1, RESULTS_MAX, &q->limit) != 0)
        gj_problem(r, 400, "limit", "limit is an integer from 1 to %d", RESULTS_MAX);
    else if (cursor && parse_cursor(cursor, q->after) != 0)
        gj_problem(r, 400, "cursor", "the cursor is not one this server returned");
    return r->response ? -1 : 0;
}

/* The cursor of the page after this one (limit rows shown, more exist), "" when none. */
static void next_cursor(PGresult *res, const struct results_query *q, char next[80])
{
    next[0] = '\0';
    if (PQntuples(res) <= q->limit)
        return;
    char raw[40];
    int k = snprintf(raw, sizeof raw, "ir1:%s", PQgetvalue(res, (int)q->limit - 1, C_ID));
    if (gj_base64_encode((const unsigned char *)raw, (size_t)k, next, 80, GJ_BASE64_URL) < 0)
        next[0] = '\0';
}

/* CSV: fixed columns, then one score column per label seen on this page. The text, or
 * NULL (out of memory). */
static char *results_csv(PGresult *res, int shown, size_t *len)
{
    json_t *labels = json_array(), *seen = json_object();
    json_t **scores = calloc((size_t)(shown ? shown : 1), sizeof *scores);
    char *text = NULL;
    FILE *f = scores && labels && seen ? open_memstream(&text, len) : NULL;
    for (int i = 0; f && i < shown; i++) {
        if (PQgetisnull(res, i, C_SCORES))
            continue;
        scores[i] = json_loads(PQgetvalue(res, i, C_SCORES), 0, NULL);
        const char *k;
        json_t *v;
        json_object_foreach(scores[i], k, v) {
            if (!json_object_get(seen, k)) {
                json_object_set_new(seen, k, json_true());
                json_array_append_new(labels, json_string(k));
            }
        }
    }
    if (f)
        csv_header(f, labels);
    for (int i = 0; f && i < shown; i++)
        csv_row(f, res, i, labels, scores[i]);
    for (int i = 0; scores && i < shown; i++)
        json_decref(scores[i]);
    free(scores);
    json_decref(labels);
    json_decref(seen);
    if (!f || fclose(f) != 0 || !text) {
        free(text);
        return NULL;
    }
    return text;
}

static void respond_csv(struct gj_req *r, PGresult *res, int shown, const char *next)
{
    size_t len = 0;
    char *text = results_csv(res, shown, &len);
    struct MHD_Response *resp = text ? MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!resp) {
        free(text);
        gj_problem(r, 500, NULL, "out of memory");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/csv; charset=utf-8; header=present");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_DISPOSITION, "attachment; filename=\"inference-results.csv\"");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (next[0])
        MHD_add_response_header(resp, "X-Next-Cursor", next);   /* pass it as ?cursor= with the same filters */
    gj_respond(r, 200, resp, len);
}

static void results_list(struct gj_req *r)
{
    struct results_query q = { 0 };
    if (parse_query(r, &q) != 0)
        return;
    PGconn *c = gj_req_db(r);
    if (!c) {
        gj_respond_unavailable(r);
        return;
    }
    char lim[24];
    snprintf(lim, sizeof lim, "%ld", q.limit + 1);
    const char *p[8] = { r->who.tenant_id, q.model, q.version, q.from, q.to, q.after[0] ? q.after : NULL, q.study,
                         lim };
    char sqlstate[6] = "";
    PGresult *res = gj_db_exec(c, select_sql, 8, p, sqlstate);
    if (!res) {
        if (strncmp(sqlstate, "22", 2) == 0)
            gj_problem(r, 400, NULL, "a query parameter is out of range");
        else
            gj_respond_unavailable(r);
        return;
    }
    int shown = PQntuples(res) > q.limit ? (int)q.limit : PQntuples(res);
    char next[80];
    next_cursor(res, &q, next);
    if (q.csv) {
        respond_csv(r, res, shown, next);
    } else {
        json_t *arr = json_array();
        for (int i = 0; i < shown; i++)
            json_array_append_new(arr, row_json(res, i));
        gj_respond_json(r, 200, json_pack("{s:o, s:o}", "results", arr, "next_cursor",
                                          next[0] ? json_string(next) : json_null()));
    }
    PQclear(res);
}

static const struct gj_route result_routes[] = {
    { "GET", "/v1/inference-results", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, results_list, NULL },
};
const struct gj_route_table gj_infer_routes_results = { result_routes, sizeof result_routes / sizeof result_routes[0] };
