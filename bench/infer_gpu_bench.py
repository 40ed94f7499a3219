#!/usr/bin/env python3
"""Issue 6 benchmark: gpujobd inference against PyTorch eager, torch.compile and ONNX Runtime,
in one run, on one device and precision; then the serving path in process and end to end.

Models (random weights, fixed seeds, exported here with torch.onnx.export, opset 17):
  densenet169  seed 004's chest X-ray network: a [N, 1, 1024, 1024] image, a 2-D convolution
               (1 -> 3 channels, kernel 2, stride 2) that brings it to what DenseNet-169
               expects (3 x 512 x 512), torchvision DenseNet-169 with 8 outputs;
  resnet50     torchvision ResNet-50, [N, 3, 224, 224], 1000 outputs.

Parts (--parts, default all, in this order; each appends its tables to OUT/report.md as soon
as it has them, and every measurement to OUT/results.jsonl, so a run that is killed leaves
what it measured):
  models   export the ONNX files and write model directories (cached under --models-dir);
  torch    PyTorch eager (cuDNN, cudnn.benchmark on) and torch.compile (mode default, then
           reduce-overhead where it works; dynamic=False, one compile per batch size), per
           precision and batch size, CUDA-event timed after warm-up, median of 5 repeats;
  ort      ONNX Runtime: CUDAExecutionProvider when onnxruntime has it, else its CPU provider
           (a reference only, marked so);
  runtime  `gpujobd bench infer --runtime`: gpujobd's ONNX sessions alone, same batch sizes
           and precisions;
  inproc   `gpujobd bench infer`: client threads through the dynamic batcher, concurrency
           1..64, a few max batch / queue delay configurations;
  http     `gpujobd serve` (PostgreSQL from tests/integration/harness.py) over HTTPS:
           POST /v2/models/{m}/infer with Triton's binary tensor extension, one keep-alive TLS
           connection per client, clients spread over processes; the client's own ceiling
           (GET /healthz at the same concurrency) is measured and reported.

Precision: fp32 = strict float32 (torch.backends.cuda.matmul.allow_tf32 = False,
cudnn.allow_tf32 = False; gpujobd --precision fp32); tf32 = both allowed; fp16 = autocast to
float16 for PyTorch, gpujobd --precision fp16 (FP32 storage, half tensor-core math).
On --device cpu only fp32 is measured.

usage (a GPU machine; about 7-8 minutes on an H100, every part bounded by --budget):
    python3 bench/infer_gpu_bench.py --out bench-out
    python3 bench/infer_gpu_bench.py --out bench-out --parts torch,runtime --models resnet50
    python3 bench/infer_gpu_bench.py --quick --device cpu --out /tmp/q     # a few minutes, CPU
Environment: GPUJOBD (the binary; default $GJ_BUILD_ROOT/service/gpujobd, else
build/service/gpujobd). Uses only the standard library, torch, torchvision, onnx,
onnxruntime (optional) and numpy (optional).
"""
import argparse
import hashlib
import http.client
import json
import multiprocessing as mp
import os
import platform
import ssl
import statistics
import subprocess
import sys
import threading
import time

from benchlib import cpu_model, load_average, model_counters

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
T_START = time.monotonic()

# ---- configuration -------------------------------------------------------------------------

MODELS = {
    "densenet169": {"name": "densenet169-1024", "shape": (1, 1024, 1024), "classes": 8,
                    "batches": [1, 4, 8, 16], "key_batch": 16,
                    "serve": [("b1", 1, "off"), ("b16-d0", 16, "0"), ("b16-d2000", 16, "2000")]},
    "resnet50": {"name": "resnet50-224", "shape": (3, 224, 224), "classes": 1000,
                 "batches": [1, 4, 8, 16, 32, 64], "key_batch": 64,
                 "serve": [("b1", 1, "off"), ("b32-d0", 32, "0"), ("b32-d1000", 32, "1000")]},
}
QUICK = {
    "densenet169": {"name": "densenet169-q256", "shape": (1, 256, 256), "batches": [1, 2],
                    "key_batch": 2, "serve": [("b1", 1, "off"), ("b4-d2000", 4, "2000")]},
    "resnet50": {"batches": [1, 2], "key_batch": 2,
                 "serve": [("b1", 1, "off"), ("b4-d2000", 4, "2000")]},
}
CONCURRENCY = [1, 2, 4, 5, 8, 16, 32, 64]
QUICK_CONCURRENCY = [1, 4]
# Seconds per part (full run); what a part leaves unused goes to the next one. The whole run
# stops starting new measurements at --budget seconds.
PART_BUDGET = {"models": 40, "torch": 170, "ort": 15, "runtime": 70, "inproc": 70, "http": 110}
QUICK_PART_BUDGET = {"models": 60, "torch": 40, "ort": 15, "runtime": 30, "inproc": 40, "http": 60}


class Run:
    """Output files, the clock and the results gathered so far."""

    def __init__(self, args):
        self.args = args
        os.makedirs(args.out, exist_ok=True)
        self.md_path = os.path.join(args.out, "report.md")
        self.jl_path = os.path.join(args.out, "results.jsonl")
        self.md = open(self.md_path, "a")
        self.jl = open(self.jl_path, "a")
        self.results = []
        self.deadline = T_START + args.budget
        self.carry = 0.0
        self.part_deadline = self.deadline

    def say(self, text=""):
        print(text, flush=True)
        self.md.write(text + "\n")
        self.md.flush()

    def log(self, text):
        print(text, file=sys.stderr, flush=True)

    def record(self, **r):
        r["t"] = round(time.monotonic() - T_START, 1)
        self.results.append(r)
        self.jl.write(json.dumps(r) + "\n")
        self.jl.flush()
        return r

    def start_part(self, name):
        budgets = QUICK_PART_BUDGET if self.args.quick else PART_BUDGET
        order = [p for p in PARTS if p in self.args.parts]
        later = sum(budgets[p] * 0.5 for p in order[order.index(name) + 1:])
        now = time.monotonic()
        own = budgets[name] * self.args.budget_scale * self.args.budget / self.args.default_budget + self.carry
        self.part_deadline = min(now + own, max(now + 1, self.deadline - later))
        self.part_started = now
        self.part_budget = own
        self.log(f"[{now - T_START:6.1f}s] part {name}: budget {self.part_deadline - now:.0f}s")

    def end_part(self):
        used = time.monotonic() - self.part_started
        self.carry = max(0.0, self.part_budget - used)

    def left(self):
        return self.part_deadline - time.monotonic()

    def find(self, **kw):
        for r in reversed(self.results):
            if all(r.get(k) == v for k, v in kw.items()):
                return r
        return None


def fmt(v, nd=1):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return f"{v:,.{nd}f}"


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


# ---- hardware ------------------------------------------------------------------------------

def hardware(device):
    gpu = "no GPU used"
    if device == "cuda":
        try:
            import torch
            p = torch.cuda.get_device_properties(0)
            gpu = f"{p.name}, {p.total_memory / 2**30:.0f} GiB"
        except Exception as e:  # noqa: BLE001
            gpu = f"GPU ? ({e})"
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit",
                                "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
            if q.returncode == 0 and q.stdout.strip():
                gpu += f" (nvidia-smi: {q.stdout.strip().splitlines()[0]})"
        except (OSError, subprocess.SubprocessError):
            pass
    vers = [f"Python {platform.python_version()}"]
    for mod in ("torch", "torchvision", "onnx", "onnxruntime"):
        try:
            vers.append(f"{mod} {__import__(mod).__version__}")
        except Exception:  # noqa: BLE001
            vers.append(f"{mod} absent")
    try:
        import torch
        if device == "cuda":
            vers.append(f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
    except Exception:  # noqa: BLE001
        pass
    return (f"{gpu}; CPU {cpu_model()}, {os.cpu_count()} cores; {platform.system()} {platform.release()}; "
            f"{', '.join(vers)}; load average {load_average()} at start")


# ---- models --------------------------------------------------------------------------------

def model_specs(args):
    specs = {}
    for key in args.models:
        s = dict(MODELS[key])
        if args.quick:
            s.update(QUICK[key])
        s["key"] = key
        specs[key] = s
    return specs


def build_torch_model(spec):
    import torch
    import torchvision
    torch.manual_seed(1234)
    if spec["key"] == "densenet169":
        class ChestNet(torch.nn.Module):
            """Seed 004's shape: 1 x H x W gray image -> 2-D convolution to 3 x H/2 x W/2 ->
            DenseNet-169 -> 8 logits."""

            def __init__(self):
                super().__init__()
                self.adapter = torch.nn.Conv2d(1, 3, kernel_size=2, stride=2)
                self.body = torchvision.models.densenet169(num_classes=spec["classes"])

            def forward(self, x):
                return self.body(self.adapter(x))
        m = ChestNet()
    else:
        m = torchvision.models.resnet50(num_classes=spec["classes"])
    gen = torch.Generator().manual_seed(99)
    for mod in m.modules():   # BatchNorm with random statistics (not the identity)
        if isinstance(mod, torch.nn.BatchNorm2d):
            with torch.no_grad():
                mod.weight.uniform_(0.5, 1.5, generator=gen)
                mod.bias.uniform_(-0.2, 0.2, generator=gen)
                mod.running_mean.uniform_(-0.2, 0.2, generator=gen)
                mod.running_var.uniform_(0.5, 1.5, generator=gen)
    return m.eval()


def export_onnx(model, spec, path):
    import inspect
    import torch
    x = torch.randn(1, *spec["shape"])
    kw = dict(opset_version=17, input_names=["image"], output_names=["logits"],
              dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    tries = [dict(kw)]
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        tries = [dict(kw, dynamo=False), dict(kw, dynamo=True)]   # legacy first: dynamic_axes
    last = None
    for t in tries:
        try:
            with torch.no_grad():
                torch.onnx.export(model, (x,), path, **t)
            return "torch.onnx.export" + (f" dynamo={t['dynamo']}" if "dynamo" in t else "")
        except Exception as e:  # noqa: BLE001
            last = e
    raise RuntimeError(f"torch.onnx.export failed: {last}")


def model_dir(run, spec):
    return os.path.join(run.args.models_dir, spec["name"])


def write_config(path, spec, max_batch=None, delay=None, backend="cpu", precision="fp32",
                 cuda_graphs=True, instances=1, device=0):
    cfg = {"platform": "onnx",
           "input": {"name": "image", "dims": list(spec["shape"]), "datatype": "FP32"},
           "output": {"name": "logits", "dims": [spec["classes"]], "datatype": "FP32"},
           "labels": [f"l{i}" for i in range(spec["classes"])],
           "max_batch_size": max_batch or max(spec["batches"])}
    if delay is not None and delay != "off":
        cfg["dynamic_batching"] = {"max_queue_delay_us": int(delay)}
    if backend == "cuda":
        cfg["instance_group"] = {"kind": "KIND_GPU", "count": instances, "gpus": [device]}
        cfg["precision"] = precision
        cfg["cuda_graphs"] = bool(cuda_graphs)
    else:
        cfg["instance_group"] = {"kind": "KIND_CPU", "count": instances}
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)


def part_models(run, specs):
    run.say("\n## Models\n")
    for spec in specs.values():
        d = model_dir(run, spec)
        onnx_path = os.path.join(d, "1", "model.onnx")
        tag = hashlib.sha256(json.dumps([spec["key"], spec["shape"], spec["classes"], 17]).encode()).hexdigest()[:16]
        tag_path = os.path.join(d, "export.tag")
        how = "cached"
        if not (os.path.exists(onnx_path) and os.path.exists(tag_path) and open(tag_path).read() == tag):
            os.makedirs(os.path.join(d, "1"), exist_ok=True)
            t0 = time.monotonic()
            how = export_onnx(build_torch_model(spec), spec, onnx_path + ".tmp")
            os.replace(onnx_path + ".tmp", onnx_path)
            with open(tag_path, "w") as f:
                f.write(tag)
            how += f", {time.monotonic() - t0:.0f} s"
        write_config(os.path.join(d, "config.json"), spec)
        run.say(f"- `{spec['name']}`: input [N, {', '.join(map(str, spec['shape']))}], "
                f"{spec['classes']} outputs, {os.path.getsize(onnx_path) / 2**20:.1f} MiB ONNX ({how})")
        run.record(part="models", model=spec["name"], onnx=onnx_path, bytes=os.path.getsize(onnx_path))


# ---- PyTorch -------------------------------------------------------------------------------

def set_precision(torch, prec):
    strict = prec == "fp32"
    torch.backends.cuda.matmul.allow_tf32 = not strict
    torch.backends.cudnn.allow_tf32 = not strict
    torch.backends.cudnn.benchmark = True


def timed(torch, device, fn, batch, repeats, min_time, warmup):
    """Median seconds per call over `repeats` timed blocks (each >= min_time)."""
    cuda = device == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()
    for _ in range(warmup):
        fn()
    sync()
    t = time.perf_counter()
    fn()
    sync()
    one = max(time.perf_counter() - t, 1e-6)
    iters = max(1, min(1000, int(min_time / one)))
    per = []
    for _ in range(repeats):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(iters):
                fn()
            b.record()
            b.synchronize()
            per.append(a.elapsed_time(b) / 1e3 / iters)
        else:
            t = time.perf_counter()
            for _ in range(iters):
                fn()
            per.append((time.perf_counter() - t) / iters)
    med = statistics.median(per)
    return {"ms": med * 1e3, "throughput": batch / med, "calls": iters * repeats,
            "spread": (max(per) - min(per)) / med if med else 0}


def part_torch(run, specs):
    import contextlib
    import torch
    a = run.args
    dev = a.device
    torch.set_num_threads(os.cpu_count() or 1)
    torch.set_flush_denormal(True)   # random weights: denormals would slow the CPU path
    repeats, min_time = (3, 0.1) if a.quick else (5, 0.15)
    rows = []
    compiled_ok = hasattr(torch, "compile")
    models = {}

    def ctx(prec):
        if prec == "fp16":
            return torch.autocast(device_type="cuda", dtype=torch.float16)
        return contextlib.nullcontext()

    # eager (and, on a GPU, eager with the host <-> device copies gpujobd's runtime does)
    for key, spec in specs.items():
        m = build_torch_model(spec).to(dev)
        models[key] = m
        for prec in a.precisions:
            set_precision(torch, prec)
            for bs in spec["batches"]:
                if run.left() < 0:
                    break
                x = torch.randn(bs, *spec["shape"], device=dev)
                xh = torch.randn(bs, *spec["shape"])
                try:
                    with torch.inference_mode(), ctx(prec):
                        r = timed(torch, dev, lambda: m(x), bs, repeats, min_time, 3)
                        rc = None
                        if dev == "cuda":
                            rc = timed(torch, dev, lambda: m(xh.to(dev)).float().cpu(), bs, 3, min_time, 1)
                    run.record(part="torch", model=spec["name"], impl="eager", precision=prec, batch=bs,
                               throughput=r["throughput"], ms=r["ms"], spread=r["spread"],
                               copy_throughput=rc["throughput"] if rc else None)
                    rows.append((spec["name"], prec, bs, "eager", r, rc))
                except Exception as e:  # noqa: BLE001
                    run.record(part="torch", model=spec["name"], impl="eager", precision=prec, batch=bs,
                               error=str(e)[:300])
                    rows.append((spec["name"], prec, bs, "eager", {"error": str(e)[:120]}, None))
                del x, xh
        if dev == "cuda":
            torch.cuda.empty_cache()

    # torch.compile, most important entries first, while the part's budget lasts
    plan = []
    if compiled_ok:
        for mode in a.compile_modes:
            for prec in a.compile_precisions:
                for key, spec in specs.items():
                    plan.append((0 if mode == a.compile_modes[0] else 1, mode, prec, key, spec["key_batch"]))
            for prec in a.compile_precisions:
                for key, spec in specs.items():
                    for bs in spec["batches"]:
                        if bs != spec["key_batch"]:
                            plan.append((2 if mode == a.compile_modes[0] else 3, mode, prec, key, bs))
        plan.sort(key=lambda p: p[0])
    cost = {}
    try:
        import torch._dynamo as dynamo
        for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                     "accumulated_recompile_limit"):
            if hasattr(dynamo.config, name):
                setattr(dynamo.config, name, 256)
    except Exception:  # noqa: BLE001
        dynamo = None
    compiled = {}
    for _, mode, prec, key, bs in plan:
        spec = specs[key]
        est = cost.get(key, 60 if spec["key"] == "densenet169" else 30)
        if run.left() < est:
            run.record(part="torch", model=spec["name"], impl=f"compile:{mode}", precision=prec, batch=bs,
                       error=f"skipped: {run.left():.0f} s of the part's budget left, compile ~{est:.0f} s")
            rows.append((spec["name"], prec, bs, f"compile:{mode}", {"error": "skipped (budget)"}, None))
            continue
        set_precision(torch, prec)
        m = models[key]
        cm = compiled.get((key, prec, mode))
        if cm is None:
            if dynamo is not None:
                dynamo.reset()
            cm = torch.compile(m, mode=None if mode == "default" else mode, dynamic=False)
            compiled[(key, prec, mode)] = cm
        x = torch.randn(bs, *spec["shape"], device=dev)
        t0 = time.monotonic()
        try:
            with torch.inference_mode(), ctx(prec):
                if mode == "reduce-overhead" and hasattr(torch, "compiler") and \
                        hasattr(torch.compiler, "cudagraph_mark_step_begin"):
                    def fn():
                        torch.compiler.cudagraph_mark_step_begin()
                        return cm(x)
                else:
                    def fn():
                        return cm(x)
                fn()
                if dev == "cuda":
                    torch.cuda.synchronize()
                ctime = time.monotonic() - t0
                cost[key] = max(cost.get(key, 0) * 0.5, ctime)
                r = timed(torch, dev, fn, bs, repeats, min_time, 3)
            run.record(part="torch", model=spec["name"], impl=f"compile:{mode}", precision=prec, batch=bs,
                       throughput=r["throughput"], ms=r["ms"], spread=r["spread"], compile_s=ctime)
            rows.append((spec["name"], prec, bs, f"compile:{mode}", dict(r, compile_s=ctime), None))
        except Exception as e:  # noqa: BLE001
            cost[key] = max(cost.get(key, 0), time.monotonic() - t0)
            msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            run.record(part="torch", model=spec["name"], impl=f"compile:{mode}", precision=prec, batch=bs,
                       error=msg)
            rows.append((spec["name"], prec, bs, f"compile:{mode}", {"error": msg[:120]}, None))
    if not compiled_ok:
        run.record(part="torch", impl="compile", error=f"torch {torch.__version__} has no torch.compile")
    del models, compiled
    if dev == "cuda":
        torch.cuda.empty_cache()

    run.say(f"\n## PyTorch {torch.__version__} on {dev} (cudnn.benchmark on; median of {repeats} timed "
            "blocks after warm-up, CUDA events; input already on the device; 'with copies': a host "
            "input copied in and the output copied back, as gpujobd's runtime does)\n")
    run.say("| model | precision | batch | implementation | inferences/s | ms/batch | spread | with copies inf/s | compile s |")
    run.say("|---|---|---|---|---|---|---|---|---|")
    for name, prec, bs, impl, r, rc in sorted(rows, key=lambda t: (t[0], t[1], t[3], t[2])):
        if "error" in r:
            run.say(f"| {name} | {prec} | {bs} | {impl} | {r['error']} | | | | |")
            continue
        run.say(f"| {name} | {prec} | {bs} | {impl} | {fmt(r['throughput'])} | {r['ms']:.2f} | "
                f"{r['spread'] * 100:.0f}% | {fmt(rc['throughput']) if rc else '-'} | "
                f"{fmt(r.get('compile_s'), 0) if 'compile_s' in r else '-'} |")
    if not compiled_ok:
        run.say(f"\ntorch.compile: not available in torch {torch.__version__}.")


# ---- ONNX Runtime ----------------------------------------------------------------------------

def part_ort(run, specs):
    a = run.args
    try:
        import numpy as np
        import onnxruntime as ort
    except Exception as e:  # noqa: BLE001
        run.say(f"\n## ONNX Runtime\n\nnot run: {e}")
        run.record(part="ort", error=str(e))
        return
    avail = ort.get_available_providers()
    use_cuda = a.device == "cuda" and "CUDAExecutionProvider" in avail
    run.say(f"\n## ONNX Runtime {ort.__version__} ({'CUDAExecutionProvider' if use_cuda else 'CPUExecutionProvider'}"
            f"; available: {', '.join(avail)})\n")
    if a.device == "cuda" and not use_cuda:
        run.say("This onnxruntime has no CUDA provider: the CPU provider's figures below are a CPU "
                "reference only, at batch 1, not a GPU comparison.\n")
    run.say("| model | provider | precision | batch | inferences/s | ms/batch |")
    run.say("|---|---|---|---|---|---|")
    for spec in specs.values():
        path = os.path.join(model_dir(run, spec), "1", "model.onnx")
        precs = [p for p in a.precisions if p in ("fp32", "tf32")] if use_cuda else ["fp32"]
        for prec in precs:
            so = ort.SessionOptions()
            so.intra_op_num_threads = os.cpu_count() or 1
            if use_cuda:
                prov = [("CUDAExecutionProvider", {"device_id": 0, "use_tf32": 1 if prec == "tf32" else 0,
                                                   "cudnn_conv_algo_search": "EXHAUSTIVE"})]
            else:
                prov = ["CPUExecutionProvider"]
            try:
                sess = ort.InferenceSession(path, so, providers=prov)
            except Exception as e:  # noqa: BLE001
                run.say(f"| {spec['name']} | {prov[0] if isinstance(prov[0], str) else prov[0][0]} | {prec} | - | error: {str(e)[:100]} | |")
                continue
            batches = spec["batches"] if (use_cuda or a.device == "cpu") else [1]
            for bs in batches:
                if run.left() < 0:
                    break
                x = np.random.RandomState(0).standard_normal((bs,) + tuple(spec["shape"])).astype(np.float32)
                for _ in range(2):
                    sess.run(None, {"image": x})
                lat = []
                t_end = time.monotonic() + (0.5 if a.quick else 1.0)
                while len(lat) < 3 or (time.monotonic() < t_end and len(lat) < 200):
                    t = time.perf_counter()
                    sess.run(None, {"image": x})
                    lat.append(time.perf_counter() - t)
                med = statistics.median(lat)
                provider = "CUDA" if use_cuda else "CPU"
                run.record(part="ort", model=spec["name"], provider=provider, precision=prec, batch=bs,
                           throughput=bs / med, ms=med * 1e3)
                run.say(f"| {spec['name']} | {provider} | {prec} | {bs} | {fmt(bs / med)} | {med * 1e3:.2f} |")


# ---- gpujobd -------------------------------------------------------------------------------

def gpujobd_bin():
    g = os.environ.get("GPUJOBD")
    if g:
        return g
    return os.path.join(os.environ.get("GJ_BUILD_ROOT", os.path.join(ROOT, "build")), "service", "gpujobd")


def run_lines(run, cmd, timeout, env=None):
    """Runs cmd, yields its stdout JSON lines as they come; kills it at the timeout.
    Returns (rows, stderr tail, note)."""
    run.log("  $ " + " ".join(cmd))
    rows, note = [], ""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, **(env or {})))
    err_chunks = []
    t = threading.Thread(target=lambda: err_chunks.append(p.stderr.read()), daemon=True)
    t.start()
    killer = threading.Timer(max(1.0, timeout), p.kill)
    killer.start()
    try:
        for line in p.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    finally:
        p.wait()
        killer.cancel()
        t.join(5)
    if p.returncode and p.returncode < 0:
        note = f"stopped at the part's time limit ({timeout:.0f} s)"
    err = "".join(err_chunks).strip()
    if err:
        run.log("    " + err.replace("\n", "\n    ")[-1500:])
    return rows, err, note


def backend_args(a, prec):
    b = ["--backend", a.backend, "--threads", str(a.threads)]
    if a.backend == "cuda":
        b += ["--precision", prec]
        if a.cuda_graphs:
            b += ["--cuda-graphs"]
    return b


def torch_ref(run, model, prec, bs, impl):
    r = run.find(part="torch", model=model, precision=prec, batch=bs, impl=impl)
    return r.get("throughput") if r else None


def best_compile(run, model, prec, bs):
    best = None
    for mode in run.args.compile_modes:
        v = torch_ref(run, model, prec, bs, f"compile:{mode}")
        if v and (best is None or v > best):
            best = v
    return best


def part_runtime(run, specs):
    a = run.args
    g = gpujobd_bin()
    run.say(f"\n## gpujobd runtime alone (`gpujobd bench infer --runtime`, backend {a.backend}"
            f"{', CUDA graphs' if a.backend == 'cuda' and a.cuda_graphs else ''}; host buffers in and out) "
            "against PyTorch at the same batch size and precision, same run\n")
    run.say("| model | precision | batch | gpujobd inf/s | ms/batch | session s | PyTorch eager | ratio | "
            "eager with copies | ratio | torch.compile (best mode) | ratio | ORT | ratio |")
    run.say("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    precs = a.precisions if a.backend == "cuda" else ["fp32"]
    for spec in specs.values():
        for prec in precs:
            if run.left() < 5:
                run.say(f"| {spec['name']} | {prec} | - | skipped: part time limit | | | | | | | | | | |")
                continue
            cmd = [g, "bench", "infer", "--runtime", "--json", "--batch", ",".join(map(str, spec["batches"])),
                   "--seconds", str(a.runtime_seconds), "--warmup", "3", "--min-runs", "3",
                   "--name", spec["name"]] + backend_args(a, prec) + [model_dir(run, spec)]
            rows, err, note = run_lines(run, cmd, run.left())
            got = {r["batch"]: r for r in rows}
            for bs in spec["batches"]:
                r = got.get(bs)
                if not r:
                    why = note or (err.splitlines()[-1][:150] if err else "no result")
                    run.record(part="runtime", model=spec["name"], precision=prec, batch=bs, error=why)
                    run.say(f"| {spec['name']} | {prec} | {bs} | {why} | | | | | | | | | | |")
                    continue
                e = torch_ref(run, spec["name"], prec, bs, "eager")
                ec = run.find(part="torch", model=spec["name"], precision=prec, batch=bs, impl="eager")
                ec = ec.get("copy_throughput") if ec else None
                c = best_compile(run, spec["name"], prec, bs)
                o = run.find(part="ort", model=spec["name"], precision=prec, batch=bs)
                o = o.get("throughput") if o else None
                run.record(part="runtime", model=spec["name"], precision=prec, batch=bs,
                           throughput=r["throughput"], ms=r["median_ms"], session_ms=r["session_ms"],
                           eager=e, eager_copies=ec, compile=c, ort=o)
                run.say(f"| {spec['name']} | {prec} | {bs} | **{fmt(r['throughput'])}** | {r['median_ms']:.2f} | "
                        f"{r['session_ms'] / 1e3:.1f} | {fmt(e)} | {ratio(r['throughput'], e)} | {fmt(ec)} | "
                        f"{ratio(r['throughput'], ec)} | {fmt(c)} | {ratio(r['throughput'], c)} | {fmt(o)} | "
                        f"{ratio(r['throughput'], o)} |")


def serve_precision(a):
    return a.serve_precision if a.backend == "cuda" else "fp32"


def serve_table_head(run, title):
    run.say(title)
    run.say("| model | config | max batch | delay us | conc | req/s | p50 ms | p99 ms | mean batch | "
            "vs eager @max batch | vs compile @max batch | notes |")
    run.say("|---|---|---|---|---|---|---|---|---|---|---|---|")


def serve_row(run, spec, label, mb, delay, conc, r, notes=""):
    prec = serve_precision(run.args)
    bs = max(b for b in spec["batches"] if b <= mb) if any(b <= mb for b in spec["batches"]) else None
    e = torch_ref(run, spec["name"], prec, bs, "eager") if bs else None
    c = best_compile(run, spec["name"], prec, bs) if bs else None
    goal = ""
    if conc == 5 and r.get("p99_ms") is not None:
        goal = f"p99 {'<' if r['p99_ms'] < 50 else '>='} 50 ms"
    run.say(f"| {spec['name']} | {label} | {mb} | {delay} | {conc} | **{fmt(r['throughput'])}** | "
            f"{fmt(r['p50_ms'])} | {fmt(r['p99_ms'])} | {fmt(r.get('mean_batch'), 2)} | {ratio(r['throughput'], e)} | "
            f"{ratio(r['throughput'], c)} | {'; '.join(x for x in (goal, notes) if x)} |")


def part_inproc(run, specs):
    a = run.args
    g = gpujobd_bin()
    prec = serve_precision(a)
    serve_table_head(run, f"\n## In process through the batcher (`gpujobd bench infer`, {a.backend}, {prec}"
                          f"{', CUDA graphs' if a.backend == 'cuda' and a.cuda_graphs else ''}, 1 instance, "
                          f"{a.level_seconds} s per level; one sample per request)\n")
    for spec in specs.values():
        if run.left() < 5:
            run.say(f"| {spec['name']} | - | - | - | - | skipped: part time limit | | | | | | |")
            continue
        # all configurations of a model in one process (the CUDA backend finds each
        # convolution's algorithm once per process)
        cmd = [g, "bench", "infer", "--json", "--instances", "1",
               "--concurrency", ",".join(map(str, a.concurrency)), "--seconds", str(a.level_seconds),
               "--warmup-batches", a.serve_warmup, "--name", spec["name"]] + backend_args(a, prec)
        for label, mb, delay in spec["serve"]:
            cmd += ["--config", f"{label}:{mb}:{delay}"]
        rows, err, note = run_lines(run, cmd + [model_dir(run, spec)], run.left())
        conf = {label: (mb, delay) for label, mb, delay in spec["serve"]}
        for r in rows:
            label = r.get("label")
            mb, delay = conf.get(label, (r.get("max_batch"), r.get("delay_us")))
            run.record(part="inproc", model=spec["name"], config=label, max_batch=mb, delay_us=delay,
                       precision=prec, concurrency=r["concurrency"], throughput=r["throughput"],
                       p50_ms=r["p50_ms"], p99_ms=r["p99_ms"], mean_batch=r["mean_batch"],
                       failures=r["failures"])
            serve_row(run, spec, label, mb, delay, r["concurrency"], r,
                      f"{r['failures']} failed: {r.get('error', '')[:80]}" if r["failures"] else "")
        if len(rows) < len(a.concurrency) * len(spec["serve"]):
            why = note or (err.splitlines()[-1][:150] if err else "no result")
            run.say(f"| {spec['name']} | ... | | | | {len(rows)} of {len(a.concurrency) * len(spec['serve'])} "
                    f"levels: {why} | | | | | | |")


# ---- end to end over HTTPS -----------------------------------------------------------------

def _client_proc(conn, port, cafile):
    """A client process: on each command, runs N threads (one keep-alive TLS connection each)
    until the end time; sends back latencies and errors."""
    ctx = ssl.create_default_context(cafile=cafile)
    while True:
        cmd = conn.recv()
        if cmd is None:
            return
        n_threads, method, path, body, headers, t_start, t_end = cmd
        lats, errors = [], []
        lock = threading.Lock()

        def worker():
            c = http.client.HTTPSConnection("127.0.0.1", port, timeout=120, context=ctx)
            mine, errs = [], []
            try:
                c.connect()   # the TLS handshake before the clock starts
            except OSError as e:
                errs.append(type(e).__name__)
            while time.time() < t_start:
                time.sleep(0.001)
            while True:
                t0 = time.time()
                if t0 >= t_end:
                    break
                try:
                    c.request(method, path, body=body, headers=headers)
                    r = c.getresponse()
                    r.read()
                    if r.status != 200:
                        errs.append(r.status)
                    else:
                        mine.append(time.time() - t0)
                except (OSError, http.client.HTTPException) as e:
                    errs.append(type(e).__name__)
                    c.close()
                    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=120, context=ctx)
            c.close()
            with lock:
                lats.extend(mine)
                errors.extend(errs)
        ths = [threading.Thread(target=worker) for _ in range(n_threads)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        conn.send((lats, errors[:20], len(errors)))


class Load:
    """Client processes (spawned: no torch in them) driving the server."""

    def __init__(self, n_procs, port, cafile):
        ctx = mp.get_context("spawn")
        self.procs = []
        for _ in range(n_procs):
            a, b = ctx.Pipe()
            p = ctx.Process(target=_client_proc, args=(b, port, cafile), daemon=True)
            p.start()
            self.procs.append((p, a))

    def run(self, conc, method, path, body, headers, seconds):
        n = min(conc, len(self.procs))
        per = [conc // n + (1 if i < conc % n else 0) for i in range(n)]
        t_start = time.time() + 0.3
        t_end = t_start + seconds
        for (p, c), k in zip(self.procs, per):
            c.send((k, method, path, body, headers, t_start, t_end))
        lats, errs, n_err = [], [], 0
        for (p, c), k in zip(self.procs, per):
            if not c.poll(seconds + 180):   # a client process died or hangs
                raise RuntimeError("an HTTP client process did not answer")
            lt, er, ne = c.recv()
            lats += lt
            errs += er
            n_err += ne
        wall = max(seconds, time.time() - t_start) if lats else seconds
        lats.sort()
        pick = (lambda q: lats[min(len(lats) - 1, int(len(lats) * q))] * 1e3) if lats else (lambda q: None)
        return {"requests": len(lats), "throughput": len(lats) / wall if lats else 0.0,
                "p50_ms": pick(0.5), "p99_ms": pick(0.99), "errors": n_err, "error_sample": errs[:5]}

    def close(self):
        for p, c in self.procs:
            try:
                c.send(None)
            except OSError:
                pass
        for p, c in self.procs:
            p.join(5)
            if p.is_alive():
                p.terminate()


def counters(srv, model):
    """inference_count and inference_exec_count of one model, from one /metrics page."""
    v = model_counters(srv.client().request("GET", "/metrics").body.decode(), model)
    return v["inference_count"], v["inference_exec_count"]


_SAMPLE = {}


def infer_body(spec, n):
    """A binary-tensor infer request of n samples (random finite floats, |x| < 2)."""
    if spec["name"] not in _SAMPLE:
        raw = bytearray(os.urandom(4 * spec["shape"][0] * spec["shape"][1] * spec["shape"][2]))
        raw[3::4] = bytes(raw[3::4]).translate(bytes(b & 0xBF for b in range(256)))
        _SAMPLE[spec["name"]] = bytes(raw)
    raw = _SAMPLE[spec["name"]] * n
    head = json.dumps({"inputs": [{"name": "image", "shape": [n] + list(spec["shape"]), "datatype": "FP32",
                                   "parameters": {"binary_data_size": len(raw)}}],
                       "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}).encode()
    return head + raw, len(head)


def warm_sizes(spec_str, mb):
    if spec_str == "all":
        return list(range(1, mb + 1))
    if spec_str == "none":
        return [1]   # the model still has to load
    out = []
    for t in spec_str.split(","):
        n = mb if t == "max" else int(t)
        if 1 <= n <= mb and n not in out:
            out.append(n)
    return out or [1]


def part_http(run, specs):
    a = run.args
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    os.environ.setdefault("GPUJOBD", gpujobd_bin())
    import harness
    harness.GPUJOBD = gpujobd_bin()
    prec = serve_precision(a)
    n_procs = a.client_procs or max(1, min(max(a.concurrency), (os.cpu_count() or 2) // 2))
    # PostgreSQL: initdb and psql on PATH (GPUJOBD_PG_BINDIR first, as gpujobd serve uses it);
    # as root, initdb runs as GPUJOBD_PG_USER (default postgres; nobody when there is none).
    if os.environ.get("GPUJOBD_PG_BINDIR"):
        os.environ["PATH"] = os.environ["GPUJOBD_PG_BINDIR"] + os.pathsep + os.environ.get("PATH", "")
    if os.getuid() == 0 and not os.environ.get("GPUJOBD_PG_USER"):
        import pwd
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            os.environ["GPUJOBD_PG_USER"] = "nobody"
    h = harness.Harness()
    load = None
    try:
        data_dir = os.path.join(h.tmp, "srv0")
        models_dir = os.path.join(data_dir, "models")
        for spec in specs.values():
            for label, mb, delay in spec["serve"]:
                d = os.path.join(models_dir, f"{spec['name']}-{label}")
                os.makedirs(os.path.join(d, "1"), exist_ok=True)
                os.symlink(os.path.abspath(os.path.join(model_dir(run, spec), "1", "model.onnx")),
                           os.path.join(d, "1", "model.onnx"))
                write_config(os.path.join(d, "config.json"), spec, max_batch=mb, delay=delay,
                             backend=a.backend, precision=prec, cuda_graphs=a.cuda_graphs)
        env = {"GPUJOBD_INFER_THREADS": str(a.threads), "GPUJOBD_INFER_MAX_QUEUE": "65536"}
        srv = h.start_server(["--cpu-workers", "1"], data_dir=data_dir, env=env)
        load = Load(n_procs, srv.port, os.path.join(data_dir, "tls", "cert.pem"))
        auth = {"Authorization": "Bearer " + srv.admin_key}
        serve_table_head(run, f"\n## End to end over HTTPS (`gpujobd serve`, POST /v2/models/{{m}}/infer, binary "
                              f"tensors, one keep-alive TLS connection per client; {a.backend}, {prec}, 1 instance; "
                              f"clients: {n_procs} processes on the same machine, {a.level_seconds} s per level)\n")
        ceiling = {}
        for conc in a.concurrency:
            if run.left() < 3:
                break
            r = load.run(conc, "GET", "/healthz", None, {}, min(1.0, a.level_seconds))
            ceiling[conc] = r["throughput"]
            run.record(part="http-ceiling", concurrency=conc, throughput=r["throughput"], p99_ms=r["p99_ms"])
        for spec in specs.values():
            body1, hl1 = infer_body(spec, 1)
            for label, mb, delay in spec["serve"]:
                model = f"{spec['name']}-{label}"
                path = f"/v2/models/{model}/infer"
                if run.left() < 5:
                    run.say(f"| {spec['name']} | {label} | {mb} | {delay} | - | skipped: part time limit | | | | | | |")
                    continue
                # warm-up: load the model, then one request of each batch size (a session each)
                t0 = time.monotonic()
                c = srv.client()
                bad = None
                for n in warm_sizes(a.serve_warmup, mb):
                    body, hl = infer_body(spec, n) if n > 1 else (body1, hl1)
                    rr = c.request("POST", path, body=body, headers=dict(auth, **{"Inference-Header-Content-Length": str(hl)}),
                                   timeout=300)
                    if rr.status != 200:
                        bad = f"warm-up batch {n}: HTTP {rr.status} {rr.body[:200]!r}"
                        break
                    if run.left() < 5:
                        bad = "part time limit during warm-up"
                        break
                run.log(f"  {model}: warm-up {time.monotonic() - t0:.1f} s")
                if bad:
                    run.record(part="http", model=spec["name"], config=label, error=bad)
                    run.say(f"| {spec['name']} | {label} | {mb} | {delay} | - | {bad} | | | | | | |")
                    continue
                hdrs = dict(auth, **{"Inference-Header-Content-Length": str(hl1)})
                for conc in a.concurrency:
                    if run.left() < a.level_seconds + 2:
                        run.say(f"| {spec['name']} | {label} | {mb} | {delay} | {conc} | skipped: part time limit | | | | | | |")
                        break
                    c0, e0 = counters(srv, model)
                    r = load.run(conc, "POST", path, body1, hdrs, a.level_seconds)
                    c1, e1 = counters(srv, model)
                    r["mean_batch"] = (c1 - c0) / (e1 - e0) if e1 > e0 else 0
                    mbps = r["throughput"] * len(body1) / 2**20
                    notes = [f"{mbps:,.0f} MiB/s up", f"client ceiling {fmt(ceiling.get(conc), 0)}/s"]
                    if r["errors"]:
                        notes.append(f"{r['errors']} failed {r['error_sample']}")
                    run.record(part="http", model=spec["name"], config=label, max_batch=mb, delay_us=delay,
                               precision=prec, concurrency=conc, ceiling=ceiling.get(conc), **r)
                    serve_row(run, spec, label, mb, delay, conc, r, "; ".join(notes))
        run.say(f"\nClient ceiling (GET /healthz, same clients, no body): " +
                ", ".join(f"{k}: {fmt(v, 0)}/s" for k, v in ceiling.items()))
    finally:
        if load:
            load.close()
        h.close()


# ---- main ----------------------------------------------------------------------------------

PARTS = ["models", "torch", "ort", "runtime", "inproc", "http"]


def summary(run, specs):
    """The issue's goals, from what this run measured."""
    a = run.args
    if a.device != "cuda":
        run.say("\n## Goals\n\nNot evaluated: this run used no GPU (the issue's goals are H100 figures).")
        return
    prec = serve_precision(a)
    lines = []
    d = specs.get("densenet169")
    if d:
        for p in a.precisions:
            g = run.find(part="runtime", model=d["name"], precision=p, batch=d["key_batch"])
            if g and g.get("throughput"):
                lines.append(f"- DenseNet-169 1024², batch {d['key_batch']}, {p}: gpujobd {fmt(g['throughput'])}/s, "
                             f"PyTorch eager {fmt(g.get('eager'))}/s (ratio {ratio(g['throughput'], g.get('eager'))}, "
                             f"goal ≥ 1), torch.compile {fmt(g.get('compile'))}/s (ratio "
                             f"{ratio(g['throughput'], g.get('compile'))}, stretch ≥ 1)")
        c5 = [r for r in run.results if r.get("part") == "http" and r.get("model") == d["name"]
              and r.get("concurrency") == 5 and r.get("p99_ms")]
        if c5:
            best = min(c5, key=lambda r: r["p99_ms"])
            lines.append(f"- DenseNet-169 end to end, concurrency 5 ({prec}): best p99 {best['p99_ms']:.1f} ms "
                         f"({best['config']}, {fmt(best['throughput'])} req/s); goal < 50 ms")
    r50 = specs.get("resnet50")
    if r50:
        e2e = [r for r in run.results if r.get("part") == "http" and r.get("model") == r50["name"]
               and r.get("throughput")]
        if e2e:
            best = max(e2e, key=lambda r: r["throughput"])
            lines.append(f"- ResNet-50 end to end ({prec}): best {fmt(best['throughput'])} inferences/s "
                         f"({best['config']}, concurrency {best['concurrency']}, p99 {fmt(best['p99_ms'])} ms, "
                         f"client ceiling {fmt(best.get('ceiling'), 0)}/s); goal > 6,127/s")
    run.say("\n## Goals (issue 6)\n")
    run.say("\n".join(lines) if lines else "Nothing measured for the goals in this run.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out", help="directory for report.md, results.jsonl, models/")
    ap.add_argument("--models-dir", default=None,
                    help="cache of the exported models (default $GJ_BUILD_ROOT/bench-models when "
                         "GJ_BUILD_ROOT is set, else OUT/models); kept out of OUT so that OUT stays small")
    ap.add_argument("--device", choices=["cpu", "cuda"], default=None,
                    help="default: cuda when torch.cuda.is_available()")
    ap.add_argument("--quick", action="store_true", help="small sizes and few levels (a few minutes on a CPU)")
    ap.add_argument("--parts", default=",".join(PARTS), help="comma list of " + ",".join(PARTS))
    ap.add_argument("--models", default="densenet169,resnet50")
    ap.add_argument("--precisions", default=None, help="default fp32,tf32,fp16 (cuda), fp32 (cpu)")
    ap.add_argument("--compile-precisions", default=None,
                    help="default on cuda: the serving precision first, then tf32, fp16, fp32 (while the budget lasts)")
    ap.add_argument("--compile-modes", default="default,reduce-overhead",
                    help="torch.compile modes, e.g. default,reduce-overhead,max-autotune-no-cudagraphs")
    ap.add_argument("--serve-precision", default="fp16", help="precision of the inproc/http parts (cuda)")
    ap.add_argument("--serve-warmup", default="all",
                    help="batch sizes run once before the inproc/http levels: all (1..max batch), "
                         "none, or a list such as 1,8,max")
    ap.add_argument("--no-cuda-graphs", dest="cuda_graphs", action="store_false",
                    help="gpujobd without CUDA graphs (default: with)")
    ap.add_argument("--concurrency", default=None, help="client concurrency levels (default 1,2,4,5,8,16,32,64)")
    ap.add_argument("--level-seconds", type=float, default=None, help="seconds per concurrency level")
    ap.add_argument("--runtime-seconds", type=float, default=None, help="seconds per batch size (runtime)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="gpujobd CPU threads")
    ap.add_argument("--client-procs", type=int, default=0, help="HTTP client processes (default: cores / 2)")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds for the whole run (default 480 full, 420 quick, at most "
                         "$GJ_STEP_TIMEOUT - 45); parts share it in proportion")
    ap.add_argument("--budget-scale", type=float, default=1.0, help="multiplies every part's budget")
    a = ap.parse_args()
    a.parts = [p for p in a.parts.split(",") if p]
    a.models = [m for m in a.models.split(",") if m]
    for p in a.parts:
        if p not in PARTS:
            ap.error(f"unknown part {p}")
    for m in a.models:
        if m not in MODELS:
            ap.error(f"unknown model {m}")
    if a.device is None:
        try:
            import torch
            a.device = "cuda" if torch.cuda.is_available() else "cpu"
        except Exception:  # noqa: BLE001
            a.device = "cpu"
    a.backend = "cuda" if a.device == "cuda" else "cpu"
    a.precisions = (a.precisions.split(",") if a.precisions else
                    (["fp32", "tf32", "fp16"] if a.device == "cuda" else ["fp32"]))
    if a.device == "cpu":
        a.precisions = ["fp32"]
    sp = a.serve_precision if a.device == "cuda" else "fp32"
    a.compile_precisions = (a.compile_precisions.split(",") if a.compile_precisions else
                            ([p for p in [sp] + ["tf32", "fp16", "fp32"] if p in a.precisions]
                             if a.device == "cuda" else ["fp32"]))
    a.compile_precisions = list(dict.fromkeys(a.compile_precisions))
    a.compile_modes = [m for m in a.compile_modes.split(",") if m]
    if a.device == "cpu":
        a.compile_modes = [m for m in a.compile_modes if m != "reduce-overhead"] or ["default"]
    a.concurrency = ([int(x) for x in a.concurrency.split(",")] if a.concurrency else
                     (QUICK_CONCURRENCY if a.quick else CONCURRENCY))
    a.level_seconds = a.level_seconds or (2.0 if a.quick else 1.0)
    a.runtime_seconds = a.runtime_seconds or (1.0 if a.quick else 0.5)
    a.default_budget = 420.0 if a.quick else 480.0
    if not a.budget:
        a.budget = a.default_budget
        step = os.environ.get("GJ_STEP_TIMEOUT")   # tools/device/gpu-run.sh: the step's time
        if step and step.isdigit():
            a.budget = max(60.0, min(a.budget, int(step) - 45.0))
    a.models_dir = a.models_dir or (os.path.join(os.environ["GJ_BUILD_ROOT"], "bench-models")
                                    if os.environ.get("GJ_BUILD_ROOT") else os.path.join(a.out, "models"))
    run = Run(a)
    specs = model_specs(a)
    g = gpujobd_bin()
    if any(p in a.parts for p in ("runtime", "inproc", "http")) and not os.access(g, os.X_OK):
        ap.error(f"no gpujobd binary at {g} (set GPUJOBD or GJ_BUILD_ROOT)")
    run.say(f"\n# gpujobd inference benchmark (issue 6), {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n")
    run.say(f"command: `{' '.join([os.path.basename(sys.executable)] + sys.argv)}`  ")
    run.say(f"hardware: {hardware(a.device)}  ")
    run.say(f"device {a.device}, gpujobd backend {a.backend}, precisions {','.join(a.precisions)}, "
            f"serving precision {serve_precision(a)}, gpujobd {g}" + ("  \n**--quick: reduced sizes; "
                                                                     "not the issue's configuration**" if a.quick else ""))
    fns = {"models": part_models, "torch": part_torch, "ort": part_ort, "runtime": part_runtime,
           "inproc": part_inproc, "http": part_http}
    for p in PARTS:
        if p not in a.parts:
            continue
        if p != "models" and time.monotonic() > run.deadline:
            run.say(f"\n## {p}\n\nskipped: the run's budget ({a.budget:.0f} s) is spent")
            continue
        run.start_part(p)
        try:
            fns[p](run, specs)
        except Exception as e:  # noqa: BLE001  (one broken part must not hide the others)
            import traceback
            traceback.print_exc()
            run.say(f"\n{p}: failed: {type(e).__name__}: {str(e)[:300]}")
            run.record(part=p, error=f"{type(e).__name__}: {e}")
        run.end_part()
        run.log(f"[{time.monotonic() - T_START:6.1f}s] part {p} done")
    summary(run, specs)
    run.say(f"\ntotal {time.monotonic() - T_START:.0f} s; tables in {run.md_path}, every figure in {run.jl_path}")


if __name__ == "__main__":
    main()
