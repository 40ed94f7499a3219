/*
 * routes_qido.c — QIDO-RS (PS3.18 §10.6): search the tenant's stored instances
 * (instances_store.c) at study, series and instance level:
 *
 *   GET /dicomweb/studies                    GET /dicomweb/studies/{study}/series
 *   GET /dicomweb/series                     GET /dicomweb/studies/{study}/instances
 *   GET /dicomweb/instances                  GET /dicomweb/studies/{study}/series/{series}/instances
 *
 * Matching keys by keyword or tag (PS3.18 §8.3.4): StudyInstanceUID, SeriesInstanceUID,
 * SOPInstanceUID, SOPClassUID (lists of UIDs, comma or backslash separated);
 * PatientID, PatientName, AccessionNumber, StudyID (single value, '*' and '?'
 * wildcards; PatientName case-insensitive); StudyDate (date or range A-B, -B, A-);
 * ModalitiesInStudy, Modality, SeriesNumber, InstanceNumber (single value). limit
 * (default 100, at most 1000), offset, includefield (the level's default attributes,
 * PS3.18 Table 6.7.1-2, unless 'all' or keywords/tags add those kept; an unknown
 * keyword is a 400), fuzzymatching=false. Any other parameter is a 400 naming it. The answer is
 * a JSON array of DICOM JSON objects (application/dicom+json; application/json when
 * only that is accepted; 406 otherwise), each with its RetrieveURL; a Warning header
 * says when more results remain past limit. Only the tenant's own instances match.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ctype.h>

#include "service/db/db.h"
#include "service/infer/infer.h"

#define QIDO_DEFAULT_LIMIT 100
#define QIDO_MAX_LIMIT 1000
#define QIDO_MAX_PARAMS 24
#define QIDO_MAX_INCLUDE 64

enum level { STUDY, SERIES, INSTANCE };
enum match { UID_LIST, WILDCARD, WILDCARD_CI, DATE_RANGE, EXACT, IN_STUDY };

static const struct key {
    const char *keyword, *tag;
    const char *column;
    enum match match;
    enum level level;            /* the lowest level it is a key of (study keys match at every level) */
} keys[] = {
    { "StudyInstanceUID", "0020000D", "study_uid", UID_LIST, STUDY },
    { "PatientID", "00100020", "patient_id", WILDCARD, STUDY },
    { "PatientName", "00100010", "patient_name", WILDCARD_CI, STUDY },
    { "AccessionNumber", "00080050", "accession_number", WILDCARD, STUDY },
    { "StudyID", "00200010", "study_id", WILDCARD, STUDY },
    { "StudyDate", "00080020", "study_date", DATE_RANGE, STUDY },
    { "ModalitiesInStudy", "00080061", "modality", IN_STUDY, STUDY },
    { "SeriesInstanceUID", "0020000E", "series_uid", UID_LIST, SERIES },
    { "Modality", "00080060", "modality", EXACT, SERIES },
    { "SeriesNumber", "00200011", "series_number", EXACT, SERIES },
    { "SOPInstanceUID", "00080018", "sop_uid", UID_LIST, INSTANCE },
    { "SOPClassUID", "00080016", "sop_class_uid", UID_LIST, INSTANCE },
    { "InstanceNumber", "00200013", "instance_number", EXACT, INSTANCE },
};

/* What each level can return: tag, VR, keyword, the SQL expression (aggregated over the
 * level's group), and whether it is in the level's default set (PS3.18 Table 6.7.1-2,
 * kept here; the UIDs of the levels above are always returned too). The others come
 * with includefield=all or by name. Order matters: columns are read back by position,
 * the first ones being the study, series and instance UIDs of the Retrieve URL. */
struct out { const char *tag, *vr, *keyword, *expr; int dflt; };

#define STUDY_ATTRS(agg_open, agg_close, dflt)                                                      \
    { "00080020", "DA", "StudyDate", agg_open "study_date" agg_close, dflt },                       \
    { "00080030", "TM", "StudyTime", agg_open "study_time" agg_close, dflt },                       \
    { "00080050", "SH", "AccessionNumber", agg_open "accession_number" agg_close, dflt },           \
    { "00080090", "PN", "ReferringPhysicianName", agg_open "referring_physician" agg_close, dflt },  \
    { "00081030", "LO", "StudyDescription", agg_open "study_description" agg_close, 0 },            \
    { "00100010", "PN", "PatientName", agg_open "patient_name" agg_close, dflt },                   \
    { "00100020", "LO", "PatientID", agg_open "patient_id" agg_close, dflt },                       \
    { "00100030", "DA", "PatientBirthDate", agg_open "patient_birth_date" agg_close, dflt },        \
    { "00100040", "CS", "PatientSex", agg_open "patient_sex" agg_close, dflt },                     \
    { "00200010", "SH", "StudyID", agg_open "study_id" agg_close, dflt }

static const struct out study_out[] = {
    { "0020000D", "UI", "StudyInstanceUID", "study_uid", 1 },
    STUDY_ATTRS("min(", ")", 1),
    { "00080061", "CS", "ModalitiesInStudy", "string_agg(DISTINCT modality, '\\' ORDER BY modality)", 1 },
    { "00201206", "IS", "NumberOfStudyRelatedSeries", "count(DISTINCT series_uid)::text", 1 },
    { "00201208", "IS", "NumberOfStudyRelatedInstances", "count(*)::text", 1 },
    { NULL, NULL, NULL, NULL, 0 },
};
static const struct out series_out[] = {
    { "0020000D", "UI", "StudyInstanceUID", "study_uid", 1 },
    { "0020000E", "UI", "SeriesInstanceUID", "series_uid", 1 },
    { "00080060", "CS", "Modality", "min(modality)", 1 },
    { "0008103E", "LO", "SeriesDescription", "min(series_description)", 1 },
    { "00200011", "IS", "SeriesNumber", "min(series_number)", 1 },
    { "00201209", "IS", "NumberOfSeriesRelatedInstances", "count(*)::text", 1 },
    STUDY_ATTRS("min(", ")", 0),
    { NULL, NULL, NULL, NULL, 0 },
};
static const struct out instance_out[] = {
    { "0020000D", "UI", "StudyInstanceUID", "study_uid", 1 },
    { "0020000E", "UI", "SeriesInstanceUID", "series_uid", 1 },
    { "00080018", "UI", "SOPInstanceUID", "sop_uid", 1 },
    { "00080016", "UI", "SOPClassUID", "sop_class_uid", 1 },
    { "00200013", "IS", "InstanceNumber", "instance_number", 1 },
    { "00280010", "US", "Rows", "rows::text", 1 },
    { "00280011", "US", "Columns", "columns::text", 1 },
    { "00280008", "IS", "NumberOfFrames", "number_of_frames::text", 1 },
    { "00080060", "CS", "Modality", "modality", 0 },
    { "00083002", "UI", "AvailableTransferSyntaxUID", "transfer_syntax_uid", 0 },
    { "0008103E", "LO", "SeriesDescription", "series_description", 0 },
    { "00200011", "IS", "SeriesNumber", "series_number", 0 },
    STUDY_ATTRS("", "", 0),
    { NULL, NULL, NULL, NULL, 0 },
};
static const struct out *const level_outs[] = { study_out, series_out, instance_out };

struct query {
    struct gj_req *r;
    enum level level;
    FILE *where;                 /* " AND ..." conditions */
    char *where_text;
    size_t where_len;
    char *having;                /* ModalitiesInStudy's condition, or NULL */
    const char *p[QIDO_MAX_PARAMS];
    char *owned[QIDO_MAX_PARAMS];
    int n;
    long limit, offset;
    int include_all;             /* includefield=all */
    char include[QIDO_MAX_INCLUDE][9];   /* tags named by includefield (upper-case hex) */
    int n_include;
    char bad[400];               /* the 400's message */
};

static int add_param(struct query *q, char *value /* owned */)
{
    if (!value || q->n >= QIDO_MAX_PARAMS) {
        free(value);
        snprintf(q->bad, sizeof q->bad, "too many matching keys");
        return -1;
    }
    q->owned[q->n] = value;
    q->p[q->n] = value;
    return ++q->n;
}

/* A DICOM wildcard value as a LIKE pattern: '*' -> '%', '?' -> '_', LIKE's own escaped. */
static char *like_pattern(const char *v)
{
    char *out = malloc(strlen(v) * 2 + 1), *o = out;
    for (; out && *v; v++) {
        if (*v == '%' || *v == '_' || *v == '\\')
            *o++ = '\\';
        *o++ = *v == '*' ? '%' : *v == '?' ? '_' : *v;
    }
    if (out)
        *o = '\0';
    return out;
}

static int date_ok(const char *s, size_t n)
{
    if (n != 8)
        return 0;
    for (size_t i = 0; i < 8; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* StudyDate: D, A-B, -B or A- (DA, YYYYMMDD); compared as text. */
static int match_date(struct query *q, const struct key *k, const char *v)
{
    const char *dash = strchr(v, '-');
    size_t la = dash ? (size_t)(dash - v) : strlen(v), lb = dash ? strlen(dash + 1) : 0;
    if ((la && !date_ok(v, la)) || (lb && !date_ok(dash + 1, lb)) || (!la && !lb)) {
        snprintf(q->bad, sizeof q->bad, "%s is a date YYYYMMDD or a range (A-B, -B, A-)", k->keyword);
        return -1;
    }
    if (la) {
        int i = add_param(q, strndup(v, la));
        if (i < 0)
            return -1;
        fprintf(q->where, " AND %s >= $%d", k->column, i);
    }
    if (!dash || lb) {
        int i = add_param(q, strdup(dash ? dash + 1 : v));
        if (i < 0)
            return -1;
        fprintf(q->where, " AND %s <= $%d", k->column, i);
    }
    return 0;
}

static int match_uids(struct query *q, const struct key *k, const char *v)
{
    char *list = strdup(v);
    if (!list)
        return add_param(q, NULL);
    for (char *c = list; *c; c++)
        if (*c == '\\')
            *c = ',';
    for (const char *u = list; *u; u += strcspn(u, ",") + (u[strcspn(u, ",")] != '\0')) {
        size_t n = strcspn(u, ",");
        if (n == 0 || n > 64 || strspn(u, "0123456789.") < n) {
            snprintf(q->bad, sizeof q->bad, "%s takes UIDs (digits and dots), comma separated", k->keyword);
            free(list);
            return -1;
        }
    }
    int i = add_param(q, list);
    if (i < 0)
        return -1;
    fprintf(q->where, " AND %s = ANY (string_to_array($%d, ','))", k->column, i);
    return 0;
}

static int add_match(struct query *q, const struct key *k, const char *v)
{
    if (k->match == UID_LIST)
        return match_uids(q, k, v);
    if (k->match == DATE_RANGE)
        return match_date(q, k, v);
    int wild = k->match == WILDCARD || k->match == WILDCARD_CI;
    int i = add_param(q, wild ? like_pattern(v) : strdup(v));
    if (i < 0)
        return -1;
    if (k->match == IN_STUDY) {
        if (asprintf(&q->having, " HAVING bool_or(modality = $%d)", i) < 0)
            q->having = NULL;
        return q->having ? 0 : -1;
    }
    fprintf(q->where, " AND %s %s $%d", k->column,
            k->match == WILDCARD_CI ? "ILIKE" : k->match == WILDCARD ? "LIKE" : "=", i);
    return 0;
}

static int parse_count(struct query *q, const char *name, const char *v, long max, long *out)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 0 || n > max) {
        snprintf(q->bad, sizeof q->bad, "%s is an integer from 0 to %ld", name, max);
        return -1;
    }
    *out = n;
    return 0;
}

/* The tag (8 upper-case hex digits) of a keyword any level returns or matches; NULL if none. */
static const char *keyword_tag(const char *kw, size_t n)
{
    static const struct out *const all[] = { study_out, series_out, instance_out };
    for (size_t l = 0; l < 3; l++)
        for (const struct out *o = all[l]; o->tag; o++)
            if (strlen(o->keyword) == n && strncmp(o->keyword, kw, n) == 0)
                return o->tag;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strlen(keys[i].keyword) == n && strncmp(keys[i].keyword, kw, n) == 0)
            return keys[i].tag;
    return NULL;
}

/* includefield (PS3.18 8.3.4.3): "all", or keywords and tags, comma separated. A tag
 * gpujobd does not keep is accepted (there is nothing to return); an unknown keyword
 * is a 400 naming it. */
static int add_includefield(struct query *q, const char *v)
{
    for (const char *t = v;; t += strcspn(t, ",") + 1) {
        size_t n = strcspn(t, ",");
        const char *tag = n == 8 && strspn(t, "0123456789abcdefABCDEF") >= 8 ? t : keyword_tag(t, n);
        if (n == 0) {
            /* empty: nothing added */
        } else if (n == 3 && strncmp(t, "all", 3) == 0) {
            q->include_all = 1;
        } else if (!tag) {
            snprintf(q->bad, sizeof q->bad, "includefield: '%.*s' is not an attribute keyword or tag gpujobd knows"
                     " (or 'all')", (int)(n > 64 ? 64 : n), t);
            return -1;
        } else if (q->n_include < QIDO_MAX_INCLUDE) {
            for (int k = 0; k < 8; k++)
                q->include[q->n_include][k] = (char)toupper((unsigned char)tag[k]);
            q->include[q->n_include++][8] = '\0';
        } else {
            snprintf(q->bad, sizeof q->bad, "includefield names more than %d attributes", QIDO_MAX_INCLUDE);
            return -1;
        }
        if (!t[n])
            return 0;
    }
}

/* Whether the answer holds attribute o: in the default set, or asked for. */
static int wanted(const struct query *q, const struct out *o)
{
    if (o->dflt || q->include_all)
        return 1;
    for (int i = 0; i < q->n_include; i++)
        if (strcmp(q->include[i], o->tag) == 0)
            return 1;
    return 0;
}

static enum MHD_Result one_param(void *cls, enum MHD_ValueKind kind, const char *name, const char *value)
{
    (void)kind;
    struct query *q = cls;
    if (q->bad[0])
        return MHD_NO;
    if (!value)
        value = "";
    if (strcmp(name, "limit") == 0)
        return parse_count(q, name, value, QIDO_MAX_LIMIT, &q->limit) == 0 ? MHD_YES : MHD_NO;
    if (strcmp(name, "offset") == 0)
        return parse_count(q, name, value, 1000000000L, &q->offset) == 0 ? MHD_YES : MHD_NO;
    if (strcmp(name, "includefield") == 0)
        return add_includefield(q, value) == 0 ? MHD_YES : MHD_NO;
    if (strcmp(name, "fuzzymatching") == 0 && strcmp(value, "false") == 0)
        return MHD_YES;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const struct key *k = &keys[i];
        if (strcmp(name, k->keyword) != 0 && strcasecmp(name, k->tag) != 0)
            continue;
        if (k->level > q->level) {
            snprintf(q->bad, sizeof q->bad, "%s is not a matching key of this level", k->keyword);
            return MHD_NO;
        }
        if (!*value)
            return MHD_YES;      /* universal matching: return it, match all */
        return add_match(q, k, value) == 0 ? MHD_YES : MHD_NO;
    }
    snprintf(q->bad, sizeof q->bad, "'%.60s' is not a supported query parameter (matching keys: StudyInstanceUID,"
             " PatientID, PatientName, AccessionNumber, StudyID, StudyDate, ModalitiesInStudy, SeriesInstanceUID,"
             " Modality, SeriesNumber, SOPInstanceUID, SOPClassUID, InstanceNumber; limit, offset, includefield)",
             name);
    return MHD_NO;
}

/* One value of a VR as DICOM JSON: PN as {"Alphabetic": ...}, IS and US as numbers,
 * backslash-separated values as several. */
static json_t *dcm_values(const char *vr, const char *text)
{
    json_t *a = json_array();
    char *copy = strdup(text);
    for (char *save = NULL, *v = copy ? strtok_r(copy, "\\", &save) : NULL; v; v = strtok_r(NULL, "\\", &save)) {
        if (strcmp(vr, "PN") == 0) {
            json_array_append_new(a, json_pack("{s:s}", "Alphabetic", v));
        } else if (strcmp(vr, "IS") == 0 || strcmp(vr, "US") == 0) {
            char *end;
            long long n = strtoll(v, &end, 10);
            if (*v && !*end)
                json_array_append_new(a, json_integer(n));
        } else {
            json_array_append_new(a, json_string(v));
        }
    }
    free(copy);
    if (!json_array_size(a)) {
        json_decref(a);
        return NULL;
    }
    return a;
}

/* The row's Retrieve URL: the study, series or instance. */
static void add_retrieve_url(struct gj_req *r, enum level level, PGresult *res, int row, json_t *o)
{
    char base[300], url[600];
    if (gj_dicomweb_base_url(r, base, sizeof base) != 0)
        return;
    const char *study = PQgetvalue(res, row, 0), *series = level >= SERIES ? PQgetvalue(res, row, 1) : "";
    if (level == STUDY)
        snprintf(url, sizeof url, "%s/studies/%s", base, study);
    else if (level == SERIES)
        snprintf(url, sizeof url, "%s/studies/%s/series/%s", base, study, series);
    else
        snprintf(url, sizeof url, "%s/studies/%s/series/%s/instances/%s", base, study, series,
                 PQgetvalue(res, row, 2));
    json_object_set_new(o, "00081190", gj_dcm_attr("UR", json_string(url)));
}

static json_t *rows_json(const struct query *q, const struct out *outs, PGresult *res, int n)
{
    json_t *list = json_array();
    for (int row = 0; row < n; row++) {
        json_t *o = json_object();
        for (int c = 0; outs[c].tag; c++) {
            if (!wanted(q, &outs[c]))
                continue;
            json_t *v = PQgetisnull(res, row, c) ? NULL : dcm_values(outs[c].vr, PQgetvalue(res, row, c));
            json_object_set_new(o, outs[c].tag, gj_dcm_attr(outs[c].vr, v));
        }
        add_retrieve_url(q->r, q->level, res, row, o);
        json_array_append_new(list, o);
    }
    return list;
}

/* The SELECT of a level over the conditions gathered. */
static char *build_sql(const struct query *q, const struct out *outs)
{
    char *sql = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&sql, &len);
    if (!f)
        return NULL;
    fputs("SELECT ", f);
    for (int c = 0; outs[c].tag; c++)
        fprintf(f, "%s%s", c ? ", " : "", outs[c].expr);
    fprintf(f, " FROM dicom_instances WHERE tenant_id = $1::uuid%s", q->where_text ? q->where_text : "");
    if (q->level == STUDY)
        fprintf(f, " GROUP BY study_uid%s ORDER BY min(id)", q->having ? q->having : "");
    else if (q->level == SERIES)
        fputs(" GROUP BY study_uid, series_uid ORDER BY min(id)", f);
    else
        fputs(" ORDER BY id", f);
    fprintf(f, " LIMIT %ld OFFSET %ld", q->limit + 1, q->offset);
    if (fclose(f) != 0) {
        free(sql);
        return NULL;
    }
    return sql;
}

static void respond_rows(struct gj_req *r, const struct query *q, const char *type, PGresult *res)
{
    int n = PQntuples(res), more = n > q->limit;
    json_t *list = rows_json(q, level_outs[q->level], res, more ? (int)q->limit : n);
    struct MHD_Response *resp = gj_dicomweb_respond_json(r, list, type);
    if (resp && more) {
        char w[160];
        snprintf(w, sizeof w, "299 gpujobd: \"There are additional results that can be requested (offset=%ld)\"",
                 q->offset + q->limit);
        MHD_add_response_header(resp, "Warning", w);
    }
}

static void query_free(struct query *q)
{
    for (int i = 0; i < q->n; i++)
        free(q->owned[i]);
    free(q->where_text);
    free(q->having);
}

static const char *const json_types[] = { "application/dicom+json", "application/json", NULL };

/* The path's UIDs (study, series) as conditions, then the query's parameters. 0, or
 * -1 with q->bad set (400) or a response prepared. */
static int gather(struct query *q)
{
    static const char *const path_cols[] = { "study_uid", "series_uid", "sop_uid" };
    static const char *const path_names[] = { "study", "series", "instance" };
    struct gj_req *r = q->r;
    if (!(q->where = open_memstream(&q->where_text, &q->where_len)))
        return -1;
    q->limit = QIDO_DEFAULT_LIMIT;
    add_param(q, strdup(r->who.tenant_id));
    for (int i = 0; i < r->n_params && i < 3; i++) {
        if (!gj_infer_uid_ok(r->params[i])) {
            snprintf(q->bad, sizeof q->bad, "the %s in the path is not a UID (digits and dots, at most 64)",
                     path_names[i]);
            break;
        }
        int k = add_param(q, strdup(r->params[i]));
        if (k > 0)
            fprintf(q->where, " AND %s = $%d", path_cols[i], k);
    }
    if (!q->bad[0])
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, one_param, q);
    int rc = fclose(q->where);
    q->where = NULL;
    return q->bad[0] || rc != 0 ? -1 : 0;
}

static void qido(struct gj_req *r, enum level level)
{
    const char *type = gj_dicomweb_negotiate(r, json_types);
    if (!type) {
        gj_problem(r, 406, "Accept", "QIDO-RS answers application/dicom+json (or application/json)");
        return;
    }
    struct query q = { .r = r, .level = level };
    if (gather(&q) != 0) {
        gj_problem(r, 400, NULL, "%s", q.bad[0] ? q.bad : "out of memory");
        query_free(&q);
        return;
    }
    char *sql = build_sql(&q, level_outs[level]);
    PGconn *c = sql ? gj_req_db(r) : NULL;
    PGresult *res = c ? gj_db_exec(c, sql, q.n, q.p, NULL) : NULL;
    if (res)
        respond_rows(r, &q, type, res);
    else
        gj_respond_unavailable(r);
    PQclear(res);
    free(sql);
    query_free(&q);
}

static void qido_studies(struct gj_req *r)
{
    qido(r, STUDY);
}

static void qido_series(struct gj_req *r)
{
    qido(r, SERIES);
}

static void qido_instances(struct gj_req *r)
{
    qido(r, INSTANCE);
}

static const struct gj_route qido_routes[] = {
    { "GET", "/dicomweb/studies", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, qido_studies, NULL },
    { "GET", "/dicomweb/series", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, qido_series, NULL },
    { "GET", "/dicomweb/instances", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, qido_instances, NULL },
    { "GET", "/dicomweb/studies/{study}/series", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, qido_series, NULL },
    { "GET", "/dicomweb/studies/{study}/instances", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL, qido_instances, NULL },
    { "GET", "/dicomweb/studies/{study}/series/{series}/instances", GJ_AUTH_USER, GJ_BODY_NONE, NULL, NULL,
      qido_instances, NULL },
};
const struct gj_route_table gj_infer_routes_qido = { qido_routes, sizeof qido_routes / sizeof qido_routes[0] };
