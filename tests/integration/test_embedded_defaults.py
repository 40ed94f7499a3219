"""`gpujobd serve` with nothing configured: embedded PostgreSQL, self-signed TLS, admin key."""
import hashlib
import os
import ssl
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import GPUJOBD, Client, free_port, run_tests  # noqa: E402


class Embedded:
    """A server started the way README's first command starts it (plus a free port)."""

    def __init__(self, data_dir):
        self.data_dir = data_dir
        self.port = free_port()
        self.insecure = False
        self.log = open(os.path.join(os.path.dirname(data_dir), "serve.log"), "ab")
        self.proc = subprocess.Popen([GPUJOBD, "serve", "--data-dir", data_dir, "--listen", f"127.0.0.1:{self.port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self._ctx = None

    def ssl_context(self):
        if self._ctx is None:
            self._ctx = ssl.create_default_context(cafile=os.path.join(self.data_dir, "tls", "cert.pem"))
        return self._ctx

    def wait_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.proc.poll() is None, f"exited {self.proc.returncode}: {self.log_text()[-3000:]}"
            try:
                if Client(self, "").request("GET", "/readyz", timeout=5).status == 200:
                    return
            except Exception:
                pass
            time.sleep(0.2)
        raise AssertionError("not ready: " + self.log_text()[-3000:])

    def log_text(self):
        self.log.flush()
        with open(self.log.name, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(90)
        self.log.close()
        return rc


def postmasters_for(data_dir):
    r = subprocess.run(["pgrep", "-f", f"postgres -D {os.path.join(data_dir, 'pg')}"], capture_output=True, text=True)
    return [p for p in r.stdout.split() if p]


def test_embedded_defaults_first_and_second_start():
    tmp = tempfile.mkdtemp(prefix="gpujobd-emb-")
    os.chmod(tmp, 0o755)
    data = os.path.join(tmp, "var")
    s = Embedded(data)
    try:
        s.wait_ready()
        key_path = os.path.join(data, "admin.key")
        mode = stat.S_IMODE(os.stat(key_path).st_mode)
        assert mode == 0o600, oct(mode)
        key = open(key_path).read().strip()
        assert key.startswith("gjk_"), key[:4]
        log = s.log_text()
        assert "fingerprint" in log.lower(), log[-2000:]
        c = Client(s, key)
        job = c.submit("noop", {"sleep_ms": 10})
        assert c.wait_job(job["id"], timeout=60)["state"] == "succeeded"
        cert1 = hashlib.sha256(open(os.path.join(data, "tls", "cert.pem"), "rb").read()).hexdigest()
    finally:
        rc = s.stop()
    assert rc == 0, s.log_text()[-2000:]
    assert postmasters_for(data) == [], "embedded PostgreSQL left running"

    s = Embedded(data)
    try:
        s.wait_ready()
        assert open(os.path.join(data, "admin.key")).read().strip() == key, "admin key rewritten"
        cert2 = hashlib.sha256(open(os.path.join(data, "tls", "cert.pem"), "rb").read()).hexdigest()
        assert cert1 == cert2, "certificate regenerated"
        c = Client(s, key)
        assert c.json("GET", f"/v1/jobs/{job['id']}", expect=200)["state"] == "succeeded"
        # autovacuum unthrottled, as deleted blobs' rows in pg_largeobject need (bench/soak.py)
        pids = postmasters_for(data)
        assert pids, "no embedded postmaster"
        cmdline = open(f"/proc/{pids[0]}/cmdline", "rb").read().split(b"\0")
        for setting in (b"autovacuum_vacuum_cost_delay=0", b"autovacuum_naptime=10s"):
            assert setting in cmdline, (setting, cmdline)
    finally:
        assert s.stop() == 0
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    run_tests([test_embedded_defaults_first_and_second_start])
