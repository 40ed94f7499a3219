#!/usr/bin/python3
"""Trains the demo model of the `infer` kind: models/chest-xray-demo/1/model.onnx.

A DEMO, NOT A DIAGNOSTIC MODEL. It is trained on synthetic, radiograph-like images made
up by the generator below (a body silhouette, two dark lung fields, a spine band, a heart
shadow, faint ribs), with or without synthetic "findings":

  nodule        a small bright blob inside a lung field
  effusion      an opacity rising from a lung base with a meniscus-like upper edge
  cardiomegaly  a heart shadow much wider than normal

and the label "no_finding" when none of them is present. It knows nothing of real
radiographs. The images exist only to exercise the service end to end (DICOM decode,
windowing, resize, batching, ONNX inference, result format) with a model whose answers
are checkable.

Run with Debian's interpreter (python3-torch, python3-numpy):

    /usr/bin/python3 tools/train_demo_model.py [--out models/chest-xray-demo/1] [--quick]

Everything is seeded: the same run gives the same images. It writes model.onnx (opset 17:
Conv, Relu, MaxPool, GlobalAveragePool, Flatten, Gemm; batch norm folded into the
convolutions at export), model.pt (the state dict, for reference checks), config.json one
level up (the model's repository config) and prints the held-out accuracy.

The generator is importable without torch (tests/infer/ uses it to make PNG inputs):
    from train_demo_model import make_image, LABELS
"""
import argparse
import json
import os
import sys
import time

import numpy as np

LABELS = ["no_finding", "nodule", "effusion", "cardiomegaly"]
SIZE = 256
MEAN = 0.5
STD = 0.25
SEED = 4004


def make_image(rng, findings, height=SIZE, width=SIZE):
    """One synthetic chest-like image, float32 in [0, 1], shape (height, width).

    findings: a set of names among LABELS[1:]. Bright is dense (MONOCHROME2 display)."""
    yy, xx = np.meshgrid(np.linspace(-1.0, 1.0, height, dtype=np.float64),
                         np.linspace(-1.0, 1.0, width, dtype=np.float64), indexing="ij")
    s = rng.uniform(0.9, 1.05)
    cx, cy = rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05)
    x = (xx - cx) / s
    y = (yy - cy) / s

    def ellipse(ex, ey, rx, ry, soft=0.04):
        d = np.sqrt(((x - ex) / rx) ** 2 + ((y - ey) / ry) ** 2)
        return np.clip((1.0 - d) / soft, 0.0, 1.0)

    img = np.full_like(x, rng.uniform(0.02, 0.1))
    body = ellipse(0.0, 0.1, 0.85, 0.97)
    img = img * (1 - body) + body * rng.uniform(0.5, 0.6)

    # Lung fields: dark, with faint rib bands.
    lung_l = ellipse(-0.38, -0.05, 0.27, 0.55)
    lung_r = ellipse(0.38, -0.05, 0.27, 0.55)
    lungs = np.maximum(lung_l, lung_r)
    ribs = (np.sin(2 * np.pi * (y * 4.5 + 0.35 * x * x)) > 0.75).astype(np.float64)
    img = img - lungs * (rng.uniform(0.3, 0.36) - 0.05 * ribs)

    # Spine / mediastinum band.
    band = np.clip((0.1 - np.abs(x)) / 0.03, 0, 1) * body
    img = img + 0.12 * band

    # Heart shadow, wider with cardiomegaly.
    rw = rng.uniform(0.38, 0.46) if "cardiomegaly" in findings else rng.uniform(0.2, 0.26)
    heart = ellipse(0.08, 0.33, rw, 0.24, soft=0.08)
    hv = rng.uniform(0.55, 0.65)
    img = img * (1 - heart) + hv * heart

    if "nodule" in findings:
        side = rng.choice([-1.0, 1.0])
        for _ in range(100):
            nx = side * 0.38 + rng.uniform(-0.18, 0.18)
            ny = -0.05 + rng.uniform(-0.4, 0.25)
            if ((nx - side * 0.38) / 0.22) ** 2 + ((ny + 0.05) / 0.48) ** 2 < 1:
                break
        sig = rng.uniform(0.025, 0.045)
        img = img + rng.uniform(0.25, 0.4) * np.exp(-((x - nx) ** 2 + (y - ny) ** 2) / (2 * sig * sig))

    if "effusion" in findings:
        sides = [rng.choice([-1.0, 1.0])] if rng.uniform() < 0.7 else [-1.0, 1.0]
        for sd in sides:
            lung = lung_l if sd < 0 else lung_r
            h = rng.uniform(0.2, 0.4)
            level = -0.05 + 0.55 - h - 0.25 * np.abs(x - sd * 0.38) / 0.27
            ramp = np.clip((y - level) / 0.1, 0, 1)
            img = img + rng.uniform(0.25, 0.33) * ramp * lung

    img = img + rng.normal(0.0, 0.02, size=img.shape)
    return np.clip(img, 0.0, 1.0).astype(np.float32)


def random_findings(rng):
    return {name for name in LABELS[1:] if rng.uniform() < 0.3}


def targets(findings):
    t = np.array([1.0 if name in findings else 0.0 for name in LABELS], dtype=np.float32)
    t[0] = 0.0 if findings else 1.0
    return t


def make_set(rng, n):
    xs = np.empty((n, 1, SIZE, SIZE), dtype=np.float32)
    ys = np.empty((n, len(LABELS)), dtype=np.float32)
    for i in range(n):
        f = random_findings(rng)
        xs[i, 0] = (make_image(rng, f) - MEAN) / STD
        ys[i] = targets(f)
    return xs, ys


def build_model():
    import torch.nn as nn

    def block(cin, cout, stride=1, k=3, pad=1):
        return [nn.Conv2d(cin, cout, k, stride=stride, padding=pad, bias=False),
                nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]

    layers = (block(1, 16, 4, k=4, pad=0) +              # 256 -> 64 (4x4 patches)
              block(16, 32, 2) +                         # -> 32
              [nn.MaxPool2d(2)] + block(32, 64) +        # -> 16
              [nn.MaxPool2d(2)] + block(64, 96) +        # -> 8
              block(96, 128) +
              [nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(128, len(LABELS))])
    return nn.Sequential(*layers)


def config_json():
    return {
        "name": "chest-xray-demo",
        "description": "DEMO trained on synthetic images; NOT a diagnostic model",
        "platform": "onnx",
        "input": {"name": "image", "dims": [1, SIZE, SIZE], "datatype": "FP32"},
        "output": {"name": "logits", "dims": [len(LABELS)], "datatype": "FP32"},
        "labels": LABELS,
        "output_activation": "sigmoid",
        "max_batch_size": 8,
        "dynamic_batching": {"max_queue_delay_us": 2000, "preferred_batch_sizes": [4, 8]},
        "instances_per_device": 1,
        "default_version": "latest",
        "preprocessing": {
            "window": {"source": "file", "center": 128, "width": 256},
            "invert_monochrome1": True,
            "resize": {"method": "area", "height": SIZE, "width": SIZE},
            "mean": [MEAN],
            "std": [STD],
            "channels": 1,
        },
        "filter": {
            "modalities": ["CR", "DX"],
            "body_parts": ["CHEST"],
            "view_positions": ["PA", "AP"],
            "allow_missing": False,
        },
    }


def write_config(version_dir):
    with open(os.path.join(version_dir, "..", "config.json"), "w") as f:
        json.dump(config_json(), f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "..", "models", "chest-xray-demo", "1"))
    ap.add_argument("--train", type=int, default=3000)
    ap.add_argument("--val", type=int, default=800)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="tiny run to check the script")
    ap.add_argument("--config-only", action="store_true",
                    help="only (re)write config.json next to the version directory")
    args = ap.parse_args()
    if args.config_only:
        write_config(args.out)
        return 0
    if args.quick:
        args.train, args.val, args.epochs = 256, 128, 1

    import torch
    import torch.nn as nn

    torch.manual_seed(SEED)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(SEED)
    t0 = time.time()
    xtr, ytr = make_set(rng, args.train)
    xva, yva = make_set(rng, args.val)
    print(f"generated {args.train}+{args.val} images in {time.time() - t0:.1f} s", flush=True)

    model = build_model()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters", flush=True)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    steps = args.epochs * ((args.train + 63) // 64)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps)
    lossf = nn.BCEWithLogitsLoss()
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    gen = torch.Generator().manual_seed(SEED)
    for ep in range(args.epochs):
        model.train()
        perm = torch.randperm(args.train, generator=gen)
        tot = 0.0
        for i in range(0, args.train, 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = lossf(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            sched.step()
            tot += loss.item() * len(idx)
        acc, exact, _ = evaluate(model, xva, yva)
        print(f"epoch {ep + 1}: loss {tot / args.train:.4f}  held-out per-label accuracy "
              f"{acc:.4f}  exact-match {exact:.4f}  ({time.time() - t0:.0f} s)", flush=True)

    acc, exact, per_label = evaluate(model, xva, yva)
    os.makedirs(args.out, exist_ok=True)
    model.eval()
    torch.save(model.state_dict(), os.path.join(args.out, "model.pt"))
    trace_input = torch.zeros(1, 1, SIZE, SIZE)   # export traces the graph with one sample
    onnx_path = os.path.join(args.out, "model.onnx")
    torch.onnx.export(model, trace_input, onnx_path, opset_version=17, input_names=["image"],
                      output_names=["logits"], do_constant_folding=True,
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    write_config(args.out)
    metrics = {"seed": SEED, "train_images": args.train, "heldout_images": args.val,
               "epochs": args.epochs, "parameters": n_params,
               "heldout_per_label_accuracy": round(acc, 4),
               "heldout_exact_match": round(exact, 4),
               "heldout_accuracy_by_label": {k: round(v, 4) for k, v in per_label.items()},
               "onnx_bytes": os.path.getsize(onnx_path),
               "train_seconds": round(time.time() - t0, 1)}
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(metrics, f, indent=2)
        f.write("\n")
    print(json.dumps(metrics, indent=2))
    return 0


def predict(model, xs):
    import torch
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(xs), 128):
            out.append(torch.sigmoid(model(torch.from_numpy(xs[i:i + 128]))).numpy())
    return np.concatenate(out)


def evaluate(model, xs, ys):
    """Per-label accuracy, exact-match rate and {label: accuracy}, from one prediction pass."""
    right = (predict(model, xs) > 0.5) == (ys > 0.5)
    return (float(right.mean()), float(right.all(axis=1).mean()),
            {name: float(right[:, j].mean()) for j, name in enumerate(LABELS)})


if __name__ == "__main__":
    sys.exit(main())
