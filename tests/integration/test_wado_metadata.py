"""WADO-RS metadata over real HTTPS is every attribute of each stored instance, as DCMTK's
dcm2json writes it for the same file: an instance made with DCMTK (img2dcm, dcmodify)
holding every kind of value, once in explicit and once in implicit VR, and one in
ISO_IR 100 (Latin-1, returned as UTF-8), (PN with component groups, multi-valued DS/IS/US, SS, UL,
FL, FD, AT, sequences nested two deep with several items, an empty attribute, LT) is
stored by STOW-RS; its metadata at study, series and instance level is compared, value
for value, with dcm2json's output (bulk data, Pixel Data and binary values over 1 KiB,
left out; small binary values inline). 404 for another tenant on the three routes,
400 for a parameter, 406 for an Accept it cannot serve; the patient's attributes never
reach the log. The server runs as --role api (no job needs to run)."""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402
import test_inference_api as dcm  # noqa: E402  (make_dicom, stow, seq)

H = None
SRV = None
STUDY = "1.2.826.0.1.3680043.8.498.5001"
SERIES = "1.2.826.0.1.3680043.8.498.5001.1"
I = {}
DICOM_JSON = {"Accept": "application/dicom+json"}

RICH = [   # make_dicom writes "(tag)=value": a path into a sequence is "tag)[i].(tag"
    ("0008,0090", ""),                                   # empty: no Value
    ("0010,0010", "Roe^Jane==ROE^JANE"),                 # Alphabetic and Phonetic
    ("0010,0030", "19700101"),
    ("0010,0040", "F"),
    ("0010,9431", "12.5"),                               # FL
    ("0018,1310", "0\\256\\256\\0"),                     # US, 4 values
    ("0018,9219", "-7"),                                 # SS
    ("0018,9087", "1000.25"),                            # FD
    ("0008,1161", "1\\2\\70000"),                        # UL, 3 values
    ("0028,0009", "(0018,1063)"),                        # AT
    ("0020,0032", "-100.5\\20\\3e2"),                    # DS, 3 values
    ("0020,0037", "1\\0\\0\\0\\1\\0"),
    ("0028,0030", "0.139\\0.139"),
    ("0020,0013", "7"),                                  # IS
    ("0020,4000", "Image comments: line one"),           # LT
    ("0008,0008", "ORIGINAL\\PRIMARY\\\\AXIAL"),         # CS with an empty value
    ("0008,1140)[0].(0008,1150", "1.2.840.10008.5.1.4.1.1.1"),
    ("0008,1140)[0].(0008,1155", "1.2.826.0.1.3680043.8.498.77"),
    ("0008,1140)[1].(0008,1150", "1.2.840.10008.5.1.4.1.1.1.1"),
    ("0008,1140)[1].(0008,1155", "1.2.826.0.1.3680043.8.498.78"),
    ("0040,0275)[0].(0040,0008)[0].(0008,0100", "CODE1"),
    ("0040,0275)[0].(0040,0008)[0].(0008,0102", "99TEST"),
    ("0040,0275)[0].(0040,0008)[1].(0008,0100", "CODE2"),
    ("0040,0275)[0].(0040,0009", "SPS-1"),
    ("0020,000E", SERIES),
]


def setup():
    global H, SRV
    H = Harness()
    dcm.TMP = tempfile.mkdtemp(prefix="gj-wadometa-")
    SRV = H.start_server(["--role", "api"])
    I["rich"] = dcm.make_dicom("m_rich", STUDY, 21, extra=RICH)
    I["plain"] = dcm.make_dicom("m_plain", STUDY, 22, modality="CR", extra=[("0020,000E", SERIES)])
    # the same attributes in implicit VR little endian (the VRs come from the dictionary)
    _, sop = dcm.make_dicom("m_implicit", STUDY, 23, extra=RICH)
    path = os.path.join(dcm.TMP, "m_implicit.dcm")
    subprocess.run(["dcmconv", "+ti", path, path], check=True, capture_output=True)
    with open(path, "rb") as f:
        I["implicit"] = (f.read(), sop)
    # ISO_IR 100 (Latin-1) text: bytes 0xFC, 0xE9, 0xF4, 0xC9 (a surrogate-escaped str is those bytes in argv)
    I["latin1"] = dcm.make_dicom("m_latin1", STUDY, 24, extra=[
        ("0008,0005", "ISO_IR 100"), ("0010,0010", "M\udcfcller^J\udce9r\udcf4me"), ("0008,1030", "\udcc9tude"),
        ("0020,000E", SERIES)])
    c = SRV.client()
    r = dcm.stow(c, [("application/dicom", I[k][0]) for k in ("rich", "plain", "implicit", "latin1")])
    assert r.status == 200, r


def dcm2json(name):
    out = subprocess.run(["dcm2json", os.path.join(dcm.TMP, name + ".dcm")], check=True, capture_output=True)
    return json.loads(out.stdout)


def same_number(a, b):
    return a is None and b is None or (a is not None and b is not None and abs(a - b) <= 1e-9 * max(1, abs(b)))


def compare(ours, theirs, where=""):
    """Every attribute dcm2json writes is ours with the same VR and values (bulk data aside)."""
    for tag, t in theirs.items():
        at = f"{where}{tag}"
        if tag == "7FE00010" or ("InlineBinary" in t and len(base64.b64decode(t["InlineBinary"])) > 1024):
            assert tag not in ours, f"{at}: bulk data should be left out"
            continue
        assert tag in ours, f"{at} missing (dcm2json: {t})"
        o = ours[tag]
        assert o["vr"] == t["vr"], (at, o, t)
        if "InlineBinary" in t:
            assert o.get("InlineBinary") == t["InlineBinary"], (at, o, t)
        elif t["vr"] == "SQ":
            ti, oi = t.get("Value", []), o.get("Value", [])
            assert len(ti) == len(oi), (at, o, t)
            for k, (a, b) in enumerate(zip(oi, ti)):
                compare(a, b, f"{at}[{k}].")
        elif t["vr"] in ("DS", "FL", "FD"):
            assert len(o.get("Value", [])) == len(t.get("Value", [])), (at, o, t)
            assert all(same_number(a, b) for a, b in zip(o.get("Value", []), t.get("Value", []))), (at, o, t)
        else:
            assert o.get("Value") == t.get("Value"), (at, o, t)
    extra = set(ours) - set(theirs) - {"00083002"}
    assert not extra, f"{where}: attributes dcm2json does not write: {sorted(extra)}"


def test_metadata_equals_dcm2json():
    c = SRV.client()
    paths = (f"/dicomweb/studies/{STUDY}/metadata", f"/dicomweb/studies/{STUDY}/series/{SERIES}/metadata")
    for path in paths:
        r = c.request("GET", path, headers=DICOM_JSON)
        assert r.status == 200 and r.headers["content-type"].startswith("application/dicom+json"), r
        got = r.json()
        assert [m["00080018"]["Value"][0] for m in got] == [I[k][1] for k in ("rich", "plain", "implicit", "latin1")]
        compare(got[0], dcm2json("m_rich"))
        compare(got[1], dcm2json("m_plain"))
        compare(got[2], dcm2json("m_implicit"))
        assert got[2]["00083002"]["Value"] == ["1.2.840.10008.1.2"], got[2]["00083002"]
        compare(got[3], dcm2json("m_latin1"))
        assert got[3]["00100010"]["Value"] == [{"Alphabetic": "M\u00fcller^J\u00e9r\u00f4me"}], got[3]["00100010"]
    r = c.request("GET", f"/dicomweb/studies/{STUDY}/series/{SERIES}/instances/{I['rich'][1]}/metadata",
                  headers={"Accept": "application/json"})
    assert r.status == 200 and r.headers["content-type"].startswith("application/json"), r
    m = r.json()[0]
    compare(m, dcm2json("m_rich"))
    # the forms PS3.18 F.2 asks for, spelled out (dcm2json agreeing is not the only proof)
    assert m["00100010"]["Value"] == [{"Alphabetic": "Roe^Jane", "Phonetic": "ROE^JANE"}], m["00100010"]
    assert m["00181310"]["Value"] == [0, 256, 256, 0] and m["00189219"]["Value"] == [-7], m
    assert m["00280009"]["Value"] == ["00181063"] and m["00200013"]["Value"] == [7], m
    assert m["00080008"]["Value"] == ["ORIGINAL", "PRIMARY", None, "AXIAL"], m["00080008"]
    assert m["00080090"] == {"vr": "PN"}, m["00080090"]
    inner = m["00400275"]["Value"][0]["00400008"]["Value"]
    assert [i["00080100"]["Value"] for i in inner] == [["CODE1"], ["CODE2"]], inner
    assert "7FE00010" not in m and m["00083002"]["Value"] == ["1.2.840.10008.1.2.1"], m.get("00083002")


def test_latin1_searchable():
    """STOW keeps a Latin-1 instance's attributes as UTF-8 (PostgreSQL refuses other bytes: it was a 503)."""
    c = SRV.client()
    r = c.request("GET", f"/dicomweb/instances?SOPInstanceUID={I['latin1'][1]}&includefield=all", headers=DICOM_JSON)
    assert r.status == 200 and r.json()[0]["00100010"]["Value"] == [{"Alphabetic": "M\u00fcller^J\u00e9r\u00f4me"}], r
    assert r.json()[0]["00081030"]["Value"] == ["\u00c9tude"], r.json()[0]


def test_errors_and_tenants():
    c = SRV.client()
    base = f"/dicomweb/studies/{STUDY}/series/{SERIES}"
    paths = (f"/dicomweb/studies/{STUDY}/metadata", f"{base}/metadata", f"{base}/instances/{I['rich'][1]}/metadata")
    other = c.json("POST", "/v1/api-keys", {"tenant": "wadometa-other", "role": "user"}, expect=201)["key"]
    b = SRV.client(key=other)
    for path in paths:
        assert c.request("GET", path + "?includefield=all", headers=DICOM_JSON).status == 400, path
        assert c.request("GET", path, headers={"Accept": "application/dicom+xml"}).status == 406, path
        assert b.request("GET", path, headers=DICOM_JSON).status == 404, path
        assert b.request("GET", path, headers={"Authorization": "Bearer nope"}).status == 401, path
    assert c.request("GET", f"{base}/instances/1.2.3/metadata", headers=DICOM_JSON).status == 404
    assert c.request("GET", "/dicomweb/studies/1.2.x/metadata", headers=DICOM_JSON).status == 400


def test_log_clean():
    """No patient data in the log. The all-digit ones (the patient ID 12345, the birth date) are
    looked for as numbers of their own: they also turn up by chance inside the log's random
    hexadecimal ids (request ids, digests, object keys)."""
    text = SRV.log_text()
    for secret in ("Roe", "ROE", "19700101", dcm.PATIENT_ID, "ller^J"):
        pattern = re.escape(secret)
        if secret.isdigit():
            pattern = r"(?<![0-9A-Za-z])" + pattern + r"(?![0-9A-Za-z])"
        found = re.search(pattern, text)
        assert not found, (secret, text[max(0, found.start() - 200):found.end() + 50])


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_metadata_equals_dcm2json, test_latin1_searchable, test_errors_and_tenants, test_log_clean])
    finally:
        H.close()
        shutil.rmtree(dcm.TMP, ignore_errors=True)
