"""Bad requests over real HTTPS: each answers the right 4xx problem AND stores
nothing (jobs, blobs, job_inputs and large objects are counted over SQL).
Also blobs: upload/download, digests, size limits (declared and chunked),
a client that disconnects mid-upload, delete rules, and ids that are not UUIDs."""
import hashlib
import base64
import http.client
import json
import os
import socket
import ssl
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402

H = None
SRV = None
MAX_BODY = 1 << 20
MAX_JSON = 8192


def setup():
    global H, SRV
    H = Harness()
    SRV = H.start_server(["--cpu-workers", "1", "--max-body-bytes", str(MAX_BODY),
                          "--max-json-bytes", str(MAX_JSON)])


def counts():
    return tuple(int(H.scalar(f"SELECT count(*) FROM {t}"))
                 for t in ("jobs", "blobs", "job_inputs", "pg_largeobject_metadata"))


class Stores:
    """with Stores(): ... asserts the block stored nothing."""
    def __enter__(self):
        self.before = counts()

    def __exit__(self, *exc):
        if exc[0] is None:
            time.sleep(0.1)
            after = counts()
            assert after == self.before, f"stored something: {self.before} -> {after}"


def problem(r, status, field=None):
    assert r.status == status, r
    assert r.headers["content-type"] == "application/problem+json", r.headers
    p = r.json()
    assert p["status"] == status and p["type"] and p["title"], p
    if field is not None:
        assert p.get("field", "").startswith(field), (field, p)
    return p


def post_job(c, body, headers=None):
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers or {})
    return c.request("POST", "/v1/jobs", body=body if isinstance(body, bytes) else json.dumps(body).encode(),
                     headers=hdrs)


def test_submit_validation_stores_nothing():
    c = SRV.client()
    blob = c.upload(b"x")
    with Stores():
        problem(post_job(c, b'{"kind": "noop", '), 400)
        problem(post_job(c, b'{"kind": "noop", "kind": "noop"}'), 400)       # duplicate keys
        problem(post_job(c, b'[1, 2]'), 400)
        problem(post_job(c, b''), 400)
        problem(post_job(c, {"kind": "nosuchkind"}), 422, "kind")
        problem(post_job(c, {"params": {}}), 422, "kind")
        problem(post_job(c, {"kind": 7}), 422, "kind")
        problem(post_job(c, {"kind": "noop", "params": {"bogus": 1}}), 422, "params")
        problem(post_job(c, {"kind": "noop", "params": {"sleep_ms": "long"}}), 422, "params.sleep_ms")
        problem(post_job(c, {"kind": "noop", "params": {"sleep_ms": -1}}), 422, "params.sleep_ms")
        problem(post_job(c, {"kind": "noop", "params": []}), 422, "params")
        problem(post_job(c, {"kind": "noop", "colour": "red"}), 422, "colour")
        problem(post_job(c, {"kind": "noop", "priority": "high"}), 422, "priority")
        problem(post_job(c, {"kind": "noop", "max_attempts": 0}), 422, "max_attempts")
        for bad in (-1, 2592001, 1.5, "60", True):
            problem(post_job(c, {"kind": "noop", "timeout_seconds": bad}), 422, "timeout_seconds")
        problem(post_job(c, {"kind": "noop", "inputs": {"input": str(uuid.uuid4())}}), 422, "inputs.input")
        problem(post_job(c, {"kind": "noop", "inputs": {"input": "not-a-uuid"}}), 422, "inputs.input")
        problem(post_job(c, {"kind": "noop", "inputs": {"input": 5}}), 422, "inputs.input")
        problem(post_job(c, {"kind": "noop", "inputs": {"other": blob["id"]}}), 422, "inputs")
        problem(post_job(c, {"kind": "noop", "inputs": {"../x": blob["id"]}}), 422, "inputs")
        problem(post_job(c, {"kind": "noop", "params": {"fail_with": "x" * (MAX_JSON + 10)}}), 413)
        problem(post_job(c, {"kind": "noop"}, {"Content-Type": "text/plain"}), 415, "Content-Type")
        problem(post_job(c, {"kind": "noop"}, {"Content-Type": "application/x-www-form-urlencoded"}), 415)


def multipart(parts, boundary="gjtestboundary"):
    out = []
    for name, filename, data in parts:
        out.append(f"--{boundary}\r\n".encode())
        disp = f'Content-Disposition: form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out.append((disp + "\r\n\r\n").encode() + data + b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


def test_multipart_errors_store_nothing():
    c = SRV.client()
    cases = [
        ([("job", None, b'{"kind": "nosuch"}'), ("input", "a", b"A" * 5000)], 422, "kind"),
        ([("input", "a", b"A" * 5000), ("job", None, b'{"kind": "noop", "params": {"x": 1}}')], 422, "params"),
        ([("input", "a", b"A" * 5000)], 400, "job"),
        ([("job", None, b'{"kind": '), ("input", "a", b"A")], 400, "job"),
        ([("job", None, b'{"kind": "noop"}'), ("input", "a", b"A"), ("input", "b", b"B")], 422, "inputs"),
        ([("job", None, b'{"kind": "noop"}'), ("unknown", "a", b"A")], 422, "inputs"),
        ([("job", None, b'{"kind": "noop"}'), ("input", "a", b"A" * (MAX_BODY + 10))], 413, None),
    ]
    with Stores():
        for parts, status, field in cases:
            body, ctype = multipart(parts)
            problem(c.request("POST", "/v1/jobs", body=body, headers={"Content-Type": ctype}), status, field)
        # truncated body (no closing boundary)
        body, ctype = multipart([("job", None, b'{"kind": "noop"}'), ("input", "a", b"A" * 100)])
        r = c.request("POST", "/v1/jobs", body=body[:-30], headers={"Content-Type": ctype})
        assert r.status in (400, 422), r
        problem(c.request("POST", "/v1/jobs", body=b"xx", headers={"Content-Type": "multipart/form-data"}), 400)


def test_blob_upload_download_and_digest():
    c = SRV.client()
    data = os.urandom(300000)
    digest = base64.b64encode(hashlib.sha256(data).digest()).decode()
    r = c.request("POST", "/v1/blobs", body=data,
                  headers={"Content-Type": "image/png", "Content-Digest": f"sha-256=:{digest}:"})
    assert r.status == 201, r
    b = r.json()
    assert b["size"] == len(data) and b["sha256"] == hashlib.sha256(data).hexdigest()
    assert b["content_type"] == "image/png" and r.headers["location"] == f"/v1/blobs/{b['id']}"
    g = c.request("GET", f"/v1/blobs/{b['id']}")
    assert g.status == 200 and g.body == data and g.headers["content-type"] == "image/png"
    assert g.headers["etag"] == f'"{b["sha256"]}"'
    assert g.headers["content-digest"] == f"sha-256=:{digest}:"
    assert c.request("GET", f"/v1/blobs/{b['id']}", headers={"If-None-Match": g.headers["etag"]}).status == 304
    r = c.request("GET", f"/v1/blobs/{b['id']}", headers={"Range": "bytes=1000-1999"})
    assert r.status == 206 and r.body == data[1000:2000]
    assert r.headers["content-range"] == f"bytes 1000-1999/{len(data)}"
    problem(c.request("GET", f"/v1/blobs/{b['id']}", headers={"Range": f"bytes={len(data)}-"}), 416)
    # the same upload id in upper case is the same blob
    assert c.request("GET", f"/v1/blobs/{b['id'].upper()}").status == 200
    # empty blob
    e = c.upload(b"")
    assert e["size"] == 0 and c.request("GET", f"/v1/blobs/{e['id']}").body == b""
    with Stores():
        wrong = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
        problem(c.request("POST", "/v1/blobs", body=data, headers={"Content-Digest": f"sha-256=:{wrong}:"}),
                400, "Content-Digest")
        problem(c.request("POST", "/v1/blobs", body=data, headers={"Content-Digest": "sha-256=abc"}),
                400, "Content-Digest")
        problem(c.request("POST", "/v1/blobs", body=b"x", headers={"Content-Type": "no slash"}), 400,
                "Content-Type")


def test_upload_size_limits():
    c = SRV.client()
    with Stores():
        # declared too large: refused before the body is read (the client waits for
        # 100-continue, as curl does, and gets the answer instead)
        conn = c.connection()
        try:
            conn.putrequest("POST", "/v1/blobs")
            conn.putheader("Authorization", "Bearer " + c.key)
            conn.putheader("Content-Length", str(MAX_BODY + 1))
            conn.putheader("Expect", "100-continue")
            conn.endheaders()
            r = conn.getresponse()
            body = r.read()
            assert r.status == 413, (r.status, body)
            assert json.loads(body)["status"] == 413
        finally:
            conn.close()
        # chunked: refused once past the cap
        conn = c.connection()
        conn.putrequest("POST", "/v1/blobs")
        conn.putheader("Authorization", "Bearer " + c.key)
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        chunk = b"q" * 65536
        try:
            for _ in range(MAX_BODY // len(chunk) + 4):
                conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            conn.send(b"0\r\n\r\n")
            r = conn.getresponse()
            assert r.status == 413, (r.status, r.read())
        finally:
            conn.close()
    assert c.upload(b"y" * MAX_BODY)["size"] == MAX_BODY       # exactly the cap is fine


def test_disconnect_mid_upload_leaves_nothing():
    c = SRV.client()
    with Stores():
        for _ in range(3):
            raw = socket.create_connection(("127.0.0.1", SRV.port))
            s = SRV.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
            s.sendall((f"POST /v1/blobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {c.key}\r\n"
                       f"Content-Length: {MAX_BODY}\r\n\r\n").encode())
            s.sendall(b"p" * 200000)
            time.sleep(0.3)
            s.close()
        time.sleep(1.0)
    assert '"aborted":true' in SRV.log_text()


def test_blob_delete_rules():
    c = SRV.client()
    b = c.upload(b"in use")
    job = c.submit("noop", {"sleep_ms": 1500}, inputs={"input": b["id"]})
    problem(c.request("DELETE", f"/v1/blobs/{b['id']}"), 409)
    c.wait_job(job["id"])
    assert c.request("DELETE", f"/v1/blobs/{b['id']}").status == 204
    problem(c.request("GET", f"/v1/blobs/{b['id']}"), 404)
    problem(c.request("DELETE", f"/v1/blobs/{b['id']}"), 404)
    outs = c.json("GET", f"/v1/jobs/{job['id']}/outputs", expect=200)["outputs"]
    out_blob = H.scalar(f"SELECT blob_id FROM job_outputs WHERE job_id = '{job['id']}' LIMIT 1")
    assert outs and out_blob
    problem(c.request("DELETE", f"/v1/blobs/{out_blob}"), 409)     # owned by the job


def test_ids_and_names():
    c = SRV.client()
    job = c.submit("noop", {"output_bytes": 4})
    c.wait_job(job["id"])
    jid = job["id"]
    with Stores():
        for path in ("/v1/jobs/123", "/v1/jobs/not-a-uuid/cancel", "/v1/blobs/abc",
                     "/v1/jobs/%27%3B%20DROP%20TABLE%20jobs%3B--", "/v1/jobs/" + jid + "x",
                     "/v1/jobs/" + jid[:-1] + "g/outputs", "/v1/api-keys/zzz"):
            method = "POST" if path.endswith("/cancel") else "GET"
            if path.startswith("/v1/api-keys"):
                method = "DELETE"
            problem(c.request(method, path), 404)
        problem(c.request("DELETE", "/v1/blobs/..%2F..%2Fetc"), 404)
        for name in ("..", "%2e%2e", "%2E%2E", "..%2Fx", "..%2f..%2fetc%2fpasswd", "%2e%2e%2fdata.bin",
                     "a%00b", "."):
            r = c.request("GET", f"/v1/jobs/{jid}/outputs/{name}")
            assert r.status in (400, 404), (name, r)
        assert c.request("GET", f"/v1/jobs/{jid}/outputs/data.bin").status == 200
        problem(c.request("GET", "/v1/nothing"), 404)
        r = c.request("PUT", "/v1/jobs")
        problem(r, 405)
        assert "GET" in r.headers["allow"] and "POST" in r.headers["allow"]


def test_delete_job_rules():
    """One delete rule (issue 25): a running job is canceled and goes once it has stopped
    (202); a finished one goes at once (204); either way, then, 404."""
    c = SRV.client()
    job = c.submit("noop", {"sleep_ms": 20000})
    c.wait_job(job["id"], states=("running",))
    before = counts()
    assert c.request("DELETE", f"/v1/jobs/{job['id']}").status == 202
    deadline = time.time() + 15                          # it sleeps 20 s unless canceled
    while c.request("GET", f"/v1/jobs/{job['id']}").status != 404 and time.time() < deadline:
        time.sleep(0.1)
    assert counts()[0] == before[0] - 1
    done = c.submit("noop", {})
    c.wait_job(done["id"])
    before = counts()
    assert c.request("DELETE", f"/v1/jobs/{done['id']}").status == 204
    assert counts()[0] == before[0] - 1
    problem(c.request("DELETE", f"/v1/jobs/{done['id']}"), 404)


def teardown():
    H.close()


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_submit_validation_stores_nothing, test_multipart_errors_store_nothing,
                   test_blob_upload_download_and_digest, test_upload_size_limits,
                   test_disconnect_mid_upload_leaves_nothing, test_blob_delete_rules, test_ids_and_names,
                   test_delete_job_rules])
    finally:
        teardown()
