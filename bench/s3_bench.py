"""Blobs through gpujobd into an S3 store against `aws s3 cp` to the same store (issue 30).

    GJ_BUILD_ROOT=build /usr/bin/python3 bench/s3_bench.py [--size 1G] [--rounds 2]
                                                           [--big 6G]

Starts Swift with s3api (tests/integration/swift_s3.py), a PostgreSQL and `gpujobd serve
--blob-store s3`; makes a file of random bytes; then, interleaved (gpujobd, awscli, gpujobd,
awscli, ...), uploads it and downloads it: through gpujobd with curl (POST /v1/blobs over HTTPS,
GET /v1/blobs/{id} to /dev/null) and with `aws s3 cp` straight to the store. Prints the
throughput of each run, the medians and their ratio, and the server's peak resident memory
(VmHWM). --big N also round-trips one blob of N bytes (over the 5 GiB single-PUT limit at 6G)
and checks its digest. Not in CI: minutes of I/O.
"""
import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from harness import Harness  # noqa: E402


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def make_file(path, size):
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 8 << 20)
            f.write(os.urandom(n))
            left -= n


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(8 << 20), b""):
            h.update(block)
    return h.hexdigest()


def timed(cmd, env=None, discard=False):
    t = time.monotonic()
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL if discard else subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {r.stderr[-2000:]}")
    return time.monotonic() - t, r.stdout


def vm_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


class Gpujobd:
    def __init__(self, srv):
        self.srv = srv
        self.base = f"https://127.0.0.1:{srv.port}"
        self.cacert = os.path.join(srv.data_dir, "tls", "cert.pem")
        self.key = srv.client().key

    def curl(self, *args):
        return ["curl", "-sS", "--fail", "--cacert", self.cacert, "-H", f"Authorization: Bearer {self.key}", *args]

    def upload(self, path):
        secs, out = timed(self.curl("-H", "Content-Type: application/octet-stream", "-X", "POST", "-T", path,
                                    f"{self.base}/v1/blobs"))
        import json
        return secs, json.loads(out)

    def download(self, blob_id, out="/dev/null"):
        return timed(self.curl("-o", out, f"{self.base}/v1/blobs/{blob_id}"))[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1G")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--big", default=None, help="also round-trip one blob of this size (6G: past 5 GiB)")
    a = ap.parse_args()
    size = parse_size(a.size)
    h = Harness(blob_store="s3")
    srv = h.start_server(["--cpu-workers", "0", "--max-body-bytes", "64G"])
    g = Gpujobd(srv)
    path = os.path.join(h.tmp, "payload.bin")
    make_file(path, size)
    env = h.s3.env()
    aws = ["aws", "--endpoint-url", h.s3.endpoint, "s3", "cp", "--only-show-errors"]
    up = {"gpujobd": [], "awscli": []}
    down = {"gpujobd": [], "awscli": []}
    mib = size / (1 << 20)
    try:
        for i in range(a.rounds):
            secs, blob = g.upload(path)
            up["gpujobd"].append(mib / secs)
            secs = timed(aws + [path, f"s3://{h.bucket}/awscli/{i}"], env)[0]
            up["awscli"].append(mib / secs)
            secs = g.download(blob["id"])
            down["gpujobd"].append(mib / secs)
            secs = timed(aws + [f"s3://{h.bucket}/awscli/{i}", "-"], env, discard=True)[0]
            down["awscli"].append(mib / secs)
            print(f"round {i + 1}: upload gpujobd {up['gpujobd'][-1]:.1f} MiB/s, awscli {up['awscli'][-1]:.1f}; "
                  f"download gpujobd {down['gpujobd'][-1]:.1f}, awscli {down['awscli'][-1]:.1f}", flush=True)
            c = srv.client()
            c.request("DELETE", f"/v1/blobs/{blob['id']}")
        for what, runs in (("upload", up), ("download", down)):
            gm, am = statistics.median(runs["gpujobd"]), statistics.median(runs["awscli"])
            print(f"{what}: gpujobd median {gm:.1f} MiB/s, awscli {am:.1f} MiB/s, ratio {gm / am:.2f}")
        if a.big:
            big = parse_size(a.big)
            os.unlink(path)
            make_file(path, big)
            want = sha256_file(path)
            secs, blob = g.upload(path)
            assert blob["sha256"] == want, blob
            out = os.path.join(h.tmp, "back.bin")
            secs2 = g.download(blob["id"], out)
            assert sha256_file(out) == want
            print(f"{big} bytes: up {big / (1 << 20) / secs:.1f} MiB/s, down {big / (1 << 20) / secs2:.1f} MiB/s, "
                  f"digest matches")
        print(f"gpujobd peak resident memory (VmHWM): {vm_hwm(srv.proc.pid) >> 20} MiB")
    finally:
        h.close()


if __name__ == "__main__":
    main()
