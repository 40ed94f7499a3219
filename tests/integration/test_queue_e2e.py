"""The queue across processes: crashes, shared queues, concurrent start-up, graceful stop.

Real PostgreSQL, real `gpujobd serve` processes over HTTPS.
"""
import concurrent.futures
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402


def events(h, job_id, kind="state"):
    rows = h.sql(f"SELECT detail->>'state', coalesce(detail->>'worker','') FROM job_events "
                 f"WHERE job_id = '{job_id}' AND kind = '{kind}' ORDER BY id")
    return rows


def test_kill9_mid_job_then_second_process_finishes_once():
    h = Harness()
    try:
        a = h.start_server(["--lease-seconds", "2", "--retry-backoff-ms", "0", "--cpu-workers", "1"])
        c = a.client()
        job = c.submit("noop", {"sleep_ms": 4000, "output_bytes": 1000})
        c.wait_job(job["id"], states=("running",), timeout=30)
        a.kill9()
        # What a dead process leaves in its scratch space goes at the next start,
        # unless the job is still running (here: its lease has not expired yet).
        scratch = os.path.join(a.data_dir, "work", "scratch")
        stale = os.path.join(scratch, "00000000-0000-4000-8000-000000000000")
        os.makedirs(os.path.join(stale, "inputs"))
        b = h.start_server(["--lease-seconds", "2", "--retry-backoff-ms", "0", "--cpu-workers", "1"],
                           data_dir=a.data_dir)
        done = b.client().wait_job(job["id"], timeout=60)
        assert done["state"] == "succeeded", done
        assert done["attempts"] == 2, done
        states = [s for s, _ in events(h, job["id"])]
        assert states.count("succeeded") == 1, states
        assert states.count("running") == 2, states
        workers = [w for s, w in events(h, job["id"]) if s == "running"]
        assert workers[0] != workers[1], workers
        outs = b.client().json("GET", f"/v1/jobs/{job['id']}/outputs", expect=200)
        names = sorted(o["name"] for o in outs["outputs"])
        assert names == ["data.bin", "result.json"], names
        assert h.scalar(f"SELECT count(*) FROM job_outputs WHERE job_id = '{job['id']}'") == "2"
        assert not os.path.exists(stale), "stale scratch directory kept"
        left = [e for e in os.listdir(scratch) if not e.startswith(".slot-")]   # a slot's emptied tree
        assert left == [], left
        b.terminate()
        assert os.listdir(scratch) == [], os.listdir(scratch)
    finally:
        h.close()


def test_two_servers_share_1000_jobs_exactly_once():
    h = Harness()
    try:
        args = ["--cpu-workers", "4", "--poll-interval-ms", "200"]
        a = h.start_server(args)
        b = h.start_server(args, wait=True)
        ca, cb = a.client(), b.client(key=a.admin_key)
        n = 1000
        ids = []
        lock = threading.Lock()

        def submit(i):
            c = ca if i % 2 else cb
            j = c.submit("noop", {"sleep_ms": 0})
            with lock:
                ids.append(j["id"])

        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            list(ex.map(submit, range(n)))
        assert len(set(ids)) == n
        deadline = time.time() + 240
        while time.time() < deadline:
            left = int(h.scalar("SELECT count(*) FROM jobs WHERE state NOT IN ('succeeded','failed','canceled')"))
            if left == 0:
                break
            time.sleep(0.5)
        assert h.scalar("SELECT count(*) FROM jobs WHERE state = 'succeeded'") == str(n)
        assert h.scalar("SELECT count(*) FROM jobs WHERE attempts <> 1") == "0"
        runs = h.sql("SELECT job_id, count(*) FROM job_events WHERE kind = 'state' "
                     "AND detail->>'state' = 'running' GROUP BY job_id HAVING count(*) <> 1")
        assert runs == [], runs[:5]
        finishes = h.scalar("SELECT count(*) FROM job_events WHERE kind = 'state' AND detail->>'state' = 'succeeded'")
        assert finishes == str(n), finishes
        per_worker = h.sql("SELECT detail->>'worker', count(*) FROM job_events WHERE kind = 'state' "
                           "AND detail->>'state' = 'running' GROUP BY 1")
        assert len(per_worker) == 2, per_worker
        assert all(int(cnt) > 0 for _, cnt in per_worker), per_worker
    finally:
        h.close()


def test_migrations_applied_once_when_two_processes_start_together():
    h = Harness()
    try:
        a = h.start_server(wait=False)
        b = h.start_server(wait=False)
        a.wait_ready()
        b.wait_ready()
        dup = h.sql("SELECT version, count(*) FROM schema_migrations GROUP BY version HAVING count(*) > 1")
        assert dup == [], dup
        assert int(h.scalar("SELECT count(*) FROM schema_migrations")) >= 1
        # Exactly one of them created the first admin key, and it works on both.
        keys = [s for s in (a, b) if os.path.exists(os.path.join(s.data_dir, "admin.key"))]
        assert len(keys) == 1, [s.data_dir for s in keys]
        assert h.scalar("SELECT count(*) FROM api_keys WHERE role = 'admin'") == "1"
        for s in (a, b):
            assert s.client(key=keys[0].admin_key).request("GET", "/v1/kinds").status == 200
    finally:
        h.close()


def test_sigterm_lets_running_job_finish_and_exits_zero():
    h = Harness()
    try:
        a = h.start_server(["--shutdown-grace-seconds", "20", "--cpu-workers", "1"])
        c = a.client()
        job = c.submit("noop", {"sleep_ms": 1500})
        # Claimed is not yet started: wait for the module's first progress report.
        deadline = time.time() + 30
        while c.json("GET", f"/v1/jobs/{job['id']}", expect=200)["progress"] <= 0:
            assert time.time() < deadline, "the job never reported progress"
            time.sleep(0.02)
        assert a.terminate(timeout=60) == 0, a.log_text()[-2000:]
        assert h.scalar(f"SELECT state FROM jobs WHERE id = '{job['id']}'") == "succeeded"
    finally:
        h.close()


def test_sigterm_past_grace_requeues_job_without_losing_it():
    h = Harness()
    try:
        a = h.start_server(["--shutdown-grace-seconds", "1", "--cpu-workers", "1"])
        c = a.client()
        job = c.submit("noop", {"sleep_ms": 60000})
        c.wait_job(job["id"], states=("running",), timeout=30)
        assert a.terminate(timeout=60) == 0, a.log_text()[-2000:]
        row = h.sql(f"SELECT state, attempts FROM jobs WHERE id = '{job['id']}'")[0]
        assert row[0] == "queued", row
        assert row[1] == "0", row   # a release is not a failed attempt
        # Another process takes it up (cancel it so the test does not wait a minute).
        b = h.start_server(["--cpu-workers", "1"], data_dir=a.data_dir)
        cb = b.client()
        cb.wait_job(job["id"], states=("running",), timeout=30)
        assert cb.request("POST", f"/v1/jobs/{job['id']}/cancel").status in (200, 202)
        assert cb.wait_job(job["id"], timeout=30)["state"] == "canceled"
    finally:
        h.close()


def test_notify_wakes_idle_worker_without_polling():
    h = Harness()
    try:
        # A one-minute poll interval: only LISTEN/NOTIFY can start the job quickly.
        a = h.start_server(["--poll-interval-ms", "60000", "--cpu-workers", "1"])
        c = a.client()
        time.sleep(1.0)   # let the worker settle into its wait
        job = c.submit("noop", {"sleep_ms": 0})
        done = c.wait_job(job["id"], timeout=20)
        assert done["state"] == "succeeded"
        lat = float(h.scalar(f"SELECT extract(epoch FROM started_at - created_at) FROM jobs WHERE id = '{job['id']}'"))
        assert lat < 10.0, lat
    finally:
        h.close()


def test_retries_with_backoff_then_failed():
    h = Harness()
    try:
        a = h.start_server(["--retry-backoff-ms", "100", "--cpu-workers", "1"])
        c = a.client()
        job = c.submit("noop", {"fail_with": "disk on fire", "fail_transient": True}, max_attempts=3)
        done = c.wait_job(job["id"], timeout=60)
        assert done["state"] == "failed", done
        assert done["attempts"] == 3, done
        assert "disk on fire" in done["error"]["message"], done
        perm = c.submit("noop", {"fail_with": "bad input"}, max_attempts=3)
        done = c.wait_job(perm["id"], timeout=30)
        assert done["state"] == "failed" and done["attempts"] == 1, done
    finally:
        h.close()


if __name__ == "__main__":
    run_tests([
        test_migrations_applied_once_when_two_processes_start_together,
        test_notify_wakes_idle_worker_without_polling,
        test_retries_with_backoff_then_failed,
        test_sigterm_lets_running_job_finish_and_exits_zero,
        test_sigterm_past_grace_requeues_job_without_losing_it,
        test_kill9_mid_job_then_second_process_finishes_once,
        test_two_servers_share_1000_jobs_exactly_once,
    ])
