/* Settings: defaults, environment twins, flags winning, and one clear line per bad setting,
 * the test switches included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "service/config.h"
#include "service/jobs/devices.h"

static char errbuf[4096];

/* Runs gj_config_load (for `serve`, or `migrate`) with stderr captured into errbuf. */
static int load_for(struct gj_config *cfg, int argc, char **argv, int for_migrate)
{
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    dup2(fileno(tmp), STDERR_FILENO);
    int rc = gj_config_load(cfg, argc, argv, for_migrate);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(errbuf, 1, sizeof errbuf - 1, tmp);
    errbuf[n] = '\0';
    fclose(tmp);
    return rc;
}

static int load(struct gj_config *cfg, int argc, char **argv)
{
    return load_for(cfg, argc, argv, 0);
}

/* errbuf is exactly one line naming what. */
static void assert_one_line_naming(const char *what)
{
    assert_non_null(strstr(errbuf, what));
    char *nl = strchr(errbuf, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], '\0');
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
    assert_int_equal(cfg.max_connections, 10000);
    assert_int_equal(cfg.max_connections_per_ip, 256);
    assert_int_equal(cfg.header_timeout_seconds, 30);
    assert_int_equal(cfg.http_idle_seconds, 300);
    assert_int_equal(cfg.job_timeout_seconds, 0);   /* no limit */
    assert_true(cfg.http_threads >= 4 && cfg.http_threads <= 32);
    assert_string_equal(cfg.metrics_host, "");
    assert_int_equal(cfg.api_key_cache_ms, 1000);
    assert_int_equal(cfg.max_chain_depth, 100);
    assert_int_equal(cfg.max_waiting_jobs, 10000);
    assert_true(cfg.tenant_storage_quota == 0);   /* no quota */
}

static void environment_twin_and_flag_wins(void **state)
{
    (void)state;
    struct gj_config cfg;
    setenv("GPUJOBD_DATA_DIR", "/srv/gj", 1);
    setenv("GPUJOBD_LISTEN", "0.0.0.0:9000", 1);
    setenv("GPUJOBD_MAX_BODY_BYTES", "512M", 1);
    setenv("GPUJOBD_INSECURE_HTTP", "true", 1);
    setenv("GPUJOBD_TENANT_STORAGE_QUOTA", "1G", 1);
    char *argv[] = { "serve", "--listen", "[::1]:8444", "--placement", "round-robin",
                     "--tenant-storage-quota", "20G", NULL };
    assert_int_equal(load(&cfg, 7, argv), 0);
    assert_true(cfg.tenant_storage_quota == (20ull << 30));   /* the flag wins */
    unsetenv("GPUJOBD_TENANT_STORAGE_QUOTA");
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

static void http_settings(void **state)
{
    (void)state;
    struct gj_config cfg;
    setenv("GPUJOBD_MAX_CONNECTIONS_PER_IP", "0", 1);
    setenv("GPUJOBD_METRICS_LISTEN", "[::]:9090", 1);
    setenv("GPUJOBD_API_KEY_CACHE_MS", "0", 1);
    setenv("GPUJOBD_MAX_WAITING_JOBS_PER_TENANT", "50", 1);
    char *argv[] = { "serve", "--http-threads", "6", "--header-timeout-seconds", "5", "--max-chain-depth", "7", NULL };
    assert_int_equal(load(&cfg, 7, argv), 0);
    assert_int_equal(cfg.max_chain_depth, 7);
    assert_int_equal(cfg.max_waiting_jobs, 50);
    unsetenv("GPUJOBD_MAX_WAITING_JOBS_PER_TENANT");
    assert_int_equal(cfg.api_key_cache_ms, 0);   /* off */
    unsetenv("GPUJOBD_API_KEY_CACHE_MS");
    assert_int_equal(cfg.max_connections_per_ip, 0);
    assert_string_equal(cfg.metrics_host, "::");
    assert_int_equal(cfg.metrics_port, 9090);
    assert_int_equal(cfg.http_threads, 6);
    assert_int_equal(cfg.header_timeout_seconds, 5);
    unsetenv("GPUJOBD_MAX_CONNECTIONS_PER_IP");
    unsetenv("GPUJOBD_METRICS_LISTEN");
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
        { { "serve", "--max-connections-per-ip", "-1", NULL }, 3, "--max-connections-per-ip" },
        { { "serve", "--header-timeout-seconds", "0", NULL }, 3, "--header-timeout-seconds" },
        /* under 30 s an event stream's 15 s keep-alive could come too late */
        { { "serve", "--http-idle-seconds", "29", NULL }, 3, "--http-idle-seconds" },
        { { "serve", "--job-timeout-seconds", "2592001", NULL }, 3, "--job-timeout-seconds" },
        { { "serve", "--http-threads", "1000", NULL }, 3, "--http-threads" },
        { { "serve", "--metrics-listen", "9090", NULL }, 3, "--metrics-listen" },
        { { "serve", "--metrics-listen", "0.0.0.0:8443", NULL }, 3, "--metrics-listen" },
        /* past 10 s a revocation would take too long to reach other replicas */
        { { "serve", "--api-key-cache-ms", "10001", NULL }, 3, "--api-key-cache-ms" },
        { { "serve", "--api-key-cache-ms", "-1", NULL }, 3, "--api-key-cache-ms" },
        { { "serve", "--max-chain-depth", "0", NULL }, 3, "--max-chain-depth" },
        { { "serve", "--max-waiting-jobs-per-tenant", "0", NULL }, 3, "--max-waiting-jobs-per-tenant" },
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

/* A directory with executable files named initdb and postgres. */
static void fake_pg_bindir(char *dir, size_t n)
{
    snprintf(dir, n, "/tmp/gjcfg-XXXXXX");
    assert_non_null(mkdtemp(dir));
    const char *tools[] = { "initdb", "postgres" };
    for (int i = 0; i < 2; i++) {
        char p[GJ_PATH_MAX];
        assert_int_equal(gj_path_join(p, sizeof p, dir, tools[i]), 0);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs("#!/bin/sh\n", f);
        fclose(f);
        assert_int_equal(chmod(p, 0755), 0);
    }
}

static void remove_fake_pg_bindir(const char *dir)
{
    const char *tools[] = { "initdb", "postgres" };
    for (int i = 0; i < 2; i++) {
        char p[GJ_PATH_MAX];
        if (gj_path_join(p, sizeof p, dir, tools[i]) == 0)
            unlink(p);
    }
    rmdir(dir);
}

/* --pg-bindir (GPUJOBD_PG_BINDIR) must hold initdb and postgres; serve and migrate
 * both take it. */
static void pg_bindir_is_checked(void **state)
{
    (void)state;
    struct gj_config cfg;
    char dir[GJ_PATH_MAX];
    fake_pg_bindir(dir, sizeof dir);
    char *ok[] = { "migrate", "--pg-bindir", dir, NULL };
    assert_int_equal(load_for(&cfg, 3, ok, 1), 0);
    assert_string_equal(cfg.pg.bindir, dir);
    char *empty_dir[] = { "serve", "--pg-bindir", "/tmp", NULL };
    assert_int_equal(load(&cfg, 3, empty_dir), -1);
    assert_one_line_naming("--pg-bindir");
    assert_non_null(strstr(errbuf, "initdb"));
    setenv("GPUJOBD_PG_BINDIR", "/nonexistent/bin", 1);
    char *none[] = { "serve", NULL };
    assert_int_equal(load(&cfg, 1, none), -1);
    assert_one_line_naming("GPUJOBD_PG_BINDIR");
    char *with_flag[] = { "serve", "--pg-bindir", dir, NULL };   /* a bad twin stops start-up */
    assert_int_equal(load(&cfg, 3, with_flag), -1);                /* even where a flag overrides it */
    unsetenv("GPUJOBD_PG_BINDIR");
    assert_int_equal(load(&cfg, 1, none), 0);
    assert_string_equal(cfg.pg.bindir, "");   /* default: PATH, then /usr/lib/postgresql */
    remove_fake_pg_bindir(dir);
}

/* --pg-user is whom PostgreSQL runs as when gpujobd is root: it must exist and not
 * be root. As another user it is unused and not checked. */
static void pg_user_is_checked_as_root(void **state)
{
    (void)state;
    struct gj_config cfg;
    char *root[] = { "serve", "--pg-user", "root", NULL };
    char *missing[] = { "serve", "--pg-user", "gj-no-such-user-xyz", NULL };
    char *toolong[] = { "serve", "--pg-user",
                        "a-user-name-far-longer-than-sixty-four-characters-which-no-system-has-xyz", NULL };
    assert_int_equal(load(&cfg, 3, toolong), -1);
    assert_one_line_naming("--pg-user");
    if (geteuid() != 0) {
        assert_int_equal(load(&cfg, 3, root), 0);
        assert_int_equal(load(&cfg, 3, missing), 0);
        return;
    }
    assert_int_equal(load(&cfg, 3, root), -1);
    assert_one_line_naming("--pg-user");
    assert_non_null(strstr(errbuf, "root"));
    assert_int_equal(load(&cfg, 3, missing), -1);
    assert_one_line_naming("--pg-user");
    setenv("GPUJOBD_PG_USER", "gj-no-such-user-xyz", 1);
    char *none[] = { "migrate", NULL };
    assert_int_equal(load_for(&cfg, 1, none, 1), -1);
    assert_one_line_naming("GPUJOBD_PG_USER");
    unsetenv("GPUJOBD_PG_USER");
}

/* The test switches have no flag; a bad value stops start-up like a bad flag. */
static void test_switches_are_checked(void **state)
{
    (void)state;
    struct gj_config cfg;
    char *argv[] = { "serve", NULL };
    const char *bad_gpus[] = { "x", "2:", "65", "-1", "2:0", "2:lots", "2x", "1:2:3" };
    for (size_t i = 0; i < sizeof bad_gpus / sizeof bad_gpus[0]; i++) {
        setenv("GPUJOBD_FAKE_GPUS", bad_gpus[i], 1);
        assert_int_equal(load(&cfg, 1, argv), -1);
        assert_one_line_naming("GPUJOBD_FAKE_GPUS");
    }
    unsetenv("GPUJOBD_FAKE_GPUS");
    setenv("GPUJOBD_PG_NOSYNC", "maybe", 1);
    assert_int_equal(load(&cfg, 1, argv), -1);
    assert_one_line_naming("GPUJOBD_PG_NOSYNC");
    setenv("GPUJOBD_PG_NOSYNC", "1", 1);
    assert_int_equal(load(&cfg, 1, argv), 0);
    assert_int_equal(cfg.pg.nosync, 1);
    assert_int_equal(cfg.test.fake_gpus, -1);   /* unset: the real devices */
    unsetenv("GPUJOBD_PG_NOSYNC");
    assert_int_equal(load(&cfg, 1, argv), 0);
    assert_int_equal(cfg.pg.nosync, 0);
    setenv("GPUJOBD_FAKE_GPUS", "3", 1);
    assert_int_equal(load(&cfg, 1, argv), 0);
    assert_int_equal(cfg.test.fake_gpus, 3);
    assert_true(cfg.test.fake_gpu_bytes == (16ull << 30));   /* the default size */
    unsetenv("GPUJOBD_FAKE_GPUS");
}

/* Simulated GPUs reach devices.c (runs last: it discovers the devices). */
static void fake_gpus_reach_devices(void **state)
{
    (void)state;
    struct gj_config cfg;
    char *argv[] = { "serve", NULL };
    setenv("GPUJOBD_FAKE_GPUS", "2:1073741824", 1);
    assert_int_equal(load(&cfg, 1, argv), 0);
    assert_int_equal(cfg.test.fake_gpus, 2);
    assert_true(cfg.test.fake_gpu_bytes == (1ull << 30));
    assert_int_equal(gj_device_count(), 2);
    struct gj_device_info info;
    assert_int_equal(gj_device_info(1, &info), 0);
    assert_int_equal(info.simulated, 1);
    assert_true(info.total_bytes == (1ull << 30));
    /* too late now: the devices were discovered */
    assert_int_equal(gj_devices_simulate(1, 1ull << 30), -1);
    unsetenv("GPUJOBD_FAKE_GPUS");
}

/* The inference settings: flags with GPUJOBD_* twins; a bad value stops start-up (the
 * batcher's used to fall back silently); the pseudonymisation secret is never echoed. */
static void inference_settings(void **state)
{
    (void)state;
    struct gj_config cfg;
    char *argv0[] = { "serve", NULL };
    assert_int_equal(load(&cfg, 1, argv0), 0);
    assert_string_equal(cfg.models_dir, "");
    assert_int_equal(cfg.infer_max_queue, 1024);
    assert_true(cfg.infer_queue_timeout_us == 30000000);
    assert_int_equal(cfg.infer_threads, 0);
    assert_int_equal(cfg.infer_purge_phi, 0);
    assert_int_equal(cfg.triton_metrics, 0);
    char *argv_tm[] = { "serve", "--triton-metrics", NULL };
    assert_int_equal(load(&cfg, 2, argv_tm), 0);
    assert_int_equal(cfg.triton_metrics, 1);
    setenv("GPUJOBD_TRITON_METRICS", "1", 1);
    assert_int_equal(load(&cfg, 1, argv0), 0);
    assert_int_equal(cfg.triton_metrics, 1);
    unsetenv("GPUJOBD_TRITON_METRICS");

    setenv("GPUJOBD_MODELS_DIR", "/srv/models", 1);
    setenv("GPUJOBD_INFER_PURGE_PHI", "1", 1);
    setenv("GPUJOBD_INFER_QUEUE_TIMEOUT_US", "3600000000", 1);
    setenv("GPUJOBD_PSEUDONYM_SECRET", "0123456789abcdef0123456789abcdef", 1);
    char *argv[] = { "serve", "--infer-max-queue", "1", "--infer-threads", "4", NULL };
    assert_int_equal(load(&cfg, 5, argv), 0);
    assert_string_equal(cfg.models_dir, "/srv/models");
    assert_int_equal(cfg.infer_purge_phi, 1);
    assert_true(cfg.infer_queue_timeout_us == 3600000000LL);
    assert_string_equal(cfg.pseudonym_secret, "0123456789abcdef0123456789abcdef");
    assert_int_equal(cfg.infer_max_queue, 1);
    assert_int_equal(cfg.infer_threads, 4);
    unsetenv("GPUJOBD_MODELS_DIR");
    unsetenv("GPUJOBD_INFER_QUEUE_TIMEOUT_US");
    unsetenv("GPUJOBD_PSEUDONYM_SECRET");

    setenv("GPUJOBD_INFER_PURGE_PHI", "maybe", 1);
    assert_int_equal(load(&cfg, 1, argv0), -1);
    assert_non_null(strstr(errbuf, "GPUJOBD_INFER_PURGE_PHI"));
    unsetenv("GPUJOBD_INFER_PURGE_PHI");
    setenv("GPUJOBD_INFER_MAX_QUEUE", "0", 1);
    assert_int_equal(load(&cfg, 1, argv0), -1);
    assert_non_null(strstr(errbuf, "GPUJOBD_INFER_MAX_QUEUE"));
    unsetenv("GPUJOBD_INFER_MAX_QUEUE");
    char *bad_threads[] = { "serve", "--infer-threads", "lots", NULL };
    assert_int_equal(load(&cfg, 3, bad_threads), -1);
    assert_non_null(strstr(errbuf, "--infer-threads"));
    char *bad_timeout[] = { "serve", "--infer-queue-timeout-us", "3600000001", NULL };
    assert_int_equal(load(&cfg, 3, bad_timeout), -1);
    assert_non_null(strstr(errbuf, "--infer-queue-timeout-us"));
    setenv("GPUJOBD_PSEUDONYM_SECRET", "short-secret-xyz", 1);
    assert_int_equal(load(&cfg, 1, argv0), -1);
    assert_non_null(strstr(errbuf, "GPUJOBD_PSEUDONYM_SECRET"));
    assert_null(strstr(errbuf, "short-secret-xyz"));
    unsetenv("GPUJOBD_PSEUDONYM_SECRET");
}

/* A file of text with a mode, under /tmp; the path (static). */
static const char *secret_file(const char *name, const char *text, mode_t mode)
{
    static char path[256];
    snprintf(path, sizeof path, "/tmp/gj-config-%d-%s", (int)getpid(), name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
    return path;
}

#define ADMIN_KEY "gjk_AAAAbbbbCCCCdddd0123456789-_eeeeFFFFggggHHH"

static void secrets_from_files(void **state)
{
    (void)state;
    struct gj_config cfg;
    char *argv0[] = { "serve", NULL };
    /* the admin key through the environment twin, its newline taken off */
    setenv("GPUJOBD_ADMIN_KEY_FILE", secret_file("admin", ADMIN_KEY "\n", 0600), 1);
    assert_int_equal(load(&cfg, 1, argv0), 0);
    assert_string_equal(cfg.admin_key, ADMIN_KEY);
    /* loose: refused, naming the setting, the mode and the fix, never the key */
    secret_file("admin", ADMIN_KEY "\n", 0644);
    assert_int_equal(load(&cfg, 1, argv0), -1);
    assert_one_line_naming("--admin-key-file (GPUJOBD_ADMIN_KEY_FILE)");
    assert_non_null(strstr(errbuf, "mode 0644"));
    assert_null(strstr(errbuf, "gjk_"));
    secret_file("admin", "not-a-key\n", 0600);
    assert_int_equal(load(&cfg, 1, argv0), -1);
    assert_one_line_naming("does not hold an API key");
    assert_null(strstr(errbuf, "not-a-key"));
    unsetenv("GPUJOBD_ADMIN_KEY_FILE");
    unlink(secret_file("admin", "", 0600));

    /* the pseudonymisation secret, alone (with --pseudonym-secret: refused) */
    const char *ps = secret_file("pseudonym", "0123456789abcdef0123456789abcdef-file\n", 0400);
    char *pargv[] = { "serve", "--pseudonym-secret-file", (char *)ps, NULL };
    assert_int_equal(load(&cfg, 3, pargv), 0);
    assert_string_equal(cfg.pseudonym_secret, "0123456789abcdef0123456789abcdef-file");
    setenv("GPUJOBD_PSEUDONYM_SECRET", "0123456789abcdef0123456789abcdef", 1);
    assert_int_equal(load(&cfg, 3, pargv), -1);
    assert_one_line_naming("not both");
    unsetenv("GPUJOBD_PSEUDONYM_SECRET");
    secret_file("pseudonym", "short\n", 0600);
    assert_int_equal(load(&cfg, 3, pargv), -1);
    assert_one_line_naming("32 to 512");
    assert_null(strstr(errbuf, "short\n"));
    unlink(ps);

    /* the database password: for an external database, migrate too */
    const char *pw = secret_file("dbpass", "pa ss:w@rd\n", 0600);
    char *dargv[] = { "migrate", "--database-url", "postgresql://db/gj", "--database-password-file", (char *)pw,
                      NULL };
    assert_int_equal(load_for(&cfg, 5, dargv, 1), 0);
    assert_string_equal(cfg.database_password, "pa ss:w@rd");
    char *embedded[] = { "serve", "--database-password-file", (char *)pw, NULL };
    assert_int_equal(load(&cfg, 3, embedded), -1);
    assert_one_line_naming("needs --database-url");
    secret_file("dbpass", "pa ss:w@rd\n", 0606);
    assert_int_equal(load_for(&cfg, 5, dargv, 1), -1);
    assert_one_line_naming("--database-password-file");
    assert_null(strstr(errbuf, "w@rd"));
    unlink(pw);

    /* the TLS private key's file: checked alike */
    const char *key = secret_file("key.pem", "-----BEGIN PRIVATE KEY-----\n", 0644);
    const char *cert = secret_file("cert.pem", "-----BEGIN CERTIFICATE-----\n", 0644);
    char *targv[] = { "serve", "--tls-cert", (char *)cert, "--tls-key", (char *)key, NULL };
    assert_int_equal(load(&cfg, 5, targv), -1);
    assert_one_line_naming("--tls-key");
    assert_non_null(strstr(errbuf, "mode 0644"));
    assert_int_equal(chmod(key, 0600), 0);
    assert_int_equal(load(&cfg, 5, targv), 0);
    unlink(key);
    unlink(cert);
}

/* --results-dicomweb-*: the URL's scheme, the auth file's one header line (never echoed),
 * its permissions, and the auth and CA files only with the URL. */
static void results_dicomweb_settings(void **state)
{
    (void)state;
    struct gj_config cfg;
    char *none[] = { "serve", NULL };
    assert_int_equal(load(&cfg, 1, none), 0);
    assert_string_equal(cfg.results_dicomweb_url, "");
    assert_int_equal(cfg.results_dicomweb_retry_ms, 2000);
    setenv("GPUJOBD_RESULTS_DICOMWEB_URL", "https://pacs.example/dicom-web", 1);
    assert_int_equal(load(&cfg, 1, none), 0);
    assert_string_equal(cfg.results_dicomweb_url, "https://pacs.example/dicom-web");
    setenv("GPUJOBD_RESULTS_DICOMWEB_URL", "ftp://pacs.example/", 1);
    assert_int_equal(load(&cfg, 1, none), -1);
    assert_one_line_naming("--results-dicomweb-url");
    unsetenv("GPUJOBD_RESULTS_DICOMWEB_URL");

    const char *auth = secret_file("pacs-auth", "Authorization: Bearer tok-123\n", 0600);
    char *argv[] = { "serve", "--results-dicomweb-url", "http://127.0.0.1:8042/dicom-web",
                     "--results-dicomweb-auth-file", (char *)auth, NULL };
    assert_int_equal(load(&cfg, 5, argv), 0);
    assert_string_equal(cfg.results_dicomweb_auth, "Authorization: Bearer tok-123");
    secret_file("pacs-auth", "Bearer tok-123\n", 0600);   /* no header name */
    assert_int_equal(load(&cfg, 5, argv), -1);
    assert_one_line_naming("--results-dicomweb-auth-file");
    assert_null(strstr(errbuf, "tok-123"));
    secret_file("pacs-auth", "Authorization: Bearer tok-123\n", 0644);
    assert_int_equal(load(&cfg, 5, argv), -1);
    assert_one_line_naming("--results-dicomweb-auth-file");
    char *no_url[] = { "serve", "--results-dicomweb-ca", "/etc/ssl/certs/ca-certificates.crt", NULL };
    assert_int_equal(load(&cfg, 3, no_url), -1);
    assert_one_line_naming("need --results-dicomweb-url");
    unlink(auth);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_serve_on_8443),
        cmocka_unit_test(environment_twin_and_flag_wins),
        cmocka_unit_test(bad_settings_name_themselves),
        cmocka_unit_test(http_settings),
        cmocka_unit_test(pg_bindir_is_checked),
        cmocka_unit_test(pg_user_is_checked_as_root),
        cmocka_unit_test(test_switches_are_checked),
        cmocka_unit_test(fake_gpus_reach_devices),
        cmocka_unit_test(inference_settings),
        cmocka_unit_test(secrets_from_files),
        cmocka_unit_test(results_dicomweb_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
