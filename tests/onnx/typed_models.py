#!/usr/bin/python3
"""Exports small models with several inputs and outputs of every element type PyTorch has
(torch.onnx.export, fixed seeds), runs PyTorch for the reference outputs and writes into OUTDIR:
NAME.onnx, one raw little-endian file per input and expected output (NAME.TENSOR.bin), and
NAME.manifest, which onnx_check_io reads:

    model NAME.onnx
    batch 2 | batch none
    in  TENSOR TYPE D0,D1,.. FILE
    out TENSOR TYPE D0,D1,.. FILE TOL      (TOL: relative L2 for float types; 0: exact)

    typed_models.py OUTDIR NAME [--reuse]
      NAME: multi | ints | fp16 | bf16 | double | nobatch

multi    two FP32 images and an INT64 index in; FP32 scores, INT64 argmax, BOOL mask out.
ints     UINT8, INT32, INT8 and INT16 in; FP32 features and UINT8/INT32/INT8/INT16/BOOL
         results of integer arithmetic (wrapping as PyTorch's) out.
fp16     a CNN with FLOAT16 weights, input and output. PyTorch 1.13 cannot run (so cannot
         export) half convolutions on the CPU: the FP32 export is converted to FLOAT16
         throughout, as onnxconverter-common's float16 converter does (not in Debian), and the
         reference is PyTorch in FP32 on the same FP16-rounded weights and input.
bf16     the same CNN in BFLOAT16, exported as is; the reference is PyTorch's BF16 run.
double   an MLP in DOUBLE (Gemm, Tanh, Softmax, Sigmoid, ReduceSum).
nobatch  no batch dimension: a FP32 [3, 8] matrix and an INT64 scalar in.

Run with /usr/bin/python3 (Debian's torch 1.13, onnx)."""
import argparse
import os
import sys
import warnings

import numpy as np
import onnx
import torch
from onnx import TensorProto, numpy_helper

from models import export_legacy, randomize_bn

warnings.filterwarnings("ignore")

FP16_TOL, BF16_TOL, FP32_TOL, FP64_TOL = "1e-2", "2e-2", "1e-4", "1e-10"


class Multi(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ca = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.cb = torch.nn.Conv2d(1, 8, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(16, 10)
        self.emb = torch.nn.Embedding(5, 10)

    def forward(self, a, b, idx):
        fa = torch.relu(self.ca(a)).mean((2, 3))
        fb = torch.relu(self.cb(b)).amax((2, 3))
        scores = self.fc(torch.cat([fa, fb], 1)) + self.emb(idx)
        return scores, scores.argmax(1), scores > 0


class Ints(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 4)
        self.fc = torch.nn.Linear(3 * 4 * 4 + 4 * 4 + 4, 3)

    def forward(self, img, ids, q, t):
        x = img.float() / 255.0
        e = self.emb(ids.long()).flatten(1)
        f = torch.cat([x.flatten(1), e, q.float() * 0.05], 1)
        # integer arithmetic in the inputs' own types (PyTorch wraps, as ONNX does)
        return self.fc(f), img + 7, ids * 3 - 1, -q, torch.div(t, 3, rounding_mode="trunc"), (ids % 7) == 2


class Cnn(torch.nn.Module):
    """Conv, BatchNormalization, ReLU, a residual Add, MaxPool, ReduceMean, Gemm, LayerNorm,
    Softmax: the float kernels that FLOAT16 and BFLOAT16 run through."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 6)
        self.ln = torch.nn.LayerNorm(6)

    def forward(self, x):
        h = torch.relu(self.bn(self.c1(x)))
        h = h + torch.relu(self.c2(h))
        h = torch.nn.functional.max_pool2d(h, 2).mean((2, 3))
        return torch.softmax(self.ln(self.fc(h)), -1)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(6, 16)
        self.l2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.tanh(self.l1(x))
        return torch.softmax(self.l2(h), -1), torch.sigmoid(h).sum(1)


class NoBatch(torch.nn.Module):
    def forward(self, m, k):
        return (m * k).sum(0), m.amax(0) > 0.5


# ---- FLOAT16 conversion of an exported FP32 graph -------------------------------------------------

def _half_tensor(t):
    return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name)


def to_float16(model):
    """Every FLOAT initializer, constant, Cast target and value type becomes FLOAT16."""
    g = model.graph
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT:
            g.initializer[i].CopyFrom(_half_tensor(t))
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(_half_tensor(a.t))
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    return model


def half_weights(m):
    """m's FP32 weights rounded to FP16 (the FP32 reference of the FLOAT16 model)."""
    with torch.no_grad():
        for p in list(m.parameters()) + list(m.buffers()):
            if p.dtype == torch.float32:
                p.copy_(p.half().float())
    return m


# ---- files ----------------------------------------------------------------------------------------

ONNX_TYPE = {torch.float32: "FLOAT", torch.float16: "FLOAT16", torch.bfloat16: "BFLOAT16", torch.float64: "DOUBLE",
             torch.uint8: "UINT8", torch.int8: "INT8", torch.int16: "INT16", torch.int32: "INT32",
             torch.int64: "INT64", torch.bool: "BOOL"}


def raw_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


class Writer:
    def __init__(self, outdir, name):
        self.outdir, self.name, self.lines = outdir, name, []

    def tensor(self, kind, tname, t, tol=None, as_type=None):
        fname = "%s.%s.bin" % (self.name, tname)
        with open(os.path.join(self.outdir, fname), "wb") as f:
            f.write(raw_bytes(t))
        dims = ",".join(str(d) for d in t.shape) or "-"
        line = "%s %s %s %s %s" % (kind, tname, as_type or ONNX_TYPE[t.dtype], dims, fname)
        self.lines.append(line + (" " + tol if tol is not None else ""))

    def finish(self, batch):
        with open(os.path.join(self.outdir, self.name + ".manifest"), "w") as f:
            f.write("model %s.onnx\nbatch %s\n" % (self.name, batch))
            f.write("".join(line + "\n" for line in self.lines))


def export(m, args, path, ins, outs, batch_axes=True):
    dyn = {n: {0: "N"} for n in ins + outs} if batch_axes else None
    export_legacy(m, args, path, opset_version=17, input_names=ins, output_names=outs, dynamic_axes=dyn)


def tol_of(t):
    return {torch.float32: FP32_TOL, torch.float16: FP16_TOL, torch.bfloat16: BF16_TOL,
            torch.float64: FP64_TOL}.get(t.dtype, "0")


def write_case(w, m, args, ins, outs, onnx_path, batch="2", batch_axes=True, ref=None, post=None):
    """Exports m, writes its inputs and the reference outputs (ref: another module to run)."""
    export(m, args, onnx_path, ins, outs, batch_axes)
    if post:
        onnx.save(post(onnx.load(onnx_path)), onnx_path)
    with torch.no_grad():
        ys = (ref or m)(*args)
    ys = ys if isinstance(ys, tuple) else (ys,)
    for n, t in zip(ins, args):
        w.tensor("in", n, t)
    for n, y in zip(outs, ys):
        w.tensor("out", n, y, tol_of(y))
    w.finish(batch)


def case_multi(w, path):
    g = torch.Generator().manual_seed(7)
    args = (torch.randn(2, 3, 16, 16, generator=g), torch.randn(2, 1, 16, 16, generator=g), torch.tensor([1, 4]))
    write_case(w, Multi().eval(), args, ["a", "b", "idx"], ["scores", "argmax", "mask"], path)


def case_ints(w, path):
    g = torch.Generator().manual_seed(7)
    args = (torch.randint(0, 256, (2, 3, 4, 4), dtype=torch.uint8, generator=g),
            torch.randint(0, 100, (2, 4), dtype=torch.int32, generator=g),
            torch.tensor([[-128, 127, -3, 5], [0, -1, 100, -100]], dtype=torch.int8),
            torch.tensor([[-1000, 999, -7, 7, 0], [32767, -32768, 5, -5, 2]], dtype=torch.int16))
    write_case(w, Ints().eval(), args, ["img", "ids", "q", "t"], ["y", "img7", "ids3", "negq", "tdiv", "eq"], path)


def case_fp16(w, path):
    m = Cnn().eval()
    randomize_bn(m, torch.Generator().manual_seed(99))
    half_weights(m)
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(7)).half()
    export(m, (x.float(),), path, ["x"], ["y"])
    onnx.save(to_float16(onnx.load(path)), path)
    with torch.no_grad():
        y = m(x.float()).half()
    w.tensor("in", "x", x)
    w.tensor("out", "y", y, FP16_TOL)
    w.finish("2")


def case_bf16(w, path):
    m = Cnn().eval()
    randomize_bn(m, torch.Generator().manual_seed(99))
    m = m.to(torch.bfloat16)
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
    write_case(w, m, (x,), ["x"], ["y"], path)


def case_double(w, path):
    m = Mlp().double().eval()
    x = torch.randn(3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    write_case(w, m, (x,), ["x"], ["probs", "act"], path, batch="3")


def case_nobatch(w, path):
    m = torch.rand(3, 8, generator=torch.Generator().manual_seed(7))
    write_case(w, NoBatch().eval(), (m, torch.tensor(3)), ["m", "k"], ["total", "peak"], path, batch="none",
               batch_axes=False)


CASES = {"multi": case_multi, "ints": case_ints, "fp16": case_fp16, "bf16": case_bf16, "double": case_double,
         "nobatch": case_nobatch}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("name", choices=sorted(CASES))
    ap.add_argument("--reuse", action="store_true")
    a = ap.parse_args()
    manifest = os.path.join(a.outdir, a.name + ".manifest")
    if a.reuse and os.path.exists(manifest) and os.path.getmtime(manifest) >= os.path.getmtime(__file__):
        print(manifest)
        return 0
    torch.manual_seed(1234)
    torch.set_num_threads(2)
    os.makedirs(a.outdir, exist_ok=True)
    CASES[a.name](Writer(a.outdir, a.name), os.path.join(a.outdir, a.name + ".onnx"))
    print(manifest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
