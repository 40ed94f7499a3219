/* Settings: defaults, environment twins, flags winning, and one clear line per bad setting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "service/config.h"

static char errbuf[4096];

/* Runs gj_config_load with stderr captured into errbuf. */
static int load(struct gj_config *cfg, int argc, char **argv)
{
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    dup2(fileno(tmp), STDERR_FILENO);
    int rc = gj_config_load(cfg, argc, argv, 0);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(errbuf, 1, sizeof errbuf - 1, tmp);
    errbuf[n] = '\0';
    fclose(tmp);
    return rc;
}

static void defaults_serve_on_8443(void **state)
{
    (void)state;
    struct gj_config cfg;
    char *argv[] = { "serve", NULL };
    assert_int_equal(load(&cfg, 1, argv), 0);
    assert_string_equal(cfg.listen_host, "127.0.0.1");
    assert_int_equal(cfg.listen_port, 8443);
    assert_string_equal(cfg.data_dir, "./var");
    assert_string_equal(cfg.database_url, "");
    assert_int_equal(cfg.insecure_http, 0);
    assert_true(cfg.max_body_bytes == (16ull << 30));
    assert_int_equal(cfg.placement, GJ_PLACE_LEAST_LOADED);
    assert_true(cfg.cpu_workers >= 1);
    assert_string_equal(cfg.work_dir, "./var/work");
}

static void environment_twin_and_flag_wins(void **state)
{
    (void)state;
    struct gj_config cfg;
    setenv("GPUJOBD_DATA_DIR", "/srv/gj", 1);
    setenv("GPUJOBD_LISTEN", "0.0.0.0:9000", 1);
    setenv("GPUJOBD_MAX_BODY_BYTES", "512M", 1);
    setenv("GPUJOBD_INSECURE_HTTP", "true", 1);
    char *argv[] = { "serve", "--listen", "[::1]:8444", "--placement", "round-robin", NULL };
    assert_int_equal(load(&cfg, 5, argv), 0);
    assert_string_equal(cfg.data_dir, "/srv/gj");
    assert_string_equal(cfg.listen_host, "::1");
    assert_int_equal(cfg.listen_port, 8444);
    assert_true(cfg.max_body_bytes == (512ull << 20));
    assert_int_equal(cfg.insecure_http, 1);
    assert_int_equal(cfg.placement, GJ_PLACE_ROUND_ROBIN);
    unsetenv("GPUJOBD_DATA_DIR");
    unsetenv("GPUJOBD_LISTEN");
    unsetenv("GPUJOBD_MAX_BODY_BYTES");
    unsetenv("GPUJOBD_INSECURE_HTTP");
}

static void bad_settings_name_themselves(void **state)
{
    (void)state;
    struct gj_config cfg;
    struct {
        char *argv[4];
        int argc;
        const char *expect;
    } cases[] = {
        { { "serve", "--listen", "localhost", NULL }, 3, "--listen" },
        { { "serve", "--listen", "127.0.0.1:99999", NULL }, 3, "--listen" },
        { { "serve", "--placement", "fastest", NULL }, 3, "--placement" },
        { { "serve", "--workers-per-gpu", "-1", NULL }, 3, "--workers-per-gpu" },
        { { "serve", "--max-body-bytes", "lots", NULL }, 3, "--max-body-bytes" },
        { { "serve", "--tls-cert", "/x.pem", NULL }, 3, "--tls-cert" },
        { { "serve", "--frobnicate", NULL, NULL }, 2, "--frobnicate" },
        { { "serve", "--lease-seconds", "0", NULL }, 3, "--lease-seconds" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(load(&cfg, cases[i].argc, cases[i].argv), -1);
        assert_non_null(strstr(errbuf, cases[i].expect));
        /* one line */
        char *nl = strchr(errbuf, '\n');
        assert_non_null(nl);
        assert_int_equal(nl[1], '\0');
    }
    setenv("GPUJOBD_CPU_WORKERS", "many", 1);
    char *argv[] = { "serve", NULL };
    assert_int_equal(load(&cfg, 1, argv), -1);
    assert_non_null(strstr(errbuf, "GPUJOBD_CPU_WORKERS"));
    unsetenv("GPUJOBD_CPU_WORKERS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_serve_on_8443),
        cmocka_unit_test(environment_twin_and_flag_wins),
        cmocka_unit_test(bad_settings_name_themselves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
