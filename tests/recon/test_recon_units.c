/*
 * test_recon_units.c — unit tests of the recon module: phantom line integrals against the
 * closed forms, geometry parsing errors naming fields, the NRRD parser on hostile input,
 * the Joseph projector against analytic projections, and the FBP absolute scale.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recon/recon.h"

static json_t *js(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j)
        fail_msg("bad test JSON: %s: %s", text, e.text);
    return j;
}

static void test_ellipse_parallel_closed_form(void **state)
{
    (void)state;
    struct rc_phantom ph;
    rc_phantom_make(RC_PH_SHEPP2D, 100.0, 1.0, &ph);
    /* each ellipse alone against Kak & Slaney's 2 A a b sqrt(s^2 - tau^2) / s^2 */
    for (int k = 0; k < ph.n; k++) {
        struct rc_phantom one = { 0 };
        one.n = 1;
        one.e[0] = ph.e[k];
        one.cphi[0] = ph.cphi[k];
        one.sphi[0] = ph.sphi[k];
        for (int it = 0; it < 200; it++) {
            double th = it * 0.0317 * M_PI, t = -100 + it * 1.0;
            const struct rc_ellipsoid *e = &one.e[0];
            double c = cos(th - e->phi), s = sin(th - e->phi);
            double s2 = e->a * e->a * c * c + e->b * e->b * s * s;
            double tau = t - e->x0 * cos(th) - e->y0 * sin(th);
            double want = tau * tau < s2 ? 2 * e->A * e->a * e->b * sqrt(s2 - tau * tau) / s2 : 0;
            double p[3] = { t * cos(th), t * sin(th), 0 }, d[3] = { -sin(th), cos(th), 0 };
            double got = rc_phantom_ray(&one, p, d);
            assert_true(fabs(got - want) < 1e-9 * (1 + fabs(want)));
        }
    }
}

static void test_ball_chord(void **state)
{
    (void)state;
    struct rc_phantom ph;
    rc_phantom_make(RC_PH_BALL, 50.0, 0.5, &ph);   /* radius 40 mm, 0.5 / mm */
    for (int i = 0; i < 50; i++) {
        double off = i * 0.9, p[3] = { -300, off * 0.6, off * 0.8 }, d[3] = { 3, 0, 0 };
        double want = off < 40 ? 0.5 * 2 * sqrt(1600 - off * off) : 0;
        assert_true(fabs(rc_phantom_ray(&ph, p, d) - want) < 1e-9);
    }
}

static void expect_geom_error(const char *params, const char *field)
{
    json_t *j = js(params);
    struct rc_geom g;
    struct gj_error err = { 0 };
    int rc = rc_geom_parse(j, &g, &err);
    if (rc == 0) {
        struct rc_opts o;
        rc = rc_opts_parse(j, &g, &o, &err);
        rc_geom_free(&g);
    }
    json_decref(j);
    if (rc == 0)
        fail_msg("accepted: %s", params);
    if (strcmp(err.field, field) != 0)
        fail_msg("%s: field '%s' (%s), expected '%s'", params, err.field, err.message, field);
}

#define PAR "\"geometry\":{\"type\":\"parallel2d\",\"angles_deg\":{\"count\":10},\"detector\":{\"cols\":16}}"
#define FAN "\"geometry\":{\"type\":\"fan2d\",\"angles_deg\":{\"count\":10},\"detector\":{\"cols\":16},\"source_origin_mm\":100,\"source_detector_mm\":200}"

static void test_geometry_errors(void **state)
{
    (void)state;
    expect_geom_error("{}", "geometry");
    expect_geom_error("{\"geometry\":{\"type\":\"helical\"}}", "geometry.type");
    expect_geom_error("{\"geometry\":{\"type\":\"parallel2d\",\"detector\":{\"cols\":4}}}", "geometry.angles_deg");
    expect_geom_error("{\"geometry\":{\"type\":\"parallel2d\",\"angles_deg\":{\"count\":0},\"detector\":{\"cols\":4}}}", "geometry.angles_deg.count");
    expect_geom_error("{\"geometry\":{\"type\":\"parallel2d\",\"angles_deg\":{\"count\":3},\"detector\":{\"cols\":0}}}", "geometry.detector.cols");
    expect_geom_error("{\"geometry\":{\"type\":\"parallel2d\",\"angles_deg\":{\"count\":3},\"detector\":{\"cols\":4,\"spacing_u\":-1}}}", "geometry.detector.spacing_u");
    expect_geom_error("{\"geometry\":{\"type\":\"fan2d\",\"angles_deg\":{\"count\":3},\"detector\":{\"cols\":4}}}", "geometry.source_origin_mm");
    expect_geom_error("{\"geometry\":{\"type\":\"fan2d\",\"angles_deg\":{\"count\":3},\"detector\":{\"cols\":4},\"source_origin_mm\":100,\"source_detector_mm\":50}}", "geometry.source_detector_mm");
    expect_geom_error("{" PAR ",\"volume\":{\"nx\":-3,\"ny\":4}}", "volume.nx");
    expect_geom_error("{" PAR ",\"volume\":{\"nx\":3,\"ny\":4,\"voxel_mm\":0}}", "volume.voxel_mm");
    expect_geom_error("{" PAR ",\"volume\":{\"nx\":3,\"ny\":4,\"nz\":2}}", "volume.nz");
    expect_geom_error("{" PAR ",\"batch\":0}", "batch");
    expect_geom_error("{" PAR ",\"algorithm\":\"fdk\"}", "algorithm");
    expect_geom_error("{" PAR ",\"filter\":\"median\"}", "filter");
    expect_geom_error("{" PAR ",\"algorithm\":\"sart\",\"subsets\":11}", "subsets");
    expect_geom_error("{" PAR ",\"short_scan\":true}", "short_scan");
    expect_geom_error("{" FAN ",\"volume\":{\"nx\":300,\"ny\":300}}", "volume");
    expect_geom_error("{\"geometry\":{\"type\":\"cone3d\",\"angles_deg\":{\"count\":2},\"detector\":{\"cols\":4,\"rows\":4},"
                      "\"source_origin_mm\":100,\"source_detector_mm\":200,\"matrices\":[[0,0,0,0,0,0,0,0,0,0,0,0],"
                      "[0,0,0,0,0,0,0,0,0,0,0,0]]}}", "geometry.matrices");
    expect_geom_error("{\"geometry\":{\"type\":\"cone3d\",\"angles_deg\":{\"count\":2},\"detector\":{\"cols\":4,\"rows\":4},"
                      "\"source_origin_mm\":1e6,\"source_detector_mm\":2e6},\"volume\":{\"nx\":16384,\"ny\":16384,\"nz\":16384}}", "volume");
    expect_geom_error("{\"geometry\":{\"type\":\"parallel2d\",\"angles_deg\":[0, 1e300],\"detector\":{\"cols\":4}}}", "geometry.angles_deg");

    /* a good one */
    json_t *j = js("{" FAN ",\"volume\":{\"nx\":32,\"ny\":30,\"voxel_mm\":[1,2,3],\"offset_mm\":[4,5,6]}}");
    struct rc_geom g;
    struct gj_error err = { 0 };
    assert_int_equal(rc_geom_parse(j, &g, &err), 0);
    assert_int_equal(g.nviews, 10);
    assert_true(fabs(g.angles[1] - M_PI / 10) < 1e-12);   /* default step: 180 / count */
    assert_int_equal(g.nx, 32);
    assert_int_equal(g.ny, 30);
    assert_int_equal(g.nz, 1);
    assert_true(g.vy == 2 && g.oz == 6);
    rc_geom_free(&g);
    json_decref(j);
}

static void test_nrrd_parse(void **state)
{
    (void)state;
    struct gj_nrrd h;
    struct gj_error err = { 0 };
    const char *ok = "NRRD0004\n# c\ntype: float\ndimension: 3\nsizes: 4 3 2\nendian: little\nencoding: raw\n\n";
    size_t hl = strlen(ok);
    assert_int_equal(gj_nrrd_parse(ok, hl, hl + 96, &h, &err), 0);
    assert_int_equal((int)h.data_offset, (int)hl);
    assert_int_equal((int)h.sizes[2], 2);
    assert_int_equal(gj_nrrd_parse(ok, hl, hl + 95, &h, &err), -1);      /* truncated data */
    assert_int_equal(gj_nrrd_parse(ok, hl - 1, hl + 96, &h, &err), -1);  /* no blank line */
    const char *bad[] = {
        "NRRD0004\ntype: short\ndimension: 1\nsizes: 4\nencoding: raw\n\n",
        "NRRD0004\ntype: float\ndimension: 9\nsizes: 4\nencoding: raw\n\n",
        "NRRD0004\ntype: float\nsizes: 4\ndimension: 1\nencoding: raw\n\n",
        "NRRD0004\ntype: float\ndimension: 1\nsizes: -4\nencoding: raw\n\n",
        "NRRD0004\ntype: float\ndimension: 1\nsizes: 4\nencoding: gzip\n\n",
        "NRRD0004\ntype: float\ndimension: 1\nsizes: 4\nencoding: raw\nendian: big\n\n",
        "NRRD0004\ntype: float\ndimension: 1\nsizes: 4\nencoding: raw\ndata file: x.raw\n\n",
        "NRRD0004\ntype: float\ndimension: 4\nsizes: 2147483647 2147483647 2147483647 2147483647\nencoding: raw\n\n",
        "NRRX0004\n\n",
        /* found by fuzz/nrrd_fuzz.c: a second dimension left sizes 0 (division by zero) */
        "NRRD0004\ntype: float\ndimension: 1\nsizes: 4\ndimension: 3\nencoding: raw\n\n",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(gj_nrrd_parse(bad[i], strlen(bad[i]), strlen(bad[i]) + 16, &h, &err), -1);
    /* a header line longer than the parser's line buffer */
    char *longl = malloc(70000);
    memcpy(longl, "NRRD0004\n# ", 11);
    memset(longl + 11, 'x', 70000 - 13);
    longl[69998] = '\n';
    longl[69999] = '\n';
    assert_int_equal(gj_nrrd_parse(longl, 70000, 70000, &h, &err), -1);
    free(longl);

    /* round trip through the writer */
    char path[] = "/tmp/recon-unit-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    float data[24];
    for (int i = 0; i < 24; i++)
        data[i] = (float)i * 0.5f;
    int64_t sizes[3] = { 4, 3, 2 };
    double sp[3] = { 1, 2, 3 }, org[3] = { 0, 0, 0 };
    assert_int_equal(rc_nrrd_write(path, data, 3, sizes, sp, org, 1, NULL), 0);
    float back[24];
    assert_int_equal(rc_read_projections(path, back, 24, 0, 24, NULL, &err), 0);
    assert_memory_equal(back, data, sizeof data);
    assert_int_equal(rc_read_projections(path, back, 24, 20, 4, NULL, &err), 0);
    assert_true(back[0] == 10.0f);
    assert_int_equal(rc_read_projections(path, back, 25, 0, 25, NULL, &err), -1);
    assert_non_null(strstr(err.message, "too short"));
    unlink(path);
}

/* Joseph projection of the 4x4 averaged disc image against the analytic sinogram. */
static void test_joseph_disc(void **state)
{
    (void)state;
    json_t *j = js("{\"geometry\":{\"type\":\"fan2d\",\"angles_deg\":{\"start\":0,\"step\":10,\"count\":36},"
                   "\"detector\":{\"cols\":200},\"source_origin_mm\":300,\"source_detector_mm\":500},"
                   "\"volume\":{\"nx\":128,\"ny\":128}}");
    struct rc_geom g;
    struct gj_error err = { 0 };
    assert_int_equal(rc_geom_parse(j, &g, &err), 0);
    struct rc_phantom ph;
    rc_phantom_make(RC_PH_DISC, 64, 0.02, &ph);
    float *img = malloc(sizeof(float) * 128 * 128), *ana = malloc(sizeof(float) * 36 * 200),
          *fp = malloc(sizeof(float) * 36 * 200);
    rc_phantom_truth(&ph, &g, 4, img, 2, NULL);
    rc_phantom_project(&ph, &g, ana, 2, NULL);
    rc_forward(&g, img, fp, 0, 1, 0, 36, 2);
    double num = 0, den = 0;
    for (int i = 0; i < 36 * 200; i++) {
        num += (fp[i] - ana[i]) * (fp[i] - ana[i]);
        den += ana[i] * ana[i];
    }
    assert_true(sqrt(num / den) < 0.01);
    free(img);
    free(ana);
    free(fp);
    rc_geom_free(&g);
    json_decref(j);
}

/* FBP of the analytic disc sinogram: the centre value is the disc's 0.02 / mm. */
static void test_fbp_scale(void **state)
{
    (void)state;
    const char *geos[] = {
        "{\"geometry\":{\"type\":\"parallel2d\",\"angles_deg\":{\"count\":180},\"detector\":{\"cols\":100,\"spacing_u\":0.7}},"
        "\"volume\":{\"nx\":64,\"ny\":64,\"voxel_mm\":0.8}}",
        "{\"geometry\":{\"type\":\"fan2d\",\"angles_deg\":{\"start\":10,\"step\":-1,\"count\":360},\"detector\":{\"cols\":160,\"spacing_u\":1.1},"
        "\"source_origin_mm\":200,\"source_detector_mm\":350},\"volume\":{\"nx\":64,\"ny\":64,\"voxel_mm\":0.8}}",
    };
    for (int gi = 0; gi < 2; gi++) {
        json_t *j = js(geos[gi]);
        struct rc_geom g;
        struct rc_opts o;
        struct gj_error err = { 0 };
        assert_int_equal(rc_geom_parse(j, &g, &err), 0);
        assert_int_equal(rc_opts_parse(j, &g, &o, &err), 0);
        o.threads = 2;
        struct rc_phantom ph;
        rc_phantom_make(RC_PH_DISC, 25.6, 0.02, &ph);
        float *p = malloc(sizeof(float) * rc_proj_count(&g)), *v = malloc(sizeof(float) * 64 * 64);
        rc_phantom_project(&ph, &g, p, 2, NULL);
        assert_int_equal(rc_reconstruct(&g, &o, p, v, 0, 1, NULL, &err), 0);
        double m = 0;
        for (int y = 28; y < 36; y++)
            for (int x = 28; x < 36; x++)
                m += v[y * 64 + x] / 64.0;
        if (fabs(m / 0.02 - 1) > 0.01)
            fail_msg("geometry %d: centre %.6f, expected 0.02", gi, m);
        free(p);
        free(v);
        rc_geom_free(&g);
        json_decref(j);
    }
}

static void test_metrics(void **state)
{
    (void)state;
    float a[64 * 64], b[64 * 64];
    for (int i = 0; i < 64 * 64; i++) {
        a[i] = (float)((i * 37) % 101) / 100.0f;
        b[i] = a[i] + 0.01f;
    }
    assert_true(fabs(rc_psnr(b, a, 64 * 64, 1.0) - 40.0) < 1e-3);
    assert_true(fabs(rc_ssim2d(a, a, 64, 64, 1.0) - 1.0) < 1e-9);
    assert_true(rc_ssim2d(b, a, 64, 64, 1.0) < 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ellipse_parallel_closed_form),
        cmocka_unit_test(test_ball_chord),
        cmocka_unit_test(test_geometry_errors),
        cmocka_unit_test(test_nrrd_parse),
        cmocka_unit_test(test_joseph_disc),
        cmocka_unit_test(test_fbp_scale),
        cmocka_unit_test(test_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
