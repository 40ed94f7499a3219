"""PostgreSQL killed under the service (issue 11, Faults): the service gets back without help.

- The embedded PostgreSQL is killed with SIGKILL twice while jobs run, jobs are submitted and
  blobs uploaded: the service restarts it, /readyz is 200 again within seconds, every job
  acknowledged ends once and succeeds, every upload acknowledged is there byte for byte.
- An external PostgreSQL goes away for a few seconds: /readyz answers 503 naming the database
  meanwhile (/healthz stays 200), requests are refused with 503, the pool reconnects when it is
  back; a job whose lease outlived the outage finishes normally in its first attempt, and one
  whose lease expired meanwhile is refused when it comes back and runs again, once.
"""
import os
import signal
import threading
import time

from chaoslib import (EmbeddedServer, durable_commits, Harness, Target, Uploader, check_exactly_once, kill_external_pg,
                      run_tests, start_external_pg, submit_until_acknowledged, verify_blobs, wait_all_terminal,
                      wait_for)

BACK_WITHIN_S = 10


class Submitter:
    """Submits jobs one after another (idempotently, through restarts) until stopped."""

    def __init__(self, target, make_body):
        self.target = target
        self.make_body = make_body
        self.ids = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        i = 0
        while not self.stop.is_set():
            self.ids.append(submit_until_acknowledged(self.target, self.make_body(i), time.time() + 60))
            i += 1
            time.sleep(0.05)

    def finish(self):
        self.stop.set()
        self.thread.join(90)
        return self.ids


class ReadyWatch:
    """Polls /readyz every 50 ms and keeps (time, status, body) whenever the status changes."""

    def __init__(self, server):
        self.server = server
        self.changes = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        last = object()
        while not self.stop.is_set():
            status, body = self.server.readyz()
            if status != last:
                self.changes.append((time.time(), status, body[:300]))
                last = status
            time.sleep(0.05)

    def finish(self):
        self.stop.set()
        self.thread.join(30)
        return self.changes


def mixed_body(i):
    if i % 5 == 4:
        return {"kind": "phantom", "params": {"geometry": {"type": "parallel2d", "angles_deg": {"count": 60},
                                                           "detector": {"cols": 96}},
                                              "volume": {"nx": 96, "ny": 96}}, "max_attempts": 10}
    return {"kind": "noop", "params": {"sleep_ms": 150 * (i % 7), "output_bytes": 5000 * (i % 3)},
            "max_attempts": 10}


def test_embedded_postgres_killed_under_load():
    s = EmbeddedServer(["--cpu-workers", "2", "--retry-backoff-ms", "100"])
    try:
        s.wait_ready()
        target = Target(s, s.admin_key)
        client = s.client()
        # Running across both outages, on a lease (30 s) longer than them: one attempt.
        across = client.submit("noop", {"sleep_ms": 9000, "output_bytes": 200000}, max_attempts=10)
        client.wait_job(across["id"], states=("running",), timeout=30)
        uploads = Uploader(target)
        jobs = Submitter(target, mixed_body)
        watch = ReadyWatch(s)
        time.sleep(1.5)
        for _ in range(2):
            old = s.postmaster_pid()
            os.kill(old, signal.SIGKILL)
            t_kill = time.time()
            wait_for("a new postmaster", lambda: s.postmaster_pid() != old if os.path.exists(
                os.path.join(s.data_dir, "pg", "postmaster.pid")) else False, BACK_WITHIN_S, 0.05)
            wait_for("/readyz 200 again", lambda: s.readyz()[0] == 200, BACK_WITHIN_S, 0.05)
            print(f"killed postmaster {old}: ready again after {time.time() - t_kill:.2f} s", flush=True)
            time.sleep(2.0)
        ids = jobs.finish()
        acked = uploads.finish()
        changes = watch.finish()
        for t, status, body in changes:
            print(f"  readyz {status} at {t - changes[0][0]:.2f} s {body[:160] if status != 200 else ''}")
        assert len(ids) >= 20 and len(acked) >= 4, (len(ids), len(acked))
        # /readyz told the truth: not ready during each outage (naming the database), ready after.
        statuses = [status for _, status, _ in changes]
        assert statuses == [200, 503, 200, 503, 200], changes
        assert all("database" in body for _, status, body in changes if status == 503), changes
        wait_all_terminal(s.sql, 120)
        attempts = check_exactly_once(s.sql, ids + [across["id"]])
        assert attempts[across["id"]] == 1, attempts[across["id"]]
        verify_blobs(client, s.sql, acked)
        log = s.log_text()
        assert log.count("embedded PostgreSQL restarted") == 2, log[-3000:]
        print(f"{len(ids) + 1} jobs ended once each; {len(acked)} of {uploads.attempts} uploads acknowledged, "
              "all intact")
    finally:
        s.close()


def outage(h, srv, seconds):
    """Kills the external PostgreSQL, checks what the service says while it is gone, starts it
    again after `seconds`, and waits for /readyz 200."""
    c = srv.client()
    kill_external_pg(h)
    t0 = time.time()
    r = wait_for("/readyz 503 naming the database",
                 lambda: (lambda r: r if r.status == 503 else None)(c.request("GET", "/readyz", timeout=10)), 5)
    body = r.json()
    assert any(x.startswith("database: unreachable") for x in body["reasons"]), body
    assert c.request("GET", "/healthz").status == 200
    refused = c.request("POST", "/v1/jobs", json={"kind": "noop", "params": {}})
    assert refused.status == 503, refused
    time.sleep(max(0.0, seconds - (time.time() - t0)))
    start_external_pg(h)
    t1 = time.time()
    wait_for("/readyz 200 after the database came back",
             lambda: c.request("GET", "/readyz", timeout=10).status == 200, 10)
    print(f"database away {t1 - t0:.1f} s; ready {time.time() - t1:.2f} s after it came back "
          f"({body['reasons'][0][:120]})", flush=True)


def test_external_postgres_outage_and_leases():
    h = Harness()
    try:
        durable_commits(h)
        # Phase 1: the lease (20 s) outlives a 2 s outage; the job's end is written when the
        # database is back, in its first attempt.
        a = h.start_server(["--cpu-workers", "1", "--lease-seconds", "20", "--retry-backoff-ms", "0"])
        ca = a.client()
        job = ca.submit("noop", {"sleep_ms": 2500, "output_bytes": 1000})
        ca.wait_job(job["id"], states=("running",), timeout=30)
        outage(h, a, 3.0)
        done = ca.wait_job(job["id"], timeout=30)
        assert done["state"] == "succeeded" and done["attempts"] == 1, done
        assert "its end recorded after" in a.log_text(), a.log_text()[-2000:]
        a.terminate()
        # Phase 2: a 2 s lease expires during a 5 s outage: the worker's late heartbeat and
        # finish are refused, rescue requeues the job, and it runs again: one success, two attempts.
        b = h.start_server(["--cpu-workers", "1", "--lease-seconds", "2", "--retry-backoff-ms", "0"],
                           data_dir=a.data_dir)
        cb = b.client()
        late = cb.submit("noop", {"sleep_ms": 3000, "output_bytes": 1000})
        cb.wait_job(late["id"], states=("running",), timeout=30)
        outage(h, b, 5.0)
        done = cb.wait_job(late["id"], timeout=60)
        assert done["state"] == "succeeded" and done["attempts"] == 2, done
        assert "lease lost" in b.log_text() or "lease will expire" in b.log_text(), b.log_text()[-3000:]
        check_exactly_once(h.sql, [job["id"], late["id"]])
    finally:
        h.close()


if __name__ == "__main__":
    run_tests([test_external_postgres_outage_and_leases, test_embedded_postgres_killed_under_load])
