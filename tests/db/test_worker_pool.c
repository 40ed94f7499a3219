/*
 * test_worker_pool.c — the worker threads end to end against a real PostgreSQL,
 * with the noop kind: inputs materialized and outputs stored, permanent and
 * transient failures, cancellation of a running job, the CPU fallback of a job
 * that fits no GPU, rescue of a dead worker's lease by the maintenance thread,
 * a lease stolen from under a running job, and a graceful stop that gives
 * running jobs back to the queue.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/fsutil.h"
#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/db/notify.h"
#include "service/jobs/job_store.h"
#include "service/server.h"
#include "service/jobs/worker_pool.h"
#include "pg_test_util.h"

struct fixture {
    char url[1024];
    PGconn *conn;
    char tenant[GJ_UUID_LEN + 1];
    struct gj_server *srv;
    char work[512];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(gj_test_pg_migrated_db(f->url, sizeof f->url), 0);
    f->conn = gj_test_pg_connect(f->url);
    PGresult *r = PQexec(f->conn, "INSERT INTO tenants (name) VALUES ('acme') RETURNING id");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    snprintf(f->tenant, sizeof f->tenant, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    snprintf(f->work, sizeof f->work, "%s/wp-XXXXXX", gj_test_dir());
    assert_non_null(mkdtemp(f->work));

    struct gj_server *srv = calloc(1, sizeof *srv);
    assert_non_null(srv);
    srv->cfg.lease_seconds = 3;
    srv->cfg.poll_interval_ms = 200;
    srv->cfg.retry_backoff_ms = 50;
    srv->cfg.workers_per_gpu = 1;
    srv->cfg.cpu_workers = 1;
    snprintf(srv->cfg.work_dir, sizeof srv->cfg.work_dir, "%s", f->work);
    snprintf(srv->database_url, sizeof srv->database_url, "%s", f->url);
    snprintf(srv->worker_id, sizeof srv->worker_id, "testhost:%d:1", (int)getpid());
    srv->db = gj_db_pool_open(f->url, 6);
    assert_non_null(srv->db);
    srv->notifier = gj_notifier_start(f->url);
    assert_non_null(srv->notifier);
    /* One simulated GPU of 1000 bytes with one slot, plus one CPU slot. */
    const uint64_t mem[1] = { 1000 };
    gj_placement_init(&srv->placement, GJ_PLACE_LEAST_LOADED, 1, mem, 1, 1, 1);
    f->srv = srv;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    struct gj_server *srv = f->srv;
    if (srv->workers)
        gj_worker_pool_stop(srv->workers, 0);
    gj_notifier_stop(srv->notifier);
    gj_db_pool_close(srv->db);
    gj_placement_destroy(&srv->placement);
    free(srv);
    PQfinish(f->conn);
    gj_rm_rf(f->work);
    free(f);
    return 0;
}

static void submit_kind(struct fixture *f, const char *kind, const char *params, int max_attempts,
                        const char *input_name, const char *input_blob, char id[GJ_UUID_LEN + 1])
{
    json_t *pj = json_loads(params, 0, NULL);
    assert_non_null(pj);
    struct gj_submit_input in = { input_name, input_blob, 0 };
    struct gj_submit s = { .tenant_id = f->tenant, .kind = kind, .params = pj, .max_attempts = max_attempts,
                           .inputs = &in, .n_inputs = input_blob ? 1 : 0 };
    struct gj_submitted out;
    assert_int_equal(gj_queue_submit(f->conn, &s, &out), GJ_SUBMIT_OK);
    json_decref(pj);
    snprintf(id, GJ_UUID_LEN + 1, "%s", out.id);
}

static void submit(struct fixture *f, const char *params, int max_attempts, const char *input_blob,
                   char id[GJ_UUID_LEN + 1])
{
    submit_kind(f, "noop", params, max_attempts, "input", input_blob, id);
}

/* The blob id and sha256 (hex) of one output of a job. */
static void output_blob(struct fixture *f, const char *job, const char *name, char id[GJ_UUID_LEN + 1],
                        char sha[65])
{
    const char *p[] = { job, name };
    PGresult *r = gj_db_exec(f->conn,
                             "SELECT o.blob_id, encode(b.sha256, 'hex') FROM job_outputs o"
                             " JOIN blobs b ON b.id = o.blob_id WHERE o.job_id = $1 AND o.name = $2",
                             2, p, NULL);
    assert_non_null(r);
    assert_int_equal(PQntuples(r), 1);
    snprintf(id, GJ_UUID_LEN + 1, "%s", PQgetvalue(r, 0, 0));
    if (sha)
        snprintf(sha, 65, "%s", PQgetvalue(r, 0, 1));
    PQclear(r);
}

/* One value of a job's row as text ("" for NULL). */
static const char *job_field(struct fixture *f, const char *id, const char *expr)
{
    return gj_test_job_field(f->conn, id, expr);
}

/* Waits until the job's state is state (up to ms). */
static int wait_state(struct fixture *f, const char *id, const char *state, int ms)
{
    for (int waited = 0; waited <= ms; waited += 50) {
        if (strcmp(job_field(f, id, "state"), state) == 0)
            return 1;
        usleep(50000);
    }
    fprintf(stderr, "job %s is %s, not %s\n", id, job_field(f, id, "state"), state);
    return 0;
}

static void start_pool(struct fixture *f)
{
    f->srv->workers = gj_worker_pool_start(f->srv);
    assert_non_null(f->srv->workers);
}

static void test_runs_jobs(void **state)
{
    struct fixture *f = *state;
    start_pool(f);

    struct gj_blob_writer *w = gj_blob_writer_open(f->conn, f->tenant, "text/plain", 1);
    assert_non_null(w);
    assert_int_equal(gj_blob_writer_write(w, "12345", 5), 0);
    char blob[GJ_UUID_LEN + 1];
    assert_int_equal(gj_blob_writer_commit(w, NULL, blob), 0);

    char ok[40], fail[40], flaky[40], big[40];
    submit(f, "{\"output_bytes\": 3000}", 3, blob, ok);
    submit(f, "{\"fail_with\": \"boom\"}", 3, NULL, fail);
    submit(f, "{\"fail_with\": \"flaky\", \"fail_transient\": true}", 2, NULL, flaky);
    submit(f, "{\"device_bytes\": 5000}", 3, NULL, big);

    assert_true(wait_state(f, ok, "succeeded", 10000));
    assert_string_equal(job_field(f, ok, "device"), "gpu:0");
    assert_string_equal(job_field(f, ok, "progress"), "1");
    const char *p[] = { ok };
    PGresult *r = gj_db_exec(f->conn,
                             "SELECT o.name, b.size FROM job_outputs o JOIN blobs b ON b.id = o.blob_id"
                             " WHERE o.job_id = $1 ORDER BY o.name", 1, p, NULL);
    assert_non_null(r);
    assert_int_equal(PQntuples(r), 2);
    assert_string_equal(PQgetvalue(r, 0, 0), "data.bin");
    assert_string_equal(PQgetvalue(r, 0, 1), "3000");
    assert_string_equal(PQgetvalue(r, 1, 0), "result.json");
    PQclear(r);
    /* result.json saw the materialized input (5 bytes). */
    r = gj_db_exec(f->conn,
                   "SELECT convert_from(lo_get(b.lo_oid), 'UTF8')::jsonb->'inputs'->>'input'"
                   " FROM job_outputs o JOIN blobs b ON b.id = o.blob_id"
                   " WHERE o.job_id = $1 AND o.name = 'result.json'", 1, p, NULL);
    assert_non_null(r);
    assert_string_equal(PQgetvalue(r, 0, 0), "5");
    PQclear(r);

    assert_true(wait_state(f, fail, "failed", 10000));
    assert_string_equal(job_field(f, fail, "error->>'message'"), "boom");
    assert_string_equal(job_field(f, fail, "attempts"), "1");

    assert_true(wait_state(f, flaky, "failed", 10000));
    assert_string_equal(job_field(f, flaky, "attempts"), "2");
    assert_string_equal(job_field(f, flaky, "error->>'message'"), "flaky");

    /* Fits no GPU at all (5000 > 1000 bytes): the CPU. */
    assert_true(wait_state(f, big, "succeeded", 10000));
    assert_string_equal(job_field(f, big, "device"), "cpu");

    /* The worker row exists while the pool runs; scratch is cleaned. */
    PGresult *wr = gj_db_exec(f->conn, "SELECT count(*) FROM workers", 0, NULL, NULL);
    assert_string_equal(PQgetvalue(wr, 0, 0), "1");
    PQclear(wr);
    gj_worker_pool_stop(f->srv->workers, 5);
    f->srv->workers = NULL;
    wr = gj_db_exec(f->conn, "SELECT count(*) FROM workers", 0, NULL, NULL);
    assert_string_equal(PQgetvalue(wr, 0, 0), "0");
    PQclear(wr);
    char scratch[700];
    snprintf(scratch, sizeof scratch, "%s/scratch/%s", f->work, ok);
    assert_int_not_equal(access(scratch, F_OK), 0);
}

static void test_cancel_running(void **state)
{
    struct fixture *f = *state;
    start_pool(f);
    char slow[40];
    submit(f, "{\"sleep_ms\": 60000}", 3, NULL, slow);
    assert_true(wait_state(f, slow, "running", 10000));
    usleep(300000);
    assert_int_equal(gj_job_cancel(f->conn, NULL, f->tenant, slow), 1);
    /* The notifier's cancel callback stops it well before the next heartbeat. The row says
     * canceled as soon as the cancel commits; the worker lets go of the job just after. */
    assert_true(wait_state(f, slow, "canceled", 2000));
    for (int i = 0; i < 40 && gj_worker_pool_running(f->srv->workers) > 0; i++)
        usleep(50000);
    assert_int_equal(gj_worker_pool_running(f->srv->workers), 0);
}

static void test_rescue_and_stolen_lease(void **state)
{
    struct fixture *f = *state;
    /* A job held by a dead worker: the maintenance thread requeues it, then it runs. */
    char ghost[40];
    submit(f, "{}", 3, NULL, ghost);
    const char *p[] = { ghost };
    assert_int_equal(gj_db_cmd(f->conn,
                               "UPDATE jobs SET state = 'running', attempts = 1, lease_owner = 'ghost',"
                               " lease_token = nextval('job_lease_token_seq'),"
                               " lease_expires_at = now() - interval '1 second' WHERE id = $1",
                               1, p), 0);
    start_pool(f);
    assert_true(wait_state(f, ghost, "succeeded", 10000));
    assert_string_equal(job_field(f, ghost, "attempts"), "2");

    /* A running job whose lease is taken over elsewhere stops at the next heartbeat
     * and records nothing. */
    char slow[40];
    submit(f, "{\"sleep_ms\": 60000}", 3, NULL, slow);
    assert_true(wait_state(f, slow, "running", 10000));
    const char *s[] = { slow };
    assert_int_equal(gj_db_cmd(f->conn,
                               "UPDATE jobs SET lease_owner = 'thief',"
                               " lease_token = nextval('job_lease_token_seq'),"
                               " lease_expires_at = now() + interval '1 hour' WHERE id = $1",
                               1, s), 0);
    for (int i = 0; i < 100 && gj_worker_pool_running(f->srv->workers) > 0; i++)
        usleep(50000);
    assert_int_equal(gj_worker_pool_running(f->srv->workers), 0);
    assert_string_equal(job_field(f, slow, "state"), "running");
    assert_string_equal(job_field(f, slow, "lease_owner"), "thief");
}

static void test_graceful_stop_releases(void **state)
{
    struct fixture *f = *state;
    start_pool(f);
    char slow[40];
    submit(f, "{\"sleep_ms\": 60000}", 3, NULL, slow);
    assert_true(wait_state(f, slow, "running", 10000));
    usleep(200000);
    /* Grace 0: asked to stop at once, given back without counting the attempt. */
    gj_worker_pool_stop(f->srv->workers, 0);
    f->srv->workers = NULL;
    assert_string_equal(job_field(f, slow, "state"), "queued");
    assert_string_equal(job_field(f, slow, "attempts"), "0");
    assert_string_equal(job_field(f, slow, "lease_owner IS NULL"), "true");
}

/* Within the grace period a running job finishes; a claimed job still waiting for
 * a device is given back at once rather than started. */
static void test_graceful_stop_finishes_running(void **state)
{
    struct fixture *f = *state;
    start_pool(f);
    char a[40], b[40];
    submit(f, "{\"sleep_ms\": 3000, \"use_gpu\": false}", 3, NULL, a);
    assert_true(wait_state(f, a, "running", 10000));
    submit(f, "{\"sleep_ms\": 1500, \"use_gpu\": false}", 3, NULL, b);
    /* b is claimed by the second thread (a GPU slot is free) and waits for the CPU slot. */
    assert_true(wait_state(f, b, "running", 10000));
    assert_string_equal(job_field(f, b, "device IS NULL"), "true");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    gj_worker_pool_stop(f->srv->workers, 20);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    f->srv->workers = NULL;
    assert_true(t1.tv_sec - t0.tv_sec < 10);
    assert_string_equal(job_field(f, a, "state"), "succeeded");
    assert_string_equal(job_field(f, b, "state"), "queued");
    assert_string_equal(job_field(f, b, "attempts"), "0");
}

/* Sub-tasks through the pool: a recon job whose device limit splits it into z-slab
 * children; the children run as ordinary jobs, the parent resumes at stage 1 with
 * their outputs and assembles a volume identical to the unsplit reconstruction. */
static void test_subtasks_recon(void **state)
{
    struct fixture *f = *state;
    start_pool(f);
    const char *geom = "{\"type\": \"parallel2d\", \"angles_deg\": {\"start\": 0, \"step\": 2, \"count\": 90},"
                       " \"detector\": {\"cols\": 91, \"spacing_u\": 1.0}}";
    const char *vol = "{\"nx\": 64, \"ny\": 64, \"nz\": 5}";
    char params[1024], ph[40], whole[40], split[40], proj[GJ_UUID_LEN + 1];
    snprintf(params, sizeof params, "{\"geometry\": %s, \"volume\": %s, \"batch\": 5}", geom, vol);
    submit_kind(f, "phantom", params, 1, NULL, NULL, ph);
    assert_true(wait_state(f, ph, "succeeded", 30000));
    output_blob(f, ph, "projections.nrrd", proj, NULL);

    /* The module's own estimate sets the limit: a limit of 1 byte is refused with
     * "... one slice needs N bytes ..."; a limit of N makes slabs of one slice. */
    char probe[40];
    snprintf(params, sizeof params,
             "{\"algorithm\": \"sart\", \"iterations\": 2, \"geometry\": %s, \"volume\": %s,"
             " \"batch\": 5, \"max_device_bytes\": 1}", geom, vol);
    submit_kind(f, "recon", params, 1, "projections", proj, probe);
    assert_true(wait_state(f, probe, "failed", 30000));
    const char *msg = strstr(job_field(f, probe, "error->>'message'"), "needs ");
    unsigned long long per_slice = 0;
    /* The message is what this test measures the split by: a changed wording fails it. */
    if (!msg || sscanf(msg, "needs %llu bytes", &per_slice) != 1 || per_slice == 0)
        fail_msg("recon's refusal no longer names its per-slice need (\"... needs N bytes ...\"): %s",
                 job_field(f, probe, "error->>'message'"));
    snprintf(params, sizeof params,
             "{\"algorithm\": \"sart\", \"iterations\": 2, \"geometry\": %s, \"volume\": %s,"
             " \"batch\": 5}", geom, vol);
    submit_kind(f, "recon", params, 1, "projections", proj, whole);
    snprintf(params, sizeof params,
             "{\"algorithm\": \"sart\", \"iterations\": 2, \"geometry\": %s, \"volume\": %s,"
             " \"batch\": 5, \"max_device_bytes\": %llu}", geom, vol, per_slice);
    submit_kind(f, "recon", params, 1, "projections", proj, split);
    assert_true(wait_state(f, whole, "succeeded", 60000));
    assert_true(wait_state(f, split, "succeeded", 60000));

    const char *p[] = { split };
    PGresult *r = gj_db_exec(f->conn,
                             "SELECT count(*) FILTER (WHERE state = 'succeeded'), count(*),"
                             " count(DISTINCT i.blob_id) FROM jobs j JOIN job_inputs i ON i.job_id = j.id"
                             " WHERE j.parent_id = $1", 1, p, NULL);
    assert_non_null(r);
    assert_string_equal(PQgetvalue(r, 0, 0), "5");   /* one slab per slice */
    assert_string_equal(PQgetvalue(r, 0, 1), "5");
    assert_string_equal(PQgetvalue(r, 0, 2), "1");   /* the parent's input blob, shared */
    PQclear(r);
    assert_string_equal(job_field(f, split, "stage"), "1");
    char a[GJ_UUID_LEN + 1], b[GJ_UUID_LEN + 1], sha_a[65], sha_b[65];
    output_blob(f, whole, "volume.nrrd", a, sha_a);
    output_blob(f, split, "volume.nrrd", b, sha_b);
    assert_string_equal(sha_a, sha_b);   /* split == unsplit, bit for bit */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_runs_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_running, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rescue_and_stolen_lease, setup, teardown),
        cmocka_unit_test_setup_teardown(test_graceful_stop_releases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_graceful_stop_finishes_running, setup, teardown),
        cmocka_unit_test_setup_teardown(test_subtasks_recon, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
