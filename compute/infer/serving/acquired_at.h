/*
 * acquired_at.h — the acquisition time of a DICOM image, which the `infer` kind writes into
 * its result.json (per image, "acquired_at") for the service's inference_results table.
 */
#ifndef GJ_ACQUIRED_AT_H
#define GJ_ACQUIRED_AT_H

#include "infer/dicom.h"

/* DICOM DA/TM/DT values to "YYYY-MM-DD HH:MM:SS[.ffffff]" (no zone): from dt (DT) when
 * given, else date (DA) and time (TM, may be NULL: midnight). The DT offset is dropped:
 * the time is the local time the device wrote. 0, or -1 when they are not valid. */
int gj_dicom_datetime_text(const char *dt, const char *date, const char *time, char out[32]);

/* AcquisitionDateTime, else AcquisitionDate/Time, else ContentDate/Time, as above. 0, or
 * -1 (out "") when the file has none that is valid. */
int gj_dicom_acquired_at(const gj_dicom *d, char out[32]);

#endif
