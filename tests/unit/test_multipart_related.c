/*
 * test_multipart_related.c — the streaming multipart parser: every chunking of
 * a body gives the same parts; preamble and epilogue are ignored; headers per
 * part; a missing final boundary, malformed and hostile bodies are refused with
 * a message and no crash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "service/http/multipart_related.h"

/* What the callbacks saw, as text: "<ct|disp>{data}" per part, "!" for an unfinished part. */
struct rec {
    char *log;
    size_t len, cap;
    int open;
    int stop_at_part;      /* part_begin of this index returns -1 (-1: never) */
    size_t data_calls;
};

static void rec_add(struct rec *r, const char *s, size_t n)
{
    if (r->len + n + 1 > r->cap) {
        r->cap = (r->len + n + 1) * 2;
        r->log = realloc(r->log, r->cap);
        assert_non_null(r->log);
    }
    memcpy(r->log + r->len, s, n);
    r->len += n;
    r->log[r->len] = '\0';
}

static int on_begin(void *ud, const struct gj_mpr_part *part)
{
    struct rec *r = ud;
    assert_false(r->open);
    if ((int)part->index == r->stop_at_part)
        return -1;
    r->open = 1;
    const char *ct = gj_mpr_header(part, "content-type");
    const char *cd = gj_mpr_header(part, "Content-Disposition");
    char buf[600];
    int n = snprintf(buf, sizeof buf, "<%s|%s|%zu>{", ct ? ct : "-", cd ? cd : "-", part->n_headers);
    rec_add(r, buf, (size_t)n);
    return 0;
}

static int on_data(void *ud, const char *d, size_t n)
{
    struct rec *r = ud;
    assert_true(r->open);
    assert_true(n > 0);
    r->data_calls++;
    rec_add(r, d, n);
    return 0;
}

static int on_end(void *ud)
{
    struct rec *r = ud;
    assert_true(r->open);
    r->open = 0;
    rec_add(r, "}", 1);
    return 0;
}

static const struct gj_mpr_callbacks CB = { on_begin, on_data, on_end };

/* Parses body in chunks of `chunk` bytes (0: all at once). Returns feed/finish's
 * result; *log gets the record (caller frees). */
static int parse(const char *boundary, const char *body, size_t len, size_t chunk, char **log, char *err,
                 size_t errlen)
{
    struct rec r = { 0 };
    r.stop_at_part = -1;
    rec_add(&r, "", 0);
    struct gj_mpr *p = gj_mpr_new(boundary, &CB, &r);
    assert_non_null(p);
    int rc = 0;
    if (chunk == 0)
        chunk = len ? len : 1;
    for (size_t i = 0; i < len && rc == 0; i += chunk)
        rc = gj_mpr_feed(p, body + i, len - i < chunk ? len - i : chunk);
    if (rc == 0)
        rc = gj_mpr_finish(p);
    if (r.open)
        rec_add(&r, "!", 1);
    if (err)
        snprintf(err, errlen, "%s", gj_mpr_error(p));
    gj_mpr_free(p);
    *log = r.log;
    return rc;
}

/* Checks that every chunk size gives the expected record and result. */
static void check_all_chunkings(const char *boundary, const char *body, size_t len, int want_rc, const char *want)
{
    for (size_t chunk = 0; chunk <= len + 1; chunk++) {
        char *log = NULL;
        char err[200];
        int rc = parse(boundary, body, len, chunk, &log, err, sizeof err);
        if (rc != want_rc || strcmp(log, want) != 0)
            fail_msg("chunk %zu: rc %d (want %d), err '%s'\n got: %s\nwant: %s", chunk, rc, want_rc, err, log, want);
        free(log);
    }
}

static void test_basic_two_parts(void **st)
{
    (void)st;
    const char body[] =
        "--b0und\r\n"
        "Content-Type: application/dicom\r\n"
        "\r\n"
        "DICM-1\r\n"
        "--b0und\r\n"
        "Content-Type: application/dicom\r\n"
        "X-Extra:   spaced value  \r\n"
        "\r\n"
        "second\r\npart\r\n"
        "--b0und--\r\n";
    check_all_chunkings("b0und", body, sizeof body - 1, 0,
                        "<application/dicom|-|1>{DICM-1}<application/dicom|-|2>{second\r\npart}");
}

static void test_preamble_epilogue(void **st)
{
    (void)st;
    const char body[] =
        "This is a preamble. --b0und is not at a line start\r\n"
        "and -- neither is this\r\n"
        "--b0und \t \r\n"                   /* transport padding */
        "Content-Type: text/plain\r\n"
        "\r\n"
        "hello\r\n"
        "--b0und--   epilogue\r\n--b0und\r\nContent-Type: x/y\r\n\r\nignored\r\n--b0und--\r\n";
    check_all_chunkings("b0und", body, sizeof body - 1, 0, "<text/plain|-|1>{hello}");
}

static void test_leading_crlf_and_no_headers(void **st)
{
    (void)st;
    const char body[] = "\r\n--xyz\r\n\r\n\r\n--xyz\r\n\r\nabc\r\n--xyz--";
    check_all_chunkings("xyz", body, sizeof body - 1, 0, "<-|-|0>{}<-|-|0>{abc}");
}

static void test_boundary_lookalikes_in_body(void **st)
{
    (void)st;
    /* CR, CRLF, CRLF- and CRLF--bou inside the data, split anywhere. */
    const char body[] =
        "--bound\r\n"
        "Content-Disposition: form-data; name=\"model\"; filename=\"m.onnx\"\r\n"
        "\r\n"
        "a\rb\r\nc\r\n-d\r\n--e\r\n--boun\r\r\n--bounX\r\n\r\r\n"
        "\r\n--bound--";
    check_all_chunkings("bound", body, sizeof body - 1, 0,
                        "<-|form-data; name=\"model\"; filename=\"m.onnx\"|1>{a\rb\r\nc\r\n-d\r\n--e\r\n--boun\r\r\n"
                        "--bounX\r\n\r\r\n}");
}

static void test_binary_data(void **st)
{
    (void)st;
    char body[5000];
    size_t n = (size_t)snprintf(body, sizeof body, "--q\r\nContent-Type: application/octet-stream\r\n\r\n");
    char data[3000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)((i * 131 + 7) & 0xff);
    data[100] = '\0';
    memcpy(body + n, data, sizeof data);
    n += sizeof data;
    memcpy(body + n, "\r\n--q--\r\n", 9);
    n += 9;
    char *log = NULL;
    for (size_t chunk = 1; chunk < 40; chunk += 3) {
        assert_int_equal(parse("q", body, n, chunk, &log, NULL, 0), 0);
        const char *open = strchr(log, '{');
        assert_non_null(open);
        assert_memory_equal(open + 1, data, sizeof data);
        assert_int_equal(log[strlen("<application/octet-stream|-|1>{") + sizeof data], '}');
        free(log);
    }
}

static void test_folded_and_many_headers(void **st)
{
    (void)st;
    const char body[] =
        "--b\r\n"
        "Content-Type: multipart/x;\r\n"
        "\t  boundary=inner\r\n"
        "A: 1\r\nB: 2\r\n"
        "\r\n"
        "x\r\n--b--\r\n";
    check_all_chunkings("b", body, sizeof body - 1, 0, "<multipart/x; boundary=inner|-|3>{x}");
}

static void expect_error(const char *boundary, const char *body, const char *want_log, const char *want_err)
{
    size_t len = strlen(body);
    for (size_t chunk = 0; chunk <= len + 1; chunk++) {
        char *log = NULL;
        char err[200];
        int rc = parse(boundary, body, len, chunk, &log, err, sizeof err);
        if (rc != -1 || strcmp(log, want_log) != 0 || !strstr(err, want_err))
            fail_msg("chunk %zu: rc %d, err '%s' (want '%s'), log '%s' (want '%s')", chunk, rc, err, want_err, log,
                     want_log);
        free(log);
    }
}

static void test_missing_final_boundary(void **st)
{
    (void)st;
    expect_error("b", "--b\r\nContent-Type: a/b\r\n\r\ndata", "<a/b|-|1>{data!", "before the closing boundary");
    expect_error("b", "--b\r\nContent-Type: a/b\r\n\r\ndata\r\n--b\r\n", "<a/b|-|1>{data}",
                 "before the closing boundary");
    expect_error("b", "--b\r\nContent-Type: a/b\r\n\r\ndata\r\n--b", "<a/b|-|1>{data}",
                 "before the closing boundary");
    expect_error("b", "--b\r\nContent-Type: a/b\r\n", "", "before the closing boundary");
    expect_error("b", "no boundary at all", "", "no boundary");
    expect_error("b", "", "", "no boundary");
}

static void test_malformed(void **st)
{
    (void)st;
    expect_error("b", "--b\r\nno colon here\r\n\r\nx\r\n--b--", "", "malformed part header");
    expect_error("b", "--b\r\n: empty name\r\n\r\nx\r\n--b--", "", "malformed part header");
    expect_error("b", "--b\r\nBad Name: v\r\n\r\nx\r\n--b--", "", "header name");
    expect_error("b", "--b\r\n continuation first\r\n\r\nx\r\n--b--", "", "continuation");
    expect_error("b", "--bX\r\n\r\nx\r\n--b--", "", "followed by something other");
    expect_error("b", "--b-x\r\n\r\nx\r\n--b--", "", "followed by something other");
    expect_error("b", "--b\rX\r\n\r\nx\r\n--b--", "", "CRLF");
    expect_error("b", "--b\r\nA: a\x01z\r\n\r\nx\r\n--b--", "", "control character");
    /* the boundary inside a body followed by junk */
    expect_error("b", "--b\r\n\r\nx\r\n--bjunk\r\n--b--", "<-|-|0>{x}", "followed by something other");
}

static void test_bad_boundaries(void **st)
{
    (void)st;
    struct rec r = { 0 };
    assert_null(gj_mpr_new("", &CB, &r));
    assert_null(gj_mpr_new(NULL, &CB, &r));
    assert_null(gj_mpr_new("ends with space ", &CB, &r));
    assert_null(gj_mpr_new("has\"quote", &CB, &r));
    assert_null(gj_mpr_new("cr\rlf", &CB, &r));
    char longb[GJ_MPR_BOUNDARY_MAX + 2];
    memset(longb, 'a', GJ_MPR_BOUNDARY_MAX + 1);
    longb[GJ_MPR_BOUNDARY_MAX + 1] = '\0';
    assert_null(gj_mpr_new(longb, &CB, &r));     /* 201 */
    longb[GJ_MPR_BOUNDARY_MAX] = '\0';
    struct gj_mpr *p = gj_mpr_new(longb, &CB, &r);
    assert_non_null(p);
    gj_mpr_free(p);
    p = gj_mpr_new("'()+_,-./:=? x", &CB, &r);
    assert_non_null(p);
    gj_mpr_free(p);
}

/* Orthanc's STOW-RS client sends a 73-character boundary (two UUIDs), past RFC 2046's
 * 70: accepted, from the Content-Type as from the body; 200 is the limit. */
#define ORTHANC_BOUNDARY "2d43f7e1-3c40-4a35-9c35-6a0c4a1ec0a7-4c8e27a5-b6a1-4d8c-9b59-4b2a6a1f0e7d"

static void test_long_boundaries(void **st)
{
    (void)st;
    assert_int_equal(strlen(ORTHANC_BOUNDARY), 73);
    const char body[] =
        "--" ORTHANC_BOUNDARY "\r\n"
        "Content-Type: application/dicom\r\n"
        "\r\n"
        "DICM-1\r\n"
        "--" ORTHANC_BOUNDARY "\r\n"
        "Content-Type: application/dicom\r\n"
        "\r\n"
        "DICM-2\r\n"
        "--" ORTHANC_BOUNDARY "--\r\n";
    check_all_chunkings(ORTHANC_BOUNDARY, body, sizeof body - 1, 0,
                        "<application/dicom|-|1>{DICM-1}<application/dicom|-|1>{DICM-2}");

    char out[GJ_MPR_BOUNDARY_MAX + 1];
    const char *why = NULL;
    assert_int_equal(gj_mpr_boundary("multipart/related; type=\"application/dicom\"; boundary=" ORTHANC_BOUNDARY,
                                     out, &why), 0);
    assert_string_equal(out, ORTHANC_BOUNDARY);
    char ct[400];
    char b[GJ_MPR_BOUNDARY_MAX + 2];
    memset(b, 'z', sizeof b - 1);
    b[sizeof b - 1] = '\0';
    snprintf(ct, sizeof ct, "multipart/related; boundary=\"%s\"", b);   /* 201 */
    assert_int_equal(gj_mpr_boundary(ct, out, &why), -1);
    assert_non_null(strstr(why, "longer than 200"));
    b[GJ_MPR_BOUNDARY_MAX] = '\0';
    snprintf(ct, sizeof ct, "multipart/related; boundary=\"%s\"", b);   /* 200 */
    assert_int_equal(gj_mpr_boundary(ct, out, &why), 0);
    assert_int_equal(strlen(out), GJ_MPR_BOUNDARY_MAX);
    assert_int_equal(gj_mpr_boundary("multipart/related; type=x", out, &why), -1);
    assert_non_null(strstr(why, "needs a boundary"));
    assert_int_equal(gj_mpr_boundary("multipart/related; boundary=\"bad\\\"q\"", out, &why), -1);
}

static void test_hostile_limits(void **st)
{
    (void)st;
    /* headers too long */
    size_t n = GJ_MPR_HEADER_BYTES + 200;
    char *body = malloc(n + 100);
    assert_non_null(body);
    size_t o = (size_t)sprintf(body, "--b\r\nX: ");
    memset(body + o, 'v', n);
    o += n;
    strcpy(body + o, "\r\n\r\nx\r\n--b--");
    char *log = NULL;
    char err[200];
    assert_int_equal(parse("b", body, strlen(body), 0, &log, err, sizeof err), -1);
    assert_non_null(strstr(err, "too long"));
    free(log);
    assert_int_equal(parse("b", body, strlen(body), 7, &log, err, sizeof err), -1);
    free(log);
    /* too many headers */
    o = (size_t)sprintf(body, "--b\r\n");
    for (int i = 0; i < GJ_MPR_MAX_HEADERS + 1; i++)
        o += (size_t)sprintf(body + o, "H%d: v\r\n", i);
    strcpy(body + o, "\r\nx\r\n--b--");
    assert_int_equal(parse("b", body, strlen(body), 0, &log, err, sizeof err), -1);
    assert_non_null(strstr(err, "too many headers"));
    free(log);
    /* endless padding */
    o = (size_t)sprintf(body, "--b");
    memset(body + o, ' ', 1000);
    strcpy(body + o + 1000, "\r\n\r\nx\r\n--b--");
    assert_int_equal(parse("b", body, strlen(body), 0, &log, err, sizeof err), -1);
    assert_non_null(strstr(err, "padding"));
    free(log);
    free(body);

    /* too many parts */
    struct rec r = { 0 };
    r.stop_at_part = -1;
    struct gj_mpr *p = gj_mpr_new("b", &CB, &r);
    gj_mpr_set_max_parts(p, 3);
    const char *one = "--b\r\n\r\nx\r\n";
    int rc = 0;
    for (int i = 0; i < 5 && rc == 0; i++)
        rc = gj_mpr_feed(p, one, strlen(one));
    assert_int_equal(rc, -1);
    assert_non_null(strstr(gj_mpr_error(p), "too many parts"));
    assert_int_equal(gj_mpr_parts(p), 3);
    /* once failed, stays failed */
    assert_int_equal(gj_mpr_feed(p, "--b--", 5), -1);
    assert_int_equal(gj_mpr_finish(p), -1);
    gj_mpr_free(p);
    free(r.log);

    /* random garbage never crashes */
    unsigned seed = 12345;
    char junk[512];
    for (int t = 0; t < 2000; t++) {
        size_t len = (size_t)(t % (int)sizeof junk);
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            unsigned v = (seed >> 16) & 0xff;
            /* bias towards the interesting bytes */
            static const char alpha[] = "\r\n-b: ";
            junk[i] = (v & 1) ? alpha[(v >> 1) % 6] : (char)v;
        }
        struct rec rr = { 0 };
        rr.stop_at_part = -1;
        struct gj_mpr *q = gj_mpr_new("b", &CB, &rr);
        size_t step = 1 + (size_t)(t % 13);
        for (size_t i = 0; i < len; i += step)
            if (gj_mpr_feed(q, junk + i, len - i < step ? len - i : step))
                break;
        gj_mpr_finish(q);
        gj_mpr_free(q);
        free(rr.log);
    }
}

static void test_callback_stop(void **st)
{
    (void)st;
    struct rec r = { 0 };
    r.stop_at_part = 1;
    struct gj_mpr *p = gj_mpr_new("b", &CB, &r);
    const char body[] = "--b\r\n\r\none\r\n--b\r\n\r\ntwo\r\n--b--";
    assert_int_equal(gj_mpr_feed(p, body, sizeof body - 1), -1);
    assert_string_equal(r.log, "<-|-|0>{one}");
    assert_non_null(strstr(gj_mpr_error(p), "stopped"));
    gj_mpr_free(p);
    free(r.log);

    /* a receiver's own reason */
    memset(&r, 0, sizeof r);
    r.stop_at_part = 0;
    p = gj_mpr_new("b", &CB, &r);
    gj_mpr_fail(p, "part 0 is not DICOM");
    assert_int_equal(gj_mpr_feed(p, body, sizeof body - 1), -1);
    assert_string_equal(gj_mpr_error(p), "part 0 is not DICOM");
    gj_mpr_free(p);
    free(r.log);
}

static void test_mime_helpers(void **st)
{
    (void)st;
    char out[80];
    const char *ct = "Multipart/Related; type=\"application/dicom\"; boundary=abc123 ; start=\"<a;b>\"";
    assert_true(gj_mime_type_is(ct, "multipart/related"));
    assert_false(gj_mime_type_is(ct, "multipart/form-data"));
    assert_false(gj_mime_type_is("multipart/relatedx", "multipart/related"));
    assert_true(gj_mime_type_is("  application/dicom  ", "application/dicom"));
    assert_false(gj_mime_type_is("application/dicom x", "application/dicom"));
    assert_int_equal(gj_mime_param(ct, "TYPE", out, sizeof out), 1);
    assert_string_equal(out, "application/dicom");
    assert_int_equal(gj_mime_param(ct, "boundary", out, sizeof out), 1);
    assert_string_equal(out, "abc123");
    assert_int_equal(gj_mime_param(ct, "start", out, sizeof out), 1);
    assert_string_equal(out, "<a;b>");
    assert_int_equal(gj_mime_param(ct, "charset", out, sizeof out), 0);
    assert_int_equal(gj_mime_param("form-data; name=\"a\\\"b\"; filename=\"x.onnx\"", "name", out, sizeof out), 1);
    assert_string_equal(out, "a\"b");
    assert_int_equal(gj_mime_param("form-data; name=\"unterminated", "name", out, sizeof out), -1);
    assert_int_equal(gj_mime_param("a/b; boundary=\"0123456789\"", "boundary", out, 5), -1);
    assert_int_equal(gj_mime_param("a/b; boundary=0123456789", "boundary", out, 5), -1);
    assert_int_equal(gj_mime_param("a/b; =x", "boundary", out, sizeof out), -1);
    assert_int_equal(gj_mime_param("a/b; boundary=x y", "boundary", out, sizeof out), -1);
    assert_int_equal(gj_mime_param("a/b", "boundary", out, sizeof out), 0);
    assert_int_equal(gj_mime_param("a/b;;  boundary = \"q\" ", "boundary", out, sizeof out), 1);
    assert_string_equal(out, "q");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_two_parts),
        cmocka_unit_test(test_preamble_epilogue),
        cmocka_unit_test(test_leading_crlf_and_no_headers),
        cmocka_unit_test(test_boundary_lookalikes_in_body),
        cmocka_unit_test(test_binary_data),
        cmocka_unit_test(test_folded_and_many_headers),
        cmocka_unit_test(test_missing_final_boundary),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_bad_boundaries),
        cmocka_unit_test(test_long_boundaries),
        cmocka_unit_test(test_hostile_limits),
        cmocka_unit_test(test_callback_stop),
        cmocka_unit_test(test_mime_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
