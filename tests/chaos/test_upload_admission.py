"""Issue 11: every large body takes an upload slot, and the spool keeps its disk reserve.

With --max-uploads 3 and --max-uploads-per-tenant 2: a tenant holding two uploads gets
429 (with Retry-After) for a third blob, and for a large /v2 infer body, which counts in
the same slots; another tenant holding the third slot gets 503 for either (the server's
slots), while small JSON requests still go through; once the held uploads complete every
byte is stored and the slots come back. A second server whose --upload-disk-reserve is
more than the disk has refuses an upload with 507 and leaves nothing behind."""
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
from harness import Harness, run_tests  # noqa: E402
from rawhttp import RawRequest  # noqa: E402
import spool  # noqa: E402

INFER = "/v2/models/chest-xray-demo/infer"
H = None
SRV = None
KEYS = {}


def setup():
    global H, SRV
    H = Harness()
    SRV = H.start_server(["--max-uploads", "3", "--max-uploads-per-tenant", "2", "--cpu-workers", "1"],
                         env={"GPUJOBD_INFER_THREADS": "2"})
    admin = SRV.client()
    for t in ("a", "b"):
        KEYS[t] = admin.json("POST", "/v1/api-keys", {"tenant": f"tenant-{t}"}, expect=201)["key"]


def held_upload(srv, key, data):
    """An upload whose body is sent but for its last byte: it holds its slots."""
    req = RawRequest(srv, "POST", "/v1/blobs", {"Authorization": "Bearer " + key,
                                                "Content-Type": "application/octet-stream"}, len(data))
    req.send(data[:-1])
    return req


def refused(key, status):
    r = SRV.client(key=key).request("POST", "/v1/blobs", body=b"x" * 100,
                                    headers={"Content-Type": "application/octet-stream"})
    assert r.status == status and r.headers.get("retry-after"), r
    req = RawRequest(SRV, "POST", INFER, {"Authorization": "Bearer " + key, "Content-Type": "application/json",
                                          "Expect": "100-continue"}, 2 << 20)
    got, _, body = req.response(timeout=10)
    req.close()
    assert got == status and b"large requests in progress" in body, (got, body)


def test_large_bodies_share_the_upload_slots():
    data = {k: os.urandom(50000) for k in ("a1", "a2", "b1")}
    held = {k: held_upload(SRV, KEYS[k[0]], v) for k, v in data.items() if k != "b1"}
    spool.wait_spool_files(SRV, 2)
    refused(KEYS["a"], 429)                              # tenant a's two slots are taken
    held["b1"] = held_upload(SRV, KEYS["b"], data["b1"])
    spool.wait_spool_files(SRV, 3)
    refused(KEYS["b"], 503)                              # the server's three are taken
    c = SRV.client(key=KEYS["b"])
    c.json("POST", "/v1/jobs", {"kind": "noop", "params": {}}, expect=201)   # small bodies still go
    c.json("GET", "/v1/jobs", expect=200)
    for k, req in held.items():
        req.send(data[k][-1:])
        status, _, body = req.response(timeout=30)
        req.close()
        assert status == 201, (k, status, body[:300])
        blob = json.loads(body)
        assert blob["size"] == 50000 and blob["sha256"] == hashlib.sha256(data[k]).hexdigest(), blob
    spool.wait_no_spool(SRV)
    assert SRV.client(key=KEYS["a"]).upload(b"again")["size"] == 5   # the slots came back


def test_disk_reserve_refuses_with_507():
    srv = H.start_server(["--upload-disk-reserve", "1000000T", "--cpu-workers", "1"])
    before = H.scalar("SELECT count(*) FROM blobs")
    r = srv.client(key=KEYS["a"]).request("POST", "/v1/blobs", body=b"y" * 10000,
                                          headers={"Content-Type": "application/octet-stream"})
    assert r.status == 507 and "disk space" in r.json()["detail"], r
    spool.wait_no_spool(srv)
    assert H.scalar("SELECT count(*) FROM blobs") == before
    srv.terminate()


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_large_bodies_share_the_upload_slots, test_disk_reserve_refuses_with_507])
    finally:
        H.close()
