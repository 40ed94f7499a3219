"""The npm dicomweb-client library (tests/dicomweb_client/client.mjs, run by Debian's node
through tests/deploy/run_node.sh, which installs package-lock.json's packages) against a
real `gpujobd serve` over HTTPS: storeInstances of two DCMTK-made instances of one study
(the first sent twice: one job for it, one for the second, none for the re-send),
searchForStudies (all, by PatientID, none, with includefield), searchForSeries,
searchForInstances, retrieveStudyMetadata (every attribute, Pixel Data left out),
retrieveInstanceRendered with a window (and a 400 for a bad one) and retrieveInstance
(the bytes stored, and a 404)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import Harness, run_tests  # noqa: E402
import test_inference_api as dcm  # noqa: E402  (make_dicom: img2dcm + dcmodify)

STUDY = "1.2.826.0.1.3680043.8.498.4001"
SERIES = "1.2.826.0.1.3680043.8.498.4001.1"
H = SRV = None


def test_dicomweb_client():
    extra = [("0010,0020", "PAT-NPM"), ("0020,000E", SERIES), ("0008,1030", "Chest")]
    sops, files = [], []
    for i in (1, 2):
        _, sop = dcm.make_dicom(f"npm{i}", STUDY, 40 + i, extra=extra + [("0020,0013", str(i))])
        sops.append(sop)
        files.append(os.path.join(dcm.TMP, f"npm{i}.dcm"))
    cfg = {"url": f"https://127.0.0.1:{SRV.port}/dicomweb", "key": SRV.admin_key, "study": STUDY,
           "series": SERIES, "sops": sops, "files": files, "patientId": "PAT-NPM"}
    env = dict(os.environ, GJ_DICOMWEB_TEST=json.dumps(cfg), GJ_NODE_PACKAGES=HERE,
               NODE_EXTRA_CA_CERTS=os.path.join(SRV.data_dir, "tls", "cert.pem"))
    run = subprocess.run(["sh", os.path.join(HERE, "..", "deploy", "run_node.sh"), os.path.join(HERE, "client.mjs")],
                         env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["studies"] == [STUDY], out
    assert out["byPatient"] == [[STUDY, 2]] and out["none"] == [], out
    assert out["series"] == [SERIES] and out["instances"] == sops, out
    assert out["metadata"] == [[sops[0], "PAT-NPM"], [sops[1], "PAT-NPM"]], out
    assert out["metadataAttrs"] == [320, 8, False], out          # Rows, BitsAllocated; no Pixel Data
    assert out["includefield"] == [["Chest", "PAT-NPM"]] and out["defaultFields"] == [False], out
    assert out["renderedPng"] == "PNG" and out["badWindow"] == 400, out
    assert out["instanceSame"] is True and out["missing"] == 404, out
    # storeInstances made one job per new instance set; the re-sent one made none
    assert H.scalar("SELECT count(*) FROM jobs") == "2"
    assert H.scalar("SELECT count(*) FROM dicom_instances") == "2"
    assert H.scalar("SELECT count(*) FROM blobs") == "2"


if __name__ == "__main__":
    H = Harness()
    dcm.TMP = tempfile.mkdtemp(prefix="gj-dwc-")
    try:
        SRV = H.start_server(["--role", "api"])
        run_tests([test_dicomweb_client])
    finally:
        H.close()
        shutil.rmtree(dcm.TMP, ignore_errors=True)
