"""A real S3-compatible store for tests: OpenStack Swift with its s3api middleware on loopback.

Debian's swift-proxy, swift-object, swift-container and swift-account (issue 30). Storage is a
plain directory in a temp dir, the rings have one replica (built with Swift's own RingBuilder),
tempauth gives one account; the servers run in the foreground (workers = 0) so stopping them is
a kill of the PIDs started here. Nothing is written outside the temp dir: swift.conf is read
from there (each server starts through set_swift_dir, below).

    s3 = SwiftS3()                  # ~3 s; s3.endpoint, s3.access_key, s3.secret_key, s3.region
    s3.create_bucket("gpujobd")     # through awscli
    s3.aws("s3", "ls")              # any awscli command against the store
    s3.close()

Run as a program it starts the store, prints `S3_ENDPOINT=... S3_ACCESS_KEY=...` lines, runs the
command given after `--` with those in its environment and stops the store (the C tests' wrapper,
tests/db/meson.build).
"""

import atexit
import hashlib
import hmac
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

PY = "/usr/bin/python3"   # Debian's python3, where swift is installed


def available():
    return os.path.exists("/usr/bin/swift-proxy-server") and os.path.exists(PY)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Each server runs from here: swift.conf is looked for in /etc/swift unless set_swift_dir says
# otherwise, and the stock /usr/bin/swift-*-server scripts do not say.
_SERVE = """
import sys
from swift.common import utils
utils.set_swift_dir(sys.argv[1])
from swift.common.wsgi import run_wsgi
sys.exit(run_wsgi(sys.argv[2], sys.argv[3], verbose=False))
"""

_RINGS = """
import sys
from swift.common.ring import RingBuilder
d, dev_dir = sys.argv[1], sys.argv[2]
for name, port in zip(("account", "container", "object"), map(int, sys.argv[3:6])):
    b = RingBuilder(8, 1, 1)
    b.add_dev({"id": 0, "region": 1, "zone": 1, "ip": "127.0.0.1", "port": port,
               "device": "d1", "weight": 100, "meta": ""})
    b.rebalance()
    b.get_ring().save(f"{d}/{name}.ring.gz")
"""


class SwiftS3:
    access_key = "test:tester"   # tempauth's account:user (with a colon, as Swift's keys have)
    secret_key = "testing"
    region = "us-east-1"

    def __init__(self, timeout=30):
        if not available():
            raise RuntimeError("Swift is not installed (apt-get install swift-proxy swift-object "
                               "swift-container swift-account)")
        self.tmp = tempfile.mkdtemp(prefix="gpujobd-swift-")
        self.procs = []
        self.conf = os.path.join(self.tmp, "etc")
        self.devices = os.path.join(self.tmp, "srv")
        os.makedirs(self.conf)
        os.makedirs(os.path.join(self.devices, "d1"))
        self.port = _free_port()
        ports = {n: _free_port() for n in ("account", "container", "object")}
        self.backend_ports = list(ports.values())
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._write_conf(ports)
        subprocess.run([PY, "-c", _RINGS, self.conf, self.devices,
                        str(ports["account"]), str(ports["container"]), str(ports["object"])],
                       check=True, capture_output=True)
        atexit.register(self.close)
        self.log = open(os.path.join(self.tmp, "swift.log"), "ab")
        for name in ("account", "container", "object"):
            self._start(f"{name}-server.conf", f"{name}-server")
        self.proxy = self._start("proxy-server.conf", "proxy-server")
        self._wait(timeout)

    def stop_proxy(self):
        """Stops the proxy alone: the store's endpoint refuses connections until start_proxy."""
        self._end(self.proxy)
        self.procs.remove(self.proxy)

    def start_proxy(self, timeout=30):
        """The proxy again, on the same port, over the same data."""
        self.proxy = self._start("proxy-server.conf", "proxy-server")
        self._wait(timeout)

    def _write_conf(self, ports):
        user = pwd.getpwuid(os.getuid()).pw_name   # the servers run as whoever runs the tests
        common = (f"[DEFAULT]\nswift_dir = {self.conf}\ndevices = {self.devices}\nmount_check = false\n"
                  f"bind_ip = 127.0.0.1\nworkers = 0\nlog_level = WARNING\nuser = {user}\n")
        with open(os.path.join(self.conf, "swift.conf"), "w") as f:
            f.write("[swift-hash]\nswift_hash_path_suffix = gpujobd-tests\n"
                    "[storage-policy:0]\nname = gold\ndefault = yes\n")
        for name in ("account", "container", "object"):
            with open(os.path.join(self.conf, f"{name}-server.conf"), "w") as f:
                f.write(common + f"bind_port = {ports[name]}\n"
                        f"[pipeline:main]\npipeline = {name}-server\n"
                        f"[app:{name}-server]\nuse = egg:swift#{name}\n")
        with open(os.path.join(self.conf, "proxy-server.conf"), "w") as f:
            f.write(common + f"bind_port = {self.port}\n"
                    "[pipeline:main]\npipeline = catch_errors gatekeeper healthcheck proxy-logging cache "
                    "listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server\n"
                    "[app:proxy-server]\nuse = egg:swift#proxy\naccount_autocreate = true\n"
                    "[filter:catch_errors]\nuse = egg:swift#catch_errors\n"
                    "[filter:gatekeeper]\nuse = egg:swift#gatekeeper\n"
                    "[filter:healthcheck]\nuse = egg:swift#healthcheck\n"
                    "[filter:proxy-logging]\nuse = egg:swift#proxy_logging\n"
                    # tempauth keeps its tokens in the cache middleware's client: needed even
                    # with no memcached running.
                    "[filter:cache]\nuse = egg:swift#memcache\n"
                    "[filter:listing_formats]\nuse = egg:swift#listing_formats\n"
                    f"[filter:s3api]\nuse = egg:swift#s3api\nlocation = {self.region}\n"
                    "max_upload_part_num = 10000\n"
                    "[filter:tempauth]\nuse = egg:swift#tempauth\nuser_test_tester = testing .admin\n"
                    "[filter:copy]\nuse = egg:swift#copy\n"
                    "[filter:slo]\nuse = egg:swift#slo\nmax_manifest_segments = 10000\n"
                    "[filter:dlo]\nuse = egg:swift#dlo\n")

    def _start(self, conf, section):
        p = subprocess.Popen([PY, "-c", _SERVE, self.conf, os.path.join(self.conf, conf), section],
                             stdout=self.log, stderr=self.log, start_new_session=True)
        self.procs.append(p)
        return p

    @staticmethod
    def _end(p):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    def _wait(self, timeout):
        deadline = time.time() + timeout
        while True:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError("a Swift server exited at start: " + self.log_text()[-2000:])
            try:
                with urllib.request.urlopen(self.endpoint + "/healthcheck", timeout=2) as r:
                    if r.status == 200 and self._backends_up():
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.time() > deadline:
                raise RuntimeError("Swift did not start: " + self.log_text()[-2000:])
            time.sleep(0.1)

    def _backends_up(self):
        # The proxy answers /healthcheck before the others listen: each must take a connection.
        for port in self.backend_ports:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                return False
        return True

    def env(self):
        """awscli's (and gpujobd's) environment for this store."""
        e = dict(os.environ)
        e.update(AWS_ACCESS_KEY_ID=self.access_key, AWS_SECRET_ACCESS_KEY=self.secret_key,
                 AWS_DEFAULT_REGION=self.region, AWS_EC2_METADATA_DISABLED="true",
                 AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
        return e

    def aws(self, *args, check=True, **kw):
        """Runs awscli against the store; returns the CompletedProcess."""
        r = subprocess.run(["aws", "--endpoint-url", self.endpoint, *args], env=self.env(),
                           capture_output=True, text=kw.pop("text", True), **kw)
        if check and r.returncode != 0:
            raise RuntimeError(f"aws {' '.join(args)} failed: {r.stderr}")
        return r

    def signed(self, method, path, query="", body=b""):
        """One S3 request signed with SigV4 here (awscli takes seconds to start): (status, body)."""
        now = time.gmtime()
        stamp, date = time.strftime("%Y%m%dT%H%M%SZ", now), time.strftime("%Y%m%d", now)
        host = self.endpoint.split("://", 1)[1]
        payload = hashlib.sha256(body).hexdigest()
        headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": stamp}
        names = ";".join(sorted(headers))
        canonical = "\n".join([method, path, query, *(f"{k}:{headers[k]}" for k in sorted(headers)), "",
                               names, payload])
        scope = f"{date}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        key = ("AWS4" + self.secret_key).encode()
        for part in (date, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
                                    f"SignedHeaders={names}, Signature={sig}")
        del headers["host"]
        req = urllib.request.Request(self.endpoint + path + ("?" + query if query else ""), data=body or None,
                                     method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def create_bucket(self, name):
        deadline = time.time() + 30
        while True:   # 503 while the account and container servers finish starting
            status, body = self.signed("PUT", "/" + name)
            if status == 200:
                return name
            if status != 503 or time.time() > deadline:
                raise RuntimeError(f"cannot create bucket {name}: HTTP {status} {body[:300]!r}")
            time.sleep(0.2)

    def list_keys(self, bucket):
        import json
        r = self.aws("s3api", "list-objects-v2", "--bucket", bucket)
        return [o["Key"] for o in json.loads(r.stdout or "{}").get("Contents", [])]

    def list_uploads(self, bucket):
        import json
        r = self.aws("s3api", "list-multipart-uploads", "--bucket", bucket)
        return [u["Key"] for u in json.loads(r.stdout or "{}").get("Uploads", [])]

    def log_text(self):
        try:
            with open(os.path.join(self.tmp, "swift.log"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self):
        """Stops the servers (the store becomes unreachable)."""
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            self._end(p)
        self.procs = []

    def close(self):
        if getattr(self, "procs", None) is None:
            return
        self.stop()
        if getattr(self, "log", None):
            self.log.close()
            self.log = None
        if os.environ.get("GJ_KEEP_TMP"):
            print(f"kept {self.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        self.procs = None


def main(argv):
    """swift_s3.py [--bucket NAME] -- COMMAND...: the store around one command."""
    bucket = "gpujobd-test"
    if len(argv) >= 2 and argv[0] == "--bucket":
        bucket, argv = argv[1], argv[2:]
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: swift_s3.py [--bucket NAME] -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    if not available():
        print("Swift is not installed: skipped", file=sys.stderr)
        return 77   # meson's "skipped"
    s3 = SwiftS3()
    try:
        s3.create_bucket(bucket)
        env = s3.env()
        env.update(GJ_S3_ENDPOINT=s3.endpoint, GJ_S3_BUCKET=bucket, GJ_S3_REGION=s3.region)
        return subprocess.run(argv[1:], env=env).returncode
    finally:
        s3.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
