"""Integration test harness: a real PostgreSQL and real `gpujobd serve` processes over HTTPS.

Run tests with Debian's /usr/bin/python3 (standard library only). Environment from meson:
GPUJOBD (the binary), GJ_SOURCE_ROOT, GJ_BUILD_ROOT.

    h = Harness()                      # private PostgreSQL in a temp dir (as `postgres` when root)
    srv = h.start_server()             # gpujobd serve on a free port, its own data dir
    c = srv.client()                   # admin key; srv.client(key=...) for another
    status, headers, body = c.request("GET", "/v1/kinds")
    job = c.json("POST", "/v1/jobs", {"kind": "noop", "params": {}})
    h.sql("SELECT count(*) FROM jobs")  # -> [['1']]
    h.close()                          # stops servers, then PostgreSQL; removes temp dirs

With GJ_TEST_BLOB_STORE=s3 (or Harness(blob_store="s3")) every server stores its blobs in a real
S3 store: Swift with s3api (swift_s3.py), started once per test process, a bucket per harness
(h.s3, h.bucket).
"""

import atexit
import http.client
import json as jsonlib
import os
import pwd
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid

GPUJOBD = os.environ.get("GPUJOBD") or os.path.join(
    os.environ.get("GJ_BUILD_ROOT", "build"), "service", "gpujobd")


def _pg_bindir():
    for name in ("initdb",):
        path = shutil.which(name)
        if path:
            return os.path.dirname(os.path.realpath(path))
    base = "/usr/lib/postgresql"
    versions = sorted((d for d in os.listdir(base) if d.isdigit()), key=int) if os.path.isdir(base) else []
    if not versions:
        raise RuntimeError("PostgreSQL server binaries not found (apt-get install postgresql)")
    return os.path.join(base, versions[-1], "bin")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return jsonlib.loads(self.body)

    def __iter__(self):  # status, headers, body = c.request(...)
        return iter((self.status, self.headers, self.body))

    def __repr__(self):
        return f"<Response {self.status} {self.body[:300]!r}>"


class Client:
    def __init__(self, server, key):
        self.server = server
        self.key = key

    def connection(self, timeout=60):
        if self.server.insecure:
            return http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=timeout)
        return http.client.HTTPSConnection("127.0.0.1", self.server.port, timeout=timeout,
                                           context=self.server.ssl_context())

    def request(self, method, path, body=None, headers=None, json=None, timeout=60, key=None):
        hdrs = dict(headers or {})
        use_key = self.key if key is None else key
        if use_key and "Authorization" not in hdrs:
            hdrs["Authorization"] = "Bearer " + use_key
        if json is not None:
            body = jsonlib.dumps(json).encode()
            hdrs.setdefault("Content-Type", "application/json")
        conn = self.connection(timeout)
        try:
            conn.request(method, path, body=body, headers=hdrs)
            r = conn.getresponse()
            data = r.read()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
        finally:
            conn.close()

    def json(self, method, path, json=None, expect=None, **kw):
        r = self.request(method, path, json=json, **kw)
        if expect is not None and r.status != expect:
            raise AssertionError(f"{method} {path}: expected {expect}, got {r.status}: {r.body[:500]!r}")
        return r.json() if r.body else None

    def submit(self, kind, params=None, inputs=None, expect=201, **extra):
        body = {"kind": kind, "params": params or {}}
        if inputs:
            body["inputs"] = inputs
        body.update(extra)
        return self.json("POST", "/v1/jobs", body, expect=expect)

    def wait_job(self, job_id, states=("succeeded", "failed", "canceled"), timeout=60):
        deadline = time.time() + timeout
        final = set(states) <= {"succeeded", "failed", "canceled"}
        job = self.json("GET", f"/v1/jobs/{job_id}", expect=200)
        while job["state"] not in states:
            if time.time() > deadline:
                break
            if final:
                # ?wait= returns as soon as the state differs from the one it saw.
                job = self.json("GET", f"/v1/jobs/{job_id}?wait=5", expect=200)
            else:
                # A passing state (running) could come and go inside one long poll.
                time.sleep(0.02)
                job = self.json("GET", f"/v1/jobs/{job_id}", expect=200)
        if job["state"] in states:
            return job
        raise AssertionError(f"job {job_id} did not reach {states} in {timeout}s: {job}")

    def upload(self, data, content_type="application/octet-stream", headers=None, expect=201):
        hdrs = {"Content-Type": content_type}
        hdrs.update(headers or {})
        r = self.request("POST", "/v1/blobs", body=data, headers=hdrs)
        if expect is not None and r.status != expect:
            raise AssertionError(f"upload: expected {expect}, got {r.status}: {r.body[:300]!r}")
        return r.json() if r.body else None


class Server:
    def __init__(self, harness, data_dir, port, args, env, insecure):
        self.harness = harness
        self.data_dir = data_dir
        self.port = port
        self.insecure = insecure
        self.log_path = os.path.join(data_dir, "server.log")
        os.makedirs(data_dir, exist_ok=True)
        self.log = open(self.log_path, "ab")
        cmd = [GPUJOBD, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data_dir,
               "--database-url", harness.url] + list(args)
        if insecure:
            cmd.append("--insecure-http")
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=full_env)
        self._ctx = None

    def ssl_context(self):
        if self._ctx is None:
            ctx = ssl.create_default_context(cafile=os.path.join(self.data_dir, "tls", "cert.pem"))
            self._ctx = ctx
        return self._ctx

    @property
    def admin_key(self):
        with open(os.path.join(self.data_dir, "admin.key")) as f:
            return f.read().strip()

    def client(self, key=None):
        return Client(self, self.admin_key if key is None else key)

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"gpujobd exited with {self.proc.returncode}:\n{self.log_text()[-3000:]}")
            try:
                r = Client(self, "").request("GET", "/readyz", timeout=5)
                if r.status == 200:
                    return
                last = r
            except (OSError, ssl.SSLError, http.client.HTTPException) as e:
                last = e
            time.sleep(0.1)
        raise AssertionError(f"gpujobd not ready in {timeout}s ({last}):\n{self.log_text()[-3000:]}")

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def terminate(self, timeout=60):
        """SIGTERM and wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close() if not self.log.closed else None
        return self.proc.returncode

    def kill9(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


_SWIFT = None


def shared_s3():
    """The process's one Swift (started on first use; stopped at exit)."""
    global _SWIFT
    if _SWIFT is None:
        import swift_s3
        _SWIFT = swift_s3.SwiftS3()
    return _SWIFT


class Harness:
    """A private PostgreSQL cluster (real server, Unix socket only) for one test."""

    def __init__(self, blob_store=None):
        self.blob_store = blob_store or os.environ.get("GJ_TEST_BLOB_STORE", "postgres")
        self.s3 = self.bucket = None
        if self.blob_store == "s3":
            self.s3 = shared_s3()
            self.bucket = self.s3.create_bucket("gpujobd-" + uuid.uuid4().hex[:12])
        self.tmp = tempfile.mkdtemp(prefix="gpujobd-it-")
        os.chmod(self.tmp, 0o755)
        self.servers = []
        self.pgdir = os.path.join(self.tmp, "pg")
        self.sockdir = os.path.join(self.tmp, "pgsock")
        bindir = _pg_bindir()
        self.user = None
        self.db_user = pwd.getpwuid(os.getuid()).pw_name
        if os.getuid() == 0:
            # initdb and postgres refuse to run as root: run them as `postgres`.
            self.user = os.environ.get("GPUJOBD_PG_USER", "postgres")
            self.db_user = self.user
            pw = pwd.getpwnam(self.user)
            for d in (self.pgdir, self.sockdir):
                os.makedirs(d, mode=0o700)
                os.chown(d, pw.pw_uid, pw.pw_gid)
        else:
            os.makedirs(self.pgdir, mode=0o700)
            os.makedirs(self.sockdir, mode=0o700)
        run = dict(user=self.user) if self.user else {}
        subprocess.run([os.path.join(bindir, "initdb"), "-D", self.pgdir, "-A", "trust", "-U", self.db_user,
                        "-E", "UTF8", "--no-sync"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, **run)
        with open(os.path.join(self.pgdir, "postgresql.conf"), "a") as f:
            f.write(f"listen_addresses = ''\nunix_socket_directories = '{self.sockdir}'\n"
                    "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                    "max_connections = 300\nshared_buffers = 128MB\n")
        self.pg = subprocess.Popen([os.path.join(bindir, "postgres"), "-D", self.pgdir],
                                   stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.tmp, "pg.log"), "ab"),
                                   **run)
        self.url = f"postgresql:///gpujobd?host={self.sockdir}&user={self.db_user}"
        deadline = time.time() + 30
        while True:
            r = subprocess.run(["psql", "-h", self.sockdir, "-U", self.db_user, "-d", "postgres", "-Atqc",
                                "CREATE DATABASE gpujobd"], capture_output=True)
            if r.returncode == 0:
                break
            if time.time() > deadline or self.pg.poll() is not None:
                raise RuntimeError("PostgreSQL did not start: " + r.stderr.decode())
            time.sleep(0.1)
        atexit.register(self.close)

    def sql(self, query, *params):
        """Runs one statement through psql; returns rows as lists of strings."""
        args = ["psql", "-h", self.sockdir, "-U", self.db_user, "-d", "gpujobd", "-AtqX", "-F", "\t",
                "-v", "ON_ERROR_STOP=1"]
        for i, p in enumerate(params):
            args += ["-v", f"p{i + 1}={p}"]
        r = subprocess.run(args + ["-c", query], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"psql failed: {r.stderr}")
        return [line.split("\t") for line in r.stdout.splitlines() if line != ""]

    def scalar(self, query):
        rows = self.sql(query)
        return rows[0][0] if rows else None

    def s3_args(self):
        """The flags and environment that send a server's blobs to this harness's bucket."""
        if not self.s3:
            return [], {}
        return (["--blob-store", "s3", "--s3-endpoint", self.s3.endpoint, "--s3-bucket", self.bucket,
                 "--s3-region", self.s3.region],
                {"AWS_ACCESS_KEY_ID": self.s3.access_key, "AWS_SECRET_ACCESS_KEY": self.s3.secret_key})

    def start_server(self, args=(), env=None, insecure=False, wait=True, data_dir=None, port=None):
        if self.s3 and "--blob-store" not in args:
            extra, extra_env = self.s3_args()
            args = extra + list(args)
            env = dict(extra_env, **(env or {}))
        n = len(self.servers)
        data_dir = data_dir or os.path.join(self.tmp, f"srv{n}")
        srv = Server(self, data_dir, port or free_port(), args, env, insecure)
        self.servers.append(srv)
        if wait:
            srv.wait_ready()
        return srv

    def close(self):
        for s in self.servers:
            try:
                s.terminate(timeout=30)
            except Exception:
                pass
        self.servers = []
        if getattr(self, "pg", None) and self.pg.poll() is None:
            self.pg.send_signal(signal.SIGINT)
            try:
                self.pg.wait(30)
            except subprocess.TimeoutExpired:
                self.pg.kill()
        self.pg = None
        if os.environ.get("GJ_KEEP_TMP"):
            print(f"kept {self.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def multipart_form(parts):
    """A multipart/form-data body of (field, filename, bytes) parts, as a browser or
    requests sends a model upload; returns (body, Content-Type)."""
    boundary = "gjform" + uuid.uuid4().hex
    out = []
    for name, filename, data in parts:
        out.append(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n"
                   "Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


class TestFailure(AssertionError):
    pass


def run_tests(tests):
    """Runs test functions in order, prints one line each and a closing 'N passed, N failed'."""
    passed = failed = 0
    for t in tests:
        t0 = time.time()
        try:
            t()
            passed += 1
            print(f"ok   {t.__name__} ({time.time() - t0:.1f}s)", flush=True)
        except Exception as e:  # report and go on: one broken behaviour should not hide others
            failed += 1
            import traceback
            traceback.print_exc()
            print(f"FAIL {t.__name__}: {e}", flush=True)
    print(f"{passed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)
