"""Where models run, end to end over real HTTPS with a real PostgreSQL, on any machine (no
GPU needed): config.json's instance_group / precision checked at upload (422 naming the
field); on a server without GPUs a KIND_GPU model is refused with the reason by
/v2/models/{m}/infer (503, Triton's {"error": ...}; /ready, which never loads, says 400 not
ready), by POST /v1/models/{m}/load
(503, the version then listed as failed with the reason) and by an `infer` job (failed,
not retried, with the reason), while KIND_AUTO and KIND_CPU models run on the CPU and say
so (/v2 ready "devices", model metadata parameters, /v1/models "devices", result.json
"device"); on a server with simulated GPUs (GPUJOBD_FAKE_GPUS) the per-GPU series
gpujobd_nv_gpu_utilization / _memory_total_bytes / _memory_used_bytes are exposed, a model
whose estimated device memory exceeds the GPUs' is refused naming the GPU memory, a
KIND_GPU job is placed on a GPU and fails there for want of a CUDA backend, and every
reservation made on the way is released."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.environ.get("GJ_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
from harness import Harness, multipart_form, run_tests  # noqa: E402

DEMO = "chest-xray-demo"
ONNX = os.path.join(SRC, "models", DEMO, "1", "model.onnx")
FAKE_GPU_BYTES = 64 << 20        # the demo model needs about 5.7 MiB per instance
H = None
H2 = None       # a second PostgreSQL: the servers must not take each other's jobs
NOGPU = None    # a server without GPUs
FAKE = None     # a server with two simulated GPUs of 64 MiB
TMP = None
DICOM = None


def write_model(data_dir, name, **changes):
    d = os.path.join(data_dir, "models", name)
    os.makedirs(os.path.join(d, "1"))
    shutil.copy(ONNX, os.path.join(d, "1", "model.onnx"))
    with open(os.path.join(SRC, "models", DEMO, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("name", None)
    if "instance_group" in changes:
        cfg.pop("instances_per_device", None)
    cfg.update(changes)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)


def make_dicom():
    from PIL import Image
    import numpy as np
    rng = np.random.RandomState(7)
    img = 100 + rng.normal(0, 20, size=(300, 280))
    bmp, dcm = os.path.join(TMP, "x.bmp"), os.path.join(TMP, "x.dcm")
    Image.fromarray(np.clip(img, 0, 255).astype("uint8"), "L").save(bmp)
    subprocess.run(["img2dcm", "-i", "BMP", bmp, dcm], check=True, capture_output=True)
    subprocess.run(["dcmodify", "-nb", "-i", "(0008,0060)=DX", "-i", "(0018,0015)=CHEST",
                    "-i", "(0018,5101)=PA", dcm], check=True, capture_output=True)
    with open(dcm, "rb") as f:
        return f.read()


def setup():
    global H, H2, NOGPU, FAKE, TMP, DICOM
    H = Harness()
    H2 = Harness()
    TMP = tempfile.mkdtemp(prefix="gj-gpu-serving-")
    DICOM = make_dicom()
    env = {"GPUJOBD_INFER_THREADS": "2"}
    d0 = os.path.join(H.tmp, "nogpu")
    write_model(d0, "demo-gpu", instance_group={"kind": "KIND_GPU"}, precision="fp16")
    write_model(d0, "demo-cpu", instance_group={"kind": "KIND_CPU", "count": 2})
    write_model(d0, "demo-auto-fp16", instance_group={"kind": "KIND_AUTO"}, precision="fp16")
    NOGPU = H.start_server(["--cpu-workers", "1"], data_dir=d0, env=env)
    d1 = os.path.join(H2.tmp, "fake")
    write_model(d1, "demo-gpu", instance_group={"kind": "KIND_GPU", "count": 1})
    write_model(d1, "demo-gpu-big", instance_group=[{"kind": "KIND_GPU", "count": 16}])
    FAKE = H2.start_server(["--cpu-workers", "1", "--workers-per-gpu", "1"], data_dir=d1,
                          env=dict(env, GPUJOBD_FAKE_GPUS=f"2:{FAKE_GPU_BYTES}"))


def oip_error(r, status, *says):
    assert r.status == status, r
    body = r.json()
    assert list(body) == ["error"], body          # Triton's error object, nothing else
    for s in says:
        assert s in body["error"], (s, body)
    return body["error"]


def infer_body():
    """One zero image through the binary tensor extension."""
    raw = bytes(4 * 256 * 256)
    head = json.dumps({"inputs": [{"name": "image", "shape": [1, 1, 256, 256], "datatype": "FP32",
                                   "parameters": {"binary_data_size": len(raw)}}]}).encode()
    return head + raw, {"Inference-Header-Content-Length": str(len(head))}


def client(srv):
    return srv.client()


def submit_infer(srv, model):
    c = client(srv)
    blob = c.upload(DICOM, "application/dicom")
    job = c.submit("infer", {"model": model}, inputs={"dicom": blob["id"]})
    return c.wait_job(job["id"], timeout=120)


def metrics(srv):
    r = client(srv).request("GET", "/metrics")
    assert r.status == 200, r
    return r.body.decode()


def series(text, name):
    """{labels: value} of one metric."""
    out = {}
    for m in re.finditer(r"^gpujobd_%s\{([^}]*)\} (\S+)$" % name, text, re.M):
        out[m.group(1)] = float(m.group(2))
    return out


# ---- config.json ----------------------------------------------------------------------

def test_upload_refuses_bad_instance_config():
    c = NOGPU.client()
    with open(os.path.join(SRC, "models", DEMO, "config.json")) as f:
        base = json.load(f)
    base.pop("name")
    base.pop("instances_per_device")
    with open(ONNX, "rb") as f:
        onnx = f.read()
    cases = [
        ({"instance_group": {"kind": "KIND_CPU"}, "precision": "fp16"}, "precision", "needs a GPU"),
        ({"instance_group": {"kind": "KIND_TPU"}}, "instance_group.kind", "KIND_AUTO, KIND_GPU, KIND_CPU"),
        ({"instance_group": {"count": 0}}, "instance_group.count", "from 1 to 64"),
        ({"instance_group": {"gpus": [64]}}, "instance_group.gpus[0]", "from 0 to 63"),
        ({"cuda_graphs": "on"}, "cuda_graphs", "true or false"),
    ]
    for i, (change, field, says) in enumerate(cases):
        cfg = dict(base, **change)
        body, ctype = multipart_form([("model", "model.onnx", onnx),
                                      ("config", "config.json", json.dumps(cfg).encode())])
        r = c.request("PUT", f"/v1/models/bad-{i}/versions/1", body=body,
                      headers={"Content-Type": ctype})
        assert r.status == 422, (change, r)
        p = r.json()
        assert says in p["detail"] and field in p["detail"], (change, p)
    assert not [n for n in os.listdir(os.path.join(NOGPU.data_dir, "models")) if n.startswith("bad-")]


# ---- a server without GPUs --------------------------------------------------------------

NO_GPU = "needs a GPU (config.json instance_group.kind KIND_GPU) but this server has none"


def test_no_gpu_oip_503():
    c = NOGPU.client()
    oip_error(c.request("GET", "/v2/models/demo-gpu/ready"), 400, "demo-gpu", "is not ready")
    body, hdrs = infer_body()
    r = c.request("POST", "/v2/models/demo-gpu/infer", body=body, headers=hdrs)
    oip_error(r, 503, "demo-gpu", NO_GPU)
    assert r.headers.get("retry-after"), r.headers
    # loaded by the request, but placed on no device: still not ready, and saying so
    oip_error(c.request("GET", "/v2/models/demo-gpu/ready"), 400, "demo-gpu", "not placed on a device")
    # the metadata still answers (it does not need the device)
    md = c.json("GET", "/v2/models/demo-gpu", expect=200)
    assert md["parameters"]["instance_kind"] == "KIND_GPU", md
    assert md["parameters"]["precision"] == "fp16" and md["parameters"]["devices"] == "", md


def test_no_gpu_load_503_and_listed_failed():
    c = NOGPU.client()
    r = c.request("POST", "/v1/models/demo-gpu/load")
    assert r.status == 503, r
    p = r.json()
    assert "cannot be placed on a device" in p["detail"] and NO_GPU in p["detail"], p
    models = {m["name"]: m for m in c.json("GET", "/v1/models", expect=200)["models"]}
    v = models["demo-gpu"]["versions"][0]
    assert v["state"] == "failed" and NO_GPU in v["reason"] and v["devices"] == [], v


def test_no_gpu_infer_job_fails_clearly():
    job = submit_infer(NOGPU, "demo-gpu")
    assert job["state"] == "failed", job
    assert NO_GPU in job["error"]["message"], job
    assert job["attempts"] == 1, job      # not retried: a GPU will not appear


def test_auto_and_cpu_models_run_on_cpu():
    c = NOGPU.client()
    for name in (DEMO, "demo-cpu"):
        c.json("POST", f"/v1/models/{name}/load", expect=200)   # readiness never loads
        r = c.json("GET", f"/v2/models/{name}/ready", expect=200)
        assert r["ready"] is True and r["devices"] == ["cpu"], r
        md = c.json("GET", f"/v2/models/{name}", expect=200)
        assert md["parameters"]["devices"] == "cpu", md
    assert c.json("GET", f"/v2/models/{DEMO}")["parameters"]["instance_kind"] == "KIND_AUTO"
    assert c.json("GET", "/v2/models/demo-cpu")["parameters"]["instances_per_device"] == 2
    c.json("POST", "/v1/models/demo-cpu/load", expect=200)
    models = {m["name"]: m for m in c.json("GET", "/v1/models", expect=200)["models"]}
    assert models["demo-cpu"]["versions"][0]["devices"] == ["cpu"], models["demo-cpu"]
    job = submit_infer(NOGPU, DEMO)
    assert job["state"] == "succeeded", job
    res = json.loads(c.request("GET", f"/v1/jobs/{job['id']}/outputs/result.json").body)
    assert res["device"] == "cpu" and res["counts"]["inferred"] == 1, res
    assert res["precision"] == "fp32", res
    # a KIND_AUTO model that asks for fp16 falls back to the CPU, which computes in fp32: the
    # metadata keeps what was configured, the result says what ran
    assert c.json("GET", "/v2/models/demo-auto-fp16")["parameters"]["precision"] == "fp16"
    job = submit_infer(NOGPU, "demo-auto-fp16")
    assert job["state"] == "succeeded" and job["device"] == "cpu", job
    res = json.loads(c.request("GET", f"/v1/jobs/{job['id']}/outputs/result.json").body)
    assert res["device"] == "cpu" and res["precision"] == "fp32", res
    # unloading stops its batchers: no device any more
    c.json("POST", "/v1/models/demo-cpu/unload", expect=200)
    models = {m["name"]: m for m in c.json("GET", "/v1/models", expect=200)["models"]}
    assert models["demo-cpu"]["versions"][0]["devices"] == [], models["demo-cpu"]


def test_no_gpu_no_gpu_series():
    assert "nv_gpu_" not in metrics(NOGPU)


# ---- a server with simulated GPUs --------------------------------------------------------

def gpu_series(srv):
    text = metrics(srv)
    return (series(text, "nv_gpu_utilization"), series(text, "nv_gpu_memory_total_bytes"),
            series(text, "nv_gpu_memory_used_bytes"))


def test_fake_gpu_series():
    util, total, used = gpu_series(FAKE)
    assert set(total) == {'gpu="0"', 'gpu="1"'}, total
    assert all(v == FAKE_GPU_BYTES for v in total.values()), total
    assert all(v == 0 for v in used.values()) and set(used) == set(total), used
    assert all(v == 0 for v in util.values()) and set(util) == set(total), util
    text = metrics(FAKE)
    assert "# TYPE gpujobd_nv_gpu_memory_used_bytes gauge" in text
    assert "gpujobd_inference_count" in text    # the per-model series are still there


def test_fake_gpu_memory_refused():
    c = client(FAKE)
    body, hdrs = infer_body()
    err = oip_error(c.request("POST", "/v2/models/demo-gpu-big/infer", body=body, headers=hdrs), 503,
                    "demo-gpu-big", "MiB of GPU memory", "16 instances", "free of 64.0 MiB")
    assert "does not fit in the free memory of any of its 2 GPUs" in err, err
    oip_error(c.request("GET", "/v2/models/demo-gpu-big/ready"), 400, "demo-gpu-big", "is not ready")
    assert all(v == 0 for v in gpu_series(FAKE)[2].values())


def test_fake_gpu_without_cuda_backend():
    c = client(FAKE)
    body, hdrs = infer_body()
    err = oip_error(c.request("POST", "/v2/models/demo-gpu/infer", body=body, headers=hdrs), 503,
                    "demo-gpu", "cannot run on GPU")
    assert re.search(r"cannot run on GPU [01]: ", err), err
    assert all(v == 0 for v in gpu_series(FAKE)[2].values())   # its reservation went


def test_fake_gpu_infer_job_placed_on_gpu():
    job = submit_infer(FAKE, "demo-gpu")
    assert job["state"] == "failed", job
    m = re.match(r"gpu:(\d)$", job["device"] or "")
    assert m, job
    assert f"cannot run on GPU {m.group(1)}: " in job["error"]["message"], job
    # a KIND_AUTO model without a CUDA backend goes to the CPU even with GPUs about
    job = submit_infer(FAKE, DEMO)
    assert job["state"] == "succeeded" and job["device"] == "cpu", job
    c = client(FAKE)
    res = json.loads(c.request("GET", f"/v1/jobs/{job['id']}/outputs/result.json").body)
    assert res["device"] == "cpu", res
    deadline = time.time() + 10   # the failed job's slot and memory are released
    while time.time() < deadline and any(gpu_series(FAKE)[2].values()):
        time.sleep(0.2)
    assert all(v == 0 for v in gpu_series(FAKE)[2].values())


if __name__ == "__main__":
    try:
        setup()
        run_tests([test_upload_refuses_bad_instance_config, test_no_gpu_oip_503,
                   test_no_gpu_load_503_and_listed_failed, test_no_gpu_infer_job_fails_clearly,
                   test_auto_and_cpu_models_run_on_cpu, test_no_gpu_no_gpu_series,
                   test_fake_gpu_series, test_fake_gpu_memory_refused,
                   test_fake_gpu_without_cuda_backend, test_fake_gpu_infer_job_placed_on_gpu])
    finally:
        for h in (H, H2):
            if h:
                h.close()
        if TMP:
            shutil.rmtree(TMP, ignore_errors=True)
