"""Issue 15 over real HTTPS: the job log route (plain and followed), jobs that chain (a blocked
job runs on its parent's output without a copy, or fails saying why), names and labels, and
callbacks delivered to a real local HTTPS receiver: signed (Standard Webhooks), retried with
backoff after a 500, refused at a private address unless the admin allows it."""
import base64
import hashlib
import hmac
import http.server
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, free_port, run_tests  # noqa: E402

H = H2 = SRV = STRICT = None
RECV = None


class Receiver:
    """An HTTPS server with its own certificate (openssl), recording each call; answers the
    statuses in `plan` in turn (then 200). A call to a path in `hold` is recorded at once and
    answered when that event is set (a slow receiver); `holding` counts such calls open."""

    def __init__(self, tmp):
        self.cert, self.key = os.path.join(tmp, "recv.pem"), os.path.join(tmp, "recv.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                        "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", self.key, "-out", self.cert], check=True, capture_output=True)
        self.calls, self.plan, self.lock = [], [], threading.Lock()
        self.hold, self.holding, self.most_holding = {}, 0, 0
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with rec.lock:
                    rec.calls.append((time.time(), self.path, dict(self.headers), body))
                    status = rec.plan.pop(0) if rec.plan else 200
                    gate = rec.hold.get(self.path)
                    if gate:
                        rec.holding += 1
                        rec.most_holding = max(rec.most_holding, rec.holding)
                if gate:
                    gate.wait(30)
                    with rec.lock:
                        rec.holding -= 1
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.port = free_port()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert, self.key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def wait_calls(self, path, n, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                got = [c for c in self.calls if c[1] == path]
            if len(got) >= n:
                return got
            time.sleep(0.05)
        raise AssertionError(f"{path}: {len(got)} call(s), expected {n}")


HTTP_THREADS = 4
MAX_DEPTH, MAX_WAITING = 3, 5   # STRICT's bounds on chains of waiting jobs


def setup():
    global H, H2, SRV, STRICT, RECV
    H = Harness()
    RECV = Receiver(H.tmp)
    SRV = H.start_server(["--cpu-workers", "2", "--http-threads", str(HTTP_THREADS), "--callback-allow", "localhost,127.0.0.1",
                          "--callback-allow-private", "--callback-backoff-ms", "300",
                          "--callback-cacert", RECV.cert])
    H2 = Harness()
    STRICT = H2.start_server(["--cpu-workers", "1", "--callback-allow", "localhost", "--callback-cacert", RECV.cert,
                              "--max-chain-depth", str(MAX_DEPTH), "--max-waiting-jobs-per-tenant", str(MAX_WAITING)])


def tenant_key(srv, tenant):
    return srv.client().json("POST", "/v1/api-keys", {"tenant": tenant, "label": tenant}, expect=201)["key"]


def test_log_plain_follow_and_isolation():
    c = SRV.client()
    job = c.submit("noop", {"sleep_ms": 1500})
    r = c.request("GET", f"/v1/jobs/{job['id']}/log?follow=1", timeout=30)
    assert r.status == 200 and r.headers["content-type"].startswith("text/plain"), r
    text = r.body.decode()
    assert "noop: attempt 1 of" in text and "run succeeded after 1." in text, text
    assert c.json("GET", f"/v1/jobs/{job['id']}", expect=200)["state"] == "succeeded"
    plain = c.request("GET", f"/v1/jobs/{job['id']}/log")
    assert plain.body.decode() == text, (plain.body, text)
    seq = int(plain.headers["gpujobd-log-seq"])
    assert seq == len(text.splitlines()) >= 3
    assert c.request("GET", f"/v1/jobs/{job['id']}/log?after={seq}").body == b""
    failed = c.submit("noop", {"fail_with": "the detector exploded"}, max_attempts=1)
    c.wait_job(failed["id"])
    err = c.request("GET", f"/v1/jobs/{failed['id']}/log?level=error").body.decode()
    assert err.count("\n") == 1 and "error: the detector exploded" in err, err
    assert c.request("GET", f"/v1/jobs/{job['id']}/log?level=loud").status == 400
    other = SRV.client(key=tenant_key(SRV, "log-other"))
    assert other.request("GET", f"/v1/jobs/{job['id']}/log").status == 404


def parked(c):
    m = re.search(r"^gpujobd_http_streams_parked (\d+)$", c.request("GET", "/metrics").body.decode(), re.M)
    assert m
    return int(m.group(1))


def test_log_follows_hold_no_thread():
    """More ?follow=1 readers than event-loop threads: they wait parked, the API answers, and
    each stream still ends with the job's last line."""
    c = SRV.client()
    job = c.submit("noop", {"sleep_ms": 60000})
    c.wait_job(job["id"], states=("running",), timeout=30)
    n = 3 * HTTP_THREADS
    conns, responses = [], []
    try:
        for _ in range(n):
            conn = c.connection(30)
            conn.request("GET", f"/v1/jobs/{job['id']}/log?follow=1", headers={"Authorization": f"Bearer {c.key}"})
            responses.append(conn.getresponse())
            assert responses[-1].status == 200
            conns.append(conn)
        deadline = time.time() + 20
        while parked(c) < n and time.time() < deadline:
            time.sleep(0.2)
        assert parked(c) >= n, parked(c)
        assert c.request("GET", "/v1/jobs", timeout=20).status == 200
        assert c.request("POST", f"/v1/jobs/{job['id']}/cancel").status in (200, 202)
        text = responses[0].read().decode()
        assert "noop: attempt 1 of" in text and "cancel" in text, text
    finally:
        for conn in conns:
            conn.close()


def test_chain_runs_on_parent_output():
    c = SRV.client()
    parent = c.submit("noop", {"sleep_ms": 1500, "output_bytes": 4321}, name="parent", labels={"run": "chain1"})
    child = c.submit("noop", {}, inputs={"input": {"job": parent["id"], "output": "data.bin"}},
                     name="child", labels={"run": "chain1"})
    assert child["state"] == "waiting", child
    done = c.wait_job(child["id"], timeout=60)
    assert done["state"] == "succeeded", done
    assert done["inputs_from"]["input"] == {"job": parent["id"], "output": "data.bin", "resolved": True}, done
    result = json.loads(c.request("GET", f"/v1/jobs/{child['id']}/outputs/result.json").body)
    assert result["inputs"]["input"] == 4321, result
    # the child's input is the parent's output blob itself: nothing was copied
    rows = H.sql(f"SELECT (SELECT blob_id FROM job_outputs WHERE job_id = '{parent['id']}' AND name = 'data.bin')"
                 f" = (SELECT blob_id FROM job_inputs WHERE job_id = '{child['id']}' AND name = 'input')")
    assert rows == [["t"]], rows
    listed = c.json("GET", "/v1/jobs?label=run=chain1", expect=200)["jobs"]
    assert sorted(j["name"] for j in listed) == ["child", "parent"], listed
    assert [j["id"] for j in c.json("GET", "/v1/jobs?name=child", expect=200)["jobs"]] == [child["id"]]


def test_chain_fails_when_parent_fails():
    c = SRV.client()
    parent = c.submit("noop", {"sleep_ms": 800, "fail_with": "bad projections"}, max_attempts=1)
    child = c.submit("noop", {}, inputs={"input": {"job": parent["id"], "output": "data.bin"}})
    done = c.wait_job(child["id"], timeout=60)
    assert done["state"] == "failed", done
    assert done["error"]["field"] == "inputs.input", done
    assert parent["id"] in done["error"]["message"] and "bad projections" in done["error"]["message"], done
    # an unknown job, or another tenant's, cannot be named
    other = SRV.client(key=tenant_key(SRV, "chain-other"))
    r = other.request("POST", "/v1/jobs", json={"kind": "noop", "inputs": {"input": {"job": parent["id"],
                                                                                     "output": "data.bin"}}})
    assert r.status in (404, 422) and b"inputs.input" in r.body, r


def chain_on(c, upstream, n, **kw):
    """n jobs, each waiting for the data.bin of the one before (the first for upstream's)."""
    jobs = [upstream]
    for _ in range(n):
        jobs.append(c.submit("noop", {"output_bytes": 8}, inputs={"input": {"job": jobs[-1]["id"], "output": "data.bin"}},
                             **kw))
        assert jobs[-1]["state"] == "waiting", jobs[-1]
    return jobs[1:]


def test_chain_errors_name_the_failed_job():
    """Issue 28 #2: each failed job of a chain quoted the whole chain above it (quadratic: 12 KB
    at depth 200). Now each names its upstream and the job whose own failure it was."""
    c = SRV.client(key=tenant_key(SRV, "chain-deep"))
    head = c.submit("noop", {"sleep_ms": 60000})
    chain = chain_on(c, head, 60)
    assert c.request("POST", f"/v1/jobs/{head['id']}/cancel").status in (200, 202)
    for i, job in enumerate(chain):
        done = c.wait_job(job["id"], timeout=60)
        err = done["error"]
        assert done["state"] == "failed" and err["field"] == "inputs.input", done
        assert err["failed_job"] == head["id"] and err["cause"] == "canceled", err
        assert len(err["message"]) < 200, (i, len(err["message"]))
        up = (chain[i - 1] if i else head)["id"]
        assert up in err["message"] and head["id"] in err["message"], err
    # a failure's own message is the cause each job downstream gives, bounded
    bad = c.submit("noop", {"sleep_ms": 500, "fail_with": "bad projections " + "x" * 380}, max_attempts=1)
    tail = chain_on(c, bad, 2)[-1]
    err = c.wait_job(tail["id"], timeout=60)["error"]
    assert err["failed_job"] == bad["id"] and err["cause"].startswith("failed: bad projections"), err
    assert len(err["cause"]) <= 520 and len(err["message"]) < 700, err


def test_chain_depth_and_waiting_jobs_bounded():
    """Issue 28 #2: no bound on a chain's depth or on a tenant's waiting jobs. STRICT allows
    chains of MAX_DEPTH waiting jobs and MAX_WAITING waiting jobs per tenant."""
    c = STRICT.client(key=tenant_key(STRICT, "bounded"))
    head = c.submit("noop", {"sleep_ms": 60000})
    chain = chain_on(c, head, MAX_DEPTH)
    r = c.request("POST", "/v1/jobs", json={"kind": "noop", "inputs": {"input": {"job": chain[-1]["id"],
                                                                                 "output": "data.bin"}}})
    assert r.status == 422 and r.json()["field"] == "inputs.input", r
    assert "--max-chain-depth" in r.json()["detail"] and str(MAX_DEPTH) in r.json()["detail"], r.json()
    side = chain_on(c, head, MAX_WAITING - MAX_DEPTH)            # depth 1 each: the tenant's 5 waiting
    r = c.request("POST", "/v1/jobs", json={"kind": "noop", "inputs": {"input": {"job": head["id"],
                                                                                 "output": "data.bin"}}})
    assert r.status == 429 and "--max-waiting-jobs-per-tenant" in r.json()["detail"], r
    assert r.headers["retry-after"] == "5", r.headers
    assert str(MAX_WAITING) in r.json()["detail"], r.json()
    assert c.request("POST", "/v1/jobs", json={"kind": "noop"}).status == 201      # not waiting: not counted
    other = STRICT.client(key=tenant_key(STRICT, "bounded-other"))
    mine = other.submit("noop", {"sleep_ms": 100})
    chain_on(other, mine, 1)                                      # another tenant's own count
    assert c.request("POST", f"/v1/jobs/{head['id']}/cancel").status in (200, 202)
    for job in chain + side:
        assert c.wait_job(job["id"], timeout=60)["state"] == "failed"


def verify(secret_text, headers, body):
    secret = base64.b64decode(secret_text[len("whsec_"):])
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    want = "v1," + base64.b64encode(hmac.new(secret, signed, hashlib.sha256).digest()).decode()
    return hmac.compare_digest(want, headers["webhook-signature"])


def test_webhook_signed_retried_with_backoff():
    c = SRV.client()
    secret = c.json("GET", "/v1/webhook-secret", expect=200)["secret"]
    other = SRV.client(key=tenant_key(SRV, "hook-other")).json("GET", "/v1/webhook-secret", expect=200)["secret"]
    assert other != secret and secret == c.json("GET", "/v1/webhook-secret", expect=200)["secret"]
    RECV.plan = [500, 503]
    url = f"https://localhost:{RECV.port}/hook/a?token=s3cret"
    job = c.submit("noop", {"output_bytes": 10}, callback_url=url, name="hooked")
    c.wait_job(job["id"])
    calls = RECV.wait_calls("/hook/a?token=s3cret", 3)
    ids = {h["webhook-id"] for _, _, h, _ in calls}
    assert len(ids) == 1, ids                              # one delivery, retried
    for _, _, h, body in calls:
        assert verify(secret, h, body), h
        assert abs(int(h["webhook-timestamp"]) - time.time()) < 60
    # backoff: 300 ms, then 600 ms
    gaps = [calls[i + 1][0] - calls[i][0] for i in range(2)]
    assert gaps[0] >= 0.25 and gaps[1] >= 0.5, gaps
    body = json.loads(calls[-1][3])
    assert body["type"] == "job.succeeded" and body["data"]["id"] == job["id"], body
    assert body["data"]["name"] == "hooked" and [o["name"] for o in body["data"]["outputs"]] == \
        ["data.bin", "result.json"], body
    time.sleep(0.3)
    dl = c.json("GET", f"/v1/jobs/{job['id']}", expect=200)["callback"]["deliveries"]
    assert dl[0]["state"] == "delivered" and dl[0]["attempts"] == 3 and dl[0]["last_status"] == 200, dl
    # rotation: later calls are signed with the new secret only
    new = c.json("POST", "/v1/webhook-secret", expect=200)["secret"]
    assert new != secret and c.json("GET", "/v1/webhook-secret", expect=200)["secret"] == new
    job2 = c.submit("noop", {}, callback_url=f"https://localhost:{RECV.port}/hook/b")
    c.wait_job(job2["id"])
    (_, _, h2, b2), = RECV.wait_calls("/hook/b", 1)
    assert verify(new, h2, b2) and not verify(secret, h2, b2)
    # a forged signature fails: another secret does not verify
    assert not verify("whsec_" + base64.b64encode(b"x" * 32).decode(), calls[0][2], calls[0][3])
    # a host not on the allow list is refused at submit
    r = c.request("POST", "/v1/jobs", json={"kind": "noop", "callback_url": "https://example.org/hook"})
    assert r.status == 422 and b"callback_url" in r.body, r
    assert "s3cret" not in SRV.log_text()                 # the URL's query is never logged


def test_slow_receiver_delays_no_other_tenant():
    """Issue 28 #7: one delivery thread: while a slow receiver held its call, every tenant's
    callbacks waited (another tenant's arrived 64 s late). Now a tenant's callbacks take one
    delivery at a time, and the others are delivered meanwhile."""
    gate = threading.Event()
    RECV.hold["/slow"] = gate
    try:
        slow = SRV.client(key=tenant_key(SRV, "hook-slow"))
        fast = SRV.client(key=tenant_key(SRV, "hook-fast"))
        jobs = [slow.submit("noop", {}, callback_url=f"https://localhost:{RECV.port}/slow") for _ in range(6)]
        for j in jobs:
            slow.wait_job(j["id"])
        RECV.wait_calls("/slow", 1)
        job = fast.submit("noop", {}, callback_url=f"https://localhost:{RECV.port}/fast")
        fast.wait_job(job["id"])
        # delivered while the slow receiver still holds its call (a call may last 10 s)
        RECV.wait_calls("/fast", 1, timeout=8)
        assert not gate.is_set() and RECV.holding >= 1
        assert RECV.most_holding == 1, RECV.most_holding     # the slow tenant takes one delivery at a time
    finally:
        gate.set()
        del RECV.hold["/slow"]
    RECV.wait_calls("/slow", 6, timeout=60)


def test_webhook_private_address_refused_by_default():
    c = STRICT.client()
    r = c.request("POST", "/v1/jobs", json={"kind": "noop", "callback_url": f"https://127.0.0.1:{RECV.port}/x"})
    assert r.status == 422 and b"callback_url" in r.body, r
    job = c.submit("noop", {}, callback_url=f"https://localhost:{RECV.port}/strict")
    c.wait_job(job["id"])
    deadline = time.time() + 15
    while True:
        dl = c.json("GET", f"/v1/jobs/{job['id']}", expect=200)["callback"]["deliveries"]
        if dl and dl[0]["state"] != "pending" or time.time() > deadline:
            break
        time.sleep(0.1)
    assert dl[0]["state"] == "failed" and "loopback" in dl[0]["last_error"], dl
    assert dl[0]["attempts"] == 1, dl                        # refused for good, not retried
    assert not [cl for cl in RECV.calls if cl[1] == "/strict"]


def test_metrics_count_every_public_state():
    """Issue 25: gpujobd_jobs left out the public state 'waiting', so a job waiting for
    another job's output was in no series. Every public state has a series for every kind,
    and the waiting job is counted."""
    c = SRV.client()
    parent = c.submit("noop", {"sleep_ms": 20000, "output_bytes": 8})
    child = c.submit("noop", {}, inputs={"input": {"job": parent["id"], "output": "data.bin"}})
    assert child["state"] == "waiting", child
    text = c.request("GET", "/metrics").body.decode()
    series = dict(re.findall(r'^gpujobd_jobs\{kind="noop",state="(\w+)"\} (\d+)$', text, re.M))
    assert set(series) == {"queued", "waiting", "running", "succeeded", "failed", "canceled"}, series
    waiting = int(H.scalar("SELECT count(*) FROM jobs WHERE kind = 'noop' AND gj_public_state(state, stage) = 'waiting'"))
    assert waiting >= 1 and int(series["waiting"]) == waiting, (series, waiting)
    assert c.request("POST", f"/v1/jobs/{parent['id']}/cancel").status in (200, 202)
    assert c.wait_job(child["id"])["state"] == "failed"


def teardown():
    if RECV:
        RECV.httpd.shutdown()
    for h in (H, H2):
        if h:
            h.close()


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_log_plain_follow_and_isolation, test_log_follows_hold_no_thread, test_chain_runs_on_parent_output,
                   test_chain_fails_when_parent_fails, test_chain_errors_name_the_failed_job,
                   test_chain_depth_and_waiting_jobs_bounded, test_webhook_signed_retried_with_backoff,
                   test_slow_receiver_delays_no_other_tenant,
                   test_webhook_private_address_refused_by_default, test_metrics_count_every_public_state])
    finally:
        teardown()
