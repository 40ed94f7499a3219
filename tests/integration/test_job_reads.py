"""Status reads answered from a replica's memory (issue 25, service/jobs/job_cache.h) across
two replicas on one PostgreSQL: A runs the jobs, B only answers reads and keeps its answers
for a minute (--job-cache-ms 60000), so that only a NOTIFY can make it read a job again
within the bound tested here. What a reader of B gets: a change made through A (a cancel,
a finish, a deletion), or straight in the database (a rename), within NOTIFY_BOUND_S; the
same after B's LISTEN connection was cut while the change was made (it missed the
notification); another tenant's read of a job B holds answers 404; and B's reads of an
unchanged job are answered from memory (its cache's hit counter grows)."""
import hashlib
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402

# NOTIFY arrives in milliseconds; the bound leaves room for a loaded CI machine and a
# LISTEN reconnect (100 ms backoff). The cache's own TTL (60 s here) is far beyond it.
NOTIFY_BOUND_S = 5

H = A = B = None
KEY = None


def setup():
    global H, A, B, KEY
    H = Harness()
    KEY = "gjk_" + hashlib.sha256(b"job reads").digest().hex()[:43]
    path = os.path.join(H.tmp, "admin.key")
    with open(path, "w") as f:
        f.write(KEY + "\n")
    os.chmod(path, 0o400)
    env = {"GPUJOBD_ADMIN_KEY_FILE": path}
    A = H.start_server(["--cpu-workers", "1"], env=env)
    B = H.start_server(["--role", "api", "--job-cache-ms", "60000"], env=env)


def on(srv):
    return srv.client(key=KEY)


def cache_hits(srv):
    text = on(srv).request("GET", "/metrics").body.decode()
    return int(re.search(r"^gpujobd_job_cache_hits_total (\d+)$", text, re.M).group(1))


def seen_within(srv, job_id, check, bound=NOTIFY_BOUND_S):
    """Reads job_id on srv until check(status, body) holds; the last answer otherwise."""
    deadline = time.time() + bound
    while True:
        r = on(srv).request("GET", f"/v1/jobs/{job_id}")
        body = r.json() if r.status == 200 else None
        if check(r.status, body):
            return r.status, body
        if time.time() > deadline:
            raise AssertionError(f"not seen on {srv.port} within {bound} s: {r.status} {body}")
        time.sleep(0.05)


def running_job(seconds=60):
    j = on(A).submit("noop", {"sleep_ms": seconds * 1000, "write_result": False})
    on(A).wait_job(j["id"], states=("running",))
    return j["id"]


def stop(jid):
    """A's one worker slot free again for the next test."""
    on(A).request("POST", f"/v1/jobs/{jid}/cancel")
    on(A).wait_job(jid)


def test_unchanged_reads_come_from_memory():
    j = on(A).submit("noop", {"sleep_ms": 0, "write_result": False})
    on(A).wait_job(j["id"])
    # B answers from memory once its LISTEN connection is up (it connects as B starts), the
    # same bytes as its first read, from the database.
    hits = cache_hits(B)
    bodies = set()
    deadline = time.time() + NOTIFY_BOUND_S
    while cache_hits(B) < hits + 5:
        assert time.time() < deadline, (hits, cache_hits(B))
        r = on(B).request("GET", f"/v1/jobs/{j['id']}")
        assert r.status == 200 and r.json()["state"] == "succeeded", r
        assert r.headers.get("content-type") == "application/json", r.headers
        bodies.add(r.body)
    assert len(bodies) == 1, bodies


def test_cancel_on_a_seen_on_b():
    jid = running_job()
    try:
        assert on(B).json("GET", f"/v1/jobs/{jid}", expect=200)["state"] == "running"   # kept by B
        on(B).json("GET", f"/v1/jobs/{jid}", expect=200)
        r = on(A).request("POST", f"/v1/jobs/{jid}/cancel")
        assert r.status in (200, 202), r
        _, job = seen_within(B, jid, lambda s, b: b and b["state"] == "canceled")
        assert job["finished_at"]
    finally:
        stop(jid)


def test_finish_on_a_seen_on_b():
    j = on(A).submit("noop", {"sleep_ms": 1500, "write_result": False})
    first = on(B).json("GET", f"/v1/jobs/{j['id']}", expect=200)
    assert first["state"] in ("queued", "running"), first
    on(A).wait_job(j["id"])
    _, job = seen_within(B, j["id"], lambda s, b: b and b["state"] == "succeeded")
    assert job["progress"] == 1


def test_rename_in_database_seen_on_b():
    """A column the state trigger does not watch (name): migration 0019 notifies it."""
    j = on(A).submit("noop", {"sleep_ms": 0, "write_result": False}, name="before")
    on(A).wait_job(j["id"])
    assert on(B).json("GET", f"/v1/jobs/{j['id']}", expect=200)["name"] == "before"
    H.sql(f"UPDATE jobs SET name = 'after' WHERE id = '{j['id']}'")
    seen_within(B, j["id"], lambda s, b: b and b.get("name") == "after")


def test_delete_on_a_seen_on_b():
    j = on(A).submit("noop", {"sleep_ms": 0, "write_result": False})
    on(A).wait_job(j["id"])
    assert on(B).json("GET", f"/v1/jobs/{j['id']}", expect=200)["state"] == "succeeded"
    assert on(A).request("DELETE", f"/v1/jobs/{j['id']}").status == 204
    seen_within(B, j["id"], lambda s, b: s == 404)


def test_change_missed_while_listen_was_cut():
    """B's LISTEN connection is gone while the job changes: B missed that notification, and
    answers the change once it listens again (it emptied its cache), not a minute later."""
    j = on(A).submit("noop", {"sleep_ms": 0, "write_result": False}, name="kept")
    on(A).wait_job(j["id"])
    assert on(B).json("GET", f"/v1/jobs/{j['id']}", expect=200)["name"] == "kept"
    # Every LISTEN connection ended (and waited for) before the change commits.
    H.sql("SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
          "WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid(); "
          f"UPDATE jobs SET name = 'changed unheard' WHERE id = '{j['id']}'")
    seen_within(B, j["id"], lambda s, b: b and b.get("name") == "changed unheard")


def test_other_tenant_never_gets_a_kept_answer():
    other = on(A).json("POST", "/v1/api-keys", {"tenant": "job-reads-other"}, expect=201)["key"]
    j = on(A).submit("noop", {"sleep_ms": 0, "write_result": False})
    on(A).wait_job(j["id"])
    for _ in range(2):   # kept by B for the admin's tenant
        on(B).json("GET", f"/v1/jobs/{j['id']}", expect=200)
    assert B.client(key=other).request("GET", f"/v1/jobs/{j['id']}").status == 404


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_unchanged_reads_come_from_memory, test_cancel_on_a_seen_on_b, test_finish_on_a_seen_on_b,
                   test_rename_in_database_seen_on_b, test_delete_on_a_seen_on_b,
                   test_change_missed_while_listen_was_cut, test_other_tenant_never_gets_a_kept_answer])
    finally:
        H.close()
