"""Shared helpers of the chaos suite's fault tests (issue 11): a real PostgreSQL (external, from
tests/integration/harness.py, or the service's embedded one), real `gpujobd serve` processes
over HTTPS, and the checks that every job ended exactly once and nothing acknowledged was lost.

Run with Debian's /usr/bin/python3 (numpy and PIL for the DICOM inputs).
"""
import hashlib
import http.client
import os
import random
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import GPUJOBD, Client, Harness, _pg_bindir, free_port, run_tests  # noqa: E402,F401

SRC = os.environ.get("GJ_SOURCE_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TERMINAL = ("succeeded", "failed", "canceled")
NET_ERRORS = (OSError, ssl.SSLError, http.client.HTTPException)


def wait_for(what, predicate, timeout, interval=0.05):
    """Polls predicate() until it returns something true; returns it, or fails naming what."""
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(interval)


# ---- PostgreSQL ------------------------------------------------------------------------

def durable_commits(h):
    """The harness runs its cluster with synchronous_commit off (fast), whose commits wait in
    shared memory: a killed postmaster would lose acknowledged ones. Tests that kill it turn
    it on (fsync stays off: the kernel keeps what was written when a process dies)."""
    h.sql("ALTER SYSTEM SET synchronous_commit = on")
    h.sql("SELECT pg_reload_conf()")


def kill_external_pg(h):
    """kill -9 of the harness's postmaster; waits for it (its backends follow it)."""
    h.pg.kill()
    h.pg.wait()


def start_external_pg(h):
    """Starts the harness's cluster again on the same directory and socket."""
    run = dict(user=h.user) if h.user else {}
    h.pg = subprocess.Popen([os.path.join(_pg_bindir(), "postgres"), "-D", h.pgdir],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(h.tmp, "pg.log"), "ab"), **run)

    def accepting():
        assert h.pg.poll() is None, "postgres exited at start"
        return subprocess.run(["pg_isready", "-q", "-h", h.sockdir], capture_output=True).returncode == 0
    wait_for("PostgreSQL accepts connections again", accepting, 60, 0.1)


class EmbeddedServer:
    """`gpujobd serve` with its embedded PostgreSQL (no --database-url), on a free port."""

    def __init__(self, args=(), env=None):
        self.tmp = tempfile.mkdtemp(prefix="gpujobd-chaos-")
        os.chmod(self.tmp, 0o755)
        self.data_dir = os.path.join(self.tmp, "var")
        self.port = free_port()
        self.insecure = False
        self.log_path = os.path.join(self.tmp, "serve.log")
        self.log = open(self.log_path, "ab")
        full_env = dict(os.environ, GPUJOBD_PG_NOSYNC="1")
        full_env.update(env or {})
        self.proc = subprocess.Popen([GPUJOBD, "serve", "--data-dir", self.data_dir, "--listen",
                                      f"127.0.0.1:{self.port}"] + list(args),
                                     stdout=self.log, stderr=subprocess.STDOUT, env=full_env)
        self._ctx = None

    def ssl_context(self):
        if self._ctx is None:
            self._ctx = ssl.create_default_context(cafile=os.path.join(self.data_dir, "tls", "cert.pem"))
        return self._ctx

    @property
    def admin_key(self):
        with open(os.path.join(self.data_dir, "admin.key")) as f:
            return f.read().strip()

    def client(self, key=None):
        return Client(self, self.admin_key if key is None else key)

    def readyz(self):
        """(status, body) of /readyz, or (None, error) when nothing answers."""
        try:
            r = Client(self, "").request("GET", "/readyz", timeout=5)
            return r.status, r.body.decode(errors="replace")
        except NET_ERRORS as e:
            return None, repr(e)

    def wait_ready(self, timeout=120):
        def ready():
            assert self.proc.poll() is None, f"gpujobd exited {self.proc.returncode}: {self.log_text()[-3000:]}"
            return self.readyz()[0] == 200
        wait_for("gpujobd ready", ready, timeout, 0.1)

    def postmaster_pid(self):
        with open(os.path.join(self.data_dir, "pg", "postmaster.pid")) as f:
            return int(f.readline())

    def sql(self, query):
        r = subprocess.run(["psql", "-h", os.path.join(self.data_dir, "run"), "-U", "gpujobd", "-d", "gpujobd",
                            "-AtqX", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", query],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"psql failed: {r.stderr}")
        return [line.split("\t") for line in r.stdout.splitlines() if line != ""]

    def log_text(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if os.environ.get("GJ_KEEP_TMP"):
            print(f"kept {self.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


# ---- inputs ----------------------------------------------------------------------------

def make_dicom(path, size=512, jpeg=False):
    """A chest-like grayscale DX image the demo model accepts (DCMTK's img2dcm and dcmodify).
    jpeg: JPEG baseline pixel data, so that each image takes a while to decode."""
    from PIL import Image
    import numpy as np
    y, x = np.mgrid[0:size, 0:size].astype("float32")
    img = 60 + 120 * np.exp(-(((x - size / 2) / (size / 3)) ** 2 + ((y - size / 2) / (size / 2.5)) ** 2))
    src = path + (".jpg" if jpeg else ".bmp")
    Image.fromarray(np.clip(img, 0, 255).astype("uint8"), "L").save(src, **({"quality": 90} if jpeg else {}))
    subprocess.run(["img2dcm", "-i", "JPEG" if jpeg else "BMP", src, path], check=True, capture_output=True)
    subprocess.run(["dcmodify", "-nb", "-i", "(0008,0060)=DX", "-i", "(0018,0015)=CHEST", "-i", "(0018,5101)=PA",
                    path], check=True, capture_output=True)
    os.remove(src)
    with open(path, "rb") as f:
        return f.read()


def tsp_text(n, seed):
    rng = random.Random(seed)
    lines = [f"NAME : chaos{n}", "TYPE : TSP", f"DIMENSION : {n}", "EDGE_WEIGHT_TYPE : EUC_2D", "NODE_COORD_SECTION"]
    lines += [f"{i + 1} {rng.randint(0, 1000)} {rng.randint(0, 1000)}" for i in range(n)]
    return ("\n".join(lines + ["EOF", ""])).encode()


# ---- a client that follows restarts ----------------------------------------------------

class Target:
    """The server the load talks to now (a killed server's successor takes its place)."""

    def __init__(self, server, key):
        self.server = server
        self.key = key

    def client(self):
        return Client(self.server, self.key)


def submit_until_acknowledged(target, body, deadline):
    """POST /v1/jobs with an Idempotency-Key, again after every lost answer, until the service
    acknowledges it (201 new, 200 the same job again): that job exists once, whatever was lost."""
    key = "chaos-" + os.urandom(8).hex()
    while time.time() < deadline:
        try:
            r = target.client().request("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": key},
                                        timeout=30)
            if r.status in (200, 201):
                return r.json()["id"]
            if r.status not in (500, 502, 503, 504):
                raise AssertionError(f"submit refused: {r.status} {r.body[:300]!r}")
        except NET_ERRORS:
            pass
        time.sleep(0.1)
    raise AssertionError(f"submit not acknowledged in time: {body}")


def upload_once(target, data):
    """One upload; its blob id when the service acknowledged it (201), else None (lost answers
    and refusals while the service or its database is down are expected)."""
    try:
        r = target.client().request("POST", "/v1/blobs", body=data,
                                    headers={"Content-Type": "application/octet-stream"}, timeout=60)
        if r.status == 201:
            return r.json()["id"]
    except NET_ERRORS:
        pass
    return None


class Uploader:
    """Uploads random blobs (64 KiB - 2 MiB) one after another on a few threads until stopped,
    and records those the service acknowledged with their SHA-256."""

    def __init__(self, target, threads=2):
        self.target = target
        self.acked = []          # (blob id, sha256 hex, size)
        self.attempts = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]
        for t in self.threads:
            t.start()

    def _run(self, seed):
        rng = random.Random(seed)
        while not self.stop.is_set():
            data = rng.randbytes(rng.randint(64 << 10, 2 << 20))
            with self.lock:
                self.attempts += 1
            blob = upload_once(self.target, data)
            if blob:
                with self.lock:
                    self.acked.append((blob, hashlib.sha256(data).hexdigest(), len(data)))
            else:
                time.sleep(0.05)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(120)
        return self.acked


def verify_blobs(client, sql, acked):
    """Every acknowledged upload is there with its bytes: the content served and the digest
    stored both match what was sent."""
    stored = {r[0]: (r[1], int(r[2])) for r in sql("SELECT id, encode(sha256, 'hex'), size FROM blobs")}
    for blob, digest, size in acked:
        assert stored.get(blob) == (digest, size), f"blob {blob}: stored {stored.get(blob)}, sent {digest} {size}"
        r = client.request("GET", f"/v1/blobs/{blob}", timeout=60)
        assert r.status == 200, (blob, r)
        assert hashlib.sha256(r.body).hexdigest() == digest, f"blob {blob}: content differs from what was sent"


# ---- exactly once ------------------------------------------------------------------------

def check_exactly_once(sql, job_ids, expect_state="succeeded"):
    """Every job in the database (those acknowledged and any whose answer was lost) ended once:
    one terminal state in its history, attempts at most the times it was claimed, and no
    output stored twice (each output blob is one job_outputs row). Returns {id: attempts}."""
    ids = set(job_ids)
    rows = sql("SELECT j.id, j.state, j.attempts, j.max_attempts,"
               " (SELECT count(*) FROM job_events e WHERE e.job_id = j.id AND e.kind = 'state'"
               "   AND e.detail->>'state' = 'running'),"
               " (SELECT count(*) FROM job_events e WHERE e.job_id = j.id AND e.kind = 'state'"
               "   AND e.detail->>'state' IN ('succeeded', 'failed', 'canceled')),"
               " (SELECT count(*) FROM job_outputs o WHERE o.job_id = j.id),"
               " (SELECT count(*) FROM blobs b WHERE b.owner_job = j.id"
               "   AND NOT EXISTS (SELECT 1 FROM job_inputs i WHERE i.blob_id = b.id)),"
               " coalesce(j.error->>'message', '')"
               " FROM jobs j WHERE j.parent_id IS NULL")
    seen = {r[0] for r in rows}
    assert ids <= seen, f"acknowledged jobs missing from the database: {sorted(ids - seen)[:5]}"
    attempts = {}
    for jid, state, att, max_att, runs, ends, outs, owned, error in rows:
        what = f"job {jid} ({state}, attempts {att}, claimed {runs}, ends {ends}, outputs {outs}, blobs {owned})"
        assert state == expect_state, what + " " + error
        assert int(ends) == 1, what + ": not exactly one terminal state in its history"
        # a claim given back before its run (shutdown, no database for the inputs) is no attempt
        assert 1 <= int(att) <= min(int(runs), int(max_att)), what + ": attempts inconsistent"
        assert int(outs) == int(owned), what + ": output blobs and output rows differ"
        attempts[jid] = int(att)
    dup = sql("SELECT blob_id FROM job_outputs GROUP BY blob_id HAVING count(*) > 1")
    assert dup == [], f"an output blob recorded twice: {dup[:3]}"
    return attempts


def wait_all_terminal(sql, timeout):
    def done():
        left = sql("SELECT count(*) FROM jobs WHERE state NOT IN ('succeeded', 'failed', 'canceled')")[0][0]
        return left == "0"
    wait_for("every job in a terminal state", done, timeout, 0.5)
