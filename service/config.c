/*
 * config.c — every setting of the service is read here: one table of settings
 * (flag, environment twin, where it goes, how it is checked), and the test
 * switches below it. Defaults make `gpujobd serve` work on a fresh machine.
 * Other files read no GPUJOBD_* variable; what they need arrives in struct
 * gj_config (or, for process-wide modules, is handed to them on load).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service/auth/auth.h"
#include "service/jobs/callback_policy.h"
#include "service/config.h"
#include "service/jobs/devices.h"
#include "service/auth/key_cache.h"
#include "service/jobs/job_cache.h"
#include "service/base/log.h"
#include "service/db/pg_embedded.h"
#include "service/base/secret_file.h"
#include "service/db/s3_client.h"

enum setting_type {
    T_STRING, T_INT, T_I64, T_BYTES, T_DOUBLE, T_BOOL, T_LISTEN, T_PLACEMENT, T_LEVEL, T_ROLE, T_PG_BINDIR,
    T_PG_USER, T_MODEL_CONTROL,
    T_METRICS_LISTEN,          /* HOST:PORT into metrics_host, metrics_port */
    T_GRPC_LISTEN,             /* HOST:PORT into grpc_host, grpc_port */
    T_SECRET,                  /* a string of min..max characters, never echoed in a message */
    T_HOSTS,                   /* host[:port],... (callback_policy.h) */
    T_ORIGINS,                 /* web origins, comma-separated; a flag given twice adds to the list */
};

struct setting {
    const char *flag;          /* without the leading dashes */
    enum setting_type type;
    size_t offset;
    size_t size;               /* strings: buffer size */
    long long min, max;        /* ints */
    int migrate;               /* also accepted by `gpujobd migrate` */
    const char *help;
};

#define S(field) offsetof(struct gj_config, field), sizeof(((struct gj_config *)0)->field)

static const struct setting settings[] = {
    { "listen", T_LISTEN, 0, 0, 0, 0, 0, "HOST:PORT to serve on (default 127.0.0.1:8443)" },
    { "data-dir", T_STRING, S(data_dir), 0, 0, 1, "state directory (default ./var)" },
    { "database-url", T_STRING, S(database_url), 0, 0, 1, "external PostgreSQL URL; default: embedded" },
    { "database-password-file", T_STRING, S(database_password_file), 0, 0, 1,
      "file holding the password of --database-url's user (mode 0600, or 0440 owned by root)" },
    { "admin-key-file", T_STRING, S(admin_key_file), 0, 0, 0,
      "file holding the admin API key, registered when the database has none (then none is made "
      "or logged)" },
    { "tls-cert", T_STRING, S(tls_cert), 0, 0, 0, "PEM certificate (default: self-signed in DATA_DIR/tls)" },
    { "tls-key", T_STRING, S(tls_key), 0, 0, 0, "PEM private key (mode 0600, or 0440 owned by root)" },
    { "insecure-http", T_BOOL, S(insecure_http), 0, 1, 0, "plain HTTP, for TLS terminated elsewhere" },
    { "hsts-max-age", T_INT, S(hsts_max_age), 0, 63072000, 0,
      "HTTPS answers carry Strict-Transport-Security: max-age=N (seconds; without includeSubDomains, "
      "which would bind the domain's other hosts); 0 = none (default 31536000, a year)" },
    { "workers-per-gpu", T_INT, S(workers_per_gpu), 0, 64, 0, "job slots per GPU (default 2)" },
    { "cpu-workers", T_INT, S(cpu_workers), 0, 1024, 0, "CPU job slots (default: 1 per 4 cores, at least 1)" },
    { "placement", T_PLACEMENT, S(placement), 0, 0, 0, "least-loaded | round-robin | random" },
    { "max-body-bytes", T_BYTES, S(max_body_bytes), 1, 0, 0, "upload size limit (default 16G)" },
    { "max-json-bytes", T_BYTES, S(max_json_bytes), 1024, 0, 0, "JSON body limit (default 4M)" },
    { "max-connections", T_INT, S(max_connections), 1, 100000, 0, "concurrent connections (default 10000)" },
    { "max-connections-per-ip", T_INT, S(max_connections_per_ip), 0, 100000, 0,
      "concurrent connections from one client address; 0 = no limit (default 256)" },
    { "header-timeout-seconds", T_INT, S(header_timeout_seconds), 1, 3600, 0,
      "a connection whose request line and headers are not complete this long after it opened (or "
      "after its next request began; a kept-alive connection idle between requests is closed at "
      "--http-idle-seconds) is closed (default 30)" },
    { "http-idle-seconds", T_INT, S(http_idle_seconds), 30, 86400, 0,
      "a connection with no traffic this long is closed (parked requests and event streams are not "
      "idle); tritonclient.http does not retry a call on a connection closed while idle, so keep "
      "this above its clients' longest pause (default 300)" },
    { "http-threads", T_INT, S(http_threads), 0, 256, 0, "HTTP event-loop threads; 0 = 2 per core, 4 to 32 (default 0)" },
    { "metrics-listen", T_METRICS_LISTEN, 0, 0, 0, 0, 0,
      "HOST:PORT of a plain-HTTP listener serving only /metrics, /healthz and /readyz without a key "
      "(any role; default: none)" },
    { "grpc-listen", T_GRPC_LISTEN, 0, 0, 0, 0, 0,
      "HOST:PORT of Triton's gRPC protocol, over TLS with the server's certificate (Triton's port is "
      "8001; default: none)" },
    { "grpc-insecure", T_BOOL, S(grpc_insecure), 0, 1, 0, "plain-text gRPC, for TLS terminated elsewhere" },
    { "grpc-max-message", T_BYTES, S(grpc_max_message), 1024, 2147483647LL, 0,
      "largest gRPC message received (default 256 MiB)" },
    { "grpc-threads", T_INT, S(grpc_threads), 1, 256, 0, "gRPC calls served at once (default 16)" },
    { "grpc-calls-per-tenant", T_INT, S(grpc_calls_per_tenant), 0, 256, 0,
      "gRPC calls (streams included) one tenant may have running at once, past it RESOURCE_EXHAUSTED; "
      "0 = three quarters of --grpc-threads (default 0)" },
    { "grpc-stream-idle-seconds", T_INT, S(grpc_stream_idle_seconds), 1, 86400, 0,
      "a gRPC stream that neither sends nor reads this long is cut (default 300)" },
    { "tls-client-ca", T_STRING, S(tls_client_ca), 0, 0, 0,
      "PEM bundle of the CAs whose client certificates authenticate on the gRPC and HTTPS listeners (the "
      "subject's CN names the tenant)" },
    { "tls-crl", T_STRING, S(tls_crl), 0, 0, 0,
      "PEM certificate revocation lists of --tls-client-ca's CAs: a client certificate they list is refused on "
      "both listeners (read at start)" },
    { "max-uploads", T_INT, S(max_uploads), 1, 100000, 0, "concurrent uploads (default 32)" },
    { "max-uploads-per-tenant", T_INT, S(max_uploads_per_tenant), 1, 100000, 0,
      "concurrent uploads of one tenant; more get 429 (default 8)" },
    { "max-chain-depth", T_INT, S(max_chain_depth), 1, 100000, 0,
      "a job may wait for a job that waits for another, this many waiting jobs deep; deeper gets "
      "422 (default 100)" },
    { "max-waiting-jobs-per-tenant", T_INT, S(max_waiting_jobs), 1, 10000000, 0,
      "jobs of one tenant waiting for other jobs' outputs at once; more get 429 (default 10000)" },
    { "upload-min-bytes-per-second", T_BYTES, S(upload_min_rate), 0, 0, 0,
      "an upload slower than this over the window is cut with 408; 0 = off (default 4K)" },
    { "upload-rate-window-seconds", T_INT, S(upload_rate_window_seconds), 1, 3600, 0,
      "the window of the minimum upload rate, and the longest an upload may stall (default 30)" },
    { "upload-disk-reserve", T_BYTES, S(upload_disk_reserve), 0, 0, 0,
      "free disk an upload must leave in DATA_DIR/spool; else 507 (default 1G)" },
    { "archive-max-ratio", T_INT, S(archive_max_ratio), 1, 1000000, 0,
      "a CARMIN archive's files may inflate to this many times its zip's bytes (at least 1M), counted "
      "as they inflate; else 413 (default 100)" },
    { "archive-max-bytes", T_BYTES, S(archive_max_bytes), 1, 0, 0,
      "a CARMIN archive's files in all (and never over --max-body-bytes); else 413 (default 1G)" },
    { "db-reserve-for-reads", T_INT, S(db_reserve_for_reads), 0, 999, 0,
      "pool connections kept for requests that only read (default: a quarter of the pool)" },
    { "host-memory-reserve", T_BYTES, S(host_memory_reserve), 0, 0, 0,
      "host memory kept for the service: jobs get the host's (or cgroup's) memory minus this "
      "(default 512M)" },
    { "render-memory", T_BYTES, S(render_memory), 65536, 0, 0,
      "host memory DICOM renders, WADO-RS frames and thumbnails may hold together (part of "
      "--host-memory-reserve); "
      "one that needs more is refused with 413, one that does not fit now with 503 (default 256M)" },
    { "tenant-storage-quota", T_BYTES, S(tenant_storage_quota), 0, 0, 0,
      "bytes each tenant may store (blobs, job outputs, CARMIN files, DICOM instances); an upload or "
      "output that would pass it is refused with 507; per tenant through PUT /v1/tenants/{id}/storage-quota "
      "(default 0: no quota)" },
    { "db-pool-size", T_INT, S(db_pool_size), 2, 1000, 0, "PostgreSQL connections (default 16)" },
    { "lease-seconds", T_INT, S(lease_seconds), 1, 86400, 0, "job lease (default 30)" },
    { "poll-interval-ms", T_INT, S(poll_interval_ms), 10, 600000, 0, "claim poll fallback (default 1000)" },
    { "retry-backoff-ms", T_INT, S(retry_backoff_ms), 0, 3600000, 0, "first retry delay (default 1000)" },
    { "max-attempts", T_INT, S(default_max_attempts), 1, 100, 0, "default attempts per job (default 3)" },
    { "job-timeout-seconds", T_INT, S(job_timeout_seconds), 0, 2592000, 0,
      "a job's time limit when its submit gives no timeout_seconds: each run is stopped this long "
      "after it starts and the job fails; 0 = none (default 0)" },
    { "shutdown-grace-seconds", T_INT, S(shutdown_grace_seconds), 0, 86400, 0,
      "SIGTERM: time running jobs get to finish (default 30)" },
    { "max-wait-seconds", T_INT, S(max_wait_seconds), 1, 3600, 0, "cap of ?wait= (default 60)" },
    { "rate-limit", T_DOUBLE, S(rate_limit_per_key), 0, 1000000, 0, "requests/s per key; 0 = off" },
    { "api-key-cache-ms", T_INT, S(api_key_cache_ms), 0, GJ_KEY_CACHE_MAX_TTL_MS, 0,
      "a verified API key is answered from memory this long, and a key revoked through another "
      "replica is refused here within it; 0 = off (default 1000)" },
    { "job-cache-ms", T_INT, S(job_cache_ms), 0, GJ_JOB_CACHE_MAX_TTL_MS, 0,
      "a job's status is answered from memory until it changes (NOTIFY), at most this long: the "
      "bound on a change missed while the LISTEN connection is silently gone; 0 = off (default 5000)" },
    { "log-level", T_LEVEL, S(log_level), 0, 0, 1, "debug | info | warn | error" },
    { "work-dir", T_STRING, S(work_dir), 0, 0, 0, "scratch for running jobs (default DATA_DIR/work)" },
    { "role", T_ROLE, S(role), 0, 0, 0, "all | api | worker (default all)" },
    { "pg-bindir", T_PG_BINDIR, S(pg.bindir), 0, 0, 1,
      "embedded PostgreSQL: where initdb and postgres are (default: PATH, /usr/lib/postgresql/N/bin)" },
    { "pg-user", T_PG_USER, S(pg.user), 0, 0, 1,
      "embedded PostgreSQL, when run as root: the user it runs as (default postgres)" },
    { "models-dir", T_STRING, S(models_dir), 0, 0, 0, "model repository (default DATA_DIR/models)" },
    { "model-control-mode", T_MODEL_CONTROL, S(model_control_mode), 0, 0, 0,
      "on-use | none | explicit | poll, as Triton's (default on-use: a model loads on first use)" },
    { "load-model", T_STRING, S(load_models), 0, 0, 0,
      "models loaded at start, comma-separated; * for every one (explicit mode)" },
    { "repository-poll-secs", T_INT, S(repository_poll_secs), 1, 86400, 0,
      "poll mode: seconds between reads of --models-dir (default 15)" },
    { "pseudonym-secret", T_SECRET, S(pseudonym_secret), 32, 512, 0,
      "HMAC secret of inference result keys, 32 to 512 characters (default: made once, kept in the "
      "database); prefer --pseudonym-secret-file" },
    { "pseudonym-secret-file", T_STRING, S(pseudonym_secret_file), 0, 0, 0,
      "file holding --pseudonym-secret (mode 0600, or 0440 owned by root)" },
    { "infer-purge-phi", T_BOOL, S(infer_purge_phi), 0, 1, 0,
      "delete an infer job's DICOM inputs and the UIDs in its result.json once its results are stored" },
    { "triton-metrics", T_BOOL, S(triton_metrics), 0, 1, 0,
      "/metrics also under Triton's names (nv_inference_*), beside the gpujobd_ ones" },
    { "infer-max-queue", T_INT, S(infer_max_queue), 1, 1 << 20, 0,
      "inference requests waiting per model batcher; more get 429 (default 1024)" },
    { "infer-queue-timeout-us", T_I64, S(infer_queue_timeout_us), 1, 3600000000LL, 0,
      "microseconds a request may wait in a batcher's queue; past it 503 (default 30000000)" },
    { "infer-threads", T_INT, S(infer_threads), 0, 256, 0,
      "ONNX CPU threads per inference executor; 0: the CPUs (less one for the HTTP threads where "
      "this replica serves the API) / instances, 1 to 16 (default 0)" },
    { "callback-allow", T_HOSTS, S(callback_allow), 0, 0, 0,
      "hosts a job's callback_url may name, HOST or HOST:PORT, comma-separated (default: none)" },
    { "callback-allow-private", T_BOOL, S(callback_allow_private), 0, 1, 0,
      "callbacks may also reach loopback, private and link-local addresses" },
    { "callback-backoff-ms", T_INT, S(callback_backoff_ms), 10, 3600000, 0,
      "first retry delay of a failed callback; doubles, at most 1 h (default 10000)" },
    { "callback-cacert", T_STRING, S(callback_cacert), 0, 0, 0,
      "PEM CA bundle https callbacks are verified with (default: the system's)" },
    { "results-dicomweb-url", T_STRING, S(results_dicomweb_url), 0, 0, 0,
      "DICOMweb base URL (https://pacs/dicom-web) each infer job's Structured Report is sent to by "
      "STOW-RS, retried until delivered (default: none)" },
    { "results-dicomweb-auth-file", T_STRING, S(results_dicomweb_auth_file), 0, 0, 0,
      "file holding the HTTP header sent with it, as 'Authorization: Bearer ...' (mode 0600)" },
    { "results-dicomweb-ca", T_STRING, S(results_dicomweb_ca), 0, 0, 0,
      "PEM CA certificates its TLS certificate is checked against (default: the system's)" },
    { "results-dicomweb-retry-ms", T_INT, S(results_dicomweb_retry_ms), 10, 3600000, 0,
      "first retry delay of a delivery; doubles per attempt, at most 5 min (default 2000)" },
    { "cors-origin", T_ORIGINS, S(cors_origins), 0, 0, 0,
      "web origin (https://portal.example.org) whose pages may call the API; repeat it or give a "
      "comma-separated list (default: none)" },
    { "session-idle-minutes", T_INT, S(session_idle_minutes), 1, 10080, 0,
      "a browser session ends after this many minutes unused (default 60)" },
    { "session-hours", T_INT, S(session_hours), 1, 720, 0,
      "a browser session ends this many hours after sign-in (default 12)" },
    { "blob-store", T_STRING, S(blob_store), 0, 0, 0,
      "where new blobs go: postgres (large objects) or s3 (an S3-compatible store; blobs of both "
      "are read) (default postgres)" },
    { "s3-endpoint", T_STRING, S(s3_endpoint), 0, 0, 0, "the S3 store's http(s)://host[:port]" },
    { "s3-bucket", T_STRING, S(s3_bucket), 0, 0, 0, "the bucket blobs go to (it must exist)" },
    { "s3-region", T_STRING, S(s3_region), 0, 0, 0, "the region requests are signed for (default us-east-1)" },
    { "s3-addressing", T_STRING, S(s3_addressing), 0, 0, 0,
      "path (host/bucket/key) or virtual (bucket.host/key) (default path)" },
    { "s3-credentials-file", T_STRING, S(s3_credentials_file), 0, 0, 0,
      "AWS shared-credentials file ([default] aws_access_key_id, aws_secret_access_key; mode 0600) "
      "(default: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)" },
    { "s3-ca-file", T_STRING, S(s3_ca_file), 0, 0, 0,
      "PEM CA certificates the store's TLS certificate is checked against (default: the system's)" },
    { "s3-stale-upload-seconds", T_INT, S(s3_stale_upload_seconds), 1, 30 * 86400, 0,
      "a multipart upload begun this long ago is a stopped replica's: the maintenance pass aborts it "
      "(default 86400)" },
};
#define N_SETTINGS (sizeof settings / sizeof settings[0])

static void set_defaults(struct gj_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->listen_host, sizeof cfg->listen_host, "127.0.0.1");
    cfg->listen_port = 8443;
    snprintf(cfg->data_dir, sizeof cfg->data_dir, "./var");
    cfg->workers_per_gpu = 2;
    cfg->cpu_workers = -1;
    cfg->placement = GJ_PLACE_LEAST_LOADED;
    cfg->max_body_bytes = 16ull << 30;
    cfg->max_json_bytes = 4ull << 20;
    cfg->grpc_max_message = 256ull << 20;
    cfg->grpc_threads = 16;
    cfg->grpc_stream_idle_seconds = 300;
    cfg->max_connections = 10000;
    cfg->max_connections_per_ip = 256;
    cfg->hsts_max_age = 31536000;
    cfg->header_timeout_seconds = 30;
    cfg->http_idle_seconds = 300;
    cfg->max_uploads = 32;
    cfg->max_uploads_per_tenant = 8;
    cfg->max_chain_depth = 100;
    cfg->max_waiting_jobs = 10000;
    cfg->upload_min_rate = 4096;
    cfg->upload_rate_window_seconds = 30;
    cfg->upload_disk_reserve = 1ull << 30;
    cfg->archive_max_ratio = 100;
    cfg->archive_max_bytes = 1ull << 30;
    cfg->db_reserve_for_reads = -1;
    cfg->host_memory_reserve = 512ull << 20;
    cfg->render_memory = 256ull << 20;
    cfg->db_pool_size = 16;
    cfg->lease_seconds = 30;
    cfg->poll_interval_ms = 1000;
    cfg->retry_backoff_ms = 1000;
    cfg->default_max_attempts = 3;
    cfg->shutdown_grace_seconds = 30;
    cfg->max_wait_seconds = 60;
    cfg->api_key_cache_ms = GJ_KEY_CACHE_TTL_MS;
    cfg->job_cache_ms = GJ_JOB_CACHE_TTL_MS;
    snprintf(cfg->log_level, sizeof cfg->log_level, "info");
    snprintf(cfg->role, sizeof cfg->role, "all");
    snprintf(cfg->blob_store, sizeof cfg->blob_store, "postgres");
    snprintf(cfg->s3_region, sizeof cfg->s3_region, "us-east-1");
    snprintf(cfg->s3_addressing, sizeof cfg->s3_addressing, "path");
    cfg->s3_stale_upload_seconds = 86400;
    snprintf(cfg->model_control_mode, sizeof cfg->model_control_mode, "on-use");
    cfg->repository_poll_secs = 15;
    cfg->test.fake_gpus = -1;
    cfg->infer_max_queue = 1024;
    cfg->infer_queue_timeout_us = 30000000;
    cfg->callback_backoff_ms = 10000;
    cfg->results_dicomweb_retry_ms = 2000;
    cfg->session_idle_minutes = 60;
    cfg->session_hours = 12;
}

const char *gj_placement_name(enum gj_placement_policy p)
{
    switch (p) {
    case GJ_PLACE_ROUND_ROBIN: return "round-robin";
    case GJ_PLACE_RANDOM: return "random";
    default: return "least-loaded";
    }
}

/* "16G", "512M", "4096": binary units. */
static int parse_bytes(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'B')
        end++;
    if (*end == 'B')
        end++;
    if (*end || (shift && v > (ULLONG_MAX >> shift)))
        return -1;
    *out = v << shift;
    return 0;
}

/* The one line of a bad setting. flag NULL: an environment-only switch. */
static int fail(const char *flag, const char *from_env, const char *why, const char *value)
{
    if (from_env && flag)
        fprintf(stderr, "gpujobd: %s (--%s): %s (got '%s')\n", from_env, flag, why, value);
    else if (from_env)
        fprintf(stderr, "gpujobd: %s: %s (got '%s')\n", from_env, why, value);
    else
        fprintf(stderr, "gpujobd: --%s: %s (got '%s')\n", flag, why, value);
    return -1;
}

static int parse_bool(const char *value, int *out)
{
    if (!strcmp(value, "1") || !strcmp(value, "true") || !strcmp(value, "yes") || !value[0])
        *out = 1;
    else if (!strcmp(value, "0") || !strcmp(value, "false") || !strcmp(value, "no"))
        *out = 0;
    else
        return -1;
    return 0;
}

/* --pg-user names whom initdb and postgres run as when gpujobd is root (PostgreSQL
 * refuses root); as another user they run as that user and the setting is unused,
 * so it is checked only as root. NULL when fine, else why not. */
static const char *pg_user_problem(const char *name)
{
    if (!name[0] || geteuid() != 0)
        return NULL;
    struct passwd pwbuf, *pw = NULL;
    char buf[4096];   /* getpwnam_r's strings */
    if (getpwnam_r(name, &pwbuf, buf, sizeof buf, &pw) != 0 || !pw)
        return "no such user (as root, PostgreSQL runs as this unprivileged user: create it)";
    if (pw->pw_uid == 0)
        return "must not be root: PostgreSQL refuses to run as root";
    return NULL;
}

/* The setters below store a valid value and return NULL, or return why it is not. */

static const char *set_string(const struct setting *s, char *field, const char *value)
{
    const char *why = NULL;
    if (strlen(value) >= s->size)
        return "too long";
    if (s->type == T_PG_BINDIR && value[0] && !gj_pg_bindir_usable(value))
        return "holds no executable initdb and postgres";
    if (s->type == T_PG_USER && (why = pg_user_problem(value)) != NULL)
        return why;
    if (s->type == T_HOSTS) {
        static __thread char reason[200];
        struct gj_host_list *hosts = malloc(sizeof *hosts);
        if (!hosts)
            return "out of memory";
        int bad = gj_host_list_parse(value, hosts, reason, sizeof reason) != 0;
        free(hosts);
        if (bad)
            return reason;
    }
    memcpy(field, value, strlen(value) + 1);
    return NULL;
}

static const char *set_number(const struct setting *s, char *field, const char *value, char *why, size_t n)
{
    char *end;
    if (s->type == T_BYTES) {
        unsigned long long v;
        if (parse_bytes(value, &v) || v < (unsigned long long)s->min)
            return "expected a size such as 4096, 512M or 16G";
        *(uint64_t *)field = v;
    } else if (s->type == T_DOUBLE) {
        double v = strtod(value, &end);
        if (end == value || *end || v < (double)s->min || v > (double)s->max)
            return "expected a non-negative number";
        *(double *)field = v;
    } else {
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (errno || end == value || *end)
            return "expected an integer";
        if (v < s->min || v > s->max) {
            snprintf(why, n, "must be between %lld and %lld", s->min, s->max);
            return why;
        }
        if (s->type == T_I64)
            *(int64_t *)field = (int64_t)v;
        else
            *(int *)field = (int)v;
    }
    return NULL;
}

/* A secret: its length checked, the value never in a message. */
static int set_secret(const struct setting *s, char *field, const char *value, const char *env)
{
    size_t n = strlen(value);
    if (n < (size_t)s->min || n > (size_t)s->max || n >= s->size) {
        char why[96], shown[48];
        snprintf(why, sizeof why, "must be %lld to %lld characters", s->min, s->max);
        snprintf(shown, sizeof shown, "a value of %zu characters", n);
        return fail(s->flag, env, why, shown);
    }
    memcpy(field, value, n + 1);
    return 0;
}

/* One web origin: scheme "https" or "http", a host, an optional port; nothing else (no
 * path, no "*", no "null"), as a browser writes it in the Origin header. */
static int origin_ok(const char *o, size_t n)
{
    size_t skip = n > 8 && strncmp(o, "https://", 8) == 0 ? 8 : n > 7 && strncmp(o, "http://", 7) == 0 ? 7 : 0;
    if (!skip)
        return 0;
    int colon = 0;
    for (size_t i = skip; i < n; i++) {
        unsigned char ch = (unsigned char)o[i];
        if (ch == ':' && !colon && i > skip && i + 1 < n)
            colon = 1;
        else if (colon ? !isdigit(ch) : !(isalnum(ch) || ch == '-' || ch == '.' || ch == '[' || ch == ']'))
            return 0;
    }
    return 1;
}

/* Origins: each checked, then appended to what the list holds (flags repeat). */
static const char *set_origins(const struct setting *s, char *field, const char *value)
{
    const char *p = value;
    size_t used = strlen(field);
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t n = strcspn(p, ", ");
        if (n == 0)
            break;
        if (!origin_ok(p, n))
            return "expected origins such as https://portal.example.org (scheme, host, optional port; "
                   "no path, no *)";
        if (used + n + 2 > s->size)
            return "too many origins";
        if (used)
            field[used++] = ',';
        memcpy(field + used, p, n);
        used += n;
        field[used] = '\0';
        p += n;
    }
    return NULL;
}

/* HOST:PORT, or [IPV6]:PORT. */
static const char *set_host_port(char *host, size_t host_cap, int *port_out, const char *value)
{
    const char *colon = strrchr(value, ':');
    char *end;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    size_t hlen = colon ? (size_t)(colon - value) : 0;
    if (!colon || !colon[1] || *end || port < 1 || port > 65535 || hlen == 0 || hlen >= host_cap)
        return "expected HOST:PORT, e.g. 0.0.0.0:8443";
    if (value[0] == '[' && hlen >= 2 && value[hlen - 1] == ']') {
        memcpy(host, value + 1, hlen - 2);
        host[hlen - 2] = '\0';
    } else {
        memcpy(host, value, hlen);
        host[hlen] = '\0';
    }
    *port_out = (int)port;
    return NULL;
}

/* The settings that take one word of a short list. */
static const char *set_word(struct gj_config *cfg, const struct setting *s, const char *value)
{
    enum gj_log_level level;
    switch (s->type) {
    case T_PLACEMENT:
        if (!strcmp(value, "least-loaded"))
            cfg->placement = GJ_PLACE_LEAST_LOADED;
        else if (!strcmp(value, "round-robin"))
            cfg->placement = GJ_PLACE_ROUND_ROBIN;
        else if (!strcmp(value, "random"))
            cfg->placement = GJ_PLACE_RANDOM;
        else
            return "expected least-loaded, round-robin or random";
        return NULL;
    case T_LEVEL:
        if (gj_log_parse_level(value, &level))
            return "expected debug, info, warn or error";
        snprintf(cfg->log_level, sizeof cfg->log_level, "%s", value);
        gj_log_set_level(level);
        return NULL;
    case T_ROLE:
        if (strcmp(value, "all") && strcmp(value, "api") && strcmp(value, "worker"))
            return "expected all, api or worker";
        snprintf(cfg->role, sizeof cfg->role, "%s", value);
        return NULL;
    case T_MODEL_CONTROL:
        if (strcmp(value, "on-use") && strcmp(value, "none") && strcmp(value, "explicit") &&
            strcmp(value, "poll"))
            return "expected on-use, none, explicit or poll";
        snprintf(cfg->model_control_mode, sizeof cfg->model_control_mode, "%s", value);
        return NULL;
    default:
        return "internal: not a word setting";
    }
}

/* Checks and stores one setting; env names the variable it came from (NULL: a flag). */
static int apply(struct gj_config *cfg, const struct setting *s, const char *value, const char *env)
{
    char *field = (char *)cfg + s->offset;
    char buf[96];
    const char *why;
    switch (s->type) {
    case T_STRING:
    case T_PG_BINDIR:
    case T_PG_USER:
    case T_HOSTS:
        why = set_string(s, field, value);
        break;
    case T_BOOL:
        why = parse_bool(value, (int *)field) ? "expected true or false" : NULL;
        break;
    case T_INT:
    case T_I64:
    case T_BYTES:
    case T_DOUBLE:
        why = set_number(s, field, value, buf, sizeof buf);
        break;
    case T_SECRET:
        return set_secret(s, field, value, env);
    case T_ORIGINS:
        why = set_origins(s, field, value);
        break;
    case T_LISTEN:
        why = set_host_port(cfg->listen_host, sizeof cfg->listen_host, &cfg->listen_port, value);
        break;
    case T_METRICS_LISTEN:
        why = set_host_port(cfg->metrics_host, sizeof cfg->metrics_host, &cfg->metrics_port, value);
        break;
    case T_GRPC_LISTEN:
        why = set_host_port(cfg->grpc_host, sizeof cfg->grpc_host, &cfg->grpc_port, value);
        break;
    default:
        why = set_word(cfg, s, value);
        break;
    }
    return why ? fail(s->flag, env, why, value) : 0;
}

/* --data-dir -> GPUJOBD_DATA_DIR */
static void env_name(const char *flag, char *out, size_t n)
{
    size_t j = (size_t)snprintf(out, n, "GPUJOBD_");
    for (size_t i = 0; flag[i] && j + 1 < n; i++)
        out[j++] = flag[i] == '-' ? '_' : (char)toupper((unsigned char)flag[i]);
    out[j] = '\0';
}

static void print_help(const char *cmd, int for_migrate)
{
    printf("usage: gpujobd %s [OPTIONS]\n\noptions (each also as an environment variable):\n", cmd);
    for (size_t i = 0; i < N_SETTINGS; i++) {
        if (for_migrate && !settings[i].migrate)
            continue;
        char env[64];
        env_name(settings[i].flag, env, sizeof env);
        printf("  --%-24s %s\n  %-26s [%s]\n", settings[i].flag, settings[i].help, "", env);
    }
}

/* "--admin-key-file (GPUJOBD_ADMIN_KEY_FILE)": a secret's file is mostly given by the
 * environment (a mounted Secret), so its messages name both. */
static const char *both_names(const char *flag, char *out, size_t n)
{
    char env[64];
    env_name(flag, env, sizeof env);
    snprintf(out, n, "--%s (%s)", flag, env);
    return out;
}

/* One secret's file into its field: 0, or -1 with one line naming the setting (the
 * file's contents never in it). */
static int read_secret(const char *flag, const char *path, char *out, size_t size)
{
    char why[GJ_PATH_MAX + 256], name[96];
    if (gj_secret_file_read(path, out, size, why, sizeof why) == 0)
        return 0;
    fprintf(stderr, "gpujobd: %s: %s\n", both_names(flag, name, sizeof name), why);
    return -1;
}

static int check_results_dicomweb(const struct gj_config *cfg);
static int check_blob_store(struct gj_config *cfg);

/* The secrets given as files, read and checked at start. */
static int load_secret_files(struct gj_config *cfg, int for_migrate)
{
    char why[GJ_PATH_MAX + 256], name[96];
    if (cfg->database_password_file[0] && !cfg->database_url[0]) {
        fprintf(stderr, "gpujobd: %s: needs --database-url (the embedded PostgreSQL takes no password)\n",
                both_names("database-password-file", name, sizeof name));
        return -1;
    }
    if (cfg->database_password_file[0] && read_secret("database-password-file", cfg->database_password_file,
                                                      cfg->database_password, sizeof cfg->database_password))
        return -1;
    if (for_migrate)
        return 0;
    if (check_blob_store(cfg) != 0)
        return -1;
    if (cfg->admin_key_file[0]) {
        if (read_secret("admin-key-file", cfg->admin_key_file, cfg->admin_key, sizeof cfg->admin_key))
            return -1;
        if (!gj_api_key_well_formed(cfg->admin_key)) {
            fprintf(stderr, "gpujobd: %s: %s does not hold an API key (gjk_ and 43 base64url characters, as "
                            "README's command makes)\n", both_names("admin-key-file", name, sizeof name),
                    cfg->admin_key_file);
            return -1;
        }
    }
    if (cfg->pseudonym_secret_file[0]) {
        both_names("pseudonym-secret-file", name, sizeof name);
        if (cfg->pseudonym_secret[0]) {
            fprintf(stderr, "gpujobd: %s: give it or --pseudonym-secret, not both\n", name);
            return -1;
        }
        if (read_secret("pseudonym-secret-file", cfg->pseudonym_secret_file, cfg->pseudonym_secret,
                        sizeof cfg->pseudonym_secret))
            return -1;
        size_t n = strlen(cfg->pseudonym_secret);
        if (n < 32 || n > 512) {
            fprintf(stderr, "gpujobd: %s: %s holds %zu characters; the secret is 32 to 512\n", name,
                    cfg->pseudonym_secret_file, n);
            return -1;
        }
    }
    if (cfg->results_dicomweb_auth_file[0] &&
        (read_secret("results-dicomweb-auth-file", cfg->results_dicomweb_auth_file, cfg->results_dicomweb_auth,
                     sizeof cfg->results_dicomweb_auth) ||
         check_results_dicomweb(cfg)))
        return -1;
    if (cfg->tls_key[0] && gj_secret_file_check(cfg->tls_key, why, sizeof why) != 0) {
        fprintf(stderr, "gpujobd: %s: %s\n", both_names("tls-key", name, sizeof name), why);
        return -1;
    }
    return 0;
}

/* --blob-store and --s3-*: the store's settings whole, the key and secret from the
 * credentials file or the AWS_* variables (never echoed). 0, or -1 (said). */
static int check_blob_store(struct gj_config *cfg)
{
    char name[96], why[GJ_PATH_MAX + 256];
    if (strcmp(cfg->blob_store, "postgres") != 0 && strcmp(cfg->blob_store, "s3") != 0) {
        fprintf(stderr, "gpujobd: %s: postgres or s3, not %s\n", both_names("blob-store", name, sizeof name),
                cfg->blob_store);
        return -1;
    }
    if (strcmp(cfg->s3_addressing, "path") != 0 && strcmp(cfg->s3_addressing, "virtual") != 0) {
        fprintf(stderr, "gpujobd: %s: path or virtual\n", both_names("s3-addressing", name, sizeof name));
        return -1;
    }
    if (strcmp(cfg->blob_store, "s3") != 0 && !cfg->s3_endpoint[0])
        return 0;   /* a store given with --blob-store postgres is read (blobs moved there) */
    if (!cfg->s3_endpoint[0] || !cfg->s3_bucket[0]) {
        fprintf(stderr, "gpujobd: --blob-store s3 needs --s3-endpoint and --s3-bucket\n");
        return -1;
    }
    if (cfg->s3_credentials_file[0]) {
        if (gj_s3_read_credentials(cfg->s3_credentials_file, NULL, cfg->s3_access_key, sizeof cfg->s3_access_key,
                                   cfg->s3_secret_key, sizeof cfg->s3_secret_key, why, sizeof why) != 0) {
            fprintf(stderr, "gpujobd: %s: %s\n", both_names("s3-credentials-file", name, sizeof name), why);
            return -1;
        }
        return 0;
    }
    const char *key = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
    if (!key || !*key || !secret || !*secret || strlen(key) >= sizeof cfg->s3_access_key ||
        strlen(secret) >= sizeof cfg->s3_secret_key) {
        fprintf(stderr, "gpujobd: --blob-store s3 needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                        "--s3-credentials-file\n");
        return -1;
    }
    snprintf(cfg->s3_access_key, sizeof cfg->s3_access_key, "%s", key);
    snprintf(cfg->s3_secret_key, sizeof cfg->s3_secret_key, "%s", secret);
    return 0;
}

/* --results-dicomweb-*: a URL of http(s) without spaces; the auth file's one header line
 * "Name: value" of printable characters, given only with the URL. 0, or -1 (said). */
static int check_results_dicomweb(const struct gj_config *cfg)
{
    const char *url = cfg->results_dicomweb_url, *auth = cfg->results_dicomweb_auth;
    if (url[0] && ((strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0) || strpbrk(url, " \t\r\n"))) {
        fprintf(stderr, "gpujobd: --results-dicomweb-url: not an http:// or https:// URL\n");
        return -1;
    }
    if ((cfg->results_dicomweb_auth_file[0] || cfg->results_dicomweb_ca[0]) && !url[0]) {
        fprintf(stderr, "gpujobd: --results-dicomweb-auth-file and --results-dicomweb-ca need --results-dicomweb-url\n");
        return -1;
    }
    if (!cfg->results_dicomweb_auth_file[0])
        return 0;
    const char *colon = strchr(auth, ':'), *space = strchr(auth, ' ');
    int printable = 1;
    for (const char *p = auth; *p; p++)
        printable &= (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f;
    if (!colon || colon == auth || !printable || (space && space < colon)) {
        fprintf(stderr, "gpujobd: --results-dicomweb-auth-file: %s does not hold one header line "
                        "'Name: value' (as 'Authorization: Bearer ...')\n", cfg->results_dicomweb_auth_file);
        return -1;
    }
    return 0;
}

static int check_consistency(struct gj_config *cfg)
{
    if ((cfg->tls_cert[0] != 0) != (cfg->tls_key[0] != 0)) {
        fprintf(stderr, "gpujobd: --tls-cert and --tls-key: give both or neither\n");
        return -1;
    }
    if (cfg->insecure_http && cfg->tls_cert[0]) {
        fprintf(stderr, "gpujobd: --insecure-http: cannot be combined with --tls-cert\n");
        return -1;
    }
    if (!cfg->results_dicomweb_auth_file[0] && check_results_dicomweb(cfg) != 0)
        return -1;   /* with the file: checked once it is read */
    if (!cfg->data_dir[0]) {
        fprintf(stderr, "gpujobd: --data-dir: must not be empty\n");
        return -1;
    }
    if (cfg->cpu_workers < 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        cfg->cpu_workers = cores >= 8 ? (int)(cores / 4) : 1;
    }
    if (cfg->metrics_host[0] && cfg->metrics_port == cfg->listen_port && strcmp(cfg->role, "worker") != 0) {
        fprintf(stderr, "gpujobd: --metrics-listen: port %d is the API's (--listen)\n", cfg->metrics_port);
        return -1;
    }
    if (cfg->tls_client_ca[0] && cfg->insecure_http && (!cfg->grpc_host[0] || cfg->grpc_insecure)) {
        fprintf(stderr, "gpujobd: --tls-client-ca: no listener uses TLS (--insecure-http%s)\n",
                cfg->grpc_host[0] ? ", --grpc-insecure" : "");
        return -1;
    }
    if (cfg->tls_crl[0] && !cfg->tls_client_ca[0]) {
        fprintf(stderr, "gpujobd: --tls-crl: the CRLs are of --tls-client-ca's CAs; give --tls-client-ca\n");
        return -1;
    }
    if (cfg->grpc_host[0] && cfg->grpc_port == cfg->listen_port) {
        fprintf(stderr, "gpujobd: --grpc-listen: port %d is the API's (--listen)\n", cfg->grpc_port);
        return -1;
    }
    if (cfg->http_threads == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        long n = cores > 0 ? 2 * cores : 4;
        cfg->http_threads = (int)(n < 4 ? 4 : n > 32 ? 32 : n);
    }
    if (cfg->db_reserve_for_reads < 0)
        cfg->db_reserve_for_reads = cfg->db_pool_size / 4;
    if (cfg->db_reserve_for_reads >= cfg->db_pool_size) {
        fprintf(stderr, "gpujobd: --db-reserve-for-reads: must be below --db-pool-size (%d)\n", cfg->db_pool_size);
        return -1;
    }
    if (!cfg->work_dir[0] &&
        snprintf(cfg->work_dir, sizeof cfg->work_dir, "%s/work", cfg->data_dir) >=
            (int)sizeof cfg->work_dir) {
        fprintf(stderr, "gpujobd: --data-dir: too long\n");
        return -1;
    }
    return 0;
}

/*
 * Test switches: environment variables with no flag, because no deployment should
 * set them; read here like every setting, and checked alike (a bad value stops
 * start-up with one line naming it).
 *
 *   GPUJOBD_FAKE_GPUS=N[:BYTES]  devices.c reports N simulated GPUs of BYTES each
 *                                (default 16G; a size such as 1073741824 or 8G)
 *                                instead of asking CUDA, so that placement, /v1/gpus
 *                                and the per-GPU metrics are tested on machines
 *                                without one. Jobs still run on the CPU path.
 *   GPUJOBD_PG_NOSYNC=1          the embedded PostgreSQL runs initdb --no-sync and
 *                                fsync=off: seconds saved per test cluster, data
 *                                lost on a crash.
 *   GPUJOBD_FAKE_HOST_MEMORY=BYTES  host admission (host_memory.c) takes the host to
 *                                have BYTES of memory (a size such as 2G) instead of
 *                                reading /proc/meminfo and the cgroup limit, so that
 *                                its limits are tested on any machine.
 */
static int parse_fake_gpus(const char *value, struct gj_test_switches *t)
{
    char *end;
    errno = 0;
    long n = strtol(value, &end, 10);
    unsigned long long bytes = 16ull << 30;
    if (errno || end == value || n < 0 || n > GJ_MAX_DEVICES)
        return -1;
    if (*end == ':' && (parse_bytes(end + 1, &bytes) != 0 || bytes == 0))
        return -1;
    if (*end && *end != ':')
        return -1;
    t->fake_gpus = (int)n;
    t->fake_gpu_bytes = bytes;
    return 0;
}

int gj_config_load_test_switches(struct gj_test_switches *t)
{
    memset(t, 0, sizeof *t);
    t->fake_gpus = -1;
    const char *v = getenv("GPUJOBD_FAKE_GPUS");
    if (v && *v && parse_fake_gpus(v, t) != 0)
        return fail(NULL, "GPUJOBD_FAKE_GPUS", "expected N[:BYTES], N from 0 to 64, e.g. 2:16G", v);
    const char *nosync = getenv("GPUJOBD_PG_NOSYNC");
    if (nosync && *nosync && parse_bool(nosync, &t->pg_nosync) != 0)
        return fail(NULL, "GPUJOBD_PG_NOSYNC", "expected 1 or 0", nosync);
    const char *host = getenv("GPUJOBD_FAKE_HOST_MEMORY");
    unsigned long long host_bytes = 0;
    if (host && *host && (parse_bytes(host, &host_bytes) != 0 || host_bytes == 0))
        return fail(NULL, "GPUJOBD_FAKE_HOST_MEMORY", "expected a size such as 2G or 1073741824", host);
    t->fake_host_memory = host_bytes;
    if (t->fake_gpus >= 0 && gj_devices_simulate(t->fake_gpus, t->fake_gpu_bytes) != 0)
        return fail(NULL, "GPUJOBD_FAKE_GPUS", "read after the devices were discovered (internal)", v);
    return 0;
}

int gj_config_load(struct gj_config *cfg, int argc, char **argv, int for_migrate)
{
    set_defaults(cfg);

    for (size_t i = 0; i < N_SETTINGS; i++) {
        if (for_migrate && !settings[i].migrate)
            continue;
        char env[64];
        env_name(settings[i].flag, env, sizeof env);
        const char *v = getenv(env);
        if (v && *v && apply(cfg, &settings[i], v, env))
            return -1;
    }

    struct option opts[N_SETTINGS + 2];
    size_t n = 0;
    for (size_t i = 0; i < N_SETTINGS; i++) {
        if (for_migrate && !settings[i].migrate)
            continue;
        opts[n++] = (struct option){ settings[i].flag,
                                     settings[i].type == T_BOOL ? optional_argument : required_argument,
                                     NULL, 1000 + (int)i };
    }
    opts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
    opts[n] = (struct option){ NULL, 0, NULL, 0 };

    optind = 1;
    opterr = 0;
    int c, origins_flagged = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == 'h') {
            print_help(argv[0], for_migrate);
            return 1;
        }
        if (c == '?' || c == ':') {
            const char *bad = argv[optind - 1] ? argv[optind - 1] : "?";
            if (c == ':')
                fprintf(stderr, "gpujobd: %s: needs a value\n", bad);
            else
                fprintf(stderr, "gpujobd: %s: unknown option (see gpujobd %s --help)\n", bad, argv[0]);
            return -1;
        }
        const struct setting *s = &settings[c - 1000];
        if (s->type == T_ORIGINS && !origins_flagged++)
            cfg->cors_origins[0] = '\0';          /* flags win over the variable, then add up */
        if (apply(cfg, s, optarg ? optarg : "", NULL))
            return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "gpujobd: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (check_consistency(cfg) != 0 || load_secret_files(cfg, for_migrate) != 0 ||
        gj_config_load_test_switches(&cfg->test) != 0)
        return -1;
    cfg->pg.nosync = cfg->test.pg_nosync;
    return 0;
}
