#!/usr/bin/python3
"""Issue 10's figures of one device call, as one JSON object: gpu-YYYYMMDD.json.

    gpu_figures.py --facts facts.txt --summary summary.txt --recon bench-recon.json
                   --brkga bench-brkga.log --out DIR [--date YYYYMMDD]

Read from what the call's steps wrote (tools/device/gpu-kit.sh), never typed by a hand:
device, driver and cuda from nvidia-smi; gpu_suite_failed counts the GPU test, sanitizer and
model steps that did not pass; fdk_gups_512, fbp_images_per_s_512 and sart_images_per_s_256
from `gpujobd bench recon --json`; brkga_decodes_per_s is the best GPU row of `gpujobd bench
brkga` (the 200-demand generated instance), with the 16-core CPU's best beside it. A figure the
call did not produce is null and named in "not_measured"; the inference figures belong to the
second, optional call. Writes DIR/gpu-YYYYMMDD.json and prints it."""
import argparse
import datetime
import json
import os
import re
import sys

SECOND_CALL = ["densenet169_1024_vs_torch_eager", "densenet169_1024_vs_torch_compile", "resnet50_e2e_per_s",
               "densenet169_e2e_p99_ms_c5"]
SUITE_STEPS = re.compile(r"^(test-|memcheck-|models)")


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def machine(facts):
    """device, driver, cuda from facts.txt (nvidia-smi's query and banner, nvcc)."""
    out = {"device": None, "driver": None, "cuda": None, "cuda_toolkit": None}
    lines = facts.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("name, driver_version") and i + 1 < len(lines):
            cols = [c.strip() for c in lines[i + 1].split(",")]
            if len(cols) >= 2:
                out["device"], out["driver"] = cols[0], cols[1]
        m = re.search(r"CUDA Version:\s*([0-9.]+)", line)
        if m:
            out["cuda"] = m.group(1)
        m = re.search(r"^# nvcc:.*release ([0-9.]+)", line)
        if m:
            out["cuda_toolkit"] = m.group(1)
    return out


def suite_failed(summary):
    """GPU steps (tests, sanitizer, models) that did not end "ok"; None without a summary."""
    steps = [l for l in summary.splitlines() if SUITE_STEPS.match(l)]
    if not steps:
        return None
    return sum(1 for l in steps if not re.match(r"^[\w-]+: ok\b", l))


def recon(path):
    try:
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
    except (OSError, ValueError):
        return {}
    gpu = lambda key: [e for e in r.get(key, []) if e.get("device") == "gpu"]
    out = {}
    fdk = [e.get("gups") for e in gpu("fdk") if e.get("n") == 512]
    if fdk:
        out["fdk_gups_512"] = fdk[-1]
    # bench recon's batch FBP is 512^2 (180 views, 725 bins), its SART 256^2
    for key, name in (("fbp", "fbp_images_per_s_512"), ("sart", "sart_images_per_s_256")):
        rows = gpu(key)
        if rows:
            out[name] = rows[-1].get("images_per_s")
    return out


def brkga(log):
    """The best decodes/s of the GPU rows and of the CPU (all threads) rows of the network decoder."""
    best = {"gpu": None, "cpu": None}
    for line in log.splitlines():
        m = re.match(r"^network\s+(gpu \d+|cpu x\d+)\s+(\d+)\s+([0-9.]+)", line)
        if not m:
            continue
        kind = "gpu" if m.group(1).startswith("gpu") else "cpu"
        if kind == "cpu" and m.group(1) == "cpu x1":
            continue
        v = float(m.group(3))
        if best[kind] is None or v > best[kind]:
            best[kind] = v
    return best


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--facts", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--recon", required=True)
    ap.add_argument("--brkga", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--date", default=datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d"))
    a = ap.parse_args(argv)
    if not re.fullmatch(r"\d{8}", a.date):
        print("gpu_figures: --date must be YYYYMMDD", file=sys.stderr)
        return 2
    fig = machine(read(a.facts))
    fig["gpu_suite_failed"] = suite_failed(read(a.summary))
    fig.update({k: None for k in ("fdk_gups_512", "fbp_images_per_s_512", "sart_images_per_s_256")})
    fig.update(recon(a.recon))
    b = brkga(read(a.brkga))
    fig["brkga_decodes_per_s"] = b["gpu"]
    fig["brkga_cpu_decodes_per_s"] = b["cpu"]
    fig["brkga_gpu_vs_cpu"] = b["gpu"] / b["cpu"] if b["gpu"] and b["cpu"] else None
    for k in SECOND_CALL:
        fig[k] = None
    fig["not_measured"] = sorted(k for k, v in fig.items() if v is None)
    fig["source"] = "tools/device/gpu-kit.sh (one device call); inference figures: the second call"
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "gpu-%s.json" % a.date)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(fig, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
    print(json.dumps(fig, indent=2, sort_keys=True))
    print("gpu_figures: wrote %s" % path, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
