"""Partitions, not only kills (issue 28): PostgreSQL and two `gpujobd serve` replicas each in a
network namespace of their own (made by the test: netns.py), the replicas reaching the
database over TCP on veth pairs. A cut takes a veth down on the database's side: to the
replica the database becomes a black hole (what it sends is dropped, nothing is refused or
reset), and nothing is killed.

- One replica cut off mid-job: its /readyz says 503 naming the database within seconds, its
  event streams (a job's and /v1/events, opened before the cut) say it lost its database and
  end; the job's lease expires and the other replica runs it to its end, once; when the link
  returns the cut-off replica's heartbeat is refused by the lease's fencing and its result is
  dropped (nothing of it is written), and it is ready again and serves.
- The database cut from both replicas for 30 s: both /readyz say so, submits are refused with
  503; after it every job ends exactly once and new work runs.

Leases are short (5 s) so that the test stays well under two minutes. Needs root (ip netns,
iproute2; nsenter): exits 77 (skipped) when not root and not on CI; as root it must run.
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import netns
from chaoslib import GPUJOBD, NET_ERRORS, Client, Harness, _pg_bindir, check_exactly_once, run_tests, wait_for
from harness import Server

LEASE_S = 5
NOTICE_S = int(os.environ.get("GJ_NOTICE_S", "20"))         # a cut is noticed (readiness, streams) within this
REPLICA_ARGS = ["--cpu-workers", "1", "--lease-seconds", str(LEASE_S), "--retry-backoff-ms", "0",
                "--poll-interval-ms", "200", "--shutdown-grace-seconds", "1"]

H = None
NS = None
DB_NS = None
REPLICAS = []       # the two replicas; each knows its namespace and its link's database side


class NsServer(Server):
    """harness.Server, started inside a namespace of its own, reached through it."""

    def __init__(self, harness, ns, db_addr, db_dev, name):
        self.ns = ns
        self.db_dev = db_dev        # the veth's end in the database's namespace: the cut
        self.name = name
        port = 8443
        data_dir = os.path.join(harness.tmp, name)
        url = f"postgresql://{harness.db_user}@{db_addr}:5432/gpujobd"
        self.harness = harness
        self.data_dir = data_dir
        self.port = port
        self.insecure = False
        self.log_path = os.path.join(data_dir, "server.log")
        os.makedirs(data_dir, exist_ok=True)
        self.log = open(self.log_path, "ab")
        cmd = netns.command_in(ns, [GPUJOBD, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data_dir,
                                    "--database-url", url] + REPLICA_ARGS)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self._ctx = None
        harness.servers.append(self)

    @property
    def admin_key(self):
        """The admin key: the first replica up on the empty database made it, in its data dir."""
        for srv in self.harness.servers:
            path = os.path.join(srv.data_dir, "admin.key")
            if os.path.exists(path):
                with open(path) as f:
                    return f.read().strip()
        raise AssertionError("no replica wrote admin.key")

    def client(self, key=None):
        return NsClient(self, self.admin_key if key is None else key)

    def readyz(self):
        """(status, body) of /readyz, or (None, error) when nothing answers within 10 s."""
        try:
            r = NsClient(self, "").request("GET", "/readyz", timeout=10)
            return r.status, r.body.decode(errors="replace")
        except NET_ERRORS as e:
            return None, repr(e)

    def wait_ready(self, timeout=60):
        def ready():
            assert self.proc.poll() is None, f"{self.name} exited {self.proc.returncode}: {self.log_text()[-2000:]}"
            return self.readyz()[0] == 200
        wait_for(f"{self.name} ready", ready, timeout, 0.1)

    def connection(self, timeout):
        return NsHTTPSConnection(self.ns, "127.0.0.1", self.port, timeout=timeout, context=self.ssl_context())


class NsHTTPSConnection(http.client.HTTPSConnection):
    """Its socket made inside the namespace (then used from here as any other)."""

    def __init__(self, ns, *args, **kw):
        super().__init__(*args, **kw)
        self.ns = ns

    def connect(self):
        with netns.entered(self.ns):
            sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


class NsClient(Client):
    def connection(self, timeout=60):
        return self.server.connection(timeout)


class Stream:
    """An event stream read on a thread: the events as (time, name, data), and whether and
    when the server ended it."""

    def __init__(self, server, path):
        self.events = []
        self.ended_at = None
        self.error = None
        self.opened = threading.Event()
        conn = server.connection(120)
        conn.request("GET", path, headers={"Authorization": "Bearer " + server.admin_key,
                                           "Accept": "text/event-stream"})
        self.resp = conn.getresponse()
        assert self.resp.status == 200, (path, self.resp.status, self.resp.read()[:300])
        self.conn = conn
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        name, data = "message", ""
        try:
            for raw in self.resp:
                line = raw.decode().rstrip("\n")
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data += line[5:].strip()
                elif line == "":
                    if data:
                        self.events.append((time.time(), name, data))
                    name, data = "message", ""
            self.ended_at = time.time()
        except NET_ERRORS as e:
            self.error = e

    def named(self, name):
        return [(t, json.loads(d)) for t, n, d in self.events if n == name]

    def close(self):
        self.conn.close()


# ---- the database in its namespace ------------------------------------------------------------

def start_db_in_namespace(addrs):
    """The harness's cluster stopped and started again inside DB_NS, listening on the veth
    addresses (its Unix socket, in the file system, stays this test's way to look)."""
    H.pg.send_signal(signal.SIGINT)
    H.pg.wait(30)
    with open(os.path.join(H.pgdir, "pg_hba.conf"), "a") as f:
        f.write("host all all 10.231.0.0/16 trust\n")
    cmd = netns.command_in(DB_NS, [os.path.join(_pg_bindir(), "postgres"), "-D", H.pgdir,
                                   "-c", "listen_addresses=" + ",".join(addrs)], user=H.user)
    H.pg = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(H.tmp, "pg.log"), "ab"))

    def accepting():
        assert H.pg.poll() is None, "postgres exited at start: " + open(os.path.join(H.tmp, "pg.log")).read()[-2000:]
        return subprocess.run(["pg_isready", "-q", "-h", H.sockdir], capture_output=True).returncode == 0
    wait_for("PostgreSQL in its namespace", accepting, 30, 0.1)


def worker_id(srv):
    def registered():
        assert srv.proc.poll() is None, f"{srv.name} exited: {srv.log_text()[-2000:]}"
        rows = H.sql(f"SELECT id FROM workers WHERE pid = {srv.proc.pid} ORDER BY started_at DESC LIMIT 1")
        return rows[0][0] if rows else None
    return wait_for(f"{srv.name} registered", registered, 30)


def setup():
    global H, NS, DB_NS
    NS = netns.Namespaces()
    DB_NS = NS.add("db")
    H = Harness()
    addrs = []
    for i, name in enumerate(("a", "b"), start=1):
        ns = NS.add(name)
        db_addr = f"10.231.{i}.1"
        db_dev, _ = NS.link(DB_NS, db_addr, ns, f"10.231.{i}.2", name)
        addrs.append(db_addr)
        REPLICAS.append((ns, db_addr, db_dev, "replica-" + name))
    start_db_in_namespace(addrs)
    started = [NsServer(H, *spec) for spec in REPLICAS]
    REPLICAS[:] = started
    for srv in started:
        srv.wait_ready()
        srv.worker_id = worker_id(srv)


def teardown():
    try:
        if H:
            H.close()      # the replicas, then PostgreSQL: nothing is left inside the namespaces
    finally:
        if NS:
            NS.close()


# ---- helpers ----------------------------------------------------------------------------

def cut(srv):
    netns.Namespaces.set_link(DB_NS, srv.db_dev, up=False)


def restore(srv):
    netns.Namespaces.set_link(DB_NS, srv.db_dev, up=True)


def job_row(job_id):
    state, attempts, owner = H.sql(f"SELECT state, attempts, coalesce(lease_owner, '') FROM jobs"
                                   f" WHERE id = '{job_id}'")[0]
    return state, int(attempts), owner


def history(job_id):
    """[(state, attempt, worker, error message)] oldest first, as the triggers wrote them."""
    rows = H.sql("SELECT detail->>'state', coalesce(detail->>'attempt', ''), coalesce(detail->>'worker', ''),"
                 " coalesce(detail->'error'->>'message', '') FROM job_events"
                 f" WHERE job_id = '{job_id}' AND kind = 'state' ORDER BY id")
    return [(s, int(a) if a else None, w, e) for s, a, w, e in rows]


def wait_not_ready(srv, t0):
    """/readyz answers 503 naming the database (an answer, not a hang) within NOTICE_S."""
    seen = []

    def not_ready():
        status, body = srv.readyz()
        seen.append((round(time.time() - t0, 1), status, body[:200]))
        return (status, body) if status == 503 else None
    try:
        status, body = wait_for(f"{srv.name}: /readyz 503", not_ready, NOTICE_S, 0.2)
    except AssertionError as e:
        raise AssertionError(f"{e}; it answered (s after the cut, status, body): {seen[-4:]}") from None
    reasons = json.loads(body)["reasons"]
    assert any(r.startswith("database") for r in reasons), reasons
    return time.time() - t0, reasons


# ---- tests ------------------------------------------------------------------------------

def test_replica_cut_off_mid_job():
    first = REPLICAS[0].client()
    job = first.submit("noop", {"sleep_ms": 16000, "output_bytes": 4096}, max_attempts=3)["id"]
    owner = wait_for("the job claimed", lambda: (lambda r: r[2] if r[0] == "running" else None)(job_row(job)), 20)
    cut_off = next(s for s in REPLICAS if s.worker_id == owner)
    other = next(s for s in REPLICAS if s is not cut_off)
    job_stream = Stream(cut_off, f"/v1/jobs/{job}/events")
    all_stream = Stream(cut_off, "/v1/events")
    wait_for("the job's stream says it runs", lambda: job_stream.named("progress") or job_stream.named("state"), 10)
    cut(cut_off)
    t0 = time.time()
    try:
        took, reasons = wait_not_ready(cut_off, t0)
        print(f"  {cut_off.name} cut off: /readyz 503 after {took:.1f} s: {reasons}", flush=True)
        assert cut_off.client("").request("GET", "/healthz", timeout=10).status == 200
        for s, what in ((job_stream, "the job's stream"), (all_stream, "/v1/events")):
            said = wait_for(f"{what} on the cut-off replica says it lost its database",
                            lambda: s.named("unavailable"), NOTICE_S, 0.1)
            assert said[0][1]["reason"].startswith("database: unreachable"), said
            assert not s.ended_at and not s.error, (what, s.ended_at, s.error)
            print(f"  {what}: 'unavailable' after {said[0][0] - t0:.1f} s: {said[0][1]}", flush=True)
        # the lease expires; the other replica claims the job (its second attempt)
        wait_for("the other replica runs the job",
                 lambda: job_row(job)[0] == "running" and job_row(job)[2] == other.worker_id, LEASE_S + 20, 0.2)
        print(f"  {other.name} claimed the job {time.time() - t0:.1f} s after the cut", flush=True)
    finally:
        restore(cut_off)
    t1 = time.time()
    wait_for(f"{cut_off.name} ready again", lambda: cut_off.readyz()[0] == 200, NOTICE_S, 0.2)
    print(f"  link back: {cut_off.name} ready again after {time.time() - t1:.1f} s", flush=True)
    # its own attempt is fenced: the heartbeat refused (the lease is another's) and the result dropped
    wait_for(f"{cut_off.name} drops its late result",
             lambda: f"job {job}: lease lost; its result is dropped" in cut_off.log_text(), 30, 0.2)
    wait_for("the job succeeded", lambda: job_row(job)[0] == "succeeded", 40, 0.2)
    # the streams opened on it before the cut say the database is back, and go on: the job's
    # stream tells the end the other replica wrote, and ends with it
    for s, what in ((job_stream, "the job's stream"), (all_stream, "/v1/events")):
        wait_for(f"{what} says the database is back", lambda: s.named("available"), NOTICE_S, 0.1)
        assert len(s.named("unavailable")) == 1 and s.named("available")[0][0] > s.named("unavailable")[0][0], \
            s.events
    wait_for("the job's stream ends with the job", lambda: job_stream.ended_at, 20, 0.1)
    finals = [d for _, d in job_stream.named("state") if d.get("state") == "succeeded"]
    assert finals and finals[-1].get("attempt") == 2, job_stream.events[-5:]
    wait_for("/v1/events tells the job's end",
             lambda: any(d.get("id") == job and d.get("state") == "succeeded" for _, d in all_stream.named("job")),
             10, 0.1)
    attempts = check_exactly_once(H.sql, [job])
    hist = history(job)
    runs = [h for h in hist if h[0] == "running"]
    assert attempts[job] == 2 and [(h[1], h[2]) for h in runs] == [(1, cut_off.worker_id), (2, other.worker_id)], hist
    assert any(h[0] == "queued" and "lease expired" in h[3] for h in hist), hist
    assert hist[-1][:2] == ("succeeded", 2), hist
    outputs = H.sql(f"SELECT name FROM job_outputs WHERE job_id = '{job}' ORDER BY name")
    assert outputs == [["data.bin"], ["result.json"]], f"outputs stored: {outputs}"
    job_stream.close()
    all_stream.close()
    # it rejoined: it serves, and its workers claim again
    again = [cut_off.client().submit("noop", {"sleep_ms": 300})["id"] for _ in range(4)]
    for j in again:
        cut_off.client().wait_job(j, timeout=30)
    check_exactly_once(H.sql, again + [job])


def test_database_cut_from_every_replica_30s():
    a, b = REPLICAS
    ids = [a.client().submit("noop", {"sleep_ms": 2500, "output_bytes": 1000}, max_attempts=5)["id"]
           for _ in range(3)]
    ids += [b.client().submit("noop", {"sleep_ms": 2500, "output_bytes": 1000}, max_attempts=5)["id"]
            for _ in range(3)]
    wait_for("both replicas run a job",
             lambda: H.scalar("SELECT count(DISTINCT lease_owner) FROM jobs WHERE state = 'running'") == "2", 20, 0.1)
    for srv in REPLICAS:
        cut(srv)
    t0 = time.time()
    try:
        for srv in REPLICAS:
            took, reasons = wait_not_ready(srv, t0)
            print(f"  {srv.name}: /readyz 503 after {took:.1f} s: {reasons}", flush=True)
            r = srv.client().request("POST", "/v1/jobs", json={"kind": "noop", "params": {}}, timeout=15)
            assert r.status == 503, r
        time.sleep(max(0.0, 30 - (time.time() - t0)))
    finally:
        for srv in REPLICAS:
            restore(srv)
    t1 = time.time()
    for srv in REPLICAS:
        wait_for(f"{srv.name} ready again", lambda: srv.readyz()[0] == 200, NOTICE_S, 0.2)
    print(f"  link back after {t1 - t0:.1f} s: both ready after {time.time() - t1:.1f} s", flush=True)
    after = [srv.client().submit("noop", {"sleep_ms": 200})["id"] for srv in REPLICAS]
    wait_for("every job ended",
             lambda: H.scalar("SELECT count(*) FROM jobs WHERE state NOT IN ('succeeded','failed','canceled')") == "0",
             60, 0.5)
    check_exactly_once(H.sql, ids + after)


if __name__ == "__main__":
    if os.geteuid() != 0 and not os.environ.get("CI"):
        print("skipped: needs root (ip netns)")
        sys.exit(77)
    ok, why = netns.available()     # as root (CI runs as root) it must run: no skip
    if not ok:
        sys.exit(f"network namespaces unavailable: {why}")
    # meson's timeout sends SIGTERM: leave through the finally, which removes the namespaces
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        setup()
        run_tests([test_replica_cut_off_mid_job, test_database_cut_from_every_replica_30s])
    finally:
        teardown()
