"""CARMIN archives inflate within bounds (issue 28, finding 3): a 64 KB zip of 64 MiB of zeros
is refused as it inflates, past --archive-max-ratio (100) times its bytes, where before only
--max-body-bytes (16G) stopped it; --archive-max-bytes bounds the files in all however well
they compress; what inflates is counted against the disk's free space above
--upload-disk-reserve (507), not only the spooled body. Each refusal is CARMIN's error with
the figures, and nothing of the archive stays (no directory, no path, no blob). An archive
within the bounds goes in.

The extraction runs off the HTTP threads, the request parked meanwhile (a lock on the blobs
table holds an extraction as long as a test needs): while an archive extracts on a server of
one HTTP thread, another tenant's GET /v1/jobs and /healthz answer within a second; more
parallel archives than HTTP threads are all served (two extract, four wait, one more is 503
with Retry-After); a server stopped during an extraction answers 503 and leaves nothing of it
(no path, no blob, no large object)."""
import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402
import test_carmin as tc  # noqa: E402  (call, error, zip_of, upload_archive, listing, assert_nothing_made)

MAX_BYTES = 8 << 20


def setup():
    tc.H = Harness()
    tc.SRV = tc.H.start_server(["--role", "api", "--archive-max-bytes", str(MAX_BYTES)])
    admin = tc.SRV.client()
    tc.A = admin.json("POST", "/v1/api-keys", {"tenant": "carmin-a", "label": "a"}, expect=201)["key"]


def refused(data, status, code, *words):
    before, blobs = tc.listing(tc.A, "/vip/Home"), tc.tenant_blobs("carmin-a")
    body = tc.error(tc.upload_archive(tc.A, "/vip/Home/refused", data), status, code)
    for w in words + ("nothing was stored",):
        assert w in body["errorMessage"], (w, body)
    tc.assert_nothing_made(before, blobs, words[0])
    return body["errorMessage"]


def test_ratio_bomb_refused():
    bomb = tc.zip_of([("zeros", bytes(64 << 20), zipfile.ZIP_DEFLATED)])
    assert len(bomb) < 100_000, len(bomb)
    message = refused(bomb, 413, 41301, "--archive-max-ratio", "100 times the zip's %d bytes" % len(bomb),
                      "over %d bytes" % (100 * len(bomb)))
    print(message)
    # the same zeros beside incompressible bytes: well within 100 times the zip
    fits = tc.zip_of([("noise", os.urandom(200_000), zipfile.ZIP_DEFLATED),
                      ("zeros", bytes(2 << 20), zipfile.ZIP_DEFLATED)])
    made = tc.check(tc.ok_json(tc.upload_archive(tc.A, "/vip/Home/fits", fits), 201), "Path")
    assert made["isDirectory"], made
    assert tc.call("DELETE", "/path/vip/Home/fits", key=tc.A).status == 204


def test_max_bytes_refused():
    # 10 MiB of files from a 200 KB zip: within the ratio, past --archive-max-bytes
    data = tc.zip_of([("noise", os.urandom(200_000), zipfile.ZIP_DEFLATED),
                      ("zeros", bytes(10 << 20), zipfile.ZIP_DEFLATED)])
    refused(data, 413, 41301, "--archive-max-bytes", "over %d bytes" % MAX_BYTES)


def test_disk_reserve_counts_what_inflates():
    st = os.statvfs(tc.SRV.data_dir)
    avail = st.f_bavail * st.f_frsize
    # the body (under 1 MB) leaves the reserve free; its 256 MiB of files would not. The
    # margin leaves room for what other processes write meanwhile (a shared machine).
    reserve = avail - (160 << 20)
    srv = tc.H.start_server(["--role", "api", "--archive-max-ratio", "1000000",
                             "--upload-disk-reserve", str(reserve)])
    saved, tc.SRV = tc.SRV, srv   # same database, same tenant
    try:
        data = tc.zip_of([("zeros", bytes(256 << 20), zipfile.ZIP_DEFLATED)])
        message = refused(data, 507, 50701, "--upload-disk-reserve")
        print(message)
        platform = tc.ok_json(tc.call("GET", "/platform"))
        assert 50701 in [e["errorCode"] for e in platform["APIErrorCodesAndMessages"]], platform
    finally:
        tc.SRV = saved


SERVER_ARGS = ["--role", "api", "--archive-max-ratio", "1000000"]   # small zips of zeros: within the bounds
LOCK_HOLDER = "archive-test-lock"


def small_zip(entries=1):
    return tc.zip_of([("zeros%d" % i, bytes(1 << 20), zipfile.ZIP_DEFLATED) for i in range(entries)])


def put_archive(srv, path, data):
    """tc.upload_archive to srv, on a connection of its own (no shared globals: called from threads)."""
    body = {"base64Content": base64.b64encode(data).decode(), "type": "Archive"}
    return srv.client(key="").request("PUT", "/rest/path" + path, body=json.dumps(body).encode(), timeout=120,
                                      headers={"apikey": tc.A, "Content-Type": "application/carmin+json"})


class Upload(threading.Thread):
    """An archive upload in the background: its response (or the error), and whether it has ended."""
    def __init__(self, srv, path, data):
        super().__init__(daemon=True)
        self.srv, self.path, self.data = srv, path, data
        self.response = self.error = None
        self.ended = False
        self.start()

    def run(self):
        try:
            self.response = put_archive(self.srv, self.path, self.data)
        except Exception as e:  # noqa: BLE001  (a server stopped: the connection may just close)
            self.error = e
        finally:
            self.ended = True


def wait_for(what, cond, timeout=30):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "not within %ds: %s" % (timeout, what)
        time.sleep(0.05)


class BlobsLocked:
    """A psql session holding the blobs table in SHARE mode (reads and foreign keys go on, inserts
    wait): an extraction stops at its first file's blob row until release(), however fast the
    machine."""
    def __init__(self):
        env = dict(os.environ, PGAPPNAME=LOCK_HOLDER)
        self.proc = subprocess.Popen(["psql", "-h", tc.H.sockdir, "-U", tc.H.db_user, "-d", "gpujobd", "-Atqc",
                                      "BEGIN; LOCK TABLE blobs IN SHARE MODE; SELECT pg_sleep(120); COMMIT"],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("the lock on blobs", lambda: self.count("l.granted AND l.mode = 'ShareLock'") == 1)

    def count(self, where):
        return int(tc.H.scalar("SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                               "WHERE c.relname = 'blobs' AND " + where))

    def waiting(self):
        """Extractions stopped at a lock: the blobs table's, or behind another extraction of the
        same tenant (which holds the tenant's storage count until its commit: storage_quota.h)."""
        return int(tc.H.scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                               "AND application_name <> '%s'" % LOCK_HOLDER))

    def release(self):
        tc.H.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '%s'"
                 % LOCK_HOLDER)
        self.proc.wait(30)


def large_objects():
    return int(tc.H.scalar("SELECT count(*) FROM pg_largeobject_metadata"))


def test_other_tenants_answered_while_extracting():
    srv = tc.H.start_server(SERVER_ARGS + ["--http-threads", "1"])
    other = tc.SRV.client().json("POST", "/v1/api-keys", {"tenant": "carmin-other", "label": "b"}, expect=201)["key"]
    lock = BlobsLocked()
    try:
        up = Upload(srv, "/vip/Home/slow", small_zip())
        wait_for("the extraction at the lock", lambda: lock.waiting() == 1)
        for path, key in (("/healthz", ""), ("/v1/jobs", other), ("/healthz", ""), ("/v1/jobs", other)):
            t0 = time.monotonic()
            r = srv.client(key=key).request("GET", path, timeout=30)
            took = time.monotonic() - t0
            assert r.status == 200, (path, r.status, r.body[:200])
            assert took < 1.0, (path, "took %.2fs while an archive extracted" % took)
        assert not up.ended, (up.response, up.error)
        lock.release()
        up.join(60)
        assert up.response is not None and up.response.status == 201, (up.error, up.response)
        assert tc.call("DELETE", "/path/vip/Home/slow", key=tc.A).status == 204
    finally:
        lock.release()
        assert srv.terminate() == 0


def test_more_archives_than_http_threads():
    """Two extract (held at the lock), four wait in the queue, the seventh is refused with
    Retry-After; the server's two HTTP threads answer meanwhile, and all six are stored."""
    srv = tc.H.start_server(SERVER_ARGS + ["--http-threads", "2"])
    lock = BlobsLocked()
    try:
        running = [Upload(srv, "/vip/Home/p%d" % i, small_zip()) for i in range(2)]
        wait_for("two extractions at the lock", lambda: lock.waiting() == 2)
        more = [Upload(srv, "/vip/Home/q%d" % i, small_zip()) for i in range(5)]
        wait_for("one archive refused", lambda: any(u.ended for u in more))
        assert srv.client(key="").request("GET", "/healthz", timeout=5).status == 200
        time.sleep(0.3)
        refused = [u for u in more if u.ended]
        assert len(refused) == 1, [(u.path, u.response, u.error) for u in refused]
        r = refused[0].response
        body = tc.error(r, 503, 50301)
        assert r.headers.get("retry-after") == "2", r.headers
        assert "nothing was stored" in body["errorMessage"], body
        assert lock.waiting() == 2, "an extraction ran past the two threads"
        lock.release()
        for u in running + more:
            u.join(60)
            if u is refused[0]:
                assert not tc.ok_json(tc.call("GET", "/path%s?action=exists" % u.path, key=tc.A))["exists"]
                continue
            assert u.response is not None and u.response.status == 201, (u.path, u.error, u.response)
            assert tc.call("DELETE", "/path" + u.path, key=tc.A).status == 204
    finally:
        lock.release()
        assert srv.terminate() == 0


def test_stop_during_extraction_keeps_nothing():
    """SIGTERM while an extraction is held at its first file: the server stops, the extraction
    stops at its next file and rolls back (no path, no blob, no large object)."""
    srv = tc.H.start_server(SERVER_ARGS)
    before, blobs, objects = tc.listing(tc.A, "/vip/Home"), tc.tenant_blobs("carmin-a"), large_objects()
    lock = BlobsLocked()
    try:
        up = Upload(srv, "/vip/Home/refused", small_zip(entries=3))
        wait_for("the extraction at the lock", lambda: lock.waiting() == 1)
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)   # the parked upload resumed and its task cancelled
        lock.release()
        assert srv.terminate(timeout=30) == 0, srv.log_text()[-2000:]
        up.join(30)
        print("stopped during the extraction:", up.response or up.error)
        if up.response is not None:   # answered before the connection closed
            body = tc.error(up.response, 503, 50301)
            assert "stopping" in body["errorMessage"] and "nothing was stored" in body["errorMessage"], body
    finally:
        lock.release()
        srv.terminate()
    tc.assert_nothing_made(before, blobs, "stopped")
    assert large_objects() == objects, "a large object of the stopped extraction stayed"


def test_client_gone_during_extraction_keeps_nothing():
    """The client closes its connection while its archive extracts: the parked upload is let go
    (the park notices the close), its extraction cancelled and rolled back, its slot freed."""
    srv = tc.H.start_server(SERVER_ARGS)
    before, blobs, objects = tc.listing(tc.A, "/vip/Home"), tc.tenant_blobs("carmin-a"), large_objects()
    lock = BlobsLocked()
    try:
        body = json.dumps({"base64Content": base64.b64encode(small_zip(entries=3)).decode(), "type": "Archive"})
        conn = srv.client(key="").connection(timeout=30)
        conn.request("PUT", "/rest/path/vip/Home/gone", body=body.encode(),
                     headers={"apikey": tc.A, "Content-Type": "application/carmin+json"})
        wait_for("the extraction at the lock", lambda: lock.waiting() == 1)
        conn.close()                                   # the client goes away, unanswered
        time.sleep(2.5)                                # the park looks at its sockets each second
        lock.release()
        wait_for("the extraction let go", lambda: "let go" in srv.log_text() or lock.waiting() == 0, timeout=30)
        time.sleep(1.0)
        assert srv.client(key="").request("GET", "/healthz", timeout=5).status == 200
    finally:
        lock.release()
        assert srv.terminate() == 0
    tc.assert_nothing_made(before, blobs, "abandoned")
    assert large_objects() == objects, "a large object of the abandoned extraction stayed"


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_ratio_bomb_refused, test_max_bytes_refused, test_disk_reserve_counts_what_inflates,
                   test_other_tenants_answered_while_extracting, test_more_archives_than_http_threads,
                   test_client_gone_during_extraction_keeps_nothing,
                   test_stop_during_extraction_keeps_nothing])
    finally:
        tc.H.close()
