"""CARMIN archives inflate within bounds (issue 28, finding 3): a 64 KB zip of 64 MiB of zeros
is refused as it inflates, past --archive-max-ratio (100) times its bytes, where before only
--max-body-bytes (16G) stopped it; --archive-max-bytes bounds the files in all however well
they compress; what inflates is counted against the disk's free space above
--upload-disk-reserve (507), not only the spooled body. Each refusal is CARMIN's error with
the figures, and nothing of the archive stays (no directory, no path, no blob). An archive
within the bounds goes in."""
import os
import sys
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
    # the body (under 1 MB) leaves the reserve free; its 256 MiB of files would not
    reserve = avail - (64 << 20)
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


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_ratio_bomb_refused, test_max_bytes_refused, test_disk_reserve_counts_what_inflates])
    finally:
        tc.H.close()
