"""POST /v2/models/{m}/infer at parity with Triton, driven by NVIDIA's tritonclient.http
unchanged (tritonlib.py) over real HTTPS against a real PostgreSQL: every datatype the ONNX
runtime feeds in JSON and binary form, in and out; several inputs and outputs, chosen or
all; a batch dimension or none; BYTES; request and response compression both ways (and a
zip bomb refused with 413); the classification extension; request id and parameters;
async_infer; Triton's {"error": ...} 400s for bad requests; model metadata. The test models
are exported with PyTorch (models.py) and their outputs compared with the same modules run
by torch; the demo model's with its ONNX weights run by torch (tests/infer/reference.py)."""
import gzip
import json
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import models  # noqa: E402
import tritonlib as tl  # noqa: E402
from tritonlib import InferenceServerException, httpclient  # noqa: E402
from tritonclient.http._utils import _get_inference_request  # noqa: E402

sys.path.insert(0, os.path.join(tl.SRC, "tests", "infer"))
from reference import OnnxTorch  # noqa: E402

H = SRV = C = None
DEMO_REF = None


def setup():
    global H, SRV, C, DEMO_REF
    H = tl.Harness()
    data_dir = os.path.join(H.tmp, "srv0")
    models.write_models(os.path.join(data_dir, "models"))
    SRV = H.start_server(["--cpu-workers", "1"], data_dir=data_dir)
    C = tl.client(SRV)
    DEMO_REF = OnnxTorch(tl.DEMO_ONNX)


def inp(name, array, datatype=None, binary=True):
    dt = datatype or tl_dtype(array)
    i = httpclient.InferInput(name, list(array.shape), dt)
    i.set_data_from_numpy(array, binary_data=binary)
    return i


def tl_dtype(array):
    from tritonclient.utils import np_to_triton_dtype
    return np_to_triton_dtype(array.dtype)


def out(name, binary=True, class_count=0):
    return httpclient.InferRequestedOutput(name, binary_data=binary, class_count=class_count)


def raises(fn, *words):
    """fn() must fail with InferenceServerException naming every word; returns its message."""
    try:
        fn()
    except InferenceServerException as e:
        msg = e.message()
        for w in words:
            assert w in msg, (w, msg)
        return msg
    raise AssertionError(f"no error (expected one naming {words})")


def demo_images(n, seed):
    return np.random.RandomState(seed).normal(0, 1, size=(n, 1, 256, 256)).astype(np.float32)


def text(v):
    """A BYTES element as tritonclient gives it: bytes (binary) or str (JSON)."""
    return v.decode() if isinstance(v, bytes) else v


def close(got, want, what, tol=1e-4):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    err = np.max(np.abs(got - want) / (1e-3 + np.abs(want))) if got.size else 0
    assert err < tol, f"{what}: relative error {err}\n{got}\n{want}"


# ---- the demo model: the JSON bug, compression ---------------------------------------------

def test_demo_json_and_reused_headers():
    """The issue's JSON request (2x1x256x256, binary_data=False) works, and so does it after a
    binary request that shared the caller's headers dict: tritonclient writes
    Inference-Header-Content-Length into that dict, so the JSON request carries a stale one."""
    x = demo_images(2, 1)
    want = DEMO_REF(x)
    r = C.infer(tl.DEMO, [inp("image", x, binary=False)], outputs=[out("logits", binary=False)])
    close(r.as_numpy("logits"), want, "JSON in, JSON out")
    auth = {"Authorization": f"Bearer {SRV.admin_key}"}
    plain = tl.client(SRV, key="")              # no plugin: the key travels in the shared dict
    for binary in (True, False, True, False):
        r = plain.infer(tl.DEMO, [inp("image", x, binary=binary)], outputs=[out("logits")], headers=auth)
        close(r.as_numpy("logits"), want, f"shared headers, binary={binary}")
    assert "Inference-Header-Content-Length" in auth, auth   # the client did write it
    # a stale length past the end of a later, shorter JSON body
    a = np.ones((1, 4), np.float32)
    r = plain.infer("multi_io", [inp("a", a), inp("b", a)], outputs=[out("sum")], request_id="x" * 300,
                    headers=auth)
    stale = auth["Inference-Header-Content-Length"]
    ins, outs = [inp("a", a, binary=False), inp("b", a, binary=False)], [out("sum", binary=False)]
    body, _ = _get_inference_request(ins, "", outs, 0, False, False, 0, None, None)   # what infer sends
    assert stale > len(body), (stale, len(body))
    r = plain.infer("multi_io", ins, outputs=outs, headers=auth)
    assert auth["Inference-Header-Content-Length"] == stale, auth
    close(r.as_numpy("sum"), 2 * a, "stale length past the body")


def test_compression_both_ways():
    x = demo_images(3, 2)
    want = DEMO_REF(x)
    for req in ("gzip", "deflate", None):
        for resp in ("gzip", "deflate", None):
            for binary in (True, False):
                r = C.infer(tl.DEMO, [inp("image", x, binary=binary)], outputs=[out("logits", binary=binary)],
                            request_compression_algorithm=req, response_compression_algorithm=resp)
                close(r.as_numpy("logits"), want, f"request {req}, response {resp}, binary {binary}")
    # the response really is compressed, and Inference-Header-Content-Length counts it inflated
    raw = SRV.client()
    head = json.dumps({"inputs": [{"name": "image", "shape": [1, 1, 256, 256], "datatype": "FP32",
                                   "parameters": {"binary_data_size": 256 * 256 * 4}}],
                       "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}).encode()
    body = gzip.compress(head + x[:1].tobytes())
    for coding, inflate in (("gzip", gzip.decompress), ("deflate", zlib.decompress)):
        r = raw.request("POST", f"/v2/models/{tl.DEMO}/infer", body=body,
                        headers={"Content-Encoding": "gzip", "Accept-Encoding": coding,
                                 "Inference-Header-Content-Length": str(len(head))})
        assert r.status == 200, r
        assert r.headers["content-encoding"] == coding, r.headers
        plain = inflate(r.body)
        n = int(r.headers["inference-header-content-length"])
        meta = json.loads(plain[:n])
        assert meta["outputs"][0]["parameters"]["binary_data_size"] == 16, meta
        close(np.frombuffer(plain[n:], "<f4").reshape(1, 4), want[:1], f"raw {coding}")
    # corrupt and unknown codings
    r = raw.request("POST", f"/v2/models/{tl.DEMO}/infer", body=body[:-20],
                    headers={"Content-Encoding": "gzip", "Inference-Header-Content-Length": str(len(head))})
    assert r.status == 400 and "gzip" in r.json()["error"], r
    r = raw.request("POST", f"/v2/models/{tl.DEMO}/infer", body=body, headers={"Content-Encoding": "br"})
    assert r.status == 415 and "Content-Encoding" in r.json()["error"], r


def test_zip_bomb_refused():
    """64 MiB of zeros gzip to ~64 KB: far under the demo model's body limit compressed,
    far over it inflated; 413 with {"error"}, the server unharmed."""
    bomb = gzip.compress(bytes(64 << 20), compresslevel=9)
    assert len(bomb) < 1 << 20
    raw = SRV.client()
    r = raw.request("POST", f"/v2/models/{tl.DEMO}/infer", body=bomb,
                    headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
    assert r.status == 413 and "inflates past" in r.json()["error"], r
    bomb = zlib.compress(bytes(64 << 20), 9)
    r = raw.request("POST", f"/v2/models/{tl.DEMO}/infer", body=bomb, headers={"Content-Encoding": "deflate"})
    assert r.status == 413, r
    assert C.is_server_live()


def test_demo_classification():
    """class_count on the demo's output: Triton's "value:index:label" strings, top first, with
    the labels of its config; per sample."""
    x = demo_images(2, 3)
    logits = DEMO_REF(x)
    labels = ["no_finding", "nodule", "effusion", "cardiomegaly"]
    for binary in (True, False):
        r = C.infer(tl.DEMO, [inp("image", x)], outputs=[out("logits", binary=binary, class_count=2)])
        got = r.as_numpy("logits")
        assert got.shape == (2, 2), got.shape
        assert r.get_output("logits")["datatype"] == "BYTES"
        for s in range(2):
            order = np.argsort(-logits[s], kind="stable")[:2]
            for j, k in enumerate(order):
                v, idx, label = text(got[s][j]).split(":")
                assert int(idx) == k and label == labels[k], (got[s], order)
                assert abs(float(v) - logits[s][k]) < 1e-3 * (1 + abs(logits[s][k])), (v, logits[s][k])
                assert len(v.split(".")[1]) == 6, v      # std::to_string's "%f"


# ---- the test models ---------------------------------------------------------------------------

def random_of(dt, shape, rng):
    if dt == "BOOL":
        return rng.randint(0, 2, size=shape).astype(np.bool_)
    if dt == "BYTES":
        words = ["alpha", "βeta", "", "γάμμα δέλτα", "x" * 300]
        return np.array([[words[rng.randint(len(words))] for _ in range(shape[1])]
                         for _ in range(shape[0])], dtype=np.object_)
    np_type = models.DATATYPES[dt][1]
    if dt in ("FP16", "FP32", "FP64", "BF16"):
        return (rng.normal(0, 100, size=shape)).astype(np_type)
    info = np.iinfo(np_type)
    # UINT64 below 2**63: JSON integers are signed 64-bit here (jansson)
    high = 2 ** 63 - 1 if np_type == np.uint64 else info.max
    return rng.randint(info.min, high, size=shape, dtype=np_type)


def bf16_round(a):
    """What tritonclient sends for BF16: the upper 16 bits of each float32."""
    return (a.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)


def test_every_datatype_json_and_binary():
    rng = np.random.RandomState(7)
    data = {dt: random_of(dt, (2, 3), rng) for dt in models.DATATYPES}
    data["UINT64"][0, 0] = np.uint64(2 ** 63 - 1)    # the largest JSON integer
    data["INT64"][0, 1] = np.int64(-2 ** 63)
    for in_binary in (True, False):
        for out_binary in (True, False):
            ins = [inp(f"in_{dt}", a, dt, binary=in_binary or dt == "BF16") for dt, a in data.items()]
            outs = [out(f"out_{dt}", binary=out_binary or dt == "BF16") for dt in data]
            r = C.infer("all_types", ins, outputs=outs)
            for dt, a in data.items():
                got = r.as_numpy(f"out_{dt}")
                o = r.get_output(f"out_{dt}")
                assert o["datatype"] == dt and o["shape"] == [2, 3], o
                want = bf16_round(a) if dt == "BF16" else a
                if dt == "BYTES":
                    got = np.array([[text(v) for v in row] for row in got], dtype=np.object_)
                assert got.shape == want.shape and np.array_equal(got, want), (dt, in_binary, out_binary, got, want)
                if dt not in ("BYTES", "BF16"):
                    assert got.dtype == want.dtype, (dt, got.dtype)
    # one input missing, one of the wrong type
    ins = [inp(f"in_{dt}", a, dt) for dt, a in data.items() if dt != "INT8"]
    raises(lambda: C.infer("all_types", ins), "expected 14 inputs but got 13", "'in_INT8'")
    ins.append(inp("in_INT8", data["INT16"], "INT16"))
    raises(lambda: C.infer("all_types", ins), "in_INT8", "data-type is 'INT16'", "expects 'INT8'")


def test_several_inputs_and_outputs():
    rng = np.random.RandomState(8)
    a, b = rng.normal(size=(5, 4)).astype(np.float32), rng.normal(size=(5, 4)).astype(np.float32)
    want = dict(zip(["sum", "prod", "argmax_a"], models.torch_reference("multi_io", a, b)))
    want["argmax_a"] = want["argmax_a"].reshape(-1, 1)   # config dims [1], reshape [] (the model's [batch])
    # inputs in any order; all outputs (binary: the client's default with none listed)
    r = C.infer("multi_io", [inp("b", b), inp("a", a, binary=False)])
    for name, w in want.items():
        close(r.as_numpy(name), w, name)
        assert r.get_output(name)["parameters"]["binary_data_size"] == w.nbytes
    assert r.as_numpy("argmax_a").dtype == np.int64
    # a chosen subset, in the request's order, one binary and one JSON
    r = C.infer("multi_io", [inp("a", a), inp("b", b)], outputs=[out("argmax_a", binary=False), out("prod")])
    names = [o["name"] for o in r.get_response()["outputs"]]
    assert names == ["argmax_a", "prod"], names
    assert np.array_equal(r.as_numpy("argmax_a"), want["argmax_a"])
    close(r.as_numpy("prod"), want["prod"], "prod")
    assert r.as_numpy("sum") is None
    # as Triton: a listed output without binary_data is JSON, binary_data_output or not
    raw = SRV.client()
    body = {"inputs": [{"name": n, "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]} for n in "ab"],
            "outputs": [{"name": "sum"}], "parameters": {"binary_data_output": True}}
    r = raw.request("POST", "/v2/models/multi_io/infer", body=json.dumps(body).encode(),
                    headers={"Content-Type": "application/json"})
    assert r.status == 200 and r.json()["outputs"][0]["data"] == [2, 4, 6, 8], r


def test_int64_and_fp16():
    rng = np.random.RandomState(9)
    i = rng.randint(-10 ** 12, 10 ** 12, size=(3, 3)).astype(np.int64)
    h = rng.normal(0, 10, size=(3, 3)).astype(np.float16)
    want_i, want_h = models.torch_reference("int_half", i, h)
    for binary in (True, False):
        r = C.infer("int_half", [inp("i", i, binary=binary), inp("h", h, binary=binary)],
                    outputs=[out("i_out", binary), out("h_out", binary)])
        assert np.array_equal(r.as_numpy("i_out"), want_i), binary
        assert np.array_equal(r.as_numpy("h_out").astype(np.float16), want_h), binary


def test_bools():
    rng = np.random.RandomState(10)
    x, y = rng.randint(0, 2, (4, 4)).astype(bool), rng.randint(0, 2, (4, 4)).astype(bool)
    want = models.torch_reference("bools", x, y)
    for binary in (True, False):
        r = C.infer("bools", [inp("x", x, binary=binary), inp("y", y, binary=binary)],
                    outputs=[out(n, binary) for n in ("x_and_y", "x_or_y", "not_x")])
        for n, w in zip(("x_and_y", "x_or_y", "not_x"), want):
            assert r.as_numpy(n).dtype == np.bool_ and np.array_equal(r.as_numpy(n), w), (n, binary)


def test_no_batch_dimension():
    m = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    sums, half = models.torch_reference("no_batch", m)
    for binary in (True, False):
        r = C.infer("no_batch", [inp("m", m, binary=binary)], outputs=[out("row_sums", binary), out("half", binary)])
        close(r.as_numpy("row_sums"), sums, "row_sums")
        close(r.as_numpy("half"), half, "half")
    md = C.get_model_metadata("no_batch")
    assert md["inputs"] == [{"name": "m", "datatype": "FP32", "shape": [2, 3]}], md
    raises(lambda: C.infer("no_batch", [inp("m", m.reshape(1, 2, 3))]), "unexpected shape for input 'm'",
           "Expected [2,3], got [1,2,3]")


def test_bytes_tensors():
    words = np.array([["héllo", "wörld"], ["", "a" * 1000]], dtype=np.object_)
    for binary in (True, False):
        r = C.infer("strings", [inp("text", words, "BYTES", binary=binary)],
                    outputs=[out("echo", binary), out("swapped", binary)])
        echo = [[text(v) for v in row] for row in r.as_numpy("echo")]
        swapped = [[text(v) for v in row] for row in r.as_numpy("swapped")]
        assert echo == words.tolist(), echo
        assert swapped == [row[::-1] for row in words.tolist()], swapped
    # bytes that are not UTF-8 travel binary; asked as JSON they get Triton-like 400
    raw = np.array([[b"\xff\x00\xfe", b"ok"]], dtype=np.object_)
    r = C.infer("strings", [inp("text", raw, "BYTES")], outputs=[out("echo")])
    assert r.as_numpy("echo").tolist() == raw.tolist()
    raises(lambda: C.infer("strings", [inp("text", raw, "BYTES")], outputs=[out("echo", binary=False)]),
           "not UTF-8", "binary_data")


def classified(model, x, k):
    """The scores output of model for x with class_count k: per sample, its strings."""
    r = C.infer(model, [inp("x", x)], outputs=[out("scores", class_count=k)])
    got = r.as_numpy("scores")
    assert r.get_output("scores")["datatype"] == "BYTES" and got.shape == (len(x), min(k, 5)), got.shape
    return [[text(v) for v in row] for row in got]


def top(scores, k, labels=None):
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]
    return ["%f:%d" % (scores[i], i) + (f":{labels[i]}" if labels else "") for i in order]


def test_classification():
    """Triton's strings "value:index" (std::to_string's %f), top first, equal values by index,
    per sample; k past the count gives them all; a type Triton does not classify is refused."""
    x = np.array([[1, 1, 1, 1, 1], [0.5, 2, -1, 4, 0]], dtype=np.float32)
    scores = models.torch_reference("scores", x)[0]
    for k in (1, 3, 9):
        got = classified("scores", x, k)
        assert got == [top(scores[s], k) for s in range(2)], (got, k)
    b = np.ones((1, 4), dtype=bool)
    raises(lambda: C.infer("bools", [inp("x", b), inp("y", b)], outputs=[out("not_x", class_count=1)]),
           "class result not available", "BOOL")


def test_classification_labels_from_label_file():
    """An output's label_filename (Triton's config) names the classes: "value:index:label"."""
    x = np.array([[0.5, 2, -1, 4, 0]], dtype=np.float32)
    scores = models.torch_reference("scores", x)[0]
    assert classified("scores_labeled", x, 3) == [top(scores[0], 3, models.CLASS_LABELS)]


def test_request_id_and_parameters():
    a = np.ones((1, 4), np.float32)
    r = C.infer("multi_io", [inp("a", a), inp("b", a)], request_id="req-42", priority=3, timeout=10 ** 7,
                sequence_id=17, sequence_start=True, parameters={"custom": "x", "n": 3, "flag": False})
    assert r.get_response()["id"] == "req-42", r.get_response()
    close(r.as_numpy("sum"), 2 * a, "with parameters")
    r = C.infer("multi_io", [inp("a", a), inp("b", a)])
    assert "id" not in r.get_response()
    raw = SRV.client()
    body = {"inputs": [{"name": "a", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]},
                       {"name": "b", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    for params, word in (({"custom": [1, 2]}, "invalid type"), ({"timeout": "soon"}, "microseconds"),
                         ({"priority": -1}, "priority"), ({"binary_data_output": 1}, "binary_data_output")):
        r = raw.request("POST", "/v2/models/multi_io/infer", body=json.dumps(dict(body, parameters=params)).encode(),
                        headers={"Content-Type": "application/json"})
        assert r.status == 400 and word in r.json()["error"], (params, r)
    # timeout bounds the queue wait: 1 us against the demo model's 2 ms batching delay
    x = demo_images(1, 4)
    raises(lambda: C.infer(tl.DEMO, [inp("image", x)], timeout=1), "timeout")


def test_async_infer():
    c = tl.client(SRV, concurrency=4)
    rng = np.random.RandomState(11)
    pairs = [(rng.normal(size=(1 + k % 3, 4)).astype(np.float32), rng.normal(size=(1 + k % 3, 4)).astype(np.float32))
             for k in range(12)]
    pending = [c.async_infer("multi_io", [inp("a", a, binary=k % 2 == 0), inp("b", b)], request_id=str(k))
               for k, (a, b) in enumerate(pairs)]
    for k, p in enumerate(pending):
        r = p.get_result()
        assert r.get_response()["id"] == str(k)
        want = models.torch_reference("multi_io", *pairs[k])
        close(r.as_numpy("sum"), want[0], f"async {k}")
        assert np.array_equal(r.as_numpy("argmax_a"), want[2].reshape(-1, 1))
    c.close()


def test_errors_are_triton_400s():
    a = np.ones((2, 4), np.float32)
    raises(lambda: C.infer("multi_io", [inp("a", a)]), "expected 2 inputs but got 1", "'b'")
    raises(lambda: C.infer("multi_io", [inp("a", a), inp("b", a), inp("c", a)]), "expected 2 inputs but got 3")
    raises(lambda: C.infer("multi_io", [inp("a", a), inp("zz", a)]), "unexpected inference input 'zz'")
    raises(lambda: C.infer("multi_io", [inp("a", a), inp("b", a.astype(np.float64))]), "data-type is 'FP64'")
    raises(lambda: C.infer("multi_io", [inp("a", a), inp("b", np.ones((2, 5), np.float32))]),
           "unexpected shape for input 'b'", "Expected [-1,4], got [2,5]")
    raises(lambda: C.infer("multi_io", [inp("a", a), inp("b", np.ones((3, 4), np.float32))]), "batch size")
    raises(lambda: C.infer("multi_io", [inp("a", np.ones((9, 4), np.float32)), inp("b", np.ones((9, 4), np.float32))]),
           "batch-size must be <= 8")
    raises(lambda: C.infer("multi_io", [inp("a", a), inp("b", a)], outputs=[out("nope")]),
           "unexpected inference output 'nope'")
    raises(lambda: C.infer("nope", [inp("a", a)]), "nope")
    # the raw answers are {"error": "..."} with 400, data that does not match its shape too
    raw = SRV.client()
    for body in ({"inputs": [{"name": "a", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3]},
                             {"name": "b", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]},
                 {"inputs": [{"name": "a", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, "4"]},
                             {"name": "b", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]},
                 {"inputs": [{"name": "a", "shape": [1, 4], "datatype": "FP32"},
                             {"name": "b", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]},
                 {"inputs": []}):
        r = raw.request("POST", "/v2/models/multi_io/infer", body=json.dumps(body).encode(),
                        headers={"Content-Type": "application/json"})
        assert r.status == 400 and isinstance(r.json().get("error"), str), (body, r)


def test_body_limits_follow_the_model():
    """A body is bounded by what the model's inputs can take (JSON numbers at 32 bytes, BYTES
    elements at 8 KiB, plus 64 KiB of JSON around them): multi_io (two 8x4 FP32 inputs) takes
    ~66 KB, so 200 KB is refused (413, from Content-Length, before it is read) where the
    BYTES model takes 128 KB of strings."""
    raw = SRV.client()
    big = {"inputs": [{"name": n, "shape": [8, 4], "datatype": "FP32", "data": [0.125] * 25000} for n in "ab"]}
    r = raw.request("POST", "/v2/models/multi_io/infer", body=json.dumps(big).encode(),
                    headers={"Content-Type": "application/json"})
    assert r.status == 413 and "multi_io" in r.json()["error"], r
    payload = bytes(200000)
    head = json.dumps({"inputs": [{"name": "a", "shape": [8, 4], "datatype": "FP32",
                                   "parameters": {"binary_data_size": len(payload)}}]}).encode()
    r = raw.request("POST", "/v2/models/multi_io/infer", body=head + payload,
                    headers={"Inference-Header-Content-Length": str(len(head))})
    assert r.status == 413, r
    words = np.array([["w" * 8000, "v" * 8000]] * 8, dtype=np.object_)
    r = C.infer("strings", [inp("text", words, "BYTES")], outputs=[out("echo")])
    assert r.as_numpy("echo").shape == (8, 2) and r.as_numpy("echo")[7][1] == b"v" * 8000


def test_model_metadata():
    md = C.get_model_metadata("multi_io")
    assert md["platform"] == "onnxruntime_onnx" and md["versions"] == ["1"], md
    assert md["inputs"] == [{"name": "a", "datatype": "FP32", "shape": [-1, 4]},
                            {"name": "b", "datatype": "FP32", "shape": [-1, 4]}], md
    assert md["outputs"] == [{"name": "sum", "datatype": "FP32", "shape": [-1, 4]},
                             {"name": "prod", "datatype": "FP32", "shape": [-1, 4]},
                             {"name": "argmax_a", "datatype": "INT64", "shape": [-1, 1]}], md
    md = C.get_model_metadata("all_types")
    assert [i["datatype"] for i in md["inputs"]] == list(models.DATATYPES), md
    md = C.get_model_metadata(tl.DEMO)
    assert md["platform"] == "onnxruntime_onnx", md
    assert md["inputs"] == [{"name": "image", "datatype": "FP32", "shape": [-1, 1, 256, 256]}], md


if __name__ == "__main__":
    setup()
    tl.run_tests([test_demo_json_and_reused_headers, test_compression_both_ways, test_zip_bomb_refused,
                  test_demo_classification, test_every_datatype_json_and_binary, test_several_inputs_and_outputs,
                  test_int64_and_fp16, test_bools, test_no_batch_dimension, test_bytes_tensors,
                  test_classification, test_classification_labels_from_label_file,
                  test_request_id_and_parameters, test_async_infer,
                  test_errors_are_triton_400s, test_body_limits_follow_the_model, test_model_metadata])
