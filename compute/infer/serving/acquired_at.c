/*
 * acquired_at.c — when an image was acquired, from its DICOM date and time attributes, as
 * a timestamp PostgreSQL takes (see acquired_at.h). The values come from files: every
 * length and digit is checked.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "infer/serving/acquired_at.h"

static int digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

/* "YYYYMMDD" (also the old "YYYY.MM.DD") to y, m, d. */
static int parse_da(const char *s, int *y, int *m, int *d)
{
    char b[9];
    size_t n = strlen(s);
    if (n == 10 && s[4] == '.' && s[7] == '.') {
        memcpy(b, s, 4);
        memcpy(b + 4, s + 5, 2);
        memcpy(b + 6, s + 8, 2);
    } else if (n == 8) {
        memcpy(b, s, 8);
    } else {
        return -1;
    }
    b[8] = '\0';
    if (!digits(b, 8))
        return -1;
    *y = (b[0] - '0') * 1000 + (b[1] - '0') * 100 + (b[2] - '0') * 10 + (b[3] - '0');
    *m = (b[4] - '0') * 10 + (b[5] - '0');
    *d = (b[6] - '0') * 10 + (b[7] - '0');
    static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    if (*y < 1 || *m < 1 || *m > 12 || *d < 1 || *d > mdays[*m - 1])
        return -1;
    if (*m == 2 && *d == 29 && !((*y % 4 == 0 && *y % 100 != 0) || *y % 400 == 0))
        return -1;
    return 0;
}

/* "HH[MM[SS[.F{1,6}]]]" (also "HH:MM:SS"); frac gets the fraction digits ("" if none). */
static int parse_tm(const char *s, int *hh, int *mm, int *ss, char frac[8])
{
    char b[32];
    size_t o = 0;
    for (const char *p = s; *p && o < sizeof b - 1; p++)
        if (*p != ':')
            b[o++] = *p;
    b[o] = '\0';
    if (strlen(s) >= sizeof b)
        return -1;
    *hh = *mm = *ss = 0;
    frac[0] = '\0';
    size_t n = strcspn(b, ".");
    if (n < 2 || n > 6 || n % 2 || !digits(b, n))
        return -1;
    *hh = (b[0] - '0') * 10 + (b[1] - '0');
    if (n >= 4)
        *mm = (b[2] - '0') * 10 + (b[3] - '0');
    if (n >= 6)
        *ss = (b[4] - '0') * 10 + (b[5] - '0');
    if (b[n] == '.') {
        size_t f = strlen(b + n + 1);
        if (n != 6 || f < 1 || f > 6 || !digits(b + n + 1, f))
            return -1;
        memcpy(frac, b + n + 1, f + 1);
    }
    if (*hh > 23 || *mm > 59 || *ss > 60)
        return -1;
    if (*ss == 60)
        *ss = 59;               /* a leap second: PostgreSQL refuses :60 */
    return 0;
}

static void fmt_ts(char out[32], int y, int m, int d, int hh, int mm, int ss, const char *frac)
{
    if (frac[0])
        snprintf(out, 32, "%04d-%02d-%02d %02d:%02d:%02d.%s", y, m, d, hh, mm, ss, frac);
    else
        snprintf(out, 32, "%04d-%02d-%02d %02d:%02d:%02d", y, m, d, hh, mm, ss);
}

int gj_dicom_datetime_text(const char *dt, const char *date, const char *time, char out[32])
{
    int y, m, d, hh = 0, mm = 0, ss = 0;
    char frac[8] = "";
    out[0] = '\0';
    if (dt && dt[0]) {
        /* YYYYMMDDHHMMSS.FFFFFF&ZZXX, every part after the year optional; the
         * offset is dropped (the column holds the local time as the device wrote it). */
        char b[40];
        size_t n = strcspn(dt, "+-");
        if (n >= sizeof b || n < 8)
            return -1;
        if (dt[n] && (strlen(dt + n + 1) != 4 || !digits(dt + n + 1, 4)))
            return -1;           /* the offset is &ZZXX */
        memcpy(b, dt, n);
        b[n] = '\0';
        char da[9];
        memcpy(da, b, 8);
        da[8] = '\0';
        if (parse_da(da, &y, &m, &d))
            return -1;
        if (b[8] && parse_tm(b + 8, &hh, &mm, &ss, frac))
            return -1;
        fmt_ts(out, y, m, d, hh, mm, ss, frac);
        return 0;
    }
    if (!date || parse_da(date, &y, &m, &d))
        return -1;
    if (time && time[0] && parse_tm(time, &hh, &mm, &ss, frac))
        return -1;
    fmt_ts(out, y, m, d, hh, mm, ss, frac);
    return 0;
}

/* AcquisitionDateTime, else AcquisitionDate/Time, else ContentDate/Time. */
int gj_dicom_acquired_at(const gj_dicom *d, char out[32])
{
    char dt[64], da[32], tm[40];
    int rc = -1;
    out[0] = '\0';
    if (gj_dicom_get_string(d, GJ_TAG(0x0008, 0x002A), dt, sizeof dt) == 0 && dt[0])
        rc = gj_dicom_datetime_text(dt, NULL, NULL, out);
    if (rc != 0 && gj_dicom_get_string(d, GJ_TAG(0x0008, 0x0022), da, sizeof da) == 0 && da[0]) {
        if (gj_dicom_get_string(d, GJ_TAG(0x0008, 0x0032), tm, sizeof tm) != 0)
            tm[0] = '\0';
        rc = gj_dicom_datetime_text(NULL, da, tm, out);
    }
    if (rc != 0 && gj_dicom_get_string(d, GJ_TAG(0x0008, 0x0023), da, sizeof da) == 0 && da[0]) {
        if (gj_dicom_get_string(d, GJ_TAG(0x0008, 0x0033), tm, sizeof tm) != 0)
            tm[0] = '\0';
        rc = gj_dicom_datetime_text(NULL, da, tm, out);
    }
    if (rc != 0)
        out[0] = '\0';
    return rc;
}
