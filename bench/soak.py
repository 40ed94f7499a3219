#!/usr/bin/python3
"""Soak: a bounded run of mixed work from several tenants against one gpujobd and its
PostgreSQL, recording every 10 s what would show a leak: the server's resident memory, its
open file descriptors, its database connections (pg_stat_activity) and the database's size.
After the warm-up each should stay flat; the summary gives each one's least-squares slope over
the run after warm-up and the change from the first to the last sample after it.

The work, each in its own threads, from three tenants (bounded in count and time, loopback):
  jobs      noop jobs with a 64 KiB output, waited for, their output read, then deleted
  uploads   1 MiB blobs uploaded, read back, deleted
  infer     /v2 inferences on the demo model (binary tensors)
  streams   job event streams and ?follow=1 log streams opened, read a little, dropped
  cancels   60 s noop jobs submitted and cancelled a second later, then deleted

usage: GPUJOBD=build/service/gpujobd /usr/bin/python3 bench/soak.py [--seconds 1200] [--out FILE]
                                                               [--pg-setting NAME=VALUE]...
Writes FILE (JSON: the samples and the summary) and FILE with .png (the four curves)."""
import argparse
import json
import os
import platform
import random
import socket
import ssl
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from harness import Harness  # noqa: E402
from benchlib import cpu_model  # noqa: E402

import numpy as np  # noqa: E402

SAMPLE_S = 10
WARMUP_S = 120


def proc_status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return None


def sample(h, pid, t0, counts):
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    conns = int(h.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                         "AND pid <> pg_backend_pid()"))
    size = int(h.scalar("SELECT pg_database_size(current_database())"))
    return {"t": round(time.time() - t0, 1), "rss_bytes": proc_status(pid, "VmRSS"), "fds": fds,
            "db_connections": conns, "db_bytes": size, "done": dict(counts)}


class Load:
    def __init__(self, srv, keys, deadline):
        self.srv, self.keys, self.deadline = srv, keys, deadline
        self.counts = {"jobs": 0, "uploads": 0, "infer": 0, "streams": 0, "cancels": 0, "errors": 0}
        self.lock = threading.Lock()
        self.last_error = None

    def count(self, what):
        with self.lock:
            self.counts[what] += 1

    def loop(self, fn):
        rng = random.Random(threading.get_ident())
        while time.time() < self.deadline:
            try:
                fn(self.srv.client(rng.choice(self.keys)), rng)
            except Exception as e:  # counted and shown: a soak goes on through a failure
                self.count("errors")
                self.last_error = repr(e)[:300]
                time.sleep(1)

    def jobs(self, c, rng):
        j = c.submit("noop", {"sleep_ms": rng.randint(50, 400), "output_bytes": 65536})
        c.wait_job(j["id"], timeout=120)
        r = c.request("GET", f"/v1/jobs/{j['id']}/outputs/data.bin")
        assert r.status == 200 and len(r.body) == 65536, r.status
        c.json("DELETE", f"/v1/jobs/{j['id']}", expect=204)
        self.count("jobs")

    def uploads(self, c, rng):
        data = os.urandom(1 << 20)
        b = c.upload(data)
        r = c.request("GET", f"/v1/blobs/{b['id']}")
        assert r.status == 200 and len(r.body) == len(data), r.status
        c.request("DELETE", f"/v1/blobs/{b['id']}")
        self.count("uploads")

    def infer(self, c, rng):
        x = np.random.RandomState(rng.randint(0, 1 << 30)).normal(size=(1, 1, 256, 256)).astype(np.float32)
        raw = x.tobytes()
        head = json.dumps({"inputs": [{"name": "image", "shape": list(x.shape), "datatype": "FP32",
                                       "parameters": {"binary_data_size": len(raw)}}]}).encode()
        r = c.request("POST", "/v2/models/chest-xray-demo/infer", body=head + raw,
                      headers={"Inference-Header-Content-Length": str(len(head)),
                               "Content-Type": "application/octet-stream"}, timeout=120)
        assert r.status == 200, r.status
        self.count("infer")

    def streams(self, c, rng):
        j = c.submit("noop", {"sleep_ms": 3000})
        path = rng.choice([f"/v1/jobs/{j['id']}/events", f"/v1/jobs/{j['id']}/log?follow=1", "/v1/events"])
        conn = c.connection(timeout=10)
        conn.putrequest("GET", path)
        conn.putheader("Authorization", f"Bearer {c.key}")
        conn.endheaders()
        resp = conn.getresponse()
        resp.read1(256) if resp.status == 200 else resp.read()
        conn.close()                       # dropped mid-stream, as a client that goes away
        c.wait_job(j["id"], timeout=120)
        c.json("DELETE", f"/v1/jobs/{j['id']}", expect=204)
        self.count("streams")

    def cancels(self, c, rng):
        j = c.submit("noop", {"sleep_ms": 60000})
        time.sleep(1)
        c.request("POST", f"/v1/jobs/{j['id']}/cancel")
        c.wait_job(j["id"], timeout=120)
        c.json("DELETE", f"/v1/jobs/{j['id']}", expect=204)
        self.count("cancels")


def slope_per_hour(points):
    t = np.array([p[0] for p in points], dtype=float)
    v = np.array([p[1] for p in points], dtype=float)
    if len(t) < 3:
        return None
    return float(np.polyfit(t, v, 1)[0] * 3600)


def summarize(samples):
    after = [s for s in samples if s["t"] >= WARMUP_S]
    out = {}
    for key in ("rss_bytes", "fds", "db_connections", "db_bytes"):
        pts = [(s["t"], s[key]) for s in after]
        out[key] = {"first_after_warmup": pts[0][1] if pts else None, "last": pts[-1][1] if pts else None,
                    "max": max(v for _, v in pts) if pts else None, "slope_per_hour": slope_per_hour(pts)}
    return out


def plot(samples, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(4, 1, figsize=(8, 9), sharex=True)
    t = [s["t"] / 60 for s in samples]
    for ax, (key, label, scale) in zip(axes, [("rss_bytes", "resident memory (MiB)", 1 << 20),
                                              ("fds", "open descriptors", 1),
                                              ("db_connections", "database connections", 1),
                                              ("db_bytes", "database size (MiB)", 1 << 20)]):
        ax.plot(t, [s[key] / scale for s in samples], marker=".")
        ax.axvline(WARMUP_S / 60, color="grey", linestyle=":")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel("minutes (dotted: end of warm-up)")
    fig.suptitle("gpujobd soak: mixed jobs, uploads, /v2, streams and cancels from 3 tenants")
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=1200)
    ap.add_argument("--pg-setting", action="append", default=[], metavar="NAME=VALUE",
                    help="a PostgreSQL setting for the run (ALTER SYSTEM, reloaded), e.g. autovacuum_naptime=10s")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  time.strftime("soak-%Y%m%d-%H%M.json")))
    args = ap.parse_args()
    h = Harness()
    try:
        for setting in args.pg_setting:
            name, value = setting.split("=", 1)
            h.sql(f"ALTER SYSTEM SET {name} = '{value}'")
        if args.pg_setting:
            h.sql("SELECT pg_reload_conf()")
        srv = h.start_server(["--cpu-workers", "2"])
        admin = srv.client()
        keys = [admin.json("POST", "/v1/api-keys", {"tenant": f"soak{i}"}, expect=201)["key"] for i in range(3)]
        load = Load(srv, keys, time.time() + args.seconds)
        plan = [(load.jobs, 3), (load.uploads, 2), (load.infer, 2), (load.streams, 2), (load.cancels, 1)]
        threads = [threading.Thread(target=load.loop, args=(fn,), daemon=True) for fn, n in plan for _ in range(n)]
        t0 = time.time()
        for th in threads:
            th.start()
        samples = []
        while time.time() < load.deadline:
            samples.append(sample(h, srv.proc.pid, t0, load.counts))
            print(json.dumps(samples[-1]), flush=True)
            time.sleep(SAMPLE_S)
        for th in threads:
            th.join(180)
        samples.append(sample(h, srv.proc.pid, t0, load.counts))
        result = {"hardware": f"{os.cpu_count()} cores, {cpu_model()}, {platform.system()} {platform.release()}",
                  "seconds": args.seconds, "pg_settings": args.pg_setting, "warmup_seconds": WARMUP_S, "done": load.counts,
                  "last_error": load.last_error, "summary": summarize(samples), "samples": samples}
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        plot(samples, args.out.replace(".json", ".png"))
        print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=1))
    finally:
        h.close()


if __name__ == "__main__":
    main()
