/*
 * test_dicom_write.c — the Part 10 writer (compute/infer/dicom_write.h): what it writes
 * the project's reader reads back (values, padding, sequences, file meta), and each rule
 * it keeps fails the document with the rule named rather than write a broken file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "infer/dicom.h"
#include "infer/dicom_write.h"

#define T GJ_TAG

static const char *tmp_path(void)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/gj-dcmw-%d.dcm", (int)getpid());
    return path;
}

static void round_trip(void **state)
{
    (void)state;
    struct gj_dcm_out o;
    struct gj_error err = { 0 };
    gj_dcm_out_init(&o);
    gj_dcm_str(&o, T(0x0008, 0x0005), "CS", "ISO_IR 100\\ISO_IR 192");   /* several CS values */
    gj_dcm_str(&o, GJ_DCM_SOPClassUID, "UI", "1.2.840.10008.5.1.4.1.1.88.33");
    gj_dcm_str(&o, GJ_DCM_SOPInstanceUID, "UI", "1.2.3.45");            /* odd: NUL-padded */
    gj_dcm_str(&o, GJ_DCM_Modality, "CS", "SR");
    gj_dcm_empty(&o, T(0x0010, 0x0010), "PN");
    gj_dcm_str(&o, T(0x0010, 0x0020), "LO", "PID");                     /* odd: space-padded */
    gj_dcm_us(&o, GJ_DCM_Rows, 512);
    gj_dcm_seq_begin(&o, T(0x0040, 0xA730));
    gj_dcm_item_begin(&o);
    gj_dcm_str(&o, T(0x0040, 0xA040), "CS", "TEXT");
    gj_dcm_item_end(&o);
    gj_dcm_seq_end(&o);
    assert_int_equal(gj_dcm_out_finish(&o, &err), 0);
    assert_int_equal(gj_dcm_write_file(&o, "1.2.840.10008.5.1.4.1.1.88.33", "1.2.3.45", tmp_path(), &err), 0);
    gj_dcm_out_free(&o);

    gj_dicom *d = NULL;
    assert_int_equal(gj_dicom_open_file(tmp_path(), &d, &err), 0);
    char buf[128];
    assert_string_equal(gj_dicom_ts_uid(d), "1.2.840.10008.1.2.1");
    assert_int_equal(gj_dicom_get_string(d, GJ_DCM_SOPInstanceUID, buf, sizeof buf), 0);
    assert_string_equal(buf, "1.2.3.45");
    assert_int_equal(gj_dicom_get_string(d, T(0x0010, 0x0020), buf, sizeof buf), 0);
    assert_string_equal(buf, "PID");
    assert_int_equal(gj_dicom_value_count(d, T(0x0008, 0x0005)), 2);
    long rows = 0;
    assert_int_equal(gj_dicom_get_int(d, GJ_DCM_Rows, 0, &rows), 0);
    assert_int_equal(rows, 512);
    assert_int_equal(gj_dicom_has(d, T(0x0040, 0xA730)), 1);
    assert_int_equal(gj_dicom_has(d, T(0x0010, 0x0010)), 1);
    gj_dicom_free(d);
    unlink(tmp_path());
}

/* Each broken rule: finish fails, naming it; nothing is written. */
static void expect_broken(struct gj_dcm_out *o, const char *what)
{
    struct gj_error err = { 0 };
    assert_int_equal(gj_dcm_out_finish(o, &err), -1);
    if (!strstr(err.message, what))
        fail_msg("'%s' does not say '%s'", err.message, what);
    assert_int_equal(gj_dcm_write_file(o, "1.2", "1.2.3", tmp_path(), &err), -1);
    assert_int_not_equal(access(tmp_path(), F_OK), 0);
    gj_dcm_out_free(o);
}

static void rules_kept(void **state)
{
    (void)state;
    struct gj_dcm_out o;
    gj_dcm_out_init(&o);
    gj_dcm_str(&o, GJ_DCM_SOPInstanceUID, "UI", "1.2");
    gj_dcm_str(&o, GJ_DCM_SOPClassUID, "UI", "1.2");
    expect_broken(&o, "must ascend");

    gj_dcm_out_init(&o);
    gj_dcm_str(&o, T(0x0010, 0x0020), "LO", "a\\b");
    expect_broken(&o, "does not fit VR LO");

    gj_dcm_out_init(&o);
    char long_uid[80];
    memset(long_uid, '1', sizeof long_uid - 1);
    long_uid[sizeof long_uid - 1] = '\0';
    gj_dcm_str(&o, GJ_DCM_SOPInstanceUID, "UI", long_uid);
    expect_broken(&o, "does not fit VR UI");

    gj_dcm_out_init(&o);
    gj_dcm_seq_begin(&o, T(0x0040, 0xA730));
    gj_dcm_item_begin(&o);
    expect_broken(&o, "left open");

    gj_dcm_out_init(&o);
    gj_dcm_seq_begin(&o, T(0x0040, 0xA730));
    gj_dcm_str(&o, T(0x0040, 0xA040), "CS", "TEXT");
    expect_broken(&o, "outside an item");

    gj_dcm_out_init(&o);
    gj_dcm_str(&o, T(0x0010, 0x0020), "XX", "x");
    expect_broken(&o, "not a text VR");

    /* tags restart in each item: an item's first tag may be below the sequence's */
    gj_dcm_out_init(&o);
    gj_dcm_seq_begin(&o, T(0x0040, 0xA730));
    gj_dcm_item_begin(&o);
    gj_dcm_str(&o, T(0x0008, 0x0100), "SH", "x");
    gj_dcm_item_end(&o);
    gj_dcm_item_begin(&o);
    gj_dcm_str(&o, T(0x0008, 0x0100), "SH", "y");
    gj_dcm_item_end(&o);
    gj_dcm_seq_end(&o);
    gj_dcm_str(&o, T(0x0040, 0xA731), "CS", "z");
    assert_int_equal(gj_dcm_out_finish(&o, NULL), 0);
    gj_dcm_out_free(&o);
}

static void uids_are_2_25(void **state)
{
    (void)state;
    char a[65], b[65];
    assert_int_equal(gj_dcm_new_uid(a), 0);
    assert_int_equal(gj_dcm_new_uid(b), 0);
    assert_string_not_equal(a, b);
    assert_memory_equal(a, "2.25.", 5);
    assert_true(strlen(a) > 30 && strlen(a) <= 44);
    assert_true(a[5] != '0');
    for (const char *p = a + 5; *p; p++)
        assert_true(*p >= '0' && *p <= '9');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(rules_kept),
        cmocka_unit_test(uids_are_2_25),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
