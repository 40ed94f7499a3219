#!/usr/bin/env python3
"""The queue's CPU per job, both sides (issue 25): N noop jobs drained by gpujobd's worker slots,
then the same rows by pgbench's minimal claim and finish (service_bench.pgbench_script), with
the CPU each side spent: gpujobd's process, pgbench's, and PostgreSQL's (its live processes and
the backends it reaped). CPU time is steadier than jobs/s on a shared machine.

  GPUJOBD=build/service/gpujobd /usr/bin/python3 bench/queue_cpu.py [--jobs N] [--slots S]
      [--statements]   (pg_stat_statements' top statements of each side, nested ones included)
"""
import argparse
import os
import re
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness  # noqa: E402
import service_bench  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid, children=False):
    """utime+stime (or cutime+cstime) of pid in seconds; 0 once it is gone."""
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    i = 13 if children else 11
    return (int(f[i]) + int(f[i + 1])) / TICK


def postgres_cpu(h):
    """PostgreSQL's CPU so far: each live process, and the postmaster's reaped children."""
    pids = subprocess.run(["pgrep", "-u", h.user or str(os.getuid()), "postgres"], capture_output=True,
                          text=True).stdout.split()
    cpu = {p: proc_cpu(p) for p in pids}
    cpu["reaped"] = proc_cpu(h.pg.pid, children=True)
    return cpu


def spent(before, after):
    return sum(v - before.get(k, 0.0) for k, v in after.items())


def restart_with_statements(h):
    with open(os.path.join(h.pgdir, "postgresql.conf"), "a") as f:
        f.write("shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = all\n")
    h.pg.terminate()
    h.pg.wait()
    h.pg = subprocess.Popen(["/usr/lib/postgresql/15/bin/postgres", "-D", h.pgdir], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(h.tmp, "pg.log"), "ab"), **(dict(user=h.user) if h.user else {}))
    deadline = time.time() + 30
    while True:
        try:
            h.sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            return
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def top_statements(h, label):
    print(f"\n{label}: calls, total ms, statement")
    for calls, ms, q in h.sql("SELECT calls, round(total_exec_time::numeric, 1), "
                              "left(regexp_replace(query, '\\s+', ' ', 'g'), 100) FROM pg_stat_statements "
                              "WHERE calls > 20 ORDER BY total_exec_time DESC LIMIT 12"):
        print(f"  {calls:>6} {ms:>9} {q}")
    h.sql("SELECT pg_stat_statements_reset()")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--statements", action="store_true")
    a = ap.parse_args()
    n = a.jobs
    h = Harness()
    try:
        if a.statements:
            restart_with_statements(h)
        srv = h.start_server(["--role", "api", "--db-pool-size", "20"])
        service_bench.submit_jobs(h, srv, n)
        srv.terminate()
        h.sql("ANALYZE jobs")
        if a.statements:
            h.sql("SELECT pg_stat_statements_reset()")
        pg0 = postgres_cpu(h)
        srv = h.start_server(["--cpu-workers", str(a.slots), "--db-pool-size", str(a.slots + 4)],
                             data_dir=srv.data_dir)
        while int(h.scalar("SELECT count(*) FROM jobs WHERE state <> 'succeeded'")) > 0:
            time.sleep(0.1)
        ours, pg_ours = proc_cpu(srv.proc.pid), spent(pg0, postgres_cpu(h))
        span = float(h.scalar("SELECT extract(epoch FROM max(finished_at) - min(started_at)) FROM jobs"))
        srv.terminate()
        if a.statements:
            top_statements(h, "gpujobd")
        service_bench.requeue_jobs(h)
        h.sql("ANALYZE jobs")
        script = service_bench.pgbench_script()
        pg0, ru0 = postgres_cpu(h), resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run(["pgbench", "-n", "-h", h.sockdir, "-U", h.db_user, "-c", str(a.slots), "-j",
                            str(a.slots), "-t", str(n // a.slots), "-M", "extended", "-f", script.name, "gpujobd"],
                           capture_output=True, text=True, user=h.user)
        ru1, pg_bench = resource.getrusage(resource.RUSAGE_CHILDREN), spent(pg0, postgres_cpu(h))
        os.unlink(script.name)
        tps = re.search(r"tps = ([0-9.]+) \(without initial", r.stdout)
        if not tps:
            raise RuntimeError("pgbench failed: " + r.stdout + r.stderr)
        client = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
        if a.statements:
            top_statements(h, "pgbench")
        ms = 1000.0 / n
        print(f"\n## Queue CPU per job, {n} noop jobs, {a.slots} slots ({service_bench.hardware()})")
        print("| side | jobs/s | own CPU ms/job | PostgreSQL CPU ms/job | total ms/job |")
        print("|---|---|---|---|---|")
        print(f"| gpujobd | {n / span:.0f} | {ours * ms:.3f} | {pg_ours * ms:.3f} | {(ours + pg_ours) * ms:.3f} |")
        print(f"| pgbench | {float(tps.group(1)):.0f} | {client * ms:.3f} | {pg_bench * ms:.3f} | "
              f"{(client + pg_bench) * ms:.3f} |")
    finally:
        h.close()


if __name__ == "__main__":
    main()
