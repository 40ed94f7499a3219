#!/usr/bin/python3
"""Service benchmarks, each against a named comparison in the same run (BENCHMARKS.md).

  queue   noop jobs (sleep 0) claimed and finished per second with N worker slots,
          against pgbench running the same minimal claim and finish transactions
          on the same PostgreSQL; plus enqueue-to-start latency p50/p99 on an idle service.
  http    GET /v1/jobs/{id} and /healthz at 64 concurrent TLS connections (wrk).
  upload  a 1 GiB blob over HTTPS on loopback against psql's \\lo_import of the same file.

usage: GPUJOBD=build/service/gpujobd /usr/bin/python3 bench/service_bench.py [queue|http|upload]...
"""
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from harness import Harness  # noqa: E402
from benchlib import cpu_model  # noqa: E402


def hardware():
    return f"{os.cpu_count()} cores, {cpu_model()}, {platform.system()} {platform.release()}"


def submit_jobs(h, srv, n, threads=16):
    """n noop jobs through POST /v1/jobs (gj_queue_submit, the one way a job is created),
    16 at a time, on a server with no worker slots: they wait, queued."""
    from concurrent.futures import ThreadPoolExecutor
    c = srv.client()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(lambda _: c.submit("noop", {"sleep_ms": 0, "write_result": False}), range(n)))


def requeue_jobs(h):
    """The finished jobs queued again, as new (for pgbench: the same rows, no second insert)."""
    h.sql("UPDATE jobs SET state = 'queued', attempts = 0, started_at = NULL, finished_at = NULL, "
          "progress = 0, lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL")


def pgbench_script():
    """pgbench's claim and finish, the minimal SQL the queue benchmark compares with, in a
    temporary file pgbench (running as the cluster's user) can read."""
    script = tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False)
    script.write(
        "BEGIN;\n"
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_owner = 'pgbench', "
        "lease_token = nextval('job_lease_token_seq'), lease_expires_at = now() + interval '30 s', "
        "started_at = coalesce(started_at, now()), updated_at = now() "
        "WHERE id = (SELECT id FROM jobs WHERE state = 'queued' AND run_after <= now() AND kind = ANY('{noop}') "
        "ORDER BY priority DESC, created_at, id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id AS jid, lease_token AS tok \\gset\n"
        "END;\n"
        "BEGIN;\n"
        "UPDATE jobs SET state = 'succeeded', progress = 1, finished_at = now(), updated_at = now(), "
        "lease_owner = NULL, lease_expires_at = NULL WHERE id = :jid AND lease_token = :tok AND state = 'running';\n"
        "END;\n")
    script.close()
    os.chmod(script.name, 0o644)
    return script


def bench_queue(slots=(1, 2, 4), n=int(os.environ.get("GJ_BENCH_JOBS", "4000"))):
    print(f"\n## Queue: noop jobs claimed+finished per second ({hardware()})")
    print("| slots | gpujobd jobs/s | pgbench tx/s (same claim+finish SQL) | ratio |")
    print("|---|---|---|---|")
    script = pgbench_script()
    for s in slots:
        h = Harness()
        try:
            # Service: jobs waiting before start, so the measure is claim+run+finish only.
            srv = h.start_server(["--role", "api", "--db-pool-size", "20"])
            submit_jobs(h, srv, n)
            srv.terminate()
            # Statistics as autovacuum leaves them on a running site: left to chance (autovacuum
            # analyzes within a minute of the burst, or not before the run), pgbench's claim was
            # planned either as an index walk or as a sort of the whole backlog at each claim,
            # and its rate moved 2x between runs.
            h.sql("ANALYZE jobs")
            t0 = time.time()
            srv2 = h.start_server(["--cpu-workers", str(s), "--db-pool-size", str(max(4, s + 4))],
                                  data_dir=srv.data_dir)
            while int(h.scalar("SELECT count(*) FROM jobs WHERE state <> 'succeeded'")) > 0:
                if time.time() - t0 > 600:
                    raise RuntimeError("queue benchmark did not finish")
                time.sleep(0.2)
            span = float(h.scalar("SELECT extract(epoch FROM max(finished_at) - min(started_at)) FROM jobs"))
            svc_rate = n / span
            srv2.terminate()
            # pgbench: the same transactions on the same database, same number of clients.
            requeue_jobs(h)
            h.sql("ANALYZE jobs")
            per_client = n // s
            r = subprocess.run(["pgbench", "-n", "-h", h.sockdir, "-U", h.db_user, "-c", str(s), "-j", str(s),
                                "-t", str(per_client), "-M", "extended", "-f", script.name, "gpujobd"],
                               capture_output=True, text=True, user=h.user)
            m = re.search(r"tps = ([0-9.]+) \(without initial", r.stdout)
            if not m:
                raise RuntimeError("pgbench failed: " + r.stdout + r.stderr)
            pg_rate = float(m.group(1))
            print(f"| {s} | {svc_rate:.0f} | {pg_rate:.0f} | {svc_rate / pg_rate:.2f} |", flush=True)
        finally:
            h.close()
    os.unlink(script.name)

    # Enqueue-to-start latency on an idle service (created_at -> started_at).
    h = Harness()
    try:
        srv = h.start_server(["--cpu-workers", "2"])
        c = srv.client()
        lat = []
        for _ in range(200):
            j = c.submit("noop", {"sleep_ms": 0, "write_result": False})
            c.wait_job(j["id"])
            lat.append(float(h.scalar(
                f"SELECT extract(epoch FROM started_at - created_at) FROM jobs WHERE id = '{j['id']}'")) * 1000)
            time.sleep(0.02)
        lat.sort()
        p50 = statistics.median(lat)
        p99 = lat[int(len(lat) * 0.99) - 1]
        print(f"\nEnqueue-to-start latency, idle service, 200 jobs: p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
              f"max {lat[-1]:.1f} ms")
    finally:
        h.close()


def wrk(url, cafile, key, conns=64, seconds=10):
    lua = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    lua.write(f'wrk.headers["Authorization"] = "Bearer {key}"\n')
    lua.close()
    r = subprocess.run(["wrk", "-t", "2", "-c", str(conns), "-d", f"{seconds}s", "--latency", "-s", lua.name, url],
                       capture_output=True, text=True)
    os.unlink(lua.name)
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", r.stdout).group(1))
    p99 = re.search(r"99%\s+([0-9.]+)(us|ms|s)", r.stdout)
    p99_ms = float(p99.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[p99.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", r.stdout)
    return rps, p99_ms, int(non2xx.group(1)) if non2xx else 0


def bench_http():
    print(f"\n## HTTP at 64 concurrent TLS connections, wrk 10 s ({hardware()})")
    h = Harness()
    try:
        srv = h.start_server(["--max-connections", "256", "--db-pool-size", "32"])
        c = srv.client()
        j = c.submit("noop", {"sleep_ms": 0})
        c.wait_job(j["id"])
        base = f"https://127.0.0.1:{srv.port}"
        print("| route | requests/s | p99 ms | non-2xx |")
        print("|---|---|---|---|")
        for name, path in (("GET /healthz (ceiling)", "/healthz"), ("GET /v1/jobs/{id}", f"/v1/jobs/{j['id']}")):
            rps, p99, bad = wrk(base + path, None, srv.admin_key)
            print(f"| {name} | {rps:.0f} | {p99:.2f} | {bad} |", flush=True)
    finally:
        h.close()


def bench_upload(size_mib=1024):
    print(f"\n## Upload of {size_mib} MiB over HTTPS on loopback vs psql \\lo_import ({hardware()})")
    h = Harness()
    try:
        srv = h.start_server()
        path = os.path.join(h.tmp, "blob.bin")
        with open(path, "wb") as f:
            chunk = os.urandom(1 << 20)
            for _ in range(size_mib):
                f.write(chunk)
        os.chmod(h.tmp, 0o755)
        os.chmod(path, 0o644)
        t0 = time.time()
        r = subprocess.run(["curl", "-sS", "--fail", "--cacert", os.path.join(srv.data_dir, "tls", "cert.pem"),
                            "-H", f"Authorization: Bearer {srv.admin_key}", "-H", "Content-Type: application/octet-stream",
                            "-X", "POST", "-T", path, f"https://127.0.0.1:{srv.port}/v1/blobs"],
                           capture_output=True, text=True)
        up = time.time() - t0
        if r.returncode:
            raise RuntimeError("upload failed: " + r.stderr)
        t0 = time.time()
        r = subprocess.run(["psql", "-h", h.sockdir, "-U", h.db_user, "-d", "gpujobd", "-qX",
                            "-c", f"\\lo_import '{path}'"], capture_output=True, text=True, user=h.user)
        lo = time.time() - t0
        if r.returncode:
            raise RuntimeError("lo_import failed: " + r.stderr)
        print("| path | seconds | MiB/s |")
        print("|---|---|---|")
        print(f"| gpujobd POST /v1/blobs (HTTPS, SHA-256) | {up:.2f} | {size_mib / up:.0f} |")
        print(f"| psql \\lo_import (Unix socket) | {lo:.2f} | {size_mib / lo:.0f} |")
        print(f"ratio gpujobd / lo_import = {lo / up:.2f}")
        with open(f"/proc/{srv.proc.pid}/status") as f:
            hwm = [l.split()[1] for l in f if l.startswith("VmHWM")][0]
        print(f"gpujobd peak resident memory during the run: {int(hwm) // 1024} MiB")
    finally:
        h.close()


if __name__ == "__main__":
    which = sys.argv[1:] or ["queue", "http", "upload"]
    for w in which:
        {"queue": bench_queue, "http": bench_http, "upload": bench_upload}[w]()
