"""Issue 11: request bodies bounded by what the route can use, over real HTTPS.

/v2 infer takes at most what the model's input needs (chest-xray-demo: 8 x 1x256x256
FP32 values, as JSON at most 32 bytes a value; binary tensors after a JSON header get the
same bound, since tritonclient writes Inference-Header-Content-Length into its caller's
headers dict and a client reusing that dict sends it with later JSON bodies). A declared 60 MB JSON body is refused with 413 before any of it is read; a 60 MB
chunked body is cut with 413 once past the limit; a body within the limit but holding
millions of tiny values is refused before it is parsed; a real batch of 8 as JSON runs.
After each, the server's resident memory (VmRSS) comes back within 100 MB of what it was
(the issue: a 60 MB body took it from 195 MB to 1.07 GB and kept it there). JSON routes
take a small body (--max-json-bytes): a declared larger one is refused before reading."""
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
from harness import Harness, run_tests  # noqa: E402
from rawhttp import RawRequest  # noqa: E402

MODEL = "chest-xray-demo"
PER_SAMPLE = 256 * 256
MAX_BATCH = 8
INFER = f"/v2/models/{MODEL}/infer"
RSS_SLACK = 100 << 20
H = None
SRV = None
BASELINE = None


def setup():
    global H, SRV
    H = Harness()
    # Under AddressSanitizer (CI's second run) freed memory waits in a quarantine and its
    # allocator keeps what it mapped: these options make it give memory back as malloc does,
    # so the check below measures the server, not the sanitizer. A plain build ignores them.
    asan = os.environ.get("ASAN_OPTIONS", "")
    asan += (":" if asan else "") + "quarantine_size_mb=0:allocator_release_to_os_interval_ms=0"
    SRV = H.start_server(["--cpu-workers", "1"], env={"GPUJOBD_INFER_THREADS": "2", "ASAN_OPTIONS": asan})


def rss():
    with open(f"/proc/{SRV.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def rss_back(what):
    """VmRSS within RSS_SLACK of the baseline (malloc_trim runs as the request ends)."""
    deadline = time.time() + 5
    while rss() > BASELINE + RSS_SLACK and time.time() < deadline:
        time.sleep(0.1)
    now = rss()
    print(f"{what}: VmRSS {now / 1048576:.0f} MiB (baseline {BASELINE / 1048576:.0f} MiB)")
    assert now <= BASELINE + RSS_SLACK, f"{what}: VmRSS {now >> 20} MiB, baseline {BASELINE >> 20} MiB"


def infer_json(n, rng):
    data = [rng.uniform(-2, 2) for _ in range(n * PER_SAMPLE)]
    body = {"inputs": [{"name": "image", "shape": [n, 1, 256, 256], "datatype": "FP32", "data": data}]}
    return json.dumps(body).encode()


def auth():
    return {"Authorization": "Bearer " + SRV.admin_key}


def test_a_real_batch_runs_and_memory_returns():
    global BASELINE
    c = SRV.client()
    rng = random.Random(7)
    r = c.request("POST", INFER, body=infer_json(1, rng), headers={"Content-Type": "application/json"})
    assert r.status == 200, r
    time.sleep(0.5)
    BASELINE = rss()
    body = infer_json(MAX_BATCH, rng)
    print(f"a batch of {MAX_BATCH} as JSON: {len(body) / 1e6:.1f} MB")
    r = c.request("POST", INFER, body=body, headers={"Content-Type": "application/json"}, timeout=120)
    assert r.status == 200, r
    assert r.json()["outputs"][0]["shape"] == [MAX_BATCH, 4], r.json()
    rss_back("after a batch of 8 as JSON")


def test_declared_60mb_refused_before_reading():
    # Expect: 100-continue, as curl sends for large bodies: the answer comes before any
    # of the body (without it the server reads and drops a body up to 64 MiB first, so
    # that the client sees the answer rather than a reset connection)
    req = RawRequest(SRV, "POST", INFER, dict(auth(), **{"Content-Type": "application/json",
                                                         "Expect": "100-continue"}), 60_000_000)
    t0 = time.time()
    status, _, body = req.response(timeout=5)
    req.close()
    assert status == 413, (status, body)
    assert time.time() - t0 < 2
    err = json.loads(body)["error"]
    assert "60000000 bytes" in err and MODEL in err, err
    # binary tensors: the JSON bound too (a stale Inference-Header-Content-Length may come
    # with a JSON body: routes_oip_infer.c's parse_body)
    limit = 64 * 1024 + MAX_BATCH * PER_SAMPLE * 32
    req = RawRequest(SRV, "POST", INFER, dict(auth(), **{"Inference-Header-Content-Length": "200",
                                                         "Expect": "100-continue"}), limit + 1)
    status, _, body = req.response(timeout=5)
    req.close()
    assert status == 413 and f"{limit} bytes" in json.loads(body)["error"], (status, body)
    rss_back("after declared 60 MB")


def test_chunked_60mb_cut_past_the_limit():
    head = b'{"inputs":[{"name":"image","shape":[8,1,256,256],"datatype":"FP32","data":['
    piece = b"0.123456789," * 8192          # ~100 KB
    total = 60_000_000
    req = RawRequest(SRV, "POST", INFER, dict(auth(), **{"Content-Type": "application/json"}), chunked=True)

    def chunk(b):
        return f"{len(b):x}\r\n".encode() + b + b"\r\n"
    req.send(chunk(head))
    sent = len(head)
    answered = False
    while sent < total and not answered:
        if not req.send(chunk(piece)):
            break
        sent += len(piece)
        answered = req.readable()
    req.send(b"0\r\n\r\n")
    status, _, body = req.response(timeout=30)
    req.close()
    assert status == 413, (status, body[:300])
    print(f"chunked: 413 after {sent / 1e6:.1f} MB sent")
    rss_back("after a chunked 60 MB body")


def test_tiny_values_refused_before_parsing():
    n = MAX_BATCH * PER_SAMPLE
    limit = 64 * 1024 + n * 32
    count = (limit - 200) // 2            # "0," each: four times the values the input has
    body = (b'{"inputs":[{"name":"image","shape":[8,1,256,256],"datatype":"FP32","data":['
            + b"0," * (count - 1) + b"0]}]}")
    assert len(body) <= limit
    r = SRV.client().request("POST", INFER, body=body, headers={"Content-Type": "application/json"}, timeout=60)
    assert r.status == 413, r
    assert "more values" in r.json()["error"], r.json()
    rss_back("after a body of tiny values")


def test_json_route_declared_oversize():
    req = RawRequest(SRV, "POST", "/v1/jobs", dict(auth(), **{"Content-Type": "application/json",
                                                              "Expect": "100-continue"}), 5 << 20)
    status, _, body = req.response(timeout=5)
    req.close()
    assert status == 413 and b"over the limit" in body, (status, body)


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_a_real_batch_runs_and_memory_returns, test_declared_60mb_refused_before_reading,
                   test_chunked_60mb_cut_past_the_limit, test_tiny_values_refused_before_parsing,
                   test_json_route_declared_oversize])
    finally:
        H.close()
