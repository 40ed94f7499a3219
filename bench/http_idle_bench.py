#!/usr/bin/python3
"""GET /healthz latency while many idle connections are held (issue 11), against named
comparisons in the same run (BENCHMARKS.md).

Each case starts a private PostgreSQL and `gpujobd serve` over HTTPS, opens IDLE plain TCP
connections to it that never send a byte (from 127.0.1.x .. 127.0.y.x, at most 250 per source
address, under the per-address limit of 256), then runs wrk against /healthz beside them:
  quiet    this build, no idle connection (the ceiling);
  idle     this build with IDLE idle connections (libmicrohttpd's epoll thread pool);
  baseline BASELINE_GPUJOBD (e.g. main's thread-per-connection build) with the same idle
           connections, when that variable names a binary: with its defaults, and with
           --max-connections as high as ours.
After wrk, the idle connections still open are counted (the server must have held them).

usage: GPUJOBD=build/service/gpujobd [BASELINE_GPUJOBD=/work/main/build/service/gpujobd] \\
       /usr/bin/python3 bench/http_idle_bench.py [IDLE (default 10000)] [WRK_SECONDS (default 10)]
"""
import os
import platform
import re
import resource
import select
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
import harness  # noqa: E402
from benchlib import cpu_model, load_average  # noqa: E402

PER_ADDRESS = 250


def raise_fd_limit(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = want if hard == resource.RLIM_INFINITY else min(hard, want)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def open_idle(port, n):
    """n TCP connections that send nothing, PER_ADDRESS per source address; [] and the
    error when one fails to connect."""
    socks = []
    try:
        for i in range(n):
            a = i // PER_ADDRESS
            s = socket.socket()
            s.bind((f"127.0.{1 + a // 200}.{10 + a % 200}", 0))
            s.settimeout(10)
            s.connect(("127.0.0.1", port))
            socks.append(s)
        return socks, None
    except OSError as e:
        return socks, f"connection {len(socks) + 1}: {e}"


def still_open(socks):
    """How many of socks the server has not closed."""
    p = select.poll()
    for s in socks:
        p.register(s, select.POLLIN | select.POLLRDHUP)
    return len(socks) - len(p.poll(0))


def wrk(url, conns, seconds):
    r = subprocess.run(["wrk", "-t", "2", "-c", str(conns), "-d", f"{seconds}s", "--timeout", "5s", "--latency", url],
                       capture_output=True, text=True)
    rps = re.search(r"Requests/sec:\s+([0-9.]+)", r.stdout)
    p50 = re.search(r"50%\s+([0-9.]+)(us|ms|s)\b", r.stdout)
    p99 = re.search(r"99%\s+([0-9.]+)(us|ms|s)\b", r.stdout)
    errs = re.search(r"Socket errors: (.*)", r.stdout)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", r.stdout)

    def ms(m):
        return float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)] if m else float("nan")
    return {"rps": float(rps.group(1)) if rps else 0.0, "p50": ms(p50), "p99": ms(p99),
            "errors": errs.group(1).strip() if errs else "none", "non2xx": int(non2xx.group(1)) if non2xx else 0}


def threads(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^Threads:\s+(\d+)", f.read(), re.M).group(1))


def run_case(name, binary, args, idle, seconds, conns=32):
    harness.GPUJOBD = binary
    h = harness.Harness()
    socks = []
    try:
        srv = h.start_server(args)
        t0 = time.time()
        socks, err = open_idle(srv.port, idle)
        opened = time.time() - t0
        time.sleep(1)
        before = threads(srv.proc.pid)
        w = wrk(f"https://127.0.0.1:{srv.port}/healthz", conns, seconds)
        held = still_open(socks)
        print(f"| {name} | {len(socks)} ({opened:.1f} s{'; ' + err if err else ''}) | {held} | {w['rps']:.0f} "
              f"| {w['p50']:.2f} | {w['p99']:.2f} | {w['errors']} | {w['non2xx']} | {before} |", flush=True)
    finally:
        for s in socks:
            s.close()
        h.close()


def main():
    idle = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    fds = raise_fd_limit(idle * 2 + 1000)      # the server inherits it: its end of each connection
    print(f"## GET /healthz with {idle} idle connections, wrk 2 threads 32 connections {seconds} s")
    print(f"{os.cpu_count()} cores, {cpu_model()}, {platform.system()} {platform.release()}; "
          f"load average {load_average()}; RLIMIT_NOFILE {fds}\n")
    print("| server | idle connections opened | still held after wrk | requests/s | p50 ms | p99 ms "
          "| wrk socket errors | non-2xx | server threads |")
    print("|---|---|---|---|---|---|---|---|---|")
    this = os.environ["GPUJOBD"]
    ours = ["--role", "api", "--max-connections", str(idle + 1000), "--header-timeout-seconds", "600"]
    run_case("this build, no idle connection", this, ours, 0, seconds)
    run_case("this build (epoll thread pool)", this, ours, idle, seconds)
    base = os.environ.get("BASELINE_GPUJOBD")
    if base:
        run_case("baseline, its defaults", base, ["--role", "api"], idle, seconds)
        run_case("baseline, --max-connections as ours", base,
                 ["--role", "api", "--max-connections", str(idle + 1000)], idle, seconds)


if __name__ == "__main__":
    main()
