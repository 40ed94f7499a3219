"""The replicas under faults (issue 13, "Proof of the replicas"): one PostgreSQL started by the
test and three `gpujobd serve` processes as the production overlay runs them, two `--role
worker` (no API) and one `--role api`, under a mixed load of jobs (noop with a run time, a small
FBP reconstruction, a small BRKGA on a TSP).

- A worker killed with SIGKILL mid-job and the other stopped with SIGTERM mid-job lose nothing:
  the SIGTERM'd worker gives its unfinished jobs back at once without spending an attempt; the
  killed worker's jobs are rescued once their lease expired, that attempt spent, by the api
  replica while no worker is left; every job ends exactly once. Checked in the database (the state history the triggers write), not only
  through the API.
- A rolling restart of all three replicas (each stopped with SIGTERM, its successor started on
  its data directory, the next only once it is up) while jobs keep coming completes every job.
- A worker frozen and thawed (SIGSTOP, SIGCONT) still shuts down cleanly on SIGTERM.
- The workers' probes, as the production overlay sets them on --metrics-listen: a worker counts
  as up when /readyz says 200; through the grace of its SIGTERM /readyz says 503 (shutting
  down) while /healthz stays 200.

Workers have short leases (2 s) and a short grace (1 s), so the test stays well under a minute.
"""
import http.client
import random
import signal
import socket
import struct
import threading
import time

from chaoslib import (NET_ERRORS, Harness, Target, check_exactly_once, free_port, run_tests,
                      submit_until_acknowledged, tsp_text, wait_all_terminal, wait_for)

LEASE_S = 2
WORKER_ARGS = ["--role", "worker", "--cpu-workers", "2", "--lease-seconds", str(LEASE_S),
               "--retry-backoff-ms", "0", "--poll-interval-ms", "200", "--shutdown-grace-seconds", "1"]
API_ARGS = ["--role", "api", "--shutdown-grace-seconds", "1"]

H = None
API = None          # Target: the api replica now serving (its successor after the rolling restart)
WORKERS = []        # the worker replicas now running
INPUTS = {}         # blob ids of the recon and brkga inputs


def worker_id(srv):
    """The id (host:pid:start) the worker replica registered under, once it has."""
    def registered():
        assert srv.proc.poll() is None, f"worker exited {srv.proc.returncode}: {srv.log_text()[-2000:]}"
        rows = H.sql(f"SELECT id FROM workers WHERE pid = {srv.proc.pid} AND host = '{socket.gethostname()}'"
                     " ORDER BY started_at DESC LIMIT 1")
        return rows[0][0] if rows else None
    return wait_for(f"worker pid {srv.proc.pid} registered", registered, 60)


def probe(srv, path):
    """(status, body) of a GET on the worker's metrics listener, as the kubelet's probes ask it;
    (None, error) when nothing answers."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.metrics_port, timeout=5)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode(errors="replace")
    except NET_ERRORS as e:
        return None, repr(e)
    finally:
        conn.close()


def start_workers(*data_dirs):
    """Worker replicas on these data directories (None: a new one), each with a metrics listener
    (its probes, as the production overlay's), started together; returned once each is ready
    by its readiness probe and registered."""
    started = []
    for d in data_dirs:
        port = free_port()
        srv = H.start_server(WORKER_ARGS + ["--metrics-listen", f"127.0.0.1:{port}"], wait=False, data_dir=d)
        srv.metrics_port = port
        started.append(srv)
    for srv in started:
        def ready():
            assert srv.proc.poll() is None, f"worker exited {srv.proc.returncode}: {srv.log_text()[-2000:]}"
            return probe(srv, "/readyz")[0] == 200
        wait_for(f"worker on {srv.data_dir} ready (/readyz)", ready, 60)
        assert probe(srv, "/healthz")[0] == 200
        srv.worker_id = worker_id(srv)
    return started


def stop_worker_watching_probes(srv):
    """SIGTERM, then the probes through the grace: /readyz says 503 "shutting down" (the rollout
    sees it go) while /healthz stays 200 (liveness does not cut its running jobs short); exit 0."""
    srv.proc.send_signal(signal.SIGTERM)
    seen = set()
    while srv.proc.poll() is None:
        ready, health = probe(srv, "/readyz"), probe(srv, "/healthz")
        if srv.proc.poll() is not None:
            break   # what it answered while exiting proves nothing
        if ready[0] == 503 and "shutting down" in ready[1]:
            seen.add("unready")
        assert health[0] in (200, None) or srv.proc.poll() is not None, f"/healthz during the grace: {health}"
        if health[0] == 200:
            seen.add("live")
        time.sleep(0.02)
    assert srv.terminate(timeout=30) == 0, srv.log_text()[-2000:]
    assert seen == {"unready", "live"}, f"the probes through the grace: {seen}"


def setup():
    global H, API
    H = Harness()
    api = H.start_server(API_ARGS)
    API = Target(api, api.admin_key)
    WORKERS.extend(start_workers(None, None))
    rng = random.Random(3)
    views, cols = 90, 128
    proj = struct.pack(f"<{views * cols}f", *(rng.random() for _ in range(views * cols)))
    INPUTS["projections"] = API.client().upload(proj)["id"]
    INPUTS["tsp"] = API.client().upload(tsp_text(40, 5))["id"]


def job_body(kind, sleep_ms=0):
    if kind == "noop":
        return {"kind": "noop", "params": {"sleep_ms": sleep_ms, "output_bytes": 4096}, "max_attempts": 2}
    if kind == "recon":
        return {"kind": "recon", "max_attempts": 2, "inputs": {"projections": INPUTS["projections"]},
                "params": {"geometry": {"type": "parallel2d", "angles_deg": {"count": 90}, "detector": {"cols": 128}},
                           "volume": {"nx": 128, "ny": 128}, "algorithm": "fbp"}}
    return {"kind": "brkga", "max_attempts": 2, "inputs": {"tsp": INPUTS["tsp"]},
            "params": {"decoder": "tsp", "population_size": 50, "max_generations": 100, "seed": 1}}


def submit(body, deadline):
    """Through the api replica serving now, again after every lost answer, once (chaoslib)."""
    return submit_until_acknowledged(API, body, deadline)


def job_row(job_id):
    state, attempts, lease_owner, progress = H.sql(
        f"SELECT state, attempts, coalesce(lease_owner, ''), progress FROM jobs WHERE id = '{job_id}'")[0]
    return state, int(attempts), lease_owner, float(progress)


def running_on(srv, min_progress=-1.0, kind="%", claimed_within_s=None):
    """{job id: attempts} of the jobs the worker holds now, of kind, past min_progress (as its
    last heartbeat stored it), claimed at most claimed_within_s ago when given."""
    recent = "" if claimed_within_s is None else (
        " AND (SELECT max(at) FROM job_events e WHERE e.job_id = j.id AND e.kind = 'state' AND"
        f" e.detail->>'state' = 'running') > now() - interval '{claimed_within_s} seconds'")
    rows = H.sql(f"SELECT id, attempts FROM jobs j WHERE state = 'running' AND lease_owner = '{srv.worker_id}'"
                 f" AND progress > {min_progress} AND kind LIKE '{kind}'" + recent)
    return {r[0]: int(r[1]) for r in rows}


def state_histories(ids):
    """{job id: [(state, attempt, worker, error message)]}, oldest first, as the triggers wrote them."""
    id_list = "', '".join(ids)
    rows = H.sql("SELECT job_id, detail->>'state', coalesce(detail->>'attempt', ''), coalesce(detail->>'worker', ''),"
                 f" coalesce(detail->'error'->>'message', '') FROM job_events WHERE job_id IN ('{id_list}')"
                 " AND kind = 'state' ORDER BY id")
    out = {jid: [] for jid in ids}
    for jid, s, a, w, e in rows:
        out[jid].append((s, int(a) if a else None, w, e))
    return out


def check_every_job(ids):
    """chaoslib's exactly-once over the whole database (every job succeeded, one terminal
    state each, outputs stored once), and more for these: attempts exactly those of the last
    claim (a release runs the count back down, a rescue does not), some outputs each, and the
    API saying what the database says. Returns {id: history}."""
    wait_all_terminal(H.sql, 45)
    attempts = check_exactly_once(H.sql, ids)
    histories = state_histories(ids)
    listed = {j["id"]: j for j in API.client().json("GET", "/v1/jobs?limit=200", expect=200)["jobs"]}
    outputs = dict(H.sql("SELECT job_id, count(*) FROM job_outputs GROUP BY job_id"))
    for jid in ids:
        hist = histories[jid]
        claims = [h for h in hist if h[0] == "running"]
        assert hist[-1][0] == "succeeded" and attempts[jid] == claims[-1][1], f"job {jid}: {hist}"
        assert int(outputs.get(jid, 0)) > 0, f"job {jid}: no outputs"
        assert jid in listed, f"job {jid} not in GET /v1/jobs"
        assert (listed[jid]["state"], listed[jid]["attempts"]) == ("succeeded", attempts[jid]), listed[jid]
    return histories


# ---- tests ---------------------------------------------------------------------------------

def test_sigkill_and_sigterm_mid_job_lose_nothing():
    deadline = time.time() + 60
    # 4 long noops fill the 4 slots first; the short jobs of every kind come after them
    bodies = [job_body("noop", 4000) for _ in range(4)]
    bodies += [job_body(k, 300) for k in ("noop", "recon", "brkga", "noop", "recon", "brkga")]
    ids = [submit(b, deadline) for b in bodies]
    w1, w2 = WORKERS
    wait_for("worker 1 runs a job", lambda: running_on(w1, 0.02), 30)
    wait_for("worker 2 runs a job", lambda: running_on(w2, 0.02), 30)
    held1 = running_on(w1)
    w1.kill9()
    killed_at = time.time()
    held2 = running_on(w2)
    t0 = time.time()
    assert w2.terminate(timeout=30) == 0, w2.log_text()[-2000:]
    print(f"  SIGKILL took {sorted(held1.values())} claims with it; SIGTERM stopped in "
          f"{time.time() - t0:.1f} s holding {len(held2)}", flush=True)
    # SIGTERM: each job it held either finished inside the grace or is back in the queue with
    # its attempt given back, at once (no lease to wait for)
    released = []
    for jid, attempts in held2.items():
        state, now_attempts, owner, _ = job_row(jid)
        assert state in ("queued", "succeeded"), (jid, state)
        if state == "queued":
            assert (now_attempts, owner) == (attempts - 1, ""), (jid, now_attempts, owner, attempts)
            released.append(jid)
    assert released, "no job was still running when the worker was stopped (the test proves nothing)"
    # no worker is left: the api replica gives the killed worker's jobs back once their lease
    # expired (its rescue runs every 5 s), so they read queued, not running on a dead process
    id_list = "', '".join(held1)

    def rescued():
        return H.scalar(f"SELECT count(*) FROM jobs WHERE id IN ('{id_list}') AND state = 'running'") == "0"
    wait_for("the api replica rescued the killed worker's jobs", rescued, LEASE_S + 5 + 3, 0.1)
    WORKERS[:] = start_workers(w1.data_dir, w2.data_dir)
    histories = check_every_job(ids)
    for jid in released:
        hist = histories[jid]
        runs = [h for h in hist if h[0] == "running"]
        assert [h[1] for h in runs] == [1, 1], f"a release spent an attempt: {hist}"
        assert runs[0][2] == w2.worker_id and runs[1][2] != w2.worker_id, hist
    for jid in held1:
        hist = histories[jid]
        runs = [h for h in hist if h[0] == "running"]
        assert [h[1] for h in runs] == [1, 2], f"the killed worker's attempt: {hist}"
        assert runs[0][2] == w1.worker_id and runs[1][2] != w1.worker_id, hist
        rescued = [h for h in hist if h[0] == "queued" and h[3]]
        assert len(rescued) == 1 and "lease expired" in rescued[0][3], hist
    rescued_at = float(H.scalar("SELECT extract(epoch FROM min(at)) FROM job_events WHERE kind = 'state' AND "
                                "detail->'error'->>'message' LIKE 'lease expired%' AND job_id IN ('"
                                + "', '".join(held1) + "')"))
    print(f"  the killed worker's jobs were rescued {rescued_at - killed_at:.1f} s after the kill "
          f"(lease {LEASE_S} s)", flush=True)
    assert rescued_at - killed_at > LEASE_S - 1.0, "rescued before the lease could have expired"


class Load:
    """Submits a job of each kind in turn through the api replica until stopped."""

    def __init__(self):
        self.ids = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error = None
        self.thread.start()

    def _run(self):
        kinds = ["noop", "recon", "brkga"]
        try:
            while not self.stop.is_set():
                kind = kinds[len(self.ids) % len(kinds)]
                self.ids.append(submit(job_body(kind, 2500), time.time() + 60))
                time.sleep(0.25)
        except Exception as e:  # reported by finish()
            self.error = e

    def finish(self):
        self.stop.set()
        self.thread.join(90)
        assert self.error is None, self.error
        return self.ids


def test_rolling_restart_under_load_completes_every_job():
    load = Load()
    t0 = time.time()
    held = []
    for i, old in enumerate(list(WORKERS)):
        # stopped with a 2.5 s noop claimed under a second ago: it outlasts the 1 s grace and
        # is given back
        wait_for("the worker runs a noop", lambda: running_on(old, kind="noop", claimed_within_s=1), 20, 0.02)
        held.append((old.worker_id, running_on(old)))
        stop_worker_watching_probes(old)
        WORKERS[i], = start_workers(old.data_dir)
    old = API.server
    assert old.terminate(timeout=30) == 0, old.log_text()[-2000:]
    API.server = H.start_server(API_ARGS, data_dir=old.data_dir, port=old.port)
    time.sleep(0.5)
    ids = load.finish()
    print(f"  {len(ids)} jobs submitted during the rolling restart ({time.time() - t0:.1f} s)", flush=True)
    assert len(ids) >= 10, ids
    histories = check_every_job(ids)
    for worker, jobs in held:
        # given back: claimed by the stopping worker, queued again with the attempt returned
        released = [j for j in jobs if any(a[0] == "running" and a[2] == worker and b[0] == "queued" and
                                           b[1] == a[1] - 1 and not b[3]
                                           for a, b in zip(histories[j], histories[j][1:]))]
        print(f"  worker {worker} stopped holding {len(jobs)}, gave back {len(released)}", flush=True)
        assert released, f"nothing given back: {[histories[j] for j in jobs]}"


def test_sigterm_after_a_freeze_still_gives_back():
    """A worker frozen and thawed (SIGSTOP, SIGCONT: docker pause, a cgroup freezer) and then
    sent SIGTERM shuts down as ever: exit 0, its job back in the queue with its attempt
    returned. (The kernel may hand that SIGTERM to a thread a library started before main,
    which used to end the process on the spot.) Both workers, each with a job running."""
    ids = [submit(job_body("noop", 4000), time.time() + 30) for _ in range(4)]
    for srv in WORKERS:
        wait_for("the worker runs a job", lambda: running_on(srv), 20)
    for i, srv in enumerate(list(WORKERS)):
        held = running_on(srv)
        srv.proc.send_signal(signal.SIGSTOP)
        time.sleep(0.3)
        srv.proc.send_signal(signal.SIGCONT)
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(30) == 0, f"exit {srv.proc.returncode} after SIGCONT, SIGTERM: {srv.log_text()[-1500:]}"
        for jid, attempts in held.items():
            state, now_attempts, _, _ = job_row(jid)
            assert state == "succeeded" or (state, now_attempts) == ("queued", attempts - 1), (jid, state, now_attempts)
        WORKERS[i], = start_workers(srv.data_dir)
    check_every_job(ids)


def teardown():
    if H:
        H.close()


if __name__ == "__main__":
    try:
        setup()
        run_tests([test_sigkill_and_sigterm_mid_job_lose_nothing,
                   test_rolling_restart_under_load_completes_every_job,
                   test_sigterm_after_a_freeze_still_gives_back])
    finally:
        teardown()
