/*
 * dicom_sr.c — the inference's Structured Report (dicom_sr.h).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "infer/dicom_sr.h"
#include "infer/dicom_write.h"

#define T GJ_TAG
#define PRIVATE_SCHEME "99GPUJOBD"
#define SR_SERIES_NUMBER "9000"

/* ---- reading the images -------------------------------------------------------------- */

/* A text attribute copied when present, within max characters and one value (several
 * only for the character set); "" otherwise. */
static void copy_text(const gj_dicom *d, uint32_t tag, size_t max, char *out, size_t outlen)
{
    char buf[400];
    out[0] = '\0';
    if (gj_dicom_get_string(d, tag, buf, sizeof buf) != 0 || strlen(buf) > max || strlen(buf) >= outlen ||
        (strchr(buf, '\\') && tag != GJ_TAG(0x0008, 0x0005)))
        return;
    snprintf(out, outlen, "%s", buf);
}

void gj_sr_identity_read(const gj_dicom *d, struct gj_sr_identity *id)
{
    copy_text(d, T(0x0008, 0x0005), 64, id->charset, sizeof id->charset);
    copy_text(d, T(0x0010, 0x0010), 324, id->patient_name, sizeof id->patient_name);
    copy_text(d, T(0x0010, 0x0020), 64, id->patient_id, sizeof id->patient_id);
    copy_text(d, T(0x0010, 0x0030), 8, id->birth_date, sizeof id->birth_date);
    copy_text(d, T(0x0010, 0x0040), 16, id->sex, sizeof id->sex);
    copy_text(d, GJ_DCM_StudyInstanceUID, 64, id->study_uid, sizeof id->study_uid);
    copy_text(d, T(0x0008, 0x0020), 8, id->study_date, sizeof id->study_date);
    copy_text(d, T(0x0008, 0x0030), 14, id->study_time, sizeof id->study_time);
    copy_text(d, T(0x0008, 0x0050), 16, id->accession, sizeof id->accession);
    copy_text(d, T(0x0008, 0x0090), 324, id->referring, sizeof id->referring);
    copy_text(d, T(0x0020, 0x0010), 16, id->study_id, sizeof id->study_id);
}

void gj_sr_ref_read(const gj_dicom *d, struct gj_sr_ref *ref)
{
    copy_text(d, GJ_DCM_SOPClassUID, 64, ref->sop_class, sizeof ref->sop_class);
    copy_text(d, GJ_DCM_SOPInstanceUID, 64, ref->sop_uid, sizeof ref->sop_uid);
    copy_text(d, GJ_DCM_SeriesInstanceUID, 64, ref->series_uid, sizeof ref->series_uid);
}

/* ---- writing ------------------------------------------------------------------------- */

/* A type 2 text attribute: the value, or empty. */
static void type2(struct gj_dcm_out *o, uint32_t tag, const char *vr, const char *value)
{
    if (value[0])
        gj_dcm_str(o, tag, vr, value);
    else
        gj_dcm_empty(o, tag, vr);
}

/* One code sequence item's attributes; a value past 16 characters goes to Long Code Value. */
static void code(struct gj_dcm_out *o, const char *value, const char *scheme, const char *meaning)
{
    char m[65];
    snprintf(m, sizeof m, "%s", meaning);   /* LO: at most 64 */
    if (strlen(value) <= 16)
        gj_dcm_str(o, T(0x0008, 0x0100), "SH", value);
    gj_dcm_str(o, T(0x0008, 0x0102), "SH", scheme);
    gj_dcm_str(o, T(0x0008, 0x0104), "LO", m);
    if (strlen(value) > 16)
        gj_dcm_str(o, T(0x0008, 0x0119), "UC", value);
}

static void code_seq(struct gj_dcm_out *o, uint32_t tag, const char *value, const char *scheme,
                     const char *meaning)
{
    gj_dcm_seq_begin(o, tag);
    gj_dcm_item_begin(o);
    code(o, value, scheme, meaning);
    gj_dcm_item_end(o);
    gj_dcm_seq_end(o);
}

/* A content item's first attributes: relationship, value type, concept name. */
static void item_head(struct gj_dcm_out *o, const char *value_type, const char *value, const char *scheme,
                      const char *meaning)
{
    gj_dcm_str(o, T(0x0040, 0xA010), "CS", "CONTAINS");
    gj_dcm_str(o, T(0x0040, 0xA040), "CS", value_type);
    code_seq(o, T(0x0040, 0xA043), value, scheme, meaning);
}

static void text_item(struct gj_dcm_out *o, const char *value, const char *meaning, const char *text)
{
    gj_dcm_item_begin(o);
    item_head(o, "TEXT", value, "DCM", meaning);
    gj_dcm_str(o, T(0x0040, 0xA160), "UT", text);
    gj_dcm_item_end(o);
}

static void num_item(struct gj_dcm_out *o, const char *label, float score)
{
    char ds[24];
    snprintf(ds, sizeof ds, "%.8g", (double)score);
    gj_dcm_item_begin(o);
    item_head(o, "NUM", label, PRIVATE_SCHEME, label);
    gj_dcm_seq_begin(o, T(0x0040, 0xA300));   /* Measured Value Sequence */
    gj_dcm_item_begin(o);
    code_seq(o, T(0x0040, 0x08EA), "1", "UCUM", "no units");
    gj_dcm_str(o, T(0x0040, 0xA30A), "DS", ds);
    gj_dcm_item_end(o);
    gj_dcm_seq_end(o);
    gj_dcm_item_end(o);
}

static void sop_ref_seq(struct gj_dcm_out *o, const struct gj_sr_ref *ref)
{
    gj_dcm_seq_begin(o, T(0x0008, 0x1199));   /* Referenced SOP Sequence */
    gj_dcm_item_begin(o);
    gj_dcm_str(o, T(0x0008, 0x1150), "UI", ref->sop_class);
    gj_dcm_str(o, T(0x0008, 0x1155), "UI", ref->sop_uid);
    gj_dcm_item_end(o);
    gj_dcm_seq_end(o);
}

static void image_item(struct gj_dcm_out *o, const struct gj_sr_ref *ref)
{
    gj_dcm_item_begin(o);
    sop_ref_seq(o, ref);
    item_head(o, "IMAGE", "121112", "DCM", "Source of Measurement");
    gj_dcm_item_end(o);
}

static size_t top_label(const struct gj_sr_report *r)
{
    size_t k = 0;
    for (size_t i = 1; i < r->n_labels; i++)
        if (r->scores[i] > r->scores[k])
            k = i;
    return k;
}

static void content(struct gj_dcm_out *o, const struct gj_sr_report *r)
{
    char version[24];
    snprintf(version, sizeof version, "%lld", (long long)r->version);
    gj_dcm_seq_begin(o, T(0x0040, 0xA730));   /* Content Sequence */
    text_item(o, "111001", "Algorithm Name", r->model);
    text_item(o, "111003", "Algorithm Version", version);
    if (r->n_labels) {
        const char *top = r->labels[top_label(r)];
        gj_dcm_item_begin(o);
        item_head(o, "CODE", "121071", "DCM", "Finding");
        code_seq(o, T(0x0040, 0xA168), top, PRIVATE_SCHEME, top);
        gj_dcm_item_end(o);
    }
    for (size_t i = 0; i < r->n_labels; i++)
        num_item(o, r->labels[i], r->scores[i]);
    for (size_t i = 0; i < r->n_refs; i++)
        image_item(o, &r->refs[i]);
    gj_dcm_seq_end(o);
}

/* Current Requested Procedure Evidence: the study, its series, their images. */
static void evidence(struct gj_dcm_out *o, const struct gj_sr_report *r)
{
    gj_dcm_seq_begin(o, T(0x0040, 0xA375));
    gj_dcm_item_begin(o);
    gj_dcm_seq_begin(o, T(0x0008, 0x1115));   /* Referenced Series Sequence */
    for (size_t i = 0; i < r->n_refs; i++) {
        size_t first = 0;
        while (strcmp(r->refs[first].series_uid, r->refs[i].series_uid) != 0)
            first++;
        if (first != i)
            continue;   /* its series was written with the first of its images */
        gj_dcm_item_begin(o);
        gj_dcm_seq_begin(o, T(0x0008, 0x1199));
        for (size_t j = i; j < r->n_refs; j++) {
            if (strcmp(r->refs[j].series_uid, r->refs[i].series_uid) != 0)
                continue;
            gj_dcm_item_begin(o);
            gj_dcm_str(o, T(0x0008, 0x1150), "UI", r->refs[j].sop_class);
            gj_dcm_str(o, T(0x0008, 0x1155), "UI", r->refs[j].sop_uid);
            gj_dcm_item_end(o);
        }
        gj_dcm_seq_end(o);
        gj_dcm_str(o, GJ_DCM_SeriesInstanceUID, "UI", r->refs[i].series_uid);
        gj_dcm_item_end(o);
    }
    gj_dcm_seq_end(o);
    gj_dcm_str(o, GJ_DCM_StudyInstanceUID, "UI", r->id->study_uid);
    gj_dcm_item_end(o);
    gj_dcm_seq_end(o);
}

static void dataset(struct gj_dcm_out *o, const struct gj_sr_report *r, const char *series_uid,
                    const char *sop_uid)
{
    const struct gj_sr_identity *id = r->id;
    char date[16], tm[16];
    time_t now = time(NULL);
    struct tm t;
    gmtime_r(&now, &t);
    strftime(date, sizeof date, "%Y%m%d", &t);
    strftime(tm, sizeof tm, "%H%M%S", &t);
    if (id->charset[0])
        gj_dcm_str(o, T(0x0008, 0x0005), "CS", id->charset);
    gj_dcm_str(o, GJ_DCM_SOPClassUID, "UI", GJ_SR_SOP_CLASS);
    gj_dcm_str(o, GJ_DCM_SOPInstanceUID, "UI", sop_uid);
    type2(o, T(0x0008, 0x0020), "DA", id->study_date);
    gj_dcm_str(o, T(0x0008, 0x0023), "DA", date);   /* Content Date */
    type2(o, T(0x0008, 0x0030), "TM", id->study_time);
    gj_dcm_str(o, T(0x0008, 0x0033), "TM", tm);     /* Content Time */
    type2(o, T(0x0008, 0x0050), "SH", id->accession);
    gj_dcm_str(o, GJ_DCM_Modality, "CS", "SR");
    gj_dcm_str(o, T(0x0008, 0x0070), "LO", "gpujobd");   /* Manufacturer */
    type2(o, T(0x0008, 0x0090), "PN", id->referring);
    gj_dcm_str(o, T(0x0008, 0x0201), "SH", "+0000");     /* Content Time is UTC */
    gj_dcm_seq_empty(o, T(0x0008, 0x1111));   /* Referenced Performed Procedure Step */
    type2(o, T(0x0010, 0x0010), "PN", id->patient_name);
    type2(o, T(0x0010, 0x0020), "LO", id->patient_id);
    type2(o, T(0x0010, 0x0030), "DA", id->birth_date);
    type2(o, T(0x0010, 0x0040), "CS", id->sex);
    gj_dcm_str(o, GJ_DCM_StudyInstanceUID, "UI", id->study_uid);
    gj_dcm_str(o, GJ_DCM_SeriesInstanceUID, "UI", series_uid);
    type2(o, T(0x0020, 0x0010), "SH", id->study_id);
    gj_dcm_str(o, T(0x0020, 0x0011), "IS", SR_SERIES_NUMBER);
    gj_dcm_str(o, T(0x0020, 0x0013), "IS", "1");
    gj_dcm_str(o, T(0x0040, 0xA040), "CS", "CONTAINER");
    code_seq(o, T(0x0040, 0xA043), "18748-4", "LN", "Diagnostic imaging report");
    gj_dcm_str(o, T(0x0040, 0xA050), "CS", "SEPARATE");
    gj_dcm_seq_empty(o, T(0x0040, 0xA372));   /* Performed Procedure Code */
    if (r->n_refs)
        evidence(o, r);
    gj_dcm_str(o, T(0x0040, 0xA491), "CS", "COMPLETE");
    gj_dcm_str(o, T(0x0040, 0xA493), "CS", "UNVERIFIED");
    content(o, r);
}

int gj_sr_write(const struct gj_sr_report *r, const char *path, char series_uid[65], char sop_uid[65],
                struct gj_error *err)
{
    if (!r->id->study_uid[0])
        return gj_error_set(err, "", "no Study Instance UID: a report needs the study it belongs to");
    if (gj_dcm_new_uid(series_uid) != 0 || gj_dcm_new_uid(sop_uid) != 0)
        return gj_error_set(err, "", "no random numbers for new UIDs");
    struct gj_dcm_out o;
    gj_dcm_out_init(&o);
    dataset(&o, r, series_uid, sop_uid);
    int rc = gj_dcm_out_finish(&o, err);
    if (rc == 0)
        rc = gj_dcm_write_file(&o, GJ_SR_SOP_CLASS, sop_uid, path, err);
    gj_dcm_out_free(&o);
    return rc;
}
