/*
 * dicom.h — a DICOM Part 10 reader (PS3.10 file, PS3.5 encodings) for the
 * inference module. Self-contained: no service dependency, no gj_kind.
 *
 * The input is network-facing. Every length is checked against the bytes
 * that are there, nesting and element counts are bounded, and an image's
 * size is checked against GJ_DICOM_MAX_* before anything is allocated.
 * Hostile input gives -1 and a struct gj_error (its field the tag at fault,
 * "(0028,0010)", when there is one), never a crash.
 *
 * Supported: preamble + file meta group (a file without preamble that starts
 * with a group-0002 or group-0008 element is also read); implicit VR LE,
 * explicit VR LE and BE, deflated explicit VR LE; sequences and items of
 * defined and undefined length; native and encapsulated pixel data (with or
 * without a basic offset table, fragmented frames); RLE lossless, JPEG
 * baseline 8-bit (libjpeg-turbo), JPEG extended 12-bit grayscale and JPEG
 * lossless process 14 (own decoders), JPEG-LS (CharLS), JPEG 2000
 * (OpenJPEG); multi-frame; 8/16-bit, signed or unsigned, bits-stored masking,
 * rescale slope/intercept; MONOCHROME1, MONOCHROME2, RGB, YBR_FULL (converted
 * to RGB), YBR_FULL_422 / YBR_RCT / YBR_ICT inside JPEG and JPEG 2000 (the
 * codec returns RGB). Not supported (an error): PALETTE COLOR, native
 * YBR_FULL_422, bits allocated other than 8 and 16, float pixel data.
 *
 * Time: every loop is bounded by the (bounded) frame size, but Debian 12's
 * CharLS 2.4.1 can spend seconds of CPU on a hostile JPEG-LS scan (an upstream
 * bug, fixed later): callers decoding untrusted JPEG-LS need a time limit
 * (see BENCH_NOTES_DICOM.md).
 *
 * Threads: the library has no global state; a parsed gj_dicom is read-only
 * after gj_dicom_open_*, so several threads may decode frames of the same
 * dataset at once.
 *
 * Patient-identifying attributes can be read by tag like any other, but
 * nothing in this library or its CLI prints or logs them.
 */
#ifndef GJ_DICOM_H
#define GJ_DICOM_H

#include <stddef.h>
#include <stdint.h>

#include "common/gj_error.h"
#include "dicom_image.h"   /* transfer syntaxes, photometric interpretations, struct gj_dicom_image */

/* Bounds applied to every file. */
#define GJ_DICOM_MAX_FILE_BYTES   ((uint64_t)2 << 30)   /* 2 GiB read from disk */
#define GJ_DICOM_MAX_INFLATED     ((uint64_t)1 << 30)   /* deflated dataset, inflated */
#define GJ_DICOM_MAX_DEPTH        16                    /* sequence nesting */
#define GJ_DICOM_MAX_ELEMENTS     (1u << 22)            /* elements, all levels */
#define GJ_DICOM_MAX_FRAGMENTS    (1u << 20)
#define GJ_DICOM_MAX_DIM          65535                 /* rows, columns (US anyway) */
#define GJ_DICOM_MAX_FRAME_PIXELS ((uint64_t)1 << 28)   /* rows*cols per frame */
#define GJ_DICOM_MAX_FRAMES       100000
#define GJ_DICOM_MAX_FRAME_BYTES  ((uint64_t)512 << 20) /* decoded frame, all samples */
/* A compressed frame may not claim to expand more than this (plus 1 MiB). */
#define GJ_DICOM_MAX_EXPANSION    8192

/* Common tags as (group << 16 | element). */
#define GJ_TAG(g, e) (((uint32_t)(g) << 16) | (uint32_t)(e))
#define GJ_DCM_TransferSyntaxUID      GJ_TAG(0x0002, 0x0010)
#define GJ_DCM_SOPClassUID            GJ_TAG(0x0008, 0x0016)
#define GJ_DCM_SOPInstanceUID         GJ_TAG(0x0008, 0x0018)
#define GJ_DCM_Modality               GJ_TAG(0x0008, 0x0060)
#define GJ_DCM_BodyPartExamined       GJ_TAG(0x0018, 0x0015)
#define GJ_DCM_ViewPosition           GJ_TAG(0x0018, 0x5101)
#define GJ_DCM_StudyInstanceUID       GJ_TAG(0x0020, 0x000D)
#define GJ_DCM_SeriesInstanceUID      GJ_TAG(0x0020, 0x000E)
#define GJ_DCM_SamplesPerPixel        GJ_TAG(0x0028, 0x0002)
#define GJ_DCM_PhotometricInterp      GJ_TAG(0x0028, 0x0004)
#define GJ_DCM_PlanarConfiguration    GJ_TAG(0x0028, 0x0006)
#define GJ_DCM_NumberOfFrames         GJ_TAG(0x0028, 0x0008)
#define GJ_DCM_Rows                   GJ_TAG(0x0028, 0x0010)
#define GJ_DCM_Columns                GJ_TAG(0x0028, 0x0011)
#define GJ_DCM_BitsAllocated          GJ_TAG(0x0028, 0x0100)
#define GJ_DCM_BitsStored             GJ_TAG(0x0028, 0x0101)
#define GJ_DCM_HighBit                GJ_TAG(0x0028, 0x0102)
#define GJ_DCM_PixelRepresentation    GJ_TAG(0x0028, 0x0103)
#define GJ_DCM_WindowCenter           GJ_TAG(0x0028, 0x1050)
#define GJ_DCM_WindowWidth            GJ_TAG(0x0028, 0x1051)
#define GJ_DCM_RescaleIntercept       GJ_TAG(0x0028, 0x1052)
#define GJ_DCM_RescaleSlope           GJ_TAG(0x0028, 0x1053)
#define GJ_DCM_VOILUTFunction         GJ_TAG(0x0028, 0x1056)
#define GJ_DCM_PixelData              GJ_TAG(0x7FE0, 0x0010)

/* A parsed dataset: owns its bytes; elements point into them. */
typedef struct gj_dicom gj_dicom;

/* --- opening ----------------------------------------------------------- */

/* Parses a file / a buffer (copied). 0 and *out, or -1 with err (may be NULL). */
int gj_dicom_open_file(const char *path, gj_dicom **out, struct gj_error *err);
int gj_dicom_open_mem(const void *data, size_t len, gj_dicom **out, struct gj_error *err);
void gj_dicom_free(gj_dicom *d);

/* What one open may hold besides the file (a field 0: the bound above). For a caller
 * that must know an image's cost before paying it (a render within a memory budget):
 * open header_only, price the image (gj_dicom_inflated_bytes, gj_dicom_decode_bytes),
 * then open it whole with max_inflated at the price. */
struct gj_dicom_open_limits {
    uint64_t max_inflated;   /* a deflated dataset's inflated bytes: past them an error,
                                or with header_only the end of what is read */
    int header_only;         /* read up to the top-level Pixel Data's header and stop:
                                attributes and gj_dicom_image_info work, decoding does not */
};
int gj_dicom_open_file_limited(const char *path, const struct gj_dicom_open_limits *lim, gj_dicom **out,
                               struct gj_error *err);
int gj_dicom_open_mem_limited(const void *data, size_t len, const struct gj_dicom_open_limits *lim,
                              gj_dicom **out, struct gj_error *err);
/* The bytes a deflated dataset takes inflated (0 for other transfer syntaxes): from a
 * header_only open, the elements before the pixel data plus its declared length (an
 * undefined length counts 0: then the whole open's max_inflated is what bounds it). */
uint64_t gj_dicom_inflated_bytes(const gj_dicom *d);

enum gj_dicom_ts gj_dicom_ts(const gj_dicom *d);
/* The transfer syntax UID as written (trimmed), "" if none. */
const char *gj_dicom_ts_uid(const gj_dicom *d);
const char *gj_dicom_ts_name(enum gj_dicom_ts ts);

/* --- tag lookup (top-level dataset and file meta group) ---------------- */

/* 1 when the tag is present at top level, 0 when not. */
int gj_dicom_has(const gj_dicom *d, uint32_t tag);
/* The value as text, trailing/leading spaces and NULs trimmed, backslashes
 * (multi-value separators) kept. 0 on success (truncated to buflen-1), -1 if
 * absent or not a text VR. */
int gj_dicom_get_string(const gj_dicom *d, uint32_t tag, char *buf, size_t buflen);
/* Value number index (0-based) as an integer: US, SS, UL, SL, IS (and text
 * holding an integer). 0 or -1. */
int gj_dicom_get_int(const gj_dicom *d, uint32_t tag, unsigned index, long *out);
/* Value number index as a double: DS, IS, FL, FD, and the integer VRs. */
int gj_dicom_get_double(const gj_dicom *d, uint32_t tag, unsigned index, double *out);
/* Number of values (backslash-separated for text, length/size for binary). */
int gj_dicom_value_count(const gj_dicom *d, uint32_t tag);

/* VOI window (0028,1050)/(0028,1051), value index 0. 0 or -1 when absent. */
int gj_dicom_window(const gj_dicom *d, double *center, double *width);

/* --- every element, in file order ---------------------------------------- */

/* One element of the dataset (file meta group included), nested ones too:
 * a sequence (SQ, or UN of undefined length) is followed by its items, each
 * begun by an item marker at depth + 1 and holding the elements at depth + 1
 * up to the next marker or the next element of a lower depth. */
struct gj_dicom_element {
    uint32_t tag;              /* (FFFE,E000) for an item marker */
    char vr[3];                /* as written (explicit VR) or from the reader's small dictionary;
                                  "UN" when unknown, "" for an item marker */
    unsigned depth;            /* 0: top level */
    int sequence;              /* 1: its items follow */
    int encapsulated;          /* 1: encapsulated pixel data (fragments, no value here) */
    int big_endian;            /* the value's byte order */
    const uint8_t *value;      /* NULL for sequences, item markers, encapsulated pixel data */
    uint32_t length;
};

size_t gj_dicom_element_count(const gj_dicom *d);
/* Element i (0 <= i < gj_dicom_element_count). */
void gj_dicom_element_at(const gj_dicom *d, size_t i, struct gj_dicom_element *out);

/* --- pixels -------------------------------------------------------------- */

/* Reads and checks the image attributes. 0, or -1 with err. */
int gj_dicom_image_info(const gj_dicom *d, struct gj_dicom_image *img, struct gj_error *err);

/* Number of floats one decoded frame needs: rows*columns*samples_per_pixel. */
uint64_t gj_dicom_frame_floats(const struct gj_dicom_image *img);

/* Host bytes gj_dicom_decode_frame(_raw) allocates for one frame besides its output:
 * the frame as stored, and for compressed data the codec's working planes (counted
 * generously). A compressed frame in several fragments is also joined first: a copy of
 * at most the file's bytes, for the caller to count with the file. */
uint64_t gj_dicom_decode_bytes(const struct gj_dicom_image *img);

/* Decodes frame `frame` (0-based) to float32 modality values
 * (stored value, masked to bits stored and sign-extended, times slope plus
 * intercept). Monochrome: rows*columns floats, row-major. RGB / YBR: three
 * planes R, G, B (YBR_FULL converted to RGB), each rows*columns, no rescale.
 * MONOCHROME1 is returned as stored (not inverted): use the photometric
 * interpretation to display. out must hold `capacity` floats, at least
 * gj_dicom_frame_floats(). 0 or -1 with err. */
int gj_dicom_decode_frame(const gj_dicom *d, uint32_t frame, float *out, uint64_t capacity,
                          struct gj_error *err);

/* Like gj_dicom_decode_frame, but stored values (after masking and sign
 * extension, before rescale) as int32. */
int gj_dicom_decode_frame_raw(const gj_dicom *d, uint32_t frame, int32_t *out, uint64_t capacity,
                              struct gj_error *err);

/* `gpujobd dicom info FILE [--pixels OUT.f32]` (argv[0] is "dicom"). */
int gj_dicom_cli_main(int argc, char **argv);

#endif
