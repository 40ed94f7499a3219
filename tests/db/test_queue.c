/*
 * test_queue.c — the job queue against a real PostgreSQL (ARCHITECTURE.md: a job's life; testing and figures):
 * claim order, SKIP LOCKED, lease fencing, retries with backoff, cancellation,
 * sub-tasks, rescue of expired leases, the workers registry, and LISTEN wake-ups
 * through the notifier. Each test gets a freshly migrated database.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/fsutil.h"
#include "service/db/blobstore.h"
#include "service/db/db.h"
#include "service/db/notify.h"
#include "service/jobs/job_cache.h"
#include "service/jobs/job_store.h"
#include "pg_test_util.h"

static const char *const noop_kinds[] = { "noop", NULL };

struct fixture {
    char url[1024];
    PGconn *conn;
    char tenant[GJ_UUID_LEN + 1];
    char dir[512];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    if (gj_test_pg_migrated_db(f->url, sizeof f->url) != 0) {
        free(f);
        return -1;
    }
    f->conn = gj_test_pg_connect(f->url);
    PGresult *r = PQexec(f->conn, "INSERT INTO tenants (name) VALUES ('acme') RETURNING id");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        PQclear(r);
        return -1;
    }
    snprintf(f->tenant, sizeof f->tenant, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    snprintf(f->dir, sizeof f->dir, "%s/q-XXXXXX", gj_test_dir());
    if (!mkdtemp(f->dir))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    PQfinish(f->conn);
    gj_rm_rf(f->dir);
    free(f);
    return 0;
}

/* Creates a job the one way there is (gj_queue_submit); returns its id in id. */
static void submit(struct fixture *f, const char *kind, int priority, int max_attempts,
                   const char *params, char id[GJ_UUID_LEN + 1])
{
    json_t *pj = json_loads(params ? params : "{}", 0, NULL);
    assert_non_null(pj);
    struct gj_submit s = { .tenant_id = f->tenant, .kind = kind, .params = pj, .priority = priority,
                           .max_attempts = max_attempts };
    struct gj_submitted out;
    assert_int_equal(gj_queue_submit(f->conn, &s, &out), GJ_SUBMIT_OK);
    json_decref(pj);
    snprintf(id, GJ_UUID_LEN + 1, "%s", out.id);
}

/* One value of a job's row as text ("" for NULL). */
static const char *job_field(struct fixture *f, const char *id, const char *expr)
{
    return gj_test_job_field(f->conn, id, expr);
}

static long count(struct fixture *f, const char *sql, const char *param)
{
    const char *p[] = { param };
    PGresult *r = gj_db_exec(f->conn, sql, param ? 1 : 0, param ? p : NULL, NULL);
    assert_non_null(r);
    long n = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

static void exec_ok(struct fixture *f, const char *sql, const char *param)
{
    const char *p[] = { param };
    assert_int_equal(gj_db_cmd(f->conn, sql, param ? 1 : 0, param ? p : NULL), 0);
}

static void expire_lease(struct fixture *f, const char *id)
{
    exec_ok(f, "UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", id);
}

static void make_ready(struct fixture *f, const char *id)
{
    exec_ok(f, "UPDATE jobs SET run_after = now() - interval '1 second' WHERE id = $1", id);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[1024];
    assert_int_equal(gj_path_join(path, sizeof path, dir, name), 0);
    assert_int_equal(gj_write_file(path, text, strlen(text)), 0);
}

static void make_dir(struct fixture *f, const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", f->dir, name);
    assert_int_equal(gj_mkdir_p(out, 0700), 0);
}

/* Reads a whole blob (small) into buf; returns its size. */
static long read_blob(struct fixture *f, const char *blob_id, char *buf, size_t cap)
{
    struct gj_blob_info info;
    assert_int_equal(gj_blob_lookup(f->conn, NULL, blob_id, &info), 1);
    assert_int_equal(gj_db_begin(f->conn), 0);
    struct gj_blob_reader *rd = gj_blob_reader_open(f->conn, info.lo_oid);
    assert_non_null(rd);
    long n = gj_blob_reader_read(rd, 0, buf, cap);
    gj_blob_reader_close(rd);
    assert_int_equal(gj_db_commit(f->conn), 0);
    return n;
}

/* ---- claim ------------------------------------------------------------ */

static void test_claim_order(void **state)
{
    struct fixture *f = *state;
    char a[40], b[40], c[40], d[40], other[40], later[40];
    submit(f, "noop", 0, 3, NULL, a);
    submit(f, "noop", 5, 3, NULL, b);
    submit(f, "noop", 5, 3, NULL, c);
    submit(f, "noop", 0, 3, NULL, d);
    submit(f, "other", 9, 3, NULL, other);
    submit(f, "noop", 9, 3, NULL, later);
    exec_ok(f, "UPDATE jobs SET run_after = now() + interval '1 hour' WHERE id = $1", later);

    const char *expect[] = { b, c, a, d };
    for (int i = 0; i < 4; i++) {
        struct gj_claim cl;
        assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &cl), 1);
        assert_string_equal(cl.id, expect[i]);
        assert_string_equal(cl.kind, "noop");
        assert_string_equal(cl.tenant_id, f->tenant);
        assert_int_equal(cl.attempts, 1);
        assert_int_equal(cl.max_attempts, 3);
        assert_int_equal(cl.stage, 0);
        assert_string_equal(cl.parent_id, "");
        assert_non_null(cl.params);
        assert_true(strlen(cl.lease_token) > 0);
        assert_string_equal(job_field(f, cl.id, "state"), "running");
        assert_string_equal(job_field(f, cl.id, "lease_owner"), "w1");
        assert_string_equal(job_field(f, cl.id, "lease_expires_at > now() + interval '20 seconds'"),
                            "true");
        gj_claim_clear(&cl);
    }
    /* Only the other kind and the delayed one are left: nothing for noop. */
    struct gj_claim cl;
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &cl), 0);
    const char *both[] = { "noop", "other", NULL };
    assert_int_equal(gj_queue_claim(f->conn, "w1", both, 30, &cl), 1);
    assert_string_equal(cl.id, other);
    gj_claim_clear(&cl);
    /* Fresh tokens. */
    assert_int_equal(count(f, "SELECT count(DISTINCT lease_token) FROM jobs WHERE state = 'running'", NULL), 5);
}

static void test_skip_locked(void **state)
{
    struct fixture *f = *state;
    char a[40], b[40];
    submit(f, "noop", 1, 3, NULL, a);
    submit(f, "noop", 0, 3, NULL, b);
    PGconn *other = gj_test_pg_connect(f->url);
    /* The first claimer has not committed: the second must skip its row, not block. */
    assert_int_equal(gj_db_begin(f->conn), 0);
    struct gj_claim c1, c2;
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &c1), 1);
    assert_string_equal(c1.id, a);
    assert_int_equal(gj_queue_claim(other, "w2", noop_kinds, 30, &c2), 1);
    assert_string_equal(c2.id, b);
    assert_int_equal(gj_db_commit(f->conn), 0);
    assert_string_equal(job_field(f, a, "lease_owner"), "w1");
    assert_string_equal(job_field(f, b, "lease_owner"), "w2");
    struct gj_claim c3;
    assert_int_equal(gj_queue_claim(other, "w2", noop_kinds, 30, &c3), 0);
    gj_claim_clear(&c1);
    gj_claim_clear(&c2);
    PQfinish(other);
}

/* ---- fencing ---------------------------------------------------------- */

static void test_fencing(void **state)
{
    struct fixture *f = *state;
    char id[40];
    submit(f, "noop", 0, 3, "{\"sleep_ms\": 5}", id);
    struct gj_claim old, cur;
    assert_int_equal(gj_queue_claim(f->conn, "zombie", noop_kinds, 30, &old), 1);
    char out_old[600], out_new[600];
    make_dir(f, "old", out_old, sizeof out_old);
    make_dir(f, "new", out_new, sizeof out_new);
    write_text(out_old, "result.json", "{\"who\":\"zombie\"}");
    write_text(out_old, "zombie.csv", "a,b\n");
    write_text(out_new, "result.json", "{\"who\":\"retry\"}");
    write_text(out_new, "image.png", "PNG");
    write_text(out_new, "volume.nrrd", "NRRD0004");
    char sub[700];
    snprintf(sub, sizeof sub, "%s/subdir", out_new);
    assert_int_equal(gj_mkdir_p(sub, 0700), 0);   /* not a regular file: not an output */
    char link[700];
    snprintf(link, sizeof link, "%s/link.txt", out_new);
    assert_int_equal(symlink("/etc/passwd", link), 0);   /* neither is a link */

    /* The worker vanishes: its lease expires and another process rescues the job. */
    assert_int_equal(gj_queue_heartbeat(f->conn, &old, 30, 0.5, "halfway"), 0);
    assert_string_equal(job_field(f, id, "message"), "halfway");
    expire_lease(f, id);
    assert_int_equal(gj_queue_rescue_expired(f->conn, 0), 1);
    assert_string_equal(job_field(f, id, "state"), "queued");
    assert_string_equal(job_field(f, id, "error->>'message'"), "lease expired (worker lost)");
    assert_int_equal(gj_queue_claim(f->conn, "w2", noop_kinds, 30, &cur), 1);
    assert_string_equal(cur.id, id);
    assert_int_equal(cur.attempts, 2);
    assert_string_not_equal(cur.lease_token, old.lease_token);

    /* The zombie is refused everywhere and changes nothing. */
    assert_int_equal(gj_queue_heartbeat(f->conn, &old, 30, 0.9, "zombie"), 2);
    assert_int_equal(gj_queue_set_device(f->conn, &old, "gpu:7"), 1);
    assert_int_equal(gj_queue_finish_success(f->conn, &old, out_old, NULL), 1);
    assert_int_equal(count(f, "SELECT count(*) FROM job_outputs WHERE job_id = $1", id), 0);
    assert_int_equal(count(f, "SELECT count(*) FROM blobs WHERE owner_job = $1", id), 0);
    assert_int_equal(count(f, "SELECT count(*) FROM pg_largeobject_metadata", NULL), 0);
    assert_string_equal(job_field(f, id, "state"), "running");
    json_t *err = json_pack("{s:s}", "message", "zombie failure");
    assert_int_equal(gj_queue_finish_failure(f->conn, &old, err, 1, 0), 1);
    json_decref(err);
    assert_int_equal(gj_queue_finish_canceled(f->conn, &old), 1);
    assert_int_equal(gj_queue_release(f->conn, &old), 1);
    assert_string_equal(job_field(f, id, "state"), "running");
    assert_string_equal(job_field(f, id, "lease_owner"), "w2");

    /* The retry's result is accepted, with its own outputs only. */
    assert_int_equal(gj_queue_set_device(f->conn, &cur, "cpu"), 0);
    assert_int_equal(gj_queue_finish_success(f->conn, &cur, out_new, NULL), 0);
    assert_string_equal(job_field(f, id, "state"), "succeeded");
    assert_string_equal(job_field(f, id, "device"), "cpu");
    assert_string_equal(job_field(f, id, "error IS NULL"), "true");
    assert_string_equal(job_field(f, id, "finished_at IS NOT NULL"), "true");
    assert_int_equal(count(f, "SELECT count(*) FROM job_outputs WHERE job_id = $1", id), 3);
    PGresult *r = PQexecParams(f->conn,
                               "SELECT o.name, o.content_type, o.blob_id, b.owner_job = o.job_id"
                               " FROM job_outputs o JOIN blobs b ON b.id = o.blob_id"
                               " WHERE o.job_id = $1 ORDER BY o.name",
                               1, NULL, (const char *const[]){ id }, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(r), 3);
    assert_string_equal(PQgetvalue(r, 0, 0), "image.png");
    assert_string_equal(PQgetvalue(r, 0, 1), "image/png");
    assert_string_equal(PQgetvalue(r, 1, 0), "result.json");
    assert_string_equal(PQgetvalue(r, 1, 1), "application/json");
    assert_string_equal(PQgetvalue(r, 2, 0), "volume.nrrd");
    assert_string_equal(PQgetvalue(r, 2, 1), "application/octet-stream");
    for (int i = 0; i < 3; i++)
        assert_string_equal(PQgetvalue(r, i, 3), "t");
    char blob[GJ_UUID_LEN + 1];
    snprintf(blob, sizeof blob, "%s", PQgetvalue(r, 1, 2));
    PQclear(r);
    char buf[256];
    long n = read_blob(f, blob, buf, sizeof buf);
    assert_int_equal(n, (long)strlen("{\"who\":\"retry\"}"));
    assert_memory_equal(buf, "{\"who\":\"retry\"}", (size_t)n);

    /* Finishing twice is refused too: each job finishes exactly once. */
    assert_int_equal(gj_queue_finish_success(f->conn, &cur, out_new, NULL), 1);
    assert_int_equal(count(f, "SELECT count(*) FROM job_outputs WHERE job_id = $1", id), 3);
    /* The history shows both attempts. */
    assert_true(count(f, "SELECT count(*) FROM job_events WHERE job_id = $1 AND kind = 'state'", id) >= 5);
    gj_claim_clear(&old);
    gj_claim_clear(&cur);
}

/* A worker cut off from the database past its lease (its heartbeats could not reach it)
 * comes back before any rescue ran: its lease is over all the same, so it changes
 * nothing, and the job goes to rescue, which requeues it once. */
static void test_expired_lease_refused_before_rescue(void **state)
{
    struct fixture *f = *state;
    char id[40];
    submit(f, "noop", 0, 3, "{}", id);
    struct gj_claim c;
    assert_int_equal(gj_queue_claim(f->conn, "cut-off", noop_kinds, 30, &c), 1);
    char out[600];
    make_dir(f, "out", out, sizeof out);
    write_text(out, "result.json", "{}");
    assert_int_equal(gj_queue_heartbeat(f->conn, &c, 30, 0.5, NULL), 0);
    expire_lease(f, id);
    assert_int_equal(gj_queue_heartbeat(f->conn, &c, 30, 0.9, NULL), 2);
    assert_int_equal(gj_queue_set_device(f->conn, &c, "cpu"), 1);
    assert_int_equal(gj_queue_finish_success(f->conn, &c, out, NULL), 1);
    assert_int_equal(count(f, "SELECT count(*) FROM job_outputs WHERE job_id = $1", id), 0);
    json_t *err = json_pack("{s:s}", "message", "late failure");
    assert_int_equal(gj_queue_finish_failure(f->conn, &c, err, 1, 0), 1);
    json_decref(err);
    assert_int_equal(gj_queue_finish_canceled(f->conn, &c), 1);
    assert_int_equal(gj_queue_release(f->conn, &c), 1);
    assert_string_equal(job_field(f, id, "state"), "running");
    assert_int_equal(gj_queue_rescue_expired(f->conn, 0), 1);
    assert_string_equal(job_field(f, id, "state"), "queued");
    assert_string_equal(job_field(f, id, "attempts"), "1");
    assert_int_equal(gj_queue_rescue_expired(f->conn, 0), 0);
    gj_claim_clear(&c);
}

static void test_unsafe_output_name_fails_job(void **state)
{
    struct fixture *f = *state;
    char id[40];
    submit(f, "noop", 0, 3, NULL, id);
    struct gj_claim c;
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &c), 1);
    char out[600];
    make_dir(f, "unsafe", out, sizeof out);
    write_text(out, "good.json", "{}");
    write_text(out, "bad\\name", "x");
    assert_int_equal(gj_queue_finish_success(f->conn, &c, out, NULL), 2);
    assert_string_equal(job_field(f, id, "state"), "failed");
    assert_int_equal(count(f, "SELECT count(*) FROM job_outputs WHERE job_id = $1", id), 0);
    assert_int_equal(count(f, "SELECT count(*) FROM blobs", NULL), 0);
    gj_claim_clear(&c);
}

/* ---- retries ---------------------------------------------------------- */

static void test_retries_with_backoff(void **state)
{
    struct fixture *f = *state;
    char id[40];
    submit(f, "noop", 0, 3, NULL, id);
    json_t *err = json_pack("{s:s, s:s}", "message", "device busy", "field", "device");
    for (int attempt = 1; attempt <= 3; attempt++) {
        struct gj_claim c;
        assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &c), 1);
        assert_int_equal(c.attempts, attempt);
        assert_int_equal(gj_queue_finish_failure(f->conn, &c, err, 1, 100), 0);
        gj_claim_clear(&c);
        if (attempt < 3) {
            assert_string_equal(job_field(f, id, "state"), "queued");
            /* backoff * 2^(attempt-1), measured against the statement's own now() */
            char expect[32];
            snprintf(expect, sizeof expect, "%d", 100 << (attempt - 1));
            assert_string_equal(
                job_field(f, id, "round(extract(epoch FROM run_after - updated_at) * 1000)"), expect);
            /* Not claimable before its time. */
            assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &c), 0);
            make_ready(f, id);
        }
    }
    assert_string_equal(job_field(f, id, "state"), "failed");
    assert_string_equal(job_field(f, id, "attempts"), "3");
    assert_string_equal(job_field(f, id, "error->>'message'"), "device busy");
    assert_string_equal(job_field(f, id, "error->>'field'"), "device");
    assert_string_equal(job_field(f, id, "finished_at IS NOT NULL"), "true");
    assert_string_equal(job_field(f, id, "lease_token IS NULL"), "true");

    /* A permanent failure is not retried. */
    char p[40];
    submit(f, "noop", 0, 3, NULL, p);
    struct gj_claim c;
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &c), 1);
    assert_int_equal(gj_queue_finish_failure(f->conn, &c, err, 0, 100), 0);
    assert_string_equal(job_field(f, p, "state"), "failed");
    gj_claim_clear(&c);

    /* The delay is capped at 5 minutes. */
    char cap[40];
    submit(f, "noop", 0, 10, NULL, cap);
    for (int attempt = 1; attempt <= 2; attempt++) {
        assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &c), 1);
        assert_int_equal(gj_queue_finish_failure(f->conn, &c, err, 1, 200000), 0);
        gj_claim_clear(&c);
        make_ready(f, cap);
    }
    exec_ok(f, "UPDATE jobs SET run_after = now() WHERE id = $1 AND false", cap);
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &c), 1);
    assert_int_equal(gj_queue_finish_failure(f->conn, &c, err, 1, 200000), 0);
    gj_claim_clear(&c);
    assert_string_equal(job_field(f, cap, "round(extract(epoch FROM run_after - updated_at))"), "300");
    json_decref(err);
}

/* ---- cancel ----------------------------------------------------------- */

struct cancel_seen {
    char id[64];
    int calls;
};

static void on_cancel(const char *job_id, void *arg)
{
    struct cancel_seen *s = arg;
    snprintf(s->id, sizeof s->id, "%s", job_id);
    __atomic_add_fetch(&s->calls, 1, __ATOMIC_SEQ_CST);
}

static void test_cancel(void **state)
{
    struct fixture *f = *state;
    struct gj_notifier *n = gj_notifier_start(f->url);
    assert_non_null(n);
    struct cancel_seen seen = { "", 0 };
    gj_notifier_on_cancel(n, on_cancel, &seen);
    /* Give the notifier time to LISTEN. */
    for (int i = 0; i < 100 && gj_notifier_queue_seq(n) == 0; i++)
        usleep(20000);
    uint64_t qseq = gj_notifier_queue_seq(n);
    assert_true(qseq > 0);

    char queued[40], running[40];
    submit(f, "noop", 0, 3, NULL, running);
    /* The insert NOTIFYs gpujobd_queue: waiters wake. */
    gj_notifier_wait_queue(n, qseq, 5000);
    assert_true(gj_notifier_queue_seq(n) > qseq);
    submit(f, "noop", 0, 3, NULL, queued);

    struct gj_claim c;
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &c), 1);
    assert_string_equal(c.id, running);

    /* Queued: canceled at once. Another tenant, or a bad id: nothing. */
    assert_int_equal(gj_job_cancel(f->conn, NULL, "00000000-0000-0000-0000-000000000000", queued), 0);
    assert_int_equal(gj_job_cancel(f->conn, NULL, f->tenant, "not-a-uuid"), 0);
    assert_string_equal(job_field(f, queued, "state"), "queued");
    assert_int_equal(gj_job_cancel(f->conn, NULL, f->tenant, queued), 1);
    assert_string_equal(job_field(f, queued, "state"), "canceled");
    assert_int_equal(gj_job_cancel(f->conn, NULL, f->tenant, queued), 0);   /* already finished */

    /* Running: flagged; the notifier hears of it; the heartbeat says so. */
    uint64_t jseq = gj_notifier_jobs_seq(n);
    assert_int_equal(gj_queue_heartbeat(f->conn, &c, 30, 0.25, NULL), 0);
    assert_int_equal(gj_job_cancel(f->conn, NULL, f->tenant, running), 1);
    assert_string_equal(job_field(f, running, "state"), "running");
    assert_string_equal(job_field(f, running, "cancel_requested"), "true");
    /* Two notifications: the queued job's cancel, then the running one's. */
    for (int i = 0; i < 250 && __atomic_load_n(&seen.calls, __ATOMIC_SEQ_CST) < 2; i++)
        usleep(20000);
    assert_int_equal(__atomic_load_n(&seen.calls, __ATOMIC_SEQ_CST), 2);
    assert_string_equal(seen.id, running);
    gj_notifier_wait_jobs(n, jseq, 5000);
    assert_true(gj_notifier_jobs_seq(n) > jseq);
    assert_int_equal(gj_queue_heartbeat(f->conn, &c, 30, 0.5, NULL), 1);
    assert_int_equal(gj_queue_finish_canceled(f->conn, &c), 0);
    assert_string_equal(job_field(f, running, "state"), "canceled");
    assert_int_equal(gj_job_cancel(f->conn, NULL, NULL, running), 0);
    gj_claim_clear(&c);

    /* A transient failure of a job asked to stop is not retried. */
    char retry[40];
    submit(f, "noop", 0, 3, NULL, retry);
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &c), 1);
    assert_int_equal(gj_job_cancel(f->conn, NULL, NULL, retry), 1);
    json_t *err = json_pack("{s:s}", "message", "interrupted");
    assert_int_equal(gj_queue_finish_failure(f->conn, &c, err, 1, 0), 0);
    json_decref(err);
    assert_string_equal(job_field(f, retry, "state"), "failed");
    gj_claim_clear(&c);

    gj_notifier_on_cancel(n, NULL, NULL);
    gj_notifier_stop(n);
}

/* ---- sub-tasks -------------------------------------------------------- */

static void make_blob(struct fixture *f, const char *text, char id[GJ_UUID_LEN + 1])
{
    struct gj_blob_writer *w = gj_blob_writer_open(f->conn, f->tenant, "text/plain", 1);
    assert_non_null(w);
    assert_int_equal(gj_blob_writer_write(w, text, strlen(text)), 0);
    assert_int_equal(gj_blob_writer_commit(w, NULL, id), 0);
}

static void test_subtasks(void **state)
{
    struct fixture *f = *state;
    char parent[40], blob[GJ_UUID_LEN + 1];
    submit(f, "noop", 4, 2, NULL, parent);
    make_blob(f, "slab", blob);
    struct gj_claim pc;
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &pc), 1);

    /* Children are inserted in a transaction that finish_waiting commits. */
    PGconn *other = gj_test_pg_connect(f->url);
    const char *names[] = { "input" };
    const char *blobs[] = { blob };
    json_t *params = json_pack("{s:i}", "sleep_ms", 1);
    assert_int_equal(gj_queue_spawn_child(f->conn, &pc, 0, "noop", params, names, blobs, 1), 0);
    assert_int_equal(gj_queue_spawn_child(f->conn, &pc, 1, "noop", params, NULL, NULL, 0), 0);
    json_decref(params);
    PGresult *r = PQexec(other, "SELECT count(*) FROM jobs WHERE parent_id IS NOT NULL");
    assert_string_equal(PQgetvalue(r, 0, 0), "0");   /* not visible before the commit */
    PQclear(r);
    struct gj_claim none;
    assert_int_equal(gj_queue_claim(other, "w2", noop_kinds, 30, &none), 0);
    assert_int_equal(gj_queue_finish_waiting(f->conn, &pc), 0);
    assert_int_equal(PQtransactionStatus(f->conn), PQTRANS_IDLE);
    assert_string_equal(job_field(f, parent, "state"), "subtasks");
    assert_string_equal(job_field(f, parent, "children_pending"), "2");
    assert_string_equal(job_field(f, parent, "gj_public_state(state, stage)"), "running");
    assert_int_equal(count(f, "SELECT count(*) FROM jobs WHERE parent_id = $1 AND state = 'queued'"
                              " AND priority = 4", parent), 2);
    assert_int_equal(count(f, "SELECT count(*) FROM job_inputs i JOIN jobs j ON j.id = i.job_id"
                              " WHERE j.parent_id = $1", parent), 1);

    /* Both children succeed (any worker): the parent is queued again at stage 1. */
    for (int i = 0; i < 2; i++) {
        struct gj_claim cc;
        assert_int_equal(gj_queue_claim(other, "w2", noop_kinds, 30, &cc), 1);
        assert_string_equal(cc.parent_id, parent);
        assert_int_equal(cc.child_index, i);
        char out[600], name[32];
        snprintf(name, sizeof name, "child%d", i);
        make_dir(f, name, out, sizeof out);
        write_text(out, "part.json", i ? "[1]" : "[0]");
        assert_int_equal(gj_queue_finish_success(other, &cc, out, NULL), 0);
        gj_claim_clear(&cc);
        assert_string_equal(job_field(f, parent, "state"), i == 0 ? "subtasks" : "queued");
    }
    assert_string_equal(job_field(f, parent, "stage"), "1");
    assert_string_equal(job_field(f, parent, "children_pending"), "0");
    gj_claim_clear(&pc);
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &pc), 1);
    assert_string_equal(pc.id, parent);
    assert_int_equal(pc.stage, 1);
    assert_int_equal(pc.attempts, 1);   /* a new stage starts its attempts afresh */
    char out[600];
    make_dir(f, "parent", out, sizeof out);
    write_text(out, "volume.nrrd", "NRRD0004");
    assert_int_equal(gj_queue_finish_success(f->conn, &pc, out, NULL), 0);
    assert_string_equal(job_field(f, parent, "state"), "succeeded");
    gj_claim_clear(&pc);

    /* A child that fails fails its parent and cancels its queued siblings. */
    char p2[40];
    submit(f, "noop", 0, 2, NULL, p2);
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &pc), 1);
    assert_string_equal(pc.id, p2);
    for (int i = 0; i < 2; i++)
        assert_int_equal(gj_queue_spawn_child(f->conn, &pc, i, "noop", NULL, NULL, NULL, 0), 0);
    assert_int_equal(gj_queue_finish_waiting(f->conn, &pc), 0);
    struct gj_claim cc;
    assert_int_equal(gj_queue_claim(other, "w2", noop_kinds, 30, &cc), 1);
    assert_string_equal(cc.parent_id, p2);
    json_t *err = json_pack("{s:s}", "message", "slab does not fit");
    assert_int_equal(gj_queue_finish_failure(other, &cc, err, 0, 0), 0);
    json_decref(err);
    gj_claim_clear(&cc);
    assert_string_equal(job_field(f, p2, "state"), "failed");
    assert_string_equal(job_field(f, p2, "error->>'message'"), "sub-task 0 failed: slab does not fit");
    assert_int_equal(count(f, "SELECT count(*) FROM jobs WHERE parent_id = $1 AND state = 'canceled'", p2), 1);
    gj_claim_clear(&pc);

    /* A parent that lost its lease spawns nothing. */
    char p3[40];
    submit(f, "noop", 0, 2, NULL, p3);
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &pc), 1);
    expire_lease(f, p3);
    assert_int_equal(gj_queue_rescue_expired(other, 0), 1);
    assert_int_equal(gj_queue_spawn_child(f->conn, &pc, 0, "noop", NULL, NULL, NULL, 0), 1);
    assert_int_equal(PQtransactionStatus(f->conn), PQTRANS_IDLE);
    assert_int_equal(gj_queue_finish_waiting(f->conn, &pc), 1);
    assert_int_equal(count(f, "SELECT count(*) FROM jobs WHERE parent_id = $1", p3), 0);
    assert_string_equal(job_field(f, p3, "state"), "queued");
    gj_claim_clear(&pc);

    /* WAIT_CHILDREN with no child: straight back to the queue at the next stage. */
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &pc), 1);
    assert_string_equal(pc.id, p3);
    assert_int_equal(gj_queue_finish_waiting(f->conn, &pc), 0);
    assert_string_equal(job_field(f, p3, "state"), "queued");
    assert_string_equal(job_field(f, p3, "stage"), "1");
    gj_claim_clear(&pc);

    /* Canceling a waiting parent cancels its children. */
    char p4[40];
    submit(f, "noop", 0, 2, NULL, p4);
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &pc), 1);
    if (strcmp(pc.id, p4) != 0) {   /* p3 (stage 1) may come first */
        assert_int_equal(gj_queue_finish_canceled(f->conn, &pc), 0);
        gj_claim_clear(&pc);
        assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &pc), 1);
    }
    assert_string_equal(pc.id, p4);
    assert_int_equal(gj_queue_spawn_child(f->conn, &pc, 0, "noop", NULL, NULL, NULL, 0), 0);
    assert_int_equal(gj_queue_finish_waiting(f->conn, &pc), 0);
    assert_int_equal(gj_job_cancel(f->conn, NULL, f->tenant, p4), 1);
    assert_string_equal(job_field(f, p4, "state"), "canceled");
    assert_int_equal(count(f, "SELECT count(*) FROM jobs WHERE parent_id = $1 AND state = 'canceled'", p4), 1);
    gj_claim_clear(&pc);
    PQfinish(other);
}

/* ---- rescue ----------------------------------------------------------- */

static void test_rescue(void **state)
{
    struct fixture *f = *state;
    char once[40], twice[40], alive[40], asked[40];
    submit(f, "noop", 3, 1, NULL, once);
    submit(f, "noop", 2, 3, NULL, twice);
    submit(f, "noop", 1, 3, NULL, alive);
    submit(f, "noop", 0, 3, NULL, asked);
    struct gj_claim c[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &c[i]), 1);
    expire_lease(f, once);
    expire_lease(f, twice);
    expire_lease(f, asked);
    assert_int_equal(gj_job_cancel(f->conn, NULL, NULL, asked), 1);
    assert_int_equal(gj_queue_rescue_expired(f->conn, 1000), 3);
    /* Attempts used up: failed. */
    assert_string_equal(job_field(f, once, "state"), "failed");
    assert_string_equal(job_field(f, once, "error->>'message'"), "lease expired (worker lost)");
    /* Attempts left: queued after the backoff. */
    assert_string_equal(job_field(f, twice, "state"), "queued");
    assert_string_equal(job_field(f, twice, "round(extract(epoch FROM run_after - updated_at) * 1000)"),
                        "1000");
    assert_string_equal(job_field(f, twice, "lease_owner IS NULL AND lease_token IS NULL"), "true");
    /* Cancel requested: canceled rather than retried. */
    assert_string_equal(job_field(f, asked, "state"), "canceled");
    /* A live lease is left alone. */
    assert_string_equal(job_field(f, alive, "state"), "running");
    assert_int_equal(gj_queue_rescue_expired(f->conn, 1000), 0);
    /* Heartbeats keep a lease alive and report progress. */
    assert_int_equal(gj_queue_heartbeat(f->conn, &c[2], 60, 0.75, "three quarters"), 0);
    assert_string_equal(job_field(f, alive, "progress"), "0.75");
    assert_string_equal(job_field(f, alive, "lease_expires_at > now() + interval '50 seconds'"), "true");
    assert_int_equal(gj_queue_heartbeat(f->conn, &c[2], 60, -1, NULL), 0);
    assert_string_equal(job_field(f, alive, "progress"), "0.75");
    assert_string_equal(job_field(f, alive, "message"), "three quarters");
    /* A graceful release does not count the attempt. */
    assert_int_equal(gj_queue_release(f->conn, &c[2]), 0);
    assert_string_equal(job_field(f, alive, "state"), "queued");
    assert_string_equal(job_field(f, alive, "attempts"), "0");
    for (int i = 0; i < 4; i++)
        gj_claim_clear(&c[i]);
}

/* The LISTEN connection dropped by the server: the notifier reconnects and
 * wake-ups resume. */
static void test_notifier_reconnects(void **state)
{
    struct fixture *f = *state;
    struct gj_notifier *n = gj_notifier_start(f->url);
    assert_non_null(n);
    for (int i = 0; i < 100 && gj_notifier_queue_seq(n) == 0; i++)
        usleep(20000);
    assert_true(gj_notifier_queue_seq(n) > 0);
    uint64_t before = gj_notifier_queue_seq(n);
    static const char listener_pid[] = "SELECT coalesce(max(pid), 0) FROM pg_stat_activity"
                                       " WHERE query LIKE 'LISTEN%' AND datname = current_database()";
    long old_pid = count(f, listener_pid, NULL);
    assert_true(old_pid > 0);
    PGresult *r = PQexec(f->conn, "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity"
                                  " WHERE query LIKE 'LISTEN%' AND datname = current_database()");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(r, 0, 0), "1");
    PQclear(r);
    /* Reconnected: a LISTEN backend with a new pid appears (the terminated one may linger in
     * pg_stat_activity until it exits, so a count alone would race), and the reconnect itself
     * wakes waiters. */
    long new_pid = old_pid;
    for (int i = 0; i < 250 && (new_pid == old_pid || new_pid == 0); i++) {
        usleep(20000);
        new_pid = count(f, listener_pid, NULL);
    }
    assert_true(new_pid != old_pid && new_pid != 0);
    gj_notifier_wait_queue(n, before, 5000);
    assert_true(gj_notifier_queue_seq(n) > before);
    usleep(100000);
    uint64_t seq = gj_notifier_queue_seq(n);
    char id[40];
    submit(f, "noop", 0, 3, NULL, id);
    gj_notifier_wait_queue(n, seq, 5000);
    assert_true(gj_notifier_queue_seq(n) > seq);
    /* kick wakes local waiters without the database. */
    seq = gj_notifier_queue_seq(n);
    gj_notifier_kick(n);
    assert_int_equal(gj_notifier_queue_seq(n), seq + 1);
    gj_notifier_stop(n);
}

static void test_workers_registry(void **state)
{
    struct fixture *f = *state;
    json_t *devices = json_pack("[{s:s, s:I}]", "device", "gpu:0", "total_bytes", (json_int_t)1 << 30);
    assert_int_equal(gj_queue_worker_register(f->conn, "host:1:2", "host", 1, devices), 0);
    assert_int_equal(gj_queue_worker_register(f->conn, "host:1:2", "host", 1, devices), 0);
    json_decref(devices);
    assert_int_equal(count(f, "SELECT count(*) FROM workers WHERE id = $1", "host:1:2"), 1);
    assert_int_equal(count(f, "SELECT jsonb_array_length(devices) FROM workers WHERE id = $1", "host:1:2"), 1);
    assert_int_equal(gj_queue_worker_heartbeat(f->conn, "host:1:2"), 0);
    assert_int_equal(gj_queue_worker_unregister(f->conn, "host:1:2"), 0);
    assert_int_equal(count(f, "SELECT count(*) FROM workers", NULL), 0);
}

/* A blob of tenant, committed on its own; its id in id. */
static void tenant_blob(struct fixture *f, const char *tenant, char id[GJ_UUID_LEN + 1])
{
    struct gj_blob_writer *w = gj_blob_writer_open(f->conn, tenant, "text/plain", 1);
    assert_non_null(w);
    assert_int_equal(gj_blob_writer_write(w, "x", 1), 0);
    assert_int_equal(gj_blob_writer_commit(w, NULL, id), 0);
}

/* gj_queue_submit, the one way a job is created: inputs only from the job's tenant (and
 * owned when asked), an idempotency key used once, nothing left by a refusal. */
static void test_submit(void **state)
{
    struct fixture *f = *state;
    PGresult *t = PQexec(f->conn, "INSERT INTO tenants (name) VALUES ('other') RETURNING id");
    assert_int_equal(PQresultStatus(t), PGRES_TUPLES_OK);
    char other[GJ_UUID_LEN + 1], mine[GJ_UUID_LEN + 1], theirs[GJ_UUID_LEN + 1];
    snprintf(other, sizeof other, "%s", PQgetvalue(t, 0, 0));
    PQclear(t);
    tenant_blob(f, f->tenant, mine);
    tenant_blob(f, other, theirs);
    long jobs0 = count(f, "SELECT count(*) FROM jobs", NULL);

    struct gj_submit_input in[2] = { { "a", mine, 1 }, { "b", theirs, 0 } };
    struct gj_submit s = { .tenant_id = f->tenant, .kind = "noop", .inputs = in, .n_inputs = 2,
                           .idempotency_key = "k1", .request_hash = "00" };
    struct gj_submitted out;
    assert_int_equal(gj_queue_submit(f->conn, &s, &out), GJ_SUBMIT_INPUT_GONE);
    assert_string_equal(out.bad_input, "b");
    assert_int_equal(out.err.status, 422);   /* worded here, answered by the route as it is */
    assert_string_equal(out.err.field, "inputs.b");
    assert_string_equal(out.err.message, "the blob of input 'b' was deleted");
    assert_int_equal(count(f, "SELECT count(*) FROM jobs", NULL), jobs0);   /* rolled back */
    assert_int_equal(count(f, "SELECT count(*) FROM blobs WHERE owner_job IS NOT NULL", NULL), 0);

    s.n_inputs = 1;
    assert_int_equal(gj_queue_submit(f->conn, &s, &out), GJ_SUBMIT_OK);
    assert_int_equal(count(f, "SELECT count(*) FROM jobs", NULL), jobs0 + 1);
    assert_string_equal(job_field(f, out.id, "state"), "queued");
    assert_string_equal(job_field(f, out.id, "max_attempts"), "3");
    assert_int_equal(count(f, "SELECT count(*) FROM job_inputs WHERE job_id = $1::uuid", out.id), 1);
    assert_int_equal(count(f, "SELECT count(*) FROM blobs WHERE owner_job = $1::uuid", out.id), 1);
    char first[GJ_UUID_LEN + 1];
    snprintf(first, sizeof first, "%s", out.id);
    assert_int_equal(gj_queue_submit(f->conn, &s, &out), GJ_SUBMIT_DUPLICATE);
    assert_int_equal(out.err.status, 503);   /* unless the caller replays the first */
    assert_int_equal(count(f, "SELECT count(*) FROM jobs", NULL), jobs0 + 1);
    s.idempotency_key = NULL;   /* no key: a second job */
    s.inputs = NULL;
    s.n_inputs = 0;
    assert_int_equal(gj_queue_submit(f->conn, &s, &out), GJ_SUBMIT_OK);
    assert_string_not_equal(out.id, first);
}

/* The store's changes forget the job's cached status answer themselves (read your write on
 * this replica before the NOTIFY comes): rename, cancel, delete; not another job's. */
static int cached(struct gj_job_cache *jc, const char *tenant, const char *id)
{
    char st[16];
    size_t len;
    char *body = gj_job_cache_get(jc, id, tenant, st, &len);
    free(body);
    return body != NULL;
}

static void cache_put(struct gj_job_cache *jc, const char *tenant, const char *id)
{
    json_t *job = json_pack("{s:s}", "id", id);
    gj_job_cache_put(jc, tenant, job, "queued", gj_job_cache_ticket(jc, id));
    json_decref(job);
}

static void test_changes_forget_cache(void **state)
{
    struct fixture *f = *state;
    struct gj_job_cache *jc = gj_job_cache_new(64, 60000);
    assert_non_null(jc);
    gj_job_cache_set_live(jc, 1);
    struct gj_error err;
    enum gj_job_deleted how;
    char a[40], other[40];
    submit(f, "noop", 0, 3, NULL, a);
    submit(f, "noop", 0, 3, NULL, other);
    cache_put(jc, f->tenant, other);

    cache_put(jc, f->tenant, a);
    assert_true(cached(jc, f->tenant, a));
    assert_int_equal(gj_job_rename(f->conn, jc, f->tenant, a, "renamed", &err), 0);
    assert_false(cached(jc, f->tenant, a));

    cache_put(jc, f->tenant, a);
    assert_int_equal(gj_job_set_timeout(f->conn, jc, f->tenant, a, 60, &err), 0);
    assert_false(cached(jc, f->tenant, a));

    cache_put(jc, f->tenant, a);
    assert_int_equal(gj_job_cancel(f->conn, jc, f->tenant, a), 1);
    assert_false(cached(jc, f->tenant, a));

    cache_put(jc, f->tenant, a);
    assert_int_equal(gj_job_delete(f->conn, jc, f->tenant, a, &how, &err), 0);
    assert_false(cached(jc, f->tenant, a));

    assert_true(cached(jc, f->tenant, other));
    gj_job_cache_free(jc);
}

/* The one delete rule (job_state.h, issue 25), through the store as both APIs use it: a job no
 * worker runs goes at once; a running one is canceled and goes at the commit of its end,
 * whichever end it comes to; a sub-task only with its parent, which takes its running
 * sub-tasks with it. */
static void test_delete_rule(void **state)
{
    struct fixture *f = *state;
    const char *gone = "SELECT count(*) FROM jobs WHERE id = $1::uuid";
    enum gj_job_deleted how;
    struct gj_error err;
    char queued[40], a[40], b[40], parent[40], out[600];

    submit(f, "noop", 0, 3, NULL, queued);
    assert_int_equal(gj_job_delete(f->conn, NULL, "00000000-0000-0000-0000-000000000000", queued, &how, &err), -1);
    assert_int_equal(err.status, 404);
    assert_int_equal(gj_job_delete(f->conn, NULL, f->tenant, "not-a-uuid", &how, &err), -1);
    assert_int_equal(err.status, 404);
    assert_int_equal(gj_job_delete(f->conn, NULL, f->tenant, queued, &how, &err), 0);
    assert_int_equal(how, GJ_JOB_DELETED);
    assert_int_equal(count(f, gone, queued), 0);

    /* running: canceled and marked; gone when its worker ends it, as canceled or succeeded */
    struct gj_claim ca, cb;
    submit(f, "noop", 9, 3, NULL, a);
    submit(f, "noop", 8, 3, NULL, b);
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &ca), 1);
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &cb), 1);
    assert_string_equal(ca.id, a);
    for (int i = 0; i < 2; i++) {
        const char *id = i ? b : a;
        assert_int_equal(gj_job_delete(f->conn, NULL, f->tenant, id, &how, &err), 0);
        assert_int_equal(how, GJ_JOB_DELETED_WHEN_STOPPED);
        assert_string_equal(job_field(f, id, "state"), "running");
        assert_string_equal(job_field(f, id, "cancel_requested"), "true");
        assert_string_equal(job_field(f, id, "delete_requested"), "true");
    }
    assert_int_equal(gj_queue_finish_canceled(f->conn, &ca), 0);
    assert_int_equal(count(f, gone, a), 0);
    make_dir(f, "del-out", out, sizeof out);
    write_text(out, "result.json", "{}");
    assert_int_equal(gj_queue_finish_success(f->conn, &cb, out, NULL), 0);
    assert_int_equal(count(f, gone, b), 0);
    assert_int_equal(count(f, "SELECT count(*) FROM blobs WHERE owner_job = $1::uuid", b), 0);
    gj_claim_clear(&ca);
    gj_claim_clear(&cb);

    /* a parent whose sub-task runs: the sub-task is refused, the parent goes with it */
    struct gj_claim pc, child;
    submit(f, "noop", 7, 3, NULL, parent);
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &pc), 1);
    assert_int_equal(gj_queue_spawn_child(f->conn, &pc, 0, "noop", NULL, NULL, NULL, 0), 0);
    assert_int_equal(gj_queue_finish_waiting(f->conn, &pc), 0);
    assert_string_equal(job_field(f, parent, "state"), "subtasks");
    assert_int_equal(gj_queue_claim(f->conn, "w2", noop_kinds, 30, &child), 1);
    assert_string_equal(child.parent_id, parent);
    assert_int_equal(gj_job_delete(f->conn, NULL, f->tenant, child.id, &how, &err), -1);
    assert_int_equal(err.status, 409);
    assert_int_equal(gj_job_delete(f->conn, NULL, f->tenant, parent, &how, &err), 0);
    assert_int_equal(how, GJ_JOB_DELETED);
    assert_int_equal(count(f, gone, parent), 0);
    assert_int_equal(count(f, gone, child.id), 0);
    assert_int_equal(gj_queue_finish_canceled(f->conn, &child), 1);     /* its worker finds the lease gone */
    gj_claim_clear(&pc);
    gj_claim_clear(&child);
}


/* ---- a success, its log, its attempt's record and the next claim in one statement ---- */

static void test_finish_and_claim_next(void **state)
{
    struct fixture *f = *state;
    char a[GJ_UUID_LEN + 1], b[GJ_UUID_LEN + 1], c3[GJ_UUID_LEN + 1];
    submit(f, "noop", 0, 3, NULL, a);
    submit(f, "noop", 0, 3, NULL, b);
    struct gj_claim ca, next, after;
    assert_int_equal(gj_queue_claim(f->conn, "w1", noop_kinds, 30, &ca), 1);
    assert_string_equal(ca.id, a);
    char empty[600];
    make_dir(f, "empty", empty, sizeof empty);
    const char *log[4] = { a, "1", "[[1700000000000, \"info\", \"ran\"]]", "0" };
    const char *rec[6] = { a, "1", "0", "w1", "{\"device\": {\"kind\": \"cpu\"}}", "2026-01-02T03:04:05.678901Z" };
    struct gj_finish_riders riders = { log, rec, 0 };
    struct gj_claim_ask ask = { "w1", noop_kinds, 30, "cpu" };
    int claimed = 0;
    assert_int_equal(gj_queue_finish_success_next(f->conn, &ca, empty, NULL, &riders, &ask, &next, &claimed), 0);
    assert_int_equal(riders.written, 1);
    gj_claim_clear(&ca);
    assert_string_equal(job_field(f, a, "state"), "succeeded");
    assert_int_equal(count(f, "SELECT count(*) FROM job_log WHERE job_id = $1 AND line = 'ran'", a), 1);
    /* the record as gathered: its time the attempt's start, not the end's */
    assert_int_equal(count(f, "SELECT count(*) FROM job_attempt_environments WHERE job_id = $1 AND attempt = 1 "
                              "AND stage = 0 AND worker = 'w1' AND environment->'device'->>'kind' = 'cpu' "
                              "AND recorded_at = '2026-01-02T03:04:05.678901Z'", a), 1);
    /* the next job, claimed as gj_queue_claim_on would: leased to w1, on cpu, its attempt counted */
    assert_int_equal(claimed, 1);
    assert_string_equal(next.id, b);
    assert_string_equal(job_field(f, b, "state"), "running");
    assert_string_equal(job_field(f, b, "lease_owner"), "w1");
    assert_string_equal(job_field(f, b, "device"), "cpu");
    assert_string_equal(job_field(f, b, "lease_token"), next.lease_token);
    assert_int_equal(next.attempts, 1);
    assert_string_equal(next.kind, "noop");
    /* a lost lease: the end is refused, the log lines are kept, and the slot still gets work */
    submit(f, "noop", 0, 3, NULL, c3);
    expire_lease(f, b);
    const char *log_b[4] = { b, "1", "[[1700000000000, \"warn\", \"late\"]]", "0" };
    struct gj_finish_riders riders_b = { log_b, NULL, 0 };
    assert_int_equal(gj_queue_finish_success_next(f->conn, &next, empty, NULL, &riders_b, &ask, &after, &claimed), 1);
    assert_int_equal(riders_b.written, 1);
    assert_string_equal(job_field(f, b, "state"), "running");
    assert_int_equal(count(f, "SELECT count(*) FROM job_log WHERE job_id = $1", b), 1);
    assert_int_equal(claimed, 1);
    assert_string_equal(after.id, c3);
    /* outputs to store: the transaction as before, no claim along */
    char out[600];
    make_dir(f, "out", out, sizeof out);
    write_text(out, "result.json", "{}");
    const char *rec_c[6] = { c3, "1", "0", "w1", "{}", "2026-01-02T03:04:05Z" };
    struct gj_finish_riders riders_c = { NULL, rec_c, 0 };
    assert_int_equal(gj_queue_finish_success_next(f->conn, &after, out, NULL, &riders_c, &ask, &ca, &claimed), 0);
    assert_int_equal(riders_c.written, 1);
    assert_int_equal(claimed, 0);
    assert_string_equal(job_field(f, c3, "state"), "succeeded");
    assert_int_equal(count(f, "SELECT count(*) FROM job_attempt_environments WHERE job_id = $1", c3), 1);
    assert_int_equal(count(f, "SELECT count(*) FROM job_outputs WHERE job_id = $1", c3), 1);
    /* nothing queued: no claim, the end recorded */
    gj_claim_clear(&next);
    exec_ok(f, "UPDATE jobs SET lease_expires_at = now() + interval '30 s' WHERE id = $1", b);
    struct gj_claim nb;
    memset(&nb, 0, sizeof nb);
    snprintf(nb.id, sizeof nb.id, "%s", b);
    snprintf(nb.lease_token, sizeof nb.lease_token, "%s", job_field(f, b, "lease_token"));
    assert_int_equal(gj_queue_finish_success_next(f->conn, &nb, empty, NULL, NULL, &ask, &ca, &claimed), 0);
    assert_int_equal(claimed, 0);
    assert_string_equal(job_field(f, b, "state"), "succeeded");
    gj_claim_clear(&after);
}

/* gj_job_log_append keeps a line while the job's log stays under 10000 lines and within 1 MiB,
 * in order (a line too long is dropped, a shorter one after it kept), and counts the rest as
 * dropped; a batch that fits is kept whole (migration 0020's one INSERT), numbered on. */
static void append(struct fixture *f, const char *job, const char *entries)
{
    const char *p[] = { job, entries };
    assert_int_equal(gj_db_cmd(f->conn, "SELECT gj_job_log_append($1::uuid, 1, $2::jsonb, 0)", 2, p), 0);
}

static void test_job_log_bounds(void **state)
{
    struct fixture *f = *state;
    char id[GJ_UUID_LEN + 1];
    submit(f, "noop", 0, 3, NULL, id);
    append(f, id, "[[1700000000000, \"info\", \"a\"], [1700000000001, \"warn\", \"bb\"]]");
    assert_int_equal(count(f, "SELECT count(*) FROM job_log WHERE job_id = $1", id), 2);
    assert_int_equal(count(f, "SELECT max(seq) FROM job_log WHERE job_id = $1 AND line = 'bb'", id), 2);
    /* 3 short of the line bound: a batch of 3 is kept whole, at the bound */
    exec_ok(f, "UPDATE job_log_totals SET lines = 9995 WHERE job_id = $1", id);
    append(f, id, "[[1, \"info\", \"c\"], [2, \"info\", \"d\"], [3, \"info\", \"e\"], [4, \"info\", \"f\"], "
                  "[5, \"info\", \"g\"]]");
    assert_int_equal(count(f, "SELECT lines FROM job_log_totals WHERE job_id = $1", id), 10000);
    assert_int_equal(count(f, "SELECT dropped FROM job_log_totals WHERE job_id = $1", id), 0);
    assert_int_equal(count(f, "SELECT max(seq) FROM job_log WHERE job_id = $1", id), 10000);
    /* at the bound: dropped, counted */
    append(f, id, "[[6, \"info\", \"h\"], [7, \"info\", \"i\"]]");
    assert_int_equal(count(f, "SELECT dropped FROM job_log_totals WHERE job_id = $1", id), 2);
    /* the byte bound, line by line in order: the long line dropped, the short one after it kept */
    exec_ok(f, "UPDATE job_log_totals SET lines = 0, bytes = 1048570, dropped = 0 WHERE job_id = $1", id);
    exec_ok(f, "DELETE FROM job_log WHERE job_id = $1", id);
    append(f, id, "[[8, \"info\", \"0123456789\"], [9, \"info\", \"xyz\"]]");
    assert_int_equal(count(f, "SELECT lines FROM job_log_totals WHERE job_id = $1", id), 1);
    assert_int_equal(count(f, "SELECT bytes FROM job_log_totals WHERE job_id = $1", id), 1048573);
    assert_int_equal(count(f, "SELECT dropped FROM job_log_totals WHERE job_id = $1", id), 1);
    assert_int_equal(count(f, "SELECT count(*) FROM job_log WHERE job_id = $1 AND line = 'xyz' AND seq = 1", id), 1);
    /* a first batch (migration 0024's one upsert) counts the lines the worker dropped in memory */
    char fresh[GJ_UUID_LEN + 1];
    submit(f, "noop", 0, 3, NULL, fresh);
    const char *p[] = { fresh, "[[1, \"info\", \"one\"]]" };
    assert_int_equal(gj_db_cmd(f->conn, "SELECT gj_job_log_append($1::uuid, 1, $2::jsonb, 4)", 2, p), 0);
    assert_int_equal(count(f, "SELECT lines * 100 + dropped FROM job_log_totals WHERE job_id = $1", fresh), 104);
    /* a job deleted meanwhile: nothing written, no error */
    exec_ok(f, "DELETE FROM jobs WHERE id = $1", fresh);
    assert_int_equal(gj_db_cmd(f->conn, "SELECT gj_job_log_append($1::uuid, 1, $2::jsonb, 0)", 2, p), 0);
    assert_int_equal(count(f, "SELECT count(*) FROM job_log_totals WHERE job_id = $1", fresh), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_claim_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_skip_locked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fencing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expired_lease_refused_before_rescue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsafe_output_name_fails_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retries_with_backoff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_subtasks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rescue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notifier_reconnects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_workers_registry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_submit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changes_forget_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_finish_and_claim_next, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_log_bounds, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
