"""The test models are exported by the TorchScript exporter on every PyTorch: where
torch.onnx.export has a `dynamo` parameter (PyTorch 2.x; dynamo is the default from 2.9),
models.export_legacy passes dynamo=False and says so; where it has none, it passes nothing."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

calls = []


def export_with_dynamo(model, args, path, opset_version=17, dynamo=True, **kw):
    calls.append(("with", dynamo))


def export_without_dynamo(model, args, path, opset_version=17, **kw):
    calls.append(("without", "dynamo" in kw))


real = torch.onnx.export
try:
    torch.onnx.export = export_with_dynamo
    models.export_legacy(None, None, "/nonexistent/a.onnx", opset_version=17)
    torch.onnx.export = export_without_dynamo
    models.export_legacy(None, None, "/nonexistent/b.onnx", opset_version=17)
finally:
    torch.onnx.export = real
assert calls == [("with", False), ("without", False)], calls
print("export_legacy: dynamo=False where the parameter exists, nothing where it does not")
