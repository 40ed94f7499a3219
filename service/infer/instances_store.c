/*
 * instances_store.c — the DICOM instances a tenant stored by STOW-RS
 * (migrations/0008_dicom_instances.sql): the searchable attributes read from each
 * instance, and the row that claims an instance for the tenant (one per SOP Instance
 * UID, so a re-sent instance is recognised and makes no new job).
 *
 * The attributes hold patient identity: they go to the tenant's own rows and nowhere
 * else (never a log line, never inference_results).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/db/db.h"
#include "service/infer/infer.h"

enum attr_kind { UID, TEXT, INT };

static const struct attr_def {
    uint32_t tag;
    const char *column;
    enum attr_kind kind;
} attr_defs[GJ_IA_COUNT] = {
    [GJ_IA_STUDY_UID] = { GJ_DCM_StudyInstanceUID, "study_uid", UID },
    [GJ_IA_SERIES_UID] = { GJ_DCM_SeriesInstanceUID, "series_uid", UID },
    [GJ_IA_SOP_UID] = { GJ_DCM_SOPInstanceUID, "sop_uid", UID },
    [GJ_IA_SOP_CLASS] = { GJ_DCM_SOPClassUID, "sop_class_uid", UID },
    [GJ_IA_TRANSFER_SYNTAX] = { GJ_DCM_TransferSyntaxUID, "transfer_syntax_uid", UID },
    [GJ_IA_PATIENT_ID] = { GJ_TAG(0x0010, 0x0020), "patient_id", TEXT },
    [GJ_IA_PATIENT_NAME] = { GJ_TAG(0x0010, 0x0010), "patient_name", TEXT },
    [GJ_IA_PATIENT_BIRTH_DATE] = { GJ_TAG(0x0010, 0x0030), "patient_birth_date", TEXT },
    [GJ_IA_PATIENT_SEX] = { GJ_TAG(0x0010, 0x0040), "patient_sex", TEXT },
    [GJ_IA_ACCESSION] = { GJ_TAG(0x0008, 0x0050), "accession_number", TEXT },
    [GJ_IA_STUDY_DATE] = { GJ_TAG(0x0008, 0x0020), "study_date", TEXT },
    [GJ_IA_STUDY_TIME] = { GJ_TAG(0x0008, 0x0030), "study_time", TEXT },
    [GJ_IA_STUDY_ID] = { GJ_TAG(0x0020, 0x0010), "study_id", TEXT },
    [GJ_IA_STUDY_DESCRIPTION] = { GJ_TAG(0x0008, 0x1030), "study_description", TEXT },
    [GJ_IA_REFERRING_PHYSICIAN] = { GJ_TAG(0x0008, 0x0090), "referring_physician", TEXT },
    [GJ_IA_MODALITY] = { GJ_DCM_Modality, "modality", TEXT },
    [GJ_IA_SERIES_NUMBER] = { GJ_TAG(0x0020, 0x0011), "series_number", TEXT },
    [GJ_IA_SERIES_DESCRIPTION] = { GJ_TAG(0x0008, 0x103E), "series_description", TEXT },
    [GJ_IA_INSTANCE_NUMBER] = { GJ_TAG(0x0020, 0x0013), "instance_number", TEXT },
    [GJ_IA_ROWS] = { GJ_DCM_Rows, "rows", INT },
    [GJ_IA_COLUMNS] = { GJ_DCM_Columns, "columns", INT },
    [GJ_IA_FRAMES] = { GJ_DCM_NumberOfFrames, "number_of_frames", INT },
};

int gj_infer_uid_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((s[i] < '0' || s[i] > '9') && s[i] != '.')
            return 0;
    return 1;
}

/* One attribute as text, or NULL when absent or not of its kind (a UID that is not
 * one, an integer out of range). */
static char *read_attr(const gj_dicom *d, const struct attr_def *a)
{
    char buf[1024];
    if (a->tag == GJ_DCM_TransferSyntaxUID && gj_dicom_ts_uid(d)) {
        snprintf(buf, sizeof buf, "%s", gj_dicom_ts_uid(d));
    } else if (a->kind == INT) {
        long v;
        if (gj_dicom_get_int(d, a->tag, 0, &v) != 0 || v < 0 || v > 2147483647L)
            return NULL;
        snprintf(buf, sizeof buf, "%ld", v);
    } else if (gj_dicom_get_string(d, a->tag, buf, sizeof buf) != 0 || !buf[0]) {
        return NULL;
    }
    if (a->kind == UID && !gj_infer_uid_ok(buf))
        return NULL;
    return a->kind == TEXT ? gj_dicom_text_utf8(gj_dicom_latin1(d), buf, strlen(buf)) : strdup(buf);
}

int gj_infer_instance_read(const gj_dicom *d, struct gj_infer_instance *in)
{
    memset(in, 0, sizeof *in);
    for (int i = 0; i < GJ_IA_COUNT; i++)
        in->v[i] = read_attr(d, &attr_defs[i]);   /* unreadable: left out, as absent */
    return 0;
}

void gj_infer_instance_clear(struct gj_infer_instance *in)
{
    for (int i = 0; i < GJ_IA_COUNT; i++) {
        free(in->v[i]);
        in->v[i] = NULL;
    }
}

const char *gj_infer_instance_column(enum gj_infer_attr a)
{
    return attr_defs[a].column;
}

/* "INSERT ... (tenant_id, blob_id, <columns>) VALUES ($1::uuid, $2::uuid, $3, ...)
 *  ON CONFLICT (tenant_id, sop_uid) DO NOTHING RETURNING 1", built once from attr_defs. */
static char g_insert_sql[2048];
static pthread_once_t g_insert_once = PTHREAD_ONCE_INIT;

static void build_insert_sql(void)
{
    char cols[1024] = "", vals[512] = "";
    size_t cl = 0, vl = 0;
    for (int i = 0; i < GJ_IA_COUNT; i++) {
        cl += (size_t)snprintf(cols + cl, sizeof cols - cl, ", %s", attr_defs[i].column);
        vl += (size_t)snprintf(vals + vl, sizeof vals - vl, ", $%d%s", i + 3,
                               attr_defs[i].kind == INT ? "::integer" : "");
    }
    snprintf(g_insert_sql, sizeof g_insert_sql,
             "INSERT INTO dicom_instances (tenant_id, blob_id%s) VALUES ($1::uuid, $2::uuid%s)"
             " ON CONFLICT (tenant_id, sop_uid) DO NOTHING RETURNING 1",
             cols, vals);
}

int gj_infer_instance_claim(PGconn *conn, const char *tenant_id, const char *blob_id,
                            const struct gj_infer_instance *in)
{
    const char *p[GJ_IA_COUNT + 2];
    p[0] = tenant_id;
    p[1] = blob_id;
    for (int i = 0; i < GJ_IA_COUNT; i++)
        p[i + 2] = in->v[i];
    pthread_once(&g_insert_once, build_insert_sql);
    PGresult *res = gj_db_exec(conn, g_insert_sql, GJ_IA_COUNT + 2, p, NULL);
    if (!res)
        return -1;
    int claimed = PQntuples(res) == 1;
    PQclear(res);
    return claimed;
}
