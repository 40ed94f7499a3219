"""Triton's gRPC protocol (`--grpc-listen`, issue 23) driven by NVIDIA's tritonclient.grpc,
unchanged, over TLS with client certificates made in the test (grpc_certs.py): the server's
certificate from a CA, a client certificate whose CN names a tenant. The seed's Listado 3.3
function, as printed, is one of the tests. Inference goes through the same batcher as /v2
over HTTP (the statistics HTTP reports count gRPC's requests). Refused: no credentials, a
foreign CA's certificate, an expired one, one for a tenant that does not exist, a wrong key;
a message over --grpc-max-message. Each refusal leaves the server serving others."""
import json
import os
import pathlib
import shutil
import sys

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import grpc_certs  # noqa: E402
import models  # noqa: E402
import tritonlib as tl  # noqa: E402
import harness  # noqa: E402  (on the path tritonlib sets)
import tritonclient  # noqa: E402
import tritonclient.grpc  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402
from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

MAX_MESSAGE = 4 << 20
THREADS = 4                 # so at most 2 streams at once
STREAM_IDLE_S = 3
H = SRV = CA = FOREIGN = None
GRPC_PORT = None
CERTS = {}
USER_KEY = None


def setup():
    global H, SRV, CA, FOREIGN, GRPC_PORT, USER_KEY
    H = tl.Harness()
    data_dir = os.path.join(H.tmp, "srv0")
    models.write_models(os.path.join(data_dir, "models"))
    certs = os.path.join(H.tmp, "certs")
    CA = grpc_certs.CA(os.path.join(certs, "ca"), "hospital-ca")
    FOREIGN = grpc_certs.CA(os.path.join(certs, "foreign"), "foreign-ca")
    CERTS["server"] = CA.issue("localhost", server=True)
    CERTS["hospital"] = CA.issue("hospital")
    CERTS["stranger"] = CA.issue("no-such-tenant")
    CERTS["expired"] = CA.issue("hospital", expired=True)
    CERTS["foreign"] = FOREIGN.issue("hospital")
    CERTS["revoked"] = CA.issue("hospital", tag="hospital-revoked")
    crl = CA.crl([CERTS["revoked"][0]])
    GRPC_PORT = harness.free_port()
    # the harness (and tritonlib.client) trust DATA_DIR/tls/cert.pem: here, the CA
    os.makedirs(os.path.join(data_dir, "tls"), exist_ok=True)
    shutil.copy(CA.cert_path, os.path.join(data_dir, "tls", "cert.pem"))
    SRV = H.start_server(["--cpu-workers", "1", "--tls-cert", CERTS["server"][0], "--tls-key", CERTS["server"][1],
                          "--grpc-listen", f"127.0.0.1:{GRPC_PORT}", "--tls-client-ca", CA.cert_path, "--tls-crl", crl,
                          "--grpc-max-message", str(MAX_MESSAGE), "--grpc-threads", str(THREADS),
                          "--grpc-stream-idle-seconds", str(STREAM_IDLE_S), "--grpc-calls-per-tenant", str(THREADS)],
                         data_dir=data_dir)
    # the tenant the hospital's certificate names exists once it has a key
    r = SRV.client().json("POST", "/v1/api-keys", {"tenant": "hospital", "role": "user"}, expect=201)
    USER_KEY = r["key"]


def client(cert="hospital", **kw):
    """tritonclient.grpc over TLS trusting the CA, presenting cert (None: no certificate)."""
    args = dict(url=f"localhost:{GRPC_PORT}", ssl=True, root_certificates=CA.cert_path)
    if cert:
        args.update(certificate_chain=CERTS[cert][0], private_key=CERTS[cert][1])
    args.update(kw)
    return grpcclient.InferenceServerClient(**args)


def refused(fn, *words):
    try:
        fn()
    except InferenceServerException as e:
        text = f"{e.status()} {e.message()}"
        for w in words:
            assert w in text, (w, text)
        return text
    raise AssertionError(f"not refused (expected {words})")


# ---- the seed's code ---------------------------------------------------------------------------

def build_response_json(output, max_index, labels):
    return {"scores": [float(v) for v in output], "label": labels[max_index] if labels else int(max_index)}


def listado_3_3(data, model, url="localhost:8001", verbose=False, labels=None, certs_dir=None):
    """Listado 3.3 as printed (certificate paths under certs_dir, the seed's certs/)."""
    root_certificates = pathlib.Path(certs_dir, "ca/ca-cert.pem")
    private_key = pathlib.Path(certs_dir, "client/client-key.pem")
    certificate_chain = pathlib.Path(certs_dir, "client/client-cert.pem")

    triton_client = tritonclient.grpc.InferenceServerClient(
        url=url, verbose=verbose, ssl=True,
        root_certificates=root_certificates,
        private_key=private_key,
        certificate_chain=certificate_chain)

    inputs = []
    outputs = []
    input_name = getattr(model, 'input_name')
    output_name = getattr(model, 'output_name')

    inputs.append(
        tritonclient.grpc.InferInput(input_name, data.shape, getattr(model, 'input_data_type')))
    outputs.append(tritonclient.grpc.InferRequestedOutput(output_name, class_count=0))
    # Initialize the data
    inputs[0].set_data_from_numpy(data)
    # Run the inference
    results = triton_client.infer(model_name=getattr(model, 'model_name'),
                                  inputs=inputs,
                                  outputs=outputs)
    output0_data = results.as_numpy(output_name)
    maxs = np.argmax(output0_data, axis=1)
    return build_response_json(output0_data[0], maxs[0], labels)


class ToraxModel:
    model_name = tl.DEMO
    input_name = "image"
    output_name = "logits"
    input_data_type = "FP32"


def test_listado_3_3_as_printed():
    seed = os.path.join(H.tmp, "seed")
    os.makedirs(os.path.join(seed, "ca"))
    os.makedirs(os.path.join(seed, "client"))
    os.symlink(CA.cert_path, os.path.join(seed, "ca", "ca-cert.pem"))
    os.symlink(CERTS["hospital"][0], os.path.join(seed, "client", "client-cert.pem"))
    os.symlink(CERTS["hospital"][1], os.path.join(seed, "client", "client-key.pem"))
    data = np.random.RandomState(3).normal(0, 1, size=(1, 1, 256, 256)).astype(np.float32)
    labels = ["no_finding", "nodule", "effusion", "cardiomegaly"]
    got = listado_3_3(data, ToraxModel(), url=f"localhost:{GRPC_PORT}", labels=labels, certs_dir=seed)
    # the same image over HTTP (/v2) gives the same scores: one implementation, two transports
    hc = tl.client(SRV)
    i = tl.httpclient.InferInput("image", list(data.shape), "FP32")
    i.set_data_from_numpy(data)
    want = hc.infer(tl.DEMO, [i]).as_numpy("logits")[0]
    assert np.allclose(got["scores"], want, rtol=1e-5, atol=1e-6), (got, want)
    assert got["label"] == labels[int(np.argmax(want))], got


# ---- health and metadata -----------------------------------------------------------------------

def test_health_and_metadata():
    c = client()
    assert c.is_server_live() and c.is_server_ready()
    md = c.get_server_metadata(as_json=True)
    assert md["name"] == "gpujobd" and "binary_tensor_data" in md["extensions"], md
    md = c.get_model_metadata("multi_io", as_json=True)
    assert md["platform"] == "onnxruntime_onnx" and md["versions"] == ["1"], md
    assert [(i["name"], i["datatype"], i["shape"]) for i in md["inputs"]] == [("a", "FP32", ["-1", "4"]),
                                                                              ("b", "FP32", ["-1", "4"])], md
    assert [o["name"] for o in md["outputs"]] == ["sum", "prod", "argmax_a"], md
    refused(lambda: c.get_model_metadata("no_such_model"), "StatusCode.NOT_FOUND", "no_such_model")
    c.infer("multi_io", [inp("a", np.ones((1, 4), np.float32)), inp("b", np.ones((1, 4), np.float32))])
    assert c.is_model_ready("multi_io")
    assert not c.is_model_ready("no_such_model")


# ---- inference ---------------------------------------------------------------------------------

def inp(name, array, datatype=None):
    from tritonclient.utils import np_to_triton_dtype
    i = grpcclient.InferInput(name, list(array.shape), datatype or np_to_triton_dtype(array.dtype))
    i.set_data_from_numpy(array)
    return i


def test_several_inputs_and_outputs():
    c = client()
    rs = np.random.RandomState(1)
    a, b = rs.normal(size=(3, 4)).astype(np.float32), rs.normal(size=(3, 4)).astype(np.float32)
    r = c.infer("multi_io", [inp("a", a), inp("b", b)], request_id="req-7")
    want = models.torch_reference("multi_io", a, b)
    for name, w in zip(["sum", "prod", "argmax_a"], want):
        got = r.as_numpy(name)
        assert got.dtype == w.dtype and np.allclose(got, w.reshape(got.shape), rtol=1e-5), (name, got, w)
    resp = r.get_response()
    assert resp.id == "req-7" and resp.model_name == "multi_io" and resp.model_version == "1", resp
    # only the outputs asked for
    r = c.infer("multi_io", [inp("a", a), inp("b", b)], outputs=[grpcclient.InferRequestedOutput("prod")])
    assert [o.name for o in r.get_response().outputs] == ["prod"]


def test_every_datatype():
    c = client()
    arrays = []
    for dt in models.DATATYPES:
        if dt == "BYTES":
            arrays.append(np.array([[b"a", b"\x00\xff", b""]], dtype=np.object_))
        elif dt == "BOOL":
            arrays.append(np.array([[True, False, True]]))
        else:
            from tritonclient.utils import triton_to_np_dtype
            arrays.append(np.array([[1, 2, 3]], dtype=triton_to_np_dtype(dt)))
    r = c.infer("all_types", [inp(f"in_{dt}", a, dt) for dt, a in zip(models.DATATYPES, arrays)])
    for dt, a in zip(models.DATATYPES, arrays):
        got = r.as_numpy(f"out_{dt}")
        assert got.shape == a.shape and (got == a).all(), (dt, got, a)


def test_bytes_tensors():
    c = client()
    text = np.array([[b"left", b"right"]], dtype=np.object_)
    r = c.infer("strings", [inp("text", text, "BYTES")])
    assert list(r.as_numpy("echo")[0]) == [b"left", b"right"], r.as_numpy("echo")
    assert list(r.as_numpy("swapped")[0]) == [b"right", b"left"], r.as_numpy("swapped")


def test_classification():
    c = client()
    a = np.array([[0.1, 0.9, 0.5, 0.2]], np.float32)
    r = c.infer("multi_io", [inp("a", a), inp("b", a)],
                outputs=[grpcclient.InferRequestedOutput("sum", class_count=2)])
    top = [v.decode() for v in r.as_numpy("sum")[0]]
    assert top == ["1.800000:1", "1.000000:2"], top


def test_typed_contents():
    """InferTensorContents (fp32_contents...) rather than raw_input_contents, as other clients send."""
    creds = grpc.ssl_channel_credentials(open(CA.cert_path, "rb").read(), open(CERTS["hospital"][1], "rb").read(),
                                         open(CERTS["hospital"][0], "rb").read())
    with grpc.secure_channel(f"localhost:{GRPC_PORT}", creds) as ch:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        req = service_pb2.ModelInferRequest(model_name="multi_io")
        for name in ("a", "b"):
            t = req.inputs.add(name=name, datatype="FP32", shape=[1, 4])
            t.contents.fp32_contents.extend([1, 2, 3, 4])
        resp = stub.ModelInfer(req)
        names = [o.name for o in resp.outputs]
        s = np.frombuffer(resp.raw_output_contents[names.index("sum")], np.float32)
        assert list(s) == [2, 4, 6, 8], s


def test_async_infer():
    c = client()
    done = []
    a = np.ones((1, 4), np.float32)
    c.async_infer("multi_io", [inp("a", a), inp("b", a)], lambda result, error: done.append((result, error)))
    import time
    deadline = time.time() + 30
    while not done and time.time() < deadline:
        time.sleep(0.05)
    result, error = done[0]
    assert error is None and list(result.as_numpy("sum")[0]) == [2, 2, 2, 2], (result, error)


def test_bad_requests():
    c = client()
    a = np.ones((1, 4), np.float32)
    refused(lambda: c.infer("multi_io", [inp("a", a)]), "INVALID_ARGUMENT", "b")
    refused(lambda: c.infer("multi_io", [inp("a", np.ones((1, 5), np.float32)), inp("b", a)]), "INVALID_ARGUMENT")
    refused(lambda: c.infer("multi_io", [inp("a", a), inp("b", a)],
                            outputs=[grpcclient.InferRequestedOutput("nope")]), "INVALID_ARGUMENT", "nope")
    refused(lambda: c.infer("no_such_model", [inp("a", a)]), "NOT_FOUND")
    refused(lambda: c.infer("multi_io", [inp("a", a), inp("b", a)], model_version="x"), "INVALID_ARGUMENT")


def test_same_statistics_as_http():
    hc = tl.client(SRV)
    before = hc.get_inference_statistics("bools")["model_stats"]
    n0 = before[0]["inference_stats"]["success"]["count"] if before else 0
    c = client()
    x = np.array([[True, False, True, False]])
    for _ in range(3):
        c.infer("bools", [inp("x", x), inp("y", x)])
    after = hc.get_inference_statistics("bools")["model_stats"][0]["inference_stats"]["success"]["count"]
    assert int(after) == int(n0) + 3, (n0, after)


def test_metrics_count_grpc_beside_http():
    c = client()
    x = np.array([[True, False, True, False]])
    c.infer("bools", [inp("x", x), inp("y", x)])
    refused(lambda: c.get_model_metadata("no_such_model"), "NOT_FOUND")
    body = SRV.client().request("GET", "/metrics").body.decode()
    lines = [ln for ln in body.splitlines() if ln.startswith("gpujobd_http_requests_total{")]
    assert any('method="GRPC",route="/inference.GRPCInferenceService/ModelInfer",code="200"' in ln for ln in lines), lines
    assert any('method="GRPC",route="/inference.GRPCInferenceService/ModelMetadata",code="404"' in ln
               for ln in lines), lines
    assert any('method="GET"' in ln for ln in lines), lines   # beside HTTP's


def test_shared_memory_not_supported():
    """Triton's answers of a server without shared memory, as /v2 gives them."""
    c = client()
    assert not c.get_system_shared_memory_status(as_json=True).get("regions")
    refused(lambda: c.get_system_shared_memory_status(region_name="r0"), "NOT_FOUND", "Unable to find system")
    refused(lambda: c.register_system_shared_memory("r0", "/key", 64), "INVALID_ARGUMENT", "not supported")
    refused(lambda: c.register_cuda_shared_memory("r1", b"aGFuZGxl", 0, 64), "INVALID_ARGUMENT", "GPUs not supported")
    c.unregister_system_shared_memory()
    c.unregister_cuda_shared_memory("r1")


def test_aio_client():
    import asyncio
    import tritonclient.grpc.aio as aioclient

    async def run():
        c = aioclient.InferenceServerClient(url=f"localhost:{GRPC_PORT}", ssl=True,
                                            root_certificates=CA.cert_path, private_key=CERTS["hospital"][1],
                                            certificate_chain=CERTS["hospital"][0])
        a = np.full((2, 4), 3, np.float32)
        ins = [aioclient.InferInput(n, [2, 4], "FP32") for n in ("a", "b")]
        for i in ins:
            i.set_data_from_numpy(a)
        rs = await asyncio.gather(*[c.infer("multi_io", ins) for _ in range(4)])
        await c.close()
        return rs

    for r in asyncio.run(run()):
        assert (r.as_numpy("prod") == 9).all(), r.as_numpy("prod")


# ---- ModelStreamInfer ------------------------------------------------------------------------

def test_stream_infer_matched_by_request_id():
    import queue
    c = client()
    got = queue.Queue()
    c.start_stream(callback=lambda result, error: got.put((result, error)))
    for k in range(5):
        a = np.full((1, 4), k, np.float32)
        c.async_stream_infer("multi_io", [inp("a", a), inp("b", a)], request_id=f"r{k}")
    c.async_stream_infer("multi_io", [inp("a", np.ones((1, 4), np.float32))], request_id="bad")
    answers = [got.get(timeout=30) for _ in range(6)]
    c.stop_stream()
    results = {r.get_response().id: r for r, e in answers if e is None}
    errors = [e for r, e in answers if e is not None]
    assert sorted(results) == [f"r{k}" for k in range(5)], results.keys()
    for k in range(5):
        assert (results[f"r{k}"].as_numpy("sum") == 2 * k).all(), results[f"r{k}"].as_numpy("sum")
    assert len(errors) == 1 and "b" in errors[0].message(), errors   # the stream went on past it


def raw_stream(requests):
    creds = grpc.ssl_channel_credentials(open(CA.cert_path, "rb").read(), open(CERTS["hospital"][1], "rb").read(),
                                         open(CERTS["hospital"][0], "rb").read())
    ch = grpc.secure_channel(f"localhost:{GRPC_PORT}", creds)
    return ch, service_pb2_grpc.GRPCInferenceServiceStub(ch).ModelStreamInfer(requests)


def test_stream_error_names_request_id():
    """A failed stream request's answer names its request, as Triton's: infer_response.id (with
    error_message), and the message itself, the only thing tritonclient's callback is given."""
    import queue
    c = client()
    got = queue.Queue()
    c.start_stream(callback=lambda result, error: got.put((result, error)))
    one = np.ones((1, 4), np.float32)
    c.async_stream_infer("multi_io", [inp("a", one)], request_id="bad-1")
    c.async_stream_infer("multi_io", [inp("a", one), inp("b", one)], request_id="good-2")
    c.async_stream_infer("no_such_model", [inp("a", one)], request_id="bad-3")
    answers = [got.get(timeout=30) for _ in range(3)]
    c.stop_stream()
    errors = sorted(e.message() for r, e in answers if e is not None)
    assert len(errors) == 2, answers
    assert errors[0].startswith("[request id: bad-1] ") and "'b'" in errors[0], errors
    assert errors[1].startswith("[request id: bad-3] ") and "no_such_model" in errors[1], errors
    assert [r.get_response().id for r, e in answers if e is None] == ["good-2"], answers

    def request(rid, names):
        req = service_pb2.ModelInferRequest(model_name="multi_io", id=rid)
        for n in names:
            t = req.inputs.add(name=n, datatype="FP32", shape=[1, 4])
            t.contents.fp32_contents.extend([1, 2, 3, 4])
        return req
    ch, responses = raw_stream(iter([request("x-9", ["a"]), request("", ["a"]), request("ok", ["a", "b"])]))
    got = list(responses)
    ch.close()
    assert [(r.infer_response.id, r.error_message != "") for r in got] == [("x-9", True), ("", True), ("ok", False)], got
    assert got[0].infer_response.model_name == "multi_io" and got[0].error_message.startswith("[request id: x-9] ")
    assert not got[1].error_message.startswith("[request id"), got[1]   # no id: the message as it was


def test_idle_stream_is_cut():
    import threading
    import time
    hold = threading.Event()

    def never():
        hold.wait(60)
        return
        yield

    ch, responses = raw_stream(never())
    t0 = time.time()
    try:
        for _ in responses:
            pass
        raise AssertionError("the idle stream was not cut")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e
    assert time.time() - t0 < STREAM_IDLE_S + 10
    hold.set()
    ch.close()
    assert client().is_server_ready()


def test_streams_bounded_unary_still_served():
    import threading
    hold = threading.Event()
    req = service_pb2.ModelInferRequest(model_name="multi_io")
    for name in ("a", "b"):
        t = req.inputs.add(name=name, datatype="FP32", shape=[1, 4])
        t.contents.fp32_contents.extend([1, 2, 3, 4])

    def one_then_hold():
        yield req
        hold.wait(60)

    held = [raw_stream(one_then_hold()) for _ in range(THREADS // 2)]
    for ch, responses in held:
        assert next(responses).infer_response.model_name == "multi_io"   # open and served
    ch3, third = raw_stream(one_then_hold())
    try:
        next(third)
        raise AssertionError("a stream past the bound was served")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "streams" in e.details(), e
    assert client().get_model_metadata("multi_io").name == "multi_io"   # unary calls have threads
    hold.set()
    for ch, _ in held + [(ch3, None)]:
        ch.close()


# ---- configuration, statistics, repository --------------------------------------------------

def admin_headers():
    return {"authorization": f"Bearer {SRV.admin_key}"}


def test_model_config_as_http():
    want = tl.client(SRV).get_model_config("multi_io")
    got = client().get_model_config("multi_io", as_json=True)["config"]
    assert got["name"] == "multi_io" and int(got["max_batch_size"]) == int(want["max_batch_size"]) == 8, got
    assert [(i["name"], i["data_type"], [int(d) for d in i["dims"]]) for i in got["input"]] == \
        [(i["name"], i["data_type"], [int(d) for d in i["dims"]]) for i in want["input"]], (got, want)
    assert [o["name"] for o in got["output"]] == ["sum", "prod", "argmax_a"], got
    refused(lambda: client().get_model_config("no_such_model"), "NOT_FOUND")


def test_statistics_need_admin_and_match_http():
    c = client(cert=None)
    x = np.array([[True, True, False, False]])
    client().infer("bools", [inp("x", x), inp("y", x)])
    got = c.get_inference_statistics("bools", headers=admin_headers(), as_json=True)["model_stats"][0]
    want = tl.client(SRV).get_inference_statistics("bools")["model_stats"][0]
    assert got["name"] == "bools" and got["version"] == "1", got
    assert int(got["inference_stats"]["success"]["count"]) == int(want["inference_stats"]["success"]["count"]) > 0
    assert int(got["inference_count"]) == int(want["inference_count"]), (got, want)
    every = c.get_inference_statistics(headers=admin_headers(), as_json=True)["model_stats"]
    assert {"bools", "multi_io", tl.DEMO} <= {m["name"] for m in every}, every
    # a tenant's certificate has a user key's rights: statistics add up every tenant's
    refused(lambda: client().get_inference_statistics("bools"), "PERMISSION_DENIED", "admin")


def test_repository_index():
    index = client().get_model_repository_index(as_json=True)["models"]
    by_name = {(m["name"], m["version"]): m for m in index}
    assert by_name[("multi_io", "1")]["state"] == "READY", index
    assert ("strings", "1") in by_name, index


def test_load_and_unload():
    c = client(cert=None)
    h = admin_headers()
    refused(lambda: client().unload_model("int_half"), "PERMISSION_DENIED")
    c.unload_model("int_half", headers=h)
    assert not tl.client(SRV).is_model_ready("int_half")
    c.load_model("int_half", headers=h)
    r = client().infer("int_half", [inp("i", np.array([[1, 2, 3]], np.int64)),
                                    inp("h", np.array([[1, 2, 3]], np.float16))])
    assert list(r.as_numpy("i_out")[0]) == [2, 5, 8], r.as_numpy("i_out")
    refused(lambda: c.load_model("no_such_model", headers=h), "INVALID_ARGUMENT", "failed to load 'no_such_model'")
    # a new model from its files and config, as Triton's load with file: parameters
    cfg = tl.client(SRV).get_model_config("int_half")
    cfg["name"] = "int_half_copy"
    onnx = open(os.path.join(SRV.data_dir, "models", "int_half", "1", "model.onnx"), "rb").read()
    c.load_model("int_half_copy", headers=h, config=__import__("json").dumps(cfg), files={"file:1/model.onnx": onnx})
    r = client().infer("int_half_copy", [inp("i", np.array([[4, 5, 6]], np.int64)),
                                         inp("h", np.array([[1, 1, 1]], np.float16))])
    assert list(r.as_numpy("i_out")[0]) == [11, 14, 17], r.as_numpy("i_out")


def served_version(model):
    """The version a request that names none is served by, over gRPC and over HTTP."""
    ins = [np.array([[1, 2, 3]], np.int64), np.array([[1, 2, 3]], np.float16)]
    g = client().infer(model, [inp("i", ins[0]), inp("h", ins[1])]).get_response().model_version
    hi = [tl.httpclient.InferInput(n, list(a.shape), dt) for n, a, dt in (("i", ins[0], "INT64"), ("h", ins[1], "FP16"))]
    for i, a in zip(hi, ins):
        i.set_data_from_numpy(a, binary_data=True)
    h = tl.client(SRV).infer(model, hi).get_response()["model_version"]
    return g, h


def test_reload_with_changed_config_served_anew():
    """The repository keeps each model's parsed default_version between requests: a reload
    with a changed config is served by what the new config says, over gRPC and HTTP alike."""
    c = client(cert=None)
    h = admin_headers()
    cfg = tl.client(SRV).get_model_config("int_half")
    cfg["name"] = "int_half_versions"
    onnx = open(os.path.join(SRV.data_dir, "models", "int_half", "1", "model.onnx"), "rb").read()
    files = {"file:1/model.onnx": onnx, "file:2/model.onnx": onnx}
    cfg.pop("default_version", None)
    c.load_model("int_half_versions", headers=h, config=json.dumps(cfg), files=files)
    assert served_version("int_half_versions") == ("2", "2")      # the latest
    cfg["default_version"] = 1
    c.load_model("int_half_versions", headers=h, config=json.dumps(cfg), files=files)
    assert served_version("int_half_versions") == ("1", "1")
    cfg["default_version"] = 2
    tl.client(SRV).load_model("int_half_versions", config=json.dumps(cfg), files=files)   # over HTTP
    assert served_version("int_half_versions") == ("2", "2")


def test_trace_and_log_settings_shared_with_http():
    c = client(cert=None)
    h = admin_headers()
    got = c.update_trace_settings(settings={"trace_rate": "37", "trace_level": ["TIMESTAMPS"]}, headers=h,
                                  as_json=True)["settings"]
    assert got["trace_rate"]["value"] == ["37"] and got["trace_level"]["value"] == ["TIMESTAMPS"], got
    assert tl.client(SRV).get_trace_settings()["trace_rate"] == "37"   # one setting, two transports
    m = c.update_trace_settings(model_name="multi_io", settings={"trace_count": "5"}, headers=h,
                                as_json=True)["settings"]
    assert m["trace_count"]["value"] == ["5"] and m["trace_rate"]["value"] == ["37"], m
    c.update_trace_settings(model_name="multi_io", settings={"trace_count": None}, headers=h)
    assert c.get_trace_settings(model_name="multi_io", headers=h, as_json=True)["settings"]["trace_count"]["value"] \
        == ["-1"]
    refused(lambda: c.update_trace_settings(settings={"trace_rate": "x"}, headers=h), "INVALID_ARGUMENT",
            "trace_rate")
    refused(lambda: client().get_trace_settings(), "PERMISSION_DENIED")
    logs = c.get_log_settings(headers=h, as_json=True)["settings"]
    assert logs["log_format"]["string_param"] == "ISO8601" and logs["log_error"]["bool_param"] is True, logs
    logs = c.update_log_settings({"log_verbose_level": 0, "log_info": True}, headers=h, as_json=True)["settings"]
    assert logs["log_info"]["bool_param"] is True, logs
    assert tl.client(SRV).get_log_settings()["log_info"] is True
    refused(lambda: c.update_log_settings({"log_format": "default"}, headers=h), "INVALID_ARGUMENT", "glog")


def failures(model):
    st = tl.client(SRV).get_inference_statistics(model)["model_stats"]
    return int(st[0]["inference_stats"]["fail"]["count"]) if st else 0


def wait_failures(model, n, limit_s):
    import time
    deadline = time.time() + limit_s
    while failures(model) < n and time.time() < deadline:
        time.sleep(0.1)
    return failures(model)


def test_deadline_and_cancel_free_the_batcher_slot():
    """A model whose lone request waits 4 s for company: a call whose deadline passes, or that
    its client cancels, leaves the queue well before (counted as a failure), not at 4 s."""
    import json
    import time
    DELAY_S = 4
    cfg = tl.client(SRV).get_model_config("multi_io")
    cfg["name"] = "slow_batch"
    cfg["dynamic_batching"] = {"max_queue_delay_microseconds": DELAY_S * 1000000}
    onnx = open(os.path.join(SRV.data_dir, "models", "multi_io", "1", "model.onnx"), "rb").read()
    client(cert=None).load_model("slow_batch", headers=admin_headers(), config=json.dumps(cfg),
                                 files={"file:1/model.onnx": onnx})
    a = np.ones((1, 4), np.float32)
    c = client()
    t0 = time.time()
    # the client's own deadline ("Deadline Exceeded") or the server's answer at it
    # (StatusCode.DEADLINE_EXCEEDED), whichever comes first on a loaded machine
    text = refused(lambda: c.infer("slow_batch", [inp("a", a), inp("b", a)], client_timeout=0.5))
    assert "deadline" in text.lower(), text
    assert wait_failures("slow_batch", 1, DELAY_S - 1.5) == 1, "the expired call still waits in the queue"
    done = []
    ctx = c.async_infer("slow_batch", [inp("a", a), inp("b", a)], lambda result, error: done.append(error))
    time.sleep(0.3)
    ctx.cancel()
    assert wait_failures("slow_batch", 2, DELAY_S - 1.5) == 2, "the cancelled call still waits in the queue"
    assert time.time() - t0 < 2 * DELAY_S
    # Triton's timeout parameter (microseconds in the queue), checked as /v2 checks it
    t1 = time.time()
    refused(lambda: c.infer("slow_batch", [inp("a", a), inp("b", a)], timeout=300000), "UNAVAILABLE")
    assert time.time() - t1 < DELAY_S - 1, time.time() - t1
    refused(lambda: c.infer("slow_batch", [inp("a", a), inp("b", a)], parameters={"ratio": 0.5}),
            "INVALID_ARGUMENT", "'ratio' has invalid type")   # as /v2: int, bool or string
    # the model still answers (a lone request after its delay)
    r = c.infer("slow_batch", [inp("a", a), inp("b", a)])
    assert (r.as_numpy("sum") == 2).all()


def test_sigterm_drains_calls_in_flight():
    """SIGTERM while a call waits for its batch (slow_batch, test above): it is answered, then
    the process exits."""
    import signal
    import time
    port = harness.free_port()
    srv = H.start_server(["--cpu-workers", "1", "--grpc-listen", f"127.0.0.1:{port}", "--grpc-insecure"],
                         insecure=True)
    c = grpcclient.InferenceServerClient(f"localhost:{port}")
    a = np.ones((1, 4), np.float32)
    done = []
    c.async_infer("slow_batch", [inp("a", a), inp("b", a)], lambda result, error: done.append((result, error)),
                  headers=admin_headers())
    time.sleep(1.0)                      # queued, waiting for company
    assert not done, done
    srv.proc.send_signal(signal.SIGTERM)
    srv.proc.wait(30)
    assert done, "no answer"
    result, error = done[0]
    assert error is None and (result.as_numpy("sum") == 2).all(), error
    assert srv.proc.returncode == 0, srv.proc.returncode


def test_calls_per_tenant_bounded():
    """--grpc-calls-per-tenant 2: a tenant's third call at once is refused; another tenant is
    served meanwhile, and the first again once its calls end."""
    import time
    port = harness.free_port()
    srv = H.start_server(["--cpu-workers", "1", "--grpc-listen", f"127.0.0.1:{port}", "--grpc-insecure",
                          "--grpc-threads", "4", "--grpc-calls-per-tenant", "2"], insecure=True)
    c = grpcclient.InferenceServerClient(f"localhost:{port}")
    a = np.ones((1, 4), np.float32)
    done = []
    for _ in range(2):   # slow_batch (above): each waits 4 s for company
        c.async_infer("slow_batch", [inp("a", a), inp("b", a)], lambda result, error: done.append(error),
                      headers=admin_headers())
    time.sleep(1.0)
    refused(lambda: c.get_model_metadata("multi_io", headers=admin_headers()), "RESOURCE_EXHAUSTED", "tenant")
    user = {"authorization": f"Bearer {USER_KEY}"}
    assert c.get_model_metadata("multi_io", headers=user).name == "multi_io"   # another tenant
    deadline = time.time() + 30
    while len(done) < 2 and time.time() < deadline:
        time.sleep(0.1)
    assert done == [None, None], done
    assert c.get_model_metadata("multi_io", headers=admin_headers()).name == "multi_io"
    srv.terminate()


# ---- credentials -----------------------------------------------------------------------------

def test_bearer_key_without_certificate():
    c = client(cert=None)
    hdr = {"authorization": f"Bearer {USER_KEY}"}
    assert c.get_model_metadata("multi_io", headers=hdr).name == "multi_io"
    refused(lambda: c.get_model_metadata("multi_io", headers={"authorization": "Bearer gjk_" + "A" * 43}),
            "UNAUTHENTICATED", "not valid")
    refused(lambda: c.get_model_metadata("multi_io"), "UNAUTHENTICATED", "credentials are required")
    assert c.is_server_live()   # probes need no credentials, as /v2/health


def test_refused_certificates():
    # a valid certificate for a tenant that does not exist: refused before the method runs
    refused(lambda: client("stranger").get_model_metadata("multi_io"), "UNAUTHENTICATED", "names no tenant")
    # another CA's, and an expired one: the TLS handshake fails
    refused(lambda: client("foreign").get_model_metadata("multi_io"), "UNAVAILABLE")
    refused(lambda: client("expired").get_model_metadata("multi_io"), "UNAVAILABLE")
    # the server's log says why, without the certificate's private parts
    log = SRV.log_text()
    assert "no-such-tenant" in log and "names no tenant" in log, log[-2000:]
    assert log.count("certificate verify failed") >= 2, log[-2000:]
    assert "PRIVATE KEY" not in log
    # and others are served
    assert client().get_model_metadata("multi_io").name == "multi_io"


def test_revoked_certificate_refused():
    """--tls-crl: a certificate the CA revoked (otherwise valid, for an existing tenant) is refused
    on both listeners before any method or route runs, the log saying why (its serial)."""
    refused(lambda: client("revoked").get_model_metadata("multi_io"), "UNAUTHENTICATED", "revoked")
    status, body = https_get("/v2/models/multi_io", "revoked")
    assert status == 401 and "revoked" in body, (status, body)
    log = SRV.log_text()
    from cryptography import x509
    with open(CERTS["revoked"][0], "rb") as f:
        serial = "%x" % x509.load_pem_x509_certificate(f.read()).serial_number
    assert log.count("refused a client certificate: it is revoked") >= 2, log[-2000:]
    assert serial[-8:] in log and "PRIVATE KEY" not in log, log[-2000:]
    assert "checked against 1 CRL" in log, log[-3000:]
    # the same tenant's certificate that is not revoked is served
    assert client().get_model_metadata("multi_io").name == "multi_io"
    assert https_get("/v2/models/multi_io", "hospital")[0] == 200


def https_get(path, cert=None):
    import http.client
    import ssl
    ctx = ssl.create_default_context(cafile=CA.cert_path)
    if cert:
        ctx.load_cert_chain(CERTS[cert][0], CERTS[cert][1])
    conn = http.client.HTTPSConnection("localhost", SRV.port, context=ctx, timeout=30)
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, body


def test_client_certificates_on_https():
    """The same certificates on the HTTPS listener: the tenant its CN names, no key needed."""
    status, body = https_get("/v2/models/multi_io", "hospital")
    assert status == 200 and '"multi_io"' in body, (status, body)
    # tritonclient.http with the certificate in its SSL context, unchanged
    import ssl
    def ctx():
        c = ssl.create_default_context(cafile=CA.cert_path)
        c.load_cert_chain(*CERTS["hospital"])
        return c
    hc = tl.httpclient.InferenceServerClient(f"localhost:{SRV.port}", ssl=True, ssl_context_factory=ctx)
    a = np.ones((1, 4), np.float32)
    ins = [tl.httpclient.InferInput(n, [1, 4], "FP32") for n in ("a", "b")]
    for i in ins:
        i.set_data_from_numpy(a)
    assert (hc.infer("multi_io", ins).as_numpy("sum") == 2).all()
    for cert, words in (("expired", "expired"), ("foreign", "not issued by"), ("stranger", "names no tenant")):
        status, body = https_get("/v2/models/multi_io", cert)
        assert status == 401 and words in body, (cert, status, body)
    status, body = https_get("/v2/models/multi_io")
    assert status == 401, (status, body)                       # no certificate: a key is needed, as before
    status, _ = https_get("/v1/jobs", "hospital")
    assert status == 200
    status, _ = https_get("/v1/api-keys", "hospital")
    assert status == 403                                        # a user key's rights
    log = SRV.log_text()
    assert "refused a client certificate: it has expired" in log, log[-2000:]


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_thousand_idle_channels():
    """1000 connections that finish TLS and then say nothing: the server keeps serving others,
    and once they go it holds nothing of them."""
    import resource
    import socket
    import ssl
    import time
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 4096), hard), hard))
    before = open_fds(SRV.proc.pid)
    ctx = ssl.create_default_context(cafile=CA.cert_path)
    ctx.load_cert_chain(*CERTS["hospital"])
    ctx.set_alpn_protocols(["h2"])
    idle = []
    try:
        for _ in range(1000):
            raw = socket.create_connection(("127.0.0.1", GRPC_PORT), timeout=30)
            idle.append(ctx.wrap_socket(raw, server_hostname="localhost"))
        assert client().get_model_metadata("multi_io").name == "multi_io"
        r = client().infer("multi_io", [inp("a", np.ones((1, 4), np.float32)), inp("b", np.ones((1, 4), np.float32))])
        assert (r.as_numpy("sum") == 2).all()
    finally:
        for s in idle:
            s.close()
    deadline = time.time() + 10
    while open_fds(SRV.proc.pid) > before + 20 and time.time() < deadline:
        time.sleep(0.2)
    assert open_fds(SRV.proc.pid) <= before + 20, (before, open_fds(SRV.proc.pid))


def test_compressed_requests():
    c = client()
    a = np.full((2, 4), 2, np.float32)
    for algorithm in ("gzip", "deflate"):
        r = c.infer("multi_io", [inp("a", a), inp("b", a)], compression_algorithm=algorithm)
        assert (r.as_numpy("prod") == 4).all(), (algorithm, r.as_numpy("prod"))


def test_three_gib_declared_message_refused():
    """A ModelInfer whose gRPC length prefix declares 3 GiB and then sends little, written by
    hand over HTTP/2 (python3-h2) to a server with --header-timeout-seconds 2: the call is
    cut within that bound (the core checks a message's size once it has all of it, so the
    bound is the time the message may take), holding no thread; a 3 GiB message actually
    sent would be refused RESOURCE_EXHAUSTED past --grpc-max-message (test_message_size_bounded)."""
    import socket
    import struct
    import time
    import h2.config
    import h2.connection
    import h2.events
    port = harness.free_port()
    srv = H.start_server(["--cpu-workers", "1", "--grpc-listen", f"127.0.0.1:{port}", "--grpc-insecure",
                          "--grpc-threads", "2", "--header-timeout-seconds", "2"], insecure=True)
    socks, t0 = [], time.time()
    for _ in range(3):   # more than the threads
        sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        conn.send_headers(1, [(":method", "POST"), (":scheme", "http"), (":authority", "localhost"),
                              (":path", "/inference.GRPCInferenceService/ModelInfer"), ("te", "trailers"),
                              ("content-type", "application/grpc")])
        conn.send_data(1, struct.pack(">BI", 0, 3 << 30) + b"\0" * 1024)
        sock.sendall(conn.data_to_send())
        socks.append((sock, conn))
    for sock, conn in socks:
        status, ended = None, False
        while not ended:
            data = sock.recv(65536)
            if not data:
                break
            for ev in conn.receive_data(data):
                if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    status = dict(ev.headers).get(b"grpc-status", status)
                if isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                    ended = True
            sock.sendall(conn.data_to_send())
        sock.close()
        assert ended and status in (b"4", b"8"), status     # DEADLINE_EXCEEDED (or RESOURCE_EXHAUSTED)
    assert time.time() - t0 < 15, time.time() - t0
    c = grpcclient.InferenceServerClient(f"localhost:{port}")
    assert c.get_model_metadata("multi_io", headers=admin_headers()).name == "multi_io"   # threads free
    srv.terminate()


def test_plain_text_only_when_asked():
    # the TLS port does not speak plain text
    plain = grpcclient.InferenceServerClient(f"localhost:{GRPC_PORT}")
    refused(lambda: plain.is_server_live(), "UNAVAILABLE")
    # --grpc-insecure (TLS ended elsewhere): plain text, the key in metadata
    port = harness.free_port()
    srv = H.start_server(["--cpu-workers", "1", "--grpc-listen", f"127.0.0.1:{port}", "--grpc-insecure"],
                         insecure=True)
    c = grpcclient.InferenceServerClient(f"localhost:{port}")
    assert c.get_server_metadata(headers=admin_headers()).name == "gpujobd"   # one database: srv0's key
    refused(lambda: c.get_server_metadata(), "UNAUTHENTICATED")
    srv.terminate()


def test_message_size_bounded():
    c = client()
    big = np.zeros((1, MAX_MESSAGE // 4 + 16), np.float32)
    refused(lambda: c.infer("multi_io", [inp("a", big), inp("b", big)]), "RESOURCE_EXHAUSTED")
    assert client().is_server_ready()


if __name__ == "__main__":
    setup()
    tl.run_tests([test_listado_3_3_as_printed, test_health_and_metadata, test_several_inputs_and_outputs,
                  test_every_datatype, test_bytes_tensors, test_classification, test_typed_contents,
                  test_async_infer, test_aio_client, test_stream_infer_matched_by_request_id,
                  test_stream_error_names_request_id,
                  test_idle_stream_is_cut, test_streams_bounded_unary_still_served, test_bad_requests, test_same_statistics_as_http,
                  test_metrics_count_grpc_beside_http, test_shared_memory_not_supported, test_model_config_as_http,
                  test_statistics_need_admin_and_match_http, test_repository_index, test_load_and_unload,
                  test_reload_with_changed_config_served_anew,
                  test_trace_and_log_settings_shared_with_http, test_deadline_and_cancel_free_the_batcher_slot,
                  test_sigterm_drains_calls_in_flight, test_calls_per_tenant_bounded,
                  test_bearer_key_without_certificate,
                  test_refused_certificates, test_client_certificates_on_https, test_revoked_certificate_refused, test_compressed_requests,
                  test_three_gib_declared_message_refused, test_plain_text_only_when_asked, test_message_size_bounded,
                  test_thousand_idle_channels])
