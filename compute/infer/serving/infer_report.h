/*
 * infer_report.h — the `infer` kind's DICOM Structured Reports (compute/infer/dicom_sr.h):
 * one per study that has at least one inferred image, in the job's output directory as
 * result.dcm (the first study), result.1.dcm, result.2.dcm, ... (the others, in input
 * order). A study's score per label is the highest of its images' (as result.json's
 * studies[].max_scores); its references are the images that were inferred.
 */
#ifndef GJ_INFER_REPORT_H
#define GJ_INFER_REPORT_H

#include <stddef.h>
#include <jansson.h>

#include "infer/dicom_sr.h"

/* What a report needs of one image of the job. */
struct gj_infer_report_image {
    const struct gj_sr_identity *id;   /* id->study_uid "" : no study, no report */
    const struct gj_sr_ref *ref;
    const float *scores;               /* n_labels; NULL when the image was not inferred */
};

/* Writes the reports; returns result.json's "reports" array: per report its output name,
 * study_instance_uid, series_instance_uid and sop_instance_uid, or per study whose report
 * could not be written its study_instance_uid and the "error" (the job goes on: its
 * scores are in result.json). NULL only when out of memory. */
json_t *gj_infer_reports_write(const char *output_dir, const char *model, int64_t version,
                               const char *const *labels, size_t n_labels,
                               const struct gj_infer_report_image *ims, size_t n);

#endif
