#!/usr/bin/python3
"""End to end: `gpujobd run infer` on DICOM files made from the demo generator's images.

Each check compares with an independent reference (tests/infer/reference.py): the same
PNG decoded with PIL, preprocessed in numpy, the exported ONNX file run with torch.
Env: GPUJOBD (the binary), GJ_SOURCE_ROOT. Exit 0 when every check passes.
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
DEMO = "chest-xray-demo"
DEMO_DIR = os.path.join(MODELS, DEMO)
TOL = 1e-4
PATIENT_NAME = "Doe^Jane"
PATIENT_ID = "PID-778899"

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


def gj_run(params, inputs, out, env_extra=None, cwd=None, models_dir=None):
    """Runs gpujobd run infer (--models-dir models_dir when given, else its default
    ./models); returns (rc, stderr, result dict or None)."""
    pfile = out + ".params.json"
    with open(pfile, "w") as f:
        json.dump(params, f)
    cmd = [GPUJOBD, "run", "infer", "--params", pfile, "--out", out]
    if models_dir:
        cmd += ["--models-dir", models_dir]
    for name, path in inputs:
        cmd += ["--input", f"{name}={path}"]
    env = dict(os.environ)
    env.pop("GPUJOBD_MODELS_DIR", None)
    env["OPENBLAS_NUM_THREADS"] = "1"
    env.update(env_extra or {})
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=120)
    check("Sanitizer" not in r.stderr and "runtime error:" not in r.stderr,
          f"sanitizer report from {params}: {r.stderr[-3000:]}")
    res = None
    rpath = os.path.join(out, "result.json")
    if os.path.exists(rpath):
        with open(rpath) as f:
            res = json.load(f)
    return r.returncode, r.stderr, res


def dicom_uid(path, tag):
    r = subprocess.run(["dcmdump", "+P", tag, path], capture_output=True, text=True)
    m = re.search(r"\[([0-9.]+)\]", r.stdout)
    return m.group(1) if m else None


def main():
    tmp = tempfile.mkdtemp(prefix="gj-infer-")
    try:
        run_all(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all infer end-to-end checks passed")
    return 0


def run_all(tmp):
    with open(os.path.join(DEMO_DIR, "config.json")) as f:
        cfg = json.load(f)
    pre = cfg["preprocessing"]
    model = ref.OnnxTorch(os.path.join(DEMO_DIR, "1", "model.onnx"))

    # --- the inputs ------------------------------------------------------------------
    rng = np.random.default_rng(20261122)
    S1, S2 = "1.2.826.0.1.3680043.8.498.1001", "1.2.826.0.1.3680043.8.498.1002"
    base = {"(0010,0010)": PATIENT_NAME, "(0010,0020)": PATIENT_ID, "(0018,0015)": "CHEST"}
    cases = [
        # name, findings, (h, w), tags, voi window, monochrome1
        ("dx_pa_cardio", {"cardiomegaly"}, (300, 280),
         {"(0008,0060)": "DX", "(0018,5101)": "PA", "(0020,000D)": S1}, None, False),
        ("cr_ap_nodule", {"nodule"}, (512, 512),
         {"(0008,0060)": "CR", "(0018,5101)": "AP", "(0020,000D)": S1,
          "(0028,1050)": "120", "(0028,1051)": "200"}, (120.0, 200.0), False),
        ("dx_pa_normal", set(), (200, 180),
         {"(0008,0060)": "DX", "(0018,5101)": "PA", "(0020,000D)": S2}, None, False),
        ("dx_pa_effusion", {"effusion"}, (256, 256),
         {"(0008,0060)": "DX", "(0018,5101)": "PA", "(0020,000D)": S2}, None, False),
        ("dx_ap_mono1", {"effusion", "nodule"}, (333, 301),
         {"(0008,0060)": "DX", "(0018,5101)": "AP", "(0028,0004)": "MONOCHROME1",
          "(0028,1050)": "130", "(0028,1051)": "220"}, (130.0, 220.0), True),
        # modality values = 2 * stored - 100; the VOI window is in modality units
        ("dx_pa_rescaled", {"nodule", "cardiomegaly"}, (260, 250),
         {"(0008,0060)": "DX", "(0018,5101)": "PA", "(0028,1053)": "2",
          "(0028,1052)": "-100", "(0028,1050)": "150", "(0028,1051)": "400"}, (150.0, 400.0),
         False),
        ("mr_chest", set(), (128, 128),
         {"(0008,0060)": "MR", "(0018,5101)": "PA"}, None, False),
        ("dx_lateral", set(), (128, 128),
         {"(0008,0060)": "DX", "(0018,5101)": "LL"}, None, False),
    ]
    files = {}
    for name, findings, (h, w), tags, voi, mono1 in cases:
        img = np.round(make_image(rng, findings, h, w) * 255).astype(np.uint8)
        if mono1:
            img = 255 - img   # stored inverted: MONOCHROME1 displays high values dark
        png = os.path.join(tmp, name + ".png")
        Image.fromarray(img, "L").save(png)
        dcm = os.path.join(tmp, name + ".dcm")
        ref.make_dicom(png, dcm, {**base, **tags})
        files[name] = (dcm, png, voi, mono1, findings)

    # Corrupt: a valid file cut inside its pixel data, and bytes that are not DICOM.
    with open(files["dx_pa_cardio"][0], "rb") as f:
        good = f.read()
    trunc = os.path.join(tmp, "truncated.dcm")
    with open(trunc, "wb") as f:
        f.write(good[: len(good) - 5000])
    garbage = os.path.join(tmp, "garbage.dcm")
    with open(garbage, "wb") as f:
        f.write(np.random.default_rng(5).integers(0, 256, 4096, dtype=np.uint8).tobytes())

    order = ["dx_pa_cardio", "cr_ap_nodule", "dx_pa_normal", "mr_chest", "dx_pa_effusion",
             "truncated", "dx_ap_mono1", "garbage", "dx_lateral", "dx_pa_rescaled"]
    paths = {**{k: v[0] for k, v in files.items()}, "truncated": trunc, "garbage": garbage}
    inputs = [("dicom" if i == 0 else f"dicom.{i}", paths[n]) for i, n in enumerate(order)]
    by_input = {name: n for (name, _), n in zip(inputs, order)}

    # --- the main run: 6 images inferred in batches of 4 + 2 --------------------------
    out = os.path.join(tmp, "out-main")
    rc, err, res = gj_run({"model": DEMO, "batch_size": 4, "threads": 2},
                          inputs, out, models_dir=MODELS)
    if not check(rc == 0 and res is not None, f"main run: rc {rc}, stderr: {err[-2000:]}"):
        return
    text = open(os.path.join(out, "result.json")).read()
    check(PATIENT_NAME.split("^")[0] not in text and PATIENT_ID not in text,
          "result.json holds no patient name or id")
    check(PATIENT_NAME.split("^")[0] not in err and PATIENT_ID not in err,
          "the logs hold no patient name or id")
    check(res["model"]["name"] == DEMO and res["model"]["version"] == 1, "model and version")
    check(res["model"]["labels"] == LABELS, "labels in the result")
    check(res["counts"] == {"images": 10, "inferred": 6, "skipped": 2, "failed": 2},
          f"counts {res['counts']}")
    check(len(res["images"]) == 10, "one entry per input")

    ok_names = [n for n in order if n in files and files[n][0] and n not in ("mr_chest", "dx_lateral")]
    refs = {}
    batch_sizes = []
    for im in res["images"]:
        n = by_input[im["input"]]
        if n in ("mr_chest", "dx_lateral"):
            want = ("modality MR not in [CR, DX]" if n == "mr_chest"
                    else "view position LL not in [PA, AP]")
            check(im["status"] == "skipped" and im.get("reason") == want,
                  f"{n}: skipped with '{want}' (got {im['status']}: {im.get('reason')})")
            check("scores" not in im, f"{n}: no scores")
            continue
        if n in ("truncated", "garbage"):
            check(im["status"] == "failed" and len(im.get("reason", "")) > 10,
                  f"{n}: failed with a reason (got {im['status']}: {im.get('reason')})")
            print(f"  {n}: {im.get('reason')}")
            continue
        dcm, png, voi, mono1, findings = files[n]
        check(im["status"] == "ok", f"{n}: status ok (got {im['status']}: {im.get('reason')})")
        if im["status"] != "ok":
            continue
        stored = np.asarray(Image.open(png), dtype=np.float64)
        if n == "dx_pa_rescaled":
            stored = stored * 2 - 100
        x = ref.preprocess(stored, pre, voi=voi, monochrome1=mono1)
        logits = model(x[None])[0]
        want = ref.activation(logits, cfg["output_activation"])
        refs[n] = want
        got = np.array([im["scores"][k] for k in LABELS])
        check(sorted(im["scores"].keys()) == sorted(LABELS), f"{n}: a score per label")
        diff = float(np.max(np.abs(got - want)))
        check(diff < TOL, f"{n}: scores {got} vs reference {want} (max diff {diff:.2e})")
        check(im["top_label"] == LABELS[int(np.argmax(want))], f"{n}: top label")
        check(im["sop_instance_uid"] == dicom_uid(dcm, "0008,0018"), f"{n}: SOP Instance UID")
        check(im["study_instance_uid"] == dicom_uid(dcm, "0020,000D"), f"{n}: Study UID")
        check(im["model"] == DEMO and im["model_version"] == 1, f"{n}: model/version per image")
        t = im["timings_ms"]
        check(all(t[k] >= 0 for k in ("decode", "preprocess", "inference")), f"{n}: timings")
        check(im["window"]["source"] == ("file" if voi else "fixed"), f"{n}: window source")
        check(im["window"]["inverted"] == mono1, f"{n}: MONOCHROME1 inversion flag")
        batch_sizes.append(im["batch"]["size"])
        predicted = {LABELS[j] for j in range(1, len(LABELS)) if got[j] > 0.5}
        print(f"  {n}: max diff {diff:.1e}; predicted {sorted(predicted) or ['no_finding']}, "
              f"truth {sorted(findings) or ['no_finding']}")
    check(sorted(batch_sizes) == [2, 2, 4, 4, 4, 4], f"batches of 4 and 2 (got {batch_sizes})")

    studies = {s["study_instance_uid"]: s for s in res["studies"]}
    for uid, members in ((S1, ["dx_pa_cardio", "cr_ap_nodule"]),
                         (S2, ["dx_pa_normal", "dx_pa_effusion"])):
        s = studies.get(uid)
        if not check(s is not None, f"study {uid} summarized"):
            continue
        check(s["inferred"] == 2 and s["images"] == 2, f"study {uid}: counts")
        mx = np.max([refs[m] for m in members], axis=0)
        got = np.array([s["max_scores"][k] for k in LABELS])
        check(np.max(np.abs(got - mx)) < TOL, f"study {uid}: max scores")

    # The ONNX file agrees with the weights it was exported from (model.pt).
    pt = os.path.join(DEMO_DIR, "1", "model.pt")
    if os.path.exists(pt):
        import torch
        from train_demo_model import build_model
        net = build_model()
        net.load_state_dict(torch.load(pt))
        net.eval()
        x = ref.preprocess(np.asarray(Image.open(files["dx_pa_cardio"][1]), dtype=np.float64), pre)
        with torch.no_grad():
            a = net(torch.from_numpy(x[None])).numpy()
        b = model(x[None])
        check(np.max(np.abs(a - b)) < 1e-4, "model.onnx matches model.pt")

    # --- bilinear resize, fixed window, 3 channels: a derived model, torch interpolate as
    # the reference for the resize ----------------------------------------------------------
    repo = os.path.join(tmp, "repo")
    os.makedirs(os.path.join(repo, "demo-bilinear", "1"))
    shutil.copy(os.path.join(DEMO_DIR, "1", "model.onnx"), os.path.join(repo, "demo-bilinear", "1"))
    bcfg = json.loads(json.dumps(cfg))
    bcfg.pop("name")
    bcfg["preprocessing"]["resize"]["method"] = "bilinear"
    bcfg["preprocessing"]["window"] = {"source": "fixed", "center": 128, "width": 256}
    bcfg["filter"] = {"modalities": ["DX", "CR", "MR"]}
    bcfg["output_activation"] = "softmax"
    with open(os.path.join(repo, "demo-bilinear", "config.json"), "w") as f:
        json.dump(bcfg, f)
    names = ["dx_pa_cardio", "dx_pa_normal", "mr_chest", "cr_ap_nodule"]
    out = os.path.join(tmp, "out-bilinear")
    rc, err, res = gj_run({"model": "demo-bilinear"},
                          [(f"dicom.{i + 1}", files[n][0]) for i, n in enumerate(names)], out,
                          models_dir=repo)
    if check(rc == 0 and res is not None, f"bilinear run (models dir from --models-dir): rc {rc} {err[-1500:]}"):
        check(res["counts"]["inferred"] == 4, "bilinear: 4 inferred (filter without body part "
              "and view lists passes all four)")
        for im, n in zip(res["images"], names):
            stored = np.asarray(Image.open(files[n][1]), dtype=np.float64)
            x = ref.preprocess(stored, bcfg["preprocessing"])     # fixed window: VOI ignored
            want = ref.activation(model(x[None]), "softmax")[0]
            got = np.array([im["scores"][k] for k in LABELS])
            check(np.max(np.abs(got - want)) < TOL, f"bilinear {n}: {got} vs {want}")
            check(abs(sum(got) - 1) < 1e-5, f"bilinear {n}: softmax sums to 1")

    # --- errors ----------------------------------------------------------------------
    one = [("dicom", files["dx_pa_cardio"][0])]
    rc, err, res = gj_run({"model": "no-such-model"}, one,
                          os.path.join(tmp, "e1"), models_dir=MODELS)
    check(rc != 0 and "no-such-model" in err and res is None,
          f"unknown model refused naming it (rc {rc}: {err.strip()[-300:]})")
    rc, err, res = gj_run({"model": "no-such-model"}, one, os.path.join(tmp, "e1b"),
                          models_dir=os.path.join(tmp, "nowhere"))
    check(rc != 0 and "no-such-model" in err, f"unknown model, no repository: {err.strip()[-300:]}")
    rc, err, res = gj_run({"model": "../models"}, one, os.path.join(tmp, "e2"))
    check(rc == 2 and "model" in err, f"unsafe model name refused at validation: {err[-300:]}")
    rc, err, res = gj_run({"model": DEMO, "version": 7}, one,
                          os.path.join(tmp, "e3"), models_dir=MODELS)
    check(rc != 0 and "no version 7" in err, f"missing version: {err.strip()[-300:]}")
    # ./models relative to the working directory is the default
    rc, err, res = gj_run({"model": DEMO}, one, os.path.join(tmp, "e4"), cwd=ROOT)
    check(rc == 0 and res and res["counts"]["inferred"] == 1, f"default ./models: {err[-300:]}")

    bad = {
        "nolabels": (lambda c: c.pop("labels"), "labels is missing"),
        "shape": (lambda c: (c["input"].update(dims=[1, 224, 224]),
                             c["preprocessing"].update(resize={"method": "area"})),
                  "input.dims is [1, 224, 224] but the model's input 'image' is [N, 1, 256, 256]"),
        "shape-resize": (lambda c: c["input"].update(dims=[1, 224, 224]),
                         "preprocessing.resize.height is 256 but the input height"),
        "inname": (lambda c: c["input"].update(name="pixels"), "input.name"),
        "outdims": (lambda c: (c["output"].update(dims=[5]), c.update(labels=LABELS + ["x"])),
                    "output"),
        "nlabels": (lambda c: c.update(labels=LABELS[:3]), "labels has 3 names"),
        "typo": (lambda c: c.update(max_batchsize=4), "unknown key 'max_batchsize'"),
        "window": (lambda c: c["preprocessing"].update(window={"source": "fixed"}), "center"),
        "resize": (lambda c: c["preprocessing"]["resize"].update(method="cubic"),
                   "preprocessing.resize.method"),
    }
    for name, (edit, want) in bad.items():
        mdir = os.path.join(repo, "bad-" + name)
        os.makedirs(os.path.join(mdir, "1"))
        os.symlink(os.path.join(DEMO_DIR, "1", "model.onnx"), os.path.join(mdir, "1", "model.onnx"))
        c = json.loads(json.dumps(cfg))
        c.pop("name")
        edit(c)
        with open(os.path.join(mdir, "config.json"), "w") as f:
            json.dump(c, f)
        rc, err, res = gj_run({"model": "bad-" + name}, one,
                              os.path.join(tmp, "bad-" + name), models_dir=repo)
        check(rc != 0 and want in err and res is None,
              f"config '{name}' refused with '{want}' (rc {rc}: {err.strip()[-400:]})")
        print(f"  config {name}: {err.strip().splitlines()[-1] if err.strip() else ''}")
    os.makedirs(os.path.join(repo, "bad-json", "1"))
    os.symlink(os.path.join(DEMO_DIR, "1", "model.onnx"), os.path.join(repo, "bad-json", "1", "model.onnx"))
    with open(os.path.join(repo, "bad-json", "config.json"), "w") as f:
        f.write('{"labels": [')
    rc, err, res = gj_run({"model": "bad-json"}, one, os.path.join(tmp, "bj"), models_dir=repo)
    check(rc != 0 and "not valid JSON" in err, f"bad JSON refused: {err.strip()[-300:]}")
    os.makedirs(os.path.join(repo, "bad-onnx", "1"))
    with open(os.path.join(repo, "bad-onnx", "1", "model.onnx"), "wb") as f:
        f.write(b"\x08\x07\x12\x04junk" * 10)
    shutil.copy(os.path.join(DEMO_DIR, "config.json"), os.path.join(repo, "bad-onnx", "config.json"))
    with open(os.path.join(repo, "bad-onnx", "config.json")) as f:
        c = json.load(f)
    c["name"] = "bad-onnx"
    with open(os.path.join(repo, "bad-onnx", "config.json"), "w") as f:
        json.dump(c, f)
    rc, err, res = gj_run({"model": "bad-onnx"}, one, os.path.join(tmp, "bo"), models_dir=repo)
    check(rc != 0 and "model.onnx" in err, f"bad model.onnx refused: {err.strip()[-300:]}")
    triton_forms(tmp, repo, one, cfg)


def triton_forms(tmp, repo, one, cfg):
    """The demo model under Triton's JSON config with a label file (an image model: the same
    scores as under config.json), and with no config at all (auto-complete finds no labels: not
    an image model, so infer jobs refuse it saying why)."""
    rc, err, want = gj_run({"model": DEMO}, one, os.path.join(tmp, "t0"), models_dir=MODELS)
    check(rc == 0 and want, f"demo model for the Triton comparison: {err[-300:]}")
    tdir = os.path.join(repo, "triton-json")
    os.makedirs(os.path.join(tdir, "1"))
    os.symlink(os.path.join(DEMO_DIR, "1", "model.onnx"), os.path.join(tdir, "1", "model.onnx"))
    tcfg = {"name": "triton-json", "platform": "onnxruntime_onnx", "backend": "onnxruntime",
            "max_batch_size": 8,
            "input": [{"name": "image", "data_type": "TYPE_FP32", "format": "FORMAT_NCHW",
                       "dims": ["1", "256", "256"]}],
            "output": [{"name": "logits", "data_type": "TYPE_FP32", "dims": ["4"],
                        "label_filename": "labels.txt"}],
            "dynamic_batching": {"max_queue_delay_microseconds": "2000", "preferred_batch_size": [4, 8]},
            "instance_group": [{"name": "triton-json_0", "kind": "KIND_CPU", "count": 1, "gpus": []}],
            "output_activation": cfg["output_activation"], "preprocessing": cfg["preprocessing"],
            "filter": cfg["filter"]}
    with open(os.path.join(tdir, "config.json"), "w") as f:
        json.dump(tcfg, f)
    with open(os.path.join(tdir, "labels.txt"), "w") as f:
        f.write("\n".join(LABELS) + "\n")
    rc, err, res = gj_run({"model": "triton-json"}, one, os.path.join(tmp, "t1"), models_dir=repo)
    check(rc == 0 and res and res["counts"]["inferred"] == 1, f"Triton JSON config: {err.strip()[-300:]}")
    if res and want:
        a, b = res["images"][0]["scores"], want["images"][0]["scores"]
        check(sorted(a) == sorted(LABELS) and all(abs(a[k] - b[k]) <= 1e-6 for k in LABELS),
              f"Triton JSON config gives config.json's scores: {a} vs {b}")
    adir = os.path.join(repo, "triton-auto")
    os.makedirs(os.path.join(adir, "1"))
    os.symlink(os.path.join(DEMO_DIR, "1", "model.onnx"), os.path.join(adir, "1", "model.onnx"))
    rc, err, res = gj_run({"model": "triton-auto"}, one, os.path.join(tmp, "t2"), models_dir=repo)
    check(rc != 0 and res is None and "not an image model" in err and "has no labels" in err,
          f"no config: auto-completed, refused for infer jobs saying why: {err.strip()[-300:]}")


if __name__ == "__main__":
    sys.exit(main())
