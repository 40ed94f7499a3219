/*
 * dicom_fuzz.c — libFuzzer harness for the DICOM reader (compute/infer/dicom*):
 * parse, look up tags, walk every element (checking the nesting WADO-RS metadata
 * rebuilds from it), read the image attributes and decode up to two frames; and the
 * header-only open a render prices an image with (gj_dicom_open_limits) agrees with the
 * whole one on the image's size and never decodes.
 *
 * Built by fuzz/build.sh; fuzz/smoke.sh runs it in CI from the kept corpus
 * (fuzz/corpus/dicom: files DCMTK and GDCM wrote, see fuzz/seeds.py).
 */
#include <stdint.h>
#include <stdlib.h>

#include "infer/dicom.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void header_only(const uint8_t *data, size_t size, const gj_dicom *whole)
{
    const struct gj_dicom_open_limits lim = { .max_inflated = 1u << 16, .header_only = 1 };
    struct gj_error err = { 0 };
    gj_dicom *h;
    if (gj_dicom_open_mem_limited(data, size, &lim, &h, &err) < 0)
        return;
    struct gj_dicom_image a, b;
    if (whole && gj_dicom_image_info(h, &a, &err) == 0 && gj_dicom_image_info(whole, &b, &err) == 0 &&
        (a.rows != b.rows || a.columns != b.columns || a.samples_per_pixel != b.samples_per_pixel))
        abort();
    (void)gj_dicom_inflated_bytes(h);
    float one;
    if (gj_dicom_decode_frame(h, 0, &one, 1, &err) == 0)
        abort();
    gj_dicom_free(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gj_error err = { 0 };
    gj_dicom *d;
    if (gj_dicom_open_mem(data, size, &d, &err) < 0) {
        header_only(data, size, NULL);
        return 0;
    }
    header_only(data, size, d);
    char s[128];
    long v;
    double c, w;
    (void)gj_dicom_get_string(d, GJ_DCM_SOPInstanceUID, s, sizeof s);
    (void)gj_dicom_get_int(d, GJ_DCM_NumberOfFrames, 0, &v);
    (void)gj_dicom_window(d, &c, &w);
    /* Nesting: depth rises only by one, into a sequence's first item; item markers only inside. */
    unsigned depth = 0, after_sequence = 0;
    for (size_t i = 0; i < gj_dicom_element_count(d); i++) {
        struct gj_dicom_element e;
        gj_dicom_element_at(d, i, &e);
        if (e.depth > depth && !(after_sequence && e.depth == depth + 1 && !e.vr[0]))
            abort();
        if (!e.vr[0] && e.depth == 0)
            abort();
        if (e.value && e.length)
            s[0] = (char)(e.value[0] ^ e.value[e.length - 1]);   /* the value lies in the buffer */
        depth = e.depth;
        after_sequence = (unsigned)e.sequence;
    }
    struct gj_dicom_image img;
    /* Frames larger than 4 Mi samples are legal (the library bounds them by
     * the compressed size), but decoding them is slow under ASan: skip them
     * so the fuzzer looks for bugs, not for big images. */
    if (gj_dicom_image_info(d, &img, &err) == 0 && gj_dicom_frame_floats(&img) <= (1u << 22)) {
        uint64_t n = gj_dicom_frame_floats(&img);
        float *out = malloc(n * sizeof *out);
        if (out) {
            for (uint32_t f = 0; f < img.frames && f < 2; f++)
                (void)gj_dicom_decode_frame(d, f, out, n, &err);
            free(out);
        }
    }
    gj_dicom_free(d);
    return 0;
}
