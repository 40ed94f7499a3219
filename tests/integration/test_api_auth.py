"""Authentication and tenant isolation over real HTTPS: missing, malformed,
unknown and revoked keys; admin-only routes; every id route answers another
tenant exactly as it answers an unknown id."""
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402

H = None
SRV = None
A = B = ADMIN = None
A_JOB = A_BLOB = None


def setup():
    global H, SRV, A, B, ADMIN, A_JOB, A_BLOB
    H = Harness()
    SRV = H.start_server(["--cpu-workers", "1"])
    ADMIN = SRV.client()
    ka = ADMIN.json("POST", "/v1/api-keys", {"tenant": "tenant-a", "label": "a"}, expect=201)
    kb = ADMIN.json("POST", "/v1/api-keys", {"tenant": "tenant-b"}, expect=201)
    assert ka["role"] == "user" and ka["key"].startswith("gjk_") and ka["tenant"] == "tenant-a"
    A = SRV.client(key=ka["key"])
    B = SRV.client(key=kb["key"])
    A_BLOB = A.upload(b"tenant a data")
    A_JOB = A.submit("noop", {"output_bytes": 10}, inputs={"input": A_BLOB["id"]})
    A.wait_job(A_JOB["id"])


def problem(r, status):
    assert r.status == status, r
    assert r.headers["content-type"] == "application/problem+json", r.headers
    p = r.json()
    assert p["status"] == status and p["title"] and p["type"] and "detail" in p, p
    return p


def test_missing_and_bad_keys():
    for hdr in ({}, {"Authorization": "Bearer"}, {"Authorization": "Basic dXNlcjpwdw=="},
                {"Authorization": "Bearer gjk_notakey"}, {"Authorization": "Bearer " + "x" * 5000}):
        r = SRV.client(key="").request("GET", "/v1/jobs", headers=hdr)
        if r.status == 431 or r.status == 400:      # an over-long header may be refused by the HTTP layer
            continue
        problem(r, 401)
        assert r.headers["www-authenticate"].startswith("Bearer"), r.headers


def test_unauthenticated_routes():
    c = SRV.client(key="")
    assert c.request("GET", "/healthz").status == 200
    assert c.request("GET", "/readyz").status == 200
    # every tenant's job counts: the admin key on the API listener (--metrics-listen: none)
    problem(c.request("GET", "/metrics"), 401)
    for method, path in (("GET", "/v1/kinds"), ("GET", "/v1/gpus"), ("POST", "/v1/blobs"), ("GET", "/v1/jobs"),
                         ("POST", "/v1/jobs"), ("GET", f"/v1/jobs/{A_JOB['id']}"),
                         ("GET", f"/v1/blobs/{A_BLOB['id']}")):
        problem(c.request(method, path, body=b"" if method == "POST" else None), 401)


def test_admin_only():
    problem(A.request("POST", "/v1/api-keys", json={"tenant": "x"}), 403)
    problem(A.request("DELETE", f"/v1/api-keys/{uuid.uuid4()}"), 403)
    problem(A.request("GET", "/metrics"), 403)       # other tenants' job counts
    assert ADMIN.request("GET", "/metrics").status == 200
    problem(ADMIN.request("DELETE", f"/v1/api-keys/{uuid.uuid4()}"), 404)
    problem(ADMIN.request("POST", "/v1/api-keys", json={"tenant": ""}), 422)
    problem(ADMIN.request("POST", "/v1/api-keys", json={"tenant": "t", "role": "root"}), 422)
    problem(ADMIN.request("POST", "/v1/api-keys", json={"tenant": "t", "extra": 1}), 422)
    problem(ADMIN.request("POST", "/v1/api-keys", body=b"{", headers={"Content-Type": "application/json"}), 400)


def test_revoked_key():
    k = ADMIN.json("POST", "/v1/api-keys", {"tenant": "short-lived"}, expect=201)
    c = SRV.client(key=k["key"])
    assert c.request("GET", "/v1/jobs").status == 200
    assert ADMIN.request("DELETE", f"/v1/api-keys/{k['id']}").status == 204
    problem(c.request("GET", "/v1/jobs"), 401)
    problem(ADMIN.request("DELETE", f"/v1/api-keys/{k['id']}"), 404)


def test_tenant_isolation_matrix():
    jid, bid = A_JOB["id"], A_BLOB["id"]
    unknown = str(uuid.uuid4())
    routes = [("GET", "/v1/jobs/{j}"), ("GET", "/v1/jobs/{j}?wait=1"), ("POST", "/v1/jobs/{j}/cancel"),
              ("GET", "/v1/jobs/{j}/outputs"), ("GET", "/v1/jobs/{j}/outputs/data.bin"),
              ("GET", "/v1/jobs/{j}/events"), ("GET", "/v1/blobs/{b}"), ("DELETE", "/v1/blobs/{b}"),
              ("DELETE", "/v1/jobs/{j}")]
    for method, tmpl in routes:
        other = B.request(method, tmpl.format(j=jid, b=bid))
        missing = B.request(method, tmpl.format(j=unknown, b=unknown))
        p1, p2 = problem(other, 404), problem(missing, 404)
        for k in ("type", "title", "status", "detail"):
            assert p1[k] == p2[k], (method, tmpl, p1, p2)
        assert other.headers["content-type"] == missing.headers["content-type"]
    # owner still sees everything: nothing was canceled or deleted by B
    assert A.request("GET", f"/v1/jobs/{jid}").status == 200
    assert A.request("GET", f"/v1/blobs/{bid}").body == b"tenant a data"
    assert A.request("GET", f"/v1/jobs/{jid}/outputs/data.bin").status == 200
    # B cannot use A's blob as an input, and does not see A's jobs in lists
    r = B.request("POST", "/v1/jobs", json={"kind": "noop", "inputs": {"input": bid}})
    assert problem(r, 422)["field"] == "inputs.input"
    assert B.json("GET", "/v1/jobs", expect=200)["jobs"] == []
    assert [j["id"] for j in A.json("GET", "/v1/jobs", expect=200)["jobs"]] == [jid]
    # admins are a tenant like any other for jobs and blobs
    problem(ADMIN.request("GET", f"/v1/jobs/{jid}"), 404)


def test_rate_limit_per_key():
    srv = H.start_server(["--role", "api", "--rate-limit", "2"], data_dir=SRV.data_dir + "-rl")
    k = ADMIN.json("POST", "/v1/api-keys", {"tenant": "busy"}, expect=201)["key"]
    c = srv.client(key=k)
    statuses = [c.request("GET", "/v1/kinds").status for _ in range(30)]
    assert 429 in statuses and statuses[0] == 200, statuses
    r = c.request("GET", "/v1/kinds")
    if r.status == 429:
        assert r.headers["retry-after"] and r.json()["status"] == 429
    # another key has its own budget
    assert srv.client(key=A.key).request("GET", "/v1/kinds").status == 200
    time.sleep(1.5)
    assert c.request("GET", "/v1/kinds").status == 200
    srv.terminate()


def teardown():
    H.close()


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_missing_and_bad_keys, test_unauthenticated_routes, test_admin_only, test_revoked_key,
                   test_tenant_isolation_matrix, test_rate_limit_per_key])
    finally:
        teardown()
