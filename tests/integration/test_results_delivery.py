"""Structured Reports delivered by STOW-RS to a real PACS (Debian's Orthanc with its
DICOMweb plugin) with --results-dicomweb-url and an auth header from a file: the PACS is
down when the job succeeds (the delivery stays pending, retried, the error on the job),
then up (the report arrives, in the image's study, checked through Orthanc's REST API;
the job says delivered). Nothing is lost. Another tenant cannot see the deliveries."""
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402
import test_inference_api as dcm  # noqa: E402  (make_dicom, stow, seq)
from test_dicomweb_query import jobs_of  # noqa: E402

ORTHANC = shutil.which("Orthanc")
PLUGIN = "/usr/share/orthanc/plugins/libOrthancDicomWeb.so"
USER, PASSWORD = "gpujobd", "pacs-secret-1"
STUDY = "1.2.826.0.1.3680043.8.498.5001"
H = None
SRV = None
S = {}


def free_ports(n):
    """n distinct free ports (held open together, so the system cannot hand out one twice)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def setup():
    global H, SRV
    H = Harness()
    dcm.TMP = tempfile.mkdtemp(prefix="gj-deliver-")
    gj_port, S["port"] = free_ports(2)   # gpujobd's and Orthanc's, distinct
    auth = os.path.join(dcm.TMP, "pacs-auth")
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    with open(os.open(auth, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(f"Authorization: Basic {token}\n")
    SRV = H.start_server(["--cpu-workers", "1", "--results-dicomweb-url", f"http://127.0.0.1:{S['port']}/dicom-web/",
                          "--results-dicomweb-auth-file", auth, "--results-dicomweb-retry-ms", "300"], port=gj_port)


def start_orthanc():
    """Orthanc on the HTTP port gpujobd sends to; its DICOM port (unused here) is picked
    again when another process took it first."""
    d = os.path.join(dcm.TMP, "orthanc")
    os.makedirs(d, exist_ok=True)
    S["log"] = open(os.path.join(dcm.TMP, "orthanc.log"), "ab")
    for _ in range(3):
        cfg = {"Name": "gj-test", "StorageDirectory": d, "IndexDirectory": d, "HttpPort": S["port"],
               "DicomPort": next(p for p in free_ports(3) if p not in (S["port"], SRV.port)), "RemoteAccessAllowed": False, "AuthenticationEnabled": True,
               "RegisteredUsers": {USER: PASSWORD}, "Plugins": [PLUGIN],
               "DicomWeb": {"Enable": True, "Root": "/dicom-web/"}}
        path = os.path.join(dcm.TMP, "orthanc.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        S["orthanc"] = subprocess.Popen([ORTHANC, path], stdout=S["log"], stderr=subprocess.STDOUT)
        t0 = time.time()
        while time.time() - t0 < 30 and S["orthanc"].poll() is None:
            try:
                orthanc("/system")
                return
            except OSError:
                time.sleep(0.1)
        S["orthanc"].kill()
        S["orthanc"].wait()
    with open(os.path.join(dcm.TMP, "orthanc.log"), errors="replace") as f:
        raise AssertionError("Orthanc did not start: " + f.read()[-1500:])


def orthanc(path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{S['port']}{path}", data=body)
    req.add_header("Authorization", "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def deliveries(client=None, expect=200):
    return (client or SRV.client()).json("GET", f"/v1/jobs/{S['job']}/deliveries", expect=expect)


def events_text():
    """The job's history (Server-Sent Events, replayed to a client that does not wait)."""
    r = SRV.client().request("GET", f"/v1/jobs/{S['job']}/events")
    assert r.status == 200, r
    return r.body.decode()


def wait_for(pred, timeout=30):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_pacs_down_delays_delivery():
    c = SRV.client()
    image, _ = dcm.make_dicom("dl_a", STUDY, 31)
    r = dcm.stow(c, [("application/dicom", image)])
    assert r.status == 200 and len(jobs_of(r)) == 1, r
    job = c.wait_job(jobs_of(r)[0], timeout=180)
    assert job["state"] == "succeeded", job
    S["job"] = job["id"]
    S["report"] = c.json("GET", f"/v1/jobs/{job['id']}/outputs/result.json", expect=200)["reports"][0]
    d = wait_for(lambda: (x := deliveries()["deliveries"]) and x[0]["attempts"] >= 3 and x)
    assert len(d) == 1 and d[0]["output"] == "result.dcm" and d[0]["state"] == "pending", d
    assert d[0]["last_status"] is None and d[0]["last_error"] and d[0]["next_attempt_at"], d
    assert "not delivered yet" in events_text(), events_text()


def test_pacs_up_receives_report():
    start_orthanc()
    d = wait_for(lambda: (x := deliveries()["deliveries"]) and x[0]["state"] == "delivered" and x, timeout=30)
    assert d[0]["last_status"] == 200 and d[0]["delivered_at"] and d[0]["next_attempt_at"] is None, d
    found = orthanc("/tools/find", json.dumps({"Level": "Instance", "Query": {
        "SOPInstanceUID": S["report"]["sop_instance_uid"]}}).encode())
    assert len(found) == 1, found
    tags = orthanc(f"/instances/{found[0]}/simplified-tags")
    assert tags["StudyInstanceUID"] == STUDY and tags["Modality"] == "SR", tags
    assert tags["SOPClassUID"] == "1.2.840.10008.5.1.4.1.1.88.33" and tags["PatientID"] == dcm.PATIENT_ID, tags
    assert "delivered to the results PACS" in events_text(), events_text()
    # delivered once: nothing more is sent
    time.sleep(1)
    assert deliveries()["deliveries"][0]["attempts"] == d[0]["attempts"]


def test_tenant_isolation():
    c = SRV.client()
    other = c.json("POST", "/v1/api-keys", {"tenant": "deliver-other", "role": "user"}, expect=201)["key"]
    deliveries(SRV.client(key=other), expect=404)
    SRV.client().json("GET", "/v1/jobs/not-a-job/deliveries", expect=404)


def test_log_clean():
    text = SRV.log_text()
    assert PASSWORD not in text and base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode() not in text
    assert dcm.PATIENT_NAME not in text


if __name__ == "__main__":
    if not ORTHANC or not os.path.exists(PLUGIN):
        print("Orthanc or its DICOMweb plugin is not installed (Debian orthanc, orthanc-dicomweb)")
        sys.exit(77)
    try:
        setup()
        run_tests([test_pacs_down_delays_delivery, test_pacs_up_receives_report, test_tenant_isolation,
                   test_log_clean])
    finally:
        if S.get("orthanc"):
            S["orthanc"].terminate()
            S["orthanc"].wait(timeout=30)
        if S.get("log"):
            S["log"].close()
        if H:
            H.close()
        shutil.rmtree(dcm.TMP, ignore_errors=True)
