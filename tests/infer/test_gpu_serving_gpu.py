"""GPU suite: the demo model served on a GPU (instance_group KIND_GPU, fp32, CUDA graphs)
against the same model on the CPU (KIND_CPU), in one real server (PostgreSQL + HTTPS via
the integration harness): /v2/models/{m}/ready says it is on a GPU, /v2 infer of random
batches and `infer` jobs on a DICOM file give the CPU's results within 1e-4 relative L2,
the job ran on the GPU (result.json "device"), and gpujobd_nv_gpu_memory_used_bytes rose
once the model was loaded. Exits 77 (skipped) without a GPU, or when the build has no
CUDA backend."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

SRC = os.environ.get("GJ_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
from harness import Harness, run_tests  # noqa: E402

DEMO = "chest-xray-demo"
ONNX = os.path.join(SRC, "models", DEMO, "1", "model.onnx")
H = SRV = TMP = None
USED_BEFORE = None


def skip(why):
    print(f"SKIP: {why}", flush=True)
    sys.exit(77)


def have_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    r = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return r.returncode == 0 and "GPU" in r.stdout


def write_model(data_dir, name, group):
    d = os.path.join(data_dir, "models", name)
    os.makedirs(os.path.join(d, "1"))
    shutil.copy(ONNX, os.path.join(d, "1", "model.onnx"))
    with open(os.path.join(SRC, "models", DEMO, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("name", None)
    cfg.pop("instances_per_device", None)
    cfg.update(instance_group=group, precision="fp32", cuda_graphs=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)


def used_bytes():
    text = SRV.client().request("GET", "/metrics").body.decode()
    vals = [float(v) for v in re.findall(r"^gpujobd_nv_gpu_memory_used_bytes\{[^}]*\} (\S+)$",
                                         text, re.M)]
    assert vals, "no gpujobd_nv_gpu_memory_used_bytes series (NVML missing?)"
    return sum(vals)


def setup():
    global H, SRV, TMP, USED_BEFORE
    if not have_gpu():
        skip("no GPU (nvidia-smi -L)")
    H = Harness()
    TMP = tempfile.mkdtemp(prefix="gj-gpu-infer-")
    d = os.path.join(H.tmp, "srv")
    write_model(d, "demo-gpu", {"kind": "KIND_GPU", "count": 1})
    write_model(d, "demo-cpu", {"kind": "KIND_CPU", "count": 1})
    SRV = H.start_server(["--cpu-workers", "1"], data_dir=d, env={"GPUJOBD_INFER_THREADS": "4"})
    gpus = SRV.client().json("GET", "/v1/gpus", expect=200)["gpus"]
    if not [g for g in gpus if not g.get("simulated")]:
        skip("the server sees no GPU (a build without CUDA?)")
    USED_BEFORE = used_bytes()
    r = SRV.client().request("POST", "/v1/models/demo-gpu/load")   # readiness never loads
    if r.status == 503 and "no CUDA backend" in r.json().get("detail", ""):
        skip(r.json()["detail"])


def rel_l2(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def test_ready_on_gpu():
    r = SRV.client().json("GET", "/v2/models/demo-gpu/ready", expect=200)
    assert r["ready"] and r["devices"] and all(d.startswith("gpu:") for d in r["devices"]), r
    md = SRV.client().json("GET", "/v2/models/demo-gpu", expect=200)
    assert md["parameters"]["devices"].startswith("gpu:"), md
    models = {m["name"]: m for m in SRV.client().json("GET", "/v1/models")["models"]}
    assert models["demo-gpu"]["versions"][0]["devices"] == r["devices"], models["demo-gpu"]


def infer(model, x):
    raw = np.ascontiguousarray(x, dtype="<f4").tobytes()
    head = json.dumps({"inputs": [{"name": "image", "shape": list(x.shape), "datatype": "FP32",
                                   "parameters": {"binary_data_size": len(raw)}}],
                       "outputs": [{"name": "logits"}]}).encode()
    r = SRV.client().request("POST", f"/v2/models/{model}/infer", body=head + raw,
                             headers={"Inference-Header-Content-Length": str(len(head))})
    assert r.status == 200, r
    out = r.json()["outputs"][0]
    return np.asarray(out["data"], np.float32).reshape(out["shape"])


def test_v2_infer_equals_cpu():
    rng = np.random.RandomState(11)
    for n in (1, 3, 8):
        x = rng.normal(0, 1, size=(n, 1, 256, 256)).astype(np.float32)
        g, c = infer("demo-gpu", x), infer("demo-cpu", x)
        err = rel_l2(g, c)
        print(f"    batch {n}: relative L2 GPU vs CPU {err:.2e}")
        assert err <= 1e-4, (n, err)


def make_dicom():
    from PIL import Image
    rng = np.random.RandomState(5)
    h, w = 320, 288
    y, x = np.mgrid[0:h, 0:w]
    img = 60 + 120 * np.exp(-(((x - w / 2) / (w / 3)) ** 2 + ((y - h / 2) / (h / 2.5)) ** 2))
    img += rng.normal(0, 8, size=img.shape)
    bmp, dcm = os.path.join(TMP, "x.bmp"), os.path.join(TMP, "x.dcm")
    Image.fromarray(np.clip(img, 0, 255).astype("uint8"), "L").save(bmp)
    subprocess.run(["img2dcm", "-i", "BMP", bmp, dcm], check=True, capture_output=True)
    subprocess.run(["dcmodify", "-nb", "-i", "(0008,0060)=DX", "-i", "(0018,0015)=CHEST",
                    "-i", "(0018,5101)=PA", dcm], check=True, capture_output=True)
    with open(dcm, "rb") as f:
        return f.read()


def job_scores(model, data):
    c = SRV.client()
    blob = c.upload(data, "application/dicom")
    job = c.submit("infer", {"model": model}, inputs={"dicom": blob["id"]})
    job = c.wait_job(job["id"], timeout=300)
    assert job["state"] == "succeeded", job
    res = json.loads(c.request("GET", f"/v1/jobs/{job['id']}/outputs/result.json").body)
    scores = [[im["scores"][k] for k in res["model"]["labels"]] for im in res["images"]]
    return res, job, np.asarray(scores)


def test_infer_jobs_equal_cpu():
    data = make_dicom()
    rg, jg, g = job_scores("demo-gpu", data)
    rc, jc, c = job_scores("demo-cpu", data)
    assert rg["device"].startswith("gpu:") and rc["device"] == "cpu", (rg["device"], rc["device"])
    assert jg["device"] == rg["device"], (jg["device"], rg["device"])   # the GPU it was placed on
    assert rg["precision"] == "fp32" and rc["precision"] == "fp32", (rg, rc)
    err = rel_l2(g, c)
    print(f"    infer job: relative L2 GPU vs CPU {err:.2e}")
    assert err <= 1e-4, err


def test_gpu_memory_rose():
    after = used_bytes()
    print(f"    nv_gpu_memory_used_bytes: {USED_BEFORE:.0f} -> {after:.0f}")
    assert after > USED_BEFORE, (USED_BEFORE, after)


if __name__ == "__main__":
    try:
        setup()
        run_tests([test_ready_on_gpu, test_v2_infer_equals_cpu, test_infer_jobs_equal_cpu,
                   test_gpu_memory_rose])
    finally:
        if H:
            H.close()
        if TMP:
            shutil.rmtree(TMP, ignore_errors=True)
