"""/v2 inference requests wait for their batch parked, holding no HTTP thread.

The server runs with one HTTP thread (--http-threads 1) and a model whose dynamic batcher
waits up to its max_queue_delay for a batch to fill. Were a request to hold the thread while
it waits in the batcher, the next connection's request could not even be read until the
first was answered, so every batch would hold one request. Driven with NVIDIA's
tritonclient.http, unchanged.

- several clients' requests, sent together, share one batch and get each its own answer;
- a request parked when the server is told to stop (SIGTERM) is answered (503, saying so),
  and the server exits cleanly: a suspended connection left behind would abort
  libmicrohttpd's stop.
"""
import json
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import models  # noqa: E402
import tritonlib as tl  # noqa: E402
from tritonlib import InferenceServerException, httpclient  # noqa: E402

H = KEY = None      # KEY: the admin key the first server made (the servers share a database)


def slow_batching(models_dir, name, delay_us):
    """multi_io as model `name`, batched up to 8, its batcher waiting delay_us for a batch to
    fill (a name of its own: the servers share one database, and so one model store)."""
    models.write_models(models_dir)
    os.rename(os.path.join(models_dir, "multi_io"), os.path.join(models_dir, name))
    path = os.path.join(models_dir, name, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    cfg["name"] = name
    cfg["dynamic_batching"] = {"max_queue_delay_microseconds": delay_us}
    with open(path, "w") as f:
        json.dump(cfg, f)


def server(name, delay_us):
    data_dir = os.path.join(H.tmp, name)
    slow_batching(os.path.join(data_dir, "models"), name, delay_us)
    global KEY
    if KEY:                                 # the database's admin key, as the first server wrote it
        with open(os.path.join(data_dir, "admin.key"), "w") as f:
            f.write(KEY)
        os.chmod(os.path.join(data_dir, "admin.key"), 0o600)
    srv = H.start_server(["--cpu-workers", "1", "--http-threads", "1"], data_dir=data_dir)
    KEY = KEY or srv.admin_key
    return srv


def request(k):
    rng = np.random.RandomState(k)
    a, b = (rng.normal(size=(1, 4)).astype(np.float32) for _ in range(2))
    ins = []
    for name, x in (("a", a), ("b", b)):
        i = httpclient.InferInput(name, [1, 4], "FP32")
        i.set_data_from_numpy(x, binary_data=True)
        ins.append(i)
    return a, b, ins


def setup():
    global H
    H = tl.Harness()


def test_requests_share_a_batch_on_one_http_thread():
    model = "batch_400ms"
    srv = server(model, 400_000)
    n = 4
    clients = [tl.client(srv) for _ in range(n)]
    for c in clients:                       # each connection open (TLS done) before the burst
        assert c.is_server_live()
    admin = tl.client(srv)
    admin.infer(model, request(99)[2])      # loads the model: its batcher exists
    before = admin.get_inference_statistics(model)["model_stats"][0]
    go, answers, errors = threading.Barrier(n), [None] * n, []

    def one(k):
        a, b, ins = request(k)
        go.wait()
        try:
            answers[k] = (a, b, clients[k].infer(model, ins).as_numpy("sum"))
        except InferenceServerException as e:
            errors.append(str(e))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for k, (a, b, got) in enumerate(answers):
        want = models.torch_reference("multi_io", a, b)[0]
        assert np.allclose(got, want, rtol=1e-5, atol=1e-6), (k, got, want)
    after = admin.get_inference_statistics(model)["model_stats"][0]
    runs = after["execution_count"] - before["execution_count"]
    done = after["inference_count"] - before["inference_count"]
    assert done == n, (before, after)
    # one HTTP thread, four connections: one batch, or two when a request came late
    assert runs <= 2, f"{n} requests took {runs} batches: the HTTP thread was held while they waited"
    sizes = {b["batch_size"]: b["compute_infer"]["count"] for b in after["batch_stats"]}
    assert max(sizes) >= 2, sizes
    for c in clients + [admin]:
        c.close()


def test_parked_request_answered_at_stop():
    model = "batch_10s"                    # a lone request waits 10 s for company
    srv = server(model, 10_000_000)
    c = tl.client(srv)
    got = {}

    def wait_one():
        t0 = time.time()
        try:
            c.infer(model, request(2)[2])
            got["answer"] = "200"
        except InferenceServerException as e:
            got["answer"] = e.message()
        got["seconds"] = time.time() - t0

    t = threading.Thread(target=wait_one)
    t.start()
    deadline = time.time() + 30
    while time.time() < deadline and "gpujobd_http_streams_parked 1" not in \
            srv.client().request("GET", "/metrics").body.decode():
        time.sleep(0.05)
    assert t.is_alive(), got
    code = srv.terminate()
    t.join(30)
    assert "stopping" in got.get("answer", ""), got
    assert got["seconds"] < 9, got          # answered at the stop, not after the batcher's 10 s
    assert code == 0, (code, srv.log_text()[-3000:])


if __name__ == "__main__":
    setup()
    tl.run_tests([test_requests_share_a_batch_on_one_http_thread, test_parked_request_answered_at_stop])
