"""The service killed under load (issue 11, Proof): kill -9 of `gpujobd serve` five times while a
mixed load of 200 jobs is submitted and run; after each kill a new process starts on the same
data directory and port, as a supervisor (systemd, Kubernetes) would start it.

Every job acknowledged (and any whose answer was lost) ends exactly once: one terminal state in
its history, succeeded, attempts at most its claims and at most max_attempts, no output stored
twice; the jobs a kill interrupted were rescued after their lease and counted an attempt. The
database is checked, not only the API.
"""
import random
import struct
import threading
import time

from chaoslib import (Harness, Target, check_exactly_once, durable_commits, run_tests,
                      submit_until_acknowledged, tsp_text, wait_all_terminal, wait_for)

JOBS = 200
KILLS = 5
LEASE_S = 2
SERVER_ARGS = ["--cpu-workers", "3", "--lease-seconds", str(LEASE_S), "--retry-backoff-ms", "0",
               "--poll-interval-ms", "200"]


def upload(target, data):
    def once():
        try:
            r = target.client().request("POST", "/v1/blobs", body=data,
                                        headers={"Content-Type": "application/octet-stream"}, timeout=30)
            return r.json()["id"] if r.status == 201 else None
        except Exception:
            return None
    return wait_for("an input uploaded", once, 60, 0.2)


def job_bodies(target):
    """JOBS submit bodies, a mix of the CPU kinds, each running well under a second or two."""
    rng = random.Random(2026)
    views, cols = 90, 64
    projections = upload(target, struct.pack(f"<{views * cols}f", *(rng.random() for _ in range(views * cols))))
    tsp = upload(target, tsp_text(40, 7))
    geometry = {"type": "parallel2d", "angles_deg": {"count": views}, "detector": {"cols": cols}}
    bodies = []
    for i in range(JOBS):
        pick = i % 4
        if pick in (0, 1):
            body = {"kind": "noop", "params": {"sleep_ms": rng.randint(50, 900), "output_bytes": rng.randint(1, 4096)}}
        elif pick == 2:
            body = {"kind": "recon", "params": {"geometry": geometry, "volume": {"nx": 64, "ny": 64},
                                                "algorithm": "fbp"}, "inputs": {"projections": projections}}
        else:
            body = {"kind": "brkga", "params": {"decoder": "tsp", "population_size": 40, "max_generations": 30,
                                                "seed": i}, "inputs": {"tsp": tsp}}
        body["max_attempts"] = 10
        bodies.append(body)
    return bodies


class Submitter:
    """Submits the bodies in order, idempotently, across the kills."""

    def __init__(self, target, bodies):
        self.target, self.bodies = target, bodies
        self.ids = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        for body in self.bodies:
            self.ids.append(submit_until_acknowledged(self.target, body, time.time() + 120))
            time.sleep(0.02)


def running_jobs(h):
    return int(h.sql("SELECT count(*) FROM jobs WHERE state = 'running'")[0][0])


def test_service_killed_five_times_under_load():
    h = Harness()
    try:
        durable_commits(h)
        srv = h.start_server(SERVER_ARGS)
        key = srv.admin_key
        target = Target(srv, key)
        sub = Submitter(target, job_bodies(target))
        for k in range(KILLS):
            # kill only while jobs run, so each kill interrupts work in flight
            wait_for(f"jobs running before kill {k + 1}", lambda: running_jobs(h) > 0 or not sub.thread.is_alive(),
                     60, 0.05)
            time.sleep(random.uniform(0.2, 1.2))
            interrupted = running_jobs(h)
            srv.kill9()
            print(f"kill {k + 1}: {interrupted} jobs running, {len(sub.ids)} acknowledged", flush=True)
            time.sleep(0.3)
            srv = h.start_server(SERVER_ARGS, data_dir=srv.data_dir, port=srv.port)
            target.server = srv
        sub.thread.join(180)
        assert not sub.thread.is_alive(), "the submitter did not finish"
        assert len(sub.ids) == JOBS and len(set(sub.ids)) == JOBS, (len(sub.ids), len(set(sub.ids)))
        wait_all_terminal(h.sql, 180)
        attempts = check_exactly_once(h.sql, sub.ids)
        total = int(h.sql("SELECT count(*) FROM jobs WHERE parent_id IS NULL")[0][0])
        assert total == JOBS, f"{total} jobs in the database for {JOBS} submitted: a retried submit made a second job"
        rescued = [j for j, a in attempts.items() if a > 1]
        assert rescued, "no job was interrupted by a kill: the test proved nothing"
        print(f"{JOBS} jobs, {KILLS} kills: all succeeded once; {len(rescued)} ran again after a kill "
              f"(attempts up to {max(attempts.values())})", flush=True)
        log = srv.log_text()
        assert "AddressSanitizer" not in log and "runtime error" not in log, log[-3000:]
    finally:
        h.close()


if __name__ == "__main__":
    run_tests([test_service_killed_five_times_under_load])
