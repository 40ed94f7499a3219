"""The jobs API over real HTTPS: lifecycle with noop, list and cursors, long poll,
cancel (queued and running), timeouts, delete, idempotent submit, multipart submit, events
(SSE), outputs with Range and ETag, kinds, gpus, health and metrics."""
import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402

H = None
H2 = None       # a second database for API, so SRV's workers never see its jobs
SRV = None      # workers on (1 CPU slot)
API = None      # --role api: no workers, so jobs stay queued; --job-timeout-seconds 3600


def setup():
    global H, H2, SRV, API
    H = Harness()
    SRV = H.start_server(["--cpu-workers", "2"])
    H2 = Harness()
    API = H2.start_server(["--role", "api", "--job-timeout-seconds", "3600"])


def count(table, h=None):
    return int((h or H).scalar(f"SELECT count(*) FROM {table}"))


def pattern(n, start=0):
    return bytes(((start + i) * 31 + 7) & 0xFF for i in range(n))


def multipart(parts, boundary=None):
    """parts: [(name, filename or None, content_type or None, bytes)] -> (body, content_type)"""
    boundary = boundary or "gjboundary" + uuid.uuid4().hex
    out = []
    for name, filename, ctype, data in parts:
        out.append(f"--{boundary}\r\n".encode())
        disp = f'Content-Disposition: form-data; name="{name}"'
        if filename:
            disp += f'; filename="{filename}"'
        out.append((disp + "\r\n").encode())
        if ctype:
            out.append(f"Content-Type: {ctype}\r\n".encode())
        out.append(b"\r\n" + data + b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


def sse_read(client, path, headers=None, timeout=60):
    """Reads an event stream to its end; returns [(id, event, data)]."""
    conn = client.connection(timeout)
    hdrs = {"Authorization": "Bearer " + client.key}
    hdrs.update(headers or {})
    conn.request("GET", path, headers=hdrs)
    r = conn.getresponse()
    assert r.status == 200, (r.status, r.read())
    assert r.getheader("Content-Type").startswith("text/event-stream")
    text = r.read().decode()
    conn.close()
    events = []
    for block in text.split("\n\n"):
        eid = ev = data = None
        for line in block.split("\n"):
            if line.startswith("id: "):
                eid = int(line[4:])
            elif line.startswith("event: "):
                ev = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        if ev:
            events.append((eid, ev, data))
    return events


def test_health_kinds_gpus():
    c = SRV.client()
    r = c.request("GET", "/healthz", key="")
    assert r.status == 200 and r.json()["status"] == "ok"
    assert len(r.headers["x-request-id"]) == 32
    r = c.request("GET", "/readyz", key="")
    assert r.status == 200, r
    kinds = c.json("GET", "/v1/kinds", expect=200)["kinds"]
    noop = [k for k in kinds if k["name"] == "noop"][0]
    assert noop["params_schema"]["type"] == "object"
    assert noop["inputs"][0]["name"] == "input"
    g = c.json("GET", "/v1/gpus", expect=200)
    assert g["policy"] == "least-loaded" and isinstance(g["gpus"], list)
    assert g["cpu"]["slots"] == 2


def test_lifecycle_noop():
    c = SRV.client()
    blob = c.upload(b"some input bytes")
    r = c.request("POST", "/v1/jobs", json={"kind": "noop", "params": {"sleep_ms": 300, "output_bytes": 5000},
                                            "inputs": {"input": blob["id"]}, "priority": 5})
    assert r.status == 201, r
    job = r.json()
    assert r.headers["location"] == f"/v1/jobs/{job['id']}"
    for k in ("id", "kind", "state", "params", "priority", "attempts", "max_attempts", "progress", "message",
              "error", "device", "created_at", "started_at", "finished_at", "updated_at", "inputs",
              "outputs_url", "events_url"):
        assert k in job, k
    assert job["state"] in ("queued", "running") and job["priority"] == 5
    assert job["inputs"] == {"input": blob["id"]}
    done = c.wait_job(job["id"])
    assert done["state"] == "succeeded", done
    assert done["progress"] == 1.0 and done["attempts"] == 1 and done["device"] == "cpu"
    assert done["started_at"] and done["finished_at"]
    outs = c.json("GET", done["outputs_url"], expect=200)["outputs"]
    names = {o["name"]: o for o in outs}
    assert set(names) == {"data.bin", "result.json"}, names
    assert names["data.bin"]["size"] == 5000
    r = c.request("GET", names["data.bin"]["url"])
    assert r.status == 200 and r.body == pattern(5000)
    assert r.headers["etag"] == '"%s"' % names["data.bin"]["sha256"]
    res = json.loads(c.request("GET", f"/v1/jobs/{job['id']}/outputs/result.json").body)
    assert res["inputs"] == {"input": len(b"some input bytes")}
    # history as SSE: ends after the final state
    evs = sse_read(c, done["events_url"])
    states = [d["state"] for _, e, d in evs if e == "state"]
    assert states[0] == "queued" and states[-1] == "succeeded", evs
    ids = [i for i, _, _ in evs if i is not None]
    assert ids == sorted(ids) and len(ids) >= 3
    # Last-Event-ID resumes after it
    evs2 = sse_read(c, done["events_url"], headers={"Last-Event-ID": str(ids[0])})
    assert [i for i, _, _ in evs2 if i is not None] == ids[1:]
    # delete: the job, its history and outputs go; the standalone input stays
    blobs_before = count("blobs")
    assert c.request("DELETE", f"/v1/jobs/{job['id']}").status == 204
    assert c.request("GET", f"/v1/jobs/{job['id']}").status == 404
    assert count("blobs") == blobs_before - 2
    assert int(H.scalar(f"SELECT count(*) FROM job_events WHERE job_id = '{job['id']}'")) == 0
    assert c.request("GET", f"/v1/blobs/{blob['id']}").status == 200


def test_events_follow_live_job():
    c = SRV.client()
    job = c.submit("noop", {"sleep_ms": 1500})
    t0 = time.time()
    evs = sse_read(c, job["events_url"])
    assert time.time() - t0 >= 0.5
    names = [e for _, e, _ in evs]
    assert "progress" in names, names
    assert evs[-1][1] == "state" and evs[-1][2]["state"] == "succeeded", evs


def test_failed_job_error():
    c = SRV.client()
    job = c.submit("noop", {"fail_with": "bad luck"}, max_attempts=1)
    done = c.wait_job(job["id"])
    assert done["state"] == "failed" and done["error"]["message"] == "bad luck", done


def test_list_filters_and_cursor():
    c = API.client()
    key = c.json("POST", "/v1/api-keys", {"tenant": "lister"}, expect=201)["key"]
    u = API.client(key=key)
    ids = [u.submit("noop", {"sleep_ms": i})["id"] for i in range(7)]
    seen, cursor = [], None
    while True:
        path = "/v1/jobs?limit=3" + (f"&cursor={cursor}" if cursor else "")
        page = u.json("GET", path, expect=200)
        assert len(page["jobs"]) <= 3
        seen += [j["id"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == list(reversed(ids)), (seen, ids)
    assert u.json("GET", "/v1/jobs?state=succeeded", expect=200)["jobs"] == []
    assert len(u.json("GET", "/v1/jobs?state=queued&kind=noop", expect=200)["jobs"]) == 7
    assert u.json("GET", "/v1/jobs?kind=recon", expect=200)["jobs"] == []
    assert u.json("GET", "/v1/jobs?created_after=2999-01-01T00:00:00Z", expect=200)["jobs"] == []
    assert len(u.json("GET", "/v1/jobs?created_before=2999-01-01T00:00:00Z&limit=200", expect=200)["jobs"]) == 7
    for bad in ("limit=0", "limit=201", "limit=x", "state=done", "cursor=abc", "created_after=yesterday",
                "cursor=" + "A" * 40):
        r = u.request("GET", "/v1/jobs?" + bad)
        assert r.status == 400, (bad, r)
        assert r.headers["content-type"] == "application/problem+json"


def test_long_poll():
    c = SRV.client()
    a = API.client()
    # queued forever (no workers): returns after the wait with the same state
    q = a.submit("noop", {})
    t0 = time.time()
    j = a.json("GET", f"/v1/jobs/{q['id']}?wait=2", expect=200)
    assert j["state"] == "queued" and 1.8 <= time.time() - t0 < 6, time.time() - t0
    # a state change ends the wait early
    job = c.submit("noop", {"sleep_ms": 2500})
    cur = c.json("GET", f"/v1/jobs/{job['id']}", expect=200)["state"]
    t0 = time.time()
    j = c.json("GET", f"/v1/jobs/{job['id']}?wait=30", expect=200)
    assert j["state"] != cur and time.time() - t0 < 10, (cur, j)
    done = c.wait_job(job["id"])
    # a finished job answers at once
    t0 = time.time()
    c.json("GET", f"/v1/jobs/{done['id']}?wait=30", expect=200)
    assert time.time() - t0 < 2
    assert c.request("GET", f"/v1/jobs/{job['id']}?wait=abc").status == 400


def test_cancel_queued_and_running():
    a = API.client()
    q = a.submit("noop", {})
    r = a.request("POST", f"/v1/jobs/{q['id']}/cancel")
    assert r.status == 200 and r.json()["state"] == "canceled", r
    assert a.request("POST", f"/v1/jobs/{q['id']}/cancel").status == 409
    c = SRV.client()
    job = c.submit("noop", {"sleep_ms": 30000})
    c.wait_job(job["id"], states=("running",))
    r = c.request("POST", f"/v1/jobs/{job['id']}/cancel")
    assert r.status in (200, 202), r
    t0 = time.time()
    done = c.wait_job(job["id"], timeout=30)
    assert done["state"] == "canceled" and time.time() - t0 < 20, done     # the job sleeps 30 s
    assert c.request("DELETE", f"/v1/jobs/{job['id']}").status == 204
    assert a.request("DELETE", f"/v1/jobs/{q['id']}").status == 204
    # deleting a running job cancels it, and it goes once its worker has stopped (202)
    job = c.submit("noop", {"sleep_ms": 30000})
    c.wait_job(job["id"], states=("running",))
    assert c.request("DELETE", f"/v1/jobs/{job['id']}").status == 202
    deadline = time.time() + 20                                             # the job sleeps 30 s
    while c.request("GET", f"/v1/jobs/{job['id']}").status != 404 and time.time() < deadline:
        time.sleep(0.1)
    assert c.request("GET", f"/v1/jobs/{job['id']}").status == 404


def test_timeout():
    c = SRV.client()
    # a run past its timeout_seconds is stopped and the job fails, not retried
    job = c.submit("noop", {"sleep_ms": 60000}, timeout_seconds=2, max_attempts=3)
    assert job["timeout_seconds"] == 2, job
    running = c.wait_job(job["id"], states=("running",))
    done = c.wait_job(job["id"], timeout=30)
    assert done["state"] == "failed" and done["attempts"] == 1, done
    assert done["error"]["field"] == "timeout_seconds" and "timed out" in done["error"]["message"], done
    ran = (parse_ts(done["finished_at"]) - parse_ts(running["started_at"]))
    assert 1.5 <= ran < 10, ran                                  # 2 s, checked each second
    # a job within its limit runs to its end; none given is none (null)
    fast = c.submit("noop", {"sleep_ms": 200}, timeout_seconds=30)
    assert c.wait_job(fast["id"])["state"] == "succeeded"
    plain = c.submit("noop", {})
    assert plain["timeout_seconds"] is None and c.wait_job(plain["id"])["state"] == "succeeded"
    # the server's default where a submit gives none; 0 asks for none
    a = API.client()
    assert a.submit("noop", {})["timeout_seconds"] == 3600
    assert a.submit("noop", {}, timeout_seconds=0)["timeout_seconds"] is None
    # the limit is part of the request an Idempotency-Key names
    body = {"kind": "noop", "params": {}, "timeout_seconds": 60}
    assert a.request("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": "to-1"}).status == 201
    body["timeout_seconds"] = 61
    assert a.request("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": "to-1"}).status == 409


def parse_ts(text):
    from datetime import datetime
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def test_idempotent_submit():
    c = API.client()
    body = {"kind": "noop", "params": {"sleep_ms": 7}}
    before = count("jobs", H2)
    r1 = c.request("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": "abc-1"})
    assert r1.status == 201, r1
    r2 = c.request("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": "abc-1"})
    assert r2.status == 200 and r2.json()["id"] == r1.json()["id"], r2
    r3 = c.request("POST", "/v1/jobs", json={"kind": "noop", "params": {"sleep_ms": 8}},
                   headers={"Idempotency-Key": "abc-1"})
    assert r3.status == 409 and r3.json()["field"] == "Idempotency-Key", r3
    assert count("jobs", H2) == before + 1
    # the key is per tenant
    key = c.json("POST", "/v1/api-keys", {"tenant": "idem-other"}, expect=201)["key"]
    r4 = API.client(key=key).request("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": "abc-1"})
    assert r4.status == 201 and r4.json()["id"] != r1.json()["id"]
    assert c.request("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": "bad key"}).status == 400


def test_multipart_submit():
    c = SRV.client()
    blobs_before, los_before = count("blobs"), count("pg_largeobject_metadata")
    body, ctype = multipart([("job", None, "application/json",
                              json.dumps({"kind": "noop", "params": {"sleep_ms": 10}}).encode()),
                             ("input", "a.bin", "application/x-test", b"A" * 70000),
                             ("input.1", "b.bin", None, b"B" * 3)])
    r = c.request("POST", "/v1/jobs", body=body, headers={"Content-Type": ctype})
    assert r.status == 201, r
    job = r.json()
    assert set(job["inputs"]) == {"input", "input.1"}
    owned = H.sql(f"SELECT id FROM blobs WHERE owner_job = '{job['id']}'")
    assert set(job["inputs"].values()) <= {row[0] for row in owned}, (job, owned)
    b = c.request("GET", f"/v1/blobs/{job['inputs']['input']}")
    assert b.status == 200 and b.body == b"A" * 70000 and b.headers["content-type"] == "application/x-test"
    done = c.wait_job(job["id"])
    assert done["state"] == "succeeded"
    res = json.loads(c.request("GET", f"/v1/jobs/{job['id']}/outputs/result.json").body)
    assert res["inputs"] == {"input": 70000, "input.1": 3}, res
    # the uploaded inputs belong to the job: deleting it removes them and their large objects
    assert c.request("DELETE", f"/v1/blobs/{job['inputs']['input']}").status == 409
    assert c.request("DELETE", f"/v1/jobs/{job['id']}").status == 204
    assert count("blobs") == blobs_before
    assert count("pg_largeobject_metadata") == los_before
    # job part after the file, mixed with a JSON input reference
    ref = c.upload(b"referenced")
    body, ctype = multipart([("input.2", "c.bin", None, b"CC"),
                             ("job", "job.json", "application/json",
                              json.dumps({"kind": "noop", "inputs": {"input": ref["id"]}}).encode())])
    r = c.request("POST", "/v1/jobs", body=body, headers={"Content-Type": ctype})
    assert r.status == 201, r
    assert r.json()["inputs"]["input"] == ref["id"]


def test_outputs_range_etag():
    c = SRV.client()
    job = c.submit("noop", {"output_bytes": 200000})
    done = c.wait_job(job["id"])
    url = f"/v1/jobs/{done['id']}/outputs/data.bin"
    full = c.request("GET", url)
    assert full.status == 200 and full.body == pattern(200000)
    assert full.headers["accept-ranges"] == "bytes"
    etag = full.headers["etag"]
    assert c.request("GET", url, headers={"If-None-Match": etag}).status == 304
    assert c.request("GET", url, headers={"If-None-Match": '"other"'}).status == 200
    r = c.request("GET", url, headers={"Range": "bytes=100-199"})
    assert r.status == 206 and r.body == pattern(100, 100) and r.headers["content-range"] == "bytes 100-199/200000"
    r = c.request("GET", url, headers={"Range": "bytes=-10"})
    assert r.status == 206 and r.body == pattern(10, 199990)
    r = c.request("GET", url, headers={"Range": "bytes=199999-"})
    assert r.status == 206 and r.body == pattern(1, 199999)
    r = c.request("GET", url, headers={"Range": "bytes=200000-"})
    assert r.status == 416 and r.headers["content-range"] == "bytes */200000"
    r = c.request("GET", url, headers={"Range": "bytes=0-1,5-6"})
    assert r.status == 200 and len(r.body) == 200000
    r = c.request("GET", url, headers={"Range": "bytes=0-9", "If-Range": '"stale"'})
    assert r.status == 200 and len(r.body) == 200000
    assert c.request("GET", f"/v1/jobs/{done['id']}/outputs/nothere.bin").status == 404


def test_metrics():
    c = SRV.client()
    assert c.request("GET", "/metrics", key="").status == 401   # every tenant's counts: the admin's
    text = c.request("GET", "/metrics").body.decode()
    assert 'gpujobd_http_requests_total{method="POST",route="/v1/jobs",code="201"}' in text
    assert 'gpujobd_http_request_duration_seconds_bucket{route="/v1/jobs/{id}",le="+Inf"}' in text
    assert 'gpujobd_jobs{kind="noop",state="succeeded"}' in text
    assert "gpujobd_queue_depth " in text
    assert 'gpujobd_job_duration_seconds_count{kind="noop",state="succeeded"}' in text
    for line in text.splitlines():
        if line and not line.startswith("#"):
            assert line.startswith("gpujobd_"), line
    # one log line per request, with the request id and tenant, never the key
    key = c.json("POST", "/v1/api-keys", {"tenant": "logged"}, expect=201)["key"]
    assert SRV.client(key=key).request("GET", "/v1/kinds").status == 200
    assert SRV.client(key=key + "x").request("GET", "/v1/kinds").status == 401
    time.sleep(0.2)
    log = SRV.log_text()
    assert '"route":"/v1/jobs/{id}"' in log and '"request_id"' in log and '"tenant":"logged"' in log
    assert key not in log and key[4:20] not in log


def test_multipart_idempotent_replay_stores_nothing():
    c = SRV.client()
    parts = [("job", None, None, json.dumps({"kind": "noop"}).encode()), ("input", "a", None, b"Z" * 1000)]
    body, ctype = multipart(parts, boundary="fixedboundary")
    hdrs = {"Content-Type": ctype, "Idempotency-Key": "mp-1"}
    r1 = c.request("POST", "/v1/jobs", body=body, headers=hdrs)
    assert r1.status == 201, r1
    c.wait_job(r1.json()["id"])
    before = (count("jobs"), count("blobs"), count("pg_largeobject_metadata"))
    r2 = c.request("POST", "/v1/jobs", body=body, headers=hdrs)
    assert r2.status == 200 and r2.json()["id"] == r1.json()["id"], r2
    body3, ctype3 = multipart([parts[0], ("input", "a", None, b"Y" * 1000)], boundary="fixedboundary")
    r3 = c.request("POST", "/v1/jobs", body=body3, headers={"Content-Type": ctype3, "Idempotency-Key": "mp-1"})
    assert r3.status == 409, r3
    assert (count("jobs"), count("blobs"), count("pg_largeobject_metadata")) == before


def test_gpus_and_gpu_metrics_with_simulated_devices():
    srv = H2.start_server(["--role", "api", "--workers-per-gpu", "3"], env={"GPUJOBD_FAKE_GPUS": "2:1073741824"})
    try:
        c = srv.client(key=API.admin_key)
        g = c.json("GET", "/v1/gpus", expect=200)
        assert [d["index"] for d in g["gpus"]] == [0, 1], g
        d0 = g["gpus"][0]
        assert d0["memory_total_bytes"] == 1073741824 and d0["memory_reserved_bytes"] == 0, d0
        assert d0["slots"] == 3 and d0["running_tasks"] == 0 and d0["name"] and d0["simulated"] is True, d0
        text = c.request("GET", "/metrics").body.decode()
        assert 'gpujobd_gpu_reserved_bytes{gpu="1"} 0' in text, text
        assert 'gpujobd_gpu_running_tasks{gpu="0"} 0' in text
        assert 'gpujobd_gpu_total_bytes{gpu="0"} 1073741824' in text
    finally:
        srv.terminate()


def test_shutdown_ends_long_polls_and_streams():
    import threading
    srv = H2.start_server(["--role", "api"])
    c = srv.client(key=API.admin_key)
    job = c.submit("noop", {})
    results = {}

    def poll():
        try:
            results["poll"] = c.request("GET", f"/v1/jobs/{job['id']}?wait=60", timeout=90).status
        except Exception as e:  # a closed connection is an acceptable end too
            results["poll"] = repr(e)

    def stream():
        try:
            conn = c.connection(90)
            conn.request("GET", job["events_url"], headers={"Authorization": "Bearer " + c.key})
            r = conn.getresponse()
            results["sse_status"] = r.status
            results["sse"] = r.read()
        except Exception as e:
            results["sse"] = repr(e)

    threads = [threading.Thread(target=poll), threading.Thread(target=stream)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    t0 = time.time()
    assert srv.terminate(timeout=30) == 0
    for t in threads:
        t.join(30)
    assert time.time() - t0 < 15, time.time() - t0
    assert "poll" in results and "sse" in results, results
    assert results.get("sse_status") == 200, results


def teardown():
    H.close()
    H2.close()


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_health_kinds_gpus, test_lifecycle_noop, test_events_follow_live_job, test_failed_job_error,
                   test_list_filters_and_cursor, test_long_poll, test_cancel_queued_and_running,
                   test_timeout, test_idempotent_submit, test_multipart_submit, test_multipart_idempotent_replay_stores_nothing,
                   test_outputs_range_etag, test_metrics, test_gpus_and_gpu_metrics_with_simulated_devices,
                   test_shutdown_ends_long_polls_and_streams])
    finally:
        teardown()
