/*
 * dicom_sr.h — the DICOM Structured Report of an inference (Comprehensive SR,
 * 1.2.840.10008.5.1.4.1.1.88.33), written with dicom_write.h.
 *
 * One report per study: the patient and study identity copied from the study's images (so
 * a PACS files it in the same study), a new series and instance, and a content tree of
 *   CONTAINER "Diagnostic imaging report" (LOINC 18748-4)
 *     CONTAINS TEXT  "Algorithm Name" (DCM 111001)     the model's name
 *     CONTAINS TEXT  "Algorithm Version" (DCM 111003)  its version
 *     CONTAINS CODE  "Finding" (DCM 121071)            the top label
 *     CONTAINS NUM   <label> (99GPUJOBD)               the label's score, unit "1" (UCUM), one per label
 *     CONTAINS IMAGE "Source" (DCM 121112)             one per image the scores came from
 * and the images in Current Requested Procedure Evidence. Labels are coded in the private
 * scheme 99GPUJOBD (code value: the label, in Long Code Value past 16 characters).
 *
 * Identity values that do not fit their VR (or are absent) are written empty (type 2).
 */
#ifndef GJ_DICOM_SR_H
#define GJ_DICOM_SR_H

#include <stddef.h>
#include <stdint.h>

#include "common/gj_error.h"
#include "infer/dicom.h"

#define GJ_SR_SOP_CLASS "1.2.840.10008.5.1.4.1.1.88.33"

/* What the report copies from an image of the study. */
struct gj_sr_identity {
    char charset[68];           /* Specific Character Set (0008,0005), "" when default */
    char patient_name[328], patient_id[68], birth_date[12], sex[20];
    char study_uid[68], study_date[12], study_time[20], accession[20], referring[328], study_id[20];
};

/* One image the scores came from. */
struct gj_sr_ref {
    char sop_class[68], sop_uid[68], series_uid[68];
};

struct gj_sr_report {
    const struct gj_sr_identity *id;
    const char *model;
    int64_t version;
    const char *const *labels;   /* n_labels */
    const float *scores;         /* the study's score per label */
    size_t n_labels;
    const struct gj_sr_ref *refs;
    size_t n_refs;
};

/* Reads the identity attributes of an image (each "" when absent or unfit). */
void gj_sr_identity_read(const gj_dicom *d, struct gj_sr_identity *id);
/* Reads an image's reference ("" each when absent). */
void gj_sr_ref_read(const gj_dicom *d, struct gj_sr_ref *ref);

/* Writes the report to path with new series and instance UIDs (returned). 0, or -1
 * with err (nothing at path). */
int gj_sr_write(const struct gj_sr_report *r, const char *path, char series_uid[65], char sop_uid[65],
                struct gj_error *err);

#endif
