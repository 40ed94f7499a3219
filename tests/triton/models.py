"""Test models for the triton suite, written into a model repository as a Triton user would:
DIR/<name>/1/model.onnx and DIR/<name>/config.json in Triton's JSON ModelConfig form.

Exported with PyTorch (Debian's python3-torch, torch.onnx.export) where PyTorch can write the
model; the string (BYTES) model and the one-input-per-datatype model are built with
onnx.helper, since PyTorch has no string tensors and no Identity export for every type.
Each PyTorch model's module is kept, so tests compare the server's outputs with the same
module run by torch."""
import json
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

OPSET = 13


class MultiIO(torch.nn.Module):
    """Two FP32 inputs, three outputs of two types: the sum, the product, the argmax of a."""

    def forward(self, a, b):
        return a + b, a * b, torch.argmax(a, dim=1)


class IntHalf(torch.nn.Module):
    """INT64 and FP16: i * 3 - 1 and h * 2 + 0.5 (the FP16 arithmetic done in float32, as
    ONNX Runtime does for FP16 on the CPU, then rounded)."""

    def forward(self, i, h):
        return i * 3 - 1, (h.float() * 2 + 0.5).half()


class Bools(torch.nn.Module):
    """BOOL in and out: and, or, not."""

    def forward(self, x, y):
        return x & y, x | y, ~x


class NoBatch(torch.nn.Module):
    """No batch dimension (max_batch_size 0): a [2, 3] matrix's row sums and its half."""

    def forward(self, m):
        return m.sum(dim=1), m * 0.5


def _tensor(name, dtype, dims, reshape=None):
    t = {"name": name, "data_type": "TYPE_" + dtype, "dims": list(dims)}
    if reshape is not None:          # Triton's idiom for a model tensor of the batch only
        t["reshape"] = {"shape": list(reshape)}
    return t


# name -> (module, example inputs, inputs, outputs, max_batch_size); inputs and outputs as
# (name, Triton datatype, dims without the batch dimension)
TORCH_MODELS = {
    "multi_io": (MultiIO(), (torch.zeros(2, 4), torch.zeros(2, 4)),
                 [("a", "FP32", [4]), ("b", "FP32", [4])],
                 [("sum", "FP32", [4]), ("prod", "FP32", [4]), ("argmax_a", "INT64", [1], [])], 8),
    "int_half": (IntHalf(), (torch.zeros(2, 3, dtype=torch.int64), torch.zeros(2, 3, dtype=torch.float16)),
                 [("i", "INT64", [3]), ("h", "FP16", [3])],
                 [("i_out", "INT64", [3]), ("h_out", "FP16", [3])], 8),
    "bools": (Bools(), (torch.zeros(2, 4, dtype=torch.bool), torch.zeros(2, 4, dtype=torch.bool)),
              [("x", "BOOL", [4]), ("y", "BOOL", [4])],
              [("x_and_y", "BOOL", [4]), ("x_or_y", "BOOL", [4]), ("not_x", "BOOL", [4])], 8),
    "no_batch": (NoBatch(), (torch.zeros(2, 3),),
                 [("m", "FP32", [2, 3])], [("row_sums", "FP32", [2]), ("half", "FP32", [2, 3])], 0),
}

# Every Triton datatype the runtime feeds, ONNX's number for it, numpy's type for tests.
DATATYPES = {
    "BOOL": (TensorProto.BOOL, np.bool_), "UINT8": (TensorProto.UINT8, np.uint8),
    "UINT16": (TensorProto.UINT16, np.uint16), "UINT32": (TensorProto.UINT32, np.uint32),
    "UINT64": (TensorProto.UINT64, np.uint64), "INT8": (TensorProto.INT8, np.int8),
    "INT16": (TensorProto.INT16, np.int16), "INT32": (TensorProto.INT32, np.int32),
    "INT64": (TensorProto.INT64, np.int64), "FP16": (TensorProto.FLOAT16, np.float16),
    "BF16": (TensorProto.BFLOAT16, np.float32), "FP32": (TensorProto.FLOAT, np.float32),
    "FP64": (TensorProto.DOUBLE, np.float64), "BYTES": (TensorProto.STRING, np.object_),
}


def _write(models_dir, name, onnx_bytes, inputs, outputs, max_batch_size, labels=None):
    d = os.path.join(models_dir, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    with open(os.path.join(d, "1", "model.onnx"), "wb") as f:
        f.write(onnx_bytes)
    outs = [_tensor(*o) for o in outputs]
    if labels:
        for o in outs:
            if o["name"] in labels:
                o["label_filename"] = f"{o['name']}_labels.txt"
                with open(os.path.join(d, o["label_filename"]), "w") as f:
                    f.write("\n".join(labels[o["name"]]) + "\n")
    cfg = {"name": name, "platform": "onnxruntime_onnx", "max_batch_size": max_batch_size,
           "input": [_tensor(*i) for i in inputs], "output": outs}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def _export_torch(module, example, inputs, outputs, batched):
    import io
    names_in = [i[0] for i in inputs]
    names_out = [o[0] for o in outputs]
    axes = {n: {0: "batch"} for n in names_in + names_out} if batched else None
    f = io.BytesIO()
    torch.onnx.export(module, example, f, input_names=names_in, output_names=names_out,
                      dynamic_axes=axes, opset_version=OPSET)
    return f.getvalue()


def strings_model():
    """BYTES in and out: the input as it is (Identity) and its two columns swapped (Gather on
    axis 1), batched."""
    x = helper.make_tensor_value_info("text", TensorProto.STRING, ["batch", 2])
    echo = helper.make_tensor_value_info("echo", TensorProto.STRING, ["batch", 2])
    swapped = helper.make_tensor_value_info("swapped", TensorProto.STRING, ["batch", 2])
    idx = helper.make_tensor("idx", TensorProto.INT64, [2], [1, 0])
    g = helper.make_graph([helper.make_node("Identity", ["text"], ["echo"]),
                           helper.make_node("Gather", ["text", "idx"], ["swapped"], axis=1)],
                          "strings", [x], [echo, swapped], initializer=[idx])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(m)
    return m.SerializeToString()


def all_types_model():
    """One input per datatype, `in_<TYPE>` [batch, 3], each passed to `out_<TYPE>` (Identity)."""
    ins, outs, nodes = [], [], []
    for dt, (onnx_type, _) in DATATYPES.items():
        ins.append(helper.make_tensor_value_info(f"in_{dt}", onnx_type, ["batch", 3]))
        outs.append(helper.make_tensor_value_info(f"out_{dt}", onnx_type, ["batch", 3]))
        nodes.append(helper.make_node("Identity", [f"in_{dt}"], [f"out_{dt}"]))
    m = helper.make_model(helper.make_graph(nodes, "all_types", ins, outs),
                          opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(m)
    return m.SerializeToString()


CLASS_LABELS = ["cat", "dog", "bird", "fish", "horse"]


class Scores(torch.nn.Module):
    """Classification: 5 scores from 5 inputs (x * w), with a label file."""

    def forward(self, x):
        return x * self.w

    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.tensor([1.0, -2.0, 3.0, 0.5, 1.5]))


TORCH_MODELS["scores"] = (Scores(), (torch.zeros(2, 5),), [("x", "FP32", [5])],
                          [("scores", "FP32", [5])], 8)
# the same model with Triton's label_filename on its output
LABELED = {"scores_labeled": ("scores", {"scores": CLASS_LABELS})}


def write_models(models_dir):
    """Writes every test model into models_dir; returns their names."""
    for name, (module, example, inputs, outputs, mbs) in TORCH_MODELS.items():
        module.eval()
        onnx_bytes = _export_torch(module, example, inputs, outputs, mbs > 0)
        _write(models_dir, name, onnx_bytes, inputs, outputs, mbs)
        for labeled, (base, labels) in LABELED.items():
            if base == name:
                _write(models_dir, labeled, onnx_bytes, inputs, outputs, mbs, labels)
    _write(models_dir, "strings", strings_model(), [("text", "BYTES", [2])],
           [("echo", "BYTES", [2]), ("swapped", "BYTES", [2])], 8)
    _write(models_dir, "all_types", all_types_model(), [(f"in_{dt}", dt, [3]) for dt in DATATYPES],
           [(f"out_{dt}", dt, [3]) for dt in DATATYPES], 8)
    return list(TORCH_MODELS) + list(LABELED) + ["strings", "all_types"]


def torch_reference(name, *arrays):
    """The named PyTorch model run by torch on numpy inputs: its outputs as numpy arrays."""
    module = TORCH_MODELS[name][0]
    with torch.no_grad():
        outs = module(*[torch.from_numpy(np.ascontiguousarray(a)) for a in arrays])
    return [o.numpy() for o in (outs if isinstance(outs, tuple) else (outs,))]
