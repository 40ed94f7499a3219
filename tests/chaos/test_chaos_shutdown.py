"""SIGTERM keeps its bound and loses no job (issue 11, Faults).

`gpujobd serve --shutdown-grace-seconds 2` runs two jobs when it gets SIGTERM: one deaf to
cancellation (noop stall_ms, as a kind stuck in a call it cannot leave) and one that honours it
but would run for ten minutes. The process must exit within the grace plus one second; both jobs
must be back in the queue (not failed, not lost, no lease held, nothing recorded as their end),
and a second server on the same database must run them to success, each ending exactly once.
A job that finishes inside the grace period is let finish. With the embedded PostgreSQL (the
default deployment) the bound holds with the database stopped as well.
"""
import signal
import time

from chaoslib import EmbeddedServer, Harness, run_tests

GRACE_S = 2
STALL_MS = 6000          # still stalled when the first process exits
IN_KIND_S = 1.0          # "running" is written at the claim; the kind starts a moment later


def ended_once(h, job_id):
    """The job's state, having checked that it ended once: one terminal state in its history,
    one attempt counted (a claim given back at shutdown is not an attempt), each output blob
    recorded once."""
    state, attempts, ends, outputs, owned = h.sql(
        "SELECT state, attempts,"
        " (SELECT count(*) FROM job_events e WHERE e.job_id = j.id AND e.kind = 'state'"
        "   AND e.detail->>'state' IN ('succeeded', 'failed', 'canceled')),"
        " (SELECT count(*) FROM job_outputs o WHERE o.job_id = j.id),"
        " (SELECT count(*) FROM blobs b WHERE b.owner_job = j.id)"
        f" FROM jobs j WHERE j.id = '{job_id}'")[0]
    assert (attempts, ends, outputs) == ("1", "1", owned), (job_id, state, attempts, ends, outputs, owned)
    return state


def sigterm_within_bound(server, deaf_id, what):
    """SIGTERM; the process exits 0 within the grace plus a second, having given the deaf job
    back to the queue."""
    t0 = time.time()
    server.proc.send_signal(signal.SIGTERM)
    code = server.proc.wait(GRACE_S + 30)
    took = time.time() - t0
    print(f"SIGTERM with a deaf job ({what}): exit {code} after {took:.2f} s (grace {GRACE_S} s)", flush=True)
    log = server.log_text()
    assert took <= GRACE_S + 1.0, f"shutdown took {took:.2f} s: {log[-3000:]}"
    assert code == 0, log[-3000:]
    assert f"job {deaf_id} did not stop when asked; given back to the queue" in log, log[-3000:]


def test_sigterm_bound_embedded_postgres():
    """The default deployment: the bound holds with the embedded PostgreSQL stopped too."""
    s = EmbeddedServer(["--cpu-workers", "1", "--shutdown-grace-seconds", str(GRACE_S)])
    try:
        s.wait_ready()
        c = s.client()
        deaf = c.submit("noop", {"stall_ms": STALL_MS}, max_attempts=3)
        c.wait_job(deaf["id"], states=("running",), timeout=30)
        time.sleep(IN_KIND_S)
        sigterm_within_bound(s, deaf["id"], "embedded PostgreSQL")
        assert "embedded PostgreSQL stopped" in s.log_text()
    finally:
        s.close()


def test_sigterm_bound_with_a_deaf_job():
    h = Harness()
    try:
        a = h.start_server(["--cpu-workers", "3", "--shutdown-grace-seconds", str(GRACE_S),
                            "--retry-backoff-ms", "0"])
        c = a.client()
        deaf = c.submit("noop", {"stall_ms": STALL_MS, "output_bytes": 1000}, max_attempts=3)
        long = c.submit("noop", {"sleep_ms": 600000, "output_bytes": 1000}, max_attempts=3)
        short = c.submit("noop", {"sleep_ms": 2000, "output_bytes": 1000}, max_attempts=3)
        for j in (deaf, long, short):
            c.wait_job(j["id"], states=("running",), timeout=30)
        time.sleep(IN_KIND_S)
        sigterm_within_bound(a, deaf["id"], "external PostgreSQL")

        rows = {r[0]: r[1:] for r in h.sql("SELECT id, state, attempts, lease_token IS NULL,"
                                           " (SELECT count(*) FROM job_outputs o WHERE o.job_id = jobs.id)"
                                           " FROM jobs")}
        assert rows[short["id"]][:2] == ["succeeded", "1"], rows[short["id"]]
        for j in (deaf, long):
            state, attempts, no_lease, outputs = rows[j["id"]]
            assert (state, no_lease, outputs) == ("queued", "t", "0"), (j["id"], rows[j["id"]])

        # Nothing lost: another server takes both up and runs them to their end.
        b = h.start_server(["--cpu-workers", "2"], data_dir=a.data_dir)
        cb = b.client()
        cb.wait_job(long["id"], states=("running",), timeout=30)
        cb.request("POST", f"/v1/jobs/{long['id']}/cancel")   # ten minutes is not the point here
        assert cb.wait_job(deaf["id"], timeout=STALL_MS / 1000 + 30)["state"] == "succeeded"
        assert cb.wait_job(long["id"], timeout=30)["state"] == "canceled"
        for j, state in ((deaf, "succeeded"), (long, "canceled"), (short, "succeeded")):
            assert ended_once(h, j["id"]) == state
    finally:
        h.close()


if __name__ == "__main__":
    run_tests([test_sigterm_bound_with_a_deaf_job, test_sigterm_bound_embedded_postgres])
