"""Issue 11: slow and hostile uploads over real HTTPS against a real PostgreSQL.

18 uploads from one tenant trickling at 2 KB/s, with a pool of 4 database connections:
another tenant's reads, submits and uploads keep answering fast (no 503), because no
upload holds a pooled connection while it waits on its client; the 18 then complete
and every byte is stored. The tenant's 19th concurrent upload is answered 429 with
Retry-After. An upload slower than the minimum rate is cut with 408; one whose client
goes away, or stalls, is dropped: in each case no blob row, no large object and no spool
file is left (the spool's unnamed files are looked for among the server's open files)."""
import hashlib
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
from harness import Harness, run_tests  # noqa: E402
from rawhttp import RawRequest  # noqa: E402
import spool  # noqa: E402

H = None
SRV = None
KEY_A = None
KEY_B = None
WINDOW = 3            # --upload-rate-window-seconds
MIN_RATE = 1000       # --upload-min-bytes-per-second
SLOW = 18             # concurrent slow uploads of tenant A (its limit)


def setup():
    global H, SRV, KEY_A, KEY_B
    H = Harness()
    SRV = H.start_server(["--db-pool-size", "4", "--db-reserve-for-reads", "1", "--max-uploads", "40",
                          "--max-uploads-per-tenant", str(SLOW), "--upload-min-bytes-per-second", str(MIN_RATE),
                          "--upload-rate-window-seconds", str(WINDOW), "--cpu-workers", "1"])
    admin = SRV.client()
    KEY_A = admin.json("POST", "/v1/api-keys", {"tenant": "uploader"}, expect=201)["key"]
    KEY_B = admin.json("POST", "/v1/api-keys", {"tenant": "bystander"}, expect=201)["key"]


def count(table):
    return int(H.scalar(f"SELECT count(*) FROM {table}"))


def spool_files():
    return spool.spool_files(SRV)


def wait_no_spool(timeout=5):
    spool.wait_no_spool(SRV, timeout)


def upload_request(key, length):
    return RawRequest(SRV, "POST", "/v1/blobs", {"Authorization": "Bearer " + key,
                                                 "Content-Type": "application/octet-stream"}, length)


def trickle(reqs, payloads, rate, stop):
    """Sends each payload at `rate` bytes/s per connection, in tenths of a second."""
    step = max(1, rate // 10)
    t0 = time.time()
    tick = 0
    while not stop.is_set() and any(r.sent < len(p) for r, p in zip(reqs, payloads)):
        for r, p in zip(reqs, payloads):
            if r.sent < len(p):
                r.send(p[r.sent:r.sent + step])
        tick += 1
        time.sleep(max(0.0, t0 + tick * 0.1 - time.time()))


def bystander_round(c, latencies):
    """One round of another tenant's requests: each answered, none 503, timed."""
    def timed(method, path, expect, **kw):
        t0 = time.time()
        r = c.request(method, path, timeout=30, **kw)
        latencies.append(time.time() - t0)
        assert r.status == expect, f"{method} {path}: {r.status} {r.body[:300]!r}"
        return r
    timed("GET", "/v1/jobs", 200)
    timed("POST", "/v1/jobs", 201, json={"kind": "noop", "params": {}})
    blob = timed("POST", "/v1/blobs", 201, body=b"b" * 2000,
                 headers={"Content-Type": "application/octet-stream"}).json()
    timed("GET", f"/v1/blobs/{blob['id']}", 200)
    timed("GET", "/v1/kinds", 200)


def test_slow_uploads_hold_no_connection():
    size = 16000   # 8 s at 2 KB/s: longer than the 5 s a request waits for a pooled connection
    payloads = [os.urandom(size) for _ in range(SLOW)]
    slow = [upload_request(KEY_A, size) for _ in range(SLOW)]
    stop = threading.Event()
    pacer = threading.Thread(target=trickle, args=(slow, payloads, 2000, stop))
    pacer.start()
    try:
        time.sleep(1.0)   # the 18 are in progress: each holds the tenant's upload slots
        r = SRV.client(key=KEY_A).request("POST", "/v1/blobs", body=b"x" * 100,
                                          headers={"Content-Type": "application/octet-stream"})
        assert r.status == 429 and r.headers.get("retry-after"), r
        assert "uploads in progress" in r.json()["detail"], r.json()
        assert len(spool_files()) == SLOW, spool_files()   # each spooled, none in the database yet
        c = SRV.client(key=KEY_B)
        latencies = []
        while pacer.is_alive():
            bystander_round(c, latencies)
        assert max(latencies) < 3.0, f"another tenant waited {max(latencies):.2f}s"
        print(f"bystander: {len(latencies)} requests, max {max(latencies) * 1000:.0f} ms")
    finally:
        stop.set()
        pacer.join()
    for req, data in zip(slow, payloads):
        status, _, body = req.response(timeout=30)
        assert status == 201, (status, body[:300])
        blob = json.loads(body)
        assert blob["size"] == size and blob["sha256"] == hashlib.sha256(data).hexdigest(), blob
        req.close()
    got = SRV.client(key=KEY_A).request("GET", f"/v1/blobs/{blob['id']}")
    assert got.status == 200 and got.body == payloads[-1]
    wait_no_spool()
    # the slots came back: the tenant uploads again
    assert SRV.client(key=KEY_A).upload(b"again")["size"] == 5


def test_too_slow_upload_is_cut_and_leaves_nothing():
    before = (count("blobs"), count("pg_largeobject_metadata"))
    req = upload_request(KEY_A, 100000)
    t0 = time.time()
    answered = False
    while time.time() - t0 < 3 * WINDOW and not answered:
        req.send(b"s" * 40)          # 400 B/s: under the minimum of 1000
        time.sleep(0.1)
        answered = req.readable()
    status, headers, body = req.response(timeout=5)
    took = time.time() - t0
    req.close()
    assert status == 408, (status, body)
    assert f"{MIN_RATE} bytes per second" in body.decode(), body
    assert WINDOW - 0.5 <= took <= 2 * WINDOW + 1, took
    wait_no_spool()
    assert (count("blobs"), count("pg_largeobject_metadata")) == before


def test_client_gone_mid_upload_leaves_nothing():
    before = (count("blobs"), count("pg_largeobject_metadata"))
    req = upload_request(KEY_A, 1 << 20)
    req.send(os.urandom(300000))
    time.sleep(0.3)
    assert len(spool_files()) == 1, spool_files()
    req.close()
    wait_no_spool()
    assert (count("blobs"), count("pg_largeobject_metadata")) == before


def test_stalled_upload_is_closed():
    before = (count("blobs"), count("pg_largeobject_metadata"))
    req = upload_request(KEY_A, 50000)
    req.send(b"z" * 5000)
    t0 = time.time()
    assert req.closed_by_server(WINDOW + 5), "a stalled upload kept its connection"
    assert time.time() - t0 >= WINDOW - 1
    req.close()
    wait_no_spool()
    assert (count("blobs"), count("pg_largeobject_metadata")) == before


def test_declared_oversize_refused_before_reading():
    req = RawRequest(SRV, "POST", "/v1/blobs", {"Authorization": "Bearer " + KEY_A,
                                                "Content-Type": "application/octet-stream"}, 17 << 30)
    status, _, body = req.response(timeout=5)
    req.close()
    assert status == 413 and b"over the limit" in body, (status, body)
    wait_no_spool()


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_slow_uploads_hold_no_connection, test_too_slow_upload_is_cut_and_leaves_nothing,
                   test_client_gone_mid_upload_leaves_nothing, test_stalled_upload_is_closed,
                   test_declared_oversize_refused_before_reading])
    finally:
        H.close()
