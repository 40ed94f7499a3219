"""Clients that close a parked request, and HSTS, against a real `gpujobd serve` (issue 28).

A parked request (a long poll, an event stream, a log follower) is a suspended connection:
libmicrohttpd watches its socket no more, and a stream that has nothing to write never finds
that its client left. Issue 28: a tenant opened `?follow=1` streams on its running job's log
and closed them; every server socket stayed in CLOSE-WAIT until the job ended, the address's
connection slots (--max-connections-per-ip) filled, and /healthz from that address was
refused for minutes. Here, with a limit of 12 and every kind of parked request:
  - a log follower of a running job (woken by its progress, writing nothing),
  - a long poll (?wait=60) on a waiting job (nothing wakes it),
  - the event stream of a waiting job (nothing changes: a keep-alive every 15 s),
  - /v1/events of a tenant with no jobs (read every second, a keep-alive every 15 s),
  - /v2 inference requests waiting for their batch (a model with a 10 s queue delay),
ten are opened over TLS from one address, parked, and closed by the client, three rounds
(30 > 12): each time the server lets go of every socket of that address within a few
seconds, and /healthz from it answers.
HTTPS answers carry Strict-Transport-Security (none with --hsts-max-age 0); plain-HTTP ones
(the metrics listener, an --insecure-http server behind a TLS proxy) do not.
"""
import http.client
import json
import os
import re
import shutil
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from harness import Harness, free_port, run_tests  # noqa: E402

PER_IP = 12
STREAMS = 10            # per round, under the limit
ROUNDS = 3              # past the limit in all
RELEASE_LIMIT_S = 6.0   # the park looks at parked sockets every second
HSTS = "max-age=31536000"

SRC = os.environ.get("GJ_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
SLOW_MODEL = "demo-slow"   # the demo model, batches of 8 or a 10 s queue delay

H = None
SRV = None
METRICS_PORT = None
RUNNING = None          # a noop job sleeping for ten minutes
WAITING = None          # a job on RUNNING's output: waiting, unchanged


def write_slow_model(data_dir):
    d = os.path.join(data_dir, "models", SLOW_MODEL)
    os.makedirs(os.path.join(d, "1"))
    shutil.copy(os.path.join(SRC, "models", "chest-xray-demo", "1", "model.onnx"), os.path.join(d, "1", "model.onnx"))
    with open(os.path.join(SRC, "models", "chest-xray-demo", "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("name", None)
    cfg["dynamic_batching"] = {"max_queue_delay_us": 10000000, "preferred_batch_sizes": [8]}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)


def setup():
    global H, SRV, METRICS_PORT, RUNNING, WAITING
    H = Harness()
    METRICS_PORT = free_port()
    data_dir = os.path.join(H.tmp, "srv0")
    write_slow_model(data_dir)
    SRV = H.start_server(["--cpu-workers", "1", "--max-connections-per-ip", str(PER_IP),
                          "--metrics-listen", f"127.0.0.1:{METRICS_PORT}"], data_dir=data_dir)
    c = SRV.client()
    RUNNING = c.submit("noop", {"sleep_ms": 600000})
    c.wait_job(RUNNING["id"], states=("running",), timeout=30)
    WAITING = c.submit("noop", {}, inputs={"input": {"job": RUNNING["id"], "output": "data.bin"}})
    assert c.json("GET", f"/v1/jobs/{WAITING['id']}", expect=200)["state"] == "waiting"


# ---------------------------------------------------------------- helpers

def plain_http(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def gauge(name):
    """A gauge from the metrics listener (no API connection taken)."""
    status, _, body = plain_http(METRICS_PORT, "/metrics")
    assert status == 200, status
    return int(re.search(rf"^{name} (\d+)$", body.decode(), re.M).group(1))


def parked():
    return gauge("gpujobd_http_streams_parked")


def connections():
    """Connections the server holds, less the scrape's own (a socket reset by its client is in
    no /proc/net/tcp state, yet holds its slot until the server closes it)."""
    return gauge("gpujobd_http_connections") - 1


def held_after(limit):
    """Connections still held once none is left, or after limit seconds."""
    t0 = time.time()
    while (held := connections()) > 0 and time.time() - t0 < limit:
        time.sleep(0.1)
    return held


def tls_request(src, path, key, close=False):
    """A TLS connection from src with one request sent, its answer unread."""
    raw = socket.create_connection(("127.0.0.1", SRV.port), timeout=30, source_address=(src, 0))
    s = SRV.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
    extra = "Connection: close\r\n" if close else ""
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n{extra}\r\n".encode())
    return s


def read_to_end(s):
    buf = b""
    while (d := s.recv(65536)):
        buf += d
    return buf


def read_head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    return buf


def hex_addr(ip, port=None):
    """An address as /proc/net/tcp writes it (IPv4, host byte order on little-endian)."""
    h = socket.inet_aton(ip)[::-1].hex().upper()
    return h if port is None else f"{h}:{port:04X}"


def server_sockets(src):
    """States of the server's sockets connected to src: ESTABLISHED 01, CLOSE-WAIT 08."""
    local, remote = hex_addr("127.0.0.1", SRV.port), hex_addr(src) + ":"
    states = []
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if fields[1] == local and fields[2].startswith(remote) and fields[3] in ("01", "08"):
                states.append(fields[3])
    return states


def healthz_from(src):
    conn = http.client.HTTPSConnection("127.0.0.1", SRV.port, timeout=10, context=SRV.ssl_context(),
                                       source_address=(src, 0))
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status
    finally:
        conn.close()


def open_park_close(path, src, key, answers_head):
    """Rounds of STREAMS parked requests from src, closed by the client; each round the
    server must let go of them all."""
    for rnd in range(ROUNDS):
        assert held_after(RELEASE_LIMIT_S) == 0, f"{connections()} connection(s) held before the round"
        base = parked()
        socks = [tls_request(src, path, key) for _ in range(STREAMS)]
        try:
            if answers_head:
                for s in socks:
                    head = read_head(s)
                    assert head.startswith(b"HTTP/1.1 200"), head[:200]
            deadline = time.time() + 20
            while parked() < base + STREAMS and time.time() < deadline:
                time.sleep(0.1)
            assert parked() >= base + STREAMS, f"{path}: {parked() - base} of {STREAMS} parked"
            assert connections() == STREAMS, connections()
        finally:
            for s in socks:
                s.close()
        t0 = time.time()
        held = held_after(RELEASE_LIMIT_S)
        assert held == 0, (f"{path}, round {rnd + 1}: {held} connection(s) still held {RELEASE_LIMIT_S} s after "
                           f"the client closed them ({server_sockets(src).count('08')} in CLOSE-WAIT)")
        assert not server_sockets(src)
        assert healthz_from(src) == 200
    return time.time() - t0


# ---------------------------------------------------------------- tests

def test_closed_log_followers_are_let_go():
    c = SRV.client()
    took = open_park_close(f"/v1/jobs/{RUNNING['id']}/log?follow=1", "127.0.8.1", c.key, True)
    print(f"    last round released in {took:.1f} s")


def test_closed_long_polls_are_let_go():
    c = SRV.client()
    took = open_park_close(f"/v1/jobs/{WAITING['id']}?wait=60", "127.0.8.2", c.key, False)
    print(f"    last round released in {took:.1f} s")


def test_closed_job_event_streams_are_let_go():
    c = SRV.client()
    took = open_park_close(f"/v1/jobs/{WAITING['id']}/events", "127.0.8.3", c.key, True)
    print(f"    last round released in {took:.1f} s")


def test_closed_tenant_event_streams_are_let_go():
    key = SRV.client().json("POST", "/v1/api-keys", {"tenant": "gone-clients"}, expect=201)["key"]
    took = open_park_close("/v1/events", "127.0.8.4", key, True)
    print(f"    last round released in {took:.1f} s")


def inference_successes():
    _, _, body = plain_http(METRICS_PORT, "/metrics")
    m = re.search(rf'^gpujobd_inference_request_success\{{model="{SLOW_MODEL}",version="1"\}} (\d+)$',
                  body.decode(), re.M)
    return int(m.group(1)) if m else 0


def test_closed_inference_waits_are_let_go():
    """Five requests wait for their batch (eight, or 10 s): closed by their clients, they are let
    go at once; the batch still runs later, and what it answers for nobody is freed (ASan)."""
    c = SRV.client()
    c.json("POST", f"/v1/models/{SLOW_MODEL}/load", expect=200)
    raw = bytes(4 * 256 * 256)
    head = json.dumps({"inputs": [{"name": "image", "shape": [1, 1, 256, 256], "datatype": "FP32",
                                   "parameters": {"binary_data_size": len(raw)}}],
                       "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}).encode()
    request = (f"POST /v2/models/{SLOW_MODEL}/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {c.key}\r\n"
               f"Inference-Header-Content-Length: {len(head)}\r\nContent-Length: {len(head) + len(raw)}\r\n\r\n"
               ).encode() + head + raw
    n, src = 5, "127.0.8.6"
    assert held_after(RELEASE_LIMIT_S) == 0
    base, done = parked(), inference_successes()
    socks = []
    try:
        for _ in range(n):
            raw_sock = socket.create_connection(("127.0.0.1", SRV.port), timeout=30, source_address=(src, 0))
            socks.append(SRV.ssl_context().wrap_socket(raw_sock, server_hostname="127.0.0.1"))
            socks[-1].sendall(request)
        deadline = time.time() + 20
        while parked() < base + n and time.time() < deadline:
            time.sleep(0.1)
        assert parked() >= base + n, f"{parked() - base} of {n} inference requests parked"
    finally:
        for s in socks:
            s.close()
    held = held_after(RELEASE_LIMIT_S)
    assert held == 0, f"{held} inference request(s) still held {RELEASE_LIMIT_S} s after their clients closed them"
    deadline = time.time() + 30
    while inference_successes() < done + n and time.time() < deadline:
        time.sleep(0.2)
    assert inference_successes() == done + n, "the batch of the requests that left never ran"


def test_open_streams_still_served():
    """A parked stream whose client stays is left alone, and still ends with its job."""
    c = SRV.client()
    follow = tls_request("127.0.8.5", f"/v1/jobs/{RUNNING['id']}/log?follow=1", c.key, close=True)
    poll = tls_request("127.0.8.5", f"/v1/jobs/{RUNNING['id']}?wait=60", c.key, close=True)
    try:
        assert read_head(follow).startswith(b"HTTP/1.1 200")
        time.sleep(3)                   # three looks of the park
        assert server_sockets("127.0.8.5") == ["01", "01"]
        assert c.request("POST", f"/v1/jobs/{RUNNING['id']}/cancel").status in (200, 202)
        follow.settimeout(30)
        poll.settimeout(30)
        text = read_to_end(poll)
        assert text.startswith(b"HTTP/1.1 200") and b'"state":"canceled"' in text, text[:300]
        text = read_to_end(follow)
        assert b"cancel" in text, text[-300:]
    finally:
        follow.close()
        poll.close()


def test_hsts_on_https_only():
    c = SRV.client()
    for path, key in (("/healthz", None), ("/v1/jobs", ""), ("/v1/jobs", c.key)):   # 200, 401, 200
        r = c.request("GET", path, key=key)
        assert r.headers.get("strict-transport-security") == HSTS, (path, r.status, r.headers)
    status, headers, _ = plain_http(METRICS_PORT, "/healthz")
    assert status == 200 and "strict-transport-security" not in headers, headers
    plain = H.start_server(["--role", "api"], insecure=True, wait=False)
    off = H.start_server(["--role", "api", "--hsts-max-age", "0"], wait=False)
    for srv in (plain, off):
        srv.wait_ready()
        r = srv.client(key="").request("GET", "/healthz")
        assert r.status == 200 and "strict-transport-security" not in r.headers, r.headers
        assert srv.terminate() == 0


def test_server_exits_cleanly():
    rc = SRV.terminate(timeout=60)
    log = SRV.log_text()
    assert rc == 0 and "Sanitizer" not in log and "runtime error" not in log, (rc, log[-3000:])


def teardown():
    H.close()


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_closed_log_followers_are_let_go, test_closed_long_polls_are_let_go,
                   test_closed_job_event_streams_are_let_go, test_closed_tenant_event_streams_are_let_go,
                   test_closed_inference_waits_are_let_go,
                   test_open_streams_still_served, test_hsts_on_https_only, test_server_exits_cleanly])
    finally:
        teardown()
