"""Connection floods and slow clients against a real `gpujobd serve` over HTTPS (issue 11).

Each test holds one limit of the HTTP layer, as a hostile client would try it:
  - 600 idle connections from one address: the per-address limit (256) keeps the rest out,
    and another address's /healthz answers;
  - 400 idle connections against --max-connections 300: the server takes 300, the rest wait
    in the kernel's backlog; as connections close the waiting ones and /healthz get in;
  - 2000 idle connections from 20 addresses: /healthz answers, the thread count stays put
    (libmicrohttpd's epoll thread pool; thread-per-connection held a thread each);
  - 300 long polls and 300 event streams open at once: parked, they hold no thread;
    /healthz answers; a change of their job answers every one of them;
  - a key revoked while its event stream and long poll are open ends both;
  - a request header trickled byte by byte, a connection that never sends one (TLS
    handshake included), and a kept-alive connection's next header trickled are cut at
    --header-timeout-seconds (the last within twice it), although each byte restarts the
    idle timeout; a kept-alive connection idle between two requests is not (tritonclient
    reuses one and fails the next large request on a connection closed under it);
  - a kept-alive connection idle past --http-idle-seconds (30 here) is closed then, not before;
  - %00 (or any control character) in a path or query is 400, an over-long one 414;
  - /metrics on the API listener needs the admin key; --metrics-listen serves it, /healthz
    and /readyz without one over plain HTTP, and nothing else.
Source addresses are taken from 127.0.0.0/8, which is all loopback.
"""
import http.client
import os
import re
import resource
import select
import socket
import ssl
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from harness import Harness, free_port, run_tests  # noqa: E402

H = None
SRV = None          # defaults, --role api: jobs stay queued
SLOW = None         # --header-timeout-seconds 2, --http-idle-seconds 30, --metrics-listen METRICS_PORT
METRICS_PORT = None
LIMITED = None      # --max-connections 300, --metrics-listen LIMITED_METRICS_PORT
LIMITED_METRICS_PORT = None


def setup():
    global H, SRV, SLOW, METRICS_PORT, LIMITED, LIMITED_METRICS_PORT
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    H = Harness()
    SRV = H.start_server(["--role", "api"])
    METRICS_PORT = free_port()
    LIMITED_METRICS_PORT = free_port()
    SLOW = H.start_server(["--role", "api", "--header-timeout-seconds", "2", "--http-idle-seconds", "30",
                           "--metrics-listen", f"127.0.0.1:{METRICS_PORT}"], wait=False)
    LIMITED = H.start_server(["--role", "api", "--max-connections", "300", "--max-connections-per-ip", "0",
                              "--metrics-listen", f"127.0.0.1:{LIMITED_METRICS_PORT}"], wait=False)
    SLOW.wait_ready()
    LIMITED.wait_ready()


def fd_room():
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 200


# ---------------------------------------------------------------- clients from an address

def https(srv, src, method, path, key=None, timeout=10):
    """One request from source address src; (status, body)."""
    conn = http.client.HTTPSConnection("127.0.0.1", srv.port, timeout=timeout, context=srv.ssl_context(),
                                       source_address=(src, 0))
    try:
        hdrs = {"Authorization": "Bearer " + key} if key else {}
        conn.request(method, path, headers=hdrs)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def idle_sockets(srv, src, n):
    """n TCP connections from src that send nothing."""
    out = []
    for _ in range(n):
        s = socket.socket()
        s.bind((src, 0))
        s.settimeout(10)
        s.connect(("127.0.0.1", srv.port))
        out.append(s)
    return out


def readable(s):
    """Never waits (poll: select() refuses descriptors past 1023)."""
    p = select.poll()
    p.register(s, select.POLLIN)
    return bool(p.poll(0))


def closed_by_server(s):
    """1 when the server closed s (EOF or reset); never waits."""
    if isinstance(s, ssl.SSLSocket):
        if not readable(s):
            return False
        try:
            return s.recv(1) == b""
        except ssl.SSLWantReadError:
            return False
        except (OSError, ssl.SSLError):
            return True
    if not readable(s):      # (recv would wait out the socket's timeout)
        return False
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def close_all(socks):
    for s in socks:
        s.close()


def tls_request(srv, src, path, key, timeout=30):
    """A TLS connection from src with one request sent (Connection: close), unread."""
    raw = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout, source_address=(src, 0))
    s = srv.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
              "Connection: close\r\n\r\n".encode())
    return s


def read_until(s, marker):
    buf = b""
    while marker not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    return buf


def read_to_end(s):
    buf = b""
    while True:
        d = s.recv(65536)
        if not d:
            return buf
        buf += d


def threads(srv):
    with open(f"/proc/{srv.proc.pid}/status") as f:
        return int(re.search(r"^Threads:\s+(\d+)", f.read(), re.M).group(1))


def metric(srv, name, src="127.0.0.3"):
    status, body = https(srv, src, "GET", "/metrics", key=SRV.admin_key)     # one database, one admin
    assert status == 200, (status, body[:200])
    m = re.search(rf"^{name} (\d+)$", body.decode(), re.M)
    assert m, name
    return int(m.group(1))


# ---------------------------------------------------------------- tests

def test_per_ip_limit():
    socks = idle_sockets(SRV, "127.0.0.7", 600)
    try:
        deadline = time.time() + 15
        while True:
            held = sum(not closed_by_server(s) for s in socks)
            if held == 256 or time.time() > deadline:
                break
            time.sleep(0.2)
        assert held == 256, f"{held} of 600 connections from one address held; the limit is 256"
        assert https(SRV, "127.0.0.8", "GET", "/healthz")[0] == 200
        try:      # a 601st from the same address is turned away
            status = https(SRV, "127.0.0.7", "GET", "/healthz", timeout=5)[0]
        except (OSError, http.client.HTTPException):
            status = None
        assert status is None, status
    finally:
        close_all(socks)


def plain_metric(port, name):
    """A gauge from a --metrics-listen listener (its own daemon: it answers at the API's limit)."""
    status, body = plain_http(port, "/metrics")
    assert status == 200, status
    return int(re.search(rf"^{name} (\d+)$", body.decode(), re.M).group(1))


def test_connection_limit():
    socks = []
    try:
        for a in range(4):
            socks += idle_sockets(LIMITED, f"127.0.5.{10 + a}", 100)   # connect() ends in the backlog too
        deadline = time.time() + 15
        while time.time() < deadline:
            api = plain_metric(LIMITED_METRICS_PORT, "gpujobd_http_connections") - 1    # less the scrape's own
            if api >= 300:
                break
            time.sleep(0.2)
        time.sleep(0.5)
        api = plain_metric(LIMITED_METRICS_PORT, "gpujobd_http_connections") - 1
        assert api == 300, f"{api} connections taken with --max-connections 300 and 400 offered"
        assert sum(closed_by_server(s) for s in socks) == 0     # the rest wait; none is dropped
        close_all(socks[:150])
        deadline = time.time() + 15
        while time.time() < deadline:        # the 100 waiting are taken, then there is room
            try:
                if https(LIMITED, "127.0.0.20", "GET", "/healthz", timeout=5)[0] == 200:
                    break
            except (OSError, http.client.HTTPException):
                pass
        else:
            raise AssertionError("/healthz never got in after 150 connections closed")
        deadline = time.time() + 10
        while (api := plain_metric(LIMITED_METRICS_PORT, "gpujobd_http_connections") - 1) != 250:
            assert time.time() < deadline, f"{api} connections; 250 idle are left"
            time.sleep(0.2)
    finally:
        close_all(socks)


def test_many_addresses_do_not_starve_healthz():
    n_addr, per = 20, min(100, fd_room() // 20 - 40)
    before = threads(SRV)
    socks = []
    try:
        for i in range(n_addr):
            socks += idle_sockets(SRV, f"127.0.1.{10 + i}", per)
        for _ in range(5):
            assert https(SRV, "127.0.0.9", "GET", "/healthz")[0] == 200
        assert metric(SRV, "gpujobd_http_connections") >= n_addr * per
        assert sum(closed_by_server(s) for s in socks) == 0     # every one held
        assert threads(SRV) <= before + 2, (before, threads(SRV), len(socks))
    finally:
        close_all(socks)
    print(f"    {len(socks)} idle connections from {n_addr} addresses; threads {before}")


def test_parked_long_polls_and_streams():
    c = SRV.client()
    job = c.submit("noop", {})          # --role api: it stays queued
    n = min(300, fd_room() // 2 - 50)
    before = threads(SRV)
    polls, streams = [], []
    try:
        for i in range(n):
            src = f"127.0.2.{10 + i // 100}"
            polls.append(tls_request(SRV, src, f"/v1/jobs/{job['id']}?wait=60", c.key))
            streams.append(tls_request(SRV, f"127.0.3.{10 + i // 100}", job["events_url"], c.key))
        for s in streams:
            head = read_until(s, b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head[:200]
        # all parked at once: a notification of the job's row (its submit's, if it comes late)
        # wakes the long polls, each reads the job again and parks again, so wait for the count
        # to be 2n rather than read it once after it first reached 2n
        deadline = time.time() + 20
        parked = metric(SRV, "gpujobd_http_streams_parked")
        while parked != 2 * n and time.time() < deadline:
            time.sleep(0.2)
            parked = metric(SRV, "gpujobd_http_streams_parked")
        assert parked == 2 * n, (parked, 2 * n)
        assert https(SRV, "127.0.0.9", "GET", "/healthz")[0] == 200
        during = threads(SRV)
        assert during <= before + 2, f"threads {before} -> {during} with {2 * n} requests waiting"
        c.json("POST", f"/v1/jobs/{job['id']}/cancel", expect=200)
        for s in polls:
            text = read_to_end(s).decode()
            assert text.startswith("HTTP/1.1 200") and '"state":"canceled"' in text, text[:300]
        for s in streams:
            text = read_to_end(s).decode()
            assert "event: state" in text and '"state":"canceled"' in text, text[-300:]
    finally:
        close_all(polls + streams)
    print(f"    {n} long polls and {n} event streams; threads {before} -> {during}")


def test_revoked_key_ends_streams():
    admin = SRV.client()
    k = admin.json("POST", "/v1/api-keys", {"tenant": "revoked-streams"}, expect=201)
    user = SRV.client(key=k["key"])
    job = user.submit("noop", {})
    stream = tls_request(SRV, "127.0.0.11", job["events_url"], k["key"])
    poll = tls_request(SRV, "127.0.0.11", f"/v1/jobs/{job['id']}?wait=60", k["key"])
    assert read_until(stream, b"event: state").startswith(b"HTTP/1.1 200")
    time.sleep(0.5)
    assert admin.request("DELETE", f"/v1/api-keys/{k['id']}").status == 204
    t0 = time.time()
    stream.settimeout(30)
    poll.settimeout(30)
    rest = read_to_end(stream)             # ends instead of waiting for the job (never runs)
    text = read_to_end(poll).decode()
    took = time.time() - t0
    assert text.startswith("HTTP/1.1 401") and "revoked" in text, text[:400]
    assert b"canceled" not in rest and took < 20, (took, rest[-200:])
    stream.close()
    poll.close()
    print(f"    ended {took:.1f} s after the revocation")


def wait_closed(s, limit):
    deadline = time.time() + limit
    while time.time() < deadline:
        if closed_by_server(s):
            return True
        time.sleep(0.1)
    return False


def test_header_deadline():
    cut0 = metric(SLOW, "gpujobd_http_header_timeouts_total")
    # a connection that never starts its TLS handshake
    silent = idle_sockets(SLOW, "127.0.0.12", 1)[0]
    # a TLS connection whose header comes a byte at a time: each byte restarts the idle
    # timeout (30 s), not the header deadline (2 s)
    raw = socket.create_connection(("127.0.0.1", SLOW.port), timeout=10, source_address=("127.0.0.12", 0))
    trickle = SLOW.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
    trickle.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    # two kept-alive connections after an answer: one idle (idle is not slow), one whose
    # next request header trickles
    kept, kept_slow = (http.client.HTTPSConnection("127.0.0.1", SLOW.port, timeout=10, context=SLOW.ssl_context(),
                                                   source_address=(src, 0)) for src in ("127.0.0.13", "127.0.0.16"))
    for k in (kept, kept_slow):
        k.request("GET", "/healthz")
        assert k.getresponse().read() and True
    kept_slow.sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    t0 = time.time()
    cut = {}
    while time.time() - t0 < 15 and len(cut) < 2:
        for name, s in (("trickle", trickle), ("kept_slow", kept_slow.sock)):
            if name in cut:
                continue
            try:
                s.sendall(b"a")
                closed = closed_by_server(s)
            except (OSError, ssl.SSLError):
                closed = True
            if closed:
                cut[name] = time.time() - t0
        time.sleep(0.25)
    assert "trickle" in cut, "the trickled header was never cut"
    assert "kept_slow" in cut, "the kept-alive connection's trickled header was never cut"
    assert cut["kept_slow"] < 2 * 2 + 1.5, cut          # within twice the deadline (and a sweep)
    assert wait_closed(silent, 10), "the silent connection was never cut"
    while time.time() - t0 < 3 * 2:                     # three deadlines idle
        time.sleep(0.25)
    assert not closed_by_server(kept.sock), "the idle kept-alive connection was cut"
    kept.request("GET", "/healthz")                     # and serves its next request
    assert kept.getresponse().status == 200
    # a prompt request on a fresh connection is served as ever
    assert https(SLOW, "127.0.0.14", "GET", "/healthz")[0] == 200
    assert metric(SLOW, "gpujobd_http_header_timeouts_total", src="127.0.0.14") >= cut0 + 3
    for s in (silent, trickle):
        s.close()
    for k in (kept, kept_slow):
        k.close()
    print(f"    trickled header cut after {cut['trickle']:.1f} s, a kept-alive one's after {cut['kept_slow']:.1f} s "
          f"(deadline 2 s, idle timeout 30 s); an idle kept-alive connection served after {time.time() - t0:.1f} s")


def test_idle_bound():
    kept = http.client.HTTPSConnection("127.0.0.1", SLOW.port, timeout=10, context=SLOW.ssl_context(),
                                       source_address=("127.0.0.17", 0))
    kept.request("GET", "/healthz")
    assert kept.getresponse().read()
    t0 = time.time()
    while not closed_by_server(kept.sock) and time.time() - t0 < 45:
        time.sleep(0.25)
    idle = time.time() - t0
    kept.close()
    assert 29 <= idle < 40, f"an idle kept-alive connection was closed after {idle:.1f} s (bound 30 s)"
    print(f"    an idle kept-alive connection was closed after {idle:.1f} s (--http-idle-seconds 30)")


def raw_request(srv, request_line):
    """Sends one request line as it is (no client escaping) over TLS; (status, body)."""
    raw = socket.create_connection(("127.0.0.1", srv.port), timeout=10, source_address=("127.0.0.15", 0))
    s = srv.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
    try:
        s.sendall(request_line + b"\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + SRV.admin_key.encode()
                  + b"\r\nConnection: close\r\n\r\n")
        text = read_to_end(s)
    finally:
        s.close()
    head, _, body = text.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def test_control_characters_in_target():
    # %00 used to end the path early: /healthz%00/../x routed as /healthz (200)
    for target, part in ((b"/healthz%00/../x", b"path"), (b"/healthz%00", b"path"), (b"/v1/jobs%0a", b"path"),
                         (b"/v1/jobs?state=queued%00", b"query"), (b"/v1/jobs?a%00b=1", b"query"),
                         (b"/v1/jobs?state=%7f", b"query")):
        status, body = raw_request(SRV, b"GET " + target + b" HTTP/1.1")
        assert status == 400 and b"control character" in body and part in body, (target, status, body[:300])
    status, body = raw_request(SRV, b"GET /" + b"a" * 1100 + b" HTTP/1.1")
    assert status == 414 and b"path" in body, (status, body[:300])
    status, body = raw_request(SRV, b"GET /v1/jobs?x=" + b"b" * 8300 + b" HTTP/1.1")
    assert status == 414 and b"query" in body, (status, body[:300])
    # what is fine stays fine: an escaped slash and UTF-8 are not control characters
    assert raw_request(SRV, b"GET /healthz HTTP/1.1")[0] == 200
    assert raw_request(SRV, b"GET /v1/jobs?state=queued&x=%C3%A9 HTTP/1.1")[0] == 200


def plain_http(port, path, key=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Authorization": "Bearer " + key} if key else {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def test_metrics_listener():
    # the API listener: every tenant's job counts need the admin key
    assert https(SLOW, "127.0.0.16", "GET", "/metrics")[0] == 401
    tenant = SRV.client().json("POST", "/v1/api-keys", {"tenant": "metrics-peek"}, expect=201)["key"]
    assert https(SLOW, "127.0.0.16", "GET", "/metrics", key=tenant)[0] == 403
    # the metrics listener: plain HTTP, no key, three routes only
    status, body = plain_http(METRICS_PORT, "/metrics")
    assert status == 200 and b"gpujobd_http_connections " in body, (status, body[:300])
    assert plain_http(METRICS_PORT, "/healthz")[0] == 200
    assert plain_http(METRICS_PORT, "/readyz")[0] == 200
    for path in ("/v1/jobs", "/v1/kinds", "/v1/api-keys"):
        assert plain_http(METRICS_PORT, path, key=SRV.admin_key)[0] == 404, path
    assert plain_http(METRICS_PORT, "/healthz%00/../x")[0] == 400


def test_servers_exit_cleanly():
    # SIGTERM after all of the above: exit 0 (under ASan/UBSan: no report, no leak)
    for srv in (SRV, SLOW, LIMITED):
        rc = srv.terminate(timeout=60)
        log = srv.log_text()
        assert rc == 0 and "Sanitizer" not in log and "runtime error" not in log, (rc, log[-3000:])


def teardown():
    H.close()


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_per_ip_limit, test_connection_limit, test_many_addresses_do_not_starve_healthz, test_parked_long_polls_and_streams,
                   test_revoked_key_ends_streams, test_header_deadline, test_idle_bound, test_control_characters_in_target,
                   test_metrics_listener, test_servers_exit_cleanly])
    finally:
        teardown()
