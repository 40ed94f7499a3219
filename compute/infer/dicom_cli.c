/*
 * dicom_cli.c — `gpujobd dicom info FILE [--pixels OUT.f32] [--frame N]`.
 *
 * Prints a JSON summary on stdout. Patient name, ID and other patient
 * attributes are never read here, so they cannot be printed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dicom.h"

static void json_str(FILE *o, const char *s)
{
    fputc('"', o);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(o, "\\%c", *c);
        else if (*c < 0x20 || *c >= 0x7F)
            fprintf(o, "\\u%04x", *c);
        else
            fputc(*c, o);
    }
    fputc('"', o);
}

static void field_tag(FILE *o, const gj_dicom *d, const char *name, uint32_t tag)
{
    char buf[256];
    fprintf(o, "  \"%s\": ", name);
    if (gj_dicom_get_string(d, tag, buf, sizeof buf) == 0)
        json_str(o, buf);
    else
        fputs("null", o);
    fputs(",\n", o);
}

static int write_floats(const char *path, const float *v, uint64_t n, struct gj_error *err)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        gj_error_set(err, "", "out of memory");
        return -1;
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        gj_error_set(err, "", "%s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    size_t w = fwrite(v, sizeof *v, (size_t)n, f);
    int bad = w != n || fflush(f) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        gj_error_set(err, "", "%s: write failed: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: gpujobd dicom info FILE [--pixels OUT.f32] [--frame N]\n"
                    "  prints a JSON summary; --pixels writes frame N (default 1) as float32\n"
                    "  modality values (little endian; RGB as 3 planes)\n");
    return 2;
}

struct cli_args { const char *file, *pixels; long frame; };

static int cli_args(int argc, char **argv, struct cli_args *a)
{
    if (argc < 3 || strcmp(argv[1], "info") != 0)
        return -1;
    a->file = a->pixels = NULL;
    a->frame = 1;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--pixels") == 0 && i + 1 < argc) {
            a->pixels = argv[++i];
        } else if (strcmp(argv[i], "--frame") == 0 && i + 1 < argc) {
            char *e;
            a->frame = strtol(argv[++i], &e, 10);
            if (*e || a->frame < 1)
                return -1;
        } else if (argv[i][0] == '-' || a->file) {
            return -1;
        } else {
            a->file = argv[i];
        }
    }
    return a->file ? 0 : -1;
}

/* The image attributes, or the reason there are none. */
static void print_image(FILE *o, int have_img, const struct gj_dicom_image *img, const char *img_err)
{
    if (!have_img) {
        fputs("  \"image_error\": ", o);
        json_str(o, img_err);
        fputs(",\n", o);
        return;
    }
    fprintf(o, "  \"rows\": %u,\n  \"columns\": %u,\n  \"frames\": %u,\n", img->rows, img->columns, img->frames);
    fprintf(o, "  \"samples_per_pixel\": %u,\n  \"photometric_interpretation\": ", img->samples_per_pixel);
    json_str(o, img->photometric_name);
    fprintf(o, ",\n  \"bits_allocated\": %u,\n  \"bits_stored\": %u,\n  \"high_bit\": %u,\n"
               "  \"pixel_representation\": %u,\n  \"rescale_slope\": %.17g,\n  \"rescale_intercept\": %.17g,\n",
            img->bits_allocated, img->bits_stored, img->high_bit, img->pixel_representation,
            img->rescale_slope, img->rescale_intercept);
    fprintf(o, "  \"encapsulated\": %s,\n", img->encapsulated ? "true" : "false");
}

static void print_summary(FILE *o, const gj_dicom *d, int have_img, const struct gj_dicom_image *img,
                          const char *img_err)
{
    fputs("{\n", o);
    fputs("  \"transfer_syntax\": ", o);
    json_str(o, gj_dicom_ts_uid(d));
    fputs(",\n  \"transfer_syntax_name\": ", o);
    json_str(o, gj_dicom_ts_name(gj_dicom_ts(d)));
    fputs(",\n", o);
    field_tag(o, d, "sop_class_uid", GJ_DCM_SOPClassUID);
    field_tag(o, d, "sop_instance_uid", GJ_DCM_SOPInstanceUID);
    field_tag(o, d, "study_instance_uid", GJ_DCM_StudyInstanceUID);
    field_tag(o, d, "series_instance_uid", GJ_DCM_SeriesInstanceUID);
    field_tag(o, d, "modality", GJ_DCM_Modality);
    field_tag(o, d, "body_part_examined", GJ_DCM_BodyPartExamined);
    field_tag(o, d, "view_position", GJ_DCM_ViewPosition);
    print_image(o, have_img, img, img_err);
    double wc, ww;
    if (gj_dicom_window(d, &wc, &ww) == 0)
        fprintf(o, "  \"window_center\": %.17g,\n  \"window_width\": %.17g,\n", wc, ww);
}

/* --pixels: frame (1-based) as float32. 0, or -1 with err. */
static int write_pixels(const gj_dicom *d, const struct gj_dicom_image *img, long frame, const char *path,
                        struct gj_error *err)
{
    if ((uint64_t)frame > img->frames)
        return gj_error_set(err, "", "frame %ld out of range (%u frames)", frame, img->frames);
    uint64_t n = gj_dicom_frame_floats(img);
    float *v = malloc(n * sizeof *v);
    if (!v)
        return gj_error_set(err, "", "out of memory");
    int rc = gj_dicom_decode_frame(d, (uint32_t)(frame - 1), v, n, err) < 0 || write_floats(path, v, n, err) < 0
             ? -1 : 0;
    free(v);
    return rc;
}

int gj_dicom_cli_main(int argc, char **argv)
{
    struct cli_args a;
    if (cli_args(argc, argv, &a))
        return usage();
    struct gj_error err = { 0 }, img_err = { 0 };
    gj_dicom *d;
    if (gj_dicom_open_file(a.file, &d, &err) < 0) {
        fprintf(stderr, "gpujobd dicom: %s\n", err.message);
        return 1;
    }
    struct gj_dicom_image img;
    int have_img = gj_dicom_image_info(d, &img, &img_err) == 0;
    FILE *o = stdout;
    print_summary(o, d, have_img, &img, img_err.message);
    int rc = 0;
    if (a.pixels) {
        if (!have_img)
            err = img_err;
        rc = !have_img || write_pixels(d, &img, a.frame, a.pixels, &err) ? 1 : 0;
        if (rc == 0) {
            fputs("  \"pixels\": ", o);
            json_str(o, a.pixels);
            fprintf(o, ",\n  \"pixels_frame\": %ld,\n", a.frame);
        }
    }
    fprintf(o, "  \"ok\": %s\n}\n", rc == 0 ? "true" : "false");
    fflush(o);
    if (rc)
        fprintf(stderr, "gpujobd dicom: %s\n", err.message);
    gj_dicom_free(d);
    return rc;
}
