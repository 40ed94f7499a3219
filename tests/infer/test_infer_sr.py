#!/usr/bin/python3
"""The `infer` kind's DICOM Structured Reports (compute/infer/dicom_sr.c), checked with
other people's tools: DCMTK's dsrdump (reads it as an SR document), dcmdump (its
attributes), and dicom3tools' dciodvfy (validates it against the Comprehensive SR IOD).

Two studies of the same patient, three images (one the model skips): result.dcm and
result.1.dcm, each in its study with the patient's identity, new series and instance
UIDs, the model and version, a score per label equal to result.json's studies[].max_scores,
the top label, and references to exactly the images that were inferred.
Env: GPUJOBD, GJ_SOURCE_ROOT. Exit 0 when every check passes.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.environ.get("GJ_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
GPUJOBD = os.environ["GPUJOBD"]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)

from PIL import Image  # noqa: E402

import reference as ref  # noqa: E402
from train_demo_model import LABELS, make_image  # noqa: E402

MODELS = os.path.join(ROOT, "models")
S1, S2 = "1.2.826.0.1.3680043.8.498.2001", "1.2.826.0.1.3680043.8.498.2002"
PATIENT = {"(0010,0010)": "Roe^Richard", "(0010,0020)": "PID-4455", "(0010,0030)": "19600102",
           "(0010,0040)": "M", "(0008,0050)": "ACC-77", "(0008,0020)": "20261120",
           "(0008,0030)": "101500", "(0018,0015)": "CHEST"}
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


def tool(*cmd):
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)


def attr(dump, tag):
    """The value of a top-level attribute in dcmdump's output ("" when empty)."""
    m = re.search(r"^\(" + tag.lower() + r"\) \w\w (?:\[(.*?)\]|=(\S*)|\(no value)", dump, re.M)
    if not m:
        return None
    return m.group(1) if m.group(1) is not None else (m.group(2) or "")


def make_inputs(tmp):
    rng = np.random.default_rng(7)
    cases = [("a", {"cardiomegaly"}, {"(0008,0060)": "DX", "(0018,5101)": "PA", "(0020,000D)": S1}),
             ("b", {"nodule"}, {"(0008,0060)": "DX", "(0018,5101)": "AP", "(0020,000D)": S1}),
             ("c", set(), {"(0008,0060)": "DX", "(0018,5101)": "PA", "(0020,000D)": S2}),
             ("d", set(), {"(0008,0060)": "MR", "(0018,5101)": "PA", "(0020,000D)": S2})]
    paths = []
    for name, findings, tags in cases:
        img = np.round(make_image(rng, findings, 160, 150) * 255).astype(np.uint8)
        png = os.path.join(tmp, name + ".png")
        Image.fromarray(img, "L").save(png)
        dcm = os.path.join(tmp, name + ".dcm")
        ref.make_dicom(png, dcm, {**PATIENT, **tags})
        paths.append(dcm)
    return paths


def uid_of(path, tag):
    return attr(tool("dcmdump", "+P", tag, path).stdout, tag)


def check_report(path, study, inferred, study_result, model):
    name = os.path.basename(path)
    dump = tool("dcmdump", "-Un", path).stdout
    for tag, want in [("0010,0010", "Roe^Richard"), ("0010,0020", "PID-4455"), ("0010,0030", "19600102"),
                      ("0010,0040", "M"), ("0008,0050", "ACC-77"), ("0008,0020", "20261120"),
                      ("0020,000d", study), ("0008,0060", "SR"),
                      ("0008,0016", "1.2.840.10008.5.1.4.1.1.88.33")]:
        check(attr(dump, tag) == want, f"{name}: ({tag}) is {attr(dump, tag)!r}, want {want!r}")
    series, sop = attr(dump, "0020,000e"), attr(dump, "0008,0018")
    input_uids = {uid_of(p, "0020,000e") for p in inferred} | {uid_of(p, "0008,0018") for p in inferred}
    check(series and sop and series.startswith("2.25.") and sop.startswith("2.25.")
          and series not in input_uids and sop not in input_uids and series != sop,
          f"{name}: new series and instance UIDs ({series}, {sop})")

    v = tool("dciodvfy", path)
    errors = [ln for ln in (v.stdout + v.stderr).splitlines() if ln.startswith("Error")]
    check(not errors, f"{name}: dciodvfy errors: {errors}")

    sr = tool("dsrdump", "-Ec", "+Pc", "+Pu", path)
    check(sr.returncode == 0, f"{name}: dsrdump rc {sr.returncode}: {sr.stderr[-500:]}")
    text = sr.stdout
    check("Comprehensive SR Document" in text, f"{name}: dsrdump reads a Comprehensive SR")
    check(f'"{model}"' in text and '"1"' in text, f"{name}: model name and version in the content")
    top = study_result["top_label"]
    check(re.search(r"contains CODE:\(121071,DCM,\"Finding\"\)=\(" + re.escape(top), text),
          f"{name}: the finding is the top label {top}")
    for label in LABELS:
        m = re.search(r"contains NUM:\(" + re.escape(label) + r",99GPUJOBD,\"[^\"]*\"\)=\"([-0-9.e+]+)\"", text)
        want = study_result["max_scores"][label]
        check(m and abs(float(m.group(1)) - want) < 1e-6,
              f"{name}: score of {label} {m.group(1) if m else None} vs result.json {want}")
    refs = re.findall(r"contains IMAGE:\(121112,DCM,\"Source of Measurement\"\)=\([^,]*,\"([0-9.]+)\"\)", text)
    want = sorted(uid_of(p, "0008,0018") for p in inferred)
    check(sorted(refs) == want, f"{name}: references {sorted(refs)} want {want}")
    return sop


def main():
    tmp = tempfile.mkdtemp(prefix="gj-infer-sr-")
    try:
        paths = make_inputs(tmp)
        out = os.path.join(tmp, "out")
        pfile = os.path.join(tmp, "params.json")
        with open(pfile, "w") as f:
            json.dump({"model": "chest-xray-demo"}, f)
        cmd = [GPUJOBD, "run", "infer", "--params", pfile, "--out", out, "--models-dir", MODELS]
        for i, p in enumerate(paths):
            cmd += ["--input", f"{'dicom' if i == 0 else f'dicom.{i}'}={p}"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        if not check(r.returncode == 0, f"gpujobd run infer: rc {r.returncode}: {r.stderr[-2000:]}"):
            return 1
        check("Roe" not in r.stderr and "PID-4455" not in r.stderr, "the logs hold no patient name or id")
        res = json.load(open(os.path.join(out, "result.json")))
        studies = {s["study_instance_uid"]: s for s in res["studies"]}
        reports = {x["study_instance_uid"]: x for x in res["reports"]}
        check(sorted(reports) == sorted([S1, S2]), f"one report per study: {res['reports']}")
        check(reports[S1]["output"] == "result.dcm" and reports[S2]["output"] == "result.1.dcm",
              f"report names {res['reports']}")
        model = res["model"]["name"]
        sop1 = check_report(os.path.join(out, "result.dcm"), S1, paths[0:2], studies[S1], model)
        sop2 = check_report(os.path.join(out, "result.1.dcm"), S2, paths[2:3], studies[S2], model)
        check(reports[S1]["sop_instance_uid"] == sop1 and reports[S2]["sop_instance_uid"] == sop2,
              "result.json names each report's SOP Instance UID")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all SR checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
