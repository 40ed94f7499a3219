"""The inference module's service side over real HTTPS: DICOMweb STOW-RS of DICOM
files made with DCMTK (img2dcm + dcmodify) into `infer` jobs that run the shipped
demo model, inference_results rows with pseudonymous (HMAC) keys and no patient
name or id anywhere (server log, every table), GET /v1/inference-results as JSON
and CSV with filters and cursors, the model repository routes (list, load,
unload, upload refused with the reason and nothing left, upload and delete),
STOW errors, and tenant isolation."""
import csv
import hashlib
import hmac
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, multipart_form, run_tests  # noqa: E402

PATIENT_NAME = "Doe^Jane"
PATIENT_ID = "12345"
DEMO = "chest-xray-demo"
SRC = os.environ.get("GJ_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))

H = None
SRV = None
TMP = None
STUDY_A = "1.2.826.0.1.3680043.8.498.1001"
STUDY_B = "1.2.826.0.1.3680043.8.498.1002"
FILES = {}          # name -> (bytes, sop_uid, study_uid)
JOBS = []           # job ids created by the first STOW


def setup():
    global H, SRV, TMP
    H = Harness()
    TMP = tempfile.mkdtemp(prefix="gj-infer-api-")
    # The strict privacy mode: the jobs' DICOM inputs go once their results are stored.
    SRV = H.start_server(["--cpu-workers", "2"], env={"GPUJOBD_INFER_PURGE_PHI": "1"})


def make_dicom(name, study_uid, seed, acq=None, modality="DX", extra=()):
    """A grayscale chest-like image as BMP (Pillow), then img2dcm and dcmodify."""
    from PIL import Image
    import numpy as np
    rng = np.random.RandomState(seed)
    h, w = 320, 288
    y, x = np.mgrid[0:h, 0:w]
    img = 60 + 120 * np.exp(-(((x - w / 2) / (w / 3)) ** 2 + ((y - h / 2) / (h / 2.5)) ** 2))
    img += rng.normal(0, 8, size=img.shape)
    bmp = os.path.join(TMP, name + ".bmp")
    dcm = os.path.join(TMP, name + ".dcm")
    Image.fromarray(np.clip(img, 0, 255).astype("uint8"), "L").save(bmp)
    subprocess.run(["img2dcm", "-i", "BMP", bmp, dcm], check=True, capture_output=True)
    args = ["dcmodify", "-nb", "-i", f"(0008,0060)={modality}", "-i", "(0018,0015)=CHEST",
            "-i", "(0018,5101)=PA", "-i", f"(0010,0010)={PATIENT_NAME}", "-i", f"(0010,0020)={PATIENT_ID}",
            "-i", f"(0020,000D)={study_uid}"]
    if acq:
        args += ["-i", f"(0008,0022)={acq[0]}", "-i", f"(0008,0032)={acq[1]}"]
    for tag, value in extra:
        args += ["-i", f"({tag})={value}"]
    subprocess.run(args + [dcm], check=True, capture_output=True)
    out = subprocess.run(["dcmdump", "+P", "0008,0018", dcm], check=True, capture_output=True, text=True).stdout
    sop = re.search(r"\[([0-9.]+)\]", out).group(1)
    with open(dcm, "rb") as f:
        data = f.read()
    FILES[name] = (data, sop, study_uid)
    return data, sop


def related(parts, boundary=None, type_param='"application/dicom"'):
    """parts: [(content_type or None, bytes)] -> (body, content type)"""
    boundary = boundary or "gjstow" + uuid.uuid4().hex
    out = [b"preamble to be ignored\r\n"]
    for ctype, data in parts:
        out.append(f"--{boundary}\r\n".encode())
        if ctype:
            out.append(f"Content-Type: {ctype}\r\n".encode())
        out.append(b"\r\n" + data + b"\r\n")
    out.append(f"--{boundary}--\r\nepilogue".encode())
    ct = f"multipart/related; boundary={boundary}"
    if type_param:
        ct = f"multipart/related; type={type_param}; boundary={boundary}"
    return b"".join(out), ct


def stow(client, parts, path="/dicomweb/studies", **kw):
    body, ct = related(parts, **kw)
    return client.request("POST", path, body=body, headers={"Content-Type": ct, "Accept": "application/dicom+json"})


def secret():
    hexval = H.scalar("SELECT encode(value, 'hex') FROM server_secrets WHERE name = 'pseudonym_hmac_v1'")
    assert hexval and len(hexval) == 64, hexval
    return bytes.fromhex(hexval)


def key_of(uid):
    return hmac.new(secret(), uid.encode(), hashlib.sha256).hexdigest()


def seq(body, tag):
    return body.get(tag, {}).get("Value", [])


def test_demo_model_seeded_and_listed():
    c = SRV.client()
    models = c.json("GET", "/v1/models", expect=200)
    names = [m["name"] for m in models["models"]]
    assert DEMO in names, models
    demo = [m for m in models["models"] if m["name"] == DEMO][0]
    assert demo["default_version"] == 1, demo
    assert [v["version"] for v in demo["versions"]] == [1], demo
    assert demo["versions"][0]["state"] in ("loaded", "unloaded"), demo
    assert os.path.isfile(os.path.join(SRV.data_dir, "models", DEMO, "1", "model.onnx"))
    assert os.path.isfile(os.path.join(SRV.data_dir, "models", DEMO, "config.json"))


def test_stow_creates_jobs_and_results():
    c = SRV.client()
    a1, sop_a1 = make_dicom("a1", STUDY_A, 1, acq=("20240301", "101530.25"))
    a2, sop_a2 = make_dicom("a2", STUDY_A, 2)
    b1, sop_b1 = make_dicom("b1", STUDY_B, 3, acq=("20231224", "0800"))
    r = stow(c, [("application/dicom", a1), ("application/dicom", a2), ("application/dicom", b"not DICOM at all"),
                 ("application/dicom", b1)])
    assert r.status == 202, r
    assert r.headers["content-type"].startswith("application/dicom+json"), r.headers
    body = r.json()
    refs = seq(body, "00081199")
    assert sorted(i["00081155"]["Value"][0] for i in refs) == sorted([sop_a1, sop_a2, sop_b1]), body
    assert all(i["00081150"]["Value"][0] == "1.2.840.10008.5.1.4.1.1.7" for i in refs), refs
    failed = seq(body, "00081198")
    assert len(failed) == 1 and failed[0]["00081197"] == {"vr": "US", "Value": [0xC000]}, failed
    assert "00081190" not in body or "/dicomweb/studies/" in body["00081190"]["Value"][0]
    jobs = [i["00091011"]["Value"][0] for i in seq(body, "00091010")]
    assert body["00090010"]["Value"] == ["GPUJOBD"], body
    assert len(jobs) == 2, body
    assert all(j.startswith("/v1/jobs/") for j in jobs)
    assert r.headers.get("link") and "/v1/jobs/" in r.headers["link"], r.headers
    for j in jobs:
        job = c.wait_job(j.rsplit("/", 1)[1], timeout=180)
        assert job["state"] == "succeeded", job
        assert job["kind"] == "infer" and job["params"]["model"] == DEMO, job
        JOBS.append(job["id"])
    rows = H.sql("SELECT study_key, image_key, model, model_version, status, top_label, scores::text,"
                 " to_char(acquired_at, 'YYYY-MM-DD HH24:MI:SS.MS'), job_id FROM inference_results ORDER BY id")
    assert len(rows) == 3, rows
    by_image = {row[1]: row for row in rows}
    assert set(by_image) == {key_of(sop_a1), key_of(sop_a2), key_of(sop_b1)}, rows
    assert by_image[key_of(sop_a1)][0] == key_of(STUDY_A)
    assert by_image[key_of(sop_a2)][0] == key_of(STUDY_A)
    assert by_image[key_of(sop_b1)][0] == key_of(STUDY_B)
    for row in rows:
        assert row[2] == DEMO and row[3] == "1" and row[4] == "ok", row
        scores = json.loads(row[6])
        assert set(scores) == {"no_finding", "nodule", "effusion", "cardiomegaly"}, scores
        assert row[5] == max(scores, key=scores.get), row
    assert by_image[key_of(sop_a1)][7] == "2024-03-01 10:15:30.250", rows
    assert by_image[key_of(sop_b1)][7] == "2023-12-24 08:00:00.000", rows
    assert by_image[key_of(sop_a2)][7] in ("", None), rows   # img2dcm sets no acquisition or content time


def test_no_patient_data_anywhere():
    log = SRV.log_text()
    for needle in (PATIENT_NAME, "Doe", STUDY_A, STUDY_B):
        assert needle not in log, f"{needle!r} in the server log"
    assert not re.search(r"(?<![0-9A-Za-z])12345(?![0-9A-Za-z])", log), "patient id in the server log"
    # every table's data (large objects, the stored job inputs and outputs, are checked below)
    dump = subprocess.run(["pg_dump", "-h", H.sockdir, "-U", H.db_user, "--data-only", "--no-blobs", "gpujobd"],
                          check=True, capture_output=True, text=True).stdout
    assert "inference_results" in dump
    for needle in (PATIENT_NAME, STUDY_A, STUDY_B) + tuple(FILES[k][1] for k in FILES):
        assert needle not in dump, f"{needle!r} in a table"
    assert not re.search(r"(?<![0-9A-Za-z.])12345(?![0-9A-Za-z])", dump), "patient id in a table"
    # The stored instances' searchable attributes (0008) went with the purged inputs.
    assert H.scalar("SELECT count(*) FROM dicom_instances") == "0"
    # The study UID is not in any table; the result rows hold its HMAC only.
    assert H.scalar("SELECT count(*) FROM inference_results WHERE study_key ~ '^[0-9a-f]{64}$'") == "3"
    # Large objects (blobs): the jobs' DICOM inputs are deleted once their results are stored,
    # and result.json keeps HMAC keys instead of UIDs.
    for needle in (PATIENT_NAME, STUDY_A, STUDY_B) + tuple(FILES[k][1] for k in FILES):
        assert "'" not in needle
        n = H.scalar(f"SELECT count(*) FROM pg_largeobject WHERE position(convert_to('{needle}', 'UTF8') in data) > 0")
        assert n == "0", f"{needle!r} in a large object"
    c = SRV.client()
    for job_id in JOBS:
        job = c.json("GET", f"/v1/jobs/{job_id}", expect=200)
        assert not job["inputs"], job
        res = c.request("GET", f"/v1/jobs/{job_id}/outputs/result.json")
        assert res.status == 200, res
        text = res.body.decode()
        assert "instance_uid" not in text and "pseudonymised" in text, text[:500]
        assert "acquired_at" not in text, text[:500]     # a date of the patient's: in the table only
        doc = json.loads(text)
        # the Structured Report holds the patient's identity: withheld, not an output
        assert doc["reports"] and all("withheld" in x and "output" not in x for x in doc["reports"]), doc
        assert c.request("GET", f"/v1/jobs/{job_id}/outputs/result.dcm").status == 404
        for im in doc["images"]:
            assert re.fullmatch(r"[0-9a-f]{64}", im["image_key"]) and im["study_key"] in (key_of(STUDY_A),
                                                                                         key_of(STUDY_B)), im
    assert H.scalar("SELECT count(*) FROM job_events WHERE detail->>'message' LIKE 'the DICOM inputs were deleted%'") \
        == str(len(JOBS))


def test_results_json_filters_and_cursor():
    c = SRV.client()
    res = c.json("GET", "/v1/inference-results", expect=200)
    assert len(res["results"]) == 3 and res["next_cursor"] is None, res
    one = res["results"][0]
    for k in ("id", "job_id", "study_key", "image_key", "input", "model", "model_version", "status", "scores",
              "top_label", "top_score", "acquired_at", "received_at", "processed_at"):
        assert k in one, (k, one)
    assert one["model"] == DEMO and one["model_version"] == 1
    assert one["received_at"].endswith("Z") and one["processed_at"].endswith("Z")
    assert one["received_at"] <= one["processed_at"]
    # received_at is its job's created_at to the microsecond (issue 25: copied through the job store)
    assert H.scalar("SELECT count(*) FROM inference_results r JOIN jobs j ON j.id = r.job_id"
                    " WHERE r.received_at = j.created_at") == "3"
    page1 = c.json("GET", "/v1/inference-results?limit=2", expect=200)
    assert len(page1["results"]) == 2 and page1["next_cursor"], page1
    page2 = c.json("GET", "/v1/inference-results?limit=2&cursor=" + page1["next_cursor"], expect=200)
    assert len(page2["results"]) == 1 and page2["next_cursor"] is None, page2
    ids = [x["id"] for x in page1["results"] + page2["results"]]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert len(c.json("GET", f"/v1/inference-results?model={DEMO}&version=1", expect=200)["results"]) == 3
    assert c.json("GET", "/v1/inference-results?model=other-model", expect=200)["results"] == []
    assert c.json("GET", f"/v1/inference-results?model={DEMO}&version=2", expect=200)["results"] == []
    assert c.json("GET", "/v1/inference-results?from=2000-01-01T00:00:00Z&to=2999-01-01T00:00:00Z",
                  expect=200)["results"].__len__() == 3
    assert c.json("GET", "/v1/inference-results?from=2999-01-01T00:00:00Z", expect=200)["results"] == []
    assert c.json("GET", "/v1/inference-results?to=2000-01-01", expect=200)["results"] == []
    sk = key_of(STUDY_A)
    assert len(c.json("GET", "/v1/inference-results?study_key=" + sk, expect=200)["results"]) == 2
    for bad in ("limit=0", "limit=x", "from=yesterday", "cursor=zzz", "version=-1", "model=..", "format=xml",
                "study_key=ABC"):
        r = c.request("GET", "/v1/inference-results?" + bad)
        assert r.status == 400, (bad, r)
        assert r.headers["content-type"].startswith("application/problem+json")


def test_results_csv():
    c = SRV.client()
    for r in (c.request("GET", "/v1/inference-results", headers={"Accept": "text/csv"}),
              c.request("GET", "/v1/inference-results?format=csv")):
        assert r.status == 200, r
        assert r.headers["content-type"].startswith("text/csv"), r.headers
        rows = list(csv.reader(io.StringIO(r.body.decode())))
        header = rows[0]
        assert header[:4] == ["id", "job_id", "study_key", "image_key"], header
        for col in ("model", "model_version", "top_label", "top_score", "acquired_at", "received_at",
                    "processed_at", "score_no_finding", "score_nodule", "score_effusion", "score_cardiomegaly"):
            assert col in header, (col, header)
        assert len(rows) == 4, rows
        for row in rows[1:]:
            rec = dict(zip(header, row))
            assert rec["model"] == DEMO and re.fullmatch(r"[0-9a-f]{64}", rec["study_key"]), rec
            scores = {k[6:]: float(v) for k, v in rec.items() if k.startswith("score_")}
            assert rec["top_label"] == max(scores, key=scores.get), rec
    r = c.request("GET", "/v1/inference-results?format=csv&limit=1")
    assert r.status == 200 and r.headers.get("x-next-cursor"), r.headers
    assert len(list(csv.reader(io.StringIO(r.body.decode())))) == 2


def test_model_load_unload_and_roles():
    c = SRV.client()
    r = c.json("POST", f"/v1/models/{DEMO}/load", expect=200)
    assert r["name"] == DEMO and r["versions"][0]["state"] == "loaded", r
    r = c.json("POST", f"/v1/models/{DEMO}/unload?version=1", expect=200)
    assert r["versions"][0]["state"] == "unloaded", r
    r = c.request("POST", f"/v1/models/{DEMO}/unload")
    assert r.status == 409, r
    # the unload holds: an infer job does not load the model again, it fails saying why
    data, _ = make_dicom("unloaded1", "1.2.826.0.1.3680043.8.498.1003", 21)
    r = stow(c, [("application/dicom", data)])
    assert r.status == 200, r
    job = c.wait_job(re.findall(r"/v1/jobs/([0-9a-f-]{36})", r.headers["link"])[0], timeout=120)
    assert job["state"] == "failed" and "is not ready: it was unloaded" in job["error"]["message"], job
    models = {m["name"]: m for m in c.json("GET", "/v1/models", expect=200)["models"]}
    assert models[DEMO]["versions"][0]["state"] == "unloaded", models[DEMO]
    r = c.json("POST", f"/v1/models/{DEMO}/load", expect=200)
    assert r["versions"][0]["state"] == "loaded", r
    assert c.request("POST", "/v1/models/no-such-model/load").status == 404
    assert c.request("POST", f"/v1/models/{DEMO}/load?version=99").status == 404
    assert c.request("POST", f"/v1/models/{DEMO}/unload?version=99").status == 404
    assert c.request("POST", f"/v1/models/{DEMO}/load?version=abc").status == 400
    user = c.json("POST", "/v1/api-keys", {"tenant": "radiology-b", "role": "user"}, expect=201)["key"]
    u = SRV.client(key=user)
    assert u.request("GET", "/v1/models").status == 200
    assert u.request("POST", f"/v1/models/{DEMO}/load").status == 403
    assert u.request("DELETE", f"/v1/models/{DEMO}/versions/1").status == 403
    assert c.request("GET", "/v1/models", key="").status == 401


def test_job_cannot_name_a_models_dir():
    """The repository is the server's: a job naming a directory of its own is refused (422,
    the field named) before anything is stored."""
    c = SRV.client()
    before = H.scalar("SELECT count(*) FROM jobs")
    for d in ("/etc", os.path.join(SRV.data_dir, "models")):
        r = c.request("POST", "/v1/jobs", json={"kind": "infer", "params": {"model": DEMO, "models_dir": d}})
        assert r.status == 422, r
        p = r.json()
        assert p["field"] == "params.models_dir" and "models_dir" in p["detail"], p
    assert H.scalar("SELECT count(*) FROM jobs") == before
    kinds = {k["name"]: k for k in c.json("GET", "/v1/kinds", expect=200)["kinds"]}
    assert "models_dir" not in json.dumps(kinds["infer"]["params_schema"]), kinds["infer"]


def leftovers():
    d = os.path.join(SRV.data_dir, "models")
    return sorted(n for n in os.listdir(d) if n.startswith("."))


def test_bad_model_upload_refused():
    c = SRV.client()
    with open(os.path.join(SRV.data_dir, "models", DEMO, "config.json"), "rb") as f:
        cfg = json.loads(f.read())
    with open(os.path.join(SRV.data_dir, "models", DEMO, "1", "model.onnx"), "rb") as f:
        onnx = f.read()
    cfg["name"] = "bad-model"
    # not an ONNX model
    body, ct = multipart_form([("model", "model.onnx", b"\x08\x07garbage" * 100),
                               ("config", "config.json", json.dumps(cfg).encode())])
    r = c.request("PUT", "/v1/models/bad-model/versions/1", body=body, headers={"Content-Type": ct})
    assert r.status == 422, r
    assert "refused" in r.json()["detail"], r.json()
    # a config that does not match the model (4 labels, 3 given)
    bad = dict(cfg, labels=["a", "b", "c"])
    body, ct = multipart_form([("model", "model.onnx", onnx), ("config", "config.json", json.dumps(bad).encode())])
    r = c.request("PUT", "/v1/models/bad-model/versions/1", body=body, headers={"Content-Type": ct})
    assert r.status == 422, r
    detail = r.json()["detail"]
    assert "label" in detail or "output" in detail, detail
    # an unknown config key
    bad = dict(cfg, lables=["x"])
    body, ct = multipart_form([("model", "model.onnx", onnx), ("config", "config.json", json.dumps(bad).encode())])
    r = c.request("PUT", "/v1/models/bad-model/versions/1", body=body, headers={"Content-Type": ct})
    assert r.status == 422 and "lables" in r.json()["detail"], r
    # a new model without a config, a wrong part, a wrong content type
    body, ct = multipart_form([("model", "model.onnx", onnx)])
    r = c.request("PUT", "/v1/models/bad-model/versions/1", body=body, headers={"Content-Type": ct})
    assert r.status == 422 and r.json().get("field") == "config", r
    body, ct = multipart_form([("weights", "w.bin", onnx)])
    assert c.request("PUT", "/v1/models/bad-model/versions/1", body=body, headers={"Content-Type": ct}).status == 422
    # (refused before the body is read: small bodies, so the early answer cannot race the upload)
    assert c.request("PUT", "/v1/models/bad-model/versions/1", body=b"x" * 100,
                     headers={"Content-Type": "application/octet-stream"}).status == 415
    small, sct = multipart_form([("model", "model.onnx", b"x" * 100)])
    assert c.request("PUT", "/v1/models/.hidden/versions/1", body=small,
                     headers={"Content-Type": sct}).status in (404, 422)
    assert c.request("PUT", "/v1/models/bad-model/versions/01", body=small, headers={"Content-Type": sct}).status == 422
    assert not os.path.exists(os.path.join(SRV.data_dir, "models", "bad-model"))
    assert leftovers() == [], leftovers()
    names = [m["name"] for m in c.json("GET", "/v1/models", expect=200)["models"]]
    assert "bad-model" not in names


def test_model_upload_and_delete():
    c = SRV.client()
    with open(os.path.join(SRV.data_dir, "models", DEMO, "config.json"), "rb") as f:
        cfg = json.loads(f.read())
    with open(os.path.join(SRV.data_dir, "models", DEMO, "1", "model.onnx"), "rb") as f:
        onnx = f.read()
    cfg["name"] = "demo-copy"
    body, ct = multipart_form([("model", "model.onnx", onnx), ("config", "config.json", json.dumps(cfg).encode())])
    r = c.request("PUT", "/v1/models/demo-copy/versions/3", body=body, headers={"Content-Type": ct})
    assert r.status == 201, r
    assert r.json()["name"] == "demo-copy" and r.json()["versions"][0]["version"] == 3
    assert r.headers["location"] == "/v1/models/demo-copy/versions/3"
    small, sct = multipart_form([("model", "model.onnx", b"x" * 100)])
    r = c.request("PUT", "/v1/models/demo-copy/versions/3", body=small, headers={"Content-Type": sct})
    assert r.status == 409, r
    # a second version of an existing model: its config is optional
    body2, ct2 = multipart_form([("model", "model.onnx", onnx)])
    r = c.request("PUT", "/v1/models/demo-copy/versions/4", body=body2, headers={"Content-Type": ct2})
    assert r.status == 201, r
    assert [v["version"] for v in r.json()["versions"]] == [3, 4]
    assert c.json("POST", "/v1/models/demo-copy/load?version=4", expect=200)
    assert c.request("DELETE", "/v1/models/demo-copy/versions/4").status == 204
    assert c.request("DELETE", "/v1/models/demo-copy/versions/4").status == 404
    assert c.request("DELETE", "/v1/models/demo-copy/versions/3").status == 204
    names = [m["name"] for m in c.json("GET", "/v1/models", expect=200)["models"]]
    assert "demo-copy" not in names
    assert leftovers() == [], leftovers()


def test_stow_errors():
    c = SRV.client()
    a1 = FILES["a1"][0]
    # Refused before the body is read: small bodies, so that the early answer does not race
    # the client's upload (the server may close the connection while a large body is still sent).
    tiny = b"DICM" * 16
    r = c.request("POST", "/dicomweb/studies", body=tiny, headers={"Content-Type": "application/dicom"})
    assert r.status == 415, r
    body, ct = related([("application/dicom", tiny)], type_param='"application/dicom+xml"')
    assert c.request("POST", "/dicomweb/studies", body=body, headers={"Content-Type": ct}).status == 415
    body, ct = related([("application/dicom", tiny)])
    assert c.request("POST", "/dicomweb/studies", body=body, headers={"Content-Type": ct}, key="").status == 401
    r = c.request("POST", "/dicomweb/studies?model=no-such-model", body=body, headers={"Content-Type": ct})
    assert r.status == 404, r
    assert c.request("POST", "/dicomweb/studies/not-a-uid", body=body, headers={"Content-Type": ct}).status == 400
    body, ct = related([("application/dicom", a1)])
    # missing final boundary
    r = c.request("POST", "/dicomweb/studies", body=body[: body.rindex(b"--gjstow")],
                  headers={"Content-Type": ct})
    assert r.status == 400, r
    # the study in the path must match: every instance fails -> 409, nothing stored
    before = H.scalar("SELECT count(*) FROM jobs")
    blobs = H.scalar("SELECT count(*) FROM blobs")
    r = stow(c, [("application/dicom", a1)], path="/dicomweb/studies/1.2.3.4")
    assert r.status == 409, r
    failed = seq(r.json(), "00081198")
    assert failed[0]["00081197"]["Value"] == [0xA900] and failed[0]["00081155"]["Value"] == [FILES["a1"][1]]
    r = stow(c, [("text/plain", b"hello")])
    assert r.status == 409 and seq(r.json(), "00081198")[0]["00081197"]["Value"] == [0xC000], r
    assert H.scalar("SELECT count(*) FROM jobs") == before
    assert H.scalar("SELECT count(*) FROM blobs") == blobs
    # the study in the path matches
    r = stow(c, [("application/dicom", a1)], path="/dicomweb/studies/" + STUDY_A)
    assert r.status == 200, r
    assert r.json()["00081190"]["Value"][0].endswith("/dicomweb/studies/" + STUDY_A)
    for j in re.findall(r"/v1/jobs/([0-9a-f-]{36})", r.headers.get("link", "")):
        c.wait_job(j, timeout=180)
    # the same instance twice in one request
    r = stow(c, [("application/dicom", a1), ("application/dicom", a1)])
    assert r.status == 202 and seq(r.json(), "00081198")[0]["00081197"]["Value"] == [0x0111], r
    for j in re.findall(r"/v1/jobs/([0-9a-f-]{36})", r.headers.get("link", "")):
        c.wait_job(j, timeout=180)


def test_tenant_isolation():
    c = SRV.client()
    other = c.json("POST", "/v1/api-keys", {"tenant": "hospital-b", "role": "user"}, expect=201)["key"]
    b = SRV.client(key=other)
    assert b.json("GET", "/v1/inference-results", expect=200)["results"] == []
    mine_before = len(c.json("GET", "/v1/inference-results?limit=1000", expect=200)["results"])
    # AcquisitionDateTime (DT, its offset dropped) wins over ContentDate/Time
    data, sop = make_dicom("t1", "1.2.826.0.1.3680043.8.498.2001", 7,
                           extra=[("0008,002A", "20220115093000.5+0100"), ("0008,0023", "20200101"),
                                  ("0008,0033", "120000")])
    data2, sop2 = make_dicom("t2", "1.2.826.0.1.3680043.8.498.2001", 8,
                             extra=[("0008,0023", "20200101"), ("0008,0033", "1200")])
    r = stow(b, [("application/dicom", data), ("application/dicom", data2)])
    assert r.status == 200, r
    jobs = re.findall(r"/v1/jobs/([0-9a-f-]{36})", r.headers["link"])
    assert len(jobs) == 1, r.headers      # one study, one job
    job = jobs[0]
    assert b.wait_job(job, timeout=180)["state"] == "succeeded"
    assert c.request("GET", f"/v1/jobs/{job}").status == 404    # another tenant's job: not found
    theirs = b.json("GET", "/v1/inference-results", expect=200)["results"]
    assert len(theirs) == 2, theirs
    acq = {x["image_key"]: x["acquired_at"] for x in theirs}
    assert acq == {key_of(sop): "2022-01-15T09:30:00.500000", key_of(sop2): "2020-01-01T12:00:00.000000"}, acq
    mine = c.json("GET", "/v1/inference-results?limit=1000", expect=200)["results"]
    assert len(mine) == mine_before and all(x["job_id"] != job for x in mine)
    csv_b = b.request("GET", "/v1/inference-results?format=csv").body.decode()
    assert len(list(csv.reader(io.StringIO(csv_b)))) == 3


def test_secret_shared_and_override():
    """A second replica on the same database reads the same secret; GPUJOBD_PSEUDONYM_SECRET overrides it."""
    s1 = secret()
    srv2 = H.start_server(["--role", "api"])
    assert secret() == s1
    assert H.scalar("SELECT count(*) FROM server_secrets") == "1"
    srv2.terminate()
    srv3 = H.start_server(["--role", "api"], env={"GPUJOBD_PSEUDONYM_SECRET": "short"}, wait=False)
    assert srv3.proc.wait(60) != 0
    assert "GPUJOBD_PSEUDONYM_SECRET" in srv3.log_text()


def test_default_mode_keeps_what_was_uploaded():
    """Without GPUJOBD_INFER_PURGE_PHI the job's inputs and its result.json stay as they were;
    only the results table is pseudonymous."""
    h2 = Harness()   # its own database: the strict-mode server must not take the job
    try:
        _keeps_uploads(h2)
    finally:
        h2.close()


def _keeps_uploads(h2):
    srv = h2.start_server(["--cpu-workers", "1"])
    c = srv.client()
    d, sop = make_dicom("keep1", "1.2.826.0.1.3680043.8.498.1077", 7)
    r = stow(c, [("application/dicom", d)])
    assert r.status == 200, r
    job_id = seq(r.json(), "00091010")[0]["00091011"]["Value"][0].rsplit("/", 1)[1]
    job = c.wait_job(job_id, timeout=180)
    assert job["state"] == "succeeded", job
    assert list(job["inputs"]) == ["dicom"], job
    assert c.request("GET", f"/v1/blobs/{job['inputs']['dicom']}").body == d
    doc = c.json("GET", f"/v1/jobs/{job_id}/outputs/result.json", expect=200)
    assert doc["images"][0]["sop_instance_uid"] == sop, doc
    # what the results table needs is in result.json (the finish reads nothing else)
    acquired = h2.scalar(f"SELECT to_char(acquired_at, 'YYYY-MM-DD HH24:MI:SS') FROM inference_results"
                         f" WHERE job_id = '{job_id}'")
    assert "acquired_at" in doc["images"][0], doc
    assert (doc["images"][0]["acquired_at"] or "")[:19] == (acquired or ""), (doc, acquired)
    assert h2.scalar(f"SELECT count(*) FROM inference_results WHERE job_id = '{job_id}'"
                     f" AND study_key IS NOT NULL AND image_key IS NOT NULL") == "1"
    assert h2.scalar("SELECT count(*) FROM inference_results WHERE study_key LIKE '1.2.%'") == "0"
    assert PATIENT_NAME not in srv.log_text()


def test_log_clean_at_end():
    """After every request above: no patient name or id in the log. Study UIDs appear only in
    the HTTP layer's "path" field of STOW-RS requests to /dicomweb/studies/{study} (the UID is
    in the URL; redacting it is the HTTP logger's to do), nowhere else."""
    text = SRV.log_text()
    assert PATIENT_NAME not in text and "Doe" not in text
    assert not re.search(r"(?<![0-9A-Za-z])12345(?![0-9A-Za-z])", text)
    uids = [STUDY_A, STUDY_B] + [FILES[k][1] for k in FILES] + [FILES[k][2] for k in FILES]
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            rec = {"raw": line}
        if rec.get("component") == "http" and str(rec.get("path", "")).startswith("/dicomweb/studies/"):
            rec.pop("path")
        flat = json.dumps(rec)
        for u in uids:
            assert u not in flat, (u, line)


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_demo_model_seeded_and_listed, test_stow_creates_jobs_and_results,
                   test_no_patient_data_anywhere, test_results_json_filters_and_cursor, test_results_csv,
                   test_model_load_unload_and_roles, test_job_cannot_name_a_models_dir, test_bad_model_upload_refused, test_model_upload_and_delete,
                   test_stow_errors, test_tenant_isolation, test_secret_shared_and_override,
                   test_default_mode_keeps_what_was_uploaded,
                   test_log_clean_at_end])
    finally:
        H.close()
        shutil.rmtree(TMP, ignore_errors=True)
