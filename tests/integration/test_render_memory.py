"""Rendering a small crafted DICOM stays within the server's memory budget (issue 28,
finding 4): a 260 KB deflated instance of 16384 x 16384 8-bit zero pixels (the file is
written here byte by byte: deflated explicit VR little endian, 1.2.840.10008.1.2.1.99) is
stored by STOW-RS and uploaded as a blob; GET .../rendered (PNG and JPEG, four at once),
GET .../frames/1 and GET /v1/blobs/{id}/thumbnail answer 413 naming the image's size, the bytes it
needs and --render-memory, and the server's peak resident memory (VmHWM, reset through
/proc/PID/clear_refs after the uploads) grows by far less than the decoded image
(1 GiB of floats). Before the fix one render took the server past 1.7 GB. STOW-RS of the
same file reads its attributes without inflating its pixels. A small image still renders, and with --render-memory below what it needs (256K) it is 413 too."""
import json
import os
import shutil
import struct
import sys
import tempfile
import threading
import zlib

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402
import test_inference_api as dcm  # noqa: E402  (stow, make_dicom)

H = None
SRV = None
SMALL = None     # a server with a budget below a 320 x 288 image's need
STUDY = "1.2.826.0.1.3680043.8.498.7001"
SERIES = STUDY + ".1"
SOP = STUDY + ".1.1"
SIDE = 16384
GROWTH_MAX = 160 << 20   # the decoded frame alone is 1 GiB of floats
I = {}


def element(group, elem, vr, value):
    if len(value) % 2:
        value += b"\0" if vr in (b"UI", b"OB") else b" "
    if vr in (b"OB", b"OW", b"SQ", b"UN", b"UT"):
        return struct.pack("<HH2sHI", group, elem, vr, 0, len(value)) + value
    return struct.pack("<HH2sH", group, elem, vr, len(value)) + value


def us(v):
    return struct.pack("<H", v)


def bomb():
    """A Part 10 file: the meta group, then the dataset deflated (raw deflate), its pixel
    data SIDE x SIDE zeros streamed through zlib so this test never holds them."""
    sop_class = b"1.2.840.10008.5.1.4.1.1.7"
    meta_body = (element(0x0002, 0x0001, b"OB", b"\0\1") + element(0x0002, 0x0002, b"UI", sop_class)
                 + element(0x0002, 0x0003, b"UI", SOP.encode())
                 + element(0x0002, 0x0010, b"UI", b"1.2.840.10008.1.2.1.99")
                 + element(0x0002, 0x0012, b"UI", b"1.2.826.0.1.3680043.8.498.1"))
    meta = element(0x0002, 0x0000, b"UL", struct.pack("<I", len(meta_body))) + meta_body
    head = (element(0x0008, 0x0016, b"UI", sop_class) + element(0x0008, 0x0018, b"UI", SOP.encode())
            + element(0x0008, 0x0060, b"CS", b"OT") + element(0x0020, 0x000D, b"UI", STUDY.encode())
            + element(0x0020, 0x000E, b"UI", SERIES.encode())
            + element(0x0028, 0x0002, b"US", us(1)) + element(0x0028, 0x0004, b"CS", b"MONOCHROME2")
            + element(0x0028, 0x0010, b"US", us(SIDE)) + element(0x0028, 0x0011, b"US", us(SIDE))
            + element(0x0028, 0x0100, b"US", us(8)) + element(0x0028, 0x0101, b"US", us(8))
            + element(0x0028, 0x0102, b"US", us(7)) + element(0x0028, 0x0103, b"US", us(0))
            + struct.pack("<HH2sHI", 0x7FE0, 0x0010, b"OB", 0, SIDE * SIDE))
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    out = [b"\0" * 128, b"DICM", meta, z.compress(head)]
    zeros = bytes(1 << 20)
    for _ in range(SIDE * SIDE // len(zeros)):
        out.append(z.compress(zeros))
    out.append(z.flush())
    return b"".join(out)


def status_kb(field):
    with open(f"/proc/{SRV.proc.pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{SRV.proc.pid}/status")


def reset_peak():
    """VmHWM from now on (Linux 4.0+: writing 5 to clear_refs resets it)."""
    with open(f"/proc/{SRV.proc.pid}/clear_refs", "w") as f:
        f.write("5")
    return status_kb("VmRSS")


def setup():
    global H, SRV
    H = Harness()
    dcm.TMP = tempfile.mkdtemp(prefix="gj-render-mem-")
    SRV = H.start_server(["--role", "api"])
    I["bomb"] = bomb()
    assert len(I["bomb"]) < 400_000, len(I["bomb"])
    c = SRV.client()
    r = dcm.stow(c, [("application/dicom", I["bomb"])])
    assert r.status == 200, r
    I["blob"] = c.upload(I["bomb"], "application/dicom")["id"]
    I["small"] = dcm.make_dicom("small", STUDY, 5, extra=[("0020,000E", SERIES)])
    r = dcm.stow(c, [("application/dicom", I["small"][0])])
    assert r.status == 200, r


def rendered_path(sop):
    return f"/dicomweb/studies/{STUDY}/series/{SERIES}/instances/{sop}/rendered"


def assert_refused_with_figures(r, what):
    assert r.status == 413, (what, r)
    detail = json.loads(r.body)["detail"]
    assert f"{SIDE} x {SIDE}" in detail and "MiB" in detail and "--render-memory" in detail, (what, detail)


def test_rendered_bomb_refused_within_budget():
    c = SRV.client()
    before = reset_peak()
    results = [("image/png", c.request("GET", rendered_path(SOP), headers={"Accept": "image/png"}))]

    def one(accept):
        results.append((accept, c.request("GET", rendered_path(SOP), headers={"Accept": accept})))
    threads = [threading.Thread(target=one, args=(a,)) for a in ("image/png", "image/jpeg") * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    frames = rendered_path(SOP).replace("/rendered", "/frames/1")
    results.append(("frames", c.request("GET", frames, headers={})))
    growth = status_kb("VmHWM") - before
    print(f"rendered x5 and frames: peak resident memory grew by {growth >> 20} MiB")
    for accept, r in results:
        assert_refused_with_figures(r, accept)
    assert growth < GROWTH_MAX, f"the server's peak grew by {growth >> 20} MiB"


def test_thumbnail_bomb_refused_within_budget():
    c = SRV.client()
    before = reset_peak()
    r = c.request("GET", f"/v1/blobs/{I['blob']}/thumbnail")
    growth = status_kb("VmHWM") - before
    print(f"thumbnail: peak resident memory grew by {growth >> 20} MiB")
    assert_refused_with_figures(r, "thumbnail")
    assert growth < GROWTH_MAX, f"the server's peak grew by {growth >> 20} MiB"


def test_stow_reads_the_bomb_within_bounds():
    """STOW-RS reads a deflated instance's attributes only as far as its pixel data (before,
    the whole 256 MiB dataset was inflated to read them)."""
    c = SRV.client()
    before = reset_peak()
    r = dcm.stow(c, [("application/dicom", I["bomb"])])
    growth = status_kb("VmHWM") - before
    print(f"STOW: peak resident memory grew by {growth >> 20} MiB")
    body = json.loads(r.body)      # already stored: acknowledged with a warning (202), not a failure
    assert r.status == 202 and "00081198" not in body, r
    assert body["00081199"]["Value"][0]["00081155"]["Value"] == [SOP], body
    assert growth < GROWTH_MAX, f"the server's peak grew by {growth >> 20} MiB"


def test_small_image_renders_within_the_budget():
    global SMALL
    SMALL = H.start_server(["--role", "api", "--render-memory", "256K"])   # same database, same instances
    r = SRV.client().request("GET", rendered_path(I["small"][1]), headers={"Accept": "image/png"})
    assert r.status == 200 and r.body[:8] == b"\x89PNG\r\n\x1a\n", r
    r = SMALL.client(SRV.admin_key).request("GET", rendered_path(I["small"][1]), headers={"Accept": "image/png"})
    assert r.status == 413, r
    detail = json.loads(r.body)["detail"]
    assert "288 x 320" in detail and "256 KiB" in detail, detail


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_rendered_bomb_refused_within_budget, test_thumbnail_bomb_refused_within_budget,
                   test_stow_reads_the_bomb_within_bounds, test_small_image_renders_within_the_budget])
    finally:
        H.close()
        shutil.rmtree(dcm.TMP, ignore_errors=True)
