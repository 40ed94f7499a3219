/*
 * config.h — the settings of `gpujobd serve` and `migrate`: flags, their
 * GPUJOBD_* environment twins (flags win), embedded defaults, and validation
 * that stops start-up with one line naming the bad setting.
 */
#ifndef GJ_CONFIG_H
#define GJ_CONFIG_H

#include <stdint.h>

#include "common/fsutil.h"
#include "service/db/pg_embedded.h"

enum gj_placement_policy { GJ_PLACE_LEAST_LOADED, GJ_PLACE_ROUND_ROBIN, GJ_PLACE_RANDOM };

/* Switches for tests only: environment variables without a flag (config.c says why). */
struct gj_test_switches {
    int fake_gpus;                 /* GPUJOBD_FAKE_GPUS=N[:BYTES]; -1 = the real devices */
    uint64_t fake_gpu_bytes;
    int pg_nosync;                 /* GPUJOBD_PG_NOSYNC=1 */
    uint64_t fake_host_memory;     /* GPUJOBD_FAKE_HOST_MEMORY=BYTES; 0 = the real host */
};

struct gj_config {
    char listen_host[256];
    int listen_port;
    char data_dir[GJ_PATH_MAX];
    char database_url[2048];       /* "" = embedded PostgreSQL under data_dir/pg */
    char database_password_file[GJ_PATH_MAX];
    char database_password[1024];  /* from that file; "" = the URL's, or none */
    char admin_key_file[GJ_PATH_MAX];
    char admin_key[64];            /* from that file; "" = made at the first start */
    char tls_cert[GJ_PATH_MAX];    /* "" with tls_key "" = self-signed under data_dir/tls */
    char tls_key[GJ_PATH_MAX];
    int insecure_http;
    int hsts_max_age;              /* Strict-Transport-Security max-age on HTTPS answers; 0 = none */
    int workers_per_gpu;
    int cpu_workers;               /* -1 = number of cores (at least 1) */
    enum gj_placement_policy placement;
    uint64_t max_body_bytes;       /* upload limit (default 16 GiB) */
    uint64_t max_json_bytes;       /* JSON request bodies (default 4 MiB) */
    int max_connections;
    int max_connections_per_ip;    /* 0 = no per-address limit */
    int header_timeout_seconds;    /* request line and headers must be complete within this */
    int http_idle_seconds;         /* a connection with no traffic this long is closed */
    int http_threads;              /* HTTP event-loop threads; 0 = 2 per core, 4 to 32 */
    char metrics_host[256];        /* --metrics-listen: "" = no metrics listener */
    int metrics_port;
    char grpc_host[256];           /* --grpc-listen: "" = no gRPC listener (service/grpc) */
    int grpc_port;
    int grpc_insecure;             /* plain-text gRPC, for TLS terminated elsewhere */
    char tls_client_ca[GJ_PATH_MAX];   /* PEM bundle of client-certificate issuers; "" = none */
    char tls_crl[GJ_PATH_MAX];         /* PEM CRLs of those issuers; "" = none */
    uint64_t grpc_max_message;     /* bytes of one gRPC message */
    int grpc_threads;              /* calls served at once */
    int grpc_stream_idle_seconds;  /* a stream that neither sends nor reads this long is cut */
    int grpc_calls_per_tenant;     /* gRPC calls of one tenant at once; 0 = three quarters of the threads */
    int max_uploads;               /* concurrent uploads */
    int max_uploads_per_tenant;    /* concurrent uploads of one tenant (429 past it) */
    int max_chain_depth;           /* waiting jobs a job may wait behind, itself included (422 past it) */
    int max_waiting_jobs;          /* jobs of one tenant waiting for other jobs at once (429 past it) */
    uint64_t upload_min_rate;      /* bytes/s an upload must keep up over the window; 0 = off */
    int upload_rate_window_seconds;
    uint64_t upload_disk_reserve;  /* free disk an upload's spool must leave */
    int archive_max_ratio;         /* a CARMIN archive's files: at most this times its zip's bytes */
    uint64_t archive_max_bytes;    /* a CARMIN archive's files, in all */
    int db_reserve_for_reads;      /* pool connections only reads may take; -1 = a quarter */
    uint64_t host_memory_reserve;  /* host memory kept for the service, not for jobs */
    uint64_t render_memory;        /* host memory DICOM renders, frames, thumbnails hold */
    uint64_t tenant_storage_quota; /* bytes a tenant may store without a quota of its own; 0 = none */
    int db_pool_size;
    int lease_seconds;             /* job lease; heartbeat every third of it */
    int poll_interval_ms;          /* claim poll fallback when no NOTIFY arrives */
    int retry_backoff_ms;          /* first retry delay; doubles per attempt, capped at 5 min */
    int default_max_attempts;
    int job_timeout_seconds;       /* a job's time limit when its submit gives none; 0: none */
    int shutdown_grace_seconds;    /* SIGTERM: running jobs get this long to finish */
    int max_wait_seconds;          /* cap of ?wait= long polls */
    double rate_limit_per_key;     /* requests per second per key; 0 = off */
    int api_key_cache_ms;          /* a verified key is answered without the database this long; 0 = off */
    int job_cache_ms;              /* a job's status answer is kept at most this long (job_cache.h); 0 = off */
    char log_level[16];
    char work_dir[GJ_PATH_MAX];    /* scratch for running jobs (default data_dir/work) */
    char role[16];                 /* "all" (API + workers), "api", "worker" */
    struct gj_pg_options pg;       /* --pg-bindir, --pg-user; nosync = test.pg_nosync */
    struct gj_test_switches test;
    /* Inference (service/infer/): */
    char models_dir[GJ_PATH_MAX];  /* the model repository (default data_dir/models) */
    /* Triton's --model-control-mode: "on-use" (gpujobd's default: a model loads on its first
     * use, admins load and unload), "none" (every model loaded at start; no load/unload
     * API), "explicit" (only --load-model at start; load/unload API), "poll" (as none, and
     * models_dir read again every repository_poll_secs). */
    char model_control_mode[16];
    char load_models[1024];        /* --load-model: names, comma-separated ("*": every one) */
    int repository_poll_secs;      /* poll mode: seconds between reads of models_dir */
    char pseudonym_secret[520];    /* "" = made at the first start, kept in the database */
    char pseudonym_secret_file[GJ_PATH_MAX];   /* fills pseudonym_secret */
    int infer_purge_phi;           /* delete an infer job's DICOM inputs once results are stored */
    int triton_metrics;            /* --triton-metrics: nv_inference_* beside gpujobd_inference_* */
    int infer_max_queue;           /* requests waiting per model batcher (default 1024) */
    int64_t infer_queue_timeout_us;   /* time a request may wait in a batcher (default 30 s) */
    int infer_threads;             /* ONNX CPU threads per executor; 0 = CPUs (less one serving
                                    * the API) / instances */
    /* Callbacks of settled jobs (service/workflow/, callback_policy.h): */
    char callback_allow[4096];     /* "host[:port],..." callbacks may call; "" = none */
    int callback_allow_private;    /* also loopback, private, link-local addresses */
    int callback_backoff_ms;       /* first retry delay of a delivery; doubles, capped at 1 h */
    char callback_cacert[1024];    /* CA bundle for https callbacks; "" = the system's */
    /* Structured Reports delivered by STOW-RS (service/infer/delivery.c): */
    char results_dicomweb_url[1024];   /* "" = none */
    char results_dicomweb_auth_file[GJ_PATH_MAX];   /* fills results_dicomweb_auth */
    char results_dicomweb_auth[1024];  /* one header line, "Name: value" */
    char results_dicomweb_ca[GJ_PATH_MAX];
    int results_dicomweb_retry_ms;
    /* Browsers (service/auth/session.c, service/http/cors.c): */
    char cors_origins[2048];       /* origins allowed to call the API, comma-separated; "" = none */
    int session_idle_minutes;      /* a portal session ends after this long unused (default 60) */
    int session_hours;             /* and this long after sign-in in any case (default 12) */
    /* Where blobs live (issue 30; service/db/blob_s3.h): */
    char blob_store[16];           /* "postgres" (large objects, default) or "s3" */
    char s3_endpoint[1024];        /* http(s)://host[:port] */
    char s3_bucket[64];
    char s3_region[64];            /* default us-east-1 */
    char s3_addressing[16];        /* "path" (default) or "virtual" (bucket.host) */
    char s3_credentials_file[GJ_PATH_MAX];   /* AWS shared-credentials format; else AWS_* variables */
    char s3_ca_file[GJ_PATH_MAX];  /* PEM CAs the store's certificate is checked against */
    int s3_stale_upload_seconds;   /* a multipart upload older than this is a dead replica's */
    char s3_access_key[256];       /* from the file or AWS_ACCESS_KEY_ID; never logged */
    char s3_secret_key[256];       /* from the file or AWS_SECRET_ACCESS_KEY; never logged */
};

/* Defaults, then environment, then argv (argv[0] is the subcommand name), then the
 * test switches. Applies at once what process-wide modules hold: the log level
 * (log.c) and simulated GPUs (devices.c).
 * On a bad setting: prints "gpujobd: --flag: why" to stderr and returns -1.
 * Returns 1 when --help was printed. */
int gj_config_load(struct gj_config *cfg, int argc, char **argv, int for_migrate);
/* The test switches alone, for subcommands with flags of their own (`gpujobd run`);
 * applied like gj_config_load does. 0, or -1 with one line naming the variable. */
int gj_config_load_test_switches(struct gj_test_switches *t);

const char *gj_placement_name(enum gj_placement_policy p);

#endif
