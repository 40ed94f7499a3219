"""The /v2 path against the batcher alone: a perf_analyzer-style sweep (`infer_bench.py triton`).

For each request batch (8, then 1) and each concurrency (1, 2, 4, ..., 64), three points are
taken one after the other, so load drift on the shared machine hits all three alike:

  batcher  `gpujobd bench infer --samples B --concurrency C`: C threads in C calling the demo
           model's dynamic batcher directly (compute/infer/serving/bench_infer.c), no HTTP;
  binary   C threads, each with its own synchronous NVIDIA tritonclient.http client (unchanged,
           tests/conformance/tritonclient) over HTTPS to `gpujobd serve` (real PostgreSQL for
           the API key), POST /v2/models/chest-xray-demo/infer with binary tensors in and out;
  json     the same with JSON tensors (binary_data=False) in and out;
  grpc     the same clients through NVIDIA tritonclient.grpc over TLS to `--grpc-listen`
           (ModelInfer, raw_input_contents / raw_output_contents), the key in metadata.

The same model and config (models/chest-xray-demo as shipped: max batch 8, 2 ms queue delay,
one instance), the same ONNX threads (--threads / --infer-threads) on both sides: GPUJOBD_INFER_THREADS,
by default what `gpujobd serve` takes (the CPUs less one for its HTTP threads).

perf_analyzer's method: the clients run continuously; after --warmup seconds a window of
--seconds opens; throughput counts the requests that completed inside it, p50/p99 their
latencies. Over the same window the server's CPU seconds (/proc/PID/stat) and the client's
(this process, all threads) are read, so the client's share of the 2 cores is stated and the
server's CPU per inference compares with the batcher's own (bench infer's cpu_s).
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "triton"))
import tritonlib  # noqa: E402
from benchlib import model_counters  # noqa: E402
from tritonlib import httpclient, InferenceServerException  # noqa: E402

MODEL = tritonlib.DEMO
MODEL_DIR = os.path.join(ROOT, "models", MODEL)
# A /v2 body of 1 MiB or more takes an upload slot (routes_oip_infer.c), at most 8 per tenant
# by default: batch-8 binary (2 MiB) and JSON bodies past 8 clients would get 429. Raised so
# the sweep reaches 64 clients (a Triton client at that concurrency needs the same).
# A keep-alive connection that sends no request header for --header-timeout-seconds (30) is
# cut; past 16 JSON batch-8 clients this Python client (one GIL) idles longer than that
# between two requests on a connection, and tritonclient fails with SSLEOFError instead of
# reconnecting: raised too.
SERVER_ARGS = ["--cpu-workers", "1", "--max-uploads", "256", "--max-uploads-per-tenant", "256",
               "--header-timeout-seconds", "600"]
GRPC_THREADS = 64   # --grpc-threads, --grpc-calls-per-tenant: the sweep's 64 clients (one tenant) served at once
CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid):
    """User + system CPU seconds of process pid."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def tree_cpu_s(pid):
    """CPU seconds of process pid and its children alive now (PostgreSQL's postmaster and
    its backends: the API key is checked there on every request)."""
    total = proc_cpu_s(pid)
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    total += (int(fields[11]) + int(fields[12])) / CLK_TCK
            except (OSError, IndexError, ValueError):
                pass
    return total


def client_tcp_nodelay():
    """A diagnostic, not the default: TCP_NODELAY on tritonclient's sockets (geventhttpclient's
    socket factory wrapped; the client is otherwise unchanged), to measure what Nagle's
    algorithm on the client side costs (BENCHMARKS.md)."""
    import socket
    from geventhttpclient import connectionpool
    make = connectionpool.ConnectionPool._create_tcp_socket

    def nodelay(self, *args):
        sock = make(self, *args)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    connectionpool.ConnectionPool._create_tcp_socket = nodelay


def pct(sorted_vals, q):
    return sorted_vals[min(len(sorted_vals) - 1, int(len(sorted_vals) * q))] if sorted_vals else 0.0


def batcher_point(exe, batch, conc, seconds, threads):
    """One level of `gpujobd bench infer` (its own process, the shipped config)."""
    out = subprocess.run([exe, "bench", "infer", "--json", "--samples", str(batch), "--threads", str(threads),
                          "--concurrency", str(conc), "--seconds", str(seconds), MODEL_DIR],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-500:] or f"exit {out.returncode}"}
    r = json.loads(out.stdout.splitlines()[-1])
    return {"inferences_per_s": r["inferences_per_s"], "requests_per_s": r["throughput"],
            "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"], "requests": r["requests"],
            "seconds": r["seconds"], "mean_batch": r["mean_batch"], "cpu_s": r["cpu_s"],
            "cpu_ms_per_inference": 1e3 * r["cpu_s"] / max(1, r["requests"] * batch)}


class HttpPoint:
    """conc synchronous tritonclient.http clients, one thread and one connection each."""

    def __init__(self, srv, x, binary, conc, pg_pid=None):
        self.srv, self.x, self.binary, self.conc, self.pg_pid = srv, x, binary, conc, pg_pid
        self.ready = threading.Barrier(conc + 1)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.done = []          # (start, end) of each request that succeeded
        self.errors = []

    def _request(self, binary):
        inp = httpclient.InferInput("image", list(self.x.shape), "FP32")
        inp.set_data_from_numpy(self.x, binary_data=binary)
        return [inp], [httpclient.InferRequestedOutput("logits", binary_data=binary)]

    def _connect(self):
        return tritonlib.client(self.srv)

    def _client(self):
        cl, mine = None, []
        try:
            cl = self._connect()
            # One binary request first: the TLS connection exists before the window opens.
            warm_in, warm_out = self._request(True)
            ref = cl.infer(MODEL, warm_in, outputs=warm_out).as_numpy("logits")
            assert ref.shape == (self.x.shape[0], 4), ref.shape
            inputs, outputs = self._request(self.binary)
        except Exception as e:              # noqa: BLE001 (reported as the point's error)
            self._fail(repr(e))
            inputs = None
        try:
            self.ready.wait()
        except threading.BrokenBarrierError:
            pass
        while inputs and not self.stop.is_set():
            t0 = time.perf_counter()
            try:
                got = cl.infer(MODEL, inputs, outputs=outputs).as_numpy("logits")
                # every answer checked against the binary one (JSON round-trips floats)
                if got.shape != ref.shape or not np.allclose(got, ref, rtol=1e-5, atol=1e-6):
                    raise AssertionError(f"logits {got.tolist()} differ from {ref.tolist()}")
            except (InferenceServerException, AssertionError, OSError) as e:
                self._fail(str(e))
                break
            mine.append((t0, time.perf_counter()))
        if cl:
            cl.close()
        with self.lock:
            self.done += mine

    def _fail(self, msg):
        with self.lock:
            self.errors.append(msg)
        self.stop.set()

    def run(self, warmup, seconds):
        ths = [threading.Thread(target=self._client, daemon=True) for _ in range(self.conc)]
        for t in ths:
            t.start()
        self.ready.wait()
        time.sleep(warmup)
        m0 = model_counters(self.srv.client().request("GET", "/metrics").body.decode(), MODEL)
        pg0 = tree_cpu_s(self.pg_pid) if self.pg_pid else 0.0
        w0, c0, s0 = time.perf_counter(), time.process_time(), proc_cpu_s(self.srv.proc.pid)
        time.sleep(seconds)
        w1, c1, s1 = time.perf_counter(), time.process_time(), proc_cpu_s(self.srv.proc.pid)
        pg1 = tree_cpu_s(self.pg_pid) if self.pg_pid else 0.0
        m1 = model_counters(self.srv.client().request("GET", "/metrics").body.decode(), MODEL)
        execs = m1["inference_exec_count"] - m0["inference_exec_count"]
        self.stop.set()
        for t in ths:
            t.join()
        if self.errors:
            return {"error": self.errors[0][:500], "failed_clients": len(self.errors)}
        lats = sorted(e - s for s, e in self.done if w0 <= e <= w1)
        el, batch = w1 - w0, self.x.shape[0]
        return {"inferences_per_s": len(lats) * batch / el, "requests_per_s": len(lats) / el,
                "p50_ms": pct(lats, 0.5) * 1e3, "p99_ms": pct(lats, 0.99) * 1e3, "requests": len(lats),
                "seconds": el, "client_cores": (c1 - c0) / el, "server_cores": (s1 - s0) / el,
                "server_cpu_ms_per_inference": 1e3 * (s1 - s0) / max(1, len(lats) * batch),
                "client_cpu_ms_per_request": 1e3 * (c1 - c0) / max(1, len(lats)),
                "postgres_cores": (pg1 - pg0) / el,
                "mean_batch": (m1["inference_count"] - m0["inference_count"]) / execs if execs else 0.0}


class GrpcClient:
    """tritonclient.grpc with the API key in every call's metadata, as tritonclient.http's plugin."""

    def __init__(self, srv, port):
        import tritonclient.grpc as grpcclient
        self.c = grpcclient.InferenceServerClient(f"localhost:{port}", ssl=True, root_certificates=os.path.join(
            srv.data_dir, "tls", "cert.pem"))
        self.headers = {"authorization": f"Bearer {srv.admin_key}"}

    def infer(self, model, inputs, outputs=None):
        return self.c.infer(model, inputs, outputs=outputs, headers=self.headers)

    def close(self):
        self.c.close()


class GrpcPoint(HttpPoint):
    """conc synchronous tritonclient.grpc clients, one thread and one channel each."""

    def __init__(self, srv, x, conc, port, pg_pid=None):
        super().__init__(srv, x, True, conc, pg_pid)
        self.port = port

    def _connect(self):
        return GrpcClient(self.srv, self.port)

    def _request(self, binary):
        import tritonclient.grpc as grpcclient
        inp = grpcclient.InferInput("image", list(self.x.shape), "FP32")
        inp.set_data_from_numpy(self.x)
        return [inp], [grpcclient.InferRequestedOutput("logits")]


def overhead(http, base):
    """HTTP's added time per inference over the batcher's, in percent (None if either failed)."""
    if "error" in http or "error" in base or not http["inferences_per_s"]:
        return None
    return 100.0 * (base["inferences_per_s"] / http["inferences_per_s"] - 1.0)


def sweep(exe, batches, concurrency, seconds, warmup, threads, encodings, log=print, server_args=()):
    """Starts PostgreSQL and gpujobd (the harness), runs every point; the list of points."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))     # the harness's servers stop too
    h = tritonlib.Harness()
    points = []
    try:
        from harness import free_port
        grpc_port = free_port()
        srv = h.start_server(SERVER_ARGS + ["--infer-threads", str(threads), "--grpc-listen",
                                            f"127.0.0.1:{grpc_port}", "--grpc-threads", str(GRPC_THREADS),
                                            "--grpc-calls-per-tenant", str(GRPC_THREADS)]
                             + list(server_args))
        rng = np.random.RandomState(0)
        for batch in batches:
            x = rng.normal(0, 1, size=(batch, 1, 256, 256)).astype(np.float32)
            HttpPoint(srv, x, True, 1).run(0.5, 0.5)        # loads the model and its sessions
            for conc in concurrency:
                p = {"batch": batch, "concurrency": conc, "load_average_before": os.getloadavg()[0],
                     "batcher": batcher_point(exe, batch, conc, seconds, threads)}
                for enc in encodings:
                    point = GrpcPoint(srv, x, conc, grpc_port, h.pg.pid) if enc == "grpc" \
                        else HttpPoint(srv, x, enc == "binary", conc, h.pg.pid)
                    p[enc] = point.run(warmup, seconds)
                    p[enc]["overhead_pct"] = overhead(p[enc], p["batcher"])
                p["load_average_after"] = os.getloadavg()[0]
                log(row(p, encodings))
                points.append(p)
    finally:
        h.close()
    return points


def cell(r):
    if "error" in r:
        return "failed | - | - | -"
    ov = r.get("overhead_pct")
    return (f"{r['inferences_per_s']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f}"
            + (f" | {ov:+.0f} %" if ov is not None else ""))


def header(encodings):
    cols = "| batch | conc | batcher inf/s | p50 ms | p99 ms |"
    for enc in encodings:
        cols += f" {enc} inf/s | p50 ms | p99 ms | HTTP adds |"
    cols += " client cores (" + " / ".join(encodings) + ") | server CPU ms/inf: batcher / " + " / ".join(encodings) + " | load |"
    return cols + "\n" + "|---" * (cols.count("|") - 1) + "|"


def row(p, encodings):
    b = p["batcher"]
    s = f"| {p['batch']} | {p['concurrency']} | " + cell(b) + " |"
    for enc in encodings:
        s += " " + cell(p[enc]) + " |"
    s += " " + " / ".join("-" if "error" in p[e] else f"{p[e]['client_cores']:.2f}" for e in encodings) + " |"
    s += " " + ("-" if "error" in b else f"{b['cpu_ms_per_inference']:.2f}")
    for enc in encodings:
        s += " / " + ("-" if "error" in p[enc] else f"{p[enc]['server_cpu_ms_per_inference']:.2f}")
    return s + f" | {p['load_average_before']:.1f}–{p['load_average_after']:.1f} |"
