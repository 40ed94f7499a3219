#!/usr/bin/python3
"""Inference serving benchmark: throughput and p50/p99 latency against client concurrency
(1..64) and the batcher's max batch size / queue delay, for the demo model
(models/chest-xray-demo, 1x256x256 FP32 in, 4 logits out) on the CPU.

  inproc  through the batcher in process (`gpujobd bench infer`: C threads, one sample per
          request), no HTTP;
  http    end to end: `gpujobd serve` over HTTPS (real PostgreSQL for the API keys),
          POST /v2/models/{m}/infer with Triton's binary tensor extension, one sample per
          request, one keep-alive TLS connection per client thread (Python's http.client).
  triton  the /v2 path's overhead (issue 17): a perf_analyzer-style sweep of synchronous
          NVIDIA tritonclient.http clients (batch 8 and 1, binary and JSON tensors), each
          point beside the same point through the batcher alone; writes
          bench/results/infer-http-YYYYMMDD.json (bench/triton_sweep.py says how).

Each configuration is compared in the same run with the unbatched one (max batch 1): the
ratio column is throughput / unbatched throughput at the same concurrency.

usage: GJ_BUILD_ROOT=build-oip GPUJOBD=build-oip/service/gpujobd \\
       /usr/bin/python3 bench/infer_bench.py [inproc] [http] [--requests N] [--repeat N] [--quick]
       GPUJOBD=build/service/gpujobd /usr/bin/python3 bench/infer_bench.py triton \\
         [--seconds 5] [--warmup 1] [--batches 8,1] [--concurrency 1,2,4,8,16,32,64]
         [--encodings binary,json,grpc] [--http-threads N] [--tcp-nodelay] [--out FILE]
       /usr/bin/python3 bench/infer_bench.py triton --table FILE   (a results file's table)
"""
import http.client
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time

from benchlib import cpu_model, load_average, model_counters

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
BUILD = os.environ.get("GJ_BUILD_ROOT", os.path.join(ROOT, "build"))
MODEL_SRC = os.path.join(ROOT, "models", "chest-xray-demo")

# (label, max_batch_size, max_queue_delay_us; -1: no dynamic_batching section)
CONFIGS = [("b1", 1, -1), ("b8-d0", 8, 0), ("b8-d2000", 8, 2000), ("b8-d10000", 8, 10000),
           ("b16-d2000", 16, 2000)]
CONCURRENCY = [1, 2, 4, 8, 16, 32, 64]


def hardware():
    return (f"{os.cpu_count()} CPU cores ({cpu_model()}), no GPU, {platform.system()} {platform.release()}, "
            f"load average {load_average()} at start")


def pct(sorted_vals, q):
    return sorted_vals[min(len(sorted_vals) - 1, int(len(sorted_vals) * q))]


def table(rows, title):
    print(f"\n## {title}\n")
    print("| config | max batch | delay us | conc | req/s | ratio vs b1 | p50 ms | p99 ms | mean batch |")
    print("|---|---|---|---|---|---|---|---|---|")
    base = {r["concurrency"]: r["throughput"] for r in rows if r["label"] == "b1"}
    for r in rows:
        b = base.get(r["concurrency"])
        ratio = f"{r['throughput'] / b:.2f}" if b else "-"
        print(f"| {r['label']} | {r['max_batch']} | {r['delay_us'] if r['delay_us'] >= 0 else 'off'} | "
              f"{r['concurrency']} | {r['throughput']:.1f} | {ratio} | {r['p50_ms']:.1f} | "
              f"{r['p99_ms']:.1f} | {r['mean_batch']:.2f} |")
    sys.stdout.flush()


def median_run(runs):
    """The run with the median throughput (of REPEAT runs of one level)."""
    runs = sorted(runs, key=lambda r: r["throughput"])
    return runs[len(runs) // 2]


REPEAT = 1


def bench_inproc(requests, threads):
    exe = os.environ.get("GPUJOBD") or os.path.join(BUILD, "service", "gpujobd")
    rows = []
    for label, mb, delay in CONFIGS:
        per_level = {}
        for _ in range(REPEAT):
            # The demo config's preferred_batch_sizes are dropped (--preferred none), as before.
            out = subprocess.run([exe, "bench", "infer", "--json", "--name", "demo-" + label,
                                  "--max-batch", str(mb), "--delay-us", str(delay) if delay >= 0 else "off",
                                  "--preferred", "none", "--instances", "1", "--threads", str(threads),
                                  "--concurrency", ",".join(map(str, CONCURRENCY)),
                                  "--requests", str(requests), MODEL_SRC],
                                 capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                r = json.loads(line)
                r["label"] = label
                r["delay_us"] = delay
                per_level.setdefault(r["concurrency"], []).append(r)
        rows += [median_run(per_level[c]) for c in sorted(per_level)]
    table(rows, f"In process, through the batcher ({threads} ONNX threads, 1 instance; {hardware()})")
    return rows


def write_models(models_dir):
    with open(os.path.join(MODEL_SRC, "config.json")) as f:
        base = json.load(f)
    for label, mb, delay in CONFIGS:
        d = os.path.join(models_dir, "demo-" + label)
        os.makedirs(os.path.join(d, "1"), exist_ok=True)
        shutil.copy(os.path.join(MODEL_SRC, "1", "model.onnx"), os.path.join(d, "1", "model.onnx"))
        cfg = dict(base)
        cfg.pop("name", None)
        cfg["max_batch_size"] = mb
        cfg["instances_per_device"] = 1
        if delay < 0:
            cfg.pop("dynamic_batching", None)
        else:
            cfg["dynamic_batching"] = {"max_queue_delay_us": delay}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)


def http_run(srv, key, model, conc, requests, body, hdrs):
    per = max(1, (requests + conc - 1) // conc)
    lats, errors = [], []
    lock = threading.Lock()
    start = threading.Barrier(conc + 1)

    def client():
        conn = http.client.HTTPSConnection("127.0.0.1", srv.port, timeout=120, context=srv.ssl_context())
        mine = []
        start.wait()
        for _ in range(per):
            t0 = time.perf_counter()
            try:
                conn.request("POST", f"/v2/models/{model}/infer", body=body, headers=hdrs)
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    errors.append(r.status)
            except (OSError, http.client.HTTPException) as e:
                errors.append(repr(e))
                conn.close()
                conn = http.client.HTTPSConnection("127.0.0.1", srv.port, timeout=120,
                                                   context=srv.ssl_context())
            mine.append(time.perf_counter() - t0)
        conn.close()
        with lock:
            lats.extend(mine)
    ths = [threading.Thread(target=client) for _ in range(conc)]
    for t in ths:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in ths:
        t.join()
    el = time.perf_counter() - t0
    lats.sort()
    return {"requests": len(lats), "failures": len(errors), "seconds": el, "throughput": len(lats) / el,
            "p50_ms": pct(lats, 0.5) * 1e3, "p99_ms": pct(lats, 0.99) * 1e3}


def counters(c, model):
    return model_counters(c.request("GET", "/metrics").body.decode(), model)


def bench_http(requests, threads):
    import numpy as np
    from harness import Harness
    h = Harness()
    try:
        data_dir = os.path.join(h.tmp, "srv0")
        write_models(os.path.join(data_dir, "models"))
        srv = h.start_server(["--cpu-workers", "1"], data_dir=data_dir,
                             env={"GPUJOBD_INFER_THREADS": str(threads)})
        c = srv.client()
        x = np.random.RandomState(0).normal(0, 1, size=(1, 1, 256, 256)).astype("<f4")
        raw = x.tobytes()
        head = json.dumps({"inputs": [{"name": "image", "shape": [1, 1, 256, 256], "datatype": "FP32",
                                       "parameters": {"binary_data_size": len(raw)}}],
                           "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}).encode()
        hdrs = {"Authorization": "Bearer " + srv.admin_key, "Inference-Header-Content-Length": str(len(head))}
        rows = []
        for label, mb, delay in CONFIGS:
            model = "demo-" + label
            http_run(srv, srv.admin_key, model, 8, 64, head + raw, hdrs)       # load + warm up
            for conc in CONCURRENCY:
                runs = []
                for _ in range(REPEAT):
                    before = counters(c, model)
                    r = http_run(srv, srv.admin_key, model, conc, requests, head + raw, hdrs)
                    after = counters(c, model)
                    execs = after["inference_exec_count"] - before["inference_exec_count"]
                    r.update(label=label, max_batch=mb, delay_us=delay, concurrency=conc,
                             mean_batch=(after["inference_count"] - before["inference_count"]) / execs
                             if execs else 0)
                    if r["failures"]:
                        print(f"  {label} c={conc}: {r['failures']} failed requests", file=sys.stderr)
                    runs.append(r)
                rows.append(median_run(runs))
        table(rows, f"End to end over HTTPS, binary tensors, {threads} ONNX threads, 1 instance; "
                    f"client on the same machine; {hardware()}")
        return rows
    finally:
        h.close()


def opt(argv, name, default):
    return argv[argv.index(name) + 1] if name in argv else default


def shell(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()


def bench_triton(argv, threads):
    import triton_sweep
    if "--table" in argv:
        with open(opt(argv, "--table", "")) as f:
            saved = json.load(f)
        encodings = [e for e in ("binary", "json") if e in saved["points"][0]]
        print(f"command: {saved['command']}\nstart: {saved['start']}\nend: {saved['end']}\n")
        print(triton_sweep.header(encodings))
        for p in saved["points"]:
            print(triton_sweep.row(p, encodings))
        return saved["points"]
    exe = os.environ.get("GPUJOBD") or os.path.join(BUILD, "service", "gpujobd")
    os.environ["GPUJOBD"] = exe                   # the harness starts this one
    seconds, warmup = float(opt(argv, "--seconds", "5")), float(opt(argv, "--warmup", "1"))
    batches = [int(b) for b in opt(argv, "--batches", "8,1").split(",")]
    conc = [int(c) for c in opt(argv, "--concurrency", ",".join(map(str, CONCURRENCY))).split(",")]
    encodings = opt(argv, "--encodings", "binary,json").split(",")
    extra = ["--http-threads", opt(argv, "--http-threads", "")] if "--http-threads" in argv else []
    if "--tcp-nodelay" in argv:
        triton_sweep.client_tcp_nodelay()
    out = opt(argv, "--out", os.path.join(ROOT, "bench", "results", time.strftime("infer-http-%Y%m%d.json")))
    start = {"uptime": shell("uptime"), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print(f"\n## /v2 (tritonclient.http, synchronous clients) beside the batcher alone; {threads} ONNX "
          f"threads, 1 instance, {seconds:g} s per point after {warmup:g} s warm-up; {hardware()}\n")
    print(triton_sweep.header(encodings), flush=True)
    points = triton_sweep.sweep(exe, batches, conc, seconds, warmup, threads, encodings,
                                log=lambda line: print(line, flush=True), server_args=extra)
    result = {"command": " ".join(sys.argv), "model": triton_sweep.MODEL, "onnx_threads": threads,
              "server_args": triton_sweep.SERVER_ARGS + extra, "client_tcp_nodelay": "--tcp-nodelay" in argv,
              "seconds_per_point": seconds, "warmup_s": warmup, "git_head": shell(f"git -C {ROOT} rev-parse HEAD"),
              "hardware": {"lscpu": shell("lscpu"), "cpus": os.cpu_count(), "kernel": platform.release()},
              "start": start, "end": {"uptime": shell("uptime"),
                                      "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
              "points": points}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nwritten: {out}")
    return points


def main(argv):
    which = [a for a in argv if not a.startswith("--")] or ["inproc", "http"]
    if "triton" in which:
        # what `gpujobd serve` takes by default: the CPUs less one for its HTTP threads
        threads = int(os.environ.get("GPUJOBD_INFER_THREADS", max(1, (os.cpu_count() or 1) - 1)))
        if "--table" not in argv:
            print(f"# gpujobd /v2 overhead benchmark\n\ncommand: {' '.join(sys.argv)}\nhardware: {hardware()}")
        bench_triton(argv, threads)
        return
    requests = 256
    if "--requests" in argv:
        requests = int(argv[argv.index("--requests") + 1])
        which = [w for w in which if not w.isdigit()]
    if "--repeat" in argv:
        global REPEAT
        REPEAT = int(argv[argv.index("--repeat") + 1])
        which = [w for w in which if not w.isdigit()]
    if "--quick" in argv:
        global CONCURRENCY
        CONCURRENCY = [1, 8, 64]
        requests = min(requests, 128)
    threads = int(os.environ.get("GPUJOBD_INFER_THREADS", os.cpu_count() or 1))
    print(f"# gpujobd inference benchmark\n\ncommand: {' '.join(sys.argv)}\nhardware: {hardware()}\n"
          f"requests per level: {requests}; each level run {REPEAT} time(s), the median-throughput run shown")
    if "inproc" in which:
        bench_inproc(requests, threads)
    if "http" in which:
        bench_http(requests, threads)


if __name__ == "__main__":
    main(sys.argv[1:])
