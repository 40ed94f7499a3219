"""The hospital pipeline with real parts: DCMTK's storescu sends a chest radiograph (DX,
CHEST, PA) to Debian's Orthanc by C-STORE; Orthanc, configured with deploy/orthanc/
(orthanc.json, forward-to-gpujobd.lua: unchanged but for ports, directories and a short
StableAge), forwards the stable study to gpujobd by STOW-RS over HTTPS with the tenant's
key; the job runs; gpujobd delivers its Structured Report back to Orthanc by STOW-RS
(--results-dicomweb-url); the report is in Orthanc in the same study (Orthanc's REST API);
QIDO-RS on gpujobd returns the study; forwarding the study again (now with the report)
makes no second job."""
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
import test_inference_api as dcm  # noqa: E402  (make_dicom)

ROOT = os.environ.get("GJ_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy", "orthanc")
ORTHANC = shutil.which("Orthanc")
PLUGIN = "/usr/share/orthanc/plugins/libOrthancDicomWeb.so"
PASSWORD = "orthanc-pw-42"
STUDY = "1.2.826.0.1.3680043.8.498.6001"
STABLE_AGE = 1      # seconds (deploy/orthanc/orthanc.json says 10)
CPU_WORKERS = 1
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


def basic():
    return "Basic " + base64.b64encode(f"gpujobd:{PASSWORD}".encode()).decode()


def orthanc(path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{S['http']}{path}", data=body)
    req.add_header("Authorization", basic())
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def wait_for(pred, timeout, what):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def infer_jobs():
    return int(H.scalar("SELECT count(*) FROM jobs WHERE kind = 'infer'"))


def setup():
    global H
    H = Harness()
    dcm.TMP = tempfile.mkdtemp(prefix="gj-orthanc-")
    auth = os.path.join(dcm.TMP, "pacs-auth")
    with open(os.open(auth, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(f"Authorization: {basic()}\n")
    # Orthanc's ports are picked free, then bound by Orthanc: another process may take one
    # in between (helpers' tests run side by side); then both start again on new ports.
    for _ in range(3):
        if start_pair(auth):
            return
    raise AssertionError("Orthanc did not start (see its log)")


def start_pair(auth):
    """gpujobd (sending reports to Orthanc's port) and Orthanc: True when both are up."""
    global SRV
    if SRV:
        SRV.terminate()
    gj_port, S["http"], S["dicom"] = free_ports(3)
    SRV = H.start_server(["--cpu-workers", str(CPU_WORKERS), "--results-dicomweb-url",
                          f"http://127.0.0.1:{S['http']}/dicom-web", "--results-dicomweb-auth-file", auth,
                          "--results-dicomweb-retry-ms", "500"], port=gj_port)
    S.setdefault("admin", SRV.admin_key)   # written by the first server on the database only
    key = SRV.client(key=S["admin"]).json("POST", "/v1/api-keys", {"tenant": "hospital", "role": "user"},
                                          expect=201)["key"]
    S["key"] = key
    with open(os.path.join(DEPLOY, "orthanc.json")) as f:
        cfg = json.load(f)
    store = os.path.join(dcm.TMP, "orthanc-db")
    cfg.update({"StorageDirectory": store, "IndexDirectory": store, "HttpPort": S["http"], "DicomPort": S["dicom"],
                "RemoteAccessAllowed": False, "StableAge": STABLE_AGE,
                "LuaScripts": [os.path.join(DEPLOY, "forward-to-gpujobd.lua")]})
    path = os.path.join(dcm.TMP, "orthanc.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    env = dict(os.environ, ORTHANC_GPUJOBD_PASSWORD=PASSWORD, GPUJOBD_API_KEY=key,
               GPUJOBD_DICOMWEB_URL=f"https://127.0.0.1:{SRV.port}/dicomweb/",
               GPUJOBD_CA_FILE=os.path.join(SRV.data_dir, "tls", "cert.pem"))
    if S.get("orthanc_log"):
        S["orthanc_log"].close()
    S["orthanc_log"] = open(os.path.join(dcm.TMP, "orthanc.log"), "ab")
    S["orthanc"] = subprocess.Popen([ORTHANC, path], stdout=S["orthanc_log"], stderr=subprocess.STDOUT, env=env)
    t0 = time.time()
    while time.time() - t0 < 30 and S["orthanc"].poll() is None:
        try:
            orthanc("/system")
            return True
        except OSError:
            time.sleep(0.1)
    S["orthanc"].kill()
    S["orthanc"].wait()
    return False


def test_cstore_to_report_in_pacs():
    image, sop = dcm.make_dicom("or_a", STUDY, 41)
    S["sop"] = sop
    path = os.path.join(dcm.TMP, "or_a.dcm")
    r = subprocess.run(["storescu", "-aec", "ORTHANC", "127.0.0.1", str(S["dicom"]), path],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # Orthanc forwards the stable study; gpujobd makes one job, which succeeds
    wait_for(lambda: H.scalar("SELECT count(*) FROM jobs WHERE kind = 'infer' AND state = 'succeeded'") == "1",
             120, "the infer job")
    S["jobs"] = infer_jobs()
    # the report comes back into the same study in Orthanc
    def report_in_orthanc():
        found = orthanc("/tools/find", json.dumps({"Level": "Instance", "Query": {"Modality": "SR"}}).encode())
        return found or None
    found = wait_for(report_in_orthanc, 60, "the report in Orthanc")
    tags = orthanc(f"/instances/{found[0]}/simplified-tags")
    assert tags["StudyInstanceUID"] == STUDY and tags["SOPClassUID"] == "1.2.840.10008.5.1.4.1.1.88.33", tags
    assert tags["PatientID"] == dcm.PATIENT_ID, tags
    studies = orthanc("/studies")
    assert len(studies) == 1, studies   # the same study, not a new one
    S["study_id"] = studies[0]
    # QIDO-RS on gpujobd returns the study, with the image and the report
    c = SRV.client(key=S["key"])
    r = c.request("GET", f"/dicomweb/studies?StudyInstanceUID={STUDY}", headers={"Accept": "application/dicom+json"})
    assert r.status == 200 and len(r.json()) == 1, r
    assert r.json()[0]["00080061"]["Value"] == ["DX", "SR"], r.json()


def test_forwarding_again_makes_no_job():
    # the study now holds the report; Orthanc forwards it again when it is stable again, and
    # an operator may too: gpujobd acknowledges what it has, and makes no job
    orthanc("/dicom-web/servers/gpujobd/stow", json.dumps({"Resources": [S["study_id"]],
                                                           "Synchronous": True}).encode())
    time.sleep(3)   # past StableAge: the Lua forward of the changed study has run too
    assert infer_jobs() == S["jobs"], H.sql("SELECT kind, state FROM jobs")
    assert H.scalar("SELECT count(*) FROM dicom_instances") == "2"   # the image and its report
    assert H.scalar("SELECT count(*) FROM report_deliveries WHERE state = 'delivered'") == "1"


def teardown():
    if S.get("orthanc"):
        S["orthanc"].terminate()
        S["orthanc"].wait(timeout=30)
    if S.get("orthanc_log"):
        S["orthanc_log"].close()
        if os.environ.get("GJ_KEEP_ORTHANC_LOG"):
            shutil.copy(os.path.join(dcm.TMP, "orthanc.log"), "/tmp/gj-orthanc.log")
    if H:
        H.close()
    shutil.rmtree(dcm.TMP, ignore_errors=True)


if __name__ == "__main__":
    if not ORTHANC or not os.path.exists(PLUGIN) or not shutil.which("storescu"):
        print("Orthanc, its DICOMweb plugin or DCMTK's storescu is not installed")
        sys.exit(77)
    try:
        setup()
        run_tests([test_cstore_to_report_in_pacs, test_forwarding_again_makes_no_job])
    finally:
        teardown()
