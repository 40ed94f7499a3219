#!/usr/bin/python3
"""The device kit without a GPU: `tools/device/gpu-kit.sh --plan` lists every step of the one
device call within its 540 s, and tools/device/gpu_figures.py turns a call's outputs into
issue 10's figures (a skipped or failed GPU step counts, a missing figure is null)."""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.environ.get("GJ_SOURCE_ROOT", ".")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def test_plan():
    p = subprocess.run(["bash", os.path.join(ROOT, "tools/device/gpu-kit.sh"), "--plan"], capture_output=True,
                       text=True, timeout=30)
    check(p.returncode == 0, "--plan exits 0 (%s)" % p.stderr.strip())
    rows = re.findall(r"^  (\S+)\s+(\d+)s\s+(\d+)s  ", p.stdout, re.M)
    names = [r[0] for r in rows]
    for want in ("kit", "facts", "test-recon", "test-brkga", "test-onnx-ops", "test-beside", "memcheck-recon",
                 "memcheck-brkga", "models", "bench-recon", "bench-brkga", "figures"):
        check(want in names, "--plan has step %s" % want)
    total = sum(int(r[1]) for r in rows)
    check(0 < total <= 540, "the budgets add up to %d s <= 540" % total)
    check(all(int(r[1]) > 0 for r in rows), "every step has a budget of its own")
    check("second, optional call" in p.stdout, "--plan names the second, optional call")
    bad = subprocess.run(["bash", os.path.join(ROOT, "tools/device/gpu-kit.sh"), "--plan"], capture_output=True,
                         text=True, timeout=30, env=dict(os.environ, GJ_CALL_LIMIT="100"))
    check(bad.returncode != 0 and "over 100" in bad.stderr, "--plan refuses budgets over the call's limit")


# Made-up outputs of a call (no figure here was measured): the parsing alone is tested.
FACTS = """# date: 2026-11-29T05:00:00Z
| NVIDIA-SMI 580.159.04    Driver Version: 580.159.04    CUDA Version: 13.0     |
name, driver_version, memory.total [MiB], clocks.max.sm [MHz], clocks.max.memory [MHz], power.limit [W]
NVIDIA H200, 580.159.04, 143771 MiB, 1980 MHz, 3201 MHz, 700.00 W
# nvcc: Cuda compilation tools, release 13.0, V13.0.88
"""
SUMMARY = """kit: ok, 3 s
facts: ok, 1 s
test-recon: ok, 20 s
test-brkga: FAILED: SKIPPED (exit 77) on the GPU machine: it saw no usable GPU
test-onnx-ops: ok, 12 s
memcheck-recon: FAILED: over its budget of 50 s (rc 124)
models: ok, 90 s
bench-recon: ok, 60 s
"""
RECON = {"fdk": [{"n": 256, "device": "cpu", "gups": 2.0}, {"n": 256, "device": "gpu", "gups": 150.0},
                 {"n": 512, "device": "cpu", "gups": 2.1}, {"n": 512, "device": "gpu", "gups": 320.5}],
         "fbp": [{"n": 512, "device": "cpu", "images_per_s": 40.0}, {"device": "gpu", "images_per_s": 2500.0}],
         "sart": [{"n": 256, "device": "cpu", "images_per_s": 3.0}, {"device": "gpu", "images_per_s": 120.0}]}
BRKGA = """# gpujobd bench brkga
decoder  device            p      decodes/s  decodes/cpu-s  generations/s         best
network  cpu x16        1024         400000         25000        190.000        12345
network  gpu 0          1024        1500000              -        700.000        12345
network  cpu x16       16384         420000         26000         12.000        12340
network  gpu 0         16384        4200000              -        120.000        12340
network  cpu x1         1024          26000         26000         12.000        12345
tsp      gpu 0          1024        9000000              -        100.000          500
"""


def test_figures():
    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for name, text in (("facts.txt", FACTS), ("summary.txt", SUMMARY), ("bench-recon.json", json.dumps(RECON)),
                           ("bench-brkga.log", BRKGA)):
            paths[name] = os.path.join(d, name)
            with open(paths[name], "w") as f:
                f.write(text)
        out = os.path.join(d, "out")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tools/device/gpu_figures.py"), "--facts",
                            paths["facts.txt"], "--summary", paths["summary.txt"], "--recon", paths["bench-recon.json"],
                            "--brkga", paths["bench-brkga.log"], "--out", out, "--date", "20261129"],
                           capture_output=True, text=True, timeout=30)
        check(p.returncode == 0, "gpu_figures.py exits 0 (%s)" % p.stderr.strip())
        with open(os.path.join(out, "gpu-20261129.json")) as f:
            fig = json.load(f)
        check(fig["device"] == "NVIDIA H200" and fig["driver"] == "580.159.04" and fig["cuda"] == "13.0",
              "device, driver, cuda from nvidia-smi: %r %r %r" % (fig["device"], fig["driver"], fig["cuda"]))
        check(fig["gpu_suite_failed"] == 2, "a skip and a timeout count as GPU failures: %r" % fig["gpu_suite_failed"])
        check(fig["fdk_gups_512"] == 320.5, "fdk_gups_512 is the GPU's at 512: %r" % fig["fdk_gups_512"])
        check(fig["fbp_images_per_s_512"] == 2500.0 and fig["sart_images_per_s_256"] == 120.0,
              "FBP and SART images/s are the GPU's")
        check(fig["brkga_decodes_per_s"] == 4200000 and fig["brkga_cpu_decodes_per_s"] == 420000,
              "BRKGA: the best network-decoder GPU row, the best all-core CPU row (not TSP, not cpu x1)")
        check(fig["resnet50_e2e_per_s"] is None and "resnet50_e2e_per_s" in fig["not_measured"],
              "a figure of the second call is null and named as not measured")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tools/device/gpu_figures.py"), "--facts", "/nonexistent",
                            "--summary", "/nonexistent", "--recon", "/nonexistent", "--brkga", "/nonexistent", "--out",
                            out, "--date", "20261130"], capture_output=True, text=True, timeout=30)
        with open(os.path.join(out, "gpu-20261130.json")) as f:
            fig = json.load(f)
        check(p.returncode == 0 and fig["device"] is None and fig["fdk_gups_512"] is None
              and fig["gpu_suite_failed"] is None, "nothing measured: every figure null, none invented")


test_plan()
test_figures()
print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
