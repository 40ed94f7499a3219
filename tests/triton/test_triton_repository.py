"""A Triton model repository as it is (issue 17), driven with NVIDIA's tritonclient.http,
unchanged, against gpujobd serve --models-dir over real HTTPS and a real PostgreSQL:

- config.pbtxt (Triton's protobuf text format) is read where config.json is, and wins when
  both are there; a model directory without a config is completed from the model; a broken
  config.pbtxt is refused with its line and column and the rest of the repository serves;
- each --model-control-mode as Triton's: on-use (this server's default: loads on first use),
  none (everything loaded at start), explicit (only --load-model; the others refuse
  inference until loaded), poll (the directory read again: a new version appears and
  loads, a removed one goes, a model uploaded through the API stays).

The models are the shipped demo model (models/chest-xray-demo) under several names."""
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

from tritonlib import DEMO_ONNX, Harness, InferenceServerException, client, run_tests
from harness import multipart_form

DEMO_JSON = os.path.join(os.path.dirname(DEMO_ONNX), "..", "config.json")

# The demo model's config as Triton writes it.
DEMO_PBTXT = """# the demo model, as a Triton config.pbtxt
name: "demo_pbtxt"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {
    name: "image"
    data_type: TYPE_FP32
    dims: [ 1, 256, 256 ]
  }
]
output [
  {
    name: "logits"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
dynamic_batching { max_queue_delay_microseconds: 2000 }
instance_group [ { kind: KIND_CPU count: 1 } ]
version_policy: { all { } }
parameters { key: "origin" value: { string_value: "triton" } }
"""


def make_repo(root):
    """A Triton repository: demo_json (config.json), demo_pbtxt (config.pbtxt), demo_both
    (config.pbtxt beside a config.json that would not load), demo_bare (no config),
    demo_broken (config.pbtxt with a typo)."""
    def model(name, version=1):
        d = os.path.join(root, name, str(version))
        os.makedirs(d, exist_ok=True)
        shutil.copy(DEMO_ONNX, os.path.join(d, "model.onnx"))
        return os.path.join(root, name)

    with open(DEMO_JSON) as f:
        cfg = json.load(f)
    cfg["name"] = "demo_json"
    with open(os.path.join(model("demo_json"), "config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(model("demo_pbtxt"), "config.pbtxt"), "w") as f:
        f.write(DEMO_PBTXT)
    both = model("demo_both")
    with open(os.path.join(both, "config.pbtxt"), "w") as f:
        f.write(DEMO_PBTXT.replace('"demo_pbtxt"', '"demo_both"'))
    with open(os.path.join(both, "config.json"), "w") as f:
        f.write('{"name": "not-this-one"}')
    model("demo_bare")
    with open(os.path.join(model("demo_broken"), "config.pbtxt"), "w") as f:
        f.write('name: "demo_broken"\nmax_batch_size: 8\ninput [ { nmae: "image" } ]\n')


def image_input(n=1):
    from tritonclient.http import InferInput
    inp = InferInput("image", [n, 1, 256, 256], "FP32")
    inp.set_data_from_numpy(np.random.default_rng(7).random((n, 1, 256, 256), dtype=np.float32), binary_data=True)
    return inp


def infer_ok(c, model, version=""):
    r = c.infer(model, [image_input()], model_version=version)
    out = r.as_numpy("logits")
    assert out is not None and out.shape == (1, 4), (model, out)
    return out


def infer_refused(c, model, fragment):
    try:
        c.infer(model, [image_input()])
    except InferenceServerException as e:
        assert fragment in str(e), (model, str(e))
        return
    raise AssertionError(f"{model}: inference was answered")


def serve(mode, *extra):
    h = Harness()
    repo = os.path.join(h.tmp, "repo")
    make_repo(repo)
    srv = h.start_server(["--models-dir", repo, "--model-control-mode", mode] + list(extra))
    return h, srv, repo, client(srv)


def wait_for(what, pred, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout}s: {what}")


def test_repository_as_it_is():
    """on-use: config.pbtxt and config.json models load, config.pbtxt wins over a
    config.json beside it, a model without config is completed from the model, a typo is
    refused with its line and column and the rest serves; use loads a model."""
    h, srv, repo, c = serve("on-use")
    try:
        stored = json.loads(h.scalar("SELECT config FROM models WHERE name = 'demo_pbtxt'"))
        assert stored == {
            "name": "demo_pbtxt", "platform": "onnxruntime_onnx", "max_batch_size": 8,
            "input": [{"name": "image", "data_type": "TYPE_FP32", "dims": [1, 256, 256]}],
            "output": [{"name": "logits", "data_type": "TYPE_FP32", "dims": [4]}],
            "dynamic_batching": {"preferred_batch_size": [], "max_queue_delay_microseconds": 2000},
            "instance_group": [{"kind": "KIND_CPU", "count": 1}],
            "version_policy": {"all": {}},
            "parameters": {"origin": {"string_value": "triton"}}}, stored
        assert json.loads(h.scalar("SELECT config FROM models WHERE name = 'demo_both'"))["name"] == "demo_both"
        assert h.scalar("SELECT config FROM models WHERE name = 'demo_bare'") == "{}"
        assert h.scalar("SELECT count(*) FROM models WHERE name = 'demo_broken'") == "0"
        log = srv.log_text()
        assert "config.pbtxt line 3, column 11: ModelInput has no field 'nmae'" in log, log[-2000:]
        # Each loads: its config checked against the model, a trial session made.
        for m in ("demo_json", "demo_pbtxt", "demo_both", "demo_bare"):
            assert not c.is_model_ready(m), f"{m} is ready before any use"
            r = srv.client().request("POST", f"/v1/models/{m}/load")
            assert r.status == 200, (m, r)
            assert c.is_model_ready(m), m
        # The same model answers the same under each config.
        want = infer_ok(c, "demo_json")
        for m in ("demo_pbtxt", "demo_both", "demo_bare"):
            got = infer_ok(c, m)
            assert np.allclose(got, want, atol=1e-5), (m, got, want)
        # on-use: inference loads a model.
        assert not c.is_model_ready("chest-xray-demo")
        infer_ok(c, "chest-xray-demo")
        assert c.is_model_ready("chest-xray-demo")
    finally:
        h.close()


def test_none_loads_everything():
    h, srv, repo, c = serve("none")
    try:
        for m in ("chest-xray-demo", "demo_json", "demo_pbtxt", "demo_both", "demo_bare"):
            assert c.is_model_ready(m), f"{m} is not ready at start in mode none"
        infer_ok(c, "demo_pbtxt")
        infer_ok(c, "demo_json")
        assert not c.is_model_ready("demo_broken")
    finally:
        h.close()


def test_explicit_loads_only_what_is_named():
    h, srv, repo, c = serve("explicit", "--load-model", "demo_json,demo_nothere")
    try:
        assert c.is_model_ready("demo_json")
        assert not c.is_model_ready("chest-xray-demo")
        assert "--load-model demo_nothere: there is no such model" in srv.log_text()
        # Use does not load it: Triton's "not ready" until an explicit load.
        infer_refused(c, "chest-xray-demo", "not ready")
        assert not c.is_model_ready("chest-xray-demo")
        r = srv.client().request("POST", "/v1/models/chest-xray-demo/load")
        assert r.status == 200, r
        assert c.is_model_ready("chest-xray-demo")
        infer_ok(c, "chest-xray-demo")
        infer_ok(c, "demo_json")
    finally:
        h.close()


def test_poll_follows_the_directory():
    h, srv, repo, c = serve("poll", "--repository-poll-secs", "1")
    try:
        assert c.is_model_ready("demo_json", "1")
        assert not c.is_model_ready("demo_json", "2")
        # A new version appears and is loaded.
        v2 = os.path.join(repo, "demo_json", "2")
        os.makedirs(v2 + ".tmp")
        shutil.copy(DEMO_ONNX, os.path.join(v2 + ".tmp", "model.onnx"))
        os.rename(v2 + ".tmp", v2)
        wait_for("demo_json version 2 ready", lambda: c.is_model_ready("demo_json", "2"))
        infer_ok(c, "demo_json", "2")
        # So does a new model.
        with open(os.path.join(repo, "demo_json", "config.json")) as f:
            cfg = json.load(f)
        cfg["name"] = "demo_new"
        os.makedirs(os.path.join(repo, ".demo_new", "1"))
        shutil.copy(DEMO_ONNX, os.path.join(repo, ".demo_new", "1", "model.onnx"))
        with open(os.path.join(repo, ".demo_new", "config.json"), "w") as f:
            json.dump(cfg, f)
        os.rename(os.path.join(repo, ".demo_new"), os.path.join(repo, "demo_new"))
        wait_for("demo_new ready", lambda: c.is_model_ready("demo_new"))
        # A model uploaded through the API is not the directory's: polls leave it.
        with open(DEMO_JSON) as f:
            cfg = json.load(f)
        cfg["name"] = "uploaded"
        body, ctype = multipart_form([("model", "model.onnx", open(DEMO_ONNX, "rb").read()),
                                      ("config", "config.json", json.dumps(cfg).encode())])
        r = srv.client().request("PUT", "/v1/models/uploaded/versions/1", body=body, headers={"Content-Type": ctype})
        assert r.status == 201, r
        # A removed version goes.
        shutil.rmtree(v2)
        wait_for("demo_json version 2 gone", lambda: not c.is_model_ready("demo_json", "2"))
        assert c.is_model_ready("demo_json", "1")
        # A changed config is applied and the model loaded again with it.
        with open(os.path.join(repo, "demo_json", "config.json")) as f:
            cfg = json.load(f)
        cfg["max_batch_size"] = 4
        cfg["dynamic_batching"]["preferred_batch_sizes"] = [2, 4]
        with open(os.path.join(repo, "demo_json", "config.json.tmp"), "w") as f:
            json.dump(cfg, f)
        os.rename(os.path.join(repo, "demo_json", "config.json.tmp"), os.path.join(repo, "demo_json", "config.json"))
        wait_for("the new config in the store", lambda: json.loads(
            h.scalar("SELECT config FROM models WHERE name = 'demo_json'"))["max_batch_size"] == 4)
        wait_for("demo_json loaded again", lambda: srv.log_text().count("model demo_json version 1 loaded") >= 2)
        assert c.is_model_ready("demo_json", "1")
        infer_ok(c, "demo_json")
        # A version whose files change is replaced by the new files, and loaded again.
        with open(os.path.join(repo, "demo_json", "1", "notes.txt"), "w") as f:
            f.write("a file added to version 1\n")
        wait_for("version 1 replaced", lambda: h.scalar(
            "SELECT count(*) FROM model_files WHERE model = 'demo_json' AND version = 1 AND path = 'notes.txt'") == "1")
        wait_for("demo_json loaded a third time", lambda: srv.log_text().count("model demo_json version 1 loaded") >= 3)
        infer_ok(c, "demo_json")
        # A version with a broken config of its own: said once (not at every poll), not imported.
        v3 = os.path.join(repo, "demo_json", ".3")
        os.makedirs(v3)
        shutil.copy(DEMO_ONNX, os.path.join(v3, "model.onnx"))
        with open(os.path.join(v3, "config.pbtxt"), "w") as f:
            f.write("max_batch_size: 4 max_batch_size: 8\n")
        os.rename(v3, os.path.join(repo, "demo_json", "3"))
        said = "poll: demo_json version 3: config.pbtxt line 1, column 19: field 'max_batch_size' is given more than once"
        wait_for("the broken version config said", lambda: said in srv.log_text())
        time.sleep(2.5)   # more than two polls
        assert srv.log_text().count(said) == 1, srv.log_text()[-3000:]
        assert h.scalar("SELECT count(*) FROM model_versions WHERE model = 'demo_json' AND version = 3") == "0"
        wait_for("the uploaded model loaded", lambda: c.is_model_ready("uploaded"))
        infer_ok(c, "uploaded")
        assert h.scalar("SELECT count(*) FROM model_versions WHERE model = 'uploaded'") == "1"
    finally:
        h.close()


def test_upload_pbtxt_errors():
    """An upload with a bad config.pbtxt is refused with the line and column, nothing stored."""
    h, srv, repo, c = serve("on-use")
    try:
        body, ctype = multipart_form([("model", "model.onnx", open(DEMO_ONNX, "rb").read()),
                                      ("config", "config.pbtxt", b'name: "x"\nmax_batch_size: eight\n')])
        r = srv.client().request("PUT", "/v1/models/x/versions/1", body=body, headers={"Content-Type": ctype})
        assert r.status == 422, r
        assert "config.pbtxt line 2, column 17" in r.json()["detail"], r.json()
        assert h.scalar("SELECT count(*) FROM models WHERE name = 'x'") == "0"
    finally:
        h.close()


if __name__ == "__main__":
    run_tests([test_repository_as_it_is, test_none_loads_everything, test_explicit_loads_only_what_is_named,
               test_poll_follows_the_directory, test_upload_pbtxt_errors])
