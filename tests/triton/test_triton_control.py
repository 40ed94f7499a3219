"""Triton's control extensions on /v2, driven by NVIDIA's tritonclient.http unchanged (over
real HTTPS, against a real PostgreSQL): model configuration, the model repository (index,
load with a config override, unload), statistics after inferences, trace and log settings
(the log level checked in the server's own log), the shared-memory calls answering Triton's
errors, {"error"} bodies for the server's own 401/403/404/405/413 under /v2 (decoded by the
client), Triton's metric names, model control mode none, and tenant isolation: a tenant's
key reads what it may (config, index) and gets 403 on the rest."""
import json
import os
import re
import shutil
import time

import numpy as np

from tritonlib import DEMO, DEMO_ONNX, SRC, Harness, InferenceServerException, client, httpclient, run_tests

OTHER = "demo-override"   # a copy of the demo model whose config the override test replaces

H = None
SRV = None
C = None        # tritonclient.http with the admin key
RAW = None      # the harness's own HTTPS client (admin key), for what tritonclient cannot send
TENANT = None   # a tenant's (role user) API key


def setup():
    global H, SRV, C, RAW, TENANT
    H = Harness()
    data_dir = os.path.join(H.tmp, "srv0")
    os.makedirs(os.path.join(data_dir, "models", OTHER, "1"))
    shutil.copy(DEMO_ONNX, os.path.join(data_dir, "models", OTHER, "1", "model.onnx"))
    with open(os.path.join(SRC, "models", DEMO, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("name", None)
    with open(os.path.join(data_dir, "models", OTHER, "config.json"), "w") as f:
        json.dump(cfg, f)
    SRV = H.start_server(["--cpu-workers", "1", "--triton-metrics"], data_dir=data_dir)
    C = client(SRV)
    RAW = SRV.client()
    TENANT = RAW.json("POST", "/v1/api-keys", {"tenant": "clinic-b", "role": "user"}, expect=201)["key"]


def raises(fn, status, *fragments):
    """Calls fn, which must raise InferenceServerException with that HTTP status and a
    message holding every fragment; returns the message."""
    try:
        fn()
    except InferenceServerException as e:
        assert e.status() == str(status), f"status {e.status()} != {status}: {e.message()}"
        for f in fragments:
            assert f in e.message(), f"{f!r} not in {e.message()!r}"
        return e.message()
    raise AssertionError(f"no InferenceServerException (expected {status})")


def index_of(name):
    return {e["version"]: e for e in C.get_model_repository_index() if e["name"] == name}


def infer(n, c=None, model=DEMO):
    x = np.random.RandomState(n).normal(0, 1, size=(n, 1, 256, 256)).astype(np.float32)
    inp = httpclient.InferInput("image", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=True)
    out = [httpclient.InferRequestedOutput("logits", binary_data=True)]
    r = (c or C).infer(model, [inp], outputs=out)
    assert r.as_numpy("logits").shape == (n, 4)


# ---- tests ---------------------------------------------------------------------------

def test_server_metadata_extensions():
    ext = C.get_server_metadata()["extensions"]
    for name in ("binary_tensor_data", "classification", "parameters", "model_repository", "model_repository(unload_dependents)",
                 "model_configuration", "statistics", "trace", "logging"):
        assert name in ext, ext
    assert "system_shared_memory" not in ext and "cuda_shared_memory" not in ext, ext
    assert "sequence" not in ext, ext


def test_model_config():
    for cfg in (C.get_model_config(DEMO), C.get_model_config(DEMO, "1")):
        assert cfg["name"] == DEMO and cfg["platform"] == "onnxruntime_onnx", cfg
        assert cfg["max_batch_size"] == 8, cfg
        assert cfg["input"][0]["name"] == "image" and cfg["input"][0]["data_type"] == "TYPE_FP32", cfg
        assert [int(d) for d in cfg["input"][0]["dims"]] == [1, 256, 256], cfg
        assert cfg["output"][0]["name"] == "logits" and [int(d) for d in cfg["output"][0]["dims"]] == [4], cfg
    raises(lambda: C.get_model_config("nope"), 404, "nope")
    raises(lambda: C.get_model_config(DEMO, "7"), 404)


def test_repository_index_load_unload():
    e = index_of(DEMO)["1"]
    assert e["state"] == "UNAVAILABLE" and e["reason"], e          # loads on use: not loaded yet
    C.load_model(DEMO)
    assert C.is_model_ready(DEMO), "ready after load_model"
    assert index_of(DEMO)["1"]["state"] == "READY"
    ready = RAW.json("POST", "/v2/repository/index", {"ready": True}, expect=200)
    assert [m["name"] for m in ready] == [DEMO], ready               # the other model is not loaded
    C.unload_model(DEMO)
    assert not C.is_model_ready(DEMO)
    assert index_of(DEMO)["1"] == {"name": DEMO, "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}
    assert RAW.json("POST", "/v2/repository/index", {"ready": True}, expect=200) == []
    C.unload_model(DEMO, unload_dependents=True)                    # unloaded already: fine, as Triton
    raises(lambda: C.load_model("nope"), 400, "failed to load 'nope'")
    r = RAW.request("POST", "/v2/repository/index", json={"ready": "yes"})
    assert r.status == 400 and "'ready'" in r.json()["error"], r
    C.load_model(DEMO)
    assert C.is_model_ready(DEMO)


def test_load_with_config_override():
    cfg = C.get_model_config(OTHER)
    cfg["dynamic_batching"]["max_queue_delay_microseconds"] = 3456
    cfg["max_batch_size"] = 4
    cfg["dynamic_batching"]["preferred_batch_size"] = [2, 4]
    C.load_model(OTHER, config=json.dumps(cfg))
    got = C.get_model_config(OTHER)
    assert int(got["dynamic_batching"]["max_queue_delay_microseconds"]) == 3456, got
    assert got["max_batch_size"] == 4, got
    assert C.is_model_ready(OTHER)
    assert index_of(OTHER)["1"]["state"] == "READY"
    # a config that does not parse, names another model, or does not fit the model is
    # refused and changes nothing
    raises(lambda: C.load_model(OTHER, config="{not json"), 400, "failed to load", "not valid JSON")
    raises(lambda: C.load_model(OTHER, config=json.dumps(dict(cfg, name="other"))), 400, "failed to load")
    bad = json.loads(json.dumps(cfg))
    bad["input"][0]["dims"] = [3, 64, 64]
    raises(lambda: C.load_model(OTHER, config=json.dumps(bad)), 422, "failed to load")
    got = C.get_model_config(OTHER)
    assert int(got["dynamic_batching"]["max_queue_delay_microseconds"]) == 3456 and got["max_batch_size"] == 4, got
    assert [int(d) for d in got["input"][0]["dims"]] == [1, 256, 256], got
    assert C.is_model_ready(OTHER), "still served with the config it had"
    # the demo model, beside it, keeps its own config
    assert C.get_model_config(DEMO)["max_batch_size"] == 8


def test_load_with_files():
    """load_model(config=..., files={"file:<v>/model.onnx": bytes}): the versions are stored
    in the shared store (the model made when new) and loaded; versions are immutable."""
    import onnx
    name = "demo-files"
    with open(os.path.join(SRC, "models", DEMO, "config.json")) as f:   # this server's form, beside Triton's
        cfg = dict(json.load(f), name=name)
    onnx_bytes = open(DEMO_ONNX, "rb").read()
    m = onnx.load_from_string(onnx_bytes)
    m.doc_string = "the same network, other bytes"
    other = m.SerializeToString()
    raises(lambda: C.load_model(name, files={"file:1/model.onnx": onnx_bytes}), 400, "parameters.config")
    raises(lambda: C.load_model(name, config=json.dumps(cfg), files={"file:1/model.onnx": b"not onnx"}), 422,
           "failed to load 'demo-files'")
    raises(lambda: C.load_model(name, config=json.dumps(cfg), files={"file:1/../x.onnx": onnx_bytes}), 400,
           "file name")
    raises(lambda: C.load_model(name, config=json.dumps(cfg), files={"file:x/model.onnx": onnx_bytes}), 400,
           "file:<version>/<name>")
    # the limits: 8 versions and 64 files a version per request
    raises(lambda: C.load_model(name, config=json.dumps(cfg), files={f"file:{v}/a.txt": b"x" for v in range(1, 10)}),
           400, "8 versions at most")
    raises(lambda: C.load_model(name, config=json.dumps(cfg), files={f"file:1/f{i}.txt": b"x" for i in range(65)}),
           400, "64 files at most")
    raises(lambda: C.get_model_config(name), 404)                    # nothing was stored
    cache = os.path.join(SRV.data_dir, "model-cache")
    assert not [d for d in os.listdir(cache) if d.startswith(".")], os.listdir(cache)   # no staging left
    C.load_model(name, config=json.dumps(cfg), files={"file:1/model.onnx": onnx_bytes})
    assert C.is_model_ready(name) and index_of(name)["1"]["state"] == "READY"
    infer(2, model=name)
    C.load_model(name, config=json.dumps(cfg), files={"file:1/model.onnx": onnx_bytes})   # the same: kept
    raises(lambda: C.load_model(name, config=json.dumps(cfg), files={"file:1/model.onnx": other}), 409,
           "version 1 exists with other files")
    C.load_model(name, config=json.dumps(cfg), files={"file:2/model.onnx": other})
    idx = index_of(name)
    assert set(idx) == {"1", "2"} and all(e["state"] == "READY" for e in idx.values()), idx
    listed = {v["version"] for m in RAW.json("GET", "/v1/models", expect=200)["models"] if m["name"] == name
              for v in m["versions"]}
    assert listed == {1, 2}, listed


def test_statistics_after_inferences():
    before = C.get_inference_statistics(DEMO)["model_stats"][0]
    for n in (1, 2, 3):
        infer(n)
    st = C.get_inference_statistics(DEMO)["model_stats"]
    assert len(st) == 1 and st[0]["name"] == DEMO and st[0]["version"] == "1", st
    s = st[0]
    assert s["inference_count"] - before["inference_count"] == 6, s        # samples
    execs = s["execution_count"] - before["execution_count"]
    assert 1 <= execs <= 3, s
    inf, inf0 = s["inference_stats"], before["inference_stats"]
    assert inf["success"]["count"] - inf0["success"]["count"] == 3, inf       # requests
    assert inf["fail"]["count"] == inf0["fail"]["count"], inf
    for phase in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert inf[phase]["count"] - inf0[phase]["count"] == 3, (phase, inf)
        assert inf[phase]["ns"] >= inf0[phase]["ns"], (phase, inf)   # 0 ns when nothing was copied
    assert inf["compute_infer"]["ns"] > inf0["compute_infer"]["ns"], inf
    # a request's phases fit in its whole time
    assert inf["success"]["ns"] >= inf["queue"]["ns"] + inf["compute_infer"]["ns"], inf
    assert abs(s["last_inference"] / 1000 - time.time()) < 60, s
    batches = {b["batch_size"]: b["compute_infer"]["count"] for b in s["batch_stats"]}
    assert sum(batches.values()) == s["execution_count"] and set(batches) <= {1, 2, 3, 4, 5, 6}, s
    for phase in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
        assert set(inf[phase]) == {"count", "ns"}, inf
    assert C.get_inference_statistics(DEMO, "1")["model_stats"][0]["inference_count"] == s["inference_count"]
    every = C.get_inference_statistics()["model_stats"]
    assert any(m["name"] == DEMO and m["inference_count"] == s["inference_count"] for m in every), every
    raises(lambda: C.get_inference_statistics("nope"), 404)
    raises(lambda: C.get_inference_statistics(DEMO, "9"), 404)
    # and, with --triton-metrics, Triton's metric names beside gpujobd_'s
    body = RAW.request("GET", "/metrics").body.decode()
    m = re.search(r'^nv_inference_count\{model="%s",version="1"\} (\d+)$' % DEMO, body, re.M)
    assert m and int(m.group(1)) == s["inference_count"], body[:2000]
    for name in ("request_success", "request_failure", "exec_count", "request_duration_us", "queue_duration_us",
                 "compute_input_duration_us", "compute_infer_duration_us", "compute_output_duration_us",
                 "pending_request_count"):
        assert re.search(r'^nv_inference_%s\{model="%s",version="1"\} \d+$' % (name, DEMO), body, re.M), name


def test_trace_settings():
    t = C.get_trace_settings()
    assert t["trace_level"] == ["OFF"] and t["trace_rate"] == "1000" and t["trace_count"] == "-1", t
    assert t["log_frequency"] == "0" and t["trace_file"] == "", t
    t = C.update_trace_settings(settings={"trace_rate": "50", "trace_level": ["TIMESTAMPS"]})
    assert t["trace_rate"] == "50" and t["trace_level"] == ["TIMESTAMPS"], t
    m = C.update_trace_settings(model_name=DEMO, settings={"trace_count": "10"})
    assert m["trace_count"] == "10" and m["trace_rate"] == "50", m            # the rest is global
    assert C.get_trace_settings()["trace_count"] == "-1"
    assert C.get_trace_settings(model_name=DEMO)["trace_count"] == "10"
    m = C.update_trace_settings(model_name=DEMO, settings={"trace_count": None})   # cleared: global
    assert m["trace_count"] == "-1", m
    raises(lambda: C.update_trace_settings(settings={"trace_rate": "x"}), 400, "Unable to parse 'trace_rate', got: x")
    raises(lambda: C.update_trace_settings(settings={"trace_count": "-2"}), 400, "Unable to parse 'trace_count'")
    raises(lambda: C.update_trace_settings(settings={"trace_level": ["OFF", "TENSORS"]}), 400,
           "Expect only one trace level 'OFF' is specified")
    raises(lambda: C.update_trace_settings(settings={"trace_file": "/tmp/t"}), 501,
           "trace file location can not be updated through network protocol")
    raises(lambda: C.get_trace_settings(model_name="nope"), 400, "Request for unknown model : nope")
    assert C.get_trace_settings()["trace_rate"] == "50"                      # nothing half applied
    C.update_trace_settings(settings={"trace_rate": "1000", "trace_level": ["OFF"]})


def log_has(fragment, since):
    return fragment in SRV.log_text()[since:]


def test_log_settings():
    s = C.get_log_settings()
    assert s == {"log_file": "", "log_info": True, "log_warning": True, "log_error": True,
                 "log_verbose_level": 0, "log_format": "ISO8601"}, s
    # the setting is used: with log_info off the unload's info line is not written
    s = C.update_log_settings({"log_info": False})
    assert s["log_info"] is False and s["log_warning"] is True, s
    mark = len(SRV.log_text())
    C.unload_model(DEMO)
    time.sleep(0.2)
    assert not log_has(f"model {DEMO} version 1 unloaded", mark), SRV.log_text()[mark:]
    s = C.update_log_settings({"log_info": True, "log_verbose_level": 2})
    assert s["log_info"] is True and s["log_verbose_level"] == 2, s
    C.load_model(DEMO)
    mark = len(SRV.log_text())
    C.unload_model(DEMO)
    time.sleep(0.2)
    assert log_has(f"model {DEMO} version 1 unloaded", mark), SRV.log_text()[mark:]
    C.load_model(DEMO)
    raises(lambda: C.update_log_settings({"log_file": "/tmp/x.log"}), 501,
           "log file location can not be updated through network protocol")
    raises(lambda: C.update_log_settings({"log_format": "fancy"}), 503, "invalid argument for --log_format, got: fancy")
    raises(lambda: C.update_log_settings({"log_format": "default"}), 400, "ISO 8601")
    raises(lambda: C.update_log_settings({"log_error": False}), 400, "threshold")
    raises(lambda: C.update_log_settings({"log_verbose_level": "high"}), 400, "log_verbose_level")
    assert C.get_log_settings()["log_verbose_level"] == 2                    # nothing half applied
    assert C.update_log_settings({"log_verbose_level": 0})["log_verbose_level"] == 0


def test_shared_memory_not_supported():
    assert C.get_system_shared_memory_status() == []
    assert C.get_cuda_shared_memory_status() == []
    raises(lambda: C.register_system_shared_memory("r0", "/shm0", 64), 400,
           "failed to register system shared memory region: 'r0'")
    raises(lambda: C.register_cuda_shared_memory("r1", b"aGFuZGxl", 0, 64), 400,
           "failed to register CUDA shared memory region: 'r1', GPUs not supported")
    raises(lambda: C.get_system_shared_memory_status("r0"), 404, "Unable to find system shared memory region: 'r0'")
    raises(lambda: C.get_cuda_shared_memory_status("r1"), 404, "Unable to find cuda shared memory region: 'r1'")
    C.unregister_system_shared_memory()
    C.unregister_system_shared_memory("r0")
    C.unregister_cuda_shared_memory()
    C.unregister_cuda_shared_memory("r1")


def test_errors_are_triton_shaped():
    nokey = client(SRV, key="")
    raises(lambda: nokey.get_server_metadata(), 401, "API key")
    raises(lambda: client(SRV, key="not-a-key").get_model_config(DEMO), 401)
    for method, path, status in (("GET", "/v2/nothing/here", 404), ("PUT", "/v2/repository/index", 405),
                                 ("DELETE", "/v2/logging", 405), ("GET", "/v2/models/" + "m" * 9000, 414)):
        r = RAW.request(method, path)
        assert r.status == status, (path, r)
        assert r.headers.get("Content-Type", r.headers.get("content-type", "")).startswith("application/json"), r
        assert isinstance(r.json()["error"], str) and set(r.json()) == {"error"}, r
    r = RAW.request("POST", "/v2/logging", body=b'{"log_info": true, "pad": "' + b"x" * (5 << 20) + b'"}',
                    headers={"Content-Type": "application/json"})
    assert r.status == 413 and set(r.json()) == {"error"}, r


def test_tenant_isolation():
    t = client(SRV, key=TENANT)
    assert t.get_model_config(DEMO)["name"] == DEMO                   # reading models: any key
    assert any(e["name"] == DEMO for e in t.get_model_repository_index())
    assert t.get_system_shared_memory_status() == []
    for call in (lambda: t.load_model(DEMO), lambda: t.unload_model(DEMO),
                 lambda: t.get_inference_statistics(), lambda: t.get_inference_statistics(DEMO),
                 lambda: t.get_trace_settings(), lambda: t.update_trace_settings(settings={"trace_rate": "1"}),
                 lambda: t.get_trace_settings(model_name=DEMO), lambda: t.get_log_settings(),
                 lambda: t.update_log_settings({"log_info": False})):
        raises(call, 403, "admin")
    assert C.is_model_ready(DEMO)                                      # the tenant's unload did nothing
    assert C.get_log_settings()["log_info"] is True and C.get_trace_settings()["trace_rate"] == "1000"


def test_model_control_none():
    """A second replica on the same database, in Triton's model control mode none: load and
    unload refused with Triton's message; what the first one stored is served here too."""
    srv = H.start_server(["--cpu-workers", "1", "--model-control-mode", "none"])
    c = client(srv, key=SRV.admin_key)          # the store's admin key: both servers share it
    msg = "explicit model load / unload is not allowed if polling is enabled"
    raises(lambda: c.load_model(DEMO), 503, msg)
    raises(lambda: c.unload_model(DEMO), 503, msg)
    assert c.get_model_config(DEMO)["name"] == DEMO
    # what the first server changed is in the shared store: this replica has it too
    assert c.get_model_config(OTHER)["max_batch_size"] == 4                 # the config override
    assert {e["version"] for e in c.get_model_repository_index() if e["name"] == "demo-files"} == {"1", "2"}
    body = srv.client(key=SRV.admin_key).request("GET", "/metrics").body.decode()
    assert "# HELP gpujobd_inference_count " in body and "nv_inference" not in body   # no --triton-metrics
    srv.terminate()


if __name__ == "__main__":
    setup()
    run_tests([test_server_metadata_extensions, test_model_config, test_repository_index_load_unload,
               test_load_with_config_override, test_load_with_files, test_statistics_after_inferences,
               test_trace_settings, test_log_settings, test_shared_memory_not_supported, test_errors_are_triton_shaped,
               test_tenant_isolation, test_model_control_none])
