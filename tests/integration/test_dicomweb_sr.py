"""An `infer` job's Structured Report as an instance of the tenant, over real HTTPS: a
chest radiograph made with DCMTK stored by STOW-RS, the job runs; its output result.dcm is
an SR (DCMTK's dsrdump reads it) in the image's study, QIDO-RS finds it there (Modality
SR, its own series), WADO-RS returns the same bytes as the job's output; the SR sent back
by STOW-RS (as a PACS forwarding the whole study would) is acknowledged as already stored
and makes no job; another tenant sees none of it."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402
import test_inference_api as dcm  # noqa: E402  (make_dicom, stow, seq: the DCMTK-made instances)
from test_dicomweb_query import jobs_of, parts_of, qido, uids  # noqa: E402

H = None
SRV = None
STUDY = "1.2.826.0.1.3680043.8.498.4001"
SER = "1.2.826.0.1.3680043.8.498.4001.1"
S = {}   # what the tests share: the image, the job, the report


def setup():
    global H, SRV
    H = Harness()
    dcm.TMP = tempfile.mkdtemp(prefix="gj-sr-")
    SRV = H.start_server(["--cpu-workers", "1"])
    S["image"], S["image_sop"] = dcm.make_dicom("sr_a", STUDY, 21, extra=[("0020,000E", SER),
                                                                         ("0010,0030", "19700101")])


def test_job_writes_report():
    c = SRV.client()
    r = dcm.stow(c, [("application/dicom", S["image"])])
    assert r.status == 200 and len(jobs_of(r)) == 1, r
    job = c.wait_job(jobs_of(r)[0], timeout=180)
    assert job["state"] == "succeeded", job
    S["job"] = job["id"]
    doc = c.json("GET", f"/v1/jobs/{job['id']}/outputs/result.json", expect=200)
    assert len(doc["reports"]) == 1 and doc["reports"][0]["output"] == "result.dcm", doc["reports"]
    S["report"] = doc["reports"][0]
    res = c.request("GET", f"/v1/jobs/{job['id']}/outputs/result.dcm")
    assert res.status == 200, res
    S["sr"] = res.body
    path = os.path.join(dcm.TMP, "result.dcm")
    with open(path, "wb") as f:
        f.write(res.body)
    text = subprocess.run(["dsrdump", "-Ec", "+Pu", path], capture_output=True, text=True, check=True).stdout
    assert "Comprehensive SR Document" in text and S["image_sop"] in text, text
    assert "Doe^Jane" in text, text   # the image's patient, so the PACS files it with the study
    top = doc["studies"][0]["top_label"]
    assert re.search(r'"Finding"\)=\(' + re.escape(top) + ",", text), (top, text)


def test_qido_and_wado_find_report():
    c = SRV.client()
    series = qido(c, f"/dicomweb/studies/{STUDY}/series").json()
    by_modality = {s["00080060"]["Value"][0]: s["0020000E"]["Value"][0] for s in series}
    assert set(by_modality) == {"DX", "SR"} and by_modality["DX"] == SER, series
    assert by_modality["SR"] == S["report"]["series_instance_uid"], (series, S["report"])
    sr_series = by_modality["SR"]
    inst = qido(c, f"/dicomweb/studies/{STUDY}/series/{sr_series}/instances").json()
    assert uids(qido(c, f"/dicomweb/studies/{STUDY}/series/{sr_series}/instances"), "00080018") == \
        [S["report"]["sop_instance_uid"]], inst
    assert qido(c, f"/dicomweb/studies?StudyInstanceUID={STUDY}").json()[0]["00080061"]["Value"] == ["DX", "SR"]
    r = qido(c, f"/dicomweb/studies/{STUDY}/series/{sr_series}/instances/{S['report']['sop_instance_uid']}",
             headers={"Accept": 'multipart/related; type="application/dicom"'})
    assert parts_of(r) == [S["sr"]]
    m = qido(c, f"/dicomweb/studies/{STUDY}/series/{sr_series}/metadata").json()[0]
    assert m["00100020"]["Value"] == [dcm.PATIENT_ID] and m["00080016"]["Value"] == ["1.2.840.10008.5.1.4.1.1.88.33"], m
    # every attribute, the content tree nested as DCMTK's dcm2json reads the same report
    import json
    import test_wado_metadata as meta
    theirs = json.loads(subprocess.run(["dcm2json", os.path.join(dcm.TMP, "result.dcm")], check=True,
                                       capture_output=True).stdout)
    meta.compare(m, theirs)
    assert m["0040A730"]["Value"] and m["0040A730"]["vr"] == "SQ", m.get("0040A730")


def test_report_sent_back_makes_no_job():
    c = SRV.client()
    jobs = H.scalar("SELECT count(*) FROM jobs")
    r = dcm.stow(c, [("application/dicom", S["sr"]), ("application/dicom", S["image"])])
    assert r.status == 202 and not jobs_of(r), r
    refs = dcm.seq(r.json(), "00081199")
    assert len(refs) == 2 and all(i["00081196"] == {"vr": "US", "Value": [0xB111]} for i in refs), refs
    assert H.scalar("SELECT count(*) FROM jobs") == jobs


def test_tenant_isolation():
    c = SRV.client()
    other = c.json("POST", "/v1/api-keys", {"tenant": "sr-other", "role": "user"}, expect=201)["key"]
    b = SRV.client(key=other)
    assert qido(b, f"/dicomweb/studies/{STUDY}/series").json() == []
    qido(b, f"/dicomweb/studies/{STUDY}/series/{S['report']['series_instance_uid']}/instances/"
            f"{S['report']['sop_instance_uid']}", status=404, headers={})


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_job_writes_report, test_qido_and_wado_find_report, test_report_sent_back_makes_no_job,
                   test_tenant_isolation])
    finally:
        H.close()
        shutil.rmtree(dcm.TMP, ignore_errors=True)
