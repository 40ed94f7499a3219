#!/usr/bin/python3
"""One point of the /v2-vs-gRPC sweep held long enough to profile the server (BENCHMARKS.md,
issue 23): starts PostgreSQL and gpujobd as bench/triton_sweep.py does, runs each encoding's
clients (binary: tritonclient.http, grpc: tritonclient.grpc) for SECONDS, and prints per
encoding the sweep's figures plus the server's minor page faults per inference. With OUT
(not "-"), `perf record` samples the server meanwhile (PERF_ARGS, default
"-F 999 --call-graph dwarf,16384"; "-e page-faults -c 1 --call-graph dwarf,8192" finds
where the faults are).

usage: GPUJOBD=build/service/gpujobd /usr/bin/python3 bench/grpc_profile_point.py \\
         grpc,binary BATCH CLIENTS SECONDS OUT.data|-
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import triton_sweep as ts  # noqa: E402
from harness import free_port  # noqa: E402  (on the path triton_sweep sets)


def minor_faults(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def main(encodings, batch, conc, seconds, out):
    h = ts.tritonlib.Harness()
    try:
        port = free_port()
        srv = h.start_server(ts.SERVER_ARGS + ["--infer-threads", "1", "--grpc-listen", f"127.0.0.1:{port}",
                                               "--grpc-threads", str(ts.GRPC_THREADS),
                                               "--grpc-calls-per-tenant", str(ts.GRPC_THREADS)])
        x = np.random.RandomState(0).normal(0, 1, size=(batch, 1, 256, 256)).astype(np.float32)
        ts.HttpPoint(srv, x, True, 1).run(0.5, 0.5)         # loads the model
        pid = srv.proc.pid
        perf = None
        if out != "-":
            args = os.environ.get("PERF_ARGS", "-F 999 --call-graph dwarf,16384").split()
            perf = subprocess.Popen(["perf", "record", *args, "-p", str(pid), "-o", out, "--", "sleep", str(seconds)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        each = seconds / len(encodings)
        for enc in encodings:
            f0 = minor_faults(pid)
            point = ts.GrpcPoint(srv, x, conc, port, h.pg.pid) if enc == "grpc" \
                else ts.HttpPoint(srv, x, enc == "binary", conc, h.pg.pid)
            r = point.run(0.5, each)
            n = r.get("inferences_per_s", 0) * (0.5 + each)   # the warm-up's inferences too
            shown = {k: round(v, 3) for k, v in r.items() if k in ("inferences_per_s", "p50_ms", "client_cores",
                                                                  "server_cpu_ms_per_inference", "mean_batch")}
            print(enc, "minor faults/inference", round((minor_faults(pid) - f0) / max(1.0, n), 1), shown, flush=True)
        if perf:
            perf.wait()
    finally:
        h.close()


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
