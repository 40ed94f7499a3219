"""Per-tenant storage quotas (issue 28): --tenant-storage-quota, or a tenant's own quota set
through the admin API, bounds what a tenant stores (blobs, multipart inputs, job outputs,
CARMIN files and archives). What would pass it is refused with 507 and the figures (the quota,
the bytes in use, the bytes asked), and nothing of it stays: no blob row, no large object.
Two uploads at once that together pass it: exactly one is refused. Deleting gives the bytes
back. A tenant sees its own use (GET /v1/usage), never another's; /metrics shows each."""
import base64
import io
import json
import os
import sys
import subprocess
import threading
import time
import zipfile

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402

QUOTA = 1_000_000
H = SRV = ADMIN = None
A = B = None            # clients of two tenants
A_ID = B_ID = None


def setup():
    global H, SRV, ADMIN, A, B, A_ID, B_ID
    H = Harness()
    SRV = H.start_server(["--cpu-workers", "1", "--tenant-storage-quota", str(QUOTA)])
    ADMIN = SRV.client()
    a = ADMIN.json("POST", "/v1/api-keys", {"tenant": "quota-a"}, expect=201)
    b = ADMIN.json("POST", "/v1/api-keys", {"tenant": "quota-b"}, expect=201)
    A, B = SRV.client(key=a["key"]), SRV.client(key=b["key"])
    A_ID, B_ID = a["tenant_id"], b["tenant_id"]


def used(client):
    return client.json("GET", "/v1/usage", expect=200)["storage"]["used_bytes"]


def stored():
    """What the database holds: blob rows and large objects, and the tenants' counts."""
    return (H.scalar("SELECT count(*) FROM blobs"), H.scalar("SELECT count(*) FROM pg_largeobject_metadata"),
            H.sql("SELECT tenant_id, used_bytes FROM tenant_storage ORDER BY 1"))


def counted(tenant_id):
    return int(H.scalar("SELECT coalesce(sum(size), 0) FROM blobs WHERE tenant_id = '%s'" % tenant_id))


def assert_refused(r, used_bytes, asked, quota=QUOTA, own=False):
    which = "the tenant's storage quota" if own else "--tenant-storage-quota"
    assert r.status == 507, r
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    p = r.json()
    assert p["status"] == 507 and p["title"] == "Insufficient Storage", p
    assert p["type"] == "urn:gpujobd:problem:insufficient-storage", p
    assert (p["quota"], p["quota_bytes"], p["used_bytes"], p["requested_bytes"]) == (
        "tenant" if own else "--tenant-storage-quota", quota, used_bytes, asked), p
    for words in (which, "%d bytes" % quota, "%d bytes in use" % used_bytes, "%d more asked" % asked,
                  "nothing was stored"):
        assert words in p["detail"], (words, p)
    return p


def test_upload_within_and_over():
    assert used(A) == 0
    first = A.upload(os.urandom(600_000))
    assert used(A) == 600_000 == counted(A_ID)
    before = stored()
    r = A.request("POST", "/v1/blobs", body=os.urandom(500_000))
    print(assert_refused(r, 600_000, 500_000)["detail"])
    assert stored() == before            # no row, no large object, the count unchanged
    assert used(A) == 600_000
    # exactly up to the quota is within it
    last = A.upload(os.urandom(QUOTA - 600_000))
    assert used(A) == QUOTA
    assert_refused(A.request("POST", "/v1/blobs", body=b"x"), QUOTA, 1)
    # deleting gives the bytes back
    for blob in (first, last):
        assert A.request("DELETE", "/v1/blobs/" + blob["id"]).status == 204
    assert used(A) == 0 == counted(A_ID)


def test_declared_length_over_quota_refused_before_the_body():
    A.upload(os.urandom(100_000))
    conn = A.connection(timeout=10)    # a bound: the answer comes without the body
    try:
        conn.putrequest("POST", "/v1/blobs")
        for k, v in (("Authorization", "Bearer " + A.key), ("Content-Length", "2000000"),
                     ("Content-Type", "application/octet-stream"), ("Expect", "100-continue")):
            conn.putheader(k, v)
        conn.endheaders()
        resp = conn.getresponse()
        r = type("R", (), {"status": resp.status, "headers": {k.lower(): v for k, v in resp.getheaders()},
                           "body": resp.read()})()
        r.json = lambda: json.loads(r.body)
    finally:
        conn.close()
    assert_refused(r, 100_000, 2_000_000)


def hold_tenant_lock(tenant_id):
    """A psql session holding the tenant's tenant_storage row lock until its stdin closes."""
    p = subprocess.Popen(["psql", "-h", H.sockdir, "-U", H.db_user, "-d", "gpujobd", "-AtqX", "-v", "ON_ERROR_STOP=1"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    p.stdin.write("BEGIN;\nSELECT 'locked' FROM tenant_storage WHERE tenant_id = '%s' FOR UPDATE;\n" % tenant_id)
    p.stdin.flush()
    assert p.stdout.readline().strip() == "locked"
    return p


def lock_waiters():
    """Sessions waiting for a tenant's count (the quota check's upsert)."""
    return int(H.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = 'gpujobd'"
                        " AND wait_event_type = 'Lock' AND query LIKE '%tenant_storage%'"))


def wait_for_lock_waiters(n, done=lambda: False):
    deadline = time.time() + 60
    while lock_waiters() < n and not done():
        assert time.time() < deadline, "nothing waited for the tenant's lock"
        time.sleep(0.05)


def release(holder):
    holder.stdin.write("COMMIT;\n")
    holder.stdin.close()
    holder.wait(30)


def test_concurrent_uploads_one_refused():
    # Both uploads reach their check while another session holds the tenant's count: each
    # waits for it, then they pass one after the other; without the lock both would see
    # 100000 bytes in use and both would be stored.
    results = []
    holder = hold_tenant_lock(A_ID)

    def upload():
        results.append(SRV.client(key=A.key).request("POST", "/v1/blobs", body=os.urandom(600_000)))

    threads = [threading.Thread(target=upload) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        # Both wait, unless the server's HTTP thread of one is the other's too (then the
        # second arrives once the first is done): at least one does, and the other has a while
        # to come. Either way exactly one may be stored.
        wait_for_lock_waiters(1, done=lambda: bool(results))
        settle = time.time() + 5
        while lock_waiters() < 2 and not results and time.time() < settle:
            time.sleep(0.05)
    finally:
        release(holder)
        for t in threads:
            t.join()
    statuses = sorted(r.status for r in results)
    assert statuses == [201, 507], [(r.status, r.body[:300]) for r in results]
    refused = next(r for r in results if r.status == 507)
    assert_refused(refused, 700_000, 600_000)
    assert used(A) == 700_000 == counted(A_ID)
    kept = next(r for r in results if r.status == 201).json()
    assert A.request("DELETE", "/v1/blobs/" + kept["id"]).status == 204
    assert used(A) == 100_000


def test_job_outputs_over_quota_fail_the_job():
    A.upload(os.urandom(200_000))                 # with the 100000 of above: 300000
    before = stored()
    job = A.submit("noop", {"output_bytes": 800_000})
    done = A.wait_job(job["id"])
    assert done["state"] == "failed", done
    message = done["error"]["message"]
    assert "outputs were not stored" in message and "--tenant-storage-quota" in message, done
    assert "%d bytes" % QUOTA in message and "300000 bytes in use" in message, done
    assert H.scalar("SELECT count(*) FROM job_outputs WHERE job_id = '%s'" % job["id"]) == "0"
    assert stored() == before
    assert A.json("GET", "/v1/jobs/%s/outputs" % job["id"], expect=200)["outputs"] == []
    # the same at the commit: the quota is lowered while the job's outputs wait for the
    # tenant's count (after the look before writing them found room)
    holder = hold_tenant_lock(A_ID)
    try:
        job = A.submit("noop", {"output_bytes": 500_000})
        wait_for_lock_waiters(1)
        ADMIN.json("PUT", "/v1/tenants/%s/storage-quota" % A_ID, {"quota_bytes": 400_000}, expect=200)
    finally:
        release(holder)
    done = A.wait_job(job["id"])
    assert done["state"] == "failed", done
    assert "the tenant's storage quota of 400000 bytes" in done["error"]["message"], done
    assert stored() == before
    ADMIN.json("PUT", "/v1/tenants/%s/storage-quota" % A_ID, {"quota_bytes": None}, expect=200)
    # within the quota the outputs are stored, counted, and given back with the job
    job = A.submit("noop", {"output_bytes": 500_000})
    done = A.wait_job(job["id"])
    assert done["state"] == "succeeded", done
    assert used(A) > 800_000 and used(A) == counted(A_ID)
    assert A.request("DELETE", "/v1/jobs/" + job["id"]).status == 204
    assert used(A) == 300_000 == counted(A_ID)


def test_multipart_submit_over_quota():
    boundary = "quotaboundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"job\"\r\nContent-Type: application/json\r\n\r\n"
            + json.dumps({"kind": "noop"}) + f"\r\n--{boundary}\r\nContent-Disposition: form-data; "
            "name=\"input.data\"; filename=\"d.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
    body += os.urandom(800_000) + f"\r\n--{boundary}--\r\n".encode()
    before, jobs = stored(), H.scalar("SELECT count(*) FROM jobs")
    r = A.request("POST", "/v1/jobs", body=body, headers={"Content-Type": "multipart/form-data; boundary=" + boundary})
    assert_refused(r, used(A), 800_000)
    assert stored() == before and H.scalar("SELECT count(*) FROM jobs") == jobs


def test_multipart_submit_referencing_a_settling_job_does_not_deadlock():
    # A job's finish (and its deletion) locks the job's row, then the tenant's count; a
    # multipart submit with files that takes another job's output must lock that job first
    # too, else each waits for the other (PostgreSQL then aborts one of them).
    up = A.wait_job(A.submit("noop", {})["id"])
    holder = subprocess.Popen(["psql", "-h", H.sockdir, "-U", H.db_user, "-d", "gpujobd", "-AtqX"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    holder.stdin.write("BEGIN;\nUPDATE jobs SET updated_at = now() WHERE id = '%s';\nSELECT 'held';\n" % up["id"])
    holder.stdin.flush()
    assert holder.stdout.readline().strip() == "held"
    boundary = "quotaref"
    job = {"kind": "noop", "inputs": {"input.ref": {"job": up["id"], "output": "result.json"}}}
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"job\"\r\nContent-Type: application/json\r\n\r\n"
            + json.dumps(job) + f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"input.data\"; "
            "filename=\"d.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
    body += os.urandom(1000) + f"\r\n--{boundary}--\r\n".encode()
    results = []
    t = threading.Thread(target=lambda: results.append(A.request(
        "POST", "/v1/jobs", body=body, headers={"Content-Type": "multipart/form-data; boundary=" + boundary})))
    t.start()
    try:
        deadline = time.time() + 60
        while int(H.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = 'gpujobd'"
                           " AND wait_event_type = 'Lock' AND query LIKE '%FOR SHARE%'")) < 1:
            assert time.time() < deadline and not results, results
            time.sleep(0.05)
        # now as a finish would: the tenant's count after the job's row
        holder.stdin.write("SELECT 'counted' FROM tenant_storage WHERE tenant_id = '%s' FOR UPDATE;\nCOMMIT;\n" % A_ID)
    finally:
        holder.stdin.close()
        out = holder.stdout.read()
        holder.wait(60)
        t.join()
    assert "counted" in out and "deadlock" not in out, out
    assert results[0].status == 201, results[0]
    for done in (A.wait_job(results[0].json()["id"]), up):      # what they store goes with them
        assert A.request("DELETE", "/v1/jobs/" + done["id"]).status == 204


def carmin(client, method, path, body, ctype):
    return client.request(method, "/rest/path/vip/Home" + path, body=body,
                          headers={"apikey": client.key, "Content-Type": ctype})


def test_carmin_file_and_archive_over_quota():
    in_use = used(A)
    before = stored()
    r = carmin(A, "PUT", "/big.bin", os.urandom(800_000), "application/octet-stream")
    assert r.status == 507, r
    err = r.json()
    assert err["errorCode"] == 50702 and "--tenant-storage-quota" in err["errorMessage"], err
    assert "%d bytes in use" % in_use in err["errorMessage"] and "nothing was stored" in err["errorMessage"], err
    assert stored() == before
    # an archive whose second file passes the quota: none of it stays
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as z:
        z.writestr("one.bin", os.urandom(400_000))
        z.writestr("two.bin", os.urandom(400_000))
    upload = json.dumps({"base64Content": base64.b64encode(zbuf.getvalue()).decode(), "type": "Archive"}).encode()
    r = carmin(A, "PUT", "/tree", upload, "application/carmin+json")
    assert r.status == 507, r
    err = r.json()
    assert err["errorCode"] == 50702 and "400000 more asked" in err["errorMessage"], err
    assert stored() == before
    assert H.scalar("SELECT count(*) FROM carmin_paths WHERE path LIKE '/vip/Home/tree%'") == "0"
    platform = A.request("GET", "/rest/platform").json()
    assert 50702 in [e["errorCode"] for e in platform["APIErrorCodesAndMessages"]], platform
    # within it: a file is stored and counted, and deleting it gives the bytes back
    r = carmin(A, "PUT", "/small.bin", os.urandom(100_000), "application/octet-stream")
    assert r.status == 201, r
    assert used(A) == in_use + 100_000
    assert A.request("DELETE", "/rest/path/vip/Home/small.bin", headers={"apikey": A.key}).status == 204
    assert used(A) == in_use


def test_stow_over_quota():
    import tempfile
    import test_inference_api as dcm      # make_dicom: DCMTK-made instances, as the DICOMweb tests
    dcm.TMP = tempfile.mkdtemp(prefix="gj-quota-")
    c = ADMIN.json("POST", "/v1/api-keys", {"tenant": "quota-c"}, expect=201)
    C = SRV.client(key=c["key"])
    one, _ = dcm.make_dicom("quota1", "1.2.826.0.1.3680043.8.498.7001", 21)
    two, _ = dcm.make_dicom("quota2", "1.2.826.0.1.3680043.8.498.7001", 22)
    ADMIN.json("PUT", "/v1/tenants/%s/storage-quota" % c["tenant_id"], {"quota_bytes": len(one) + 10}, expect=200)
    before = stored()
    r = dcm.stow(C, [("application/dicom", one), ("application/dicom", two)])
    assert_refused(r, len(one), len(two), quota=len(one) + 10, own=True)   # the first in, the second over
    assert stored() == before                                             # the request stores all or nothing
    assert H.scalar("SELECT count(*) FROM dicom_instances WHERE tenant_id = '%s'" % c["tenant_id"]) == "0"


def test_tenant_isolation():
    a_use = used(A)
    assert a_use > 0
    assert used(B) == 0
    B.upload(os.urandom(900_000))               # B's own quota room, whatever A stores
    assert used(B) == 900_000 and used(A) == a_use
    usage = B.json("GET", "/v1/usage", expect=200)
    assert usage["tenant_id"] == B_ID, usage
    assert B.request("GET", "/v1/tenants").status == 403
    assert B.request("PUT", "/v1/tenants/%s/storage-quota" % B_ID, json={"quota_bytes": 0}).status == 403


def test_admin_sets_and_clears_a_tenants_quota():
    b_use = used(B)
    r = ADMIN.json("PUT", "/v1/tenants/%s/storage-quota" % B_ID, {"quota_bytes": 2_000_000}, expect=200)
    assert r["storage"] == {"used_bytes": b_use, "quota_bytes": 2_000_000, "quota": "tenant"}, r
    B.upload(os.urandom(500_000))                # past the server's quota, within its own
    assert_refused(B.request("POST", "/v1/blobs", body=os.urandom(700_000)), b_use + 500_000, 700_000,
                   quota=2_000_000, own=True)
    tenants = {t["id"]: t for t in ADMIN.json("GET", "/v1/tenants", expect=200)["tenants"]}
    assert tenants[B_ID]["storage"]["quota_bytes"] == 2_000_000 and tenants[B_ID]["name"] == "quota-b"
    assert tenants[A_ID]["storage"] == {"used_bytes": used(A), "quota_bytes": QUOTA,
                                        "quota": "--tenant-storage-quota"}
    # 0: no quota at all
    ADMIN.json("PUT", "/v1/tenants/%s/storage-quota" % B_ID, {"quota_bytes": 0}, expect=200)
    blob = B.upload(os.urandom(700_000))
    # null: the server's quota again, which B is now over: its next upload is refused
    r = ADMIN.json("PUT", "/v1/tenants/%s/storage-quota" % B_ID, {"quota_bytes": None}, expect=200)
    assert r["storage"]["quota"] == "--tenant-storage-quota" and r["storage"]["quota_bytes"] == QUOTA, r
    assert B.request("POST", "/v1/blobs", body=b"y").status == 507
    assert B.request("DELETE", "/v1/blobs/" + blob["id"]).status == 204
    for bad in ({"quota_bytes": -1}, {"quota_bytes": "1G"}, {}, {"quota_bytes": 1, "x": 2}):
        p = ADMIN.json("PUT", "/v1/tenants/%s/storage-quota" % B_ID, bad, expect=422)
        assert p["field"] == "quota_bytes", p
    assert ADMIN.request("PUT", "/v1/tenants/%s/storage-quota" % "00000000-0000-4000-8000-000000000000",
                         json={"quota_bytes": 1}).status == 404
    assert ADMIN.request("PUT", "/v1/tenants/nope/storage-quota", json={"quota_bytes": 1}).status == 404


def test_metrics_show_use():
    text = ADMIN.request("GET", "/metrics").body.decode()
    assert 'gpujobd_tenant_storage_bytes{tenant="%s"} %d' % (A_ID, used(A)) in text, text[-2000:]
    assert 'gpujobd_tenant_storage_quota_bytes{tenant="%s"} %d' % (A_ID, QUOTA) in text
    assert 'gpujobd_tenant_storage_bytes{tenant="%s"} %d' % (B_ID, used(B)) in text
    assert "quota-a" not in text        # ids, not names: the metrics listener needs no key
    # the counts agree with the blobs after all of the above
    for tenant_id in (A_ID, B_ID):
        assert int(H.scalar("SELECT used_bytes FROM tenant_storage WHERE tenant_id = '%s'" % tenant_id)) \
            == counted(tenant_id)


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_upload_within_and_over, test_declared_length_over_quota_refused_before_the_body,
                   test_concurrent_uploads_one_refused,
                   test_job_outputs_over_quota_fail_the_job, test_multipart_submit_over_quota,
                   test_multipart_submit_referencing_a_settling_job_does_not_deadlock,
                   test_carmin_file_and_archive_over_quota, test_stow_over_quota, test_tenant_isolation,
                   test_admin_sets_and_clears_a_tenants_quota, test_metrics_show_use])
    finally:
        H.close()
