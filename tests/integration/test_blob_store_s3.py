"""Blobs in an S3-compatible store (issue 30), against a real one: Swift with s3api (swift_s3.py).

`--blob-store s3`: uploads become objects (multipart past one part) and the database holds
only their rows; downloads with Range and ETag; job inputs and outputs through the store;
deleting a blob or a job deletes its objects (the maintenance pass); an object deleted behind
the service's back is a 410 naming the blob; ?redirect=presigned answers 307 to the store;
quotas count the store's bytes; a job whose input is in a store that stops answering is retried until it is back; a store that stops answering makes uploads 503 with Retry-After and /readyz say why; `gpujobd blobs migrate
--to s3` moves large objects there while the service runs; a replica killed mid-upload leaves
no parts after the maintenance pass. Swift starts once."""
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from harness import GPUJOBD, Harness, multipart_form, run_tests  # noqa: E402

H = None
SRV = None


def setup():
    global H, SRV
    H = Harness(blob_store="s3")
    # A short stale-upload age makes the maintenance pass run every second.
    SRV = H.start_server(["--cpu-workers", "1", "--s3-stale-upload-seconds", "2"])


def pattern(n, seed=0):
    block = hashlib.sha256(str(seed).encode()).digest() * 2048   # 64 KiB
    return (block * (n // len(block) + 1))[:n]


def keys():
    return set(H.s3.list_keys(H.bucket))


def wait_for(cond, what, timeout=30):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.3)


def test_upload_download_in_the_store():
    c = SRV.client()
    los = H.scalar("SELECT count(*) FROM pg_largeobject_metadata")
    db_before = int(H.scalar("SELECT pg_database_size(current_database())"))
    data = pattern(20 * 1024 * 1024 + 123)   # three parts of 8 MiB: a multipart upload
    blob = c.upload(data, "application/x-test")
    # the database does not grow with the blob's bytes (a row, an index entry)
    assert int(H.scalar("SELECT pg_database_size(current_database())")) - db_before < 2 * 1024 * 1024
    assert blob["size"] == len(data) and blob["sha256"] == hashlib.sha256(data).hexdigest()
    row = H.sql(f"SELECT lo_oid IS NULL, s3_key FROM blobs WHERE id = '{blob['id']}'")
    assert row[0][0] == "t" and row[0][1].startswith("blobs/"), row
    assert row[0][1] in keys()
    # the database holds no blob bytes: no large object was made
    assert H.scalar("SELECT count(*) FROM pg_largeobject_metadata") == los
    assert H.scalar("SELECT count(*) FROM blob_objects_unowned") == "0"
    r = c.request("GET", f"/v1/blobs/{blob['id']}")
    assert r.status == 200 and r.body == data and r.headers["content-type"] == "application/x-test"
    etag = r.headers["etag"]
    assert c.request("GET", f"/v1/blobs/{blob['id']}", headers={"If-None-Match": etag}).status == 304
    lo, hi = 8 * 1024 * 1024 - 5, 8 * 1024 * 1024 + 5   # across a part boundary
    r = c.request("GET", f"/v1/blobs/{blob['id']}", headers={"Range": f"bytes={lo}-{hi}"})
    assert r.status == 206 and r.body == data[lo:hi + 1], r
    # awscli, from outside, reads the same bytes
    out = os.path.join(H.tmp, "via-aws.bin")
    H.s3.aws("s3", "cp", f"s3://{H.bucket}/{row[0][1]}", out)
    with open(out, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == blob["sha256"]
    # a presigned redirect, opted into: the bytes come straight from the store, no key needed
    r = c.request("GET", f"/v1/blobs/{blob['id']}?redirect=presigned")
    assert r.status == 307 and r.headers["cache-control"] == "no-store", r
    loc = r.headers["location"]
    assert loc.startswith(H.s3.endpoint) and "X-Amz-Signature=" in loc and H.s3.secret_key not in loc
    with urllib.request.urlopen(loc, timeout=60) as direct:
        assert direct.read() == data and direct.headers["content-disposition"].startswith("attachment")
    out = c.request("GET", f"/v1/blobs/{blob['id']}?redirect=other")
    assert out.status == 200 and out.body == data
    # deleting the blob deletes its object (the maintenance pass, within seconds)
    assert c.request("DELETE", f"/v1/blobs/{blob['id']}").status == 204
    wait_for(lambda: row[0][1] not in keys(), "the deleted blob's object to go")
    wait_for(lambda: H.scalar("SELECT count(*) FROM blob_objects_unowned") == "0", "the record to go")


def test_job_inputs_and_outputs_through_the_store():
    c = SRV.client()
    inp = c.upload(pattern(70000, 1))
    job = c.submit("noop", {"output_bytes": 200000}, inputs={"input": inp["id"]})
    done = c.wait_job(job["id"])
    assert done["state"] == "succeeded", done
    res = json.loads(c.request("GET", f"/v1/jobs/{job['id']}/outputs/result.json").body)
    assert res["inputs"] == {"input": 70000}, res
    out = c.request("GET", f"/v1/jobs/{job['id']}/outputs/data.bin", headers={"Range": "bytes=100-199"})
    assert out.status == 206 and len(out.body) == 100, out
    owned = [r[0] for r in H.sql(f"SELECT s3_key FROM blobs WHERE owner_job = '{job['id']}'")]
    assert owned and all(k.startswith("blobs/") for k in owned) and set(owned) <= keys()
    assert c.request("DELETE", f"/v1/jobs/{job['id']}").status == 204
    wait_for(lambda: not (set(owned) & keys()), "the job's objects to go")


def test_object_lost_behind_our_back():
    c = SRV.client()
    blob = c.upload(b"soon gone" * 1000)
    key = H.sql(f"SELECT s3_key FROM blobs WHERE id = '{blob['id']}'")[0][0]
    H.s3.aws("s3", "rm", f"s3://{H.bucket}/{key}")
    r = c.request("GET", f"/v1/blobs/{blob['id']}")
    assert r.status == 410 and blob["id"] in r.json()["detail"], r
    job = c.submit("noop", {}, inputs={"input": blob["id"]})
    done = c.wait_job(job["id"])
    assert done["state"] == "failed" and blob["id"] in json.dumps(done["error"]), done
    assert SRV.proc.poll() is None   # never a crash


def test_job_waits_for_the_store():
    """A job whose input is in a store that does not answer is retried with backoff (a
    transient failure: queued again, its error saying why), not failed at once, and succeeds
    once the store is back."""
    c = SRV.client()
    inp = c.upload(pattern(50000, 3))
    H.s3.stop_proxy()
    try:
        job = c.submit("noop", {}, inputs={"input": inp["id"]}, max_attempts=10)
        def retried():
            j = c.json("GET", f"/v1/jobs/{job['id']}", expect=200)
            assert j["state"] not in ("failed", "succeeded"), j
            return j["attempts"] >= 1 and j["state"] in ("queued", "retrying")
        wait_for(retried, "the job's first attempt to give way")
        j = c.json("GET", f"/v1/jobs/{job['id']}", expect=200)
        assert "object store is not available" in j["error"]["message"], j   # not "internal"
    finally:
        H.s3.start_proxy()
    done = c.wait_job(job["id"], timeout=120)
    assert done["state"] == "succeeded" and done["attempts"] >= 2, done
    res = json.loads(c.request("GET", f"/v1/jobs/{job['id']}/outputs/result.json").body)
    assert res["inputs"] == {"input": 50000}, res


def test_quota_counts_the_store():
    c = SRV.client()
    key = c.json("POST", "/v1/api-keys", {"tenant": "s3-quota"}, expect=201)["key"]
    u = SRV.client(key=key)
    tenant = H.scalar("SELECT id FROM tenants WHERE name = 's3-quota'")
    c.json("PUT", f"/v1/tenants/{tenant}/storage-quota", {"quota_bytes": 100000}, expect=200)
    u.upload(pattern(60000, 2))
    r = u.request("POST", "/v1/blobs", body=pattern(60000, 3))
    assert r.status == 507, r


def test_migrate_large_objects_to_the_store():
    """Blobs and a model's files stored as large objects (a replica on --blob-store postgres) move
    to the store with `gpujobd blobs migrate --to s3` while both replicas run; every digest still
    matches, and a second run has nothing left to move."""
    flags, env = H.s3_args()
    flags = [f for f in flags if f not in ("--blob-store", "s3")]
    pg = H.start_server(["--blob-store", "postgres", "--cpu-workers", "0"] + flags, env=env)
    admin = SRV.client().key   # one database: the first server made the admin key
    c = pg.client(key=admin)
    datas = [pattern(n, 10 + n) for n in (0, 1000, 9 * 1024 * 1024 + 7)]
    blobs = [c.upload(d) for d in datas]
    ids = "', '".join(b["id"] for b in blobs)
    assert H.scalar(f"SELECT count(*) FROM blobs WHERE id IN ('{ids}') AND lo_oid IS NOT NULL") == "3"
    # a model version's files, large objects too (the replica on postgres stored them)
    demo = os.path.join(os.path.dirname(__file__), "..", "..", "models", "chest-xray-demo")
    with open(os.path.join(demo, "config.json")) as f:
        cfg = json.load(f)
    cfg["name"] = "moved-demo"
    with open(os.path.join(demo, "1", "model.onnx"), "rb") as f:
        onnx = f.read()
    body, ct = multipart_form([("model", "model.onnx", onnx), ("config", "config.json", json.dumps(cfg).encode())])
    r = c.request("PUT", "/v1/models/moved-demo/versions/1", body=body, headers={"Content-Type": ct})
    assert r.status == 201, r
    assert H.sql("SELECT lo_oid IS NOT NULL FROM model_files WHERE model = 'moved-demo'") == [["t"]]
    los = int(H.scalar("SELECT count(*) FROM pg_largeobject_metadata"))
    # both kinds are read at once: the S3 replica reads a large object; no redirect for one
    assert SRV.client().request("GET", f"/v1/blobs/{blobs[1]['id']}").body == datas[1]
    r = SRV.client().request("GET", f"/v1/blobs/{blobs[1]['id']}?redirect=presigned")
    assert r.status == 200 and r.body == datas[1], r
    run = subprocess.run([GPUJOBD, "blobs", "migrate", "--to", "s3", "--database-url", H.url] + flags,
                         env=dict(os.environ, **env), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "moved" in run.stdout and H.s3.secret_key not in run.stdout + run.stderr, run.stdout
    rows = H.sql(f"SELECT id, lo_oid IS NULL, s3_key FROM blobs WHERE id IN ('{ids}')")
    assert all(r[1] == "t" and r[2] in keys() for r in rows), rows
    assert int(H.scalar("SELECT count(*) FROM pg_largeobject_metadata")) <= los - 4
    [(key, sha)] = H.sql("SELECT s3_key, encode(sha256, 'hex') FROM model_files WHERE model = 'moved-demo'"
                         " AND lo_oid IS NULL")
    status, obj = H.s3.signed("GET", f"/{H.bucket}/{key}")
    assert status == 200 and key.startswith("blobs/models/") and hashlib.sha256(obj).hexdigest() == sha, key
    assert "1 model files" in run.stdout, run.stdout
    for b, d in zip(blobs, datas):
        for srv in (SRV, pg):
            r = srv.client(key=admin).request("GET", f"/v1/blobs/{b['id']}")
            assert r.status == 200 and hashlib.sha256(r.body).hexdigest() == b["sha256"] and r.body == d
    again = subprocess.run([GPUJOBD, "blobs", "migrate", "--to", "s3", "--database-url", H.url] + flags,
                           env=dict(os.environ, **env), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout.startswith("0 blobs and 0 model files"), again.stdout + again.stderr
    bad = subprocess.run([GPUJOBD, "blobs", "migrate", "--to", "nowhere"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr
    pg.terminate()


def uploads_in_progress():
    """The bucket's multipart uploads under blobs/, asked with a signed GET (awscli is slow)."""
    status, body = H.s3.signed("GET", "/" + H.bucket, "prefix=blobs%2F&uploads=")
    assert status == 200, (status, body[:300])
    return body.count(b"<Upload>")


def test_replica_killed_mid_upload():
    """A replica killed while it sends an upload's parts leaves them in the store; another
    replica's maintenance pass aborts the upload once it is older than --s3-stale-upload-seconds,
    and deletes what the upload's record names."""
    victim = H.start_server(["--cpu-workers", "0"])
    admin = SRV.client().key
    body = pattern(200 * 1024 * 1024, 4)   # 25 parts: seconds of sending here
    import threading
    threading.Thread(target=lambda: victim.client(key=admin).request("POST", "/v1/blobs", body=body, timeout=300),
                     daemon=True).start()
    wait_for(lambda: uploads_in_progress() > 0, "the victim's multipart upload to begin", timeout=120)
    victim.kill9()
    assert uploads_in_progress() > 0
    # SRV's pass (every second, stale after 2 s) aborts it and deletes what was recorded
    wait_for(lambda: uploads_in_progress() == 0, "the maintenance pass to abort the killed replica's upload")
    wait_for(lambda: H.scalar("SELECT count(*) FROM blob_objects_unowned") == "0",
             "the upload's record to be taken care of")


def test_store_unreachable():
    c = SRV.client()
    H.s3.stop()
    r = c.request("POST", "/v1/blobs", body=b"x" * 1000)
    assert r.status == 503 and "object store" in r.json()["detail"] and r.headers.get("retry-after"), r
    r = c.request("GET", "/readyz")
    assert r.status == 503 and any("object store" in why for why in r.json()["reasons"]), r
    assert SRV.proc.poll() is None
    # the store's secret is never logged, whatever failed
    assert H.s3.secret_key not in SRV.log_text()


def teardown():
    H.close()


if __name__ == "__main__":
    import swift_s3
    if not swift_s3.available():
        print("Swift is not installed: skipped")
        sys.exit(77)
    setup()
    try:
        run_tests([test_upload_download_in_the_store, test_job_inputs_and_outputs_through_the_store,
                   test_object_lost_behind_our_back, test_job_waits_for_the_store, test_quota_counts_the_store,
                   test_migrate_large_objects_to_the_store, test_replica_killed_mid_upload,
                   test_store_unreachable])
    finally:
        teardown()
