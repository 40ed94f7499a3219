"""Issue 11: host-memory admission, over real HTTPS against a real PostgreSQL.

The server takes the host to have 1 GiB (GPUJOBD_FAKE_HOST_MEMORY) and keeps 512 MiB for
itself (--host-memory-reserve), so its jobs may hold 512 MiB together. A job whose kind's
floor (gj_kind_host_bytes_floor) exceeds that is refused at submit with 413 and the
figures; two noop jobs of 300 MiB each (allocated and touched, so resident) on two CPU
slots run one after the other, and the server's resident memory never holds both; a job
admitted on its floor whose run-time estimate is still too large fails with the reason
rather than waiting forever."""
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import Harness, run_tests  # noqa: E402

MIB = 1 << 20
USABLE = 512 * MIB
H = None
SRV = None


def setup():
    global H, SRV
    H = Harness()
    SRV = H.start_server(["--cpu-workers", "2", "--host-memory-reserve", "512M"],
                         env={"GPUJOBD_FAKE_HOST_MEMORY": "1G"})


def rss():
    with open(f"/proc/{SRV.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_worker_offers_its_budget():
    rows = H.sql("SELECT host_memory_bytes FROM workers WHERE NOT stopping")
    assert rows == [[str(USABLE)]], rows


def refused(kind, params):
    c = SRV.client()
    r = c.request("POST", "/v1/jobs", json={"kind": kind, "params": params})
    assert r.status == 413, r
    body = r.json()
    text = str(body)
    assert "host memory" in text and "512.0 MiB" in text and "could never run" in text, body
    assert body.get("field") == "params", body
    return body


def test_never_fits_refused_at_submit():
    before = H.scalar("SELECT count(*) FROM jobs")
    body = refused("noop", {"host_bytes": 600 * MIB})
    assert "600.0 MiB" in str(body), body
    # The case: a phantom whose volume alone (16384^2 float32: 1 GiB) is past the host.
    refused("phantom", {"geometry": {"type": "parallel2d", "angles_deg": {"count": 16},
                                     "detector": {"cols": 256}},
                        "volume": {"nx": 16384, "ny": 16384}})
    assert H.scalar("SELECT count(*) FROM jobs") == before   # nothing half-written


def test_jobs_wait_for_host_memory():
    c = SRV.client()
    base = rss()
    peak = [base]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.02)

    t = threading.Thread(target=sample)
    t.start()
    t0 = time.time()
    try:
        ids = [c.submit("noop", {"host_bytes": 300 * MIB, "sleep_ms": 1500, "write_result": False})["id"]
               for _ in range(2)]
        jobs = [c.wait_job(i, timeout=60) for i in ids]
    finally:
        done.set()
        t.join()
    took = time.time() - t0
    print(f"two 300 MiB jobs on 2 CPU slots: {took:.1f}s, VmRSS peak {(peak[0] - base) / MIB:.0f} MiB "
          f"over {base / MIB:.0f} MiB")
    assert [j["state"] for j in jobs] == ["succeeded", "succeeded"], jobs
    assert peak[0] - base < 450 * MIB, f"both were resident: +{(peak[0] - base) / MIB:.0f} MiB"
    assert peak[0] - base > 250 * MIB, "the sampler missed the job's memory"


def test_estimate_past_the_budget_fails_with_the_reason():
    # Admitted on its floor (exactly the budget), refused at placement by its estimate (+1 MiB).
    c = SRV.client()
    job = c.wait_job(c.submit("noop", {"host_bytes": USABLE})["id"], timeout=30)
    assert job["state"] == "failed", job
    assert "host memory" in str(job.get("error")), job


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_worker_offers_its_budget, test_never_fits_refused_at_submit,
                   test_jobs_wait_for_host_memory, test_estimate_past_the_budget_fails_with_the_reason])
    finally:
        H.close()
