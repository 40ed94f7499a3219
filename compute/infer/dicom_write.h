/*
 * dicom_write.h — a small DICOM Part 10 writer: explicit VR little endian, sequences and
 * items of undefined length (with their delimiters), the file meta group made from the
 * dataset's SOP class and instance. Enough for the documents the service writes (the
 * Structured Report of dicom_sr.h); no pixel data, no other transfer syntax.
 *
 * The writer keeps the rules a reader relies on, and fails the whole document rather than
 * write one that breaks them: tags ascend within each dataset, values have even length
 * (padded as PS3.5 6.2 says: UI with NUL, other text with a space), a value fits its VR's
 * maximum length and has no backslash (one value per element), sequences and items
 * close in order. The first broken rule is kept; gj_dcm_out_finish reports it.
 *
 *   struct gj_dcm_out o;
 *   gj_dcm_out_init(&o);
 *   gj_dcm_str(&o, GJ_TAG(0x0008, 0x0016), "UI", sop_class);
 *   gj_dcm_seq_begin(&o, GJ_TAG(0x0040, 0xA730));
 *     gj_dcm_item_begin(&o);  ...  gj_dcm_item_end(&o);
 *   gj_dcm_seq_end(&o);
 *   if (gj_dcm_out_finish(&o, err) == 0) gj_dcm_write_file(&o, path, err);
 *   gj_dcm_out_free(&o);
 */
#ifndef GJ_DICOM_WRITE_H
#define GJ_DICOM_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "common/gj_error.h"

#define GJ_DCM_WRITE_MAX_DEPTH 8     /* nested sequences */

struct gj_dcm_out {
    uint8_t *p;
    size_t n, cap;
    uint32_t last_tag[2 * GJ_DCM_WRITE_MAX_DEPTH + 1];   /* per open dataset, 0: none */
    int depth;                /* open datasets - 1 (the top level is 0) */
    int in_seq;               /* 1: inside a sequence, between items */
    char error[160];          /* the first broken rule, "" when none */
};

void gj_dcm_out_init(struct gj_dcm_out *o);
void gj_dcm_out_free(struct gj_dcm_out *o);

/* A text element (AE AS CS DA DS DT IS LO LT PN SH ST TM UC UI UT): one value, padded. */
void gj_dcm_str(struct gj_dcm_out *o, uint32_t tag, const char *vr, const char *value);
/* An unsigned short. */
void gj_dcm_us(struct gj_dcm_out *o, uint32_t tag, uint16_t value);
/* An element with no value (type 2 attributes that are unknown). */
void gj_dcm_empty(struct gj_dcm_out *o, uint32_t tag, const char *vr);

void gj_dcm_seq_begin(struct gj_dcm_out *o, uint32_t tag);
void gj_dcm_item_begin(struct gj_dcm_out *o);
void gj_dcm_item_end(struct gj_dcm_out *o);
void gj_dcm_seq_end(struct gj_dcm_out *o);
/* An empty sequence (type 2). */
void gj_dcm_seq_empty(struct gj_dcm_out *o, uint32_t tag);

/* Checks that everything is closed and no rule was broken: 0, or -1 with err. */
int gj_dcm_out_finish(struct gj_dcm_out *o, struct gj_error *err);

/* The Part 10 file: preamble, "DICM", file meta group (from the dataset's SOP class and
 * instance UIDs given here), then the dataset, written to a temporary file renamed into
 * place. 0, or -1 with err. */
int gj_dcm_write_file(const struct gj_dcm_out *o, const char *sop_class, const char *sop_instance,
                      const char *path, struct gj_error *err);

/* A new UID under 2.25 (PS3.5 B.2): the decimal of a random (version 4) UUID. 0 or -1. */
int gj_dcm_new_uid(char out[65]);

#endif
