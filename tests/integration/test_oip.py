"""Open Inference Protocol v2 (KServe v2 / Triton REST) over real HTTPS, driven the way
Triton's HTTP client (tritonclient.http) formats its requests, written out by hand since
tritonclient is not installed: JSON tensors (flat and nested), the binary tensor extension
(Inference-Header-Content-Length + parameters.binary_data_size, binary outputs on request),
server and model metadata, health and readiness, errors with {"error": ...} and 400 / 404 /
429 / 503, API keys, and concurrent requests from threads showing dynamic batching in
/metrics (gpujobd_inference_exec_count < gpujobd_inference_count). Outputs are compared
with an independent reference: the ONNX file's weights read with onnx.numpy_helper and run
with torch (tests/infer/reference.py's OnnxTorch)."""
import json
import os
import re
import shutil
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402

SRC = os.environ.get("GJ_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "infer"))
from reference import OnnxTorch  # noqa: E402

MODEL = "chest-xray-demo"
ONNX = os.path.join(SRC, "models", MODEL, "1", "model.onnx")
SHAPE = (1, 256, 256)
H = None
SRV = None
C = None
REF = None


BATCHED = "demo-d20ms"   # the demo model with a 20 ms queue delay: batching is certain


def write_batched_model(data_dir):
    """DATA_DIR/models/demo-d20ms: the demo model with a 20 ms queue delay."""
    d = os.path.join(data_dir, "models", BATCHED)
    os.makedirs(os.path.join(d, "1"))
    shutil.copy(ONNX, os.path.join(d, "1", "model.onnx"))
    with open(os.path.join(SRC, "models", MODEL, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("name", None)
    cfg["dynamic_batching"] = {"max_queue_delay_us": 20000, "preferred_batch_sizes": [8]}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)


def setup():
    global H, SRV, C, REF
    H = Harness()
    data_dir = os.path.join(H.tmp, "srv0")
    write_batched_model(data_dir)
    SRV = H.start_server(["--cpu-workers", "1"], data_dir=data_dir, env={"GPUJOBD_INFER_THREADS": "2"})
    C = SRV.client()
    REF = OnnxTorch(ONNX)


def images(n, seed):
    rng = np.random.RandomState(seed)
    return rng.normal(0, 1, size=(n,) + SHAPE).astype(np.float32)


def reference(x):
    return REF(np.ascontiguousarray(x, dtype=np.float32))


def close(got, want, what):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    err = np.max(np.abs(got - want) / (1e-3 + np.abs(want)))
    assert err < 1e-3, f"{what}: relative error {err}\n{got}\n{want}"


# ---- requests as tritonclient.http writes them ----------------------------------------

def json_request(x, binary_output=False, rid=None, nested=False, params=None):
    """InferenceServerClient.infer(..., inputs=[InferInput.set_data_from_numpy(x,
    binary_data=False)], outputs=[InferRequestedOutput('logits', binary_data=...)])."""
    data = x.tolist() if nested else x.reshape(-1).tolist()
    body = {"inputs": [{"name": "image", "shape": list(x.shape), "datatype": "FP32", "data": data}],
            "outputs": [{"name": "logits", "parameters": {"binary_data": binary_output}}]}
    if rid is not None:
        body["id"] = rid
    if params:
        body["parameters"] = params
    return json.dumps(body).encode(), {"Content-Type": "application/json"}


def binary_request(x, binary_output=True, rid=None, params=None):
    """set_data_from_numpy(x, binary_data=True): JSON header, then the raw tensor;
    Inference-Header-Content-Length gives the JSON's length (no Content-Type, like
    tritonclient's geventhttpclient requests)."""
    raw = np.ascontiguousarray(x, dtype="<f4").tobytes()
    head = {"inputs": [{"name": "image", "shape": list(x.shape), "datatype": "FP32",
                        "parameters": {"binary_data_size": len(raw)}}],
            "outputs": [{"name": "logits", "parameters": {"binary_data": binary_output}}]}
    if rid is not None:
        head["id"] = rid
    if params:
        head["parameters"] = params
    js = json.dumps(head).encode()
    return js + raw, {"Inference-Header-Content-Length": str(len(js))}


def parse_response(r):
    """tritonclient's InferResult: the JSON part per the header, binary outputs after it."""
    hl = r.headers.get("inference-header-content-length")
    if hl is None:
        return r.json(), {}
    n = int(hl)
    head = json.loads(r.body[:n])
    arrays, off = {}, n
    for o in head["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is not None:
            arrays[o["name"]] = np.frombuffer(r.body[off:off + size], dtype="<f4").reshape(o["shape"])
            off += size
    assert off == len(r.body), (off, len(r.body))
    return head, arrays


def infer(body, headers, path=f"/v2/models/{MODEL}/infer", client=None, expect=200):
    r = (client or C).request("POST", path, body=body, headers=headers, timeout=120)
    assert r.status == expect, f"POST {path}: {r.status} {r.body[:400]!r}"
    return r


def metrics(model=MODEL):
    r = C.request("GET", "/metrics")
    assert r.status == 200, r
    vals = {}
    for line in r.body.decode().splitlines():
        m = re.match(r'^gpujobd_(inference_[a-z_]+)\{model="([^"]*)",version="(\d+)"\} (\d+)$', line)
        if m and m.group(2) == model and m.group(3) == "1":
            vals[m.group(1)] = int(m.group(4))
    return vals, r.body.decode()


# ---- tests ---------------------------------------------------------------------------

def test_health_and_server_metadata():
    for path in ("/v2/health/live", "/v2/health/ready"):
        r = C.request("GET", path, key="")         # probes need no key
        assert r.status == 200, (path, r)
    r = C.request("GET", "/v2", key="")
    assert r.status == 401, r
    md = C.json("GET", "/v2", expect=200)
    assert md["name"] == "gpujobd" and md["version"], md
    assert "binary_tensor_data" in md["extensions"], md


def test_model_metadata_and_ready():
    for path in (f"/v2/models/{MODEL}", f"/v2/models/{MODEL}/versions/1"):
        md = C.json("GET", path, expect=200)
        assert md["name"] == MODEL and md["platform"] == "onnxruntime_onnx", md
        assert "1" in md["versions"], md
        assert md["inputs"] == [{"name": "image", "datatype": "FP32", "shape": [-1, 1, 256, 256]}], md
        assert md["outputs"] == [{"name": "logits", "datatype": "FP32", "shape": [-1, 4]}], md
    # readiness never loads: not ready until the model is loaded (explicitly here; an
    # inference request would load it too), with Triton's 400 and {"error": ...}
    for path in (f"/v2/models/{MODEL}/ready", f"/v2/models/{MODEL}/versions/1/ready"):
        r = C.request("GET", path)
        assert r.status == 400 and "is not ready: it is not loaded" in r.json()["error"], (path, r)
    models = {m["name"]: m for m in C.json("GET", "/v1/models", expect=200)["models"]}
    assert models[MODEL]["versions"][0]["state"] == "unloaded", models[MODEL]   # metadata did not load it
    C.json("POST", f"/v1/models/{MODEL}/load", expect=200)
    for path in (f"/v2/models/{MODEL}/ready", f"/v2/models/{MODEL}/versions/1/ready"):
        r = C.request("GET", path)
        assert r.status == 200, (path, r)
        assert r.json()["ready"] is True and r.json()["devices"] == ["cpu"], r.json()
    for path, code in ((f"/v2/models/nope/ready", 404), (f"/v2/models/nope", 404),
                       (f"/v2/models/{MODEL}/versions/7", 404),
                       (f"/v2/models/{MODEL}/versions/7/ready", 404),
                       (f"/v2/models/{MODEL}/versions/x1/ready", 400)):
        r = C.request("GET", path)
        assert r.status == code, (path, r)
        assert "error" in r.json(), r
    r = C.request("GET", f"/v2/models/{MODEL}", key="")
    assert r.status == 401, r
    r = C.request("GET", f"/v2/models/{MODEL}", key="not-a-key")
    assert r.status == 401, r


def test_unload_sticks():
    """An admin's unload holds: /v2 infer and ready answer 400 "not ready" instead of
    loading the model again, until an explicit load."""
    x = images(1, 11)
    body, hdrs = json_request(x)
    r = C.request("POST", f"/v2/models/{BATCHED}/infer", body=body, headers=hdrs)
    assert r.status == 200, r                                 # loaded on first use
    assert C.request("GET", f"/v2/models/{BATCHED}/ready").status == 200
    C.json("POST", f"/v1/models/{BATCHED}/unload", expect=200)
    for _ in range(2):
        r = C.request("POST", f"/v2/models/{BATCHED}/infer", body=body, headers=hdrs)
        assert r.status == 400, r
        assert "is not ready: it was unloaded" in r.json()["error"], r.json()
        r = C.request("GET", f"/v2/models/{BATCHED}/ready")
        assert r.status == 400 and "it was unloaded" in r.json()["error"], r
        r = C.request("GET", f"/v2/models/{BATCHED}/versions/1/ready")
        assert r.status == 400 and "it was unloaded" in r.json()["error"], r
    md = C.json("GET", f"/v2/models/{BATCHED}", expect=200)   # metadata answers, loading nothing
    assert md["parameters"]["devices"] == "", md
    models = {m["name"]: m for m in C.json("GET", "/v1/models", expect=200)["models"]}
    assert models[BATCHED]["versions"][0]["state"] == "unloaded", models[BATCHED]
    assert models[BATCHED]["versions"][0]["devices"] == [], models[BATCHED]
    C.json("POST", f"/v1/models/{BATCHED}/load", expect=200)
    r = C.request("POST", f"/v2/models/{BATCHED}/infer", body=body, headers=hdrs)
    assert r.status == 200, r
    close(r.json()["outputs"][0]["data"], reference(x).reshape(-1), "after the load")


def test_infer_json():
    x = images(2, 1)
    want = reference(x)
    body, hdrs = json_request(x, rid="req-1")
    r = infer(body, hdrs)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    assert "inference-header-content-length" not in r.headers
    out = r.json()
    assert out["model_name"] == MODEL and out["model_version"] == "1" and out["id"] == "req-1", out
    [o] = out["outputs"]
    assert o["name"] == "logits" and o["datatype"] == "FP32" and o["shape"] == [2, 4], o
    close(np.array(o["data"]).reshape(2, 4), want, "JSON output")
    # nested data, versioned path, outputs omitted
    body = json.dumps({"inputs": [{"name": "image", "shape": [1, 1, 256, 256], "datatype": "FP32",
                                   "data": x[:1].tolist()}]}).encode()
    r = infer(body, {"Content-Type": "application/json"}, path=f"/v2/models/{MODEL}/versions/1/infer")
    out = r.json()
    assert "id" not in out, out
    close(np.array(out["outputs"][0]["data"]).reshape(1, 4), want[:1], "nested JSON input")


def test_infer_binary():
    x = images(3, 2)
    want = reference(x)
    body, hdrs = binary_request(x, binary_output=True, rid="bin-1")
    r = infer(body, hdrs)
    assert "inference-header-content-length" in r.headers, r.headers
    head, arrays = parse_response(r)
    assert head["id"] == "bin-1" and head["outputs"][0]["parameters"]["binary_data_size"] == 3 * 4 * 4, head
    assert "data" not in head["outputs"][0], head
    close(arrays["logits"], want, "binary output")
    # binary input, JSON output
    body, hdrs = binary_request(x, binary_output=False)
    r = infer(body, hdrs)
    assert "inference-header-content-length" not in r.headers, r.headers
    close(np.array(r.json()["outputs"][0]["data"]).reshape(3, 4), want, "binary in, JSON out")
    # JSON input, binary output through the request-level parameter, no outputs listed
    b = json.dumps({"inputs": [{"name": "image", "shape": [1, 1, 256, 256], "datatype": "FP32",
                                "data": x[0].reshape(-1).tolist()}],
                    "parameters": {"binary_data_output": True}}).encode()
    r = infer(b, {"Content-Type": "application/json"})
    head, arrays = parse_response(r)
    close(arrays["logits"], want[:1], "binary_data_output")
    # the same bytes through the JSON path and the binary path give the same floats
    bj = infer(*json_request(x)).json()["outputs"][0]["data"]
    _, ab = parse_response(infer(*binary_request(x)))
    assert np.array_equal(np.array(bj, dtype=np.float32).reshape(3, 4), ab["logits"])


def test_errors():
    x = images(1, 3)
    cases = []
    good = json.loads(json_request(x)[0])

    def mutate(fn):
        b = json.loads(json.dumps(good))
        fn(b)
        return json.dumps(b).encode()
    cases.append(("wrong input name", mutate(lambda b: b["inputs"][0].update(name="img")), 400))
    cases.append(("wrong datatype", mutate(lambda b: b["inputs"][0].update(datatype="INT64")), 400))
    cases.append(("wrong shape", mutate(lambda b: b["inputs"][0].update(shape=[1, 1, 128, 512])), 400))
    cases.append(("batch over max", mutate(lambda b: b["inputs"][0].update(shape=[9, 1, 256, 256])), 400))
    cases.append(("short data", mutate(lambda b: b["inputs"][0].update(data=b["inputs"][0]["data"][:-1])), 400))
    cases.append(("string data", mutate(lambda b: b["inputs"][0]["data"].__setitem__(5, "x")), 400))
    cases.append(("no inputs", mutate(lambda b: b.pop("inputs")), 400))
    cases.append(("unknown output", mutate(lambda b: b["outputs"][0].update(name="probs")), 400))
    cases.append(("bad timeout", mutate(lambda b: b.update(parameters={"timeout": "soon"})), 400))
    cases.append(("malformed JSON", b'{"inputs": [', 400))
    cases.append(("empty", b"", 400))
    for what, body, code in cases:
        t0 = time.time()
        r = C.request("POST", f"/v2/models/{MODEL}/infer", body=body, headers={"Content-Type": "application/json"})
        assert r.status == code, (what, r)
        assert isinstance(r.json().get("error"), str) and r.json()["error"], (what, r.body)
        if time.time() - t0 > 0.3:
            print(f"    slow: {what} {time.time() - t0:.2f}s", flush=True)
    # binary extension: size mismatch, header past the body, data both ways
    body, hdrs = binary_request(x)
    r = C.request("POST", f"/v2/models/{MODEL}/infer", body=body[:-4], headers=hdrs)
    assert r.status == 400 and "binary" in r.json()["error"], r
    r = C.request("POST", f"/v2/models/{MODEL}/infer", body=body,
                  headers={"Inference-Header-Content-Length": str(len(body) + 1)})
    assert r.status == 400, r
    r = C.request("POST", f"/v2/models/{MODEL}/infer", body=body, headers={"Content-Type": "application/octet-stream"})
    assert r.status == 415, r
    # unknown model / version, no key
    r = C.request("POST", "/v2/models/nope/infer", body=json_request(x)[0], headers={"Content-Type": "application/json"})
    assert r.status == 404 and "error" in r.json(), r
    r = C.request("POST", f"/v2/models/{MODEL}/versions/3/infer", body=json_request(x)[0],
                  headers={"Content-Type": "application/json"})
    assert r.status == 404, r
    r = C.request("POST", f"/v2/models/{MODEL}/infer", body=json_request(x)[0],
                  headers={"Content-Type": "application/json"}, key="")
    assert r.status == 401, r
    # a 1 us queue timeout: a lone sample waits for the 2 ms batching delay -> 503
    body, hdrs = json_request(x, params={"timeout": 1})
    r = C.request("POST", f"/v2/models/{MODEL}/infer", body=body, headers=hdrs)
    assert r.status == 503 and "timeout" in r.json()["error"], r
    assert r.headers.get("retry-after") == "1", r.headers


def test_concurrent_requests_are_batched():
    """16 threads x 2 requests (JSON and binary alternating) to the demo model with a
    20 ms queue delay, then the same burst to the shipped demo model (2 ms)."""
    for model in (BATCHED, MODEL):
        concurrent_burst(model)


def concurrent_burst(model):
    path = f"/v2/models/{model}/infer"
    before, _ = metrics(model)
    n_threads, per_thread = 16, 2
    x = images(n_threads * per_thread, 4)
    want = reference(x)
    results, errors = {}, []

    def worker(t):
        try:
            for k in range(per_thread):
                i = t * per_thread + k
                if i % 2:
                    body, hdrs = binary_request(x[i:i + 1], rid=str(i))
                else:
                    body, hdrs = json_request(x[i:i + 1], rid=str(i))
                r = C.request("POST", path, body=body, headers=hdrs, timeout=120)
                if r.status != 200:
                    errors.append((i, r.status, r.body[:200]))
                    continue
                head, arrays = parse_response(r)
                assert head["id"] == str(i)
                out = arrays["logits"] if arrays else np.array(head["outputs"][0]["data"]).reshape(1, 4)
                assert i not in results, f"request {i} answered twice"
                results[i] = out
        except Exception as e:  # noqa: BLE001
            errors.append((t, repr(e)))
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(results) == list(range(n_threads * per_thread))
    for i, out in results.items():
        close(out, want[i:i + 1], f"request {i}")
    after, text = metrics(model)
    for name in ("inference_request_success", "inference_request_failure", "inference_count",
                 "inference_exec_count", "inference_queue_duration_us",
                 "inference_compute_infer_duration_us"):
        assert name in after, (name, text[-2000:])
        assert f"# TYPE gpujobd_{name} counter" in text, name
    assert after.get("inference_pending_request_count") == 0, after
    assert "# TYPE gpujobd_inference_pending_request_count gauge" in text
    count = after["inference_count"] - before.get("inference_count", 0)
    execs = after["inference_exec_count"] - before.get("inference_exec_count", 0)
    ok = after["inference_request_success"] - before.get("inference_request_success", 0)
    assert ok == n_threads * per_thread and count == n_threads * per_thread, (ok, count)
    if model == BATCHED:
        assert execs < count, f"no batching: {execs} executions for {count} inferences"
    assert after["inference_compute_infer_duration_us"] > before.get("inference_compute_infer_duration_us", 0)
    print(f"    {model}: {count} inferences in {execs} executions", flush=True)


def test_full_queue_answers_429():
    """A second server with a queue of one request (and the 20 ms delay, so a queued
    request stays a while): a burst gets some 429s, each with {"error"}, and every other
    request its right answer; failures are counted."""
    data_dir = os.path.join(H.tmp, "srv-queue1")
    write_batched_model(data_dir)
    srv = H.start_server(["--cpu-workers", "1"], data_dir=data_dir,
                         env={"GPUJOBD_INFER_MAX_QUEUE": "1", "GPUJOBD_INFER_THREADS": "1"})
    c = srv.client(key=SRV.admin_key)     # same database: the first server's admin key
    x = images(24, 5)
    want = reference(x)
    codes, errors = {}, []

    def worker(i):
        try:
            body, hdrs = binary_request(x[i:i + 1])
            r = c.request("POST", f"/v2/models/{BATCHED}/infer", body=body, headers=hdrs, timeout=120)
            codes[i] = r.status
            if r.status == 200:
                close(parse_response(r)[1]["logits"], want[i:i + 1], f"request {i}")
            else:
                assert r.status == 429 and "full" in r.json()["error"], r
                assert r.headers.get("retry-after") == "1"
        except Exception as e:  # noqa: BLE001
            errors.append((i, repr(e)))
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(x))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    n429 = sum(1 for v in codes.values() if v == 429)
    n200 = sum(1 for v in codes.values() if v == 200)
    assert n429 >= 1 and n200 >= 1 and n429 + n200 == len(x), codes
    r = c.request("GET", "/metrics")
    m = re.search(r'gpujobd_inference_request_failure\{model="%s",version="1"\} (\d+)' % BATCHED, r.body.decode())
    assert m and int(m.group(1)) == n429, (n429, m and m.group(0))
    assert srv.terminate() == 0


if __name__ == "__main__":
    setup()
    run_tests([test_health_and_server_metadata, test_model_metadata_and_ready, test_unload_sticks, test_infer_json,
               test_infer_binary, test_errors, test_concurrent_requests_are_batched,
               test_full_queue_answers_429])
