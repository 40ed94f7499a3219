"""The portal's server half over real HTTPS (service/portal/, session.c, cors.c): its embedded
files (CSP, ETag and 304, gzip, immutable build URLs), sign-in and the cookie's flags, CSRF on
cookie requests, sign-out and key revocation ending sessions, tenant isolation of the session,
the slices, the thumbnails and the events stream, and --cors-origin."""
import gzip
import http.client
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402

ORIGIN = "https://portal.example.org"
HTTP_THREADS = 4
H = SRV = ADMIN = A = B = None
A_KEY = B_KEY = None
B_JOB = B_BLOB = None


def setup():
    global H, SRV, ADMIN, A, B, A_KEY, B_KEY, B_JOB, B_BLOB
    H = Harness()
    SRV = H.start_server(["--cpu-workers", "1", "--cors-origin", ORIGIN, "--http-threads", str(HTTP_THREADS)], env={"GPUJOBD_PG_NOSYNC": "1"})
    ADMIN = SRV.client()
    A_KEY = ADMIN.json("POST", "/v1/api-keys", {"tenant": "portal-a"}, expect=201)["key"]
    B_KEY = ADMIN.json("POST", "/v1/api-keys", {"tenant": "portal-b"}, expect=201)["key"]
    A, B = SRV.client(key=A_KEY), SRV.client(key=B_KEY)
    B_BLOB = B.upload(b"tenant b's file")
    B_JOB = B.submit("phantom", {"phantom": "kak-slaney", "volume": {"nx": 16, "ny": 16, "nz": 8, "voxel_mm": 8},
                                 "geometry": {"type": "cone3d", "angles_deg": {"start": 0, "step": 30, "count": 12},
                                              "detector": {"cols": 24, "rows": 16, "spacing_u": 8, "spacing_v": 8},
                                              "source_origin_mm": 300, "source_detector_mm": 600}})
    job = B.wait_job(B_JOB["id"])
    assert job["state"] == "succeeded", job


def sign_in(key):
    """A session for key: (cookie header value, csrf token, body)."""
    r = SRV.client(key="").request("POST", "/v1/session", json={"key": key})
    assert r.status == 201, r
    cookie = r.headers["set-cookie"]
    token = re.match(r"__Host-gj_session=([A-Za-z0-9_-]{43});", cookie)
    assert token, cookie
    return f"__Host-gj_session={token.group(1)}", r.json()["csrf_token"], r


def by_cookie(cookie, method, path, csrf=None, **kw):
    headers = dict(kw.pop("headers", {}))
    headers["Cookie"] = cookie
    if csrf:
        headers["X-CSRF-Token"] = csrf
    return SRV.client(key="").request(method, path, headers=headers, **kw)


def test_page_and_assets():
    anon = SRV.client(key="")
    r = anon.request("GET", "/")
    assert r.status == 200 and r.headers["content-type"].startswith("text/html"), r
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp, csp
    assert r.headers["cache-control"] == "no-cache" and r.headers["x-content-type-options"] == "nosniff", r.headers
    assert anon.request("GET", "/", headers={"If-None-Match": r.headers["etag"]}).status == 304
    app = re.search(rb'src="(/assets/([0-9a-f]{16})/app\.js)"', r.body)
    assert app, r.body[:400]
    plain = anon.request("GET", app.group(1).decode())
    assert plain.status == 200 and plain.headers["content-type"].startswith("text/javascript"), plain
    assert "immutable" in plain.headers["cache-control"], plain.headers
    z = anon.request("GET", app.group(1).decode(), headers={"Accept-Encoding": "gzip"})
    assert z.headers.get("content-encoding") == "gzip" and z.headers["etag"] != plain.headers["etag"], z.headers
    assert gzip.decompress(z.body) == plain.body
    refused = anon.request("GET", app.group(1).decode(), headers={"Accept-Encoding": "gzip;q=0"})
    assert "content-encoding" not in refused.headers and refused.body == plain.body
    other = anon.request("GET", "/assets/0000000000000000/app.js")
    assert other.status == 200 and other.headers["cache-control"] == "no-cache", other.headers
    assert anon.request("GET", f"/assets/{app.group(2).decode()}/index.html").status == 404
    assert anon.request("GET", f"/assets/{app.group(2).decode()}/nothing.js").status == 404
    spec = anon.request("GET", "/openapi.yaml")
    with open(os.path.join(os.environ.get("GJ_SOURCE_ROOT", "."), "openapi", "openapi.yaml"), "rb") as f:
        assert spec.status == 200 and spec.body == f.read()


def test_sign_in_refusals():
    anon = SRV.client(key="")
    r = anon.request("POST", "/v1/session", json={"key": "gjk_" + "x" * 43})
    assert r.status == 401 and r.json()["field"] == "key", r
    r = anon.request("POST", "/v1/session", body=b"key=" + A_KEY.encode(),
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 415, r   # a cross-site form cannot sign anyone in
    r = anon.request("POST", "/v1/session", json={"key": A_KEY, "extra": 1})
    assert r.status == 422 and r.json()["field"] == "extra", r
    # the portal's probe before sign-in: 200, not signed in (no failed request in a browser);
    # a wrong key or cookie is still 401, and so is every protected route without one
    r = anon.request("GET", "/v1/session")
    assert r.status == 200 and r.json() == {"signed_in": False}, r
    assert anon.request("GET", "/v1/session", headers={"Authorization": "Bearer gjk_" + "x" * 43}).status == 401
    assert anon.request("GET", "/v1/session", headers={"Cookie": "__Host-gj_session=" + "x" * 43}).status == 401
    assert anon.request("GET", "/v1/jobs").status == 401
    assert anon.request("DELETE", "/v1/session").status == 401


def test_session_cookie_and_csrf():
    cookie, csrf, r = sign_in(A_KEY)
    set_cookie = r.headers["set-cookie"]
    for flag in ("HttpOnly", "Secure", "SameSite=Strict", "Path=/"):
        assert flag in set_cookie, set_cookie
    assert A_KEY.encode() not in r.body and r.json()["tenant"] == "portal-a", r.body
    assert A_KEY not in SRV.log_text(), "the key was logged"
    me = by_cookie(cookie, "GET", "/v1/session").json()
    assert me["signed_in_by"] == "session" and me["csrf_token"] == csrf, me
    assert by_cookie(cookie, "GET", "/v1/jobs").status == 200
    body = {"kind": "noop", "params": {}}
    assert by_cookie(cookie, "POST", "/v1/jobs", json=body).status == 403
    assert by_cookie(cookie, "POST", "/v1/jobs", csrf="x" * 43, json=body).status == 403
    _, other_csrf, _ = sign_in(A_KEY)
    assert by_cookie(cookie, "POST", "/v1/jobs", csrf=other_csrf, json=body).status == 403
    r = by_cookie(cookie, "POST", "/v1/jobs", csrf=csrf, json=body)
    assert r.status == 201, r
    # signing out ends the cookie, for every request
    assert by_cookie(cookie, "DELETE", "/v1/session").status == 403   # a state change: CSRF too
    out = by_cookie(cookie, "DELETE", "/v1/session", csrf=csrf)
    assert out.status == 204 and "Max-Age=0" in out.headers["set-cookie"], out.headers
    assert by_cookie(cookie, "GET", "/v1/jobs").status == 401


def test_revoked_key_ends_its_sessions():
    k = ADMIN.json("POST", "/v1/api-keys", {"tenant": "portal-a"}, expect=201)
    cookie, _, _ = sign_in(k["key"])
    assert by_cookie(cookie, "GET", "/v1/jobs").status == 200
    ADMIN.json("DELETE", f"/v1/api-keys/{k['id']}", expect=204)
    assert by_cookie(cookie, "GET", "/v1/jobs").status == 401


def test_slices_and_thumbnails():
    job = B_JOB["id"]
    info = B.json("GET", f"/v1/jobs/{job}/outputs/truth.nrrd/slices", expect=200)
    assert info["sizes"] == [16, 16, 8] and info["slices"] == 8, info
    r = B.request("GET", f"/v1/jobs/{job}/outputs/truth.nrrd/slices/4.png")
    assert r.status == 200 and r.headers["content-type"] == "image/png" and r.body[1:4] == b"PNG", r
    assert B.request("GET", f"/v1/jobs/{job}/outputs/truth.nrrd/slices/4.png",
                     headers={"If-None-Match": r.headers["etag"]}).status == 304
    other = B.request("GET", f"/v1/jobs/{job}/outputs/truth.nrrd/slices/4.png?lo=0&hi=0.5")
    assert other.status == 200 and other.headers["etag"] != r.headers["etag"]
    assert B.request("GET", f"/v1/jobs/{job}/outputs/truth.nrrd/slices/8.png").status == 404
    assert B.request("GET", f"/v1/jobs/{job}/outputs/truth.nrrd/slices/4.png?lo=1&hi=0").status == 400
    assert B.request("GET", f"/v1/jobs/{job}/outputs/report.json/slices").status == 422
    assert B.request("GET", f"/v1/blobs/{B_BLOB['id']}/thumbnail").status == 422   # not a DICOM
    # another tenant's job, output and blob are unknown to A, by key and by cookie
    cookie, _, _ = sign_in(A_KEY)
    for path in (f"/v1/jobs/{job}/outputs/truth.nrrd/slices", f"/v1/jobs/{job}/outputs/truth.nrrd/slices/4.png",
                 f"/v1/blobs/{B_BLOB['id']}/thumbnail", f"/v1/jobs/{job}"):
        assert A.request("GET", path).status == 404, path
        assert by_cookie(cookie, "GET", path).status == 404, path


def untrusted(r, attachment):
    """r carries user bytes: nosniff, a sandboxing CSP that loads nothing, an attachment or not."""
    assert r.headers.get("x-content-type-options") == "nosniff", r.headers
    csp = r.headers.get("content-security-policy", "")
    assert "sandbox" in csp and "default-src 'none'" in csp, r.headers
    disp = r.headers.get("content-disposition", "")
    assert disp.startswith("attachment") == attachment, r.headers


def test_user_bytes_are_never_a_page():
    """Issue 28 #5: an uploaded text/html blob opened with the portal's cookie was a page of the
    portal's origin (its script could read /v1/session's CSRF token)."""
    cookie, csrf, _ = sign_in(A_KEY)
    page = b"<script>fetch('/v1/session').then(r => r.text()).then(alert)</script>"
    up = by_cookie(cookie, "POST", "/v1/blobs", csrf, body=page, headers={"Content-Type": "text/html"})
    assert up.status == 201, up
    blob = up.json()["id"]
    r = by_cookie(cookie, "GET", f"/v1/blobs/{blob}")
    assert r.status == 200 and r.body == page and r.headers["content-type"] == "text/html", r
    untrusted(r, attachment=True)
    part = by_cookie(cookie, "GET", f"/v1/blobs/{blob}", headers={"Range": "bytes=0-7"})
    assert part.status == 206 and part.body == page[:8], part
    untrusted(part, attachment=True)
    job = B_JOB["id"]
    out = B.request("GET", f"/v1/jobs/{job}/outputs/report.json")
    assert out.status == 200 and out.headers["content-disposition"] == 'attachment; filename="report.json"', out
    untrusted(out, attachment=True)
    log = B.request("GET", f"/v1/jobs/{job}/log")
    assert log.status == 200 and log.headers["content-type"].startswith("text/plain"), log
    untrusted(log, attachment=False)   # read inline as text, never run
    put = SRV.client(key="").request("PUT", "/rest/path/vip/Home/page.html", body=page,
                                     headers={"apikey": A_KEY, "Content-Type": "text/html"})
    assert put.status == 201, put
    got = SRV.client(key="").request("GET", "/rest/path/vip/Home/page.html?action=content", headers={"apikey": A_KEY})
    assert got.status == 200 and got.body == page, got
    untrusted(got, attachment=True)
    # what the portal shows in <img> is the server's own PNG, unchanged: inline, an image
    png = B.request("GET", f"/v1/jobs/{job}/outputs/truth.nrrd/slices/4.png")
    assert png.status == 200 and png.headers["content-type"] == "image/png", png
    assert "content-disposition" not in png.headers, png.headers


def read_events(cookie, until_id, timeout=20):
    """The /v1/events stream of a cookie, read until an event names until_id; the job ids seen."""
    conn = SRV.client(key="").connection(timeout)
    try:
        conn.request("GET", "/v1/events?since=2000-01-01T00:00:00Z", headers={"Cookie": cookie})
        r = conn.getresponse()
        assert r.status == 200 and r.getheader("Content-Type").startswith("text/event-stream"), r.status
        seen = set()
        while until_id not in seen:
            line = r.fp.readline()
            if not line:
                break
            m = re.match(rb'data: .*"id": ?"([0-9a-f-]{36})"', line)
            if m:
                seen.add(m.group(1).decode())
        return seen
    finally:
        conn.close()


def test_events_are_the_tenants_own():
    cookie, csrf, _ = sign_in(A_KEY)
    job = by_cookie(cookie, "POST", "/v1/jobs", csrf=csrf, json={"kind": "noop", "params": {}}).json()
    seen = read_events(cookie, job["id"])
    assert job["id"] in seen and B_JOB["id"] not in seen, seen


def parked():
    m = re.search(r"^gpujobd_http_streams_parked (\d+)$", ADMIN.request("GET", "/metrics").body.decode(), re.M)
    assert m
    return int(m.group(1))


def test_events_streams_hold_no_thread():
    """More open /v1/events streams than event-loop threads: they wait parked, and the API answers."""
    cookie, _, _ = sign_in(A_KEY)
    n = 3 * HTTP_THREADS
    conns = []
    try:
        for _ in range(n):
            conn = SRV.client(key="").connection(20)
            conn.request("GET", "/v1/events", headers={"Cookie": cookie})
            assert conn.getresponse().status == 200
            conns.append(conn)
        deadline = time.time() + 20
        while parked() < n and time.time() < deadline:
            time.sleep(0.2)
        assert parked() >= n, parked()
        assert A.request("GET", "/v1/jobs", timeout=20).status == 200
    finally:
        for conn in conns:
            conn.close()


def test_cors():
    anon = SRV.client(key="")
    pre = anon.request("OPTIONS", "/v1/jobs", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
                                                      "Access-Control-Request-Headers": "content-type, x-csrf-token"})
    assert pre.status == 204, pre
    assert pre.headers["access-control-allow-origin"] == ORIGIN, pre.headers
    assert pre.headers["access-control-allow-credentials"] == "true", pre.headers
    assert "POST" in pre.headers["access-control-allow-methods"], pre.headers
    r = A.request("GET", "/v1/jobs", headers={"Origin": ORIGIN})
    assert r.headers["access-control-allow-origin"] == ORIGIN and "Origin" in r.headers.get("vary", ""), r.headers
    for other in ("https://evil.example.org", "null", ORIGIN + ".evil.example"):
        r = A.request("GET", "/v1/jobs", headers={"Origin": other})
        assert "access-control-allow-origin" not in r.headers, (other, r.headers)
        pre = anon.request("OPTIONS", "/v1/jobs", headers={"Origin": other, "Access-Control-Request-Method": "POST"})
        assert "access-control-allow-origin" not in pre.headers, (other, pre.headers)


if __name__ == "__main__":
    try:
        setup()
        run_tests([test_page_and_assets, test_sign_in_refusals, test_session_cookie_and_csrf,
                   test_revoked_key_ends_its_sessions, test_slices_and_thumbnails, test_user_bytes_are_never_a_page,
                   test_events_are_the_tenants_own,
                   test_events_streams_hold_no_thread, test_cors])
    finally:
        if H:
            H.close()
