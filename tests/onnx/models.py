#!/usr/bin/python3
"""Exports the test models with torch.onnx.export (fixed seeds), runs PyTorch for the
reference output and writes MODEL.onnx, MODEL.in.f32 and MODEL.out.f32 into OUTDIR.

    models.py OUTDIR NAME [--size S] [--batch B] [--opset N] [--reuse]
      NAME: resnet18 | densenet121 | densenet169 | vit | chest-xray

chest-xray is the shipped demo model (models/chest-xray-demo/1/model.onnx, copied as is) with
its PyTorch weights (model.pt in the network of tools/train_demo_model.py) as the reference.
A batch other than 2 is part of the file names (MODEL_b4...); --reuse keeps files already there.

Run with /usr/bin/python3 (Debian's torch 1.13)."""
import argparse
import inspect
import os
import shutil
import sys
import warnings

import numpy as np
import torch
import torchvision

warnings.filterwarnings("ignore")


class ViT(torch.nn.Module):
    """A small vision transformer: patch embedding, class token, learned positions,
    pre-norm nn.TransformerEncoder (multi-head softmax attention, GELU MLP), LayerNorm, head."""

    def __init__(self, img=32, patch=8, dim=64, depth=2, heads=4, ncls=10):
        super().__init__()
        self.patch = torch.nn.Conv2d(3, dim, patch, patch)
        n = (img // patch) ** 2
        self.cls = torch.nn.Parameter(torch.randn(1, 1, dim))
        self.pos = torch.nn.Parameter(torch.randn(1, n + 1, dim) * 0.1)
        layer = torch.nn.TransformerEncoderLayer(dim, heads, dim * 2, dropout=0.0, activation="gelu",
                                                 batch_first=True, norm_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, depth)
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, ncls)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        x = self.enc(x)
        return self.head(self.norm(x[:, 0]))



def export_legacy(model, args, path, **kw):
    """torch.onnx.export with the TorchScript exporter: PyTorch 2.9+ defaults to the dynamo
    exporter (which handles dynamic_axes and the models' ops differently), so pass dynamo=False
    where the parameter exists, as bench/infer_gpu_bench.py does. Says on stderr which exporter
    made the model."""
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kw["dynamo"] = False
    torch.onnx.export(model, args, path, **kw)
    which = "dynamo=False" if "dynamo" in kw else "TorchScript (torch %s)" % torch.__version__
    print("%s: exported by torch.onnx.export %s" % (os.path.basename(path), which), file=sys.stderr)

def randomize_bn(model, gen):
    """torchvision initializes BatchNorm to identity: give it random statistics so the
    test exercises the arithmetic (and the BN folding the exporter does)."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.uniform_(-0.2, 0.2, generator=gen)
                m.running_mean.uniform_(-0.2, 0.2, generator=gen)
                m.running_var.uniform_(0.5, 1.5, generator=gen)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def chest_xray():
    """The demo model's network with its trained weights (BatchNorm not folded: PyTorch's own
    arithmetic is the reference for the folded ONNX file)."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from train_demo_model import build_model
    m = build_model()
    m.load_state_dict(torch.load(os.path.join(ROOT, "models", "chest-xray-demo", "1", "model.pt")))
    return m.eval()


def build(name, size):
    torch.manual_seed(1234)
    gen = torch.Generator().manual_seed(99)
    if name == "resnet18":
        m = torchvision.models.resnet18()
    elif name == "densenet121":
        m = torchvision.models.densenet121()
    elif name == "densenet169":
        m = torchvision.models.densenet169()
    elif name == "vit":
        m = ViT(img=size)
    else:
        raise SystemExit("unknown model " + name)
    randomize_bn(m, gen)
    return m.eval()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("name")
    ap.add_argument("--size", type=int, default=0)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--reuse", action="store_true")
    a = ap.parse_args()
    size = a.size or {"vit": 32, "chest-xray": 256}.get(a.name, 64)
    base = os.path.join(a.outdir, a.name + ("" if a.size == 0 else "_%d" % size) +
                        ("" if a.opset == 17 else "_opset%d" % a.opset) +
                        ("" if a.batch == 2 else "_b%d" % a.batch))
    files = [base + ext for ext in (".onnx", ".in.f32", ".out.f32")]
    if a.reuse and all(os.path.exists(f) and os.path.getmtime(f) >= os.path.getmtime(__file__) for f in files):
        print(base + ".onnx")
        return 0
    torch.set_num_threads(2)
    os.makedirs(a.outdir, exist_ok=True)
    if a.name == "chest-xray":
        m = chest_xray()
        x = torch.randn(a.batch, 1, size, size, generator=torch.Generator().manual_seed(7))
        shutil.copyfile(os.path.join(ROOT, "models", "chest-xray-demo", "1", "model.onnx"), base + ".onnx")
    else:
        m = build(a.name, size)
        x = torch.randn(a.batch, 3, size, size, generator=torch.Generator().manual_seed(7))
        # Not under no_grad(): there nn.TransformerEncoder takes a fused fast path that the
        # exporter cannot export; the reference runs the same (slow-path) arithmetic.
        export_legacy(m, x, base + ".onnx", opset_version=a.opset, input_names=["input"],
                      output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    if not a.no_reference:
        y = m(x).detach()
        x.numpy().astype(np.float32).tofile(base + ".in.f32")
        y.numpy().astype(np.float32).tofile(base + ".out.f32")
    print(base + ".onnx")


if __name__ == "__main__":
    sys.exit(main())
