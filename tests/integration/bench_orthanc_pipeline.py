"""Benchmark (not a test) of the hospital path: C-STORE (storescu) to Orthanc -> stable
study forwarded by STOW-RS -> infer job -> Structured Report delivered back to Orthanc by
STOW-RS. Sends N single-image studies back to back and reports studies per minute and the
p50/p99 latency from the C-STORE to the report's delivery (Orthanc answered 200), split
into where the time goes: Orthanc (C-STORE, StableAge, the forward), gpujobd's queue, the
job, the delivery.

  GPUJOBD=build/service/gpujobd GJ_SOURCE_ROOT=$PWD /usr/bin/python3 \\
      tests/integration/bench_orthanc_pipeline.py [N] [--stable-age S] [--cpu-workers W]

Uses the same set-up as test_orthanc_pipeline.py (deploy/orthanc/ files, real Orthanc,
real PostgreSQL, HTTPS)."""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import test_inference_api as dcm  # noqa: E402
import test_orthanc_pipeline as pipe  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int, nargs="?", default=20)
    ap.add_argument("--stable-age", type=int, default=1)
    ap.add_argument("--cpu-workers", type=int, default=1)
    a = ap.parse_args()
    pipe.STABLE_AGE = a.stable_age
    pipe.CPU_WORKERS = a.cpu_workers
    try:
        pipe.setup()
        files = []
        for i in range(a.n):
            study = f"1.2.826.0.1.3680043.8.498.7{i:04d}"
            dcm.make_dicom(f"bench_{i}", study, 100 + i)
            files.append((study, os.path.join(dcm.TMP, f"bench_{i}.dcm")))
        sent = {}
        t_start = time.time()
        for study, path in files:
            sent[study] = time.time()
            subprocess.run(["storescu", "-aec", "ORTHANC", "127.0.0.1", str(pipe.S["dicom"]), path], check=True,
                           capture_output=True, timeout=60)
        q = ("SELECT di.study_uid, extract(epoch from j.created_at), extract(epoch from j.started_at),"
             " extract(epoch from j.finished_at), extract(epoch from d.delivered_at), d.attempts"
             " FROM jobs j JOIN job_inputs i ON i.job_id = j.id JOIN dicom_instances di ON di.blob_id = i.blob_id"
             " JOIN report_deliveries d ON d.job_id = j.id WHERE j.kind = 'infer' AND d.state = 'delivered'")
        deadline = time.time() + 60 + 10 * a.n
        rows = []
        while time.time() < deadline:
            rows = pipe.H.sql(q)
            if len(rows) >= a.n:
                break
            time.sleep(0.5)
        assert len(rows) == a.n, f"{len(rows)} of {a.n} reports delivered"
        end = max(float(r[4]) for r in rows)
        stages = {"orthanc (C-STORE, StableAge, forward)": [], "gpujobd queue": [], "infer job": [],
                  "delivery (STOW-RS back)": [], "total": []}
        attempts = [int(r[5]) for r in rows]
        rows = [r[:5] for r in rows]
        for study, created, started, finished, delivered in rows:
            t0 = sent[study]
            created, started, finished, delivered = map(float, (created, started, finished, delivered))
            stages["orthanc (C-STORE, StableAge, forward)"].append(created - t0)
            stages["gpujobd queue"].append(started - created)
            stages["infer job"].append(finished - started)
            stages["delivery (STOW-RS back)"].append(delivered - finished)
            stages["total"].append(delivered - t0)
        print(f"{a.n} studies (one DX image each), StableAge {a.stable_age} s, {a.cpu_workers} CPU worker(s)")
        print(f"throughput: {a.n / (end - t_start) * 60:.1f} studies/min ({end - t_start:.1f} s in all)")
        print(f"delivery attempts per report: mean {statistics.mean(attempts):.2f}, max {max(attempts)}")
        print(f"{'stage':40s} {'p50 s':>8s} {'p99 s':>8s} {'mean s':>8s}")
        for k, xs in stages.items():
            print(f"{k:40s} {pct(xs, 50):8.2f} {pct(xs, 99):8.2f} {statistics.mean(xs):8.2f}")
    finally:
        pipe.teardown()


if __name__ == "__main__":
    main()
