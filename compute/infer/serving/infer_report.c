/*
 * infer_report.c — one Structured Report per study (infer_report.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "infer/serving/infer_report.h"

/* The study of image i: its inferred images' references and highest scores. */
static void gather(const struct gj_infer_report_image *ims, size_t n, size_t i, size_t n_labels,
                   struct gj_sr_ref *refs, size_t *n_refs, float *scores)
{
    int have = 0;
    *n_refs = 0;
    for (size_t j = i; j < n; j++) {
        if (!ims[j].scores || strcmp(ims[j].id->study_uid, ims[i].id->study_uid) != 0)
            continue;
        for (size_t l = 0; l < n_labels; l++)
            if (!have || ims[j].scores[l] > scores[l])
                scores[l] = ims[j].scores[l];
        have = 1;
        /* an image without the UIDs a reference needs still scored the study */
        if (ims[j].ref->sop_class[0] && ims[j].ref->sop_uid[0] && ims[j].ref->series_uid[0])
            refs[(*n_refs)++] = *ims[j].ref;
    }
}

static int first_of_study(const struct gj_infer_report_image *ims, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (strcmp(ims[j].id->study_uid, ims[i].id->study_uid) == 0)
            return 0;
    return 1;
}

static int study_inferred(const struct gj_infer_report_image *ims, size_t n, size_t i)
{
    for (size_t j = i; j < n; j++)
        if (ims[j].scores && strcmp(ims[j].id->study_uid, ims[i].id->study_uid) == 0)
            return 1;
    return 0;
}

static json_t *write_one(const char *output_dir, const char *name, const struct gj_sr_report *r)
{
    char path[GJ_PATH_MAX], series[65], sop[65];
    struct gj_error err = { 0 };
    if (gj_path_join(path, sizeof path, output_dir, name) != 0)
        gj_error_set(&err, "", "output path too long");
    else if (gj_sr_write(r, path, series, sop, &err) == 0)
        return json_pack("{s:s, s:s, s:s, s:s}", "output", name, "study_instance_uid", r->id->study_uid,
                         "series_instance_uid", series, "sop_instance_uid", sop);
    return json_pack("{s:s, s:s}", "study_instance_uid", r->id->study_uid, "error", err.message);
}

json_t *gj_infer_reports_write(const char *output_dir, const char *model, int64_t version,
                               const char *const *labels, size_t n_labels,
                               const struct gj_infer_report_image *ims, size_t n)
{
    json_t *out = json_array();
    struct gj_sr_ref *refs = calloc(n ? n : 1, sizeof *refs);
    float *scores = calloc(n_labels ? n_labels : 1, sizeof *scores);
    if (!out || !refs || !scores) {
        json_decref(out);
        out = NULL;
        goto done;
    }
    size_t written = 0;
    for (size_t i = 0; i < n; i++) {
        if (!ims[i].id->study_uid[0] || !first_of_study(ims, i) || !study_inferred(ims, n, i))
            continue;
        struct gj_sr_report r = { .id = ims[i].id, .model = model, .version = version, .labels = labels,
                                  .scores = scores, .n_labels = n_labels, .refs = refs };
        gather(ims, n, i, n_labels, refs, &r.n_refs, scores);
        char name[40];
        if (written == 0)
            snprintf(name, sizeof name, "result.dcm");
        else
            snprintf(name, sizeof name, "result.%zu.dcm", written);
        json_t *one = write_one(output_dir, name, &r);
        if (json_object_get(one, "output"))
            written++;
        if (!one || json_array_append_new(out, one) != 0) {
            json_decref(out);
            out = NULL;
            goto done;
        }
    }
done:
    free(refs);
    free(scores);
    return out;
}
